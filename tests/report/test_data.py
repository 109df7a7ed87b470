"""The report's decisions as plain data: attribution, selection, distributions."""

from __future__ import annotations

import pytest

from fma_otel.model import COLD_LAUNCHER, COLD_NO_FMA, HOT, S
from fma_otel.query.breakdown import PathBreakdown, summarize_paths
from fma_otel.query.stats import build_report
from fma_otel.report.data import (
    Point,
    Summaries,
    actuation_splits,
    distributions,
    slowest,
    thin,
    thin_series,
    time_range,
    trends,
    unfinished,
)

from .conftest import T0, span


def bar_parts(bd: PathBreakdown) -> tuple[tuple[str, float], ...]:
    """The stacked bar of a path: ``(label, mean seconds)`` of its leaves and uncovered rows."""
    return tuple((r.label, r.part_s) for r in (*bd.leaves, *bd.uncovered))


def breakdowns(sm: Summaries) -> list[PathBreakdown]:
    """Where the time of each path's finished actuations goes, as the report draws it."""
    return summarize_paths(actuation_splits(sm))


def _s(x: float) -> int:
    return round(x * S)


def hot_trace(tid: str, name: str, t_act: float, gap: float = 0.0, complete: bool = True) -> list:
    root = span(tid, "fma.request", 0, 1 + t_act, None, "a" * 16, **{
        "fma.path": HOT, "fma.requester.name": name, "fma.complete": complete})  # fmt: skip
    act = span(
        tid,
        "fma.actuation",
        1,
        1 + t_act,
        "a" * 16,
        "b" * 16,
        **{"fma.metric": "T_actuation", "fma.path": HOT},
    )
    bind = span(tid, "fma.dpc.bind", 1, 2, "b" * 16, "c" * 16, **{"fma.path": HOT})
    wake = span(
        tid,
        "fma.vllm.wake",
        2 + gap,
        1 + t_act,
        "b" * 16,
        "d" * 16,
        **{"fma.path": HOT, "fma.metric": "T_wake"},
    )
    return [root, act, bind, wake]


def cold_trace(tid: str, name: str, weights: float) -> list:
    """A cold_launcher actuation of 60 s with leaves the bridge does not make yet: an image
    pull and a container start under fma.launcher.startup, vLLM's phases under
    fma.vllm.ready (weights loading takes ``weights`` s, then a gap, then CUDA graphs)."""
    p = {"fma.path": COLD_LAUNCHER}

    def sp(sid: str, parent: str | None, span_name: str, a: float, b: float, **kw: object) -> object:
        return span(tid, span_name, a, b, parent and parent * 16, sid * 16, **p, **kw)

    return [
        sp("a", None, "fma.request", -2, 60, **{"fma.requester.name": name, "fma.complete": True}),
        sp("b", "a", "fma.actuation", 0, 60, **{"fma.metric": "T_actuation"}),
        sp("c", "b", "fma.dpc.bind", 0, 1),
        sp("d", "b", "fma.launcher.cold_start", 1, 58),
        sp("e", "d", "fma.launcher.startup", 2, 30),
        sp("f", "e", "k8s.image.pull", 2, 6),
        sp("1", "e", "k8s.container.start", 12, 30),
        sp("2", "d", "fma.launcher.schedule", 1, 2),
        sp("3", "d", "fma.dpc.react", 30, 31),
        sp("4", "d", "fma.instance.ready", 31, 58),
        sp("5", "4", "fma.vllm.ready", 31, 57),
        sp("6", "5", "vllm.load_weights", 31, 31 + weights),
        sp("7", "5", "vllm.cuda_graphs", 42, 57),
        sp("8", "4", "fma.readiness.relay", 57, 58),
        sp("9", "b", "fma.kubelet.probe", 58, 60),
    ]


def summaries_of(*traces: list) -> Summaries:
    sm = Summaries()
    for tr in traces:
        for s in reversed(tr):  # any order
            sm.add(s)
    return sm


