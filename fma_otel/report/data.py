"""What the report shows, as plain data: no files, no plotting, so every figure is testable.

Why a separate layer: the figures (:mod:`.figures`) and the HTML (:mod:`.html`) only draw
what is decided here, and the decisions are the ones worth testing exactly — which spans
explain an actuation, how overlapping constituents are counted, which actuations are the
slowest, what an unfinished actuation looks like.

The statistics themselves (nearest-rank percentiles, hit rates, SLO verdicts) are not
recomputed here: they come from :mod:`fma_otel.query`, the engine behind ``fma-otel slo``,
so the report and ``slo`` can never disagree on a figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model import (
    A_COMPLETE,
    A_METRIC,
    A_MISSING,
    A_PATH,
    A_REQ_NAME,
    A_REQ_UID,
    COLD_LAUNCHER,
    COLD_NO_FMA,
    HOT,
    METRICS,
    ROOT,
    SPANS,
    STATUS_ERROR,
    UNKNOWN,
    WARM,
    S,
    SpanRecord,
)
from ..query.harvest import Harvest
from ..query.slo_spec import Check, Verdict, evaluate
from ..query.stats import PATH_ORDER, Report, build_report, nearest_rank

ACTUATION = "fma.actuation"
UNEXPLAINED = "unexplained"

#: The spans that, one after the other, make up ``T_actuation`` on each path.  They are the
#: finest spans of the model that tile ``R.started -> R.ready`` without overlapping by
#: design (``fma.instance.ready`` is split into create call, vLLM ready and relay;
#: ``fma.instance.create`` and ``fma.launcher.create_instance`` overlap those and are left
#: out).  Baseline and unknown paths have no constituents: nothing to break down.
CONSTITUENTS: Mapping[str, tuple[str, ...]] = {
    COLD_LAUNCHER: (
        "fma.dpc.bind",
        "fma.launcher.schedule",
        "fma.launcher.startup",
        "fma.dpc.react",
        "fma.dpc.create_instance",
        "fma.vllm.ready",
        "fma.readiness.relay",
        "fma.kubelet.probe",
    ),
    WARM: (
        "fma.dpc.bind",
        "fma.dpc.create_instance",
        "fma.vllm.ready",
        "fma.readiness.relay",
        "fma.kubelet.probe",
    ),
    HOT: ("fma.dpc.bind", "fma.vllm.wake", "fma.readiness.relay", "fma.kubelet.probe"),
}
_ALL_CONSTITUENTS: frozenset[str] = frozenset(n for names in CONSTITUENTS.values() for n in names)
#: The baseline (a plain vLLM Pod) has no FMA span to split its ``T_actuation`` into: its one
#: part is the actuation itself (container start to Ready), drawn beside the FMA paths so
#: that what FMA saves is read off one axis.
BASELINE_PART = ACTUATION
#: the percentiles the breakdown table gives per phase (nearest rank, as ``slo``)
PHASE_PERCENTILES: tuple[int, ...] = (50, 90, 99)
#: model order of span names: ties in start time are broken the way the table reads
_MODEL_ORDER: Mapping[str, int] = {d.name: i for i, d in enumerate(SPANS)}


# --------------------------------------------------------------------------- per trace


@dataclass
class TraceSummary:
    """The little the report keeps of every actuation while streaming a large file."""

    trace_id: str
    requester: str = "?"
    requester_uid: str = ""
    path: str = UNKNOWN
    has_root: bool = False
    complete: bool = True
    status: str = ""
    start_ns: int | None = None
    actuation: tuple[int, int] | None = None
    actuation_complete: bool = True
    constituents: list[tuple[str, int, int]] = field(default_factory=list)
    end_ns: int | None = None
    #: instants the bridge never saw (``fma.missing`` on the root), in its order
    missing: tuple[str, ...] = ()
    #: metric -> seconds, from the first span carrying it; ``open_metrics`` holds the names
    #: whose span never finished (the value is then only a lower bound)
    metrics: dict[str, float] = field(default_factory=dict)
    open_metrics: tuple[str, ...] = ()  # a tuple: usually empty, and 100k of them add up

    @property
    def actuation_start_ns(self) -> int | None:
        """When the actuation began (``R.started``), else the trace's first instant."""
        return self.actuation[0] if self.actuation is not None else self.start_ns

    @property
    def actuation_s(self) -> float | None:
        if self.actuation is None:
            return None
        return max(0, self.actuation[1] - self.actuation[0]) / S

    @property
    def finished(self) -> bool:
        """Finished means the root says so and the actuation span is not an error."""
        return self.has_root and self.complete and self.actuation_complete

    @property
    def label(self) -> str:
        """How a person names this actuation: requester and (short) trace id."""
        return f"{self.requester} / {self.trace_id}"


