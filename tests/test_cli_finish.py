"""``_common.finish``: the bridge ends its own process at once, and loses nothing doing so.

From the console entry point the bridge leaves through ``os._exit`` so that the millions of
objects of a big run are not freed one by one; these tests hold that the exit handlers
still run, that the standard streams are flushed whole, that the exit code is kept, and
that inside a host (click's runner, an embedding program) it is a plain ``sys.exit``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.commands import _common

CLI = [sys.executable, "-c", "from fma_otel.cli import run; run()"]


def test_in_a_host_finish_is_sys_exit() -> None:
    assert _common.owns_process is False
    with pytest.raises(SystemExit) as exc:
        _common.finish(3)
    assert exc.value.code == 3


def _owned(body: str) -> subprocess.CompletedProcess[str]:
    """``body`` run in a fresh interpreter that owns its process, as under ``cli.run``."""
    script = "import atexit, sys, threading, time\nfrom fma_otel.commands import _common\n"
    script += "_common.owns_process = True\n" + body
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


def test_owned_process_runs_exit_handlers_and_flushes_before_it_ends() -> None:
    proc = _owned(
        "atexit.register(lambda: sys.stdout.write('handler ran\\n'))\n"
        "sys.stdout.write('x' * 100000)\n"
        "sys.stderr.write('to stderr')\n"
        "_common.finish(4)\n"
        "print('never reached')\n"
    )
    assert proc.returncode == 4
    assert proc.stdout == "x" * 100000 + "handler ran\n"
    assert proc.stderr == "to stderr"


def test_owned_process_with_another_thread_exits_the_ordinary_way() -> None:
    """The interpreter's own exit waits for a (non-daemon) thread; ``os._exit`` would cut
    it off, so ``finish`` does not take that way while one runs."""
    proc = _owned(
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    sys.stdout.write('thread done\\n')\n"
        "threading.Thread(target=late).start()\n"
        "_common.finish(5)\n"
    )
    assert proc.returncode == 5
    assert proc.stdout == "thread done\n"


def test_bridge_to_stdout_is_complete_and_equal_to_the_file(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    ref = subprocess.run([*CLI, "bridge", "-q", "--out", str(out)], capture_output=True, timeout=60)
    assert ref.returncode == 0, ref.stderr
    piped = subprocess.run([*CLI, "bridge", "-q", "--out", "-"], capture_output=True, timeout=60)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()
    assert [json.loads(line)["resourceSpans"] for line in piped.stdout.splitlines()]  # whole lines


def test_bridge_summary_and_strict_exit_code_survive_the_fast_exit(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    cap.mkdir()
    for f in sample_dir().iterdir():
        (cap / f.name).write_bytes(f.read_bytes())
    with (cap / "dpc.log").open("ab") as fh:
        fh.write(b"not a klog line\n")
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
