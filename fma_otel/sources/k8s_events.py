"""Parser for Kubernetes Events: JSON in, :class:`KubeEvent` records out.

Pure: bytes or text in, records and counts out; no client, no spans.  It reads what
``kubectl get events -o json`` prints (a core/v1 ``EventList``), an ``events.k8s.io/v1``
List, a single Event of either API, and watch streams (``{"type": ..., "object": ...}``),
either one JSON value per line or pretty-printed values one after another (``kubectl get
events -o json --watch``): through the reader of Pod JSON (:mod:`.pod_json`: its streaming,
shapes and recovery of the good items around a bad one), each item then converted to
:class:`_Event` by msgspec, so one bad item is a counted skip (with its index and line) and
never loses the others.

The two APIs name the same things differently (``involvedObject``/``regarding``,
``message``/``note``, ``source.component``/``reportingController``, ``firstTimestamp``/
``deprecatedFirstTimestamp`` ...); a record gives them one name.

Times (UTC ns):

* ``first_ns`` is ``eventTime`` where set (a MicroTime: microseconds; the scheduler's
  ``Scheduled`` has it, an upper bound for ``L.scheduled``), else ``firstTimestamp`` (whole
  seconds, truncated: the instant lies in ``[t, t + 1 s)``).  ``first_prec_ns`` says which.
* ``last_ns`` is ``series.lastObservedTime`` where set, else ``lastTimestamp``, else
  ``first_ns``; ``count`` is ``series.count``, else ``count``, else 1.  A repeated event
  (``x22 over 3m29s``) is one record: only its first and last occurrences have a time.
* An Event with none of these times is a counted skip: nothing is invented (in particular
  ``metadata.creationTimestamp`` is when the Event *object* was written, not the event).

Reasons: the ones the actuation trace uses are kept under their own name (:data:`KNOWN`);
any other reason is kept as reason ``"other"`` with the original in ``raw_reason``, so a
report can still list it.  ``Pulled`` messages give ``pull_s`` (the kubelet's pull time) and
``pull_waiting_s`` (the same including the wait for the image-pull queue), or
``image_present=True`` for "already present on machine"; a ``Pulled`` message in neither
form keeps its record with ``pull_s=None`` and is counted in the note :data:`UNPARSED`.
"""

from __future__ import annotations

import io
import re
from typing import Any, NamedTuple

import msgspec

from ..timeutil import parse_rfc3339
from .pod_json import Sink, doc_decoder, read_objects
from .records import SourceStats

__all__ = [
    "KNOWN",
    "UNPARSED",
    "KubeEvent",
    "parse_event_item",
    "parse_events",
    "parse_go_duration",
    "rfc3339_time",
    "skip_item",
]

NS = 1_000_000_000
US = 1_000

KNOWN: frozenset[str] = frozenset(
    {
        "Scheduled",
        "FailedScheduling",
        "Pulling",
        "Pulled",
        "Created",
        "Started",
        "Killing",
        "Unhealthy",
        "LauncherStuck",
        "OutdatedRoutingMetadata",
    }
)
OTHER = "other"


class KubeEvent(NamedTuple):
    """One Kubernetes Event, both APIs in one shape.

    ``index``: position of the item in the input (list item or stream value, counted from 0
    across the whole input).  ``watch_type``: ``ADDED``/``MODIFIED``/``DELETED`` for watch
    events, ``LISTED`` otherwise.  ``api``: ``v1`` or ``events.k8s.io/v1``.  ``container``:
    from ``fieldPath`` (``spec.containers{name}``) or, failing that, the message.
    """

    index: int
    watch_type: str
    api: str
    reason: str
    raw_reason: str
    type: str | None
    object_kind: str | None
    object_name: str | None
    object_uid: str | None
    object_namespace: str | None
    container: str | None
    message: str
    component: str | None
    host: str | None
    first_ns: int
    first_prec_ns: int
    last_ns: int
    last_prec_ns: int
    count: int
    event_uid: str | None = None
    image: str | None = None
    pull_s: float | None = None
    pull_waiting_s: float | None = None
    image_present: bool = False
    image_size: int | None = None


#: the note counting the records whose message did not give what its reason promises (a
#: ``Pulled`` with no pull duration): records kept, not skips
UNPARSED = "Events whose message gave no duration"


# --------------------------------------------------------------------------- msgspec shapes


class _Meta(msgspec.Struct, rename="camel"):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None


class _Ref(msgspec.Struct, rename="camel"):
    kind: str | None = None
    name: str | None = None
    uid: str | None = None
    namespace: str | None = None
    field_path: str | None = None


