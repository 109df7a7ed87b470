"""Per-call overhead of the wrappers, in nanoseconds (not run in CI).

    python benchmarks/bench_wrappers.py [--n 3000]

Measures, in one process, with a ``BatchSpanProcessor`` whose exporter drops everything
(export cost is off the request path by design, so it is not what a request pays):

* the launcher's create path ``PUT /v2/vllm/instances/{id}`` driven straight through the
  ASGI app (no sockets), uninstrumented vs instrumented (no ``traceparent`` and no Pod
  environment; and with a ``traceparent``).  The fork is replaced by a dummy process so
  the numbers show the wrapper, not ``fork()``; the instrumented path includes starting the
  ``fma.vllm.startup`` watcher thread;
* a bare SDK span (``tracer.start_span(...).end()``) for scale;
* an httpx ``PUT`` through a mock transport, uninstrumented vs named by DPC purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "fake_launcher"))

import httpx  # noqa: E402
import launcher  # noqa: E402  (the fake launcher fixture)
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402

from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor  # noqa: E402
from fma_otel.instrument.launcher import LauncherInstrumentor  # noqa: E402
from fma_otel.instrument.podinfo import PodInfo  # noqa: E402


class DropExporter(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class DummyProcess:
    """Stands in for ``multiprocessing.Process``: no fork, already exited."""

    pid = None

    def __init__(self, target: Any = None, args: Any = ()) -> None:
        pass

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return False


class _Ctx:
    Process = DummyProcess


def _body() -> bytes:
    return json.dumps({"options": "--model m", "env_vars": {"A": "b"}}).encode()


async def _drive(app: Any, n: int, headers: list[tuple[bytes, bytes]]) -> list[int]:
    body = _body()
    out: list[int] = []
    for i in range(n):
        launcher.vllm_manager.instances.clear()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "PUT",
            "scheme": "http",
            "path": f"/v2/vllm/instances/i{i}",
            "raw_path": f"/v2/vllm/instances/i{i}".encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json"), *headers],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8001),
        }
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        status: list[int] = []

        async def send(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                status.append(msg["status"])  # noqa: B023 - awaited within the iteration

        t0 = time.perf_counter_ns()
        await app(scope, receive, send)
        out.append(time.perf_counter_ns() - t0)
        assert status == [201], status
    return out


def _stats(samples: list[int]) -> tuple[float, float]:
    samples = samples[len(samples) // 10 :]  # drop warm-up
    return statistics.median(samples), statistics.mean(samples)


def _time(fn: Callable[[], Any], n: int) -> list[int]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        out.append(time.perf_counter_ns() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    n = ap.parse_args().n
    launcher.multiprocessing.get_context = lambda *a, **k: _Ctx  # type: ignore[attr-defined]
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=4096))
    rows: list[tuple[str, float, float]] = []
    tp = [(b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]

    rows.append(("create path, uninstrumented", *_stats(asyncio.run(_drive(launcher.app, n, [])))))
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=provider, pod_info=PodInfo(env={}), configure_sdk=False, skip_dep_check=True
    )
    launcher.app.middleware_stack = None
    rows.append(("create path, instrumented (own trace)", *_stats(asyncio.run(_drive(launcher.app, n, [])))))
    rows.append(
        ("create path, instrumented (traceparent)", *_stats(asyncio.run(_drive(launcher.app, n, tp))))
    )
    inst.uninstrument()

    tracer = provider.get_tracer("bench")
    rows.append(("bare SDK span start+end", *_stats(_time(lambda: tracer.start_span("x").end(), n))))

    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(201)))

    def put() -> None:
        client.put("http://10.0.0.1:8001/v2/vllm/instances/abc", content=b"{}")

    rows.append(("httpx PUT create_instance, uninstrumented", *_stats(_time(put, n))))
    hx = HttpxDpcInstrumentor()
    hx.instrument(tracer_provider=provider, skip_dep_check=True)
    rows.append(("httpx PUT create_instance, named by purpose", *_stats(_time(put, n))))
    hx.uninstrument()

    base = {r[0]: r for r in rows}
    print(f"{'case':48} {'median ns':>12} {'mean ns':>12} {'overhead (median)':>18}")
    for name, med, mean in rows:
        ref = None
        if name.startswith("create path, instrumented"):
            ref = base["create path, uninstrumented"][1]
        elif name.startswith("httpx") and "named" in name:
            ref = base["httpx PUT create_instance, uninstrumented"][1]
        extra = f"{med - ref:+18,.0f}" if ref is not None else ""
        print(f"{name:48} {med:12,.0f} {mean:12,.0f} {extra}")
    provider.shutdown()


if __name__ == "__main__":
    main()
