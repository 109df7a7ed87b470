"""Container log followers that neither lose nor repeat a line across reconnects and restarts.

The kubelet serves ``pods/log?follow=true&timestamps=true`` with each line prefixed by its
own receive time (RFC3339 with nanoseconds).  That prefix is our position in the stream:
``(ts, n)`` = the last timestamp consumed and how many lines carried exactly it.  After a
broken connection we reconnect with ``sinceTime`` (whole seconds, rounded down, all the API
carries) and drop every line before the position and the first ``n`` lines at it, so the
stream resumes exactly after the last line we handed on.  Only while resuming: within one
connection every line is new, whatever its stamp (a node clock can step back).  (The klog header is not usable
for this: it has microseconds but no year, and two lines can share it.)

A follow stream also ends when the container exits.  Each time we reconnect we first read
``previous=true`` from the same position: if the container restarted while we were not
connected, the tail of the old instance is there (lines older than the position are
dropped, so otherwise this is one short request).  Then we follow the current instance.
Timestamps grow across instances, so one position serves both.  Two restarts between looks
(``restartCount`` up by two or more), or a Pod replaced while we were down, lose the
instance in the middle: counted as a gap, not silently skipped.  One window remains: a
restart after our ``previous`` read and before the follow request (below) loses the lines
the old instance wrote in that window (milliseconds).

Each follow stream says when it has caught up, without any timing: right after opening it,
a request without ``follow`` from the same position counts the lines the log holds so far
(its answer ends once they are sent, which a follow stream never marks).  The follow stream
brings those same lines first, so once it has brought that many it is live.  Under load a
backlog can take longer than any fixed wait; "open for a while" was all one could go by
before.  The follower says so through its record channel (see :meth:`LogFollower.caught_up`),
so whoever reads that channel has every record those lines completed before it sees the
stream as caught up.  Two exceptions, both narrow: a multi-line klog block still open at
the count's last line is completed (and handed on) only by a later line; a log rotated
between the two requests makes the count short, and the stream is taken as caught up early.
The count reads the backlog a second time (counted, never kept).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..lines import MAX_LINE_BYTES
from ..sources.klog import split_timestamp_prefix
from .kube import TRANSIENT_ERRORS, Backoff, Kube, KubeError, iter_lines

log = logging.getLogger(__name__)


#: A line stamped further ahead of our clock than this does not move the position (it is
#: still handed on): one bogus far-future prefix must not make a resume skip everything.
FUTURE_SLACK_NS = 10 * 60 * 1_000_000_000


@dataclass
class LogPosition:
    """Where a container's log stream stands (see the module docstring).

    Lines are dropped by their timestamp only while *resuming*: from the start of a
    connection up to the first line past the position (what the previous connections
    already handed on).  Within a live connection every line is new, whatever its stamp:
    a node clock stepping back must not drop lines.  The position is the latest stamp
    handed on (it never moves back), so a resume skips what was read before it.
    """

    ts_ns: int = 0
    n: int = 0
    _eq: int = field(default=0, repr=False, compare=False)
    _resuming: bool = field(default=True, repr=False, compare=False)

    def new_connection(self) -> None:
        self._eq = 0
        self._resuming = True

    def admit(self, ts_ns: int, now_ns: int | None = None) -> bool:
        """Whether a line stamped ``ts_ns`` is new; advances the position if so.

        ``now_ns`` (our clock): a stamp more than :data:`FUTURE_SLACK_NS` ahead of it is
        admitted without moving the position, and dropped while resuming.
        """
        future = now_ns is not None and ts_ns > now_ns + FUTURE_SLACK_NS
        if self._resuming:
            if ts_ns < self.ts_ns or (future and self.ts_ns):
                # a far-future stamp passes every sinceTime: such a line seen while
                # resuming was all but certainly read before (and cannot be placed)
                return False
            if ts_ns == self.ts_ns:
                self._eq += 1
                if self._eq <= self.n:
                    return False
            self._resuming = False
        if future:
            return True
        if ts_ns > self.ts_ns:
            self.ts_ns, self.n = ts_ns, 1
        elif ts_ns == self.ts_ns:
            self.n += 1
        return True


@dataclass(frozen=True)
class StreamPos:
    """An immutable snapshot of a stream's position, as the checkpoint stores it."""

    pod: str
    container: str
    uid: str
    restart_count: int
    ts_ns: int
    n: int

    @property
    def key(self) -> str:
        return f"{self.pod}/{self.container}"

    def to_json(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "restartCount": self.restart_count,
            "ts_ns": self.ts_ns,
            "n": self.n,
        }


