"""DPC-side wrappers: httpx naming/propagation, actuation context, kubernetes client, pod lookup."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.instrumentation.utils import suppress_http_instrumentation, suppress_instrumentation
from opentelemetry.trace import SpanKind, StatusCode

from fma_otel import model
from fma_otel.instrument.actuation import actuation
from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor, dpc_purpose
from fma_otel.instrument.k8s_client import KubernetesClientInstrumentor, describe
from fma_otel.instrument.launcher import CREATE_SPAN, LauncherInstrumentor
from fma_otel.instrument.podinfo import PodInfo, parse_requester
from tests.instrument.conftest import Tracing
from tests.support.k8s_server import FakeCluster, make_pod


@pytest.fixture
def httpx_traced(tracing: Tracing) -> Iterator[Tracing]:
    inst = HttpxDpcInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, skip_dep_check=True)
    yield tracing
    inst.uninstrument()


def _echo_client() -> tuple[httpx.Client, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req)
        return httpx.Response(201 if req.method == "PUT" else 200, json={})

    return httpx.Client(transport=httpx.MockTransport(handler)), seen


@pytest.mark.parametrize(
    ("method", "url", "purpose", "name"),
    [
        ("PUT", "/v2/vllm/instances/abc", "create_instance", "fma.dpc.create_instance"),
        ("GET", "/v2/vllm/instances", "list_instances", "fma.dpc.list_instances"),
        ("GET", "/v2/vllm/instances?detail=false", "list_instance_ids", "fma.dpc.list_instance_ids"),
        ("GET", "/v2/vllm/instances/abc", "get_instance_state", "fma.dpc.get_instance_state"),
        ("DELETE", "/v2/vllm/instances/abc", "delete_instance", "fma.dpc.delete_instance"),
        ("DELETE", "/v2/vllm/instances", "delete_all_instances", "fma.dpc.delete_all_instances"),
        ("GET", "/is_sleeping", "query_sleeping", "fma.dpc.query_sleeping"),
        ("POST", "/wake_up", "wake", "fma.vllm.wake"),
        ("POST", "/sleep", "sleep", "fma.dpc.sleep"),
        ("POST", "/v1/become-ready", "relay_ready", "fma.dpc.relay_ready"),
        ("POST", "/v1/become-unready", "relay_unready", "fma.dpc.relay_unready"),
        ("GET", "/v1/dual-pods/accelerators", "get_gpu_uuids", "fma.dpc.get_gpu_uuids"),
    ],
)
def test_dpc_purpose_table(method: str, url: str, purpose: str, name: str) -> None:
    u = httpx.URL("http://10.0.0.1:8001" + url)
    assert dpc_purpose(method, u.path, u.query.decode())[0] == purpose
    assert model.dpc_call_span(purpose) == name


def test_non_dpc_calls_are_left_alone() -> None:
    assert dpc_purpose("GET", "/v2/vllm/instances/watch") is None
    assert dpc_purpose("GET", "/v1/models") is None


def test_httpx_spans_are_named_and_propagate(httpx_traced: Tracing) -> None:
    client, seen = _echo_client()
    client.put("http://10.0.0.5:8001/v2/vllm/instances/i-1", json={"options": "x"})
    client.get("http://10.0.0.6:8005/is_sleeping")
    client.get("http://example.com/other")
    spans = httpx_traced.spans()
    assert [s.name for s in spans] == ["fma.dpc.create_instance", "fma.dpc.query_sleeping"]
    create = spans[0]
    assert create.kind is SpanKind.CLIENT
    assert create.attributes["fma.http.purpose"] == "create_instance"
    assert create.attributes["fma.instance.id"] == "i-1"
    assert create.attributes["http.response.status_code"] == 201
    tp = seen[0].headers["traceparent"]
    assert tp.split("-")[2] == f"{create.context.span_id:016x}"
    assert "traceparent" not in seen[2].headers


def test_httpx_suppressed_and_errors(httpx_traced: Tracing) -> None:
    client, _ = _echo_client()
    with suppress_http_instrumentation():
        client.post("http://h:8005/wake_up")
    assert httpx_traced.spans() == []

    def refuse(req: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=req)

    bad = httpx.Client(transport=httpx.MockTransport(refuse))
    with pytest.raises(httpx.ConnectError):
        bad.get("http://h:8005/is_sleeping")
    (span,) = httpx_traced.spans()
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "ConnectError"


def test_async_httpx_is_named_too(httpx_traced: Tracing) -> None:
    import asyncio

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200))) as client:
            await client.post("http://h:8005/wake_up")

    asyncio.run(go())
    assert [s.name for s in httpx_traced.spans()] == ["fma.vllm.wake"]


def test_actuation_derives_ids_and_joins_the_launcher(httpx_traced: Tracing, fake_launcher: Any) -> None:
    """Test requester -> instrumented launcher, in-process: one trace, the bridge's ids."""
    uid = "0d5f8f55-1111-4222-8333-444455556666"
    pod = {"metadata": {"uid": uid, "name": "req-1", "namespace": "ns"}}
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=httpx_traced.provider,
        pod_info=PodInfo(env={}),
        configure_sdk=False,
        skip_dep_check=True,
    )
    try:
        with TestClient(fake_launcher.app, base_url="http://launcher:8001") as client, actuation(pod) as act:
            r = client.put("/v2/vllm/instances/i-9", json={"options": "--port 1"})
            assert r.status_code == 201
            client.delete("/v2/vllm/instances/i-9")
    finally:
        inst.uninstrument()
    trace_hex = model.trace_id_for(uid)
    assert act.trace_id == trace_hex
    dpc = httpx_traced.spans("fma.dpc.create_instance")[0]
    assert f"{dpc.context.trace_id:032x}" == trace_hex
    assert f"{dpc.context.span_id:016x}" == model.span_id_for(trace_hex, "fma.dpc.create_instance", 0)
    assert f"{dpc.parent.span_id:016x}" == model.span_id_for(trace_hex, "fma.instance.ready", 0)
    (server,) = httpx_traced.spans(CREATE_SPAN)
    assert server.parent.span_id == dpc.context.span_id
    assert f"{server.context.span_id:016x}" == model.span_id_for(trace_hex, CREATE_SPAN, 0)
    delete = httpx_traced.spans("fma.dpc.delete_instance")[0]
    # a reclaiming delete is in the span model (issue 21): derived id, under fma.instance.ready
    assert f"{delete.context.span_id:016x}" == model.span_id_for(trace_hex, "fma.dpc.delete_instance", 0)
    assert f"{delete.parent.span_id:016x}" == model.span_id_for(trace_hex, "fma.instance.ready", 0)


