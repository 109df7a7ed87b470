"""vLLM phases and Kubernetes Events in the bridge's traces, on the embedded sample and variants."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.sources.vllm_log import parse_vllm_log
from fma_otel.span_records import SpanRecord
from tests.support.dump import dump_traces

SAMPLE = sample_dir()
SELECTOR = {"app": "vllm"}
NS = 1_000_000_000
#: the share of every complete actuation's T_actuation that named leaves must cover
COVERAGE_TARGET = 0.95


@pytest.fixture(scope="module")
def sample_result():
    return run_bridge(inputs_from_capture(SAMPLE), baseline_selector=SELECTOR)


def _traces(result):
    return list(result.iter_traces())


def _tree(trace):
    kids: dict[str | None, list[SpanRecord]] = {}
    for s in trace:
        kids.setdefault(s.parent_span_id, []).append(s)
    return kids


def _descendants(kids, span):
    for k in kids.get(span.span_id, []):
        yield k
        yield from _descendants(kids, k)


def leaf_coverage(trace) -> tuple[int, int, list[tuple[int, int, str]]]:
    """(covered ns, T_actuation ns, uncovered gaps (start, end, what surrounds them)): the union
    of the leaf spans under ``fma.actuation``, clipped to it.

    A span made per call (``repeated`` in the model: the DPC's API writes, its reclaiming
    deletes) is a leaf but does not make its parent a non-leaf: a write of a few ms inside
    ``fma.dpc.bind`` times that call, it does not split the wait the parent stands for."""
    kids = _tree(trace)
    root = next(s for s in trace if s.name == "fma.actuation")

    def is_leaf(s: SpanRecord) -> bool:
        return all(
            k.name in M.SPANS_BY_NAME and M.SPANS_BY_NAME[k.name].repeated for k in kids.get(s.span_id, [])
        )

    leaves = [s for s in _descendants(kids, root) if is_leaf(s)]
    iv = sorted((max(s.start_ns, root.start_ns), min(s.end_ns, root.end_ns), s.name) for s in leaves)
    gaps: list[tuple[int, int, str]] = []
    last, last_name = root.start_ns, "start of fma.actuation"
    for a, b, name in iv:
        if b <= a:
            continue
        if a > last:
            gaps.append((last, a, f"after {last_name}, before {name}"))
        if b > last:
            last, last_name = b, name
    if root.end_ns > last:
        gaps.append((last, root.end_ns, f"after {last_name}, before the end of fma.actuation"))
    total = root.end_ns - root.start_ns
    return total - sum(b - a for a, b, _ in gaps), total, gaps


def test_named_leaves_cover_every_complete_actuation(sample_result) -> None:
    seen = 0
    report = []
    for act, trace in _traces(sample_result):
        if not act.complete:
            continue
        seen += 1
        covered, total, gaps = leaf_coverage(trace)
        share = covered / total if total else 1.0
        root = next(s for s in trace if s.name == "fma.actuation")
        report.append(
            f"{act.path} {act.key}: {share:.2%} of {total / NS:.3f} s covered; uncovered "
            + ", ".join(
                f"{(b - a) / NS:.3f} s at +{(a - root.start_ns) / NS:.3f} s ({why})" for a, b, why in gaps
            )
        )
    assert seen == 5
    low = [r for r in report if float(r.split(": ", 1)[1].split("%")[0]) < COVERAGE_TARGET * 100]
    assert not low, "named leaves cover too little:\n" + "\n".join(report)


def test_coverage_without_the_span_that_holds_the_whole_instance(sample_result) -> None:
    """``fma.instance.create`` (receipt to relay) is a leaf that spans all of vLLM's startup;
    without it the phase leaves alone must still cover most of every actuation (what is left
    on cold and warm paths is the DPC's poll lag after vLLM is up)."""
    for act, trace in _traces(sample_result):
        if act.complete:
            covered, total, gaps = leaf_coverage([s for s in trace if s.name != "fma.instance.create"])
            assert covered / total >= 0.85, (act.path, covered / total, gaps)


def test_the_coverage_measure_sees_a_hole() -> None:
    """The measure itself: a leaf removed leaves its time uncovered, and says where."""
    result = run_bridge(inputs_from_capture(SAMPLE), baseline_selector=SELECTOR)
    act, trace = next((a, t) for a, t in _traces(result) if a.path == M.COLD_NO_FMA)
    covered, total, _ = leaf_coverage(trace)
    boot = next(s for s in trace if s.name == "vllm.process.boot")
    holed = [s for s in trace if s.name != "vllm.process.boot"]
    c2, t2, gaps = leaf_coverage(holed)
    assert t2 == total and covered - c2 == boot.end_ns - boot.start_ns
    assert any("start of fma.actuation" in why for _, _, why in gaps)


def _by_name(trace):
    out: dict[str, list[SpanRecord]] = {}
    for s in trace:
        out.setdefault(s.name, []).append(s)
    return out


def test_phase_spans_hang_where_the_contract_says(sample_result) -> None:
    for act, trace in _traces(sample_result):
        by = _by_name(trace)
        ids = {s.span_id: s for s in trace}
        counts: dict[str, int] = {}
        for s in trace:
            n = counts.get(s.name, 0)
            counts[s.name] = n + 1
            assert s.span_id == M.span_id_for(act.trace_id, s.name, n), s.name
            assert s.attributes[M.A_PATH] == act.path
            assert s.attributes[M.A_START_SRC] and s.attributes[M.A_END_SRC]
            if s.name.startswith(("vllm.", "k8s.")) or s.name == "fma.launcher.boot":
                assert s.parent_span_id in ids, s.name
                assert s.attributes[M.A_MIN] <= (s.end_ns - s.start_ns) / NS + 1e-9, s.name
                if M.A_MAX in s.attributes:
                    assert (s.end_ns - s.start_ns) / NS <= s.attributes[M.A_MAX] + 1e-9, s.name
        parent = {s.name: ids[s.parent_span_id].name for s in trace if s.parent_span_id in ids}
        if act.path in (M.COLD_LAUNCHER, M.WARM) and act.complete:
            for name in ("vllm.process.boot", "vllm.model.load", "vllm.engine.init", "vllm.api_server.start"):
                assert parent[name] == "fma.vllm.ready", (act.key, name)
            assert parent["vllm.weights.load"] == "vllm.model.load"
            assert parent["vllm.torch_compile"] == "vllm.engine.init"
            assert parent["vllm.dynamo"] == "vllm.torch_compile"
            assert parent["k8s.container.start"] == "fma.requester.startup"
        if act.path == M.COLD_LAUNCHER and act.complete:
            for name in ("k8s.pod.setup", "k8s.image.pull", "k8s.container.start", "fma.launcher.boot"):
                assert parent[name] in ("fma.launcher.startup", "fma.requester.startup"), name
            launcher = [s for s in trace if s.parent_span_id == by["fma.launcher.startup"][0].span_id]
            assert {s.name for s in launcher} >= {
                "k8s.pod.setup",
                "k8s.container.start",
                "fma.launcher.boot",
                "k8s.readiness.probe",
            }
            boot = next(s for s in launcher if s.name == "fma.launcher.boot")
            probe = next(s for s in launcher if s.name == "k8s.readiness.probe")
            assert boot.end_ns == probe.start_ns and boot.service == M.SERVICE_LAUNCHER
            assert probe.end_ns == act.instants["L.ready"].t_ns
            assert probe.attributes["k8s.probe.failures"] >= 1
        if act.path == M.COLD_NO_FMA:
            assert parent["vllm.process.boot"] == "fma.actuation"
            assert by["vllm.process.boot"][0].start_ns == act.instants["R.started"].t_ns
            assert by["k8s.readiness.probe"][0].end_ns == act.instants["R.ready"].t_ns
            assert "fma.vllm.ready" not in by
        if act.path == M.HOT:
            assert [s.name for s in trace if s.name.startswith("vllm.")] == ["vllm.wake"]
            w, call = by["vllm.wake"][0], by["fma.vllm.wake"][0]
            assert parent["vllm.wake"] == "fma.vllm.wake"
            assert call.start_ns <= w.start_ns and w.end_ns <= call.end_ns
            assert w.attributes["vllm.wake.tags"] == "{'kv_cache', 'weights'}"
            assert w.end_ns - w.start_ns == round(w.attributes["vllm.duration.logged_s"] * NS)


def test_incomplete_actuation_gets_the_phases_seen_and_no_more(sample_result) -> None:
    act, trace = next((a, t) for a, t in _traces(sample_result) if not a.complete)
    names = {s.name for s in trace}
    assert "fma.launcher.boot" in names  # its launcher did start
    assert not any(n.startswith("vllm.") for n in names)  # its vLLM logged only its start


def test_the_vllm_clock_comes_from_the_actuation(tmp_path) -> None:
    """The same instance log written 7 h behind UTC gives the same spans (offset from the
    launcher's first line against D.create.start); the baseline's from --timestamps."""
    ref = _dump(run_bridge(inputs_from_capture(SAMPLE), baseline_selector=SELECTOR))
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    for f in (d / "vllm").glob("*.log"):
        f.write_text(_shift_local(f.read_text(), -7 * 3600))
    got = run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)
    assert _dump(got) == ref
    assert not any("fma.clock.assumed_utc" in s.attributes for t in got.traces for s in t)


