"""``LauncherInstrumentor`` (``LauncherWrappers``): live spans from the FMA launcher that join the actuation trace.

What it does, and why each choice:

* **ASGI middleware added to the app's middleware stack** (``build_middleware_stack`` is
  wrapped at class level).  The launcher's handlers are bound to routes at decoration
  time, so re-binding module functions would change nothing; the stack, though, is built
  lazily at the first ASGI call (the lifespan start-up), after the whole launcher module -
  including a ``__main__`` block - has run.  That makes one hook work for ``python3
  launcher.py`` (module ``__main__``), ``import launcher`` and ``uvicorn launcher:app``.
* ``PUT /v2/vllm/instances/{id}`` becomes ``fma.launcher.create_instance`` (SERVER,
  receipt to response) whose trace comes from an incoming ``traceparent``, else from the
  launcher Pod's ``dual-pods.llm-d.ai/requester`` annotation (derived trace id, parent =
  derived ``fma.dpc.create_instance``), else a trace of its own that says why.  Its span id
  is the derived one, so it *is* the bridge's span.  Other endpoints get ordinary HTTP
  SERVER spans - unless the framework already makes them (FastAPI's own telemetry in recent
  releases, contrib's ASGI middleware), so a request never gets two SERVER spans.
* The launcher classes (``VllmInstance.start``/``stop``, ``VllmMultiProcessManager.
  create_instance``, ``vllm_kickoff``) are wrapped with wrapt on whichever module defines
  them (``__main__`` or ``launcher``), found by scanning ``sys.modules`` when the app's
  stack is built (the class is patched, never the instance: ``__main__`` rebinds the global
  manager).  ``start`` opens ``fma.vllm.startup`` and hands its ``traceparent`` to the
  forked child through the child-side ``vllm_kickoff`` wrapper - the parent's environment
  and the instance's reported ``env_vars`` are never touched.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import contextvars
import json
import os
import queue
import re
import sys
import threading
import time
import weakref
from collections.abc import Collection
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, NamedTuple

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.propagators.textmap import DefaultGetter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    ParentBased,
    ParentBasedTraceIdRatio,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import SpanContext, SpanKind, Status, TraceFlags

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import redact, vllm_phases
from fma_otel.instrument.ids import DerivedIdGenerator
from fma_otel.instrument.podinfo import PodInfo, PodLookup
from fma_otel.instrument.vllm_watch import A_LAG_HINT, A_PORT, LAG_RULE, StartupWatch, instance_port

# Span names come from the model, never spelled here.
CREATE_SPAN = model.SPANS_BY_NAME["fma.launcher.create_instance"].name
CREATE_PARENT = model.SPANS_BY_NAME[CREATE_SPAN].parent_name(model.COLD_LAUNCHER) or ""
STARTUP_SPAN = next(iter(model.WRAPPER_SPANS))
STARTUP_PARENT = model.WRAPPER_SPANS[STARTUP_SPAN]

A_JOIN = model.A_JOIN
A_JOIN_REASON = model.A_JOIN_REASON
A_OPTIONS = model.A_VLLM_OPTIONS
A_CONFIG = model.A_VLLM_CONFIG
JOIN_TRACEPARENT = "traceparent"
JOIN_ANNOTATION = "annotation"
JOIN_NONE = "none"
#: A create served before its Pod answer was known (``_PendingSpan``); never exported.
JOIN_PENDING = "pending"
JOIN_FAILED = "failed"

_CREATE_PREFIX = "/v2/vllm/instances/"
_CREATE_ROUTE = "/v2/vllm/instances/{instance_id}"
_CLASS_NAMES = ("VllmMultiProcessManager", "VllmInstance")

#: Set by the ``start`` wrapper just before the fork; the child-side ``vllm_kickoff``
#: wrapper reads its (copied) value.  A plain global: fork copies memory, not contexts.
#: The environment itself, or a ``_StartupOrder`` that the child asks for it.
_PENDING_CHILD_ENV: Any = None


class _HeaderGetter(DefaultGetter):  # type: ignore[type-arg]
    """The request headers (ASGI's are lower-case) asked for by any propagator's key."""

    def get(self, carrier: Any, key: str) -> list[str] | None:
        return super().get(carrier, key.lower())


_GETTER = _HeaderGetter()
_ROOT = otel_context.Context()


def _headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request headers as ``str`` (ASGI gives lower-case byte names): what the
    propagator reads and ``user-agent``."""
    out: dict[str, str] = {}
    for k, v in scope.get("headers") or ():
        try:
            out[k.decode("latin-1")] = v.decode("latin-1")
        except Exception:  # noqa: BLE001
            continue
    return out


def _extract(headers: dict[str, str]) -> Any:
    """``propagate.extract`` of the request headers onto an empty context: the incoming
    context and its parent span context (``None`` when no valid parent came)."""
    ctx = propagate.extract(headers, context=_ROOT, getter=_GETTER)
    psc = trace.get_current_span(ctx).get_span_context()
    return ctx, (psc if psc.is_valid else None)


@dataclass(slots=True, eq=False)
class _RequestState:
    """One traced request, as the wrappers inside it see it (through ``_REQUEST``).

    ``trace_hex`` is set for a create span (the trace its derived ids hang from);
    ``instance_id`` is the id in the create path.
    """

    span: trace.Span
    is_create: bool
    join: str
    instance_id: str | None = None
    trace_hex: str = ""
    status: int | None = None
    startups: int = 0  # fma.vllm.startup spans ordered in a trace of its own
    #: ``(instance, startup watch, child env)`` of each instance forked in this create,
    #: registered once the response is sent (``_after_response``, which then sets it to
    #: ``None``: a ``start`` after that registers at once).
    after: list[tuple[Any, StartupWatch, Any]] | None = field(default_factory=list)
    #: The launcher's config object of this create (its secrets are scrubbed from
    #: exception texts); read only when an exception is recorded.
    config: Any = None
    #: What the manager's ``create_instance`` returned: read after the response.
    result: Any = None


#: The request the middleware is tracing, for the class wrappers running inside it: they
#: read what the middleware already decided (instance id, trace, join) instead of asking
#: the OpenTelemetry context and the span again.
_REQUEST: contextvars.ContextVar[_RequestState | None] = contextvars.ContextVar(
    "fma_otel_launcher_request", default=None
)


class FmaLauncherMiddleware:
    """The ASGI layer that makes the launcher's SERVER spans (see module doc).

    It never touches ``receive``: the request body is not buffered or parsed (what the
    startup span records from the config is read later from the launcher's own parsed
    object, off the request path).
    """

    def __init__(self, app: Any, owner: LauncherWrappers, fastapi_app: Any, generic: bool = True) -> None:
        self.app = app
        self._owner = owner
        self._fastapi_app = fastapi_app
        self._generic = generic

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._lifespan_send(send))
            return
        if scope["type"] != "http" or not self._owner._on or not c.active():
            await self.app(scope, receive, send)
            return
        began = self._begin(scope)
        if began is None:
            await self.app(scope, receive, send)
            return
        state, ctx = began

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                try:
                    state.status = int(message.get("status", 0))
                except Exception:  # noqa: BLE001
                    pass
            await send(message)

        token = c.attach_safe(ctx)
        req_token = _REQUEST.set(state)
        failure: BaseException | None = None
        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._owner._after_response(state)
            _finish(state, failure)
            with contextlib.suppress(Exception):  # another context: nothing of ours to undo there
                _REQUEST.reset(req_token)
            c.detach_safe(token)

    def _lifespan_send(self, send: Any) -> Any:
        """``send`` that, when the app has shut down, first settles our spans: uvicorn
        re-raises SIGTERM after its shutdown, so no ``atexit`` hook (ours or the SDK's
        flush) would run."""
        owner = self._owner

        async def lifespan_send(message: dict[str, Any]) -> None:
            if message.get("type") == "lifespan.startup.complete":
                owner.podinfo.closing = False  # served again (an app restarted in-process)
            elif message.get("type") in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                try:
                    await asyncio.to_thread(owner.at_shutdown)
                except Exception:  # noqa: BLE001 - do no harm
                    c.logger.debug("fma-otel: settling spans at shutdown failed", exc_info=True)
            await send(message)

        return lifespan_send

    @c.swallow()
    def _begin(self, scope: dict[str, Any]) -> Any:
        """``(state, ctx)`` or ``None`` (no span, or a failure).  Never any I/O: the Pod answer is the
        cached one; a create it does not describe is opened after the response.
        The create path is recognised with a prefix test, not a regex.
        """
        path = scope.get("path", "")
        method = scope.get("method", "GET")
        owner = self._owner
        if owner._excluded is not None and owner._excluded.url_disabled(path):
            return None
        receipt = time.time_ns()
        if method == "PUT" and path.startswith(_CREATE_PREFIX):
            instance_id = path[len(_CREATE_PREFIX) :]
            if instance_id and "/" not in instance_id:
                headers = _headers(scope)
                parent, psc = _extract(headers)
                if psc is not None:
                    return self._start_create(scope, instance_id, headers, receipt, parent, psc, None)
                pi = owner.podinfo
                if pi.pod_name and pi.namespace:
                    look = pi.cached(instance_id)
                    if look is None:
                        pi.kick()
                        return self._defer_create(scope, instance_id, headers, receipt)
                else:
                    look = pi.lookup(instance_id)  # no I/O: the (constant) reason there is none
                return self._start_create(scope, instance_id, headers, receipt, parent, None, look)
        if not self._generic or _native_span(scope):
            return None
        return self._begin_generic(scope, method, path, receipt)

    def _defer_create(
        self, scope: dict[str, Any], instance_id: str, headers: dict[str, str], t0: int
    ) -> tuple[_RequestState, Any]:
        """A create whose Pod answer is not known yet: served now, its span opened after the
        response (``_resolve``, on the resolver thread) with the receipt instant."""
        pending = _PendingSpan(self._owner, {}, t0)
        pending.request = (scope, headers, instance_id)  # its attributes: built at ``end``
        st = _RequestState(pending, True, JOIN_PENDING, instance_id)  # type: ignore[arg-type]
        pending.state = st
        return st, None

    def _begin_generic(
        self, scope: dict[str, Any], method: str, path: str, t0: int
    ) -> tuple[_RequestState, Any]:
        headers = _headers(scope)
        route = _route_of(self._fastapi_app, scope) or None
        parent, _ = _extract(headers)
        attrs = _http_attrs(scope, method, path, headers, route)
        span = self._owner.tracer().start_span(
            f"{method} {route}" if route else method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes=attrs,
            start_time=t0,
        )
        return _RequestState(span, False, ""), trace.set_span_in_context(span, parent)

    def _start_create(
        self,
        scope: dict[str, Any],
        instance_id: str,
        headers: dict[str, str],
        t0: int,
        parent: Any,
        psc: SpanContext | None,
        look: PodLookup | None,
    ) -> tuple[_RequestState, Any]:
        """Open ``fma.launcher.create_instance``: all attributes in one dict, one SDK call -
        or, when no sampler can look at them (``_defer_attributes``) and the provider can
        be given the span's ids (``_forcing``), only its ids are decided here: the span is
        opened after the response (``_LateSpan``) and its attributes are built and set then
        (``_open_late``)."""
        owner = self._owner
        tracer = owner.tracer()
        if _defer_attributes(tracer) and _forcing(tracer):
            join_attrs: dict[str, Any] = {}  # then what the request records on it
            join, trace_hex, parent, span_id = _decide(owner, join_attrs, parent, psc, look)
            span = _LateSpan(join_attrs, tracer, parent, trace_hex, span_id, t0)
            span.request = (scope, headers, instance_id)
            return _RequestState(span, True, join, instance_id, trace_hex), trace.set_span_in_context(
                span, parent
            )
        attrs = _create_attrs(scope, headers, instance_id)
        span, join, trace_hex, parent = _open_create(owner, attrs, t0, parent, psc, look)
        return (
            _RequestState(span, True, join, instance_id, trace_hex),
            trace.set_span_in_context(span, parent),
        )


