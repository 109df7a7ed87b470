"""``fma-otel watch`` with the Events watch and ``--vllm-logs``, against the test API server.

The phase-span builder (``extra_spans``, as ``fma_otel.phase_inputs.add_phases`` calls it) is replaced by a recorder in
the tests of the plumbing, so they check what the watcher hands it: each actuation's vLLM
phases (parsed from the log the fake launcher served through the pod proxy, in ranges of
at most 1 MiB) and the Events about its Pods, before its trace is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fma_otel import model as M
from fma_otel.sources.vllm_log import parse_vllm_log
from fma_otel.span_records import SpanRecord
from tests.live.replay import (
    NS,
    InProcessWatcher,
    dpc_pod,
    offline_traces,
    play,
    recent_capture,
    timeline,
    traces_in,
    wait_for,
)
from tests.support.k8s_server import FakeCluster, make_event

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm" / "v0.26.0-fma-instance.log"
MIB = 1 << 20


class Recorder:
    """Stands in for ``extra_spans``: records its arguments, adds one child of the root."""

    def __init__(self) -> None:
        self.calls: dict[str, dict[str, Any]] = {}

    def __call__(self, act: Any, trace: list[SpanRecord], *, vllm, events, **_: Any) -> list:  # noqa: ANN001
        self.calls[act.key] = {"vllm": dict(vllm), "events": list(events), "path": act.path}
        root = next(s for s in trace if not s.parent_span_id)
        return [
            SpanRecord(
                root.trace_id,
                M.span_id_for(root.trace_id, "test.extra"),
                root.span_id,
                "test.extra",
                "internal",
                root.start_ns,
                root.start_ns + 1,
                root.service,
                {"vllm.phases": sum(len(v) for v in vllm.values()), "k8s.events": len(events)},
            )
        ]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    from fma_otel import phase_inputs

    rec = Recorder()
    monkeypatch.setattr(phase_inputs, "extra_spans", rec)
    return rec


def _roots(offline: dict) -> list[SpanRecord]:
    return [next(s for s in t if not s.parent_span_id) for t in offline.values()]


def _serve_instances(k8s: FakeCluster, roots: list[SpanRecord]) -> set[tuple[str, str]]:
    """A fake launcher behind each launcher Pod, with the fixture as each of its instances' log."""
    data = FIXTURE.read_bytes()
    served: set[tuple[str, str]] = set()
    backends: dict[str, Any] = {}
    for r in roots:
        inst, launcher = r.attributes.get(M.A_INSTANCE), r.attributes.get(M.A_LAUNCHER)
        if not inst or not launcher or (launcher, inst) in served:
            continue
        if launcher not in backends:
            backends[launcher] = k8s.add_launcher(launcher, NS)
        backends[launcher].append(inst, data)
        served.add((str(launcher), str(inst)))
    return served


def _want_phases() -> list:
    """The fixture's phases (its launcher line carries the full date: it anchors the year,
    whatever year the watcher passes)."""
    phases, _ = parse_vllm_log(FIXTURE.read_bytes().splitlines(), year=2000)
    return phases


def test_watch_hands_each_trace_its_vllm_phases_and_events(
    k8s: FakeCluster, tmp_path: Path, recorder: Recorder
) -> None:
    cap = recent_capture(seed=1)
    offline = offline_traces(cap, tmp_path)
    roots = _roots(offline)
    served = _serve_instances(k8s, roots)
    assert served  # the capture has FMA instances
    launcher = sorted(served)[0][0]
    lpod = next(p for typ, p in cap.pod_events if p["metadata"]["name"] == launcher)
    k8s.add_pod(dpc_pod())
    # one Event listed before the watcher starts, one watched after
    k8s.add_event(
        make_event(
            "Scheduled",
            f"Successfully assigned {NS}/{launcher} to n1",
            pod=lpod,
            component="default-scheduler",
            event_time_us=1_700_000_000_000_001,
        )
    )
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path, vllm_logs=True, vllm_log_timeout_s=10) as w:
        k8s.add_event(
            make_event(
                "Pulled",
                'Successfully pulled image "x" in 2.5s (2.5s including waiting)',
                pod=lpod,
                container="inference-server",
                first=1_700_000_001,
            )
        )
        assert wait_for(lambda: len(w.watcher.events) == 2, 10)
        # Events are listed and watched through events.k8s.io/v1 (the server converts the
        # core/v1 objects, as kube-apiserver does), never through core/v1
        assert k8s.requests_to("/apis/events.k8s.io/v1/namespaces/") and k8s.requests_to(
            "/apis/events.k8s.io/v1/namespaces/", watch="true"
        )
        assert not [r for r in k8s.requests if r.path.startswith("/api/v1/") and r.path.endswith("/events")]
        play(k8s, timeline(cap))
        want = {tid for tid, t in offline.items() if t[0].attributes.get("fma.complete", True) is not False}
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60), (len(traces_in(out)), len(want))
        metrics = w.metrics_text()
    live = traces_in(out)
    assert sorted(live) == sorted(want)
    # every trace went through extra_spans, and what it returned is in the written trace
    for tid, spans in live.items():
        extra = [s for s in spans if s.name == "test.extra"]
        assert len(extra) == 1, tid
    # FMA instances: the phases of the log the launcher served, keyed by instance id
    want_phases = _want_phases()
    assert len(want_phases) > 10
    n_fma = 0
    for tid in want:
        root = next(s for s in live[tid] if not s.parent_span_id)
        call = recorder.calls[str(root.attributes[M.A_ACTUATION_KEY])]
        inst = root.attributes.get(M.A_INSTANCE)
        if root.attributes[M.A_PATH] == M.COLD_NO_FMA or not inst:
            assert call["vllm"] == {}  # (the baseline Pods' logs are empty here)
            continue
        assert call["vllm"] == {inst: want_phases}, root.attributes[M.A_ACTUATION_KEY]
        n_fma += 1
    assert n_fma > 0
    # the Events of the launcher, to the actuations that name it
    with_events = [c for c in recorder.calls.values() if c["events"]]
    assert with_events
    assert all(sorted(e.reason for e in c["events"]) == ["Pulled", "Scheduled"] for c in with_events)
    # ranges of at most 1 MiB, on port 8001, through the pod proxy; each log's first read
    # starts at 0 (a later fetch of the same log may go on from what is cached)
    first_read: set[str] = set()
    for req in k8s.proxied():
        assert req.port == 8001 and req.range is not None
        s, e = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", req.range).groups())
        assert e - s + 1 <= MIB
        if req.path not in first_read:
            first_read.add(req.path)
            assert s == 0, req
    assert {r.pod for r in k8s.proxied()} <= {launcher for launcher, _ in served}
    assert "fma_otel_vllm_log_fetch_errors_total 0" in metrics
    assert "fma_otel_events_total 2" in metrics


