"""CPU per create of the launcher wrapper's code path, in process (run by hand, not in CI).

    python benchmarks/bench_create.py [--creates 1500] [--rounds 3] [--fork dummy|real]
    python benchmarks/bench_create.py --baseline /tmp/base   # also another checkout's fma_otel
    python benchmarks/bench_create.py --profile "lookup healthy" [--threads] [--top 40]
    python benchmarks/bench_create.py --import-costs   # RssAnon each of the wrappers' imports adds
    python benchmarks/bench_create.py --memory "lookup healthy" --fork real --creates 100 --top 25

Why this exists next to ``bench_fork.py``: ``bench_fork`` times creates at an HTTP client
against separate launcher processes, so a fraction of a millisecond of the wrapper's own
work is hidden in the noise of sockets, uvicorn and the machine's load.  Here the fake
launcher (``tests/fixtures/fake_launcher``) is driven straight through its ASGI app, in
the configurations of ``bench_fork``'s create part (the same environments, the same
OTLP/HTTP receiver and the same three API servers, each in a process of its own), and
each create is measured in CPU time:

* **request thread**: ``time.thread_time_ns()`` around the ASGI call - what the create
  request itself pays (the work the wrappers moved onto their threads is not in it);
* **process**: the whole process's CPU time over the timed creates (and the pauses
  between them, ``--gap``) divided by their number - what each create costs the launcher
  in all, its background threads (batch processor, start-up poller, Pod lookup) included;
* **minor faults** of the request thread up to the response; with ``--fork real`` also the
  ``os.fork()`` call itself (its page-table copy grows with the launcher's memory) and the
  request thread's CPU and faults from the fork to the response (each page written there
  is copied while the child shares it).

The fork is ``--fork dummy`` by default (a process object that does not fork, as in
``bench_wrappers.py``), so the figures are the wrapper's code alone; ``--fork real``
forks the fake vLLM child as ``bench_fork`` does (and kills it after each create,
untimed), which adds what the wrapper's writes cost after the fork (copy-on-write) and
the fork's own growth with the process.

Each configuration runs in a fresh interpreter (what it imports is what the launcher
would), ``--rounds`` times in a shuffled order; the table shows the median over rounds.
``--baseline DIR`` runs every wrapped configuration a second time with ``fma_otel``
imported from ``DIR`` (``git archive <commit> fma_otel | tar -x -C DIR``), in the same
rounds, so the machine's load hits the before and the after alike.
``--profile NAME`` runs one configuration in this process under ``cProfile`` (the request
thread only) and prints the functions by own and by cumulative time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:  # after PYTHONPATH: a --baseline worker's fma_otel comes first
    sys.path.append(str(REPO))
sys.path.insert(0, str(HERE))
FAKE_LAUNCHER = REPO / "tests" / "fixtures" / "fake_launcher"

#: configuration -> how bench_fork's environment of it is made: (wrapped, collector key or
#: None, API server kind or None).
CONFIGS: dict[str, tuple[bool, str | None, str | None]] = {
    "unwrapped": (False, None, None),
    "bare SDK span": (False, "http", None),
    "collector up": (True, "http", None),
    "lookup healthy": (True, "http", "healthy"),
    "lookup hung": (True, "http", "hung"),
    "lookup down": (True, "http", "down"),
}
BASE = "unwrapped"
#: No wrappers: ``bench_fork``'s create-shaped bare SDK span floor (its SDK, exporter and
#: ASGI middleware) around the fake launcher's app.
BARE = "bare SDK span"


# ---------------------------------------------------------------- the worker (one config)


class _DummyProcess:
    """Stands in for ``multiprocessing.Process``: no fork, already exited."""

    pid = None

    def __init__(self, target: Any = None, args: Any = ()) -> None:
        pass

    def start(self) -> None:
        pass

    def is_alive(self) -> bool:
        return False


def _load_launcher(fork: str) -> types.ModuleType:
    """The fake launcher module (imported as ``launcher``, after the wrappers if any)."""
    sys.path.insert(0, str(FAKE_LAUNCHER))
    import launcher  # the fake launcher fixture

    if fork == "dummy":
        ctx = types.SimpleNamespace(Process=_DummyProcess)
        launcher.multiprocessing = types.SimpleNamespace(  # type: ignore[attr-defined]
            get_context=lambda *a, **k: ctx, process=None
        )
    return launcher


def _scope(method: str, path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8001"),
            (b"content-type", b"application/json"),
            (b"user-agent", b"python-httpx/0.28.1"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8001),
    }


#: ``thread_time_ns()`` and the thread's minor page faults when the last ``send`` of the
#: response body was made (what an HTTP client would wait for).
_AT_RESPONSE: list[int] = [0, 0]


#: The same, right after the (real) fork returned in the parent.
_AT_FORK: list[int] = [0, 0]


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


_BEFORE_FORK: list[int] = [0]


def _mark_before_fork() -> None:
    _BEFORE_FORK[0] = time.thread_time_ns()


def _mark_fork() -> None:
    _AT_FORK[0] = time.thread_time_ns()
    _AT_FORK[1] = _minflt()
    _STEPS["gcs at fork"] = _GCS[0]


#: ``--steps``: the thread's minor faults when the launcher's ``VllmInstance.start`` and
#: ``create_instance`` returned (outside every wrapper) and when the response's start was
#: sent: where between the fork and the response the faulting writes happen.
_STEPS: dict[str, int] = {}
STEP_NAMES = ("start returned", "create_instance returned", "response start sent", "response sent")


#: ``--steps``: garbage collections so far (a collection in the window walks every young
#: object, writing their pages).
_GCS: list[int] = [0]


def _count_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _GCS[0] += 1


def _mark_step(name: str) -> None:
    _STEPS[name] = _minflt()


def _watch_steps(launcher: Any) -> None:
    """Wrap the launcher's ``start`` and ``create_instance`` outside the wrappers (which
    patch them when the app's stack is built: call this after its first request)."""
    start = launcher.VllmInstance.start
    create = launcher.VllmMultiProcessManager.create_instance

    def start_marked(self: Any, *a: Any, **k: Any) -> Any:
        out = start(self, *a, **k)
        _mark_step(STEP_NAMES[0])
        return out

    def create_marked(self: Any, *a: Any, **k: Any) -> Any:
        out = create(self, *a, **k)
        _mark_step(STEP_NAMES[1])
        return out

    launcher.VllmInstance.start = start_marked
    launcher.VllmMultiProcessManager.create_instance = create_marked


