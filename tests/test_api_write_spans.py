"""The DPC's Kubernetes API writes as CLIENT spans, and the launcher's ``X.*`` inside the create call.

Issue 21's last two bridge parts (``docs/span-model.md``, "Instants" and "The tree"):

- every line with ``k8sCallStartTime`` that the span model names ("Created launcher-based
  server-providing pod", "Bound server-providing Pod", "Reconciled bound launcher Pod labels
  and annotations", "Set status/finalizers", "Unbound server-providing Pod") becomes a span
  from that start (exact, the DPC's clock) to the line's log time (1 µs); a line without it,
  or with one after its own log time, gives none;
- the launcher's create receipt and response (1 ms, its own clock) are bounded by the DPC's
  ``create_instance`` call, across the clock tolerance.

``tests/fixtures/dpc_writes/rebind.log`` is a hot requester actuated twice (README there).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel.bounding import write_call
from fma_otel.bridge import BridgeInputs, run_bridge
from fma_otel.build import build_trace
from fma_otel.correlate import Correlator
from fma_otel.sources.klog import parse_klog_line
from fma_otel.sources.launcher_log import parse_launcher_line
from fma_otel.span_records import SpanRecord
from fma_otel.timeutil import parse_rfc3339_ns

HERE = Path(__file__).parent
REBIND = HERE / "fixtures" / "dpc_writes" / "rebind.log"
COLD = HERE / "fixtures" / "dpc_only" / "cold_launcher.log"
UID = "6d2f8a41-3c5e-4b7a-9e10-2f4c6a8b0d37"
WRITES = frozenset(M.DPC_WRITE_SPANS.values())


def _t(hms: str) -> int:
    return parse_rfc3339_ns(f"2026-03-14T{hms}Z")


def _traces(path: Path) -> dict[str, tuple[object, dict[str, SpanRecord], list[SpanRecord]]]:
    res = run_bridge(BridgeInputs([], str(path)))
    return {a.key: (a, {s.name: s for s in t}, t) for a, t in res.iter_traces()}


@pytest.fixture(scope="module")
def rebind():
    return _traces(REBIND)


def _check_write(span: SpanRecord, msg: str, start: int, end: int) -> None:
    """A write span: exact start, µs end, the DPC's clock, its sources and honest bounds."""
    a = span.attributes
    assert span.kind == M.CLIENT and span.service == M.SERVICE_DPC
    assert (span.start_ns, span.end_ns) == (start, end)
    assert span.span_id == M.span_id_for(span.trace_id, span.name, 0)
    assert a[M.A_START_SRC] == f"dpc:{msg}/k8sCallStartTime" and a[M.A_END_SRC] == f"dpc:{msg}"
    assert a[M.A_START_PRECISION] == 1e-09 and a[M.A_END_PRECISION] == 1e-06
    assert a[M.A_MIN] == round((end - start) / 1e9, 9)
    assert a[M.A_MAX] == round((end + 999 - start) / 1e9, 9)
    assert span.status_code == M.STATUS_UNSET and M.A_INCONSISTENT not in a


def test_first_round_bind_label_and_last_status_write(rebind) -> None:
    act, spans, trace = rebind[UID]
    assert act.path == M.HOT and act.dpc_only
    assert sorted(s.name for s in trace if s.name in WRITES) == [
        "fma.dpc.bind_pod",
        "fma.dpc.label_launcher_pod",
        "fma.dpc.set_requester_status",
    ]
    bind = spans["fma.dpc.bind_pod"]
    _check_write(bind, "Bound server-providing Pod", _t("10:00:02.110342"), _t("10:00:02.115530"))
    assert bind.parent_span_id == spans["fma.dpc.bind"].span_id
    # D.bound keeps its meaning: the log time of the bind line (1 µs)
    assert act.instants["D.bound"].t_ns == bind.end_ns == spans["fma.dpc.bind"].end_ns
    assert act.instants["D.bound"].source == "dpc:Bound server-providing Pod"
    relay = spans["fma.readiness.relay"]
    label = spans["fma.dpc.label_launcher_pod"]
    _check_write(
        label,
        "Reconciled bound launcher Pod labels and annotations",
        _t("10:00:02.635002"),
        _t("10:00:02.647120"),
    )
    # of the three status writes after the wake and before the relay call, the last; the one
    # at the bind and the one after the relay call started are not the relay's
    status = spans["fma.dpc.set_requester_status"]
    _check_write(status, "Set status/finalizers", _t("10:00:02.653"), _t("10:00:02.658811"))
    for s in (label, status):
        assert s.parent_span_id == relay.span_id
        assert relay.start_ns <= s.start_ns and s.end_ns <= spans["fma.dpc.relay_ready"].start_ns
        assert s.attributes[M.A_PATH] == M.HOT and s.attributes[M.A_REQ_UID] == UID


