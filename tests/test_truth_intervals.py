"""Issue 21 judged against a generator that knows the true instants.

``tests.support.synth`` plays out actuations on one simulated clock and prints what each
component would have printed; :func:`synth_capture_with_true_instants` also returns the
instants before printing truncated them.  Three things are held here:

- every span's true duration lies in its ``[fma.duration.min_s, fma.duration.max_s]``, and
  so does its point duration (the span's own length);
- the median width ``max - min`` of T_cold_launcher, T_launcher_schedule, T_actuation and
  ``fma.kubelet.probe`` shrinks at least 10x, 2x, 1.5x and 1.5x against the model before
  issue 21 on the same capture (each end only its own source's precision, never below 0);
- no instant is tighter than its sources allow: for each kind of source, the instant it
  alone bounds is exactly that source's bound (tests per source at the end).

The launchers' clocks in the generator are up to 1.5 ms off the others', so the bridge is run
with a 2 ms clock tolerance, as a user would give ``--clock-tolerance-ms`` for such clocks.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel.bridge import inputs_from_capture, run_bridge
from fma_otel.correlate import Correlator
from fma_otel.sources.klog import parse_klog_line
from fma_otel.sources.records import KlogRecord, PodEvent
from fma_otel.timeutil import parse_rfc3339_ns
from tests.support.synth import MAX_LAUNCHER_SKEW_NS, synth_capture_with_true_instants, write_capture

TOLERANCE_NS = 2 * M.MS
assert TOLERANCE_NS >= MAX_LAUNCHER_SKEW_NS

#: the model before issue 21: each instant's one source and its precision
OLD_PRECISION = {
    **dict.fromkeys(("R.created", "R.scheduled", "R.started", "R.ready"), M.S),
    **dict.fromkeys(("L.created", "L.scheduled", "L.ready"), M.S),
    **dict.fromkeys(("D.bound", "D.relayed", "D.unbound"), M.US),
    **dict.fromkeys(("X.receipt", "X.response"), M.MS),
}
#: metric -> (span, shrink factor issue 21 asks for)
TARGETS = {
    "T_cold_launcher": ("fma.launcher.cold_start", 10.0),
    "T_launcher_schedule": ("fma.launcher.schedule", 2.0),
    "T_actuation": ("fma.actuation", 1.5),
    "fma.kubelet.probe": ("fma.kubelet.probe", 1.5),
}


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """120 actuations on every path, with their truth, through the bridge (the DPC's V5
    "Processing inference server" lines printed too, as a ``-v=5`` DPC writes them)."""
    cap, true = synth_capture_with_true_instants(n=120, seed=21, reconcile_lines=True)
    d = tmp_path_factory.mktemp("truth21")
    write_capture(cap, d)
    res = run_bridge(
        inputs_from_capture(d), baseline_selector={"app": "vllm"}, clock_tolerance_ns=TOLERANCE_NS
    )
    traces = {a.key: (a, t) for a, t in res.iter_traces()}
    return cap, true, traces


def _ends(act, name: str) -> tuple[str, str]:
    d = M.SPANS_BY_NAME[name]
    start = next(n for n in d.start_options(act.path) if n in act.instants)
    return start, d.end_instant(act.path)


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


@pytest.mark.slow
def test_true_duration_and_point_lie_in_min_max(capture) -> None:
    _, true, traces = capture
    checked = 0
    for key, (act, spans) in traces.items():
        for s in spans:
            a = s.attributes
            point = s.end_ns - s.start_ns
            assert _ns(a[M.A_MIN]) <= point, (key, s.name)
            if M.A_MAX in a:
                assert point <= _ns(a[M.A_MAX]), (key, s.name)
            if s.status_code == M.STATUS_ERROR or M.SPANS_BY_NAME[s.name].repeated:
                continue  # ends at the last instant seen / a call (HTTP, API write) as logged
            start, end = _ends(act, s.name)
            t = true[key]
            if start not in t or end not in t:
                continue
            real = t[end] - t[start]
            assert _ns(a[M.A_MIN]) <= real <= _ns(a[M.A_MAX]), (key, s.name, real)
            checked += 1
    assert checked > 1000


def _old_width(printed: dict[str, int], start: str, end: str) -> int:
    """``max - min`` as the model before issue 21 computed it (each end its own precision)."""
    s, e = printed[start], printed[end]
    lo = e - (s + OLD_PRECISION.get(start, 1))
    hi = e + OLD_PRECISION.get(end, 1) - s
    return max(0, hi) - max(0, lo)


def median_widths(capture) -> dict[str, tuple[float, float, int]]:
    """metric -> (old median width s, new median width s, spans) on the capture."""
    cap, _, traces = capture
    printed = {t.key: t.instants_for("list") for t in cap.truth}
    out = {}
    for metric, (span, _) in TARGETS.items():
        old, new = [], []
        for key, (act, spans) in traces.items():
            for s in spans:
                if s.name != span or s.status_code == M.STATUS_ERROR:
                    continue
                start, end = _ends(act, span)
                new.append(_ns(s.attributes[M.A_MAX]) - _ns(s.attributes[M.A_MIN]))
                old.append(_old_width(printed[key], start, end))
        out[metric] = (statistics.median(old) / M.S, statistics.median(new) / M.S, len(new))
    return out


@pytest.mark.slow
def test_median_widths_shrink_as_issue_21_asks(capture) -> None:
    widths = median_widths(capture)
    for metric, (old, new, n) in widths.items():
        assert n >= 20, metric
        assert old / new >= TARGETS[metric][1], (metric, old, new)


# --------------------------------------------------------------------------- one source each

UID = "811f8932-b608-416c-8a90-589b39ed9bde"
NAME = "req-x"
CTX = f'worker=0 node="n1" serverUID="{UID}" requesterName="{NAME}"'


def _line(t: str, msg: str, kv: str) -> KlogRecord:
    rec = parse_klog_line(f'I0629 {t}       1 inference-server.go:1] "{msg}" {kv}', 1)
    assert rec is not None
    return rec


def _http(t: str, purpose: str, start: str, lat: str, status: int = 200, extra: str = "") -> KlogRecord:
    err = "null" if 200 <= status < 300 else '"refused"'
    return _line(
        t,
        "HTTP call done",
        f'{CTX} {extra}purpose="{purpose}" method="GET" url="http://x/v2/vllm/instances/v1" '
        f"httpCallStartTime={start!r} latencySecs={lat} statusCode={status} err={err}".replace("'", '"'),
    )


def _pod(ready: str | None = None, started: str | None = None, scheduled: str | None = None) -> dict:
    conds = []
    if scheduled:
        conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled})
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": ready})
    status: dict = {"conditions": conds}
    if started:
        status["containerStatuses"] = [
            {"name": "inference-server", "state": {"running": {"startedAt": started}}}
        ]
    return {
        "kind": "Pod",
        "metadata": {
            "name": NAME,
            "namespace": "ns",
            "uid": UID,
            "creationTimestamp": "2026-06-29T14:35:40Z",
            "annotations": {"dual-pods.llm-d.ai/inference-server-config": "isc"},
        },
        "spec": {"nodeName": "n1", "containers": [{"name": "inference-server"}]},
        "status": status,
    }


def _instants(*recs: KlogRecord, pod: dict | None = None, dpc_only: bool = False):
    c = Correlator(dpc_only=dpc_only)
    if pod is not None:
        c.add_pod(PodEvent("LISTED", pod))
    for r in recs:
        c.add_dpc(r)
    [act] = c.actuations()
    return act


def _t(text: str) -> int:
    return parse_rfc3339_ns(text)


def test_source_k8s_timestamp_is_its_whole_second() -> None:
    i = _instants(pod=_pod()).instants["R.created"]
    assert (i.lo, i.hi, i.t_ns) == (_t("2026-06-29T14:35:40Z"), _t("2026-06-29T14:35:41Z") - 1, i.lo)
    assert i.source == "k8s:creationTimestamp"


def test_source_api_write_is_call_start_to_log_time() -> None:
    act = _instants(
        _line(
            "14:35:44.433871",
            "Created launcher-based server-providing pod",
            f'{CTX} name="launcher-a" k8sCallStartTime="2026-06-29T14:35:44.421880093Z"',
        ),
        _http("14:35:45.000000", "create_instance", "2026-06-29T14:35:44.9Z", "0.01", 201),
        dpc_only=True,
    )
    i = act.instants["L.created"]
    assert (i.lo, i.hi) == (_t("2026-06-29T14:35:44.421880093Z"), _t("2026-06-29T14:35:44.433872Z") - 1)
    assert i.source == "dpc:Created launcher-based server-providing pod"


def test_source_http_call_is_exact() -> None:
    act = _instants(
        _http("14:35:45.000000", "create_instance", "2026-06-29T14:35:44.9Z", "0.01", 201), pod=_pod()
    )
    s, e = act.instants["D.create.start"], act.instants["D.create.end"]
    assert (s.lo, s.hi, e.lo, e.hi) == (_t("2026-06-29T14:35:44.9Z"),) * 2 + (
        _t("2026-06-29T14:35:44.91Z"),
    ) * 2


def test_source_klog_time_is_its_microsecond() -> None:
    act = _instants(
        _line("14:36:00.123456", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        pod=_pod(),
    )
    i = act.instants["D.relayed"]
    assert (i.lo, i.hi) == (_t("2026-06-29T14:36:00.123456Z"), _t("2026-06-29T14:36:00.123457Z") - 1)


def test_source_polls_bracket_vllm_ready_from_failed_start_to_ok_end() -> None:
    act = _instants(
        _http("14:35:45.000000", "create_instance", "2026-06-29T14:35:44.9Z", "0.01", 201),
        _http("14:35:45.100000", "query_sleeping", "2026-06-29T14:35:45.09Z", "0.001", 0),
        _http("14:35:50.100000", "query_sleeping", "2026-06-29T14:35:50.09Z", "0.001", 0),
        _http("14:35:55.100000", "query_sleeping", "2026-06-29T14:35:55.09Z", "0.002", 200),
        pod=_pod(),
    )
    i = act.instants["V.ready"]
    assert (i.lo, i.hi) == (_t("2026-06-29T14:35:50.09Z") + 1, _t("2026-06-29T14:35:55.092Z"))
    assert act.instants["D.serving"].t_ns == _t("2026-06-29T14:35:55.092Z")


def test_source_actuation_secs_is_a_whole_second() -> None:
    act = _instants(
        _http("14:36:00.100000", "relay_ready", "2026-06-29T14:36:00.098Z", "0.001"),
        _line("14:36:00.100100", "Observed actuation latency", f'{CTX} path="hot" actuationSecs=18.1001'),
        _line("14:36:00.100200", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        dpc_only=True,
    )
    i = act.instants["R.started"]
    assert (i.lo, i.hi) == (_t("2026-06-29T14:35:42Z"), _t("2026-06-29T14:35:43Z") - 1)


def test_source_later_observer_bounds_from_above_only() -> None:
    # the requester's SPI server answered: R.started by that call's end (on the DPC's clock:
    # 1 ms of tolerance against the kubelet's), not one ns earlier
    act = _instants(
        _http("14:35:42.300000", "get_gpu_uuids", "2026-06-29T14:35:42.2Z", "0.003"),
        pod=_pod(started="2026-06-29T14:35:42Z"),
    )
    i = act.instants["R.started"]
    assert (i.lo, i.hi) == (_t("2026-06-29T14:35:42Z"), _t("2026-06-29T14:35:42.204Z"))
    # alone (no Pod second), an upper bound is no point: the instant is not given a value
    alone = _instants(
        _http("14:35:42.300000", "get_gpu_uuids", "2026-06-29T14:35:42.2Z", "0.003"),
        _line("14:36:00.100200", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        dpc_only=True,
    )
    assert "R.started" not in alone.instants


def test_source_processing_line_bounds_started_and_gives_its_second() -> None:
    seen = _line(
        "14:35:42.350000",
        "Processing inference server",
        f"{CTX} requesterRCS="
        '{"State":{"running":{"startedAt":"2026-06-29T14:35:42Z"}},"Ready":false,"Started":true}',
    )
    relayed = _line(
        "14:36:00.100200", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'
    )
    i = _instants(seen, relayed, dpc_only=True).instants["R.started"]
    # its startedAt's second (kubelet), cut by the line's own time (DPC, + 1 ms tolerance)
    assert (i.lo, i.hi) == (_t("2026-06-29T14:35:42Z"), _t("2026-06-29T14:35:42.351001Z") - 1)
    assert i.source == "dpc:requesterRCS startedAt + dpc:Processing inference server (running)"
    waiting = seen._replace(
        kv=tuple((k, {"State": {"waiting": {}}}) if k == "requesterRCS" else (k, v) for k, v in seen.kv)
    )
    assert "R.started" not in _instants(waiting, relayed, dpc_only=True).instants


def test_source_kubelet_notification_bounds_ready_by_its_arrival() -> None:
    note = _line(
        "14:36:47.250000",
        "Enqueuing inference server reference due to notification of update",
        f'logger="dual-pods-controller" nodeName="n1" item={{"UID":"{UID}","RequesterName":"{NAME}"}} '
        'infSvrItemType="requester" resourceVersion="9" lastWrite={"Manager":"kubelet","Time":"2026-06-29T14:36:47Z"}',
    )
    act = _instants(
        _http("14:36:40.100000", "relay_ready", "2026-06-29T14:36:40.098Z", "0.001"),
        _line("14:36:40.100200", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        note,
        pod=_pod(ready="2026-06-29T14:36:47Z"),
    )
    i = act.instants["R.ready"]
    # the log's microsecond, and the tolerance between the DPC's clock and the kubelet's
    assert (i.lo, i.hi) == (_t("2026-06-29T14:36:47Z"), _t("2026-06-29T14:36:47.251001Z") - 1)
    # a write of another second says nothing about this transition
    other = note._replace(
        kv=tuple(
            (k, {"Manager": "kubelet", "Time": "2026-06-29T14:36:46Z"}) if k == "lastWrite" else (k, v)
            for k, v in note.kv
        )
    )
    act = _instants(
        _http("14:36:40.100000", "relay_ready", "2026-06-29T14:36:40.098Z", "0.001"),
        _line("14:36:40.100200", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        other,
        pod=_pod(ready="2026-06-29T14:36:47Z"),
    )
    assert act.instants["R.ready"].hi == _t("2026-06-29T14:36:48Z") - 1


def test_source_conflict_beyond_the_tolerance_is_marked_not_hidden() -> None:
    # requesterCreateTime says another second than the Pod: the most precise kept, both named
    act = _instants(
        _line(
            "14:36:00.100200",
            "Successfully relayed the readiness",
            f'{CTX} readiness="ready" url="u" requesterCreateTime="2026-06-29T14:35:30Z"',
        ),
        pod=_pod(),
    )
    i = act.instants["R.created"]
    assert i.inconsistent and set(i.disagreed) == {"k8s:creationTimestamp", "dpc:requesterCreateTime"}
    assert i.hi - i.lo + 1 == M.S  # one second: not narrowed by the source that disagreed
    # every span starting or ending there says so, and who disagreed
    from fma_otel.build import build_trace

    root = build_trace(act)[0]
    assert root.attributes[M.A_INCONSISTENT] is True
    assert set(root.attributes[M.A_DISAGREED]) == {"k8s:creationTimestamp", "dpc:requesterCreateTime"}


def main() -> None:
    """Print the median widths (``PYTHONPATH=. python -m tests.test_truth_intervals [N SEED]``)."""
    import sys
    import tempfile

    n, seed = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (120, 21)
    cap, true = synth_capture_with_true_instants(n=n, seed=seed, reconcile_lines=True)
    d = Path(tempfile.mkdtemp())
    write_capture(cap, d)
    res = run_bridge(
        inputs_from_capture(d), baseline_selector={"app": "vllm"}, clock_tolerance_ns=TOLERANCE_NS
    )
    traces = {a.key: (a, t) for a, t in res.iter_traces()}
    for metric, (old, new, k) in median_widths((cap, true, traces)).items():
        print(
            f"{metric:20} spans {k:4}  median width before {old:.6f} s  now {new:.6f} s  shrink {old / new:.1f}x"
        )


if __name__ == "__main__":
    main()


def _launcher_pod() -> dict:
    return {
        "kind": "Pod",
        "metadata": {
            "name": "launcher-a",
            "namespace": "ns",
            "uid": "l-uid",
            "creationTimestamp": "2026-06-29T14:35:44Z",
            "labels": {"dual-pods.llm-d.ai/launcher-config-name": "lc"},
        },
        "spec": {"nodeName": "n1"},
        "status": {
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-06-29T14:35:44Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-06-29T14:36:10Z"},
            ]
        },
    }


def _cold(*extra: KlogRecord):
    c = Correlator()
    c.add_pod(PodEvent("LISTED", _pod()))
    c.add_pod(PodEvent("LISTED", _launcher_pod()))
    for r in (
        _line(
            "14:35:44.433871",
            "Created launcher-based server-providing pod",
            f'{CTX} name="launcher-a" k8sCallStartTime="2026-06-29T14:35:44.421880093Z"',
        ),
        *extra,
        _http(
            "14:36:11.000000",
            "create_instance",
            "2026-06-29T14:36:10.9Z",
            "0.01",
            201,
            'providerName="launcher-a" ',
        ),
    ):
        c.add_dpc(r)
    [act] = c.actuations()
    return act


def test_source_first_list_call_bounds_launcher_ready_from_above() -> None:
    act = _cold(
        _http(
            "14:36:10.520000",
            "list_instances",
            "2026-06-29T14:36:10.5Z",
            "0.002",
            200,
            'providerName="launcher-a" ',
        )
    )
    i = act.instants["L.ready"]
    # the kubelet's second, cut at the call's start (DPC clock: + 1 ms of tolerance)
    assert (i.lo, i.hi) == (_t("2026-06-29T14:36:10Z"), _t("2026-06-29T14:36:10.501Z"))
    assert i.source == "k8s:Ready + dpc:HTTP call done/list_instances/start"


def test_source_scheduler_notification_bounds_launcher_scheduled_from_above() -> None:
    note = _line(
        "14:35:44.600000",
        "Enqueuing launcher reference due to notification of update",
        'logger="dual-pods-controller" nodeName="n1" launcherPod="launcher-a" resourceVersion="5" '
        'lastWrite={"Manager":"kube-scheduler","Time":"2026-06-29T14:35:44Z"}',
    )
    i = _cold(note).instants["L.scheduled"]
    # after L.created (the create call's start), by the notification (+ 1 µs, + 1 ms tolerance)
    assert i.lo == _t("2026-06-29T14:35:44.421880093Z") - M.MS
    assert i.hi == _t("2026-06-29T14:35:44.601001Z") - 1
    # a kubelet write says nothing about scheduling
    kubelet = note._replace(
        kv=tuple(
            (k, {"Manager": "kubelet", "Time": "2026-06-29T14:35:44Z"}) if k == "lastWrite" else (k, v)
            for k, v in note.kv
        )
    )
    assert _cold(kubelet).instants["L.scheduled"].hi == _t("2026-06-29T14:35:45Z") - 1


def test_source_relay_call_bounds_relayed_and_ready_from_below() -> None:
    act = _instants(
        _http("14:36:40.100000", "relay_ready", "2026-06-29T14:36:40.098Z", "0.0015005"),
        _line("14:36:40.099500", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        pod=_pod(ready="2026-06-29T14:36:40Z"),
    )
    # the relay line's microsecond, cut at the end of the call it reports (same clock)
    relayed = act.instants["D.relayed"]
    assert (relayed.lo, relayed.hi) == (
        _t("2026-06-29T14:36:40.0995005Z"),
        _t("2026-06-29T14:36:40.099501Z") - 1,
    )
    # the requester turns Ready only after it was told to (DPC clock: - 1 ms of tolerance)
    ready = act.instants["R.ready"]
    assert ready.lo == _t("2026-06-29T14:36:40.098Z") - M.MS and ready.hi == _t("2026-06-29T14:36:41Z") - 1
    assert act.instants["D.relay.start"].t_ns == _t("2026-06-29T14:36:40.098Z")
