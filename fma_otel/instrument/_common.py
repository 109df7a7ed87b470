"""Shared machinery of the in-process wrappers: tracers, forced span ids, do-no-harm guards.

Why this exists: every wrapper must (1) never let a tracing failure reach the host,
(2) give some spans the *derived* span id of the span model (so that the live span and
the bridge's span are the same span), and (3) stay silent when the SDK is disabled, when
instrumentation is suppressed, or in a forked vLLM child.  Doing that once here keeps the
wrappers short and makes the guarantees testable in one place.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.instrumentation import utils as _inst_utils
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from fma_otel import __version__

logger = logging.getLogger("fma_otel.instrument")

SCOPE = "fma_otel.instrument"
#: The contextvar through which a wrapper tells the id generator which span id to use.
_FORCED_SPAN_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "fma_forced_span_id", default=None
)

#: pid of the process that instrumented; a forked child has another pid and goes silent.
_OWNER_PID = os.getpid()
#: Set in a child right after ``fork`` (an at-fork hook), cleared by ``set_owner_pid``: the
#: per-call fork test without a ``getpid`` system call.
_FORKED = False

#: The two context keys ``suppress_instrumentation`` sets (read on every hot path).
_SUPPRESS_KEYS = tuple(
    k
    for k in (
        getattr(_inst_utils, "_SUPPRESS_INSTRUMENTATION_KEY", None),
        getattr(_inst_utils, "_SUPPRESS_INSTRUMENTATION_KEY_PLAIN", None),
    )
    if k is not None
)

F = TypeVar("F", bound=Callable[..., Any])


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true`` turns every wrapper into a pass-through (the spec's switch)."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def set_owner_pid() -> None:
    """Remember which process instrumented, so that a forked child never records spans."""
    global _OWNER_PID, _FORKED
    _OWNER_PID = os.getpid()
    _FORKED = False


def _after_fork_in_child() -> None:
    global _FORKED
    _FORKED = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def in_forked_child() -> bool:
    return _FORKED or os.getpid() != _OWNER_PID


#: ... and the key ``suppress_http_instrumentation`` adds.
_SUPPRESS_HTTP_KEY = getattr(_inst_utils, "_SUPPRESS_HTTP_INSTRUMENTATION_KEY", None)
_SUPPRESS_HTTP_KEYS = _SUPPRESS_KEYS + ((_SUPPRESS_HTTP_KEY,) if _SUPPRESS_HTTP_KEY is not None else ())


def active_http() -> bool:
    """``active()`` for an HTTP client wrapper: also off under ``suppress_http_instrumentation``."""
    if _FORKED:
        return False
    if len(_SUPPRESS_HTTP_KEYS) == 3:
        return _none_set(_SUPPRESS_HTTP_KEYS)
    return _inst_utils.is_http_instrumentation_enabled()


def active_http_context() -> otel_context.Context | None:
    """The current context when ``active_http()``, else ``None``: the one context read an
    HTTP client wrapper needs (test it with ``is None``: an empty context is falsy)."""
    if _FORKED:
        return None
    ctx = otel_context.get_current()
    if len(_SUPPRESS_HTTP_KEYS) == 3:
        for key in _SUPPRESS_HTTP_KEYS:
            if ctx.get(key):
                return None
        return ctx
    return ctx if _inst_utils.is_http_instrumentation_enabled() else None


def _none_set(keys: tuple[Any, ...]) -> bool:
    """Whether none of the suppression ``keys`` is set in the current context (one read)."""
    ctx = otel_context.get_current()
    for key in keys:
        if ctx.get(key):
            return False
    return True


#: ``set_value(_SUPPRESS_HTTP_KEY, True, <an empty context>)``, made once (contexts are
#: immutable: ``set_value`` copies).
_SUPPRESSED_HTTP_ALONE = (
    otel_context.set_value(_SUPPRESS_HTTP_KEY, True, otel_context.Context()) if _SUPPRESS_HTTP_KEY else None
)


def suppress_http(ctx: otel_context.Context | None = None) -> object | None:
    """Attach a context with HTTP instrumentation suppressed; ``detach_safe`` the token.

    What ``suppress_http_instrumentation()`` does, without a generator-based context
    manager (two of them, nested) on every call.  ``ctx``: the current context when the
    caller has just read it (saves a read)."""
    if _SUPPRESS_HTTP_KEY is None:  # pragma: no cover - an API without the key: nothing to set
        return None
    try:
        if ctx is not None and not ctx:  # the empty context plus the key: always the same one
            return otel_context.attach(_SUPPRESSED_HTTP_ALONE)
        return otel_context.attach(otel_context.set_value(_SUPPRESS_HTTP_KEY, True, ctx))
    except Exception:  # noqa: BLE001
        return None


_TC_CACHE: tuple[Any, Any] | None = None


def default_tracecontext(textmap: Any) -> Any:
    """The SDK's default propagator (``OTEL_PROPAGATORS=tracecontext,baggage``) -> its
    trace-context part; anything else -> ``None`` (then the whole propagator must run)."""
    try:
        from opentelemetry.baggage.propagation import W3CBaggagePropagator
        from opentelemetry.propagators.composite import CompositePropagator
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        if type(textmap) is not CompositePropagator:
            return None
        parts = list(getattr(textmap, "_propagators", ()))
        if [type(p) for p in parts] != [TraceContextTextMapPropagator, W3CBaggagePropagator]:
            return None
        return parts[0]
    except Exception:  # noqa: BLE001
        return None


def global_tracecontext() -> Any:
    """``default_tracecontext`` of the global propagator, re-decided only when it is replaced."""
    global _TC_CACHE
    textmap = propagate.get_global_textmap()
    cached = _TC_CACHE
    if cached is None or cached[0] is not textmap:
        cached = _TC_CACHE = (textmap, default_tracecontext(textmap))
    return cached[1]


#: ``f"{i:02x}"`` for every value of the trace-flags byte.
_HEX2 = tuple(f"{i:02x}" for i in range(256))


def _traceparent(sc: SpanContext) -> str | None:
    """The ``traceparent`` that the W3C trace-context propagator writes for ``sc``; ``None``
    when a field is out of its range (then only the propagator knows what it writes).

    ``int.to_bytes(...).hex()`` is several times faster than a ``032x`` format."""
    flags = sc.trace_flags
    if not 0 <= flags < 256:
        return None
    try:
        trace_hex = sc.trace_id.to_bytes(16, "big").hex()
        span_hex = sc.span_id.to_bytes(8, "big").hex()
    except OverflowError:  # negative, or wider than the field
        return None
    return f"00-{trace_hex}-{span_hex}-{_HEX2[flags]}"


def trace_headers(span: trace.Span, ctx: otel_context.Context | None = None) -> tuple[str, str | None] | None:
    """What ``propagate.inject(carrier, context=<current context with span>)`` writes, when
    that is known without the propagator: the default propagator and a context without
    baggage.  ``(traceparent, tracestate or None)``; ``("", None)`` when it writes nothing
    (an invalid span); ``None`` when only the propagator knows (``inject_span`` then runs it).

    ``ctx``: the current context when the caller has just read it (saves a read; an empty
    one has no baggage without asking)."""
    if global_tracecontext() is None or ((ctx is None or ctx) and baggage.get_all(ctx)):
        return None
    sc = span.get_span_context()
    if sc == trace.INVALID_SPAN_CONTEXT:
        return _NOTHING
    traceparent = _traceparent(sc)
    if traceparent is None:
        return None
    state = sc.trace_state
    return traceparent, state.to_header() if state else None


_NOTHING: tuple[str, str | None] = ("", None)


def inject_span(
    headers: Any,
    span: trace.Span,
    ctx: otel_context.Context | None = None,
    set_traceparent: Callable[[Any, str], None] | None = None,
) -> None:
    """``propagate.inject(headers, context=<current context with span>)``, done directly for
    the default propagator when the context carries no baggage (``trace_headers``): the
    same headers (``traceparent``, and ``tracestate`` when the span has one), without the
    composite's loop, the span lookup in a new context and the baggage part's no-op.
    ``set_traceparent(headers, value)``: a cheaper ``headers["traceparent"] = value`` for
    the caller's kind of headers."""
    found = trace_headers(span, ctx)
    if found is None:
        inject_general(headers, span)
        return
    traceparent, state = found
    if traceparent:
        if set_traceparent is None:
            headers["traceparent"] = traceparent
        else:
            set_traceparent(headers, traceparent)
        if state is not None:
            headers["tracestate"] = state


