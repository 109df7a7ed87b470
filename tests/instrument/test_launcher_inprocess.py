"""The launcher wrapper in-process: the fake launcher app, TestClient, an in-memory exporter."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.trace import SpanKind, StatusCode

from fma_otel import model
from fma_otel.instrument import _common
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN, LauncherInstrumentor
from fma_otel.instrument.podinfo import PodInfo
from tests.instrument.conftest import Tracing, load_fake_launcher, wait_until
from tests.support.k8s_server import FakeCluster, make_pod
from tests.support.otlp_receiver import free_port

TP_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TP_PARENT = "00f067aa0ba902b7"


def _config(port: int, extra: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "options": f"--model tiny --api-key sk-TOPSECRET --port {port} {extra}".strip(),
        "env_vars": env if env is not None else {"SECRET_TOKEN": "hunter2", "VLLM_LOGGING_LEVEL": "DEBUG"},
        "annotations": {"inference-port": str(port), "isc-name": "example"},
    }


def _all_attr_text(tracing: Tracing) -> str:
    return repr([dict(s.attributes or {}) for s in tracing.spans()])


@pytest.mark.slow
def test_create_without_any_context_makes_own_trace_and_startup(instrumented: Any) -> None:
    tracing, launcher = instrumented
    port = free_port()
    with TestClient(launcher.app) as client:
        r = client.put("/v2/vllm/instances/inst-a", json=_config(port, "--fake-health-delay 0.3"))
        assert r.status_code == 201
        # The state the launcher reports is unchanged by the wrapper (env_vars as sent).
        assert r.json()["env_vars"] == {"SECRET_TOKEN": "hunter2", "VLLM_LOGGING_LEVEL": "DEBUG"}
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
        env = httpx.get(f"http://127.0.0.1:{port}/debug/env", timeout=2).json()
        client.delete("/v2/vllm/instances/inst-a")

    (create,) = tracing.spans(CREATE_SPAN)
    assert create.kind is SpanKind.SERVER
    a = create.attributes
    assert a["fma.instance.id"] == "inst-a"
    assert a["http.response.status_code"] == 201
    assert a["fma.join"] == "none" and "POD_NAME" in a["fma.join.reason"]
    assert create.parent is None

    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.OK
    assert startup.context.trace_id == create.context.trace_id
    assert startup.parent.span_id == create.context.span_id  # own trace: under the create span
    assert startup.attributes["server.port"] == port
    assert startup.attributes["fma.vllm.health_polls"] >= 2  # it was unhealthy first
    assert startup.end_time - startup.start_time >= 250_000_000
    # The child got the trace context of fma.vllm.startup in its environment.
    sc = startup.context
    assert env["TRACEPARENT"] == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
    assert env["OTEL_SERVICE_NAME"] == "vllm"
    assert env["SECRET_TOKEN"] == "hunter2"
    # No secret ever reaches an attribute.
    text = _all_attr_text(tracing)
    assert "hunter2" not in text and "sk-TOPSECRET" not in text
    assert "<redacted>" in startup.attributes["fma.vllm.config"]


def test_join_by_traceparent_uses_derived_ids(instrumented: Any) -> None:
    tracing, launcher = instrumented
    port = free_port()
    with TestClient(launcher.app) as client:
        r = client.put(
            "/v2/vllm/instances/inst-b",
            json=_config(port),
            headers={"traceparent": f"00-{TP_TRACE}-{TP_PARENT}-01"},
        )
        assert r.status_code == 201
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN))
        client.delete("/v2/vllm/instances/inst-b")
    (create,) = tracing.spans(CREATE_SPAN)
    assert f"{create.context.trace_id:032x}" == TP_TRACE
    assert f"{create.parent.span_id:016x}" == TP_PARENT
    assert f"{create.context.span_id:016x}" == model.span_id_for(TP_TRACE, CREATE_SPAN, 0)
    assert create.attributes["fma.join"] == "traceparent"
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert f"{startup.parent.span_id:016x}" == model.span_id_for(TP_TRACE, "fma.vllm.ready", 0)
    assert f"{startup.context.span_id:016x}" == model.span_id_for(TP_TRACE, STARTUP_SPAN, 0)


@pytest.mark.slow
def test_join_by_pod_annotation_through_kubernetes_api(tracing: Tracing, fake_launcher: Any) -> None:
    uid = "7d3c5a2e-0000-4000-8000-00000000abcd"
    with FakeCluster() as k8s:
        k8s.add_pod(
            make_pod(
                "launcher-1",
                "fma-test",
                node="node-a",
                annotations={
                    "dual-pods.llm-d.ai/requester": f"{uid} my-requester",
                    "dual-pods.llm-d.ai/instance-id": "inst-c",
                },
            )
        )
        from kubernetes import client as kclient

        def fetch(ns: str, name: str, timeout: float) -> dict[str, Any]:
            api = kclient.CoreV1Api(kclient.ApiClient(k8s.configuration()))
            pod = api.read_namespaced_pod(name, ns, _request_timeout=timeout)
            return {"annotations": pod.metadata.annotations, "node_name": pod.spec.node_name}

        pi = PodInfo(fetch, timeout=3.0, env={"POD_NAME": "launcher-1", "NAMESPACE": "fma-test"})
        inst = LauncherInstrumentor()
        inst.instrument(
            tracer_provider=tracing.provider, pod_info=pi, configure_sdk=False, skip_dep_check=True
        )
        try:
            with TestClient(fake_launcher.app) as client:
                # as in a launcher: its own Pod is read in the background from start-up on,
                # before the DPC's create arrives (a cold first import of the client can take
                # a second; the create itself never waits for it)
                assert wait_until(lambda: k8s.requests_to("/pods/launcher-1"), 20)
                assert client.put("/v2/vllm/instances/inst-c", json=_config(free_port())).status_code == 201
                client.delete("/v2/vllm/instances/inst-c")
        finally:
            inst.uninstrument()
        assert k8s.requests_to("/pods/launcher-1")
    trace_hex = model.trace_id_for(model.actuation_key(uid))
    (create,) = tracing.spans(CREATE_SPAN)
    assert create.attributes["fma.join"] == "annotation", create.attributes.get("fma.join.reason")
    assert f"{create.context.trace_id:032x}" == trace_hex
    assert f"{create.parent.span_id:016x}" == model.span_id_for(trace_hex, "fma.dpc.create_instance", 0)
    assert f"{create.context.span_id:016x}" == model.span_id_for(trace_hex, CREATE_SPAN, 0)
    a = create.attributes
    assert a["fma.join"] == "annotation"
    assert a[model.A_REQ_UID] == uid and a[model.A_REQ_NAME] == "my-requester"
    assert a[model.A_LAUNCHER] == "launcher-1" and a[model.A_NAMESPACE] == "fma-test"
    assert a[model.A_NODE] == "node-a"


def test_other_endpoints_get_server_spans_and_stop_ends_startup(instrumented: Any) -> None:
    tracing, launcher = instrumented
    port = free_port()
    with TestClient(launcher.app) as client:
        client.put("/v2/vllm/instances/inst-d", json=_config(port, "--fake-health-delay 30"))
        assert client.get("/v2/vllm/instances?detail=false").status_code == 200
        assert client.get("/v2/vllm/instances/nope").status_code == 404
        assert client.delete("/v2/vllm/instances/inst-d").status_code == 200
    names = [s.name for s in tracing.spans() if s.kind is SpanKind.SERVER]
    assert names == [
        CREATE_SPAN,
        "GET /v2/vllm/instances",
        "GET /v2/vllm/instances/{instance_id}",
        "DELETE /v2/vllm/instances/{instance_id}",
    ]
    get404 = tracing.spans("GET /v2/vllm/instances/{instance_id}")[0]
    assert get404.attributes["http.response.status_code"] == 404
    assert get404.status.status_code is StatusCode.UNSET  # 4xx is not a server error
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.ERROR
    assert "stopped" in startup.status.description


def test_startup_ends_with_error_when_the_child_dies(instrumented: Any) -> None:
    tracing, launcher = instrumented
    with TestClient(launcher.app) as client:
        client.put("/v2/vllm/instances/inst-e", json=_config(free_port(), "--fake-exit-after 0.1"))
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.ERROR
    assert "exited" in startup.status.description
    assert startup.attributes["process.exit.code"] == 3


def test_duplicate_create_is_an_error_span(instrumented: Any) -> None:
    tracing, launcher = instrumented
    with TestClient(launcher.app) as client:
        cfg = _config(free_port())
        client.put("/v2/vllm/instances/dup", json=cfg)
        assert client.put("/v2/vllm/instances/dup", json=cfg).status_code == 409
        client.delete("/v2/vllm/instances/dup")
    second = tracing.spans(CREATE_SPAN)[1]
    assert second.status.status_code is StatusCode.ERROR
    assert second.attributes["http.response.status_code"] == 409


def test_a_raising_tracer_never_reaches_the_launcher(
    instrumented: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tracing, launcher = instrumented

    class Boom:
        def start_span(self, *a: Any, **k: Any) -> Any:
            raise RuntimeError("tracer exploded")

    monkeypatch.setattr(_common.TracerSource, "get", lambda self: Boom())
    with TestClient(launcher.app) as client:
        r = client.put("/v2/vllm/instances/inst-f", json=_config(free_port()))
        assert r.status_code == 201 and r.json()["instance_id"] == "inst-f"
        assert client.get("/v2/vllm/instances").status_code == 200
        assert client.delete("/v2/vllm/instances/inst-f").status_code == 200
    assert tracing.spans() == []


def test_sdk_disabled_is_a_no_op(
    tracing: Tracing, fake_launcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastapi

    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    original = vars(fastapi.FastAPI)["build_middleware_stack"]
    inst = LauncherInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, configure_sdk=False, skip_dep_check=True)
    try:
        assert vars(fastapi.FastAPI)["build_middleware_stack"] is original
        with TestClient(fake_launcher.app) as client:
            assert client.put("/v2/vllm/instances/x", json=_config(free_port())).status_code == 201
            client.delete("/v2/vllm/instances/x")
    finally:
        inst.uninstrument()
    assert tracing.spans() == []


def test_uninstrument_restores_the_originals(tracing: Tracing) -> None:
    import fastapi

    launcher = load_fake_launcher()
    originals = (
        vars(fastapi.FastAPI)["build_middleware_stack"],
        vars(launcher.VllmInstance)["start"],
        vars(launcher.VllmInstance)["stop"],
        vars(launcher.VllmMultiProcessManager)["create_instance"],
        launcher.vllm_kickoff,
    )
    inst = LauncherInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, pod_info=PodInfo(env={}), configure_sdk=False)
    with TestClient(launcher.app) as client:
        client.get("/health")
    assert vars(launcher.VllmInstance)["start"] is not originals[1]
    inst.uninstrument()
    after = (
        vars(fastapi.FastAPI)["build_middleware_stack"],
        vars(launcher.VllmInstance)["start"],
        vars(launcher.VllmInstance)["stop"],
        vars(launcher.VllmMultiProcessManager)["create_instance"],
        launcher.vllm_kickoff,
    )
    assert all(a is b for a, b in zip(after, originals, strict=True))
    n = len(tracing.spans())
    with TestClient(launcher.app) as client:
        client.get("/health")
    assert len(tracing.spans()) == n  # the rebuilt stack has no middleware of ours


def test_no_second_server_span_with_fastapi_native_telemetry(fake_launcher: Any) -> None:
    """FastAPI >= 0.16x makes SERVER spans itself once a global SDK exists: one span only."""
    from opentelemetry import trace
    from opentelemetry.test.globals_test import reset_trace_globals

    tr = Tracing()
    reset_trace_globals()
    trace.set_tracer_provider(tr.provider)
    inst = LauncherInstrumentor()
    try:
        inst.instrument(pod_info=PodInfo(env={}), configure_sdk=False, skip_dep_check=True)
        with TestClient(fake_launcher.app) as client:
            client.get("/v2/vllm/instances")
            client.put("/v2/vllm/instances/n1", json=_config(free_port()))
            client.delete("/v2/vllm/instances/n1")
    finally:
        inst.uninstrument()
        reset_trace_globals()
    server = [s for s in tr.spans() if s.kind is SpanKind.SERVER]
    assert [s.name for s in server] == [
        "GET /v2/vllm/instances",
        CREATE_SPAN,
        "DELETE /v2/vllm/instances/{instance_id}",
    ]
    assert all(s.instrumentation_scope.name == "fma_otel.instrument" for s in server)


def test_a_pending_startup_span_is_opened_once_by_whoever_ends_it(tracing: Tracing) -> None:
    """The create path only plans ``fma.vllm.startup``; a stop before the poller opened it
    must still emit it, once, with the stop's error (the span is never lost or doubled)."""
    from fma_otel.instrument.vllm_watch import StartupWatch

    tracer = tracing.provider.get_tracer("t")
    opened: list[Any] = []

    def opener() -> tuple[Any, int | None]:
        span = tracer.start_span(STARTUP_SPAN)
        opened.append(span)
        return span, None

    watch = StartupWatch(None, None, None, source=SimpleNamespace(open=opener, ready=lambda: True))
    watch.stop()
    watch.stop()
    watch.poll()
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert len(opened) == 1
    assert startup.status.status_code is StatusCode.ERROR
    assert "stopped" in startup.status.description
