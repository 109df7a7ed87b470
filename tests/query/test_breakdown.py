"""Where the time goes (issue 22): leaf spans under fma.actuation, their union, and the
uncovered rest per parent, generic over span names (hand-made trees with leaves the
bridge does not make yet: vLLM phases, image pulls)."""

from __future__ import annotations

import csv
import io
import json

import msgspec
import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import COLD_LAUNCHER, COLD_NO_FMA, HOT, S
from fma_otel.query.breakdown import LeanSpan, split_actuation, summarize_paths
from fma_otel.sinks.otlp_json import export_request, write_trace_line
from fma_otel.span_records import SpanRecord

from . import fake_servers
from .gen import hot

T0 = 1_780_000_000 * S


def _lean(sid: str, parent: str | None, name: str, a: float, b: float) -> LeanSpan:
    return LeanSpan(sid, parent, name, T0 + round(a * S), T0 + round(b * S))


def cold_tree(vllm_gap: float = 0.0, pull: float = 8.0) -> list[LeanSpan]:
    """A cold_launcher actuation of 60 s whose vLLM and launcher startup have phases.

    0-1 bind; 1-40 cold_start { 1-2 schedule; 2-30 startup { 2-2+pull image pull,
    10-28 container start }; 30-31 react; 31-58 instance.ready { 31-58 vllm.ready
    { 31-40 weights, 40+gap-57 graphs }, 57-58 relay } }; 58-60 probe.
    """
    return [
        _lean("r", None, "fma.request", -5, 60),
        _lean("a", "r", "fma.actuation", 0, 60),
        _lean("b", "a", "fma.dpc.bind", 0, 1),
        _lean("c", "a", "fma.launcher.cold_start", 1, 58),
        _lean("d", "c", "fma.launcher.schedule", 1, 2),
        _lean("e", "c", "fma.launcher.startup", 2, 30),
        _lean("e1", "e", "k8s.image.pull", 2, 2 + pull),
        _lean("e2", "e", "k8s.container.start", 10, 28),
        _lean("f", "c", "fma.dpc.react", 30, 31),
        _lean("g", "c", "fma.instance.ready", 31, 58),
        _lean("h", "g", "fma.vllm.ready", 31, 57),
        _lean("h1", "h", "vllm.weights.load", 31, 40),
        _lean("h2", "h", "vllm.cuda_graphs", 40 + vllm_gap, 57),
        _lean("i", "g", "fma.readiness.relay", 57, 58),
        _lean("i2", "g", "fma.instance.create", 31.5, 58),  # overlaps vllm.ready and relay
        _lean("j", "a", "fma.kubelet.probe", 58, 60),
    ]


def test_a_per_call_span_does_not_turn_its_parent_into_a_non_leaf():
    """The bind's API write (a few ms at the end of fma.dpc.bind) times that call; the rest
    of the bind's wait stays the bind's, not "uncovered inside fma.dpc.bind"."""
    tree = cold_tree()
    tree.insert(3, _lean("b1", "b", "fma.dpc.bind_pod", 0.99, 1.0))
    sp = split_actuation(tree)
    assert sp is not None
    assert "fma.dpc.bind" in sp.leaves and "fma.dpc.bind_pod" in sp.leaves
    assert "fma.dpc.bind" not in sp.uncovered
    assert sp.exclusive["fma.dpc.bind_pod"] == pytest.approx(0.01)
    assert sp.exclusive["fma.dpc.bind"] == pytest.approx(0.99)
    # a child that is not per-call still makes its parent a non-leaf
    tree.insert(4, _lean("b2", "b", "k8s.other", 0.0, 0.5))
    sp = split_actuation(tree)
    assert sp is not None and "fma.dpc.bind" not in sp.leaves
    assert sp.uncovered["fma.dpc.bind"] == pytest.approx(0.49)


