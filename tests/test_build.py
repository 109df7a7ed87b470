"""The builder: what the spans of a trace share (resources, instants) reads the same in each,
and the seconds every duration attribute is written in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fma_otel import model as M
from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.build import build_trace
from fma_otel.span_records import SpanRecord


@pytest.fixture(scope="module")
def actuations():
    return run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"}).actuations


def test_spans_of_one_service_share_one_resource_mapping(actuations) -> None:
    for act in actuations:
        trace = build_trace(act)
        by_service: dict[str, list[SpanRecord]] = {}
        for s in trace:
            by_service.setdefault(s.service, []).append(s)
        for service, spans in by_service.items():
            assert spans[0].resource == M.resource_attributes(service)
            assert all(s.resource is spans[0].resource for s in spans), (act.key, service)


def test_an_instant_shared_by_two_spans_reads_the_same_in_both(actuations) -> None:
    """An instant that ends one span and starts another gives both the same source and
    precision, and two builds of one actuation give equal traces."""
    checked = 0
    for act in actuations:
        trace = build_trace(act)
        assert build_trace(act) == trace
        ends = {(s.end_ns, s.attributes[M.A_END_SRC]): s.attributes[M.A_END_PRECISION] for s in trace}
        for s in trace:
            key = (s.start_ns, s.attributes[M.A_START_SRC])
            if key in ends:
                assert s.attributes[M.A_START_PRECISION] == ends[key], (act.key, s.name)
                checked += 1
    assert checked > 0


def test_spans_records_are_immutable(actuations) -> None:
    span = build_trace(actuations[0])[0]
    with pytest.raises(AttributeError):
        span.end_ns = 0  # type: ignore[misc]


@given(st.integers(min_value=-(2**80), max_value=2**80))
def test_seconds_is_round_to_the_nanosecond(ns: int) -> None:
    assert M.seconds(ns) == round(ns / M.S, 9)


@pytest.mark.parametrize("ns", [0, 1, -1, 2**23 * M.S - 1, 2**23 * M.S, -(2**23) * M.S, 10**18 + 7])
def test_seconds_at_the_edges(ns: int) -> None:
    assert M.seconds(ns) == round(ns / M.S, 9)


def test_an_instant_gives_the_duration_its_fused_form_gives() -> None:
    """The builder hands its Instants to ``instants.duration`` as they are: same result as
    the ``Fused`` form of each (interval, point, clock)."""
    from fma_otel import instants as I

    def fused(i: M.Instant) -> I.Fused:
        return I.Fused(i.lo, i.hi, i.value, i.clock, (i.source,))

    a = M.Instant(10 * M.S, M.S, "k8s:a", M.SERVICE_K8S)
    b = M.Instant(12 * M.S + 5, 1, "dpc:b", M.SERVICE_DPC)
    c = M.Instant(11 * M.S, M.US, "dpc:c", M.SERVICE_DPC, lo=11 * M.S - 7, hi=11 * M.S + 9, clock="kubelet")
    for start, end in ((a, b), (b, a), (a, c), (c, b), (b, b)):
        assert start.value == start.t_ns
        assert I.duration(start, end, M.MS) == I.duration(fused(start), fused(end), M.MS)