def inject_general(headers: Any, span: trace.Span) -> None:
    """The propagator's own injection, for what ``trace_headers`` does not know."""
    propagate.inject(headers, context=trace.set_span_in_context(span))


def active() -> bool:
    """Whether a wrapper should record anything now (cheap; called on every hot path).

    The same test as ``is_instrumentation_enabled()`` (neither suppression key set in the
    current context) with one context read instead of two, and the fork test by flag.
    """
    if _FORKED:
        return False
    if _SUPPRESS_KEYS:
        return _none_set(_SUPPRESS_KEYS)
    return _inst_utils.is_instrumentation_enabled()


def swallow(default: Any = None) -> Callable[[F], F]:
    """Decorator: a failure inside tracing code is logged at debug level and swallowed.

    The host (launcher, controller tool) must behave exactly as uninstrumented even if the
    tracer, the exporter or our own code breaks.
    """

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception:  # noqa: BLE001 - do no harm
                logger.debug("fma-otel: tracing failure in %s (ignored)", fn.__qualname__, exc_info=True)
                return default

        return inner  # type: ignore[return-value]

    return deco


# --------------------------------------------------------------------------- ids


class ForcingIdGenerator:
    """Id generator that returns a forced span id when a wrapper asked for one.

    The SDK keeps ``SpanContext`` immutable and has no "span id" argument (upstream's
    suggested workaround is an id generator consulting a contextvar); everything else is
    delegated, so spans of other instrumentations keep their random ids.
    """

    def __init__(self, delegate: Any) -> None:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        self.delegate = delegate
        # Called for every root span: the delegate's own methods, without a frame of ours.
        self.generate_trace_id = delegate.generate_trace_id
        if type(delegate) is RandomIdGenerator:  # its is_trace_id_random() is always True
            self.is_trace_id_random = delegate.is_trace_id_random

    def generate_span_id(self) -> int:
        forced = _FORCED_SPAN_ID.get()
        if forced is not None:
            _FORCED_SPAN_ID.set(None)
            return forced
        return self.delegate.generate_span_id()

    def generate_trace_id(self) -> int:
        return self.delegate.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        fn = getattr(self.delegate, "is_trace_id_random", None)
        return bool(fn()) if fn else False


