"""The offline bridge against ground truth: instants, whole span trees, replays, honesty.

The synthesizer (``tests.support.synth``) records for each actuation the instants that a correct
parser must read from exactly that data, so these tests compare the bridge with truth
rather than with its own previous output; a golden text dump (kspan style) catches any
change of the whole tree at a glance.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel.bridge import BridgeInputs, InputError, inputs_from_capture, run_bridge, sample_dir
from tests.support.dump import dump_traces
from tests.support.synth import (
    MAX_LAUNCHER_SKEW_NS,
    load_truth,
    synth_capture,
    synth_capture_with_true_instants,
    write_capture,
)

GOLDEN = Path(__file__).parent / "golden" / "sample_dump.txt"


@pytest.fixture(scope="module")
def sample_result():
    return run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})


@pytest.fixture(scope="module")
def truth():
    return {t.key: t for t in load_truth(sample_dir() / "truth.json")}


def _by_key(result):
    return {a.key: a for a in result.actuations}


def _trace_of(result, key):
    tid = M.trace_id_for(key)
    return next(t for t in result.traces if t and t[0].trace_id == tid)


def expected_instants(t) -> dict[str, int]:
    return dict(t.instants_for("list"))


@pytest.fixture(scope="module")
def true_instants():
    """The sample's true instants (the simulation re-run: the sample is ``synth_capture(6, 0)``)."""
    return synth_capture_with_true_instants(6, seed=0)[1]


def assert_instants_match(act, printed: dict[str, int], true: dict[str, int]) -> None:
    """Issue 21's rule against the generator's knowledge: the bridge finds the instants the
    data shows (the printed ones, plus V.ready and the relay call where their lines are
    there); each interval holds the true instant (the launcher's log is on its own clock,
    up to the generator's skew off) and its point; an instant bounded by its one printed
    source alone keeps the printed value as its point."""
    want = set(printed)
    if "D.serving" in printed:
        want.add("V.ready")
    if "D.relayed" in printed:
        want |= {"D.relay.start", "D.relay.end"}
    assert set(act.instants) == want, act.key
    for n, i in act.instants.items():
        slack = MAX_LAUNCHER_SKEW_NS if n.startswith("X.") else 0
        assert i.lo - slack <= true[n] <= i.hi + slack, (act.key, n)
        assert i.lo <= i.t_ns <= i.hi, (act.key, n)
        if " + " not in i.source and n in printed:
            assert i.t_ns == printed[n], (act.key, n)


def test_every_path_is_in_the_sample(truth) -> None:
    assert {t.path for t in truth.values()} == {"cold_launcher", "warm", "hot", "cold_no_fma"}


def test_instants_equal_truth(sample_result, truth, true_instants) -> None:
    acts = _by_key(sample_result)
    assert set(acts) == set(truth)
    for key, t in truth.items():
        assert_instants_match(acts[key], expected_instants(t), true_instants[key])
        assert acts[key].path == t.path, key


def test_reactuation_starts_at_unbind(sample_result, truth) -> None:
    key = next(k for k in truth if "/" in k)
    act = _by_key(sample_result)[key]
    assert act.path == M.HOT and act.round == 2
    unbound = act.instants["D.unbound"]
    assert unbound.t_ns < act.instants["D.bound"].t_ns
    first = _by_key(sample_result)[key.split("/")[0]]
    assert unbound.t_ns > first.instants["D.relayed"].t_ns
    assert act.dpc_actuation_secs is None


def _expected_tree(t, act) -> dict[str, tuple[str | None, int, int]]:
    """The tree the contract implies for the instants found (checked against the truth by
    ``assert_instants_match``): name -> (parent id, start, end)."""
    inst = {n: i.t_ns for n, i in act.instants.items()}
    tid = M.trace_id_for(t.key)
    out: dict[str, tuple[str | None, int, int]] = {}
    present: dict[str, str] = {}
    for d in M.SPANS:
        if t.path not in d.paths or d.repeated:
            continue
        start = next((inst[n] for n in d.start_options(t.path) if n in inst), None)
        end = inst.get(d.end_instant(t.path))
        if start is None or end is None:
            continue
        parent = d.parent_name(t.path)
        while parent is not None and parent not in present:
            parent = M.SPANS_BY_NAME[parent].parent_name(t.path)
        sid = M.span_id_for(tid, d.name, 0)
        present[d.name] = sid
        out[d.name] = (present.get(parent) if parent else None, start, max(start, end))
    return out


