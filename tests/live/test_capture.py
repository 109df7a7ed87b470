"""``fma-otel capture`` against the test API server, then the directory it wrote."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import inputs_from_capture, run_bridge
from fma_otel.cli import main
from tests.live.replay import BASELINE, NS, dpc_pod, play, recent_capture, timeline, tree
from tests.support import synth
from tests.support.k8s_server import FakeCluster


@pytest.mark.slow
def test_capture_writes_a_directory_the_bridge_replays(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=21)
    play(k8s, timeline(cap))
    # the DPC restarted once: its previous instance's log comes first in dpc.log
    name = dpc_pod()["metadata"]["name"]
    k8s.restart_container(name, "controller", namespace=NS)
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    out = tmp_path / "cap"
    r = CliRunner().invoke(
        main, ["capture", "--namespace", NS, "--kubeconfig", kubeconfig, "--out", str(out)]
    )
    assert r.exit_code == 0, r.output + (r.stderr if hasattr(r, "stderr") else "")
    doc = json.loads((out / "pods.json").read_text())
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1"
    assert doc["metadata"]["resourceVersion"] == str(k8s.rv)
    assert all(p["kind"] == "Pod" for p in doc["items"])
    launchers = sorted(p.name[len("launcher-") : -4] for p in out.glob("launcher-*.log"))
    assert launchers == sorted(cap.launcher_logs)
    dpc_lines = (out / "dpc.log").read_text().splitlines()
    assert len(dpc_lines) == len(list(cap.dpc_lines))
    assert all(line[:4].isdigit() and "Z " in line[:40] for line in dpc_lines)  # --timestamps prefix

    # the recorded directory gives the same traces as the synthetic capture it came from
    ref = tmp_path / "ref"
    synth.write_capture(cap, ref, timestamps=True, pods_form="list")
    got = run_bridge(inputs_from_capture(out), baseline_selector=BASELINE)
    want = run_bridge(inputs_from_capture(ref), baseline_selector=BASELINE)
    assert sorted(tree(t) for t in got.traces) == sorted(tree(t) for t in want.traces)


@pytest.mark.slow
def test_capture_without_dpc_warns(k8s: FakeCluster, tmp_path: Path) -> None:
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    r = CliRunner().invoke(
        main, ["capture", "-n", NS, "--kubeconfig", kubeconfig, "--out", str(tmp_path / "c")]
    )
    assert r.exit_code == 0
    assert "no dual-pods controller Pod" in r.stderr
    assert not (tmp_path / "c" / "dpc.log").exists()


@pytest.mark.slow
def test_capture_unreachable_server_exits_1(tmp_path: Path) -> None:
    with FakeCluster() as k8s:
        kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    r = CliRunner().invoke(
        main, ["capture", "-n", NS, "--kubeconfig", kubeconfig, "--out", str(tmp_path / "c")]
    )
    assert r.exit_code == 1
    assert "cannot reach the API server" in r.stderr or "refused" in r.stderr


@pytest.mark.slow
def test_capture_reports_every_log_byte_to_progress(k8s: FakeCluster, tmp_path: Path) -> None:
    """The progress bar of a long capture counts exactly the log bytes written."""
    from fma_otel.capture import capture_namespace
    from fma_otel.live.kube import Kube, make_api_client

    k8s.add_pod(dpc_pod())
    play(k8s, timeline(recent_capture(seed=22)))
    kube = Kube(make_api_client(k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS), None))
    seen: list[int] = []
    out = tmp_path / "cap"
    capture_namespace(
        kube,
        NS,
        out,
        dpc_selector={"app.kubernetes.io/component": "dual-pods-controller"},
        progress=seen.append,
    )
    logs = sum(p.stat().st_size for p in out.glob("*.log"))
    assert logs > 0 and sum(seen) == logs


def _capture(*args: str):  # noqa: ANN202
    return CliRunner().invoke(main, ["capture", "-n", NS, *args], prog_name="fma-otel")


@pytest.mark.slow
@pytest.mark.parametrize("stall", ["mid-line", "before-headers"])
def test_capture_log_that_stalls_is_a_warning_and_the_capture_goes_on(
    k8s: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stall: str
) -> None:
    """A pods/log the API server accepts and then never finishes (a kubelet on a dead node)
    hung the capture forever: it now gives up after the read timeout, keeps the whole lines
    it got, warns naming the log, and records the rest."""
    from tests.support import k8s_server

    k8s.add_pod(dpc_pod())
    play(k8s, timeline(recent_capture(seed=23)))
    name = dpc_pod()["metadata"]["name"]
    release = threading.Event()
    original = k8s_server._Handler._pod_log

    def stalled(self, ns: str, pod: str, query: dict[str, str]) -> int:  # noqa: ANN001
        if pod != name:
            return original(self, ns, pod, query)
        if stall == "mid-line":
            self._start_chunked("text/plain")
            self._chunk(b"2026-12-03T18:00:00.000000000Z first line\n2026-12-03T18:00:01.0")
            self.wfile.flush()
        release.wait(10)  # then nothing, the connection open
        return 200

    monkeypatch.setattr(k8s_server._Handler, "_pod_log", stalled)
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    out = tmp_path / "cap"
    t0 = time.monotonic()
    try:
        r = _capture("--kubeconfig", kubeconfig, "--out", str(out), "--log-read-timeout", "300ms")
    finally:
        release.set()
    assert time.monotonic() - t0 < 8
    assert r.exit_code == 0, r.output
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    if stall == "mid-line":
        assert warnings == [
            f"fma-otel capture: warning: {name}/controller: log cut short: nothing for 0.3s after 42 bytes, "
            "an unfinished line of 21 bytes dropped; the capture goes on without the rest"
        ]
        assert (out / "dpc.log").read_bytes() == b"2026-12-03T18:00:00.000000000Z first line\n"
    else:
        assert warnings == [
            f"fma-otel capture: warning: {name}/controller: log not recorded: no answer within 0.3s"
        ]
        assert (out / "dpc.log").read_bytes() == b""
    assert list(out.glob("launcher-*.log"))  # the logs after the stalled one were recorded
    assert all(p.stat().st_size > 0 for p in out.glob("launcher-*.log"))


@pytest.mark.slow
@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_capture_out_that_cannot_be_written_is_one_line_exit_2(
    k8s: FakeCluster, tmp_path: Path, where: str
) -> None:
    (tmp_path / "afile").write_text("x")
    out = str(tmp_path / "afile" / "cap") if where == "under-a-file" else "/proc/cap"
    why = "Not a directory" if where == "under-a-file" else "No such file or directory"
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    r = _capture("--kubeconfig", kubeconfig, "--out", out)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
    assert r.stderr.splitlines() == [
        f"fma-otel capture: error: --out {out}: cannot write a capture there ({why})"
    ]
    assert not k8s.requests_to("/pods")


@pytest.mark.slow
def test_capture_file_that_cannot_be_written_names_it_exit_1(k8s: FakeCluster, tmp_path: Path) -> None:
    out = tmp_path / "cap"
    (out / "pods.json").mkdir(parents=True)  # pods.json cannot be replaced
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    r = _capture("--kubeconfig", kubeconfig, "--out", str(out))
    assert r.exit_code == 1 and isinstance(r.exception, SystemExit)
    assert r.stderr.splitlines() == [
        f"fma-otel capture: error: cannot write {out / 'pods.json'}: Is a directory"
    ]


@pytest.mark.slow
def test_capture_without_n_takes_the_kubeconfig_contexts_namespace(k8s: FakeCluster, tmp_path: Path) -> None:
    """As kubectl: no -n means the current context's namespace (here "ctx-ns")."""
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), "ctx-ns")
    out = tmp_path / "cap"
    r = CliRunner().invoke(main, ["capture", "-q", "--kubeconfig", kubeconfig, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert k8s.requests_to("/namespaces/ctx-ns/pods")
    assert not k8s.requests_to("/namespaces/default/pods")


@pytest.mark.slow
def test_capture_log_whose_stream_breaks_is_a_warning_and_the_capture_goes_on(
    k8s: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pods/log answer cut off mid-body (a kubelet restarting, a load balancer) aborted
    the whole capture, exit 1, "cannot reach the API server", its files half-written."""
    import socket

    from tests.support import k8s_server

    k8s.add_pod(dpc_pod())
    play(k8s, timeline(recent_capture(seed=23)))
    name = dpc_pod()["metadata"]["name"]
    original = k8s_server._Handler._pod_log

    def broken(self, ns: str, pod: str, query: dict[str, str]) -> int:  # noqa: ANN001
        if pod != name:
            return original(self, ns, pod, query)
        self._start_chunked("text/plain")
        self._chunk(b"2026-12-03T18:00:00.000000000Z first line\n2026-12-03T18:00:01.0")
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)  # the chunked body never ends
        return 200

    monkeypatch.setattr(k8s_server._Handler, "_pod_log", broken)
    kubeconfig = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
    out = tmp_path / "cap"
    r = _capture("--kubeconfig", kubeconfig, "--out", str(out), "--log-read-timeout", "5s")
    assert r.exit_code == 0, r.output
    [warning] = [line for line in r.stderr.splitlines() if "warning" in line]
    assert warning.startswith(
        f"fma-otel capture: warning: {name}/controller: log cut short: the stream broke ("
    )
    assert warning.endswith(
        "after 42 bytes, an unfinished line of 21 bytes dropped; the capture goes on without the rest"
    )
    assert (out / "dpc.log").read_bytes() == b"2026-12-03T18:00:00.000000000Z first line\n"
    assert all(p.stat().st_size > 0 for p in out.glob("launcher-*.log"))  # recorded after it


def test_default_namespace_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from fma_otel.commands import params

    def kubeconfig(ns: str | None, current: str = "a") -> str:
        ctx = {"cluster": "c", "user": "u", **({"namespace": ns} if ns else {})}
        doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
               "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
               "users": [{"name": "u", "user": {}}],
               "contexts": [{"name": "a", "context": ctx}, {"name": "b", "context": {**ctx, "namespace": "bee"}}]}  # fmt: skip
        p = tmp_path / f"kc-{ns}-{current}"
        p.write_text(yaml.safe_dump(doc))
        return str(p)

    sa = tmp_path / "sa-namespace"
    monkeypatch.setattr(params, "SA_NAMESPACE_FILE", str(sa))
    assert params.default_namespace(kubeconfig("team")) == "team"
    assert params.default_namespace(kubeconfig("team"), context="b") == "bee"
    assert params.default_namespace(kubeconfig(None)) == "default"  # a context without one
    missing = str(tmp_path / "none")
    assert params.default_namespace(missing) == "default"  # no kubeconfig, not in a cluster
    sa.write_text("in-pod\n")
    assert params.default_namespace(missing) == "in-pod"  # in a cluster: the service account's


def test_find_instances_reads_the_dpc_pairs_it_names_and_no_other_line(tmp_path: Path) -> None:
    """Only lines holding ``instanceID=`` or ``providerName=`` reach the klog parser: the
    pairs found are those of every line (one line; split around a multi-line value), in
    log order, and a line of neither key, malformed or not, changes nothing."""
    from fma_otel.capture import find_instances

    head = 'I1205 07:40:0{} 1 inference-server.go:1] "{}" worker=1 '
    (tmp_path / "dpc.log").write_text(
        "\n".join(
            [
                head.format("1.000000", "HTTP call done") + 'instanceID="I1" providerName="L2"',
                head.format("2.000000", "Other") + 'requesterName="r" tail=<',
                '\tinstanceID="I9" providerName="L9"',  # a block's text, not a pair
                " >",
                "not klog at all",
                head.format("3.000000", "Fetched tail") + 'instanceID="I2" tail=<',
                "\tsome vLLM line",
                ' > providerName="L3"',  # the pair's other key, after the value
                head.format("4.000000", "Created vLLM instance") + 'providerName="L1" instanceID="I1"',
                head.format("5.000000", "Bound") + 'instanceID="I3"',  # no launcher: no pair
            ]
        )
        + "\n"
    )
    assert find_instances(tmp_path, []) == {"I1": ["L2", "L1"], "I2": ["L3"]}