def _shift_local(text: str, offset_s: int) -> str:
    """Rewrite a vLLM log's ``MM-DD HH:MM:SS`` stamps and the launcher's asctime as local
    time at UTC+offset (the ``--timestamps`` prefix stays UTC)."""
    import re
    from datetime import datetime, timedelta

    def stamp(m: re.Match[str]) -> str:
        t = datetime.strptime(f"2026-{m[1]}", "%Y-%m-%d %H:%M:%S") + timedelta(seconds=offset_s)
        return f" {t:%m-%d %H:%M:%S} ["

    def asct(m: re.Match[str]) -> str:
        t = datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S") + timedelta(seconds=offset_s)
        return f"{t:%Y-%m-%d %H:%M:%S},"

    text = re.sub(r" (\d\d-\d\d \d\d:\d\d:\d\d) \[", stamp, text)
    return re.sub(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),", asct, text, flags=re.M)


def test_without_any_anchor_the_clock_is_assumed_utc(tmp_path) -> None:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    pod_log = next((d / "vllm").glob("pod-*.log"))
    pod_log.write_text("".join(line.split(" ", 1)[1] for line in pod_log.read_text().splitlines(True)))
    result = run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)
    base = next(t for a, t in _traces(result) if a.path == M.COLD_NO_FMA)
    vspans = [s for s in base if s.name.startswith("vllm.")]
    assert vspans and all(s.attributes["fma.clock.assumed_utc"] is True for s in vspans)


