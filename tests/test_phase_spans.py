"""vLLM phase plan (fma_otel.phase_spans.plan_vllm) on the parser's fixtures of four vLLM families."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel.phase_spans import (
    A_LINE,
    A_LOGGED,
    METRICS,
    PhaseSpan,
    number_spans,
    plan_vllm,
    vllm_parent,
)
from fma_otel.sources.vllm_log import parse_vllm_log
from fma_otel.span_records import SpanRecord

FIX = Path(__file__).parent / "fixtures" / "vllm"
NS = 1_000_000_000
STAMP = re.compile(r" (\d\d-\d\d \d\d:\d\d:\d\d) ")

LOGS = [
    ("v0.7.3-tp2-newyear.log", 2025, 0),
    ("v0.10.1-tp2.log", 2025, 0),
    ("v0.26.0-fma-instance.log", 2026, -7 * 3600),
    ("v0.34.0-pod-tp2-timestamps.log", 2027, 0),
]
COMPILATION_0_26 = 5.87  # "(compilation: 5.87 s)" on line 30
STARTUP_PATHS = (M.COLD_LAUNCHER, M.WARM, M.COLD_NO_FMA)


def records(name: str, year: int, offset: int):
    with open(FIX / name, "rb") as f:
        recs, _ = parse_vllm_log(f, year=year, utc_offset_s=offset)
    return recs


def stamp_ns(text: str, year: int, offset: int) -> int:
    local = datetime.strptime(f"{year}-{text}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return (int(local.timestamp()) - offset) * NS


def names(spans: list[PhaseSpan]) -> list[str]:
    return [s.name for s in spans]


@pytest.mark.parametrize(("name", "year", "offset"), LOGS)
def test_each_logged_span_lasts_the_logged_duration_and_ends_in_the_stamps_second(name, year, offset):
    recs = records(name, year, offset)
    lines = (FIX / name).read_bytes().decode().split("\n")  # physical lines, as numbered
    by_line = {r.line_no: r for r in recs}
    spans = plan_vllm(recs, path=M.COLD_NO_FMA)
    logged = [s for s in spans if A_LOGGED in s.attributes]
    assert len(logged) >= 4, names(spans)
    for s in logged:
        rec = by_line[s.attributes[A_LINE]]
        assert s.attributes[A_LOGGED] == rec.duration_s
        assert s.end_ns - s.start_ns == round(rec.duration_s * NS), s
        # the end lies in [stamp, stamp + 1 s) of the line that logged it
        y = datetime.fromtimestamp(s.end_ns / NS, timezone.utc).year
        stamps = STAMP.findall(lines[s.attributes[A_LINE] - 1])  # a line may hold \r segments
        stamp = min(
            (stamp_ns(text, yy, offset) for text in stamps for yy in (y - 1, y, y + 1)),
            key=lambda t: abs(t - s.end_ns),
        )
        assert stamp <= s.end_ns < stamp + NS, s
        assert s.min_s <= rec.duration_s <= s.max_s


def test_the_v0_26_instance_log_gives_every_startup_phase_under_vllm_ready():
    spans = plan_vllm(records("v0.26.0-fma-instance.log", 2026, -7 * 3600), path=M.COLD_LAUNCHER)
    got = [(s.name, s.parent_name, s.metric) for s in spans]
    assert got == [
        ("vllm.process.boot", "fma.vllm.ready", "T_vllm_boot"),
        ("vllm.engine.config", "fma.vllm.ready", None),
        ("vllm.engine.spawn", "fma.vllm.ready", None),
        ("vllm.model.load", "fma.vllm.ready", "T_vllm_model_load"),
        ("vllm.weights.load", "vllm.model.load", "T_vllm_weights_load"),
        ("vllm.engine.init", "fma.vllm.ready", "T_vllm_engine_init"),
        ("vllm.torch_compile", "vllm.engine.init", "T_vllm_compile"),
        ("vllm.dynamo", "vllm.torch_compile", None),
        ("vllm.compile.cache_load", "vllm.torch_compile", None),
        ("vllm.profiling_run", "vllm.engine.init", None),
        ("vllm.memory.profile", "vllm.engine.init", "T_vllm_memory_profile"),
        ("vllm.cuda_graphs.capture", "vllm.engine.init", "T_vllm_cuda_graphs"),
        ("vllm.api_server.start", "fma.vllm.ready", "T_vllm_api_server_start"),
    ]
    by = {s.name: s for s in spans}
    # the chain of top-level phases is contiguous: each starts where the previous ended
    assert by["vllm.process.boot"].end_ns == by["vllm.engine.config"].start_ns
    assert by["vllm.engine.config"].end_ns == by["vllm.engine.spawn"].start_ns
    assert by["vllm.engine.spawn"].end_ns == by["vllm.model.load"].start_ns
    assert by["vllm.engine.init"].end_ns == by["vllm.api_server.start"].start_ns
    # the launcher's first line: 07:36:20,511 local, UTC-7
    assert by["vllm.process.boot"].start_ns == (
        int(datetime(2026, 6, 29, 14, 36, 20, tzinfo=timezone.utc).timestamp()) * NS + 511_000_000
    )
    assert by["vllm.engine.init"].attributes["vllm.compilation_s"] == COMPILATION_0_26
    assert by["vllm.api_server.start"].max_s is None  # uvicorn's line has no stamp
    assert all(s.start_source == s.end_source == "vllm:log" for s in spans)
    assert all(s.attributes["vllm.rank_rule"] == "rank0" for s in spans)


def test_baseline_hangs_under_the_actuation_and_takes_its_boot_start_from_the_caller():
    recs = records("v0.34.0-pod-tp2-timestamps.log", 2027, 0)
    plain = plan_vllm(recs, path=M.COLD_NO_FMA)
    assert "vllm.process.boot" not in names(plain)  # no launcher first line, no pod start: none
    setup = next(r for r in recs if r.phase == "api_server_setup")
    started = setup.end_lo_ns - 9 * NS
    spans = plan_vllm(recs, path=M.COLD_NO_FMA, boot_start=(started, started + NS, "k8s:R.started"))
    boot = spans[0]
    assert boot.name == "vllm.process.boot" and boot.parent_name == "fma.actuation"
    assert (boot.start_ns, boot.end_ns) == (started, setup.end_lo_ns)
    assert boot.start_source == "k8s:R.started"
    assert (boot.min_s, boot.max_s) == (8.0, 10.0)
    assert all(s.parent_name == "fma.actuation" or s.parent_name.startswith("vllm.") for s in spans)


def test_v0_7_model_load_without_a_duration_runs_from_its_start_line():
    recs = records("v0.7.3-tp2-newyear.log", 2025, 0)
    spans = plan_vllm(recs, path=M.WARM)
    by = {s.name: s for s in spans}
    start = next(r for r in recs if r.phase == "model_load_start")
    end = next(r for r in recs if r.phase == "model_load")
    assert end.duration_s is None
    load = by["vllm.model.load"]
    assert (load.start_ns, load.end_ns) == (start.end_lo_ns, end.end_lo_ns)
    assert A_LOGGED not in load.attributes
    assert by["vllm.engine.spawn"].end_ns == load.start_ns
    assert by["vllm.memory.profile"].end_ns - by["vllm.memory.profile"].start_ns == round(1.52 * NS)


def test_hot_path_gives_only_the_wake_spans():
    for name, year, offset in LOGS:
        spans = plan_vllm(records(name, year, offset), path=M.HOT)
        assert names(spans) == ["vllm.wake"], name
        w = spans[0]
        assert w.parent_name == "fma.vllm.wake" and w.metric == "T_vllm_wake"
    spans = plan_vllm(records("v0.10.1-tp2.log", 2025, 0), path=M.HOT)
    assert "weights" in spans[0].attributes["vllm.wake.tags"]
    assert spans[0].attributes["vllm.wake.request_time_unix_nano"] <= spans[0].end_ns


def test_unknown_versions_give_no_span():
    with open(FIX / "unknown-format.log", "rb") as f:
        recs, _ = parse_vllm_log(f, year=2026)
    for path in (*STARTUP_PATHS, M.HOT, M.UNKNOWN):
        assert plan_vllm(recs, path=path) == []
    assert plan_vllm([], path=M.COLD_LAUNCHER) == []


def test_a_missing_record_drops_only_the_spans_that_need_it():
    recs = records("v0.26.0-fma-instance.log", 2026, -7 * 3600)
    full = names(plan_vllm(recs, path=M.COLD_LAUNCHER))
    no_init = [r for r in recs if r.phase != "init_engine"]
    got = names(plan_vllm(no_init, path=M.COLD_LAUNCHER))
    # engine.init and its children, and api_server.start (which starts at its end), go
    assert got == [
        n
        for n in full
        if n
        not in {
            "vllm.engine.init",
            "vllm.torch_compile",
            "vllm.dynamo",
            "vllm.compile.cache_load",
            "vllm.profiling_run",
            "vllm.memory.profile",
            "vllm.cuda_graphs.capture",
            "vllm.api_server.start",
        }
    ]
    no_setup = [r for r in recs if r.phase != "api_server_setup"]
    got = names(plan_vllm(no_setup, path=M.COLD_LAUNCHER))
    assert "vllm.process.boot" not in got and "vllm.engine.config" not in got
    assert "vllm.engine.spawn" in got


@pytest.mark.parametrize(("name", "year", "offset"), LOGS)
def test_a_growing_log_plans_the_same_spans_as_the_whole_log(name, year, offset):
    """The launcher wrapper plans from the file as it grows: every span it has at any point
    is the one the bridge derives from the whole file (same name, n, boundaries)."""
    recs = records(name, year, offset)
    for path in (M.COLD_LAUNCHER, M.HOT):
        final = plan_vllm(recs, path=path)
        final_by_n = _by_name_n(final)
        for k in range(len(recs) + 1):
            for key, span in _by_name_n(plan_vllm(recs[:k], path=path)).items():
                assert final_by_n[key] == span, (k, key)


def _by_name_n(spans):
    out, seen = {}, {}
    for s in spans:
        n = seen.get(s.name, 0)
        seen[s.name] = n + 1
        out[s.name, n] = s
    return out


def test_number_spans_derives_ids_by_name_and_n_and_parents_by_name():
    recs = records("v0.10.1-tp2.log", 2025, 0)
    spans = plan_vllm(recs, path=M.WARM)
    trace_id = M.trace_id_for("some-uid")
    ready = M.span_id_for(trace_id, "fma.vllm.ready", 0)
    out = number_spans(trace_id, spans, {"fma.vllm.ready": ready}, attributes={M.A_PATH: M.WARM})
    assert [r.name for r in out] == names(spans)
    ids = {r.name: r.span_id for r in out}
    for r in out:
        assert r.span_id == M.span_id_for(trace_id, r.name, 0)
        want = (
            ready
            if r.name.count(".") <= 2
            and r.name
            not in {
                "vllm.weights.download",
                "vllm.weights.load",
                "vllm.torch_compile",
                "vllm.dynamo",
                "vllm.inductor.compile",
                "vllm.memory.profile",
                "vllm.cuda_graphs.capture",
            }
            else None
        )
        if want:
            assert r.parent_span_id == want, r.name
        assert r.attributes[M.A_PATH] == M.WARM
        assert r.attributes[M.A_START_SRC] == "vllm:log"
        assert M.A_MIN in r.attributes
        if r.name in METRICS:
            assert r.attributes[M.A_METRIC] == METRICS[r.name]
    assert next(r for r in out if r.name == "vllm.weights.load").parent_span_id == ids["vllm.model.load"]
    assert next(r for r in out if r.name == "vllm.dynamo").parent_span_id == ids["vllm.torch_compile"]
    # no parent in the trace: nothing (its children neither)
    assert number_spans(trace_id, spans, {}) == []
    # n continues from the trace's own counts; an open max is bounded by the caller
    api_start = next(s for s in spans if s.name == "vllm.api_server.start").start_ns
    again = number_spans(
        trace_id,
        spans,
        {"fma.vllm.ready": ready},
        counts={"vllm.dynamo": 1},
        ready_hi_ns=api_start + 3 * NS,
    )
    dyn = next(r for r in again if r.name == "vllm.dynamo")
    assert dyn.span_id == M.span_id_for(trace_id, "vllm.dynamo", 1)
    api = next(r for r in again if r.name == "vllm.api_server.start")
    assert api.attributes[M.A_MAX] == 3.0
    assert M.A_MAX not in next(r for r in out if r.name == "vllm.api_server.start").attributes


def test_repeated_compile_ranges_are_numbered_in_line_order():
    from fma_otel.sources.vllm_log import VllmPhase

    base = 1_800_000_000 * NS

    def rec(phase, line, t, d=None, detail=None):
        return VllmPhase(phase, line, base + t * NS, base + (t + 1) * NS, d, 0.005, "0.13+", None, detail)

    recs = [
        rec("init_engine", 9, 40, 30.0),
        rec("inductor_compile", 3, 20, 5.0, "compile range (1, 8)"),
        rec("inductor_compile", 4, 25, 4.0, "compile range (9, 8192)"),
        rec("torch_compile", 5, 26, 12.0),
    ]
    recs.sort(key=lambda r: r.line_no)
    spans = plan_vllm(recs, path=M.WARM)
    ind = [s for s in spans if s.name == "vllm.inductor.compile"]
    assert [s.attributes["vllm.compile.range"] for s in ind] == [
        "compile range (1, 8)",
        "compile range (9, 8192)",
    ]
    trace_id = M.trace_id_for("k")
    out = number_spans(trace_id, spans, {"fma.vllm.ready": "00000000000000aa"})
    got = [r.span_id for r in out if r.name == "vllm.inductor.compile"]
    assert got == [M.span_id_for(trace_id, "vllm.inductor.compile", n) for n in (0, 1)]


def test_vllm_parent():
    assert vllm_parent(M.COLD_LAUNCHER) == vllm_parent(M.WARM) == "fma.vllm.ready"
    assert vllm_parent(M.COLD_NO_FMA) == "fma.actuation"
    assert vllm_parent(M.HOT) is None and vllm_parent(M.UNKNOWN) is None


# --------------------------------------------------------------------------- extra_spans


def _act(path, instants, **attrs):
    from fma_otel.correlate import Actuation

    inst = {k: M.Instant(v, M.S, f"k8s:{k}", M.SERVICE_K8S) for k, v in instants.items()}
    base = {M.A_PATH: path, M.A_NAMESPACE: "fma", M.A_REQ_NAME: "req", M.A_REQ_UID: "req-uid", **attrs}
    return Actuation("req-uid", 1, path, True, inst, base)


def _trace_with(act, *names):
    tid = act.trace_id
    return [
        SpanRecord(tid, M.span_id_for(tid, n, 0), None, n, M.INTERNAL, 1, 2, M.SERVICE_K8S, {}) for n in names
    ]


def _fixture_events(name="core-v1-list.json"):
    from fma_otel.sources.k8s_events import parse_events

    return parse_events((Path(__file__).parent / "fixtures" / "events" / name).read_bytes())[0]


def test_launcher_startup_from_the_fixture_events():
    from fma_otel.phase_spans import extra_spans

    sec = 1_782_743_741  # 14:35:41 UTC, the fixture's Scheduled
    act = _act(
        M.COLD_LAUNCHER,
        {"L.created": (sec - 1) * NS, "L.scheduled": sec * NS, "L.ready": (sec + 50) * NS},
        **{M.A_LAUNCHER: "launcher-qwen-7x2kd"},
    )
    trace = _trace_with(act, "fma.request", "fma.actuation", "fma.launcher.startup")
    boot = (sec + 46) * NS + 250 * 1_000_000
    out = extra_spans(act, trace, events=_fixture_events(), launcher_boot_ns={"launcher-qwen-7x2kd": boot})
    by = {s.name: s for s in out}
    assert list(by) == [
        "k8s.pod.setup",
        "k8s.image.pull",
        "k8s.container.start",
        "fma.launcher.boot",
        "k8s.readiness.probe",
    ]
    startup = M.span_id_for(act.trace_id, "fma.launcher.startup", 0)
    assert all(s.parent_span_id == startup for s in out)
    setup, pull, start = by["k8s.pod.setup"], by["k8s.image.pull"], by["k8s.container.start"]
    assert (
        setup.start_ns == 1782743741118264000 and setup.end_ns == (sec + 1) * NS
    )  # Scheduled (µs) -> Pulling
    assert setup.attributes[M.A_START_SRC] == "k8s:event/Scheduled"
    assert pull.end_ns == 1782743774 * NS and pull.end_ns - pull.start_ns == 31_874_000_000  # "in 31.874s"
    assert pull.attributes["k8s.image.pull_s"] == 31.874 and pull.attributes[M.A_METRIC] == "T_image_pull"
    assert (start.start_ns, start.end_ns) == (pull.end_ns, 1782743775 * NS)
    assert by["fma.launcher.boot"].end_ns == boot == by["k8s.readiness.probe"].start_ns
    assert by["fma.launcher.boot"].service == M.SERVICE_LAUNCHER
    probe = by["k8s.readiness.probe"]
    assert probe.end_ns == (sec + 50) * NS and probe.attributes["k8s.probe.failures"] == 3
    # the sidecar's "already present" Pulled and FMA's LauncherStuck (another Pod) make no span
    assert not any("notifier" in str(s.attributes.get("k8s.container.name")) for s in out)
    # a trace without the parent gets none of them; no boot line: no boot and no probe
    assert extra_spans(act, _trace_with(act, "fma.request"), events=_fixture_events()) == []
    names = [s.name for s in extra_spans(act, trace, events=_fixture_events())]
    assert names == ["k8s.pod.setup", "k8s.image.pull", "k8s.container.start"]


def test_requester_events_through_the_new_api_and_in_any_order():
    from fma_otel.phase_spans import extra_spans

    new = _fixture_events("events-v1-list.json")
    uid = next(e.object_uid for e in new if e.object_name == "requester-qwen-5d8f-abcde")
    act = _act(M.WARM, {})
    act.attributes[M.A_REQ_UID] = uid  # type: ignore[index]
    trace = _trace_with(act, "fma.request", "fma.requester.startup", "fma.actuation")
    out = extra_spans(act, trace, events=new)
    # Scheduled, then a Pulled with its duration, and no Pulling or Started: the pull only
    assert [(s.name, s.end_ns - s.start_ns, s.end_ns) for s in out] == [
        ("k8s.image.pull", 512_000_000, 1_782_743_742 * NS)
    ]
    assert out[0].parent_span_id == M.span_id_for(act.trace_id, "fma.requester.startup", 0)
    assert extra_spans(act, trace, events=list(reversed(new))) == out
    # the launcher's Events (core/v1 fixture) are another Pod's: nothing for this requester
    assert extra_spans(act, trace, events=_fixture_events()) == []


def test_vllm_clock_offsets():
    from fma_otel.phase_spans import vllm_clock

    recs = records("v0.26.0-fma-instance.log", 2026, 0)  # read as if UTC: 7 h early
    ps = next(r for r in recs if r.phase == "process_start")
    create = ps.end_lo_ns + 7 * 3600 * NS - 300 * 1_000_000  # the true create call, UTC
    act = _act(M.COLD_LAUNCHER, {})
    act.instants["D.create.start"] = M.Instant(create, 1, "dpc", M.SERVICE_DPC)  # type: ignore[index]
    assert vllm_clock(act, recs) == (-7 * 3600, False)
    # a --timestamps prefix wins (the runtime's UTC read time per line)
    recs34 = records("v0.34.0-pod-tp2-timestamps.log", 2027, 0)
    assert vllm_clock(_act(M.COLD_NO_FMA, {"R.started": recs34[0].end_lo_ns}), recs34) == (0, False)
    # nothing to compare with: assumed UTC
    assert vllm_clock(_act(M.COLD_NO_FMA, {}), records("v0.10.1-tp2.log", 2025, 0)) == (0, True)


# --------------------------------------------------------------------------- FMA's own Events


def test_fma_events_become_span_events_on_the_actuation_they_concern(tmp_path):
    import io

    from fma_otel.phase_spans import assign_fma_events, with_fma_events
    from fma_otel.query.readers import read_spans
    from fma_otel.sinks.otlp_export import to_readable_spans
    from fma_otel.sinks.otlp_json import write_trace_line

    new = _fixture_events("events-v1-list.json")
    ev = next(e for e in new if e.raw_reason == "OutdatedRoutingMetadata")
    t = ev.first_ns // NS * NS

    def act(key, start, ready=None):
        inst = {"R.started": start * NS}
        if ready is not None:
            inst["R.ready"] = ready * NS
        a = _act(M.HOT, {}, **{M.A_REQ_UID: ev.object_uid, M.A_REQ_NAME: ev.object_name})
        a.instants.update({k: M.Instant(v, NS, "k", M.SERVICE_K8S) for k, v in inst.items()})  # type: ignore[attr-defined]
        return type(a)(key, 1, a.path, ready is not None, a.instants, a.attributes)

    first, second = act("u", t // NS - 100, t // NS - 50), act("u/2", t // NS - 10, t // NS + 5)
    other = _act(M.HOT, {"R.started": t - 5 * NS})  # another requester (uid "req-uid")
    got = assign_fma_events([first, second, other], new)
    assert list(got) == ["u/2"] and [e.raw_reason for e in got["u/2"]] == ["OutdatedRoutingMetadata"]
    # after every actuation of its Pod: the latest one that started before it
    late = act("u/2", t // NS - 40, t // NS - 30)
    assert list(assign_fma_events([first, late], new)) == ["u/2"]
    # before any: on none; other reasons: never
    assert assign_fma_events([act("u", t // NS + 1, t // NS + 9)], new) == {}
    assert assign_fma_events([second], [e for e in new if e.raw_reason != "OutdatedRoutingMetadata"]) == {}
    # on fma.actuation only, with the Event's words; through OTLP JSON and the SDK span
    trace = _trace_with(second, "fma.request", "fma.actuation")
    out = with_fma_events(trace, got["u/2"])
    assert out[0] == trace[0] and out[1].events and not trace[1].events
    e = out[1].events[0]
    assert e.name == "k8s.event.OutdatedRoutingMetadata" and e.time_ns == ev.first_ns
    assert e.attributes["k8s.event.message"] == ev.message and e.attributes["k8s.event.count"] == 1
    assert e.attributes["k8s.event.component"] == "dual-pods-controller"
    buf = io.StringIO()
    write_trace_line(buf, out)
    path = tmp_path / "t.jsonl"
    path.write_text(buf.getvalue())
    back = {s.name: s for s in read_spans(str(path))}
    assert back["fma.actuation"].events == out[1].events
    sdk = {s.name: s for s in to_readable_spans(out)}
    assert [(x.name, x.timestamp) for x in sdk["fma.actuation"].events] == [(e.name, e.time_ns)]


def test_launcher_stuck_goes_to_the_actuation_of_its_launcher():
    from fma_otel.phase_spans import assign_fma_events

    old = _fixture_events()
    ev = next(e for e in old if e.raw_reason == "LauncherStuck")
    a = _act(M.COLD_LAUNCHER, {"R.started": ev.first_ns - 60 * NS}, **{M.A_LAUNCHER: ev.object_name})
    a.attributes[M.A_NAMESPACE] = ev.object_namespace  # type: ignore[index]
    b = _act(M.COLD_LAUNCHER, {"R.started": ev.first_ns - 60 * NS}, **{M.A_LAUNCHER: "launcher-other"})
    got = assign_fma_events([b, a], old)
    assert [e.raw_reason for e in got[a.key]] == ["LauncherStuck"] and len(got) == 1


# --------------------------------------------------------------------------- native spans


def _with_args(name, year, offset, args_line_no, extra):
    lines = (FIX / name).read_bytes().decode().split("\n")
    line = lines[args_line_no - 1]
    assert "non-default args: {" in line
    lines[args_line_no - 1] = line.replace("non-default args: {", "non-default args: {" + extra + ", ", 1)
    recs, stats = parse_vllm_log([x.encode() for x in lines], year=year, utc_offset_s=offset)
    return recs, stats


def test_vllm_tracing_itself_leaves_the_startup_spans_to_vllm():
    from fma_otel.phase_spans import native_phases

    endpoint = "'otlp_traces_endpoint': 'http://user:pw@collector:4317'"
    recs, stats = _with_args("v0.26.0-fma-instance.log", 2026, -7 * 3600, 9, endpoint)
    otlp = [r for r in recs if r.phase == "otlp_traces"]
    assert len(otlp) == 1 and otlp[0].detail is None and stats.skipped == 0  # the URL is not kept
    assert native_phases(recs)
    assert plan_vllm(recs, path=M.COLD_LAUNCHER) == plan_vllm(recs, path=M.WARM) == []
    assert names(plan_vllm(recs, path=M.HOT)) == ["vllm.wake"]  # vLLM has no wake span
    assert plan_vllm(recs, path=M.COLD_NO_FMA)  # a baseline's own spans are in another trace
    # before 0.16 vLLM has no spans of its own: the log's are kept
    old, _ = _with_args("v0.10.1-tp2.log", 2025, 0, 3, endpoint)
    assert any(r.phase == "otlp_traces" for r in old) and not native_phases(old)
    assert plan_vllm(old, path=M.WARM)
    # the args without it: no record at all (the line stays an unknown one)
    plain = records("v0.26.0-fma-instance.log", 2026, -7 * 3600)
    assert not native_phases(plain) and not any(r.phase == "otlp_traces" for r in plain)
