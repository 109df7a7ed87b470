"""Shared machinery of the in-process wrappers: tracers, forced span ids, do-no-harm guards.

Why this exists: every wrapper must (1) never let a tracing failure reach the host,
(2) give some spans the *derived* span id of the span model (so that the live span and
the bridge's span are the same span), and (3) stay silent when the SDK is disabled, when
instrumentation is suppressed, or in a forked vLLM child.  Doing that once here keeps the
wrappers short and makes the guarantees testable in one place.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import re
import sys
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, TypeVar

import wrapt
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.instrumentation.utils import (
    is_http_instrumentation_enabled,
    is_instrumentation_enabled,
    unwrap,
)
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from fma_otel import __version__
from fma_otel.instrument import redact
from fma_otel.instrument.ids import FORCED_SPAN_ID, FORCED_TRACE_ID, DerivedIdGenerator

logger = logging.getLogger("fma_otel.instrument")

SCOPE = "fma_otel.instrument"

#: Set in a child right after ``fork`` (an at-fork hook), cleared by ``set_owner_pid``: a
#: forked child (a vLLM instance) goes silent unless it instruments itself.
_FORKED = False

F = TypeVar("F", bound=Callable[..., Any])


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED=true`` turns every wrapper into a pass-through (the spec's switch)."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def set_owner_pid() -> None:
    """This process instruments: it records spans; a child it forks does not."""
    global _FORKED
    _FORKED = False


def _after_fork_in_child() -> None:
    global _FORKED
    _FORKED = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def active_http_context() -> otel_context.Context | None:
    """The current context when an HTTP client wrapper should record, else ``None`` (test
    it with ``is None``: an empty context is falsy).  Off in a forked child and under
    ``suppress_instrumentation`` or ``suppress_http_instrumentation``."""
    if _FORKED or not is_instrumentation_enabled() or not is_http_instrumentation_enabled():
        return None
    return otel_context.get_current()


def inject_span(headers: Any, span: trace.Span, ctx: otel_context.Context | None = None) -> None:
    """``propagate.inject`` of ``span`` into ``headers``, keeping the baggage of ``ctx``
    (the current context when ``None``): the global propagator decides what is written."""
    propagate.inject(headers, context=trace.set_span_in_context(span, ctx))


def active() -> bool:
    """Whether a wrapper should record anything now (cheap; called on every hot path).

    ``is_instrumentation_enabled()`` (no ``suppress_instrumentation`` in the current
    context), and never in a forked child (the fork test is a flag set by an at-fork hook).
    """
    return not _FORKED and is_instrumentation_enabled()


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


class Wrappers(ABC):
    """One instrumentation's wrappers and their state, one object per process: what its
    ``BaseInstrumentor`` (``fma_otel.instrument.base_instrumentors``) installs and removes.

    Why not the ``BaseInstrumentor`` itself: importing it brings in ``packaging`` and the
    semantic-convention modules, about 1 MiB more of the launcher for every ``fork()`` of a
    vLLM instance to copy the page tables of; ``import fma_otel.auto`` installs these
    directly (``instrument_all``).  ``installed`` is the one on/off state both ways share,
    so neither installs twice nor misses the other's wrappers on removal.
    """

    _instance: Wrappers | None = None
    installed = False
    #: Recording (installed, and not under ``OTEL_SDK_DISABLED``): read by every wrapper.
    _on = False

    def __new__(cls) -> Any:
        if cls.__dict__.get("_instance") is None:
            cls._instance = object.__new__(cls)
        return cls._instance

    @abstractmethod
    def instrumentation_dependencies(self) -> Collection[str]:
        """Requirements on the wrapped library, each a ``name >= X.Y`` (``dependency_met``)."""

    def install(self, **kwargs: Any) -> None:
        """Install the wrappers, once (again only after ``uninstall``); under
        ``OTEL_SDK_DISABLED`` nothing is wrapped.  This process is the one that records
        (fork guard); the tracer is resolved at use (``TracerSource``)."""
        if self.installed:
            return
        self.installed = True
        self._wrapped: list[tuple[Any, str]] = []
        self._on = not sdk_disabled()
        if self._on:
            set_owner_pid()
            self._tracers = TracerSource(kwargs.get("tracer_provider"))
            self._install(**kwargs)

    def uninstall(self) -> None:
        """Restore every original (and stop what the wrappers started)."""
        if self.installed:
            self._on = False
            for owner, attr in reversed(self._wrapped):
                unwrap(owner, attr)
            self._wrapped = []
            self._uninstall()
            self.installed = False

    def wrap(self, owner: Any, attr: str, wrapper: Callable[..., Any]) -> None:
        """Wrap ``owner.attr`` (a class or module) with ``wrapt``, unless it already is;
        ``uninstall`` unwraps it."""
        if not isinstance(vars(owner).get(attr), wrapt.FunctionWrapper):
            wrapt.wrap_function_wrapper(owner, attr, wrapper)
            self._wrapped.append((owner, attr))

    @abstractmethod
    def _install(self, **kwargs: Any) -> None:
        """Put the wrappers in place (called once per ``install``, when recording)."""

    def _uninstall(self) -> None:  # noqa: B027 - only the launcher starts anything
        """Stop what the wrappers started, beyond unwrapping (called once per ``uninstall``)."""


def lazy_attribute(module: str, name: str, source: str = "fma_otel.instrument.base_instrumentors") -> Any:
    """A module ``__getattr__`` that answers ``name`` (an entry point's class) from module
    ``source`` when first asked: the instrumentor and distro classes import
    ``BaseInstrumentor``, kept out of a launcher that does not ask for them (see
    ``base_instrumentors`` for why)."""

    def __getattr__(attr: str) -> Any:
        if attr == name:
            return getattr(importlib.import_module(source), name)
        raise AttributeError(f"module {module!r} has no attribute {attr!r}")

    return __getattr__


#: ``name >= X.Y``: the one form of requirement the wrappers state (a test holds them to it).
_AT_LEAST = re.compile(r"^\s*([A-Za-z0-9_.-]+)\s*>=\s*(\d+(?:\.\d+)*)\s*$")
#: The release at the start of a ``__version__`` (``1.0.0rc1`` -> ``1.0.0``).
_RELEASE = re.compile(r"\d+(?:\.\d+)*")


def _release(text: str) -> tuple[int, ...]:
    """A release as a tuple without trailing zeros (``1.0`` -> ``(1,)``), so that tuple
    order is PEP 440's ``>=`` between releases (the shorter padded with zeros)."""
    parts = [int(part) for part in text.split(".")]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def dependency_met(instrumentor: Any, name: str) -> bool:
    """Does the imported module ``name`` meet the instrumentor's requirement on it
    (``instrumentation_dependencies()``), going by its ``__version__``?

    Why not the installed packages' metadata, as ``BaseInstrumentor`` checks by default:
    reading it caches the whole site-packages listing in the process (~0.4 MB in the
    launcher, for every fork to copy); nor ``packaging``, about 0.6 MiB more.  The
    requirements are our own, each a ``name >= X.Y``, so the release at the start of the
    version is compared with ``X.Y`` (a pre-release or local suffix counts as its release).
    A module without a ``__version__`` that starts with a release passes.
    """
    version = getattr(sys.modules.get(name), "__version__", None)
    release = _RELEASE.match(version) if isinstance(version, str) else None
    if release is None:
        return True
    for spec in instrumentor.instrumentation_dependencies():
        plain = _AT_LEAST.match(spec)
        if plain is None:
            raise ValueError(f"not a 'name >= X.Y' requirement: {spec!r}")
        if plain.group(1) == name and _release(release.group()) < _release(plain.group(2)):
            logger.warning("fma-otel: %s %s does not meet %s: not instrumented", name, version, spec)
            return False
    return True


def wrap_when_imported(instrumentor: Wrappers, module: str, targets: dict[str, Any]) -> None:
    """Wrap ``module``'s ``targets`` (``"Class.method": wrapper``) now if it is imported,
    else when the host imports it (a ``wrapt`` post-import hook).

    Why: importing the ``kubernetes`` client and ``httpx`` only to wrap them grows a
    launcher that uses neither by tens of MB, and ``fork()`` of each vLLM instance costs
    more the bigger the process is (page tables).
    The hook wraps nothing once the instrumentor is off (``uninstrument``), and never twice.
    """

    def hook(mod: Any) -> None:
        if not instrumentor._on or not dependency_met(instrumentor, module.split(".")[0]):
            return
        for target, wrapper in targets.items():
            cls_name, attr = target.split(".")
            instrumentor.wrap(getattr(mod, cls_name), attr, wrapper)

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
        if not isinstance(prov, trace.ProxyTracerProvider):
            self._cache = (prov, tracer)
            _check_id_generator(prov)
        return tracer


_WARNED: set[int] = set()


def _check_id_generator(provider: Any) -> None:
    """Warn once per provider built without ``DerivedIdGenerator``: its spans keep random
    ids, so the live spans do not coincide with the bridge's (nothing else breaks)."""
    gen = getattr(provider, "id_generator", None)
    if gen is None or isinstance(gen, DerivedIdGenerator) or id(provider) in _WARNED:
        return
    _WARNED.add(id(provider))
    logger.warning(
        "fma-otel: the TracerProvider was built without fma_otel's DerivedIdGenerator "
        "(OTEL_PYTHON_ID_GENERATOR=fma_derived): live spans get random, not derived, span ids"
    )


def start_span(
    tracer: trace.Tracer,
    name: str,
    *,
    context: otel_context.Context | None = None,
    kind: trace.SpanKind = trace.SpanKind.INTERNAL,
    attributes: dict[str, Any] | None = None,
    start_time: int | None = None,
    span_id: str | None = None,
    trace_id: int | None = None,
) -> trace.Span:
    """Start a span, with the given hex ``span_id`` when the tracer can honour it, and (a
    root span) the given ``trace_id``."""
    token = FORCED_SPAN_ID.set(int(span_id, 16)) if span_id else None
    ttoken = FORCED_TRACE_ID.set(trace_id) if trace_id else None
    try:
        return tracer.start_span(
            name, context=context, kind=kind, attributes=attributes, start_time=start_time
        )
    finally:
        if ttoken is not None:
            FORCED_TRACE_ID.reset(ttoken)
        if token is not None:
            FORCED_SPAN_ID.reset(token)


@swallow()
def end_span(
    span: trace.Span,
    status: int | None = None,
    exc: BaseException | None = None,
    secrets: Iterable[str] = (),
    *,
    error_from: int = 400,
    message: str | None = None,
) -> None:
    """End a CLIENT or SERVER span of a call: its HTTP status code, and an error status for
    an exception (recorded scrubbed of ``secrets``; ``message``, default its type's name)
    or else for a status code of ``error_from`` or more.  Never raises into the host."""
    attrs: dict[str, Any] = {}
    if status is not None:
        attrs["http.response.status_code"] = status
    if exc is not None:
        redact.record_exception(span, exc, secrets)
        attrs["error.type"] = type(exc).__qualname__
        span.set_status(Status(StatusCode.ERROR, message or type(exc).__name__))
    elif status is not None and status >= error_from:
        attrs["error.type"] = str(status)
        span.set_status(Status(StatusCode.ERROR, f"HTTP {status}"))
    if attrs:
        span.set_attributes(attrs)
    span.end()


def remote_context(trace_id: str, span_id: str, flags: int = TraceFlags.SAMPLED) -> otel_context.Context:
    """A context whose parent is the (possibly never emitted here) span ``span_id``."""
    sc = SpanContext(
        trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True, trace_flags=TraceFlags(flags)
    )
    return trace.set_span_in_context(NonRecordingSpan(sc), otel_context.Context())


#: Traces whose span counts the launcher keeps (``OrdinalCounter``, the vLLM phases' counts).
#: Why this few: a count is needed only while its actuation can still start a span of that
#: name in the launcher (seconds to minutes), when a launcher hosts a few instances; every
#: trace kept is more launcher memory for each ``fork()`` to copy the page tables of.
MAX_COUNTED_TRACES = 256


class OrdinalCounter:
    """Counts spans of each name per trace (the ``n`` of the span-id rule), for the
    ``max_traces`` traces used last: the launcher's create and start-up spans, the vLLM
    phases' (``vllm_phases``)."""

    def __init__(self, max_traces: int = MAX_COUNTED_TRACES) -> None:
        self._by_trace: OrderedDict[str, dict[str, int]] = OrderedDict()
        self._max = max_traces

    def get(self, trace_id: str) -> dict[str, int]:
        """How many spans of each name the trace has had so far (a copy)."""
        return dict(self._by_trace.get(trace_id, {}))

    def add(self, trace_id: str, names: Iterable[str]) -> None:
        """Count ``names`` as spans of the trace."""
        seen = self._by_trace.pop(trace_id, None) or {}
        for name in names:
            seen[name] = seen.get(name, 0) + 1
        self._by_trace[trace_id] = seen
        while len(self._by_trace) > self._max:
            self._by_trace.popitem(last=False)

    def next(self, trace_id: str, name: str) -> int:
        """The ordinal of a new span of ``name`` in the trace (0 for the first), counted."""
        n = self._by_trace.get(trace_id, {}).get(name, 0)
        self.add(trace_id, (name,))
        return n

    def __len__(self) -> int:
        return len(self._by_trace)


def env_float(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    """The number in variable ``name`` of ``env`` (the environment), else ``default``."""
    try:
        return float((os.environ if env is None else env).get(name, "") or default)
    except ValueError:
        return default


def attach_safe(ctx: otel_context.Context | None) -> object | None:
    with contextlib.suppress(Exception):
        return otel_context.attach(ctx) if ctx is not None else None
    return None


def detach_safe(token: object | None) -> None:
    if token is not None:
        with contextlib.suppress(Exception):
            otel_context.detach(token)  # type: ignore[arg-type]