def _dump(result) -> str:
    traces = result.traces
    ids = sorted(
        (s.trace_id, s.span_id, s.parent_span_id or "", s.name, s.start_ns, s.end_ns)
        for t in traces
        for s in t
    )
    return dump_traces(s for t in traces for s in t) + "\n" + "\n".join(map(str, ids))


def _events_items() -> list[dict]:
    return json.loads((SAMPLE / "events.json").read_text())["items"]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_replay_events_and_vllm_logs_in_several_orders(tmp_path, seed) -> None:
    """The capture with its Events shuffled, repeated as a watch stream would, split over
    files given in either order, and its vLLM logs given by flag in another order, gives the
    span tree (and ids) of the capture as it is."""
    ref = _dump(run_bridge(inputs_from_capture(SAMPLE), baseline_selector=SELECTOR))
    rng = random.Random(seed)
    items = _events_items()
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d, ignore=shutil.ignore_patterns("events.json", "vllm"))
    # 1. one file: a watch stream, shuffled, with repeats (MODIFIED copies)
    stream = [{"type": "ADDED", "object": e} for e in items]
    stream += [{"type": "MODIFIED", "object": e} for e in rng.sample(items, k=len(items) // 3)]
    rng.shuffle(stream)
    (d / "events.json").write_text("".join(json.dumps(x) + "\n" for x in stream))
    vdir = d / "vllm"
    shutil.copytree(SAMPLE / "vllm", vdir)
    assert _dump(run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)) == ref
    # 2. the Events split over two Lists, given in either order; the vLLM logs by flag, shuffled
    (d / "events.json").unlink()
    shutil.rmtree(vdir)
    rng.shuffle(items)
    half = len(items) // 2
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items[:half]}))
    b.write_text(json.dumps({"apiVersion": "events.k8s.io/v1", "kind": "EventList", "items": items[half:]}))
    logs = sorted((SAMPLE / "vllm").glob("*.log"))
    for files in ([a, b], [b, a]):
        rng.shuffle(logs)
        inputs = inputs_from_capture(d)
        inputs.events.extend(str(f) for f in files)
        for p in logs:
            inputs.vllm_logs[p.stem.removeprefix("pod-")] = str(p)
        assert _dump(run_bridge(inputs, baseline_selector=SELECTOR)) == ref


