"""Live ``vllm.*`` phase spans: the launcher wrapper follows each instance's log file as it
grows and emits vLLM's start-up phases the moment vLLM reports itself up.

Why here as well as in the bridge: the bridge sees an instance's log only once it is
captured; the launcher writes that very file (``vllm_kickoff`` ``dup2``s the child's
stdout/stderr into it), so the wrapper can read it as it grows.  Both feed the same parser
(:mod:`fma_otel.sources.vllm_log`) and plan and number with the same pure functions
(:func:`fma_otel.phase_spans.plan_vllm`, :func:`~fma_otel.phase_spans.number_spans`), so the
live spans and the bridge's spans of one log have the same names, boundaries and derived
span ids: they are the same spans.

What it costs and when it stops, and why:

* The start-up poller's thread (``vllm_watch._Poller``, which also polls each instance's
  ``GET /health``) follows every starting instance's log: no thread of its own.  The
  create path only appends to its queue after its response has been sent (``follow``),
  with no I/O.
* Reads are bounded (``_STEP_BYTES`` per instance per step, lines past ``_MAX_LINE`` are not
  kept, at most ``_MAX_TOTAL`` bytes per instance), the file is kept open once found so the
  launcher deleting it on ``stop`` does not lose its end.
* The spans are emitted once vLLM logs uvicorn's ``Application startup complete.``: the plan
  of a partial log can differ from the whole log's (a phase bounded by a later record), and
  a span emitted twice with one id would collide.  The start-up phases all precede that
  line, so the plan then equals the bridge's over the whole file.  An instance that ends
  (exit, ``stop``) or runs past ``FMA_OTEL_VLLM_STARTUP_TIMEOUT`` first gets the phases its
  log holds so far (read to its end).
* Every failure is swallowed (debug log): the tail of that instance is dropped.
  ``FMA_OTEL_VLLM_PHASES=0`` turns it off: no thread, no file opened, nothing imported.
* The native rule (``docs/vllm-phases.md`` 2.1): vLLM >= 0.16 started with
  ``--otlp-traces-endpoint`` emits its own start-up spans under the ``TRACEPARENT`` the
  wrapper passes; then these are left to vLLM (none emitted) and ``fma.vllm.startup`` says
  ``fma.vllm.phases="native"`` (``"log"`` otherwise).  The rule is the bridge's too
  (the options from the DPC's logged ``vllm-config``, the same version line).
* ``vllm.wake`` is not emitted here: a wake belongs to a later actuation's trace, which the
  launcher never sees (the DPC calls vLLM's port directly); the bridge places it.
"""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any

from fma_otel import model
from fma_otel.instrument import _common as c

# ENV_TIMEOUT: the same bound as fma.vllm.startup's.
from fma_otel.instrument.vllm_watch import _POLLER, A_PHASES, ENV_TIMEOUT, _exit_status

__all__ = ["A_PHASES", "LOG", "NATIVE", "PhaseTail", "enabled", "follow", "native_option"]

ENV_SWITCH = "FMA_OTEL_VLLM_PHASES"
ENV_INTERVAL = "FMA_OTEL_VLLM_PHASES_INTERVAL"

NATIVE = "native"
LOG = "log"

#: The vLLM option that makes vLLM export its own spans, and the first version that emits
#: start-up spans under the ``TRACEPARENT`` it inherits.
OTLP_FLAG = "--otlp-traces-endpoint"
NATIVE_SINCE = (0, 16)

READY_SPAN = model.WRAPPER_SPANS["fma.vllm.startup"]  # "fma.vllm.ready"

