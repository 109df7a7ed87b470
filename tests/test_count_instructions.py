"""``benchmarks/count_instructions.py``: callgrind's total read right, ratios from the right rows.

Why: the figures in ``docs/wrappers.md`` are these ratios; a wrong reference row (the call
inside a bare span instead of the bare span itself) once made a miss read "ok".  No
valgrind here: only the parsing and the arithmetic.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "count_instructions", ROOT / "benchmarks" / "count_instructions.py"
)
assert _spec and _spec.loader
ci = importlib.util.module_from_spec(_spec)
sys.modules["count_instructions"] = ci  # its dataclasses look their module up
_spec.loader.exec_module(ci)

STDERR = """\
==4242== Callgrind, a call-graph generating cache profiler
==4242== Command: /usr/bin/python3.11 bench_wrappers.py --case h_in --n 300 --no-timing
==4242==
==4242== Events    : Ir
==4242== Collected : 1234567890
==4242==
==4242== I   refs:      1,234,567,890
"""


def test_parse_collected_reads_the_total() -> None:
    assert ci.parse_collected(STDERR) == 1_234_567_890


def test_parse_collected_refuses_output_without_a_total() -> None:
    with pytest.raises(ValueError, match="found 0"):
        ci.parse_collected("==1== Callgrind\nTraceback (most recent call last):\n")


def test_per_call_is_the_difference_over_the_extra_calls() -> None:
    assert ci.per_call(1_000_000, 3_000_000, 100, 300) == 10_000
    with pytest.raises(ValueError):
        ci.per_call(1, 2, 300, 300)


COUNTS = {
    "c_un": 500_000.0,
    "c_own": 1_100_000.0,
    "c_tp": 1_200_000.0,
    "c_bare": 700_000.0,
    "b0": 100_000.0,
    "b_c": 200_000.0,
    "b_cp": 250_000.0,
    "b_h": 180_000.0,
    "h_un": 600_000.0,
    "h_in": 860_000.0,
    "h_bare": 780_000.0,
}


def test_each_case_is_compared_with_its_own_references() -> None:
    rows = {r.key: r for r in ci.table_rows(COUNTS)}
    assert list(rows) == list(ci.LABELS)  # the table's order
    own = rows["c_own"]
    assert own.added == 600_000
    assert own.vs_bare_span == 3.0  # / the create-shaped bare span, not the call in one
    assert own.vs_in_bare_total == 1_100_000 / 700_000
    assert own.vs_in_bare_added == 3.0
    assert own.verdict == "MISS"
    tp = rows["c_tp"]
    assert tp.added == 700_000
    assert tp.vs_bare_span == 700_000 / 250_000  # / the bare span under the same traceparent
    h = rows["h_in"]
    assert h.added == 260_000
    assert h.vs_bare_span == 260_000 / 180_000  # / the httpx-shaped bare span
    assert h.vs_in_bare_added == 260_000 / 180_000
    assert h.verdict == "ok"
    floor = rows["h_bare"]
    assert floor.vs_bare_span == 1.0 and floor.vs_in_bare_total is None
    assert floor.verdict == ""  # a floor, not a wrapper
    for key in ("c_un", "b0", "b_c", "b_cp", "b_h", "h_un"):
        assert rows[key].added is None and rows[key].verdict == ""


def test_a_reference_not_counted_leaves_its_ratio_empty() -> None:
    counts = {k: v for k, v in COUNTS.items() if k in ("h_un", "h_in")}
    (un, h) = ci.table_rows(counts)
    assert un.key == "h_un"
    assert h.added == 260_000
    assert h.vs_bare_span is None and h.vs_in_bare_total is None and h.verdict == ""
    text = ci.format_table([un, h])
    assert "+260,000" in text.splitlines()[2]


def _callgrind_file(path: Path, total: int | None, word: str = "summary") -> None:
    body = "version: 1\ncreator: callgrind-3.19.0\npid: 4242\nthread: 1\nevents: Ir\n"
    if total is not None:
        body += f"{word}: {total}\n"
    path.write_text(body + "\nfl=(1) ???\nfn=(1) main\n0 5\n")


def test_parse_thread_files_reads_each_threads_total(tmp_path: Path) -> None:
    _callgrind_file(tmp_path / "cg-01", 2_000_000)
    _callgrind_file(tmp_path / "cg-02", 30_000, word="totals")
    _callgrind_file(tmp_path / "cg-03", 500)
    _callgrind_file(tmp_path / "cgx-01", 7)  # another stem: not this run's
    assert ci.parse_thread_files(tmp_path, "cg") == {1: 2_000_000, 2: 30_000, 3: 500}


def test_parse_thread_files_refuses_a_missing_main_thread_or_total(tmp_path: Path) -> None:
    _callgrind_file(tmp_path / "cg-02", 30_000)
    with pytest.raises(ValueError, match="main thread"):
        ci.parse_thread_files(tmp_path, "cg")
    _callgrind_file(tmp_path / "cg-01", None)
    with pytest.raises(ValueError, match="cg-01: no 'summary:'"):
        ci.parse_thread_files(tmp_path, "cg")


def test_the_references_are_bench_wrappers_own() -> None:
    for key, (base, bare, in_bare) in ci.REFERENCES.items():
        assert (base, bare) == ci.bench_wrappers.REFERENCES[key]
        assert in_bare is None or in_bare in ci.LABELS


def test_no_valgrind_is_a_clear_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ci.shutil, "which", lambda name: None)
    assert ci.main(["--cases", "h_in"]) == 2
    assert "valgrind is not installed" in capsys.readouterr().err