def test_no_phase_inputs_gives_the_model_tree_only(tmp_path, sample_result) -> None:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d, ignore=shutil.ignore_patterns("events.json", "vllm"))
    plain = run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)
    names = {s.name for t in plain.traces for s in t}
    assert names <= set(M.SPANS_BY_NAME)
    full = {s.span_id: s for t in sample_result.traces for s in t}
    # the model's spans keep their ids and times; the only thing the phase inputs change in
    # them is the scheduler's Scheduled Event narrowing R.scheduled / L.scheduled from above
    bounds = {"fma.start.source", "fma.end.source", "fma.start.precision_s", "fma.end.precision_s"}
    bounds |= {"fma.duration.min_s", "fma.duration.max_s"}
    narrowed = 0
    for t in plain.traces:
        for s in t:
            f = full[s.span_id]
            assert (f.name, f.parent_span_id, f.start_ns, f.end_ns) == (
                s.name,
                s.parent_span_id,
                s.start_ns,
                s.end_ns,
            )
            if f.attributes != s.attributes:
                narrowed += 1
                sources = f"{f.attributes['fma.start.source']} {f.attributes['fma.end.source']}"
                assert "k8s:event/Scheduled" in sources, s.name
                assert {k for k in f.attributes if f.attributes[k] != s.attributes.get(k)} <= bounds
                assert f.attributes["fma.duration.max_s"] - f.attributes["fma.duration.min_s"] <= (
                    s.attributes["fma.duration.max_s"] - s.attributes["fma.duration.min_s"]
                )
    assert narrowed  # the sample's Pods have Scheduled Events


def test_the_sample_vllm_logs_parse_cleanly_and_their_lines_are_counted(sample_result) -> None:
    stats = {Path(st.name).name: st for st in sample_result.stats}
    logs = sorted((SAMPLE / "vllm").glob("*.log"))
    assert len(logs) == 6
    for p in logs:
        st = stats[p.name]
        assert st.read == len(p.read_text().splitlines()) and st.skipped == 0
        recs, vs = parse_vllm_log(p.read_bytes().splitlines(), year=2026)
        assert vs.skipped == 0 and (recs or p.stat().st_size < 200)
    ev = stats["events.json"]
    assert ev.read == len(_events_items()) and ev.skipped == 0


# --------------------------------------------------------------------------- the CLI


def _cli(*args: str):
    from click.testing import CliRunner

    from fma_otel.cli import main

    return CliRunner().invoke(main, ["bridge", *args], catch_exceptions=False)


