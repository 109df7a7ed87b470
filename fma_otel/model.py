"""The actuation trace model: the one place where span names, parents and instants live.

Everything else in fma-otel (bridge, wrappers, live watcher, SLO queries, report) asks this
module for names, parents and ids, so that the contract in ``docs/span-model.md`` is spelled
exactly once.  The table below is that document's table, as data.

Why ids are derived and not random: the bridge (after the fact), the in-process wrappers
(live) and a re-run of either must all agree on the ids of the same actuation, so that a
re-export is idempotent and live spans parent into the bridge's tree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

# --------------------------------------------------------------------------- paths

COLD_LAUNCHER = "cold_launcher"
WARM = "warm"
HOT = "hot"
COLD_NO_FMA = "cold_no_fma"
UNKNOWN = "unknown"

ALL_PATHS: frozenset[str] = frozenset({COLD_LAUNCHER, WARM, HOT, COLD_NO_FMA, UNKNOWN})
FMA_PATHS: frozenset[str] = frozenset({COLD_LAUNCHER, WARM, HOT})
#: The DPC's own ``path`` label (``fma_actuation_seconds``) mapped to ours.
DPC_PATH_LABELS: Mapping[str, str] = {"cold": COLD_LAUNCHER, "warm": WARM, "hot": HOT}

# --------------------------------------------------------------------------- span kinds

INTERNAL = "INTERNAL"
CLIENT = "CLIENT"
SERVER = "SERVER"

# --------------------------------------------------------------------------- resources

SERVICE_DPC = "dual-pods-controller"
SERVICE_LAUNCHER = "fma-launcher"
SERVICE_K8S = "kubernetes"
SERVICE_NAMESPACE = "fma"

# --------------------------------------------------------------------------- instants

NS = 1
US = 1_000
MS = 1_000_000
S = 1_000_000_000


def seconds(ns: int) -> float:
    """Nanoseconds as the seconds every duration attribute is written in, ``round(ns / S, 9)``.

    For an integer ``ns`` that is ``ns / S`` itself: the division is correctly rounded, so
    it is the double nearest the 9-decimal number ``ns / S`` exactly is, and the 9-decimal
    number ``round`` finds is within half a nanosecond of it with no other double nearer,
    so ``round`` gives the same double back.  Only another kind of number is rounded (the
    builder converts several durations per span).
    """
    if ns.__class__ is int:
        return ns / S
    return round(ns / S, 9)


@dataclass(frozen=True)
class InstantDef:
    """Where an instant comes from: the component that observed it and its precision."""

    name: str
    service: str
    precision_ns: int
    doc: str


INSTANTS: Mapping[str, InstantDef] = {
    d.name: d
    for d in (
        InstantDef("R.created", SERVICE_K8S, S, "requester metadata.creationTimestamp"),
        InstantDef("R.scheduled", SERVICE_K8S, S, "requester PodScheduled=True lastTransitionTime"),
        InstantDef("R.started", SERVICE_K8S, S, "requester inference-server state.running.startedAt"),
        InstantDef("R.ready", SERVICE_K8S, S, "requester Ready=True lastTransitionTime"),
        InstantDef("L.created", SERVICE_K8S, S, "launcher metadata.creationTimestamp"),
        InstantDef("L.scheduled", SERVICE_K8S, S, "launcher PodScheduled=True lastTransitionTime"),
        InstantDef("L.ready", SERVICE_K8S, S, "launcher Ready=True lastTransitionTime"),
        InstantDef("D.bound", SERVICE_DPC, US, "DPC log time of launcher creation / binding"),
        InstantDef("D.create.start", SERVICE_DPC, NS, "DPC create_instance httpCallStartTime"),
        InstantDef("D.create.end", SERVICE_DPC, NS, "DPC create_instance start + latencySecs"),
        InstantDef("X.receipt", SERVICE_LAUNCHER, MS, "launcher 'Accepted request to create'"),
        InstantDef("X.response", SERVICE_LAUNCHER, MS, "launcher access-log line of the PUT"),
        InstantDef(
            "V.ready", SERVICE_DPC, NS, "vLLM answered: last failed .. first OK query_sleeping after create"
        ),
        InstantDef("D.serving", SERVICE_DPC, NS, "end of first query_sleeping 200 after create"),
        InstantDef("D.wake.start", SERVICE_DPC, NS, "DPC wake httpCallStartTime"),
        InstantDef("D.wake.end", SERVICE_DPC, NS, "DPC wake start + latencySecs"),
        InstantDef("D.delete.start", SERVICE_DPC, NS, "DPC delete_instance httpCallStartTime (one per call)"),
        InstantDef("D.delete.end", SERVICE_DPC, NS, "DPC delete_instance start + latencySecs"),
        InstantDef(
            "D.relay.start", SERVICE_DPC, NS, "DPC relay_ready httpCallStartTime (last before D.relayed)"
        ),
        InstantDef("D.relay.end", SERVICE_DPC, NS, "DPC relay_ready start + latencySecs"),
        InstantDef("D.relayed", SERVICE_DPC, US, "DPC log time of 'Successfully relayed the readiness'"),
        InstantDef(
            "D.write.start",
            SERVICE_DPC,
            NS,
            "DPC k8sCallStartTime of one Kubernetes API write (one per call)",
        ),
        InstantDef("D.write.end", SERVICE_DPC, US, "DPC log time of that write's line"),
        InstantDef(
            "D.unbound", SERVICE_DPC, US, "DPC log time of 'Unbound server-providing Pod' (re-actuations)"
        ),
    )
}


# Clock names: who stamped the number.  A value logged by the DPC but stamped by the
# API server (``requesterCreateTime``) is on the API server's clock.
CLOCK_APISERVER = "k8s-apiserver"
CLOCK_SCHEDULER = "kube-scheduler"
CLOCK_KUBELET = "kubelet"
CLOCK_DPC = "dpc"
CLOCK_LAUNCHER = "launcher"
CLOCK_WATCHER = "watcher"

#: whose clock a service's own timestamps are on (for an Instant made without a fusion)
_SERVICE_CLOCK: Mapping[str, str] = {
    SERVICE_K8S: CLOCK_APISERVER,
    SERVICE_DPC: CLOCK_DPC,
    SERVICE_LAUNCHER: CLOCK_LAUNCHER,
}
#: the service that observed an instant, by the clock of its most precise source
CLOCK_SERVICE: Mapping[str, str] = {
    CLOCK_APISERVER: SERVICE_K8S,
    CLOCK_SCHEDULER: SERVICE_K8S,
    CLOCK_KUBELET: SERVICE_K8S,
    CLOCK_DPC: SERVICE_DPC,
    CLOCK_LAUNCHER: SERVICE_LAUNCHER,
    CLOCK_WATCHER: SERVICE_K8S,
}


class _InstantFields(NamedTuple):
    t_ns: int
    precision_ns: int
    source: str
    service: str
    lo: int
    hi: int
    clock: str
    inconsistent: bool
    disagreed: tuple[str, ...]


class Instant(_InstantFields):
    """An observed instant: the point ``t_ns`` inside the interval ``[lo, hi]`` (ns, inclusive).

    ``source`` is the human-readable origin written to ``fma.start.source`` /
    ``fma.end.source``: every source that bounded it, most precise first, joined by
    ``" + "`` (for example ``dpc:Created launcher-based server-providing pod +
    k8s:creationTimestamp``).  ``precision_ns`` is the interval's width.  Made with only
    the first four fields (one source), the interval is ``[t_ns, t_ns + precision_ns)`` on
    the service's clock.  ``inconsistent``/``disagreed``: the fusion dropped a source that
    conflicted beyond the clock tolerance, and who disagreed (``fma_otel.instants.fuse``).

    An immutable ``NamedTuple`` whose constructor fills in what the short form leaves out
    (the correlator makes one per instant of every actuation).
    """

    __slots__ = ()

    #: the point, under the name :class:`fma_otel.instants.Fused` gives it: an Instant is a
    #: fused instant, and :func:`fma_otel.instants.duration` reads it so
    value = _InstantFields.t_ns

    def __new__(
        cls,
        t_ns: int,
        precision_ns: int,
        source: str,
        service: str,
        lo: int | None = None,
        hi: int | None = None,
        clock: str = "",
        inconsistent: bool = False,
        disagreed: tuple[str, ...] = (),
    ) -> Instant:
        return tuple.__new__(
            cls,
            (
                t_ns,
                precision_ns,
                source,
                service,
                t_ns if lo is None else lo,
                t_ns + max(1, precision_ns) - 1 if hi is None else hi,
                clock or _SERVICE_CLOCK.get(service, service),
                inconsistent,
                disagreed,
            ),
        )


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True)
class SpanDef:
    """One row of the span model's table.

    ``start``/``end`` name instants; a mapping gives a per-path choice (the readiness relay
    starts at ``D.serving`` on cold/warm but at ``D.wake.end`` on hot).  A tuple of starts
    lists alternatives, first known wins: a re-actuation (key ``uid/2``) has no requester
    creation or container start of its own, so it starts at the DPC's unbind instead.
    ``parent`` is a span name, a per-path mapping, or ``None`` for the root.
    """

    name: str
    metric: str | None
    start: str | tuple[str, ...] | Mapping[str, str]
    end: str | Mapping[str, str]
    paths: frozenset[str]
    parent: str | Mapping[str, str] | None
    kind: str = INTERNAL
    needs_launcher_data: bool = False
    #: one span per occurrence (``fma.dpc.delete_instance``: one per reclaiming call), from
    #: ``Actuation.calls``, not from the instants; ``n`` in the span id counts them
    repeated: bool = False

    def start_options(self, path: str) -> tuple[str, ...]:
        """The instants that may start this span on ``path``, in order of preference."""
        if isinstance(self.start, tuple):
            return self.start
        one = _per_path(self.start, path)
        return (one,) if one else ()

    def start_instant(self, path: str) -> str | None:
        """The preferred start instant (first-round actuations always have it)."""
        opts = self.start_options(path)
        return opts[0] if opts else None

    def end_instant(self, path: str) -> str | None:
        return _per_path(self.end, path)

    def parent_name(self, path: str) -> str | None:
        return _per_path(self.parent, path)


def _per_path(value: str | Mapping[str, str] | None, path: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return value.get(path)


_ALL = ALL_PATHS
_CL_W = frozenset({COLD_LAUNCHER, WARM})

ROOT = "fma.request"


def _api_write(name: str, paths: frozenset[str], parent: str) -> SpanDef:
    """A DPC Kubernetes API write: ``k8sCallStartTime`` -> its line's log time, one per call."""
    return SpanDef(name, None, "D.write.start", "D.write.end", paths, parent, CLIENT, repeated=True)


