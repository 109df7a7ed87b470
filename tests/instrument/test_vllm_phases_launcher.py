"""Live vLLM phases through the instrumented (fake) launcher: the instance's log file, where
the launcher puts it, grows while vLLM starts; the phase spans that follow are the bridge's.

The fake child does not write its log, so the test writes the v0.26 fixture into it (its
stamps moved to now, local time UTC-7 as in the fixture) in chunks, as vLLM would.
``test_vllm_phases.py`` has the same judgement against ``fma-otel bridge`` itself.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fma_otel import model
from fma_otel.instrument import vllm_phases as VP
from fma_otel.instrument.launcher import STARTUP_SPAN
from tests.instrument.conftest import wait_until
from tests.instrument.test_vllm_phases import V026, bridge_spans, live_spans, shift_to
from tests.support.otlp_receiver import free_port

pytestmark = pytest.mark.slow

OFFSET = -7 * 3600


def _tails_done() -> bool:
    """Every instance log followed so far is done with (its phases emitted or given up)."""
    return all(t.done for t in gc.get_objects() if isinstance(t, VP.PhaseTail))


def _own_threads() -> list[str]:
    """The wrappers' threads: only the start-up poller's follows the logs."""
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("fma-otel-vllm"))


def _config(port: int, extra: str = "") -> dict[str, Any]:
    return {
        "options": f"--model Qwen/Qwen3-0.6B --port {port} --fake-health-delay 3 {extra}".strip(),
        "annotations": {"inference-port": str(port)},
    }


def _run(instrumented: Any, tmp_path: Path, iid: str, extra: str = "") -> tuple[Any, str, Path, int]:
    tracing, launcher = instrumented
    launcher.vllm_manager.log_dir = str(tmp_path)
    trace_hex = os.urandom(16).hex()
    log = tmp_path / f"fake-launcher-{os.getpid()}-{iid}.log"
    with TestClient(launcher.app) as client:
        r = client.put(
            f"/v2/vllm/instances/{iid}",
            json=_config(free_port(), extra),
            headers={"traceparent": f"00-{trace_hex}-00f067aa0ba902b7-01"},
        )
        assert r.status_code == 201
        now = time.time_ns()
        data = shift_to(V026.read_bytes(), now, OFFSET)
        year = time.gmtime(now // 1_000_000_000 + OFFSET).tm_year
        with open(log, "ab") as out:  # vLLM starting: the file grows, lines cut anywhere
            for i in range(0, len(data), 997):
                out.write(data[i : i + 997])
                out.flush()
                time.sleep(0.03)
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 10)
        assert wait_until(_tails_done, 10)
        assert _own_threads() == ["fma-otel-vllm-startup"]
        captured = tmp_path / "captured.log"
        captured.write_bytes(log.read_bytes())
        client.delete(f"/v2/vllm/instances/{iid}")
    return tracing, trace_hex, captured, year


def test_live_phases_through_the_launcher_are_the_bridges(instrumented: Any, tmp_path: Path) -> None:
    tracing, trace_hex, captured, year = _run(instrumented, tmp_path, "inst-live")
    live = live_spans(tracing)
    assert len(live) >= 10
    assert live == bridge_spans(captured, trace_hex, year, OFFSET)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.attributes[VP.A_PHASES] == "log"
    ready = model.span_id_for(trace_hex, "fma.vllm.ready", 0)
    assert f"{startup.parent.span_id:016x}" == ready
    (api,) = tracing.spans("vllm.api_server.start")
    assert api.attributes["fma.instance.id"] == "inst-live"
    assert "fma.duration.max_s" in api.attributes  # bounded by the healthy instant


def test_native_vllm_tracing_leaves_the_phases_to_vllm(instrumented: Any, tmp_path: Path) -> None:
    tracing, _, _, _ = _run(instrumented, tmp_path, "inst-native", "--otlp-traces-endpoint http://c:4318")
    assert live_spans(tracing) == []
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.attributes[VP.A_PHASES] == "native"


def test_switched_off_through_the_launcher(instrumented: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(VP.ENV_SWITCH, "0")
    tracing, _, _, _ = _run(instrumented, tmp_path, "inst-off")
    assert live_spans(tracing) == []
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert VP.A_PHASES not in startup.attributes


def test_an_instance_deleted_before_it_is_up_gets_its_phases_so_far_and_no_thread_stays(
    instrumented: Any, tmp_path: Path
) -> None:
    tracing, launcher = instrumented
    launcher.vllm_manager.log_dir = str(tmp_path)
    trace_hex = os.urandom(16).hex()
    iid = "inst-gone"
    log = tmp_path / f"fake-launcher-{os.getpid()}-{iid}.log"
    with TestClient(launcher.app) as client:
        cfg = _config(free_port())
        cfg["options"] = cfg["options"].replace("--fake-health-delay 3", "--fake-health-delay 60")
        r = client.put(
            f"/v2/vllm/instances/{iid}",
            json=cfg,
            headers={"traceparent": f"00-{trace_hex}-00f067aa0ba902b7-01"},
        )
        assert r.status_code == 201
        now = time.time_ns()
        data = shift_to(V026.read_bytes(), now, OFFSET)
        part = data[: data.index(b"init engine")]
        log.write_bytes(part)
        time.sleep(0.5)  # the follower has read it; vLLM is not up
        assert live_spans(tracing) == []
        assert client.delete(f"/v2/vllm/instances/{iid}").status_code == 200
        assert wait_until(_tails_done, 10)
        assert _own_threads() == ["fma-otel-vllm-startup"]
    captured = tmp_path / "captured.log"
    captured.write_bytes(part)
    year = time.gmtime(now // 1_000_000_000 + OFFSET).tm_year
    live = live_spans(tracing)
    assert live and live == bridge_spans(captured, trace_hex, year, OFFSET)
    assert "vllm.engine.init" not in [s[0] for s in live]
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert startup.attributes[VP.A_PHASES] == "log"
