"""The builder's fast path gives exactly what the plain walk of the table gives.

``build.build_trace`` resolves the table once per path into a plan, makes its records
without the dataclass ``__init__``, shares one resource mapping per service within a trace
and skips ``round`` where it cannot change the float.  The reference below is the plain
code it replaced, kept here verbatim; both must agree on every field of every span, on
the order and the exact types of the attributes, and on the text written for them.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fma_otel import build
from fma_otel import model as M
from fma_otel.build import build_trace
from fma_otel.correlate import Actuation
from fma_otel.sinks.otlp_json import export_request_text

# --------------------------------------------------------------------------- the reference


def _bounds(start: M.Instant, end: M.Instant) -> tuple[float, float]:
    lo = max(0, end.t_ns - (start.t_ns + start.precision_ns))
    hi = max(0, end.t_ns + end.precision_ns - start.t_ns)
    return round(lo / M.S, 9), round(hi / M.S, 9)


def _reference_build(act: Actuation) -> list[M.SpanRecord]:
    trace_id = act.trace_id
    path = act.path
    last = max(act.instants.values(), key=lambda i: i.t_ns) if act.instants else None
    present: dict[str, str] = {}
    out: list[M.SpanRecord] = []
    for d in M.SPANS:
        if path not in d.paths or (d.needs_launcher_data and not act.has_launcher_data):
            continue
        start = next((act.instants[n] for n in d.start_options(path) if n in act.instants), None)
        if start is None:
            continue
        e_name = d.end_instant(path)
        end = act.instants.get(e_name) if e_name else None
        attrs: dict[str, Any] = dict(act.attributes)
        status, message = M.STATUS_UNSET, ""
        if end is None:
            if act.complete or last is None:
                continue
            end = last
            attrs[M.A_COMPLETE] = False
            status, message = M.STATUS_ERROR, f"incomplete: {e_name} not seen"
        if d.metric:
            attrs[M.A_METRIC] = d.metric
        attrs[M.A_START_SRC] = start.source
        attrs[M.A_END_SRC] = end.source if status == M.STATUS_UNSET else f"last-seen:{end.source}"
        lo, hi = _bounds(start, end)
        attrs[M.A_MIN], attrs[M.A_MAX] = lo, hi
        start_ns, end_ns = start.t_ns, end.t_ns
        if end_ns < start_ns:
            attrs[M.A_INCONSISTENT] = True
            attrs[M.A_RAW] = round((end_ns - start_ns) / M.S, 9)
            end_ns = start_ns
        if d.name == M.ROOT:
            attrs[M.A_POD_NAME] = act.attributes.get(M.A_REQ_NAME, "")
            attrs[M.A_POD_UID] = act.attributes.get(M.A_REQ_UID, "")
            attrs[M.A_COMPLETE] = act.complete
            attrs[M.A_HOT_HIT] = act.path == M.HOT
            attrs[M.A_WARM_HIT] = act.path == M.WARM
            attrs[M.A_ACTUATION_KEY] = act.key
            if act.dpc_actuation_secs is not None:
                attrs[M.A_DPC_SECS] = act.dpc_actuation_secs
            if act.missing:
                attrs[M.A_MISSING] = list(act.missing)
            if not act.complete:
                status = M.STATUS_ERROR
                message = "incomplete: missing " + ", ".join(act.missing or ("R.ready",))
        parent = None
        name = d.parent_name(path)
        while name is not None:
            if name in present:
                parent = present[name]
                break
            name = M.SPANS_BY_NAME[name].parent_name(path)
        span_id = M.span_id_for(trace_id, d.name, 0)
        present[d.name] = span_id
        out.append(
            M.SpanRecord(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=d.name,
                kind=d.kind,
                start_ns=start_ns,
                end_ns=end_ns,
                service=end.service,
                attributes=attrs,
                status_code=status,
                status_message=message,
                resource=M.resource_attributes(end.service),
            )
        )
    return out


# --------------------------------------------------------------------------- comparing


def _exact(value: Any) -> Any:
    """A value with its exact type, and floats by ``repr`` (so -0.0 is not 0.0)."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, list):
        return ("list", [_exact(v) for v in value])
    return (type(value).__name__, value)


def _fields(s: M.SpanRecord) -> tuple[Any, ...]:
    return (
        s.trace_id,
        s.span_id,
        s.parent_span_id,
        s.name,
        s.kind,
        _exact(s.start_ns),
        _exact(s.end_ns),
        s.service,
        [(k, _exact(v)) for k, v in s.attributes.items()],
        s.status_code,
        s.status_message,
        [(k, _exact(v)) for k, v in s.resource.items()],
    )


def _assert_same(act: Actuation) -> None:
    fast, plain = build_trace(act), _reference_build(act)
    assert [_fields(s) for s in fast] == [_fields(s) for s in plain]
    assert fast == plain
    assert all(type(s) is M.SpanRecord for s in fast)
    assert export_request_text(fast) == export_request_text(plain)


# --------------------------------------------------------------------------- generated actuations

