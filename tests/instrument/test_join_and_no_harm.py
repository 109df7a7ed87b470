"""A launcher bound after it started still joins; ``fma.join`` values; ``actuation()`` never raises."""

from __future__ import annotations

import importlib
import logging
import time
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fma_otel import model
from fma_otel.instrument.actuation import NoActuation, actuation, current_actuation
from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor
from fma_otel.instrument.launcher import (
    CREATE_SPAN,
    JOIN_ANNOTATION,
    JOIN_NONE,
    JOIN_TRACEPARENT,
    LauncherInstrumentor,
)
from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from tests.instrument.conftest import Tracing

ENV = {"POD_NAME": "l", "NAMESPACE": "ns"}
# The package re-exports the function under the module's name: fetch the module itself.
actuation_mod = importlib.import_module("fma_otel.instrument.actuation")


class FakePod:
    """The launcher Pod's annotations, changed by the test as the DPC would; counts GETs."""

    def __init__(self) -> None:
        self.annotations: dict[str, str] = {}
        self.calls = 0
        self.fail: Exception | None = None

    def bind(self, uid: str, iid: str) -> None:
        self.annotations = {REQUESTER_ANNOTATION: f"{uid} req-1", INSTANCE_ID_ANNOTATION: iid}

    def __call__(self, ns: str, name: str, timeout: float) -> dict[str, Any]:
        self.calls += 1
        snapshot = dict(self.annotations)  # what the API server had when the GET arrived
        if self.fail is not None:
            raise self.fail
        return {"annotations": snapshot, "node_name": "node-a"}


# --------------------------------------------------------------------------- (5) pod lookup


def test_an_unbound_answer_is_not_cached() -> None:
    pod = FakePod()
    pi = PodInfo(pod, env=dict(ENV))
    first = pi.lookup(force=True)
    assert not first.ok and "unbound" in first.reason and not first.failed
    pod.bind("uid-1", "iid-1")  # the DPC binds the populator's launcher moments later
    assert pi.cached("iid-1") is None  # a miss, not the unbound answer
    res = pi.lookup("iid-1")
    assert res.ok and res.requester_uid == "uid-1" and res.instance_id == "iid-1"
    assert pod.calls == 2
    assert pi.cached("iid-1") is res  # the bound answer is reused for its own binding
    assert pi.lookup("iid-1") is res and pod.calls == 2


def test_an_answer_for_another_instance_id_is_a_miss() -> None:
    pod = FakePod()
    pod.bind("uid-1", "iid-1")
    pi = PodInfo(pod, env=dict(ENV))
    assert pi.lookup("iid-1").requester_uid == "uid-1"
    pod.bind("uid-2", "iid-2")  # re-bound to another requester
    assert pi.cached("iid-2") is None
    res = pi.lookup("iid-2")
    assert res.requester_uid == "uid-2" and pod.calls == 2


def test_only_real_failures_are_cached_negatively() -> None:
    pod = FakePod()
    pod.fail = TimeoutError("read timed out")
    pi = PodInfo(pod, env=dict(ENV), negative_ttl=15.0)
    bad = pi.lookup("iid-1")
    assert bad.failed and not bad.ok and "TimeoutError" in bad.reason
    pod.fail = None
    pod.bind("uid-1", "iid-1")
    assert pi.cached("iid-1") is bad and pi.lookup("iid-1") is bad  # no timeout per create
    assert pod.calls == 1
    expired = PodInfo(pod, env=dict(ENV), negative_ttl=0.0)
    pod.fail = RuntimeError("403")
    assert expired.lookup("iid-1").failed
    pod.fail = None
    assert expired.lookup("iid-1").ok  # past the negative TTL: asked again


