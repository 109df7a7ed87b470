"""What the wrappers cost a launcher that forks: ``os.fork()`` and the create call.

The launcher forks every vLLM instance, and ``fork()`` is not free: it copies the page
tables of the process's anonymous memory, and it runs whatever fork handlers the process
registered - ``grpcio`` stops and restarts its threads around each fork once a channel
exists.  So the SDK and exporter that ``import fma_otel.auto`` loads make every create
slower in a way the in-process wrapper benchmark (``bench_wrappers.py``, fork replaced
by a dummy) cannot see.  Two measurements, both interleaved so the machine's load hits
every configuration alike:

* ``fork``: a fresh interpreter per configuration imports what the launcher imports
  (FastAPI, uvicorn, pydantic, multiprocessing), then optionally ``fma_otel.auto``, and
  times ``--forks`` bare ``os.fork()`` calls (the child ``_exit``s at once).  Median per
  run; the table shows the median over ``--rounds`` runs and the extra over bare.
* ``create``: the fake launcher (``tests/fixtures/fake_launcher``, which forks its fake
  vLLM like the real one) runs once per configuration, side by side; each round sends
  one ``PUT /v2/vllm/instances/<id>`` to each in turn (order alternating) and times it
  at the client, then kills the forked child so children do not pile up.  Collectors are
  the tests' in-process OTLP receivers (gRPC and HTTP); "down" is a port nobody listens on.

Usage: ``python benchmarks/bench_fork.py [--rounds 5 --forks 400] [--creates 200]``.
Run it on an otherwise idle machine; it takes about two minutes.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_LAUNCHER = REPO / "tests" / "fixtures" / "fake_launcher"
LAUNCHER_IMPORTS = "import fastapi, uvicorn, pydantic, multiprocessing"

# name -> environment for the wrapped process (None: not wrapped)
FORK_CONFIGS: dict[str, dict[str, str] | None] = {
    "unwrapped": None,
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
                wrap = "import fma_otel.auto"
            code = _FORK_PROBE.format(imports=LAUNCHER_IMPORTS, wrap=wrap, forks=forks)
            res = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            out[name].append(float(res.stdout.split()[-1]))
    return out


@contextmanager
def launcher(extra: dict[str, str] | None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """The fake launcher, wrapped by ``import fma_otel.auto`` unless ``extra`` is None."""
    import httpx

    port = free_port()
    if extra is None:
        argv = [sys.executable, "launcher.py", "--port", str(port)]
    else:
        code = (
            "import fma_otel.auto, runpy, sys; sys.argv = ['launcher.py'] + sys.argv[1:]; "
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


def create_latencies(n: int) -> dict[str, list[float]]:
    """Client-side seconds per ``PUT`` create, per launcher configuration, interleaved."""
    import httpx

    with ExitStack() as stack:
        grpc_rx = stack.enter_context(receiver("GrpcOtlpReceiver"))
        http_rx = stack.enter_context(receiver("HttpOtlpReceiver"))
        down = f"http://127.0.0.1:{free_port()}"
        grpc = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true"}
        configs: dict[str, dict[str, str] | None] = {
            "unwrapped": None,
            "wrapped, HTTP (default), collector up": {"OTEL_EXPORTER_OTLP_ENDPOINT": http_rx},
            "wrapped, HTTP (default), collector down": {"OTEL_EXPORTER_OTLP_ENDPOINT": down},
            "wrapped, gRPC, collector up": {**grpc, "OTEL_EXPORTER_OTLP_ENDPOINT": grpc_rx},
            "wrapped, gRPC, collector down": {**grpc, "OTEL_EXPORTER_OTLP_ENDPOINT": down},
        }
        running = {name: stack.enter_context(launcher(extra)) for name, extra in configs.items()}
        client = stack.enter_context(httpx.Client(timeout=30))
        lat: dict[str, list[float]] = {name: [] for name in configs}
        for i in range(n):
            names = list(running) if i % 2 == 0 else list(running)[::-1]
            for name in names:
                proc, port = running[name]
                cfg = {"options": f"--model m --port {free_port()} --fake-health-delay 0", "env_vars": {}}
                t0 = time.perf_counter()
                r = client.put(f"http://127.0.0.1:{port}/v2/vllm/instances/i{i}", json=cfg)
                lat[name].append(time.perf_counter() - t0)
                if r.status_code != 201:
                    raise RuntimeError(f"{name}: create answered {r.status_code}: {r.text}")
                time.sleep(0.02)
                kill_children(proc.pid)
        return lat


def table(title: str, rows: dict[str, list[float]], base: str) -> str:
    ref = statistics.median(rows[base])
    lines = [f"| {title} | median ms | extra over {base} ms |", "| --- | ---: | ---: |"]
    for name, vals in rows.items():
        med = statistics.median(vals)
        extra = "-" if name == base else f"{(med - ref) * 1e3:+.2f}"
        lines.append(f"| {name} | {med * 1e3:.2f} | {extra} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="fresh processes per fork configuration")
    ap.add_argument("--forks", type=int, default=400, help="os.fork() calls per process")
    ap.add_argument("--creates", type=int, default=200, help="creates per launcher (0: skip)")
    args = ap.parse_args(argv)
    print(table("os.fork() in a launcher-like process", fork_medians(args.rounds, args.forks), "unwrapped"))
    if args.creates:
        print()
        print(table("PUT create on the fake launcher", create_latencies(args.creates), "unwrapped"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
