"""Percentiles per FMA metric x path, and hit rates over FMA requesters.

Percentiles are *nearest rank*, ``sorted[ceil(n*p/100) - 1]``, exactly as clusterloader2's
``NewLatencyMetric`` computes them: every reported figure is a duration that actually
happened (no interpolation between two actuations), and the figures agree with the
Kubernetes SLI tooling that FMA's benchmarks are compared against.

Each percentile also comes with the interval it could be in.  Every span says the
interval its true duration lies in (``fma.duration.min_s`` .. ``max_s``: whole-second
Kubernetes timestamps, log times).  A nearest-rank percentile is monotone in every value,
so with each true duration in ``[lo_i, hi_i]`` the true p-th percentile lies in
``[p-th of the lo_i, p-th of the hi_i]``: the honest precision of the figure, which the
point value alone hides.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..model import COLD_LAUNCHER, COLD_NO_FMA, HOT, METRICS, UNKNOWN, WARM
from .harvest import Dataset, RequestObs

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
#: report order of paths: FMA paths first, then the baseline, then the unknown
PATH_ORDER: tuple[str, ...] = (COLD_LAUNCHER, WARM, HOT, COLD_NO_FMA, UNKNOWN)


def nearest_rank(sorted_values: Sequence[float], p: int) -> float:
    """The ``p``-th percentile (0 < p <= 100) of already sorted values, by nearest rank.

    Integer arithmetic for the rank, so ``n*p/100`` landing on a whole number (n=20, p=95)
    never rounds up by a float error.
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    rank = max(1, -(-n * p // 100))
    return sorted_values[rank - 1]


class Intervals:
    """Rows with ``pQ_lo``/``pQ_hi`` fields: the interval each percentile can be in."""

    def interval(self, p: int) -> tuple[float | None, float | None]:
        """``(lo, hi)`` of the ``p``-th percentile (``None`` without data)."""
        return getattr(self, f"p{p}_lo"), getattr(self, f"p{p}_hi")


@dataclass(frozen=True)
class MetricRow(Intervals):
    """One row of the report; ``None`` figures when no complete actuation was seen."""

    metric: str
    path: str
    n: int
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    min: float | None
    max: float | None
    mean: float | None
    incomplete: int
    #: the interval each percentile could be in: the same percentile of the durations'
    #: lower bounds (``fma.duration.min_s``) and of their upper bounds (``max_s``)
    p50_lo: float | None = None
    p50_hi: float | None = None
    p90_lo: float | None = None
    p90_hi: float | None = None
    p95_lo: float | None = None
    p95_hi: float | None = None
    p99_lo: float | None = None
    p99_hi: float | None = None


def summarize(
    metric: str,
    path: str,
    values: Iterable[float],
    incomplete: int = 0,
    bounds: Iterable[tuple[float, float]] | None = None,
) -> MetricRow:
    """One row; ``bounds`` are the ``(lo, hi)`` of each value (in any order), else the
    values are taken as exact."""
    v = sorted(values)
    if not v:
        return MetricRow(metric, path, 0, None, None, None, None, None, None, None, incomplete)
    pq = percentiles(v, [(x, x) for x in v] if bounds is None else list(bounds), PERCENTILES)
    return MetricRow(
        metric, path, len(v), min=v[0], max=v[-1], mean=sum(v) / len(v), incomplete=incomplete, **pq
    )


def percentiles(
    values: Sequence[float], bounds: Sequence[tuple[float, float]], qs: Iterable[int]
) -> dict[str, float]:
    """``{"p50": .., "p50_lo": .., "p50_hi": .., ...}``: each percentile of the sorted
    ``values`` and, given their ``bounds``, of the lower and of the upper bounds."""
    lo = sorted(a for a, _ in bounds)
    hi = sorted(b for _, b in bounds)
    out: dict[str, float] = {}
    for q in qs:
        out[f"p{q}"] = nearest_rank(values, q)
        if bounds:
            out[f"p{q}_lo"], out[f"p{q}_hi"] = nearest_rank(lo, q), nearest_rank(hi, q)
    return out


@dataclass(frozen=True)
class HitRates:
    """Shares of FMA requesters served hot, warm, and cold with a launcher.

    Per *requester* (the FMA definition: "fraction of server-requesting Pods that get
    satisfied by ..."): each requester Pod counts once, by its first actuation in the
    window.  ``requesters`` counts every requester in the window except the plain-vLLM
    baseline (``cold_no_fma``): requesters whose path is ``unknown`` stay in the
    denominator, since they did ask FMA for a server, so a rate is never flattered by
    missing data.  Unfinished actuations count too: the DPC chose their path all the same.

    Per *actuation* (``actuations``, ``act_*``): every trace counts, a requester bound a
    second time (unbound, then bound again) twice.  The two agree unless some requester
    was actuated more than once.
    """

    hot: float | None
    warm: float | None
    cold_launcher: float | None
    requesters: int
    actuations: int = 0
    act_hot: float | None = None
    act_warm: float | None = None
    act_cold_launcher: float | None = None


def _shares(reqs: Iterable[RequestObs]) -> tuple[float | None, float | None, float | None, int]:
    hot = warm = cold = total = 0
    for req in reqs:
        total += 1
        hot += req.hot_hit if req.hot_hit is not None else req.path == HOT
        warm += req.warm_hit if req.warm_hit is not None else req.path == WARM
        cold += req.path == COLD_LAUNCHER
    if not total:
        return None, None, None, 0
    return hot / total, warm / total, cold / total, total


@dataclass
class Report:
    rows: list[MetricRow]
    hit_rates: HitRates
    #: every complete duration per (metric, path) with the ``(lo, hi)`` it lies in, kept for
    #: SLO items over all paths
    durations: dict[tuple[str, str], list[tuple[float, float, float]]] = field(default_factory=dict)


def hit_rates(ds: Dataset) -> HitRates:
    fma = [r for r in ds.requests.values() if r.path != COLD_NO_FMA]
    first: dict[str, RequestObs] = {}
    fma_by_start = sorted((r.start_ns, t) for t, r in ds.requests.items() if r.path != COLD_NO_FMA)
    for _start, tid in fma_by_start:
        first.setdefault(ds.requests[tid].requester or tid, ds.requests[tid])
    hot, warm, cold, n = _shares(first.values())
    a_hot, a_warm, a_cold, m = _shares(fma)
    return HitRates(hot, warm, cold, n, m, a_hot, a_warm, a_cold)


def _known_first(order: Sequence[str], name: str) -> tuple[int, str]:
    return (order.index(name), "") if name in order else (len(order), name)


#: sort keys: the model's metrics in its order, :data:`PATH_ORDER`; then any other by name
metric_order = functools.partial(_known_first, METRICS)
path_order = functools.partial(_known_first, PATH_ORDER)


def build_report(ds: Dataset) -> Report:
    """Rows for every metric x path that has a complete or an incomplete actuation."""
    done: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    incomplete: dict[tuple[str, str], int] = defaultdict(int)
    for s in ds.samples:
        key = (s.metric, s.path)
        if s.complete:
            done[key].append((s.duration_s, s.lo_s, s.hi_s))
        else:
            incomplete[key] += 1
    keys = sorted(set(done) | set(incomplete), key=lambda k: (metric_order(k[0]), path_order(k[1])))
    rows = [_summary(m, p, done.get((m, p), []), incomplete.get((m, p), 0)) for m, p in keys]
    return Report(rows=rows, hit_rates=hit_rates(ds), durations=dict(done))


def _summary(
    metric: str, path: str, durations: list[tuple[float, float, float]], incomplete: int
) -> MetricRow:
    return summarize(
        metric, path, [d for d, _, _ in durations], incomplete, [(a, b) for _, a, b in durations]
    )


def merged(report: Report, metric: str, path: str | None) -> MetricRow:
    """A row for ``metric`` on one path, or over all paths when ``path`` is ``None``."""
    if path is not None:
        for r in report.rows:
            if r.metric == metric and r.path == path:
                return r
        return summarize(metric, path, ())
    rows = [r for r in report.rows if r.metric == metric]
    durations = [d for r in rows for d in report.durations.get((metric, r.path), ())]
    return _summary(metric, "*", durations, sum(r.incomplete for r in rows))