def test_reactuation_unbind_is_under_its_request_and_lines_without_a_usable_start_give_none(
    rebind,
) -> None:
    act, spans, trace = rebind[f"{UID}/2"]
    assert act.round == 2 and act.path == M.HOT
    # the bind line has no k8sCallStartTime (an older DPC), the label line's is after its
    # own log time: no span for either, D.bound is still the bind line's log time
    assert sorted(s.name for s in trace if s.name in WRITES) == [
        "fma.dpc.set_requester_status",
        "fma.dpc.unbind_pod",
    ]
    assert act.instants["D.bound"].t_ns == _t("10:06:10.400")
    assert spans["fma.dpc.bind"].end_ns == _t("10:06:10.400")
    unbind = spans["fma.dpc.unbind_pod"]
    _check_write(unbind, "Unbound server-providing Pod", _t("10:05:00.211687"), _t("10:05:00.223411"))
    root = spans[M.ROOT]
    # it lies just before its parent: the round starts at D.unbound, the unbind's log time
    assert unbind.parent_span_id == root.span_id
    assert unbind.end_ns == root.start_ns == act.instants["D.unbound"].t_ns
    assert unbind.trace_id == M.trace_id_for(f"{UID}/2")
    status = spans["fma.dpc.set_requester_status"]
    _check_write(status, "Set status/finalizers", _t("10:06:10.9115"), _t("10:06:10.921"))
    assert status.parent_span_id == spans["fma.readiness.relay"].span_id
    # the first round has no unbind span: nothing was unbound before it
    assert "fma.dpc.unbind_pod" not in rebind[UID][1]


def test_cold_create_write_is_under_bind_and_ends_at_d_bound() -> None:
    [(act, spans, _)] = _traces(COLD).values()
    create = spans["fma.dpc.create_launcher_pod"]
    msg = "Created launcher-based server-providing pod"
    _check_write(create, msg, _t("09:30:00.421880093"), _t("09:30:00.433871"))
    assert create.parent_span_id == spans["fma.dpc.bind"].span_id
    assert create.end_ns == act.instants["D.bound"].t_ns
    # the same write bounds L.created, as before
    assert act.instants["L.created"].lo == create.start_ns
    # the bind-time status write (before D.serving) is not the relay's; the one after it is
    status = spans["fma.dpc.set_requester_status"]
    assert status.start_ns >= act.instants["D.serving"].t_ns
    assert status.parent_span_id == spans["fma.readiness.relay"].span_id


def test_sample_with_pods_has_the_write_spans_in_their_parents() -> None:
    from fma_otel.bridge import inputs_from_capture, sample_dir

    res = run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})
    seen: dict[str, int] = {}
    for act, trace in res.iter_traces():
        by_id = {s.span_id: s for s in trace}
        for s in trace:
            if s.name not in WRITES:
                continue
            seen[s.name] = seen.get(s.name, 0) + 1
            parent = by_id[s.parent_span_id]
            assert parent.name == M.SPANS_BY_NAME[s.name].parent_name(act.path), (act.key, s.name)
            assert s.start_ns < s.end_ns
            if parent.name == "fma.dpc.bind":
                assert s.end_ns == parent.end_ns == act.instants["D.bound"].t_ns
            elif parent.name == M.ROOT:
                assert act.round > 1 and s.end_ns == parent.start_ns
            else:
                assert parent.start_ns <= s.start_ns and s.end_ns <= parent.end_ns
    # the embedded sample: 2 cold creates, 3 binds (one of them a re-actuation's), one unbind,
    # and label and status writes in the 4 traces that reached the relay
    assert seen == {
        "fma.dpc.create_launcher_pod": 2,
        "fma.dpc.bind_pod": 3,
        "fma.dpc.unbind_pod": 1,
        "fma.dpc.label_launcher_pod": 4,
        "fma.dpc.set_requester_status": 4,
    }


def test_write_call_refuses_what_the_line_does_not_say() -> None:
    log = _t("10:00:00.000100")
    assert write_call(None, log, "dpc:x") is None  # no k8sCallStartTime
    assert write_call(log + 1000, log, "dpc:x") is None  # after the line's own µs
    s, e = write_call(log + 999, log, "dpc:x")  # in the same µs: a zero-length write
    assert (s.lo, s.hi, e.lo, e.hi) == (log + 999, log + 999, log, log + 999)


# --------------------------------------------------------------------------- X.* in the call

LAUNCHER = "launcher-lc1-t3kwd"
INSTANCE = "Zp4wRt8nKq2mXv6sLc9bHf1dJg5aYe3uTo7iNx0WkPa2E"
CTX = f'worker=0 node="gpu-node-c" serverUID="{UID}" requesterName="req-w"'
#: the create call: [14:36:20.498765432, 14:36:20.512341975] on the DPC's clock
CALL_START, CALL_END = _t("14:36:20.498765432"), _t("14:36:20.512341975")
SRC_CALL = "dpc:HTTP call done/create_instance"