class _Source(msgspec.Struct, rename="camel"):
    component: str | None = None
    host: str | None = None


class _Series(msgspec.Struct, rename="camel"):
    count: int | None = None
    last_observed_time: str | None = None


class _Event(msgspec.Struct, rename="camel"):
    """Every field either API may carry; the ones a record needs, all optional."""

    api_version: str | None = None
    kind: str | None = None
    metadata: _Meta | None = None
    # core/v1
    involved_object: _Ref | None = None
    message: str | None = None
    source: _Source | None = None
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    count: int | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None
    # events.k8s.io/v1
    regarding: _Ref | None = None
    note: str | None = None
    reporting_controller: str | None = None
    deprecated_source: _Source | None = None
    deprecated_first_timestamp: str | None = None
    deprecated_last_timestamp: str | None = None
    deprecated_count: int | None = None
    # both
    reason: str | None = None
    type: str | None = None
    event_time: str | None = None
    series: _Series | None = None


# --------------------------------------------------------------------------- values


def rfc3339_time(text: str) -> tuple[int, int]:
    """RFC 3339 -> (UTC ns, precision ns): 1 s without a fraction, 1 µs for six digits.

    The grammar and the window are :func:`fma_otel.timeutil.parse_rfc3339`'s, as for every
    other time the bridge reads; ``ValueError`` for a time it rejects.
    """
    ns, digits = parse_rfc3339(text)
    return ns, 10 ** (9 - digits)


_GO_DUR = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(text: str) -> float:
    """A Go ``time.Duration`` string (``1.661s``, ``313ms``, ``1m2.5s``) in seconds."""
    pos = 0
    total = 0.0
    if text in ("0", "0s"):
        return 0.0
    for m in _GO_DUR.finditer(text):
        if m.start() != pos:
            break
        total += float(m[1]) * _GO_UNIT[m[2]]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"not a Go duration: {text[:40]!r}")
    return total


_PULLED = re.compile(
    r'^Successfully pulled image "(?P<image>[^"]*)" in (?P<d>\S+?)'
    r"(?: \((?P<w>\S+) including waiting\))?(?:\. Image size: (?P<size>\d+) bytes\.)?$"
)
_PRESENT = re.compile(r'^Container image "(?P<image>[^"]*)" already present on machine')
_PULLING = re.compile(r'^Pulling image "(?P<image>[^"]*)"')
_CONTAINER_MSG = re.compile(r"^(?:Created|Started|Stopping) container:? (?P<c>\S+)")
_FIELD_PATH = re.compile(r"^spec\.(?:initContainers|containers|ephemeralContainers)\{(?P<c>[^}]+)\}$")


# --------------------------------------------------------------------------- records


class _Reader(Sink):
    """Events through the reader of Pod JSON (its framing, Lists, watch streams, recovery);
    each skip is reported at the line where its item starts (``--strict`` says
    ``file:line``, as for Pods) and names the item's index."""

    # every field an Event may carry, any JSON: :func:`_take` checks them as an _Event
    decode_doc = doc_decoder("_EventDoc", {f.encode_name: Any for f in msgspec.structs.fields(_Event)})

    def skipped(self, line: int, why: str) -> None:
        skip_item(self.stats, self.stats.read - 1, f"{why} (line {line})", line)

    def bookmark(self) -> None:
        super().bookmark()
        self.stats.ignored += 1

    def take(self, etype: str, doc: Any, line: int) -> KubeEvent | None:
        return _take(doc, self.stats, self.stats.read - 1, etype, f" (line {line})", line)