def test_split_names_leaves_counts_overlaps_once_and_charges_gaps_to_the_deepest_parent():
    sp = split_actuation(cold_tree(vllm_gap=3.0, pull=6.0))
    assert sp is not None and sp.total_s == 60.0
    # leaves: no children; parents (startup, vllm.ready, ...) are not leaves
    assert set(sp.leaves) == {
        "fma.dpc.bind", "fma.launcher.schedule", "k8s.image.pull", "k8s.container.start", "fma.dpc.react",
        "vllm.weights.load", "vllm.cuda_graphs", "fma.readiness.relay", "fma.instance.create",
        "fma.kubelet.probe",
    }  # fmt: skip
    assert sp.leaves["vllm.cuda_graphs"] == 14.0 and sp.leaves["fma.instance.create"] == 26.5
    # 8-10 s and 28-30 s inside launcher.startup; 40-43 s inside vllm.ready is covered
    # by instance.create (a leaf), so it is not uncovered
    assert sp.uncovered == {"fma.launcher.startup": pytest.approx(4.0)}
    assert sp.covered_s == pytest.approx(56.0)
    # the shortest leaf takes each instant: instance.create keeps only 40-43 s
    assert sp.exclusive["fma.instance.create"] == pytest.approx(3.0)
    assert sp.exclusive["vllm.cuda_graphs"] == pytest.approx(14.0)
    assert sum(sp.exclusive.values()) + sum(sp.uncovered.values()) == pytest.approx(sp.total_s)


def test_a_gap_no_leaf_covers_is_charged_to_its_parent_and_to_the_actuation():
    tree = [t for t in cold_tree(vllm_gap=3.0) if t.name != "fma.instance.create"]
    tree.append(_lean("x", "c", "fma.extra.parent", 58.5, 59))  # a parent with no leaf
    tree.append(_lean("y", "x", "z.leaf", 59.5, 70))  # runs past R.ready: clipped
    sp = split_actuation(tree)
    assert sp is not None
    assert sp.uncovered["fma.vllm.ready"] == pytest.approx(3.0)
    assert sp.leaves["z.leaf"] == 10.5  # its own duration, unclipped
    assert sum(sp.exclusive.values()) + sum(sp.uncovered.values()) == pytest.approx(60.0)


def test_no_actuation_cycles_and_duplicates_never_loop():
    assert split_actuation([_lean("r", None, "fma.request", 0, 1)]) is None
    loop = [
        _lean("a", "b", "fma.actuation", 0, 10),
        _lean("b", "a", "x.leaf", 0, 4),
        _lean("c", "c", "self", 0, 9),
    ]
    sp = split_actuation(loop)
    assert sp is not None and sp.leaves == {}  # x.leaf has a child (the actuation): a parent
    assert sp.uncovered == {"x.leaf": pytest.approx(4.0), "fma.actuation": pytest.approx(6.0)}


def test_per_path_percentiles_shares_and_baseline_beside():
    splits = []
    for i in range(1, 11):  # vLLM weights load 1..10 s
        tree = [t for t in cold_tree() if t.name not in ("vllm.weights.load", "fma.instance.create")]
        tree.append(_lean("h1", "h", "vllm.weights.load", 31, 31 + i))
        sp = split_actuation(tree)
        assert sp is not None
        splits.append((COLD_LAUNCHER, sp))
    base = split_actuation(
        [_lean("a", None, "fma.actuation", 0, 70), _lean("v", "a", "vllm.weights.load", 1, 61)]
    )
    assert base is not None
    bds = summarize_paths([(COLD_NO_FMA, base), *splits])
    assert [b.path for b in bds] == [COLD_LAUNCHER, COLD_NO_FMA]  # FMA paths first
    cold, baseline = bds
    weights = next(r for r in cold.leaves if r.name == "vllm.weights.load")
    assert (weights.seen, weights.p50, weights.p90, weights.p99) == (10, 5.0, 9.0, 10.0)
    assert [r.name for r in cold.leaves][:2] == ["fma.dpc.bind", "fma.launcher.schedule"]  # by start
    assert sum(
        share for _n, share in ((r.label, r.share) for r in (*cold.leaves, *cold.uncovered))
    ) == pytest.approx(1.0)
    assert sum(r.part_s for r in (*cold.leaves, *cold.uncovered)) == pytest.approx(cold.total.mean)
    # the worst: weights 1 s (31-32), so 32-40 in vllm.ready and 28-30 in startup uncovered
    assert cold.min_covered_share == pytest.approx(50 / 60)
    assert {r.name: r.p99 for r in cold.uncovered} == {"fma.launcher.startup": 2.0, "fma.vllm.ready": 8.0}
    assert baseline.baseline and baseline.total.p50 == 70.0
    assert [(r.label, r.p50) for r in baseline.uncovered] == [("uncovered in fma.actuation", 10.0)]
    assert baseline.covered.share == pytest.approx(60 / 70)


