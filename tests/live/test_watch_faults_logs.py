"""Log streams under faults: kubelet 404s, node clocks stepping back, streams that lag.

Each test plays a synthetic capture into the fake API server and checks the traces written
live against the offline bridge's for the same data (or the spans the fault must not cost).
"""

from __future__ import annotations

from pathlib import Path

from tests.live.replay import (
    DPC_POD,
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


def test_log_404_is_retried_while_the_pod_exists(k8s: FakeCluster, tmp_path: Path) -> None:
    """The kubelet answers 404 while it does not know the Pod yet: not "the Pod is gone"."""
    k8s.add_pod(dpc_pod())
    k8s.inject_error("GET", f"/pods/{DPC_POD}/log$", 404, count=2)
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path, wait_logs=0) as w:
        assert k8s.wait_for_streams("log", 1, 5), "the DPC log is never followed after a 404"
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 20), (len(traces_in(out)), len(want))
        follower = w.watcher.state.followers[f"{DPC_POD}/controller"].follower
        assert follower.stats.errors >= 1 and not follower.done
    statuses = [r.status for r in k8s.requests_to(f"/pods/{DPC_POD}/log")]
    assert statuses[:2] == [404, 404] and len(statuses) >= 3, statuses
    assert_same(traces_in(out), want)


def test_log_follower_ends_when_the_pod_is_deleted(k8s: FakeCluster, tmp_path: Path) -> None:
    """...and it still stops for good once the Pod itself is gone."""
    k8s.add_pod(dpc_pod())
    with InProcessWatcher(k8s, tmp_path) as w:
        ft = w.watcher.state.followers[f"{DPC_POD}/controller"]
        k8s.delete_pod(DPC_POD, NS)
        assert wait_for(lambda: not ft.alive, 5)
        assert ft.follower.done
