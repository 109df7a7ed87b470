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

Why a plan: the bridge builds every actuation of a capture, so the table is resolved once
per ``(path, has_launcher_data)`` into a :class:`_Step` plan (start options, end instant,
ancestor chain), and the per-span work is lookups in the actuation's instants.  The spans
of a trace observed by one service share one resource mapping (as decoded spans of one
resource do), which also lets the writer group them once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from . import instants as I
from . import model as M
from .correlate import Actuation
from .model import (
    A_COMPLETE,
    A_DISAGREED,
    A_END_PRECISION,
    A_END_SRC,
    A_INCONSISTENT,
    A_MAX,
    A_METRIC,
    A_MIN,
    A_RAW,
    A_START_PRECISION,
    A_START_SRC,
    STATUS_ERROR,
    STATUS_UNSET,
    seconds,
)
from .span_records import SpanRecord


class _Step(NamedTuple):
    """One row of the table as it applies to one path (see :func:`_plan`)."""

    name: str
    kind: str
    metric: str | None
    starts: tuple[str, ...]  # start instants, first known wins
    end: str | None  # end instant
    ancestors: tuple[str, ...]  # parent, grandparent, ... (the nearest present one is used)
    is_root: bool
    repeated: bool  # one span per call in ``Actuation.calls``


@functools.cache
def _plan(path: str, has_launcher_data: bool) -> tuple[_Step, ...]:
    """The steps of the model's table that may apply to an actuation, in table order."""
    steps = []
    for d in M.SPANS:
        if path not in d.paths or (d.needs_launcher_data and not has_launcher_data):
            continue
        ancestors = []
        name = d.parent_name(path)
        while name is not None:
            ancestors.append(name)
            name = M.SPANS_BY_NAME[name].parent_name(path)
        steps.append(
            _Step(
                d.name,
                d.kind,
                d.metric,
                d.start_options(path),
                d.end_instant(path),
                tuple(ancestors),
                d.name == M.ROOT,
                d.repeated,
            )
        )
    return tuple(steps)


class _Trace:
    """The spans of one actuation as they are made, and what they share."""

    __slots__ = ("act", "trace_id", "tolerance_ns", "resources", "spans")

    def __init__(self, act: Actuation) -> None:
        self.act = act
        self.trace_id = act.trace_id
        self.tolerance_ns = act.tolerance_ns
        #: service -> resource attributes, shared by the trace's spans of that service (as
        #: the decoder shares one per resource; the writer groups by it once, not per span)
        self.resources: dict[str, dict[str, Any]] = {}
        self.spans: list[SpanRecord] = []

    def add(
        self,
        span_id: str,
        name: str,
        kind: str,
        parent: str | None,
        start: M.Instant,
        end: M.Instant,
        attrs: dict[str, Any],
        status: str = STATUS_UNSET,
        message: str = "",
        last_seen: bool = False,
    ) -> None:
        """One span between two instants: its point times inside their intervals, and how sure."""
        attrs[A_START_SRC] = start.source
        attrs[A_END_SRC] = f"last-seen:{end.source}" if last_seen else end.source
        attrs[A_START_PRECISION] = seconds(start.precision_ns)
        attrs[A_END_PRECISION] = seconds(end.precision_ns)
        d = I.duration(start, end, self.tolerance_ns)  # an Instant is a fused instant
        attrs[A_MIN] = seconds(d.min_ns)
        # from a DPC log alone a span ending at the last instant seen is open (the log
        # cannot see its end); with Pods, min/max bound the time up to that instant, which
        # the ERROR status and the ``last-seen:`` end source say
        if d.max_ns is not None and not (last_seen and self.act.dpc_only):
            attrs[A_MAX] = seconds(d.max_ns)
        start_ns = start.t_ns
        end_ns = start_ns + (d.point_ns or 0)
        if d.inconsistent:
            attrs[A_RAW] = seconds(end.t_ns - start.t_ns)
            end_ns = start_ns
        if d.inconsistent or start.inconsistent or end.inconsistent:
            attrs[A_INCONSISTENT] = True
            disagreed = [*start.disagreed, *(s for s in end.disagreed if s not in start.disagreed)]
            if d.inconsistent:
                for s in (*start.source.split(" + "), *end.source.split(" + ")):
                    if s not in disagreed:
                        disagreed.append(s)
            attrs[A_DISAGREED] = disagreed
        self.spans.append(
            SpanRecord(
                self.trace_id,
                span_id,
                parent,
                name,
                kind,
                start_ns,
                end_ns,
                end.service,
                attrs,
                status,
                message,
                self.resources.get(end.service) or self._resource(end.service),
            )
        )

    def _resource(self, service: str) -> dict[str, Any]:
        resource = self.resources[service] = M.resource_attributes(service)
        return resource


def build_trace(act: Actuation) -> list[SpanRecord]:
    """The span tree of one actuation, root first, in the model's table order."""
    trace = _Trace(act)
    trace_id = trace.trace_id  # derived from the key once per trace
    instants: Mapping[str, M.Instant] = act.instants
    base = act.attributes
    complete = act.complete
    last: M.Instant | None = None  # the latest instant: computed if an end is missing
    present: dict[str, str] = {}  # span name -> span id
    for name, kind, metric, starts, e_name, ancestors, is_root, repeated in _plan(
        act.path, act.has_launcher_data
    ):
        parent = None
        for a in ancestors:
            parent = present.get(a)
            if parent is not None:
                break
        if repeated:
            n = 0
            for call_name, s_i, e_i, extra in act.calls:
                if call_name != name:
                    continue
                attrs = dict(base)
                attrs.update(extra)
                trace.add(M.span_id_for(trace_id, name, n), name, kind, parent, s_i, e_i, attrs)
                n += 1
            continue
        start = None
        for n_ in starts:
            start = instants.get(n_)
            if start is not None:
                break
        if start is None:
            continue
        end = instants.get(e_name) if e_name else None
        attrs: dict[str, Any] = dict(base)
        status, message = STATUS_UNSET, ""
        last_seen = False
        if end is None:
            if act.dpc_only and is_root or act.dpc_only and name == "fma.actuation":
                # the log cannot see R.ready: the span ends at the last instant seen, an
                # open interval (no max, no metric), and nothing failed
                metric = None
            elif complete or act.dpc_only and M.INSTANTS[e_name].service != M.SERVICE_DPC:
                # complete: the span does not apply.  From a DPC log alone, an end only the
                # Pods or the launcher show is unknown, not missing: ending it at the last
                # instant seen would put it past what bounds it (L.scheduled <= D.create)
                continue
            else:
                attrs[A_COMPLETE] = False
                status, message = STATUS_ERROR, f"incomplete: {e_name} not seen"
            if last is None:
                last = max(instants.values(), key=lambda i: i.t_ns)
            end = last
            last_seen = True
        if metric:
            attrs[A_METRIC] = metric
        if is_root:
            _root_attributes(act, attrs)
            if not complete:
                status = STATUS_ERROR
                if act.dpc_only:  # the log alone never shows R.ready: unfinished = no relay
                    message = "incomplete: D.relayed not seen"
                else:
                    message = "incomplete: missing " + ", ".join(act.missing or ("R.ready",))
        span_id = present[name] = M.span_id_for(trace_id, name, 0)
        trace.add(span_id, name, kind, parent, start, end, attrs, status, message, last_seen)
    return trace.spans


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
    if act.missing_point:
        attrs[M.A_MISSING_POINT] = list(act.missing_point)
