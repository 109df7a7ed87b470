"""What the report shows, as plain data: no files, no plotting, so every figure is testable.

Why a separate layer: the figures (:mod:`.figures`) and the HTML (:mod:`.html`) only draw
what is decided here, and the decisions are the ones worth testing exactly — which
actuations are the slowest, what an unfinished actuation looks like, where the time went
(the leaf spans under ``fma.actuation``, :mod:`fma_otel.query.breakdown`, shared with
``slo --breakdown``).

The statistics themselves (nearest-rank percentiles, hit rates, SLO verdicts) are not
recomputed here: they come from :mod:`fma_otel.query`, the engine behind ``fma-otel slo``,
so the report and ``slo`` can never disagree on a figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..jsonsafe import seconds_or_none
from ..model import (
    A_COMPLETE,
    A_MAX,
    A_METRIC,
    A_MIN,
    A_MISSING,
    A_PATH,
    A_REQ_NAME,
    ROOT,
    STATUS_ERROR,
    UNKNOWN,
    S,
)
from ..query.breakdown import ActuationSplit, PathBreakdown, TreeCollector, summarize_paths
from ..query.harvest import Harvest, opt_bool
from ..query.slo_spec import Check, Verdict, evaluate
from ..query.stats import Report, build_report, metric_order, path_order
from ..span_records import SpanRecord

#: the percentiles marked, with their intervals, on each distribution
DRAWN_PERCENTILES: tuple[int, ...] = (50, 90, 99)

ACTUATION = "fma.actuation"


# --------------------------------------------------------------------------- per trace


@dataclass
class TraceSummary:
    """The little the report keeps of every actuation while streaming a large file."""

    trace_id: str
    requester: str = "?"
    path: str = UNKNOWN
    has_root: bool = False
    complete: bool = True
    status: str = ""
    start_ns: int | None = None
    actuation: tuple[int, int] | None = None
    actuation_complete: bool = True
    end_ns: int | None = None
    #: instants the bridge never saw (``fma.missing`` on the root), in its order
    missing: tuple[str, ...] = ()
    #: metric -> seconds, from the first span carrying it; ``open_metrics`` holds the names
    #: whose span never finished (the value is then only a lower bound)
    metrics: dict[str, float] = field(default_factory=dict)
    open_metrics: tuple[str, ...] = ()  # a tuple: usually empty, and 100k of them add up
    #: metric -> ``(fma.duration.min_s, fma.duration.max_s)`` where the span says them
    metric_bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

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


class Summaries:
    """Streams spans into one :class:`TraceSummary` per trace (spans in any order), and into
    the ``slo`` engine's harvest, which keeps every span's place in its tree for the
    breakdown (:mod:`fma_otel.query.breakdown`)."""

    def __init__(self) -> None:
        self.by_trace: dict[str, TraceSummary] = {}
        self.tree = TreeCollector()
        #: the ``slo`` engine's harvest of the same spans (it keeps the tree too)
        self.harvest = Harvest(self.tree)

    def add(self, s: SpanRecord) -> None:
        self.harvest.add(s)
        t = self.by_trace.get(s.trace_id)
        if t is None:
            t = self.by_trace[s.trace_id] = TraceSummary(s.trace_id)
        a = s.attributes
        if t.requester == "?" and a.get(A_REQ_NAME):
            t.requester = str(a[A_REQ_NAME])
        if t.path == UNKNOWN and a.get(A_PATH):
            t.path = str(a[A_PATH])
        if not t.has_root and (t.start_ns is None or s.start_ns < t.start_ns):
            t.start_ns = s.start_ns
        if t.end_ns is None or s.end_ns > t.end_ns:
            t.end_ns = s.end_ns
        metric = a.get(A_METRIC)
        done = s.status_code != STATUS_ERROR and opt_bool(a.get(A_COMPLETE)) is not False
        if metric and str(metric) not in t.metrics:
            t.metrics[str(metric)] = max(0, s.end_ns - s.start_ns) / S
            lo, hi = seconds_or_none(a.get(A_MIN)), seconds_or_none(a.get(A_MAX))
            if lo is not None and hi is not None:
                t.metric_bounds[str(metric)] = (lo, hi)
            if not done:
                t.open_metrics += (str(metric),)
        if s.name == ROOT and not s.parent_span_id:
            t.has_root = True
            t.start_ns = s.start_ns
            t.complete = done
            t.status = s.status_message if s.status_code == STATUS_ERROR else ""
            if a.get(A_PATH):
                t.path = str(a[A_PATH])
            missing = a.get(A_MISSING)
            if missing:
                t.missing = tuple(str(x) for x in missing) if isinstance(missing, list) else (str(missing),)
        elif s.name == ACTUATION:
            t.actuation = (s.start_ns, max(s.start_ns, s.end_ns))
            t.actuation_complete = done


# --------------------------------------------------------------------------- where did the time go


def actuation_splits(summaries: Summaries) -> list[tuple[str, ActuationSplit]]:
    """Each finished actuation taken apart into its leaf spans (and what they leave
    uncovered), whatever their names (:mod:`fma_otel.query.breakdown`, the engine of
    ``slo --breakdown``)."""
    done = {tid: (t.path, t.finished and t.actuation is not None) for tid, t in summaries.by_trace.items()}
    return summaries.tree.splits(done)


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
    """One finished actuation's value of a metric, with what the hover names it by; over
    time, at ``x_ns``, when its actuation began."""

    seconds: float
    trace_id: str
    label: str
    x_ns: int = 0


@dataclass(frozen=True)
class Distribution:
    """One metric: its finished values per path (sorted), and unfinished counts per path.

    ``percentiles`` per path: ``(q, value, lo, hi)`` for p50, p90 and p99, the interval
    ``[lo, hi]`` being where the true percentile can be (:mod:`fma_otel.query.stats`).
    """

    metric: str
    per_path: tuple[tuple[str, tuple[Point, ...]], ...]
    incomplete: Mapping[str, int]
    percentiles: Mapping[str, tuple[tuple[int, float, float, float], ...]] = field(default_factory=dict)


def distributions(summaries: Summaries, report: Report | None = None) -> list[Distribution]:
    """Per metric per path, the same samples that ``slo`` summarizes (complete ones only),
    and the percentiles of ``report`` (the ``slo`` engine's; built here when not given)."""
    ds = summaries.harvest.dataset()
    vals: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    inc: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for smp in ds.samples:
        if not smp.complete:
            inc[smp.metric][smp.path] += 1
            vals[smp.metric].setdefault(smp.path, [])
            continue
        t = summaries.by_trace.get(smp.trace_id)
        label = t.label if t is not None else smp.trace_id
        vals[smp.metric][smp.path].append(Point(smp.duration_s, smp.trace_id, label))

    marks: dict[str, dict[str, tuple[tuple[int, float, float, float], ...]]] = defaultdict(dict)
    for row in (report or build_report(ds)).rows:
        if row.n:
            marks[row.metric][row.path] = tuple(
                (q, getattr(row, f"p{q}"), *row.interval(q)) for q in DRAWN_PERCENTILES
            )
    out: list[Distribution] = []
    for metric in sorted(vals, key=metric_order):
        per_path = tuple(
            (p, tuple(sorted(vals[metric][p], key=lambda x: (x.seconds, x.trace_id))))
            for p in sorted(vals[metric], key=path_order)
        )
        out.append(Distribution(metric, per_path, dict(inc[metric]), dict(marks[metric])))
    return out


def thin(points: Sequence[Point], limit: int) -> list[Point]:
    """At most ``limit`` of the sorted ``points``, evenly by rank, always keeping both ends.

    Why: a strip plot of 100k dots is megabytes of SVG and shows nothing more than 400
    do; the extremes are kept because the slowest actuation is the one people look for.
    """
    if len(points) <= limit:
        return list(points)
    if limit <= 1:
        return [points[-1]]
    return [points[i] for i in sorted(_evenly(len(points), limit))]


def _evenly(n: int, k: int) -> set[int]:
    """``k`` indexes of ``n`` spread evenly, the first and the last among them."""
    return {round(i * (n - 1) / (k - 1)) for i in range(k)} if k > 1 else {0}


# --------------------------------------------------------------------------- over time


@dataclass(frozen=True)
class Trend:
    """One metric over time: per path, points in time order and how many there were."""

    metric: str
    per_path: tuple[tuple[str, tuple[Point, ...], int], ...]


#: points drawn per path and metric over time (beyond it: evenly by time, plus the slowest)
MAX_TREND_POINTS = 300


def trends(summaries: Iterable[TraceSummary], limit: int = MAX_TREND_POINTS) -> list[Trend]:
    """Per metric, per path: (actuation start, seconds) of finished actuations.

    Finished actuations and finished metric spans only, as in the distributions and
    ``slo``: an unfinished duration is only a lower bound.  x is the actuation's start
    (``R.started``) for every metric, so one actuation sits at one x in every panel.
    """
    vals: dict[str, dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for t in summaries:
        x = t.actuation_start_ns
        if not t.finished or x is None:
            continue
        for metric, secs in t.metrics.items():
            if metric not in t.open_metrics:
                vals[metric][t.path].append(Point(secs, t.trace_id, t.label, x))
    out: list[Trend] = []
    for metric in sorted(vals, key=metric_order):
        per_path = []
        for path in sorted(vals[metric], key=path_order):
            pts = sorted(vals[metric][path], key=lambda p: (p.x_ns, p.trace_id))
            per_path.append((path, tuple(thin_series(pts, limit)), len(pts)))
        out.append(Trend(metric, tuple(per_path)))
    return out


def thin_series(points: Sequence[Point], limit: int) -> list[Point]:
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
    keep = _evenly(n, even) | set(slowest_idx)
    return [points[i] for i in sorted(keep)]


def time_range(summaries: Collection[TraceSummary]) -> tuple[int, int] | None:
    """The first and last instant of any span in the file: the time the capture covers."""
    lo = min((t.start_ns for t in summaries if t.start_ns is not None), default=None)
    hi = max((t.end_ns for t in summaries if t.end_ns is not None), default=None)
    return None if lo is None or hi is None else (lo, max(lo, hi))


# --------------------------------------------------------------------------- everything


@dataclass
class ReportData:
    """All the report draws: the ``slo`` report, verdicts and the report's own views."""

    source: str
    traces: int
    report: Report
    verdicts: list[Verdict]
    distributions: list[Distribution]
    breakdowns: list[PathBreakdown]
    slowest: list[TraceSummary]
    unfinished: list[TraceSummary]
    #: trace id -> its full spans, only for the actuations drawn as waterfalls
    spans: dict[str, list[SpanRecord]] = field(default_factory=dict)
    skipped_lines: int = 0
    #: the units (lines, or documents) read, of which ``skipped_lines`` were skipped
    lines: int = 0
    #: every actuation, earliest first: the report's table of all of them
    actuations: list[TraceSummary] = field(default_factory=list)
    time_range: tuple[int, int] | None = None
    trends: list[Trend] = field(default_factory=list)
    #: trace id -> the share of its ``T_actuation`` that named leaf spans cover
    covered: dict[str, float] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.traces == 0


def prepare(
    source: str,
    summaries: Summaries,
    checks: list[Check],
    top: int,
) -> ReportData:
    """Decide everything but the full spans of the chosen actuations (a second pass)."""
    report = build_report(summaries.harvest.dataset())
    by_trace = summaries.by_trace
    splits = actuation_splits(summaries)
    return ReportData(
        source=source,
        traces=len(by_trace),
        report=report,
        verdicts=evaluate(checks, report),
        distributions=distributions(summaries, report),
        breakdowns=summarize_paths(splits),
        slowest=slowest(by_trace.values(), top),
        unfinished=unfinished(by_trace.values(), top),
        actuations=sorted(by_trace.values(), key=lambda t: (t.actuation_start_ns or 0, t.trace_id)),
        time_range=time_range(by_trace.values()),
        trends=trends(by_trace.values()),
        covered={sp.trace_id: sp.covered_share for _path, sp in splits},
    )
