"""What the create request does before its response: the create span's attributes are set
after it (unless a sampler could look at them), and the propagator is asked only when the
request could carry what it reads."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter, Setter, TextMapPropagator
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from fma_otel.instrument.launcher import CREATE_SPAN, LauncherInstrumentor
from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from tests.instrument.conftest import Tracing, load_fake_launcher, no_pod, wait_until
from tests.support.otlp_receiver import free_port

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


class SeeingSampler(Sampler):
    """Samples everything, and keeps the attributes each span was started with."""

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, Any]] = {}

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        self.seen[name] = dict(attributes or {})
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "SeeingSampler"


class AtStart(SpanProcessor):
    """Keeps the attributes each span has when it starts."""

    def __init__(self) -> None:
        self.at_start: dict[str, dict[str, Any]] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.at_start[span.name] = dict(span.attributes or {})


@pytest.fixture
def launcher_with() -> Any:
    """``run(sampler)``: the create span of one ``PUT`` on a fresh fake launcher traced with
    that sampler, and the attributes a span processor saw at its start."""

    def run(
        sampler: Sampler, headers: dict[str, str] | None = None, pod_info: PodInfo | None = None
    ) -> tuple[Any, dict[str, Any]]:
        tracing = Tracing()
        tracing.provider = _provider(sampler, tracing)
        at_start = AtStart()
        tracing.provider.add_span_processor(at_start)
        launcher = load_fake_launcher()
        inst = LauncherInstrumentor()
        inst.instrument(
            tracer_provider=tracing.provider,
            pod_info=pod_info or no_pod(),
            configure_sdk=False,
            skip_dep_check=True,
        )
        try:
            with TestClient(launcher.app) as client:
                cfg = {"options": f"--model tiny --port {free_port()}"}
                r = client.put("/v2/vllm/instances/inst-x?debug=1", json=cfg, headers=headers or {})
                assert r.status_code == 201
                # A deferred span is resolved after the response; before the app's shutdown,
                # which would settle it without its Pod answer.
                assert wait_until(lambda: tracing.spans(CREATE_SPAN), 5)
                client.delete("/v2/vllm/instances/inst-x")
        finally:
            inst.uninstrument()
            launcher.vllm_manager.stop_all_instances(timeout=2)
        (create,) = tracing.spans(CREATE_SPAN)
        return create, at_start.at_start.get(CREATE_SPAN, {})

    return run


def _provider(sampler: Sampler, tracing: Tracing) -> Any:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from fma_otel.instrument.ids import DerivedIdGenerator

    provider = TracerProvider(sampler=sampler, id_generator=DerivedIdGenerator())
    provider.add_span_processor(SimpleSpanProcessor(tracing.exporter))
    return provider


def _items(span: Any) -> list[tuple[str, Any]]:
    return list((span.attributes or {}).items())


@pytest.mark.slow
def test_attributes_after_the_response_are_the_ones_given_at_the_start(launcher_with: Any) -> None:
    """The SDK's samplers never read attributes: the create span gets them after the response,
    the same ones, in the same order, as a sampler that reads them gets at the start."""
    seeing = SeeingSampler()
    at_start_span, at_start_attrs = launcher_with(ParentBased(seeing))
    late_span, late_attrs = launcher_with(ALWAYS_ON)

    assert seeing.seen[CREATE_SPAN]["fma.instance.id"] == "inst-x"  # the sampler saw them
    assert at_start_attrs["fma.instance.id"] == "inst-x"
    assert late_attrs == {}  # not built before the response
    assert _items(late_span) == _items(at_start_span)
    a = late_span.attributes
    assert a["fma.join"] == "none" and "POD_NAME" in a["fma.join.reason"]
    assert a["url.query"] == "debug=<redacted>"
    assert a["http.route"] == "/v2/vllm/instances/{instance_id}"
    assert a["http.response.status_code"] == 201
    assert list(a)[-1] == "http.response.status_code"


@pytest.mark.slow
def test_attributes_after_the_response_with_a_traceparent(launcher_with: Any) -> None:
    headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
    early, _ = launcher_with(ParentBased(SeeingSampler()), headers)
    late, late_attrs = launcher_with(ALWAYS_ON, headers)
    assert late_attrs == {}
    assert _items(late) == _items(early)
    assert late.attributes["fma.join"] == "traceparent"
    assert (late.context.trace_id, late.context.span_id) == (early.context.trace_id, early.context.span_id)


class XTracePropagator(TextMapPropagator):
    """A non-W3C propagator: ``x-fma-trace: <trace hex>-<span hex>``."""

    def extract(self, carrier: Any, context: Context | None = None, getter: Getter[Any] = None) -> Context:  # type: ignore[assignment]
        values = getter.get(carrier, "x-fma-trace") if getter is not None else None
        if not values:
            return context if context is not None else Context()
        trace_hex, span_hex = values[0].split("-")
        sc = SpanContext(int(trace_hex, 16), int(span_hex, 16), True, TraceFlags(TraceFlags.SAMPLED))
        return trace.set_span_in_context(NonRecordingSpan(sc), context)

    def inject(self, carrier: Any, context: Context | None = None, setter: Setter[Any] = None) -> None:  # type: ignore[assignment]
        pass

    @property
    def fields(self) -> Sequence[str]:  # type: ignore[override]
        return {"x-fma-trace"}  # type: ignore[return-value]


def test_a_non_w3c_propagator_is_still_asked(launcher_with: Any) -> None:
    """The skip of ``extract`` holds only for the W3C propagators' headers: another
    propagator still reads its own (and the create joins the trace it names)."""
    saved = propagate.get_global_textmap()
    propagate.set_global_textmap(XTracePropagator())
    try:
        create, _ = launcher_with(ALWAYS_ON, {"x-fma-trace": f"{TRACE}-{PARENT}"})
    finally:
        propagate.set_global_textmap(saved)
    assert create.attributes["fma.join"] == "traceparent"
    assert f"{create.context.trace_id:032x}" == TRACE
    assert f"{create.parent.span_id:016x}" == PARENT


def _bound_pod(delay: float = 0.0) -> PodInfo:
    """A Pod lookup whose API server answers bound to ``inst-x``, after ``delay`` seconds."""

    def fetch(namespace: str, name: str, timeout: float) -> dict[str, Any]:
        time.sleep(delay)
        ann = {
            REQUESTER_ANNOTATION: "5e1f0c2a-0000-4000-8000-0000000000cc req",
            INSTANCE_ID_ANNOTATION: "inst-x",
        }
        return {"annotations": ann, "node_name": "node-1", "resource_version": "1"}

    return PodInfo(fetch, env={"POD_NAME": "launcher-1", "NAMESPACE": "fma-test"})


@pytest.mark.slow
def test_a_create_served_before_its_pod_answer_gets_the_same_attributes(launcher_with: Any) -> None:
    """A create whose Pod answer is not known yet is opened after the response (its
    attributes built then): the same attributes as when the answer was known."""
    known = _bound_pod()
    assert known.lookup("inst-x").ok  # cached before the create
    early, _ = launcher_with(ParentBased(SeeingSampler()), pod_info=known)
    late, _ = launcher_with(ALWAYS_ON, pod_info=_bound_pod(delay=1.0))  # answered after the create
    assert late.attributes["fma.join"] == "annotation"
    assert dict(late.attributes) == dict(early.attributes)
    assert (late.context.trace_id, late.context.span_id) == (early.context.trace_id, early.context.span_id)
    # It was served before the answer: its status code was recorded before the join's
    # attributes (which the span gets once the answer is known).
    keys = list(late.attributes)
    assert keys.index("http.response.status_code") < keys.index("fma.join")


class RecordingPodInfo(PodInfo):
    """A lookup that never learns the binding, and records how long each create waits."""

    def __init__(self) -> None:
        super().__init__(
            lambda *a: {"annotations": {}}, env={"POD_NAME": "launcher-1", "NAMESPACE": "fma-test"}
        )
        self.waits: list[float | None] = []

    def wait_for(self, instance_id: str | None, timeout: float | None = None) -> Any:
        self.waits.append(timeout)
        return super().wait_for(instance_id, 0.0)


def test_a_create_queued_past_its_deadline_does_not_wait_again(tracing: Tracing) -> None:
    """Deferred creates wait for their Pod answer until their own deadline (their end plus
    the join wait), not a full wait each in turn behind one another."""
    from fma_otel.instrument import launcher as L

    pod = RecordingPodInfo()
    inst = LauncherInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, pod_info=pod, configure_sdk=False, skip_dep_check=True)
    try:
        for iid, deadline_in in (("late", -5.0), ("fresh", 60.0)):
            pending = L._PendingSpan(inst, {"fma.instance.id": iid}, time.time_ns())
            pending.state = L._RequestState(pending, True, L.JOIN_PENDING, iid)  # type: ignore[arg-type]
            pending.end_time = time.time_ns()
            pending.deadline = time.monotonic() + deadline_in
            L._resolve(pending)
    finally:
        inst.uninstrument()
    late, fresh = pod.waits
    assert late == 0.0
    assert fresh is not None and 55.0 < fresh <= 60.0
    assert [s.attributes["fma.join"] for s in tracing.spans(CREATE_SPAN)] == ["none", "none"]


@pytest.mark.parametrize("sampler", ["sdk", "seeing"])
def test_an_id_the_manager_chose_is_recorded_after_the_response(sampler: str) -> None:
    """What ``create_instance`` returns is read after the response (not between the fork
    and it); an instance id other than the path's still ends up on the create span."""
    tracing = Tracing()
    tracing.provider = _provider(ALWAYS_ON if sampler == "sdk" else ParentBased(SeeingSampler()), tracing)
    launcher = load_fake_launcher()
    create = launcher.VllmMultiProcessManager.create_instance

    def chosen(self: Any, vllm_config: Any, instance_id: str | None = None) -> dict[str, Any]:
        out = create(self, vllm_config, instance_id)
        return {**out, "instance_id": "chosen-id"}

    launcher.VllmMultiProcessManager.create_instance = chosen
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        with TestClient(launcher.app) as client:
            cfg = {"options": f"--model tiny --port {free_port()}"}
            assert client.put("/v2/vllm/instances/inst-x", json=cfg).status_code == 201
    finally:
        inst.uninstrument()
        launcher.vllm_manager.stop_all_instances(timeout=2)
    (span,) = tracing.spans(CREATE_SPAN)
    assert span.attributes["fma.instance.id"] == "chosen-id"
