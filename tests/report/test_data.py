"""The report's decisions as plain data: attribution, selection, distributions."""

from __future__ import annotations

import pytest

from fma_otel.model import COLD_NO_FMA, HOT, WARM, S
from fma_otel.query.harvest import Harvest
from fma_otel.query.stats import build_report
from fma_otel.report.data import (
    UNEXPLAINED,
    Point,
    Summaries,
    TrendPoint,
    attribute,
    breakdowns,
    distributions,
    slowest,
    thin,
    thin_series,
    time_range,
    trends,
    unfinished,
)

from .conftest import T0, span


def _s(x: float) -> int:
    return round(x * S)


def test_attribute_adds_up_and_names_the_gaps():
    parts, rest = attribute(
        (_s(10), _s(20)),
        [
            ("fma.kubelet.probe", _s(17), _s(20)),
            ("fma.dpc.bind", _s(10), _s(11)),
            ("fma.vllm.wake", _s(12), _s(15)),
        ],
    )
    assert parts == {"fma.dpc.bind": 1.0, "fma.vllm.wake": 3.0, "fma.kubelet.probe": 3.0}
    assert rest == pytest.approx(3.0)  # 11..12 and 15..17 are covered by no span
    assert sum(parts.values()) + rest == pytest.approx(10.0)


def test_attribute_counts_overlaps_once_and_clips_to_the_actuation():
    # launcher created (1 s truncation) before the DPC logged the bind: overlap of 0.5 s
    parts, rest = attribute(
        (_s(0), _s(10)),
        [
            ("fma.dpc.bind", _s(0), _s(2)),
            ("fma.launcher.schedule", _s(1.5), _s(4)),
            ("fma.kubelet.probe", _s(9), _s(12)),  # runs past R.ready: clipped
        ],
    )
    assert parts["fma.dpc.bind"] == 2.0
    assert parts["fma.launcher.schedule"] == pytest.approx(2.0)
    assert parts["fma.kubelet.probe"] == pytest.approx(1.0)
    assert rest == pytest.approx(5.0)


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
    (bd,) = breakdowns(sm.values())
    assert (bd.path, bd.n, bd.mean_total) == (HOT, 2, 6.0)
    parts = dict(bd.parts)
    assert list(parts) == [
        "fma.dpc.bind",
        "fma.vllm.wake",
        "fma.readiness.relay",
        "fma.kubelet.probe",
        UNEXPLAINED,
    ]
    assert parts["fma.dpc.bind"] == 1.0
    assert parts["fma.vllm.wake"] == pytest.approx((3.0 + 5.0) / 2)
    assert parts[UNEXPLAINED] == pytest.approx(1.0)  # the 2 s gap of r2, averaged
    assert sum(parts.values()) == pytest.approx(bd.mean_total)


def test_unfinished_is_not_broken_down_and_the_baseline_is_one_part():
    base = [span("3" * 32, "fma.request", 0, 9, None, "a" * 16, **{"fma.path": COLD_NO_FMA}),
            span("3" * 32, "fma.actuation", 1, 9, "a" * 16, "b" * 16, **{"fma.path": COLD_NO_FMA})]  # fmt: skip
    sm = summaries_of(hot_trace("4" * 32, "r4", 50.0, complete=False), base)
    (bd,) = breakdowns(sm.values())
    assert (bd.path, bd.n, bd.baseline, bd.parts) == (COLD_NO_FMA, 1, True, (("fma.actuation", 8.0),))
    assert [t.requester for t in unfinished(sm.values(), 5)] == ["r4"]
    assert [t.trace_id for t in slowest(sm.values(), 5)] == ["3" * 32]


def test_breakdown_percentiles_per_phase_are_nearest_rank():
    # 10 hot actuations: T_actuation 1..10 s, bind 1 s each, wake the rest
    sm = summaries_of(*(hot_trace(f"{i:032x}", f"r{i}", float(i)) for i in range(1, 11)))
    (bd,) = breakdowns(sm.values())
    phases = {p.name: p for p in bd.phases}
    wake = phases["fma.vllm.wake"]
    assert (wake.p50, wake.p90, wake.p99) == (pytest.approx(4.0), pytest.approx(8.0), pytest.approx(9.0))
    assert wake.mean == pytest.approx(4.5)
    bind = phases["fma.dpc.bind"]
    assert (bind.mean, bind.p50, bind.p99) == (1.0, 1.0, 1.0)
    assert bd.total is not None
    assert (bd.total.p50, bd.total.p90, bd.total.p99, bd.total.mean) == (5.0, 9.0, 10.0, 5.5)
    assert [p.name for p in bd.phases][-1] == UNEXPLAINED


