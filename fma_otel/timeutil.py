"""Exact time parsing: RFC3339 with up to nanoseconds, in integer ns since the epoch.

Why not ``datetime.fromisoformat``: it truncates to microseconds (the DPC's
``httpCallStartTime`` has nanoseconds) and, on Python 3.10, rejects ``Z`` and 9-digit
fractions.  Integer nanoseconds keep every instant exact, so a span's duration is the
difference of two integers and the bridge gives the same trace on every run.

Speed: the bridge parses tens of thousands of times and klog headers, nearly all of one
shape (``YYYY-MM-DDTHH:MM:SS[.f...]Z``, ASCII) and from a few hours.  That shape takes a
path of slices with the minute's start cached; anything else takes the general regex path,
which defines the result (the tests check that both agree).  ``civil_to_ns`` caches the
start of each valid day.

The window: every instant returned lies in ``[2000-01-01, 2200-01-01)`` UTC
(:data:`MIN_NS` .. :data:`END_NS`), or ``ValueError`` is raised.  OTLP carries times as
unsigned 64-bit nanoseconds (1970 to 2554); a value outside that range makes an invalid
JSON line and fails a whole protobuf export batch ("Value out of range").  Inside it, a
year like 1969, 0001 or 2600 is still a corrupted or hand-edited value, never something
the FMA controllers or Kubernetes wrote, so the window is narrower: 2000 is before any
Kubernetes, and 2200 leaves synthetic and far-future test captures room.  A caller that
counts ``ValueError`` as a malformed line thus counts such a line too, by file:line.
"""

from __future__ import annotations

import calendar
import datetime
import re

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\d*(Z|z|[+-]\d{2}:?\d{2})?$"
)

_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
#: bound of the caches below (a log spans a few days; this only guards odd inputs)
_CACHE_MAX = 4096
#: ``"YYYY-MM-DDTHH:MM:"`` -> seconds since the epoch at the start of that minute (UTC)
_MINUTE_SECONDS: dict[str, int] = {}
#: ``(year, month, day)`` -> ns since the epoch at 00:00 UTC, for valid dates only
_CIVIL_DAY_NS: dict[tuple[int, int, int], int] = {}
#: number of fraction digits -> multiplier to nanoseconds
_FRAC_SCALE = (0, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1)

#: First instant accepted: 2000-01-01T00:00:00Z, in ns since the epoch.
MIN_NS = 946_684_800 * 1_000_000_000
#: First instant past the window: 2200-01-01T00:00:00Z (below 2**64 ns, OTLP's limit).
END_NS = 7_258_118_400 * 1_000_000_000
#: The window in words, for error messages and docs.
WINDOW_TEXT = "2000-01-01T00:00:00Z .. 2200-01-01T00:00:00Z"


class OutOfWindowError(ValueError):
    """An instant outside :data:`MIN_NS` .. :data:`END_NS` (a ``ValueError``, so every
    caller that counts unparseable times counts these too)."""


def in_window(ns: int) -> bool:
    """Whether ``ns`` is an instant this package accepts (see the module docstring)."""
    return MIN_NS <= ns < END_NS


def check_ns(ns: int, what: str = "time") -> int:
    """``ns`` itself when it lies in the window; :class:`OutOfWindowError` otherwise.

    For parsers of their own (klog prefixes, launcher asctime) to apply the same window.
    """
    if MIN_NS <= ns < END_NS:
        return ns
    raise OutOfWindowError(f"{what} {_describe(ns)} is outside the accepted window {WINDOW_TEXT}")


def _describe(ns: int) -> str:
    """``ns`` as a readable UTC time when ``time.gmtime`` can show it, else as a number."""
    try:
        return format_rfc3339_ns(ns)
    except (OverflowError, OSError, ValueError):
        return f"{ns} ns since the epoch"


