"""Where the time of an actuation goes: its named leaf spans, and what no leaf covers.

Generic over span names on purpose: the tree under ``fma.actuation`` grows (vLLM's own
phases under ``fma.vllm.ready``, image pulls and container starts under
``fma.launcher.startup``, the DPC's poll lag ...), and this view must show new spans the
day they appear, without a list of names to keep up to date.  So it reads only the tree:

- the *leaves* are the spans under ``fma.actuation`` that have no children, except that a
  span the model makes once per DPC call (``repeated``: its API writes, its reclaiming
  deletes) is a leaf without making its parent a non-leaf: a write of a few ms inside
  ``fma.dpc.bind`` times that call, it does not say what the rest of the wait was;
- the share of ``T_actuation`` they cover is the length of the *union* of the leaves,
  each clipped to ``fma.actuation`` (overlapping leaves, such as ``fma.instance.create``
  beside ``fma.vllm.ready``, are not counted twice);
- time that no leaf covers is shown, never hidden: each uncovered instant is charged to
  the deepest span that contains it (``fma.vllm.ready`` when vLLM's phases leave a gap
  inside it, ``fma.actuation`` itself when nothing below covers it), one "uncovered" row
  per such parent.

For a stacked bar the parts must not overlap, so each covered instant is also given to
one leaf: the *shortest* leaf covering it (the most specific one).  Those exclusive
seconds plus the uncovered ones add up to ``T_actuation`` exactly; a leaf's own duration,
whose percentiles the table gives, is its whole span.

Statistics are per path, over complete actuations only, nearest rank as everywhere in
``slo`` (:func:`.stats.nearest_rank`).
"""

from __future__ import annotations

import heapq
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from ..jsonsafe import seconds_or_none
from ..model import A_MAX, A_MIN, COLD_NO_FMA, SPANS, S
from ..span_records import SpanRecord
from .stats import Intervals, path_order, percentiles

ACTUATION = "fma.actuation"
#: spans made once per DPC call: they never turn their parent into a non-leaf
_PER_CALL = frozenset(d.name for d in SPANS if d.repeated)
#: the percentiles the breakdown gives per leaf (nearest rank, as ``slo``)
BREAKDOWN_PERCENTILES: tuple[int, ...] = (50, 90, 99)
#: the label of an "uncovered" row: ``uncovered in fma.vllm.ready``
UNCOVERED = "uncovered in "


class LeanSpan(NamedTuple):
    """What the breakdown needs of one span: the tree and the times."""

    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    #: ``fma.duration.min_s``/``max_s`` where the span says them
    lo_s: float | None = None
    hi_s: float | None = None


@dataclass
class ActuationSplit:
    """One complete actuation taken apart (seconds)."""

    total_s: float
    covered_s: float
    #: leaf name -> its duration (summed when the name occurs more than once)
    leaves: dict[str, float] = field(default_factory=dict)
    #: leaf name -> the interval that duration lies in (summed likewise; the duration
    #: itself on both ends for a span that does not say)
    leaf_bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: the interval ``T_actuation`` lies in
    total_bounds: tuple[float, float] = (0.0, 0.0)
    #: leaf name -> the seconds of ``T_actuation`` given to it (disjoint)
    exclusive: dict[str, float] = field(default_factory=dict)
    #: parent name -> the seconds inside it that no leaf covers (disjoint)
    uncovered: dict[str, float] = field(default_factory=dict)
    #: leaf or parent name -> its first start, seconds after the actuation's start
    offset: dict[str, float] = field(default_factory=dict)
    #: the trace it came from (set by :meth:`TreeCollector.splits`)
    trace_id: str = ""

    @property
    def covered_share(self) -> float:
        """The share of ``T_actuation`` the leaves cover (1 for a zero-length actuation)."""
        return self.covered_s / self.total_s if self.total_s > 0 else 1.0


