"""Which observation bounds which instant: facts of one actuation -> fused instants (issue 21).

Why a module of its own: the correlator decides *which* facts belong to an actuation (its
requester, its round, its path); this module decides what each of them says about *when*
each instant happened, by the table in ``docs/span-model.md`` ("Instants"), and fuses the
bounds with :mod:`fma_otel.instants`.  Every bound is one a source really gives; a source
that only says "by then" (a later observer) or "not before" bounds one side only, and an
instant bounded on one side only has no point value: it is reported, never invented.

The collector is fed in any order (:meth:`Bounds.add`) and fused once
(:meth:`Bounds.fuse_all`), with the causal order of the instants applied as bounds too (a
Pod is scheduled after it was created, its container starts after it was scheduled, ...):
that order is a source as real as a timestamp, and it is what cuts a truncated second at
an earlier instant known more precisely.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import instants as I
from . import model as M

#: ``(later, earlier)``: ``later`` happens after ``earlier`` (fused in this order).
CAUSAL_ORDER: tuple[tuple[str, str], ...] = (
    ("R.scheduled", "R.created"),
    ("R.started", "R.scheduled"),
    ("L.scheduled", "L.created"),
    ("L.ready", "L.scheduled"),
    ("V.ready", "D.create.start"),
)

#: later -> earlier
_EARLIER: dict[str, str] = dict(CAUSAL_ORDER)

#: the order instants are fused in: an instant's causal predecessor first
_FUSE_ORDER: tuple[str, ...] = (
    "R.created",
    "R.scheduled",
    "R.started",
    "L.created",
    "L.scheduled",
    "L.ready",
    "D.create.start",
    "V.ready",
)


@dataclass
class Fusion:
    """What :meth:`Bounds.fuse_all` found: point instants, and those bounded on one side only."""

    instants: dict[str, M.Instant]
    #: instants bounded from one side only (no point value): name -> the fused half-interval
    partial: dict[str, I.Fused]


class Bounds:
    """The bounds of one actuation's instants, collected from every source."""

    def __init__(self, tolerance_ns: int = I.DEFAULT_TOLERANCE_NS) -> None:
        self.tolerance_ns = tolerance_ns
        self._b: dict[str, list[I.Bound]] = {}
        #: bounds used only where they narrow what the others give (:meth:`before_if_narrows`)
        self._narrowing: dict[str, list[I.Bound]] = {}

    def add(self, name: str, bound: I.Bound | None) -> None:
        if bound is not None:
            self._b.setdefault(name, []).append(bound)

    # ---------------------------------------------------------------- the sources' shapes

    def k8s(self, name: str, t_ns: int | None, source: str, clock: str) -> None:
        """A Kubernetes timestamp: ``[t, t + 1 s)``."""
        if t_ns is not None:
            self.add(name, I.truncated(t_ns, M.S, source, clock))

    def log_time(self, name: str, t_ns: int | None, source: str, clock: str = M.CLOCK_DPC) -> None:
        """A klog line whose event *is* the instant: ``[t, t + 1 µs)``."""
        if t_ns is not None:
            self.add(name, I.klog_time(t_ns, source, clock))

    def exact(self, name: str, t_ns: int | None, source: str, clock: str = M.CLOCK_DPC) -> None:
        """An exact instant (an HTTP call's start or end: ``httpCallStartTime`` ``+ latencySecs``)."""
        if t_ns is not None:
            self.add(name, I.exact(t_ns, source, clock))

    def write(self, name: str, call_start_ns: int | None, log_ns: int, source: str) -> None:
        """A DPC API write: the object change lies in ``[k8sCallStartTime, log time]``."""
        if _usable_write(call_start_ns, log_ns):
            assert call_start_ns is not None
            self.add(name, I.api_write(call_start_ns, log_ns, source))

    def before(
        self, name: str, t_ns: int | None, source: str, clock: str = M.CLOCK_DPC, precision_ns: int = 1
    ) -> None:
        """A later observer: the instant happened by ``t`` (an upper bound)."""
        if t_ns is not None:
            self.add(name, I.observed_after(t_ns, source, clock, precision_ns))

    def before_if_narrows(
        self, name: str, t_ns: int | None, source: str, clock: str, precision_ns: int = 1
    ) -> None:
        """A later observer, used only where it narrows what the other sources give.

        Why: a live watch event's arrival bounds the change it shows from above, but the
        live watcher must give the same trace as the offline bridge for the same data
        wherever it knows no more; an arrival long after the change (a replay, a restart's
        list) adds nothing and so is not named.  Like the causal order, it applies only to
        an instant another source bounds (there is nothing to narrow otherwise) and is named
        as a source only where it cuts the fused interval (after the clock tolerance).
        """
        if t_ns is not None:
            self._narrowing.setdefault(name, []).append(I.observed_after(t_ns, source, clock, precision_ns))

    def after(self, name: str, t_ns: int | None, source: str, clock: str = M.CLOCK_DPC) -> None:
        """The instant happened after ``t`` (a lower bound)."""
        if t_ns is not None:
            self.add(name, I.observed_before(t_ns, source, clock))

    # ---------------------------------------------------------------- fusion

    def fuse_all(self) -> Fusion:
        """Fuse every instant; the causal order adds a lower bound from each predecessor."""
        tol = self.tolerance_ns
        fused: dict[str, I.Fusing] = {}
        out: dict[str, M.Instant] = {}
        partial: dict[str, I.Fused] = {}
        order = [n for n in _FUSE_ORDER if n in self._b]
        order += [n for n in self._b if n not in _FUSE_ORDER]
        for name in order:
            f = I.fusing(self._b[name], tol)
            earlier = _EARLIER.get(name)
            prev = fused.get(earlier) if earlier else None
            # the order is named as a source only where it narrows the instant; being
            # one-sided, it (like a narrowing bound) is fused after every other bound, where
            # fuse() would sort it
            if prev is not None and prev.lo is not None and _narrows(prev.lo, None, prev.clock, f, tol):
                f.add(I.observed_before(prev.lo, f"order:after {earlier}", prev.clock))
            for nb in self._narrowing.get(name, ()):
                if _narrows(nb.lo, nb.hi, nb.clock, f, tol):
                    f.add(nb)
            fused[name] = f
            if f.lo is None or f.hi is None:  # two-sided always has a point (the midpoint)
                partial[name] = f.result()
            else:
                out[name] = instant_of(f)
        return Fusion(out, partial)