def _is_false(v: Any) -> bool:
    return v is False or (isinstance(v, str) and v.lower() == "false")


class Summaries:
    """Streams spans into one :class:`TraceSummary` per trace (spans in any order)."""

    def __init__(self) -> None:
        self.by_trace: dict[str, TraceSummary] = {}

    def add(self, s: SpanRecord) -> None:
        t = self.by_trace.get(s.trace_id)
        if t is None:
            t = self.by_trace[s.trace_id] = TraceSummary(s.trace_id)
        a = s.attributes
        if t.requester == "?" and a.get(A_REQ_NAME):
            t.requester = str(a[A_REQ_NAME])
        if not t.requester_uid and a.get(A_REQ_UID):
            t.requester_uid = str(a[A_REQ_UID])
        if t.path == UNKNOWN and a.get(A_PATH):
            t.path = str(a[A_PATH])
        if not t.has_root and (t.start_ns is None or s.start_ns < t.start_ns):
            t.start_ns = s.start_ns
        if t.end_ns is None or s.end_ns > t.end_ns:
            t.end_ns = s.end_ns
        metric = a.get(A_METRIC)
        span_done = s.status_code != STATUS_ERROR and not _is_false(a.get(A_COMPLETE))
        if metric and str(metric) not in t.metrics:
            t.metrics[str(metric)] = max(0, s.end_ns - s.start_ns) / S
            if not span_done:
                t.open_metrics += (str(metric),)
        if s.name == ROOT and not s.parent_span_id:
            t.has_root = True
            t.start_ns = s.start_ns
            t.complete = not _is_false(a.get(A_COMPLETE)) and s.status_code != STATUS_ERROR
            t.status = s.status_message if s.status_code == STATUS_ERROR else ""
            if a.get(A_PATH):
                t.path = str(a[A_PATH])
            missing = a.get(A_MISSING)
            if missing:
                t.missing = tuple(str(x) for x in missing) if isinstance(missing, list) else (str(missing),)
        elif s.name == ACTUATION:
            t.actuation = (s.start_ns, max(s.start_ns, s.end_ns))
            t.actuation_complete = s.status_code != STATUS_ERROR and not _is_false(a.get(A_COMPLETE))
        elif s.name in _ALL_CONSTITUENTS:
            t.constituents.append((s.name, s.start_ns, max(s.start_ns, s.end_ns)))

    def values(self) -> list[TraceSummary]:
        return list(self.by_trace.values())


# --------------------------------------------------------------------------- where did the time go


def attribute(
    actuation: tuple[int, int], constituents: Iterable[tuple[str, int, int]]
) -> tuple[dict[str, float], float]:
    """Seconds of ``actuation`` explained by each constituent, and the unexplained rest.

    Constituents are clipped to the actuation and swept in start order; time that an
    earlier one already covers is not counted again (Kubernetes timestamps are truncated to
    whole seconds, so ``L.created`` may fall a little before ``D.bound``).  The parts thus
    add up exactly to ``T_actuation``, and ``unexplained`` is the time no span covers.
    """
    a0, a1 = actuation
    total = max(0, a1 - a0)
    out: dict[str, float] = defaultdict(float)
    covered = a0
    explained = 0
    for name, s, e in sorted(constituents, key=lambda c: (c[1], _MODEL_ORDER.get(c[0], 99), c[0])):
        lo, hi = max(s, covered), min(e, a1)
        if hi > lo:
            out[name] += (hi - lo) / S
            explained += hi - lo
            covered = hi
        else:
            out.setdefault(name, 0.0)
    return dict(out), max(0, total - explained) / S


@dataclass(frozen=True)
class PhaseStats:
    """One phase's seconds over one path's finished actuations: mean and percentiles."""

    name: str
    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class Breakdown:
    """Seconds per constituent (and unexplained) over one path's finished actuations.

    ``parts`` are means, because means add up: the stacked bar's length is the mean
    ``T_actuation``.  ``phases`` gives each part's percentiles too (per actuation, the
    seconds attributed to that part), and ``total`` those of ``T_actuation`` itself;
    percentiles do not add up, so they are a table beside the bar, not the bar.
    """

    path: str
    n: int
    parts: tuple[tuple[str, float], ...]  # in CONSTITUENTS order, UNEXPLAINED last
    mean_total: float
    phases: tuple[PhaseStats, ...] = ()
    total: PhaseStats | None = None

    @property
    def baseline(self) -> bool:
        return self.path == COLD_NO_FMA


def _phase(name: str, values: list[float]) -> PhaseStats:
    v = sorted(values)
    p50, p90, p99 = (nearest_rank(v, q) for q in PHASE_PERCENTILES)
    return PhaseStats(name, sum(v) / len(v), p50, p90, p99)


