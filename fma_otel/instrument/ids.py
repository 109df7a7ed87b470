"""``DerivedIdGenerator``: the one id generator through which wrappers give spans derived ids.

Why: the span model fixes some span ids (``span_id_for(trace, name, n)``) so that a live
span and the bridge's span of the same event are one span.  The SDK keeps ``SpanContext``
immutable and ``start_span`` has no span-id argument; the documented way is an
``IdGenerator`` passed to the ``TracerProvider`` when it is built.  This one returns the
id a wrapper asked for (through a contextvar, set only around that ``start_span``) and
random ids otherwise, so spans of other instrumentations are untouched.

It is installed by ``fma_otel``'s configurator (``import fma_otel.auto``,
``opentelemetry-instrument``); an SDK configured elsewhere gets it with
``OTEL_PYTHON_ID_GENERATOR=fma_derived`` or ``TracerProvider(id_generator=DerivedIdGenerator())``.
"""

from __future__ import annotations

import contextvars

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

#: The span id the next ``generate_span_id`` returns (once), or ``None``.
FORCED_SPAN_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "fma_forced_span_id", default=None
)
#: The trace id the next ``generate_trace_id`` returns (once), or ``None``: a root span
#: whose random trace id was drawn before the span was opened (a create span opened after
#: its response, whose forked child already carries that trace id).
FORCED_TRACE_ID: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "fma_forced_trace_id", default=None
)


class DerivedIdGenerator(IdGenerator):
    """Random ids, except a span or trace id a wrapper asked for (see module doc)."""

    def __init__(self, delegate: IdGenerator | None = None) -> None:
        self.delegate = delegate if delegate is not None else RandomIdGenerator()

    def generate_span_id(self) -> int:
        forced = FORCED_SPAN_ID.get()
        if forced is not None:
            FORCED_SPAN_ID.set(None)
            return forced
        return self.delegate.generate_span_id()

    def generate_trace_id(self) -> int:
        forced = FORCED_TRACE_ID.get()
        if forced is not None:
            FORCED_TRACE_ID.set(None)
            return forced
        return self.delegate.generate_trace_id()

    def is_trace_id_random(self) -> bool:
        return self.delegate.is_trace_id_random()