def _open_create(
    owner: LauncherWrappers,
    attrs: dict[str, Any],
    t0: int,
    parent: Any,
    psc: SpanContext | None,
    look: PodLookup | None,
) -> tuple[trace.Span, str, str, Any]:
    """Start the create span under what is known, ``attrs`` and the join's attributes
    (added to ``attrs``) given at its start: ``(span, join, trace hex, parent)``."""
    join, trace_hex, parent, span_id = _decide(owner, attrs, parent, psc, look)
    span = c.start_span(
        owner.tracer(),
        CREATE_SPAN,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attrs,
        start_time=t0,
        span_id=span_id,
    )
    return span, join, trace_hex, parent


def _decide(
    owner: LauncherWrappers,
    attrs: dict[str, Any],
    parent: Any,
    psc: SpanContext | None,
    look: PodLookup | None,
) -> tuple[str, str, Any, str | None]:
    """What the create span's start needs: ``(join, trace hex, parent context, span id)``
    - the trace hex empty and the span id ``None`` for a trace of its own (random ids).

    ``attrs`` gets the join's attributes.  The span's ordinal is taken here, in the order
    the creates arrive, whenever the span itself is opened."""
    trace_hex = ""
    if psc is not None:
        join = JOIN_TRACEPARENT
        trace_hex = format(psc.trace_id, "032x")
    elif look is not None and look.ok:
        join = JOIN_ANNOTATION
        assert look.requester_uid
        key = model.actuation_key(look.requester_uid)
        trace_hex = model.trace_id_for(key)
        parent = c.remote_context(trace_hex, model.span_id_for(trace_hex, CREATE_PARENT, 0))
        attrs[model.A_ACTUATION_KEY] = key
        attrs[model.A_REQ_UID] = look.requester_uid
        if look.requester_name:
            attrs[model.A_REQ_NAME] = look.requester_name
        _pod_attrs(attrs, look)
    else:
        join = JOIN_NONE
        if parent is None:
            parent = _ROOT  # a root span even if something upstream attached a context
        attrs[A_JOIN_REASON] = f"no traceparent header; {look.reason if look else 'no pod lookup'}"
        if look is not None:
            _pod_attrs(attrs, look)
    span_id = None
    if trace_hex:
        span_id = model.span_id_for(trace_hex, CREATE_SPAN, owner.ordinals.next(trace_hex, CREATE_SPAN))
    attrs[A_JOIN] = join
    return join, trace_hex, parent, span_id


