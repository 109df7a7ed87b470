"""Guards of the launcher's ``fma.vllm.startup`` ordering on the create request, and of
the fork guard: a forked vLLM child records nothing.

``_order_startup`` fixes the startup span's ordinal and start instant on the request and
defers the rest to the poller thread; these tests hold it to the general path's answer.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, TraceIdRatioBased

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import launcher as L
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN, LauncherInstrumentor
from tests.instrument.conftest import Tracing, no_pod, wait_until
from tests.instrument.test_launcher_inprocess import TP_PARENT, TP_TRACE, _config
from tests.support.otlp_receiver import free_port

T = TP_TRACE
S = TP_PARENT


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_is_silent_without_asking_getpid() -> None:
    c.set_owner_pid()
    assert c.active() and not c._FORKED
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        try:
            os.write(
                w,
                f"{int(c.active())}{int(c.active_http_context() is not None)}{int(c._FORKED)}".encode(),
            )
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 16)
    os.close(r)
    os.waitpid(pid, 0)
    assert answer == b"001"
    assert c.active()  # the parent is unaffected


# --------------------------------------------------------------------------- fma.vllm.startup

_VOLATILE = {model.A_VLLM_PID, model.A_VLLM_POLLS, model.A_VLLM_HEALTHY_AT, model.A_END_PRECISION}


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every create's ``start`` through ``_plan_startup`` (the path used before)."""
    monkeypatch.setattr(
        L.LauncherWrappers, "_order_startup", lambda self, instance, st: self._plan_startup(instance)
    )


def _two_creates(launcher: Any, headers: dict[str, str] | None) -> tuple[Tracing, dict[str, dict[str, Any]]]:
    """Two creates (same trace when ``headers`` carry a traceparent); per instance: its
    create span, its startup span, and the TRACEPARENT its child was given."""
    tracing = Tracing()
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    ports: dict[str, int] = {}
    envs: dict[str, str] = {}
    try:
        with TestClient(launcher.app) as client:
            for iid in ("s1", "s2"):
                ports[iid] = port = free_port()
                r = client.put(f"/v2/vllm/instances/{iid}", json=_config(port), headers=headers or {})
                assert r.status_code == 201
            assert wait_until(lambda: len(tracing.spans(STARTUP_SPAN)) == 2, 10)
            for iid, port in ports.items():
                envs[iid] = httpx.get(f"http://127.0.0.1:{port}/debug/env", timeout=2).json()["TRACEPARENT"]
            for iid in ports:
                client.delete(f"/v2/vllm/instances/{iid}")
    finally:
        inst.uninstrument()
    out: dict[str, dict[str, Any]] = {}
    for iid, port in ports.items():
        (create,) = [s for s in tracing.spans(CREATE_SPAN) if s.attributes["fma.instance.id"] == iid]
        (startup,) = [s for s in tracing.spans(STARTUP_SPAN) if s.attributes["fma.instance.id"] == iid]
        out[iid] = {"create": create, "startup": startup, "env": envs[iid], "port": port}
    return tracing, out


def _shape(found: dict[str, dict[str, Any]], joined: bool) -> list[Any]:
    """Everything about the startup spans that must not depend on which path made them."""
    shape = []
    for iid, f in sorted(found.items()):
        create, startup, port = f["create"], f["startup"], f["port"]
        sc = startup.context
        trace_hex = f"{sc.trace_id:032x}"
        # Start: the fork instant, taken on the create request while it was open.
        assert create.start_time <= startup.start_time <= create.end_time
        assert sc.trace_id == create.context.trace_id
        # The child's TRACEPARENT names exactly this span.
        assert f["env"] == f"00-{trace_hex}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
        attrs = {
            k: (v.replace(str(port), "PORT") if isinstance(v, str) else v)
            for k, v in startup.attributes.items()
            if k not in _VOLATILE
        }
        assert attrs.pop("server.port") == port
        if joined:
            parent = f"{startup.parent.span_id:016x}"
            ids = (trace_hex, f"{sc.span_id:016x}", parent)
        else:  # own trace per create: ids hang from its random trace, under the create span
            assert startup.parent.span_id == create.context.span_id
            assert f"{sc.span_id:016x}" == model.span_id_for(trace_hex, STARTUP_SPAN, 0)
            ids = ()
        shape.append(
            (iid, startup.name, startup.kind, ids, startup.status.status_code, sorted(attrs.items()))
        )
    return shape


