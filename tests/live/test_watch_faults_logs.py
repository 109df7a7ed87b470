"""Log streams under faults: kubelet 404s, node clocks stepping back, streams that lag.

Each test plays a synthetic capture into the fake API server and checks the traces written
live against the offline bridge's for the same data (or the spans the fault must not cost).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fma_otel import podfacts as P
from tests.live.replay import (
    DPC_POD,
    NS,
    InProcessWatcher,
    apply,
    dpc_pod,
    offline_traces,
    play,
    recent_capture,
    timeline,
    traces_in,
    wait_for,
)
from tests.live.test_watch_stream import _complete, assert_same
from tests.support.k8s_server import FakeCluster, make_pod

pytestmark = pytest.mark.slow


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
        follower = w.watcher.state.followers[f"{DPC_POD}/controller"]
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
        assert ft.done


def _append_raw(k8s: FakeCluster, ts_ns: int, line: str) -> None:
    """A DPC log line stamped exactly ``ts_ns``, even before the last one (``append_log`` sorts)."""
    with k8s.cond:
        k8s._log(NS, DPC_POD, "controller").lines.append((ts_ns, line))
        k8s.cond.notify_all()


def test_node_clock_stepping_back_drops_no_line(k8s: FakeCluster, tmp_path: Path) -> None:
    """The kubelet's prefixes go back 30 s mid-stream (an NTP step): every line still counts."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    steps = timeline(cap)
    dpc_at = [i for i, s in enumerate(steps) if s.kind == "dpc"]
    step_at = dpc_at[len(dpc_at) // 3]
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path) as w:
        for i, s in enumerate(steps):
            if s.kind == "dpc" and i >= step_at:
                _append_raw(k8s, s.t_ns - 30 * 10**9, s.payload)
            else:
                apply(k8s, s)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 20), (len(traces_in(out)), len(want))
        stats = w.watcher.state.followers[f"{DPC_POD}/controller"].stats
        assert stats.duplicates == 0
        assert stats.lines == len(dpc_at)
    assert_same(traces_in(out), want)


def test_far_future_stamp_blinds_neither_the_stream_nor_a_resume(k8s: FakeCluster, tmp_path: Path) -> None:
    """One line stamped a year ahead: the lines after it count, also after a reconnect."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    steps = timeline(cap)
    half = len(steps) // 2
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path) as w:
        first = next(s for s in steps if s.kind == "dpc")
        _append_raw(k8s, first.t_ns + 365 * 86400 * 10**9, "a line from a clock gone wrong")
        for s in steps[:half]:  # (append_log would stamp every later line a year ahead too)
            _append_raw(k8s, s.t_ns, s.payload) if s.kind == "dpc" else apply(k8s, s)
        follower = w.watcher.state.followers[f"{DPC_POD}/controller"]
        n_dpc = sum(1 for s in steps[:half] if s.kind == "dpc")
        assert wait_for(lambda: follower.stats.lines >= 1 + n_dpc, 10), follower.stats
        k8s.drop_connections("log")
        for s in steps[half:]:
            _append_raw(k8s, s.t_ns, s.payload) if s.kind == "dpc" else apply(k8s, s)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 20), (len(traces_in(out)), len(want))
        assert follower.stats.connects >= 2
    assert_same(traces_in(out), want)


def test_forgotten_pods_leave_no_emitted_keys_in_memory(k8s: FakeCluster, tmp_path: Path) -> None:
    """Requesters emitted, deleted and forgotten: their Pods and, past the retention, their
    emitted keys (and a checkpoint's key whose Pod never showed up) leave memory.

    The watcher's clock is moved past the forget horizon (``--incomplete-after`` plus a
    minute) instead of waiting for it.
    """
    import copy
    import time
    import uuid

    from fma_otel.live import checkpoint as CP

    CP.save(
        str(tmp_path / "checkpoint.json"), CP.Checkpoint(namespace=NS, emitted={"old-uid/1": time.time()})
    )
    cap = recent_capture(seed=1)
    base = [o for _t, o in cap.pod_events if (o["metadata"].get("labels") or {}).get("app") == "vllm"][-1]
    shift = [0.0]
    iw = InProcessWatcher(k8s, tmp_path, wait_logs=0, incomplete_after_s=1.0, retention_s=30.0)
    iw.watcher.clock = lambda: time.time() + shift[0]
    with iw:
        w = iw.watcher
        names = [f"req-{i}" for i in range(20)]
        for name in names:
            pod = copy.deepcopy(base)
            pod["metadata"].update(name=name, uid=str(uuid.uuid4()))
            k8s.add_pod(pod)
        assert wait_for(lambda: len(w.cp.emitted) >= 1 + len(names), 10), len(w.cp.emitted)
        for name in names:
            k8s.delete_pod(name, NS)
        assert wait_for(lambda: len(w.state.gone_at) == len(names), 10)
        shift[0] = 120.0
        k8s.add_pod(make_pod("poke", NS))  # an event, so a checkpoint (and its pruning) follows
        assert wait_for(lambda: not w.state.gone_at and not w.cp.emitted, 10), (
            len(w.state.gone_at),
            len(w.cp.emitted),
        )
        assert not any(P.name(p) in names for p in w.correlator.store.pods())
        assert wait_for(lambda: not w.cp.emitted, 10), w.cp.emitted


def _clear_injected(k8s: FakeCluster) -> None:
    with k8s.cond:
        k8s._errors.clear()


def _roots(live: dict) -> dict:
    return {tid: next(s for s in spans if not s.parent_span_id) for tid, spans in live.items()}


def test_trace_waits_for_a_launcher_log_that_is_reconnecting(k8s: FakeCluster, tmp_path: Path) -> None:
    """The launchers' log endpoint fails while actuations complete: their traces wait for it."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    assert any(s.name == "fma.launcher.create_instance" for t in want.values() for s in t)
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path):
        k8s.inject_error("GET", r"/pods/launcher-[^/]+/log$", 503, count=10**6)
        play(k8s, timeline(cap))
        # the traces that need no launcher log go out; the others wait
        assert wait_for(
            lambda: any(
                r.attributes.get("fma.path") == "cold_no_fma" for r in _roots(traces_in(out)).values()
            ),
            10,
        )
        import time

        time.sleep(1.5)
        early = _roots(traces_in(out))
        assert all("X.receipt" not in str(r.attributes.get("fma.missing", "")) for r in early.values()), early
        assert len(early) < len(want)
        _clear_injected(k8s)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 20), (len(traces_in(out)), len(want))
    assert_same(traces_in(out), want)


