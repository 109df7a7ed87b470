"""Pods as the bridge keeps them: the newest state of each.

The reader of Pod JSON is :mod:`fma_otel.sources.pod_json` (re-exported here as
:func:`iter_pod_events`, where callers have always found it).
"""

from __future__ import annotations

from typing import Any

from fma_otel.sources.pod_json import iter_pod_events
from fma_otel.sources.records import PodEvent

__all__ = ["PodEvent", "PodStore", "iter_pod_events"]


def _rv_key(pod: dict[str, Any]) -> tuple[int, str] | None:
    """An order key of a decimal ``metadata.resourceVersion``: ``(digits, digits)`` without
    leading zeros orders as the integers do, with no ``int()`` (which refuses more than
    ``sys.get_int_max_str_digits()`` digits: a hostile file must not stop the bridge).
    Any length orders here, as files may hold anything; the live watcher, which hands a
    version back to the API server, takes only etcd's int64 ones (``live.pods.rv_number``)."""
    meta = pod.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    if not isinstance(rv, str) or not rv.isascii() or not rv.isdigit():
        return None
    d = rv.lstrip("0")
    return (len(d), d)


class PodStore:
    """The newest known state of every Pod, by UID, whatever the order events arrive in.

    "Newest" is decided by ``metadata.resourceVersion`` compared as integers when both
    parse as integers (etcd revisions, which is what every real API server writes), so an
    older event never overwrites a newer one (merged files, re-listed snapshots).  When
    either does not parse, Kubernetes gives no order, so the later arrival wins.  A
    ``DELETED`` event is a state like the others: the bridge still needs a deleted Pod's
    timestamps.
    """

    def __init__(self) -> None:
        self._by_uid: dict[str, tuple[dict[str, Any], tuple[int, str] | None]] = {}

    def add(self, ev: PodEvent) -> bool:
        """Take one event; ``True`` if the stored state changed."""
        if ev.event_type == "BOOKMARK":
            return False
        meta = ev.pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid:
            return False
        rv = _rv_key(ev.pod)
        cur = self._by_uid.get(uid)
        if cur is not None:
            newer = rv > cur[1] if rv is not None and cur[1] is not None else ev.pod != cur[0]
            if not newer:
                return False
        self._by_uid[uid] = (ev.pod, rv)
        return True

    def get(self, uid: str) -> dict[str, Any] | None:
        e = self._by_uid.get(uid)
        return e[0] if e else None

    def remove(self, uid: str) -> None:
        """Forget a Pod entirely (the live watcher, once a deleted Pod's actuations are out)."""
        self._by_uid.pop(uid, None)

    def pods(self) -> list[dict[str, Any]]:
        """Every Pod's newest state, deleted ones included, in order of first arrival."""
        return [e[0] for e in self._by_uid.values()]

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid
