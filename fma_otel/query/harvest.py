"""What percentiles and hit rates need of the spans, from any source.

Every source hands over decoded spans (:class:`~fma_otel.span_records.SpanRecord`, from the
one OTLP JSON decoder :func:`fma_otel.sinks.otlp_json.decode_request`); the harvest keeps
only the metric spans and the roots, by *name* as the model gives them (never re-spelled),
and of them only the few attributes the statistics use.

Duplicates (a re-export, a trace returned by two overlapping remote queries) are idempotent:
spans are keyed by their ``(trace_id, span_id)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..jsonsafe import number_or_none, seconds_or_none
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
from ..sinks.otlp_json import MALFORMED, decode_request
from ..span_records import SpanRecord
from .readers import requests_of
from .window import Window, to_ns

if TYPE_CHECKING:
    from .breakdown import TreeCollector

#: span name -> the FMA metric it carries, per the model's table
METRIC_OF_SPAN: Mapping[str, str] = {d.name: d.metric for d in SPANS if d.metric}
#: every span name the statistics look at
WANTED_NAMES: frozenset[str] = frozenset(METRIC_OF_SPAN) | {ROOT}
#: one metric span as the harvest keeps it: (metric, path or None, start_ns, end_ns,
#: own_complete, min_s or None, max_s or None)
_Kept = tuple[str, str | None, int, int, bool, float | None, float | None]


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
        #: when given, :meth:`add` keeps every span's place in its tree too (``slo --breakdown``)
        self.tree = tree
        self._spans: dict[tuple[str, str], _Kept] = {}
        self._requests: dict[str, RequestObs] = {}
        #: values :meth:`add_otlp` refused as malformed or not trace data (each added nothing)
        self.malformed = 0

    # ------------------------------------------------------------------ input

    def add_otlp(self, value: Any) -> bool:
        """One JSON value of trace data as the one reader of trace files takes it
        (:func:`.readers.requests_of`: an OTLP JSON request, hex or base64 ids; a Jaeger
        trace; a Tempo or Jaeger answer holding them).

        All or nothing, as every reader of OTLP JSON: a value malformed anywhere (a time
        outside OTLP's ``fixed64``, an attribute without ``key`` ...) or holding no trace
        data adds nothing, is counted in :attr:`malformed` and gives ``False``.
        """
        try:
            reqs = requests_of(value)
            spans = [s for req in reqs or () for s in decode_request(req)]
        except MALFORMED:
            reqs = None
        if reqs is None:
            self.malformed += 1
            return False
        for s in spans:
            self.add(s)
        return True

    def add(self, s: SpanRecord) -> None:
        """One decoded span.  Its times are in OTLP's range (``[0, jsonsafe.NS_LIMIT)``):
        the decoder checks, where it can drop the whole request that holds a bad one."""
        attrs = s.attributes
        if self.tree is not None:
            self.tree.add(s)
        if s.name not in WANTED_NAMES:
            return
        if s.name == ROOT:
            self._requests[s.trace_id] = _request_obs(s.start_ns, attrs)
            return
        path = attrs.get(A_PATH)
        self._spans[(s.trace_id, s.span_id)] = (
            str(attrs.get(A_METRIC) or METRIC_OF_SPAN[s.name]),
            str(path) if path else None,
            s.start_ns,
            s.end_ns,
            opt_bool(attrs.get(A_COMPLETE)) is not False,
            seconds_or_none(attrs.get(A_MIN), strings=False),
            seconds_or_none(attrs.get(A_MAX), strings=False),
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


def _request_obs(start_ns: int, attrs: Mapping[str, Any]) -> RequestObs:
    path = attrs.get(A_PATH)
    dpc = attrs.get(A_DPC_SECS)
    return RequestObs(
        path=str(path) if path else UNKNOWN,
        complete=opt_bool(attrs.get(A_COMPLETE)) is not False,
        hot_hit=opt_bool(attrs.get(A_HOT_HIT)),
        warm_hit=opt_bool(attrs.get(A_WARM_HIT)),
        start_ns=start_ns,
        # NaN would poison the bucket counts (``nan <= le`` is false), an int beyond float
        # range raise OverflowError: neither is a value the DPC logged, nor a reason to
        # drop the actuation
        dpc_secs=number_or_none(dpc),
        requester=str(attrs.get(A_POD_UID) or attrs.get(A_POD_NAME) or ""),
    )


def opt_bool(v: Any) -> bool | None:
    """Attribute booleans may arrive as bool (OTLP) or as text (Jaeger v1 tags, Tempo)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false"):
        return v.lower() == "true"
    return None
