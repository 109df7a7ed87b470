"""``benchmarks/bench_fork.py``: its floor is one bare span a request, and its table's ratios.

Why: the "bare OTel SDK span" launcher is the floor the wrappers' create cost is divided
by.  FastAPI >= 0.16x adds spans of its own (a SERVER span and three internal ones a
request) once an SDK is set; with them on, that floor was four spans and five times its
price, and the wrappers read 0.6x of it instead of 1.4-5x.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.otlp_receiver import HttpOtlpReceiver

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_fork", ROOT / "benchmarks" / "bench_fork.py")
assert _spec and _spec.loader
bf = importlib.util.module_from_spec(_spec)
sys.modules["bench_fork"] = bf
_spec.loader.exec_module(bf)


def test_table_divides_each_extra_by_the_floors_extra() -> None:
    rows = {
        "unwrapped": [0.010, 0.010, 0.010],
        "floor": [0.0105, 0.0105, 0.0105],
        "wrapped": [0.011, 0.011, 0.011],
    }
    spread = {"unwrapped": 0.0001, "floor": 0.0002, "wrapped": 0.00025}
    lines = bf.table("t", rows, "unwrapped", "floor", spread).splitlines()
    assert lines[0] == (
        "| t | median ms | extra over unwrapped ms | extra / bare span's extra | spread between its launchers ms |"
    )
    assert lines[2] == "| unwrapped | 10.00 | - | - | 0.10 |"
    assert lines[3] == "| floor | 10.50 | +0.50 | - | 0.20 |"
    assert lines[4] == "| wrapped | 11.00 | +1.00 | 2.00x | 0.25 |"


def test_table_without_floor_keeps_three_columns() -> None:
    lines = bf.table("t", {"a": [0.001], "b": [0.002]}, "a").splitlines()
    assert lines[0] == "| t | median ms | extra over a ms |"
    assert lines[3] == "| b | 2.00 | +1.00 |"


@pytest.mark.timeout(60)
def test_bare_span_launcher_makes_one_server_span_a_request() -> None:
    rx = HttpOtlpReceiver().start()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        with bf.launcher(env, bf.BARE_SPAN) as (proc, port):
            for i in range(2):
                cfg = {"options": f"--model m --port {bf.free_port()}", "env_vars": {}}
                r = httpx.put(f"http://127.0.0.1:{port}/v2/vllm/instances/b{i}", json=cfg, timeout=10)
                assert r.status_code == 201
            deadline = time.monotonic() + 10
            while sum(s.name == "PUT" for s in rx.spans()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # anything else the two requests made has been exported too
            bf.kill_children(proc.pid)
        spans = rx.spans()
    finally:
        rx.stop()
    puts = [s for s in spans if s.name == "PUT"]
    assert len(puts) == 2
    assert {s.kind for s in puts} == {"SERVER"}
    # Only the middleware's spans (the readiness GETs have theirs): none of FastAPI's own.
    assert {s.name for s in spans} <= {"PUT", "GET"}
