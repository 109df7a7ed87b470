"""Faults around the CLI: OTLP receiver down, slow or refusing; ``--out`` unwritable; a
closed pipe.  Each must end in a clear one-line message (or silence, for the pipe), the
right exit code, no traceback, and for export failures a complete, valid ``--out`` file.

Why the short timeout: the CLI gives the SDK exporter 10 s per batch; the tests shrink
that (by wrapping ``OtlpSink``) so a slow or failing receiver costs a fraction of a second.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.query.readers import read_spans
from fma_otel.sinks import otlp_export
from tests.support.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver, free_port

SAMPLE = sample_dir()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fast_sink(monkeypatch: pytest.MonkeyPatch, clean_otlp_env: pytest.MonkeyPatch) -> None:
    """``OtlpSink`` with a 0.5 s budget per batch instead of 10 s."""
    monkeypatch.setattr(otlp_export, "OtlpSink", functools.partial(otlp_export.OtlpSink, timeout_s=0.5))


def _bridge(*args: str):
    return CliRunner().invoke(main, ["bridge", str(SAMPLE), "-q", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def expected_lines(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The sample's traces with no export: what every failed export must still have written
    (made once for the module; the tests only read it)."""
    ref = tmp_path_factory.mktemp("ref") / "ref.jsonl"
    no_otel = {k: None for k in os.environ if k.startswith("OTEL_")}
    r = CliRunner().invoke(main, ["bridge", str(SAMPLE), "-q", "--out", str(ref)], env=no_otel)
    assert r.exit_code == 0, r.stderr
    return ref.read_text().splitlines()


def _assert_export_failure(r, out: Path, want: list[str], endpoint_part: str) -> None:
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert "export failed" in lines[0] and endpoint_part in lines[0], lines[0]
    assert "Traceback" not in r.stderr
    got = out.read_text().splitlines()
    assert got == want  # complete: every trace, byte for byte
    for line in got:
        assert "resourceSpans" in json.loads(line)
    assert list(read_spans(str(out)))


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_receiver_down(tmp_path: Path, fast_sink: None, expected_lines: list[str], protocol: str) -> None:
    want = expected_lines
    out = tmp_path / "t.jsonl"
    endpoint = f"http://127.0.0.1:{free_port()}"
    r = _bridge("--out", str(out), "--otlp-endpoint", endpoint, "--otlp-protocol", protocol)
    _assert_export_failure(r, out, want, "127.0.0.1")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_receiver_slow(tmp_path: Path, fast_sink: None, expected_lines: list[str], protocol: str) -> None:
    want = expected_lines
    out = tmp_path / "t.jsonl"
    rx_cls = GrpcOtlpReceiver if protocol == "grpc" else HttpOtlpReceiver
    with rx_cls() as rx:
        rx.delay_s = 3.0
        r = _bridge("--out", str(out), "--otlp-endpoint", rx.endpoint, "--otlp-protocol", protocol)
        rx.delay_s = 0.0
    _assert_export_failure(r, out, want, rx.endpoint.split("://", 1)[-1])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("protocol", "answer"),
    [("grpc", "UNAVAILABLE"), ("grpc", "INVALID_ARGUMENT"), ("http/protobuf", 503), ("http/protobuf", 400)],
)
def test_receiver_answers_errors(
    tmp_path: Path, fast_sink: None, expected_lines: list[str], protocol: str, answer: str | int
) -> None:
    want = expected_lines
    out = tmp_path / "t.jsonl"
    rx_cls = GrpcOtlpReceiver if protocol == "grpc" else HttpOtlpReceiver
    with rx_cls() as rx:
        rx.fail_with = answer
        r = _bridge("--out", str(out), "--otlp-endpoint", rx.endpoint, "--otlp-protocol", protocol)
    _assert_export_failure(r, out, want, rx.endpoint.split("://", 1)[-1])


def _assert_clear_out_error(r, path: str, words: str) -> None:
    assert r.exit_code == 1, (r.exit_code, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and path in lines[0] and words in lines[0], r.stderr


def test_out_on_full_disk(clean_otlp_env: pytest.MonkeyPatch) -> None:
    _assert_clear_out_error(_bridge("--out", "/dev/full"), "/dev/full", "no space left on device")


def test_out_under_a_file(clean_otlp_env: pytest.MonkeyPatch) -> None:
    """``/proc/version/x``: a path whose parent is a file (not writable, even for root)."""
    r = _bridge("--out", "/proc/version/x.jsonl")
    # an unusable argument: exit 2 before any work (issue 24), one line naming the path
    assert r.exit_code == 2 and "Traceback" not in r.stderr, (r.exit_code, r.stderr)
    assert r.stderr.splitlines() == [
        "fma-otel bridge: error: Invalid value for --out: /proc/version/x.jsonl: folder /proc/version is not a folder"
    ]


@pytest.mark.skipif(not os.path.isdir("/sys/kernel"), reason="needs sysfs")
def test_out_where_even_root_may_not_write(clean_otlp_env: pytest.MonkeyPatch) -> None:
    """sysfs refuses new files to everyone (the tests run as root, so chmod proves nothing)."""
    r = _bridge("--out", "/sys/fma-otel-test.jsonl")
    _assert_clear_out_error(r, "/sys/fma-otel-test.jsonl", "permission denied")


def test_out_on_read_only_file_system(tmp_path: Path, clean_otlp_env: pytest.MonkeyPatch) -> None:
    """EROFS cannot be produced without mounting; the message is checked by making the
    open fail the way a read-only mount does."""
    target = str(tmp_path / "ro.jsonl")
    real_open = open

    def ro_open(file, mode="r", *a, **kw):  # noqa: ANN001, ANN002, ANN003
        if str(file) == target and any(c in mode for c in "wax+"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), target)
        return real_open(file, mode, *a, **kw)

    clean_otlp_env.setattr("builtins.open", ro_open)
    _assert_clear_out_error(_bridge("--out", target), target, "read-only file system")


@pytest.mark.slow
def test_show_into_head_exits_0_without_traceback(tmp_path: Path, expected_lines: list[str]) -> None:
    """``fma-otel show FILE | head -1`` with far more output than a pipe buffer holds."""
    lines = expected_lines
    many = tmp_path / "many.jsonl"
    with open(many, "w") as fh:
        # distinct trace ids per copy so show renders every copy: ~18 KB each, 5x a pipe's 64 KB
        for k in range(20):
            for line in lines:
                tid = json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
                fh.write(line.replace(tid, f"{k:04x}{tid[4:]}") + "\n")
    cmd = "import sys; from fma_otel.cli import run; sys.argv[0] = 'fma-otel'; run()"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    script = f'set -o pipefail; "{sys.executable}" -c "{cmd}" show "{many}" | head -1'
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Broken pipe" not in p.stderr, p.stderr
    assert len(p.stdout.splitlines()) == 1
