"""``fma-otel bridge --dpc-log`` with no Pods (issue 21): traces from the DPC log alone.

The fixtures' README (``tests/fixtures/dpc_only/README.md``) gives, for each small log, the
interval and point of every quantity the lines bound; ``tests/test_instants.py`` checks that
table against a reference computation.  Here the bridge itself must give the same numbers
(T_wake, T_instance_ready, T_cold_launcher and the new spans), key each actuation by its
``serverUID`` (the trace ids a run with Pods gives), say what only Pods know in
``fma.missing``, and, with a Pod added, give the same trace id back with more spans.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import model as M
from fma_otel.bridge import BridgeInputs, run_bridge
from fma_otel.cli import main as cli
from tests.test_instants import FIXTURES, _readme_rows, _sec, _tod

#: README quantity -> the span that carries it
SPAN_OF = {
    "T_wake": "fma.vllm.wake",
    "T_instance_ready": "fma.instance.ready",
    "T_cold_launcher": "fma.launcher.cold_start",
    "vllm_becomes_ready": "fma.vllm.ready",
    "fma.dpc.poll_lag": "fma.dpc.poll_lag",
    "fma.dpc.relay_ready": "fma.dpc.relay_ready",
}
UIDS = {
    "hot.log": "0b6c3f7e-2a41-4d9e-9c55-7e1f0a3b8d21",
    "warm.log": "5e9a0d12-77c3-4b0f-a1e6-3c2d9b8f4e60",
    "cold_launcher.log": "a37c5d90-1f2e-4b6a-8d3c-9e0f7a6b5c14",
}


def _run(name: str, pods: list[str] | None = None):
    res = run_bridge(BridgeInputs(pods or [], str(FIXTURES / name)))
    [(act, trace)] = list(res.iter_traces())
    return act, {s.name: s for s in trace}


def _cells(span) -> list[str]:
    a = span.attributes
    return [
        f"{a[M.A_MIN]:.9f}",
        f"{a[M.A_MAX]:.9f}",
        _sec(span.end_ns - span.start_ns),
    ]


@pytest.mark.parametrize("name", sorted(UIDS))
def test_spans_give_the_readme_durations(name: str) -> None:
    act, spans = _run(name)
    rows = [r for r in _readme_rows() if r[0] == name and r[1] in SPAN_OF]
    assert rows
    for _file, quantity, lo, hi, point in rows:
        span = spans[SPAN_OF[quantity]]
        assert _cells(span) == [lo, hi, point], (name, quantity)
        assert span.status_code == M.STATUS_UNSET


@pytest.mark.parametrize("name", sorted(UIDS))
def test_instants_are_the_readme_intervals(name: str) -> None:
    act, _ = _run(name)
    rows = [
        r for r in _readme_rows() if r[0] == name and "." in r[1] and r[1][0] in "RLVD" and r[1][1] == "."
    ]
    assert rows
    for _file, instant, lo, hi, point in rows:
        if lo == "-":  # bounded from above only: no point, said so
            assert instant not in act.instants and instant in act.missing_point
            continue
        i = act.instants[instant]
        assert [_tod(i.lo), _tod(i.hi), _tod(i.t_ns)] == [lo, hi, point], (name, instant)


@pytest.mark.parametrize("name", sorted(UIDS))
def test_keyed_by_server_uid_and_what_only_pods_know_is_missing(name: str) -> None:
    act, spans = _run(name)
    assert act.key == UIDS[name] and act.dpc_only and act.complete  # the relay was seen
    root = spans[M.ROOT]
    assert root.trace_id == M.trace_id_for(UIDS[name])
    assert "R.ready" in root.attributes[M.A_MISSING]
    # the roots end at the last instant seen: an open interval, no metric, nothing failed
    for n in (M.ROOT, "fma.actuation"):
        a = spans[n].attributes
        assert a[M.A_END_SRC].startswith("last-seen:") and M.A_MAX not in a and M.A_METRIC not in a
        assert spans[n].status_code == M.STATUS_UNSET
    # never invented: no span ends at an instant only Pods give
    assert "fma.kubelet.probe" not in spans
    assert {"fma.launcher.schedule", "fma.launcher.startup", "fma.dpc.react"}.isdisjoint(spans)


def test_cold_launcher_ready_is_bounded_from_above_only() -> None:
    act, spans = _run("cold_launcher.log")
    assert act.missing_point == ("L.ready",)
    assert spans[M.ROOT].attributes[M.A_MISSING_POINT] == ["L.ready"]
    assert "L.scheduled" in act.missing


def test_warm_reclaiming_delete_is_a_client_span_under_instance_ready() -> None:
    _, spans = _run("warm.log")
    d = spans["fma.dpc.delete_instance"]
    assert d.kind == M.CLIENT and d.parent_span_id == spans["fma.instance.ready"].span_id
    assert d.attributes[M.A_INSTANCE] == "Hd4kWn7qPz1rVt5yLm8cXs2fGj6aBe9uNo3iRx0KwTe7Y"  # the victim
    assert round((d.end_ns - d.start_ns) / 1e9, 6) == 0.004188
    assert d.span_id == M.span_id_for(d.trace_id, "fma.dpc.delete_instance", 0)


def test_quoted_numbers_are_read_as_numbers() -> None:
    _, spans = _run("hot.log")
    wake = spans["fma.vllm.wake"]
    assert wake.end_ns - wake.start_ns == 510_000_000
    assert wake.attributes[M.A_METRIC] == "T_wake"


def _pod(tmp_path: Path) -> str:
    """The warm fixture's requester as a Pod (its Ready 2 s after the relay)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "bench-req-warm-k4d8s",
            "namespace": "bench",
            "uid": UIDS["warm.log"],
            "creationTimestamp": "2026-03-14T09:20:08Z",
            "annotations": {"dual-pods.llm-d.ai/inference-server-config": "isc1"},
        },
        "spec": {"nodeName": "gpu-node-a", "containers": [{"name": "inference-server"}]},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-03-14T09:20:08Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-14T09:20:27Z"},
            ],
            "containerStatuses": [
                {"name": "inference-server", "state": {"running": {"startedAt": "2026-03-14T09:20:09Z"}}}
            ],
        },
    }
    p = tmp_path / "pods.json"
    p.write_text(json.dumps(pod))
    return str(p)


