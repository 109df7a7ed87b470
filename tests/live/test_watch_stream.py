"""The live bridge on a normal stream, 410 mid-watch, a dropped connection, a DPC restart.

Every scenario ends with the same check: the traces written live equal, span for span,
what the offline bridge gives for the same data.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.replay import (
    NS,
    InProcessWatcher,
    apply,
    dpc_pod,
    offline_traces,
    play,
    recent_capture,
    timeline,
    traces_in,
    tree,
    wait_for,
)
from tests.support.k8s_server import FakeCluster

pytestmark = pytest.mark.slow


def _complete(offline: dict) -> dict:
    return {tid: t for tid, t in offline.items() if t[0].attributes.get("fma.complete", True) is not False}


def assert_same(live: dict, offline: dict) -> None:
    assert sorted(live) == sorted(offline)
    for tid in offline:
        a, b = tree(live[tid]), tree(offline[tid])
        if a != b:
            only_live = sorted(set(a) - set(b))
            only_offline = sorted(set(b) - set(a))
            raise AssertionError(
                f"trace {tid} differs:\nlive only: {only_live}\noffline only: {only_offline}"
            )


def test_normal_stream_every_path(k8s: FakeCluster, tmp_path: Path) -> None:
    cap = recent_capture(seed=1)
    offline = offline_traces(cap, tmp_path)
    paths = {t[0].attributes["fma.path"] for t in offline.values()}
    assert {"cold_launcher", "warm", "hot", "cold_no_fma"} <= paths
    k8s.add_pod(dpc_pod())
    with InProcessWatcher(k8s, tmp_path) as w:
        play(k8s, timeline(cap))
        want = _complete(offline)
        out = tmp_path / "out.jsonl"
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60), (len(traces_in(out)), len(want))
        metrics = w.metrics_text()
    live = traces_in(out)
    assert_same(live, want)
    assert 'fma_otel_actuations_emitted_total{complete="true"}' in metrics
    # the DPC's API writes reach the live traces too (the same correlator)
    names = {s.name for t in live.values() for s in t}
    writes = ("fma.dpc.create_launcher_pod", "fma.dpc.bind_pod", "fma.dpc.label_launcher_pod")
    assert {*writes, "fma.dpc.set_requester_status"} <= names


def _run_split(k8s: FakeCluster, tmp_path: Path, cap, middle, **overrides) -> dict:
    """Play the first half, call ``middle(watcher)``, play the rest; return the live traces."""
    steps = timeline(cap)
    half = len(steps) // 2
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path, **overrides) as w:
        play(k8s, steps[:half])
        middle(w, steps)
        play(k8s, steps[half:])
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60), (len(traces_in(out)), len(want))
        w.metrics = w.metrics_text()
    live = traces_in(out)
    assert_same(live, want)
    return {"watcher": w, "live": live}


def test_410_mid_watch_relists_without_reemitting(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())

    def expire(w: InProcessWatcher, _steps) -> None:
        lists = len(k8s.requests_to("/pods", limit="500"))
        k8s.expire_watches()  # ERROR 410 event on the open watch
        assert wait_for(lambda: len(k8s.requests_to("/pods", limit="500")) > lists, 60)
        assert k8s.wait_for_streams("watch", 1)

    r = _run_split(k8s, tmp_path, recent_capture(seed=2), expire)
    assert r["watcher"].watcher.pod_watcher.stats.relists >= 1
    assert "fma_otel_pod_watch_relists_total 1" in r["watcher"].metrics


def test_http_410_on_reconnect(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())
    k8s.gone_mode = "http"

    def compact_and_drop(w: InProcessWatcher, steps) -> None:
        k8s.compact()
        k8s.drop_connections("watch")  # the re-watch from the old version gets HTTP 410
        assert wait_for(lambda: w.watcher.pod_watcher.stats.relists >= 1, 60)
        assert k8s.wait_for_streams("watch", 1)

    _run_split(k8s, tmp_path, recent_capture(seed=3), compact_and_drop)


def test_dropped_connections_resume_without_loss_or_repeat(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())

    def drop(w: InProcessWatcher, steps) -> None:
        # events and lines land while every stream is cut: they must come on reconnect
        k8s.drop_connections()
        for s in steps[len(steps) // 2 : len(steps) // 2 + 5]:
            apply(k8s, s)
        del steps[len(steps) // 2 : len(steps) // 2 + 5]

    r = _run_split(k8s, tmp_path, recent_capture(seed=4), drop)
    stats = r["watcher"].watcher.pod_watcher.stats
    assert stats.watches >= 2


def test_dpc_container_restart_reads_previous_for_the_gap(k8s: FakeCluster, tmp_path: Path) -> None:
    dpc = dpc_pod()
    k8s.add_pod(dpc)
    name = dpc["metadata"]["name"]

    def restart(w: InProcessWatcher, steps) -> None:
        # cut the log stream, write lines the follower has not read, then restart the
        # container: those lines now exist only in the previous instance's log
        k8s.drop_connections("log")
        mid = len(steps) // 2
        gap = [s for s in steps[mid : mid + 40] if s.kind == "dpc"]
        for s in gap:
            apply(k8s, s)
        for s in gap:
            steps.remove(s)
        k8s.restart_container(name, "controller", namespace=NS)

    r = _run_split(k8s, tmp_path, recent_capture(seed=5), restart, backoff_base_s=0.2, backoff_max_s=0.3)
    assert k8s.requests_to(f"/pods/{name}/log", previous="true")
    assert "fma_otel_log_previous_reads_total 0" not in r["watcher"].metrics


def test_dpc_pod_replaced(k8s: FakeCluster, tmp_path: Path) -> None:
    """A new DPC Pod (rollout): its log is followed from its start, the old one to its end.

    The end of the first half, the new Pod with its whole log and the old Pod's deletion
    are written under the fake cluster's lock, so no stream sends anything in between:
    the old Pod's last lines can only be read after it is gone (the stream carries them
    to its end, as the kubelet's does), and the new Pod's lines are all written before
    the watcher can know that Pod (a follower starting anywhere but at the start misses
    them).
    """
    old = dpc_pod()
    k8s.add_pod(old)
    cap = recent_capture(seed=6)
    steps = timeline(cap)
    half = len(steps) // 2
    held = [s for s in steps[:half] if s.kind == "dpc"][-20]  # the old Pod's last 20 lines
    cut = steps.index(held)
    assert any(s.kind == "dpc" for s in steps[half:])
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    new_name = "fma-controllers-dual-pods-controller-7d9f8b6c5-zz9p1"
    with InProcessWatcher(k8s, tmp_path):
        play(k8s, steps[:cut])
        with k8s.cond:
            play(k8s, steps[cut:half])
            k8s.add_pod(dpc_pod(name=new_name))
            for s in steps[half:]:
                apply(k8s, s, dpc=new_name)
            k8s.delete_pod(old["metadata"]["name"], NS)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
    assert_same(traces_in(out), want)


def test_odd_pod_never_stops_the_watch(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())

    def odd(w: InProcessWatcher, steps) -> None:
        weird = {
            "metadata": {
                "name": "weird",
                "namespace": NS,
                "labels": {"app": "vllm"},
                "annotations": {"dual-pods.llm-d.ai/inference-server-config": "x"},
                "creationTimestamp": "not a time",
            },
            "spec": {"containers": "not a list", "priority": "high"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": 7}],
                "phase": 3,
            },
        }
        k8s.add_pod(weird)
        k8s.modify_pod("weird", NS, patch={"status": {"containerStatuses": {"oops": True}}})

    _run_split(k8s, tmp_path, recent_capture(seed=7), odd)


def test_incomplete_after_restart_once_per_key(k8s: FakeCluster, tmp_path: Path) -> None:
    """Complete traces first; a second run (same checkpoint) adds only the incomplete one."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=8, ago_s=5)
    offline = offline_traces(cap, tmp_path)
    want = _complete(offline)
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path):
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 60)
    assert_same(traces_in(out), want)
    with InProcessWatcher(k8s, tmp_path, incomplete_after_s=1.0) as w:
        assert wait_for(lambda: len(traces_in(out)) >= len(offline), 60)
        assert wait_for(lambda: w.watcher.metrics.emitted["false"] >= 1, 60)
    assert_same(traces_in(out), offline)


def test_pod_with_another_pods_uid_is_refused_and_counted(k8s: FakeCluster, tmp_path: Path) -> None:
    """A Pod whose uid another Pod already has (a corrupt object) is refused, counted in
    ``fma_otel_pod_uid_conflicts_total`` and never merged into that requester's trace: the
    live traces stay those of the offline bridge."""
    k8s.add_pod(dpc_pod())
    taken: list[str] = []

    def impostor(w: InProcessWatcher, steps) -> None:
        half = steps[: len(steps) // 2]
        uid = next(
            s.payload[1]["metadata"]["uid"]
            for s in half
            if s.kind == "pod"
            and "dual-pods.llm-d.ai/inference-server-config"
            in (s.payload[1]["metadata"].get("annotations") or {})
        )
        taken.append(uid)
        k8s.add_pod(
            {
                "metadata": {"name": "impostor", "namespace": NS, "uid": uid, "labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c"}]},
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                    ]
                },
            }
        )

    run = _run_split(k8s, tmp_path, recent_capture(seed=3), impostor)
    assert taken
    assert "fma_otel_pod_uid_conflicts_total 1" in run["watcher"].metrics
