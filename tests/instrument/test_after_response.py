"""The create path does nothing between the fork and the response that can wait - and
nothing before the fork either that can: its span is opened after the response.

Why: after the fork every page the launcher writes is first copied while the child shares
it (~5 us a page on these VMs), so registering the startup watch with the poller and
clearing the child's pending environment wait until the response has been sent
(``LauncherInstrumentor._after_response``).  These tests pin the order and what still
holds: the span starts at the fork, ends when vLLM answers, and a ``stop`` that comes
before the registration still ends it once.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import StatusCode

from fma_otel import model
from fma_otel.instrument import launcher as lw
from fma_otel.instrument import vllm_watch
from fma_otel.instrument.launcher import STARTUP_SPAN
from tests.instrument.conftest import Tracing, no_pod, wait_until
from tests.support.otlp_receiver import free_port


class _Recorder:
    """An ASGI app around the launcher's that logs what is sent, and the poller's adds."""

    def __init__(self, app: Any, on_body: Any = None) -> None:
        self.app = app
        self.events: list[str] = []
        self.on_body = on_body

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def logged(message: dict[str, Any]) -> None:
            if message["type"].startswith("http.response."):
                self.events.append(message["type"])
                if message["type"] == "http.response.body" and self.on_body is not None:
                    self.on_body()
            await send(message)

        await self.app(scope, receive, logged)


@pytest.fixture
def adds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every watch handed to the startup poller, in order (the poller still gets it, and
    the instance's log tail, which it also steps)."""
    seen: list[Any] = []
    real = vllm_watch._POLLER.add

    def add(item: Any) -> None:
        if isinstance(item, vllm_watch.StartupWatch):
            seen.append(item)
        real(item)

    monkeypatch.setattr(vllm_watch._POLLER, "add", add)
    yield seen


def test_the_watch_is_registered_after_the_response_and_the_span_still_starts_at_the_fork(
    instrumented: tuple[Tracing, Any], adds: list[Any]
) -> None:
    tracing, launcher = instrumented
    rec = _Recorder(launcher.app, on_body=lambda: rec.events.append(f"adds at body: {len(adds)}"))
    port = free_port()
    cfg = {"options": f"--model m --port {port} --fake-health-delay 0.2", "env_vars": {}}
    with TestClient(rec) as client:
        t_sent = time.time_ns()
        r = client.put("/v2/vllm/instances/late-reg", json=cfg)
        assert r.status_code == 201
        # The response went out before the poller heard of the instance; then it did.
        assert rec.events == ["http.response.start", "http.response.body", "adds at body: 0"]
        assert len(adds) == 1
        assert lw._PENDING_CHILD_ENV is None  # cleared once the response was sent
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
        client.delete("/v2/vllm/instances/late-reg")

    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.OK
    # Its start is the fork (inside the request), not the late registration.
    (create,) = tracing.spans(lw.CREATE_SPAN)
    assert t_sent <= create.start_time <= startup.start_time <= create.end_time
    assert startup.end_time - startup.start_time >= 150_000_000  # it waited for /health
    assert isinstance(adds[0].pid, int) and adds[0].pid > 0  # read from the instance after the fork


def test_a_stop_before_the_registration_ends_the_span_once_and_nothing_is_registered(
    instrumented: tuple[Tracing, Any], adds: list[Any]
) -> None:
    tracing, launcher = instrumented

    def stop_now() -> None:  # the launcher stops the instance while the response is going out
        launcher.vllm_manager.stop_instance("early-stop", timeout=2)

    rec = _Recorder(launcher.app, on_body=stop_now)
    port = free_port()
    cfg = {"options": f"--model m --port {port} --fake-health-delay 5", "env_vars": {}}
    with TestClient(rec) as client:
        assert client.put("/v2/vllm/instances/early-stop", json=cfg).status_code == 201
    assert adds == []  # an ended watch is not handed to the poller
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.ERROR
    assert startup.status.description == "instance stopped before it answered GET /health"
    assert lw._PENDING_CHILD_ENV is None


