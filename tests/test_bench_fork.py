"""``benchmarks/bench_fork.py``: its floors are one span a request, its table's ratios and intervals.

Why: the "bare OTel SDK span" launcher is the floor the wrappers' create cost is divided
by.  FastAPI >= 0.16x adds spans of its own (a SERVER span and three internal ones a
request) once an SDK is set; with them on, that floor was four spans and five times its
price, and the wrappers read 0.6x of it instead of 1.4-5x.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.instrument.conftest import wait_until
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
    lines = bf.table("t", rows, "unwrapped", {"floor": "bare span"}, spread).splitlines()
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


def test_table_puts_each_interval_after_its_figure() -> None:
    rows = {"u": [0.010], "f1": [0.0105], "f2": [0.0110], "w": [0.011]}
    ci = {
        "f1": ((0.0004, 0.0006), {"f2": (0.4, 0.6)}),
        "f2": ((0.0009, 0.0011), {"f1": (1.5, math.inf)}),
        "w": ((0.0008, 0.00125), {"f1": (1.5, 2.5), "f2": (0.75, 1.25)}),
    }
    lines = bf.table("t", rows, "u", {"f1": "bare span", "f2": "shaped span"}, ci=ci).splitlines()
    assert (
        lines[0]
        == "| t | median ms | extra over u ms | extra / bare span's extra | extra / shaped span's extra |"
    )
    assert lines[2] == "| u | 10.00 | - | - | - |"
    assert lines[4] == "| f2 | 11.00 | +1.00 (+0.90 to +1.10) | 2.00x (1.50x to inf) | - |"
    assert (
        lines[5] == "| w | 11.00 | +1.00 (+0.80 to +1.25) | 2.00x (1.50x to 2.50x) | 1.00x (0.75x to 1.25x) |"
    )


def _launchers(name: str, centres_ms: list[float], n: int = 60, jitter_ms: float = 0.05) -> bf.PerCopy:
    """Synthetic creates: one launcher per centre, ``n`` creates spread evenly by ``jitter_ms``."""
    out: bf.PerCopy = {}
    for k, c in enumerate(centres_ms):
        out[(name, k)] = [(c + jitter_ms * (2 * i / (n - 1) - 1)) / 1e3 for i in range(n)]
    return out


def _synthetic(wrapped_ms: list[float]) -> bf.PerCopy:
    return {
        **_launchers(bf.BASE, [10.0, 10.0, 10.0, 10.0]),
        **_launchers(bf.BARE_ROW, [10.5, 10.5, 10.5, 10.5]),
        **_launchers("wrapped, x", wrapped_ms),
    }


def test_bootstrap_brackets_a_known_extra_and_ratio() -> None:
    ci = bf.bootstrap(_synthetic([11.0, 11.0, 11.0, 11.0]), floors=[bf.BARE_ROW], n_boot=300)
    (lo, hi), ratios = ci["wrapped, x"]
    assert lo < 0.001 < hi and hi - lo < 0.0001  # +1 ms, tightly: every launcher agrees
    rlo, rhi = ratios[bf.BARE_ROW]
    assert rlo < 2.0 < rhi and rhi - rlo < 0.5
    assert ci[bf.BASE][0] == (0.0, 0.0)


def test_bootstrap_widens_with_the_spread_between_launchers() -> None:
    """Launchers 0.8 ms apart with steady creates: resampling the creates alone would give
    an interval of ~0.1 ms; drawing the launchers too must show the launchers' spread."""
    (lo, hi), _ = bf.bootstrap(_synthetic([10.6, 10.6, 11.4, 11.4]), floors=[bf.BARE_ROW], n_boot=300)[
        "wrapped, x"
    ]
    assert hi - lo > 0.0005
    assert lo < 0.001 < hi


def test_bootstrap_is_seeded_and_gives_inf_for_an_unresolved_floor() -> None:
    data = {
        **_launchers(bf.BASE, [10.0, 10.2]),
        **_launchers(bf.BARE_ROW, [10.0, 10.2]),  # no extra over the base
        **_launchers("wrapped, x", [11.0, 11.2]),
    }
    a = bf.bootstrap(data, floors=[bf.BARE_ROW], n_boot=200, seed=3)
    assert a == bf.bootstrap(data, floors=[bf.BARE_ROW], n_boot=200, seed=3)
    assert a["wrapped, x"][1][bf.BARE_ROW][1] == math.inf


