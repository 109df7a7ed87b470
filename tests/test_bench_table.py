"""``benchmarks/run.py`` reads ``bench_wrappers.py``'s table: the right rows as references.

Why: the wrappers' figure is a ratio to a bare SDK span of the same shape; taking the
"call inside a bare span" row instead (as a name match once did) made the create path
read "ok" at a fifth of its real ratio.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
assert _spec and _spec.loader
run = importlib.util.module_from_spec(_spec)
sys.modules["bench_run"] = run  # its dataclasses look their module up
_spec.loader.exec_module(run)

TABLE = """\
case                                                 median ns     mean ns   added ns  ratio
create path, uninstrumented                            100,000     101,000
create path, instrumented (own trace)                  220,000     221,000   +120,000   4.00
create path, instrumented (traceparent)                250,000     251,000   +150,000   5.00
create path, in a bare create-shaped span              160,000     161,000    +60,000   2.00
bare SDK span, no attributes                            20,000      21,000
bare SDK span, create-shaped (SERVER, 13 attrs)         30,000      31,000
bare SDK span, httpx-shaped (CLIENT, 7 attrs)           25,000      26,000
httpx PUT create_instance, uninstrumented              110,000     111,000
httpx PUT create_instance, named by purpose            160,000     161,000    +50,000   2.00
httpx PUT create_instance, in a bare httpx-shaped span 150,000     151,000    +40,000   1.60
"""


def _rows(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        m = run._WRAPPER_ROW.match(line)
        if m and not line.startswith("case"):
            out[m.group("name").strip()] = float(m.group("median").replace(",", ""))
    return out


def test_each_case_is_compared_with_its_own_bare_span_shape():
    notes: list[str] = []
    got = run.wrapper_comparisons(_rows(TABLE), notes)
    assert notes == []
    assert got == [
        ("launcher create, wrapped (own trace)", 220_000, 100_000, 30_000),
        ("launcher create, wrapped (traceparent)", 250_000, 100_000, 30_000),
        ("httpx PUT, named by purpose", 160_000, 110_000, 25_000),
    ]


def test_a_joined_create_is_compared_with_the_bare_span_under_its_traceparent():
    """bench_wrappers' REFERENCES: c_tp against b_cp; the other cases keep the root span,
    whichever order the two create-shaped rows come in."""
    lines = TABLE.splitlines()
    under = "bare SDK span, create-shaped, child of a traceparent      40,000      41,000"
    for at in (5, 7):  # before and after the root create-shaped row
        table = "\n".join([*lines[:at], under, *lines[at:]])
        notes: list[str] = []
        got = {g[0]: g[3] for g in run.wrapper_comparisons(_rows(table), notes)}
        assert notes == []
        assert got == {
            "launcher create, wrapped (own trace)": 30_000,
            "launcher create, wrapped (traceparent)": 40_000,
            "httpx PUT, named by purpose": 25_000,
        }


def test_a_missing_case_is_a_note_not_a_figure():
    rows = {k: v for k, v in _rows(TABLE).items() if "named by purpose" not in k}
    notes: list[str] = []
    got = run.wrapper_comparisons(rows, notes)
    assert [g[0] for g in got] == [
        "launcher create, wrapped (own trace)",
        "launcher create, wrapped (traceparent)",
    ]
    assert notes == ["bench_wrappers.py: no row for 'httpx PUT, named by purpose'"]


def _run(wall: float, rss: float, cpu: float | None = None) -> object:
    return run.Run(wall, rss, 0, "", wall if cpu is None else cpu)


def test_bridge_rows_compare_with_the_loop_and_grep_and_check_rss():
    rows = run.bridge_rows(
        "dense", 133_000_000, 8000, _run(1.0, 10), _run(0.25, 5), _run(15.0, 180, cpu=14.0), 20.0, 200.0
    )
    assert [r.what for r in rows] == [
        "dense: bridge wall, 133 MB dpc.log, 8000 act.",
        "dense: bridge wall vs grep -c",
        "dense: bridge CPU",
        "dense: bridge peak RSS",
    ]
    assert [r.ratio for r in rows] == [15.0, 60.0, 14.0, 180]
    assert [r.verdict for r in rows] == ["ok", "", "", "ok"]
    table = run.render(rows)
    assert "15.00x" in table and "<= 20.00x" in table and "180 MiB" in table and "<= 200 MiB" in table


def test_a_missed_target_reads_miss():
    rows = run.bridge_rows(
        "synthetic", 2_000_000, 20, _run(1.0, 10), _run(0.5, 5), _run(13.0, 250), 12.0, None
    )
    assert rows[0].verdict == "MISS"
    assert rows[3].target is None and rows[3].verdict == ""  # no RSS target on this workload
    assert "MISS" in run.render(rows)
