"""``fma-otel watch`` and its outputs: an unusable OTLP setting or ``--out`` is one line and
exit 2 before watching starts; an ``--out`` or checkpoint failing while running is one
line (or a retry), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.replay import NS
from tests.live.test_watch_cli_faults import one_line_exit_2, watch
from tests.support.k8s_server import FakeCluster

# ---------------------------------------------------------------- OTLP settings


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--otlp-endpoint", "ftp://x"],
            {},
            "OTLP/HTTP endpoint 'ftp://x' is not an http:// or https:// URL",
        ),
        (
            ["--otlp-endpoint", "http://h:99999", "--otlp-protocol", "http/protobuf"],
            {},
            "OTLP endpoint 'http://h:99999' is not a valid URL: Port out of range 0-65535",
        ),
        (
            ["--otlp-endpoint", "http://127.0.0.1:4318"],
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"},
            "unsupported OTLP protocol 'http/json': use one of grpc, http/protobuf "
            "(http/json is not offered by the Python exporters)",
        ),
        (
            ["--otlp-endpoint", "http://127.0.0.1:4317", "--otlp-protocol", "grpc"],
            {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
            "cannot set up OTLP export to http://127.0.0.1:4317: "
            'Invalid value "zstd" for compression envvar OTEL_EXPORTER_OTLP_COMPRESSION',
        ),
    ],
    ids=["ftp", "bad-port", "http-json", "bad-compression"],
)
def test_unusable_otlp_setting_is_one_line_exit_2_before_watching(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, clean_otlp_env, args, env, message
) -> None:
    r = watch("--kubeconfig", kubeconfig, "--out", str(tmp_path / "o.jsonl"), *args, env=env)
    assert one_line_exit_2(r) == f"fma-otel watch: error: {message}"
    assert not k8s.requests_to("/pods")


# ---------------------------------------------------------------- --out that is no file


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dev-zero", "dev-full", "fifo"])
def test_out_that_is_not_a_regular_file_is_one_line_exit_2(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, kind: str
) -> None:
    """--out is read back on start: /dev/zero never ended (memory grew without bound, SIGTERM
    ignored), a FIFO blocked; refused at start instead."""
    import os

    from fma_otel.live.outfile import NOT_REGULAR_HINT

    if kind == "fifo":
        out = str(tmp_path / "fifo")
        os.mkfifo(out)
    else:
        out = "/dev/zero" if kind == "dev-zero" else "/dev/full"
        if not os.path.exists(out):
            pytest.skip(f"no {out}")
    r = watch("--kubeconfig", kubeconfig, "--checkpoint", str(tmp_path / "cp.json"), "--out", out)
    assert (
        one_line_exit_2(r) == f"fma-otel watch: error: --out {out}: not a regular file ({NOT_REGULAR_HINT})"
    )
    assert not k8s.requests_to("/pods")


def test_scan_never_reads_a_file_that_is_not_regular(tmp_path: Path) -> None:
    import os

    from fma_otel.live.outfile import scan_and_repair

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert scan_and_repair(str(fifo)) == set()  # opening it would block: no writer
    assert scan_and_repair(str(tmp_path / "missing")) == set()
    torn = tmp_path / "o.jsonl"
    torn.write_bytes(b'{"traceId":"' + b"a" * 32 + b'"}\n{"traceId":"b')
    assert scan_and_repair(str(torn)) == {"a" * 32}
    assert torn.read_bytes() == b'{"traceId":"' + b"a" * 32 + b'"}\n'


# ---------------------------------------------------------------- --out failing while running

_WATCH_FAST = [
    "--launcher-logs",
    "--baseline-selector",
    "app=vllm",
    "--grace",
    "300ms",
    "--incomplete-after",
    "1h",
    "--tick",
    "50ms",
    "--checkpoint-interval",
    "200ms",
    "--backoff-base",
    "20ms",
    "--backoff-max",
    "200ms",
    "--watch-timeout",
    "5",
    "--log-read-timeout",
    "5s",
    "--log-level",
    "warning",
]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_out_disk_full_while_running_is_one_line_exit_1(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_otlp_env
) -> None:
    """The disk under --out fills: one line naming the file, exit 1; the way out (the final
    flush) does not write again, which gave a second traceback."""
    import os
    import signal
    import threading

    from fma_otel.live import outfile
    from tests.live.replay import dpc_pod, play, recent_capture, timeline

    real_init = outfile.OutFile.__init__

    def on_a_full_disk(self: outfile.OutFile, path: str, *args: object) -> None:
        real_init(self, path, *args)
        assert self._fd is not None
        os.dup2(os.open("/dev/full", os.O_WRONLY), self._fd)  # every write: ENOSPC

    monkeypatch.setattr(outfile.OutFile, "__init__", on_a_full_disk)
    out = tmp_path / "o.jsonl"
    k8s.add_pod(dpc_pod())
    steps = timeline(recent_capture(seed=3))
    done = threading.Event()

    def feed() -> None:
        if k8s.wait_for_streams("watch", 1, 10):
            play(k8s, steps)
        if not done.wait(20):  # never a hung test: stop the watcher as SIGTERM would
            os.kill(os.getpid(), signal.SIGTERM)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    old_term = signal.getsignal(signal.SIGTERM)
    try:
        r = watch(
            "--kubeconfig",
            kubeconfig,
            "--checkpoint",
            str(tmp_path / "cp.json"),
            "--out",
            str(out),
            *_WATCH_FAST,
        )
    finally:
        done.set()
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    assert isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    assert r.stderr.splitlines() == [
        f"fma-otel watch: error: cannot write --out {out}: no space left on device"
    ]
    assert r.exit_code == 1
    assert out.read_bytes() == b""


_PARTIAL = """
import resource, signal, sys
from fma_otel.live.outfile import OutFile, OutFileError
from fma_otel.span_records import SpanRecord
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
def trace(i, size):
    t = f"{i:032x}"
    return [SpanRecord(t, "1" * 16, None, "x", "INTERNAL", 1, 2, "s", {"pad": "p" * size})]
