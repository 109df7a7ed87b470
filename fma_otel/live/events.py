"""List + watch of a namespace's Kubernetes Events, for the startup spans of a trace.

The protocol is the Pod watch's (:class:`~fma_otel.live.pods.PodWatcher`): list, watch from
the list's resourceVersion, relist at once on ``410 Gone``, back off on errors, bookmarks
advance the position.  Only the items differ: each Event becomes a
:class:`~fma_otel.sources.k8s_events.KubeEvent` (``parse_event_item``, the same reading as
``fma-otel bridge --events``) in an ``("event", record)`` item; one that is no Event is a
counted skip.  Through events.k8s.io/v1 (the Events API of record; ``capture`` writes the
core/v1 shape ``kubectl get events -o json`` gives, and the parser reads both), so the Role
grants list and watch on events in both API groups.

No resourceVersion is checkpointed: Events are kept by the API server for about an hour and
a restart lists them again (the main loop keeps the newest version of each by uid), which
gives what the open actuations need without replaying a watch history.

A Role without ``list``/``watch`` on events (a deployment older than this feature) answers
403: that is said once, as a warning, and retried at the backoff's slowest pace, never a
stop; traces are then built without the Events' spans.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from ..sources.k8s_events import KubeEvent, parse_event_item
from ..sources.records import SourceStats
from .kube import EVENTS, KubeError
from .pods import PodWatcher

log = logging.getLogger(__name__)


class EventWatcher(PodWatcher):
    """Runs in its own thread; items ``("event", KubeEvent)``, ``("events-synced", n)``."""

    resource = EVENTS
    what = "event watch"
    thread_name = "event-watch"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.parse_stats = SourceStats("events")
        self.forbidden = False

    def _list(self) -> None:
        try:
            super()._list()
        except KubeError as exc:
            if exc.status == 403:
                self._forbidden(exc)
            raise
        self.forbidden = False

    def _listed(self, items: list[dict[str, Any]], rv: str) -> None:
        for item in items:
            self._emit_item("LISTED", item)
        self.rv = rv
        self.emit(("events-synced", len(items)))

    def _object(self, etype: str, obj: dict[str, Any], md: dict[str, Any]) -> None:
        self.stats.events += 1
        self._emit_item(etype, self.resource.typed(obj))

    def _emit_item(self, etype: str, item: dict[str, Any]) -> None:
        self._index += 1
        rec = parse_event_item(item, self.parse_stats, index=self._index, watch_type=etype)
        if rec is None:
            self.stats.odd_lines += 1
            return
        self.emit(("event", rec))

    def _forbidden(self, exc: KubeError) -> None:
        """Said once; the next tries wait the longest backoff (the Role will not change soon)."""
        if not self.forbidden:
            log.warning(
                "event watch: %s; traces are built without the Events' spans until the Role grants "
                "list and watch on events (deploy/role.yaml)",
                exc,
            )
        self.forbidden = True
        self.backoff.failures = max(self.backoff.failures, 64)


#: Events kept at most (the oldest by last occurrence go first); the API server keeps
#: about an hour of them, and a trace needs only those of Pods with open actuations.
MAX_EVENTS = 50_000


class EventStore:
    """The newest version of each Event (by uid, else namespace/name/reason/first time),
    found by the name of the object it is about.  Main-loop only: no lock."""

    def __init__(self, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        self._by_key: dict[str, KubeEvent] = {}
        self._by_object: dict[str, dict[str, None]] = {}
        self.received = 0

    @staticmethod
    def _key(ev: KubeEvent) -> str:
        return ev.event_uid or f"{ev.object_namespace}/{ev.object_name}/{ev.raw_reason}/{ev.first_ns}"

    def add(self, ev: KubeEvent) -> None:
        self.received += 1
        key = self._key(ev)
        if ev.watch_type == "DELETED":  # (expired by the API server's TTL: nothing to forget)
            return
        old = self._by_key.get(key)
        if old is not None and old.object_name != ev.object_name:
            self._by_object.get(old.object_name or "", {}).pop(key, None)
        self._by_key[key] = ev
        self._by_object.setdefault(ev.object_name or "", {})[key] = None
        if len(self._by_key) > self.max_events:
            self._trim()

    def _trim(self) -> None:
        drop = sorted(self._by_key, key=lambda k: self._by_key[k].last_ns)[
            : len(self._by_key) - self.max_events
        ]
        for key in drop:
            ev = self._by_key.pop(key)
            self._by_object.get(ev.object_name or "", {}).pop(key, None)

    def about(self, names: Iterable[str]) -> list[KubeEvent]:
        """The Events about these objects (Pods by name), in time order."""
        out = [self._by_key[k] for n in dict.fromkeys(names) if n for k in self._by_object.get(n, {})]
        # a deterministic order (never the arrival index, which a relist changes), so a
        # rebuilt trace numbers its spans as the first build did
        return sorted(
            out,
            key=lambda e: (
                e.first_ns,
                e.last_ns,
                e.raw_reason,
                e.object_name or "",
                e.message,
                e.event_uid or "",
            ),
        )

    def forget(self, name: str) -> None:
        """A Pod forgotten by the watcher: its Events go too."""
        for key in self._by_object.pop(name, {}):
            self._by_key.pop(key, None)

    def __len__(self) -> int:
        return len(self._by_key)
