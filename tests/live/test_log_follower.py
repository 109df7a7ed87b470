"""One :class:`LogFollower` against the fake API server: how a connect reads its backlog.

Each connect opens its follow stream, then counts the lines the log holds so far with a
request without ``follow`` (same position); once the follow stream has brought that many, it
says so behind their records.  The parser sees one stream.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from fma_otel.live.kube import Backoff, Kube
from fma_otel.live.logs import LogFollower
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.records import SourceStats
from tests.live.replay import wait_for
from tests.support.k8s_server import FakeCluster, make_pod

pytestmark = pytest.mark.slow

T0 = 1_782_000_000_000_000_000
S = 1_000_000_000
HEADER = 'I0629 14:00:0{}.000000       1 a.go:1] "m{}" k=1 a=<'


def _klog(lines: Iterable[bytes]) -> Iterator[Any]:
    yield from iter_klog(lines, SourceStats("dpc"))


def _follow(k8s: FakeCluster, stop: threading.Event) -> tuple[LogFollower, queue.Queue[tuple[Any, ...]]]:
    from kubernetes import client

    pod = make_pod("dpc", containers=["controller"], phase="Running")
    pod["status"]["containerStatuses"] = [{"name": "controller", "restartCount": 0, "ready": True}]
    uid = k8s.add_pod(pod)["metadata"]["uid"]
    kube = Kube(client.ApiClient(k8s.configuration()))
    items: queue.Queue[tuple[Any, ...]] = queue.Queue()
    follower = LogFollower(
        kube, "default", "dpc", uid, "controller", stop=stop, backoff=Backoff(0.02, 0.1), read_timeout_s=5
    )
    return follower, items


def _next(items: queue.Queue[tuple[Any, ...]], kind: str) -> tuple[Any, ...]:
    """The next item, which must be of ``kind`` (records and markers come in stream order)."""
    item = items.get(timeout=10)
    assert item[0] == kind, item
    return item


def test_caught_up_after_the_backlog_block_joined_across_it(k8s: FakeCluster) -> None:
    """The backlog (a whole record, half a multi-line block) is counted by a request without
    ``follow``; "caught up" follows the records of that many lines of the follow stream, and
    counts only once taken; the block's other half comes later and is joined to it."""
    stop = threading.Event()
    follower, items = _follow(k8s, stop)
    k8s.append_log(
        "dpc", "controller", HEADER.format(0, 0), "\tx", " >", HEADER.format(1, 1), "\ty", ts_ns=T0
    )
    try:
        follower.start(_klog, "dpc", items.put)
        first = _next(items, "dpc")[2]
        assert (first.msg, first.kv) == ("m0", (("k", 1), ("a", "x")))
        _, who, n = _next(items, "log-caught-up")
        assert who is follower and n == 1
        assert not follower.caught_up  # its records may not be taken yet
        follower.acknowledge(n)
        assert follower.caught_up
        assert k8s.wait_for_streams("log", 1, 10)
        k8s.append_log("dpc", "controller", "\tz", " >", ts_ns=T0 + 5 * S)
        second = _next(items, "dpc")[2]
        assert (second.msg, second.kv) == ("m1", (("k", 1), ("a", "y\nz")))
        reqs = [r.query for r in k8s.requests_to("/pods/dpc/log")]
        assert [q.get("follow") for q in reqs] == ["true", None], reqs
        assert "sinceTime" not in reqs[0] and "sinceTime" not in reqs[1]  # a first connect: the whole log
        assert follower.stats.lines == 7 and follower.stats.connects == 2
        assert follower.stats.duplicates == 0  # one stream: nothing read twice

        # cut: no longer caught up until the next connect's backlog is in and taken
        k8s.append_log("dpc", "controller", HEADER.format(2, 2), "\tw", ts_ns=T0 + 6 * S)
        k8s.drop_connections("log")
        assert wait_for(lambda: not follower.caught_up, 10)
        _, who, n = _next(items, "log-caught-up")
        assert n == 2 and not follower.caught_up
        follower.acknowledge(n)
        assert wait_for(lambda: follower.caught_up, 10)
        k8s.append_log("dpc", "controller", " >", ts_ns=T0 + 7 * S)
        third = _next(items, "dpc")[2]
        assert (third.msg, third.kv) == ("m2", (("k", 1), ("a", "w")))
        assert follower.stats.lines == 10
    finally:
        stop.set()
        follower.kube.shutdown()


