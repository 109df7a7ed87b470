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
  Collectors are the tests' OTLP receivers (gRPC and HTTP), each in a process of its own:
  up, slow (answers after 3 s) and failing (answers 503); "down" is a port nobody listens
  on.  After the creates each configuration's launcher peak RSS is printed.  Two configurations have no wrappers but the same SDK and one span
  a request, issue 7's "bare OTel SDK span" with the fork: ``BARE_SPAN`` (no
  attributes) and ``BARE_SHAPED_SPAN`` (shaped like the create span: start time at
  receipt, its attributes built from the request, the status code at the end - the
  floor ``count_instructions.py`` uses); the ratio columns say how many times each
  floor's extra the wrappers' extra is.
* ``paired``: the create again, but each of ``--copies`` launchers is every configuration
  in turn (``PAIRED``: the wrappers installed, and a header picks per request whether
  they run, step aside, or step aside for a bare or create-shaped span).  All modes fork
  the same process, so the heap-layout spread between launchers cancels and the ratio of
  the wrappers' request-path extra to a bare span's can be resolved; what the imports add
  to every fork is the ``fork`` part's to show.
* Intervals: a two-level bootstrap (``bootstrap``: launchers, then their creates, drawn
  with replacement) gives each extra and ratio a 95% interval, and ``verdicts`` judges
  issue 7's targets (within 1 ms of unwrapped; <= 1.5x a bare span's extra) as met,
  missed or not resolved by where the interval lies.

Usage: ``python benchmarks/bench_fork.py [--rounds 5 --forks 400] [--creates 200
--copies 2 --seed 0] [--only HTTP] [--paired 150] [--boot 2000]`` (``--rounds 0``,
``--creates 0`` or ``--paired 0`` skips a part; ``--only`` keeps the create configurations
whose name holds the word, plus the base and floors; ``--baseline DIR`` runs each wrapped
create configuration a second time, ``[baseline]``, with the ``fma_otel`` of another
checkout, in the same shuffled rounds).  Run it on an otherwise idle
machine; the defaults take about six minutes, ``--rounds 0 --creates 150 --copies 4
--only HTTP --paired 0`` about 1.5 minutes.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tests' support modules (run as a script from anywhere)
from tests.support.k8s_server import write_kubeconfig  # noqa: E402

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

#: FastAPI >= 0.16x makes spans of its own (a SERVER span and three internal ones a
#: request) once an SDK is set; the floors turn them off, as the wrappers do for the app
#: they trace, so that a floor is one span a request (a wrapped create has only the
#: wrappers' two spans: ``fma.launcher.create_instance`` and ``fma.vllm.startup``).
_NO_FASTAPI_SPANS = """
import inspect
import fastapi
if "telemetry" in inspect.signature(fastapi.FastAPI.__init__).parameters:
    _fastapi_init = fastapi.FastAPI.__init__
    def _no_native_telemetry(self, *args, **kwargs):
        kwargs.setdefault("telemetry", {"tracing": False})  # as the wrappers set it
        _fastapi_init(self, *args, **kwargs)
    fastapi.FastAPI.__init__ = _no_native_telemetry
"""

#: Puts the floor's ASGI middleware (``traced(app)``, defined before it) around the app
#: the launcher hands to ``uvicorn.run``.
_RUN_TRACED = """
import uvicorn
_uvicorn_run = uvicorn.run
def _traced_run(app, **kw):
    _uvicorn_run(traced(app), **kw)
uvicorn.run = _traced_run
"""

