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
    attribute,
    breakdowns,
    distributions,
    slowest,
    thin,
    unfinished,
)

from .conftest import span


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


def test_unfinished_and_baseline_are_not_broken_down():
    base = [span("3" * 32, "fma.request", 0, 9, None, "a" * 16, **{"fma.path": COLD_NO_FMA}),
            span("3" * 32, "fma.actuation", 1, 9, "a" * 16, "b" * 16, **{"fma.path": COLD_NO_FMA})]  # fmt: skip
    sm = summaries_of(hot_trace("4" * 32, "r4", 50.0, complete=False), base)
    assert breakdowns(sm.values()) == []
    assert [t.requester for t in unfinished(sm.values(), 5)] == ["r4"]
    assert [t.trace_id for t in slowest(sm.values(), 5)] == ["3" * 32]


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
