"""``fma-otel watch`` given an unusable argument or environment: one line, exit 2, no
traceback; a checkpoint write failing while running is logged and retried; a Pod watch the
API server keeps expiring or ending is backed off, not hammered."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fma_otel.cli import main
from fma_otel.live import checkpoint as CP
from tests.live.replay import NS, wait_for
from tests.support.k8s_server import FakeCluster, make_pod


def watch(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(
        main, ["watch", "-n", NS, "--metrics-port", "-1", *args], env=env, prog_name="fma-otel"
    )


def one_line_exit_2(r: Result) -> str:
    """The single stderr line of a refused start (exit 2, no traceback)."""
    assert isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# ---------------------------------------------------------------- kubeconfig


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--kubeconfig {p}: no such file"),
        ("garbage: [\n", "--kubeconfig {p}: not valid YAML (while parsing a flow node"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n", "--kubeconfig {p}: Invalid kube-config file."),
        ("", "--kubeconfig {p}: Invalid kube-config. "),
        ("[1, 2]\n", "--kubeconfig {p}: not a usable kubeconfig ("),
        ("dir", "--kubeconfig {p}: is a directory, not a kubeconfig file"),
    ],
    ids=["missing", "malformed-yaml", "no-current-context", "empty", "yaml-list", "directory"],
)
def test_unusable_kubeconfig_is_one_line_exit_2(tmp_path: Path, content: str | None, message: str) -> None:
    p = tmp_path / "kubeconfig"
    if content == "dir":
        p.mkdir()
    elif content is not None:
        p.write_text(content)
    line = one_line_exit_2(watch("--kubeconfig", str(p), "--out", str(tmp_path / "o.jsonl")))
    assert line.startswith("fma-otel watch: error: " + message.format(p=p)), line
    assert not (tmp_path / "o.jsonl").exists()  # refused before anything was opened


def test_no_kubeconfig_outside_a_cluster_is_one_line_exit_2(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "KUBECONFIG": None, "KUBERNETES_SERVICE_HOST": None}
    line = one_line_exit_2(watch("--out", str(tmp_path / "o.jsonl"), env=env))
    assert line == (
        "fma-otel watch: error: no Kubernetes configuration: not in a cluster (Service host/port is not set.) "
        f"and no {tmp_path}/.kube/config; give --kubeconfig or set KUBECONFIG"
    )


def test_capture_shares_the_kubeconfig_message(tmp_path: Path) -> None:
    p = tmp_path / "kubeconfig"
    p.write_text("garbage: [\n")
    r = CliRunner().invoke(
        main,
        ["capture", "-n", NS, "--kubeconfig", str(p), "--out", str(tmp_path / "c")],
        prog_name="fma-otel",
    )
    line = one_line_exit_2(r)
    assert line.startswith(f"fma-otel capture: error: --kubeconfig {p}: not valid YAML ("), line


@pytest.mark.parametrize("cmd", ["watch", "capture"])
def test_both_commands_take_the_same_kubeconfig_options(tmp_path: Path, cmd: str) -> None:
    """One ``--kubeconfig``/``--context`` (``params.kube_options``) and one way to refuse
    an unusable configuration (``_common.kube_api_client``) for both commands."""
    import importlib

    command = importlib.import_module(f"fma_otel.commands.{cmd}").command
    kube = {p.name: p.to_info_dict() for p in command.params}
    assert kube["kubeconfig"]["help"] == "Kubeconfig file (default: in-cluster, then ~/.kube/config)."
    assert kube["context"]["help"] == "Kubeconfig context."
    missing = tmp_path / "none"
    r = CliRunner().invoke(
        main,
        [cmd, "-n", NS, "--kubeconfig", str(missing), "--out", str(tmp_path / "o")],
        prog_name="fma-otel",
    )
    assert one_line_exit_2(r) == f"fma-otel {cmd}: error: --kubeconfig {missing}: no such file"
    assert not (tmp_path / "o").exists()  # refused before anything was opened


@pytest.mark.parametrize("flag", ["--dpc-selector", "--baseline-selector"])
@pytest.mark.parametrize("cmd", ["watch", "capture"])
def test_a_bad_selector_is_one_line_exit_2_in_both_commands(tmp_path: Path, cmd: str, flag: str) -> None:
    args = [cmd, "-n", NS, flag, "app!=vllm", "--out", str(tmp_path / "o")]
    r = CliRunner().invoke(
        main, args + (["--metrics-port", "-1"] if cmd == "watch" else []), prog_name="fma-otel"
    )
    line = one_line_exit_2(r)
    assert line.startswith(
        f"fma-otel {cmd}: error: {flag}: selector 'app!=vllm': 'app!=vllm' is not a key=value term"
    )
    assert not (tmp_path / "o").exists()  # refused before anything was opened


# ---------------------------------------------------------------- --out, --checkpoint


@pytest.mark.slow
@pytest.mark.parametrize("where", ["missing-dir", "directory"])
def test_out_that_cannot_be_opened_is_one_line_exit_2(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, where: str
) -> None:
    out = tmp_path / "no-such-dir" / "o.jsonl" if where == "missing-dir" else tmp_path
    why = "directory does not exist" if where == "missing-dir" else "is a directory"
    r = watch("--kubeconfig", kubeconfig, "--checkpoint", str(tmp_path / "cp.json"), "--out", str(out))
    assert one_line_exit_2(r) == f"fma-otel watch: error: --out {out}: {why}"
    assert not k8s.requests_to("/pods")  # before watching started


@pytest.mark.slow
@pytest.mark.parametrize("where", ["parent-is-a-file", "deeper-under-a-file", "proc"])
def test_checkpoint_that_cannot_be_written_is_one_line_exit_2(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, where: str
) -> None:
    (tmp_path / "afile").write_text("x")
    cp = {
        "parent-is-a-file": tmp_path / "afile" / "cp.json",
        "deeper-under-a-file": tmp_path / "afile" / "a" / "cp.json",
        "proc": Path("/proc/cp.json"),
    }[where]
    why = "No such file or directory" if where == "proc" else "Not a directory"
    r = watch("--kubeconfig", kubeconfig, "--checkpoint", str(cp), "--out", str(tmp_path / "o.jsonl"))
    assert (
        one_line_exit_2(r)
        == f"fma-otel watch: error: --checkpoint {cp}: cannot write a checkpoint there ({why})"
    )
    assert not k8s.requests_to("/pods")


def test_checkpoint_save_failing_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "afile").write_text("x")
    path = str(tmp_path / "afile" / "cp.json")
    with caplog.at_level(logging.ERROR, logger="fma_otel.live.checkpoint"):
        assert CP.save(path, CP.Checkpoint(namespace=NS)) is False
    assert [r.getMessage() for r in caplog.records] == [
        f"checkpoint {path}: cannot write it ([Errno 17] File exists: '{tmp_path / 'afile'}'); "
        "keeping the previous one, retrying"
    ]
    assert CP.save(str(tmp_path / "cp" / "cp.json"), CP.Checkpoint(namespace=NS)) is True


@pytest.mark.slow
def test_checkpoint_write_failing_while_running_is_retried_not_a_crash(
    k8s: FakeCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The checkpoint's volume fails under a running watcher (here: its directory becomes a
    file); the watcher logs it, keeps watching, and writes the checkpoint once it can."""
    from kubernetes import client

    from fma_otel.live.watcher import LiveWatcher, WatchConfig

    cp_dir = tmp_path / "cp"
    cp_path = cp_dir / "checkpoint.json"
    cfg = WatchConfig(
        namespace=NS,
        checkpoint=str(cp_path),
        out=str(tmp_path / "o.jsonl"),
        metrics_port=None,
        tick_s=0.05,
        checkpoint_interval_s=0.1,
        backoff_base_s=0.02,
        backoff_max_s=0.2,
    )
    w = LiveWatcher(cfg, api_client=client.ApiClient(k8s.configuration()))
    crashed: list[BaseException] = []

    def run() -> None:
        try:
            w.run()
        except BaseException as exc:  # noqa: BLE001 - the assertion below reports it
            crashed.append(exc)

    t = threading.Thread(target=run, daemon=True)
    caplog.set_level(logging.ERROR, logger="fma_otel.live.checkpoint")
    t.start()
    try:
        assert wait_for(lambda: cp_path.exists(), 5)
        cp_dir.rename(tmp_path / "cp-gone")
        cp_dir.write_text("not a directory")
        k8s.add_pod(make_pod("p1", NS))
        assert wait_for(lambda: any("cannot write it" in r.getMessage() for r in caplog.records), 5)
        time.sleep(0.3)
        assert t.is_alive() and not crashed
        cp_dir.unlink()
        cp_dir.mkdir()
        k8s.add_pod(make_pod("p2", NS))
        rv = str(k8s.rv)
        assert wait_for(
            lambda: cp_path.exists() and json.loads(cp_path.read_text())["pods"]["resourceVersion"] == rv, 5
        )
    finally:
        w.request_stop()
        t.join(10)
    assert not t.is_alive() and not crashed


