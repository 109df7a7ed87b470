"""``slo``'s conventions: positional FILE, stdin, filters, fitting tables, hit rates per
requester and per actuation, ``-o``, ``--out`` and the llm-d-benchmark block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import COLD_LAUNCHER, METRICS, WARM

from .conftest import mixed_acts
from .gen import Act, hot, write


def run(*args: str, **kw):
    return CliRunner().invoke(main, ["slo", *args], **kw)


def test_positional_file_alias_and_stdin(mixed_file):
    a = run(mixed_file, "-o", "json")
    b = run("--traces", mixed_file, "--output", "json")
    c = run("-", "--format", "json", input=Path(mixed_file).read_text())
    assert a.exit_code == b.exit_code == c.exit_code == 0, (a.output, c.output)
    ja, jb, jc = (json.loads(x.stdout) for x in (a, b, c))
    assert ja["metrics"] == jb["metrics"] == jc["metrics"] and ja["metrics"]
    assert jc["window"]["source"] == "file:-"
    r = run(mixed_file, "--traces", "other.jsonl")
    assert r.exit_code == 2 and "give the trace file once" in r.stderr


def test_metric_and_path_filters(mixed_file):
    doc = json.loads(run(mixed_file, "--metric", "T_actuation,t_wake", "--path", "hot", "-o", "json").stdout)
    assert {(m["metric"], m["path"]) for m in doc["metrics"]} == {("T_actuation", "hot"), ("T_wake", "hot")}
    doc = json.loads(run(mixed_file, "--path", "warm", "--path", "cold_launcher", "-o", "json").stdout)
    assert {m["path"] for m in doc["metrics"]} == {"warm", "cold_launcher"}


@pytest.mark.parametrize(
    ("args", "kind", "valid"),
    [
        (["--metric", "T_actuatoin"], "metric", ", ".join(METRICS)),
        (["--path", "lukewarm"], "path", "cold_launcher"),
    ],
)
def test_unknown_filter_is_exit_2_listing_valid_names(mixed_file, args, kind, valid):
    r = run(mixed_file, *args)
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fma-otel slo: error: --{kind} ")
    assert "valid: " in lines[0] and valid in lines[0]


@pytest.mark.parametrize("width", [80, 100])
def test_table_fits_and_labels_stay_apart(tmp_path, width, monkeypatch):
    every = {m: 1.0 + i for i, m in enumerate(METRICS)}
    f = write(str(tmp_path / "t.jsonl"), [Act(f"c{i}", COLD_LAUNCHER, every) for i in range(3)])
    monkeypatch.setenv("COLUMNS", str(width))
    r = run(f)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(x) for x in lines) <= width
    firsts = [x.split()[0] for x in lines if x.startswith("T_")]
    assert sorted(firsts) == sorted(METRICS)  # every metric, each whole and distinct
    assert "p50" in lines[1] and "p99" in lines[1] and "max" in lines[1]


def test_hit_rates_per_requester_and_per_actuation(tmp_path):
    # h1 hot, then bound again (a second actuation, also hot); w1 warm; c1 cold
    acts = [hot("h1", 2.0), hot("h1", 3.0, n=2, start_s=100.0), Act("w1", WARM, {"T_actuation": 20.0}),
            Act("c1", COLD_LAUNCHER, {"T_actuation": 60.0})]  # fmt: skip
    f = write(str(tmp_path / "t.jsonl"), acts)
    h = json.loads(run(f, "-o", "json").stdout)["hit_rates"]
    assert (h["requesters"], h["hot"], h["warm"]) == (3, pytest.approx(1 / 3), pytest.approx(1 / 3))
    assert h["actuations"] == 4
    assert h["per_actuation"] == {"hot": 0.5, "warm": 0.25, "cold_launcher": 0.25}
    table = run(f).stdout
    assert "per requester Pod (3, each once) and per actuation (4)" in table
    assert "33.3%" in table and "50.0%" in table


def test_out_file_and_missing_folder(mixed_file, tmp_path):
    out = tmp_path / "r.json"
    r = run(mixed_file, "-o", "json", "--out", str(out))
    assert r.exit_code == 0 and r.stdout == "" and json.loads(out.read_text())["metrics"]
    r = run(mixed_file, "--out", str(tmp_path / "nope" / "r.json"))
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"fma-otel slo: error: Invalid value for --out: {tmp_path / 'nope' / 'r.json'}: "
        f"folder {tmp_path / 'nope'} does not exist"
    ]


def test_llm_d_benchmark_block(tmp_path):
    acts = [Act("c1", COLD_LAUNCHER, {"T_actuation": 60.0, "T_cold_launcher": 55.0, "T_instance_create": 20.0}),
            hot("h1", 4.0, start_s=100.0), Act("w1", WARM, {"T_actuation": 20.0, "T_instance_create": 18.0},
                                                 start_s=200.0), *[a for a in mixed_acts() if a.path == "cold_no_fma"]]  # fmt: skip
    f = write(str(tmp_path / "t.jsonl"), acts)
    r = run(f, "-o", "llm-d-benchmark")
    assert r.exit_code == 0, r.output
    (fma,) = json.loads(r.stdout)["extra_metrics"]
    assert fma["name"] == "fma" and "t_wake" in fma["fma_otel_definitions"]
    its = fma["iterations"]
    assert [i["iteration"] for i in its] == [1, 2, 3]  # the baseline is not an FMA actuation
    conds = [i["launcher_infos"][0]["actuation_condition"] for i in its]
    assert conds == ["T_cold_launcher", "T_hot", "T_warm"]
    assert [(i["hot_hit_rate"], i["warm_hit_rate"], i["cold_launcher_hit_rate"]) for i in its] == [
        (0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)]  # fmt: skip
    cold, hot_, warm = (i["launcher_infos"][0] for i in its)
    assert (cold["t_cold_launcher"], cold["t_instance_create"], cold["t_wake"]) == (55.0, 20.0, None)
    assert (hot_["t_wake"], hot_["t_instance_create"]) == (2.0, None)
    assert warm["t_instance_create"] == 18.0 and warm["timing_source"] == "fma-otel"
    req = hot_["requester_info"]
    assert req["name"] == "req-h1" and req["ready_timestamp"] - req["creation_timestamp"] == pytest.approx(
        7.0
    )
    r = run("--jaeger", "http://x", "-o", "llm-d-benchmark")
    assert r.exit_code == 2 and "reads a trace FILE" in r.stderr