def _create_attrs(scope: dict[str, Any], headers: dict[str, str], instance_id: str) -> dict[str, Any]:
    """The create span's attributes from the request (the join adds its own after them)."""
    attrs = _http_attrs(scope, "PUT", scope.get("path", ""), headers, _CREATE_ROUTE)
    attrs[model.A_INSTANCE] = instance_id
    attrs[model.A_START_SRC] = "wrapper"
    attrs[model.A_END_SRC] = "wrapper"
    return attrs


#: Names of the SDK's own samplers, whose decisions never depend on span attributes.
_BLIND_DESCRIPTION = re.compile(
    r"(?:AlwaysOnSampler|AlwaysOffSampler|TraceIdRatioBased\{[^{}]*\}|ParentBased\{|[A-Za-z]+:|,|\})*"
)
_BLIND_TYPES = (StaticSampler, ParentBased, ParentBasedTraceIdRatio, TraceIdRatioBased)
#: ``(sampler, may its create spans get their attributes after the start)``.
_BLIND: tuple[Any, bool] | None = None


def _defer_attributes(tracer: Any) -> bool:
    """May a create span get its attributes after the response instead of at its start?

    Only a sampler sees the attributes given at the start and not the ones set later (the
    OpenTelemetry specification's one reason to give them at the start), so: when the
    tracer's sampler is one of the SDK's own (always on/off, trace-id ratio, parent-based
    on those), which never look at attributes.  Building and cleaning them then costs the
    request nothing before its response.  Decided once per sampler.
    """
    global _BLIND
    sampler = getattr(tracer, "sampler", None)
    cached = _BLIND
    if cached is None or cached[0] is not sampler:
        blind = False
        try:
            blind = type(sampler) in _BLIND_TYPES and bool(
                _BLIND_DESCRIPTION.fullmatch(sampler.get_description())  # type: ignore[union-attr]
            )
        except Exception:  # noqa: BLE001 - an odd sampler: attributes at the start
            blind = False
        cached = _BLIND = (sampler, blind)
    return cached[1]


@c.swallow()
def _finish(state: _RequestState, exc: BaseException | None) -> None:
    """End the request's span: the status code, an error status where it is one (a
    cancelled request is not an error of its own)."""
    if isinstance(exc, asyncio.CancelledError):
        exc = None
    secrets = _config_secrets(state.config) if exc is not None else []
    c.end_span(
        state.span,
        state.status,
        exc,
        secrets,
        # A refused create (409) did not create anything: an error for the actuation.
        error_from=400 if state.is_create else 500,
        message=redact.status_message(exc, secrets) if exc is not None else None,
    )


