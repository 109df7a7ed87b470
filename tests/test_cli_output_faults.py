"""stdout that is full, closed or a pipe closed early: one line or silence, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-c", "from fma_otel.cli import run; run()"]
FULL = "cannot write to standard output: No space left on device"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sample's traces: an input file, made in-process (no need for a python to start)."""
    from click.testing import CliRunner

    from fma_otel.cli import main

    out = tmp_path_factory.mktemp("traces") / "ref.jsonl"
    r = CliRunner().invoke(main, ["bridge", "-q", "--out", str(out)])
    assert r.exit_code == 0, r.output
    return str(out)


def _commands(traces: str, report_traces: str) -> list[list[str]]:
    return [
        ["bridge", "-q", "--out", "-"],
        ["show", traces],
        ["slo", "--traces", traces],
        ["report", report_traces, "--out", "-", "--top", "0"],  # no waterfalls to draw
        ["--help"],
    ]


def _path_of(line: str) -> str | None:
    """The ``fma.path`` of the actuation in one OTLP JSON line."""
    import json

    for rs in json.loads(line)["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for a in sp.get("attributes", []):
                    if a["key"] == "fma.path":
                        return a["value"]["stringValue"]
    return None


def _run_all(argvs: list[list[str]], **kw: object) -> list[tuple[list[str], int, str]]:
    """Run the commands side by side (each takes about a second to start)."""
    procs = [(a, subprocess.Popen(a, stderr=subprocess.PIPE, **kw)) for a in argvs]  # type: ignore[call-overload]
    return [(a, p.wait(timeout=60), p.stderr.read().decode()) for a, p in procs]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_stdout_on_a_full_disk_is_one_line_and_exit_1(traces: str, tmp_path: Path) -> None:
    # The report of one hot actuation is some 70 KB of HTML, many times the write buffer:
    # its write fails midway, not at the last flush (the whole sample only adds drawing).
    hot = tmp_path / "hot.jsonl"
    hot.write_text(next(ln for ln in Path(traces).read_text().splitlines(True) if _path_of(ln) == "hot"))
    with open("/dev/full", "wb") as full:
        results = _run_all([[*CLI, *args] for args in _commands(traces, str(hot))], stdout=full)
    for args, rc, err in results:
        assert "Traceback" not in err, (args, err)
        assert err.strip().splitlines() == [f"fma-otel: {FULL}"], (args, err)
        assert rc == 1, args


@pytest.mark.slow
def test_closed_stdout_is_like_dev_null(traces: str, tmp_path: Path) -> None:
    # close fd 1 in the child (shell `>&-`)
    closed = ["sh", "-c", 'exec "$@" >&-', "sh", *CLI]
    # With fd 1 closed at start, output goes to os.devnull however much there is, so the
    # report reads an empty trace file: the same write path without seconds of plotting.
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for args, rc, err in _run_all([[*closed, *args] for args in _commands(traces, str(empty))]):
        assert "Traceback" not in err, (args, err)
        assert "Exception ignored" not in err, (args, err)
        assert rc == 0, (args, err)


@pytest.mark.slow
def test_closed_stderr_and_stdout_still_exit_by_the_rules(traces: str) -> None:
    proc = subprocess.run(
        ["sh", "-c", 'exec "$@" >&- 2>&-', "sh", *CLI, "show", "--trace", "ffff", traces], timeout=60
    )
    assert proc.returncode == 1  # "no trace ffff", said nowhere
    proc = subprocess.run(["sh", "-c", 'exec "$@" >&- 2>&-', "sh", *CLI, "show", "/nonexistent"], timeout=60)
    assert proc.returncode == 2


#: A command that writes far more than a pipe holds, as the parallel bridge does: the
#: ``BrokenPipeError`` reaches click, whose standalone mode made it exit 1.
_LOUD = """
import sys, click
from fma_otel import cli
@click.command("loud")
def command():
    for _ in range(256):
        sys.stdout.write("x" * 4095 + "\\n")
sys.modules["loud_cmd"] = sys.modules[__name__]
cli.COMMANDS["loud"] = "loud_cmd"
cli.run()
"""


@pytest.mark.slow
def test_pipe_closed_early_is_exit_0_whoever_writes() -> None:
    for args in (["loud"], ["--help"]):
        proc = subprocess.Popen(
            [sys.executable, "-c", _LOUD, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.read(10)
        proc.stdout.close()  # the reader goes away, like `| head -c 10`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=30) == 0, (args, err)
        assert err == "", (args, err)


@pytest.mark.slow
def test_stdout_is_unchanged_when_it_works(traces: str) -> None:
    proc = subprocess.run([*CLI, "bridge", "-q", "--out", "-"], capture_output=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == Path(traces).read_bytes()


def test_one_error_format_and_exit_2_for_unusable_arguments(traces: str, tmp_path: Path) -> None:
    """Every command's unusable arguments, a missing --out folder included, are one line
    ``fma-otel CMD: error: ...`` and exit 2, before any work (no file is written)."""
    from click.testing import CliRunner

    from fma_otel.cli import main

    nope = tmp_path / "no-such-folder" / "x.out"
    cases = [
        (["bridge", "-q", "--out", str(nope)], "fma-otel bridge: error: Invalid value for --out: "),
        (["report", traces, "--out", str(nope)], "fma-otel report: error: Invalid value for --out: "),
        (["slo", traces, "--out", str(nope)], "fma-otel slo: error: Invalid value for --out: "),
        (["show", traces, "--width", "5"], "fma-otel show: error: Invalid value for '--width': "),
        (["slo", traces, "--no-such-flag"], "fma-otel slo: error: No such option '--no-such-flag'"),
        (["show"], "fma-otel show: error: Missing argument 'FILE'."),
        (["no-such-command"], "fma-otel: error: No such command 'no-such-command'."),
    ]
    for argv, start in cases:
        r = CliRunner().invoke(main, argv)
        lines = r.stderr.splitlines()
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith(start), (argv, r.stderr)
        if "--out" in argv:
            assert lines[0].endswith(f"{nope}: folder {nope.parent} does not exist")
    assert not nope.parent.exists()


def test_otlp_protocol_is_the_environments_or_the_default_never_the_ports(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import click
    from click.testing import CliRunner

    from fma_otel.commands import params

    @click.command("probe")
    @params.otlp_options
    def probe(otlp_endpoint: str | None, otlp_protocol: str) -> None:
        click.echo(otlp_protocol)

    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL",
                 "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> tuple[str, str]:
        r = CliRunner().invoke(probe, list(args), prog_name="fma-otel probe")
        assert r.exit_code == 0, r.output
        return r.stdout.strip(), r.stderr

    assert run() == ("http/protobuf", "")
    assert run("--otlp-endpoint", "http://c:4318") == ("http/protobuf", "")
    proto, err = run("--otlp-endpoint", "http://c:4317")  # not guessed: the default, and a warning
    assert proto == "http/protobuf"
    assert err.startswith("fma-otel probe: warning: OTLP endpoint http://c:4317 is on the OTLP/gRPC port")
    assert len(err.splitlines()) == 1
    _, err = run("--otlp-endpoint", "http://u:s3cretPW@c:4317/?api_key=k3y")  # no credential echoed
    assert "OTLP endpoint http://<redacted>@c:4317/?<redacted> is on" in err
    assert "s3cretPW" not in err and "k3y" not in err
    assert run("--otlp-endpoint", "http://c:4317", "--otlp-protocol", "grpc") == ("grpc", "")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert run("--otlp-endpoint", "http://c:4317") == ("grpc", "")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    assert run() == ("http/protobuf", "")  # the traces-specific variable wins
    assert run("--otlp-protocol", "grpc") == ("grpc", "")  # the flag wins over both