def test_adding_pods_gives_the_same_trace_with_more_spans(tmp_path: Path) -> None:
    alone, spans_alone = _run("warm.log")
    both, spans_both = _run("warm.log", [_pod(tmp_path)])
    assert both.trace_id == alone.trace_id and not both.dpc_only
    assert set(spans_alone) < set(spans_both)
    assert "fma.kubelet.probe" in spans_both
    for name, s in spans_alone.items():
        assert spans_both[name].span_id == s.span_id
        # the spans between D.* instants are the same; those at R.* gain the Pod's sources
        if name not in (
            M.ROOT,
            "fma.actuation",
            "fma.requester.schedule",
            "fma.requester.startup",
            "fma.dpc.bind",
        ):
            assert (spans_both[name].start_ns, spans_both[name].end_ns) == (s.start_ns, s.end_ns), name


def test_cli_bridge_with_a_dpc_log_alone(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(cli, ["bridge", "--dpc-log", str(FIXTURES / "hot.log"), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "traced from the DPC log alone" in r.output and "actuations: 1" in r.output
    [line] = out.read_text().splitlines()
    spans = json.loads(line)["resourceSpans"]
    tids = {s["traceId"] for rs in spans for ss in rs["scopeSpans"] for s in ss["spans"]}
    assert tids == {M.trace_id_for(UIDS["hot.log"])}


def test_cli_clock_tolerance_flag_widens_cross_clock_durations(tmp_path: Path) -> None:
    res = {}
    for ms in ("0", "5"):
        r = run_bridge(
            BridgeInputs([_pod(tmp_path)], str(FIXTURES / "warm.log")), clock_tolerance_ns=int(ms) * 1_000_000
        )
        [(_, trace)] = list(r.iter_traces())
        res[ms] = {s.name: s for s in trace}
    # fma.dpc.bind: R.started (kubelet) -> D.bound (dpc): two clocks
    a0, a5 = res["0"]["fma.dpc.bind"].attributes, res["5"]["fma.dpc.bind"].attributes
    assert round(a5[M.A_MAX] - a0[M.A_MAX], 9) == 0.005
    # one clock: no tolerance
    t0, t5 = res["0"]["fma.instance.ready"].attributes, res["5"]["fma.instance.ready"].attributes
    assert (t0[M.A_MIN], t0[M.A_MAX]) == (t5[M.A_MIN], t5[M.A_MAX])
    r = CliRunner().invoke(
        cli, ["bridge", "--dpc-log", str(FIXTURES / "hot.log"), "--clock-tolerance-ms", "-1", "-q"]
    )
    assert r.exit_code == 2 and "clock-tolerance-ms" in r.output


def test_a_requester_only_heard_of_is_not_traced(tmp_path: Path) -> None:
    other = (
        'I0314 09:20:30.000001       1 controller.go:735] "Enqueuing inference server reference due to '
        'notification of update" logger="dual-pods-controller" nodeName="gpu-node-a" '
        'item={"UID":"99999999-0000-4000-8000-000000000000","RequesterName":"idle"} infSvrItemType="requester" '
        'resourceVersion="1" lastWrite={"Manager":"kubelet","Time":"2026-03-14T09:20:30Z"}\n'
    )
    log = tmp_path / "dpc.log"
    log.write_text((FIXTURES / "warm.log").read_text() + other)
    res = run_bridge(BridgeInputs([], str(log)))
    assert [a.key for a in res.actuations] == [UIDS["warm.log"]]
    assert res.orphans == 0


def test_watch_takes_the_clock_tolerance_flag() -> None:
    r = CliRunner().invoke(cli, ["watch", "--help"])
    assert "--clock-tolerance-ms" in r.output
    r = CliRunner().invoke(cli, ["watch", "-n", "x", "--clock-tolerance-ms", "-1"])
    assert r.exit_code == 2 and "clock-tolerance-ms" in r.output


def _cut_before(tmp_path: Path, fixture: str, marker: str):
    """The bridge on ``fixture`` cut just before its first line holding ``marker``: the
    actuation and its spans by name."""
    lines = (FIXTURES / fixture).read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if marker in x)
    log = tmp_path / "dpc.log"
    log.write_text("".join(lines[:cut]))
    [(act, trace)] = list(run_bridge(BridgeInputs([], str(log))).iter_traces())
    return act, {s.name: s for s in trace}


def test_a_log_that_ends_before_the_relay_is_incomplete(tmp_path: Path) -> None:
    act, spans = _cut_before(tmp_path, "warm.log", '"Reconciled bound launcher Pod labels')
    assert not act.complete and act.dpc_only
    # requesterCreateTime and actuationSecs come with the relay: no R.created, no root span;
    # the spans whose start is known hang from the nearest ancestor present (none here)
    assert "R.created" in act.missing and M.ROOT not in spans
    top = spans["fma.instance.ready"]
    assert top.parent_span_id is None
    assert top.status_code == M.STATUS_ERROR and "D.relayed" in top.status_message
    assert top.attributes[M.A_COMPLETE] is False
    # what did finish is ordinary; nothing after the log's end is invented
    assert spans["fma.dpc.poll_lag"].status_code == M.STATUS_UNSET
    assert spans["fma.readiness.relay"].status_code == M.STATUS_ERROR  # began at D.serving
    assert "fma.dpc.relay_ready" not in spans


def test_an_unfinished_cold_actuation_leaves_out_what_only_pods_show(tmp_path: Path) -> None:
    """Cut before the relay, a cold actuation is unfinished, yet the log never shows
    L.scheduled: ``fma.launcher.schedule`` is left out, as for a finished one, not ended at
    the last instant seen (it was, with "incomplete: L.scheduled not seen", 25 s long on
    the sample where the Pods give 0.015 s, and past the CreateNamedInstance that bounds
    L.scheduled from above).  What the log would show (D.relayed) is still incomplete."""
    act, spans = _cut_before(tmp_path, "cold_launcher.log", '"Successfully relayed the readiness"')
    assert not act.complete and act.dpc_only
    assert {"fma.launcher.schedule", "fma.launcher.startup", "fma.dpc.react"}.isdisjoint(spans)
    cold = spans["fma.launcher.cold_start"]
    assert cold.status_code == M.STATUS_ERROR
    assert cold.status_message == "incomplete: D.relayed not seen"
    assert cold.attributes[M.A_END_SRC].startswith("last-seen:")