def _span(
    tid: str, sid: str, parent: str | None, name: str, a: float, b: float, **attrs: object
) -> SpanRecord:
    return SpanRecord(tid, sid * 16, parent and parent * 16, name, "INTERNAL", T0 + round(a * S),
                      T0 + round(b * S), "kubernetes", {"fma.path": attrs.pop("path", HOT), **attrs})  # fmt: skip


def _hot_trace(tid: str, wake: float, complete: bool = True, phases: bool = True) -> list[SpanRecord]:
    out = [
        _span(tid, "1", None, "fma.request", -2, 4 + wake, **{"fma.complete": complete}),
        _span(tid, "2", "1", "fma.actuation", 0, 4 + wake, **{"fma.metric": "T_actuation"}),
        _span(tid, "3", "2", "fma.dpc.bind", 0, 1, **{"fma.duration.min_s": 0.5, "fma.duration.max_s": 1.0}),
        _span(tid, "4", "2", "fma.vllm.wake", 1, 1 + wake, **{"fma.metric": "T_wake"}),
        _span(tid, "6", "2", "fma.kubelet.probe", 2 + wake, 4 + wake),
    ]
    if phases:
        out.append(_span(tid, "5", "4", "vllm.wake_up", 1.5, 1 + wake))
    return out


@pytest.fixture
def hot_file(tmp_path) -> str:
    p = tmp_path / "t.jsonl"
    with p.open("w") as fh:
        for i in range(1, 5):
            write_trace_line(fh, _hot_trace(f"{i:032x}", float(i)))
        write_trace_line(fh, _hot_trace("f" * 32, 99.0, complete=False))  # not a duration
    return str(p)


def test_cli_breakdown_table_json_csv(hot_file):
    r = CliRunner().invoke(main, ["slo", hot_file, "--breakdown"])
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert "Where the time goes" in text
    lines = {
        ln.split()[0] if not ln.startswith(" ") else ln.split()[0]: ln
        for ln in text.splitlines()
        if ln.strip()
    }
    assert "vllm.wake_up" in lines and "fma.vllm.wake" not in lines  # a parent now: not a leaf
    assert "uncovered in fma.vllm.wake" in text and "uncovered in fma.actuation" in text
    assert "4/4" in lines["vllm.wake_up"]
    assert "1.00s [0.50, 1.00]" in lines["fma.dpc.bind"]
    covered = next(ln for ln in text.splitlines() if "leaves together" in ln)
    assert "leaves together, min 70.0% in 00000000" in covered  # the worst trace named
    assert covered.rstrip().endswith("76.9%")  # 20 of 26 s on average
    doc = json.loads(CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "-o", "json"]).stdout)
    (bd,) = doc["breakdown"]
    assert (bd["path"], bd["n"]) == (HOT, 4)  # the unfinished one left out
    rows = {(r["kind"], r["name"]): r for r in bd["rows"]}
    assert rows[("total", "fma.actuation")]["p50"] == 6.0  # 5, 6, 7, 8 s
    wake_up = rows[("leaf", "vllm.wake_up")]
    assert (wake_up["p50"], wake_up["p90"], wake_up["p99"]) == (1.5, 3.5, 3.5)
    assert rows[("uncovered", "fma.vllm.wake")]["p50"] == 0.5  # 1-1.5 s of each wake call
    bind = rows[("leaf", "fma.dpc.bind")]  # its bounds: the interval each percentile can be in
    assert (bind["p50"], bind["p50_lo"], bind["p50_hi"], bind["p99_lo"]) == (1.0, 0.5, 1.0, 0.5)
    assert (wake_up["p50_lo"], wake_up["p50_hi"]) == (1.5, 1.5)  # no bounds: exact
    assert rows[("uncovered", "fma.vllm.wake")]["p50_lo"] is None
    assert rows[("uncovered", "fma.actuation")]["p99"] == 1.0  # wake end to probe start
    assert bd["min_covered_share"] == pytest.approx(3.5 / 5)  # wake 1 s: 1 + 0.5 + 2 of 5 s
    assert bd["min_covered_trace"] == f"{1:032x}"  # the one to look at
    assert "breakdown" not in json.loads(CliRunner().invoke(main, ["slo", hot_file, "-o", "json"]).stdout)
    rows_csv = list(
        csv.DictReader(
            io.StringIO(CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "-o", "csv"]).stdout)
        )
    )
    leaf = next(r for r in rows_csv if r["name"] == "vllm.wake_up")
    assert (leaf["path"], leaf["kind"], leaf["seen"], leaf["p50"]) == (HOT, "leaf", "4", "1.5")
    bind_csv = next(r for r in rows_csv if r["name"] == "fma.dpc.bind")
    assert (bind_csv["p50_lo"], bind_csv["p50_hi"]) == ("0.5", "1")
    r = CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "-o", "llm-d-benchmark"])
    assert r.exit_code == 2 and "--breakdown is not part of --format llm-d-benchmark" in r.stderr
    r = CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "-o", "perfdata"])
    assert r.exit_code == 0 and "--breakdown is shown in the table, json and csv formats only" in r.stderr
    narrow = CliRunner().invoke(main, ["slo", hot_file, "--breakdown"], env={"COLUMNS": "80"}).stdout
    section = narrow[narrow.index("Where the time goes") :].splitlines()
    assert max(len(x) for x in section) <= 80 and "p99" in section[1] and "vllm.wake_up" in narrow
    r = CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "--path", "warm", "-o", "json"])
    assert json.loads(r.stdout)["breakdown"] == []


