"""``fma.vllm.startup``: from the fork of a vLLM instance to its first healthy ``GET /health``.

Why: the launcher never checks whether vLLM serves; the DPC finds out by polling
``/is_sleeping`` every 5 s.  Watching from inside the launcher Pod gives the true instant
(to within the poll interval), so ``fma.dpc.poll_lag`` end (``D.serving``) minus
``fma.vllm.startup`` end is the DPC's detection lag.

Polling is cheap (one shared thread; a loopback ``GET``, connection refused costs
microseconds), bounded in time (``FMA_OTEL_VLLM_STARTUP_TIMEOUT``, default 30 min) and stops with the instance: the
child's exit (seen on its sentinel without reaping it, so the launcher's own exit
detection is untouched) or the launcher's ``stop`` ends the span with an error status.
"""

from __future__ import annotations

import collections
import http.client
import os
import re
import threading
import time
from typing import Any

from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.trace import Span, Status, StatusCode

from fma_otel import model
from fma_otel.instrument import redact
from fma_otel.instrument._common import env_float, logger

ENV_INTERVAL = "FMA_OTEL_VLLM_POLL_INTERVAL"
ENV_TIMEOUT = "FMA_OTEL_VLLM_STARTUP_TIMEOUT"

A_PORT = "server.port"
A_PID = model.A_VLLM_PID
A_POLLS = model.A_VLLM_POLLS
A_HEALTHY_AT = model.A_VLLM_HEALTHY_AT
A_LAG_HINT = model.A_LAG_RULE
A_PRECISION = model.A_END_PRECISION
A_PHASES = "fma.vllm.phases"  # who emits this instance's vLLM phases (``vllm_phases``)
LAG_RULE = "fma.dpc.poll_lag end - fma.vllm.startup end"

_PORT_RE = re.compile(r"^--port(?:=(\d+))?$")


def instance_port(options: str | None, annotations: dict[str, str] | None) -> int | None:
    """The vLLM port: ``--port`` in the options, else the ``inference-port`` annotation."""
    if options:
        toks = options.split()  # the DPC joins options with spaces (shlex is far slower)
        for i, tok in enumerate(toks):
            m = _PORT_RE.match(tok)
            if not m:
                continue
            val = m.group(1) or (toks[i + 1] if i + 1 < len(toks) else "")
            if val.isdigit():
                return int(val)
    if annotations:
        val = str(annotations.get("inference-port", ""))
        if val.isdigit():
            return int(val)
    return None


