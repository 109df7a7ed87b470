"""``watch --vllm-logs``: each finished actuation's vLLM log, fetched before its trace is built.

When the correlator calls an actuation finished, its vLLM log holds what the ``vllm.*``
spans need (startup phases for a cold or warm start, vLLM's own wake time for a hot one).
The watcher holds the actuation back, and a worker thread reads the log once:

* an FMA instance's from its launcher through the pod proxy
  (:func:`~fma_otel.live.vllm_fetch.fetch_instance_log`, ranges of at most 1 MiB);
* a baseline (``cold_no_fma``) Pod's from ``pods/log`` with timestamps.

An instance's log is kept (:data:`CACHE_MAX_BYTES` in all), so the next actuation of the
same instance (a hot start's wake) asks only for the bytes added since, after checking the
head is unchanged (a new instance under the same id starts a new log).

Bounded, so one slow launcher never holds a trace for long: at most ``max_bytes`` read, the
ranges asked for during at most ``timeout_s``, each request's read timeout within it; the
main loop lets the actuation go :data:`HOLD_SLACK_S` after that even if the thread is stuck.
A failed fetch (403 without the RBAC verb, 404 instance gone, 503 nothing listening) is
counted and logged, and the trace is built without the ``vllm.*`` spans: never lost, never
a stop.  At most :data:`MAX_CONCURRENT` fetches run at once; the others wait their turn in
their threads (the hold's clock runs meanwhile, which is the bound that matters).

The log is parsed in the worker, off the main loop, exactly as ``fma-otel bridge`` reads a
captured one (:class:`fma_otel.phase_inputs.PhaseSources`), so live and offline give the same
spans and ids: lines as :func:`~fma_otel.lines.bounded_lines` gives them, a first read
with offset 0 in the year of :func:`~fma_otel.phase_spans.vllm_reference`, the log's clock
from :func:`~fma_otel.phase_spans.vllm_clock` (vLLM stamps local time without a zone), then
the records read with that clock.
"""

from __future__ import annotations

import functools
import io
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from .. import model as M
from ..lines import MAX_LINE_BYTES, bounded_lines
from ..sources.vllm_log import VllmPhase, parse_vllm_log
from .kube import Kube
from .vllm_fetch import LAUNCHER_PORT, FetchResult, fetch_instance_log, fetch_pod_log

log = logging.getLogger(__name__)

#: Fetches running at once (each holds one API server connection).
MAX_CONCURRENT = 4
#: Jobs remembered before the finished, old ones are let go.
MAX_JOBS = 1000
#: How long past its time bound a fetch may hold its actuation before it goes without.
HOLD_SLACK_S = 5.0
#: Instance logs kept between fetches, in all (least recently used first out): a later
#: actuation of the same instance (each wake of a hot instance) reads only what was added.
CACHE_MAX_BYTES = 64 << 20
#: The head of a kept log asked for again to tell it is still the same log: an instance
#: deleted and created again under the same id starts a new file (its first line, the
#: launcher's "VLLM process (PID: N) started." with its time, differs).
PREFIX_CHECK_BYTES = 4096


@dataclass(frozen=True)
class Target:
    """Where an actuation's vLLM log is: ``key`` as ``extra_spans`` wants it (instance id,
    or the Pod name of a baseline), and how to read it."""

    key: str
    launcher: str | None  # None: the log of the baseline Pod named ``key``, its ``container``'s
    container: str | None = None


@dataclass
class _Job:
    target: Target
    started: float
    done: bool = False
    phases: list[VllmPhase] = field(default_factory=list)
    clock_assumed: bool = False  # no instant dated the log: UTC assumed (fma.clock.assumed_utc)


@dataclass
class VllmLogStats:
    fetches: int = 0
    errors: int = 0
    partial: int = 0
    timeouts: int = 0  # actuations let go before their fetch ended
    bytes: int = 0


