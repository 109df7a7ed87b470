"""List + watch of a namespace's Pods that survives what API servers do.

The protocol, and why each step:

1. **list** (paginated) gives every Pod and a resourceVersion ``L``.  Items go out as
   ``LISTED`` events.  The correlator keeps the newest state of each Pod by resourceVersion,
   so seeing a Pod again after a relist changes nothing and emits nothing twice (emission is
   decided by the checkpoint's set of keys, never by event counts).
2. **watch** from ``L`` (or from an older checkpointed resourceVersion ``C`` on the first
   round after a restart, to replay what happened while we were down, deletions included:
   the events are older than the list but the correlator does not care about order).
3. ``ERROR`` with a 410 ``Status`` (or HTTP 410): the resourceVersion left the API server's
   window.  Relist at once, then watch from the fresh version.  Pods that vanished between
   the two lists are reported as gone.  A 410 again before any event or bookmark came
   (a watch window that lags the list) relists only after a backoff.
4. A stream ending cleanly (``timeoutSeconds`` reached) -> watch again from the last
   version seen (events and ``BOOKMARK`` s both advance it); one that ends without an
   event well before its ``timeoutSeconds`` (a proxy cutting watches) -> back off first.
   A broken connection or any other error -> back off (jittered, exponential, capped; reset
   by the next event) and watch again; the position is kept, so nothing is lost or repeated.

Each line is parsed on its own and each Pod handed over as a raw dict: a line that is not
JSON, or an object without metadata, is counted and skipped; it never stops the watch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..jsonsafe import loads
from ..sources.records import PodEvent
from .kube import PODS, TRANSIENT_ERRORS, Backoff, Kube, KubeError, iter_lines

log = logging.getLogger(__name__)

#: how a watch request ended (see :meth:`PodWatcher._watch_once`)
_PROGRESS, _GONE, _EARLY, _QUIET = "progress", "gone", "early", "quiet"


@dataclass
class PodWatchStats:
    """Counters the metrics endpoint shows."""

    lists: int = 0
    relists: int = 0
    watches: int = 0
    events: int = 0
    bookmarks: int = 0
    odd_lines: int = 0
    errors: int = 0


def rv_number(rv: object) -> int | None:
    """A resourceVersion as etcd's integer revision, or ``None`` when it is not one.

    An etcd revision is an int64: at most 19 ASCII digits.  Anything else is opaque (as the
    API contract says they all are): ``str.isdigit`` alone also takes ``"²"``, which
    ``int()`` refuses, and ``int()`` refuses more than 4300 digits, so a checkpoint or an
    answer holding such a string once stopped the watch with a ``ValueError``.
    """
    if not isinstance(rv, str) or not 0 < len(rv) <= 19 or not rv.isascii() or not rv.isdigit():
        return None
    return int(rv)


def rv_older(a: str | None, b: str | None) -> bool:
    """Whether resourceVersion ``a`` is older than ``b``.

    resourceVersions are opaque by contract, but every real API server uses etcd's integer
    revision; compare numerically when both are integers (:func:`rv_number`), and otherwise
    say "not older" (so we fall back to the safe fresh list).
    """
    na, nb = rv_number(a), rv_number(b)
    return na is not None and nb is not None and na < nb


class PodWatcher:
    """Runs in its own thread and hands items to ``emit`` (the main loop's queue).

    Items: ``("pod", PodEvent, rv | None, arrival_s)``, ``("synced", rv)`` after each list,
    ``("gone", uid)`` for Pods missing from a relist, ``("rv", rv)`` for bookmarks.  The
    ``rv`` in an item is the position to checkpoint once the main loop has processed it,
    so a checkpoint never claims more than the correlator has seen.  ``arrival_s`` is
    ``time.time()`` when the object was read off the wire (after its list or watch answer
    arrived, so every change it shows had happened by then: an upper bound on each, which
    the queue's delay would only loosen).

    The list/watch/410 protocol is the resource's; a subclass watches another
    :attr:`resource` by overriding :meth:`_listed` and :meth:`_object` (the Events watch).
    """

    resource = PODS
    #: how log lines name this watch
    what = "pod watch"
    thread_name = "pod-watch"

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        emit: Callable[[tuple[Any, ...]], None],
        *,
        stop: threading.Event,
        resume_rv: str | None = None,
        watch_timeout_s: int = 300,
        backoff: Backoff | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.emit = emit
        self.stop = stop
        self.resume_rv = resume_rv
        self.watch_timeout_s = watch_timeout_s
        self.backoff = backoff or Backoff()
        self.rv: str | None = None
        self.known: dict[str, str] = {}  # uid -> name, to report Pods gone across a relist
        self.stats = PodWatchStats()
        self.connected = False
        self._index = 0
        self._gone_in_a_row = 0  # 410s with no event or bookmark in between

    # ---------------------------------------------------------------- thread

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        t.start()
        return t

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if self.rv is None:
                    self._list()
                outcome = self._watch_once()
            except KubeError as exc:
                if exc.status != 410:
                    self._fail(exc)
                    continue
                outcome = _GONE
            except TRANSIENT_ERRORS as exc:
                self._fail(exc)
                continue
            except Exception as exc:  # noqa: BLE001 - the watch must outlive any surprise
                log.exception("%s: unexpected error", self.what)
                self._fail(exc)
                continue
            self._after_watch(outcome)

    def _after_watch(self, outcome: str) -> None:
        """Relist at once after a 410, re-watch at once after a watch that ran its course;
        back off (the jittered, capped backoff of errors) when that makes no progress: an
        API server whose watch window lags its list (a 410 right after the relist it caused),
        or a proxy that ends every watch at once, would otherwise be asked in a hot loop.
        """
        if outcome == _GONE:
            self.rv = None
            self._gone_in_a_row += 1
            if self._gone_in_a_row == 1:
                log.info("%s expired (HTTP 410); relisting", self.what)
                return
            self._pause(f"{self.what} expired again (HTTP 410, {self._gone_in_a_row} in a row); relisting")
        elif outcome == _PROGRESS:
            self._gone_in_a_row = 0
        elif outcome == _EARLY:
            self._pause(f"{self.what} ended early without an event; watching again")

    def _fail(self, exc: BaseException) -> None:
        self.connected = False
        if not self.stop.is_set():  # (else shutting down: the error is ours, we closed the stream)
            self.stats.errors += 1
            self._pause(f"{self.what}: {exc}; retrying")

    def _pause(self, why: str) -> None:
        if self.stop.is_set():
            return
        delay = self.backoff.next()
        log.warning("%s in %.2fs", why, delay)
        self.stop.wait(delay)

    # ---------------------------------------------------------------- list

    def _list(self) -> None:
        items, rv = self.kube.list_all(self.resource, self.namespace)
        self.stats.relists += self.stats.lists > 0
        self.stats.lists += 1
        self.connected = True
        self._listed(items, rv)

    def _listed(self, items: list[dict[str, Any]], rv: str) -> None:
        """Hand on a list's items, then say the watch is synced at ``rv``."""
        seen: dict[str, str] = {}
        for pod in items:
            md = pod.get("metadata") if isinstance(pod, dict) else None
            if not isinstance(md, dict) or not md.get("uid"):
                self.stats.odd_lines += 1
                continue
            seen[md["uid"]] = md.get("name", "")
            self._index += 1
            self.emit(("pod", PodEvent("LISTED", pod, self._index), None, time.time()))
        for uid in set(self.known) - set(seen):
            self.emit(("gone", uid))
        self.known = seen
        self.rv = rv
        # first round after a restart: replay from the checkpoint's older version (and keep
        # checkpointing that older version until the replay has passed the list's)
        if self.resume_rv and rv_older(self.resume_rv, rv):
            self.rv = self.resume_rv
        self.resume_rv = None
        self.emit(("synced", self.rv))

    # ---------------------------------------------------------------- watch

    def _watch_once(self) -> str:
        """One watch request, read to its end: :data:`_PROGRESS` when it brought an event or
        a bookmark, :data:`_GONE` on a 410, :data:`_EARLY` when it ended without either
        before half its ``timeoutSeconds``, else :data:`_QUIET` (a quiet namespace)."""
        assert self.rv is not None
        started = time.monotonic()
        resp = self.kube.open_watch(self.resource, self.namespace, self.rv, self.watch_timeout_s)
        self.stats.watches += 1
        self.connected = True
        progress = False
        try:
            for line in iter_lines(resp, on_long=self._long_line):
                if self.stop.is_set():
                    return _QUIET
                if not line.strip():
                    continue
                before = self.stats.events + self.stats.bookmarks
                if not self._handle(line):
                    return _GONE
                if self.stats.events + self.stats.bookmarks != before:
                    progress = True
                    self._gone_in_a_row = 0
                    self.backoff.reset()
        finally:
            self.kube.release(resp)
        if progress:
            return _PROGRESS
        if time.monotonic() - started < self.watch_timeout_s / 2:
            return _EARLY
        return _QUIET

    def _long_line(self, n: int) -> None:
        """A watch line past the line limit: no Pod is that big (etcd holds ~1.5 MiB)."""
        self.stats.odd_lines += 1
        log.warning("%s: a line of %d bytes dropped unread", self.what, n)

    def _handle(self, line: bytes) -> bool:
        """One watch line; ``False`` means "the watch expired, relist"."""
        try:
            ev = loads(line)  # every bad line a ValueError, deep nesting included
            etype = ev["type"]
            obj = ev["object"]
        except (ValueError, KeyError, TypeError):
            self.stats.odd_lines += 1
            log.warning("%s: skipped a line that is not a watch event: %.200r", self.what, line)
            return True
        if etype == "ERROR":
            code = obj.get("code") if isinstance(obj, dict) else None
            if code == 410:
                log.debug("%s expired (%s)", self.what, obj.get("message", ""))
                self.rv = None
                return False
            # a code that is no HTTP status (a string, 1e400, true) is a server error all the same
            status = code if isinstance(code, int) and not isinstance(code, bool) and 0 < code < 1000 else 500
            message = obj.get("message", "watch error") if isinstance(obj, dict) else "watch error"
            raise KubeError(status, str(message))
        md = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(md, dict):
            self.stats.odd_lines += 1
            return True
        rv = md.get("resourceVersion")
        if rv:
            self.rv = str(rv)
        if etype == "BOOKMARK":
            self.stats.bookmarks += 1
            self.emit(("rv", self.rv))
            return True
        if etype not in ("ADDED", "MODIFIED", "DELETED") or not md.get("uid"):
            self.stats.odd_lines += 1
            return True
        self._object(etype, obj, md)
        return True

    def _object(self, etype: str, obj: dict[str, Any], md: dict[str, Any]) -> None:
        """One ADDED/MODIFIED/DELETED object with a uid (``self.rv`` is its version)."""
        self.stats.events += 1
        self.resource.typed(obj)
        if etype == "DELETED":
            self.known.pop(md["uid"], None)
        else:
            self.known[md["uid"]] = md.get("name", "")
        self._index += 1
        self.emit(("pod", PodEvent(etype, obj, self._index), self.rv, time.time()))