@pytest.mark.parametrize("path", ["cold_launcher", "warm", "hot", "cold_no_fma"])
def test_whole_tree_per_path(sample_result, truth, path) -> None:
    keys = [k for k, t in truth.items() if t.path == path and "R.ready" in expected_instants(t)]
    assert keys, f"no complete {path} actuation in the sample"
    for key in keys:
        t = truth[key]
        act = _by_key(sample_result)[key]
        # the model's table; the phase spans of vLLM logs and Events: tests/test_phase_bridge.py
        spans = [s for s in _trace_of(sample_result, key) if s.name in M.SPANS_BY_NAME]
        tid = M.trace_id_for(key)
        # spans made one per call (``repeated``: delete_instance, the API writes) are not
        # between two of the actuation's instants; tests/test_api_write_spans.py checks them
        got = {
            s.name: (s.parent_span_id, s.start_ns, s.end_ns)
            for s in spans
            if not M.SPANS_BY_NAME[s.name].repeated
        }
        assert got == _expected_tree(t, act), key
        for s in spans:
            assert s.trace_id == tid
            if not M.SPANS_BY_NAME[s.name].repeated:
                assert s.span_id == M.span_id_for(tid, s.name, 0)
            assert s.kind == M.SPANS_BY_NAME[s.name].kind
            a = s.attributes
            assert a[M.A_PATH] == path
            assert a[M.A_REQ_UID] == t.requester_uid and a[M.A_REQ_NAME] == t.requester_name
            assert a[M.A_NAMESPACE] == t.namespace
            assert a[M.A_MIN] <= (s.end_ns - s.start_ns) / 1e9 <= a[M.A_MAX]
            assert a[M.A_START_SRC] and a[M.A_END_SRC]
            assert a.get(M.A_METRIC) == M.SPANS_BY_NAME[s.name].metric
            if path != M.COLD_NO_FMA:
                # a reclaiming delete's span names the instance it deleted
                victim = s.name == "fma.dpc.delete_instance"
                assert a[M.A_LAUNCHER] == t.launcher_name and (victim or a[M.A_INSTANCE] == t.instance_id)
                assert a[M.A_ISC] == t.isc_name
            if path == M.WARM:
                assert a[M.A_DELETED] == t.instances_deleted
        root = spans[0]
        assert root.name == M.ROOT and root.parent_span_id is None
        assert root.attributes[M.A_COMPLETE] is True
        assert root.attributes[M.A_HOT_HIT] is (path == M.HOT)
        assert root.attributes[M.A_WARM_HIT] is (path == M.WARM)
        assert root.attributes[M.A_POD_UID] == t.requester_uid
        if t.dpc_actuation_secs is not None:
            assert root.attributes[M.A_DPC_SECS] == pytest.approx(t.dpc_actuation_secs)


def test_cold_tree_literal_values(sample_result, truth) -> None:
    """One tree spelled out to the microsecond, so a reader can check the arithmetic."""
    key = next(k for k, t in truth.items() if t.path == "cold_launcher" and t.complete and "/" not in k)
    t = truth[key]
    spans = {s.name: s for s in _trace_of(sample_result, key)}
    i = t.instants
    create = spans["fma.dpc.create_instance"]
    assert create.end_ns - create.start_ns == i["D.create.end"] - i["D.create.start"]
    assert round((create.end_ns - create.start_ns) / 1e3) == round(
        (i["D.create.end"] - i["D.create.start"]) / 1e3
    )
    assert spans["fma.launcher.create_instance"].parent_span_id == create.span_id
    assert spans["fma.launcher.create_instance"].service == M.SERVICE_LAUNCHER
    assert spans["fma.launcher.schedule"].service == M.SERVICE_K8S
    assert spans["fma.instance.ready"].parent_span_id == spans["fma.launcher.cold_start"].span_id
    assert spans["fma.launcher.cold_start"].parent_span_id == spans["fma.actuation"].span_id
    react = spans["fma.dpc.react"]
    # the kubelet's Ready second, cut from above by the DPC's first call to the launcher
    assert react.attributes[M.A_START_SRC] == "k8s:Ready + dpc:HTTP call done/list_instances/start"
    assert react.attributes[M.A_END_SRC] == "dpc:HTTP call done/create_instance"
    # a 1 s boundary (its point at the second's start) on one side, 1 ns on the other, on
    # two clocks: 1 ms of tolerance each way
    d = (react.end_ns - react.start_ns) / 1e9
    assert react.attributes[M.A_MAX] == pytest.approx(d + 0.001, abs=1e-9)
    assert react.attributes[M.A_MIN] == pytest.approx(d - 1 + 1e-9 - 0.001, abs=1e-9)