def test_summaries_and_breakdown_means():
    sm = summaries_of(hot_trace("1" * 32, "r1", 4.0), hot_trace("2" * 32, "r2", 8.0, gap=2.0))
    t = sm.by_trace["1" * 32]
    assert (t.requester, t.path, t.finished, t.actuation_s) == ("r1", HOT, True, 4.0)
    (bd,) = breakdowns(sm)
    assert (bd.path, bd.n, bd.total.mean) == (HOT, 2, 6.0)
    parts = dict(bar_parts(bd))
    assert list(parts) == ["fma.dpc.bind", "fma.vllm.wake", "uncovered in fma.actuation"]
    assert parts["fma.dpc.bind"] == 1.0
    assert parts["fma.vllm.wake"] == pytest.approx((3.0 + 5.0) / 2)
    assert parts["uncovered in fma.actuation"] == pytest.approx(1.0)  # the 2 s gap of r2, averaged
    assert sum(parts.values()) == pytest.approx(bd.total.mean)
    assert bd.min_covered_share == pytest.approx(6 / 8)


def test_unfinished_is_not_broken_down_and_the_baseline_is_beside():
    base = [span("3" * 32, "fma.request", 0, 9, None, "a" * 16, **{"fma.path": COLD_NO_FMA}),
            span("3" * 32, "fma.actuation", 1, 9, "a" * 16, "b" * 16, **{"fma.path": COLD_NO_FMA})]  # fmt: skip
    sm = summaries_of(hot_trace("4" * 32, "r4", 50.0, complete=False), base)
    (bd,) = breakdowns(sm)
    assert (bd.path, bd.n, bd.baseline, bar_parts(bd)) == (
        COLD_NO_FMA,
        1,
        True,
        (("uncovered in fma.actuation", 8.0),),
    )
    assert [t.requester for t in unfinished(sm.by_trace.values(), 5)] == ["r4"]
    assert [t.trace_id for t in slowest(sm.by_trace.values(), 5)] == ["3" * 32]


def test_breakdown_percentiles_per_leaf_are_nearest_rank_and_new_leaves_appear():
    # 10 hot actuations: T_actuation 1..10 s, bind 1 s each, wake the rest; vLLM's own
    # wake phase (a span the bridge does not make yet) inside the wake call
    traces = []
    for i in range(1, 11):
        tr = hot_trace(f"{i:032x}", f"r{i}", float(i))
        tr.append(span(f"{i:032x}", "vllm.wake_up", 2.5, 1 + i, "d" * 16, "e" * 16, **{"fma.path": HOT}))
        traces.append(tr)
    (bd,) = breakdowns(summaries_of(*traces))
    rows = {r.label: r for r in bd.rows}
    assert "fma.vllm.wake" not in rows  # it has a child now: not a leaf
    wake_up = rows["vllm.wake_up"]
    # i=1: a zero-length leaf (it ends before it starts) still occurred
    assert (wake_up.seen, wake_up.p50, wake_up.p90, wake_up.p99) == (10, 3.5, 7.5, 8.5)
    gap = rows["uncovered in fma.vllm.wake"]
    assert (gap.p50, gap.seen) == (0.5, 9)  # i=1: the wake call itself is zero-length
    bind = rows["fma.dpc.bind"]
    assert (bind.mean, bind.p50, bind.p99) == (1.0, 1.0, 1.0)
    assert (bd.total.p50, bd.total.p90, bd.total.p99, bd.total.mean) == (5.0, 9.0, 10.0, 5.5)
    assert bd.rows[-1].kind == "covered"


def test_slowest_orders_by_t_actuation_and_limits():
    sm = summaries_of(*(hot_trace(str(i) * 32, f"r{i}", float(i)) for i in range(1, 6)))
    assert [t.requester for t in slowest(sm.by_trace.values(), 3)] == ["r5", "r4", "r3"]
    assert slowest(sm.by_trace.values(), 0) == []


