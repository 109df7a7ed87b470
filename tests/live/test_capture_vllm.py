"""``fma-otel capture`` with Events, ``--vllm-logs`` (pods/proxy) and baseline Pod logs, against
the test API server with the real ``kubernetes`` client, and the range fetch on its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from kubernetes.client import CoreV1Api  # noqa: F401 - its import (seconds) at collection, not in a test

from fma_otel import podfacts as P
from fma_otel.cli import main
from fma_otel.live.kube import Kube, make_api_client
from fma_otel.live.vllm_fetch import MAX_RANGE_BYTES, fetch_instance_log
from fma_otel.sources.k8s_events import parse_events
from tests.live.replay import NS
from tests.support.k8s_server import FakeCluster, make_event, make_pod

MIB = 1 << 20
L1, L2, GONE = "launcher-example-aaaaa", "launcher-example-bbbbb", "launcher-example-zzzzz"
I_BIG, I_SMALL, I_GONE, I_DELETED, I_REFUSED = (
    "IEdwg776EvahNKWszuzCj8YN9pPtRVHTHLI6N0ABjhdki",
    "Ismall000000000000000000000000000000000000001",
    "Igone0000000000000000000000000000000000000002",
    "Ideleted00000000000000000000000000000000000003",
    "Irefused00000000000000000000000000000000000004",
)


def _launcher(name: str, instance: str | None = None) -> dict:
    ann = {P.A_INSTANCE_ID: instance} if instance else {}
    return make_pod(
        name, NS, labels={P.L_LAUNCHER_CONFIG: "example"}, annotations=ann, containers=["inference-server"]
    )


def _big_log() -> bytes:
    """2.5 MiB of vLLM-like lines: three ranges."""
    line = b"(APIServer pid=1) INFO 12-05 07:40:10 [loader.py:1] filler line of a vLLM log 0123456789\n"
    return line * (int(2.5 * MIB) // len(line) + 1)


def _scenario(k8s: FakeCluster) -> dict[str, bytes]:
    """Two launchers (one refuses the proxy), a requester, a baseline Pod, Events, and
    instances named by every source: annotation, requester labels, launcher log, DPC log."""
    l1 = k8s.add_pod(_launcher(L1, I_BIG))
    k8s.add_pod(_launcher(L2, I_REFUSED))
    req = make_pod(
        "req-1",
        NS,
        annotations={P.A_ISC_CONFIG: "example"},
        labels={P.L_INSTANCE: I_SMALL, P.L_DUAL: L1},
        containers=["inference-server"],
    )
    k8s.add_pod(req)
    k8s.add_pod(make_pod("vllm-base-1", NS, labels={"app": "vllm"}, containers=["vllm"]))
    k8s.append_log(
        L1,
        "inference-server",
        f"2026-12-05 07:40:00,100 - __main__ - INFO - Accepted request to create vLLM instance with id={I_DELETED}",
        namespace=NS,
    )
    k8s.append_log(
        "vllm-base-1",
        "vllm",
        "INFO 12-05 07:40:10 [api_server.py:1] vLLM API server version 0.11.0",
        namespace=NS,
    )
    dpc = make_pod(
        "dpc-1",
        NS,
        labels={
            "app.kubernetes.io/name": "fma-controllers",
            "app.kubernetes.io/component": "dual-pods-controller",
        },
        containers=["controller"],
    )
    k8s.add_pod(dpc)
    k8s.append_log(
        "dpc-1",
        "controller",
        f'I1205 07:40:01.000000       1 inference-server.go:1] "Ensured" worker=1 providerName="{GONE}" '
        f'instanceID="{I_GONE}"',
        namespace=NS,
    )
    backend = k8s.add_launcher(L1, NS)
    logs = {I_BIG: _big_log(), I_SMALL: b"INFO 12-05 07:40:11 [x.py:1] small\n"}
    for instance, data in logs.items():
        backend.append(instance, data)
    k8s.add_launcher(L2, NS).refuse = True
    k8s.add_event(
        make_event(
            "Scheduled",
            f"Successfully assigned {NS}/{L1} to node-1",
            pod=l1,
            component="default-scheduler",
            event_time_us=1_764_920_400_123_456,
        )
    )
    k8s.add_event(
        make_event(
            "Pulled",
            'Successfully pulled image "x" in 1.5s (1.5s including waiting). Image size: 10 bytes.',
            pod=l1,
            container="inference-server",
            first=1_764_920_401,
        )
    )
    return logs


def _capture(k8s: FakeCluster, tmp_path: Path, *args: str):  # noqa: ANN202
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    out = tmp_path / "cap"
    r = CliRunner().invoke(
        main,
        ["capture", "-n", NS, "--kubeconfig", kubeconfig, "--out", str(out), *args],
        prog_name="fma-otel",
    )
    return r, out


def _ranges(k8s: FakeCluster, instance: str) -> list[tuple[int, int]]:
    out = []
    for r in k8s.proxied():
        if f"/v2/vllm/instances/{instance}/log" == r.path:
            m = re.fullmatch(r"bytes=(\d+)-(\d+)", r.range or "")
            assert m, r.range
            out.append((int(m.group(1)), int(m.group(2))))
    return out


@pytest.mark.slow
def test_capture_writes_events_and_vllm_logs_in_the_layout(k8s: FakeCluster, tmp_path: Path) -> None:
    logs = _scenario(k8s)
    r, out = _capture(k8s, tmp_path, "--vllm-logs", "--baseline-selector", "app=vllm")
    assert r.exit_code == 0, r.output
    # the instance logs, byte for byte, and nothing for the ones that failed
    assert sorted(p.name for p in (out / "vllm").iterdir()) == sorted(
        [f"{I_BIG}.log", f"{I_SMALL}.log", "pod-vllm-base-1.log"]
    )
    for instance, data in logs.items():
        assert (out / "vllm" / f"{instance}.log").read_bytes() == data
    # ranges of at most 1 MiB, consecutive from 0, as the fake API server saw them
    assert _ranges(k8s, I_BIG) == [(0, MIB - 1), (MIB, 2 * MIB - 1), (2 * MIB, 3 * MIB - 1)]
    assert _ranges(k8s, I_SMALL) == [(0, MIB - 1)]
    assert all(req.pod in (L1, L2) and req.port == 8001 for req in k8s.proxied())
    assert not k8s.proxied(GONE)  # its Pod is gone: not asked
    # the baseline Pod's log, with the kubelet's timestamps
    base = (out / "vllm" / "pod-vllm-base-1.log").read_text()
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z INFO 12-05 07:40:10 ", base)
    # events.json reads back as the Events
    events, stats = parse_events((out / "events.json").read_bytes())
    assert sorted((e.reason, e.object_name) for e in events) == [("Pulled", L1), ("Scheduled", L1)]
    assert stats.skipped == 0 and [e.pull_s for e in events if e.reason == "Pulled"] == [1.5]
    assert json.loads((out / "events.json").read_text())["kind"] == "List"
    # the failures: each named, counted, none fatal
    warnings = sorted(line for line in r.stderr.splitlines() if "vLLM log of instance" in line)
    assert warnings == sorted(
        [
            f"fma-otel capture: warning: vLLM log of instance {I_DELETED}: from {L1}: HTTP 404: "
            f"Instance {I_DELETED} not found",
            f"fma-otel capture: warning: vLLM log of instance {I_GONE}: launcher Pod {GONE} is gone",
            f"fma-otel capture: warning: vLLM log of instance {I_REFUSED}: from {L2}: HTTP 503 (the launcher "
            "is not reachable through the pod proxy): error trying to reach service: dial tcp 10.0.0.7:8001: "
            "connect: connection refused",
        ]
    )
    assert (
        "2 Event(s), 1 baseline vLLM log(s), 2 instance vLLM log(s) (0 partial, 3 not recorded, 6 proxy"
        in r.stderr
    )


@pytest.mark.slow
def test_capture_without_the_flag_never_uses_the_proxy(k8s: FakeCluster, tmp_path: Path) -> None:
    _scenario(k8s)
    r, out = _capture(k8s, tmp_path)
    assert r.exit_code == 0, r.output
    assert k8s.proxied() == []
    assert not (out / "vllm").exists()
    assert (out / "events.json").exists()


@pytest.mark.slow
def test_capture_proxy_forbidden_is_counted_not_fatal(k8s: FakeCluster, tmp_path: Path) -> None:
    _scenario(k8s)
    k8s.inject_error("GET", r"/proxy/", 403, count=100)
    k8s.inject_error("GET", r"/events$", 403, count=1)
    r, out = _capture(k8s, tmp_path, "--vllm-logs")
    assert r.exit_code == 0, r.output
    forbidden = [line for line in r.stderr.splitlines() if "pods/proxy RBAC verb is needed" in line]
    assert len(forbidden) == 4  # every instance whose launcher Pod exists
    assert "events not recorded: HTTP 403" in r.stderr
    assert not (out / "events.json").exists()
    assert not list((out / "vllm").glob("*.log"))
    assert (out / "pods.json").exists()


def _kube(k8s: FakeCluster, tmp_path: Path) -> Kube:
    return Kube(make_api_client(k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS), None))


def test_fetch_bounds_bytes_and_ranges(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(_launcher(L1))
    data = bytes(range(256)) * 40  # 10240 bytes
    k8s.add_launcher(L1, NS).append(I_SMALL, data)
    got = bytearray()
    res = fetch_instance_log(
        _kube(k8s, tmp_path), NS, L1, I_SMALL, got.extend, range_bytes=4000, max_bytes=9000
    )
    assert bytes(got) == data[:9000]
    assert res.error == "stopped at the byte bound (9000 bytes)"
    assert _ranges(k8s, I_SMALL) == [(0, 3999), (4000, 7999), (8000, 8999)]
    with pytest.raises(ValueError):
        fetch_instance_log(_kube(k8s, tmp_path), NS, L1, I_SMALL, got.extend, range_bytes=MAX_RANGE_BYTES + 1)


def test_fetch_stops_at_the_time_bound_keeping_what_it_read(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(_launcher(L1))
    k8s.add_launcher(L1, NS).append(I_SMALL, b"x" * 5000)
    ticks = iter([0.0, 0.0, 1.0, 5.0, 9.0])
    got = bytearray()
    res = fetch_instance_log(
        _kube(k8s, tmp_path),
        NS,
        L1,
        I_SMALL,
        got.extend,
        range_bytes=1000,
        deadline_s=4.0,
        clock=lambda: next(ticks),
    )
    assert len(got) == 2000 and res.written == 2000 and res.requests == 2
    assert res.error == "stopped at the time bound (4s) after 2000 bytes"


def test_fetch_of_an_empty_log_and_a_log_that_grew(k8s: FakeCluster, tmp_path: Path) -> None:
    """An empty log is a 416 (nothing to read, no error); the total is the one of the answer."""
    k8s.add_pod(_launcher(L1))
    backend = k8s.add_launcher(L1, NS)
    backend.append(I_SMALL, b"")
    got = bytearray()
    res = fetch_instance_log(_kube(k8s, tmp_path), NS, L1, I_SMALL, got.extend)
    assert res.error is None and res.status == 416 and got == b"" and res.requests == 1


def test_watch_fetch_reads_only_what_was_added_and_notices_a_new_log(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    """The watcher keeps an instance's log: the next actuation (a wake) asks for the head
    (to tell it is the same log) and the bytes added since; a new log under the same id
    (the instance deleted and created again) is read afresh."""
    from fma_otel.live.vllm_logs import PREFIX_CHECK_BYTES, VllmLogs

    k8s.add_pod(_launcher(L1))
    backend = k8s.add_launcher(L1, NS)
    first = (
        b"2026-12-05 07:40:00,100 - __main__ - INFO - VLLM process (PID: 1) started.\n" + b"a" * 6000 + b"\n"
    )
    backend.append(I_SMALL, first)
    v = VllmLogs(_kube(k8s, tmp_path), NS, lambda item: None)
    data, res = v._instance_log(L1, I_SMALL)
    assert bytes(data) == first and res.error is None
    assert _ranges(k8s, I_SMALL) == [(0, MIB - 1)]
    backend.append(I_SMALL, b"wake line\n")
    data, res = v._instance_log(L1, I_SMALL)
    assert bytes(data) == first + b"wake line\n" and res.error is None and res.written == 10
    assert _ranges(k8s, I_SMALL)[1:] == [(0, PREFIX_CHECK_BYTES - 1), (len(first), len(first) + MIB - 1)]
    # the instance is deleted and created again: its new log is read from the start
    backend.delete(I_SMALL)
    second = (
        b"2026-12-05 08:00:00,100 - __main__ - INFO - VLLM process (PID: 2) started.\n" + b"b" * 7000 + b"\n"
    )
    backend.append(I_SMALL, second)
    data, res = v._instance_log(L1, I_SMALL)
    assert bytes(data) == second and res.error is None
    # the instance is gone: what was kept is what there is, with the reason
    backend.delete(I_SMALL)
    data, res = v._instance_log(L1, I_SMALL)
    assert bytes(data) == second and res.error == f"HTTP 404: Instance {I_SMALL} not found"


@pytest.mark.slow
def test_capture_of_an_instance_on_two_launchers_keeps_one_and_says_so(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    """An instance id is a hash of its configuration: two launchers can run it.  The layout
    keeps one log per id: the first launcher's is recorded, the other named in a warning."""
    for name, text in ((L1, "first\n"), (L2, "second\n")):
        k8s.add_pod(_launcher(name, I_SMALL))
        k8s.add_launcher(name, NS).append(I_SMALL, text)
    r, out = _capture(k8s, tmp_path, "--vllm-logs")
    assert r.exit_code == 0, r.output
    assert (out / "vllm" / f"{I_SMALL}.log").read_text() == "first\n"
    assert (
        f"fma-otel capture: warning: vLLM log of instance {I_SMALL}: recorded from {L1}; it also ran on {L2}, "
        "not recorded (a capture keeps one log per instance id)"
    ) in r.stderr.splitlines()
    assert not k8s.proxied(L2)