o = OutFile(sys.argv[1])
o.write([trace(1, 10)])
limit = 4096
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
try:
    o.write([trace(2, 10), trace(3, 10000)])  # the file reaches its limit mid-line
except OutFileError as exc:
    print(exc.error.strerror)
try:
    o.write([trace(4, 10)])  # not written again after a failure
except OutFileError:
    print("again")
o.close()
"""


def test_out_write_failing_midway_leaves_whole_lines(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    out = tmp_path / "o.jsonl"
    p = subprocess.run([sys.executable, "-c", _PARTIAL, str(out)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["File too large", "again"]
    lines = out.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2  # one whole line, the first trace's
    assert json.loads(lines[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] == f"{1:032x}"


# ---------------------------------------------------------------- checkpoint failing


def _watcher(k8s: FakeCluster, tmp_path: Path, interval: float = 0.1):  # noqa: ANN202 - a LiveWatcher on a thread
    import threading

    from kubernetes import client

    from fma_otel.live.watcher import LiveWatcher, WatchConfig

    cfg = WatchConfig(
        namespace=NS,
        checkpoint=str(tmp_path / "cp" / "checkpoint.json"),
        out=str(tmp_path / "o.jsonl"),
        metrics_port=None,
        tick_s=0.05,
        checkpoint_interval_s=interval,
        backoff_base_s=0.02,
        backoff_max_s=0.2,
    )
    w = LiveWatcher(cfg, api_client=client.ApiClient(k8s.configuration()))
    codes: list[object] = []

    def run() -> None:
        try:
            codes.append(w.run())
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            codes.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return w, t, codes


def _break_checkpoint_dir(cp_dir: Path) -> None:
    cp_dir.rename(cp_dir.with_name("cp-gone"))
    cp_dir.write_text("not a directory")


@pytest.mark.slow
def test_failed_checkpoint_is_written_again_without_new_events(
    k8s: FakeCluster, tmp_path: Path, caplog
) -> None:
    """A failed write leaves the checkpoint due (it was marked written and waited for the
    next event); it is written at a following tick once the volume is back."""
    import logging

    from tests.live.replay import wait_for
    from tests.support.k8s_server import make_pod

    cp_dir = tmp_path / "cp"
    cp_path = cp_dir / "checkpoint.json"
    caplog.set_level(logging.ERROR, logger="fma_otel.live.checkpoint")
    w, t, codes = _watcher(k8s, tmp_path)
    try:
        assert wait_for(cp_path.exists, 5)
        written = w.metrics.checkpoints
        _break_checkpoint_dir(cp_dir)
        k8s.add_pod(make_pod("p1", NS))
        assert wait_for(lambda: any("cannot write it" in r.getMessage() for r in caplog.records), 5)
        assert w.state.dirty and w.metrics.checkpoints == written  # not counted as written
        cp_dir.unlink()
        cp_dir.mkdir()  # the volume is back; no event comes
        assert wait_for(cp_path.exists, 5)
        assert w.metrics.checkpoints > written
    finally:
        w.request_stop()
        t.join(10)
    assert codes == [0]


@pytest.mark.slow
def test_final_checkpoint_failing_on_stop_is_exit_1(k8s: FakeCluster, tmp_path: Path, caplog) -> None:
    """0 means flushed and checkpointed; a final checkpoint that cannot be written is 1."""
    import logging

    from tests.live.replay import wait_for

    cp_dir = tmp_path / "cp"
    w, t, codes = _watcher(k8s, tmp_path)
    try:
        assert wait_for((cp_dir / "checkpoint.json").exists, 5)
        _break_checkpoint_dir(cp_dir)
    finally:
        w.request_stop()
        t.join(10)
    assert codes == [1]
    assert any("final checkpoint could not be written" in r.getMessage() for r in caplog.records)
    assert all(r.levelno >= logging.ERROR for r in caplog.records if "checkpoint" in r.getMessage())


@pytest.mark.slow
def test_failing_checkpoint_is_retried_once_an_interval_not_every_tick(
    k8s: FakeCluster, tmp_path: Path, caplog
) -> None:
    """A full disk must not log an error at every 50 ms tick: one try per interval."""
    import logging

    from tests.live.replay import wait_for
    from tests.support.k8s_server import make_pod

    cp_dir = tmp_path / "cp"
    caplog.set_level(logging.ERROR, logger="fma_otel.live.checkpoint")
    w, t, codes = _watcher(k8s, tmp_path, interval=0.6)
    try:
        assert wait_for((cp_dir / "checkpoint.json").exists, 5)
        _break_checkpoint_dir(cp_dir)
        k8s.add_pod(make_pod("p1", NS))

        def fails() -> list[float]:
            return [r.created for r in caplog.records if "cannot write it" in r.getMessage()]

        assert wait_for(lambda: len(fails()) >= 3, 10)
        at = fails()[:3]
        gaps = [b - a for a, b in zip(at, at[1:], strict=False)]
        assert min(gaps) >= 0.5, gaps  # one try per 0.6 s interval (a try per tick: 0.05 s)
    finally:
        w.request_stop()
        t.join(10)
