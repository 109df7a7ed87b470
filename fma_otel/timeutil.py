"""Exact time parsing: RFC3339 with up to nanoseconds, in integer ns since the epoch.

Why not ``datetime.fromisoformat``: it truncates to microseconds (the DPC's
``httpCallStartTime`` has nanoseconds) and, on Python 3.10, rejects ``Z`` and 9-digit
fractions.  Integer nanoseconds keep every instant exact, so a span's duration is the
difference of two integers and the bridge gives the same trace on every run.

One grammar, used by every reader (Pod JSON, DPC fields, ``--timestamps`` prefixes of klog,
launcher and vLLM logs, Kubernetes Events, live logs):
``YYYY-MM-DD(T|t)HH:MM:SS[.digits](Z|z|+HH:MM|-HH:MM)``, ASCII digits, a date the
calendar has (``02-30`` is an error, never rolled into March), hour <= 23, minute <= 59,
second <= 60 (a leap second counts into the next minute), digits past the ninth of the
fraction dropped.  A time without a zone is an error: Go's ``time.RFC3339Nano`` and
Kubernetes always write one, so a zone-less value was made by hand and UTC would be a guess.
The bridge parses tens of thousands of times, nearly all from a few hours, so the start of
each minute (``YYYY-MM-DDTHH:MM:``, checked once) is cached and only the seconds, fraction
and zone are read per call.

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
import functools

#: bound of the caches below (a log spans a few days; this only guards odd inputs)
_CACHE_MAX = 4096
#: number of fraction digits -> multiplier to nanoseconds
_FRAC_SCALE = (0, 100_000_000, 10_000_000, 1_000_000, 100_000, 10_000, 1_000, 100, 10, 1)

#: First instant accepted: 2000-01-01T00:00:00Z, in ns since the epoch.
MIN_NS = 946_684_800 * 1_000_000_000
#: First instant past the window: 2200-01-01T00:00:00Z (below 2**64 ns, OTLP's limit).
END_NS = 7_258_118_400 * 1_000_000_000
#: The window in words, for error messages and docs.
WINDOW_TEXT = "2000-01-01T00:00:00Z .. 2200-01-01T00:00:00Z"
#: A day, and the most a year can be, in ns: how far a stated time may lie from the time
#: that states it (a DPC line's, the capture's) before it is taken for corruption.
DAY_NS = 86_400 * 1_000_000_000
YEAR_NS = 366 * DAY_NS


class OutOfWindowError(ValueError):
    """An instant outside :data:`MIN_NS` .. :data:`END_NS` (a ``ValueError``, so every
    caller that counts unparseable times counts these too)."""


def check_ns(ns: int, what: str = "time") -> int:
    """``ns`` itself when it lies in the window; :class:`OutOfWindowError` otherwise.

    For parsers of their own (klog prefixes, launcher asctime) to apply the same window.
    """
    if MIN_NS <= ns < END_NS:
        return ns
    raise OutOfWindowError(f"{what} {_describe(ns)} is outside the accepted window {WINDOW_TEXT}")


def days_off(ns: int, center_ns: int | None) -> float | None:
    """How many days ``ns`` lies from the capture's ``center_ns`` (its median Pod time) when
    that is more than a year: a time inside the window but in another year (an asctime or
    Event in 2150) is corruption.  ``None`` when it is near, or there is no center."""
    if center_ns is None or abs(ns - center_ns) <= YEAR_NS:
        return None
    return (ns - center_ns) / DAY_NS


def _describe(ns: int) -> str:
    """``ns`` as a readable UTC time when ``time.gmtime`` can show it, else as a number."""
    try:
        return format_rfc3339_ns(ns)
    except (OverflowError, OSError, ValueError):
        return f"{ns} ns since the epoch"


def parse_rfc3339_ns(text: str) -> int:
    """``2026-06-29T14:36:20.4987654Z`` -> ns since the epoch (the grammar: module docstring).

    Raises ``ValueError`` for anything else, and :class:`OutOfWindowError` (a
    ``ValueError``) for a time outside the window, so callers can count a bad value.
    """
    return parse_rfc3339(text)[0]


def time_or_none(value: object) -> int | None:
    """An RFC3339 value in ns; None when absent or unreadable (a Pod field, or a DPC line's
    ``k8sCallStartTime``, ...: these only narrow an instant, so without them the rest still
    means what it says)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339_ns(value)
    except ValueError:
        return None