def test_golden_dump(sample_result) -> None:
    text = dump_traces(s for t in sample_result.traces for s in t) + "\n"
    if not GOLDEN.exists():  # first run writes it; it is committed and compared thereafter
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_incomplete_actuation(sample_result, truth) -> None:
    key = next(k for k, t in truth.items() if not t.complete)
    act = _by_key(sample_result)[key]
    assert not act.complete
    spans = {s.name: s for s in _trace_of(sample_result, key)}
    root = spans[M.ROOT]
    assert root.attributes[M.A_COMPLETE] is False
    assert root.status_code == M.STATUS_ERROR and "R.ready" in root.status_message
    last = max(i.t_ns for i in act.instants.values())
    assert root.end_ns == last
    # spans whose end was never seen end at the last instant, marked
    vready = spans["fma.vllm.ready"]
    assert vready.end_ns == last and vready.status_code == M.STATUS_ERROR
    assert "V.ready" in vready.status_message
    # nothing after the data ends is invented
    assert "fma.readiness.relay" not in spans and "fma.kubelet.probe" not in spans
    assert "fma.dpc.poll_lag" not in spans and "fma.dpc.relay_ready" not in spans
    # spans that did finish are ordinary
    assert spans["fma.dpc.create_instance"].status_code == M.STATUS_UNSET


def test_no_secret_reaches_the_output(sample_result, tmp_path) -> None:
    from fma_otel.sinks.otlp_json import write_trace_line

    raw = "".join(p.read_text() for p in sample_dir().rglob("*") if p.is_file())
    assert "hf_synthSECRET" in raw, "the sample must hold a secret for this test to mean anything"
    out = tmp_path / "t.jsonl"
    with out.open("w") as fh:
        for t in sample_result.traces:
            write_trace_line(fh, t)
    assert "hf_synthSECRET" not in out.read_text()
    assert "HF_TOKEN" not in out.read_text()


# ----------------------------------------------------------------------------- replays


def _run_dir(d: Path, selector={"app": "vllm"}):  # noqa: B006
    return run_bridge(inputs_from_capture(d), baseline_selector=selector)


def _dump(result) -> str:
    return dump_traces(s for t in result.traces for s in t)