def test_actuation_emit_opens_the_actuation_span(tracing: Tracing) -> None:
    with actuation("uid-x", n=2, emit=True, tracer_provider=tracing.provider) as act:
        assert act.key == "uid-x/2"
    (span,) = tracing.spans("fma.actuation")
    assert f"{span.context.span_id:016x}" == model.span_id_for(act.trace_id, "fma.actuation", 0)
    assert f"{span.parent.span_id:016x}" == model.span_id_for(act.trace_id, "fma.request", 0)


# --------------------------------------------------------------------------- kubernetes


@pytest.fixture
def k8s_traced(tracing: Tracing, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Tracing, list[dict]]]:
    from kubernetes.client import rest

    headers_seen: list[dict] = []
    original = rest.RESTClientObject.request

    def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        headers_seen.append(dict(kwargs.get("headers") or {}))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(rest.RESTClientObject, "request", spy)
    inst = KubernetesClientInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, skip_dep_check=True)
    yield tracing, headers_seen
    inst.uninstrument()
    assert rest.RESTClientObject.request is spy  # uninstrument restored what was there


@pytest.mark.slow
def test_kubernetes_client_spans(k8s_traced: tuple[Tracing, list[dict]]) -> None:
    from kubernetes import client as kclient
    from kubernetes.client.rest import ApiException

    tracing, headers_seen = k8s_traced
    with FakeCluster() as k8s:
        k8s.add_pod(make_pod("p1", "fma-test"))
        api = kclient.CoreV1Api(kclient.ApiClient(k8s.configuration()))
        api.read_namespaced_pod("p1", "fma-test")
        api.list_namespaced_pod("fma-test", label_selector="a=b")
        with pytest.raises(ApiException):
            api.read_namespaced_pod("missing", "fma-test")
        with suppress_instrumentation():
            api.read_namespaced_pod("p1", "fma-test")
    get, lst, missing = tracing.spans()
    assert (get.name, lst.name, missing.name) == ("get pods", "list pods", "get pods")
    assert get.kind is SpanKind.CLIENT
    assert get.attributes["k8s.namespace.name"] == "fma-test"
    assert get.attributes["k8s.pod.name"] == "p1"
    assert get.attributes["k8s.api.version"] == "v1"
    assert get.attributes["http.response.status_code"] == 200
    assert missing.status.status_code is StatusCode.ERROR
    assert missing.attributes["http.response.status_code"] == 404
    assert headers_seen[0]["traceparent"].split("-")[2] == f"{get.context.span_id:016x}"
    assert "traceparent" not in headers_seen[-1]  # suppressed call


