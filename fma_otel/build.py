"""Build: one actuation -> its finished span tree, by walking the model's table.

Spans are made whole and immutable here (``SpanRecord``) and only then handed to sinks:
nothing is stretched or mutated after it ends (the lesson of kspan, whose mutable spans
could not be ported to OpenTelemetry).

Honesty rules from the span model:
- a span whose start instant is unknown is left out; its children hang from the nearest
  ancestor that exists;
- in a complete actuation a span whose end is unknown is left out too (and the root lists
  the missing instants in ``fma.missing``); in an incomplete one it ends at the last instant
  seen, with status ERROR and ``fma.complete=false``;
- an end before its start (clock skew, truncation) gives a zero-length span at the start,
  with ``fma.clock.inconsistent=true`` and the raw difference in ``fma.duration.raw_s``.
"""

from __future__ import annotations

from typing import Any

from . import model as M
from .correlate import Actuation


def _bounds(start: M.Instant, end: M.Instant) -> tuple[float, float]:
    """The duration interval that both boundaries' precision allows (never below 0)."""
    lo = max(0, end.t_ns - (start.t_ns + start.precision_ns))
    hi = max(0, end.t_ns + end.precision_ns - start.t_ns)
    return round(lo / M.S, 9), round(hi / M.S, 9)


def build_trace(act: Actuation) -> list[M.SpanRecord]:
    """The span tree of one actuation, root first, in the model's table order."""
    trace_id = act.trace_id
    path = act.path
    last = max(act.instants.values(), key=lambda i: i.t_ns) if act.instants else None
    present: dict[str, str] = {}  # span name -> span id
    out: list[M.SpanRecord] = []
    for d in M.SPANS:
        if path not in d.paths or (d.needs_launcher_data and not act.has_launcher_data):
            continue
        start = next((act.instants[n] for n in d.start_options(path) if n in act.instants), None)
        if start is None:
            continue
        e_name = d.end_instant(path)
        end = act.instants.get(e_name) if e_name else None
        attrs: dict[str, Any] = dict(act.attributes)
        status, message = M.STATUS_UNSET, ""
        if end is None:
            if act.complete or last is None:
                continue
            end = last
            attrs[M.A_COMPLETE] = False
            status, message = M.STATUS_ERROR, f"incomplete: {e_name} not seen"
        if d.metric:
            attrs[M.A_METRIC] = d.metric
        attrs[M.A_START_SRC] = start.source
        attrs[M.A_END_SRC] = end.source if status == M.STATUS_UNSET else f"last-seen:{end.source}"
        lo, hi = _bounds(start, end)
        attrs[M.A_MIN], attrs[M.A_MAX] = lo, hi
        start_ns, end_ns = start.t_ns, end.t_ns
        if end_ns < start_ns:
            attrs[M.A_INCONSISTENT] = True
            attrs[M.A_RAW] = round((end_ns - start_ns) / M.S, 9)
            end_ns = start_ns
        if d.name == M.ROOT:
            _root_attributes(act, attrs)
            if not act.complete:
                status = M.STATUS_ERROR
                message = "incomplete: missing " + ", ".join(act.missing or ("R.ready",))
        parent = _present_ancestor(d, path, present)
        span_id = M.span_id_for(trace_id, d.name, 0)
        present[d.name] = span_id
        out.append(
            M.SpanRecord(
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=parent,
                name=d.name,
                kind=d.kind,
                start_ns=start_ns,
                end_ns=end_ns,
                service=end.service,
                attributes=attrs,
                status_code=status,
                status_message=message,
                resource=M.resource_attributes(end.service),
            )
        )
    return out


def _present_ancestor(d: M.SpanDef, path: str, present: dict[str, str]) -> str | None:
    name = d.parent_name(path)
    while name is not None:
        if name in present:
            return present[name]
        name = M.SPANS_BY_NAME[name].parent_name(path)
    return None


def _root_attributes(act: Actuation, attrs: dict[str, Any]) -> None:
    attrs[M.A_POD_NAME] = act.attributes.get(M.A_REQ_NAME, "")
    attrs[M.A_POD_UID] = act.attributes.get(M.A_REQ_UID, "")
    attrs[M.A_COMPLETE] = act.complete
    attrs[M.A_HOT_HIT] = act.path == M.HOT
    attrs[M.A_WARM_HIT] = act.path == M.WARM
    attrs[M.A_ACTUATION_KEY] = act.key
    if act.dpc_actuation_secs is not None:
        attrs[M.A_DPC_SECS] = act.dpc_actuation_secs
    if act.missing:
        attrs[M.A_MISSING] = list(act.missing)
