"""``DerivedIdGenerator`` gives a span the trace id a wrapper drew before opening it."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from fma_otel.instrument import _common as c
from fma_otel.instrument.ids import FORCED_TRACE_ID, DerivedIdGenerator


def test_a_forced_trace_and_span_id_go_to_one_root_span_only() -> None:
    gen = DerivedIdGenerator()
    tracer = TracerProvider(id_generator=gen).get_tracer("t")
    tid, sid = gen.generate_trace_id(), gen.generate_span_id()
    span = c.start_span(tracer, "root", span_id=f"{sid:016x}", trace_id=tid)
    assert (span.get_span_context().trace_id, span.get_span_context().span_id) == (tid, sid)
    assert FORCED_TRACE_ID.get() is None  # reset after the start
    other = tracer.start_span("next")
    assert other.get_span_context().trace_id != tid  # the next root draws its own


def test_a_child_keeps_its_parent_s_trace_even_with_a_forced_one() -> None:
    """The generator is asked for a trace id only for a root span: a child's is its parent's."""
    from opentelemetry import trace

    gen = DerivedIdGenerator()
    tracer = TracerProvider(id_generator=gen).get_tracer("t")
    parent = tracer.start_span("parent")
    child = c.start_span(
        tracer, "child", context=trace.set_span_in_context(parent), trace_id=gen.generate_trace_id()
    )
    assert child.get_span_context().trace_id == parent.get_span_context().trace_id
    assert FORCED_TRACE_ID.get() is None
