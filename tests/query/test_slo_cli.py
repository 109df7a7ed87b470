"""SLO verdicts, exit codes (0 pass, 1 violation, 2 bad input) and the output formats."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.query import QueryError
from fma_otel.query.slo_spec import parse_spec

from . import fake_servers
from .conftest import mixed_acts


def run(*args: str):
    return CliRunner().invoke(main, ["slo", *args])


def spec(tmp_path, text: str) -> str:
    p = tmp_path / "slo.yaml"
    p.write_text(text)
    return str(p)


def test_pass_exit_0(mixed_file, tmp_path):
    s = spec(
        tmp_path, "- {metric: T_actuation, path: hot, p95: 10s, p50: 5000ms}\n- {hit_rate: hot, min: 0.5}\n"
    )
    r = run("--traces", mixed_file, "--slo", s, "--format", "json")
    assert r.exit_code == 0, r.output
    verdicts = json.loads(r.stdout)["slo"]
    assert [v["status"] for v in verdicts] == ["pass", "pass", "pass"]
    assert verdicts[0]["stat"] == "p50" and verdicts[0]["threshold"] == 5.0


def test_violation_exit_1(mixed_file, tmp_path):
    s = spec(tmp_path, "- {metric: T_actuation, path: hot, p95: 9.5s}\n- {hit_rate: warm, min: '50%'}\n")
    r = run("--traces", mixed_file, "--slo", s)
    assert r.exit_code == 1
    assert "FAIL" in r.stdout


def test_min_n_and_incomplete_and_no_data(mixed_file, tmp_path):
    s = spec(
        tmp_path,
        "- {metric: T_wake, path: warm, p99: 1s}\n"  # no data: not a violation
        "- {metric: T_actuation, path: hot, max_incomplete: 2}\n"
        "- {metric: T_actuation, p99: 2m, min_n: 18}\n",
    )
    r = run("--traces", mixed_file, "--slo", s, "--format", "json")
    assert r.exit_code == 0, r.output
    assert [v["status"] for v in json.loads(r.stdout)["slo"]] == ["no_data", "pass", "pass", "pass"]
    s2 = spec(tmp_path, "- {metric: T_wake, path: warm, p99: 1s, min_n: 1}\n")
    assert run("--traces", mixed_file, "--slo", s2).exit_code == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {metric: T_actuatoin, p95: 5s}\n", "item 1: unknown metric 'T_actuatoin'"),
        ("- {hit_rate: hot, min: 0.5}\n- {metric: T_actuation, p59: 5s}\n", "item 2: unknown key 'p59'"),
        ("- {metric: T_actuation, p95: fast}\n", "item 1: p95: not a duration"),
        ("- {metric: T_actuation, path: lukewarm, p95: 5s}\n", "item 1: unknown path 'lukewarm'"),
        ("- {hit_rate: hot, min: 1.5}\n", "item 1: min: ratio 1.5 is outside 0..1"),
        ("- {metric: T_actuation}\n", "item 1: no threshold"),
        ("metric: T_actuation\n", "must be a YAML list"),
        ("- [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_spec_exit_2_one_line(mixed_file, tmp_path, text, message):
    r = run("--traces", mixed_file, "--slo", spec(tmp_path, text))
    assert r.exit_code == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_parse_spec_durations():
    checks = parse_spec([{"metric": "T_wake", "path": "hot", "p99": "2m", "p50": "250ms", "max": 3}])
    assert {c.stat: c.threshold for c in checks} == {"p50": 0.25, "p99": 120.0, "max": 3.0}
    with pytest.raises(QueryError, match="item 1"):
        parse_spec([{"hit_rate": "tepid", "min": 0.1}])


@pytest.mark.parametrize(
    "args",
    [
        (),
        ("--traces", "/nonexistent/file.jsonl"),
        ("--traces", "x", "--jaeger", "http://localhost:1"),
        ("--jaeger", "localhost:16686"),
        ("--traces", "x", "--since", "yesterday"),
        ("--traces", "x", "--since", "1h", "--until", "2h"),
        ("--traces", "x", "--slo", "/nonexistent/slo.yaml"),
        ("--traces", "x", "--dpc-metrics", "/nonexistent/metrics.txt"),
    ],
)
def test_bad_arguments_exit_2_one_line(args):
    r = run(*args)
    assert r.exit_code == 2, r.output
    # one line of its own (CliRunner captures the whole process's stderr, where a test
    # server's thread left from another test may print: only fma-otel's lines are counted)
    own = [line for line in r.stderr.splitlines() if line.startswith("fma-otel")]
    assert len(own) == 1 and own[0].startswith("fma-otel slo: error: ")
    assert "Traceback" not in r.stderr.split(own[0])[1]


def test_not_otlp_file_exit_2(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"hello": 1}\n')
    r = run("--traces", str(p))
    assert r.exit_code == 2 and "not OTLP JSON lines" in r.stderr


def test_empty_file_empty_report_exit_0(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    r = run("--traces", str(p), "--format", "json")
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["metrics"] == [] and doc["hit_rates"]["requesters"] == 0 and doc["hit_rates"]["hot"] is None


def test_json_contract_keys(mixed_file):
    doc = json.loads(run("--traces", mixed_file, "--format", "json").stdout)
    assert set(doc) == {"window", "metrics", "hit_rates", "slo"}
    assert {"since", "until"} <= set(doc["window"])
    for row in doc["metrics"]:
        assert list(row) == [
            "metric",
            "path",
            "n",
            "p50",
            "p90",
            "p95",
            "p99",
            "min",
            "max",
            "mean",
            "incomplete",
            *(f"p{q}_{end}" for q in (50, 90, 95, 99) for end in ("lo", "hi")),
        ]
    assert set(doc["hit_rates"]) == {
        "hot",
        "warm",
        "cold_launcher",
        "requesters",
        "actuations",
        "per_actuation",
    }
    hot = next(r for r in doc["metrics"] if r["metric"] == "T_actuation" and r["path"] == "hot")
    assert (hot["n"], hot["p95"], hot["incomplete"]) == (10, 10.0, 2)


def test_csv_and_perfdata(mixed_file):
    rows = list(csv.DictReader(io.StringIO(run("--traces", mixed_file, "--format", "csv").stdout)))
    hot = next(r for r in rows if r["metric"] == "T_actuation" and r["path"] == "hot")
    assert (hot["n"], hot["p50"], hot["incomplete"]) == ("10", "5", "2")
    rate = next(r for r in rows if r["metric"] == "Hot_hit_rate")
    assert (rate["n"], rate["mean"]) == ("20", "0.6")
    pd = json.loads(run("--traces", mixed_file, "--format", "perfdata").stdout)
    assert pd["version"] == "v1"
    item = next(
        i for i in pd["dataItems"] if i["labels"] == {"Metric": "T_actuation", "Path": "hot", "Count": "10"}
    )
    assert item["unit"] == "s" and item["data"]["Perc50"] == 5 and item["data"]["Perc99"] == 10


def test_table_plain(mixed_file):
    r = run("--traces", mixed_file)
    assert r.exit_code == 0
    assert "T_actuation" in r.stdout and "Hot_hit_rate" in r.stdout and "60.0%" in r.stdout


def test_window_options(mixed_file):
    r = run(
        "--traces",
        mixed_file,
        "--since",
        "2026-05-28T20:27:10Z",
        "--until",
        "2026-05-28T20:27:50Z",
        "--format",
        "json",
    )
    doc = json.loads(r.stdout)
    assert doc["window"]["since"] == "2026-05-28T20:27:10Z"
    assert doc["hit_rates"]["requesters"] == 4  # h3..h6


def test_print_queries():
    r = run("--print-queries", "--since", "6h")
    assert r.exit_code == 0
    assert 'traces_span_metrics_duration_seconds_bucket{fma_metric="T_actuation"' in r.stdout
    assert "[6h]" in r.stdout and '{ name = "fma.request" }' in r.stdout


@pytest.mark.slow
def test_cli_against_tempo_and_jaeger():
    acts = mixed_acts()
    win = ("--since", "2026-05-28T00:00:00Z", "--until", "2026-05-29T00:00:00Z", "--format", "json")
    with fake_servers.tempo(acts) as t, fake_servers.jaeger(acts) as j:
        a = json.loads(run("--tempo", t.url, *win).stdout)
        b = json.loads(run("--jaeger", j.url, *win).stdout)
    assert a["metrics"] == b["metrics"] and a["hit_rates"] == b["hit_rates"]
    assert a["hit_rates"]["requesters"] == 20


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--slo", ""], "--slo is empty"),
        (["--dpc-metrics", " "], "--dpc-metrics is empty"),
        (["--traces", ""], "the trace file is empty"),
    ],
)
def test_an_empty_value_is_a_usage_error_not_an_absent_one(tmp_path, args, said) -> None:
    """``--slo "$SPEC"`` with SPEC unset skipped the SLO gate and exited 0; an empty
    ``--dpc-metrics`` was dropped unsaid."""
    from click.testing import CliRunner

    from fma_otel.cli import main

    traces = tmp_path / "t.jsonl"
    traces.write_text("")
    argv = ["slo", *(args if args[0] == "--traces" else [str(traces), *args])]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2, r.output
    assert said in r.output
