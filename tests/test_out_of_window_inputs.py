"""Out-of-window instants in the inputs (issue 23): a counted skip naming file:line, never
an OTLP time below 0 or past 2**64 ns in the output, and ``--strict`` fails.

Each case edits one line of the embedded sample capture; on the code before the window
(timeutil's MIN_NS..END_NS) each of these read as understood and exited 0.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import timeutil
from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.sinks.otlp_json import read_spans

LAUNCHER_LOG = "launcher-launcher-example-4lgw5.log"


def _edit_line(path: Path, pick: Callable[[str], bool], edit: Callable[[str], str]) -> int:
    """Apply ``edit`` to the first line ``pick`` accepts; its 1-based number."""
    lines = path.read_text().split("\n")
    i = next(i for i, line in enumerate(lines) if pick(line))
    lines[i] = edit(lines[i])
    path.write_text("\n".join(lines))
    return i + 1


def _http_start_1969(cap: Path) -> tuple[str, int]:
    n = _edit_line(
        cap / "dpc.log",
        lambda s: 'purpose="create_instance"' in s,
        lambda s: s.replace('httpCallStartTime="2026-', 'httpCallStartTime="1969-'),
    )
    return "dpc.log", n


def _prefix(year: str) -> Callable[[Path], tuple[str, int]]:
    def edit(cap: Path) -> tuple[str, int]:
        path = cap / "dpc.log"
        lines = path.read_text().split("\n")
        # as `kubectl logs --timestamps` writes it, every line prefixed; one prefix corrupted
        out = [f"2026-06-29T14:59:{i % 60:02d}.5Z {s}" if s else s for i, s in enumerate(lines)]
        i = next(i for i, s in enumerate(lines) if 'purpose="create_instance"' in s)
        out[i] = f"{year}-06-29T14:30:43.5Z {lines[i]}"
        path.write_text("\n".join(out))
        return "dpc.log", i + 1

    return edit


def _launcher_asctime(year: str) -> Callable[[Path], tuple[str, int]]:
    def edit(cap: Path) -> tuple[str, int]:
        n = _edit_line(
            cap / LAUNCHER_LOG, lambda s: "Accepted request to create" in s, lambda s: year + s[4:]
        )
        return LAUNCHER_LOG, n

    return edit


@pytest.mark.parametrize(
    "edit",
    [
        _http_start_1969,
        _prefix("9999"),
        _prefix("1969"),
        _launcher_asctime("1969"),
        _launcher_asctime("2600"),
    ],
    ids=["httpCallStartTime-1969", "prefix-9999", "prefix-1969", "asctime-1969", "asctime-2600"],
)
def test_out_of_window_line_is_a_counted_skip(
    tmp_path: Path, clean_otlp_env, edit: Callable[[Path], tuple[str, int]]
) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    (cap / "truth.json").unlink(missing_ok=True)
    name, line_no = edit(cap)
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out), "--strict"], catch_exceptions=False)
    assert r.exit_code == 1, r.stderr
    assert f"{cap / name}:{line_no}: skipped:" in r.stderr
    assert f"{name}: read" in r.stderr and "skipped 1" in r.stderr
    assert "--strict: 1 line(s) skipped" in r.stderr
    spans = list(read_spans(str(out)))
    assert spans  # the rest is still written
    for s in spans:
        assert timeutil.in_window(s.start_ns) and timeutil.in_window(s.end_ns), s


def test_the_dpc_skip_says_why(tmp_path: Path, clean_otlp_env) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    _http_start_1969(cap)
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])
    assert "1969-06-29T14:30:43" in r.stderr and "outside the accepted window" in r.stderr