def _x_actuation(receipt_ms: int, response_ms: int):
    """A warm actuation from DPC lines, with the launcher's receipt and response at
    ``14:36:20.<ms>`` on the launcher's clock."""
    dpc = [
        f'I0314 14:36:20.480000       1 inference-server.go:1460] "Bound server-providing Pod" {CTX} '
        f'name="{LAUNCHER}" node="gpu-node-c" instanceID="{INSTANCE}" '
        'k8sCallStartTime="2026-03-14T14:36:20.47Z"',
        f'I0314 14:36:20.512400       1 inference-server.go:2251] "HTTP call done" {CTX} '
        f'instanceID="{INSTANCE}" providerName="{LAUNCHER}" purpose="create_instance" method="PUT" '
        f'url="http://10.0.0.1:8001/v2/vllm/instances/{INSTANCE}" '
        'httpCallStartTime="2026-03-14T14:36:20.498765432Z" latencySecs=0.013576543 statusCode=201 err=null',
    ]
    c = Correlator(dpc_only=True)
    for i, line in enumerate(dpc, 1):
        c.add_dpc(parse_klog_line(line, i))
    c.add_launcher(
        LAUNCHER,
        parse_launcher_line(
            f"2026-03-14 14:36:20,{receipt_ms:03d} - __main__ - INFO - "
            f"Accepted request to create vLLM instance with id={INSTANCE}",
            1,
        ),
    )
    c.add_launcher(
        LAUNCHER,
        parse_launcher_line(
            f"2026-03-14 14:36:20,{response_ms:03d} - uvicorn.access - INFO - "
            f'10.0.0.2:4000 - "PUT /v2/vllm/instances/{INSTANCE} HTTP/1.1" 201',
            2,
        ),
    )
    [act] = c.actuations()
    assert act.path == M.WARM and act.has_launcher_data
    return act


def test_launcher_stamp_inside_the_call_is_unchanged_and_names_both_sources() -> None:
    act = _x_actuation(505, 511)
    for name, ms in (("X.receipt", 505), ("X.response", 511)):
        i = act.instants[name]
        t = _t(f"14:36:20.{ms:03d}")
        assert (i.lo, i.hi, i.t_ns) == (t, t + M.MS - 1, t), name
        assert i.source == f"launcher:log + {SRC_CALL}" and not i.inconsistent
        assert i.clock == "launcher"


def test_the_call_narrows_a_launcher_stamp_within_the_tolerance() -> None:
    # the receipt's millisecond [.497, .498) starts 1.77 ms before the call: the call
    # (widened by the 1 ms tolerance) cuts it to [.497765432, .498); the response's
    # millisecond [.513, .514) is cut to end at the call's end + 1 ms
    act = _x_actuation(497, 513)
    r = act.instants["X.receipt"]
    assert (r.lo, r.hi) == (CALL_START - M.MS, _t("14:36:20.498") - 1)
    assert r.t_ns == r.lo  # the launcher's value, clamped into the interval
    assert not r.inconsistent and r.source == f"launcher:log + {SRC_CALL}"
    x = act.instants["X.response"]
    assert (x.lo, x.hi, x.t_ns) == (_t("14:36:20.513"), CALL_END + M.MS, _t("14:36:20.513"))
    spans = {s.name: s for s in build_trace(act)}
    srv = spans["fma.launcher.create_instance"]
    assert srv.attributes[M.A_START_PRECISION] == round((r.hi - r.lo + 1) / 1e9, 9)
    assert M.A_INCONSISTENT not in srv.attributes


def test_a_launcher_stamp_outside_the_call_beyond_the_tolerance_is_marked() -> None:
    # the receipt's millisecond ends 2.77 ms before the call starts: beyond 1 ms of tolerance
    act = _x_actuation(495, 505)
    r = act.instants["X.receipt"]
    t = _t("14:36:20.495")
    # the most precise source (the launcher's 1 ms) is kept; the call is dropped and named
    assert (r.lo, r.hi, r.t_ns) == (t, t + M.MS - 1, t)
    assert r.inconsistent and r.source == "launcher:log"
    assert r.disagreed == ("launcher:log", SRC_CALL)
    assert not act.instants["X.response"].inconsistent
    spans = {s.name: s for s in build_trace(act)}
    for name in ("fma.launcher.create_instance", "fma.instance.create"):
        a = spans[name].attributes
        assert a[M.A_INCONSISTENT] is True, name
        assert a[M.A_DISAGREED] == ["launcher:log", SRC_CALL], name