def test_strict_names_the_vllm_line_and_the_event_item_skipped(tmp_path, clean_otlp_env) -> None:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    log = next(p for p in (d / "vllm").glob("I*.log") if p.stat().st_size > 1000)
    lines = log.read_text().splitlines(True)
    lines.insert(3, "INFO 06-29 14:31:02 [default_loader.py:314] Loading weights took a while\n")
    log.write_text("".join(lines))
    items = _events_items()
    items.insert(2, {"kind": "Event", "reason": "Pulled"})  # no involved object
    (d / "events.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    out = tmp_path / "o.jsonl"
    r = _cli(str(d), "--strict", "--out", str(out))
    assert r.exit_code == 1
    assert f"{log}:4: skipped: malformed 'weights_load' message" in r.stderr
    # the file line where the item starts (the List is written on one line), not its index
    assert f"{d / 'events.json'}:1: skipped: Event item 2: Event without involvedObject" in r.stderr
    assert "--strict: 2 line(s) skipped" in r.stderr
    # without --strict: counted in the summary, exit 0, the traces all written
    r = _cli(str(d), "--baseline-selector", "app=vllm", "--out", str(out))
    assert r.exit_code == 0
    # each line counted once: understood, ignored (no phase in it) or skipped
    summary = next(x for x in r.stderr.splitlines() if x.startswith(f"source {log}: "))
    counts = dict(kv.rsplit(" ", 1) for kv in summary.split(": ", 1)[1].split(", "))
    assert counts["read"] == str(len(lines)) and counts["skipped"] == "1"
    assert int(counts["understood"]) + int(counts["ignored"]) == len(lines) - 1
    assert len(out.read_text().splitlines()) == 6


def test_flags_add_vllm_logs_and_events_to_explicit_inputs(tmp_path, clean_otlp_env) -> None:
    base = [
        "--pods",
        str(SAMPLE / "pods.json"),
        "--dpc-log",
        str(SAMPLE / "dpc.log"),
        *[f"--launcher-log={p.name[9:-4]}={p}" for p in sorted(SAMPLE.glob("launcher-*.log"))],
        "-q",
    ]
    bare, full = tmp_path / "bare.jsonl", tmp_path / "full.jsonl"
    assert _cli(*base, "--out", str(bare)).exit_code == 0
    base_log = next((SAMPLE / "vllm").glob("pod-*.log"))
    r = _cli(
        *base,
        "--events",
        str(SAMPLE / "events.json"),
        "--vllm-log",
        f"{base_log.stem[4:]}={base_log}",
        "--out",
        str(full),
    )
    assert r.exit_code == 0, r.stderr
    from fma_otel.query.readers import read_spans

    got = {s.name for s in read_spans(str(full))} - {s.name for s in read_spans(str(bare))}
    assert {"vllm.process.boot", "k8s.pod.setup", "fma.launcher.boot", "k8s.readiness.probe"} <= got
    assert "vllm.wake" not in got  # only the baseline's log was given
    for bad in ("nokey", "=x", "k="):
        r = _cli(*base, "--vllm-log", bad)
        assert r.exit_code == 2 and "--vllm-log" in r.stderr and "expected" in r.stderr
    r = _cli(*base, "--events", str(tmp_path / "missing.json"))
    assert r.exit_code == 2 and "missing.json: no such file" in r.stderr
    r = _cli(*base, "--events", str(SAMPLE / "pods.json"))  # another file in its place
    assert r.exit_code == 2 and "pods.json: not Kubernetes Events (none of its 62 items" in r.stderr


def test_an_fma_event_in_the_capture_is_a_span_event_on_its_actuation(tmp_path, sample_result) -> None:
    act = next(a for a in sample_result.actuations if a.path == M.WARM)
    t = act.instants["R.started"].t_ns + 3 * NS
    from datetime import datetime, timezone

    when = datetime.fromtimestamp(t // NS, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    item = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "x.1", "namespace": act.attributes[M.A_NAMESPACE], "uid": "ev-1"},
        "involvedObject": {
            "kind": "Pod",
            "name": act.attributes[M.A_REQ_NAME],
            "namespace": act.attributes[M.A_NAMESPACE],
            "uid": act.attributes[M.A_REQ_UID],
        },
        "reason": "OutdatedRoutingMetadata",
        "message": "routing metadata of the server-providing Pod is outdated",
        "type": "Warning",
        "firstTimestamp": when,
        "lastTimestamp": when,
        "count": 2,
        "source": {"component": "dual-pods-controller"},
    }
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    (d / "events.json").write_text(json.dumps({"kind": "List", "items": [*_events_items(), item]}))
    got = run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)
    with_events = [(a.key, s) for a, t in _traces(got) for s in t if s.events]
    assert [(k, s.name) for k, s in with_events] == [(act.key, "fma.actuation")]
    e = with_events[0][1].events[0]
    assert (e.name, e.time_ns, e.attributes["k8s.event.count"]) == ("k8s.event.OutdatedRoutingMetadata", t, 2)
    # nothing else changes
    assert _dump(got) == _dump(sample_result)