def test_vllm_log_errors_are_counted_and_the_trace_still_goes_out(
    k8s: FakeCluster, tmp_path: Path, recorder: Recorder
) -> None:
    """Every launcher answers 404 (instance gone) or refuses (503): each fetch is counted,
    each trace is written, with no vLLM phases."""
    cap = recent_capture(seed=1)
    offline = offline_traces(cap, tmp_path)
    roots = _roots(offline)
    launchers = sorted({str(r.attributes[M.A_LAUNCHER]) for r in roots if r.attributes.get(M.A_LAUNCHER)})
    for i, name in enumerate(launchers):
        backend = k8s.add_launcher(name, NS)  # no instance: 404
        backend.refuse = i % 2 == 1  # and every other one refuses: 503
    k8s.add_pod(dpc_pod())
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path, vllm_logs=True, vllm_log_timeout_s=10) as w:
        play(k8s, timeline(cap))
        want = {tid for tid, t in offline.items() if t[0].attributes.get("fma.complete", True) is not False}
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
        metrics = w.metrics_text()
    assert sorted(traces_in(out)) == sorted(want)
    assert all(not c["vllm"] for c in recorder.calls.values())
    statuses = {r.status for r in k8s.proxied()}
    assert statuses <= {404, 503} and 404 in statuses
    n = int(re.search(r"^fma_otel_vllm_log_fetch_errors_total (\d+)", metrics, re.M).group(1))
    assert n == len(k8s.proxied()) and n > 0


def test_events_watch_relists_after_410_and_keeps_watching(k8s: FakeCluster, tmp_path: Path) -> None:
    pod = k8s.add_pod(dpc_pod())
    k8s.add_event(
        make_event(
            "Started", "Started container controller", pod=pod, container="controller", first=1_700_000_000
        )
    )
    with InProcessWatcher(k8s, tmp_path, wait_logs=1) as w:
        assert k8s.wait_for_streams("events-watch", 1, timeout=10)
        assert wait_for(lambda: len(w.watcher.events) == 1, 10)
        lists_before = len([r for r in k8s.requests_to("/events") if r.query.get("watch") != "true"])
        k8s.expire_watches("events-watch")
        assert wait_for(
            lambda: (
                len([r for r in k8s.requests_to("/events") if r.query.get("watch") != "true"]) > lists_before
            ),
            10,
        )
        ev = k8s.add_event(
            make_event(
                "Killing",
                "Stopping container controller",
                pod=pod,
                container="controller",
                first=1_700_000_005,
            )
        )
        assert wait_for(lambda: len(w.watcher.events) == 2, 10)
        # a repeat (count 2) replaces its Event, it is not a second one
        k8s.modify_event(ev["metadata"]["name"], NS, patch={"count": 2})
        name = pod["metadata"]["name"]
        assert wait_for(lambda: max(e.count for e in w.watcher.events.about([name])) == 2, 10)
        assert len(w.watcher.events) == 2
        got = w.watcher.events.about([name])
        assert [(e.raw_reason, e.count) for e in got] == [("Started", 1), ("Killing", 2)]
        assert w.watcher.event_watcher is not None and w.watcher.event_watcher.stats.relists >= 1


def test_events_forbidden_is_warned_and_traces_still_go_out(
    k8s: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A Role without list on events (a deployment older than the Events watch): the
    watcher says so, keeps retrying slowly, and emits every trace without the Events."""
    from fma_otel.live import watcher as W

    monkeypatch.setattr(W, "LOG_WAIT_S", 0.5)  # the wait for the first Events list
    k8s.inject_error("GET", r"/events$", 403, count=10_000)
    cap = recent_capture(seed=1)
    offline = offline_traces(cap, tmp_path)
    want = {tid for tid, t in offline.items() if t[0].attributes.get("fma.complete", True) is not False}
    k8s.add_pod(dpc_pod())
    out = tmp_path / "out.jsonl"
    with caplog.at_level("WARNING"), InProcessWatcher(k8s, tmp_path) as w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
        metrics = w.metrics_text()
    assert sorted(traces_in(out)) == sorted(want)
    said = [r.getMessage() for r in caplog.records if "list and watch on events" in r.getMessage()]
    assert len(said) == 1 and "HTTP 403" in said[0]
    assert re.search(r"^fma_otel_event_watch_errors_total [1-9]", metrics, re.M)
    assert "fma_otel_events_total 0" in metrics
