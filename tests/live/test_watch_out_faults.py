"""``fma-otel watch`` and its outputs: an unusable OTLP setting or ``--out`` is one line and
exit 2 before watching starts; an ``--out`` or checkpoint failing while running is one
line (or a retry), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fma_otel.cli import main
from tests.live.replay import NS
from tests.support.k8s_server import FakeCluster


def watch(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(
        main, ["watch", "-n", NS, "--metrics-port", "-1", *args], env=env, prog_name="fma-otel"
    )


@pytest.fixture
def kubeconfig(k8s: FakeCluster, tmp_path: Path) -> str:
    return k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)


def one_line_exit_2(r: Result) -> str:
    assert isinstance(r.exception, SystemExit), r.exception
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# ---------------------------------------------------------------- OTLP settings


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
    assert one_line_exit_2(r) == f"fma-otel watch: {message}"
    assert not k8s.requests_to("/pods")


# ---------------------------------------------------------------- --out that is no file


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
    assert one_line_exit_2(r) == f"fma-otel watch: --out {out}: not a regular file ({NOT_REGULAR_HINT})"
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