def test_the_sample_events_agree_with_the_pods() -> None:
    """synth_events writes what the scheduler and kubelet would have: each Pod's Scheduled
    within its PodScheduled second, Started in its container's startedAt second."""
    pods = {}
    for line in (SAMPLE / "pods.json").read_text().splitlines():
        obj = json.loads(line)["object"]
        pods[obj["metadata"]["uid"]] = obj  # the latest state of each Pod
    from fma_otel.sources.k8s_events import parse_events

    events, stats = parse_events((SAMPLE / "events.json").read_bytes())
    assert stats.skipped == 0 and stats.notes == {}
    checked = 0
    for e in events:
        pod = pods[e.object_uid]
        if e.raw_reason == "Scheduled":
            cond = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            assert e.first_ns // NS == _k8s_s(cond["lastTransitionTime"]) and e.first_prec_ns == 1000
            checked += 1
        if e.raw_reason == "Started" and pod["status"].get("containerStatuses"):
            st = next(c for c in pod["status"]["containerStatuses"] if c["name"] == e.container)
            state = st["state"].get("running") or st["state"].get("terminated")
            assert e.first_ns // NS == _k8s_s(state["startedAt"])
            checked += 1
    assert checked >= 10


def _k8s_s(text: str) -> int:
    from datetime import datetime, timezone

    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp())


@pytest.mark.slow
def test_an_over_long_vllm_line_is_a_counted_skip_and_the_rest_is_read(tmp_path, sample_result) -> None:
    from fma_otel.lines import MAX_LINE_BYTES

    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    log = next(p for p in (d / "vllm").glob("I*.log") if p.stat().st_size > 1000)
    lines = log.read_bytes().splitlines(True)
    lines.insert(5, b"x" * (MAX_LINE_BYTES + 10) + b"\n")
    log.write_bytes(b"".join(lines))
    got = run_bridge(inputs_from_capture(d), baseline_selector=SELECTOR)
    st = next(s for s in got.stats if s.name == str(log))
    assert st.skipped == 1 and st.skipped_lines[0][0] == 6 and "longer than" in st.skipped_lines[0][1]
    assert st.read == st.understood + st.ignored + st.skipped == len(lines)  # counted once
    # the spans are those of the log without it (their line numbers shift by one)
    keys = ("fma.path", "fma.start.source", "fma.end.source")
    assert dump_traces((s for t in got.traces for s in t), keys) == dump_traces(
        (s for t in sample_result.traces for s in t), keys
    )


def test_scheduled_event_bounds_scheduled_instants_from_above(sample_result) -> None:
    """The scheduler records ``Scheduled`` (eventTime, µs) after it bound the Pod: the
    requester's and launcher's scheduling instants lie at or before it, and say so."""
    from fma_otel.instants import DEFAULT_TOLERANCE_NS
    from fma_otel.sources.k8s_events import parse_events

    events, _ = parse_events((SAMPLE / "events.json").read_bytes())
    by_uid = {e.object_uid: e.first_ns for e in events if e.raw_reason == "Scheduled"}
    by_name = {e.object_name: e.first_ns for e in events if e.raw_reason == "Scheduled"}
    assert by_uid
    checked = 0
    for act in sample_result.actuations:
        pods = [("R.scheduled", by_uid.get(act.attributes.get(M.A_REQ_UID)))]
        if act.attributes.get(M.A_LAUNCHER):
            pods.append(("L.scheduled", by_name.get(act.attributes[M.A_LAUNCHER])))
        for name, t in pods:
            inst = act.instants.get(name)
            if inst is None or t is None:
                continue
            assert "k8s:event/Scheduled" in inst.source, (name, inst.source)
            # on another clock than the API server's: widened by the clock tolerance
            assert inst.lo <= inst.t_ns <= inst.hi <= t + M.US - 1 + DEFAULT_TOLERANCE_NS
            assert inst.hi < inst.lo + M.S - 1  # narrower than the Pod's whole second
            checked += 1
    assert checked >= 4