def begin(instrumentor: Any, kwargs: dict[str, Any]) -> bool:
    """The shared start of every ``_instrument``: off under ``OTEL_SDK_DISABLED``; else
    remember the owning process (fork guard) and the tracer source.  ``True`` to go on."""
    instrumentor._on = not sdk_disabled()
    if not instrumentor._on:
        return False
    set_owner_pid()
    instrumentor._tracers = TracerSource(kwargs.get("tracer_provider"))
    return True


def wrap_when_imported(instrumentor: Any, module: str, targets: dict[str, Any]) -> None:
    """Wrap ``module``'s ``targets`` (``"Class.method": wrapper``) now if it is imported,
    else when the host imports it (a ``wrapt`` post-import hook).

    Why: importing the ``kubernetes`` client (~20 MB) and ``httpx`` (~16 MB) only to wrap
    them grew a launcher that uses neither by that much, and ``fork()`` of each vLLM
    instance costs more the bigger the process is (page tables): +3 to +6 ms a create.
    The hook wraps nothing once the instrumentor is off (``uninstrument``), and never twice.
    """
    import wrapt

    def hook(mod: Any) -> None:
        if not getattr(instrumentor, "_on", False):
            return
        for target, wrapper in targets.items():
            cls_name, attr = target.split(".")
            if not isinstance(vars(getattr(mod, cls_name)).get(attr), wrapt.FunctionWrapper):
                wrapt.wrap_function_wrapper(mod, target, wrapper)

    wrapt.register_post_import_hook(hook, module)