def test_slowest_orders_by_t_actuation_and_limits():
    sm = summaries_of(*(hot_trace(str(i) * 32, f"r{i}", float(i)) for i in range(1, 6)))
    assert [t.requester for t in slowest(sm.values(), 3)] == ["r5", "r4", "r3"]
    assert slowest(sm.values(), 0) == []


def test_distributions_are_the_slo_engines_samples():
    traces = [hot_trace(str(i) * 32, f"r{i}", float(i)) for i in range(1, 4)]
    traces.append(hot_trace("9" * 32, "r9", 99.0, complete=False))
    sm = summaries_of(*traces)
    h = Harvest()
    for tr in traces:
        for s in tr:
            h.add_span(s.trace_id, s.span_id, s.name, s.start_ns, s.end_ns, s.attributes)
    dists = {d.metric: d for d in distributions(h, sm.by_trace)}
    act = dists["T_actuation"]
    ((path, pts),) = act.per_path
    assert path == HOT and [p.seconds for p in pts] == [1.0, 2.0, 3.0]
    assert pts[0].label == f"r1 / {'1' * 32}"
    assert act.incomplete == {HOT: 1}
    row = next(r for r in build_report(h.dataset()).rows if r.metric == "T_actuation")
    assert (row.n, row.max, row.incomplete) == (3, 3.0, 1)


def test_thin_keeps_both_ends_and_limit():
    pts = [Point(float(i), str(i), str(i)) for i in range(1000)]
    out = thin(pts, 50)
    assert len(out) == 50 and out[0].seconds == 0.0 and out[-1].seconds == 999.0
    assert thin(pts[:10], 50) == pts[:10]


def test_warm_constituents_tile_instance_ready():
    from fma_otel.report.data import CONSTITUENTS

    assert "fma.instance.ready" not in CONSTITUENTS[WARM]
    assert {"fma.dpc.create_instance", "fma.vllm.ready", "fma.readiness.relay"} <= set(CONSTITUENTS[WARM])


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
    assert time_range(sm.values()) == (T0, T0 + 7 * S)
    assert time_range([]) is None


def test_trends_are_finished_values_at_the_actuation_start():
    late = [
        span(s.trace_id, s.name, s.start_ns / S - T0 / S + 100, s.end_ns / S - T0 / S + 100,
             s.parent_span_id, s.span_id, **s.attributes)
        for s in hot_trace("7" * 32, "r7", 2.0)
    ]  # fmt: skip
    sm = summaries_of(hot_trace("8" * 32, "r8", 4.0), late, hot_trace("9" * 32, "r9", 9.0, complete=False))
    by_metric = {t.metric: t for t in trends(sm.values())}
    assert list(by_metric) == ["T_actuation", "T_wake"]
    ((path, pts, n),) = by_metric["T_actuation"].per_path
    assert (path, n) == (HOT, 2)  # r9 never finished: not a point
    assert [(p.x_ns - T0, p.seconds, p.label.split(" /")[0]) for p in pts] == [
        (S, 4.0, "r8"),
        (101 * S, 2.0, "r7"),
    ]


def test_thin_series_keeps_the_shape_and_the_spikes():
    pts = [TrendPoint(i, 1.0 + (50.0 if i == 537 else 0.0) + (i % 7) * 0.01, str(i), "") for i in range(1000)]
    out = thin_series(pts, 40)
    assert len(out) <= 40
    assert any(p.trace_id == "537" for p in out)  # the spike survives
    assert out[0].x_ns == 0 and out[-1].x_ns == 999  # the whole time range
    assert [p.x_ns for p in out] == sorted(p.x_ns for p in out)
    gaps = [b.x_ns - a.x_ns for a, b in zip(out, out[1:], strict=False)]
    assert max(gaps) <= 2 * 1000 / 36  # evenly by time, not bunched
    assert thin_series(pts[:10], 40) == pts[:10]
