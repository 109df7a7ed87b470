"""Facts: what a parsed log line *means* for an actuation, still free of spans.

The klog parser knows nothing about FMA; this module knows which DPC messages mark which
instants (``fma-reference.md`` §2.4) and turns a :class:`KlogRecord` into a typed
:class:`DpcFact`, and launcher records into :class:`LauncherFact`.  Pure functions only.

A DPC line belongs to a requester by ``serverUID``, else ``requesterName``, else the
``item`` JSON's ``UID`` (the span model's rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .sources.records import KlogRecord, LauncherRecord
from .timeutil import parse_rfc3339_ns

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
}
WANTED_MESSAGES: frozenset[str] = frozenset(MESSAGES)

_HTTP_PURPOSES = {"create_instance": CREATE, "query_sleeping": SLEEP_QUERY, "wake": WAKE}
#: klog prefilter refinement: of "HTTP call done" (the DPC's most frequent line, mostly
#: list_instances/get_gpu_uuids/relay_ready chatter) only these purposes make a fact, so
#: the others are skipped on a substring test instead of a full parse.
WANTED_CONTAINS: dict[str, list[str]] = {MSG_HTTP: [f'purpose="{p}"' for p in _HTTP_PURPOSES]}


@dataclass(frozen=True, slots=True)
class DpcFact:
    """One meaningful DPC line.  ``t_ns`` is the klog header time (year resolved)."""

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
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LauncherFact:
    """Create receipt or PUT response in one launcher's log, for one instance id."""

    kind: str  # "receipt" | "response"
    t_ns: int
    launcher: str
    instance_id: str
    line_no: int
    status: int | None = None


def requester_of(rec: KlogRecord | Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(uid, name) of the requester a DPC line is about, by the span model's rule."""
    kv = rec if isinstance(rec, Mapping) else dict(rec.kv)
    uid = kv.get("serverUID")
    name = kv.get("requesterName")
    if not uid and not name:
        item = kv.get("item")
        if isinstance(item, dict):
            uid = item.get("UID")
            name = item.get("RequesterName")
    return (str(uid) if uid else None, str(name) if name else None)


def _finite(v: Any) -> float | None:
    """A JSON number that is a real, finite number (klog prints Go floats; 1e999 is inf)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def dpc_fact(rec: KlogRecord, t_ns: int) -> DpcFact | None:
    """The fact a DPC line states, or ``None`` for lines that mark no instant.

    Raises ``ValueError`` (to be counted as a skipped line) when a wanted line lacks the
    fields that make it meaningful, e.g. an "HTTP call done" without a parsable start.
    """
    kind = MESSAGES.get(rec.msg)
    if kind is None:
        return None
    kv = dict(rec.kv)  # one pass; the last of a repeated key wins, as in KlogRecord.get
    uid, name = requester_of(kv)
    if rec.msg == MSG_HTTP:
        kind = _HTTP_PURPOSES.get(str(kv.get("purpose")), "")
        if not kind:
            return None
        start_s = kv.get("httpCallStartTime")
        lat = _finite(kv.get("latencySecs"))
        if not isinstance(start_s, str) or lat is None or lat < 0:
            raise ValueError("HTTP call done without a valid httpCallStartTime/latencySecs")
        start = parse_rfc3339_ns(start_s)
        code = _finite(kv.get("statusCode"))
        status = int(code) if code is not None else 0
        ok = 200 <= status < 300 and kv.get("err") in (None, "", "null")
        return DpcFact(
            kind,
            t_ns,
            uid,
            name,
            rec.line_no,
            start_ns=start,
            end_ns=start + round(lat * 1e9),
            status=status,
            ok=ok,
            launcher=_str(kv.get("providerName")),
            instance_id=_str(kv.get("instanceID")),
            node=_str(kv.get("node")),
            error=None if ok else _str(kv.get("err")) or f"status {status}",
        )
    if kind == RELAYED and kv.get("readiness") != "ready":
        return None
    if kind in (BOUND_COLD, BOUND):
        # a cold bind names the new launcher's instance in its annotations; a warm/hot one says it
        instance, isc = kv.get("instanceID"), None
        annotations = kv.get("annotations")
        if kind == BOUND_COLD and isinstance(annotations, dict):
            instance = annotations.get("dual-pods.llm-d.ai/instance-id")
            isc = _isc_from_vllm_config(annotations.get("dual-pods.llm-d.ai/vllm-config"))
        return DpcFact(
            kind,
            t_ns,
            uid,
            name,
            rec.line_no,
            launcher=_str(kv.get("name")),
            instance_id=_str(instance),
            isc_name=isc,
            node=_str(kv.get("node")),
        )
    if kind == OBSERVED:
        return DpcFact(
            kind,
            t_ns,
            uid,
            name,
            rec.line_no,
            path_label=_str(kv.get("path")),
            secs=_finite(kv.get("actuationSecs")),
        )
    if kind == CREATED_INSTANCE:
        return DpcFact(kind, t_ns, uid, name, rec.line_no, instance_id=_str(kv.get("instance_id")))
    return DpcFact(
        kind,
        t_ns,
        uid,
        name,
        rec.line_no,
        launcher=_str(kv.get("providerName") or kv.get("launcherPod")),
        instance_id=_str(kv.get("instanceID")),
    )


def _isc_from_vllm_config(raw: Any) -> str | None:
    import json

    if not isinstance(raw, str):
        return None
    try:
        cfg = json.loads(raw)
    except ValueError:
        return None
    ann = cfg.get("annotations") if isinstance(cfg, dict) else None
    return _str(ann.get("isc-name")) if isinstance(ann, dict) else None


ACCEPTED_PREFIX = "Accepted request to create vLLM instance with id="
PUT_PREFIX = "/v2/vllm/instances/"


def launcher_fact(launcher: str, rec: LauncherRecord) -> LauncherFact | None:
    """The create receipt ("Accepted request ...") or the PUT access line, else ``None``."""
    if rec.access is not None:
        _client, method, path, _ver, status = rec.access
        if method == "PUT" and path.startswith(PUT_PREFIX):
            iid = path[len(PUT_PREFIX) :].split("?", 1)[0]
            if iid and "/" not in iid:
                return LauncherFact("response", rec.t_ns, launcher, iid, rec.line_no, status)
        return None
    if rec.message.startswith(ACCEPTED_PREFIX):
        iid = rec.message[len(ACCEPTED_PREFIX) :].strip()
        if iid:
            return LauncherFact("receipt", rec.t_ns, launcher, iid, rec.line_no)
    return None
