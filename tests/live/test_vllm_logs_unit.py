"""The watcher's vLLM-log hold and its Events store, without a server: their bounds."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from fma_otel import model as M
from fma_otel.live.events import EventStore
from fma_otel.live.vllm_logs import HOLD_SLACK_S, Target, VllmLogs
from fma_otel.sources.k8s_events import parse_event_item
from fma_otel.sources.records import SourceStats
from tests.support.k8s_server import make_event


class _HungKube:
    """A Kube whose pod proxy never answers until released (a launcher that hangs)."""

    def __init__(self) -> None:
        self.release_all = threading.Event()
        self.calls = 0

    def proxy_get(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        self.calls += 1
        self.release_all.wait(10)
        raise TimeoutError("read timed out")

    def release(self, resp) -> None:  # noqa: ANN001
        pass


def _act(key: str, path: str = M.WARM, **attrs: str) -> SimpleNamespace:
    inst = SimpleNamespace(t_ns=1_764_920_400 * M.S)  # only its time is read
    return SimpleNamespace(key=key, path=path, attributes=attrs, instants={"R.ready": inst})


def test_a_hung_fetch_holds_its_actuation_only_up_to_the_bound() -> None:
    kube = _HungKube()
    now = [100.0]
    emitted: list[tuple] = []
    v = VllmLogs(kube, "ns", emitted.append, timeout_s=2.0, read_timeout_s=3.0, clock=lambda: now[0])  # type: ignore[arg-type]
    a = _act("u/0", **{M.A_INSTANCE: "I1", M.A_LAUNCHER: "launcher-x"})
    t = v.target(a, {})
    assert t == Target("I1", "launcher-x")
    try:
        assert not v.ready(a, t)  # starts the fetch
        now[0] += 2.0 + 2.0 + HOLD_SLACK_S - 0.1  # the read timeout is capped at the time bound
        assert not v.ready(a, t)
        now[0] += 0.2
        assert v.ready(a, t)  # let go without its log
        assert v.stats.timeouts == 1 and v.phases(a.key) == ({}, [])
    finally:
        kube.release_all.set()
    assert kube.calls == 1  # one fetch, however often it was asked


def test_targets_by_path() -> None:
    assert VllmLogs.target(
        _act("k", M.COLD_NO_FMA, **{M.A_REQ_NAME: "vllm-1"}), {"vllm-1": "vllm"}
    ) == Target("vllm-1", None, "vllm")
    assert VllmLogs.target(_act("k", M.COLD_NO_FMA, **{M.A_REQ_NAME: "vllm-1"}), {}) is None
    assert VllmLogs.target(_act("k", M.HOT, **{M.A_INSTANCE: "I1"}), {}) is None  # no launcher known


def _event(reason: str, name: str, first: int, uid: str):  # noqa: ANN202
    ev = make_event(reason, f"{reason} it", pod_name=name, first=first)
    ev["metadata"]["uid"] = uid
    rec = parse_event_item(ev, SourceStats("events"))
    assert rec is not None
    return rec


def test_event_store_keeps_the_newest_of_each_bounded_and_in_a_fixed_order() -> None:
    s = EventStore(max_events=3)
    s.add(_event("Started", "p1", 1_700_000_010, "e1"))
    s.add(_event("Created", "p1", 1_700_000_010, "e2"))  # same second: ordered by reason, not arrival
    s.add(_event("Pulled", "p2", 1_700_000_005, "e3"))
    assert [e.raw_reason for e in s.about(["p1", "p2"])] == ["Pulled", "Created", "Started"]
    s.add(_event("Started", "p1", 1_700_000_010, "e1"))  # the same Event again (a relist)
    assert len(s) == 3 and s.received == 4
    s.add(_event("Killing", "p3", 1_700_000_020, "e4"))  # over the bound: the oldest goes
    assert len(s) == 3 and [e.raw_reason for e in s.about(["p2"])] == []
    s.forget("p1")
    assert [e.raw_reason for e in s.about(["p1", "p3"])] == ["Killing"]


class _NoAnswer:
    """A ``Kube`` whose every request fails as ``exc`` before any answer."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def proxy_get(self, *args: object, **kw: object) -> None:
        raise self.exc

    def pod_log(self, *args: object, **kw: object) -> None:
        raise self.exc


def test_both_fetches_say_why_a_request_got_no_log() -> None:
    """The API server's refusal keeps its status; a transient error says "no answer"."""
    from fma_otel.live.kube import KubeError
    from fma_otel.live.vllm_fetch import fetch_instance_log, fetch_pod_log

    cases = [
        (KubeError(403, "pods is forbidden"), 403, "HTTP 403: pods is forbidden"),
        (
            ConnectionRefusedError(111, "Connection refused"),
            None,
            "no answer: [Errno 111] Connection refused",
        ),
        (TimeoutError("read timed out"), None, "no answer: read timed out"),
    ]
    for exc, status, error in cases:
        kube: Any = _NoAnswer(exc)
        for res in (
            fetch_instance_log(kube, "ns", "launcher-1", "I1", lambda b: None),
            fetch_pod_log(kube, "ns", "vllm-1", "vllm", lambda b: None),
        ):
            assert (res.status, res.error, res.requests, res.written) == (status, error, 0, 0), res
