"""OTLP export of the live bridge: off the main loop, nothing lost while the collector is down.

A fake sink stands in for the OTLP exporter: it can block (a collector that hangs) or fail
(one that is down), so these tests need no real waiting for SDK timeouts.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fma_otel.model import A_REQ_NAME, trace_id_for
from fma_otel.sinks.otlp_export import ExportError
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
from tests.live.test_watch_stream import _complete, assert_same
from tests.support.k8s_server import FakeCluster

pytestmark = pytest.mark.slow


class FakeSink:
    """``OtlpSink.export``'s contract: returns when delivered, raises ExportError if not."""

    timeout_s = 1.0

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.down = False
        self.calls = 0
        self._spans: list = []
        self._lock = threading.Lock()

    def export(self, spans) -> None:  # noqa: ANN001
        with self._lock:
            self.calls += 1
        if not self.gate.wait(120):
            raise ExportError("gate never opened")
        if self.down:
            raise ExportError("collector down")
        with self._lock:
            self._spans.extend(spans)

    def traces(self) -> dict[str, list]:
        with self._lock:
            spans = list(self._spans)
        out: dict[str, list] = {}
        for s in spans:
            out.setdefault(s.trace_id, []).append(s)
        return out

    def close(self) -> None:
        pass


def checkpoint(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def pending_ids(path: Path) -> set[str]:
    return {trace_id_for(k) for k in checkpoint(path).get("pending") or ()}


def resend_after_forgetting(k8s: FakeCluster, tmp_path: Path, cp: Path, want: dict, **extra: Any) -> FakeSink:
    """Delete the requesters and compact the API server's history (the cluster has
    forgotten them), then restart the watcher with a working sink: what the checkpoint
    holds pending must still arrive, and be recorded as emitted."""
    for name in {t[0].attributes[A_REQ_NAME] for t in want.values()}:
        k8s.delete_pod(name, NS)
    k8s.compact()
    # the stopped watcher's streams closed on the server too: ``InProcessWatcher`` waits for
    # one more open stream than it finds, and one closing meanwhile would hide the new one
    k8s.drop_connections()
    assert wait_for(lambda: k8s.open_streams("watch") == 0 and k8s.open_streams("log") == 0, 30)
    up = FakeSink()
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2, **extra)
    w.watcher.sink = up
    with w:
        assert wait_for(lambda: set(up.traces()) >= set(want), 60), (len(up.traces()), len(want))
        assert wait_for(lambda: emitted_ids(cp) >= set(want), 60)
    return up


def emitted_ids(path: Path) -> set[str]:
    return {trace_id_for(k) for k in checkpoint(path).get("emitted") or ()}


def test_export_runs_off_the_loop(k8s: FakeCluster, tmp_path: Path) -> None:
    """A hanging export: intake, --out and health go on; the checkpoint waits for the export."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=21)
    want = _complete(offline_traces(cap, tmp_path))
    steps = timeline(cap)
    out, cp = tmp_path / "out.jsonl", tmp_path / "checkpoint.json"
    sink = FakeSink()
    sink.gate.clear()  # every export hangs until the gate opens
    w = InProcessWatcher(k8s, tmp_path)
    w.watcher.sink = sink
    with w:
        play(k8s, steps[: len(steps) // 2])
        assert wait_for(lambda: sink.calls >= 1, 60)
        events, tick = w.watcher.metrics.pod_events, w.watcher._last_tick
        play(k8s, steps[len(steps) // 2 :])
        # the export still hangs, yet every trace is built and written
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60), (len(traces_in(out)), len(want))
        assert w.watcher.metrics.pod_events > events
        assert wait_for(lambda: w.watcher._last_tick > tick + 0.5, 30)
        assert w.watcher.healthy() == (True, "ok")
        assert sink.calls == 1 and not sink.traces()
        assert wait_for(lambda: pending_ids(cp) >= set(want), 30)
        assert not emitted_ids(cp) & set(want)  # not before the export completed
        sink.gate.set()
        assert wait_for(lambda: set(sink.traces()) >= set(want), 60)
        assert wait_for(lambda: emitted_ids(cp) >= set(want) and not pending_ids(cp), 60)
    assert_same(traces_in(out), want)
    assert_same(sink.traces(), want)


def test_collector_down_past_the_forget_horizon_loses_nothing(k8s: FakeCluster, tmp_path: Path) -> None:
    """Requesters deleted while OTLP fails are kept until their traces are through."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=22)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    sink = FakeSink()
    sink.down = True
    offset = [0.0]
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2)
    w.watcher.sink = sink
    w.watcher.clock = lambda: time.time() + offset[0]
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
        assert wait_for(lambda: w.watcher.metrics.export_errors >= 2, 30)
        names = {t[0].attributes[A_REQ_NAME] for t in want.values()}
        uids = {t[0].attributes["fma.requester.uid"] for t in want.values()}
        for name in names:
            k8s.delete_pod(name, NS)
        assert wait_for(lambda: uids <= set(w.watcher.state.gone_at), 60)
        # far past --incomplete-after + grace + 60 s: deleted Pods would now be forgotten
        offset[0] = 2 * 3600.0
        assert wait_for(lambda: w.watcher._next_forget > time.time() + 3600, 30)
        forgot_at = w.watcher._next_forget
        assert wait_for(lambda: w.watcher._next_forget > forgot_at, 30)  # a second look too
        assert uids <= set(w.watcher.state.gone_at)
        assert all(w.watcher.correlator.store.get(u) is not None for u in uids)
        sink.down = False
        assert wait_for(lambda: set(sink.traces()) >= set(want), 60)
        # once through, they go
        assert wait_for(lambda: not uids & set(w.watcher.state.gone_at), 60)
    assert_same({t: s for t, s in sink.traces().items() if t in want}, want)


@pytest.mark.parametrize("with_out", [True, False], ids=["from-out-file", "otlp-only"])
def test_pending_traces_reexported_when_requesters_are_gone(
    k8s: FakeCluster, tmp_path: Path, with_out: bool
) -> None:
    """Stopped while OTLP was down, requesters deleted and history compacted meanwhile:
    the restart cannot rebuild those actuations, and re-sends them from --out / the checkpoint."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=23)
    want = _complete(offline_traces(cap, tmp_path))
    out, cp = tmp_path / "out.jsonl", tmp_path / "checkpoint.json"
    extra = {} if with_out else {"out": None}
    down = FakeSink()
    down.down = True
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2, **extra)
    w.watcher.sink = down
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: pending_ids(cp) >= set(want), 60)
    assert pending_ids(cp) >= set(want)
    assert not emitted_ids(cp) & set(want)
    if not with_out:
        assert not out.exists()
        assert len(checkpoint(cp)["pending_traces"]) == len(checkpoint(cp)["pending"])
    up = resend_after_forgetting(k8s, tmp_path, cp, want, **extra)
    doc = checkpoint(cp)
    assert doc["pending"] == [] and doc["pending_traces"] == {}
    assert_same({t: s for t, s in up.traces().items() if t in want}, want)
    if with_out:
        assert_same(traces_in(out), want)  # and each still once in the file
