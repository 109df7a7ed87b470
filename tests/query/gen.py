"""A small generator of actuation traces for the query tests.

It follows the span model through :mod:`fma_otel.model` (names, parents, derived ids,
attribute keys) and writes with the real sink, so the tests read what the bridge writes
without depending on the bridge itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fma_otel.model import (
    A_COMPLETE,
    A_DPC_SECS,
    A_HOT_HIT,
    A_METRIC,
    A_NAMESPACE,
    A_PATH,
    A_POD_NAME,
    A_POD_UID,
    A_REQ_NAME,
    A_REQ_UID,
    A_WARM_HIT,
    HOT,
    INSTANTS,
    ROOT,
    STATUS_ERROR,
    STATUS_UNSET,
    WARM,
    actuation_key,
    metric_span,
    resource_attributes,
    span_id_for,
    trace_id_for,
)
from fma_otel.sinks.otlp_json import write_trace_line
from fma_otel.span_records import SpanRecord

S = 1_000_000_000
BASE_NS = 1_780_000_000 * S  # 2026-05-28, whole seconds


@dataclass
class Act:
    """One actuation: its path and the duration of each FMA metric it has (seconds)."""

    uid: str
    path: str
    metrics: Mapping[str, float] = field(default_factory=dict)
    complete: bool = True
    start_s: float = 0.0  # seconds after BASE_NS of the requester's creation
    namespace: str = "fma-test"
    dpc_secs: float | None = None
    n: int = 1
    root_service: str = "kubernetes"


def spans_of(a: Act) -> list[SpanRecord]:
    key = actuation_key(a.uid, a.n)
    tid = trace_id_for(key)
    t0 = BASE_NS + int(a.start_s * S)
    common = {
        A_PATH: a.path,
        A_NAMESPACE: a.namespace,
        A_REQ_NAME: f"req-{a.uid}",
        A_REQ_UID: a.uid,
    }
    status = STATUS_UNSET if a.complete else STATUS_ERROR
    longest = max(a.metrics.values(), default=1.0)
    out: list[SpanRecord] = []
    for metric, secs in a.metrics.items():
        d = metric_span(metric)
        parent = d.parent_name(a.path) or ROOT
        attrs = {**common, A_METRIC: metric}
        if not a.complete:
            attrs[A_COMPLETE] = False
        start = t0 + 2 * S
        end_instant = d.end_instant(a.path) or "R.ready"
        service = INSTANTS[end_instant].service
        out.append(
            SpanRecord(
                trace_id=tid,
                span_id=span_id_for(tid, d.name),
                parent_span_id=span_id_for(tid, parent),
                name=d.name,
                kind=d.kind,
                start_ns=start,
                end_ns=start + round(secs * S),
                service=service,
                attributes=attrs,
                status_code=status,
                resource=resource_attributes(service),
            )
        )
    root_attrs: dict[str, object] = {
        **common,
        A_POD_NAME: f"req-{a.uid}",
        A_POD_UID: a.uid,
        A_COMPLETE: a.complete,
        A_HOT_HIT: a.path == HOT,
        A_WARM_HIT: a.path == WARM,
    }
    if a.dpc_secs is not None:
        root_attrs[A_DPC_SECS] = a.dpc_secs
    out.append(
        SpanRecord(
            trace_id=tid,
            span_id=span_id_for(tid, ROOT),
            parent_span_id=None,
            name=ROOT,
            kind="INTERNAL",
            start_ns=t0,
            end_ns=t0 + round((longest + 3) * S),
            service=a.root_service,
            attributes=root_attrs,
            status_code=status,
            resource=resource_attributes(a.root_service),
        )
    )
    return out


def write(path: str, acts: Iterable[Act]) -> str:
    """One trace per line, as the bridge writes them; returns ``path``."""
    with open(path, "w", encoding="utf-8") as fh:
        for a in acts:
            write_trace_line(fh, spans_of(a))
    return path


def hot(uid: str, t_act: float, **kw: object) -> Act:
    return Act(uid, HOT, {"T_actuation": t_act, "T_wake": t_act / 2}, **kw)  # type: ignore[arg-type]
