"""The lean reader: keep only what percentiles and hit rates need.

Why not :func:`fma_otel.sinks.otlp_json.spans_from_request`: that builds a full
:class:`~fma_otel.span_records.SpanRecord` (every attribute, resource, status) for every span,
which costs several times the ``json.loads`` of the line.  ``slo`` over 100k actuations must
stay within twice one plain parse, so here a span is looked at only when its *name* is one
the model says carries an FMA metric (or is the root ``fma.request``), and only a handful of
attribute keys are decoded.  The names come from :mod:`fma_otel.model`, never re-spelled.

Duplicates (a re-export, a trace returned by two overlapping remote queries) are idempotent:
spans are keyed by their derived ``(trace_id, span_id)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..jsonsafe import ns, number_or_none
from ..model import (
    A_COMPLETE,
    A_DPC_SECS,
    A_HOT_HIT,
    A_MAX,
    A_METRIC,
    A_MIN,
    A_PATH,
    A_POD_NAME,
    A_POD_UID,
    A_WARM_HIT,
    ROOT,
    SPANS,
    UNKNOWN,
)
from ..sinks.otlp_json import MALFORMED, normalize_id, value_of
from .window import Window, to_ns

if TYPE_CHECKING:
    from .breakdown import TreeCollector

#: span name -> the FMA metric it carries, per the model's table
METRIC_OF_SPAN: Mapping[str, str] = {d.name: d.metric for d in SPANS if d.metric}
#: every span name the statistics look at
WANTED_NAMES: frozenset[str] = frozenset(METRIC_OF_SPAN) | {ROOT}
_KEYS = frozenset(
    {A_METRIC, A_PATH, A_COMPLETE, A_HOT_HIT, A_WARM_HIT, A_DPC_SECS, A_POD_UID, A_POD_NAME, A_MIN, A_MAX}
)
#: one metric span as the harvest keeps it: (metric, path or None, start_ns, end_ns,
#: own_complete, min_s or None, max_s or None)
_Kept = tuple[str, str | None, int, int, bool, float | None, float | None]
#: one span's place in its tree: (trace, span, parent, name, start_ns, end_ns, min_s, max_s)
_TreeRow = tuple[str, str, str | None, str, int, int, float | None, float | None]


@dataclass(frozen=True)
class RequestObs:
    """What the root ``fma.request`` says about one actuation."""

    path: str
    complete: bool
    hot_hit: bool | None
    warm_hit: bool | None
    start_ns: int
    dpc_secs: float | None = None
    #: the requester Pod (its UID, else its name; "" when the root says neither): a
    #: requester actuated twice has two traces, and hit rates per requester count it once
    requester: str = ""


class Sample(NamedTuple):
    """One metric span, resolved against its actuation (path, completeness, window).

    A named tuple, not a dataclass: a large window makes hundreds of thousands of them.
    """

    trace_id: str
    metric: str
    path: str
    duration_s: float
    complete: bool
    #: the interval the true duration lies in (``fma.duration.min_s``/``max_s``); the point
    #: duration on both ends when the span does not say
    lo_s: float = 0.0
    hi_s: float = 0.0


@dataclass
class Dataset:
    """The harvest inside a window: what :mod:`.stats` summarizes."""

    samples: list[Sample] = field(default_factory=list)
    requests: dict[str, RequestObs] = field(default_factory=dict)


class Harvest:
    """Accumulates spans from any source; :meth:`dataset` resolves them in a window."""

    def __init__(self, tree: TreeCollector | None = None) -> None:
        #: when given, :meth:`add_otlp` keeps every span's place in its tree too (``slo --breakdown``)
        self.tree = tree
        self._spans: dict[tuple[str, str], _Kept] = {}
        self._requests: dict[str, RequestObs] = {}
        self.traces_seen: set[str] = set()
        #: requests :meth:`add_otlp` refused as malformed OTLP (each added nothing)
        self.malformed = 0

    # ------------------------------------------------------------------ input

    def add_otlp(self, req: Mapping[str, Any]) -> bool:
        """One ``ExportTraceServiceRequest``/``TracesData`` in JSON form (hex or base64 ids).

        Also takes Tempo's older ``batches`` wrapping and ``instrumentationLibrarySpans``.
        The hot loop of ``slo --traces``: names are checked before anything is decoded.

        All or nothing: a request malformed where this reader looks (a time outside OTLP's
        ``fixed64``, whose duration no float holds, an attribute without ``key`` ...) adds
        nothing, is counted in :attr:`malformed` and gives ``False``.
        """
        wanted = WANTED_NAMES
        metric_of = METRIC_OF_SPAN
        keys = _KEYS
        new: dict[tuple[str, str], _Kept] = {}
        roots: dict[str, RequestObs] = {}  # hashed here, inside the try
        tids: set[str] = set()
        tree_rows: list[_TreeRow] = []
        try:
            if self.tree is not None:
                tree_rows = _tree_rows(req)
            for rs in req.get("resourceSpans") or req.get("resource_spans") or req.get("batches") or ():
                for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
                    for sp in ss.get("spans") or ():
                        name = sp.get("name")
                        if name not in wanted:
                            continue
                        attrs = {}
                        for kv in sp.get("attributes") or ():
                            k = kv["key"]
                            if k in keys:
                                attrs[k] = value_of(kv["value"])
                        tid = _id(sp.get("traceId"), 16)
                        start, end = ns(sp.get("startTimeUnixNano")), ns(sp.get("endTimeUnixNano"))
                        if name == ROOT:
                            roots[tid] = _request_obs(start, attrs)
                            continue
                        sid = _id(sp.get("spanId"), 8)
                        tids.add(tid)
                        complete = attrs.get(A_COMPLETE)
                        path = attrs.get(A_PATH)
                        new[(tid, sid)] = (
                            str(attrs.get(A_METRIC) or metric_of[name]),
                            str(path) if path else None,
                            start,
                            end,
                            complete is not False and complete != "false",
                            number_or_none(attrs.get(A_MIN)),
                            number_or_none(attrs.get(A_MAX)),
                        )
        except MALFORMED:
            self.malformed += 1
            return False
        self._spans.update(new)
        if self.tree is not None:
            for row in tree_rows:
                self.tree.add(*row)
        self.traces_seen.update(tids)
        for tid, obs in roots.items():
            self.traces_seen.add(tid)
            self._requests[tid] = obs
        return True

    def add_span(
        self,
        trace_id: str,
        span_id: str,
        name: str,
        start_ns: int,
        end_ns: int,
        attrs: Mapping[str, Any],
    ) -> None:
        """One span already decoded (the report reads whole spans; its summaries keep the
        tree).  The times must be in OTLP's range (``[0, jsonsafe.NS_LIMIT)``): the reader
        checks, where it can drop the whole request that holds a bad one.
        """
        if name not in WANTED_NAMES:
            return
        self.traces_seen.add(trace_id)
        path = attrs.get(A_PATH)
        if name == ROOT:
            self._requests[trace_id] = _request_obs(start_ns, attrs)
            return
        metric = attrs.get(A_METRIC) or METRIC_OF_SPAN[name]
        self._spans[(trace_id, span_id)] = (
            str(metric),
            str(path) if path else None,
            start_ns,
            end_ns,
            _truthy(attrs.get(A_COMPLETE), default=True),
            number_or_none(attrs.get(A_MIN)),
            number_or_none(attrs.get(A_MAX)),
        )

    # ------------------------------------------------------------------ output

    def dataset(self, window: Window | None = None) -> Dataset:
        """Resolve spans against their actuation and keep those inside ``window``.

        An actuation belongs to the window by the start of its root (the requester's
        creation), so all of its spans fall on the same side; a trace without a root is
        placed by each span's own start.  A metric span is *incomplete* when it or its
        actuation says ``fma.complete=false``: the span model forbids counting an
        actuation that never finished as a duration.
        """
        w = window or Window()
        lo = to_ns(w.since) if w.since is not None else None
        hi = to_ns(w.until) if w.until is not None else None

        def inside(t: int) -> bool:
            return (lo is None or t >= lo) and (hi is None or t < hi)

        out = Dataset()
        requests = self._requests
        for tid, req in requests.items():
            if inside(req.start_ns):
                out.requests[tid] = req
        append = out.samples.append
        for (tid, _sid), (metric, path, start, end, own_complete, lo, hi) in self._spans.items():
            req = requests.get(tid)
            dur = max(0, end - start) / 1e9
            lo_s = dur if lo is None else lo
            hi_s = dur if hi is None else hi
            if req is None:
                if not inside(start):
                    continue
                append(Sample(tid, metric, path or UNKNOWN, dur, own_complete, lo_s, hi_s))
                continue
            if tid not in out.requests:
                continue
            append(Sample(tid, metric, path or req.path, dur, own_complete and req.complete, lo_s, hi_s))
        return out


def _tree_rows(req: Mapping[str, Any]) -> list[_TreeRow]:
    """Every span of a request as ``(trace, span, parent, name, start, end)``; raises one
    of :data:`MALFORMED` where the request is malformed (the caller drops it whole)."""
    rows: list[_TreeRow] = []
    for rs in req.get("resourceSpans") or req.get("resource_spans") or req.get("batches") or ():
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for sp in ss.get("spans") or ():
                tid, sid, parent = (
                    _id(sp.get("traceId"), 16),
                    _id(sp.get("spanId"), 8),
                    _id(sp.get("parentSpanId"), 8),
                )
                start, end = ns(sp.get("startTimeUnixNano")), ns(sp.get("endTimeUnixNano"))
                lo = hi = None
                for kv in sp.get("attributes") or ():
                    k = kv["key"]
                    if k == A_MIN:
                        lo = number_or_none(value_of(kv["value"]))
                    elif k == A_MAX:
                        hi = number_or_none(value_of(kv["value"]))
                rows.append((tid, sid, parent or None, str(sp.get("name") or ""), start, end, lo, hi))
    return rows


def _id(raw: Any, nbytes: int) -> str:
    """An id in the usual hex form as it is; any other (Tempo's base64) normalized."""
    raw = raw or ""
    return raw if len(raw) == 2 * nbytes else normalize_id(raw, nbytes) or ""


def _request_obs(start_ns: int, attrs: Mapping[str, Any]) -> RequestObs:
    path = attrs.get(A_PATH)
    dpc = attrs.get(A_DPC_SECS)
    return RequestObs(
        path=str(path) if path else UNKNOWN,
        complete=_truthy(attrs.get(A_COMPLETE), default=True),
        hot_hit=_opt_bool(attrs.get(A_HOT_HIT)),
        warm_hit=_opt_bool(attrs.get(A_WARM_HIT)),
        start_ns=start_ns,
        # NaN would poison the bucket counts (``nan <= le`` is false), an int beyond float
        # range raise OverflowError: neither is a value the DPC logged, nor a reason to
        # drop the actuation
        dpc_secs=number_or_none(dpc),
        requester=str(attrs.get(A_POD_UID) or attrs.get(A_POD_NAME) or ""),
    )


def _truthy(v: Any, default: bool) -> bool:
    """Attribute booleans may arrive as bool (OTLP) or as text (Jaeger v1 tags, Tempo)."""
    b = _opt_bool(v)
    return default if b is None else b


def _opt_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None
