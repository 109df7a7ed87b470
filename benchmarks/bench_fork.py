"""What the wrappers cost a launcher that forks: ``os.fork()`` and the create call.

The launcher forks every vLLM instance, and ``fork()`` is not free: it copies the page
tables of the process's anonymous memory, and it runs whatever fork handlers the process
registered - ``grpcio`` stops and restarts its threads around each fork once a channel
exists.  So the SDK and exporter that ``import fma_otel.auto`` loads make every create
slower in a way the in-process wrapper benchmark (``bench_wrappers.py``, fork replaced
by a dummy) cannot see.  Two measurements, both interleaved so the machine's load hits
every configuration alike:

* ``fork``: a fresh interpreter per configuration imports what the launcher imports
  (FastAPI, uvicorn, pydantic, multiprocessing), then optionally ``fma_otel.auto`` (or
  only the SDK and exporter the wrappers would configure, ``BARE_SDK``), and times
  ``--forks`` bare ``os.fork()`` calls (the child ``_exit``s at once).  Median per run;
  the table shows the median over ``--rounds`` runs and the extra over bare.
* ``create``: the fake launcher (``tests/fixtures/fake_launcher``, which forks its fake
  vLLM like the real one) runs ``--copies`` times per configuration, side by side; each
  round sends one ``PUT /v2/vllm/instances/<id>`` to every launcher in a shuffled order
  (``--seed``) and times it at the client, then kills the forked child so children do
  not pile up.  A configuration's median pools its launchers; the spread column is the
  difference between its launchers' medians (see ``create_latencies`` for why).
  Collectors are the tests' in-process OTLP receivers (gRPC and HTTP); "down" is a port
  nobody listens on.  One configuration has no wrappers but the same SDK and one bare
  SERVER span per request (``BARE_SPAN``): issue 7's "bare OTel SDK span", with the
  fork, so that column says how many times the floor's extra the wrappers' extra is.

Usage: ``python benchmarks/bench_fork.py [--rounds 5 --forks 400] [--creates 200
--copies 2 --seed 0]`` (``--rounds 0`` or ``--creates 0`` skips a part).  Run it on an
otherwise idle machine; it takes about four minutes.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_LAUNCHER = REPO / "tests" / "fixtures" / "fake_launcher"
LAUNCHER_IMPORTS = "import fastapi, uvicorn, pydantic, multiprocessing"

#: The OpenTelemetry SDK and the OTLP/HTTP exporter exactly as the wrappers configure them
#: (``fma_otel.instrument._sdk``: BatchSpanProcessor, the exporter on ``urllib3``), with
#: none of our code: what any tracing of the launcher with this SDK brings into the fork.
BARE_SDK = """
from opentelemetry import trace
from opentelemetry.exporter.http.transport._urllib3 import Urllib3HTTPTransport
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
_provider = TracerProvider()
_provider.add_span_processor(
    BatchSpanProcessor(OTLPSpanExporter(_transport=Urllib3HTTPTransport(verify=True, cert=None)))
)
trace.set_tracer_provider(_provider)
"""

#: BARE_SDK plus one bare SERVER span per request, opened and ended around the app by a
#: minimal ASGI middleware (no propagation, no attributes): the "bare OTel SDK span"
#: floor of issue 7, measured with the real fork.  FastAPI >= 0.16x makes spans of its
#: own (a SERVER span and three internal ones a request) once an SDK is set; they are
#: turned off here, so that the floor is one span (a wrapped create has only the
#: wrappers' two spans: ``fma.launcher.create_instance`` and ``fma.vllm.startup``).
BARE_SPAN = (
    BARE_SDK
    + """
import inspect
import fastapi
if "telemetry" in inspect.signature(fastapi.FastAPI.__init__).parameters:
    _fastapi_init = fastapi.FastAPI.__init__
    def _no_native_telemetry(self, *args, **kwargs):
        kwargs.setdefault("telemetry", {"tracing": False})  # as the wrappers set it
        _fastapi_init(self, *args, **kwargs)
    fastapi.FastAPI.__init__ = _no_native_telemetry
