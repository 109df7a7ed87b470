"""Each percentile with the interval it could be in (issue 21: honest precision)."""

from __future__ import annotations

import csv
import io
import json

import msgspec
import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import A_MAX, A_MIN, HOT
from fma_otel.query.formats import secs_interval
from fma_otel.query.stats import summarize
from fma_otel.sinks.otlp_json import write_trace_line

from .gen import Act, spans_of


def _with_bounds(act: Act, lo: float, hi: float) -> list:
    """The actuation's spans, its T_actuation span saying its duration is in [lo, hi]."""
    out = []
    for s in spans_of(act):
        if s.attributes.get("fma.metric") == "T_actuation":
            s = msgspec.structs.replace(s, attributes={**s.attributes, A_MIN: lo, A_MAX: hi})
        out.append(s)
    return out


@pytest.fixture
def bounded_file(tmp_path) -> str:
    """Four hot actuations of 1..4 s, each T_actuation known only to [d - 1, d + 0.5],
    except the slowest, whose interval does not even hold its point (a biased timestamp)."""
    p = tmp_path / "t.jsonl"
    with p.open("w") as fh:
        for i in range(1, 4):
            write_trace_line(
                fh,
                _with_bounds(Act(f"h{i}", HOT, {"T_actuation": float(i), "T_wake": i / 2}), i - 1.0, i + 0.5),
            )
        write_trace_line(fh, _with_bounds(Act("h4", HOT, {"T_actuation": 4.0}), 3.0, 3.5))
    return str(p)


def test_summarize_bounds_each_percentile_by_the_bounds_percentiles():
    row = summarize(
        "T_actuation", HOT, [1.0, 2.0, 3.0, 4.0], 0, [(3.0, 3.5), (0.0, 1.5), (2.0, 3.5), (1.0, 2.5)]
    )
    assert (row.p50, row.p50_lo, row.p50_hi) == (2.0, 1.0, 2.5)
    assert (row.p99, row.p99_lo, row.p99_hi) == (4.0, 3.0, 3.5)
    exact = summarize("T_wake", HOT, [2.0, 1.0])
    assert exact.interval(50) == (1.0, 1.0) and exact.interval(90) == (2.0, 2.0)
    assert summarize("T_wake", HOT, []).interval(50) == (None, None)


def test_json_csv_and_table_carry_the_interval(bounded_file):
    doc = json.loads(CliRunner().invoke(main, ["slo", bounded_file, "-o", "json"]).stdout)
    (row,) = [r for r in doc["metrics"] if r["metric"] == "T_actuation"]
    assert (row["p50"], row["p50_lo"], row["p50_hi"]) == (2.0, 1.0, 2.5)
    assert (row["p99"], row["p99_lo"], row["p99_hi"]) == (4.0, 3.0, 3.5)
    (wake,) = [r for r in doc["metrics"] if r["metric"] == "T_wake"]
    assert wake["p50_lo"] == wake["p50"] == wake["p50_hi"]  # no bounds on the span: exact
    rows = list(
        csv.DictReader(io.StringIO(CliRunner().invoke(main, ["slo", bounded_file, "-o", "csv"]).stdout))
    )
    act = next(r for r in rows if r["metric"] == "T_actuation")
    assert (act["p50"], act["p50_lo"], act["p50_hi"]) == ("2", "1", "2.5")
    rate = next(r for r in rows if r["metric"] == "Hot_hit_rate")
    assert len(rate) == len(act) and rate["p50_lo"] == ""
    table = CliRunner().invoke(main, ["slo", bounded_file]).stdout
    line = next(x for x in table.splitlines() if x.startswith("T_actuation"))
    assert "2.00s [1.00, 2.50]" in line and "4.00s [3.00, 3.50]" in line


@pytest.mark.parametrize(
    ("v", "lo", "hi", "text"),
    [
        (50.154, 50.006, 50.018, "50.15s [50.00, 50.02]"),  # outwards: never narrower than the data
        (0.0, 0.0, 1.0, "0ms [0, 1000]"),
        (1.292, 1.292, 1.292, "1.29s [1.29, 1.30]"),
        (200.0, 150.0, 250.0, "3.3m [2.5, 4.2]"),
        (None, None, None, "-"),
        (2.0, None, None, "2.00s"),
    ],
)
def test_secs_interval_rounds_outwards_in_the_points_unit(v, lo, hi, text):
    assert secs_interval(v, lo, hi) == text


def test_a_verdict_says_when_the_threshold_lies_inside_the_interval(bounded_file, tmp_path):
    spec = tmp_path / "slo.yaml"
    spec.write_text(
        "- {metric: T_actuation, path: hot, p50: 2.2s}\n"  # 2.0 passes, but [1.0, 2.5] straddles it
        "- {metric: T_actuation, path: hot, p50: 3s}\n"  # passes whatever the truth
        "- {metric: T_actuation, path: hot, p99: 2.9s}\n"  # 4.0 fails; the truth, in [3.0, 3.5], too
        "- {metric: T_actuation, path: hot, max: 5s}\n"  # not a percentile: no interval
    )
    r = CliRunner().invoke(main, ["slo", bounded_file, "--slo", str(spec), "-o", "json"])
    assert r.exit_code == 1, r.output
    got = [(v["status"], v["value_lo"], v["value_hi"], v["certain"]) for v in json.loads(r.stdout)["slo"]]
    assert got == [("pass", 1.0, 2.5, False), ("pass", 1.0, 2.5, True), ("fail", 3.0, 3.5, True),
                   ("pass", None, None, None)]  # fmt: skip
    # wide enough for every column (the table drops columns to fit, whatever the runner's terminal)
    table = CliRunner().invoke(main, ["slo", bounded_file, "--slo", str(spec)], env={"COLUMNS": "220"}).stdout
    assert "2.00s [1.00, 2.50] (straddles)" in table and "could go either way" in table
    assert table.count("(straddles)") == 1