def parse_rfc3339_ns(text: str) -> int:
    """``2026-06-29T14:36:20.4987654Z`` -> ns since the epoch (UTC when no zone is given).

    Raises ``ValueError`` for anything else, and :class:`OutOfWindowError` (a
    ``ValueError``) for a time outside the window, so callers can count a bad value.
    """
    # fast path, ASCII only: "YYYY-MM-DDTHH:MM:" (its minute cached) + "SSZ" or "SS.<digits>Z"
    minute = _MINUTE_SECONDS.get(text[:17])
    if minute is None:
        minute = _minute_seconds(text[:17])
    if minute is not None:
        tail = text[17:]
        if tail[-1:] == "Z" and tail.isascii():
            ss = tail[:2]
            if ss.isdigit():
                if len(tail) == 3:
                    ns = (minute + int(ss)) * 1_000_000_000
                    if MIN_NS <= ns < END_NS:
                        return ns
                else:
                    digits = tail[3:-1]
                    if tail[2] == "." and digits.isdigit():
                        frac = digits[:9]  # digits past the ninth are dropped, as by the general path
                        ns = (minute + int(ss)) * 1_000_000_000 + int(frac) * _FRAC_SCALE[len(frac)]
                        if MIN_NS <= ns < END_NS:
                            return ns
    return _parse_rfc3339_general(text)


def _minute_seconds(head: str) -> int | None:
    """``"YYYY-MM-DDTHH:MM:"`` in ASCII digits -> epoch seconds of that minute, computed as
    ``calendar.timegm`` does (day 00, day 31 of a 30-day month, hour 24 roll over as there);
    ``None`` for any other text or a year or month ``datetime.date`` rejects, which the
    general path then decides on."""
    if len(head) != 17 or head[4] != "-" or head[7] != "-" or head[10] != "T":
        return None
    if head[13] != ":" or head[16] != ":":
        return None
    digits = head[:4] + head[5:7] + head[8:10] + head[11:13] + head[14:16]
    if not (digits.isascii() and digits.isdigit()):
        return None
    try:
        first = datetime.date(int(head[:4]), int(head[5:7]), 1).toordinal()
    except ValueError:
        return None
    days = first - _EPOCH_ORDINAL + int(head[8:10]) - 1
    secs = days * 86400 + int(head[11:13]) * 3600 + int(head[14:16]) * 60
    if len(_MINUTE_SECONDS) >= _CACHE_MAX:
        _MINUTE_SECONDS.clear()
    _MINUTE_SECONDS[head] = secs
    return secs


def _parse_rfc3339_general(text: str) -> int:
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
    y, mo, d, hh, mi, ss, frac, zone = m.groups()
    secs = calendar.timegm((int(y), int(mo), int(d), int(hh), int(mi), int(ss), 0, 0, 0))
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        z = zone[1:].replace(":", "")
        secs -= sign * (int(z[:2]) * 3600 + int(z[2:]) * 60)
    ns = int((frac or "").ljust(9, "0")) if frac else 0
    return check_ns(secs * 1_000_000_000 + ns)


def format_rfc3339_ns(ns: int) -> str:
    """Inverse of :func:`parse_rfc3339_ns` for display (UTC, trailing zeros trimmed)."""
    secs, frac = divmod(ns, 1_000_000_000)
    import time

    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{base}.{frac:09d}".rstrip("0").rstrip(".") + "Z"


def civil_to_ns(year: int, month: int, day: int, tod_us: int) -> int:
    """A klog header (no year in the text) placed in ``year``, UTC.

    Raises ``ValueError`` for a date that year does not have (``0229`` in 2027): timegm
    would silently roll it into March; and :class:`OutOfWindowError` for an instant
    outside the window (a year inferred wrong, a ``--timestamps`` prefix in 9999).
    """
    day_ns = _CIVIL_DAY_NS.get((year, month, day))
    if day_ns is None:
        day_ns = _civil_day_ns(year, month, day)
    ns = day_ns + tod_us * 1_000
    if MIN_NS <= ns < END_NS:
        return ns
    return check_ns(ns)


def _civil_day_ns(year: int, month: int, day: int) -> int:
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        raise ValueError(f"no {year:04d}-{month:02d}-{day:02d}")
    day_ns = calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0)) * 1_000_000_000
    if len(_CIVIL_DAY_NS) >= _CACHE_MAX:
        _CIVIL_DAY_NS.clear()
    _CIVIL_DAY_NS[(year, month, day)] = day_ns
    return day_ns


def year_of_ns(ns: int) -> int:
    import time

    return time.gmtime(ns // 1_000_000_000).tm_year