async def _call(app: Any, scope: dict[str, Any], body: bytes) -> int:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)  # no disconnect while the app still runs
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status: list[int] = []

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            _STEPS[STEP_NAMES[2]] = _minflt()
            _STEPS["gcs at response"] = _GCS[0]
            status.append(msg["status"])
        elif msg["type"] == "http.response.body" and not msg.get("more_body"):
            _AT_RESPONSE[0] = time.thread_time_ns()
            _AT_RESPONSE[1] = _minflt()

    await app(scope, receive, send)
    return status[0] if status else 0


def _kill_child(launcher: Any, iid: str) -> None:
    """After a real fork: kill the fake vLLM child, then the launcher's own stop (reaps it)."""
    inst = launcher.vllm_manager.instances.get(iid)
    proc = getattr(inst, "process", None)
    if proc is not None and proc.pid:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    launcher.vllm_manager.stop_instance(iid, timeout=2)


async def _run_creates(
    launcher: Any, n: int, warmup: int, gap: float, fork: str, profile: Any = None, steps: bool = False
) -> dict[str, Any]:
    """``warmup`` untimed creates, then ``n`` timed ones: request-thread ns of each (in all
    and up to the response), its minor page faults up to the response, and the process's
    CPU seconds over the timed part."""
    app = launcher.app
    assert await _call(app, _scope("GET", "/health"), b"") == 200  # builds the stack
    await asyncio.sleep(1.0)  # the Pod lookup's first read (or failure), the exporter's start
    if steps:
        _watch_steps(launcher)
        gc.callbacks.append(_count_gc)
    step_faults: dict[str, list[int]] = {name: [] for name in STEP_NAMES}
    gcs_in_window = 0
    samples: list[int] = []
    to_response: list[int] = []
    faults: list[int] = []
    after_fork: list[int] = []
    after_fork_ns: list[int] = []
    fork_ns: list[int] = []
    os.register_at_fork(before=_mark_before_fork, after_in_parent=_mark_fork)
    cpu0 = 0.0
    for i in range(warmup + n):
        if i == warmup:
            cpu0 = time.process_time()
        timed = i >= warmup
        iid = f"i{i}"
        body = json.dumps({"options": f"--model m --port {20000 + i % 20000} --fake-health-delay 0"}).encode()
        scope = _scope("PUT", f"/v2/vllm/instances/{iid}")
        if timed and profile is not None:
            profile.enable()
        f0 = _minflt()
        t0 = time.thread_time_ns()
        status = await _call(app, scope, body)
        took = time.thread_time_ns() - t0
        if timed and profile is not None:
            profile.disable()
        if status != 201:
            raise RuntimeError(f"create {iid} answered {status}")
        if timed:
            samples.append(took)
            to_response.append(_AT_RESPONSE[0] - t0)
            faults.append(_AT_RESPONSE[1] - f0)
            if fork == "real":
                after_fork.append(_AT_RESPONSE[1] - _AT_FORK[1])
                after_fork_ns.append(_AT_RESPONSE[0] - _AT_FORK[0])
                fork_ns.append(_AT_FORK[0] - _BEFORE_FORK[0])
                if steps:
                    _STEPS[STEP_NAMES[3]] = _AT_RESPONSE[1]
                    gcs_in_window += _STEPS["gcs at response"] - _STEPS["gcs at fork"]
                    prev = _AT_FORK[1]
                    for name in STEP_NAMES:
                        step_faults[name].append(_STEPS[name] - prev)
                        prev = _STEPS[name]
        if fork == "real":
            _kill_child(launcher, iid)
        else:
            launcher.vllm_manager.stop_instance(iid)
        if gap:
            time.sleep(gap)  # the event loop is blocked: background threads run, as between requests
    return {
        "thread_ns": samples,
        "response_ns": to_response,
        "faults": faults,
        "after_fork_faults": after_fork,
        "after_fork_ns": after_fork_ns,
        "fork_ns": fork_ns,
        "step_faults": step_faults,
        "gcs_in_window": gcs_in_window,
        "process_s": time.process_time() - cpu0,
    }


