"""Exact time parsing: RFC3339 with up to nanoseconds, in integer ns since the epoch.

Why not ``datetime.fromisoformat``: it truncates to microseconds (the DPC's
``httpCallStartTime`` has nanoseconds) and, on Python 3.10, rejects ``Z`` and 9-digit
fractions.  Integer nanoseconds keep every instant exact, so a span's duration is the
difference of two integers and the bridge gives the same trace on every run.
"""

from __future__ import annotations

import calendar
import re

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\d*(Z|z|[+-]\d{2}:?\d{2})?$"
)


def parse_rfc3339_ns(text: str) -> int:
    """``2026-06-29T14:36:20.4987654Z`` -> ns since the epoch (UTC when no zone is given).

    Raises ``ValueError`` for anything else, so callers can count a bad value.
    """
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
    if not (1 <= month <= 12 and 1 <= day <= calendar.monthrange(year, month)[1]):
        raise ValueError(f"no {year:04d}-{month:02d}-{day:02d}")
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0)) * 1_000_000_000 + tod_us * 1_000


def year_of_ns(ns: int) -> int:
    import time

    return time.gmtime(ns // 1_000_000_000).tm_year