def _probe(host: str, port: int, timeout: float) -> int | None:
    """Status code of ``GET /health`` or ``None`` when nothing answers yet."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _exit_status(process: Any) -> tuple[bool, int | None]:
    """Has the child exited, and with which code (``None`` when not known)?  Peeks with
    ``WNOWAIT`` so the launcher still reaps it itself."""
    pid = getattr(process, "pid", None)
    if pid is None:
        return False, None
    code = getattr(getattr(process, "_popen", None), "returncode", None)
    if code is not None:
        return True, code
    try:
        res = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True, None  # already reaped by the launcher
    except (AttributeError, OSError):
        return False, None
    if res is None:
        return False, None
    return True, res.si_status if res.si_code == os.CLD_EXITED else -res.si_status


class _Poller:
    """One daemon thread polls every watched instance and follows every instance's log.

    What it steps is anything with ``due``, ``interval``, ``poll()`` and ``ended``: each
    ``StartupWatch`` (``GET /health``) and each ``vllm_phases.PhaseTail`` (the log).  One
    thread rather than one each: every thread of the launcher is a stack and a ``malloc``
    arena of its own, pages the fork of each vLLM instance copies the page tables of.

    Registering is O(1) and never waits on a lock the poller holds: the create path
    appends to a deque (atomic under the GIL).  It does not even wake the poller unless
    the poller is fully idle: while anything is active - and for ``_LINGER`` seconds after
    the last one - the poller drains new items within one poll interval by itself, so
    it does not compete for the GIL with the create request that is still building its
    response.  The span's start time is the fork instant either way.  (A thread per
    create, or waking the poller per create, cost measurably more on the create path.)
    """

    _LINGER = 5.0

    def __init__(self) -> None:
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._incoming: collections.deque[Any] = collections.deque()
        self._thread: threading.Thread | None = None
        self._idle = True
        self._pid = os.getpid()

    def add(self, item: Any) -> None:
        if self._pid != os.getpid():  # forked: the old thread is gone
            self._pid, self._thread, self._incoming, self._idle = os.getpid(), None, collections.deque(), True
        self._incoming.append(item)
        thread = self._thread
        if thread is None or not thread.is_alive():
            with self._start_lock:  # only the first create (or after a fork) gets here
                if self._thread is thread:
                    self._idle = False
                    self._thread = threading.Thread(
                        target=self._run, name="fma-otel-vllm-startup", daemon=True
                    )
                    self._thread.start()
        elif self._idle:  # read after the append: see _run for why no add is ever missed
            self._wake.set()

    def _run(self) -> None:
        items: list[Any] = []
        incoming = self._incoming
        last_busy = time.monotonic()
        with suppress_instrumentation():
            while True:
                try:
                    while incoming:
                        items.append(incoming.popleft())
                    now = time.monotonic()
                    for w in items:
                        if w.due <= now:
                            w.poll()
                            w.due = time.monotonic() + (w.interval or 0.1)
                    w = None  # the loop variable would keep the last item (and its span) alive while idle
                    items = [w for w in items if not w.ended]
                    now = time.monotonic()
                    if items:
                        last_busy = now
                        # After the steps: an item made due by one of them (a log tail whose
                        # watch just ended) is stepped at once.
                        time.sleep(min(1.0, max(0.0, min(w.due for w in items) - now)))
                    elif now - last_busy < self._LINGER:
                        time.sleep(env_float(ENV_INTERVAL, 0.1))
                    else:
                        # Going idle: announce it *before* the last look at the queue, so an
                        # add() that appended after that look sees _idle and wakes us.
                        self._wake.clear()
                        self._idle = True
                        if not incoming:
                            self._wake.wait()
                        self._idle = False
                        last_busy = time.monotonic()
                except Exception:  # noqa: BLE001 - the poller must outlive any one item
                    logger.debug("fma-otel: startup poller iteration failed", exc_info=True)
                    items = [w for w in items if not w.ended]
                    time.sleep(0.1)


_POLLER = _Poller()


#: Seconds between the steps of a watch whose instance was stopped before its span could be
#: opened (its create awaits its Pod answer): only that opening is waited for, and the span
#: ends at the stop instant whenever it is seen - fewer steps of the poller, which shares
#: the launcher's GIL, for every such create.
STOPPED_INTERVAL = 0.5


class StartupWatch:
    """Watches one instance; ends its span exactly once (healthy, exited, stopped, timeout).

    The span may be given open, or as a ``source`` that the poller thread opens first: an
    object with ``open()`` (returning the span and the port), ``ready()`` (can it open
    without waiting?  Not while its create awaits its Pod answer) and ``port()`` (asked
    while it cannot).  That keeps building the span's attributes off the create request's
    path.  Whoever ends the watch first (poller, ``stop``) opens it if still needed, so a
    span is never lost and never ended twice.
    """

    def __init__(
        self,
        span: Span | None,
        process: Any,
        port: int | None,
        *,
        interval: float | None = None,
        timeout: float | None = None,
        source: Any = None,
    ) -> None:
        self.span = span
        self.process = process
        self.pid: int | None = None
        self.port = port
        # Read from the environment on the poller thread, not on the create path.
        self.interval = interval
        self.timeout = timeout
        self._born = time.monotonic()
        self.deadline = 0.0
        self.due = 0.0
        self.polls = 0
        self._source = source
        self._opener = source.open if source is not None else None
        #: The first healthy answer seen while the span could not be opened yet.
        self._healthy_at: int | None = None
        #: ``stop``'s reason, when it came before the span could be opened.
        self._stopped: str | None = None
        #: ...and when: the span, opened later, ends at the stop, not when it could be opened.
        self._stopped_at: int | None = None
        self._done = threading.Lock()
        self._ended = False
        #: The instance's log follower (``vllm_phases.PhaseTail``), if one was started: it
        #: says on this span who emits the vLLM phases (``fma.vllm.phases``).
        self.tail: Any = None

    def start(self) -> StartupWatch:
        _POLLER.add(self)
        return self

    def stop(self, reason: str = "instance stopped before it answered GET /health") -> None:
        """Called when the launcher stops the instance: end now, with an error (or OK at
        the healthy instant, if one was seen before the span could be opened)."""
        if self._opener is not None and not self._can_open():
            if self._stopped_at is None:  # first: the poller reads it once it sees the reason
                self._stopped_at = time.time_ns()
            self._stopped = reason  # never wait here (the launcher's stop path): the poller ends it
            # Nothing probes a stopped instance: let its process object (its sentinel pipe,
            # its finalizer) go now, not when the span can be opened (up to the Pod
            # lookup's join wait later).
            self.process = None
            return
        at = self._healthy_at
        if at is not None:
            self._finish(StatusCode.OK, end_ns=at, **{A_POLLS: self.polls, A_HEALTHY_AT: at})
            return
        self._finish(StatusCode.ERROR, reason, end_ns=self._stopped_at)

    def fork_failed(self, exc: BaseException, secrets: list[str]) -> None:
        """The fork itself failed: record the exception (scrubbed of the instance's
        ``secrets``) and end with an error."""
        span = self._claim()
        if span is not None:
            try:
                redact.record_exception(span, exc, secrets)
                span.set_status(Status(StatusCode.ERROR, f"fork failed: {type(exc).__name__}"))
                span.end()
            except Exception:  # noqa: BLE001 - do no harm
                logger.debug("fma-otel: ending fma.vllm.startup failed", exc_info=True)

    def _can_open(self) -> bool:
        """Can the opener run without waiting (call only while it is still to run)?"""
        return bool(self._source.ready())

    def _open(self) -> None:
        """Open the span if it is still pending (call with ``_done`` held)."""
        opener, self._opener = self._opener, None
        if opener is None:
            return
        try:
            span, port = opener()
        except Exception:  # noqa: BLE001 - do no harm
            logger.debug("fma-otel: opening fma.vllm.startup failed", exc_info=True)
            return
        self.span = span
        if self.port is None:
            self.port = port

    def _claim(self) -> Span | None:
        """Mark ended (once) and return the open span, or ``None`` if already ended."""
        with self._done:
            if self._ended:
                return None
            self._ended = True
            self._open()
            return self.span

    def _finish(self, code: StatusCode, message: str = "", end_ns: int | None = None, **attrs: Any) -> None:
        span = self._claim()
        if span is None:
            return
        try:
            if self.pid is not None:
                attrs[A_PID] = self.pid
            tail = self.tail
            if tail is not None:
                attrs[A_PHASES] = tail.mode()
                tail.note_end(end_ns if code is StatusCode.OK else None)
            if attrs:
                span.set_attributes(attrs)
            span.set_status(Status(code, message or None) if code is StatusCode.ERROR else Status(code))
            span.end(end_time=end_ns)
        except Exception:  # noqa: BLE001 - do no harm
            logger.debug("fma-otel: ending fma.vllm.startup failed", exc_info=True)

    @property
    def ended(self) -> bool:
        return self._ended

    def poll(self) -> None:
        """One poll: exited?  healthy?  out of time?  (Runs on the poller thread.)"""
        try:
            if self.interval is None:
                self.interval = env_float(ENV_INTERVAL, 0.1)
            if self.timeout is None:
                self.timeout = env_float(ENV_TIMEOUT, 1800.0)
            if not self.deadline:
                self.deadline = self._born + self.timeout
            if self._opener is not None:
                if not self._can_open():
                    # Its create span is resolved after the response: watch the instance
                    # meanwhile, and end the span at the healthy instant once it opens.
                    if self._stopped is None:
                        self._early_probe()
                    else:  # nothing to probe; the span, once open, ends at the stop instant
                        self.interval = max(self.interval, STOPPED_INTERVAL)
                    return
                with self._done:
                    if not self._ended:
                        self._open()
            if self._stopped is not None:
                self.stop(self._stopped)
                return
            self._step()
        except Exception as exc:  # noqa: BLE001
            self._finish(StatusCode.ERROR, f"watcher failed: {type(exc).__name__}")

    def _early_probe(self) -> None:
        if self._healthy_at is not None:
            return
        if self.port is None:
            self.port = self._source.port()
        if self.port is not None and not _exit_status(self.process)[0]:
            self._probe_health()

    def _probe_health(self) -> None:
        """One (counted) ``GET /health``; the first healthy answer's instant is kept."""
        assert self.interval is not None and self.port is not None
        self.polls += 1
        if _probe("127.0.0.1", self.port, max(0.05, min(0.5, self.interval * 5))) == 200:
            self._healthy_at = time.time_ns()

    def _step(self) -> None:
        if self._ended:
            return
        if self.span is None:  # the opener failed: nothing to watch for
            self._finish(StatusCode.UNSET)
            return
        if self._healthy_at is None:
            if self.port is None:
                self._finish(StatusCode.ERROR, "no --port in options and no inference-port annotation")
                return
            exited, code = _exit_status(self.process)
            if exited:
                self._finish(
                    StatusCode.ERROR,
                    f"vLLM process exited (code {code}) before it answered GET /health",
                    **{A_POLLS: self.polls, "process.exit.code": code if code is not None else -1},
                )
                return
            self._probe_health()
            if self._healthy_at is None:
                if time.monotonic() >= self.deadline:
                    self._finish(
                        StatusCode.ERROR,
                        f"no healthy GET /health within {self.timeout:g} s",
                        **{A_POLLS: self.polls},
                    )
                return
        at = self._healthy_at
        self._finish(
            StatusCode.OK, end_ns=at, **{A_POLLS: self.polls, A_HEALTHY_AT: at, A_PRECISION: self.interval}
        )
