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
from fma_otel.query.readers import read_spans

LAUNCHER_LOG = "launcher-launcher-example-4lgw5.log"


def _raw_times(path: Path) -> list[int]:
    """Every ``*TimeUnixNano`` value in an OTLP JSON lines file, read raw (``read_spans``
    would not show a value it cannot take)."""
    import re

    text = path.read_text()
    return [int(v) for v in re.findall(r'TimeUnixNano":"?(-?[0-9]+)', text)]


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
    assert list(read_spans(str(out)))  # the rest is still written
    times = _raw_times(out)
    assert times and all(timeutil.MIN_NS <= t < timeutil.END_NS for t in times)


def test_the_dpc_skip_says_why(tmp_path: Path, clean_otlp_env) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    _http_start_1969(cap)
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])
    assert "1969-06-29T14:30:43" in r.stderr and "outside the accepted window" in r.stderr


@pytest.mark.parametrize("year", ["0001", "2600"])
def test_a_pod_time_out_of_the_window_is_a_counted_skip(tmp_path: Path, clean_otlp_env, year: str) -> None:
    """Requesters' Ready times in 0001 or 2600: before the window, 2600 gave span times past
    2**64 ns; then they read as absent, quietly (the actuations came out incomplete with
    "skipped 0").  Now each such Pod state is a counted skip naming pods.json:line, and
    ``--strict`` fails."""
    import json

    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    lines = (cap / "pods.json").read_text().splitlines()
    edited: list[int] = []
    for i, line in enumerate(lines):
        doc = json.loads(line)
        obj = doc.get("object", doc)
        for c in (obj.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Ready" and c.get("status") == "True" and "my-request" in line:
                c["lastTransitionTime"] = year + c["lastTransitionTime"][4:]
                edited.append(i + 1)
        lines[i] = json.dumps(doc)
    (cap / "pods.json").write_text("\n".join(lines) + "\n")
    assert edited
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out), "--strict"], catch_exceptions=False)
    assert r.exit_code == 1, r.stderr
    assert f"{cap / 'pods.json'}:{edited[0]}: skipped: condition Ready lastTransitionTime:" in r.stderr
    assert f"skipped {len(edited)}" in r.stderr
    assert list(read_spans(str(out)))  # the other Pod states still make traces
    times = _raw_times(out)
    assert times and all(timeutil.MIN_NS <= t < timeutil.END_NS for t in times), max(times)
