"""Facts: what a parsed log line *means* for an actuation, still free of spans.

The klog parser knows nothing about FMA; this module knows which DPC messages mark which
instants (``fma-reference.md`` §2.4) and turns a :class:`KlogRecord` into a typed
:class:`DpcFact`, and launcher records into :class:`LauncherFact`.  Pure functions only.

A DPC line belongs to a requester by ``serverUID``, else ``requesterName``, else the
``item`` JSON's ``UID`` (the span model's rule).
"""

from __future__ import annotations

from collections.abc import Mapping
from sys import intern
from typing import Any, NamedTuple

import msgspec

from .jsonsafe import number_or_none
from .sources.launcher_log import accepted_create_id, put_instance_id
from .sources.records import KlogRecord, LauncherRecord
from .timeutil import DAY_NS, YEAR_NS, parse_rfc3339_ns

# fact kinds
BOUND_COLD = "bound_cold"  # "Created launcher-based server-providing pod"
BOUND = "bound"  # "Bound server-providing Pod"
RECLAIM = "reclaim"  # "Ensured vLLM instance absent to reclaim launcher capacity"
CREATE = "create"  # "HTTP call done" purpose=create_instance
SLEEP_QUERY = "query_sleeping"  # "HTTP call done" purpose=query_sleeping
WAKE = "wake"  # "HTTP call done" purpose=wake
RELAYED = "relayed"  # "Successfully relayed the readiness" readiness=ready
OBSERVED = "observed"  # "Observed actuation latency"
UNBOUND = "unbound"  # "Unbound server-providing Pod"
HINT_HOT = "hint_hot"  # "Found launcher with sleeping instance (fastest path)"
HINT_WARM = "hint_warm"  # "Found launcher with capacity for new instance"
CREATED_INSTANCE = "created_instance"  # "Created vLLM instance"
GPU_QUERY = "get_gpu_uuids"  # "HTTP call done" purpose=get_gpu_uuids (the requester's SPI server)
LIST = "list_instances"  # "HTTP call done" purpose=list_instances (the DPC calls a Ready launcher)
RELAY_CALL = "relay_ready"  # "HTTP call done" purpose=relay_ready (POST /v1/become-ready)
DELETE = "delete_instance"  # "HTTP call done" purpose=delete_instance (reclaiming capacity)
NOTIFIED = "notified"  # "Enqueuing inference server reference due to notification of update"
LAUNCHER_NOTIFIED = "launcher_notified"  # "Enqueuing launcher reference due to notification of update"
PROCESSING = "processing"  # "Processing inference server" whose requesterRCS shows the container running
SET_STATUS = "set_status"  # "Set status/finalizers" (an API write to the requester)
LABELED = "labeled"  # "Reconciled bound launcher Pod labels and annotations" (an API write to the launcher)

MSG_HTTP = "HTTP call done"

#: message -> fact kind, for every DPC message the bridge reads (also the klog prefilter set)
MESSAGES: dict[str, str] = {
    "Created launcher-based server-providing pod": BOUND_COLD,
    "Bound server-providing Pod": BOUND,
    "Ensured vLLM instance absent to reclaim launcher capacity": RECLAIM,
    MSG_HTTP: "",
    "Successfully relayed the readiness": RELAYED,
    "Observed actuation latency": OBSERVED,
    "Unbound server-providing Pod": UNBOUND,
    "Found launcher with sleeping instance (fastest path)": HINT_HOT,
    "Found launcher with capacity for new instance": HINT_WARM,
    "Created vLLM instance": CREATED_INSTANCE,
    "Enqueuing inference server reference due to notification of update": NOTIFIED,
    "Enqueuing launcher reference due to notification of update": LAUNCHER_NOTIFIED,
    "Processing inference server": PROCESSING,
    "Set status/finalizers": SET_STATUS,
    "Reconciled bound launcher Pod labels and annotations": LABELED,
}
WANTED_MESSAGES: frozenset[str] = frozenset(MESSAGES)

