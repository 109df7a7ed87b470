"""Per-call overhead of the wrappers, in nanoseconds (not run in CI).

    python benchmarks/bench_wrappers.py [--n 3000] [--rounds 5]
    python benchmarks/bench_wrappers.py --case h_in --n 300 --no-timing   # one case only

``--case KEY`` runs one case alone (``--warmup`` calls, then ``--n`` calls, then waits for
the poller and flushes the provider): what ``count_instructions.py`` runs under callgrind.
``--no-timing`` takes no clock samples and prints nothing.

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
  the httpx span's CLIENT kind and 6 attributes plus the status code); and the create-shaped
  one as a hand-made span for a request with a ``traceparent`` would be: the header read by
  the SDK's propagator, the span started under it (the joined create's reference);
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "fake_launcher"))

import httpx  # noqa: E402
import launcher  # noqa: E402  (the fake launcher fixture)
from opentelemetry import propagate  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor  # noqa: E402
from fma_otel.instrument.ids import DerivedIdGenerator  # noqa: E402
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


async def _drive(app: Any, n: int, headers: list[tuple[bytes, bytes]], timed: bool = True) -> list[int]:
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

        if timed:
            t0 = CLOCK()
            await app(scope, receive, send)
            out.append(CLOCK() - t0)
        else:
            await app(scope, receive, send)
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


TRACEPARENT = [(b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")]
_TP_CARRIER = {k.decode(): v.decode() for k, v in TRACEPARENT}
#: The create span's attributes when it joined by ``traceparent`` (no join reason).
_CREATE_ATTRS_TP = {
    **{k: v for k, v in _CREATE_ATTRS.items() if k != "fma.join.reason"},
    "fma.join": "traceparent",
}


#: Each case's key (``--case``) and its row in the table, in the order of the table.
LABELS: dict[str, str] = {
    "c_un": "create path, uninstrumented",
    "c_own": "create path, instrumented (own trace)",
    "c_tp": "create path, instrumented (traceparent)",
    "c_bare": "create path, in a bare create-shaped span",
    "b0": "bare SDK span, no attributes",
    "b_c": "bare SDK span, create-shaped (SERVER, 13 attrs)",
    "b_cp": "bare SDK span, create-shaped, child of a traceparent",
    "b_h": "bare SDK span, httpx-shaped (CLIENT, 7 attrs)",
    "h_un": "httpx PUT create_instance, uninstrumented",
    "h_in": "httpx PUT create_instance, named by purpose",
    "h_bare": "httpx PUT create_instance, in a bare httpx-shaped span",
}


@dataclass(frozen=True)
class Case:
    """One measured case: ``call`` (one synchronous call) or ``app`` (an ASGI app driven
    with ``headers``), run with ``wrapper`` instrumented ("launcher", "httpx" or none)."""

    key: str
    wrapper: str = ""
    call: Callable[[], Any] | None = None
    app: Any = None
    headers: tuple[tuple[bytes, bytes], ...] = ()

    @property
    def label(self) -> str:
        return LABELS[self.key]

    def run(self, n: int, timed: bool = True) -> list[int]:
        """``n`` calls; their ``CLOCK`` samples when ``timed``, else no clock at all."""
        if self.app is not None:
            return asyncio.run(_drive(self.app, n, list(self.headers), timed))
        assert self.call is not None
        if timed:
            return _time(self.call, n)
        call = self.call
        for _ in range(n):
            call()
        return []


class Bench:
    """Every case on one provider, and the switch between the instrumented states.

    The only definition of the cases: the timing table (``main``) and the instruction
    counts (``count_instructions.py``, through ``--case``) both run these."""

    def __init__(self) -> None:
        launcher.multiprocessing.get_context = lambda *a, **k: _Ctx  # type: ignore[attr-defined]
        self.provider = provider = TracerProvider(id_generator=DerivedIdGenerator())
        provider.add_span_processor(BatchSpanProcessor(DropExporter(), max_queue_size=4096))
        tracer = provider.get_tracer("bench")
        client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(201)))
        self._launcher = LauncherInstrumentor()
        self._httpx = HttpxDpcInstrumentor()
        self._on = ""

        def put() -> None:
            client.put("http://10.0.0.1:8001/v2/vllm/instances/abc", content=b"{}")

        def bare() -> None:
            tracer.start_span("x").end()

        def bare_create(context: Any = None, attributes: dict[str, Any] = _CREATE_ATTRS) -> None:
            span = tracer.start_span(
                "fma.launcher.create_instance",
                context=context,
                kind=SpanKind.SERVER,
                attributes=dict(attributes),
                start_time=time.time_ns(),
            )
            span.set_attribute("http.response.status_code", 201)
            span.end()

        def bare_create_joined() -> None:
            # What a hand-made span for a request with a ``traceparent`` pays: the header
            # read by the SDK's propagator, the span started as the remote parent's child.
            bare_create(propagate.extract(_TP_CARRIER), _CREATE_ATTRS_TP)

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

        #: In the order of the table (``LABELS``).
        self.cases: dict[str, Case] = {
            c.key: c
            for c in (
                Case("c_un", app=launcher.app),
                Case("c_own", "launcher", app=launcher.app),
                Case("c_tp", "launcher", app=launcher.app, headers=tuple(TRACEPARENT)),
                Case("c_bare", app=create_in_bare_span),
                Case("b0", call=bare),
                Case("b_c", call=bare_create),
                Case("b_cp", call=bare_create_joined),
                Case("b_h", call=bare_httpx),
                Case("h_un", call=put),
                Case("h_in", "httpx", call=put),
                Case("h_bare", call=put_in_bare_span),
            )
        }

    def use(self, wrapper: str) -> None:
        """Instrument ``wrapper`` alone ("" for none); the launcher's middleware stack is
        rebuilt whenever the launcher's wrapper comes or goes."""
        if wrapper == self._on:
            return
        if self._on == "launcher":
            self._launcher.uninstrument()
        elif self._on == "httpx":
            self._httpx.uninstrument()
        if wrapper == "launcher":
            self._launcher.instrument(
                tracer_provider=self.provider,
                pod_info=PodInfo(env={}),
                skip_dep_check=True,
            )
        elif wrapper == "httpx":
            self._httpx.instrument(tracer_provider=self.provider, skip_dep_check=True)
        if "launcher" in (wrapper, self._on):
            launcher.app.middleware_stack = None
        self._on = wrapper

    def run(self, key: str, n: int, timed: bool = True) -> list[int]:
        case = self.cases[key]
        self.use(case.wrapper)
        return case.run(n, timed)