def test_a_start_outside_a_request_never_sees_a_create_s_environment(
    instrumented: tuple[Tracing, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a create left pending, the next fork decides its child's environment anew."""
    tracing, launcher = instrumented
    seen: list[Any] = []
    real_start = launcher.multiprocessing.process.BaseProcess.start

    def spy(self: Any) -> None:
        seen.append(lw._PENDING_CHILD_ENV)  # what the child would read in vllm_kickoff
        real_start(self)

    monkeypatch.setattr(launcher.multiprocessing.process.BaseProcess, "start", spy)
    stale = object()
    monkeypatch.setattr(lw, "_PENDING_CHILD_ENV", stale)
    port = free_port()
    inst = launcher.VllmInstance("outside", launcher.VllmConfig(options=f"--model m --port {port}"), None, "")
    try:
        monkeypatch.setattr(lw.c, "active", lambda: False)  # not recording: no plan at all
        inst.start()
    finally:
        inst.stop(timeout=2)
    assert seen == [None]


def test_a_start_after_the_response_was_sent_registers_at_once(
    instrumented: tuple[Tracing, Any], adds: list[Any]
) -> None:
    """A ``start`` that outlives its create request (a task made from the request's
    context) has no later moment to wait for: its watch goes to the poller at once."""
    tracing, launcher = instrumented
    owner = lw.LauncherInstrumentor()  # the instrumented one (a singleton)
    span = tracing.provider.get_tracer("t").start_span("create")
    st = lw._RequestState(span, True, lw.JOIN_NONE, "after-done")
    owner._after_response(st)  # the response went out
    assert st.after is None
    port = free_port()
    inst = launcher.VllmInstance(
        "after-done", launcher.VllmConfig(options=f"--model m --port {port} --fake-health-delay 0"), None, ""
    )

    def start_in_request_context() -> None:
        lw._REQUEST.set(st)
        inst.start()
        assert len(adds) == 1  # registered before start() returned
        assert lw._PENDING_CHILD_ENV is None

    try:
        contextvars.copy_context().run(start_in_request_context)
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
    finally:
        inst.stop(timeout=2)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.status.status_code is StatusCode.OK
    assert startup.parent.span_id == span.get_span_context().span_id


class _Starts(SpanProcessor):
    """Logs each span's start into ``events`` (the order against the response's sends)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.events.append(f"start {span.name}")


@pytest.mark.parametrize("joined", [False, True], ids=["own-trace", "traceparent"])
def test_the_create_span_is_opened_after_the_response_with_the_ids_its_child_got(
    instrumented: tuple[Tracing, Any], joined: bool
) -> None:
    """The request makes no SDK call for its create span: the span is opened once the
    response is sent, at the receipt instant, with the ids the request handed its child."""
    tracing, launcher = instrumented
    rec = _Recorder(launcher.app)
    tracing.provider.add_span_processor(_Starts(rec.events))
    port = free_port()
    cfg = {"options": f"--model m --port {port} --fake-health-delay 0", "env_vars": {}}
    trace_hex = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {"traceparent": f"00-{trace_hex}-00f067aa0ba902b7-01"} if joined else {}
    with TestClient(rec) as client:
        t_sent = time.time_ns()
        assert client.put("/v2/vllm/instances/late-open", json=cfg, headers=headers).status_code == 201
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
        env = httpx.get(f"http://127.0.0.1:{port}/debug/env", timeout=2).json()
        client.delete("/v2/vllm/instances/late-open")
    assert rec.events[:3] == ["http.response.start", "http.response.body", f"start {lw.CREATE_SPAN}"]
    (create,) = tracing.spans(lw.CREATE_SPAN)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert t_sent <= create.start_time < create.end_time
    assert create.attributes[lw.A_JOIN] == (lw.JOIN_TRACEPARENT if joined else lw.JOIN_NONE)
    sc = startup.context
    assert sc.trace_id == create.context.trace_id
    assert env["TRACEPARENT"] == f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
    if joined:
        assert f"{sc.trace_id:032x}" == trace_hex
        assert f"{create.context.span_id:016x}" == model.span_id_for(trace_hex, lw.CREATE_SPAN, 0)
    else:
        assert create.parent is None
        assert startup.parent.span_id == create.context.span_id  # under the create span itself


def test_a_provider_that_cannot_force_ids_opens_the_create_span_on_the_request(
    fake_launcher: Any,
) -> None:
    """Without ``DerivedIdGenerator`` a span opened later could not be given the ids the
    child already got: the span is opened at receipt, as before, and still matches them."""
    tracing = Tracing()
    tracing.provider = TracerProvider()
    tracing.provider.add_span_processor(SimpleSpanProcessor(tracing.exporter))
    rec = _Recorder(fake_launcher.app)
    tracing.provider.add_span_processor(_Starts(rec.events))
    inst = lw.LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    port = free_port()
    cfg = {"options": f"--model m --port {port} --fake-health-delay 0", "env_vars": {}}
    try:
        with TestClient(rec) as client:
            assert client.put("/v2/vllm/instances/early-open", json=cfg).status_code == 201
            assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
            env = httpx.get(f"http://127.0.0.1:{port}/debug/env", timeout=2).json()
            client.delete("/v2/vllm/instances/early-open")
    finally:
        inst.uninstrument()
    assert rec.events[:2] == [f"start {lw.CREATE_SPAN}", "http.response.start"]
    (create,) = tracing.spans(lw.CREATE_SPAN)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.parent.span_id == create.context.span_id
    # The child's trace is the create's (its span id is the derived one, which a provider
    # without the generator does not give the startup span: it warns about that).
    assert env["TRACEPARENT"].split("-")[1] == f"{create.context.trace_id:032x}"
