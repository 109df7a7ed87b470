"""Pods as the bridge keeps them: the newest state of each, and a sniffer of input files.

The reader of Pod JSON is :mod:`fma_otel.sources.pod_json` (re-exported here as
:func:`iter_pod_events`, where callers have always found it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from fma_otel.sources.pod_json import iter_pod_events
from fma_otel.sources.records import PodEvent

__all__ = ["PodEvent", "PodStore", "detect_kind", "iter_pod_events", "resource_version"]

_CHUNK = 1 << 16  # what detect_kind sniffs


# --------------------------------------------------------------------------- store


def resource_version(pod: dict[str, Any]) -> str | None:
    meta = pod.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) else None


def _rv_key(rv: str | None) -> tuple[int, str] | None:
    """An order key of a decimal ``resourceVersion``: ``(digits, digits)`` without leading
    zeros orders as the integers do, with no ``int()`` (which refuses more than
    ``sys.get_int_max_str_digits()`` digits: a hostile file must not stop the bridge).
    Any length orders here, as files may hold anything; the live watcher, which hands a
    version back to the API server, takes only etcd's int64 ones (``live.pods.rv_number``)."""
    if rv is None or not rv.isascii() or not rv.isdigit():
        return None
    d = rv.lstrip("0")
    return (len(d), d)


@dataclass
class _Entry:
    pod: dict[str, Any]
    rv: tuple[int, str] | None
    deleted: bool


class PodStore:
    """The newest known state of every Pod, by UID, whatever the order events arrive in.

    "Newest" is decided by ``metadata.resourceVersion`` compared as integers when both
    parse as integers (etcd revisions, which is what every real API server writes), so an
    older event never overwrites a newer one (merged files, re-listed snapshots).  When
    either does not parse, Kubernetes gives no order, so the later arrival wins.  A
    ``DELETED`` event marks the Pod deleted but keeps its last state, because the bridge
    still needs its timestamps.
    """

    def __init__(self) -> None:
        self._by_uid: dict[str, _Entry] = {}

    def add(self, ev: PodEvent) -> bool:
        """Take one event; ``True`` if the stored state (or deletion mark) changed."""
        if ev.event_type == "BOOKMARK":
            return False
        meta = ev.pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid:
            return False
        rv = _rv_key(resource_version(ev.pod))
        deleted = ev.event_type == "DELETED"
        cur = self._by_uid.get(uid)
        if cur is None:
            self._by_uid[uid] = _Entry(ev.pod, rv, deleted)
            return True
        changed = False
        if cur.rv is not None and rv is not None:
            newer = rv > cur.rv
        else:
            newer = ev.pod != cur.pod
        if newer:
            cur.pod, cur.rv = ev.pod, rv
            changed = True
        if deleted and not cur.deleted:
            cur.deleted = True
            changed = True
        return changed

    def get(self, uid: str) -> dict[str, Any] | None:
        e = self._by_uid.get(uid)
        return e.pod if e else None

    def is_deleted(self, uid: str) -> bool:
        e = self._by_uid.get(uid)
        return bool(e and e.deleted)

    def remove(self, uid: str) -> None:
        """Forget a Pod entirely (the live watcher, once a deleted Pod's actuations are out)."""
        self._by_uid.pop(uid, None)

    def pods(self) -> list[dict[str, Any]]:
        """Every Pod's newest state, deleted ones included, in order of first arrival."""
        return [e.pod for e in self._by_uid.values()]

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid


# --------------------------------------------------------------------------- sniffing

_KLOG_HEAD = re.compile(rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ :\]]+:\d+\] ")
_LAUNCHER_HEAD = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - \S+ - \S+ - ")
_UVICORN_CLI = re.compile(rb"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")
_TS_PREFIX = re.compile(rb"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d) ")


def detect_kind(path: str) -> str:
    """Sniff a file: ``"pods"``, ``"klog"``, ``"launcher"``, ``"otlp-json"`` or ``"unknown"``.

    Looks at the first 64 KiB only, so the CLI can say "file of the wrong kind" before it
    parses anything.  For text logs the first recognisable line of up to 50 decides.
    """
    with open(path, "rb") as fh:
        head = fh.read(_CHUNK)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "unknown"
    if text[:1] in (b"{", b"["):
        window = head[:_CHUNK]
        if b'"resourceSpans"' in window:
            return "otlp-json"
        if re.search(rb'"kind"\s*:\s*"(?:Pod|PodList|List)"', window) or re.search(
            rb'"type"\s*:\s*"(?:ADDED|MODIFIED|DELETED|BOOKMARK)"', window
        ):
            return "pods"
        return "unknown"
    for line in text.splitlines()[:50]:
        m = _TS_PREFIX.match(line)
        body = line[m.end() :] if m else line
        if _KLOG_HEAD.match(body):
            return "klog"
        if _LAUNCHER_HEAD.match(body) or _UVICORN_CLI.match(body):
            return "launcher"
    return "unknown"