def split_actuation(spans: Sequence[LeanSpan]) -> ActuationSplit | None:
    """Take one trace's actuation apart; ``None`` when it has no ``fma.actuation`` span.

    Parent links that form a cycle or point outside the trace are not followed twice, so
    no input makes this loop.
    """
    acts = [s for s in spans if s.name == ACTUATION]
    if not acts:
        return None
    act = min(acts, key=lambda s: (s.start_ns, s.span_id))
    a0, a1 = act.start_ns, max(act.start_ns, act.end_ns)
    children: dict[str, list[LeanSpan]] = defaultdict(list)
    for s in spans:
        if s.parent_id and s.parent_id != s.span_id:
            children[s.parent_id].append(s)
    # the subtree under the actuation, with depths (iterative: no recursion limit)
    depth: dict[str, int] = {act.span_id: 0}
    nodes: list[LeanSpan] = []
    stack = [act]
    while stack:
        node = stack.pop()
        for c in children.get(node.span_id, ()):
            if c.span_id in depth:
                continue
            depth[c.span_id] = depth[node.span_id] + 1
            nodes.append(c)
            stack.append(c)

    def splits(n: LeanSpan) -> bool:
        return any(c.name not in _PER_CALL for c in children.get(n.span_id, ()))

    leaves = [n for n in nodes if not splits(n)]
    parents = [act, *(n for n in nodes if splits(n))]
    out = ActuationSplit(total_s=(a1 - a0) / S, covered_s=0.0, total_bounds=_bounds(act))
    for leaf in leaves:
        out.leaves[leaf.name] = out.leaves.get(leaf.name, 0.0) + max(0, leaf.end_ns - leaf.start_ns) / S
        lo, hi = _bounds(leaf)
        had = out.leaf_bounds.get(leaf.name, (0.0, 0.0))
        out.leaf_bounds[leaf.name] = (had[0] + lo, had[1] + hi)
    for n in (*leaves, *parents):
        off = (n.start_ns - a0) / S
        if n.name not in out.offset or off < out.offset[n.name]:
            out.offset[n.name] = off
    # clip to the actuation; a leaf of zero length covers nothing.  A sweep over the cut
    # points with the spans active at each: the shortest active leaf, else the deepest
    # active parent, takes the segment
    lv = sorted(
        (max(x.start_ns, a0), min(x.end_ns, a1), (x.end_ns - x.start_ns, x.start_ns, x.name), x.name)
        for x in leaves
    )
    lv = [t for t in lv if t[1] > t[0]]
    pv = sorted((max(x.start_ns, a0), min(x.end_ns, a1), depth[x.span_id], x.name) for x in parents)
    pv = [t for t in pv if t[1] > t[0]]
    cuts = sorted(
        {a0, a1, *(t[0] for t in lv), *(t[1] for t in lv), *(t[0] for t in pv), *(t[1] for t in pv)}
    )
    exclusive: dict[str, int] = defaultdict(int)
    uncovered: dict[str, int] = defaultdict(int)
    covered = 0
    li = pi = 0
    # heaps with lazy removal: the best active span is at the top once the ended ones
    # above it are popped (a trace of thousands of overlapping leaves stays n log n)
    on_l: list[tuple[Any, int, str]] = []  # (key, end, name): the shortest first
    on_p: list[tuple[int, int, int, str]] = []  # (-depth, start, end, name): the deepest first
    for x, y in zip(cuts, cuts[1:], strict=False):
        while li < len(lv) and lv[li][0] <= x:
            heapq.heappush(on_l, (lv[li][2], lv[li][1], lv[li][3]))
            li += 1
        while pi < len(pv) and pv[pi][0] <= x:
            heapq.heappush(on_p, (-pv[pi][2], pv[pi][0], pv[pi][1], pv[pi][3]))
            pi += 1
        # every end is a cut, so a span still on past x covers all of [x, y)
        while on_l and on_l[0][1] <= x:
            heapq.heappop(on_l)
        if on_l:
            exclusive[on_l[0][2]] += y - x
            covered += y - x
            continue
        while on_p and on_p[0][2] <= x:
            heapq.heappop(on_p)
        owner = on_p[0][3] if on_p else act.name
        uncovered[owner] += y - x
    out.covered_s = covered / S
    out.exclusive = {k: v / S for k, v in exclusive.items()}
    for leaf in leaves:
        out.exclusive.setdefault(leaf.name, 0.0)
    out.uncovered = {k: v / S for k, v in uncovered.items()}
    return out


def _bounds(s: LeanSpan) -> tuple[float, float]:
    d = max(0, s.end_ns - s.start_ns) / S
    return (d if s.lo_s is None else s.lo_s, d if s.hi_s is None else s.hi_s)


# --------------------------------------------------------------------------- per path


@dataclass(frozen=True)
class Row(Intervals):
    """One line of the breakdown of a path.

    ``kind``: ``total`` (``T_actuation``), ``leaf``, ``uncovered`` (time inside ``name``
    that no leaf covers) or ``covered`` (the union of the leaves).  The percentiles and
    mean are over the ``seen`` actuations that have it; ``share`` is the mean seconds of
    ``T_actuation`` it accounts for (over all ``n`` actuations; a leaf's exclusive part,
    so that the shares of the leaves and uncovered rows add up to 100 %) over the mean
    ``T_actuation``.
    """

    kind: str
    name: str
    seen: int
    p50: float
    p90: float
    p99: float
    mean: float
    share: float
    #: the mean seconds of ``T_actuation`` this row accounts for, over all actuations
    part_s: float
    #: where each percentile can be (the same percentile of the lower and of the upper
    #: bounds, as in ``slo``): for ``total`` and ``leaf`` rows; ``None`` for the others,
    #: whose edges are instants of several spans
    p50_lo: float | None = None
    p50_hi: float | None = None
    p90_lo: float | None = None
    p90_hi: float | None = None
    p99_lo: float | None = None
    p99_hi: float | None = None

    @property
    def label(self) -> str:
        return UNCOVERED + self.name if self.kind == "uncovered" else self.name


@dataclass(frozen=True)
class PathBreakdown:
    """The breakdown of one path over its ``n`` complete actuations."""

    path: str
    n: int
    total: Row
    leaves: tuple[Row, ...]
    uncovered: tuple[Row, ...]
    covered: Row
    #: the smallest share of ``T_actuation`` the leaves cover in any one actuation
    min_covered_share: float
    #: the trace of that actuation, to look at
    min_covered_trace: str = ""

    @property
    def baseline(self) -> bool:
        return self.path == COLD_NO_FMA

    @property
    def rows(self) -> tuple[Row, ...]:
        """In reading order: the whole, its leaves, what they leave uncovered, the union."""
        return (self.total, *self.leaves, *self.uncovered, self.covered)


def _row(
    kind: str,
    name: str,
    values: Sequence[float],
    part_sum: float,
    n: int,
    mean_total: float,
    bounds: Sequence[tuple[float, float]] | None = None,
) -> Row:
    v = sorted(values)
    part = part_sum / n if n else 0.0
    share = part / mean_total if mean_total else 0.0
    pq = percentiles(v, bounds or (), BREAKDOWN_PERCENTILES)
    return Row(kind, name, len(v), mean=sum(v) / len(v), share=share, part_s=part, **pq)


