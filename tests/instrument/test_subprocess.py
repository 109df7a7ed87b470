"""The fake launcher as a ``__main__`` script in a subprocess, exporting over OTLP.

(b) of the issue: ``opentelemetry-instrument python3 launcher.py`` (entry point, no code
change) and ``import fma_otel.auto``; the create call joins the actuation trace through
the Pod annotation served by a local Kubernetes API; collector down changes nothing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fma_otel import model
from tests.instrument.conftest import FAKE_DIR, wait_until
from tests.support.k8s_server import FakeCluster, make_pod
from tests.support.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver, free_port

pytestmark = pytest.mark.slow

UID = "a1b2c3d4-0000-4000-8000-000000000001"
REPO = Path(__file__).resolve().parents[2]


def _launch(argv: list[str], env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        argv, env=env, cwd=str(FAKE_DIR), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.05)
        if proc.poll() is not None:
            break
    proc.kill()
    out = proc.communicate()[0].decode(errors="replace")
    raise AssertionError(f"launcher did not start:\n{out}")


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            kids = [int(k) for k in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            out += [kid, *_descendants(kid)]
    return out


def _stop(proc: subprocess.Popen[bytes]) -> str:
    """Stop the launcher, and every fake vLLM it forked: those run in process groups of
    their own, so one the launcher did not stop (it crashed, or timed out) would outlive it."""
    forked = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=10)[0].decode(errors="replace")
    except subprocess.TimeoutExpired:
        proc.kill()
        out = proc.communicate()[0].decode(errors="replace")
    for pid in forked:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeCluster, str]]:
    with FakeCluster() as k8s:
        k8s.add_pod(
            make_pod(
                "launcher-x",
                "fma-test",
                annotations={
                    "dual-pods.llm-d.ai/requester": f"{UID} req-x",
                    "dual-pods.llm-d.ai/instance-id": "inst-1",
                },
            )
        )
        yield k8s, k8s.write_kubeconfig(str(tmp_path / "kubeconfig"))


def _env(endpoint: str, kubeconfig: str, protocol: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    if protocol:
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    env.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_INSECURE="true",
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="httpx,httpx2",
        POD_NAME="launcher-x",
        NAMESPACE="fma-test",
        KUBECONFIG=kubeconfig,
        FMA_OTEL_POD_LOOKUP_TIMEOUT="3",
        PYTHONPATH=str(REPO),
    )
    return env


def _exercise(port: int, rx: Any = None) -> float:
    """A create, its fake vLLM healthy, a list, a delete; with ``rx``, the delete waits
    until the startup span has arrived (ended at the healthy instant, not by the delete)."""
    vport = free_port()
    cfg = {"options": f"--model m --port {vport} --fake-health-delay 0.2", "env_vars": {"K": "secret"}}
    t0 = time.perf_counter()
    r = httpx.put(f"http://127.0.0.1:{port}/v2/vllm/instances/inst-1", json=cfg, timeout=10)
    took = time.perf_counter() - t0
    assert r.status_code == 201, r.text
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{vport}/health", timeout=0.5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    time.sleep(0.3)  # the watcher polls every 0.1 s
    if rx is not None:
        assert wait_until(lambda: any(s.name == "fma.vllm.startup" for s in rx.spans()), 20), [
            (s.name, s.attributes.get("fma.join.reason")) for s in rx.spans()
        ]
    assert httpx.get(f"http://127.0.0.1:{port}/v2/vllm/instances", timeout=5).status_code == 200
    assert httpx.delete(f"http://127.0.0.1:{port}/v2/vllm/instances/inst-1", timeout=10).status_code == 200
    return took


def _wait_joined(rx: GrpcOtlpReceiver | HttpOtlpReceiver) -> None:
    """A create served before the launcher had read its Pod (the first, in a fresh
    process) is exported once its span is resolved, after the response: wait for it."""
    wanted = {model.SPANS_BY_NAME["fma.launcher.create_instance"].name, "fma.vllm.startup"}
    assert wait_until(lambda: wanted <= {s.name for s in rx.spans()}, 20), [s.name for s in rx.spans()]


def _check_joined(rx: GrpcOtlpReceiver | HttpOtlpReceiver) -> None:
    spans = rx.spans()
    by_name = {s.name: s for s in spans}
    trace_hex = model.trace_id_for(UID)
    create = by_name[model.SPANS_BY_NAME["fma.launcher.create_instance"].name]
    assert create.trace_id == trace_hex, create.attributes.get("fma.join.reason")
    assert create.span_id == model.span_id_for(trace_hex, create.name, 0)
    assert create.parent_span_id == model.span_id_for(trace_hex, "fma.dpc.create_instance", 0)
    assert create.service == model.SERVICE_LAUNCHER
    startup = by_name["fma.vllm.startup"]
    assert startup.parent_span_id == model.span_id_for(trace_hex, "fma.vllm.ready", 0)
    assert startup.status_code == "OK", (startup.status_message, startup.attributes)
    assert "GET /v2/vllm/instances" in by_name
    assert "secret" not in repr([s.attributes for s in spans])


def entry_points_dir(tmp_path: Path) -> str:
    """A ``*.dist-info`` with this checkout's ``opentelemetry_*`` entry points that the
    installed metadata lacks (an editable install made from another checkout has only
    those of its own ``pyproject.toml``): how ``opentelemetry-instrument`` finds them."""
    from importlib.metadata import entry_points

    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    lines: list[str] = []
    for group, eps in declared.items():
        installed = {ep.name for ep in entry_points(group=group)}
        missing = {k: v for k, v in eps.items() if k not in installed}
        if missing:
            lines += [f"[{group}]"] + [f"{k} = {v}" for k, v in missing.items()] + [""]
    info = tmp_path / "eps" / "fma_otel_checkout-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fma-otel-checkout\nVersion: 0\n")
    (info / "entry_points.txt").write_text("\n".join(lines))
    return str(info.parent)


@pytest.mark.skipif(shutil.which("opentelemetry-instrument") is None, reason="needs opentelemetry-instrument")
def test_main_script_under_opentelemetry_instrument(cluster: Any, tmp_path: Path) -> None:
    """No code change: ``opentelemetry-instrument`` finds fma-otel's distro, configurator
    (the SDK, with the derived-id generator) and instrumentors through entry points."""
    _, kubeconfig = cluster
    port = free_port()
    with GrpcOtlpReceiver() as rx:
        argv = ["opentelemetry-instrument", sys.executable, "launcher.py", "--port", str(port)]
        env = _env(rx.endpoint, kubeconfig, protocol="grpc")
        env["PYTHONPATH"] = entry_points_dir(tmp_path) + os.pathsep + env["PYTHONPATH"]
        proc = _launch(argv, env, port)
        try:
            _exercise(port, rx)
            _wait_joined(rx)
        finally:
            out = _stop(proc)
        assert proc.returncode is not None, out
        _check_joined(rx)


def test_import_fma_otel_auto_and_collector_down(cluster: Any) -> None:
    """``import fma_otel.auto`` at the top of a __main__ script; no collector listening."""
    _, kubeconfig = cluster
    port = free_port()
    dead = f"http://127.0.0.1:{free_port()}"
    code = "import fma_otel.auto, runpy, sys; sys.argv = ['launcher.py'] + sys.argv[1:]; "
    code += "runpy.run_path('launcher.py', run_name='__main__')"
    env = _env(dead, kubeconfig)
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    proc = _launch([sys.executable, "-c", code, "--port", str(port)], env, port)
    try:
        _exercise(port)  # each step asserts its answer (201, 200, 200)
        _exercise(port)  # and again, once exports to the dead collector have failed
        alive = proc.poll() is None
    finally:
        out = _stop(proc)
    assert alive, out
    assert proc.returncode in (0, -signal.SIGTERM), out  # it stopped as asked, not by a crash
    assert "Traceback" not in out, out


_AUTO = "import fma_otel.auto, runpy, sys; sys.argv = ['launcher.py'] + sys.argv[1:]; "
_AUTO += "runpy.run_path('launcher.py', run_name='__main__')"


def test_import_fma_otel_auto_exports_http_protobuf_by_default(cluster: Any) -> None:
    """No protocol set: the spans arrive at an OTLP/HTTP receiver (gRPC's fork cost avoided)."""
    _, kubeconfig = cluster
    port = free_port()
    with HttpOtlpReceiver() as rx:
        proc = _launch(
            [sys.executable, "-c", _AUTO, "--port", str(port)], _env(rx.endpoint, kubeconfig), port
        )
        try:
            _exercise(port, rx)
            _wait_joined(rx)
        finally:
            out = _stop(proc)
        _check_joined(rx)
    assert "Traceback" not in out, out
    assert "4317" not in out, out  # no protocol warning for an HTTP endpoint


def test_grpc_port_without_protocol_warns_once(cluster: Any) -> None:
    """An endpoint on :4317 and no protocol: one clear warning in the launcher's log."""
    _, kubeconfig = cluster
    port = free_port()
    env = _env("http://127.0.0.1:4317", kubeconfig)
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"
    proc = _launch([sys.executable, "-c", _AUTO, "--port", str(port)], env, port)
    try:
        _exercise(port)
    finally:
        out = _stop(proc)
    lines = [ln for ln in out.splitlines() if "port 4317 (OTLP/gRPC) but no protocol is set" in ln]
    assert len(lines) == 1, out
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in lines[0]
    assert "Traceback" not in out, out


@pytest.mark.parametrize(("fault", "value"), [("delay_s", 2.0), ("fail_with", 503)], ids=["slow", "503"])
def test_a_slow_or_failing_collector_never_holds_up_a_create(cluster: Any, fault: str, value: Any) -> None:
    """While the exporter waits on a collector that answers after 2 s, or retries one that
    answers 503 (for up to its 3 s timeout), the launcher's creates go on at their own pace: export is off the request
    path (the batch processor's thread) and its queue is bounded."""
    _, kubeconfig = cluster
    rx = HttpOtlpReceiver().start()
    setattr(rx, fault, value)
    try:
        port = free_port()
        env = _env(rx.endpoint, kubeconfig)
        env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "3"
        proc = _launch([sys.executable, "-c", _AUTO, "--port", str(port)], env, port)
        try:
            first = _exercise(port)  # its spans go out after 0.1 s and meet the fault
            # an export is now waiting on (or retrying) the collector
            assert wait_until(lambda: rx.calls >= 1, 5)
            second = _exercise(port)
        finally:
            out = _stop(proc)
    finally:
        rx.stop()
    # Not a speed test: a create that waited on the export would take the collector's
    # whole delay (2 s) or the exporter's whole retry budget (the 3 s timeout). Both are
    # short only so that the launcher's exit, which flushes into the fault, is short too.
    bound = 2.0 if fault == "delay_s" else 3.0
    assert second < bound, (first, second, out)
    assert "Traceback" not in out, out


def test_a_create_still_waiting_for_its_pod_is_exported_at_exit(tmp_path: Path) -> None:
    """API server hung and a long join wait: the launcher is stopped while the create's
    span still waits for the Pod answer; it is exported anyway, saying why it did not join."""
    from tests.instrument.test_pod_lookup import HungServer
    from tests.support.k8s_server import write_kubeconfig

    hung = HungServer()
    try:
        port = free_port()
        with HttpOtlpReceiver() as rx:
            env = _env(rx.endpoint, write_kubeconfig(tmp_path / "kubeconfig", hung.url))
            env.update(FMA_OTEL_POD_LOOKUP_TIMEOUT="60", FMA_OTEL_POD_JOIN_WAIT="60")
            proc = _launch([sys.executable, "-c", _AUTO, "--port", str(port)], env, port)
            try:
                cfg = {"options": f"--model m --port {free_port()} --fake-health-delay 0", "env_vars": {}}
                r = httpx.put(f"http://127.0.0.1:{port}/v2/vllm/instances/inst-x", json=cfg, timeout=10)
                assert r.status_code == 201, r.text
            finally:
                out = _stop(proc)
            spans = rx.spans()
    finally:
        hung.close()
    creates = [s for s in spans if s.name == model.SPANS_BY_NAME["fma.launcher.create_instance"].name]
    assert len(creates) == 1, (out, proc.returncode, [s.name for s in spans])
    assert creates[0].attributes["fma.join"] == "none"
    assert "not known within" in creates[0].attributes["fma.join.reason"]
    assert "Traceback" not in out, out