#: The floors' two spans, as coroutines around the app: ``bare_span`` (no propagation,
#: no attributes) and ``shaped_span``: a create's span as a hand-made span for that
#: request would be - its start time taken at receipt, the 12 attributes the wrappers give
#: a create on the fake launcher (no ``traceparent``, no Pod) built from the ASGI scope on
#: the request path, the status code set at the end (13).  The same shape as
#: ``count_instructions.py``'s floor ("bare SDK span, create-shaped"), here with the fork.
_FLOOR_SPANS = """
import time
from typing import Any
from opentelemetry import trace as _trace
_bare_tracer = _trace.get_tracer("bare")
_REASON = "no traceparent header; POD_NAME/NAMESPACE not set (downward API missing)"
async def bare_span(app, scope, receive, send):
    with _bare_tracer.start_as_current_span(scope["method"], kind=_trace.SpanKind.SERVER):
        await app(scope, receive, send)
async def shaped_span(app, scope, receive, send):
    t0 = time.time_ns()
    path = scope["path"]
    server = scope.get("server") or ("", 0)
    client = scope.get("client") or ("",)
    attrs = {
        "http.request.method": "PUT",
        "url.path": path,
        "url.scheme": scope.get("scheme", "http"),
        "http.route": "/v2/vllm/instances/{instance_id}",
        "server.address": server[0],
        "server.port": server[1],
        "client.address": client[0],
        "fma.instance.id": path.rsplit("/", 1)[-1],
        "fma.start.source": "wrapper",
        "fma.end.source": "wrapper",
        "fma.join": "none",
        "fma.join.reason": _REASON,
    }
    span = _bare_tracer.start_span(
        "fma.launcher.create_instance", kind=_trace.SpanKind.SERVER, attributes=attrs, start_time=t0
    )
    status = []
    async def send_status(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])
        await send(message)
    with _trace.use_span(span, end_on_exit=False):
        try:
            await app(scope, receive, send_status)
        finally:
            if status:
                span.set_attribute("http.response.status_code", status[0])
            span.end()
"""

#: The floors' middleware: every HTTP request in ``bare_span``, but a create (``PUT``) in
#: ``create_span`` (defined before it).
_FLOOR_MIDDLEWARE = """
def traced(app):
    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        if scope["method"] == "PUT":
            return await create_span(app, scope, receive, send)
        await bare_span(app, scope, receive, send)
    return middleware
"""

#: BARE_SDK plus one bare SERVER span per request, opened and ended around the app by a
#: minimal ASGI middleware: the "bare OTel SDK span" floor of issue 7, with the real fork.
BARE_SPAN = (
    BARE_SDK
    + _NO_FASTAPI_SPANS
    + _FLOOR_SPANS
    + "create_span = bare_span\n"
    + _FLOOR_MIDDLEWARE
    + _RUN_TRACED
)

#: BARE_SDK plus one create-shaped SERVER span per create (``shaped_span``); other
#: requests get the plain bare span.
BARE_SHAPED_SPAN = (
    BARE_SDK
    + _NO_FASTAPI_SPANS
    + _FLOOR_SPANS
    + "create_span = shaped_span\n"
    + _FLOOR_MIDDLEWARE
    + _RUN_TRACED
)

#: The header that picks a paired launcher's mode for one request, and the modes.
PAIRED_HEADER = "x-fma-bench"
PAIRED_MODES = {
    "off": "wrappers installed, suppressed",
    "bare": "a bare span (wrappers suppressed)",
    "shaped": "a create-shaped span (wrappers suppressed)",
    "wrapped": "wrapped",
}