def _write_list(path: Path, items: list) -> None:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=2))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replay_shuffled_and_duplicated_pods(tmp_path, sample_result, seed) -> None:
    """kspan's habit: the same capture in several orders gives the identical tree dump."""
    events = (sample_dir() / "pods.json").read_text().splitlines()
    rng = random.Random(seed)
    mixed = events + rng.sample(events, k=len(events) // 2)
    rng.shuffle(mixed)
    d = tmp_path / "cap"
    shutil.copytree(sample_dir(), d, ignore=shutil.ignore_patterns("pods.json"))
    (d / "pods.json").write_text("\n".join(mixed) + "\n")
    assert _dump(_run_dir(d)) == _dump(sample_result)


def test_replay_as_a_list_of_items_in_any_order(tmp_path) -> None:
    """The same capture as a List (newest states only), items shuffled and duplicated."""
    cap = synth_capture(seed=0)
    d = tmp_path / "cap"
    write_capture(cap, d)
    ref = _dump(_run_dir(d))
    items = json.loads((d / "pods.json").read_text())["items"]
    for seed in (5, 6):
        rng = random.Random(seed)
        mixed = items + rng.sample(items, k=len(items) // 2)
        rng.shuffle(mixed)
        _write_list(d / "pods.json", mixed)
        assert _dump(_run_dir(d)) == ref


def test_watch_stream_form_and_timestamps_prefix(tmp_path, true_instants) -> None:
    cap = synth_capture(seed=0)
    plain, watch = tmp_path / "plain", tmp_path / "watch"
    write_capture(cap, plain)
    write_capture(cap, watch, timestamps=True, pods_form="watch")
    a, b = _run_dir(plain), _run_dir(watch)
    truth_watch = {t.key: t for t in load_truth(watch / "truth.json")}
    # the watch stream shows the first actuation's Ready too: it is complete there
    for act in b.actuations:
        exp = dict(truth_watch[act.key].instants_for("watch"))
        assert_instants_match(act, exp, true_instants[act.key])
    # traces not touched by that extra knowledge are identical, prefix or not
    differs = {
        act.key for act in b.actuations if "R.ready" in act.instants and not _by_key(a)[act.key].complete
    }
    assert len(differs) == 1
    keep_a = [t for t in a.traces if t[0].attributes[M.A_ACTUATION_KEY] not in differs]
    keep_b = [t for t in b.traces if t[0].attributes[M.A_ACTUATION_KEY] not in differs]
    assert dump_traces(s for t in keep_a for s in t) == dump_traces(s for t in keep_b for s in t)


def test_reading_order_of_events_does_not_matter(tmp_path) -> None:
    """A watch stream replayed backwards keeps the newest state per Pod (by resourceVersion)."""
    cap = synth_capture(seed=4)
    d = tmp_path / "w"
    write_capture(cap, d, pods_form="watch")
    fwd = _run_dir(d)
    text = (d / "pods.json").read_text()
    dec = json.JSONDecoder()
    objs, i = [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        o, i = dec.raw_decode(text, i)
        objs.append(o)
    (d / "pods.json").write_text("\n".join(json.dumps(o) for o in reversed(objs)))
    assert _dump(_run_dir(d)) == _dump(fwd)


def test_bigger_capture_matches_truth(tmp_path) -> None:
    cap, true = synth_capture_with_true_instants(n=30, seed=7)
    write_capture(cap, tmp_path)
    res = _run_dir(tmp_path)
    acts = _by_key(res)
    for t in load_truth(tmp_path / "truth.json"):
        assert_instants_match(acts[t.key], expected_instants(t), true[t.key])
        assert acts[t.key].path == t.path


def test_no_baseline_selector_means_no_baseline_trace(tmp_path) -> None:
    res = run_bridge(inputs_from_capture(sample_dir()))
    assert M.COLD_NO_FMA not in {a.path for a in res.actuations}


def test_bare_inputs_without_launcher_logs_leave_launcher_spans_out() -> None:
    d = sample_dir()
    res = run_bridge(BridgeInputs([str(d / "pods.json")], str(d / "dpc.log")))
    names = {s.name for t in res.traces for s in t}
    assert "fma.launcher.create_instance" not in names and "fma.instance.create" not in names
    assert "fma.dpc.create_instance" in names


def test_a_launcher_log_without_creates_is_read_and_a_foreign_file_refused(tmp_path: Path) -> None:
    """A launcher log's lines that hold no create are passed over unread: a log with none is
    still a launcher log (its first line says so), while another file in its place is refused."""
    d = sample_dir()
    quiet = tmp_path / "quiet.log"
    quiet.write_bytes(b"2026-06-29 14:30:00,000 - launcher - INFO - started\n  more\n")
    inputs = BridgeInputs([str(d / "pods.json")], str(d / "dpc.log"), {"launcher-example-4lgw5": str(quiet)})
    res = run_bridge(inputs)
    st = next(s for s in res.stats if s.name == str(quiet))
    assert (st.read, st.understood, st.ignored, st.skipped) == (2, 0, 2, 0)
    inputs.launcher_logs["launcher-example-4lgw5"] = str(d / "pods.json")
    with pytest.raises(InputError, match="not a launcher log"):
        run_bridge(inputs)


@pytest.mark.parametrize("end", [b"\n", b"\r"])
def test_a_log_none_of_whose_lines_is_used_is_told_by_its_first_line_as_its_reader_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end: bytes
) -> None:
    """A log whose lines were all passed over is told by its first non-blank line, read as
    its reader reads lines (any line end; a line past the bound passed over): a first line
    past the bound, or a CR-only log longer than it, was ``TooLong`` there, and ``.strip()``
    on it crashed the bridge (the bound made small so that the test holds no 16 MiB)."""
    from fma_otel import bridge as B

    monkeypatch.setattr(B, "MAX_LINE_BYTES", 64)
    d = sample_dir()
    quiet = tmp_path / "quiet.log"
    header = b"2026-06-29 14:30:00,000 - launcher - INFO - started"
    first = b"x" * 100 + end if end == b"\n" else b""
    quiet.write_bytes(first + (header + end + b"  more" + end) * 3)
    inputs = BridgeInputs([str(d / "pods.json")], str(d / "dpc.log"), {"launcher-example-4lgw5": str(quiet)})
    res = run_bridge(inputs)
    st = next(s for s in res.stats if s.name == str(quiet))
    assert (st.read, st.understood, st.skipped) == (6 + bool(first), 0, 0) and st.ignored == st.read
    quiet.write_bytes(first + b'{"kind": "PodList"}' + end + b"x" * 100 + end)  # not a launcher log
    with pytest.raises(InputError, match="not a launcher log"):
        run_bridge(inputs)


def test_traces_are_built_one_at_a_time_as_they_are_asked_for(monkeypatch) -> None:
    """Memory is bounded by what the correlator keeps, not by the output: reading builds no
    trace, and each step of ``iter_traces`` builds exactly one (nothing built ahead)."""
    from fma_otel import bridge as B

    built: list[str] = []
    real = B.build_trace

    def spy(act):
        built.append(act.key)
        return real(act)

    monkeypatch.setattr(B, "build_trace", spy)
    res = run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})
    assert built == []
    it = res.iter_traces()
    act, trace = next(it)
    assert built == [act.key] and trace[0].attributes[M.A_ACTUATION_KEY] == act.key
    rest = list(it)
    assert len(built) == 1 + len(rest) == 6
    assert [a.key for a, _ in [(act, trace), *rest]] == built