@pytest.mark.slow
@pytest.mark.parametrize("joined", [True, False], ids=["traceparent", "own-trace"])
def test_startup_ordered_on_the_request_equals_the_general_path(
    joined: bool, fake_launcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"traceparent": f"00-{T}-{S}-01"} if joined else None
    _, fast = _two_creates(fake_launcher, headers)
    with monkeypatch.context() as m:
        _general_path(m)
        _, general = _two_creates(fake_launcher, headers)
    assert _shape(fast, joined) == _shape(general, joined)
    if joined:  # and both are the span model's ids: n counts the startups of the trace
        ready = model.span_id_for(T, "fma.vllm.ready", 0)
        assert [s[3] for s in _shape(fast, joined)] == [
            (T, model.span_id_for(T, STARTUP_SPAN, n), ready) for n in (0, 1)
        ]


class _Instance:
    instance_id = "i1"
    config = None


def test_order_startup_counts_per_request_and_falls_back(tracing: Tracing) -> None:
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        tracer = tracing.provider.get_tracer("t")
        span = tracer.start_span(CREATE_SPAN)
        trace_hex = f"{span.get_span_context().trace_id:032x}"
        st = L._RequestState(span, True, L.JOIN_NONE, "i1", "")
        first, second = inst._order_startup(_Instance(), st), inst._order_startup(_Instance(), st)
        assert isinstance(first, L._StartupOrder) and (first.n, second.n) == (0, 1)
        assert first.ids() == (trace_hex, model.span_id_for(trace_hex, STARTUP_SPAN, 0))
        assert second.ids() == (trace_hex, model.span_id_for(trace_hex, STARTUP_SPAN, 1))
        # No valid create span to hang from: the general path decides (and opens at once).
        bad = L._RequestState(trace.INVALID_SPAN, True, L.JOIN_NONE, "i1", "")
        assert isinstance(inst._order_startup(_Instance(), bad), L._StartupPlan)
        span.end()
    finally:
        inst.uninstrument()


def test_order_startup_needs_a_sampler_that_follows_the_parent() -> None:
    class Tracer:
        sampler = TraceIdRatioBased(0.5)

    class Parented:
        sampler = ALWAYS_ON

    assert not L._parent_based(Tracer())
    assert L._parent_based(Parented())


def _reference_startup_attrs(cfg: Any, iid: str) -> dict[str, Any]:
    """The startup span's attributes computed the plain way (options redacted on their own)."""
    import json

    from fma_otel.instrument import redact
    from fma_otel.instrument.vllm_watch import instance_port

    options, annotations = getattr(cfg, "options", None), getattr(cfg, "annotations", None)
    attrs: dict[str, Any] = {
        model.A_INSTANCE: iid,
        model.A_START_SRC: "wrapper:fork",
        model.A_END_SRC: "wrapper:GET /health",
        model.A_LAG_RULE: "fma.dpc.poll_lag end - fma.vllm.startup end",
    }
    port = instance_port(options, annotations)
    if port is not None:
        attrs["server.port"] = port
    if isinstance(options, str):
        attrs[model.A_VLLM_OPTIONS] = redact.redact_options(options)[0]
    if callable(getattr(cfg, "model_dump", None)):
        dumped = redact.redact_config(cfg.model_dump(exclude_none=True))[0]
        attrs[model.A_VLLM_CONFIG] = json.dumps(dumped, separators=(",", ":"))
    if annotations and annotations.get("isc-name"):
        attrs[model.A_ISC] = annotations["isc-name"]
    return attrs


def test_startup_attributes_are_the_plain_computation(tracing: Tracing, fake_launcher: Any) -> None:
    class Plain:  # no model_dump: options and annotations only
        options = "--model m --hf-token=hf_SECRET --port 9001"
        annotations = {"isc-name": "isc"}

    configs = [
        fake_launcher.VllmConfig(**_config(8123)),
        fake_launcher.VllmConfig(options="--model m --api-key 'a b' --port=8200", env_vars={"K": "v"}),
        fake_launcher.VllmConfig(options="--model m", gpu_uuids=["GPU-1"]),
        Plain(),
        None,
    ]
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        tracer = tracing.provider.get_tracer("t")
        for cfg in configs:
            span, port = inst._open_startup(tracer, cfg, "i1", None, None, 1)
            span.end()
            want = _reference_startup_attrs(cfg, "i1")
            assert list(span.attributes.items()) == list(want.items())  # same values, same order
            assert port == want.get("server.port")
            text = repr(dict(span.attributes))
            assert not any(secret in text for secret in ("hunter2", "sk-TOPSECRET", "hf_SECRET", "a b"))
    finally:
        inst.uninstrument()