def summarize_paths(splits: Iterable[tuple[str, ActuationSplit]]) -> list[PathBreakdown]:
    """One :class:`PathBreakdown` per path, FMA paths first, the baseline after them."""
    by_path: dict[str, list[ActuationSplit]] = defaultdict(list)
    for path, sp in splits:
        by_path[path].append(sp)
    out: list[PathBreakdown] = []
    for path in sorted(by_path, key=path_order):
        acts = by_path[path]
        n = len(acts)
        totals = [a.total_s for a in acts]
        mean_total = sum(totals) / n
        total = _row("total", ACTUATION, totals, sum(totals), n, mean_total, [a.total_bounds for a in acts])
        leaf_vals: dict[str, list[float]] = defaultdict(list)
        leaf_bounds: dict[str, list[tuple[float, float]]] = defaultdict(list)
        leaf_part: dict[str, float] = defaultdict(float)
        unc_vals: dict[str, list[float]] = defaultdict(list)
        unc_part: dict[str, float] = defaultdict(float)
        offsets: dict[str, list[float]] = defaultdict(list)
        for a in acts:
            for name, secs in a.leaves.items():
                leaf_vals[name].append(secs)
                leaf_bounds[name].append(a.leaf_bounds.get(name, (secs, secs)))
                leaf_part[name] += a.exclusive.get(name, 0.0)
            for name, secs in a.uncovered.items():
                unc_vals[name].append(secs)
                unc_part[name] += secs
            for name, off in a.offset.items():
                offsets[name].append(off)

        def order(name: str, offsets: Mapping[str, list[float]] = offsets) -> tuple[float, str]:
            offs = offsets.get(name) or [0.0]
            return (sorted(offs)[(len(offs) - 1) // 2], name)

        leaves = tuple(
            _row("leaf", name, leaf_vals[name], leaf_part[name], n, mean_total, leaf_bounds[name])
            for name in sorted(leaf_vals, key=order)
        )
        uncovered = tuple(
            _row("uncovered", name, unc_vals[name], unc_part[name], n, mean_total)
            for name in sorted(unc_vals, key=lambda m: (m != ACTUATION, order(m)))
        )
        covered_vals = [a.covered_s for a in acts]
        covered = _row("covered", "named leaves together", covered_vals, sum(covered_vals), n, mean_total)
        worst = min(acts, key=lambda a: (a.covered_share, a.trace_id))
        out.append(
            PathBreakdown(path, n, total, leaves, uncovered, covered, worst.covered_share, worst.trace_id)
        )
    return out


# --------------------------------------------------------------------------- collecting


class TreeCollector:
    """Keeps the lean tree of every trace while a source streams spans in any order.

    Only ``slo --breakdown`` and the report pay for it: the plain ``slo`` harvest keeps
    metric spans alone.  A list per trace (a span seen twice, as in a re-export, is one
    span again in :meth:`splits`), names interned: large files hold millions of spans.
    """

    def __init__(self) -> None:
        self.by_trace: dict[str, list[LeanSpan]] = defaultdict(list)

    def add(self, s: SpanRecord) -> None:
        a = s.attributes
        self.by_trace[s.trace_id].append(
            LeanSpan(
                s.span_id,
                s.parent_span_id or None,
                sys.intern(s.name),
                s.start_ns,
                s.end_ns,
                seconds_or_none(a.get(A_MIN), strings=False),
                seconds_or_none(a.get(A_MAX), strings=False),
            )
        )

    def splits(self, complete: Mapping[str, tuple[str, bool]]) -> list[tuple[str, ActuationSplit]]:
        """``(path, split)`` of each trace that ``complete`` (trace id -> (path, finished))
        says finished; the others are left out (an unfinished actuation has no duration)."""
        out: list[tuple[str, ActuationSplit]] = []
        for tid, spans in self.by_trace.items():
            path, done = complete.get(tid, ("", False))
            if not done:
                continue
            sp = split_actuation(list({x.span_id: x for x in spans}.values()))
            if sp is not None:
                sp.trace_id = tid
                out.append((path, sp))
        return out


def to_json(bds: Sequence[PathBreakdown]) -> list[dict[str, Any]]:
    """The breakdown for ``slo -o json`` (seconds; shares as fractions)."""
    return [
        {
            "path": b.path,
            "n": b.n,
            "min_covered_share": b.min_covered_share,
            "min_covered_trace": b.min_covered_trace,
            # every field of a row but part_s (the share says it), in the row's order
            "rows": [{k: v for k, v in asdict(r).items() if k != "part_s"} for r in b.rows],
        }
        for b in bds
    ]