class TracerSource:
    """Lazily resolves our tracer for the current (or an explicit) provider.

    Resolved at use time rather than at instrument time because the SDK may be configured
    after ``instrument()`` (``import fma_otel.auto`` before ``opentelemetry-instrument``'s
    configurator, tests that swap providers).
    """

    def __init__(self, provider: Any = None) -> None:
        self.provider = provider
        self._cache: tuple[Any, Any] | None = None

    def get(self) -> trace.Tracer:
        prov = self.provider if self.provider is not None else trace.get_tracer_provider()
        cached = self._cache
        if cached is not None and cached[0] is prov:
            return cached[1]
        tracer = prov.get_tracer(SCOPE, __version__)
        gen = getattr(tracer, "id_generator", None)
        if gen is not None and not isinstance(gen, ForcingIdGenerator):
            tracer.id_generator = ForcingIdGenerator(gen)
        if not isinstance(prov, trace.ProxyTracerProvider):
            self._cache = (prov, tracer)
        return tracer


def start_span(
    tracer: trace.Tracer,
    name: str,
    *,
    context: otel_context.Context | None = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    attributes: dict[str, Any] | None = None,
    start_time: int | None = None,
    span_id: str | None = None,
) -> trace.Span:
    """Start a span, with the given hex ``span_id`` when the tracer can honour it."""
    token = _FORCED_SPAN_ID.set(int(span_id, 16)) if span_id else None
    try:
        return tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_time
        )
    finally:
        if token is not None:
            _FORCED_SPAN_ID.reset(token)


def remote_context(trace_id: str, span_id: str) -> otel_context.Context:
    """A context whose parent is the (possibly never emitted here) span ``span_id``."""
    sc = SpanContext(
        trace_id=int(trace_id, 16),
        span_id=int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(sc), otel_context.Context())


def hex_ids(span: trace.Span) -> tuple[str, str]:
    sc = span.get_span_context()
    return format(sc.trace_id, "032x"), format(sc.span_id, "016x")


def traceparent_of(span: trace.Span) -> str | None:
    sc = span.get_span_context()
    if not sc.is_valid:
        return None
    return f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"


class OrdinalCounter:
    """Counts spans of one name per trace (the ``n`` of the span-id rule), bounded in memory."""

    def __init__(self, max_traces: int = 4096) -> None:
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._max = max_traces

    def next(self, trace_id: str, name: str) -> int:
        key = (trace_id, name)
        n = self._seen.pop(key, -1) + 1
        self._seen[key] = n
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
        return n


@contextmanager
def attached(ctx: otel_context.Context | None) -> Iterator[None]:
    """Attach ``ctx`` for a block, tolerating a failed detach (never raises into the host)."""
    token = otel_context.attach(ctx) if ctx is not None else None
    try:
        yield
    finally:
        if token is not None:
            try:
                otel_context.detach(token)
            except Exception:  # noqa: BLE001
                pass


def env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, "") or default)
    except ValueError:
        return default


def attach_safe(ctx: otel_context.Context | None) -> object | None:
    try:
        return otel_context.attach(ctx) if ctx is not None else None
    except Exception:  # noqa: BLE001
        return None


def detach_safe(token: object | None) -> None:
    if token is None:
        return
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001
        pass