def test_a_slow_backlog_holds_caught_up_back_however_long(k8s: FakeCluster) -> None:
    """The backlog's answer sends its lines 1.5 s after its headers: not caught up before
    they are in, whatever time has passed."""
    stop = threading.Event()
    follower, items = _follow(k8s, stop)
    k8s.append_log("dpc", "controller", HEADER.format(0, 0), "\tx", " >", ts_ns=T0)
    k8s.delay_log_body("/pods/dpc/log$", 1.5)
    try:
        follower.start(_klog, "dpc", items.put)
        with pytest.raises(queue.Empty):
            items.get(timeout=1.0)
        assert not follower.caught_up
        assert _next(items, "dpc")[2].msg == "m0"
        _, _, n = _next(items, "log-caught-up")
        follower.acknowledge(n)
        assert follower.caught_up
    finally:
        stop.set()
        follower.kube.shutdown()


def _raw(k8s: FakeCluster, ts_ns: int, line: str) -> None:
    """A line stamped exactly ``ts_ns``, even before the last one (``append_log`` sorts)."""
    with k8s.cond:
        k8s._log("default", "dpc", "controller").lines.append((ts_ns, line))
        k8s.cond.notify_all()


def _texts(items: queue.Queue[tuple[Any, ...]], n: int) -> list[str]:
    """The next ``n`` records' texts (raw lines, their timestamp prefix cut off)."""
    import time

    out: list[str] = []
    deadline = time.monotonic() + 10
    while len(out) < n:
        item = items.get(timeout=max(0.01, deadline - time.monotonic()))
        if item[0] == "dpc":
            out.append(item[2].decode().split(" ", 1)[1])
    return out


def _lines(lines: Iterable[bytes]) -> Iterator[bytes]:
    yield from lines


def test_a_clock_step_back_before_the_first_connect_loses_no_line(k8s: FakeCluster) -> None:
    """The node clock stepped back 30 s inside the backlog: the lines after the step, in the
    backlog and after it, all come (a first connect is one stream, resuming nothing)."""
    import time

    now = time.time_ns()
    stop = threading.Event()
    follower, items = _follow(k8s, stop)
    _raw(k8s, now - 1 * S, "before")
    _raw(k8s, now - 31 * S, "after1")
    try:
        follower.start(_lines, "dpc", items.put)
        assert _texts(items, 2) == ["before", "after1"]
        assert k8s.wait_for_streams("log", 1, 10)
        _raw(k8s, now - 30 * S, "after2")
        assert _texts(items, 1) == ["after2"]
        assert follower.stats.duplicates == 0
    finally:
        stop.set()
        follower.kube.shutdown()


def test_a_far_future_backlog_is_handed_on_once(k8s: FakeCluster) -> None:
    """Lines stamped an hour ahead (they do not move the position) come once, not once per
    request of the connect."""
    import time

    ahead = time.time_ns() + 3600 * S
    stop = threading.Event()
    follower, items = _follow(k8s, stop)
    _raw(k8s, ahead, "m0")
    _raw(k8s, ahead + 1, "m1")
    try:
        follower.start(_lines, "dpc", items.put)
        assert _texts(items, 2) == ["m0", "m1"]
        _, _, n = _next(items, "log-caught-up")
        assert n == 1
        with pytest.raises(queue.Empty):
            items.get(timeout=0.5)
        assert follower.stats.lines == 2
    finally:
        stop.set()
        follower.kube.shutdown()