def _anon_kib() -> int:
    """This process's resident anonymous memory (``RssAnon``): what ``fork()`` copies the
    page tables of, and what the child shares copy-on-write."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def worker(
    name: str,
    n: int,
    warmup: int,
    gap: float,
    fork: str,
    profile: Any = None,
    steps: bool = False,
    memory_top: int = 0,
) -> dict[str, Any]:
    """One configuration in this process (its environment already set by the caller); the
    result says which ``fma_otel`` it ran, and the anonymous memory after the launcher's
    own imports, after the wrappers' (or the floor's) and after the creates.
    ``memory_top``: also the ``memory_top`` lines whose allocations are still held after
    the creates (``tracemalloc`` from the launcher's load on; ``--memory``)."""
    import multiprocessing  # noqa: F401

    import fastapi  # noqa: F401 - what the launcher imports anyway, measured before the wrappers
    import pydantic  # noqa: F401
    import uvicorn  # noqa: F401

    path = sys.path[:]
    from bench_fork import _FLOOR_MIDDLEWARE, _FLOOR_SPANS, _NO_FASTAPI_SPANS, BARE_SDK

    sys.path[:] = path  # bench_fork puts this checkout first: a --baseline worker's must stay first
    anon = [_anon_kib()]
    floor: dict[str, Any] = {}
    if CONFIGS[_config(name)][0]:
        import fma_otel.auto  # noqa: F401 - the wrappers, as bench_fork's launchers load them
    elif _config(name) == BARE:
        exec(
            BARE_SDK + _NO_FASTAPI_SPANS + _FLOOR_SPANS + "create_span = shaped_span\n" + _FLOOR_MIDDLEWARE,
            floor,
        )
    anon.append(_anon_kib())
    launcher = _load_launcher(fork)
    if floor:
        launcher.app = floor["traced"](launcher.app)
    if memory_top:
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
    out = asyncio.run(_run_creates(launcher, n, warmup, gap, fork, profile, steps))
    if memory_top:
        gc.collect()
        ignore = [tracemalloc.Filter(False, tracemalloc.__file__)]
        diff = (
            tracemalloc.take_snapshot()
            .filter_traces(ignore)
            .compare_to(before.filter_traces(ignore), "lineno")
        )
        tracemalloc.stop()
        out["held_kib"] = sum(d.size_diff for d in diff) / 1024
        out["held"] = [[d.size_diff / 1024, d.count_diff, str(d.traceback)] for d in diff[:memory_top]]
    anon.append(_anon_kib())
    import fma_otel

    out["code"] = str(Path(fma_otel.__file__).parents[1])
    out["anon_kib"] = anon
    return out


# ---------------------------------------------------------------- the driver


#: Suffix of a configuration run with the ``--baseline`` code.
BASELINE = " [baseline]"


def _config(name: str) -> str:
    return name.removesuffix(BASELINE)


def _env_of(name: str, rx: dict[str, str], baseline: str | None = None) -> dict[str, str]:
    """``bench_fork``'s environment of the configuration; a ``[baseline]`` one imports
    ``fma_otel`` from ``baseline`` (another checkout) instead of this one."""
    from bench_fork import LOOKUP_POD, clean_env

    wrapped, collector, api = CONFIGS[_config(name)]
    extra: dict[str, str] = {}
    if collector:
        extra["OTEL_EXPORTER_OTLP_ENDPOINT"] = rx[collector]
    if api:
        extra.update(POD_NAME=LOOKUP_POD[0], NAMESPACE=LOOKUP_POD[1], KUBECONFIG=rx[f"api-{api}"])
    env = clean_env(extra if wrapped or collector else None)
    if name.endswith(BASELINE) and baseline:
        env["PYTHONPATH"] = os.pathsep.join([baseline, env["PYTHONPATH"]])
    return env


@contextmanager
def servers(names: list[str]) -> Iterator[dict[str, str]]:
    """The collector and the API servers the configurations need, as ``bench_fork`` runs them."""
    from bench_fork import API_SERVERS, api_server, free_port, json_kubeconfig, receiver

    from tests.support.k8s_server import write_kubeconfig

    with ExitStack() as stack:
        rx: dict[str, str] = {}
        if any(CONFIGS[_config(n)][1] for n in names):
            rx["http"] = stack.enter_context(receiver("HttpOtlpReceiver"))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for kind in {CONFIGS[_config(n)][2] for n in names} - {None}:
            assert kind is not None
            url = (
                f"http://127.0.0.1:{free_port()}"
                if kind == "down"
                else stack.enter_context(api_server(API_SERVERS[kind]))
            )
            rx[f"api-{kind}"] = json_kubeconfig(write_kubeconfig(tmp / f"{kind}.json", url))
        yield rx


def run_one(name: str, rx: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    argv = (
        [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--creates",
            str(args.creates),
            "--warmup",
            str(args.warmup),
            "--gap",
            str(args.gap),
            "--fork",
            args.fork,
        ]
        + (["--steps"] if args.steps else [])
        + (["--memory-top", str(args.top)] if args.memory else [])
    )
    env = _env_of(name, rx, args.baseline)
    res = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO)
    if res.returncode != 0:
        raise RuntimeError(f"{name}: worker failed:\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--creates", type=int, default=1500, help="timed creates per run")
    ap.add_argument("--warmup", type=int, default=200, help="untimed creates first")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per configuration")
    ap.add_argument("--gap", type=float, default=0.002, help="seconds between creates")
    ap.add_argument("--fork", choices=("dummy", "real"), default="dummy")
    ap.add_argument(
        "--baseline",
        metavar="DIR",
        help="also run the wrapped configurations with fma_otel imported from DIR (e.g. a "
        "`git archive` of an earlier commit), interleaved with these",
    )
    ap.add_argument("--only", action="append", default=[], help="configurations holding this word")
    ap.add_argument("--profile", metavar="NAME", help="cProfile one configuration in this process")
    ap.add_argument(
        "--import-costs",
        action="store_true",
        help="the anonymous memory each import of the wrappers (and their span counts) adds to a launcher with the bare SDK",
    )
    ap.add_argument("--threads", action="store_true", help="profile the background threads instead")
    ap.add_argument("--top", type=int, default=35, help="rows of the profile")
    ap.add_argument(
        "--steps",
        action="store_true",
        help="with --fork real: split the faults from the fork to the response by where they happen",
    )
    ap.add_argument(
        "--memory",
        metavar="NAME",
        help="what NAME and the bare SDK span still hold after the creates, by line (tracemalloc; --top rows)",
    )
    ap.add_argument("--memory-top", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--worker", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        out = worker(
            args.worker,
            args.creates,
            args.warmup,
            args.gap,
            args.fork,
            steps=args.steps,
            memory_top=args.memory_top,
        )
        print(json.dumps(out))
        return 0
    if args.profile:
        return profile(args)
    if args.import_costs:
        return import_costs()
    if args.memory:
        return memory(args)
    names = [n for n in CONFIGS if n == BASE or not args.only or any(w in n for w in args.only)]
    if args.baseline:
        # The same configurations with the other code, in the same rounds (the machine's
        # load then hits both alike); its bytecode compiled first, as bench_fork's.
        subprocess.run([sys.executable, "-m", "compileall", "-q", args.baseline], check=True)
        names += [n + BASELINE for n in names if n != BASE]
    steps = STEP_NAMES if args.steps and args.fork == "real" else ()
    cols = (
        ("response", "thread", "faults", "process", "anon wrap", "anon end")
        + (("fork", "fork-resp", "fork-resp faults") if args.fork == "real" else ())
        + tuple(f"faults to {s}" for s in steps)
        + (("gc runs in the window",) if steps else ())
    )
    got: dict[str, dict[str, list[float]]] = {c: {n: [] for n in names} for c in cols}
    rng = random.Random(0)
    with servers(names) as rx:
        for r in range(args.rounds):
            order = names[:]
            rng.shuffle(order)
            for name in order:
                res = run_one(name, rx, args)
                if name.endswith(BASELINE) and res["code"] != str(Path(args.baseline).resolve()):
                    raise RuntimeError(f"{name} ran fma_otel from {res['code']}, not {args.baseline}")
                got["response"][name].append(statistics.median(res["response_ns"]) / 1e3)
                got["thread"][name].append(statistics.median(res["thread_ns"]) / 1e3)
                got["faults"][name].append(statistics.median(res["faults"]))
                got["process"][name].append(res["process_s"] / args.creates * 1e6)
                anon = res["anon_kib"]
                got["anon wrap"][name].append((anon[1] - anon[0]) / 1024)
                got["anon end"][name].append(anon[2] / 1024)
                if args.fork == "real":
                    got["fork"][name].append(statistics.median(res["fork_ns"]) / 1e3)
                    got["fork-resp"][name].append(statistics.median(res["after_fork_ns"]) / 1e3)
                    got["fork-resp faults"][name].append(statistics.median(res["after_fork_faults"]))
                for step in steps:
                    got[f"faults to {step}"][name].append(statistics.mean(res["step_faults"][step]))
                if steps:
                    got["gc runs in the window"][name].append(res["gcs_in_window"])
                print(
                    f"round {r} {name}: " + ", ".join(f"{c} {got[c][name][-1]:.1f}" for c in cols),
                    file=sys.stderr,
                )
    print(
        f"fork={args.fork} creates={args.creates} rounds={args.rounds} gap={args.gap}s (medians over rounds)"
    )
    print(
        "| configuration | request thread to response us | extra | request thread in all us | extra "
        "| minor faults to response | extra | process CPU us / create | extra "
        "| anon MiB of the wrappers' imports | extra | anon MiB after the creates | extra |"
        + (
            " os.fork() us | extra | fork to response us | extra | faults fork to response | extra |"
            if args.fork == "real"
            else ""
        )
        + "".join(f" faults to {step} (mean) | extra |" for step in steps)
        + (" gc runs from fork to response (all creates) | extra |" if steps else "")
    )
    print("| --- |" + " ---: |" * (2 * len(cols)))
    for name in names:
        cells = []
        for c in cols:
            v, b = statistics.median(got[c][name]), statistics.median(got[c][BASE])
            fmt = ".2f" if c.startswith("anon") else ".1f"
            cells += [f"{v:{fmt}}", "-" if name == BASE else f"{v - b:+{fmt}}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


#: ``--import-costs``: in this order, after the launcher's imports and the bare SDK; the
#: last rows are what ``import fma_otel.auto`` leaves out (the ``BaseInstrumentor``s) or
#: loads later (the vLLM phase tail, at an instance's first log line); then the span counts
#: at ``MAX_COUNTED_TRACES`` traces and at 4096 (the former bound).
IMPORT_STEPS = (
    "import wrapt",
    "import opentelemetry.instrumentation.utils",
    "import fma_otel.model",
    "import fma_otel.instrument",
    "import fma_otel.instrument.launcher",
    "import fma_otel.auto",
    "import opentelemetry.instrumentation.instrumentor",
    "import fma_otel.instrument.base_instrumentors, fma_otel.instrument.distro",
    "import fma_otel.sources.vllm_log, fma_otel.phase_spans",
)

_IMPORT_PROBE = """
import gc, json, sys
sys.path.insert(0, {here!r})
import multiprocessing, fastapi, pydantic, uvicorn
from bench_create import _anon_kib
from bench_fork import BARE_SDK
sys.path[:] = [p for p in sys.path if p != {here!r}]
exec(BARE_SDK)
gc.collect()
rows, prev = [("launcher imports + bare SDK", _anon_kib())], _anon_kib()
for stmt in {steps!r}:
    exec(stmt)
    gc.collect()
    now = _anon_kib()
    rows.append((stmt, now - prev))
    prev = now
# The span counts a long-running launcher holds once every create was a trace of its own
# (the Pod annotation: one trace per actuation), at their bound and at the former one.
from fma_otel.instrument import _common, vllm_phases
_PHASES = ["vllm.model_load", "vllm.weights", "vllm.kv_cache", "vllm.graph_capture", "vllm.api_server"]
for bound in (_common.MAX_COUNTED_TRACES, 4096):
    ordinals, counts = _common.OrdinalCounter(bound), _common.OrdinalCounter(bound)
    for i in range(bound):
        t = f"{{i:032x}}"
        ordinals.next(t, "fma.launcher.create_instance")
        ordinals.next(t, "fma.vllm.startup")
        counts.add(t, _PHASES)
    gc.collect()
    now = _anon_kib()
    rows.append((f"span counts of {{bound}} traces", now - prev))
    del ordinals, counts
    gc.collect()
    prev = _anon_kib()
print(json.dumps(rows))
"""


def import_costs() -> int:
    """``--import-costs``: each import's ``RssAnon`` growth, in a fresh launcher-shaped
    interpreter (page granularity: a few KiB either way between runs)."""
    from bench_fork import clean_env

    env = clean_env({"OTEL_TRACES_EXPORTER": "none"})
    code = _IMPORT_PROBE.format(here=str(HERE), steps=IMPORT_STEPS)
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=REPO)
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    rows = json.loads(res.stdout.strip().splitlines()[-1])
    print("| step (in this order) | anon KiB |\n| --- | ---: |")
    for stmt, kib in rows:
        print(f"| `{stmt}` | {kib} |")
    return 0


def memory(args: argparse.Namespace) -> int:
    """``--memory NAME``: the allocations NAME (and the bare SDK span, for comparison) still
    holds after the creates, by line: what the wrappers keep per create, bounded or not."""
    names = [args.memory, BARE]
    with servers(names) as rx:
        for name in names:
            res = run_one(name, rx, args)
            print(f"== {name}: {res['held_kib']:.1f} KiB held after {args.warmup + args.creates} creates")
            for kib, count, where in res["held"]:
                print(f"{kib:9.1f} KiB {count:+7d}  {where}")
    return 0


def profile(args: argparse.Namespace) -> int:
    """``--profile NAME``: that configuration here, under cProfile (request thread only)."""
    import cProfile
    import pstats
    import threading

    name = args.profile
    background: list[cProfile.Profile] = []
    if args.threads:
        run = threading.Thread.run

        def profiled_run(self: threading.Thread) -> None:
            p = cProfile.Profile()
            background.append(p)
            p.runcall(run, self)

        threading.Thread.run = profiled_run  # type: ignore[method-assign]
    with servers([name]) as rx:
        os.environ.clear()
        os.environ.update(_env_of(name, rx))
        prof = cProfile.Profile()
        worker(name, args.creates, args.warmup, args.gap, args.fork, prof)
        if args.threads:
            prof = background[0]
            for p in background:
                p.disable()  # daemon threads still run: snapshot them now
            stats = pstats.Stats(prof)
            for p in background[1:]:
                stats.add(p)
            stats.sort_stats("tottime").print_stats(args.top)
            stats.sort_stats("cumtime").print_stats(args.top)
            return 0
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumtime").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
