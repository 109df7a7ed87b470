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
import sys
from collections.abc import Collection
from typing import Any

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
from opentelemetry.instrumentation.utils import unwrap
from opentelemetry.trace import SpanKind, Status, StatusCode

from fma_otel import model
from fma_otel.instrument import _common as c
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


#: Cheap precheck before any regex: every DPC path starts with one of these.
_PREFIXES = ("/v2/vllm/instances", "/health", "/is_sleeping", "/wake_up", "/sleep", "/v1/")
_METHODS = frozenset(m for m, _, _ in _RULES)

#: The same table, precomputed for the paths a DPC actually sends: (method, path) ->
#: purpose for the fixed paths, and method -> purpose for ``/v2/vllm/instances/<id>``.
#: A path with a newline (which ``$`` treats specially) or anything unusual goes through
#: the rules above, so both give one answer (``test_dpc_purpose_tables_agree_with_the_rules``).
_INSTANCES = "/v2/vllm/instances"
_INSTANCE_PREFIX = _INSTANCES + "/"
_INSTANCE_PREFIX_LEN = len(_INSTANCE_PREFIX)
_EXACT: dict[tuple[str, str], str] = {}
_BY_ID: dict[str, str] = {}


def _rule_purpose(method: str, path: str) -> tuple[str, str | None] | None:
    for m, rx, purpose in _RULES:
        if m != method:
            continue
        mt = rx.match(path)
        if mt is None:
            continue
        return purpose, mt.groupdict().get("id")
    return None


def _build_tables() -> None:
    fixed = ("/health", "/is_sleeping", "/wake_up", "/sleep", "/v1/become-ready", "/v1/become-unready")
    fixed += ("/v1/dual-pods/accelerators", "/v1/dual-pods/accelerator-memory-usage")
    fixed += (_INSTANCES, _INSTANCE_PREFIX)
    for method in _METHODS:
        for path in fixed:
            found = _rule_purpose(method, path)
            if found is not None:
                _EXACT[(method, path)] = found[0]
        found = _rule_purpose(method, _INSTANCE_PREFIX + "x")
        if found is not None:
            _BY_ID[method] = found[0]


_build_tables()


def dpc_purpose(method: str, path: str, query: str = "") -> tuple[str, str | None] | None:
    """``(purpose, instance_id)`` of a call, or ``None`` when it is not a DPC-shaped call."""
    found = _path_purpose(method, path)
    if found is not None and found[0] == "list_instances" and "detail=false" in query:
        return "list_instance_ids", found[1]
    return found


def _path_purpose(method: str, path: str) -> tuple[str, str | None] | None:
    """``dpc_purpose`` before the query is looked at: only ``list_instances`` depends on it."""
    method = method.upper()
    if method not in _METHODS or not path.startswith(_PREFIXES):
        return None  # most calls a DPC-side tool makes: decided without a regex
    purpose = _EXACT.get((method, path))
    if purpose is not None:
        return purpose, None
    if path.startswith(_INSTANCE_PREFIX) and "\n" not in path:
        iid = path[_INSTANCE_PREFIX_LEN:]
        purpose = _BY_ID.get(method)
        if not iid or "/" in iid or purpose is None:
            return None
        if purpose == "get_instance_state" and iid == "watch":
            return None
        return purpose, iid
    return _rule_purpose(method, path)


def span_name_for(purpose: str) -> str:
    return model.dpc_call_span(purpose)


class HttpxDpcInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Wraps ``httpx.Client.send`` and ``httpx.AsyncClient.send`` (see module doc)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("httpx >= 0.23",)

    def _instrument(self, **kwargs: Any) -> None:
        if not c.begin(self, kwargs):
            return
        c.wrap_when_imported(self, "httpx", {"Client.send": self._send, "AsyncClient.send": self._async_send})

    def _uninstrument(self, **kwargs: Any) -> None:
        self._on = False
        httpx = sys.modules.get("httpx")  # never imported: nothing wrapped
        for cls in (httpx.Client, httpx.AsyncClient) if httpx is not None else ():
            if isinstance(vars(cls).get("send"), wrapt.FunctionWrapper):
                unwrap(cls, "send")

    # ------------------------------------------------------------------ wrappers

    def _send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self._begin(args, kwargs)
        if begun is None:
            return wrapped(*args, **kwargs)
        span, ctx = begun
        token = c.suppress_http(ctx)  # one call, one span: contrib's transport layer stays quiet
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            c.detach_safe(token)
            _end(span, None, exc)
            raise
        c.detach_safe(token)
        _end(span, response, None)
        return response

    async def _async_send(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        begun = self._begin(args, kwargs)
        if begun is None:
            return await wrapped(*args, **kwargs)
        span, ctx = begun
        token = c.suppress_http(ctx)
        try:
            response = await wrapped(*args, **kwargs)
        except BaseException as exc:
            c.detach_safe(token)
            _end(span, None, exc)
            raise
        c.detach_safe(token)
        _end(span, response, None)
        return response

    def _begin(self, args: Any, kwargs: Any) -> tuple[trace.Span, otel_context.Context] | None:
        """The call's span and the current context, or ``None`` when the call is not ours to
        name (or anything fails).

        Per-call cost matters here (issue 7): the current context is read once (the
        suppression test, the baggage test of the ``traceparent`` injection and the
        suppressed context the call runs in: nothing in between attaches one), the URL's
        query only for ``list_instances`` (the one purpose that depends on it) and its
        userinfo only when the URL has an ``@``; a span without a derived id is started on
        the tracer directly."""
        try:
            if not self._on:
                return None
            ctx = c.active_http_context()
            if ctx is None:
                return None
            request = args[0] if args else kwargs.get("request")
            url = request.url
            method = request.method
            found = _path_purpose(method, url.path)
            if found is None:
                return None
            purpose, instance_id = found
            if purpose == "list_instances":
                query = url.query
                if query and b"detail=false" in query:  # = "detail=false" in query.decode("ascii", "replace")
                    purpose = "list_instance_ids"
            name = _SPAN_NAMES.get(purpose) or span_name_for(purpose)
            full = str(url)
            # userinfo is in str(url) as "userinfo@": no "@", no credentials to drop;
            # copy_with re-parses the URL: only pay for it when there are some.
            if "@" in full and url.userinfo:
                full = str(url.copy_with(username=None, password=None))
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
            c.inject_span(request.headers, span, ctx, set_traceparent)
            return span, ctx
        except Exception:  # noqa: BLE001 - do no harm
            c.logger.debug("fma-otel: httpx span start failed", exc_info=True)
            return None


#: purpose -> span name, for the purposes the table knows (the model decides the names).
_SPAN_NAMES: dict[str, str] = {p: span_name_for(p) for _, _, p in _RULES} | {
    "list_instance_ids": span_name_for("list_instance_ids")
}


_TRACEPARENT = b"traceparent"


class _NoFastPath:
    """Matches no headers object: ``set_traceparent`` always uses ``__setitem__``."""


#: ``httpx.Headers`` once ``set_traceparent``'s direct append is known to give what its
#: ``__setitem__`` gives on this httpx; ``_NoFastPath`` if not; ``None`` until first use.
_FAST_HEADERS: type | None = None


def _fast_headers() -> type:
    """Try the direct append once on sample headers (default and explicit encoding, a
    duplicate key, mixed case) against ``__setitem__``; anything unexpected, and every
    call uses ``__setitem__``."""
    global _FAST_HEADERS
    if _FAST_HEADERS is None:
        found: type = _NoFastPath
        try:
            import httpx

            for encoding in (None, "iso-8859-1"):
                items = [("Accept", "*/*"), ("X-Dup", "1"), ("x-dup", "2")]
                fast, slow = httpx.Headers(items, encoding=encoding), httpx.Headers(items, encoding=encoding)
                if not _append_traceparent(fast, "00-a-b-01"):
                    break
                slow["traceparent"] = "00-a-b-01"
                if fast._list != slow._list or fast.raw != slow.raw or dict(fast) != dict(slow):
                    break
                if _append_traceparent(fast, "00-c-d-01"):  # one is there now: must refuse
                    break
            else:
                found = httpx.Headers
        except Exception:  # noqa: BLE001 - do no harm
            found = _NoFastPath
        _FAST_HEADERS = found
    return _FAST_HEADERS


def _append_traceparent(headers: Any, value: str) -> bool:
    """Append ``traceparent`` to ``headers._list`` if it has none and say so; ``False``
    (nothing done) when it has one: ``__setitem__`` then decides what replaces what."""
    items = headers._list
    for item in items:
        if item[1] == _TRACEPARENT:
            return False
    items.append((_TRACEPARENT, _TRACEPARENT, value.encode(headers._encoding or "utf-8")))
    return True


def set_traceparent(headers: Any, value: str) -> None:
    """``headers["traceparent"] = value``.  On an ``httpx.Headers`` without a
    ``traceparent`` (every request a DPC sends) the item is appended as ``__setitem__``
    would append it, without its encoding of the key, its list of matching indexes and
    its deletions: about a third of its cost."""
    if type(headers) is (_FAST_HEADERS or _fast_headers()):
        try:
            if _append_traceparent(headers, value):
                return
        except Exception:  # noqa: BLE001 - items not as checked: the general path
            pass
    headers["traceparent"] = value


def _end(span: trace.Span, response: Any, exc: BaseException | None) -> None:
    try:
        if response is not None:
            status = int(response.status_code)
            if status < 400:
                span.set_attribute("http.response.status_code", status)
            else:
                span.set_attributes({"http.response.status_code": status, "error.type": str(status)})
                span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
        if exc is not None:
            span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
        span.end()
    except Exception:  # noqa: BLE001 - do no harm
        c.logger.debug("fma-otel: httpx span end failed", exc_info=True)