def breakdowns(summaries: Iterable[TraceSummary]) -> list[Breakdown]:
    """One :class:`Breakdown` per path that has constituents and finished actuations.

    The ``cold_no_fma`` baseline gets one too, of one part (its whole actuation): it is
    what the FMA paths are measured against.
    """
    per_act: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    totals: dict[str, list[float]] = defaultdict(list)
    for t in summaries:
        if t.actuation is None or not t.finished:
            continue
        if t.path == COLD_NO_FMA:
            parts, rest = {BASELINE_PART: t.actuation_s or 0.0}, 0.0
        elif t.path in CONSTITUENTS:
            parts, rest = attribute(t.actuation, t.constituents)
        else:
            continue
        totals[t.path].append(t.actuation_s or 0.0)
        for name in _names_of(t.path):
            per_act[t.path][name].append(rest if name == UNEXPLAINED else parts.get(name, 0.0))
    out: list[Breakdown] = []
    for path in sorted(totals, key=_path_key):
        n = len(totals[path])
        names = _names_of(path)
        phases = tuple(_phase(name, per_act[path][name]) for name in names)
        parts_t = tuple((p.name, p.mean) for p in phases)
        total = _phase(ACTUATION, totals[path])
        out.append(Breakdown(path, n, parts_t, total.mean, phases, total))
    return out


def _names_of(path: str) -> tuple[str, ...]:
    if path == COLD_NO_FMA:
        return (BASELINE_PART,)
    return (*CONSTITUENTS[path], UNEXPLAINED)


def _path_key(path: str) -> tuple[int, str]:
    return (PATH_ORDER.index(path), "") if path in PATH_ORDER else (len(PATH_ORDER), path)


# --------------------------------------------------------------------------- selection


def slowest(summaries: Iterable[TraceSummary], n: int) -> list[TraceSummary]:
    """The ``n`` finished actuations with the longest ``T_actuation`` (ties: trace id)."""
    done = [t for t in summaries if t.finished and t.actuation is not None]
    done.sort(key=lambda t: (-(t.actuation_s or 0.0), t.trace_id))
    return done[: max(0, n)]


def unfinished(summaries: Iterable[TraceSummary], n: int) -> list[TraceSummary]:
    """Up to ``n`` actuations that never finished, earliest first: the ones to look at."""
    out = [t for t in summaries if not t.finished]
    out.sort(key=lambda t: (t.start_ns if t.start_ns is not None else 0, t.trace_id))
    return out[: max(0, n)]


# --------------------------------------------------------------------------- distributions


@dataclass(frozen=True)
class Point:
    """One finished actuation's value of a metric, with what the hover names it by."""

    seconds: float
    trace_id: str
    label: str


@dataclass(frozen=True)
class Distribution:
    """One metric: its finished values per path (sorted), and unfinished counts per path."""

    metric: str
    per_path: tuple[tuple[str, tuple[Point, ...]], ...]
    incomplete: Mapping[str, int]


def distributions(harvest: Harvest, summaries: Mapping[str, TraceSummary]) -> list[Distribution]:
    """Per metric per path, the same samples that ``slo`` summarizes (complete ones only)."""
    ds = harvest.dataset()
    vals: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    inc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for smp in ds.samples:
        if not smp.complete:
            inc[smp.metric][smp.path] += 1
            vals[smp.metric].setdefault(smp.path, [])
            continue
        t = summaries.get(smp.trace_id)
        label = t.label if t is not None else smp.trace_id
        vals[smp.metric][smp.path].append(Point(smp.duration_s, smp.trace_id, label))

    out: list[Distribution] = []
    for metric in sorted(vals, key=_metric_key):
        per_path = tuple(
            (p, tuple(sorted(vals[metric][p], key=lambda x: (x.seconds, x.trace_id))))
            for p in sorted(vals[metric], key=_path_key)
        )
        out.append(Distribution(metric, per_path, dict(inc[metric])))
    return out


def thin(points: Sequence[Point], limit: int) -> list[Point]:
    """At most ``limit`` of the sorted ``points``, evenly by rank, always keeping both ends.

    Why: a strip plot of 100k dots is megabytes of SVG and shows nothing more than 400
    do; the extremes are kept because the slowest actuation is the one people look for.
    """
    n = len(points)
    if n <= limit:
        return list(points)
    if limit <= 1:
        return [points[-1]]
    idx = sorted({round(i * (n - 1) / (limit - 1)) for i in range(limit)})
    return [points[i] for i in idx]


# --------------------------------------------------------------------------- over time


@dataclass(frozen=True)
class TrendPoint:
    """One finished actuation's value of a metric at the time its actuation began."""

    x_ns: int
    seconds: float
    trace_id: str
    label: str