_HTTP_PURPOSES = {
    "create_instance": CREATE,
    "query_sleeping": SLEEP_QUERY,
    "wake": WAKE,
    "get_gpu_uuids": GPU_QUERY,
    "list_instances": LIST,
    "relay_ready": RELAY_CALL,
    "delete_instance": DELETE,
}
#: klog prefilter refinement (``klog.Prefilter``): of "HTTP call done" (the DPC's most
#: frequent line) only these purposes make a fact, so the others (``sleep``,
#: ``get_instance_state``, ...) are passed over on a substring test.  Failed
#: ``/is_sleeping`` polls are wanted since issue 21: the last one before vLLM answers
#: bounds ``V.ready`` from below.
_MANAGER = 'lastWrite={"Manager":"'
WANTED_CONTAINS: dict[str, tuple[str, tuple[str, ...]] | tuple[str, tuple[str, ...], dict[str, str]]] = {
    # only the first list_instances call to each launcher bounds an instant (L.ready)
    MSG_HTTP: ("purpose", tuple(_HTTP_PURPOSES), {"list_instances": "launcherPod"}),
    # of the informer's notifications only the writes that bound an instant: the kubelet's
    # to a requester (R.ready) and the scheduler's to a launcher (L.scheduled); the rest of
    # this frequent chatter is passed over on a substring test
    "Enqueuing inference server reference due to notification of update": (_MANAGER, ("kubelet",)),
    "Enqueuing launcher reference due to notification of update": (_MANAGER, ("kube-scheduler",)),
}


class DpcFact(msgspec.Struct, frozen=True):
    """One meaningful DPC line.  ``t_ns`` is the klog header time (year resolved).

    A msgspec Struct: built in C (every wanted DPC line makes one, and most of its fields
    are left at their defaults), and the correlator keeps them until assembly."""

    kind: str
    t_ns: int
    uid: str | None
    name: str | None
    line_no: int
    start_ns: int | None = None  # HTTP calls: httpCallStartTime
    end_ns: int | None = None  # HTTP calls: start + latencySecs
    status: int | None = None
    ok: bool = True
    launcher: str | None = None
    instance_id: str | None = None
    isc_name: str | None = None
    node: str | None = None
    path_label: str | None = None
    secs: float | None = None
    #: API writes: ``k8sCallStartTime`` (the change lies in ``[it, t_ns]``); "Successfully
    #: relayed the readiness": ``requesterCreateTime`` (the requester's creationTimestamp);
    #: informer notifications: ``lastWrite.Time`` (whole seconds)
    ref_ns: int | None = None
    #: informer notifications: ``lastWrite.Manager`` (who wrote the change reported)
    manager: str | None = None


class LauncherFact(NamedTuple):
    """Create receipt or PUT response in one launcher's log, for one instance id."""

    kind: str  # "receipt" | "response"
    t_ns: int
    launcher: str
    instance_id: str
    line_no: int
    status: int | None = None


