"""Time windows and duration strings.

Why one module: ``--since 24h``, an SLO threshold of ``250ms`` and a Jaeger
``start_time_min`` all need the same small parsers, and users expect the same spelling
(Go-style ``1h30m``, as Jaeger and Prometheus accept) everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..jsonsafe import brief, finite_float
from . import QueryError

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h|d|w)")
_WHOLE = re.compile(r"(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|ms|s|m|h|d|w))+")


def parse_duration(text: object) -> float:
    """Seconds from ``5s``, ``250ms``, ``2m``, ``1h30m``, ``7d`` or a bare number (seconds).

    Raises :class:`QueryError` with the offending text, so callers can prefix where it came
    from (an SLO item index, an option name).  The result is always a finite float: NaN
    (``.nan``, ``"nan"``) and infinity (``.inf``, ``1e400``, 400 digits, or a YAML int
    ``float()`` overflows on) are errors, as no JSON output could carry them and a NaN
    threshold fails every comparison.
    """
    if isinstance(text, bool):
        raise QueryError(f"not a duration: {text!r}")
    value: float | int
    if isinstance(text, (int, float)):
        value = text
    elif isinstance(text, str):
        s = text.strip()
        try:
            value = float(s)
        except ValueError:
            if not _WHOLE.fullmatch(s):
                raise QueryError(f"not a duration: {brief(text)} (use e.g. 5s, 250ms, 2m, 1h30m)") from None
            value = sum(float(num) * _UNITS[unit] for num, unit in _PART.findall(s))
    else:
        raise QueryError(f"not a duration: {brief(text)}")
    try:
        seconds = finite_float(value)
    except ValueError:
        raise QueryError(f"not a finite duration: {brief(text)}") from None
    if seconds < 0:
        raise QueryError(f"negative duration: {brief(text)}")
    return seconds


_FRACTION = re.compile(r"\.(\d+)")


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """An RFC3339 instant, or a duration back from ``now`` (``24h`` = 24 hours ago).

    Accepts ``Z`` and nanosecond fractions (Python 3.10's ``fromisoformat`` takes neither);
    a time without a zone is read as UTC, the zone every FMA log uses.
    """
    s = text.strip()
    if not s:
        raise QueryError("empty time")
    if not _WHOLE.fullmatch(s):
        iso = s.replace("z", "Z")
        if iso.endswith("Z"):
            iso = iso[:-1] + "+00:00"
        iso = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), iso, count=1)
        try:
            t = datetime.fromisoformat(iso)
        except ValueError as exc:
            raise QueryError(f"not an RFC3339 time: {text!r}") from exc
        return t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    seconds = parse_duration(s)
    base = now or datetime.now(timezone.utc)
    try:
        return base - timedelta(seconds=seconds)
    except OverflowError:  # timedelta or datetime out of range
        raise QueryError(f"{brief(text)} back from now is before year 1") from None


def to_ns(t: datetime) -> int:
    """Unix nanoseconds, exact to the microsecond that ``datetime`` holds."""
    delta = t - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def from_ns(ns: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=ns // 1000)


def rfc3339(t: datetime) -> str:
    """RFC3339 in UTC with ``Z``, as Jaeger's api/v3 wants its ``start_time_min``."""
    return t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Window:
    """A half-open time window ``[since, until)``; either end may be open (``None``)."""

    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since and self.until and self.since >= self.until:
            raise QueryError(f"--since ({rfc3339(self.since)}) is not before --until ({rfc3339(self.until)})")

    def closed(self, default_back: float, now: datetime | None = None) -> tuple[datetime, datetime]:
        """Both ends, filling open ones: remote stores require explicit bounds."""
        end = self.until or now or datetime.now(timezone.utc)
        try:
            start = self.since or end - timedelta(seconds=default_back)
        except OverflowError:  # --until so early that the lookback passes year 1
            raise QueryError(
                f"--until {rfc3339(end)}: no room for the default lookback before it; give --since"
            ) from None
        return start, end

    def as_json(self) -> dict[str, str | None]:
        return {
            "since": rfc3339(self.since) if self.since else None,
            "until": rfc3339(self.until) if self.until else None,
        }


def make_window(since: str | None, until: str | None, now: datetime | None = None) -> Window:
    """The window of ``--since``/``--until``; both are read against the same ``now``."""
    now = now or datetime.now(timezone.utc)
    try:
        s = parse_time(since, now) if since else None
    except QueryError as exc:
        raise QueryError(f"--since: {exc}") from None
    try:
        u = parse_time(until, now) if until else None
    except QueryError as exc:
        raise QueryError(f"--until: {exc}") from None
    return Window(s, u)
