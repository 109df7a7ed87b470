"""CLIENT spans for the ``kubernetes`` Python client (none exists upstream for Python).

Why: DPC-side tools and the launcher's GPU-map lookup talk to the API server, and an
actuation's latency often hides there.  ``RESTClientObject.request(method, url, ...)`` is
the one call every generated API method goes through, in the old (<= 34) and the new
(>= 35) client generations alike, so it is wrapped (with wrapt) rather than the per-
resource API classes.  The span is named ``<verb> <resource>`` (``get pods``, ``list
pods``, ``patch pods``), the Kubernetes way, with ``k8s.*`` attributes parsed from the
URL, and ``traceparent`` is injected (API servers with ``APIServerTracing`` continue it).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any
from urllib.parse import parse_qs, urlsplit

from opentelemetry import trace
from opentelemetry.trace import SpanKind

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import redact

_PATH = re.compile(
    r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
    r"(?:/namespaces/(?P<ns>[^/]+))?"
    r"(?:/(?P<resource>[^/]+)(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?)?/?$"
)

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "HEAD": "get"}


def describe(method: str, url: str, query_params: Any = None) -> tuple[str, dict[str, Any]]:
    """Span name and ``k8s.*`` attributes for one API call."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    if query_params:
        for k, v in query_params if not isinstance(query_params, dict) else query_params.items():
            query.setdefault(str(k), [str(v)])
    attrs: dict[str, Any] = {"http.request.method": method, "server.address": parts.hostname or ""}
    if parts.port:
        attrs["server.port"] = parts.port
    m = _PATH.match(parts.path)
    if m is None:
        return f"{method} {parts.path}", attrs
    ns, resource, name, sub = m.group("ns"), m.group("resource"), m.group("name"), m.group("sub")
    watching = query.get("watch", ["false"])[0].lower() in ("1", "true")
    verb = _VERBS.get(method.upper())
    if verb is None:
        verb = "watch" if watching else ("get" if name else "list")
    elif verb == "delete" and not name:
        verb = "deletecollection"
    attrs["k8s.api.group"] = m.group("group") or ""
    attrs["k8s.api.version"] = m.group("core") or m.group("version") or ""
    if resource:
        attrs["k8s.resource"] = resource + (f"/{sub}" if sub else "")
    if ns:
        attrs[model.A_NAMESPACE] = ns
    if name:
        attrs["k8s.resource.name"] = name
        if resource == "pods":
            attrs[model.A_POD_NAME] = name
    attrs["k8s.verb"] = verb
    span_name = f"{verb} {resource}" + (f"/{sub}" if sub else "") if resource else f"{verb} {parts.path}"
    return span_name, attrs


class KubernetesClientWrappers(c.Wrappers):
    """Wrap ``kubernetes.client.rest.RESTClientObject.request`` (see module doc)."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("kubernetes >= 20",)

    def _install(self, **kwargs: Any) -> None:
        c.wrap_when_imported(self, "kubernetes.client.rest", {"RESTClientObject.request": self._request})

    def _request(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        span = self._begin(args, kwargs)
        if span is None:
            return wrapped(*args, **kwargs)
        token = c.attach_safe(trace.set_span_in_context(span))
        try:
            response = wrapped(*args, **kwargs)
        except BaseException as exc:
            self._end(span, None, exc)
            raise
        finally:
            c.detach_safe(token)
        self._end(span, response, None)
        return response

    @c.swallow(default=None)
    def _begin(self, args: Any, kwargs: Any) -> trace.Span | None:
        if not self._on or not c.active():
            return None
        method = args[0] if args else kwargs.get("method")
        url = args[1] if len(args) > 1 else kwargs.get("url")
        if not method or not url:
            return None
        name, attrs = describe(str(method).upper(), str(url), kwargs.get("query_params"))
        span = c.start_span(self._tracers.get(), name, kind=SpanKind.CLIENT, attributes=attrs)
        headers = kwargs.get("headers")
        if isinstance(headers, dict):
            c.inject_span(headers, span)
        return span

    @c.swallow()
    def _end(self, span: trace.Span, response: Any, exc: BaseException | None) -> None:
        status = getattr(response, "status", None) if response is not None else getattr(exc, "status", None)
        # An API error's text carries the response body, which echoes what was sent (a 422
        # names the invalid value: an env value, an annotation): the request body is never
        # copied, so neither is this.  Its JSON leaves are scrubbed like known secrets; the
        # status and reason stay.
        body = [b for b in (getattr(exc, "body", None), getattr(exc, "data", None)) if isinstance(b, str)]
        c.end_span(
            span, status if isinstance(status, int) and status else None, exc, redact.known_secrets(body)
        )


#: ``KubernetesClientInstrumentor`` (the entry point's name) is defined with the other ``BaseInstrumentor`` classes.
__getattr__ = c.lazy_attribute(__name__, "KubernetesClientInstrumentor")