def parse_rfc3339(text: str) -> tuple[int, int]:
    """:func:`parse_rfc3339_ns` and the number of fraction digits kept (0 to 9).

    The digits say how precise the writer was (none: whole seconds, six: microseconds),
    which a reader of Kubernetes Events reports beside the instant; one parse gives both,
    so there is one grammar for the time and its precision.
    """
    try:
        minute = _minute_seconds(text[:17])
    except ValueError as exc:
        raise ValueError(f"not an RFC3339 time{exc}: {text[:40]!r}") from None
    tail = text[17:]  # "SS", then "." and digits or nothing, then "Z"
    offset = 0
    if tail[-1:] != "Z":
        offset, tail = _zone(text, tail)
    ss = tail[:2]
    # isascii() first: isdigit() alone takes '²' and '٠' too
    if not (tail.isascii() and ss.isdigit()) or ss > "60":
        raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
    if len(tail) == 3:
        ns = (minute + int(ss) - offset) * 1_000_000_000
        digits = ""
    else:
        digits = tail[3:-1]
        if tail[2] != "." or not digits.isdigit():
            raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
        digits = digits[:9]  # digits past the ninth are dropped
        ns = (minute + int(ss) - offset) * 1_000_000_000 + int(digits) * _FRAC_SCALE[len(digits)]
    if MIN_NS <= ns < END_NS:
        return ns, len(digits)
    return check_ns(ns), 0  # raises: outside the window


def _zone(text: str, tail: str) -> tuple[int, str]:
    """The offset east of UTC in seconds of a time whose zone is not ``Z`` (``z``,
    ``+HH:MM`` or ``-HH:MM``), and ``tail`` with its zone written ``Z``."""
    if tail[-1:] == "z":
        return 0, tail[:-1] + "Z"
    zone = tail[-6:]
    # RFC3339's time-numoffset: hour 00-23, minute 00-59 (``+99:00`` is corruption, not a zone)
    if (
        len(tail) >= 8
        and zone[0] in "+-"
        and zone[3] == ":"
        and _digits(zone[1:3] + zone[4:])
        and zone[1:3] <= "23"
        and zone[4:] <= "59"
    ):
        offset = int(zone[1:3]) * 3600 + int(zone[4:]) * 60
        return (offset if zone[0] == "+" else -offset), tail[:-6] + "Z"
    raise ValueError(f"not an RFC3339 time (zone): {text[:40]!r}")


def _digits(s: str) -> bool:
    """ASCII digits only: ``str.isdigit`` alone takes ``'²'`` and ``'٠'`` too."""
    return s.isdigit() and s.isascii()


@functools.lru_cache(maxsize=_CACHE_MAX)
def _minute_seconds(head: str) -> int:
    """Epoch seconds at the start of the minute ``head`` (``YYYY-MM-DDTHH:MM:``), checked
    once per minute; ``ValueError`` (what to add to "not an RFC3339 time") for any other text."""
    if len(head) != 17 or head[4] != "-" or head[7] != "-" or head[10] not in "Tt":
        raise ValueError("")
    hh, mm = head[11:13], head[14:16]
    if head[13] != ":" or head[16] != ":" or not _digits(hh + mm) or hh > "23" or mm > "59":
        raise ValueError("")
    try:
        day = date_seconds(head[:10])
    except ValueError:
        raise ValueError(" (no such date)") from None
    return day + int(hh) * 3600 + int(mm) * 60


def date_seconds(ymd: str) -> int:
    """``YYYY-MM-DD`` (ASCII digits, a date the calendar has) -> epoch seconds at 00:00 UTC.

    Shared by every reader of a written date (RFC3339 here, the launcher's asctime), so
    one rule decides which dates exist."""
    if len(ymd) != 10 or ymd[4] != "-" or ymd[7] != "-" or not _digits(ymd[:4] + ymd[5:7] + ymd[8:]):
        raise ValueError(f"bad date {ymd!r}")
    try:
        return day_start_ns(int(ymd[:4]), int(ymd[5:7]), int(ymd[8:])) // 1_000_000_000
    except ValueError:
        raise ValueError(f"bad date {ymd!r}") from None


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
    return check_ns(day_start_ns(year, month, day) + tod_us * 1_000)


@functools.lru_cache(maxsize=_CACHE_MAX)
def day_start_ns(year: int, month: int, day: int) -> int:
    """ns since the epoch at 00:00 UTC of a date the calendar has (cached: a log spans a few
    days); ``ValueError`` for a date that year lacks.  Not checked against the window: a
    caller adds the time of day, then :func:`check_ns`."""
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        raise ValueError(f"no {year:04d}-{month:02d}-{day:02d}")
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0)) * 1_000_000_000


def year_of_ns(ns: int) -> int:
    import time

    return time.gmtime(ns // 1_000_000_000).tm_year
