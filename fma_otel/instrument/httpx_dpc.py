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

from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_http_instrumentation
from opentelemetry.trace import SpanKind

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import redact
from fma_otel.instrument.actuation import _CURRENT as _CURRENT_ACTUATION

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


def dpc_purpose(method: str, path: str, query: str = "") -> tuple[str, str | None] | None:
    """``(purpose, instance_id)`` of a call, or ``None`` when it is not a DPC-shaped call."""
    method = method.upper()
    for m, rx, purpose in _RULES:
        mt = rx.match(path) if m == method else None
        if mt is not None:
            if purpose == "list_instances" and "detail=false" in query:
                return "list_instance_ids", None
            return purpose, mt.groupdict().get("id")
    return None


class HttpxDpcWrappers(c.Wrappers):
    """Wraps ``httpx.Client.send`` and ``httpx.AsyncClient.send`` (see module doc)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("httpx >= 0.23",)

    def _install(self, **kwargs: Any) -> None:
        c.wrap_when_imported(self, "httpx", {"Client.send": self._send, "AsyncClient.send": self._async_send})

    # ------------------------------------------------------------------ wrappers

    def _send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self._begin(args, kwargs)
        if begun is None:
            return wrapped(*args, **kwargs)
        span, secrets = begun
        try:
            with suppress_http_instrumentation():  # one call, one span: contrib's layer stays quiet
                response = wrapped(*args, **kwargs)
        except BaseException as exc:
            _end(span, None, exc, secrets)
            raise
        _end(span, response, None, secrets)
        return response

    async def _async_send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self._begin(args, kwargs)
        if begun is None:
            return await wrapped(*args, **kwargs)
        span, secrets = begun
        try:
            with suppress_http_instrumentation():
                response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            _end(span, None, exc, secrets)
            raise
        _end(span, response, None, secrets)
        return response

    def _begin(self, args: Any, kwargs: Any) -> tuple[trace.Span, list[str]] | None:
        """The call's span and the URL's secret parts (userinfo, query values: what an
        exception text must not carry out), or ``None`` when the call is not ours to name
        (or anything fails)."""
        try:
            if not self._on:
                return None
            ctx = c.active_http_context()
            if ctx is None:
                return None
            request = args[0] if args else kwargs.get("request")
            url = request.url
            method = request.method
            found = dpc_purpose(method, url.path, url.query.decode("ascii", "replace"))
            if found is None:
                return None
            purpose, instance_id = found
            name = model.dpc_call_span(purpose)
            raw = str(url)
            full = redact.redact_url(raw)
            secrets = redact.url_secrets(raw) if full != raw else []
            attrs: dict[str, Any] = {
                A_PURPOSE: purpose,
                "http.request.method": method,
                "url.full": full,
                "server.address": url.host,
            }
            port = url.port
            if port:
                attrs["server.port"] = port
            if instance_id:
                attrs[model.A_INSTANCE] = instance_id
            act = _CURRENT_ACTUATION.get()  # = current_actuation()
            if act is None:
                span = self._tracers.get().start_span(name, kind=SpanKind.CLIENT, attributes=attrs)
            else:
                parent_ctx = None
                span_id = None
                attrs.update(act.attributes())
                if name in model.SPANS_BY_NAME:
                    span_id = act.span_id(name, act.next_index(name))
                    parent = act.parent_of(name)
                    if parent:
                        parent_ctx = c.remote_context(act.trace_id, act.span_id(parent))
                span = c.start_span(
                    self._tracers.get(),
                    name,
                    context=parent_ctx,
                    kind=SpanKind.CLIENT,
                    attributes=attrs,
                    span_id=span_id,
                )
            c.inject_span(request.headers, span, ctx)
            return span, secrets
        except Exception:  # noqa: BLE001 - do no harm
            c.logger.debug("fma-otel: httpx span start failed", exc_info=True)
            return None


@c.swallow()
def _end(span: trace.Span, response: Any, exc: BaseException | None, secrets: list[str]) -> None:
    c.end_span(span, int(response.status_code) if response is not None else None, exc, secrets)


#: ``HttpxDpcInstrumentor`` (the entry point's name) is defined with the other ``BaseInstrumentor`` classes.
__getattr__ = c.lazy_attribute(__name__, "HttpxDpcInstrumentor")