@pytest.mark.slow
def test_breakdown_is_the_same_from_tempo_and_jaeger_v1():
    acts = [hot(f"h{i}", float(i), start_s=10.0 * i) for i in range(1, 5)]
    win = ("--since", "2026-05-28T00:00:00Z", "--until", "2026-05-29T00:00:00Z", "-o", "json", "--breakdown")
    with fake_servers.tempo(acts) as t, fake_servers.jaeger(acts, v3=False) as j:
        a = json.loads(CliRunner().invoke(main, ["slo", "--tempo", t.url, *win]).stdout)["breakdown"]
        b = json.loads(CliRunner().invoke(main, ["slo", "--jaeger", j.url, *win]).stdout)["breakdown"]
    assert a == b
    (bd,) = a
    assert bd["n"] == 4 and any(r["name"] == "fma.vllm.wake" and r["kind"] == "leaf" for r in bd["rows"])


@pytest.mark.slow
def test_breakdown_of_the_embedded_sample_adds_up_and_agrees_with_the_metrics(tmp_path):
    """The bridge's own traces of its sample: every path, the baseline last; per path the
    leaves and uncovered rows account for all of T_actuation, whose percentiles are the
    metric table's, and every leaf named is a span without children in those traces (a per-call span, such as
    an API write, does not count as a child)."""
    from fma_otel.query.readers import read_spans

    traces = tmp_path / "sample.jsonl"
    r = CliRunner().invoke(main, ["bridge", "--out", str(traces), "-q"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["slo", str(traces), "--breakdown", "-o", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    bds = {b["path"]: b for b in doc["breakdown"]}
    assert list(bds) == ["cold_launcher", "warm", "hot", "cold_no_fma"]
    assert {p: b["n"] for p, b in bds.items()} == {"cold_launcher": 1, "warm": 1, "hot": 2, "cold_no_fma": 1}
    metric = {m["path"]: m for m in doc["metrics"] if m["metric"] == "T_actuation"}
    spans = list(read_spans(str(traces), {}))
    from fma_otel.model import SPANS

    per_call = {d.name for d in SPANS if d.repeated}  # they never make their parent a non-leaf
    parents = {s.parent_span_id for s in spans if s.name not in per_call}
    leaf_names = {s.name for s in spans if s.span_id not in parents}
    for path, b in bds.items():
        rows = b["rows"]
        total = rows[0]
        assert total["kind"] == "total" and total["share"] == 1.0
        assert (total["p50"], total["p99"]) == (metric[path]["p50"], metric[path]["p99"])
        parts = [x for x in rows if x["kind"] in ("leaf", "uncovered")]
        assert sum(x["share"] for x in parts) == pytest.approx(1.0), path
        assert {x["name"] for x in rows if x["kind"] == "leaf"} <= leaf_names
        covered = rows[-1]
        assert covered["kind"] == "covered" and 0.0 <= b["min_covered_share"] <= covered["share"] <= 1.0
    # every instant of T_actuation is in a leaf or an "uncovered" row: none hidden
    for b in bds.values():
        covered, uncovered = b["rows"][-1], [x for x in b["rows"] if x["kind"] == "uncovered"]
        assert covered["share"] + sum(x["share"] for x in uncovered) == pytest.approx(1.0)
    assert sum(x["kind"] == "leaf" for x in bds["cold_launcher"]["rows"]) >= 5


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        ("fma.vllm.wake", "endTimeUnixNano", '"' + "9" * 400 + '"'),
        ("fma.dpc.bind", "startTimeUnixNano", '"-5"'),  # a span plain slo does not read
        ("fma.dpc.bind", "parentSpanId", "5"),
        ("vllm.wake_up", "spanId", "[1]"),
    ],
    ids=["metric-end-400-digits", "leaf-start-negative", "parent-a-number", "span-id-a-list"],
)
def test_a_malformed_request_is_one_skipped_line_with_breakdown_too(tmp_path, hot_file, change):
    """All or nothing, as without --breakdown: the line is skipped and counted, the others
    give the same breakdown as without it; never a traceback."""
    name, key, raw = change
    tid = "e" * 32
    req = export_request(_hot_trace(tid, 2.0))
    for rs in req["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                if sp["name"] == name:
                    sp[key] = "@@MARK@@"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(req, separators=(",", ":")).replace('"@@MARK@@"', raw) + "\n" + open(hot_file).read()
    )
    good = json.loads(CliRunner().invoke(main, ["slo", hot_file, "--breakdown", "-o", "json"]).stdout)
    r = CliRunner().invoke(main, ["slo", str(bad), "--breakdown", "-o", "json"])
    assert r.exit_code == 0, r.output
    assert "skipped 1 of 6 lines" in r.stderr, r.stderr
    assert json.loads(r.stdout)["breakdown"] == good["breakdown"]


def test_bounds_that_are_no_finite_number_count_as_exact(tmp_path):
    p = tmp_path / "t.jsonl"
    spans = _hot_trace("1" * 32, 2.0)
    spans[1] = msgspec.structs.replace(spans[1], attributes={**spans[1].attributes,
                                       "fma.duration.min_s": float("nan"), "fma.duration.max_s": "7"})  # fmt: skip
    with p.open("w") as fh:
        write_trace_line(fh, spans)
    r = CliRunner().invoke(main, ["slo", str(p), "-o", "json"])
    assert r.exit_code == 0, r.output
    (row,) = [m for m in json.loads(r.stdout)["metrics"] if m["metric"] == "T_actuation"]
    assert row["p50"] == row["p50_lo"] == row["p50_hi"] == 6.0


def test_thousands_of_overlapping_leaves_add_up():
    """A trace of 3000 overlapping leaves (a re-export gone wrong, a log of TP ranks): the
    parts still add up and the shortest leaf takes each instant."""
    spans = [_lean("a", None, "fma.actuation", 0, 100)]
    spans += [_lean(f"l{i}", "a", f"x.leaf{i % 7}", i * 0.001, 50 + i * 0.001) for i in range(3000)]
    spans.append(_lean("s", "a", "x.short", 10, 11))
    sp = split_actuation(spans)
    assert sp is not None
    assert sp.covered_s == pytest.approx(52.999) and sp.uncovered == {"fma.actuation": pytest.approx(47.001)}
    assert sp.exclusive["x.short"] == pytest.approx(1.0)
    assert sum(sp.exclusive.values()) + sum(sp.uncovered.values()) == pytest.approx(100.0)
