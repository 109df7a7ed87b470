"""The bridge from the console entry point, as a process: its output whole on stdout, its
summary and ``--strict`` exit code, the same as inside click's runner.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main

CLI = [sys.executable, "-c", "from fma_otel.cli import run; run()"]


@pytest.mark.slow
def test_bridge_to_stdout_is_complete_and_equal_to_the_file(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    ref = subprocess.run([*CLI, "bridge", "-q", "--out", str(out)], capture_output=True, timeout=60)
    assert ref.returncode == 0, ref.stderr
    piped = subprocess.run([*CLI, "bridge", "-q", "--out", "-"], capture_output=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()
    assert [json.loads(line)["resourceSpans"] for line in piped.stdout.splitlines()]  # whole lines


@pytest.mark.slow
def test_bridge_summary_and_strict_exit_code_from_the_console_entry_point(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    with (cap / "dpc.log").open("ab") as fh:
        fh.write(b'I0629 14:40:00.000000       1 x.go:1] "Bound server-providing Pod" serverUID="u\n')
    proc = subprocess.run(
        [*CLI, "bridge", str(cap), "--strict", "--out", str(tmp_path / "t.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "actuations: 5" in proc.stderr  # no --baseline-selector: the sample's baseline is not one
    assert f"{cap / 'dpc.log'}:210: skipped" in proc.stderr
    assert proc.stderr.rstrip().endswith("fma-otel bridge: --strict: 1 line(s) skipped")
    # the same run inside click's runner exits the ordinary way, with the same code
    res = CliRunner().invoke(main, ["bridge", str(cap), "--strict", "--out", str(tmp_path / "u.jsonl")])
    assert res.exit_code == 1
    assert (tmp_path / "u.jsonl").read_bytes() == (tmp_path / "t.jsonl").read_bytes()