class _Buffered(trace.Span):
    """A create span's stand-in during its request: keeps what the request records on it
    (attributes, events, exceptions, a status, a name) for the real span, opened later
    (``replay``).  A ``Span``, so that code inside the request finds it as the current span."""

    __slots__ = ("attrs", "events", "status", "t0", "exceptions", "name", "request")

    def __init__(self, attrs: dict[str, Any], t0: int) -> None:
        self.attrs = attrs
        self.t0 = t0
        #: ``(scope, headers, instance id)`` of a create: its attributes are built from it
        #: after the response (``request_attributes``), not on the request path.
        self.request: tuple[dict[str, Any], dict[str, str], str] | None = None
        #: Made at the first one (most requests record none: two lists fewer per create).
        self.events: list[tuple[str, dict[str, Any], int]] | None = None
        self.status: Status | None = None
        self.exceptions: list[tuple[BaseException, Any, int | None, bool]] | None = None
        self.name: str | None = None

    def update_name(self, name: str) -> None:
        self.name = name

    def record_exception(
        self,
        exception: BaseException,
        attributes: Any = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        if self.exceptions is None:
            self.exceptions = []
        self.exceptions.append((exception, attributes, timestamp or time.time_ns(), escaped))

    def is_recording(self) -> bool:
        return True

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        self.attrs.update(attributes)

    def set_status(self, status: Status, description: str | None = None) -> None:
        self.status = status

    def add_event(
        self, name: str, attributes: dict[str, Any] | None = None, timestamp: int | None = None
    ) -> None:
        if self.events is None:
            self.events = []
        self.events.append((name, dict(attributes or {}), timestamp or time.time_ns()))

    def request_attributes(self) -> dict[str, Any]:
        """The create span's attributes from its request, then those kept here (the join's,
        then what the request set on it: the order a span given them at its start has)."""
        attrs = _create_attrs(*self.request) if self.request is not None else {}
        attrs.update(self.attrs)
        return attrs

    def replay(self, span: trace.Span, attributes: bool = True) -> None:
        """Give ``span`` what was recorded here (``attributes``: the attributes too)."""
        if attributes and self.attrs:
            span.set_attributes(self.attrs)
        for name, attrs, ts in self.events or ():
            span.add_event(name, attrs, ts)
        for exc, attrs, ts, escaped in self.exceptions or ():
            span.record_exception(exc, attrs, ts, escaped)
        if self.status is not None:
            span.set_status(self.status)
        if self.name is not None:
            span.update_name(self.name)


class _LateSpan(_Buffered):
    """The create span during its request when all its ids are known at receipt (a
    ``traceparent``, the Pod's cached answer, or a trace of its own): the request makes no
    SDK call; the span is opened right after the response is sent (``_open_late``), with
    the receipt instant and exactly these ids.

    Why: opening a span on the request path cost about as much as a bare SDK span, and
    every page it writes before the fork is one more the fork and the child share.  Its
    context is the span's own (the forked child's ``TRACEPARENT``, and any span made inside
    the request, hang from it).  A trace of its own draws its random ids here, from the
    provider's ``DerivedIdGenerator``, which then gives them to the span; the sampling
    decision is the tracer's sampler's, asked now with what the SDK will ask it (the
    sampler is one of the SDK's own, which look at neither attributes nor time:
    ``_defer_attributes``), so the child's flags are the span's.
    """

    __slots__ = ("tracer", "parent", "sc", "own_trace")

    def __init__(
        self, attrs: dict[str, Any], tracer: Any, parent: Any, trace_hex: str, span_id: str | None, t0: int
    ) -> None:
        super().__init__(attrs, t0)
        self.tracer = tracer
        self.parent = parent
        gen = tracer.id_generator
        #: A trace of its own: the random trace id the span must be given.
        self.own_trace = 0 if trace_hex else gen.generate_trace_id()
        tid = int(trace_hex, 16) if trace_hex else self.own_trace
        sid = int(span_id, 16) if span_id else gen.generate_span_id()
        result = tracer.sampler.should_sample(parent, tid, CREATE_SPAN, SpanKind.SERVER)
        flags = TraceFlags.SAMPLED if result.decision.is_sampled() else TraceFlags.DEFAULT
        # The W3C "random trace id" flag, as the SDK sets it (where it knows the flag).
        psc = trace.get_current_span(parent).get_span_context()
        if _RANDOM_FLAG and (
            gen.is_trace_id_random() if not psc.is_valid else psc.trace_flags & _RANDOM_FLAG
        ):
            flags |= _RANDOM_FLAG
        self.sc = SpanContext(
            trace_id=tid,
            span_id=sid,
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=result.trace_state,
        )

    def get_span_context(self) -> SpanContext:
        return self.sc

    def end(self, end_time: int | None = None) -> None:
        """Never opened (``_open_late`` failed): nothing to end."""


#: ``TraceFlags.RANDOM_TRACE_ID`` where the API has it (W3C Trace Context Level 2), else 0.
_RANDOM_FLAG = int(getattr(TraceFlags, "RANDOM_TRACE_ID", 0))


def _forcing(tracer: Any) -> bool:
    """Does the tracer take its ids from a ``DerivedIdGenerator`` (so a span opened later can
    be given the ids its request already handed out)?"""
    return isinstance(getattr(tracer, "id_generator", None), DerivedIdGenerator)


def _open_late(st: _RequestState) -> None:
    """Open the create span of a ``_LateSpan`` (after the response; never raises): the
    receipt instant, the ids its request handed out, its attributes, then what the
    request recorded."""
    late = st.span
    try:
        assert isinstance(late, _LateSpan)
        sc = late.sc
        span = c.start_span(
            late.tracer,
            CREATE_SPAN,
            context=late.parent,
            kind=SpanKind.SERVER,
            start_time=late.t0,
            span_id=format(sc.span_id, "016x"),
            trace_id=late.own_trace or None,
        )
        span.set_attributes(late.request_attributes())
        late.replay(span, attributes=False)
        st.span = span
    except Exception:  # noqa: BLE001 - do no harm
        c.logger.debug("fma-otel: opening a create span after its response failed", exc_info=True)


class _PendingSpan(_Buffered):
    """Stands in for a deferred create span (``_defer_create``) during the request: keeps
    what the request records, and on ``end`` queues itself for the resolver thread, which
    opens the real span - receipt instant, derived ids once the Pod answer is known - and
    replays it all.  The request never waits on the API server."""

    __slots__ = ("owner", "end_time", "state", "deadline")

    def __init__(self, owner: LauncherWrappers, attrs: dict[str, Any], t0: int) -> None:
        super().__init__(attrs, t0)
        self.owner = owner
        self.end_time: int | None = None
        self.state: _RequestState | None = None
        #: ``time.monotonic()`` until which its Pod answer is waited for (set at ``end``).
        self.deadline = 0.0

    def get_span_context(self) -> SpanContext:
        return trace.INVALID_SPAN_CONTEXT

    def end(self, end_time: int | None = None) -> None:
        self.end_time = end_time or time.time_ns()
        self.deadline = time.monotonic() + self.owner.podinfo.join_wait
        if self.request is not None:  # the join's attributes are added when it is opened
            self.attrs, self.request = self.request_attributes(), None
        _RESOLVER.put(self)


class _Resolver:
    """One daemon thread that opens deferred create spans, in order (see ``_PendingSpan``)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_PendingSpan | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._podinfos: weakref.WeakSet[PodInfo] = weakref.WeakSet()
        self._atexit = False

    def put(self, pending: _PendingSpan) -> None:
        self._queue.put(pending)
        self._podinfos.add(pending.owner.podinfo)
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    if not self._atexit:  # first use: after the SDK's own exit hook, so runs before it
                        self._atexit = True
                        atexit.register(self.close)
                    self._thread = threading.Thread(target=self._run, name="fma-otel-join", daemon=True)
                    self._thread.start()

    def close(self, timeout: float = 2.0) -> None:
        """At exit: stop waiting for Pod answers, and open and end every queued span now
        (those still unresolved say why in ``fma.join.reason``) before the SDK flushes."""
        for pi in list(self._podinfos):
            pi.closing = True
            pi._notify()
        thread = self._thread
        if thread is not None and thread.is_alive():
            self._queue.put(None)
            thread.join(timeout)

    def _run(self) -> None:
        with suppress_instrumentation():
            while True:
                pending = self._queue.get()
                if pending is None:
                    return
                try:
                    _resolve(pending)
                except Exception:  # noqa: BLE001 - do no harm
                    c.logger.debug("fma-otel: resolving a deferred create span failed", exc_info=True)
                    if pending.state is not None:
                        pending.state.join = JOIN_FAILED  # its startup span is then not opened


_RESOLVER = _Resolver()


def _resolve(pending: _PendingSpan) -> None:
    """Open and end the real create span of a deferred create (on the resolver thread)."""
    st = pending.state
    assert st is not None
    owner = pending.owner
    # Its own deadline, counted from its end, not from when the resolver got to it: creates
    # queued behind one that waited do not wait again in turn (a backlog of spans - each
    # holding its instance's process and sentinel pipe - would grow with the create rate).
    look = owner.podinfo.wait_for(st.instance_id, max(0.0, pending.deadline - time.monotonic()))
    span, join, trace_hex, _ = _open_create(owner, pending.attrs, pending.t0, None, None, look)
    pending.replay(span, attributes=False)  # its attributes were given at the start
    st.span, st.trace_hex = span, trace_hex
    st.join = join  # last: the poller opens the startup span once it is no longer pending
    span.end(end_time=pending.end_time)


def _config_secrets(cfg: Any) -> list[str]:
    """The secret values of a launcher config (what ``redact_config`` redacts), for
    scrubbing exception texts; computed only when an exception is recorded."""
    if cfg is None:
        return []
    try:
        dump = getattr(cfg, "model_dump", None)
        data = dump(exclude_none=True) if callable(dump) else (cfg if isinstance(cfg, dict) else vars(cfg))
        return redact.known_secrets(redact.redact_config(data)[1])
    except Exception:  # noqa: BLE001 - do no harm
        return []


def _native_span(scope: dict[str, Any]) -> bool:
    """Did FastAPI's own telemetry already open a SERVER span for this request?"""
    rt = scope.get("fastapi.telemetry")
    return rt is not None and getattr(rt, "span", None) is not None


def _route_of(app: Any, scope: dict[str, Any]) -> str | None:
    try:
        from starlette.routing import Match

        for route in getattr(getattr(app, "router", None), "routes", ()):
            match, _ = route.matches(scope)
            if match == Match.FULL:
                return getattr(route, "path", None)
    except Exception:  # noqa: BLE001
        return None
    return None


def _http_attrs(
    scope: dict[str, Any], method: str, path: str, headers: dict[str, str], route: str | None
) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "http.request.method": method,
        "url.path": path,
        "url.scheme": scope.get("scheme", "http"),
    }
    if route:
        attrs["http.route"] = route
    if scope.get("query_string"):
        attrs["url.query"] = redact.redact_query(scope["query_string"].decode("latin-1"))[:256]
    server = scope.get("server")
    if server:
        attrs["server.address"], attrs["server.port"] = server[0], server[1]
    client = scope.get("client")
    if client:
        attrs["client.address"] = client[0]
    if "user-agent" in headers:
        attrs["user_agent.original"] = headers["user-agent"][:256]
    return attrs