SPANS: tuple[SpanDef, ...] = (
    SpanDef(ROOT, None, ("R.created", "D.unbound"), "R.ready", _ALL, None),
    SpanDef("fma.requester.schedule", None, "R.created", "R.scheduled", _ALL, ROOT),
    SpanDef("fma.requester.startup", None, "R.scheduled", "R.started", _ALL, ROOT),
    SpanDef("fma.actuation", "T_actuation", ("R.started", "D.unbound"), "R.ready", _ALL, ROOT),
    SpanDef("fma.dpc.bind", None, ("R.started", "D.unbound"), "D.bound", FMA_PATHS, "fma.actuation"),
    # the DPC's Kubernetes API writes, one span per write line (``Actuation.calls``): start
    # ``k8sCallStartTime`` (exact), end the line's log time (1 µs; for the two binds that is
    # ``D.bound``, for the unbind ``D.unbound``)
    _api_write("fma.dpc.create_launcher_pod", frozenset({COLD_LAUNCHER}), "fma.dpc.bind"),
    _api_write("fma.dpc.bind_pod", frozenset({WARM, HOT}), "fma.dpc.bind"),
    _api_write("fma.dpc.unbind_pod", frozenset({COLD_LAUNCHER, WARM, HOT, UNKNOWN}), ROOT),
    SpanDef(
        "fma.launcher.cold_start",
        "T_cold_launcher",
        "L.created",
        "D.relayed",
        frozenset({COLD_LAUNCHER}),
        "fma.actuation",
    ),
    SpanDef(
        "fma.launcher.schedule",
        "T_launcher_schedule",
        "L.created",
        "L.scheduled",
        frozenset({COLD_LAUNCHER}),
        "fma.launcher.cold_start",
    ),
    SpanDef(
        "fma.launcher.startup",
        "T_launcher_startup",
        "L.scheduled",
        "L.ready",
        frozenset({COLD_LAUNCHER}),
        "fma.launcher.cold_start",
    ),
    SpanDef(
        "fma.dpc.react",
        "T_dpc_react",
        "L.ready",
        "D.create.start",
        frozenset({COLD_LAUNCHER}),
        "fma.launcher.cold_start",
    ),
    SpanDef(
        "fma.instance.ready",
        "T_instance_ready",
        "D.create.start",
        "D.relayed",
        _CL_W,
        {COLD_LAUNCHER: "fma.launcher.cold_start", WARM: "fma.actuation"},
    ),
    SpanDef(
        "fma.dpc.create_instance",
        None,
        "D.create.start",
        "D.create.end",
        _CL_W,
        "fma.instance.ready",
        CLIENT,
    ),
    SpanDef(
        "fma.launcher.create_instance",
        None,
        "X.receipt",
        "X.response",
        _CL_W,
        "fma.dpc.create_instance",
        SERVER,
        needs_launcher_data=True,
    ),
    SpanDef(
        "fma.instance.create",
        "T_instance_create",
        "X.receipt",
        "D.relayed",
        _CL_W,
        "fma.instance.ready",
        needs_launcher_data=True,
    ),
    SpanDef(
        "fma.dpc.delete_instance",
        None,
        "D.delete.start",
        "D.delete.end",
        frozenset({WARM}),
        "fma.instance.ready",
        CLIENT,
        repeated=True,
    ),
    SpanDef("fma.vllm.ready", None, "D.create.end", "V.ready", _CL_W, "fma.instance.ready"),
    SpanDef("fma.dpc.poll_lag", None, "V.ready", "D.serving", _CL_W, "fma.instance.ready"),
    SpanDef(
        "fma.vllm.wake", "T_wake", "D.wake.start", "D.wake.end", frozenset({HOT}), "fma.actuation", CLIENT
    ),
    SpanDef(
        "fma.readiness.relay",
        None,
        {COLD_LAUNCHER: "D.serving", WARM: "D.serving", HOT: "D.wake.end"},
        "D.relayed",
        FMA_PATHS,
        {COLD_LAUNCHER: "fma.instance.ready", WARM: "fma.instance.ready", HOT: "fma.actuation"},
    ),
    SpanDef(
        "fma.dpc.relay_ready",
        None,
        "D.relay.start",
        "D.relay.end",
        FMA_PATHS,
        "fma.readiness.relay",
        CLIENT,
    ),
    _api_write("fma.dpc.label_launcher_pod", FMA_PATHS, "fma.readiness.relay"),
    _api_write("fma.dpc.set_requester_status", FMA_PATHS, "fma.readiness.relay"),
    SpanDef("fma.kubelet.probe", None, "D.relayed", "R.ready", FMA_PATHS, "fma.actuation"),
)

