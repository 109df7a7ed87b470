"""Instants as intervals, bounded by every source that observed them (issue 21).

Why: today each instant of an actuation comes from one source, with that source's precision.
A Kubernetes timestamp is truncated to whole seconds, so a duration that starts or ends at
one is biased by an unknown fraction of a second; meanwhile other sources (the DPC's
``k8sCallStartTime`` before an API write and its own log time after it, HTTP call start/end,
later observers) bound the same instant much more tightly.  This module turns each
observation into a *bound* and fuses the bounds of one instant by intersection, so that the
fused interval is exactly as tight as the sources together allow, and never tighter.

Pure: no I/O, no parsing, no OpenTelemetry.  Callers (correlator, builder, watcher,
wrappers) read the sources and call the constructors below, which are named by what an
observation *means*.

Representation (all times are integer nanoseconds since the Unix epoch):

* A bound is a **closed integer interval** ``[lo, hi]``: the true instant ``T`` satisfies
  ``lo <= T <= hi``.  Because every true instant is a whole number of nanoseconds, the
  half-open ``[t, t + p)`` of a value truncated to precision ``p`` is written
  ``[t, t + p - 1]``; no open ends are needed and intersection is plain ``max``/``min``.
* ``lo is None`` / ``hi is None`` means unbounded on that side (an observation that only
  bounds the instant from one side: ``(-inf, t]`` or ``[t, +inf)``).
* ``value`` is the source's own point value for the instant, if it has one (a Kubernetes
  timestamp's ``t``, a klog line's time); sources that only bracket the instant (an API write
  seen between its call start and log time, a pair of polls, a one-sided observer) have none.
* ``clock`` names whose clock stamped the numbers (``k8s-apiserver``, ``kubelet``, ``dpc``,
  ...). Bounds on *different* clocks are compared with a tolerance (NTP keeps clocks within
  about a millisecond); bounds on the same clock are compared exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .model import CLOCK_DPC, MS, US, S

#: Default tolerance between two different clocks (NTP keeps hosts within about 1 ms).
DEFAULT_TOLERANCE_NS = MS


# Why msgspec Structs for these records: frozen and validated like a frozen dataclass, but
# built in C (a frozen dataclass sets each field through ``object.__setattr__``, and every
# actuation makes dozens of bounds).
class Bound(msgspec.Struct, frozen=True):
    """One observation's bound on an instant: ``lo <= T <= hi`` (ns, inclusive; None = unbounded).

    ``source`` is the human-readable origin (it goes into ``fma.start.source`` /
    ``fma.end.source``), ``clock`` whose clock stamped ``lo``/``hi``/``value``.
    """

    lo: int | None
    hi: int | None
    source: str
    clock: str
    value: int | None = None

    def __post_init__(self) -> None:
        lo, hi, v = self.lo, self.hi, self.value
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"{self.source}: bound ends before it starts (lo={lo}, hi={hi})")
        if v is not None and ((lo is not None and v < lo) or (hi is not None and v > hi)):
            raise ValueError(f"{self.source}: value {v} outside its own bound [{lo}, {hi}]")


# --------------------------------------------------------------------------- constructors


def truncated(t_ns: int, precision_ns: int, source: str, clock: str) -> Bound:
    """A timestamp truncated to ``precision_ns``: the instant lies in ``[t, t + precision)``.

    Why the value is ``t`` (not the midpoint): it is what the source says, and with no
    other source the point value stays what it was before intervals; where a more precise
    source exists its value (or the fused midpoint) wins anyway.
    """
    if precision_ns < 1:
        raise ValueError(f"{source}: precision must be at least 1 ns, got {precision_ns}")
    return Bound(t_ns, t_ns + precision_ns - 1, source, clock, value=t_ns)


def klog_time(t_ns: int, source: str, clock: str = CLOCK_DPC) -> Bound:
    """A klog header time (µs) as the instant itself: ``[t, t + 1 µs)``.

    Used where the logged event *is* the instant (``D.relayed``, ``D.bound`` today).
    """
    return truncated(t_ns, US, source, clock)


def api_write(k8s_call_start_ns: int, log_time_ns: int, source: str, clock: str = CLOCK_DPC) -> Bound:
    """The object change a DPC Kubernetes API write made: ``[k8sCallStartTime, log time]``.

    The change (for example the launcher Pod's creation, whose ``creationTimestamp`` is
    stamped by the API server) happened after the call started and before the DPC logged its
    outcome.  The log time is µs-truncated, so the bound ends at ``log time + 1 µs - 1 ns``.
    No point value: nothing says where inside the call the change happened.
    """
    hi = log_time_ns + US - 1
    if k8s_call_start_ns > hi:
        raise ValueError(
            f"{source}: k8sCallStartTime {k8s_call_start_ns} is after the line's own log time {log_time_ns}"
        )
    return Bound(k8s_call_start_ns, hi, source, clock)


def exact(t_ns: int, source: str, clock: str = CLOCK_DPC) -> Bound:
    """An instant known to the ns on ``clock`` (an HTTP call's start or end): ``[t, t]``."""
    return Bound(t_ns, t_ns, source, clock, value=t_ns)


def observed_after(t_ns: int, source: str, clock: str, precision_ns: int = 1) -> Bound:
    """A later observer's time: an upper bound only, ``(-inf, t]``.

    Why: an observer that acted on a change proves the change had happened by then, and
    says nothing about how long before.  Examples: the DPC acting on a Ready launcher bounds
    ``L.ready``; a successful ``get_gpu_uuids`` call to the requester (its SPI server
    answered, so its container runs) bounds ``R.started`` by that call's end; a live watch
    event's arrival bounds the change it reports.  A truncated observer time ``t`` (klog µs)
    bounds by ``t + precision - 1``.
    """
    return Bound(None, t_ns + precision_ns - 1, source, clock)


def observed_before(t_ns: int, source: str, clock: str) -> Bound:
    """An earlier observation that the change had *not* happened yet: a lower bound, ``[t, +inf)``.

    Examples: a failed direct call (a refused poll: the instant is after it started).  Not a
    cached or watched view of the old state: a cache lags, and the kubelet stamps a transition
    before the API server shows it.  A truncated earlier time ``t`` bounds from below by ``t``.
    """
    return Bound(t_ns, None, source, clock)


def vllm_ready_from_polls(
    last_failed: tuple[int, int] | None,
    first_ok: tuple[int, int],
    source: str = "dpc:HTTP call done/query_sleeping",
    clock: str = CLOCK_DPC,
) -> Bound:
    """``V.ready`` (vLLM's API became reachable) from the DPC's ``/is_sleeping`` polls.

    ``last_failed`` and ``first_ok`` are ``(start_ns, end_ns)`` of the last failed poll
    before the first successful one, and of that successful one.  The failed poll was refused
    at some moment after it started, so ``V.ready > last failed start``; the successful one
    was answered before it ended.  Why the end and not the start of the OK poll (as issue 21
    first wrote): the request reaches vLLM only after the poll started, so vLLM may have
    started listening during the poll; the start would be tighter than the source allows by
    up to that poll's latency.  With no failed poll the lower side is unbounded.
    """
    ok_start, ok_end = first_ok
    if ok_end < ok_start:
        raise ValueError(f"{source}: OK poll ends before it starts")
    if last_failed is None:
        return Bound(None, ok_end, source, clock)
    failed_start, _failed_end = last_failed
    if failed_start >= ok_end:
        raise ValueError(f"{source}: the failed poll started after the successful one ended")
    return Bound(failed_start + 1, ok_end, source + " (failed..OK)", clock)


def started_from_actuation_secs(
    log_time_ns: int,
    actuation_s: float,
    not_before_ns: int | None = None,
    source: str = "dpc:Observed actuation latency",
    clock: str = CLOCK_DPC,
) -> Bound:
    """``R.started`` from ``actuationSecs`` on "Observed actuation latency".

    The DPC computes ``actuationSecs = now - startedAt`` where ``startedAt`` is the
    requester container's whole-second ``running.startedAt`` and ``now`` lies at or before
    the line's µs log time (and at or after ``not_before_ns``, the end of the ``relay_ready``
    call it follows, when known).  So ``startedAt`` lies in
    ``[not_before - a, log time + 1 µs - 1 - a]``, and being a whole second it is the whole
    seconds in that window; the true start lies up to one second after it.  A float
    ``actuationSecs`` is read with 1 µs of slack either way (it is printed from a float64).
    Without ``not_before_ns`` only the upper side is known.  No point value.
    """
    a = round(actuation_s * S)
    hi_trunc = (log_time_ns + US - 1 - a + US) // S * S  # last whole second startedAt can be
    if not_before_ns is None:
        return Bound(None, hi_trunc + S - 1, source, clock)
    lo_trunc = -(-(not_before_ns - a - US) // S) * S  # first whole second startedAt can be
    if lo_trunc > hi_trunc:
        raise ValueError(f"{source}: no whole second fits actuationSecs={actuation_s} before the log time")
    return Bound(lo_trunc, hi_trunc + S - 1, source, clock)


# --------------------------------------------------------------------------- fusion


class Fused(msgspec.Struct, frozen=True):
    """An instant fused from every bound: ``lo <= T <= hi`` on ``clock``, with a point value.

    ``sources`` lists every source whose bound was used (in order of precision);
    ``inconsistent`` is set when some bound conflicted with the more precise ones beyond the
    clock tolerance: those bounds were dropped (``rejected``) and ``disagreed`` names every
    source involved in a conflict.  ``value`` is None only when no side-less point can be
    given (the fused interval is unbounded on a side and no kept source has a value).
    """

    lo: int | None
    hi: int | None
    value: int | None
    clock: str
    sources: tuple[str, ...]
    inconsistent: bool = False
    rejected: tuple[str, ...] = ()
    disagreed: tuple[str, ...] = ()


def _precision_key(b: Bound) -> tuple[int, int]:
    """Sort key: two-sided bounds by width, then one-sided (a stable sort keeps input order)."""
    lo, hi = b.lo, b.hi
    return (0, hi - lo) if lo is not None and hi is not None else (1, 0)


def _widened(b: Bound, clock: str, tolerance_ns: int) -> tuple[int | None, int | None]:
    """``b`` as seen from ``clock``: widened by the tolerance when its own clock differs."""
    if b.clock == clock:
        return b.lo, b.hi
    return (
        None if b.lo is None else b.lo - tolerance_ns,
        None if b.hi is None else b.hi + tolerance_ns,
    )


def _overlaps(lo1: int | None, hi1: int | None, lo2: int | None, hi2: int | None) -> bool:
    return (lo1 is None or hi2 is None or lo1 <= hi2) and (lo2 is None or hi1 is None or lo2 <= hi1)


class Fusing:
    """One instant being fused: bounds are taken one at a time, most precise first.

    Why a running state: a caller that adds a bound only where it narrows what is already
    fused (the causal order, a live arrival; see :mod:`fma_otel.bounding`) needs the fused
    interval before it decides, and a one-sided bound taken after the others is exactly
    where :func:`fuse` would have placed it, so nothing is fused twice.
    """

    __slots__ = ("tolerance_ns", "clock", "lo", "hi", "kept", "rejected", "disagreed")

    def __init__(self, ref: Bound, tolerance_ns: int) -> None:
        self.tolerance_ns = tolerance_ns
        #: the reference clock: the most precise bound's
        self.clock = ref.clock
        self.lo: int | None = ref.lo
        self.hi: int | None = ref.hi
        self.kept: list[Bound] = [ref]
        self.rejected: list[str] = []
        self.disagreed: list[str] = []

    def add(self, b: Bound) -> None:
        """Intersect ``b`` (no more precise than any taken before), or reject it as a conflict."""
        clock, tol = self.clock, self.tolerance_ns
        blo, bhi = _widened(b, clock, tol)
        lo, hi = self.lo, self.hi
        if not _overlaps(lo, hi, blo, bhi):
            self.rejected.append(b.source)
            # name the kept sources it conflicts with one by one; if none alone, all of them
            kept = self.kept
            against = [k.source for k in kept if not _overlaps(*_widened(k, clock, tol), blo, bhi)] or [
                k.source for k in kept
            ]
            disagreed = self.disagreed
            for name in (*against, b.source):
                if name not in disagreed:
                    disagreed.append(name)
            return
        self.kept.append(b)
        if blo is not None and (lo is None or blo > lo):
            self.lo = blo
        if bhi is not None and (hi is None or bhi < hi):
            self.hi = bhi

    def value(self) -> int | None:
        """The point value: the most precise kept source's own value clamped in, else the midpoint.

        Where the most precise source has no value of its own, a less precise source's value
        is not used: it would put the point at that source's truncation edge (the bias
        intervals exist to remove).  A half-unbounded interval with no such value has no point.
        """
        v, lo, hi = self.kept[0].value, self.lo, self.hi
        if v is None:
            return None if lo is None or hi is None else lo + (hi - lo) // 2
        if lo is not None and v < lo:
            return lo
        if hi is not None and v > hi:
            return hi
        return v

    def source_text(self) -> str:
        """Every kept source, most precise first, as ``fma.start.source``/``fma.end.source`` show it."""
        return " + ".join([k.source for k in self.kept])

    def result(self) -> Fused:
        """What has been fused so far, as the immutable :class:`Fused`."""
        return Fused(
            self.lo,
            self.hi,
            self.value(),
            self.clock,
            tuple([k.source for k in self.kept]),
            inconsistent=bool(self.rejected),
            rejected=tuple(self.rejected),
            disagreed=tuple(self.disagreed),
        )


def fusing(bounds: Iterable[Bound], tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> Fusing:
    """:func:`fuse`'s running state after every bound in ``bounds`` (more may be added)."""
    if tolerance_ns < 0:
        raise ValueError(f"clock tolerance must not be negative, got {tolerance_ns}")
    ordered = sorted(bounds, key=_precision_key)
    if not ordered:
        raise ValueError("no bounds to fuse: the instant was not observed")
    f = Fusing(ordered[0], tolerance_ns)
    for b in ordered[1:]:
        f.add(b)
    return f


def fuse(bounds: Iterable[Bound], tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> Fused:
    """Fuse one instant's bounds by intersection, honouring the clock tolerance.

    Why this shape:

    * The result is expressed on the clock of the most precise bound (the *reference*);
      bounds on other clocks are widened by ``tolerance_ns`` on each side before they
      intersect, so a correct source on a clock within the tolerance never excludes the
      truth.  Bounds on the reference clock are used exactly.
    * Bounds are taken from the most precise to the least.  One that does not overlap what
      is already fused conflicts beyond the tolerance: it is dropped, the result is marked
      ``inconsistent`` and the conflicting sources are named, so the most precise sources
      are kept and nothing is silently averaged.
    * The point value is the most precise kept source's own value, clamped into the fused
      interval; where that source has none (it only brackets the instant), the midpoint.

    Raises ValueError for no bounds (an instant nobody observed is missing, not fused).
    """
    return fusing(bounds, tolerance_ns).result()


# --------------------------------------------------------------------------- durations


class Duration(msgspec.Struct, frozen=True):
    """A span's duration from two fused instants.

    ``min_ns``/``max_ns`` bound the true duration (never below 0; ``max_ns`` is None when an
    end is unbounded); ``point_ns`` is ``end.value - start.value`` clamped into them;
    ``inconsistent`` is set when the end's interval lies wholly before the start's beyond
    the tolerance (clock skew or a bad source), in which case the span is zero-length.
    """

    min_ns: int
    max_ns: int | None
    point_ns: int | None
    inconsistent: bool


def duration(start: Fused, end: Fused, tolerance_ns: int = DEFAULT_TOLERANCE_NS) -> Duration:
    """The duration interval ``[min, max]`` and point duration between two fused instants.

    Why the tolerance here too: the two instants may be fused on different reference
    clocks, and then their difference is only known to within the clocks' offset; on one
    clock the difference is exact.  Both limits are floored at 0 (an end cannot precede its
    start); the point is clamped into ``[min, max]`` so it never claims what the intervals
    exclude.
    """
    tol = 0 if start.clock == end.clock else tolerance_ns
    lo_raw = None if end.lo is None or start.hi is None else end.lo - start.hi - tol
    hi_raw = None if end.hi is None or start.lo is None else end.hi - start.lo + tol
    min_ns = 0 if lo_raw is None or lo_raw < 0 else lo_raw
    inconsistent = hi_raw is not None and hi_raw < 0
    max_ns = None if hi_raw is None else max(0, hi_raw)
    point = None
    if start.value is not None and end.value is not None:
        point = max(end.value - start.value, min_ns)
        if max_ns is not None:
            point = min(point, max_ns)
    return Duration(min_ns, max_ns, point, inconsistent)