_SOURCES = st.sampled_from(["k8s:x", "dpc:HTTP call done/create_instance", "launcher:log", "caf\xe9 \u2603"])
_SERVICES = st.sampled_from([M.SERVICE_K8S, M.SERVICE_DPC, M.SERVICE_LAUNCHER])
#: around "now", far in the past and the future, and wide enough apart that some
#: durations exceed 2**23 s (where ``round`` is kept) and some ends precede their starts
_T0 = 1_782_743_416 * M.S
_TIMES = st.one_of(
    st.integers(_T0 - 10 * M.S, _T0 + 120 * M.S),
    st.integers(_T0 - 2**24 * M.S, _T0 + 2**24 * M.S),
    st.integers(0, 2**63 - 1),
    st.sampled_from([_T0 + 2**23 * M.S - 1, _T0 + 2**23 * M.S, _T0 + 2**23 * M.S + 1]),
)
_PRECISIONS = st.sampled_from([M.NS, M.US, M.MS, M.S, 0])
_INSTANT = st.builds(M.Instant, _TIMES, _PRECISIONS, _SOURCES, _SERVICES)
_INSTANTS = st.dictionaries(st.sampled_from(sorted(M.INSTANTS)), _INSTANT)
_BASE_VALUES = st.one_of(
    st.text(max_size=8), st.integers(-(2**63), 2**64), st.booleans(), st.floats(allow_nan=True)
)
_BASE_KEYS = st.one_of(
    st.sampled_from([M.A_PATH, M.A_REQ_NAME, M.A_REQ_UID, M.A_DELETED, M.A_NODE]),
    # keys the builder writes itself: they keep their place in the base's order
    st.sampled_from([M.A_COMPLETE, M.A_METRIC, M.A_START_SRC, M.A_MIN, M.A_MISSING]),
    st.text(max_size=6),
)


@st.composite
def _actuations(draw: st.DrawFn) -> Actuation:
    path = draw(st.sampled_from(sorted(M.ALL_PATHS)))
    return Actuation(
        key=draw(st.sampled_from(["u", "u/2", "811f8932-b608-416c-8a90-589b39ed9bde"])),
        round=1,
        path=path,
        complete=draw(st.booleans()),
        instants=draw(_INSTANTS),
        attributes=draw(st.dictionaries(_BASE_KEYS, _BASE_VALUES, max_size=6)),
        missing=tuple(draw(st.lists(st.sampled_from(sorted(M.INSTANTS)), max_size=3))),
        dpc_actuation_secs=draw(st.one_of(st.none(), st.floats(allow_nan=False))),
        has_launcher_data=draw(st.booleans()),
    )


def _full(path: str, complete: bool, t: int = _T0) -> Actuation:
    instants = {
        n: M.Instant(t + i * 1_234_567_891, d.precision_ns, f"src:{n}", d.service)
        for i, (n, d) in enumerate(M.INSTANTS.items())
    }
    if not complete:
        del instants["R.ready"]
    return Actuation("k", 1, path, complete, instants, {M.A_PATH: path, M.A_REQ_NAME: "r"}, (), 1.5, True)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_actuations())
@example(_full(M.COLD_LAUNCHER, True))
@example(_full(M.COLD_LAUNCHER, False))
@example(_full(M.WARM, True))
@example(_full(M.HOT, False))
@example(_full(M.UNKNOWN, True))
def test_build_is_the_plain_walk_of_the_table(act: Actuation) -> None:
    _assert_same(act)


def test_build_on_the_embedded_sample() -> None:
    from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir

    result = run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})
    assert result.actuations
    for act in result.actuations:
        _assert_same(act)


def test_a_trace_shares_one_resource_per_service() -> None:
    spans = build_trace(_full(M.COLD_LAUNCHER, True))
    by_service: dict[str, Any] = {}
    for s in spans:
        assert by_service.setdefault(s.service, s.resource) is s.resource
        assert s.resource == M.resource_attributes(s.service)
    assert len(by_service) > 1
    # ...and none with another trace
    other = build_trace(_full(M.COLD_LAUNCHER, True, _T0 + M.S))
    assert not {id(s.resource) for s in other} & {id(s.resource) for s in spans}


def test_plan_follows_a_swapped_table(monkeypatch: pytest.MonkeyPatch) -> None:
    act = _full(M.COLD_LAUNCHER, True)
    assert len(build_trace(act)) > 3
    monkeypatch.setattr(M, "SPANS", M.SPANS[:3])
    assert [s.name for s in build_trace(act)] == [d.name for d in M.SPANS[:3]]
    assert build_trace(act) == _reference_build(act)
    monkeypatch.undo()
    assert build_trace(act) == _reference_build(act)


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.integers(-(2**23) * M.S - 10, 2**23 * M.S + 10),
        st.integers(-(2**70), 2**70),
        st.integers(-(10**6) * M.S, 10**6 * M.S),
        st.integers(-5000, 5000),
    )
)
@example(2**23 * M.S - 1)
@example(2**23 * M.S)
@example(-(2**23) * M.S + 1)
@example(0)
@example(-1)
@example(10**9 - 1)
def test_seconds_is_round_to_nine_decimals(ns: int) -> None:
    fast, plain = build._seconds(ns), round(ns / M.S, 9)
    assert repr(fast) == repr(plain) and math.copysign(1, fast) == math.copysign(1, plain)