#: The order the cases run in within a round (the table lists them in ``LABELS`` order).
RUN_ORDER = ("c_un", "c_own", "c_tp", "c_bare", "b0", "b_c", "b_cp", "b_h", "h_un", "h_bare", "h_in")
#: Case -> (its uninstrumented case, the bare span of the same shape): the table's ratios.
REFERENCES = {
    "c_own": ("c_un", "b_c"),
    "c_tp": ("c_un", "b_cp"),
    "c_bare": ("c_un", "b_c"),
    "h_in": ("h_un", "b_h"),
    "h_bare": ("h_un", "b_h"),
}


def run_one(bench: Bench, key: str, n: int, warmup: int, settle: float, timed: bool) -> list[int]:
    """``--case``: ``warmup`` calls, ``n`` calls, then the poller's and the provider's work
    done (``settle`` seconds for the startup poller, then a flush), so that everything
    the ``n`` calls caused is counted, in whichever thread."""
    bench.run(key, warmup, timed=False)
    time.sleep(settle)
    samples = bench.run(key, n, timed)
    time.sleep(settle)
    bench.provider.shutdown()
    return samples


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
    ap.add_argument("--case", help="run this case alone (" + ", ".join(RUN_ORDER) + ")")
    ap.add_argument("--warmup", type=int, default=50, help="with --case: calls before the measured ones")
    ap.add_argument(
        "--settle", type=float, default=1.2, help="with --case: seconds for the poller before and after"
    )
    ap.add_argument("--no-timing", action="store_true", help="with --case: no clock, print nothing")
    opts = ap.parse_args()
    n = opts.n
    global CLOCK
    CLOCK = {"cpu": time.process_time_ns, "thread": time.thread_time_ns, "wall": time.perf_counter_ns}[
        opts.clock
    ]
    bench = Bench()
    if opts.case is not None:
        if opts.case not in bench.cases:
            ap.error(f"--case {opts.case!r}: one of {', '.join(RUN_ORDER)}")
        samples = run_one(bench, opts.case, n, opts.warmup, opts.settle, not opts.no_timing)
        if samples:
            print(
                f"{bench.cases[opts.case].label}: median {statistics.median(samples):,.0f} ns, clock={opts.clock}"
            )
        return
    cases = bench.cases
    per_round: dict[str, list[float]] = {k: [] for k in cases}
    means: dict[str, list[float]] = {k: [] for k in cases}

    for _ in range(opts.rounds):
        for key in RUN_ORDER:
            samples = bench.run(key, n)
            per_round[key].append(_median(samples))
            means[key].append(statistics.mean(samples[len(samples) // 10 :]))
    bench.use("")

    med = {k: statistics.median(v) for k, v in per_round.items()}
    mean = {k: statistics.median(v) for k, v in means.items()}
    print(f"clock={opts.clock}, n={n} per case per round, {opts.rounds} rounds; median of per-round medians")
    print(f"{'case':55} {'median ns':>11} {'mean ns':>11} {'added ns':>10} {'ratio':>6}")
    for key, case in cases.items():
        extra = ""
        if key in REFERENCES:
            base, bare_ref = REFERENCES[key]
            added = med[key] - med[base]
            extra = f"{added:+10,.0f} {added / med[bare_ref]:6.2f}"
        print(f"{case.label:55} {med[key]:11,.0f} {mean[key]:11,.0f} {extra}")
    print(
        "ratio = added ns / bare span of the same shape (create: SERVER 13 attrs, under the same "
        "traceparent for the joined create; httpx: CLIENT 7 attrs)"
    )
    print("'in a bare ...-shaped span': the same call with only that span around it (one span, no wrapper)")
    bench.provider.shutdown()


if __name__ == "__main__":
    main()