def parse_events(data: bytes | str, name: str = "events") -> tuple[list[KubeEvent], SourceStats]:
    """Every Event in ``data`` as a record, in input order, with the counts (``name``'s): each
    item is one ``read``; a bookmark is ``ignored``; a skip is reported at the item's index
    in the input (from 0), as ``Event item N: why (line L)``, at the line ``L`` where the
    item starts."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    stats = SourceStats(name)
    return list(read_objects(io.BytesIO(data), _Reader(stats))), stats


def parse_event_item(
    item: Any, stats: SourceStats, *, index: int = 0, watch_type: str = "LISTED"
) -> KubeEvent | None:
    """One already-decoded item (a dict in the API's JSON names, as a live watch gives it
    after ``ApiClient.sanitize_for_serialization``); ``None`` when it is skipped, the reason
    then being in ``stats``.  The watch's ``BOOKMARK`` and ``ERROR`` are the watch's own."""
    stats.read += 1
    return _take(item, stats, index, watch_type)


def _take(
    item: Any, stats: SourceStats, index: int, watch_type: str, where: str = "", line: int | None = None
) -> KubeEvent | None:
    """The record of one item counted in ``stats.read``, or a counted skip (``where`` said,
    at ``line`` when the item has one)."""
    try:
        rec = _record(index, watch_type, msgspec.convert(item, type=_Event), stats)
    except msgspec.ValidationError as e:
        skip_item(stats, index, f"not an Event: {e}{where}", line)
        return None
    except ValueError as e:
        skip_item(stats, index, f"{e}{where}", line)
        return None
    stats.understood += 1
    return rec


def skip_item(stats: SourceStats, index: int, why: str, line: int | None = None) -> None:
    """A skipped item, named by its index in the input as every Event skip is, and
    reported at ``line``, the file line where it starts (``--strict``'s ``file:line``);
    at its index when there is no line (an item of a live watch)."""
    stats.skip(index if line is None else line, f"Event item {index}: {why}")


def _record(index: int, wtype: str, ev: _Event, stats: SourceStats) -> KubeEvent:
    new_api = ev.regarding is not None or (ev.api_version or "").startswith("events.k8s.io/")
    ref = ev.regarding if new_api else ev.involved_object
    if ref is None:
        raise ValueError("Event without involvedObject/regarding")
    if not ev.reason:
        raise ValueError("Event without a reason")
    message = (ev.note if new_api else ev.message) or ""
    src = ev.deprecated_source if new_api else ev.source
    component = ev.reporting_controller if new_api else ev.reporting_component
    component = component or (src.component if src else None) or None
    host = ev.reporting_instance or (src.host if src else None) or None
    first_ts = ev.deprecated_first_timestamp if new_api else ev.first_timestamp
    last_ts = ev.deprecated_last_timestamp if new_api else ev.last_timestamp
    legacy_count = ev.deprecated_count if new_api else ev.count

    if ev.event_time:
        first_ns, first_prec = rfc3339_time(ev.event_time)
    elif first_ts:
        first_ns, first_prec = rfc3339_time(first_ts)
    elif last_ts:
        first_ns, first_prec = rfc3339_time(last_ts)
    else:
        raise ValueError("Event without eventTime, firstTimestamp or lastTimestamp")
    if ev.series is not None and ev.series.last_observed_time:
        last_ns, last_prec = rfc3339_time(ev.series.last_observed_time)
    elif last_ts:
        last_ns, last_prec = rfc3339_time(last_ts)
    else:
        last_ns, last_prec = first_ns, first_prec
    # 0 is Go's zero value: "not set" (the new recorder leaves the legacy count empty).
    count = (ev.series.count if ev.series is not None else None) or legacy_count or 1
    if count < 0:
        raise ValueError(f"Event count {count} < 0")

    reason = ev.reason if ev.reason in KNOWN else OTHER
    container = None
    if ref.field_path:
        fm = _FIELD_PATH.match(ref.field_path)
        container = fm["c"] if fm else None
    if container is None:
        cm = _CONTAINER_MSG.match(message)
        container = cm["c"] if cm else None

    image = None
    pull_s = pull_waiting_s = None
    present = False
    size = None
    if ev.reason == "Pulled":
        pm = _PULLED.match(message)
        qm = _PRESENT.match(message)
        if pm:
            try:
                pull_s = parse_go_duration(pm["d"])
                pull_waiting_s = parse_go_duration(pm["w"]) if pm["w"] else None
            except ValueError:
                pull_s = pull_waiting_s = None
                stats.note(UNPARSED)
            image = pm["image"]
            size = int(pm["size"]) if pm["size"] else None
        elif qm:
            image = qm["image"]
            present = True
        else:
            stats.note(UNPARSED)
    elif ev.reason == "Pulling":
        gm = _PULLING.match(message)
        image = gm["image"] if gm else None

    meta = ev.metadata
    return KubeEvent(
        index=index,
        watch_type=wtype,
        api="events.k8s.io/v1" if new_api else "v1",
        reason=reason,
        raw_reason=ev.reason,
        type=ev.type,
        object_kind=ref.kind,
        object_name=ref.name,
        object_uid=ref.uid,
        object_namespace=ref.namespace,
        container=container,
        message=message,
        component=component,
        host=host,
        first_ns=first_ns,
        first_prec_ns=first_prec,
        last_ns=last_ns,
        last_prec_ns=last_prec,
        count=count,
        event_uid=meta.uid if meta else None,
        image=image,
        pull_s=pull_s,
        pull_waiting_s=pull_waiting_s,
        image_present=present,
        image_size=size,
    )
