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


def parse_rfc3339_ns(text: str) -> int:
    """``2026-06-29T14:36:20.4987654Z`` -> ns since the epoch (UTC when no zone is given).

    Raises ``ValueError`` for anything else, so callers can count a bad value.
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
                    return (minute + int(ss)) * 1_000_000_000
                digits = tail[3:-1]
                if tail[2] == "." and digits.isdigit():
                    frac = digits[:9]  # digits past the ninth are dropped, as by the general path
                    return (minute + int(ss)) * 1_000_000_000 + int(frac) * _FRAC_SCALE[len(frac)]
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
    return secs * 1_000_000_000 + ns


def format_rfc3339_ns(ns: int) -> str:
    """Inverse of :func:`parse_rfc3339_ns` for display (UTC, trailing zeros trimmed)."""
    secs, frac = divmod(ns, 1_000_000_000)
    import time

    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    return f"{base}.{frac:09d}".rstrip("0").rstrip(".") + "Z"


def civil_to_ns(year: int, month: int, day: int, tod_us: int) -> int:
    """A klog header (no year in the text) placed in ``year``, UTC.

    Raises ``ValueError`` for a date that year does not have (``0229`` in 2027): timegm
    would silently roll it into March.
    """
    day_ns = _CIVIL_DAY_NS.get((year, month, day))
    if day_ns is None:
        day_ns = _civil_day_ns(year, month, day)
    return day_ns + tod_us * 1_000


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