SPANS_BY_NAME: Mapping[str, SpanDef] = {d.name: d for d in SPANS}

#: Spans emitted only by the in-process wrappers, finer than the bridge can see.
WRAPPER_SPANS: Mapping[str, str] = {
    "fma.vllm.startup": "fma.vllm.ready",
}

#: DPC HTTP call purpose -> span name, where the table above names the call's span.
DPC_PURPOSE_SPANS: Mapping[str, str] = {
    "create_instance": "fma.dpc.create_instance",
    "wake": "fma.vllm.wake",
    "relay_ready": "fma.dpc.relay_ready",
    "delete_instance": "fma.dpc.delete_instance",
}

#: DPC log message of a Kubernetes API write (a line with ``k8sCallStartTime``) -> its span.
DPC_WRITE_SPANS: Mapping[str, str] = {
    "Created launcher-based server-providing pod": "fma.dpc.create_launcher_pod",
    "Bound server-providing Pod": "fma.dpc.bind_pod",
    "Reconciled bound launcher Pod labels and annotations": "fma.dpc.label_launcher_pod",
    "Set status/finalizers": "fma.dpc.set_requester_status",
    "Unbound server-providing Pod": "fma.dpc.unbind_pod",
}


def dpc_call_span(purpose: str) -> str:
    """The span name of a DPC-shaped HTTP call: the model's where it has one, else ``fma.dpc.<purpose>``."""
    return DPC_PURPOSE_SPANS.get(purpose) or f"fma.dpc.{purpose}"