@dataclass(frozen=True)
class Trend:
    """One metric over time: per path, points in time order and how many there were."""

    metric: str
    per_path: tuple[tuple[str, tuple[TrendPoint, ...], int], ...]


#: points drawn per path and metric over time (beyond it: evenly by time, plus the slowest)
MAX_TREND_POINTS = 300


def trends(summaries: Iterable[TraceSummary], limit: int = MAX_TREND_POINTS) -> list[Trend]:
    """Per metric, per path: (actuation start, seconds) of finished actuations.

    Finished actuations and finished metric spans only, as in the distributions and
    ``slo``: an unfinished duration is only a lower bound.  x is the actuation's start
    (``R.started``) for every metric, so one actuation sits at one x in every panel.
    """
    vals: dict[str, dict[str, list[TrendPoint]]] = defaultdict(lambda: defaultdict(list))
    for t in summaries:
        x = t.actuation_start_ns
        if not t.finished or x is None:
            continue
        for metric, secs in t.metrics.items():
            if metric not in t.open_metrics:
                vals[metric][t.path].append(TrendPoint(x, secs, t.trace_id, t.label))
    out: list[Trend] = []
    for metric in sorted(vals, key=_metric_key):
        per_path = []
        for path in sorted(vals[metric], key=_path_key):
            pts = sorted(vals[metric][path], key=lambda p: (p.x_ns, p.trace_id))
            per_path.append((path, tuple(thin_series(pts, limit)), len(pts)))
        out.append(Trend(metric, tuple(per_path)))
    return out


def thin_series(points: Sequence[TrendPoint], limit: int) -> list[TrendPoint]:
    """At most ``limit`` of the time-ordered ``points``: evenly by time, plus the slowest.

    Why both: every k-th point keeps the shape of the cloud (a per-slice min and max would
    draw two false bands), and the slowest tenth of the budget keeps the spikes, which are
    what a trend is read for.  The result is in time order.
    """
    n = len(points)
    if n <= limit or limit < 2:
        return list(points)
    spikes = max(1, limit // 10)
    slowest_idx = sorted(range(n), key=lambda i: (-points[i].seconds, i))[:spikes]
    even = limit - spikes
    keep = {round(i * (n - 1) / (even - 1)) for i in range(even)} if even > 1 else {0}
    keep.update(slowest_idx)
    return [points[i] for i in sorted(keep)]


def time_range(summaries: Iterable[TraceSummary]) -> tuple[int, int] | None:
    """The first and last instant of any span in the file: the time the capture covers."""
    lo = hi = None
    for t in summaries:
        if t.start_ns is not None and (lo is None or t.start_ns < lo):
            lo = t.start_ns
        if t.end_ns is not None and (hi is None or t.end_ns > hi):
            hi = t.end_ns
    return None if lo is None or hi is None else (lo, max(lo, hi))


def _metric_key(m: str) -> tuple[int, str]:
    return (METRICS.index(m), "") if m in METRICS else (len(METRICS), m)


# --------------------------------------------------------------------------- everything


@dataclass
class ReportData:
    """All the report draws: the ``slo`` report, verdicts and the report's own views."""

    source: str
    traces: int
    report: Report
    verdicts: list[Verdict]
    distributions: list[Distribution]
    breakdowns: list[Breakdown]
    slowest: list[TraceSummary]
    unfinished: list[TraceSummary]
    #: trace id -> its full spans, only for the actuations drawn as waterfalls
    spans: dict[str, list[SpanRecord]] = field(default_factory=dict)
    skipped_lines: int = 0
    #: every actuation, earliest first: the report's table of all of them
    actuations: list[TraceSummary] = field(default_factory=list)
    time_range: tuple[int, int] | None = None
    trends: list[Trend] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return self.traces == 0


def prepare(
    source: str,
    harvest: Harvest,
    summaries: Summaries,
    checks: list[Check],
    top: int,
) -> ReportData:
    """Decide everything but the full spans of the chosen actuations (a second pass)."""
    report = build_report(harvest.dataset())
    by_trace = summaries.by_trace
    return ReportData(
        source=source,
        traces=len(by_trace),
        report=report,
        verdicts=evaluate(checks, report),
        distributions=distributions(harvest, by_trace),
        breakdowns=breakdowns(by_trace.values()),
        slowest=slowest(by_trace.values(), top),
        unfinished=unfinished(by_trace.values(), top),
        actuations=sorted(by_trace.values(), key=_start_key),
        time_range=time_range(by_trace.values()),
        trends=trends(by_trace.values()),
    )


def _start_key(t: TraceSummary) -> tuple[int, str]:
    x = t.actuation_start_ns
    return (x if x is not None else 0, t.trace_id)