#: One launcher that can be each of the configurations, request by request: the wrappers
#: (``fma_otel.auto``, which configures the SDK and its exporter), and outside them a
#: middleware that reads ``x-fma-bench``: ``wrapped`` leaves the request to the wrappers;
#: ``off`` runs it under ``suppress_instrumentation()`` (the wrappers step aside, as they
#: do for any suppressed request); ``bare`` and ``shaped`` do that and make a floor span.
#: Every mode then forks the same process, heap and page tables alike, so the launcher-to-
#: launcher spread of the separate-process rows cancels: what is left is what each does on
#: the request path (the SDK's and wrappers' imports grow every mode's fork alike; the
#: ``fork`` rows measure that part).
PAIRED = (
    "import fma_otel.auto\n"
    + _FLOOR_SPANS
    + """
from opentelemetry.instrumentation.utils import suppress_instrumentation
def traced(app):
    async def middleware(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        mode = b"wrapped"
        for k, v in scope["headers"]:
            if k == b"x-fma-bench":  # PAIRED_HEADER
                mode = v
        if mode == b"wrapped":
            return await app(scope, receive, send)
        with suppress_instrumentation():
            if mode == b"off":
                await app(scope, receive, send)
            elif mode == b"bare":
                await bare_span(app, scope, receive, send)
            else:
                await shaped_span(app, scope, receive, send)
    return middleware
"""
    + _RUN_TRACED
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


_COMPILED: list[bool] = []


def installed_bytecode() -> None:
    """Compile ``fma_otel``'s bytecode into its ``__pycache__`` (once), as a wheel install has it.

    Why: this checkout is imported from source, and with ``PYTHONDONTWRITEBYTECODE`` set in
    the caller's shell every wrapped launcher compiled ``fma_otel`` at start-up - megabytes
    of compiler garbage left in its heap, which every ``fork()`` then copies the page
    tables of.  The unwrapped launcher never paid that (site-packages is compiled), so the
    extra was the benchmark's, not the wrappers'.  Compiled up front so that every launcher
    starts alike.  (Not ``PYTHONPYCACHEPREFIX``: that moves every module's cache, and the
    launchers would then compile FastAPI and the rest too.)
    """
    if not _COMPILED:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(REPO / "fma_otel")], env=env, check=True
        )
        _COMPILED.append(True)