def test_describe_k8s_urls() -> None:
    assert describe("GET", "https://k:6443/apis/fma.llm-d.ai/v1alpha1/namespaces/n/inferenceserverconfigs")[
        0
    ] == ("list inferenceserverconfigs")
    name, attrs = describe("PATCH", "https://k/api/v1/namespaces/n/pods/p/status")
    assert name == "patch pods/status" and attrs["k8s.resource.name"] == "p"
    assert describe("GET", "https://k/api/v1/pods?watch=true")[0] == "watch pods"
    assert describe("DELETE", "https://k/api/v1/namespaces/n/pods")[0] == "deletecollection pods"


# --------------------------------------------------------------------------- pod lookup


def test_pod_lookup_cache_and_failures() -> None:
    assert parse_requester("uid-1 name-1") == ("uid-1", "name-1")
    calls: list[float] = []

    def fetch(ns: str, name: str, timeout: float) -> dict[str, Any]:
        calls.append(timeout)
        return {
            "annotations": {"dual-pods.llm-d.ai/requester": "u n", "dual-pods.llm-d.ai/instance-id": "i1"}
        }

    pi = PodInfo(fetch, env={"POD_NAME": "l", "NAMESPACE": "ns"}, timeout=0.2)
    assert pi.lookup("i1").requester_uid == "u"
    assert pi.lookup("i1").ok and len(calls) == 1  # cached for the same binding
    pi.lookup("i2")
    assert len(calls) == 2  # another instance id: the binding may have changed

    def slow(ns: str, name: str, timeout: float) -> dict[str, Any]:
        raise TimeoutError("read timed out")

    bad = PodInfo(slow, env={"POD_NAME": "l", "NAMESPACE": "ns"})
    first = bad.lookup("i1")
    assert not first.ok and "TimeoutError" in first.reason
    assert bad.cached("i1") is first  # negative answers are cached: no timeout per create
    assert "POD_NAME" in PodInfo(env={}).lookup().reason


@pytest.mark.slow
def test_pod_lookup_default_fetch_with_kubeconfig(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from fma_otel.instrument import podinfo

    with FakeCluster() as k8s:
        k8s.add_pod(make_pod("l1", "ns", annotations={"dual-pods.llm-d.ai/requester": "uid-7 req-7"}))
        monkeypatch.setenv("KUBECONFIG", k8s.write_kubeconfig(str(tmp_path / "kc")))
        monkeypatch.setattr(podinfo, "_API", None)
        t0 = time.monotonic()
        res = PodInfo(env={"POD_NAME": "l1", "NAMESPACE": "ns"}, timeout=2).lookup()
        monkeypatch.setattr(podinfo, "_API", None)
    assert res.requester_uid == "uid-7" and res.requester_name == "req-7"
    assert time.monotonic() - t0 < 5