import uvicorn
_uvicorn_run = uvicorn.run
def _traced_run(app, **kw):
    tracer = trace.get_tracer("bare")
    async def traced(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        with tracer.start_as_current_span(scope["method"], kind=trace.SpanKind.SERVER):
            await app(scope, receive, send)
    _uvicorn_run(traced, **kw)
uvicorn.run = _traced_run
"""
)

# name -> environment for the wrapped process (None: not wrapped)
FORK_CONFIGS: dict[str, dict[str, str] | None] = {
    "unwrapped": None,
    "OTel SDK + OTLP/HTTP exporter, no wrappers": {},
    "wrapped, no exporter": {"OTEL_TRACES_EXPORTER": "none"},
    "wrapped, HTTP (default)": {},
    "wrapped, gRPC": {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
    "wrapped, gRPC, GRPC_ENABLE_FORK_SUPPORT=false": {
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "GRPC_ENABLE_FORK_SUPPORT": "false",
    },
}

_FORK_PROBE = """
import os, statistics, sys, time
{imports}
{wrap}
time.sleep(0.3)  # let the exporter's threads start
lat = []
for _ in range({forks}):
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    lat.append(time.perf_counter() - t)
    os.waitpid(pid, 0)
print(statistics.median(lat))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GRPC_"))}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra or {})
    return env


def fork_medians(rounds: int, forks: int) -> dict[str, list[float]]:
    """Median ``os.fork()`` seconds per configuration, one fresh process per round."""
    out: dict[str, list[float]] = {name: [] for name in FORK_CONFIGS}
    for r in range(rounds):
        names = list(FORK_CONFIGS) if r % 2 == 0 else list(FORK_CONFIGS)[::-1]
        for name in names:
            extra = FORK_CONFIGS[name]
            wrap = ""
            env = clean_env(extra)
            if extra is not None:
                env.setdefault("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
                wrap = BARE_SDK if name.startswith("OTel SDK") else "import fma_otel.auto"
            code = _FORK_PROBE.format(imports=LAUNCHER_IMPORTS, wrap=wrap, forks=forks)
            res = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            out[name].append(float(res.stdout.split()[-1]))
    return out


@contextmanager
def launcher(
    extra: dict[str, str] | None, prelude: str = "import fma_otel.auto"
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The fake launcher, run after ``prelude`` (the wrappers) unless ``extra`` is None."""
    import httpx

    port = free_port()
    if extra is None:
        argv = [sys.executable, "launcher.py", "--port", str(port)]
    else:
        code = (
            f"{prelude}\nimport runpy, sys; sys.argv = ['launcher.py'] + sys.argv[1:]\n"
            "runpy.run_path('launcher.py', run_name='__main__')"
        )
        argv = [sys.executable, "-c", code, "--port", str(port)]
    proc = subprocess.Popen(
        argv,
        env=clean_env(extra),
        cwd=FAKE_LAUNCHER,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its forked children die with it
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"launcher {argv} did not start") from None
                time.sleep(0.05)
        yield proc, port
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def kill_children(pid: int) -> None:
    """Kill the fake vLLM processes ``pid`` forked (the launcher reaps them)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return
    for task in tasks:
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                os.kill(int(child), signal.SIGKILL)
            except OSError:
                pass


@contextmanager
def receiver(cls: str) -> Iterator[str]:
    """One of the tests' OTLP receivers in a process of its own; yields its endpoint.

    Not in this process: its threads would share the GIL with the client that times the
    creates, so answering an export would show up as create latency.
    """
    code = (
        f"from tests.support.otlp_receiver import {cls}\n"
        f"rx = {cls}().start()\n"
        "print(rx.endpoint, flush=True)\n"
        "import sys; sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=clean_env({}),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()


BARE_ROW = "one bare SDK span per request, OTLP/HTTP, collector up (no wrappers)"
WRAP = "import fma_otel.auto"

#: name -> (environment of the launcher, None: not traced; the code run before it)
Configs = dict[str, tuple[dict[str, str] | None, str]]


def create_configs(http_rx: str, grpc_rx: str, down: str) -> Configs:
    grpc = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    return {
        "unwrapped": (None, ""),
        BARE_ROW: ({"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx}, BARE_SPAN),
        "wrapped, HTTP (default), collector up": ({"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx}, WRAP),
        "wrapped, HTTP (default), collector down": ({"OTEL_EXPORTER_OTLP_ENDPOINT": down}, WRAP),
        "wrapped, gRPC, collector up": ({**grpc, "OTEL_EXPORTER_OTLP_ENDPOINT": grpc_rx}, WRAP),
        "wrapped, gRPC, collector down": ({**grpc, "OTEL_EXPORTER_OTLP_ENDPOINT": down}, WRAP),
    }


def create_latencies(
    n: int, copies: int = 2, seed: int = 0, configs: Callable[[str, str, str], Configs] = create_configs
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Client-side seconds per ``PUT`` create, per configuration; and per configuration
    the spread (max - min) of its launchers' medians.

    Why ``copies`` launchers per configuration, in a shuffled order each round: two
    launchers of the same configuration differed by up to 0.75 ms in median create time
    (one fork's cost depends on the process's heap layout, and a fixed turn in the round
    on what ran just before), as much as the effect measured.  Pooling fresh copies and
    shuffling spreads both over every configuration; the spread column shows what is left.
    """
    import httpx

    with ExitStack() as stack:
        grpc_rx = stack.enter_context(receiver("GrpcOtlpReceiver"))
        http_rx = stack.enter_context(receiver("HttpOtlpReceiver"))
        table_of = configs(http_rx, grpc_rx, f"http://127.0.0.1:{free_port()}")
        running = {
            (name, k): stack.enter_context(launcher(extra, prelude))
            for name, (extra, prelude) in table_of.items()
            for k in range(copies)
        }
        client = stack.enter_context(httpx.Client(timeout=30))
        per_copy: dict[tuple[str, int], list[float]] = {key: [] for key in running}
        rng = random.Random(seed)
        for i in range(n):
            order = list(running)
            rng.shuffle(order)
            for key in order:
                proc, port = running[key]
                cfg = {"options": f"--model m --port {free_port()} --fake-health-delay 0", "env_vars": {}}
                t0 = time.perf_counter()
                r = client.put(f"http://127.0.0.1:{port}/v2/vllm/instances/i{i}", json=cfg)
                per_copy[key].append(time.perf_counter() - t0)
                if r.status_code != 201:
                    raise RuntimeError(f"{key[0]}: create answered {r.status_code}: {r.text}")
                time.sleep(0.02)
                kill_children(proc.pid)
        lat: dict[str, list[float]] = {name: [] for name in table_of}
        medians: dict[str, list[float]] = {name: [] for name in table_of}
        for (name, _), vals in per_copy.items():
            lat[name] += vals
            medians[name].append(statistics.median(vals))
        return lat, {name: max(m) - min(m) for name, m in medians.items()}


def table(
    title: str,
    rows: dict[str, list[float]],
    base: str,
    floor: str | None = None,
    spread: dict[str, float] | None = None,
) -> str:
    """Medians, the extra over ``base``; with ``floor`` that extra over the floor's, with
    ``spread`` the spread of each configuration's launchers."""
    ref = statistics.median(rows[base])
    head = f"| {title} | median ms | extra over {base} ms |"
    rule = "| --- | ---: | ---: |"
    floor_extra = statistics.median(rows[floor]) - ref if floor else 0.0
    if floor:
        head += " extra / bare span's extra |"
        rule += " ---: |"
    if spread:
        head += " spread between its launchers ms |"
        rule += " ---: |"
    lines = [head, rule]
    for name, vals in rows.items():
        med = statistics.median(vals)
        extra = "-" if name == base else f"{(med - ref) * 1e3:+.2f}"
        line = f"| {name} | {med * 1e3:.2f} | {extra} |"
        if floor:
            ratio = "-" if name in (base, floor) or floor_extra <= 0 else f"{(med - ref) / floor_extra:.2f}x"
            line += f" {ratio} |"
        if spread:
            line += f" {spread[name] * 1e3:.2f} |"
        lines.append(line)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="fresh processes per fork configuration")
    ap.add_argument("--forks", type=int, default=400, help="os.fork() calls per process")
    ap.add_argument("--creates", type=int, default=200, help="creates per launcher (0: skip)")
    ap.add_argument("--copies", type=int, default=2, help="launchers per create configuration")
    ap.add_argument("--seed", type=int, default=0, help="seed of the creates' order")
    args = ap.parse_args(argv)
    if args.rounds:
        forks = fork_medians(args.rounds, args.forks)
        print(table("os.fork() in a launcher-like process", forks, "unwrapped"))
    if args.creates:
        lat, spread = create_latencies(args.creates, args.copies, args.seed)
        print()
        print(table("PUT create on the fake launcher", lat, "unwrapped", BARE_ROW, spread))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