#: Every FMA metric name carried in ``fma.metric``.
METRICS: tuple[str, ...] = tuple(d.metric for d in SPANS if d.metric)


def metric_span(metric: str) -> SpanDef:
    """The span that carries a metric (``T_actuation`` -> ``fma.actuation``)."""
    for d in SPANS:
        if d.metric == metric:
            return d
    raise KeyError(metric)


# --------------------------------------------------------------------------- ids


def actuation_key(requester_uid: str, n: int = 1) -> str:
    """The key of the ``n``-th actuation of a requester (1-based): ``uid``, ``uid/2``, ..."""
    return requester_uid if n <= 1 else f"{requester_uid}/{n}"


def key_uid(key: str) -> str:
    """The requester uid of an actuation key (what :func:`actuation_key` was given)."""
    return key.split("/", 1)[0]


def _first_nonzero(digest: bytes, width: int) -> str:
    for i in range(0, len(digest) - width + 1, width):
        chunk = digest[i : i + width]
        if any(chunk):
            return chunk.hex()
    raise ValueError("digest is all zeros")  # pragma: no cover - 2**-256


def trace_id_for(key: str) -> str:
    """``trace_id`` = first 16 bytes of sha256("fma-actuation/" + key), as lowercase hex."""
    return _first_nonzero(hashlib.sha256(("fma-actuation/" + key).encode()).digest(), 16)


