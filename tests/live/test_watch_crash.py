"""Exactly once across SIGKILL: the real ``fma-otel watch`` process, killed and restarted.

Derived ids make "once" checkable: after every kill and restart, the ``--out`` file must
hold each actuation's trace exactly once (no line twice, none missing), and each tree must
equal the offline bridge's for the same data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.live.replay import NS, dpc_pod, offline_traces, play, recent_capture, timeline, traces_in, wait_for
from tests.live.test_watch_stream import _complete, assert_same
from tests.support.k8s_server import FakeCluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_stray_watchers() -> Iterator[None]:
    """A failed assertion must not leave a watcher retrying forever against a dead server."""
    yield
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            p.kill()
            p.wait(10)


def start_watch(
    k8s: FakeCluster, tmp: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    kubeconfig = k8s.write_kubeconfig(str(tmp / "kubeconfig"), NS)
    args = [
        sys.executable,
        "-c",
        "from fma_otel.cli import run; run()",
        "watch",
        "--namespace",
        NS,
        "--kubeconfig",
        kubeconfig,
        "--launcher-logs",
        "--baseline-selector",
        "app=vllm",
        "--checkpoint",
        str(tmp / "cp" / "checkpoint.json"),
        "--out",
        str(tmp / "out.jsonl"),
        "--grace",
        "300ms",
        "--incomplete-after",
        "1h",
        "--metrics-port",
        "-1",
        "--tick",
        "50ms",
        "--checkpoint-interval",
        "200ms",
        "--backoff-base",
        "20ms",
        "--backoff-max",
        "200ms",
        "--watch-timeout",
        "5",
        "--log-read-timeout",
        "5s",
        "--log-level",
        "warning",
        *extra,
    ]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    full_env.pop("FMA_OTEL_FAULT", None) if not env or "FMA_OTEL_FAULT" not in env else None
    p = subprocess.Popen(args, env=full_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _STARTED.append(p)
    return p


def lists(k8s: FakeCluster) -> int:
    return len(k8s.requests_to(f"/namespaces/{NS}/pods", limit="500"))


def started(k8s: FakeCluster, before: int) -> bool:
    """The new process has listed Pods (so its SIGTERM handler is installed)."""
    return wait_for(lambda: lists(k8s) > before, 60)


def kill9(p: subprocess.Popen) -> None:
    p.send_signal(signal.SIGKILL)
    p.wait(60)


def test_sigkill_at_several_points_exactly_once(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=11)
    want = _complete(offline_traces(cap, tmp_path))
    steps = timeline(cap)
    out = tmp_path / "out.jsonl"
    n = len(steps)
    cuts = [n // 5, 2 * n // 5, 3 * n // 5, 4 * n // 5]

    # 1. killed right after start, before it could list anything useful
    p = start_watch(k8s, tmp_path)
    time.sleep(0.3)
    kill9(p)

    # 2. killed while the stream flows; 3. events happen while it is dead
    p = start_watch(k8s, tmp_path)
    assert k8s.wait_for_streams("watch", 1, 60)
    play(k8s, steps[: cuts[0]])
    kill9(p)
    play(k8s, steps[cuts[0] : cuts[1]])

    # 4. killed just after writing a trace, before the checkpoint records it
    p = start_watch(k8s, tmp_path, env={"FMA_OTEL_FAULT": "after-write:1"})
    assert k8s.wait_for_streams("watch", 1, 60)
    play(k8s, steps[cuts[1] : cuts[2]])
    p.wait(60)
    assert p.returncode == -signal.SIGKILL
    assert len(traces_in(out)) >= 1

    # 5. killed mid-flow again, after some emissions
    p = start_watch(k8s, tmp_path)
    assert k8s.wait_for_streams("watch", 1, 60)
    play(k8s, steps[cuts[2] : cuts[3]], pause_every=20, pause_s=0.05)
    kill9(p)
    play(k8s, steps[cuts[3] :])

    # 6. a last run that finishes the job and stops on SIGTERM
    before = lists(k8s)
    p = start_watch(k8s, tmp_path)
    assert started(k8s, before)
    assert wait_for(lambda: len(traces_in(out)) >= len(want), 60), (len(traces_in(out)), len(want))
    time.sleep(0.5)  # nothing more may come
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 0, p.stderr.read().decode() if p.stderr else ""
    live = traces_in(out)  # asserts no trace line twice
    assert_same(live, want)
    import json

    cp = json.loads((tmp_path / "cp" / "checkpoint.json").read_text())
    from fma_otel.model import trace_id_for

    assert {trace_id_for(k) for k in cp["emitted"]} == set(want)
    assert cp["pending"] == []


def test_crash_after_otlp_export_reexports_same_ids(k8s: FakeCluster, tmp_path: Path) -> None:
    """Killed between export and checkpoint: the batch goes again, with the same ids."""
    from tests.support.otlp_receiver import HttpOtlpReceiver

    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=12)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    with HttpOtlpReceiver() as rx:
        otlp = ("--otlp-endpoint", rx.endpoint, "--otlp-protocol", "http/protobuf")
        p = start_watch(k8s, tmp_path, *otlp, env={"FMA_OTEL_FAULT": "after-export:1"})
        assert k8s.wait_for_streams("watch", 1, 60)
        play(k8s, timeline(cap))
        p.wait(60)
        assert p.returncode == -signal.SIGKILL
        first_spans = rx.spans()
        first = {s.trace_id for s in first_spans}
        assert first
        before = lists(k8s)
        p = start_watch(k8s, tmp_path, *otlp)
        assert started(k8s, before)
        # the batch caught by the crash is exported again once the restart rebuilt it
        assert wait_for(lambda: len(rx.spans()) > len(first_spans), 60)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
        assert wait_for(lambda: {s.trace_id for s in rx.spans()} >= set(want), 60)
        time.sleep(0.3)
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
        spans = rx.spans()
    assert_same(traces_in(out), want)
    received: dict[tuple[str, str], int] = {}
    for s in spans:
        received[(s.trace_id, s.span_id)] = received.get((s.trace_id, s.span_id), 0) + 1
    # every span arrived; only the batch caught by the crash arrived twice, with equal ids
    assert {t for t, _ in received} == set(want)
    assert {t for (t, _), n in received.items() if n > 1} <= first
    assert all(n <= 2 for n in received.values())