def clean_env(extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "GRPC_"))}
    env["PYTHONPATH"] = str(REPO)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # read the bytecode ``installed_bytecode`` wrote
    env.pop("PYTHONPYCACHEPREFIX", None)
    installed_bytecode()
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
        # Its forked vLLM children first: each is in a process group of its own
        # (``setpgrp``), so the group kill below would not reach them; orphaned, they
        # would outlive the benchmark.
        kill_descendants(proc.pid)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def children_of(pid: int) -> list[int]:
    """The pids ``pid`` forked (from ``/proc``: every thread's children)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return []
    out: list[int] = []
    for task in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return out


def kill_children(pid: int) -> None:
    """Kill the fake vLLM processes ``pid`` forked (the launcher reaps them)."""
    for child in children_of(pid):
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass


def kill_descendants(pid: int) -> None:
    """SIGKILL every process below ``pid`` (children first found, then theirs)."""
    for child in children_of(pid):
        kill_descendants(child)
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass


@contextmanager
def _child(code: str) -> Iterator[str]:
    """``python -c code`` in the repository, ended when done; yields the first line it prints
    (a server's URL or endpoint)."""
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


@contextmanager
def receiver(cls: str, **faults: object) -> Iterator[str]:
    """One of the tests' OTLP receivers in a process of its own; yields its endpoint.
    ``faults`` set its switches (``delay_s``: answer that late; ``fail_with``: that status).

    Not in this process: its threads would share the GIL with the client that times the
    creates, so answering an export would show up as create latency.
    """
    code = (
        f"from tests.support.otlp_receiver import {cls}\n"
        f"rx = {cls}().start()\n"
        + "".join(f"rx.{k} = {v!r}\n" for k, v in faults.items())
        + "print(rx.endpoint, flush=True)\n"
        "import sys; sys.stdin.read()\n"
    )
    with _child(code) as first_line:
        yield first_line


@contextmanager
def api_server(code: str) -> Iterator[str]:
    """A Kubernetes API server (``code``: one of ``API_SERVERS``) in a process of its own;
    yields its URL.  Not in this process, for the same reason as ``receiver``."""
    with _child(code) as first_line:
        yield first_line


BARE_ROW = "one bare SDK span per request, OTLP/HTTP, collector up (no wrappers)"
SHAPED_ROW = (
    "one create-shaped bare SDK span per create (13 attributes), OTLP/HTTP, collector up (no wrappers)"
)
#: The floors the wrappers' extra is divided by, and how the table names them.
FLOORS = {BARE_ROW: "bare span", SHAPED_ROW: "create-shaped span"}
WRAP = "import fma_otel.auto"
BASE = "unwrapped"

#: name -> (environment of the launcher, None: not traced; the code run before it)
Configs = dict[str, tuple[dict[str, str] | None, str]]
#: The collectors the create part runs, each in a process of its own: key -> (receiver
#: class, its fault switches).  "down" is a port nobody listens on.
COLLECTORS: dict[str, tuple[str, dict[str, object]]] = {
    "http": ("HttpOtlpReceiver", {}),
    "grpc": ("GrpcOtlpReceiver", {}),
    "slow": ("HttpOtlpReceiver", {"delay_s": 3.0}),
    "503": ("HttpOtlpReceiver", {"fail_with": 503}),
}
#: The launcher Pod the lookup configurations read (and watch): bound to a requester,
#: its ``instance-id`` annotation naming no create of the benchmark, so every create is
#: served before its span can be placed (the deferred path, the longest on the request).
LOOKUP_POD = ("launcher-bench", "fma-bench")
_HEALTHY_API = f"""
import sys
from tests.support.k8s_server import FakeCluster, make_pod
k8s = FakeCluster().start()
ann = {{"dual-pods.llm-d.ai/requester": "5e1f0c2a-0000-4000-8000-0000000000bb bench-req",
        "dual-pods.llm-d.ai/instance-id": "not-a-bench-create"}}
k8s.add_pod(make_pod({LOOKUP_POD[0]!r}, {LOOKUP_POD[1]!r}, annotations=ann))
print(k8s.url, flush=True)
sys.stdin.read()
"""
#: An API server that accepts connections and never answers.
_HUNG_API = """
import socket, sys, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(128)
held = []
def accept():
    while True:
        held.append(s.accept()[0])
threading.Thread(target=accept, daemon=True).start()
print(f"http://127.0.0.1:{s.getsockname()[1]}", flush=True)
sys.stdin.read()
"""
#: The API servers of the Pod-lookup configurations, each in a process of its own;
#: "down" is a port nobody listens on.
API_SERVERS = {"healthy": _HEALTHY_API, "hung": _HUNG_API}
LOOKUP_ROWS = {
    "healthy": "wrapped, HTTP (default), collector up, Pod lookup: API server healthy",
    "hung": "wrapped, HTTP (default), collector up, Pod lookup: API server hung",
    "down": "wrapped, HTTP (default), collector up, Pod lookup: API server down",
}

#: (configuration, its launcher's number) -> client-side seconds of each create
PerCopy = dict[tuple[str, int], list[float]]


def create_configs(rx: dict[str, str]) -> Configs:
    """The create part's configurations, given the endpoints of ``COLLECTORS`` and "down"."""

    def to(key: str, **extra: str) -> dict[str, str]:
        return {**extra, "OTEL_EXPORTER_OTLP_ENDPOINT": rx[key]}

    grpc = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
    pod = {"POD_NAME": LOOKUP_POD[0], "NAMESPACE": LOOKUP_POD[1]}
    lookups = {
        row: (to("http", **pod, KUBECONFIG=rx[f"api-{kind}"]), WRAP)
        for kind, row in LOOKUP_ROWS.items()
        if f"api-{kind}" in rx
    }
    return {
        BASE: (None, ""),
        BARE_ROW: (to("http"), BARE_SPAN),
        SHAPED_ROW: (to("http"), BARE_SHAPED_SPAN),
        "wrapped, HTTP (default), collector up": (to("http"), WRAP),
        "wrapped, HTTP (default), collector down": (to("down"), WRAP),
        "wrapped, HTTP (default), collector slow (answers after 3 s)": (to("slow"), WRAP),
        "wrapped, HTTP (default), collector answers 503": (to("503"), WRAP),
        "wrapped, gRPC, collector up": (to("grpc", **grpc), WRAP),
        "wrapped, gRPC, collector down": (to("down", **grpc), WRAP),
        **lookups,
    }


def json_kubeconfig(path: str) -> str:
    """The kubeconfig at ``path`` rewritten as JSON, the same document; its path.

    Why: the launcher reads a JSON kubeconfig without PyYAML, whose import would grow every
    lookup launcher - and so every fork - by more than a megabyte.  In a cluster (the
    service account's credentials) no kubeconfig and no PyYAML are read at all; a JSON
    one is the benchmark's nearest stand-in for that.
    """
    import json

    import yaml

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    return path


#: Suffix of a wrapped configuration run with ``--baseline``'s ``fma_otel``.
BASELINE = " [baseline]"


def with_baseline(configs: Configs, code: str) -> Configs:
    """``configs`` and, after them, each wrapped one again with ``fma_otel`` imported from
    ``code`` (another checkout: ``git archive <commit> fma_otel | tar -x -C DIR``).

    Why: the machine's load moves every create by more than a change to the wrappers does;
    launchers of both versions in the same rounds, shuffled together, see the same load.
    """
    out = dict(configs)
    for name, (extra, prelude) in configs.items():
        if extra is not None and name.startswith("wrapped"):
            out[name + BASELINE] = ({**extra, "PYTHONPATH": os.pathsep.join([code, str(REPO)])}, prelude)
    return out


def compile_baseline(code: str) -> None:
    """Compile the baseline's ``fma_otel`` into its ``__pycache__`` (see ``installed_bytecode``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(code) / "fma_otel")], env=env, check=True
    )


def select(configs: Configs, only: Sequence[str]) -> Configs:
    """The configurations whose name holds one of ``only`` (all when empty), with the
    unwrapped base and the floors always kept: every ratio needs them."""
    keep = {BASE, *FLOORS}
    return {k: v for k, v in configs.items() if k in keep or not only or any(w in k for w in only)}


def timed_create(
    client: Any,
    proc: subprocess.Popen[bytes],
    port: int,
    iid: str,
    what: str,
    headers: dict[str, str] | None = None,
) -> float:
    """One ``PUT`` create timed at the client; then the forked child is killed and the
    instance deleted (untimed), so that a launcher holds one instance at a time.

    Why delete: an instance the launcher keeps holds its process object and that
    process's sentinel pipe, and every later fork copies the growing descriptor table;
    over thousands of creates a launcher's creates slowed from 6 to 11 ms that way.
    """
    cfg = {"options": f"--model m --port {free_port()} --fake-health-delay 0", "env_vars": {}}
    url = f"http://127.0.0.1:{port}/v2/vllm/instances/{iid}"
    t0 = time.perf_counter()
    r = client.put(url, json=cfg, headers=headers)
    took = time.perf_counter() - t0
    if r.status_code != 201:
        raise RuntimeError(f"{what}: create answered {r.status_code}: {r.text}")
    time.sleep(0.02)
    kill_children(proc.pid)
    d = client.delete(url, headers=headers)
    if d.status_code >= 400:
        raise RuntimeError(f"{what}: delete answered {d.status_code}: {d.text}")
    return took


def create_latencies(
    n: int,
    copies: int = 2,
    seed: int = 0,
    configs: Callable[[dict[str, str]], Configs] = create_configs,
    only: Sequence[str] = (),
    peaks: dict[str, float] | None = None,
    baseline: str | None = None,
) -> PerCopy:
    """Client-side seconds per ``PUT`` create, per launcher of each configuration; with
    ``peaks``, each configuration's largest launcher peak RSS (MiB) after its creates.

    Why ``copies`` launchers per configuration, in a shuffled order each round: two
    launchers of the same configuration differed by up to 0.75 ms in median create time
    (one fork's cost depends on the process's heap layout, and a fixed turn in the round
    on what ran just before), as much as the effect measured.  Pooling fresh copies and
    shuffling spreads both over every configuration; ``spreads`` shows what is left, and
    ``bootstrap`` turns both kinds of variation into an interval.
    """
    import httpx

    with ExitStack() as stack:
        rx = {key: stack.enter_context(receiver(cls, **faults)) for key, (cls, faults) in COLLECTORS.items()}
        rx["down"] = f"http://127.0.0.1:{free_port()}"
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        apis = {kind: stack.enter_context(api_server(code)) for kind, code in API_SERVERS.items()}
        apis["down"] = f"http://127.0.0.1:{free_port()}"
        for kind, url in apis.items():
            rx[f"api-{kind}"] = json_kubeconfig(write_kubeconfig(tmp / f"{kind}.json", url))
        table_of = select(configs(rx), only)
        if baseline:
            table_of = with_baseline(table_of, baseline)
        running = {
            (name, k): stack.enter_context(launcher(extra, prelude))
            for name, (extra, prelude) in table_of.items()
            for k in range(copies)
        }
        client = stack.enter_context(httpx.Client(timeout=30))
        per_copy: PerCopy = {key: [] for key in running}
        rng = random.Random(seed)
        for i in range(n):
            order = list(running)
            rng.shuffle(order)
            for key in order:
                proc, port = running[key]
                per_copy[key].append(timed_create(client, proc, port, f"i{i}", key[0]))
        if peaks is not None:
            for (name, _), (proc, _) in running.items():
                peaks[name] = max(peaks.get(name, 0.0), peak_rss_mib(proc.pid))
        return per_copy


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident memory (``VmHWM``), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def paired_latencies(n: int, copies: int = 2, seed: int = 0) -> PerCopy:
    """Client-side seconds per create for each mode of ``PAIRED``, per launcher:
    ``copies`` launchers, each sent ``n`` creates in every mode, all (launcher, mode)
    pairs in a shuffled order each round; the collector is up (OTLP/HTTP)."""
    import httpx

    with ExitStack() as stack:
        http_rx = stack.enter_context(receiver("HttpOtlpReceiver"))
        procs = [
            stack.enter_context(launcher({"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx}, PAIRED))
            for _ in range(copies)
        ]
        client = stack.enter_context(httpx.Client(timeout=30))
        keys = [(mode, k) for mode in PAIRED_MODES for k in range(copies)]
        per_copy: PerCopy = {key: [] for key in keys}
        rng = random.Random(seed)
        for i in range(n):
            rng.shuffle(keys)
            for mode, k in keys:
                proc, port = procs[k]
                per_copy[(mode, k)].append(
                    timed_create(client, proc, port, f"{mode}{i}", f"paired {mode}", {PAIRED_HEADER: mode})
                )
        return {(PAIRED_MODES[mode], k): per_copy[(mode, k)] for mode in PAIRED_MODES for k in range(copies)}


def _groups(per_copy: PerCopy) -> dict[str, list[list[float]]]:
    """Configuration -> its launchers' samples, in the order the launchers were made."""
    out: dict[str, list[list[float]]] = {}
    for (name, _), vals in per_copy.items():
        out.setdefault(name, []).append(vals)
    return out


def pooled(per_copy: PerCopy) -> dict[str, list[float]]:
    """Configuration -> every create of all its launchers."""
    return {name: [v for vals in launchers for v in vals] for name, launchers in _groups(per_copy).items()}


def spreads(per_copy: PerCopy) -> dict[str, float]:
    """Configuration -> the spread (max - min) of its launchers' medians."""
    out = {}
    for name, launchers in _groups(per_copy).items():
        medians = [statistics.median(vals) for vals in launchers]
        out[name] = max(medians) - min(medians)
    return out


#: (low, high) ends of an interval
Interval = tuple[float, float]


def _percentiles(xs: list[float], level: float) -> Interval:
    xs = sorted(xs)
    tail = (1 - level) / 2
    lo = xs[min(len(xs) - 1, int(tail * len(xs)))]
    hi = xs[min(len(xs) - 1, int((1 - tail) * len(xs)))]
    return lo, hi


def bootstrap(
    per_copy: PerCopy,
    base: str = BASE,
    floors: Sequence[str] = tuple(FLOORS),
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    paired: bool = False,
) -> dict[str, tuple[Interval, dict[str, Interval]]]:
    """Percentile intervals of each configuration's extra over ``base`` (seconds, as the
    difference of pooled medians) and of that extra over each floor's, by a two-level
    bootstrap: each replicate draws a configuration's launchers with replacement, then
    each drawn launcher's creates with replacement.

    Why two levels: the launchers of one configuration differ by as much as the effect
    (heap layout), so resampling creates alone would give intervals far too narrow.  With
    few launchers the launcher level is coarse (two launchers allow three draws); run
    ``--copies 4`` or more when the interval decides something.  A ratio whose floor's
    extra is 0 or below in a replicate has no finite value there: it counts as infinite,
    so an interval reaching ``inf`` says the floor was not resolved from the base.

    ``paired``: launcher ``k`` of every configuration is the same process (``PAIRED``),
    so a replicate draws the launchers once and uses that draw for every configuration.
    """
    rng = random.Random(seed)
    groups = _groups(per_copy)
    extras: dict[str, list[float]] = {name: [] for name in groups}
    ratios: dict[str, dict[str, list[float]]] = {
        name: {f: [] for f in floors if f in groups} for name in groups
    }
    if paired and len({len(launchers) for launchers in groups.values()}) != 1:
        raise ValueError("paired: every configuration needs the same launchers")
    n_base = len(groups[base])
    for _ in range(n_boot):
        med = {}
        drawn = rng.choices(range(n_base), k=n_base) if paired else None
        for name, launchers in groups.items():
            picks = (
                [launchers[i] for i in drawn]
                if drawn is not None
                else rng.choices(launchers, k=len(launchers))
            )
            sample: list[float] = []
            for vals in picks:
                sample += rng.choices(vals, k=len(vals))
            med[name] = statistics.median(sample)
        for name in groups:
            extra = med[name] - med[base]
            extras[name].append(extra)
            for f in ratios[name]:
                fx = med[f] - med[base]
                ratios[name][f].append(extra / fx if fx > 0 else math.inf)
    return {
        name: (
            _percentiles(extras[name], level),
            {f: _percentiles(r, level) for f, r in ratios[name].items()},
        )
        for name in groups
    }


def _ratio_text(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.2f}x"


def table(
    title: str,
    rows: dict[str, list[float]],
    base: str,
    floors: dict[str, str] | None = None,
    spread: dict[str, float] | None = None,
    ci: dict[str, tuple[Interval, dict[str, Interval]]] | None = None,
) -> str:
    """Medians and the extra over ``base``; for each of ``floors`` (name -> its label in
    the header) that extra over the floor's; with ``ci`` the bootstrap interval of each
    figure after it; with ``spread`` the spread of each configuration's launchers."""
    floors = floors or {}
    ref = statistics.median(rows[base])
    head = f"| {title} | median ms | extra over {base} ms |"
    rule = "| --- | ---: | ---: |"
    floor_extra = {f: statistics.median(rows[f]) - ref for f in floors}
    for label in floors.values():
        head += f" extra / {label}'s extra |"
        rule += " ---: |"
    if spread:
        head += " spread between its launchers ms |"
        rule += " ---: |"
    lines = [head, rule]
    for name, vals in rows.items():
        med = statistics.median(vals)
        extra = "-" if name == base else f"{(med - ref) * 1e3:+.2f}"
        if ci and name != base:
            (lo, hi), _ = ci[name]
            extra += f" ({lo * 1e3:+.2f} to {hi * 1e3:+.2f})"
        line = f"| {name} | {med * 1e3:.2f} | {extra} |"
        for f in floors:
            if name == base or name == f or floor_extra[f] <= 0:
                line += " - |"
                continue
            cell = f"{(med - ref) / floor_extra[f]:.2f}x"
            if ci:
                lo, hi = ci[name][1][f]
                cell += f" ({_ratio_text(lo)} to {_ratio_text(hi)})"
            line += f" {cell} |"
        if spread:
            line += f" {spread[name] * 1e3:.2f} |"
        lines.append(line)
    return "\n".join(lines)


def verdicts(
    ci: dict[str, tuple[Interval, dict[str, Interval]]],
    floor_labels: dict[str, str] = FLOORS,
    base_label: str = BASE,
    max_extra_s: float = 0.001,
    max_ratio: float = 1.5,
    level: float = 0.95,
) -> list[str]:
    """Issue 7's two create targets, judged on each wrapped configuration's intervals:
    met when the whole interval is inside the target, missed when it is all outside,
    not resolved when it holds the target (more launchers or creates may decide it)."""

    def judge(iv: Interval, limit: float) -> str:
        if iv[1] <= limit:
            return "met"
        if iv[0] > limit:
            return "missed"
        return "not resolved"

    pct = f"{level:.0%}"
    out = []
    for name, ((lo, hi), ratios) in ci.items():
        if not name.startswith("wrapped"):
            continue
        out.append(
            f"{name}: extra {lo * 1e3:+.2f} to {hi * 1e3:+.2f} ms ({pct}): "
            f"within {max_extra_s * 1e3:g} ms of {base_label} {judge((lo, hi), max_extra_s)}"
        )
        for f, iv in ratios.items():
            out.append(
                f"  / {floor_labels.get(f, f)}'s extra {_ratio_text(iv[0])} to {_ratio_text(iv[1])}: "
                f"<= {max_ratio:g}x {judge(iv, max_ratio)}"
            )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="fresh processes per fork configuration")
    ap.add_argument("--forks", type=int, default=400, help="os.fork() calls per process")
    ap.add_argument("--creates", type=int, default=200, help="creates per launcher (0: skip)")
    ap.add_argument("--copies", type=int, default=2, help="launchers per create configuration")
    ap.add_argument("--seed", type=int, default=0, help="seed of the creates' order and of the bootstrap")
    ap.add_argument(
        "--only",
        action="append",
        default=[],
        help="create configurations whose name holds this (repeatable; the base and floors always run)",
    )
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap replicates (0: no intervals)")
    ap.add_argument(
        "--paired",
        type=int,
        default=150,
        help="creates per mode per launcher of the paired part: --copies launchers, each in every mode (0: skip)",
    )
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="also run each wrapped create configuration with the fma_otel in DIR (another checkout)",
    )
    args = ap.parse_args(argv)
    if args.baseline:
        compile_baseline(args.baseline)
    if args.rounds:
        forks = fork_medians(args.rounds, args.forks)
        print(table("os.fork() in a launcher-like process", forks, BASE))
    if args.creates:
        peaks: dict[str, float] = {}
        per_copy = create_latencies(
            args.creates, args.copies, args.seed, only=args.only, peaks=peaks, baseline=args.baseline
        )
        ci = bootstrap(per_copy, n_boot=args.boot, seed=args.seed) if args.boot else None
        print()
        print(table("PUT create on the fake launcher", pooled(per_copy), BASE, FLOORS, spreads(per_copy), ci))
        print()
        print("peak RSS of a launcher after its creates (largest of its copies):")
        print("\n".join(f"  {name}: {mib:.1f} MiB" for name, mib in peaks.items()))
        if ci:
            print()
            print(f"95% bootstrap intervals ({args.boot} replicates, launchers and creates resampled):")
            print("\n".join(verdicts(ci)))
    if args.paired:
        per_copy = paired_latencies(args.paired, args.copies, args.seed)
        base, bare, shaped = (PAIRED_MODES[m] for m in ("off", "bare", "shaped"))
        floors = {bare: "bare span", shaped: "create-shaped span"}
        ci = bootstrap(per_copy, base, list(floors), args.boot, args.seed, paired=True) if args.boot else None
        print()
        title = "PUT create, paired: each launcher in every mode"
        print(table(title, pooled(per_copy), base, floors, spreads(per_copy), ci))
        if ci:
            print()
            print(f"95% bootstrap intervals ({args.boot} replicates, the same launchers for every mode):")
            print("\n".join(verdicts(ci, floors, "the same launchers with the wrappers suppressed")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