_STEP_BYTES = 64 << 10  # per instance per step: short steps, little GIL taken from a create
_MAX_LINE = 1 << 20  # a longer line is counted as a line but not parsed
_MAX_TOTAL = 64 << 20  # per instance: a DEBUG log that grows past this is not followed further
_UP_GRACE_NS = 5_000_000_000  # after "Application startup complete.": wait this long for the healthy instant
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def enabled() -> bool:
    """``FMA_OTEL_VLLM_PHASES`` is on unless ``0``/``false``/``no``/``off``."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() not in ("0", "false", "no", "off")


def native_option(options: Any) -> bool:
    """Do the vLLM options ask vLLM to export its own traces (``--otlp-traces-endpoint``,
    either spelling argparse accepts, with ``=value`` or a separate value)?"""
    if not isinstance(options, str):
        return False
    for tok in options.split():  # the DPC joins options with spaces
        tok = tok.replace("_", "-")
        if tok == OTLP_FLAG or tok.startswith(OTLP_FLAG + "="):
            return True
    return False


def version_tuple(text: str | None) -> tuple[int, int] | None:
    """``"0.26.0"``, ``"v0.16.0rc1"`` -> ``(0, 26)``, ``(0, 16)``; ``None`` if not a version."""
    m = _VERSION.match(text or "")
    return (int(m[1]), int(m[2])) if m else None


#: Spans of each ``vllm.*`` name already emitted per trace; only the poller thread emits.
_COUNTS = c.OrdinalCounter()


class PhaseTail:
    """One instance's log, followed until its start-up phases are emitted (or given up).

    ``watch`` is the instance's ``StartupWatch``: its span (once opened) gives the trace and
    the parent, its end the healthy instant; ``step`` runs on the poller thread,
    ``mode`` on whichever thread ends ``fma.vllm.startup``.
    """

    def __init__(
        self,
        watch: Any,
        path: str,
        options: Any,
        tracer: Any,
        *,
        instance_id: str = "",
        process: Any = None,
        fork_ns: int | None = None,
        child_traced: bool = True,
    ) -> None:
        self.watch = watch
        self.path = path
        self.options = options  # read for the native rule on the poller thread, not here
        self._native_opt: bool | None = None
        #: The child got a ``TRACEPARENT``: vLLM's own spans can join the actuation.
        self.child_traced = child_traced
        self._tracer = tracer
        self.instance_id = instance_id
        self.process = process
        #: The child was seen to exit (``_ended``; ``process`` is then let go).
        self.exited = False
        self.fork_ns = fork_ns if fork_ns is not None else time.time_ns()
        self.deadline_ns = 0
        self.done = False
        self._lock = threading.Lock()
        self._fh: Any = None
        self._buf = b""
        self._skipping = False  # inside a line longer than _MAX_LINE
        self._total = 0
        self._parser: Any = None
        self.records: list[Any] = []
        self.version: tuple[int, int] | None = None
        self._up_at: int | None = None  # when "Application startup complete." was read
        self._healthy_ns: int | None = None
        #: When the poller steps it next (``time.monotonic()``), and how often (read from
        #: the environment on the poller thread, not on the create path).
        self.due = 0.0
        self.interval: float | None = None

    # ------------------------------------------------------------------ reading

    def _open(self) -> bool:
        if self._fh is None:
            try:
                self._fh = open(self.path, "rb")  # noqa: SIM115 - kept open across steps
            except OSError:
                return False
        return True

    def _read(self, limit: int) -> int:
        """Read at most ``limit`` new bytes and parse the complete lines; bytes read."""
        if not self._open() or self._total >= _MAX_TOTAL:
            return 0
        data = self._fh.read(min(limit, _MAX_TOTAL - self._total))
        if not data:
            return 0
        self._total += len(data)
        *lines, self._buf = (self._buf + data).split(b"\n")
        for line in lines:
            self._line(line + b"\n")
        if len(self._buf) > _MAX_LINE:  # keep counting the line, not holding it
            self._buf = b""
            self._skipping = True
        return len(data)

    def _line(self, line: bytes) -> None:
        if self._skipping:  # the end of an over-long line: one line, not parsed
            self._skipping = False
            line = b"\n"
        if self._parser is None:
            self._make_parser(line)
        for rec in self._parser.feed(line):
            self._record(rec)

    def _make_parser(self, first: bytes) -> None:
        """The parser needs the child's year and UTC offset; the launcher's first line of
        the log (its full local date) gives the offset against the fork instant, rounded
        to 15 min as the bridge rounds it against ``D.create.start`` (not imported from
        ``phase_spans``: that module is loaded only when there are phases to emit); else
        the launcher's own zone (the child inherits it)."""
        from fma_otel.sources import vllm_log as V

        offset = None
        probe = V.VllmLogParser(year=time.gmtime(self.fork_ns // 1_000_000_000).tm_year).feed(first)
        if probe and probe[0].phase == V.PROCESS_START:
            quarters = round((probe[0].end_lo_ns - self.fork_ns) / 900e9)
            offset = quarters * 900 if abs(quarters * 900) < 86400 else None
        if offset is None:
            offset = int(time.localtime(self.fork_ns // 1_000_000_000).tm_gmtoff)
        year = time.gmtime(self.fork_ns // 1_000_000_000 + offset).tm_year
        self._parser = V.VllmLogParser(year=year, utc_offset_s=offset)

    def _record(self, rec: Any) -> None:
        from fma_otel.sources import vllm_log as V

        self.records.append(rec)
        if rec.phase == V.ENGINE_CONFIG and self.version is None:
            self.version = version_tuple(rec.detail)
        elif rec.phase == V.API_SERVER_UP and self._up_at is None:
            self._up_at = time.monotonic_ns()

    def _flush_partial(self) -> None:
        """At the end: a last line without its newline is a line (the bridge reads it too)."""
        if self._buf and not self._skipping:
            self._line(self._buf)
        self._buf = b""

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass

    # ------------------------------------------------------------------ decisions

    @property
    def native_opt(self) -> bool:
        if self._native_opt is None:
            self._native_opt = native_option(self.options)
        return self._native_opt

    def native(self) -> bool:
        return (
            self.child_traced
            and self.native_opt
            and self.version is not None
            and self.version >= NATIVE_SINCE
        )

    def mode(self) -> str:
        """``fma.vllm.phases`` for ``fma.vllm.startup``: ``native`` when vLLM's own spans
        cover the phases, else ``log``.  Only an instance started with
        ``--otlp-traces-endpoint`` needs its version: then the log is read up to now
        (bounded) if the poller has not met the engine's version line yet."""
        try:
            if not (self.child_traced and self.native_opt):
                return LOG
            with self._lock:
                budget = 4 * _STEP_BYTES
                while self.version is None and not self.done and budget > 0:
                    n = self._read(_STEP_BYTES)
                    if not n:
                        break
                    budget -= n
            return NATIVE if self.native() else LOG
        except Exception:  # noqa: BLE001 - do no harm
            c.logger.debug("fma-otel: reading the vLLM version failed", exc_info=True)
            return LOG

    def note_end(self, ok_end_ns: int | None) -> None:
        """``fma.vllm.startup`` ended (at the healthy instant when ``ok_end_ns`` is given)."""
        self._healthy_ns = ok_end_ns
        self.due = 0.0  # emit now, not at the next interval

    def _ended(self) -> bool:
        if self.exited or getattr(self.watch, "ended", False):
            return True
        if self.process is not None and _exit_status(self.process)[0]:
            # Latched, and the process object let go: a tail whose startup span is opened
            # late (a deferred create) must not keep the instance's process alive meanwhile.
            self.exited, self.process = True, None
            return True
        return False

    # ------------------------------------------------------------------ the step

    @property
    def ended(self) -> bool:
        return self.done

    def poll(self) -> None:
        """The startup poller's call (``vllm_watch._Poller``, the one thread that also
        polls ``GET /health``): one step."""
        if self.interval is None:
            self.interval = c.env_float(ENV_INTERVAL, 0.2)
        self.step(time.time_ns())

    def step(self, now_ns: int) -> bool:
        """Read what is new; emit when the start-up is complete.  ``True`` when done."""
        if self.done:
            return True
        with self._lock:
            try:
                return self._step(now_ns)
            except Exception:  # noqa: BLE001 - do no harm: this instance is not followed further
                c.logger.debug("fma-otel: following the vLLM log failed", exc_info=True)
                self._finish()
                return True

    def _step(self, now_ns: int) -> bool:
        if not self.deadline_ns:
            self.deadline_ns = now_ns + int(c.env_float(ENV_TIMEOUT, 1800.0) * 1e9)
        got = self._read(_STEP_BYTES)
        if self.native():  # vLLM's own spans cover the phases
            self._finish()
            return True
        if self._up_at is not None:
            # Complete.  Emit once the healthy instant bounds the last phase (or soon anyway).
            if getattr(self.watch, "ended", False) or time.monotonic_ns() - self._up_at >= _UP_GRACE_NS:
                self._emit_when_open()
            return self.done
        ended = self._ended()
        if (ended and not got) or now_ns >= self.deadline_ns:
            self._drain()
            self._emit_when_open()
            return self.done
        return False

    def _drain(self) -> None:
        while self._read(_STEP_BYTES):
            pass
        self._flush_partial()

    def _finish(self) -> None:
        self.done = True
        self.close()

    def _emit_when_open(self) -> None:
        """Emit if the startup span is open (a deferred create opens it later); give up if
        it never will be, or if there is nothing to emit: called once the log is read to
        its end, so without a record now none will come.  (Else an instance stopped before
        it logged, whose create awaits its Pod answer, would be stepped - its log looked
        for - until that answer comes.)"""
        span = getattr(self.watch, "span", None)
        if span is None:
            if not self.records or getattr(self.watch, "ended", False) or time.time_ns() >= self.deadline_ns:
                self._finish()
            return
        try:
            if not self.native():
                self._emit(span)
        finally:
            self._finish()

    def _emit(self, startup: Any) -> None:
        sc = startup.get_span_context()
        if not sc.is_valid or not sc.trace_flags.sampled or not self.records:
            return
        # Imported only with records to plan: an instance that logged nothing (stopped or
        # failed before its first line) loads no planner into the launcher, whose every
        # page the next fork copies the page tables of.
        from fma_otel.phase_spans import number_spans, plan_vllm

        trace_hex = format(sc.trace_id, "032x")
        ready_id = model.span_id_for(trace_hex, READY_SPAN, 0)
        parent = getattr(startup, "parent", None)
        joined = parent is not None and format(parent.span_id, "016x") == ready_id
        # Joined: under the actuation's (derived) fma.vllm.ready, as the bridge puts them.
        # In a trace of its own there is no fma.vllm.ready: under fma.vllm.startup itself.
        top = ready_id if joined else format(sc.span_id, "016x")
        planned = [
            p for p in plan_vllm(self.records, path=model.COLD_LAUNCHER) if p.parent_name != "fma.vllm.wake"
        ]
        if not planned:
            return
        records = number_spans(  # only the poller thread emits: get, then add, is safe
            trace_hex,
            planned,
            {READY_SPAN: top},
            counts=_COUNTS.get(trace_hex),
            attributes={model.A_INSTANCE: self.instance_id} if self.instance_id else None,
            ready_hi_ns=self._healthy_ns,  # the healthy instant bounds the open end
        )
        _COUNTS.add(trace_hex, [r.name for r in records])
        tracer = self._tracer() if callable(self._tracer) else self._tracer
        for r in records:
            span = c.start_span(
                tracer,
                r.name,
                context=c.remote_context(r.trace_id, r.parent_span_id),
                attributes=dict(r.attributes),
                start_time=r.start_ns,
                span_id=r.span_id,
            )
            span.end(end_time=r.end_ns)


@c.swallow()
def follow(watch: Any, instance: Any, tracer: Any, child_traced: bool = True) -> PhaseTail | None:
    """Follow ``instance``'s log for its ``watch`` (``fma.vllm.startup``); ``None`` when
    switched off or the launcher names no log file.  ``child_traced``: the vLLM child got a
    ``TRACEPARENT`` (else vLLM's own spans cannot join, and the native rule does not apply).
    Called after the create's response: no I/O here, the poller thread does it all."""
    if watch is None or not enabled():
        return None
    path = getattr(instance, "_log_file_path", None)
    if not isinstance(path, str) or not path:
        return None
    cfg = getattr(instance, "config", None)
    tail = PhaseTail(
        watch,
        path,
        getattr(cfg, "options", None),
        tracer,
        instance_id=str(getattr(instance, "instance_id", "") or ""),
        process=getattr(instance, "process", None),
        child_traced=child_traced,
    )
    watch.tail = tail
    _POLLER.add(tail)
    return tail