def _requester_of(kv: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(uid, name) of the requester a DPC line is about, by the span model's rule."""
    uid = kv.get("serverUID")
    name = kv.get("requesterName")
    if not uid and not name:
        item = kv.get("item")
        if isinstance(item, dict):
            uid = item.get("UID")
            name = item.get("RequesterName")
    return (intern(str(uid)) if uid else None, intern(str(name)) if name else None)


#: The longest HTTP call ``latencySecs`` may state (the DPC's client times out after 30 s):
#: a bigger finite float (``1e300``) has no end time in nanoseconds (``round`` of an
#: infinite product raises ``OverflowError``), nor one that OTLP's ``fixed64`` holds.
MAX_LATENCY_S = 1e8


def _finite(v: Any) -> float | None:
    """A JSON number as a finite float, else None (klog prints Go floats; 1e999 is inf).

    A number written as a quoted string (``latencySecs="0.51"``, as some tools write klog)
    is read as that number (issue 21)."""
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    return number_or_none(v)


def _str(v: Any) -> str | None:
    """A field's text, interned: the correlator keeps facts until their actuation is
    assembled, and each repeats the few names, ids, nodes and errors of its requester (one
    string each, not one per line)."""
    return None if v is None else intern(str(v))


#: The kinds of line that are about a launcher, not a requester (keyed by the launcher).
_NO_REQUESTER = frozenset({LIST, LAUNCHER_NOTIFIED})


def dpc_fact(rec: KlogRecord, t_ns: int) -> DpcFact | None:
    """The fact a DPC line states, or ``None`` for lines that mark no instant.

    Raises ``ValueError`` (to be counted as a skipped line) when a wanted line lacks the
    fields that make it meaningful, e.g. an "HTTP call done" without a parsable start.
    """
    msg = rec.msg
    kind = MESSAGES.get(msg)
    if kind is None:
        return None
    kv = dict(rec.kv)  # one pass; the last of a repeated key wins, as in KlogRecord.get
    get = kv.get
    uid, name = _requester_of(kv)
    if msg == MSG_HTTP:
        purpose = get("purpose")
        if purpose is None and rec.truncated:
            raise ValueError("HTTP call done cut short before its purpose")
        kind = _HTTP_PURPOSES.get(str(purpose), "")
        if not kind:
            return None
    if rec.truncated:
        raise ValueError(f"{msg!r} line cut short inside a value (its last fields are lost)")
    if uid is None and name is None and kind not in _NO_REQUESTER:
        # the DPC logs its context keys (serverUID, requesterName) on every such line: a
        # line without them was cut right after its message, and its instant has no owner
        raise ValueError(f"{msg!r} line names no requester (no serverUID/requesterName): cut short?")

    # what every fact has; each kind adds its own fields
    head = (kind, t_ns, uid, name, rec.line_no)
    if msg == MSG_HTTP:
        start_s = get("httpCallStartTime")
        lat = _finite(get("latencySecs"))
        if not isinstance(start_s, str) or lat is None or not 0 <= lat <= MAX_LATENCY_S:
            raise ValueError("HTTP call done without a valid httpCallStartTime/latencySecs")
        lat_ns = round(lat * 1e9)
        start = _near(parse_rfc3339_ns(start_s), t_ns, "httpCallStartTime", DAY_NS + lat_ns)
        # the DPC logs statusCode on every call (0 when none came back, with err said): a
        # line without it was cut between fields, and read as 0 it would be a failed call
        raw_code = get("statusCode")
        if raw_code is None:
            raise ValueError("HTTP call done without its statusCode: cut short?")
        code = _finite(raw_code)  # one no float holds: a failed call, as before
        status = int(code) if code is not None else 0
        ok = 200 <= status < 300 and get("err") in (None, "", "null")
        return DpcFact(
            *head,
            start,
            start + lat_ns,
            status,
            ok,
            _str(get("providerName")),
            _victim(get("url")) if kind == DELETE else _str(get("instanceID")),
            None,
            _str(get("node")),
        )
    if kind == RELAYED:
        if get("readiness") is None:  # always logged: a line without it was cut short
            raise ValueError(f"{msg!r} line without readiness: cut short?")
        if get("readiness") != "ready":
            return None
        return DpcFact(
            *head,
            launcher=_str(get("providerName")),
            instance_id=_str(get("instanceID")),
            ref_ns=_time_field(get("requesterCreateTime"), "requesterCreateTime", t_ns, YEAR_NS),
        )
    if kind == NOTIFIED or kind == LAUNCHER_NOTIFIED:
        # the DPC's informer saw a write to the Pod by ``Manager``, stamped ``Time``
        write = get("lastWrite")
        if not isinstance(write, dict):
            return None
        if kind == NOTIFIED and get("infSvrItemType") != "requester":
            return None
        return DpcFact(
            *head,
            launcher=_str(get("launcherPod")) if kind == LAUNCHER_NOTIFIED else None,
            ref_ns=_time_field(write.get("Time"), "lastWrite.Time", t_ns, YEAR_NS),
            manager=_str(write.get("Manager")),
        )
    if kind == PROCESSING:
        # the DPC's view of the requester's container: running (with its startedAt) or not
        started = _running_started_at(get("requesterRCS"), t_ns)
        if started is None:
            return None
        return DpcFact(*head, ref_ns=started if started > 0 else None)
    if kind == UNBOUND or kind == SET_STATUS or kind == LABELED:
        # API writes: the change lies in [k8sCallStartTime, log time]
        return DpcFact(
            *head,
            launcher=_str(get("providerName") or get("launcherPod")),
            instance_id=_str(get("instanceID")),
            ref_ns=_time_field(get("k8sCallStartTime"), "k8sCallStartTime", t_ns, DAY_NS),
        )
    if kind == BOUND_COLD or kind == BOUND:
        # a cold bind names the new launcher's instance in its annotations; a warm/hot one says it
        instance, isc = get("instanceID"), None
        annotations = get("annotations")
        if kind == BOUND_COLD and isinstance(annotations, dict):
            instance = annotations.get("dual-pods.llm-d.ai/instance-id")
            isc = _isc_from_vllm_config(annotations.get("dual-pods.llm-d.ai/vllm-config"))
        return DpcFact(
            *head,
            launcher=_str(get("name")),
            instance_id=_str(instance),
            isc_name=isc,
            node=_str(get("node")),
            ref_ns=_time_field(get("k8sCallStartTime"), "k8sCallStartTime", t_ns, DAY_NS),
        )
    if kind == OBSERVED:
        return DpcFact(
            *head,
            path_label=_str(get("path")),
            secs=_finite(get("actuationSecs")),
        )
    if kind == CREATED_INSTANCE:
        return DpcFact(*head, instance_id=_str(get("instance_id")))
    return DpcFact(
        *head,
        launcher=_str(get("providerName") or get("launcherPod")),
        instance_id=_str(get("instanceID")),
    )


def _running_started_at(rcs: Any, t_ns: int) -> int | None:
    """``requesterRCS``'s running state: its ``startedAt`` in ns (0 when it has none), None
    when the container is not running.  Go's JSON of the DPC's struct: ``State`` holds a
    ``ContainerState`` (``{"running": {"startedAt": "..."}}``); either case is accepted."""
    if not isinstance(rcs, dict):
        return None
    state = rcs.get("State", rcs.get("state"))
    if not isinstance(state, dict):
        return None
    running = state.get("running", state.get("Running"))
    if not isinstance(running, dict):
        return None
    started = running.get("startedAt", running.get("StartedAt"))
    return _time_field(started, "requesterRCS startedAt", t_ns, YEAR_NS) or 0


#: How far a time a DPC line states may lie from the line's own log time: a call's start
#: or an API write's start is within a day of the line that reports it (on the DPC's own
#: clock, so in fact within its latency); a stamp of something older (the requester's
#: creation, a Pod's last write, a container's start) within a year before it.  Beyond,
#: the value is corrupted (a year like 2001 or 2150 inside the accepted window), and the
#: span it would start sits years from the capture.


def _near(ns: int, t_ns: int, key: str, before: int, after: int = DAY_NS) -> int:
    """``ns`` when it lies in ``[t_ns - before, t_ns + after]``, else ``ValueError``."""
    if t_ns - before <= ns <= t_ns + after:
        return ns
    days = (ns - t_ns) / DAY_NS
    raise ValueError(
        f"{key} is {days:+.1f} days from the line's own log time: not a time this line can state"
    )


def _time_field(value: Any, key: str, t_ns: int, before: int) -> int | None:
    """A time field of a DPC line in ns; None when the line does not have it.

    A field that is there but unreadable (corrupted, cut, a year like 1969 or 2600) raises
    ``ValueError``, so the line is a counted skip naming its file:line (and fails
    ``--strict``) rather than a line read as if the field were absent: the bound it gave is
    lost either way, and the loss must show.  Go writes an unset ``metav1.Time`` as
    ``null``, which is absent."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a time: {str(value)[:40]!r}")
    try:
        ns = parse_rfc3339_ns(value)
    except ValueError as exc:
        raise ValueError(f"{key}: {exc}") from None
    return _near(ns, t_ns, key, before)


def _victim(url: Any) -> str | None:
    """The instance a ``delete_instance`` call deletes: the last part of its URL."""
    if not isinstance(url, str) or "/v2/vllm/instances/" not in url:
        return None
    return url.rsplit("/", 1)[1].split("?", 1)[0] or None


def _isc_from_vllm_config(raw: Any) -> str | None:
    import json

    if not isinstance(raw, str):
        return None
    try:
        cfg = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, a number too long, nesting too deep
        return None
    ann = cfg.get("annotations") if isinstance(cfg, dict) else None
    return _str(ann.get("isc-name")) if isinstance(ann, dict) else None


def launcher_fact(launcher: str, rec: LauncherRecord) -> LauncherFact | None:
    """The create receipt ("Accepted request ...") or the PUT access line, else ``None``.

    The instance id is read by the launcher-log parser's own functions, so the rule for
    what counts as a create (and where its id ends) is written once."""
    if rec.access is not None:
        iid = put_instance_id(rec)
        if iid is None:
            return None
        return LauncherFact("response", rec.t_ns, launcher, iid, rec.line_no, rec.access[4])
    iid = accepted_create_id(rec)
    if iid is None:
        return None
    return LauncherFact("receipt", rec.t_ns, launcher, iid, rec.line_no)
