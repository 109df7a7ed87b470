"""``watch --vllm-logs``: each finished actuation's vLLM log, fetched before its trace is built.

When the correlator calls an actuation finished, its vLLM log holds what the ``vllm.*``
spans need (startup phases for a cold or warm start, vLLM's own wake time for a hot one).
The watcher holds the actuation back, and a worker thread reads the log once:

* an FMA instance's from its launcher through the pod proxy
  (:func:`~fma_otel.live.vllm_fetch.fetch_instance_log`, ranges of at most 1 MiB);
* a baseline (``cold_no_fma``) Pod's from ``pods/log`` with timestamps.

Bounded, so one slow launcher never holds a trace for long: at most ``max_bytes`` read, the
ranges asked for during at most ``timeout_s``, each request's read timeout within it; the
main loop lets the actuation go :data:`HOLD_SLACK_S` after that even if the thread is stuck.
A failed fetch (403 without the RBAC verb, 404 instance gone, 503 nothing listening) is
counted and logged, and the trace is built without the ``vllm.*`` spans: never lost, never
a stop.  At most :data:`MAX_CONCURRENT` fetches run at once; the others wait their turn in
their threads (the hold's clock runs meanwhile, which is the bound that matters).

The log is parsed in the worker (:func:`~fma_otel.sources.vllm_log.parse_vllm_log`): the
year is the actuation's (UTC) and ``utc_offset_s`` the configured offset of vLLM's local
stamps, as ``fma-otel bridge`` is told for a capture.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .. import model as M
from ..sources.vllm_log import VllmPhase, parse_vllm_log
from .kube import Kube
from .vllm_fetch import LAUNCHER_PORT, FetchResult, fetch_instance_log, fetch_pod_log

log = logging.getLogger(__name__)

#: Fetches running at once (each holds one API server connection).
MAX_CONCURRENT = 4
#: How long past its time bound a fetch may hold its actuation before it goes without.
HOLD_SLACK_S = 5.0


@dataclass(frozen=True)
class Target:
    """Where an actuation's vLLM log is: ``key`` as ``extra_spans`` wants it (instance id,
    or the Pod name of a baseline), and how to read it."""

    key: str
    launcher: str | None  # None: a baseline Pod's container log
    pod: str | None = None
    container: str | None = None


@dataclass
class _Job:
    target: Target
    started: float
    done: bool = False
    phases: list[VllmPhase] = field(default_factory=list)
    result: FetchResult | None = None


@dataclass
class VllmLogStats:
    fetches: int = 0
    errors: int = 0
    partial: int = 0
    timeouts: int = 0  # actuations let go before their fetch ended
    bytes: int = 0
    phases: int = 0


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
        utc_offset_s: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.emit = emit
        self.port = port
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.read_timeout_s = min(read_timeout_s, timeout_s)
        self.utc_offset_s = utc_offset_s
        self.clock = clock
        self.stats = VllmLogStats()
        self._jobs: dict[str, _Job] = {}  # actuation key -> its fetch
        self._slots = threading.Semaphore(MAX_CONCURRENT)

    # ------------------------------------------------------------------ main loop side

    @staticmethod
    def target(a: Any, baseline_containers: dict[str, str]) -> Target | None:
        """The log an actuation needs, or ``None`` (no instance known, no such Pod)."""
        attrs = a.attributes
        if a.path == M.COLD_NO_FMA:
            pod = str(attrs.get(M.A_REQ_NAME) or "")
            container = baseline_containers.get(pod)
            return Target(pod, None, pod, container) if pod and container else None
        instance, launcher = attrs.get(M.A_INSTANCE), attrs.get(M.A_LAUNCHER)
        if not instance or not launcher:
            return None
        return Target(str(instance), str(launcher))

    def ready(self, a: Any, target: Target) -> bool:
        """Whether ``a`` may be built now: its fetch ended, or ran past its bound (then it is
        let go without the log); starts the fetch the first time it is asked."""
        job = self._jobs.get(a.key)
        if job is None:
            job = _Job(target, self.clock())
            self._jobs[a.key] = job
            year = datetime.fromtimestamp(
                min((i.t_ns for i in a.instants.values()), default=0) // M.S, timezone.utc
            ).year
            threading.Thread(
                target=self._work, args=(a.key, job, year), name=f"vllm-log-{target.key[:20]}", daemon=True
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

    def phases(self, key: str) -> dict[str, list[VllmPhase]]:
        """``extra_spans``'s ``vllm`` argument for actuation ``key`` (empty without a log)."""
        job = self._jobs.get(key)
        if job is None or not job.phases:
            return {}
        return {job.target.key: job.phases}

    def forget(self, key: str) -> None:
        """The actuation was built (or dropped): its job and phases go."""
        self._jobs.pop(key, None)

    # ------------------------------------------------------------------ worker

    def _work(self, key: str, job: _Job, year: int) -> None:
        t = job.target
        data = bytearray()
        with self._slots:
            try:
                if t.launcher is not None:
                    res = fetch_instance_log(
                        self.kube,
                        self.namespace,
                        t.launcher,
                        t.key,
                        data.extend,
                        port=self.port,
                        max_bytes=self.max_bytes,
                        deadline_s=self.timeout_s,
                        read_timeout_s=self.read_timeout_s,
                    )
                else:
                    res = fetch_pod_log(
                        self.kube,
                        self.namespace,
                        t.pod or t.key,
                        t.container or "",
                        data.extend,
                        max_bytes=self.max_bytes,
                        read_timeout_s=self.read_timeout_s,
                    )
                phases, _stats = parse_vllm_log(
                    bytes(data).splitlines(), year=year, utc_offset_s=self.utc_offset_s
                )
            except Exception as exc:  # noqa: BLE001 - a surprise costs this log, never the watcher
                log.exception("vLLM log of %s: fetch failed", t.key)
                res, phases = FetchResult(t.key, len(data), error=str(exc)), []
        self.stats.fetches += 1
        self.stats.bytes += len(data)
        if res.error and not data:
            self.stats.errors += 1
            log.warning("vLLM log of %s (%s): not read: %s", t.key, t.launcher or "baseline Pod", res.error)
        elif res.error:
            self.stats.partial += 1
            log.warning("vLLM log of %s: partial (%d bytes): %s", t.key, len(data), res.error)
        if not job.done:
            job.phases, job.result = phases, res
            self.stats.phases += len(phases)
            job.done = True
        self.emit(("vllm", key))