def test_verdicts_judge_by_where_the_interval_lies() -> None:
    ci = {
        bf.BASE: ((0.0, 0.0), {}),
        bf.BARE_ROW: ((0.0004, 0.0006), {}),
        "wrapped, in": ((0.0003, 0.0009), {bf.BARE_ROW: (0.9, 1.4)}),
        "wrapped, edge": ((0.0008, 0.0012), {bf.BARE_ROW: (1.2, math.inf)}),
        "wrapped, out": ((0.0011, 0.0015), {bf.BARE_ROW: (1.6, 3.0)}),
    }
    assert bf.verdicts(ci) == [
        "wrapped, in: extra +0.30 to +0.90 ms (95%): within 1 ms of unwrapped met",
        "  / bare span's extra 0.90x to 1.40x: <= 1.5x met",
        "wrapped, edge: extra +0.80 to +1.20 ms (95%): within 1 ms of unwrapped not resolved",
        "  / bare span's extra 1.20x to inf: <= 1.5x not resolved",
        "wrapped, out: extra +1.10 to +1.50 ms (95%): within 1 ms of unwrapped missed",
        "  / bare span's extra 1.60x to 3.00x: <= 1.5x missed",
    ]


def test_select_keeps_the_base_and_the_floors() -> None:
    rx = {key: f"http://{key}" for key in [*bf.COLLECTORS, "down"]}
    configs = bf.create_configs(rx)
    kept = list(bf.select(configs, ["HTTP"]))
    assert kept == [bf.BASE, bf.BARE_ROW, bf.SHAPED_ROW] + [
        n for n in configs if n.startswith("wrapped, HTTP")
    ]
    assert len(kept) == 7
    with_lookup = bf.create_configs({**rx, **{f"api-{k}": f"/kc/{k}" for k in bf.LOOKUP_ROWS}})
    lookup_rows = [n for n in bf.select(with_lookup, ["HTTP"]) if "Pod lookup" in n]
    assert lookup_rows == list(bf.LOOKUP_ROWS.values())
    env = with_lookup[bf.LOOKUP_ROWS["hung"]][0]
    assert env["KUBECONFIG"] == "/kc/hung" and env["POD_NAME"] == bf.LOOKUP_POD[0]
    assert list(bf.select(configs, [])) == list(configs)
    # each wrapped row is sent to the collector its name says
    assert configs["wrapped, HTTP (default), collector answers 503"][0] == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://503"
    }
    assert configs["wrapped, gRPC, collector down"][0]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://down"


def test_baseline_runs_each_wrapped_row_again_with_the_other_fma_otel() -> None:
    rx = {key: f"http://{key}" for key in [*bf.COLLECTORS, "down"]}
    configs = bf.select(bf.create_configs(rx), ["HTTP (default), collector up"])
    both = bf.with_baseline(configs, "/tmp/base")
    wrapped = [n for n in configs if n.startswith("wrapped")]
    assert list(both) == list(configs) + [n + bf.BASELINE for n in wrapped]
    for name in wrapped:
        env, prelude = both[name + bf.BASELINE]
        assert env["PYTHONPATH"].split(os.pathsep) == ["/tmp/base", str(bf.REPO)]
        assert {k: v for k, v in env.items() if k != "PYTHONPATH"} == configs[name][0]
        assert prelude == configs[name][1]
    assert "PYTHONPATH" not in configs[wrapped[0]][0]  # the rows of this checkout are unchanged


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("prelude", "put_name", "put_attrs"),
    [
        (bf.BARE_SPAN, "PUT", set()),
        (
            bf.BARE_SHAPED_SPAN,
            "fma.launcher.create_instance",
            {
                "http.request.method",
                "url.path",
                "url.scheme",
                "http.route",
                "server.address",
                "server.port",
                "client.address",
                "fma.instance.id",
                "fma.start.source",
                "fma.end.source",
                "fma.join",
                "fma.join.reason",
                "http.response.status_code",
            },
        ),
    ],
    ids=["bare", "create-shaped"],
)
def test_floor_launcher_makes_one_server_span_a_request(
    prelude: str, put_name: str, put_attrs: set[str]
) -> None:
    rx = HttpOtlpReceiver().start()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        with bf.launcher(env, prelude) as (proc, port):
            for i in range(2):
                cfg = {"options": f"--model m --port {bf.free_port()}", "env_vars": {}}
                r = httpx.put(f"http://127.0.0.1:{port}/v2/vllm/instances/b{i}", json=cfg, timeout=10)
                assert r.status_code == 201
            deadline = time.monotonic() + 10
            while sum(s.name == put_name for s in rx.spans()) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # anything else the two requests made has been exported too
            bf.kill_children(proc.pid)
        spans = rx.spans()
    finally:
        rx.stop()
    puts = [s for s in spans if s.name == put_name]
    assert len(puts) == 2
    assert {s.kind for s in puts} == {"SERVER"}
    assert all(set(s.attributes) == put_attrs for s in puts)
    if put_attrs:
        assert sorted(s.attributes["fma.instance.id"] for s in puts) == ["b0", "b1"]
        assert {s.attributes["http.response.status_code"] for s in puts} == {201}
    # Only the middleware's spans (the readiness GETs have theirs): none of FastAPI's own.
    assert {s.name for s in spans} <= {put_name, "GET"}