def _pod_attrs(attrs: dict[str, Any], look: PodLookup) -> None:
    if look.pod_name:
        attrs[model.A_LAUNCHER] = look.pod_name
    if look.namespace:
        attrs[model.A_NAMESPACE] = look.namespace
    if look.node_name:
        attrs[model.A_NODE] = look.node_name


def _is_launcher_module(mod: ModuleType | None) -> bool:
    try:
        d = vars(mod)
    except TypeError:
        return False
    return all(isinstance(d.get(n), type) for n in _CLASS_NAMES)


def launcher_modules() -> list[ModuleType]:
    """Every loaded module that defines the launcher's classes (``__main__``, ``launcher``...)."""
    return list(dict.fromkeys(m for m in list(sys.modules.values()) if _is_launcher_module(m)))


class LauncherWrappers(c.Wrappers):
    """The launcher's wrappers and their state, one per process (see the module docstring
    for what and why); ``LauncherInstrumentor`` is its ``BaseInstrumentor``.

    ``install(tracer_provider=None, pod_info=None, modules=None)``: ``pod_info``
    replaces the Kubernetes lookup (tests); ``modules`` names launcher modules to patch now
    instead of waiting for the app's first ASGI call.  The SDK itself is configured once,
    by ``fma_otel``'s configurator (``fma_otel.instrument.configurator``), not here.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("fastapi >= 0.100",)

    # ------------------------------------------------------------------ lifecycle

    def _install(self, **kwargs: Any) -> None:
        try:
            import fastapi  # noqa: F401 - the launcher's own next import: its version is checked
        except ImportError:  # pragma: no cover - nothing to patch then (_patch_stack_builder)
            pass
        if not c.dependency_met(self, "fastapi"):
            self._on = False
            return
        self.podinfo: PodInfo = kwargs.get("pod_info") or PodInfo()
        self.ordinals = c.OrdinalCounter()
        self._patched_modules: list[ModuleType] = []
        self._apps: weakref.WeakSet[Any] = weakref.WeakSet()
        self._native_saved: list[tuple[Any, Any]] = []
        self._watches: weakref.WeakKeyDictionary[Any, StartupWatch] = weakref.WeakKeyDictionary()
        self._excluded = _excluded_urls()
        self._prefetched = False
        self._patch_stack_builder()
        for mod in kwargs.get("modules") or ():
            self.patch_module(mod)
        for mod in launcher_modules():
            self.patch_module(mod)

    def _uninstall(self) -> None:
        self._patched_modules = []
        for cfg, old in getattr(self, "_native_saved", []):
            cfg["tracing"] = old
        self._native_saved = []
        for app in list(getattr(self, "_apps", ())):
            app.middleware_stack = None  # rebuilt without us on the next call
        for watch in list(getattr(self, "_watches", {}).values()):
            watch.stop("instrumentation removed")
        podinfo = getattr(self, "podinfo", None)
        if podinfo is not None:
            podinfo.stop()

    # ------------------------------------------------------------------ helpers

    def recording(self) -> bool:
        return self._on and c.active()

    def tracer(self) -> trace.Tracer:
        return self._tracers.get()

    def at_shutdown(self, timeout_s: float = 2.0) -> None:
        """The app is shutting down: open and end every deferred create span now (those
        still unresolved say why), then flush the provider, each bounded by ``timeout_s``."""
        _RESOLVER.close(timeout_s)
        provider = self._tracers.provider or trace.get_tracer_provider()
        flush = getattr(provider, "force_flush", None)
        if callable(flush):
            flush(int(timeout_s * 1000))

    # ------------------------------------------------------------------ the app

    def _patch_stack_builder(self) -> None:
        try:
            import fastapi
        except ImportError:  # pragma: no cover - dependency check prevents this
            return
        cls: type = fastapi.FastAPI
        if "build_middleware_stack" not in vars(cls):
            import starlette.applications

            cls = starlette.applications.Starlette
        wrapt.wrap_function_wrapper(cls, "build_middleware_stack", self._build_stack_wrapper)
        self._wrapped.append((cls, "build_middleware_stack"))
        # Apps whose stack is already built (instrument() called late) rebuild with us.
        for mod in launcher_modules():
            app = vars(mod).get("app")
            if app is not None and getattr(app, "middleware_stack", None) is not None:
                app.middleware_stack = None

    def _build_stack_wrapper(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        stack = wrapped(*args, **kwargs)
        try:
            return self._wrap_stack(instance, stack)
        except Exception:  # noqa: BLE001 - do no harm: serve uninstrumented
            c.logger.debug("fma-otel: could not add the launcher middleware", exc_info=True)
            return stack

    def _wrap_stack(self, app: Any, stack: Any) -> Any:
        if not self._on or isinstance(stack, FmaLauncherMiddleware):
            return stack
        mods = [m for m in launcher_modules() if vars(m).get("app") is app]
        if not mods:
            return stack  # not the launcher: leave other FastAPI apps alone
        for mod in mods:
            self.patch_module(mod)
        generic = not _has_contrib_asgi(stack)
        cfg = getattr(app, "_telemetry", None)
        if generic and isinstance(cfg, dict) and cfg.get("tracing"):
            # FastAPI >= 0.16x emits its own SERVER spans; ours replace them for this app.
            self._native_saved.append((cfg, cfg["tracing"]))
            cfg["tracing"] = False
        self._apps.add(app)
        if not self._prefetched:
            # Warm the pod lookup now, not at instrument() time: the launcher module has
            # finished importing (a concurrent first import of ``kubernetes`` from our
            # thread and from the launcher's main thread can see a half-made module).
            self._prefetched = True
            self.podinfo.start_background()
        return FmaLauncherMiddleware(stack, self, app, generic=generic)

    # ------------------------------------------------------------------ the classes

    def patch_module(self, mod: ModuleType) -> None:
        """Wrap the launcher classes of ``mod`` (idempotent)."""
        if mod in self._patched_modules or not _is_launcher_module(mod):
            return
        d = vars(mod)
        inst_cls, mgr_cls = d["VllmInstance"], d["VllmMultiProcessManager"]
        for owner, attr, wrapper in (
            (inst_cls, "start", self._start_wrapper),
            (inst_cls, "stop", self._stop_wrapper),
            (mgr_cls, "create_instance", self._create_wrapper),
            (mod, "vllm_kickoff", _kickoff_wrapper),
        ):
            if callable(vars(owner).get(attr)):
                self.wrap(owner, attr, wrapper)
        self._patched_modules.append(mod)

    def _create_wrapper(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        st = _REQUEST.get()
        if st is not None:
            st.config = args[0] if args else kwargs.get("vllm_config")
        result = wrapped(*args, **kwargs)
        if st is not None and st.is_create:
            # After the fork: the id the manager chose is checked after the response
            # (``_after_response``); here only the one write the response makes anyway.
            st.result = result
        elif self.recording():
            _note_instance_id(trace.get_current_span(), result)
        return result

    def _after_response(self, st: _RequestState) -> None:
        """Register the create request's forked instances with the startup poller, now
        that the response has been sent, and clear the child's pending environment.

        Why it waits: between the fork and the response every memory page the launcher
        writes is first copied (the child shares it), so the create path does nothing
        there that can be done later.  The
        watch's start time is the fork instant whenever it is registered, and the poller
        (or ``stop``) opens the span as before.
        """
        global _PENDING_CHILD_ENV
        if st.span.__class__ is _LateSpan:
            _open_late(st)  # first: the startup span's opener may hang from it
        if st.result is not None:
            result, st.result = st.result, None
            _note_instance_id(st.span, result, st.instance_id)
        after = st.after
        st.after = None
        for instance, watch, child_env in after or ():
            try:
                if _PENDING_CHILD_ENV is child_env:
                    _PENDING_CHILD_ENV = None
                if not watch.ended:
                    self._watch(instance, watch, child_env)
            except Exception:  # noqa: BLE001 - do no harm
                c.logger.debug("fma-otel: registering a vLLM start-up watch failed", exc_info=True)

    def _start_wrapper(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        global _PENDING_CHILD_ENV
        st = _REQUEST.get()
        plan: Any
        if st is not None and st.is_create and self._on and c.active():
            plan = self._order_startup(instance, st)
        elif not self.recording():
            _PENDING_CHILD_ENV = None  # never an earlier create's, not yet cleared
            return wrapped(*args, **kwargs)
        else:
            plan = self._plan_startup(instance)
        _PENDING_CHILD_ENV = plan.child_env if plan is not None else None
        if plan is None:
            return wrapped(*args, **kwargs)
        if plan.__class__ is _StartupOrder and st.after is not None:
            # Inside the create request: after the fork only the return, the rest waits
            # for the response (``_after_response``), which also clears the child's env.
            # Our objects are let go before the fork: a page the return would touch (a
            # reference count) is a page copied while the child shares it.
            st.after.append((instance, plan.watch, plan.child_env))
            self._watches[instance] = plan.watch  # so a ``stop`` before then ends it
            del st, plan
            try:
                return wrapped(*args, **kwargs)
            except BaseException as exc:
                _fork_failed(self._watches.get(instance), instance, exc)
                raise
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as exc:
            _fork_failed(plan.watch, instance, exc)
            raise
        finally:
            _PENDING_CHILD_ENV = None
        try:
            self._watches[instance] = self._watch(instance, plan.watch, plan.child_env)
        except Exception:  # noqa: BLE001 - do no harm
            c.logger.debug("fma-otel: watching the vLLM start-up failed", exc_info=True)
        return result

    def _watch(self, instance: Any, watch: StartupWatch, child_env: Any) -> StartupWatch:
        """Start polling the forked instance (and following its log) for its startup span."""
        watch.process = proc = getattr(instance, "process", None)
        watch.pid = getattr(proc, "pid", None)
        vllm_phases.follow(watch, instance, self.tracer, _child_traced(child_env))
        return watch.start()

    def _startup_ordinal(self, st: _RequestState) -> int:
        """The ``n`` of a create's next ``fma.vllm.startup``: counted per trace, or by the
        request itself in a trace of its own (random trace id, only this request's)."""
        if st.trace_hex:
            return self.ordinals.next(st.trace_hex, STARTUP_SPAN)
        st.startups += 1
        return st.startups - 1

    def _order_startup(self, instance: Any, st: _RequestState) -> Any:
        """``fma.vllm.startup`` inside a create request: fix its start instant and ordinal
        here; everything else - hashing its ids, its parent, its attributes - is done by
        the poller thread that opens it, and its ``traceparent`` by the forked child.

        Only the ordinal must be taken in order on the request path (the ``n`` of the id
        rule counts spans as they start).  With a sampler that does
        not follow the parent, or no valid create span to hang from, the general path
        (``_plan_startup``) decides, as for a ``start`` outside a create request.
        """
        try:
            tracer = self.tracer()
            if st.join == JOIN_PENDING and _parent_based(tracer):
                return _StartupOrder(self, tracer, instance, st, -1, time.time_ns())
            if not _parent_based(tracer) or not (st.trace_hex or st.span.get_span_context().is_valid):
                return self._plan_startup(instance)
            t0 = time.time_ns()
            return _StartupOrder(self, tracer, instance, st, self._startup_ordinal(st), t0)
        except Exception:  # noqa: BLE001 - do no harm
            c.logger.debug("fma-otel: planning fma.vllm.startup failed", exc_info=True)
            return None

    @c.swallow()
    def _plan_startup(self, instance: Any) -> _StartupPlan | None:
        """Open ``fma.vllm.startup`` now: the general path (``POST`` creates, a ``start``
        outside a request, a sampler that does not follow the parent).

        Inside a traced request whose sampler follows the parent (the SDK default) the span
        id is the *derived* one, under the model's parent (or, in a trace of its own, under
        the request's span); otherwise the span is a child of the current context with a
        random id (no trace to derive from, or a sampler the child's flags cannot be told).
        """
        cfg = getattr(instance, "config", None)
        t0 = time.time_ns()
        cur_span = trace.get_current_span()
        cur = cur_span.get_span_context()
        tracer = self.tracer()
        ctx: Any = None
        span_id: str | None = None
        if cur.is_valid and _parent_based(tracer):
            trace_hex = format(cur.trace_id, "032x")
            span_id = model.span_id_for(trace_hex, STARTUP_SPAN, self.ordinals.next(trace_hex, STARTUP_SPAN))
            st = _REQUEST.get()
            if st is not None and st.is_create and st.span is cur_span:
                join = st.join  # its attributes may be set only after the response
            else:
                join = (getattr(cur_span, "attributes", None) or {}).get(A_JOIN, JOIN_TRACEPARENT)
            ctx = _startup_parent(trace_hex, join, cur_span)
        span, port = self._open_startup(
            tracer, cfg, str(getattr(instance, "instance_id", "")), ctx, span_id, t0
        )
        if span is None:
            return None
        sc = span.get_span_context()
        env = (
            _child_env_for(f"{sc.trace_id:032x}", f"{sc.span_id:016x}", int(sc.trace_flags))
            if sc.is_valid
            else None
        )
        return _StartupPlan(StartupWatch(span, None, port), env)

    @c.swallow(default=(None, None))
    def _open_startup(
        self, tracer: trace.Tracer, cfg: Any, iid: str, ctx: Any, span_id: str | None, t0: int
    ) -> tuple[trace.Span | None, int | None]:
        """Open ``fma.vllm.startup`` with its attributes: ``(span, the instance's port)``."""
        options, annotations = _port_sources(cfg)
        attrs: dict[str, Any] = {
            model.A_INSTANCE: iid,
            model.A_START_SRC: "wrapper:fork",
            model.A_END_SRC: "wrapper:GET /health",
            A_LAG_HINT: LAG_RULE,
        }
        port = instance_port(options, annotations)
        if port is not None:
            attrs[A_PORT] = port
        config = None
        redacted_options = None
        dump = getattr(cfg, "model_dump", None)
        if callable(dump):
            raw = dump(exclude_none=True)
            redacted, _ = redact.redact_config(raw)
            config = json.dumps(redacted, separators=(",", ":"))
            if isinstance(raw, dict) and isinstance(options, str) and raw.get("options") == options:
                redacted_options = redacted.get("options")  # these very options, redacted
        if isinstance(options, str):
            if not isinstance(redacted_options, str):
                redacted_options = redact.redact_options(options)[0]
            attrs[A_OPTIONS] = redacted_options
        if config is not None:
            attrs[A_CONFIG] = config
        if annotations and annotations.get("isc-name"):
            attrs[model.A_ISC] = redact.redact_url(str(annotations["isc-name"]))
        span = c.start_span(
            tracer, STARTUP_SPAN, context=ctx, attributes=attrs, span_id=span_id, start_time=t0
        )
        return span, port

    def _stop_wrapper(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        try:
            watch = self._watches.pop(instance, None)
            if watch is not None:
                watch.stop()
        except Exception:  # noqa: BLE001
            pass
        return wrapped(*args, **kwargs)


def _fork_failed(watch: StartupWatch | None, instance: Any, exc: BaseException) -> None:
    if watch is not None:
        watch.fork_failed(exc, _config_secrets(getattr(instance, "config", None)))


@c.swallow()
def _note_instance_id(span: Any, result: Any, known: str | None = None) -> None:
    """Record the id the manager chose (``POST`` has none in its path), unless it is the
    one ``known`` already (the ``PUT`` path's; by default, the span's)."""
    if known is None:
        known = (getattr(span, "attributes", None) or {}).get(model.A_INSTANCE)
    iid = result.get("instance_id") if isinstance(result, dict) else None
    if iid and str(iid) != known and span.is_recording():
        span.set_attribute(model.A_INSTANCE, str(iid))


class _StartupPlan(NamedTuple):
    """The startup watch and what the child must inherit."""

    watch: StartupWatch
    child_env: dict[str, str] | None


class _StartupOrder:
    """``fma.vllm.startup`` as a create request ordered it (see ``_order_startup``).

    Plays the ``_StartupPlan`` part: ``watch`` (opened by the poller through ``open``) and
    ``child_env`` (itself: the forked child asks ``child_env_now`` in ``vllm_kickoff``).
    The ids are computed where they are needed, from the same inputs, so they agree: the
    child's ``TRACEPARENT`` names exactly the span the poller opens.
    """

    __slots__ = ("owner", "tracer", "cfg", "iid", "state", "n", "t0", "watch", "_ids")

    def __init__(
        self, owner: LauncherWrappers, tracer: Any, instance: Any, st: _RequestState, n: int, t0: int
    ) -> None:
        self.owner = owner
        self.tracer = tracer
        self.cfg = getattr(instance, "config", None)
        self.iid = getattr(instance, "instance_id", "")
        self.state = st
        self.n = n
        self.t0 = t0
        self._ids: tuple[str, str] | None = None
        self.watch = StartupWatch(None, None, None, source=self)

    @property
    def child_env(self) -> _StartupOrder:
        return self

    def ids(self) -> tuple[str, str]:
        """(trace id, span id) of the startup span, as hex.  For a deferred create, only
        once its span is resolved (the poller opens it once ``ready``)."""
        ids = self._ids
        if ids is None and self.n < 0:
            if self.state.join in (JOIN_PENDING, JOIN_FAILED):
                raise RuntimeError("create span not resolved")
            self.n = self.owner._startup_ordinal(self.state)
        if ids is None:
            trace_hex = self.state.trace_hex or format(self.state.span.get_span_context().trace_id, "032x")
            ids = self._ids = (trace_hex, model.span_id_for(trace_hex, STARTUP_SPAN, self.n))
        return ids

    def port(self) -> int | None:
        """The instance's port (asked by the poller before the span can be opened)."""
        return instance_port(*_port_sources(self.cfg))

    def ready(self) -> bool:
        """Can ``open`` run without waiting (the create span is no longer pending)?"""
        return self.state.join != JOIN_PENDING

    def child_env_now(self) -> dict[str, str] | None:
        st = self.state
        if st.join == JOIN_PENDING:
            return None  # the trace is decided after the response, in the parent
        trace_hex, span_id = self.ids()
        flags = (
            int(TraceFlags.SAMPLED) if st.join != JOIN_NONE else int(st.span.get_span_context().trace_flags)
        )
        return _child_env_for(trace_hex, span_id, flags)

    def open(self) -> tuple[trace.Span | None, int | None]:
        """Open the span (on the poller thread, or on ``stop`` if that comes first)."""
        trace_hex, span_id = self.ids()
        ctx = _startup_parent(trace_hex, self.state.join, self.state.span)
        return self.owner._open_startup(self.tracer, self.cfg, str(self.iid), ctx, span_id, self.t0)


def _child_traced(child_env: Any) -> bool:
    """Did the forked child get a ``TRACEPARENT``?  (A create served before its trace was
    known forks its child without one: vLLM's own spans could not join then.)"""
    if isinstance(child_env, _StartupOrder):
        return child_env.state.join != JOIN_PENDING  # as the child saw it at the fork
    return isinstance(child_env, dict) and "TRACEPARENT" in child_env


def _startup_parent(trace_hex: str, join: str, create_span: Any) -> Any:
    """The parent context of ``fma.vllm.startup``: the model's derived parent in a joined
    trace; in a trace of its own, the create span itself."""
    if join != JOIN_NONE:
        return c.remote_context(trace_hex, model.span_id_for(trace_hex, STARTUP_PARENT, 0))
    return trace.set_span_in_context(create_span, _ROOT)


def _port_sources(cfg: Any) -> tuple[Any, Any]:
    return getattr(cfg, "options", None), getattr(cfg, "annotations", None)


def _parent_based(tracer: Any) -> bool:
    """Does the sampler follow the parent's flag (so the child's ``traceparent`` is known)?"""
    sampler = getattr(tracer, "sampler", None)
    return isinstance(sampler, ParentBased) or sampler is ALWAYS_ON


def _child_env_for(trace_hex: str, span_id: str, flags: int) -> dict[str, str]:
    """The trace context as environment variables: what the global propagator injects,
    keys upper-cased (the OpenTelemetry environment-carrier convention, ``TRACEPARENT``)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=c.remote_context(trace_hex, span_id, flags))
    env = {k.upper(): v for k, v in carrier.items()}
    if (os.environ.get("OTEL_SERVICE_NAME") or model.SERVICE_LAUNCHER) == model.SERVICE_LAUNCHER:
        env["OTEL_SERVICE_NAME"] = "vllm"  # the launcher's default name is not the child's
    return env


def _kickoff_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    """Runs in the forked child: put the trace context into its environment, then hand over.

    The parent's tracer provider is inherited but stays idle (our wrappers are silent in
    a child; the SDK's at-fork hook empties the batch queue; multiprocessing leaves with
    ``os._exit`` so no atexit flush uses the inherited exporter).
    """
    try:
        env = _PENDING_CHILD_ENV
        if isinstance(env, _StartupOrder):
            env = env.child_env_now()  # computed here, in the child: off the create request
        if env:
            os.environ.update(env)
    except Exception:  # noqa: BLE001
        pass
    return wrapped(*args, **kwargs)


def _has_contrib_asgi(stack: Any) -> bool:
    seen: set[int] = set()
    while stack is not None and id(stack) not in seen:
        seen.add(id(stack))
        if type(stack).__name__ == "OpenTelemetryMiddleware":
            return True
        stack = getattr(stack, "app", None)
    return False


#: What ``get_excluded_urls("FMA_LAUNCHER")`` reads first (then ``OTEL_PYTHON_EXCLUDED_URLS``).
_EXCLUDED_ENV = "OTEL_PYTHON_FMA_LAUNCHER_EXCLUDED_URLS"


def _excluded_urls() -> Any:
    """The ``OTEL_PYTHON_FMA_LAUNCHER_EXCLUDED_URLS`` list, or ``None`` when neither
    variable is set (the common case: one truth test per request).

    ``opentelemetry.util.http`` (and the semantic-convention tables it loads) is imported
    only when one of the two variables it reads is set: unset, the list is empty anyway,
    and the module would only be memory each ``fork()`` of a vLLM instance copies the
    page tables of."""
    if not (os.environ.get(_EXCLUDED_ENV) or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")):
        return None
    try:
        from opentelemetry.util.http import get_excluded_urls

        return get_excluded_urls("FMA_LAUNCHER")
    except Exception:  # noqa: BLE001
        return None


#: ``LauncherInstrumentor`` (the entry point's name) is defined with the other ``BaseInstrumentor`` classes.
__getattr__ = c.lazy_attribute(__name__, "LauncherInstrumentor")