def test_trace_waits_for_a_reconnected_launcher_log_whose_backlog_is_slow(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    """Once the launchers' log endpoint is back, their backlog comes 2 s after each answer's
    headers (``--grace`` is 0.3 s): the traces wait for it, not for a time.

    What a loaded machine did to the test above now and then, made certain: a stream open
    for ``--grace`` whose backlog was still in flight counted as caught up, and the traces
    went out without the launcher's spans for good.
    """
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path) as w:
        k8s.inject_error("GET", r"/pods/launcher-[^/]+/log$", 503, count=10**6)
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(w.watcher._held_for_logs) >= 1, 10)
        k8s.delay_log_body(r"/pods/launcher-[^/]+/log$", 2.0, count=10**6)
        _clear_injected(k8s)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 30), (len(traces_in(out)), len(want))
    assert_same(traces_in(out), want)


def test_trace_waits_for_the_dpc_log_past_the_relay_wait(k8s: FakeCluster, tmp_path: Path) -> None:
    """The DPC log is down longer than the 30 s relay wait: the traces still wait for it.

    The watcher's clock is moved 31 s ahead instead of waiting.  Once the log is back, the
    traces go only after its backlog is read to its end (however long that takes under
    load), so the replay's usual 0.3 s ``--grace`` does.
    """
    import time

    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    shift = [0.0]
    iw = InProcessWatcher(k8s, tmp_path)
    iw.watcher.clock = lambda: time.time() + shift[0]
    with iw:
        k8s.inject_error("GET", f"/pods/{DPC_POD}/log$", 503, count=10**6)
        k8s.drop_connections("log")
        play(k8s, timeline(cap))
        time.sleep(1.0)
        shift[0] = 31.0  # past the correlator's 30 s wait for DPC lines
        time.sleep(1.5)
        early = _roots(traces_in(out))
        assert all(r.attributes.get("fma.path") == "cold_no_fma" for r in early.values()), early
        _clear_injected(k8s)
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 20), (len(traces_in(out)), len(want))
    assert_same(traces_in(out), want)


def test_trace_waits_for_a_lagging_log_no_longer_than_30s(k8s: FakeCluster, tmp_path: Path) -> None:
    """A launcher log that never comes back: its actuations go out after 30 s, without its spans."""
    import time

    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=1)
    want = _complete(offline_traces(cap, tmp_path))
    out = tmp_path / "out.jsonl"
    shift = [0.0]
    iw = InProcessWatcher(k8s, tmp_path)
    iw.watcher.clock = lambda: time.time() + shift[0]
    with iw as w:
        k8s.inject_error("GET", r"/pods/launcher-[^/]+/log$", 503, count=10**6)
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(w.watcher._held_for_logs) >= 1, 10)
        time.sleep(0.5)
        assert len(traces_in(out)) < len(want)
        shift[0] = 31.0
        assert wait_for(lambda: len(traces_in(out)) >= len(want), 10), (len(traces_in(out)), len(want))
        assert not w.watcher._held_for_logs
    missing = [str(r.attributes.get("fma.missing", "")) for r in _roots(traces_in(out)).values()]
    assert any("X.receipt" in m for m in missing), missing