def test_paired_bootstrap_draws_the_same_launchers_for_every_mode() -> None:
    """Launchers 2 ms apart in every mode (heap layout) and +1 ms for one mode in each:
    drawn together the offset cancels; drawn apart it swamps the interval."""
    data = {
        **_launchers("off", [10.0, 12.0, 10.0, 12.0]),
        **_launchers("wrapped", [11.0, 13.0, 11.0, 13.0]),
    }
    (plo, phi), _ = bf.bootstrap(data, base="off", floors=[], n_boot=300, paired=True)["wrapped"]
    (ulo, uhi), _ = bf.bootstrap(data, base="off", floors=[], n_boot=300)["wrapped"]
    assert plo <= 0.001 <= phi and phi - plo < 0.0003
    assert uhi - ulo > 0.001
    with pytest.raises(ValueError, match="same launchers"):
        bf.bootstrap({**data, ("more", 0): [0.01]}, base="off", floors=[], n_boot=10, paired=True)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_paired_launcher_is_each_mode_by_the_header() -> None:
    """``off``, ``bare`` and ``shaped`` keep the wrappers out of the request (no create
    span of theirs, no ``fma.vllm.startup``); ``wrapped`` is the wrappers' alone."""
    rx = HttpOtlpReceiver().start()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        with bf.launcher(env, bf.PAIRED) as (proc, port):
            for mode in bf.PAIRED_MODES:
                cfg = {"options": f"--model m --port {bf.free_port()} --fake-health-delay 0", "env_vars": {}}
                r = httpx.put(
                    f"http://127.0.0.1:{port}/v2/vllm/instances/{mode}0",
                    json=cfg,
                    headers={bf.PAIRED_HEADER: mode},
                    timeout=10,
                )
                assert r.status_code == 201
            deadline = time.monotonic() + 10
            while not any(s.name == "fma.vllm.startup" for s in rx.spans()) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)
            bf.kill_children(proc.pid)
        spans = rx.spans()
    finally:
        rx.stop()
    creates = {
        s.attributes.get("fma.instance.id"): s for s in spans if s.name == "fma.launcher.create_instance"
    }
    assert set(creates) == {"shaped0", "wrapped0"}
    assert "fma.join" in creates["wrapped0"].attributes and creates["wrapped0"].kind == "SERVER"
    assert [s.attributes["fma.instance.id"] for s in spans if s.name == "fma.vllm.startup"] == ["wrapped0"]
    assert [s.attributes.get("url.path") for s in spans if s.name == "PUT"] == [None]  # bare: no attributes


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_timed_create_leaves_the_launcher_no_instance_and_no_child() -> None:
    with bf.launcher(None) as (proc, port), httpx.Client(timeout=10) as client:
        took = [bf.timed_create(client, proc, port, f"t{i}", "unwrapped") for i in range(3)]
        listed = client.get(f"http://127.0.0.1:{port}/v2/vllm/instances", params={"detail": "false"}).json()
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert all(0 < t < 5 for t in took)
    assert listed["count"] == 0
    assert children == []
    forked: list[int] = []
    with pytest.raises(RuntimeError, match="unwrapped: create answered"):
        with bf.launcher(None) as (proc, port), httpx.Client(timeout=10) as client:
            client.put(
                f"http://127.0.0.1:{port}/v2/vllm/instances/dup",
                json={"options": f"--model m --port {bf.free_port()}", "env_vars": {}},
            )
            forked = bf.children_of(proc.pid)
            bf.timed_create(client, proc, port, "dup", "unwrapped")  # 409: it exists
    # The launcher's fake vLLM child (in a process group of its own, out of reach of the
    # launcher's group kill) was ended with it, not left running under init.
    assert forked
    assert wait_until(lambda: not any(_running(pid) for pid in forked), 5), forked


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_launchers_import_fma_otel_from_compiled_bytecode(monkeypatch: pytest.MonkeyPatch) -> None:
    """As installed: the shell's PYTHONDONTWRITEBYTECODE must not make every wrapped launcher
    compile fma_otel at start-up (its heap, and so its forks, grew by megabytes), and no
    cache prefix may hide site-packages' own bytecode."""
    import importlib.util as iu

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/nonexistent")
    env = bf.clean_env({})
    assert "PYTHONDONTWRITEBYTECODE" not in env and "PYTHONPYCACHEPREFIX" not in env
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert Path(iu.cache_from_source(str(ROOT / "fma_otel" / "instrument" / "launcher.py"))).is_file()


def test_json_kubeconfig_keeps_the_document(tmp_path: Path) -> None:
    import json

    import yaml

    from tests.support.k8s_server import write_kubeconfig

    path = write_kubeconfig(tmp_path / "kc.json", "http://127.0.0.1:1")
    doc = yaml.safe_load(Path(path).read_text())
    assert bf.json_kubeconfig(path) == path
    assert json.loads(Path(path).read_text()) == doc