def test_launcher_started_unbound_then_bound_joins_by_annotation(
    tracing: Tracing, fake_launcher: Any
) -> None:
    uid = "9a1b2c3d-0000-4000-8000-000000000001"
    pod = FakePod()
    pi = PodInfo(pod, timeout=2.0, env=dict(ENV))
    inst = LauncherInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, pod_info=pi, configure_sdk=False, skip_dep_check=True)
    try:
        with TestClient(fake_launcher.app) as client:
            deadline = time.monotonic() + 5
            while pi._last is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert pi._last is not None and not pi._last.ok  # prefetched: unbound
            pod.bind(uid, "inst-u")
            assert client.put("/v2/vllm/instances/inst-u", json={"options": "--port 1"}).status_code == 201
            client.delete("/v2/vllm/instances/inst-u")
    finally:
        inst.uninstrument()
    (create,) = tracing.spans(CREATE_SPAN)
    assert create.attributes["fma.join"] == "annotation", create.attributes.get("fma.join.reason")
    trace_hex = model.trace_id_for(model.actuation_key(uid))
    assert f"{create.context.trace_id:032x}" == trace_hex
    assert create.attributes[model.A_REQ_UID] == uid


# --------------------------------------------------------------------------- (6) fma.join values


def test_join_values_are_the_span_model_contract() -> None:
    # docs/span-model.md item 3 and model.A_JOIN: traceparent | annotation | none
    assert (JOIN_TRACEPARENT, JOIN_ANNOTATION, JOIN_NONE) == ("traceparent", "annotation", "none")


# --------------------------------------------------------------------------- (7) actuation()


def _v1pod_without_uid() -> Any:
    from kubernetes.client import V1ObjectMeta, V1Pod

    return V1Pod(metadata=V1ObjectMeta(name="req-1", namespace="ns", uid=None))


@pytest.mark.parametrize(
    "pod",
    [
        {"metadata": {"name": "req-1"}},
        {"metadata": {"name": "req-1", "uid": None}},
        "",
        object(),
        _v1pod_without_uid(),
    ],
    ids=["dict-no-uid", "dict-uid-none", "empty-str", "object", "v1pod-uid-none"],
)
def test_actuation_without_uid_runs_the_block_once_untraced(pod: Any, tracing: Tracing) -> None:
    runs = []
    with actuation(pod, emit=True, tracer_provider=tracing.provider) as act:
        runs.append(1)
        assert isinstance(act, NoActuation) and not act
        assert act.trace_id == "" and act.key == "" and act.span_id("fma.actuation") == ""
        assert current_actuation() is None
    assert runs == [1]
    assert tracing.spans() == []


def test_actuation_without_uid_lets_the_blocks_exception_through_unchanged() -> None:
    err = KeyError("the host's own")
    with pytest.raises(KeyError) as info:
        with actuation({"metadata": {"name": "req-1"}}):
            raise err
    assert info.value is err
    assert err.__context__ is None and err.__cause__ is None  # not chained to our failure
    with pytest.raises(SystemExit):
        with actuation(_v1pod_without_uid()):
            raise SystemExit(3)


def test_actuation_without_uid_warns_once(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actuation_mod, "_WARNED", False)
    with caplog.at_level(logging.DEBUG, logger="fma_otel.instrument"):
        for _ in range(3):
            with actuation({"metadata": {"name": "req-1"}}):
                pass
    records = [r for r in caplog.records if "no requester UID" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG, logging.DEBUG]


def test_httpx_inside_a_no_op_actuation_is_not_derived(tracing: Tracing) -> None:
    inst = HttpxDpcInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, configure_sdk=False, skip_dep_check=True)
    try:
        transport = httpx.MockTransport(lambda req: httpx.Response(201, json={}))
        with httpx.Client(transport=transport, base_url="http://launcher:8001") as client:
            with actuation({"metadata": {"name": "req-1"}}):
                assert client.put("/v2/vllm/instances/i-1", json={}).status_code == 201
    finally:
        inst.uninstrument()
    for span in tracing.spans():
        assert model.A_ACTUATION_KEY not in (span.attributes or {})
        assert f"{span.context.trace_id:032x}" != model.trace_id_for("")
