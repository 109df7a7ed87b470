"""What a create served before its Pod answer keeps while that answer is awaited.

Why: such a create's spans are opened after the response, once the Pod answer is known
(up to the join wait later); every create of a launcher whose API server is slow, hung or
down is one.  Whatever each of them holds meanwhile is memory that every ``fork()`` of a
vLLM instance copies the page tables of (issue 23), so a stopped instance's process object
(its sentinel pipe, its finalizer) is let go at once.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.trace import StatusCode

from fma_otel.instrument import launcher as L
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN, LauncherInstrumentor
from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from fma_otel.instrument.vllm_phases import PhaseTail
from fma_otel.instrument.vllm_watch import STOPPED_INTERVAL, StartupWatch
from tests.instrument.conftest import Tracing, load_fake_launcher, wait_until
from tests.support.otlp_receiver import free_port

ROOT = Path(__file__).resolve().parents[2]


def _gated_pod(gate: threading.Event) -> PodInfo:
    """A Pod lookup whose API server answers (bound to ``inst-x``) only once ``gate`` is set."""

    def fetch(namespace: str, name: str, timeout: float) -> dict[str, Any]:
        gate.wait(10)
        ann = {
            REQUESTER_ANNOTATION: "5e1f0c2a-0000-4000-8000-0000000000cc req",
            INSTANCE_ID_ANNOTATION: "inst-x",
        }
        return {"annotations": ann, "node_name": "node-1", "resource_version": "1"}

    return PodInfo(fetch, env={"POD_NAME": "launcher-1", "NAMESPACE": "fma-test"})


def _alive(cls: type) -> list[Any]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, cls)]


@pytest.mark.slow
def test_a_stopped_instance_is_let_go_while_its_create_awaits_its_pod_answer(tracing: Tracing) -> None:
    gate = threading.Event()
    launcher = load_fake_launcher()
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=_gated_pod(gate), configure_sdk=False, skip_dep_check=True
    )
    try:
        with TestClient(launcher.app) as client:
            cfg = {"options": f"--model tiny --port {free_port()}"}
            assert client.put("/v2/vllm/instances/inst-x", json=cfg).status_code == 201
            process = weakref.ref(launcher.vllm_manager.instances["inst-x"].process)
            assert client.delete("/v2/vllm/instances/inst-x").status_code == 200
            deleted = time.time_ns()
            # The answer is still awaited, yet the stopped instance's process is let go
            # (the log tail sees the exit within a few of its steps).
            assert wait_until(lambda: (gc.collect(), process() is None)[1], 5)
            (tail,) = _alive(PhaseTail)
            assert tail.process is None and tail.exited
            (watch,) = _alive(StartupWatch)
            assert watch.process is None and not watch.ended
            assert not tracing.spans(CREATE_SPAN) and not tracing.spans(STARTUP_SPAN)
            gate.set()
            # The answer comes: the create span joins, its startup span ends with the stop.
            assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 10)
    finally:
        gate.set()
        inst.uninstrument()
        launcher.vllm_manager.stop_all_instances(timeout=2)
    (create,) = tracing.spans(CREATE_SPAN)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert create.attributes["fma.join"] == "annotation"
    assert startup.parent is not None and startup.context.trace_id == create.context.trace_id
    assert startup.status.status_code is StatusCode.ERROR
    assert "stopped" in (startup.status.description or "")
    # It ends when the instance was stopped, not when its Pod answer came (nothing invented).
    assert startup.end_time <= deleted


class _Stand(L._Buffered):
    """A ``_Buffered`` as its subclasses (``_LateSpan``, ``_PendingSpan``) use it."""

    __slots__ = ()

    def get_span_context(self) -> Any:
        return L.trace.INVALID_SPAN_CONTEXT

    def end(self, end_time: int | None = None) -> None:
        pass


def test_a_buffered_span_holds_no_lists_until_it_records_and_replays_what_it_recorded(
    tracing: Tracing,
) -> None:
    """What a request records on its create span's stand-in reaches the real span; a
    request that records nothing (nearly all) costs it no event or exception list."""
    quiet = _Stand({"a": 1}, 0)
    assert quiet.events is None and quiet.exceptions is None
    span = tracing.provider.get_tracer("t").start_span("quiet")
    quiet.replay(span)
    span.end()
    busy = _Stand({}, 0)
    busy.set_attribute("b", 2)
    busy.add_event("ev", {"k": "v"}, timestamp=5)
    busy.record_exception(ValueError("boom"), timestamp=6)
    busy.set_status(L.Status(StatusCode.ERROR, "bad"))
    busy.update_name("renamed")
    span = tracing.provider.get_tracer("t").start_span("busy")
    busy.replay(span)
    span.end()
    quiet_span, busy_span = tracing.spans()
    assert dict(quiet_span.attributes) == {"a": 1} and not quiet_span.events
    assert busy_span.name == "renamed" and dict(busy_span.attributes) == {"b": 2}
    assert [(e.name, e.timestamp) for e in busy_span.events] == [("ev", 5), ("exception", 6)]
    assert busy_span.events[1].attributes["exception.message"] == "boom"
    assert busy_span.status.status_code is StatusCode.ERROR


def test_a_kick_already_asked_for_is_not_made_again() -> None:
    """Every create kicks the Pod lookup while its answer is missing: only the first of a
    run sets the event (and takes its lock); once the thread took it, the next one does."""
    pod = PodInfo(lambda *a: {"annotations": {}}, env={"POD_NAME": "p", "NAMESPACE": "n"})
    sets: list[bool] = []
    real_set = pod._kick.set
    pod._kick.set = lambda: (sets.append(True), real_set())  # type: ignore[method-assign]
    pod.kick()
    pod.kick()
    assert pod._kick.is_set() and len(sets) == 1
    pod._kick.clear()  # the background thread took it
    pod.kick()
    assert pod._kick.is_set() and len(sets) == 2


THREADS_SCRIPT = """
import json, sys, threading, time
from pathlib import Path
import fma_otel
sys.path.insert(0, str(Path(fma_otel.__file__).parents[1]))
from fastapi.testclient import TestClient
from tests.instrument.conftest import Tracing, load_fake_launcher, wait_until
from tests.instrument.test_pending_memory import _gated_pod
from tests.support.otlp_receiver import free_port
from fma_otel.instrument.launcher import CREATE_SPAN, LauncherInstrumentor

def threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("fma-otel-"))

gate = threading.Event()
tracing = Tracing()
launcher = load_fake_launcher()
inst = LauncherInstrumentor()
inst.instrument(tracer_provider=tracing.provider, pod_info=_gated_pod(gate), configure_sdk=False,
                skip_dep_check=True)
out = {"installed": threads()}
with TestClient(launcher.app) as client:
    assert client.get("/health").status_code == 200
    out["served"] = threads()
    cfg = {"options": "--model tiny --port %d" % free_port()}
    assert client.put("/v2/vllm/instances/inst-x", json=cfg).status_code == 201
    out["deferred"] = threads()
    gate.set()
    assert wait_until(lambda: tracing.spans(CREATE_SPAN), 10)
    assert client.delete("/v2/vllm/instances/inst-x").status_code == 200
inst.uninstrument()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_resolver_thread_starts_at_the_first_create_it_must_resolve() -> None:
    """The Pod lookup's thread starts with the app; the resolver's only when a create is
    served before its Pod answer (a launcher whose lookup always answers in time never has
    it), in a fresh interpreter (the resolver is one per process)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FMA_OTEL_"))}
    env.update(PYTHONPATH=str(ROOT), OTEL_TRACES_EXPORTER="none")
    res = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["installed"] == []
    assert out["served"] == ["fma-otel-podinfo"]
    assert out["deferred"] == ["fma-otel-join", "fma-otel-podinfo", "fma-otel-vllm-startup"]


class _Source:
    """What a create request's ``_StartupOrder`` gives its watch: ``open``, ``ready``, ``port``."""

    def __init__(self, span: Any) -> None:
        self.span, self.is_ready, self.calls = span, False, []

    def open(self) -> tuple[Any, int | None]:
        self.calls.append("open")
        return self.span, 1

    def ready(self) -> bool:
        self.calls.append("ready")
        return self.is_ready

    def port(self) -> int | None:
        self.calls.append("port")
        return None  # nothing to probe: no HTTP from this test


def test_a_watch_given_a_source_opens_its_span_from_it_once_ready(tracing: Tracing) -> None:
    span = tracing.provider.get_tracer("t").start_span("fma.vllm.startup")
    source = _Source(span)
    watch = StartupWatch(None, None, None, source=source, interval=0.01, timeout=60)
    watch.poll()  # not ready: watched meanwhile (its port asked), not opened
    assert source.calls == ["ready", "port"] and watch.span is None and not watch.ended
    watch.stop("stopped early")  # not ready: remembered, ended once it can be opened
    assert not watch.ended
    watch.poll()  # still not ready: stepped less often from now on, not probed
    assert watch.interval == STOPPED_INTERVAL and source.calls == ["ready", "port", "ready", "ready"]
    source.is_ready = True
    watch.poll()
    assert watch.ended and source.calls.count("open") == 1
    (ended,) = tracing.spans("fma.vllm.startup")
    assert ended.status.status_code is StatusCode.ERROR and ended.status.description == "stopped early"


@pytest.mark.parametrize("logged", [False, True])
def test_a_tail_with_nothing_to_emit_is_done_once_its_instance_ended(tmp_path: Path, logged: bool) -> None:
    """An instance that ended without a log record, whose startup span is not open yet (its
    create awaits its Pod answer): its tail is done at once, not stepped - its log looked
    for - until the span opens.  With a record, it waits for the span (the control)."""
    log = tmp_path / "instance.log"
    if logged:
        log.write_bytes(b"INFO 06-29 07:36:25 [__init__.py:239] Automatically detected platform cuda.\n")
    watch = SimpleNamespace(ended=False, span=None)
    gone = SimpleNamespace(pid=2**22 + 1, _popen=SimpleNamespace(returncode=0))
    tail = PhaseTail(watch, str(log), "--model m", None, process=gone)
    for _ in range(3):
        tail.step(time.time_ns())
    assert tail.exited and tail.process is None
    assert tail.done is not logged
    assert len(tail.records) == (1 if logged else 0)