def test_distributions_are_the_slo_engines_samples():
    traces = [hot_trace(str(i) * 32, f"r{i}", float(i)) for i in range(1, 4)]
    traces.append(hot_trace("9" * 32, "r9", 99.0, complete=False))
    sm = summaries_of(*traces)
    dists = {d.metric: d for d in distributions(sm)}
    act = dists["T_actuation"]
    ((path, pts),) = act.per_path
    assert path == HOT and [p.seconds for p in pts] == [1.0, 2.0, 3.0]
    assert pts[0].label == f"r1 / {'1' * 32}"
    assert act.incomplete == {HOT: 1}
    row = next(r for r in build_report(sm.harvest.dataset()).rows if r.metric == "T_actuation")
    assert (row.n, row.max, row.incomplete) == (3, 3.0, 1)


def test_thin_keeps_both_ends_and_limit():
    pts = [Point(float(i), str(i), str(i)) for i in range(1000)]
    out = thin(pts, 50)
    assert len(out) == 50 and out[0].seconds == 0.0 and out[-1].seconds == 999.0
    assert thin(pts[:10], 50) == pts[:10]


def test_summary_keeps_metrics_missing_and_the_time_range():
    tr = hot_trace("5" * 32, "r5", 6.0, complete=False)
    tr[0] = span("5" * 32, "fma.request", 0, 7, None, "a" * 16, **{
        "fma.path": HOT, "fma.requester.name": "r5", "fma.complete": False,
        "fma.missing": ["R.ready", "D.relayed"]})  # fmt: skip
    tr[3] = span("5" * 32, "fma.vllm.wake", 2, 7, "b" * 16, "d" * 16, status="ERROR",
                 **{"fma.path": HOT, "fma.metric": "T_wake", "fma.complete": False})  # fmt: skip
    sm = summaries_of(tr, hot_trace("6" * 32, "r6", 3.0))
    t = sm.by_trace["5" * 32]
    assert t.missing == ("R.ready", "D.relayed")
    assert t.metrics == {"T_actuation": 6.0, "T_wake": 5.0}
    assert t.open_metrics == ("T_wake",)
    assert t.actuation_start_ns == T0 + S
    assert time_range(sm.by_trace.values()) == (T0, T0 + 7 * S)
    assert time_range([]) is None


def test_trends_are_finished_values_at_the_actuation_start():
    late = [
        span(s.trace_id, s.name, s.start_ns / S - T0 / S + 100, s.end_ns / S - T0 / S + 100,
             s.parent_span_id, s.span_id, **s.attributes)
        for s in hot_trace("7" * 32, "r7", 2.0)
    ]  # fmt: skip
    sm = summaries_of(hot_trace("8" * 32, "r8", 4.0), late, hot_trace("9" * 32, "r9", 9.0, complete=False))
    by_metric = {t.metric: t for t in trends(sm.by_trace.values())}
    assert list(by_metric) == ["T_actuation", "T_wake"]
    ((path, pts, n),) = by_metric["T_actuation"].per_path
    assert (path, n) == (HOT, 2)  # r9 never finished: not a point
    assert [(p.x_ns - T0, p.seconds, p.label.split(" /")[0]) for p in pts] == [
        (S, 4.0, "r8"),
        (101 * S, 2.0, "r7"),
    ]


def test_thin_series_keeps_the_shape_and_the_spikes():
    pts = [Point(1.0 + (50.0 if i == 537 else 0.0) + (i % 7) * 0.01, str(i), "", i) for i in range(1000)]
    out = thin_series(pts, 40)
    assert len(out) <= 40
    assert any(p.trace_id == "537" for p in out)  # the spike survives
    assert out[0].x_ns == 0 and out[-1].x_ns == 999  # the whole time range
    assert [p.x_ns for p in out] == sorted(p.x_ns for p in out)
    gaps = [b.x_ns - a.x_ns for a, b in zip(out, out[1:], strict=False)]
    assert max(gaps) <= 2 * 1000 / 36  # evenly by time, not bunched
    assert thin_series(pts[:10], 40) == pts[:10]
