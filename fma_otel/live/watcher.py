"""The live bridge's main loop: streams in, one trace per actuation out, exactly once.

Threads only *read*: the Pod watch and each log follower push items onto one queue.  One
thread - this loop - owns the correlator, decides what is finished, emits, and writes the
checkpoint, so there is no locking around the engine and the order "emit, then checkpoint"
is a plain sequence of statements.

Exactly once (details in ``docs/watch.md``):

1. The set of emitted keys lives in the checkpoint; a key in it is never emitted again.
2. Per batch: (if OTLP is on) write the checkpoint with the keys as ``pending``; append the
   traces to ``--out`` and ``fsync``; export over OTLP; write the checkpoint with the keys
   in ``emitted``.  A SIGKILL anywhere leaves one of: nothing written (the batch is rebuilt
   and emitted after restart), traces in the file but not in the checkpoint (the restart
   reads the file's trace ids and does not write them again), or keys pending (their
   traces are read back from ``--out``, or from the checkpoint without one, and exported
   again over OTLP with the same derived ids, so the backend sees the same spans).
   The OTLP export runs on a worker thread (one at a time) so that a collector that is
   down never stalls intake; the loop moves the keys to ``emitted`` only once it is done.
   Built traces whose export failed are kept (in memory, and in ``--out`` or the
   checkpoint) and re-sent as they are, so a long outage loses nothing.  One trace never
   holds back the others: a trace that cannot be encoded is neither written nor sent but
   recorded as emitted and counted as dropped (the sink also leaves out, and reports, any
   such trace it is handed, say one read back after a restart); after a failed job
   of several traces each is retried alone, and one that fails alone is "isolated": it
   is retried alone, taking turns with the batches of the others (see ``_next_job``).
3. The correlator's state is only in memory; a restart rebuilds it by re-reading the Pods
   (list, then a watch from the checkpointed resourceVersion) and the logs from
   ``replay_from_ns`` (the start of the oldest actuation still open, minus a margin).  The
   replay does not reach back to every unbind of a requester actuated several times, so
   each requester's round count is checkpointed too (``rounds``) and seeds the rebuilt
   correlator: its open round keeps its number, and so its key.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import model as M
from .. import podfacts as P
from ..phase_inputs import BOOT_LINE  # the launcher's boot, read as the bridge reads it
from ..sources.launcher_log import iter_launcher_log
from ..sources.records import PodEvent, SourceStats
from ..span_records import SpanRecord
from . import checkpoint as CP
from .events import EventStore, EventWatcher
from .kube import Backoff, Kube, make_api_client
from .logs import LogFollower, LogPosition, StreamPos
from .metrics import Metrics, MetricsServer
from .outfile import OutFile, OutFileError
from .pods import PodWatcher, rv_number
from .vllm_logs import VllmLogs

log = logging.getLogger(__name__)


@dataclass
class WatchConfig:
    """Everything ``fma-otel watch`` can be told; test-only knobs have short defaults there."""

    namespace: str
    kubeconfig: str | None = None
    context: str | None = None
    launcher_logs: bool = False
    events: bool = True  # watch the namespace's Events (live/events.py)
    vllm_logs: bool = False  # fetch each finished actuation's vLLM log (live/vllm_logs.py)
    vllm_log_max_bytes: int = 16 << 20
    vllm_log_timeout_s: float = 20.0
    launcher_port: int = 8001
    baseline_selector: str | None = None
    baseline_container: str | None = None
    checkpoint: str | None = None
    out: str | None = None
    out_max_bytes: int | None = None  # rotate --out by size (outfile.py); None: never
    out_keep: int = 4
    otlp_endpoint: str | None = None
    otlp_protocol: str | None = None
    incomplete_after_s: float = 15 * 60
    grace_s: float = 1.0
    dpc_selector: str = P.DPC_SELECTOR
    dpc_container: str = P.DPC_CONTAINER
    metrics_port: int | None = 9464
    metrics_host: str = "0.0.0.0"
    tick_s: float = 0.1
    checkpoint_interval_s: float = 5.0
    watch_timeout_s: int = 300
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    log_read_timeout_s: float = 60.0
    replay_margin_s: float = 120.0
    retention_s: float = 24 * 3600
    export_retry_s: float = 5.0
    clock_tolerance_ns: int = 1_000_000  # --clock-tolerance-ms (fma_otel.instants)


#: Traces per OTLP export job (a backlog after an outage goes out in several jobs).
EXPORT_TRACES_PER_JOB = 200

#: How long a finished actuation waits for a log stream it needs that is reconnecting
#: (or has not yet caught up with it) before it is emitted without that stream's facts.
LOG_WAIT_S = 30.0


@dataclass
class _Unacked:
    """A trace built and written (``--out``) whose OTLP export has not succeeded yet."""

    spans: list[SpanRecord]
    complete: bool
    ready_s: float | None = None  # R.ready, unix seconds (for the lag metric)


@dataclass
class _ExportJob:
    keys: list[str]
    thread: threading.Thread = field(init=False)
    error: BaseException | None = None
    #: trace id -> why, for traces the sink refused to send (``OtlpSink.export``'s answer)
    dropped: dict[str, str] = field(default_factory=dict)


@dataclass
class _State:
    """Bookkeeping of the main loop (not the correlator's)."""

    pod_rv: str | None = None
    synced: bool = False
    positions: dict[str, StreamPos] = field(default_factory=dict)
    followers: dict[str, LogFollower] = field(default_factory=dict)
    ready_seen: dict[str, float] = field(default_factory=dict)  # requester uid -> wall s of Ready event
    gone_at: dict[str, float] = field(default_factory=dict)  # uid -> wall s the Pod was deleted
    first_rv: dict[str, int] = field(default_factory=dict)  # uid -> oldest resourceVersion seen
    unacked: dict[str, _Unacked] = field(default_factory=dict)  # built, not yet through OTLP
    export_retry_at: float = 0.0
    dirty: bool = False


def dpc_parser(lines: Iterable[bytes], stats: SourceStats | None = None) -> Iterator[Any]:
    """DPC log lines -> :class:`KlogRecord` s of the messages the correlator uses; the lines
    the parser skips (corrupt, cut) are counted in ``stats``."""
    from ..facts import WANTED_CONTAINS, WANTED_MESSAGES
    from ..sources.klog import iter_klog

    stats = stats if stats is not None else SourceStats("dpc")
    yield from iter_klog(lines, stats, messages=WANTED_MESSAGES, contains=WANTED_CONTAINS)


class _MeteredStats(SourceStats):
    """A log stream's stats whose every skip is counted in ``/metrics`` as it happens
    (the stream is parsed on its follower's thread for as long as the stream lasts)."""

    def __init__(self, name: str, on_skip: Callable[[], None]) -> None:
        super().__init__(name)
        self.on_skip = on_skip

    def skip(self, line_no: int, reason: str) -> None:
        super().skip(line_no, reason)
        self.on_skip()


def log_parser(kind: str, metrics: Metrics) -> Callable[[Iterable[bytes]], Iterator[Any]]:
    """The parser of a followed log of ``kind`` (``dpc`` or ``launcher``), its skips counted
    in ``/metrics`` as they happen (``fma_otel_{kind}_lines_skipped_total``; the DPC's also
    counts the records the correlator refuses)."""
    stats = _MeteredStats(kind, functools.partial(metrics.count, f"{kind}_skipped"))
    if kind == "launcher":  # each record as its line arrives, the boot line among them
        return functools.partial(iter_launcher_log, stats=stats, at_once=True)
    return functools.partial(dpc_parser, stats=stats)


_FAULTS: dict[str, int] = {}


def _fault(point: str) -> None:
    """Test hook: ``FMA_OTEL_FAULT=after-write:2`` SIGKILLs the process at the 2nd such point.

    The crash windows that exactly-once is about (between writing and checkpointing) are
    milliseconds wide; tests hit them deterministically with this instead of by luck.
    """
    import os

    spec = os.environ.get("FMA_OTEL_FAULT")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if name != point:
        return
    _FAULTS[point] = _FAULTS.get(point, 0) + 1
    if _FAULTS[point] >= int(nth or 1):
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def _uid(a: Any) -> str:
    return str(a.attributes.get(M.A_REQ_UID, ""))


def _ready_s(a: Any) -> float | None:
    ready = a.instants.get("R.ready")
    return None if ready is None else ready.t_ns / M.S


class LiveWatcher:
    """``fma-otel watch``: see the module docstring.  ``run()`` returns the exit code."""

    def __init__(self, cfg: WatchConfig, *, api_client: Any = None):
        self.cfg = cfg
        self.clock = time.time
        self.stop = threading.Event()
        self.queue: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self.metrics = Metrics()
        self.state = _State()
        self._api_client = api_client
        self.kube: Kube | None = None
        self.metrics_server: MetricsServer | None = None
        self.pod_watcher: PodWatcher | None = None
        self.out: OutFile | None = None
        self.sink: Any = None
        self.cp = CP.Checkpoint(namespace=cfg.namespace)
        self._baseline = P.parse_selector(cfg.baseline_selector)
        self._dpc_selector = P.parse_selector(cfg.dpc_selector) or {}
        self._last_cp = 0.0
        self._last_tick = 0.0
        self._export_job: _ExportJob | None = None
        #: keys of a failed job of several traces: each is tried alone next
        self._suspects: set[str] = set()
        #: keys that failed alone, oldest turn first: each job of them is one trace
        self._isolated: dict[str, None] = {}
        self._isolated_turn = False
        self._next_forget = 0.0
        self._held_for_logs: dict[str, float] = {}  # key -> wall s it was first held back
        self._checkpoint_failed = False  # the last checkpoint write failed
        self.event_watcher: EventWatcher | None = None
        self.events = EventStore()
        self._events_synced = False
        self._events_wait_from: float | None = None
        self._events_wait_said = False
        self.vllm: VllmLogs | None = None
        self._baseline_containers: dict[str, str] = {}  # baseline Pod name -> its vLLM container
        #: launcher Pod -> its log's first "Application startup complete." (fma.launcher.boot)
        self._launcher_boot: dict[str, int] = {}
        self._extra_failed = 0

    # ------------------------------------------------------------------ lifecycle

    def request_stop(self, *_: Any) -> None:
        """Signal-safe: the loop notices within one tick, flushes, checkpoints, returns 0
        (1 when that checkpoint cannot be written)."""
        self.stop.set()

    def healthy(self) -> tuple[bool, str]:
        # OTLP exports run on a worker thread, so a collector that is down (each attempt
        # may take its timeout, 10 s, plus 2 s) never holds the loop; nothing else it does
        # blocks for long, so 10 s without a tick means it is stuck.
        age = self.clock() - self._last_tick
        if self._last_tick and age > max(10.0, 50 * self.cfg.tick_s):
            return False, f"main loop stalled for {age:.1f}s"
        if not self.state.synced:
            return False, "pods not listed yet"
        if self.pod_watcher and not self.pod_watcher.connected:
            return False, "pod watch disconnected (retrying)"
        return True, "ok"

    def _setup(self) -> None:
        from ..correlate import Correlator

        cfg = self.cfg
        self.cp = CP.load(cfg.checkpoint)
        if self.cp.namespace and self.cp.namespace != cfg.namespace:
            raise ValueError(
                f"checkpoint {cfg.checkpoint} belongs to namespace {self.cp.namespace!r}, not {cfg.namespace!r}"
            )
        self.cp.namespace = cfg.namespace
        self.correlator = Correlator(
            baseline_selector=self._baseline,
            baseline_container=cfg.baseline_container,
            tolerance_ns=cfg.clock_tolerance_ns,
        )
        for uid, (rnd, unbound_ns, begun) in self.cp.rounds.items():
            self.correlator.seed_round(uid, rnd, unbound_ns, begun)
        from ..sinks import otlp_export

        # first: an OTLP setting the exporter refuses stops the start before --out is touched
        if otlp_export.otlp_configured(cfg.otlp_endpoint):
            self.sink = self._make_sink()
        if cfg.out:
            self.out = OutFile(cfg.out, cfg.out_max_bytes, cfg.out_keep)
        self._recover_pending()
        for key in self.cp.emitted:
            self.correlator.evict(key)
        self.state.pod_rv = self.cp.pod_rv
        if cfg.metrics_port is not None:
            self.metrics_server = MetricsServer(
                self.metrics, cfg.metrics_port, self.healthy, cfg.metrics_host
            ).start()
        self.metrics.extra = self._stream_metrics
        self.kube = Kube(self._api_client or make_api_client(cfg.kubeconfig, cfg.context))
        watching = {"stop": self.stop, "watch_timeout_s": cfg.watch_timeout_s}
        self.pod_watcher = PodWatcher(
            self.kube,
            cfg.namespace,
            self.queue.put,
            resume_rv=self.cp.pod_rv,
            backoff=self._backoff(),
            **watching,
        )
        self.pod_watcher.start()
        if cfg.events:
            self.event_watcher = EventWatcher(
                self.kube, cfg.namespace, self.queue.put, backoff=self._backoff(), **watching
            )
            self.event_watcher.start()
        if cfg.vllm_logs:
            self.vllm = VllmLogs(
                self.kube,
                cfg.namespace,
                self.queue.put,
                port=cfg.launcher_port,
                max_bytes=cfg.vllm_log_max_bytes,
                timeout_s=cfg.vllm_log_timeout_s,
                read_timeout_s=cfg.log_read_timeout_s,
            )

    def _backoff(self) -> Backoff:
        """Each stream its own: one stream's failures must not slow the others' retries."""
        return Backoff(self.cfg.backoff_base_s, self.cfg.backoff_max_s)

    def _make_sink(self) -> Any:
        from ..sinks import otlp_export

        return otlp_export.OtlpSink(endpoint=self.cfg.otlp_endpoint, protocol=self.cfg.otlp_protocol)

    @property
    def _traces_in_checkpoint(self) -> bool:
        """Without an ``--out`` file to read them back from, pending traces live in the checkpoint."""
        return self.out is None or self.out.path == "-"

    def _recover_pending(self) -> None:
        """Keys caught between "pending" and "emitted" by a crash (or a stop while OTLP was down).

        Their traces were written to ``--out`` (or, without one, into the checkpoint) before
        the export began, so they are re-sent from there as they were, whether or not the
        correlator can rebuild them (a requester deleted while we were down cannot be).  A
        pending key whose trace is in neither was never written nor exported: it is
        emitted if the restart rebuilds it.
        """
        cp = self.cp
        pending, stored = list(cp.pending), dict(cp.pending_traces)
        cp.pending, cp.pending_traces = [], {}
        if not pending:
            return
        present = self.out.present if self.out else set()
        if self.sink is None:  # OTLP is off now: only the file counts
            for key in pending:
                if M.trace_id_for(key) in present:
                    cp.emitted.setdefault(key, self.clock())
            return
        from ..sinks.otlp_json import decode_request, export_request

        found: dict[str, list[SpanRecord]] = {}
        for key in pending:
            if key in stored:
                try:
                    found[key] = decode_request(stored[key])
                except Exception:  # noqa: BLE001 - a hand-edited checkpoint: fall back to the file
                    log.warning("pending trace of %s in the checkpoint is unreadable", key)
        want = {M.trace_id_for(k): k for k in pending if k not in found and M.trace_id_for(k) in present}
        if want and self.out is not None:
            from ..query.readers import read_spans

            for path in self.out.paths():  # (rotated files too: a rotation may follow the write)
                try:
                    for span in read_spans(path):
                        key = want.get(span.trace_id)
                        if key is not None:
                            found.setdefault(key, []).append(span)
                except Exception:  # noqa: BLE001 - whatever we could read is still re-sent
                    log.exception("reading pending traces back from %s", path)
        for key in pending:
            spans = found.get(key)
            if not spans:
                log.info("pending key %s was not written before the crash: emitted when rebuilt", key)
                continue
            root = next((s for s in spans if not s.parent_span_id), spans[0])
            complete = root.attributes.get(M.A_COMPLETE, True) is not False
            self.state.unacked[key] = _Unacked(spans, complete)
            if self._traces_in_checkpoint:
                cp.pending_traces[key] = stored.get(key) or export_request(spans)
        cp.pending = list(self.state.unacked)
        if cp.pending:
            log.info("re-exporting %d trace(s) left pending by the previous run", len(cp.pending))

    def run(self) -> int:
        """Watch until stopped: 0 then, 1 if the final checkpoint could not be written.

        Raises :class:`OutFileError` when ``--out`` cannot be written.
        """
        self._setup()
        out_failed = False
        try:
            while not self.stop.is_set():
                self._drain(self.cfg.tick_s)
                self._tick()
        except OutFileError:
            out_failed = True  # not written again on the way out: one error, said once
            raise
        finally:
            self._shutdown(flush=not out_failed)
        if self._checkpoint_failed:
            log.error(
                "checkpoint %s: the final checkpoint could not be written; a restart resumes from the "
                "previous one",
                self.cfg.checkpoint,
            )
            return 1
        return 0

    def _shutdown(self, flush: bool = True) -> None:
        """SIGTERM path: take what already arrived, emit what is finished, checkpoint.

        ``flush=False`` (``--out`` failed) only lets go of streams, exporter and file: the
        checkpoint stays the last one written, which a restart resumes from.
        """
        try:
            if flush:
                self._drain(0)
                self._tick(force_checkpoint=True, final=True)
        finally:
            self.stop.set()
            if self.kube:
                self.kube.shutdown()
            if self.sink is not None:
                try:
                    self.sink.close()
                except Exception:  # noqa: BLE001
                    log.exception("closing the OTLP exporter")
            if self.out:
                self.out.close()
            if self.metrics_server:
                self.metrics_server.stop()

    # ------------------------------------------------------------------ intake

    def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                item = self.queue.get(timeout=left) if left > 0 else self.queue.get_nowait()
            except queue.Empty:
                return
            self._handle(item)
            if self.stop.is_set() and timeout > 0:
                return

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        st = self.state
        if kind == "pod":
            self._on_pod(*item[1:])
        elif kind == "dpc":
            _, _pod, rec, pos = item
            try:
                self.correlator.add_dpc(rec)
                self.metrics.dpc_records += 1
            except ValueError as exc:
                self.metrics.dpc_skipped += 1
                log.debug("DPC line %s skipped: %s", rec.line_no, exc)
            self._position(pos)
        elif kind == "launcher":
            _, pod, rec, pos = item
            try:
                self.correlator.add_launcher(pod, rec)
                self.metrics.launcher_records += 1
                if rec.message == BOOT_LINE and pod not in self._launcher_boot:
                    self._launcher_boot[pod] = rec.t_ns
            except Exception:  # noqa: BLE001 - one bad record never stops the watcher
                log.exception("launcher record skipped")
            self._position(pos)
        elif kind == "log-caught-up":
            # every record of that connect's backlog was ahead of this in the queue: taken
            _, follower, n = item
            follower.acknowledge(n)
        elif kind == "log-ended":
            _, _kind, key, snap = item
            ft = st.followers.get(key)
            if ft is not None and not ft.alive:
                del st.followers[key]
            if snap.ts_ns:
                self._position(snap)
        elif kind == "synced":
            st.pod_rv = item[1]
            if not st.synced:
                st.synced = True
                self._after_first_list()
            st.dirty = True
        elif kind == "gone":
            st.gone_at.setdefault(item[1], self.clock())
        elif kind == "rv":
            st.pod_rv = item[1]
            st.dirty = True
        elif kind == "event":
            self.events.add(item[1])
            self.correlator.add_kube_events((item[1],))
        elif kind == "events-synced":
            self._events_synced = True
        # ("vllm", key): a fetch ended; the next tick finds it done

    def _position(self, pos: StreamPos | None) -> None:
        if pos is not None:
            self.state.positions[pos.key] = pos
            self.state.dirty = True

    def _on_pod(self, ev: PodEvent, rv: str | None, arrival_s: float) -> None:
        st = self.state
        self.metrics.pod_events += 1
        if rv:
            st.pod_rv = rv
            st.dirty = True
        pod = ev.pod
        try:
            uid = P.uid(pod) or ""
            if not self.correlator.add_pod(ev):
                # another Pod (name, namespace) already has this uid: one of them is corrupt,
                # and merging them would make one trace of two requesters
                self.metrics.uid_conflicts += 1
                log.warning(
                    "pod %s/%s refused: its uid %s is already another Pod's",
                    P.namespace(pod),
                    P.name(pod),
                    uid,
                )
                return
            # what this state shows had happened by its arrival (used where that narrows)
            self.correlator.add_arrival(pod, int(arrival_s * M.S))
            rv = rv_number(P.resource_version(pod))
            if rv is not None:
                st.first_rv[uid] = min(rv, st.first_rv.get(uid, rv))
            if ev.event_type == "DELETED":
                st.gone_at.setdefault(uid, self.clock())
            role = P.role(pod, self._baseline)
            if role == P.ROLE_BASELINE:
                self._note_baseline(pod)
            if role in (P.ROLE_REQUESTER, P.ROLE_BASELINE):
                ready = P.condition_true_ns(pod, "Ready")
                if ready is None:
                    st.ready_seen.pop(uid, None)  # not Ready (again): the next Ready starts a clock
                elif uid not in st.ready_seen and ev.event_type != "LISTED":
                    st.ready_seen[uid] = self.clock()
            if ev.event_type != "DELETED":
                if P.labels_match(self._dpc_selector, pod):
                    self._ensure_follower(pod, self.cfg.dpc_container, "dpc")
                elif self.cfg.launcher_logs and role == P.ROLE_LAUNCHER:
                    self._ensure_follower(pod, P.LAUNCHER_CONTAINER, "launcher")
        except Exception:  # noqa: BLE001 - one odd Pod never stops the watch
            self.metrics.odd_pods += 1
            log.exception(
                "pod %s skipped", (pod.get("metadata") or {}).get("name") if isinstance(pod, dict) else "?"
            )

    def _note_baseline(self, pod: dict[str, Any]) -> None:
        """A baseline Pod's vLLM container (``--baseline-container``, else its first), for
        ``--vllm-logs``."""
        names = P.container_names(pod)
        want = self.cfg.baseline_container or (names[0] if names else None)
        if want and want in names:
            self._baseline_containers[P.name(pod) or ""] = want

    def _after_first_list(self) -> None:
        """Log streams the checkpoint knows whose Pod is gone: what they held since is lost."""
        present = {(P.name(p), P.uid(p)) for p in self.correlator.store.pods()}
        for key, entry in self.cp.logs.items():
            pod = key.rsplit("/", 1)[0]
            if (pod, entry.get("uid")) not in present:
                self.metrics.log_gaps += 1
                log.warning("log %s: its Pod is gone; lines it wrote after the checkpoint are lost", key)

    def _ensure_follower(self, pod: dict[str, Any], container: str, kind: str) -> None:
        name, uid = P.name(pod) or "", P.uid(pod) or ""
        if container not in P.container_names(pod):
            return
        key = f"{name}/{container}"
        cur = self.state.followers.get(key)
        if cur is not None and cur.uid == uid and cur.alive:
            return
        if cur is not None and cur.uid == uid and cur.done:
            return  # its Pod is being deleted; the stream has ended
        assert self.kube is not None
        saved = self.cp.logs.get(key) if key not in self.state.positions else None
        position, restart_count = LogPosition(), None
        if saved and saved.get("uid") == uid:
            start = self.cp.replay_from_ns if self.cp.replay_from_ns is not None else 0
            position = LogPosition(min(start, int(saved.get("ts_ns") or 0)), 0)
            restart_count = int(saved.get("restartCount") or 0)
        elif key in self.state.positions and self.state.positions[key].uid == uid:
            p = self.state.positions[key]
            position, restart_count = LogPosition(p.ts_ns, p.n), p.restart_count
        if kind == "launcher":
            self.correlator.mark_launcher_log(name)
        follower = LogFollower(
            self.kube,
            self.cfg.namespace,
            name,
            uid,
            container,
            stop=self.stop,
            position=position,
            restart_count=restart_count,
            backoff=self._backoff(),
            read_timeout_s=self.cfg.log_read_timeout_s,
            on_gap=functools.partial(self.metrics.count, "log_gaps"),
        )
        self.state.followers[key] = follower.start(log_parser(kind, self.metrics), kind, self.queue.put)
        log.info("following %s log %s (from ts=%s)", kind, key, position.ts_ns or "start")

    # ------------------------------------------------------------------ output

    def _tick(self, force_checkpoint: bool = False, final: bool = False) -> None:
        now = self.clock()
        self._last_tick = now
        self.metrics.last_tick = now
        self._pump_exports(wait=final)
        if self.state.synced:
            c = self.correlator
            acts = c.finished(
                int(now * M.S), int(self.cfg.grace_s * M.S), int(self.cfg.incomplete_after_s * M.S)
            )
            acts = self._hold_for_logs(acts, now)
            acts = self._hold_for_extras(acts, now)
            if acts:
                self._emit(acts)
                self._pump_exports(wait=final)
            self._forget_gone(now)
        if force_checkpoint or (self.state.dirty and now - self._last_cp >= self.cfg.checkpoint_interval_s):
            self._save_checkpoint()

    def _hold_for_logs(self, acts: list[Any], now: float) -> list[Any]:
        """Hold back (for at most :data:`LOG_WAIT_S`) what a lagging log stream may still add to.

        The correlator calls an actuation finished from what has arrived; a DPC or launcher
        log stream that is reconnecting (or has reconnected and not brought its backlog
        yet) may hold facts of it, and an actuation emitted without them is never
        emitted again.
        """
        held = self._held_for_logs
        out: list[Any] = []
        keys = set()
        for a in acts:
            keys.add(a.key)
            lagging = [] if a.key in self.cp.emitted or a.key in self.state.unacked else self._lagging_logs(a)
            if not lagging:
                held.pop(a.key, None)
                out.append(a)
                continue
            first = held.setdefault(a.key, now)
            if now - first >= LOG_WAIT_S:
                log.warning(
                    "%s: emitted without waiting longer for log %s (reconnecting)", a.key, ", ".join(lagging)
                )
                held.pop(a.key, None)
                out.append(a)
        for key in [k for k in held if k not in keys]:  # no longer finished (or evicted)
            del held[key]
        return out

    def _hold_for_extras(self, acts: list[Any], now: float) -> list[Any]:
        """Hold back what the ``vllm.*`` and Events' spans still wait for: the first Events
        list (at most :data:`LOG_WAIT_S` from the first actuation it holds), and with
        ``--vllm-logs`` each actuation's log fetch (bounded in :class:`VllmLogs`)."""
        if not acts:
            return acts
        if self.event_watcher is not None and not self._events_synced:
            if self._events_wait_from is None:
                self._events_wait_from = now
            if now - self._events_wait_from < LOG_WAIT_S:
                return []
            if not self._events_wait_said:
                self._events_wait_said = True
                log.warning("Events not listed yet: traces are built without them meanwhile")
        if self.vllm is None:
            return acts
        out = []
        for a in acts:
            if a.key in self.cp.emitted or a.key in self.state.unacked:
                out.append(a)
                continue
            try:
                target = self.vllm.target(a, self._baseline_containers)
                if target is None or self.vllm.ready(a, target):
                    out.append(a)
            except Exception:  # noqa: BLE001 - it goes without its vLLM log, the loop goes on
                log.exception("%s: its vLLM log cannot be fetched; built without it", a.key)
                out.append(a)
        return out

    def _with_phases(self, a: Any, trace: list[SpanRecord]) -> list[SpanRecord]:
        """The trace with what vLLM's log and the Events add, by ``add_phases`` as the bridge
        builds it; FMA's own Events are assigned over the actuations the correlator holds
        (an Event after this one's end that a later actuation of the Pod started before is
        that one's).

        A failure there costs this one trace those additions (logged, counted), never the
        trace: it is built from the same facts as before.
        """
        from ..phase_inputs import add_phases
        from ..phase_spans import FMA_EVENT_REASONS, assign_fma_events

        launcher = str(a.attributes.get(M.A_LAUNCHER) or "")
        names = [str(a.attributes.get(M.A_REQ_NAME) or ""), launcher]
        events = self.events.about(names)
        vllm, assumed = self.vllm.phases(a.key) if self.vllm is not None else ({}, [])
        try:
            fma = any(e.raw_reason in FMA_EVENT_REASONS for e in events)
            return add_phases(
                a,
                trace,
                events=events,
                fma_events=assign_fma_events(self.correlator.actuations(), events).get(a.key, ())
                if fma
                else (),
                vllm=vllm,
                vllm_clock_assumed=assumed,
                boot_ns=self._launcher_boot.get(launcher),
            )
        except Exception:  # noqa: BLE001 - one actuation the phase builder chokes on stays one
            self._extra_failed += 1
            log.exception("the vLLM/Kubernetes phase spans of %s failed; built without them", a.key)
            return trace

    def _lagging_logs(self, a: Any) -> list[str]:
        """Keys of the log streams ``a`` needs that are not following live past it.

        Live means caught up (:attr:`LogFollower.caught_up`): its backlog brought in full
        and every record of it taken here.  No time enters that (a backlog under load can
        take longer than any fixed wait); what is written after it comes as it is
        written, which the correlator's ``--grace`` already waits for.
        """
        st = self.state
        wanted: list[LogFollower] = []
        if a.path != M.COLD_NO_FMA:
            wanted += [ft for ft in st.followers.values() if ft.kind == "dpc"]
        launcher = a.attributes.get(M.A_LAUNCHER)
        if self.cfg.launcher_logs and launcher and a.path != M.COLD_NO_FMA:
            ft = st.followers.get(f"{launcher}/{P.LAUNCHER_CONTAINER}")
            if ft is not None:
                wanted.append(ft)
        lagging = []
        for f in wanted:
            if f.done or not f.alive:
                continue  # its Pod is gone: nothing more will come
            pos = st.positions.get(f.key)
            if pos is not None and pos.uid == f.uid and pos.ts_ns >= a.last_ns:
                continue  # its records have arrived past the actuation's last instant
            if f.caught_up:
                continue  # live: its backlog is in
            lagging.append(f.key)
        return lagging

    def _drop(self, key: str, why: str) -> None:
        """A trace that cannot be encoded as OTLP: recorded as emitted (so never rebuilt or
        re-sent), logged and counted; see "One bad trace" in docs/watch.md."""
        self.metrics.export_dropped += 1
        log.error("trace of %s dropped, it cannot be encoded as OTLP: %s", key, why)
        self._record_emitted(key, self.clock())
        self.state.dirty = True

    def _record_emitted(self, key: str, at: float) -> None:
        """``key`` is out for good: in the checkpoint's emitted set and evicted from the
        correlator (which also applies it to a Pod it does not know yet)."""
        self.cp.emitted[key] = round(at, 3)
        self.correlator.evict(key)

    def _emit(self, acts: list[Any]) -> None:
        from ..build import build_trace
        from ..sinks.otlp_export import span_problem

        st = self.state
        todo: list[tuple[Any, list[SpanRecord]]] = []
        for a in acts:
            if a.key in self.cp.emitted:
                self.correlator.evict(a.key)
                continue
            if a.key in st.unacked:
                continue  # built and written; its export is under way or will be retried
            try:
                trace = build_trace(a)
            except Exception:  # noqa: BLE001 - one actuation the builder chokes on stays one
                log.exception("building the trace of %s failed; skipped", a.key)
                self.correlator.evict(a.key)
                continue
            if trace:
                trace = self._with_phases(a, trace)
            if self.vllm is not None:
                self.vllm.forget(a.key)
            why = next((p for sp in trace if (p := span_problem(sp))), None)
            if why is not None:  # neither written nor sent: an invalid line, a failing request
                self._drop(a.key, why)
                continue
            todo.append((a, trace))
        if not todo:
            return
        if self.sink is not None:
            # pending first: a crash after the write below re-sends these from --out
            # (or from the checkpoint itself when there is no file)
            self.cp.pending = list(st.unacked) + [a.key for a, _ in todo]
            if self._traces_in_checkpoint:
                from ..sinks.otlp_json import export_request

                for a, t in todo:
                    self.cp.pending_traces[a.key] = export_request(t)
            self._save_checkpoint()
        if self.out is not None:
            fresh = [t for _a, t in todo if t and t[0].trace_id not in self.out.present]
            if fresh:
                self.out.write(fresh)
                _fault("after-write")
        for a, t in todo:
            st.unacked[a.key] = _Unacked(t, a.complete, _ready_s(a))
        if self.sink is None:  # written: out for good
            self._delivered([a.key for a, _ in todo], {})

    def _pump_exports(self, wait: bool = False) -> None:
        """Collect a finished OTLP export job; start the next one if traces are waiting.

        One job at a time, on a worker thread; the loop keeps taking events meanwhile.
        ``wait`` (the SIGTERM path) waits for the job in flight and for one more.
        """
        st = self.state
        started = False
        while True:
            job = self._export_job
            if job is not None:
                if wait:
                    job.thread.join(float(getattr(self.sink, "timeout_s", 10.0)) + 5.0)
                if job.thread.is_alive():
                    return
                self._export_job = None
                self._export_done(job)
            if started or self.sink is None or not st.unacked or self.clock() < st.export_retry_at:
                return
            keys = self._next_job()
            spans = [s for k in keys for s in st.unacked[k].spans]
            job = self._export_job = _ExportJob(keys)
            job.thread = threading.Thread(
                target=self._export, args=(self.sink, spans, job), name="fma-otel-export", daemon=True
            )
            job.thread.start()
            started = True
            if not wait:
                return

    @staticmethod
    def _export(sink: Any, spans: list[SpanRecord], job: _ExportJob) -> None:
        """The worker thread's body: the job's outcome is read by the loop once it ended."""
        try:
            job.dropped = {d.trace_id: d.reason for d in sink.export(spans) or ()}
        except BaseException as exc:  # noqa: BLE001 - reported by the loop
            job.error = exc

    def _next_job(self) -> list[str]:
        """The keys of the next export job (``unacked`` is not empty).

        A suspect (from a failed job of several) goes alone, so the trace that made the
        job fail is found; an isolated key (one that failed alone) goes alone too, taking
        turns with a batch of the others, so it delays them by at most one retry interval
        per turn and never stops them.  Otherwise up to :data:`EXPORT_TRACES_PER_JOB`.
        """
        st = self.state
        for key in st.unacked:
            if key in self._suspects:
                return [key]
        normal = [k for k in st.unacked if k not in self._isolated][:EXPORT_TRACES_PER_JOB]
        isolated = next((k for k in self._isolated if k in st.unacked), None)
        if isolated is not None and (self._isolated_turn or not normal):
            self._isolated_turn = False
            del self._isolated[isolated]  # to the back of the turns
            self._isolated[isolated] = None
            return [isolated]
        self._isolated_turn = True
        return normal

    def _export_done(self, job: _ExportJob) -> None:
        st = self.state
        if job.error is not None:
            self.metrics.export_errors += 1
            if len(job.keys) > 1:
                self._suspects.update(job.keys)
            else:
                for key in job.keys:
                    self._suspects.discard(key)
                    if key not in self._isolated:
                        self._isolated[key] = None
                        log.warning("OTLP export of %s failed on its own: retried alone from now on", key)
                self.metrics.export_isolated = len(self._isolated)
            st.export_retry_at = self.clock() + self.cfg.export_retry_s
            log.warning(
                "OTLP export of %d trace(s) failed (%s); retrying in %gs",
                len(job.keys),
                job.error,
                self.cfg.export_retry_s,
            )
            if getattr(self.sink, "_closed", False):  # a hung export shuts the exporter down
                try:
                    old, self.sink = self.sink, self._make_sink()
                    old.close()
                except Exception:  # noqa: BLE001 - keep the old one; the next try says why
                    log.exception("re-creating the OTLP exporter")
            return
        _fault("after-export")
        self._delivered(job.keys, job.dropped)

    def _delivered(self, keys: list[str], dropped: dict[str, str]) -> None:
        """``keys`` went out (through OTLP, or written when OTLP is off): emitted, or
        dropped where the sink refused their trace (``dropped``: trace id -> why)."""
        st = self.state
        done = self.clock()
        for key in keys:
            self._suspects.discard(key)
            self._isolated.pop(key, None)
            u = st.unacked.pop(key, None)
            if u is None:
                continue
            self.cp.pending_traces.pop(key, None)
            why = dropped.get(u.spans[0].trace_id) if u.spans else None
            if why is not None:  # (one read back from --out or the checkpoint after a restart)
                self._drop(key, why)
                continue
            self._record_emitted(key, done)
            with self.metrics.lock:
                self.metrics.emitted["true" if u.complete else "false"] += 1
                self.metrics.spans += len(u.spans)
            if u.complete and u.ready_s is not None:
                self.metrics.export_lag_s = done - u.ready_s
                seen = st.ready_seen.get(M.key_uid(key))
                if seen is not None:
                    self.metrics.observe_ready_to_export(done - seen)
        self.metrics.export_isolated = len(self._isolated)
        self.cp.pending = list(st.unacked)
        self._save_checkpoint()

    def _forget_gone(self, now: float) -> None:
        """Memory stays bounded: drop Pods deleted long enough ago that nothing can be open.

        Never a requester with an actuation not yet emitted (an OTLP export that keeps
        failing, an actuation the correlator still holds back): it stays until emitted.
        """
        horizon = self.cfg.incomplete_after_s + 2 * self.cfg.grace_s + 60
        st = self.state
        due = [uid for uid, t in st.gone_at.items() if now - t >= horizon]
        if not due or now < self._next_forget:
            return
        self._next_forget = now + 1.0
        held = {M.key_uid(k) for k in st.unacked} | {M.key_uid(k) for k in self.cp.pending}
        try:
            for a in self.correlator.actuations():
                if a.key not in self.cp.emitted:
                    held.add(_uid(a))
                    held.add(M.key_uid(a.key))
        except Exception:  # noqa: BLE001 - when in doubt, keep everything
            log.exception("listing open actuations")
            return
        for uid in due:
            if uid in held:
                continue
            pod = self.correlator.store.get(uid)
            name = P.name(pod) if pod is not None else None
            self.correlator.forget_pod(uid)
            if name:
                self.events.forget(name)
                self._baseline_containers.pop(name, None)
                self._launcher_boot.pop(name, None)
            del st.gone_at[uid]
            st.ready_seen.pop(uid, None)
            st.first_rv.pop(uid, None)

    # ------------------------------------------------------------------ checkpoint

    def _replay_points(self) -> tuple[int, str | None]:
        """Where the next run must start re-reading to rebuild the actuations still open.

        Open actuations live only in memory.  A restart rebuilds them from two histories:

        - the logs, from the first instant of the oldest open actuation minus a margin (for
          skew between the node that stamps log lines and the API server that stamps Pods);
          lines of the last margin are always re-read too, as they may belong to a
          requester whose Pod we had not seen yet.  Each stream starts at the earlier of
          this and its own position.
        - the Pods, from just before the oldest resourceVersion seen of an open requester:
          a Pod's status keeps only its newest ``Ready`` transition, so an earlier round's
          Ready is only in the watch history (which the API server keeps for a few minutes;
          beyond that a 410 makes us relist and that history is lost, see docs/watch.md).
        """
        margin = int(self.cfg.replay_margin_s * M.S)
        log_from = [int(self.clock() * M.S) - margin]
        rvs: list[int] = []
        n_open = 0
        try:
            for a in self.correlator.actuations():
                if a.key in self.cp.emitted or a.key in self.state.unacked or not a.instants:
                    continue  # (unacked traces are kept in --out or the checkpoint)
                n_open += 1
                log_from.append(min(i.t_ns for i in a.instants.values()) - margin)
                rv = self.state.first_rv.get(_uid(a))
                if rv is not None:
                    rvs.append(rv - 1)
        except Exception:  # noqa: BLE001 - a checkpoint must still be written
            log.exception("computing open actuations")
            if self.cp.replay_from_ns is not None:
                log_from.append(self.cp.replay_from_ns)
            return min(log_from), self.cp.pod_rv
        self.metrics.open_actuations = n_open
        pod_rv = self.state.pod_rv
        current = rv_number(pod_rv)
        if rvs and current is not None:
            pod_rv = str(min(current, min(rvs)))
        return min(log_from), pod_rv

    def _save_checkpoint(self) -> None:
        st = self.state
        cp = self.cp
        cp.pod_rv = st.pod_rv
        for key, pos in st.positions.items():
            cp.logs[key] = pos.to_json()
        if st.synced:
            cp.replay_from_ns, cp.pod_rv = self._replay_points()
            self._count_rounds(cp)
            self._prune(cp)
        saved = CP.save(self.cfg.checkpoint, cp)  # a failure is logged there
        # Failed or not, the next try is one checkpoint interval away (not every tick: a
        # full disk would log an error ten times a second); a failed one stays due.
        self._last_cp = self.clock()
        self._checkpoint_failed = not saved
        st.dirty = not saved
        if saved:
            self.metrics.checkpoints += 1

    def _count_rounds(self, cp: CP.Checkpoint) -> None:
        """Each requester's round count as the correlator has it now (``rounds``).

        Kept for every requester unbound at least once, not only those with an open round:
        one whose rounds are all out may be unbound and bound again while we are down, and
        the replay does not reach back to its earlier unbinds either.  An entry the
        correlator no longer has (its Pod forgotten) stays until :meth:`_prune` drops it.
        A count never goes back: a forgotten Pod that a replay shows again is counted
        afresh, lower, and must not overwrite its entry (its lower keys are all emitted).
        """
        try:
            anchors = self.correlator.round_anchors()
        except Exception:  # noqa: BLE001 - a checkpoint must still be written
            log.exception("counting rounds")
            return
        for uid, anchor in anchors.items():
            cur = cp.rounds.get(uid)
            if cur is None or (anchor[0], anchor[1]) >= (cur[0], cur[1]):
                cp.rounds[uid] = anchor

    def _prune(self, cp: CP.Checkpoint) -> None:
        """Forget what cannot matter again: keys of long-gone Pods, streams of gone Pods,
        round counts of Pods gone with all their keys."""
        now = self.clock()
        live = self.correlator.store  # the uids of the Pods held
        for key, t in list(cp.emitted.items()):
            uid = M.key_uid(key)
            if uid not in live and now - t > self.cfg.retention_s:
                del cp.emitted[key]
        for key, entry in list(cp.logs.items()):
            if entry.get("uid") not in live:
                del cp.logs[key]
                self.state.positions.pop(key, None)
        # a round count matters while its Pod may show up in a replay: as long as its keys
        # are remembered (a key pruned above can never be emitted again anyway)
        if cp.rounds:
            keyed = {M.key_uid(k) for k in cp.emitted} | {M.key_uid(k) for k in cp.pending}
            for uid in [u for u in cp.rounds if u not in live and u not in keyed]:
                del cp.rounds[uid]
                self.correlator.unseed_round(uid)

    # ------------------------------------------------------------------ metrics

    def _stream_metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        pw = self.pod_watcher
        if pw is not None:
            s = pw.stats
            out["fma_otel_pod_watch_relists_total"] = s.relists
            out["fma_otel_pod_watch_connects_total"] = s.watches
            out["fma_otel_pod_watch_errors_total"] = s.errors
            out["fma_otel_pod_watch_odd_lines_total"] = s.odd_lines
        logs = [f.stats for f in list(self.state.followers.values())]
        out["fma_otel_log_lines_total"] = sum(fs.lines for fs in logs)
        out["fma_otel_log_duplicate_lines_skipped_total"] = sum(fs.duplicates for fs in logs)
        out["fma_otel_log_connects_total"] = sum(fs.connects for fs in logs)
        out["fma_otel_log_previous_reads_total"] = sum(fs.previous_reads for fs in logs)
        ew = self.event_watcher
        if ew is not None:
            out["fma_otel_event_watch_relists_total"] = ew.stats.relists
            out["fma_otel_event_watch_errors_total"] = ew.stats.errors
            out["fma_otel_events_total"] = self.events.received
            out["fma_otel_events_skipped_total"] = ew.parse_stats.skipped
        if self.vllm is not None:
            vs = self.vllm.stats
            out["fma_otel_vllm_log_fetches_total"] = vs.fetches
            out["fma_otel_vllm_log_fetch_errors_total"] = vs.errors
            out["fma_otel_vllm_log_fetch_partial_total"] = vs.partial
            out["fma_otel_vllm_log_fetch_timeouts_total"] = vs.timeouts
            out["fma_otel_vllm_log_bytes_total"] = vs.bytes
        out["fma_otel_phase_spans_failed_total"] = self._extra_failed
        return out