_ZERO_SPAN_ID = bytes(8)


def span_id_for(trace_id: str, span_name: str, n: int = 0) -> str:
    """``span_id`` = first 8 bytes of sha256(trace_id + "/" + name + "/" + str(n))."""
    digest = hashlib.sha256(f"{trace_id}/{span_name}/{n}".encode()).digest()
    # the first 8 bytes are all zeros once in 2**64: only then look further (the bridge
    # derives an id for every span it builds)
    head = digest[:8]
    return head.hex() if head != _ZERO_SPAN_ID else _first_nonzero(digest, 8)


# --------------------------------------------------------------------------- attributes

A_PATH = "fma.path"
A_NAMESPACE = "k8s.namespace.name"
A_REQ_NAME = "fma.requester.name"
A_REQ_UID = "fma.requester.uid"
A_LAUNCHER = "fma.launcher.name"
A_INSTANCE = "fma.instance.id"
A_ISC = "fma.isc.name"
A_NODE = "k8s.node.name"
A_DELETED = "fma.instances_deleted"
A_METRIC = "fma.metric"
A_POD_NAME = "k8s.pod.name"
A_POD_UID = "k8s.pod.uid"
A_COMPLETE = "fma.complete"
A_HOT_HIT = "fma.hot_hit"
A_WARM_HIT = "fma.warm_hit"
A_DPC_SECS = "fma.dpc.actuation_secs"
A_START_SRC = "fma.start.source"
A_END_SRC = "fma.end.source"
A_MIN = "fma.duration.min_s"
A_MAX = "fma.duration.max_s"
A_INCONSISTENT = "fma.clock.inconsistent"
A_RAW = "fma.duration.raw_s"
A_ACTUATION_KEY = "fma.actuation.key"
A_MISSING = "fma.missing"
# written by the in-process wrappers only
A_JOIN = "fma.join"  # how the launcher's create span found its trace: traceparent | annotation | none
A_JOIN_REASON = "fma.join.reason"
A_HTTP_PURPOSE = "fma.http.purpose"
A_VLLM_OPTIONS = "fma.vllm.options"  # redacted
A_VLLM_CONFIG = "fma.vllm.config"  # redacted
A_VLLM_PID = "fma.vllm.pid"
A_VLLM_POLLS = "fma.vllm.health_polls"
A_VLLM_HEALTHY_AT = "fma.vllm.healthy_time_unix_nano"
A_LAG_RULE = "fma.detection_lag.rule"
A_END_PRECISION = "fma.end.precision_s"
A_START_PRECISION = "fma.start.precision_s"
A_DISAGREED = "fma.clock.disagreed"
A_MISSING_POINT = "fma.missing.point"

STATUS_UNSET = "UNSET"
STATUS_OK = "OK"
STATUS_ERROR = "ERROR"


def resource_attributes(service: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Resource attributes for a span observed by ``service``."""
    attrs: dict[str, Any] = {"service.name": service, "service.namespace": SERVICE_NAMESPACE}
    if extra:
        attrs.update(extra)
    return attrs
