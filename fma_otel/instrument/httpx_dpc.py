"""httpx calls named the way the DPC names them, with ``traceparent`` injected.

Why: the DPC logs and measures every HTTP call by *purpose* (``create_instance``,
``query_sleeping``, ``wake``, ``relay_ready``...), and the span model names two of them
(``fma.dpc.create_instance``, ``fma.vllm.wake``).  Python code acting for the DPC should
produce the same names so that its spans line up with the bridge's and with
``fma_http_latency_seconds``.  Inside ``fma_otel.actuation(...)`` the model's spans also get
their derived ids and parents; the injected ``traceparent`` then lets the instrumented
launcher's create span parent on exactly that id.

Only calls whose method and URL path match a DPC purpose are touched; everything else
passes through untouched (contrib's httpx instrumentation, if enabled, still sees it).
``Client.send``/``AsyncClient.send`` are wrapped rather than the transports so that this
layer is always outside contrib's transport layer; it silences that inner layer with
``suppress_http_instrumentation`` for the calls it names, so one call makes one span.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.instrumentation.utils import (
    is_http_instrumentation_enabled,
    suppress_http_instrumentation,
    unwrap,
)
from opentelemetry.trace import SpanKind, Status, StatusCode

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument.actuation import current_actuation

A_PURPOSE = model.A_HTTP_PURPOSE

#: (method, path regex, purpose).  From the DPC's call table (fma-reference §2.3).
_RULES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (m, re.compile(p), purpose)
    for m, p, purpose in (
        ("PUT", r"^/v2/vllm/instances/(?P<id>[^/]+)$", "create_instance"),
        ("POST", r"^/v2/vllm/instances/?$", "create_instance"),
        ("GET", r"^/v2/vllm/instances/?$", "list_instances"),
        ("DELETE", r"^/v2/vllm/instances/?$", "delete_all_instances"),
        ("GET", r"^/v2/vllm/instances/(?P<id>(?!watch$)[^/]+)$", "get_instance_state"),
        ("DELETE", r"^/v2/vllm/instances/(?P<id>[^/]+)$", "delete_instance"),
        ("GET", r"^/health$", "get_health"),
        ("GET", r"^/is_sleeping$", "query_sleeping"),
        ("POST", r"^/wake_up$", "wake"),
        ("POST", r"^/sleep$", "sleep"),
        ("POST", r"^/v1/become-ready$", "relay_ready"),
        ("POST", r"^/v1/become-unready$", "relay_unready"),
        ("GET", r"^/v1/dual-pods/accelerators$", "get_gpu_uuids"),
        ("GET", r"^/v1/dual-pods/accelerator-memory-usage$", "get_accel_memory_usage"),
    )
)


#: Cheap precheck before any regex: every DPC path starts with one of these.
_PREFIXES = ("/v2/vllm/instances", "/health", "/is_sleeping", "/wake_up", "/sleep", "/v1/")
_METHODS = frozenset(m for m, _, _ in _RULES)


def dpc_purpose(method: str, path: str, query: str = "") -> tuple[str, str | None] | None:
    """``(purpose, instance_id)`` of a call, or ``None`` when it is not a DPC-shaped call."""
    method = method.upper()
    if method not in _METHODS or not path.startswith(_PREFIXES):
        return None  # most calls a DPC-side tool makes: decided without a regex
    for m, rx, purpose in _RULES:
        if m != method:
            continue
        mt = rx.match(path)
        if mt is None:
            continue
        if purpose == "list_instances" and "detail=false" in query:
            purpose = "list_instance_ids"
        return purpose, mt.groupdict().get("id")
    return None


def span_name_for(purpose: str) -> str:
    return model.dpc_call_span(purpose)


class HttpxDpcInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Wraps ``httpx.Client.send`` and ``httpx.AsyncClient.send`` (see module doc)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("httpx >= 0.23",)

    def _instrument(self, **kwargs: Any) -> None:
        if not c.begin(self, kwargs):
            return
        wrapt.wrap_function_wrapper("httpx", "Client.send", self._send)
        wrapt.wrap_function_wrapper("httpx", "AsyncClient.send", self._async_send)

    def _uninstrument(self, **kwargs: Any) -> None:
        import httpx

        for cls in (httpx.Client, httpx.AsyncClient):
            if isinstance(vars(cls).get("send"), wrapt.FunctionWrapper):
                unwrap(cls, "send")
        self._on = False

    # ------------------------------------------------------------------ wrappers

    def _send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        plan = self._begin(args, kwargs)
        if plan is None:
            return wrapped(*args, **kwargs)
        span, token = plan
        try:
            with suppress_http_instrumentation():
                response = wrapped(*args, **kwargs)
        except BaseException as exc:
            self._end(span, token, None, exc)
            raise
        self._end(span, token, response, None)
        return response

    async def _async_send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        plan = self._begin(args, kwargs)
        if plan is None:
            return await wrapped(*args, **kwargs)
        span, token = plan
        try:
            with suppress_http_instrumentation():
                response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self._end(span, token, None, exc)
            raise
        self._end(span, token, response, None)
        return response

    @c.swallow(default=None)
    def _begin(self, args: Any, kwargs: Any) -> tuple[trace.Span, object | None] | None:
        if not getattr(self, "_on", False) or not c.active() or not is_http_instrumentation_enabled():
            return None
        request = args[0] if args else kwargs.get("request")
        url = request.url
        query = url.query
        found = dpc_purpose(request.method, url.path, query.decode("ascii", "replace") if query else "")
        if found is None:
            return None
        purpose, instance_id = found
        name = span_name_for(purpose)
        attrs: dict[str, Any] = {
            A_PURPOSE: purpose,
            "http.request.method": request.method,
            # copy_with re-parses the URL: only pay for it when there are credentials to drop.
            "url.full": str(url.copy_with(username=None, password=None)) if url.userinfo else str(url),
            "server.address": url.host,
        }
        if url.port:
            attrs["server.port"] = url.port
        if instance_id:
            attrs[model.A_INSTANCE] = instance_id
        ctx = None
        span_id = None
        act = current_actuation()
        if act is not None:
            attrs.update(act.attributes())
            if name in model.SPANS_BY_NAME:
                span_id = act.span_id(name, act.next_index(name))
                parent = act.parent_of(name)
                if parent:
                    ctx = c.remote_context(act.trace_id, act.span_id(parent))
        span = c.start_span(
            self._tracers.get(), name, context=ctx, kind=SpanKind.CLIENT, attributes=attrs, span_id=span_id
        )
        span_ctx = trace.set_span_in_context(span)
        propagate.inject(request.headers, context=span_ctx)
        return span, None

    @c.swallow()
    def _end(self, span: trace.Span, token: object | None, response: Any, exc: BaseException | None) -> None:
        if response is not None:
            status = int(response.status_code)
            span.set_attribute("http.response.status_code", status)
            if status >= 400:
                span.set_attribute("error.type", str(status))
                span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
        if exc is not None:
            span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()
