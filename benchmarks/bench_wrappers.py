"""Per-call overhead of the wrappers, in nanoseconds (not run in CI).

    python benchmarks/bench_wrappers.py [--n 3000] [--rounds 5]

Everything runs in one process on one ``TracerProvider`` with one ``BatchSpanProcessor``
whose exporter drops everything (export is off the request path by design, so it is not
what a request pays); the bare spans use that same provider, so like is compared with like.

* the launcher's create path ``PUT /v2/vllm/instances/{id}`` driven straight through the
  ASGI app (no sockets), uninstrumented vs instrumented (no ``traceparent`` and no Pod
  environment; and with a ``traceparent``).  The fork is replaced by a dummy process so
  the numbers show the wrapper, not ``fork()``; the instrumented path includes handing the
  instance to the ``fma.vllm.startup`` poller;
* bare SDK spans for scale: no attributes, and shaped like the wrappers' spans (the create
  span's SERVER kind, ``start_time`` and 13 attributes plus the status code set at the end;
  the httpx span's CLIENT kind and 6 attributes plus the status code);
* an httpx ``PUT`` through a mock transport, uninstrumented vs named by DPC purpose;
* for scale in place: the same create and ``PUT`` with only a bare span of the same shape
  opened around them by hand (no wrapper code at all).  A span amid a request costs more
  than the same span in a tight loop (caches, the allocator), so this is the floor any
  wrapper that makes one such span can reach; the create path makes two
  (``fma.launcher.create_instance`` and ``fma.vllm.startup``).

The machine this runs on is shared and noisy, so every case runs once per round, rounds
interleave the cases, and the table shows the median over rounds of each round's median.
The default clock is the process's CPU time (``--clock cpu``): it counts the wrappers'
background threads (the startup poller, the batch processor) in whichever call they
overlap, and does not count time the process spent descheduled by other jobs.
``--clock thread`` counts only the calling thread's CPU time: what the request itself
pays, without the work the wrappers moved off its path (the poller opening
``fma.vllm.startup``, the batch processor exporting).
"ratio" is the wrapper's added cost, (instrumented - uninstrumented) median, divided by
the median of the bare span of the same shape (issue 7's target: <= 1.5).
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
from opentelemetry.trace import SpanKind  # noqa: E402

from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor  # noqa: E402
from fma_otel.instrument.launcher import LauncherInstrumentor  # noqa: E402
from fma_otel.instrument.podinfo import PodInfo  # noqa: E402

#: The clock every sample is taken with (see ``--clock``).
CLOCK: Callable[[], int] = time.process_time_ns


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

        t0 = CLOCK()
        await app(scope, receive, send)
        out.append(CLOCK() - t0)
        assert status == [201], status
    return out


def _median(samples: list[int]) -> float:
    return statistics.median(samples[len(samples) // 10 :])  # drop warm-up


def _time(fn: Callable[[], Any], n: int) -> list[int]:
    out = []
    for _ in range(n):
        t0 = CLOCK()
        fn()
        out.append(CLOCK() - t0)
    return out


_CREATE_ATTRS: dict[str, Any] = {
    "http.request.method": "PUT",
    "url.path": "/v2/vllm/instances/i1",
    "url.scheme": "http",
    "http.route": "/v2/vllm/instances/{instance_id}",
    "server.address": "127.0.0.1",
    "server.port": 8001,
    "client.address": "127.0.0.1",
    "fma.instance.id": "i1",
    "fma.start.source": "wrapper",
    "fma.end.source": "wrapper",
    "fma.join": "none",
    "fma.join.reason": "no traceparent header; POD_NAME/NAMESPACE not set (downward API missing)",
}
_HTTPX_ATTRS: dict[str, Any] = {
    "fma.http.purpose": "create_instance",
    "http.request.method": "PUT",
    "url.full": "http://10.0.0.1:8001/v2/vllm/instances/abc",
    "server.address": "10.0.0.1",
    "server.port": 8001,
    "fma.instance.id": "abc",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000, help="calls per case per round")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median of medians)")
    ap.add_argument(
        "--clock",
        choices=("cpu", "thread", "wall"),
        default="cpu",
        help="cpu: process CPU time (all threads: background span work counts, other jobs on "
        "a shared machine do not); thread: the calling thread's CPU time only; wall: perf_counter",
    )
    opts = ap.parse_args()
    n = opts.n
    global CLOCK
    CLOCK = {"cpu": time.process_time_ns, "thread": time.thread_time_ns, "wall": time.perf_counter_ns}[
        opts.clock
    ]
    launcher.multiprocessing.get_context = lambda *a, **k: _Ctx  # type: ignore[attr-defined]
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=4096))
    tracer = provider.get_tracer("bench")
    tp = [(b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(201)))

    def put() -> None:
        client.put("http://10.0.0.1:8001/v2/vllm/instances/abc", content=b"{}")

    def bare() -> None:
        tracer.start_span("x").end()

    def bare_create() -> None:
        span = tracer.start_span(
            "fma.launcher.create_instance",
            kind=SpanKind.SERVER,
            attributes=dict(_CREATE_ATTRS),
            start_time=time.time_ns(),
        )
        span.set_attribute("http.response.status_code", 201)
        span.end()

    async def create_in_bare_span(scope: Any, receive: Any, send: Any) -> None:
        span = tracer.start_span(
            "fma.launcher.create_instance",
            kind=SpanKind.SERVER,
            attributes=dict(_CREATE_ATTRS),
            start_time=time.time_ns(),
        )
        await launcher.app(scope, receive, send)
        span.set_attribute("http.response.status_code", 201)
        span.end()

    def put_in_bare_span() -> None:
        span = tracer.start_span(
            "fma.dpc.create_instance", kind=SpanKind.CLIENT, attributes=dict(_HTTPX_ATTRS)
        )
        put()
        span.set_attribute("http.response.status_code", 201)
        span.end()

    def bare_httpx() -> None:
        span = tracer.start_span(
            "fma.dpc.create_instance", kind=SpanKind.CLIENT, attributes=dict(_HTTPX_ATTRS)
        )
        span.set_attribute("http.response.status_code", 201)
        span.end()

    names = (
        C_UN := "create path, uninstrumented",
        C_OWN := "create path, instrumented (own trace)",
        C_TP := "create path, instrumented (traceparent)",
        C_BARE := "create path, in a bare create-shaped span",
        B0 := "bare SDK span, no attributes",
        B_C := "bare SDK span, create-shaped (SERVER, 13 attrs)",
        B_H := "bare SDK span, httpx-shaped (CLIENT, 7 attrs)",
        H_UN := "httpx PUT create_instance, uninstrumented",
        H_IN := "httpx PUT create_instance, named by purpose",
        H_BARE := "httpx PUT create_instance, in a bare httpx-shaped span",
    )
    per_round: dict[str, list[float]] = {k: [] for k in names}
    means: dict[str, list[float]] = {k: [] for k in names}

    def record(name: str, samples: list[int]) -> None:
        per_round[name].append(_median(samples))
        means[name].append(statistics.mean(samples[len(samples) // 10 :]))

    inst = LauncherInstrumentor()
    hx = HttpxDpcInstrumentor()
    for _ in range(opts.rounds):
        launcher.app.middleware_stack = None
        record(C_UN, asyncio.run(_drive(launcher.app, n, [])))
        inst.instrument(
            tracer_provider=provider, pod_info=PodInfo(env={}), configure_sdk=False, skip_dep_check=True
        )
        launcher.app.middleware_stack = None
        record(C_OWN, asyncio.run(_drive(launcher.app, n, [])))
        record(C_TP, asyncio.run(_drive(launcher.app, n, tp)))
        inst.uninstrument()
        launcher.app.middleware_stack = None
        record(C_BARE, asyncio.run(_drive(create_in_bare_span, n, [])))
        record(B0, _time(bare, n))
        record(B_C, _time(bare_create, n))
        record(B_H, _time(bare_httpx, n))
        record(H_UN, _time(put, n))
        record(H_BARE, _time(put_in_bare_span, n))
        hx.instrument(tracer_provider=provider, skip_dep_check=True)
        record(H_IN, _time(put, n))
        hx.uninstrument()

    med = {k: statistics.median(v) for k, v in per_round.items()}
    mean = {k: statistics.median(v) for k, v in means.items()}
    ref = {C_OWN: (C_UN, B_C), C_TP: (C_UN, B_C), C_BARE: (C_UN, B_C), H_IN: (H_UN, B_H), H_BARE: (H_UN, B_H)}
    print(f"clock={opts.clock}, n={n} per case per round, {opts.rounds} rounds; median of per-round medians")
    print(f"{'case':50} {'median ns':>11} {'mean ns':>11} {'added ns':>10} {'ratio':>6}")
    for name in names:
        extra = ""
        if name in ref:
            base, bare_ref = ref[name]
            added = med[name] - med[base]
            extra = f"{added:+10,.0f} {added / med[bare_ref]:6.2f}"
        print(f"{name:50} {med[name]:11,.0f} {mean[name]:11,.0f} {extra}")
    print("ratio = added ns / bare span of the same shape (create: SERVER 13 attrs; httpx: CLIENT 7 attrs)")
    print("'in a bare ...-shaped span': the same call with only that span around it (one span, no wrapper)")
    provider.shutdown()


if __name__ == "__main__":
    main()