def _narrows(lo: int | None, hi: int | None, clock: str, f: I.Fusing, tolerance_ns: int) -> bool:
    """Whether a bound ``[lo, hi]`` on ``clock``, as seen from ``f``'s clock (widened by the
    tolerance when they differ), cuts ``f``'s interval on either side."""
    tol = 0 if clock == f.clock else tolerance_ns
    if hi is not None and (f.hi is None or hi + tol < f.hi):
        return True
    return lo is not None and (f.lo is None or lo - tol > f.lo)


def instant_of(f: I.Fusing) -> M.Instant:
    """A fused interval as the builder's :class:`~fma_otel.model.Instant` (two-sided, with a point)."""
    value, lo, hi = f.value(), f.lo, f.hi
    assert value is not None and lo is not None and hi is not None
    clock = f.clock
    return M.Instant(
        value,
        hi - lo + 1,
        f.source_text(),
        M.CLOCK_SERVICE.get(clock, M.SERVICE_DPC),
        lo,
        hi,
        clock,
        bool(f.rejected),
        tuple(f.disagreed),
    )


def _usable_write(call_start_ns: int | None, log_ns: int) -> bool:
    """A write line's ``k8sCallStartTime`` is there and not after the line's own log time."""
    return call_start_ns is not None and call_start_ns <= log_ns + M.US - 1


def exact_call(start_ns: int, end_ns: int, source: str) -> tuple[M.Instant, M.Instant]:
    """An HTTP call's start and end as two exact instants on the DPC's clock (for spans made
    per call): one source each, so made directly, with nothing to fuse."""
    return _single(I.exact(start_ns, source)), _single(I.exact(end_ns, source))


def write_call(call_start_ns: int | None, log_ns: int, source: str) -> tuple[M.Instant, M.Instant] | None:
    """A DPC Kubernetes API write as a call's two ends (for the ``fma.dpc.*_pod`` spans).

    The start is ``k8sCallStartTime`` (exact, the DPC's clock: it read its own clock before
    the call); the end is the line's klog time (µs: the DPC logs after the call returned).
    ``None`` when the line has no ``k8sCallStartTime`` (older DPCs) or one after its own log
    time: such a line gives no span, nothing is made up for it.
    """
    if not _usable_write(call_start_ns, log_ns):
        return None
    assert call_start_ns is not None
    return _single(I.exact(call_start_ns, source + "/k8sCallStartTime")), _single(I.klog_time(log_ns, source))


def _single(b: I.Bound) -> M.Instant:
    """One source's two-sided bound as an instant (its point, width and clock), unfused."""
    assert b.value is not None and b.lo is not None and b.hi is not None
    service = M.CLOCK_SERVICE.get(b.clock, M.SERVICE_DPC)
    return M.Instant(b.value, b.hi - b.lo + 1, b.source, service, b.lo, b.hi, b.clock)