@dataclass
class FollowStats:
    lines: int = 0
    duplicates: int = 0
    connects: int = 0
    previous_reads: int = 0
    errors: int = 0


def prefix_ns(line: bytes) -> int | None:
    """The instant of a ``--timestamps`` prefix (``b"2026-06-29T14:36:20.498765432Z
    text"``), read by the one reader of that prefix; ``None`` when there is none."""
    try:  # latin-1 never fails; a prefix is ASCII, and at most 40 bytes long
        return split_timestamp_prefix(line[:41].decode("latin-1"))[0]
    except ValueError:
        return None


def restart_count_of(pod: dict[str, Any] | None, container: str) -> int | None:
    status = (pod or {}).get("status") or {}
    for cs in status.get("containerStatuses") or ():
        if isinstance(cs, dict) and cs.get("name") == container:
            try:
                n = int(cs.get("restartCount") or 0)
            except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 is inf
                return 0
            # an int64, as the API server's; anything else would make the checkpoint unusable
            return n if 0 <= n < 1 << 63 else 0
    return None


#: a record parser: raw lines in, records out (``iter_klog``, the launcher's)
Parser = Callable[[Iterable[bytes]], Iterator[Any]]


class LogFollower:
    """Follows one container of one Pod; :meth:`lines` yields its raw lines, and
    :meth:`snapshot` says where the stream stands after the last one.

    A line keeps the timestamp prefix: the parsers read the year from it (and never
    use it as an instant).  The generator ends when the Pod is gone (or replaced by another
    with the same name: both as the Pod itself shows, never from a ``pods/log`` error) or
    ``stop`` is set.
    """

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        pod: str,
        uid: str,
        container: str,
        *,
        stop: threading.Event,
        position: LogPosition | None = None,
        restart_count: int | None = None,
        backoff: Backoff | None = None,
        read_timeout_s: float = 60.0,
        on_gap: Callable[[], None] | None = None,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.pod = pod
        self.uid = uid
        self.container = container
        self.stop = stop
        self.pos = position or LogPosition()
        self.restart_count = restart_count
        self.backoff = backoff or Backoff()
        self.read_timeout_s = read_timeout_s
        self.on_gap = on_gap
        self.stats = FollowStats()
        self.done = False
        #: the number of the connect whose follow stream has brought its backlog, while
        #: that stream is open; None otherwise (connecting, reading ``previous`` or the
        #: backlog, backing off).  Written by the follower's thread only.
        self._caught_up: int | None = None
        #: the last connect whose "caught up" the reader of the records has taken (see
        #: :meth:`acknowledge`).  Written by that reader only.
        self._acknowledged = 0
        self._connect_no = 0
        self._emit: Callable[[tuple[Any, ...]], None] | None = None
        self.kind = ""  # "dpc" or "launcher", once started
        self.thread: threading.Thread | None = None

    @property
    def key(self) -> str:
        return f"{self.pod}/{self.container}"

    def start(self, parser: Parser, kind: str, emit: Callable[[tuple[Any, ...]], None]) -> LogFollower:
        """Follow on a thread of its own, through a record ``parser``, handing each record to
        ``emit`` as ``(kind, pod, record, position)``; ``("log-ended", kind, key, position)``
        when the stream ends, and ``("log-caught-up", follower, n)`` once the backlog of its
        ``n``-th connect has been read to its end (hand ``n`` to :meth:`acknowledge`).

        The parser (``iter_klog`` or the launcher's) sees one continuous stream of lines
        across reconnects, so a multi-line klog block cut by a reconnect is still joined.
        Each record goes out with the position of the line that completed it: the
        checkpoint then never claims a line whose record the correlator has not received.
        """
        self.kind = kind
        self._emit = emit
        self.thread = threading.Thread(
            target=self._run, args=(parser, emit), name=f"log-{self.key}", daemon=True
        )
        self.thread.start()
        return self

    def _run(self, parser: Parser, emit: Callable[[tuple[Any, ...]], None]) -> None:
        try:
            for rec in parser(self.lines()):
                # the parser has read no line past the one that completed ``rec``
                emit((self.kind, self.pod, rec, self.snapshot()))
        except Exception:  # noqa: BLE001 - a parser bug must not kill the watcher silently
            log.exception("log %s: follower stopped", self.key)
        finally:
            emit(("log-ended", self.kind, self.key, self.snapshot()))

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def snapshot(self) -> StreamPos:
        return StreamPos(
            self.pod, self.container, self.uid, self.restart_count or 0, self.pos.ts_ns, self.pos.n
        )

    @property
    def caught_up(self) -> bool:
        """Whether the stream is live: the current follow stream has brought its backlog
        (the lines the log held when it opened, as counted by a request without
        ``follow``), their records have been taken by their reader, and it is still open.
        Anything written since comes over it as it is written, like any live line.

        Two writers, one each, so no lock: the follower's thread sets ``_caught_up`` after
        the backlog (and clears it when the follow stream ends); the reader of the records
        sets ``_acknowledged`` when it takes the "log-caught-up" item that follows them.
        A flag set by the follower alone could be seen before the records put ahead of it
        were taken (a reader between draining its queue and looking at the flag).
        """
        n = self._caught_up
        return n is not None and n == self._acknowledged

    def acknowledge(self, n: int) -> None:
        """The reader of the records has taken everything before "caught up" of connect ``n``."""
        self._acknowledged = n

    def _gap(self, why: str) -> None:
        log.warning("log %s: gap: %s", self.key, why)
        if self.on_gap:
            self.on_gap()

    def _long_line(self, n: int) -> None:
        log.warning("%s: a log line of %d bytes dropped unread (over %d)", self.key, n, MAX_LINE_BYTES)

    def _request(self, since_ns: int | None, *, follow: bool = False, previous: bool = False) -> Any:
        """One ``pods/log`` request of this container from ``since_ns`` (counted)."""
        resp = self.kube.pod_log(
            self.namespace,
            self.pod,
            self.container,
            follow=follow,
            previous=previous,
            timestamps=True,
            since_ns=since_ns,
            read_timeout_s=self.read_timeout_s if follow else 60.0,
        )
        self.stats.connects += 1
        return resp

    def _read(self, *, follow: bool, previous: bool) -> Iterator[bytes]:
        since_ns = self.pos.ts_ns or None
        resp = self._request(since_ns, follow=follow, previous=previous)
        self.pos.new_connection()
        seen = 0  # lines the stream has brought (before any is dropped as read before)
        backlog = -1  # the follow stream's first that many lines: those written before it opened

        def brought() -> None:
            nonlocal seen
            seen += 1
            if seen == backlog:
                self._mark_caught_up()

        def long_line(n: int) -> None:
            brought()
            self._long_line(n)

        try:
            if follow:
                backlog = self._backlog_lines(since_ns)
                if backlog == 0:
                    self._mark_caught_up()
            for line in iter_lines(resp, on_long=long_line):
                ts = prefix_ns(line)
                if ts is not None and not self.pos.admit(ts, time.time_ns()):
                    self.stats.duplicates += 1
                else:
                    self.stats.lines += 1
                    self.backoff.reset()
                    yield line
                brought()
                if self.stop.is_set():
                    return
        finally:
            self.kube.release(resp)

    def _backlog_lines(self, since_ns: int | None) -> int:
        """How many lines the log holds from ``since_ns`` on, by a request without
        ``follow``: its answer ends once every line written so far is sent, which a follow
        stream never marks.  The follow stream opened just before it, with the same
        ``sinceTime``, brings the same lines first (a log is only appended to), so after
        that many it is live.  The lines are counted, not kept.

        -1 when the count fails (the Pod deleted just now, a cut connection): the follow
        stream is read all the same (it may carry the Pod's last lines), never taken as
        caught up; what waits for it waits until the stream ends, at most ``LOG_WAIT_S``."""
        try:
            resp = self._request(since_ns)
        except (KubeError, *TRANSIENT_ERRORS) as exc:
            log.debug("log %s: its backlog not counted (%s)", self.key, exc)
            return -1
        try:
            return sum(chunk.count(b"\n") for chunk in resp.stream(amt=None, decode_content=False))
        except TRANSIENT_ERRORS as exc:
            log.debug("log %s: its backlog not counted (%s)", self.key, exc)
            return -1
        finally:
            self.kube.release(resp)

    def _mark_caught_up(self) -> None:
        """The backlog is in: say so behind its records (or at once, without a reader)."""
        self._connect_no += 1
        n = self._caught_up = self._connect_no
        if self._emit is None:
            self._acknowledged = n
        else:
            self._emit(("log-caught-up", self, n))

    def lines(self) -> Iterator[bytes]:
        while not self.stop.is_set():
            try:
                pod = self.kube.get_pod(self.namespace, self.pod)
                if pod is None or (pod.get("metadata") or {}).get("uid") != self.uid:
                    self.done = True
                    return
                rc = restart_count_of(pod, self.container)
                if rc is None:  # container not reported yet (Pod still pending)
                    self.stop.wait(self.backoff.next())
                    continue
                if self.restart_count is not None or rc > 0:
                    # Every (re)connect first reads the previous instance from our position.
                    # Not only when restartCount rose: the kubelet switches "previous" the
                    # moment the container restarts, the Pod status says so later, and a
                    # stream cut at that moment would otherwise lose the old instance's tail.
                    # Lines older than the position are dropped, so this costs one short
                    # request (400 when there is no previous instance).
                    if self.restart_count is not None and rc > self.restart_count + 1:
                        self._gap(f"{rc - self.restart_count - 1} container instance(s) restarted unseen")
                    try:
                        got_prev = self.stats.lines
                        yield from self._read(follow=False, previous=True)
                        if self.stats.lines > got_prev:
                            self.stats.previous_reads += 1
                    except KubeError as exc:
                        if exc.status not in (400, 404):
                            raise
                        if self.restart_count is not None and rc > self.restart_count:
                            self._gap(f"previous log unavailable ({exc.message})")
                self.restart_count = rc
                got = self.stats.lines
                if self.stop.is_set():
                    return
                try:
                    yield from self._read(follow=True, previous=False)
                finally:
                    self._caught_up = None
                if self.stats.lines == got:
                    # a stream that ended with nothing new: do not spin against a dead container
                    self.stop.wait(self.backoff.next())
            except KubeError as exc:
                # 404 included: the kubelet answers it while it does not know the Pod yet
                # (just scheduled, or the kubelet restarted).  Whether the Pod is gone is
                # decided above, by the Pod itself (gone, or another uid), never by pods/log.
                self.stats.errors += 1
                log.debug("log %s: %s; retrying", self.key, exc)
                self.stop.wait(self.backoff.next())
            except TRANSIENT_ERRORS as exc:
                # a cut connection or a quiet log hitting the read timeout: resume from pos
                self.stats.errors += 1
                log.debug("log %s: %s; reconnecting", self.key, exc)
                self.stop.wait(
                    min(self.backoff.next(), 1.0) if "timed out" in str(exc) else self.backoff.next()
                )