# ---------------------------------------------------------------- --metrics-port, --tick


@pytest.mark.slow
def test_metrics_port_in_use_is_one_line_exit_2(kubeconfig: str, k8s: FakeCluster, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        port = s.getsockname()[1]
        p = subprocess.run(
            [sys.executable, "-c", "from fma_otel.cli import run; run()", "watch", "-n", NS]
            + ["--kubeconfig", kubeconfig, "--out", str(tmp_path / "o.jsonl"), "--metrics-port", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(  # (the program name is "-c" here)
        f" watch: error: --metrics-port {port}: cannot listen on 0.0.0.0:{port} (Address already in use); "
        "choose another port, or -1 for none"
    )
    assert not k8s.requests_to("/pods", watch="true")


@pytest.mark.parametrize("tick", ["0", "10ms", "0.049"])
def test_tick_below_50ms_is_a_usage_error(tmp_path: Path, tick: str) -> None:
    r = watch("--tick", tick, "--kubeconfig", str(tmp_path / "none"))
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
    assert f"Invalid value for '--tick': '{tick}' is too short (at least 50ms)" in r.stderr
    assert "Traceback" not in r.output


def test_tick_of_50ms_is_accepted(tmp_path: Path) -> None:
    # accepted: the run goes on to the next check (the kubeconfig here)
    line = one_line_exit_2(watch("--tick", "50ms", "--kubeconfig", str(tmp_path / "none")))
    assert line == f"fma-otel watch: error: --kubeconfig {tmp_path / 'none'}: no such file"


# ---------------------------------------------------------------- Pod watch backoff


def _pod_watcher(k8s: FakeCluster, base_s: float, max_s: float, watch_timeout_s: int = 300):  # noqa: ANN202
    from kubernetes import client

    from fma_otel.live.kube import Backoff, Kube
    from fma_otel.live.pods import PodWatcher

    kube = Kube(client.ApiClient(k8s.configuration()))
    w = PodWatcher(
        kube,
        NS,
        lambda item: None,
        stop=threading.Event(),
        watch_timeout_s=watch_timeout_s,
        backoff=Backoff(base_s, max_s),
    )
    return w, kube


def _run_for(w, kube, seconds: float) -> None:  # noqa: ANN001
    t = w.start()
    time.sleep(seconds)
    w.stop.set()
    kube.shutdown()
    t.join(5)
    assert not t.is_alive()


def _lists(k8s: FakeCluster) -> int:
    return len(k8s.requests_to("/pods", limit="500"))


def _watches(k8s: FakeCluster) -> int:
    return len(k8s.requests_to("/pods", watch="true"))


@pytest.mark.slow
@pytest.mark.parametrize("gone_mode", ["event", "http"])
def test_410_again_and_again_backs_off(gone_mode: str) -> None:
    """An API server whose watch window lags its list: every watch answers 410."""
    with FakeCluster(gone_mode=gone_mode) as k8s:
        for i in range(5):
            k8s.add_pod(make_pod(f"p{i}", NS))
        k8s.compacted_rv = 10**12  # every watch from a listed version is too old
        w, kube = _pod_watcher(k8s, 0.2, 1.0)
        _run_for(w, kube, 1.5)
        # list, 410, relist at once, 410, then 0.1-0.2, 0.2-0.4, 0.4-0.8, 0.5-1.0 s apart
        # (full jitter: half the cap at least): the earliest relists come 0.1, 0.3, 0.7
        # and 1.2 s after the second list, so at most 6 lists in 1.5 s (it made about 100
        # here without the backoff; the bound was 5 until a run drew delays near the floor)
        assert 3 <= _lists(k8s) <= 6, _lists(k8s)
        assert _watches(k8s) == _lists(k8s)


@pytest.mark.slow
@pytest.mark.parametrize("gone_mode", ["event", "http"])
def test_first_410_after_progress_relists_at_once(gone_mode: str) -> None:
    """The protocol: a 410 after a watch that brought events relists immediately, every time."""
    with FakeCluster(gone_mode=gone_mode) as k8s:
        w, kube = _pod_watcher(k8s, 5.0, 5.0)  # a backoff would show as 2.5 s or more
        t = w.start()
        try:
            for n in (1, 2, 3):
                assert k8s.wait_for_streams("watch", 1, 5)
                assert _lists(k8s) == n
                k8s.add_pod(make_pod(f"p{n}", NS))
                assert wait_for(lambda n=n: w.stats.events >= n, 5)
                t0 = time.monotonic()
                k8s.expire_watches()
                assert wait_for(lambda n=n: _lists(k8s) == n + 1, 5)
                assert time.monotonic() - t0 < 1.0
        finally:
            w.stop.set()
            kube.shutdown()
            t.join(5)


@pytest.mark.slow
def test_watches_that_end_at_once_without_events_back_off() -> None:
    """A proxy that ends every watch at once, cleanly, with no event."""
    with FakeCluster(max_watch_seconds=0) as k8s:
        k8s.add_pod(make_pod("p", NS))
        w, kube = _pod_watcher(k8s, 0.2, 1.0)
        _run_for(w, kube, 1.5)
        # 0.1-0.2, 0.2-0.4, 0.4-0.8, 0.5-1.0 s apart (full jitter: half the cap at least):
        # the earliest watches come at 0, 0.1, 0.3, 0.7 and 1.2 s, so at most 5 in 1.5 s
        # (about 30 without the backoff; the bound was 4 until a CI run drew delays near
        # the floor)
        assert 2 <= _watches(k8s) <= 5, _watches(k8s)
        assert _lists(k8s) == 1


def test_an_out_file_a_folder_refuses_is_not_called_a_missing_directory(tmp_path: Path) -> None:
    """``--out /proc/1/o.jsonl``: the folder exists but takes no new file (ENOENT all the
    same); "directory does not exist" sent the user looking for the wrong fault."""
    import errno

    from fma_otel.commands._common import _describe_os_error

    there = str(tmp_path / "o.jsonl")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", there)
    assert _describe_os_error(there, exc) == f"{there}: cannot be created in that folder"
    gone = str(tmp_path / "no-such-dir" / "o.jsonl")
    exc = FileNotFoundError(errno.ENOENT, "No such file or directory", gone)
    assert _describe_os_error(gone, exc) == f"{gone}: directory does not exist"