class VllmLogs:
    """The fetches of the actuations held for their vLLM log (main-loop side and workers)."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        emit: Callable[[tuple[Any, ...]], None],
        *,
        port: int = LAUNCHER_PORT,
        max_bytes: int = 16 << 20,
        timeout_s: float = 20.0,
        read_timeout_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.emit = emit
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.read_timeout_s = min(read_timeout_s, timeout_s)
        self.clock = clock
        self.stats = VllmLogStats()
        self._jobs: dict[str, _Job] = {}  # actuation key -> its fetch
        self._slots = threading.Semaphore(MAX_CONCURRENT)
        self._cache: dict[tuple[str, str], bytes] = {}  # (launcher, instance) -> log, LRU order
        self._cache_lock = threading.Lock()
        #: one range read of an instance's log: ``(launcher, instance, write, start=, max_bytes=)``
        self._fetch = functools.partial(
            fetch_instance_log,
            kube,
            namespace,
            port=port,
            deadline_s=timeout_s,
            read_timeout_s=self.read_timeout_s,
        )

    # ------------------------------------------------------------------ main loop side

    @staticmethod
    def target(a: Any, baseline_containers: dict[str, str]) -> Target | None:
        """The log an actuation needs, or ``None`` (no instance or launcher known, a path
        without a vLLM log, a baseline Pod without its container)."""
        from ..phase_spans import vllm_key

        key = vllm_key(a)
        if not key:
            return None
        if a.path == M.COLD_NO_FMA:
            container = baseline_containers.get(key)
            return Target(key, None, container) if container else None
        launcher = a.attributes.get(M.A_LAUNCHER)
        return Target(key, str(launcher)) if launcher else None

    def ready(self, a: Any, target: Target) -> bool:
        """Whether ``a`` may be built now: its fetch ended, or ran past its bound (then it is
        let go without the log); starts the fetch the first time it is asked."""
        job = self._jobs.get(a.key)
        if job is None:
            self._prune()
            job = _Job(target, self.clock())
            self._jobs[a.key] = job
            # what the clock of the log is read from, frozen: the worker must not read an
            # actuation the main loop may still change
            snap = SimpleNamespace(path=a.path, attributes=dict(a.attributes), instants=dict(a.instants))
            threading.Thread(
                target=self._work, args=(a.key, job, snap), name=f"vllm-log-{target.key[:20]}", daemon=True
            ).start()
            return False
        if job.done:
            return True
        if self.clock() - job.started >= self.timeout_s + self.read_timeout_s + HOLD_SLACK_S:
            self.stats.timeouts += 1
            log.warning("%s: built without its vLLM log (%s): the fetch is still running", a.key, target.key)
            job.done = True  # what the thread finds later is dropped
            return True
        return False

    def _prune(self) -> None:
        """Jobs of actuations that were never built (evicted while held) do not pile up."""
        if len(self._jobs) < MAX_JOBS:
            return
        old = self.clock() - 2 * (self.timeout_s + self.read_timeout_s + HOLD_SLACK_S)
        for key in [k for k, j in self._jobs.items() if j.done and j.started < old]:
            del self._jobs[key]

    def phases(self, key: str) -> tuple[dict[str, list[VllmPhase]], list[str]]:
        """``extra_spans``'s ``vllm`` and ``vllm_clock_assumed`` arguments for actuation
        ``key`` (empty without a log)."""
        job = self._jobs.get(key)
        if job is None or not job.done or not job.phases:
            return {}, []
        return {job.target.key: job.phases}, [job.target.key] if job.clock_assumed else []

    def forget(self, key: str) -> None:
        """The actuation was built (or dropped): its job and phases go."""
        self._jobs.pop(key, None)

    # ------------------------------------------------------------------ worker

    def _work(self, key: str, job: _Job, act: Any) -> None:
        t = job.target
        data = bytearray()
        with self._slots:
            try:
                if t.launcher is not None:
                    data, res = self._instance_log(t.launcher, t.key)
                else:
                    res = fetch_pod_log(
                        self.kube,
                        self.namespace,
                        t.key,
                        t.container or "",
                        data.extend,
                        max_bytes=self.max_bytes,
                        read_timeout_s=self.read_timeout_s,
                    )
                phases, assumed = read_with_clock(act, bytes(data))
            except Exception as exc:  # noqa: BLE001 - a surprise costs this log, never the watcher
                log.exception("vLLM log of %s: fetch failed", t.key)
                res, phases, assumed = FetchResult(len(data), error=str(exc)), [], False
        self.stats.fetches += 1
        self.stats.bytes += res.written
        if res.error and not data:
            self.stats.errors += 1
            log.warning("vLLM log of %s (%s): not read: %s", t.key, t.launcher or "baseline Pod", res.error)
        elif res.error:
            self.stats.partial += 1
            log.warning("vLLM log of %s: partial (%d bytes): %s", t.key, len(data), res.error)
        if not job.done:
            job.phases, job.clock_assumed = phases, assumed
            job.done = True
        self.emit(("vllm", key))

    def _instance_log(self, launcher: str, instance: str) -> tuple[bytearray, FetchResult]:
        """The instance's whole log as far as it can be read: what was kept, checked and
        extended by the bytes added since (or read afresh when the log was replaced)."""
        ck = (launcher, instance)
        with self._cache_lock:
            kept = self._cache.pop(ck, b"")
        data = bytearray(kept)
        if data:
            n = min(len(data), PREFIX_CHECK_BYTES)
            head = bytearray()
            check = self._fetch(launcher, instance, head.extend, start=0, max_bytes=n)
            if len(head) < n and check.status not in (200, 206):
                return data, check  # gone or unreachable: what was kept is all there is
            if bytes(head) != bytes(data[:n]):
                data = bytearray()  # another log under the same id
        res = self._fetch(launcher, instance, data.extend, start=len(data), max_bytes=self.max_bytes)
        if data and res.written == 0 and res.total is not None and res.total < len(data):
            data = bytearray()  # shorter than what was kept: another log
            res = self._fetch(launcher, instance, data.extend, start=0, max_bytes=self.max_bytes)
        if data and len(data) <= CACHE_MAX_BYTES:
            with self._cache_lock:
                self._cache[ck] = bytes(data)
                size = sum(len(v) for v in self._cache.values())
                for old in list(self._cache):
                    if size <= CACHE_MAX_BYTES:
                        break
                    size -= len(self._cache.pop(old))
        return data, res


def read_with_clock(act: Any, data: bytes) -> tuple[list[VllmPhase], bool]:
    """The log's records read with its clock, and whether that clock was assumed (UTC);
    no records when the actuation has no instant to date the log by.  Read as the bridge
    reads a captured one (both through :func:`~fma_otel.phase_spans.read_dated`)."""
    from ..phase_spans import read_dated

    # line by line as the bridge streams a file: an over-long line is an empty one
    lines = [ln if ln.__class__ is bytes else b"" for ln in bounded_lines(io.BytesIO(data), MAX_LINE_BYTES)]
    got = read_dated(act, lambda year, offset: parse_vllm_log(lines, year=year, utc_offset_s=offset)[0])
    return got or ([], False)
