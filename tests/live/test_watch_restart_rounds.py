"""A requester actuated three times or more keeps its round numbers across watcher restarts.

A restart rebuilds open actuations from a replay of the DPC log that starts at the
checkpoint's ``replay_from_ns`` (the oldest open actuation's first instant minus a margin),
so a requester's earlier unbinds are not re-read.  Counted afresh, its third round would be
keyed ``uid/2`` (already emitted) and never emitted; the checkpoint's ``rounds`` entry seeds
the count.  Each scenario runs the real watcher against the test API server (real
``kubernetes`` client), stops or kills it, changes the cluster, and restarts it on the same
checkpoint; the traces it writes must be every round exactly once, each with its own key,
and each tree equal to what one uninterrupted correlator builds from all the data.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from fma_otel import model as M
from fma_otel.build import build_trace
from fma_otel.correlate import Correlator
from fma_otel.live import checkpoint as CP
from fma_otel.sources.klog import parse_klog_line
from fma_otel.sources.records import PodEvent
from fma_otel.span_records import SpanRecord
from tests.live.replay import DPC_POD, NS, InProcessWatcher, dpc_pod, traces_in, tree, wait_for
from tests.live.test_watch_crash import kill9, lists, start_watch, started
from tests.support import synth
from tests.support.k8s_server import FakeCluster

S = M.S
UID = "5b0e6c1e-0d7a-4c55-9a43-3f1d2b7e0c11"
NAME = "my-request-rounds-x7k2p"
CTX = f'worker=0 node="gpu-node-1" serverUID="{UID}" requesterName="{NAME}"'
MARGIN_S = 30.0  # --replay-margin: the first unbind lies well before the replay point


class Scenario:
    """One requester on the test API server, actuated (hot) round after round.

    Times are offsets in seconds from ``t0`` (a few minutes ago); every Pod state and DPC
    line is also kept, so :meth:`expected` can build the traces from all of it at once.
    """

    def __init__(self, k8s: FakeCluster | None) -> None:
        self.k8s = k8s  # None: only kept (for correlator-only tests)
        self.t0 = (int(time.time()) - 400) * S
        self.pods: list[dict[str, Any]] = []
        self.lines: list[str] = []
        self.ready: tuple[bool, int] = (False, 1)

    def at(self, s: float) -> int:
        return self.t0 + int(s * S)

    def pod(self) -> dict[str, Any]:
        """The requester as it is now (Pod status keeps only the newest Ready transition)."""
        k8s_time = synth.k8s_time
        ready, since = self.ready
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": NAME,
                "namespace": NS,
                "uid": UID,
                "creationTimestamp": k8s_time(self.at(0)),
                "annotations": {"dual-pods.llm-d.ai/inference-server-config": "example"},
                "labels": {"dual-pods.llm-d.ai/dual": "launcher-1"},
            },
            "spec": {"nodeName": "gpu-node-1", "containers": [{"name": "inference-server", "image": "x"}]},
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": k8s_time(self.at(1))},
                    {
                        "type": "Ready",
                        "status": "True" if ready else "False",
                        "lastTransitionTime": k8s_time(self.at(since)),
                    },
                ],
                "containerStatuses": [
                    {
                        "name": "inference-server",
                        "ready": ready,
                        "restartCount": 0,
                        "state": {"running": {"startedAt": k8s_time(self.at(2))}},
                    }
                ],
            },
        }

    def set_ready(self, ready: bool, s: float) -> None:
        self.ready = (ready, s)
        pod = self.pod()
        if self.k8s is None:
            pod["metadata"]["resourceVersion"] = str(len(self.pods) + 1)
        else:
            pod = self.k8s.apply_pod(pod)
        self.pods.append(pod)

    def dpc(self, s: float, msg: str, kv: str) -> int:
        t = self.at(s)
        line = f'I{synth.klog_time(t)}       1 inference-server.go:1] "{msg}" {CTX} {kv}'
        self.lines.append(line)
        if self.k8s is not None:
            self.k8s.append_log(DPC_POD, "controller", line, namespace=NS, ts_ns=t)
        return t

    def bind(self, s: float) -> int:
        """The DPC binds the requester to a sleeping instance (a hot start begins)."""
        return self.dpc(s, "Bound server-providing Pod", 'name="l1" instanceID="I1"')

    def serve(self, s: float) -> None:
        """It wakes the instance and relays readiness; the requester turns Ready."""
        start = synth.rfc3339nano(self.at(s))
        self.dpc(
            s + 1,
            "HTTP call done",
            f'purpose="wake" method="POST" url="http://x" httpCallStartTime="{start}" latencySecs=1'
            " statusCode=200 err=null",
        )
        self.dpc(s + 2, "Successfully relayed the readiness", 'readiness="ready" url="u"')
        self.set_ready(True, s + 3)

    def unbind(self, s: float) -> int:
        t = self.dpc(s, "Unbound server-providing Pod", 'name="l1"')
        self.set_ready(False, s + 1)
        return t

    def start(self) -> None:
        self.set_ready(False, 1)

    def correlator(
        self, since_ns: int = -(1 << 62), seeds: dict[str, Any] | None = None, until_ns: int = 1 << 62
    ) -> Correlator:
        """A correlator given every Pod state and the lines from ``since_ns`` to ``until_ns``."""
        c = Correlator()
        for uid, seed in (seeds or {}).items():
            c.seed_round(uid, *seed)
        for p in self.pods:
            c.add_pod(PodEvent("MODIFIED", p))
        for i, line in enumerate(self.lines, 1):
            rec = parse_klog_line(line, i)
            assert rec is not None
            if since_ns <= c.years.resolve(rec) <= until_ns:
                c.add_dpc(rec)
        return c

    def expected(self) -> dict[str, list[SpanRecord]]:
        """Key -> trace, from one correlator given every Pod state and every line."""
        return {a.key: build_trace(a) for a in self.correlator().actuations() if a.complete}


def key(n: int) -> str:
    return M.actuation_key(UID, n)


def tid(n: int) -> str:
    """The trace id of round ``n``, derived as span-model.md says (the project's function)."""
    return M.trace_id_for(key(n))


def dpc_read_past(w: InProcessWatcher, t_ns: int) -> bool:
    pos = w.watcher.state.positions.get(f"{DPC_POD}/controller")
    return pos is not None and pos.ts_ns >= t_ns


def assert_rounds(out: Path, want: dict[str, list[SpanRecord]], rounds: int) -> None:
    """``out`` holds rounds 1..``rounds``, each once (``traces_in`` asserts that), as built."""
    live = traces_in(out)
    assert sorted(live) == sorted(tid(n) for n in range(1, rounds + 1)), {
        t: live[t][0].attributes.get("fma.requester.uid") for t in live
    }
    for n in range(1, rounds + 1):
        assert tree(live[tid(n)]) == tree(want[key(n)]), f"round {n} differs"


def run(k8s: FakeCluster, tmp: Path) -> InProcessWatcher:
    """A watcher on the same checkpoint, once the previous one's streams are closed on the
    server too (``InProcessWatcher`` waits for one more open stream than it finds)."""
    k8s.drop_connections()  # (the stopped watcher's are only noticed at the next write)
    assert wait_for(lambda: k8s.open_streams("watch") == 0 and k8s.open_streams("log") == 0, 30)
    return InProcessWatcher(k8s, tmp, replay_margin_s=MARGIN_S)


def checkpoint(tmp: Path) -> dict[str, Any]:
    return json.loads((tmp / "checkpoint.json").read_text())


def checkpoint_read_past(path: str | Path, t_ns: int) -> bool:
    """Whether the checkpoint at ``path`` records the DPC log read up to ``t_ns`` or later."""
    try:
        logs = json.loads(Path(path).read_text())["logs"]
    except (OSError, ValueError, KeyError):
        return False
    return logs.get(f"{DPC_POD}/controller", {}).get("ts_ns", 0) >= t_ns


def first_two_rounds_then_a_third_bound(sc: Scenario, w: InProcessWatcher, out: Path) -> dict[str, int]:
    """Rounds 1 and 2 (emitted), round 3 bound and still open."""
    sc.start()
    sc.bind(3)
    sc.serve(4)
    u1 = sc.unbind(100)
    sc.bind(110)
    sc.serve(111)
    assert wait_for(lambda: len(traces_in(out)) >= 2, 30), traces_in(out).keys()
    u2 = sc.unbind(200)
    b3 = sc.bind(210)
    assert wait_for(lambda: dpc_read_past(w, b3), 30)
    # a checkpoint with round 3 open: one written after the watcher read its bind
    assert wait_for(lambda: checkpoint_read_past(w.cfg.checkpoint, b3), 30)
    return {"u1": u1, "u2": u2, "b3": b3}


@pytest.mark.slow
@pytest.mark.parametrize("replay_from", ["as-written", "past-both-unbinds"])
def test_third_round_open_across_a_restart_is_emitted_once_with_its_key(
    k8s: FakeCluster, tmp_path: Path, replay_from: str
) -> None:
    """Stopped while round 3 is open; round 3 finishes after the restart.

    ``as-written``: the checkpoint the watcher wrote, whose replay point lies after the
    first unbind (it cannot lie after the second: that is where round 3 begins).
    ``past-both-unbinds``: the replay point moved past both unbinds (as if the log before
    it were lost), so round 3's own start is known only from the checkpoint.
    """
    k8s.add_pod(dpc_pod())
    sc = Scenario(k8s)
    out = tmp_path / "out.jsonl"
    with run(k8s, tmp_path) as w:
        t = first_two_rounds_then_a_third_bound(sc, w, out)
    cp = checkpoint(tmp_path)
    assert t["u1"] < cp["replay_from_ns"] < t["u2"]
    assert set(cp["emitted"]) == {key(1), key(2)}
    if replay_from == "past-both-unbinds":
        cp["replay_from_ns"] = t["u2"] + S
        (tmp_path / "checkpoint.json").write_text(json.dumps(cp))

    with run(k8s, tmp_path) as w:
        sc.serve(211)
        assert wait_for(lambda: tid(3) in traces_in(out), 20), "round 3 was never emitted"
        time.sleep(1.0)  # nothing more may come
    assert_rounds(out, sc.expected(), 3)
    cp = checkpoint(tmp_path)
    assert set(cp["emitted"]) == {key(1), key(2), key(3)} and cp["pending"] == []
    assert cp["rounds"] == {UID: {"round": 3, "unbound_ns": t["u2"], "begun": True}}


@pytest.mark.slow
def test_a_round_begun_while_the_watcher_was_down_keeps_counting(k8s: FakeCluster, tmp_path: Path) -> None:
    """Stopped with every round out; round 4 happens entirely while it is down."""
    k8s.add_pod(dpc_pod())
    sc = Scenario(k8s)
    out = tmp_path / "out.jsonl"
    with run(k8s, tmp_path) as w:
        first_two_rounds_then_a_third_bound(sc, w, out)
        sc.serve(211)
        assert wait_for(lambda: tid(3) in traces_in(out), 30)
    assert checkpoint(tmp_path)["replay_from_ns"] > sc.at(220)
    sc.unbind(250)
    sc.bind(260)
    sc.serve(261)
    with run(k8s, tmp_path):
        assert wait_for(lambda: tid(4) in traces_in(out), 20), "round 4 was never emitted"
        time.sleep(1.0)
    assert_rounds(out, sc.expected(), 4)
    assert checkpoint(tmp_path)["rounds"][UID]["round"] == 4


@pytest.mark.slow
def test_requester_deleted_while_down_its_third_round_keeps_its_key(k8s: FakeCluster, tmp_path: Path) -> None:
    """Round 3 finishes, the DPC unbinds the requester and it is deleted, all while down."""
    k8s.add_pod(dpc_pod())
    sc = Scenario(k8s)
    out = tmp_path / "out.jsonl"
    with run(k8s, tmp_path) as w:
        first_two_rounds_then_a_third_bound(sc, w, out)
    sc.serve(211)
    u3 = sc.unbind(250)
    k8s.delete_pod(NAME, NS)
    with run(k8s, tmp_path):
        assert wait_for(lambda: tid(3) in traces_in(out), 20), "round 3 was never emitted"
        time.sleep(1.0)
    assert_rounds(out, sc.expected(), 3)
    cp = checkpoint(tmp_path)
    # the Pod is gone but its keys are remembered, so is its count (round 4 would begin at u3)
    assert cp["rounds"] == {UID: {"round": 4, "unbound_ns": u3, "begun": False}}


@pytest.mark.slow
def test_sigkill_while_the_third_round_is_open(k8s: FakeCluster, tmp_path: Path) -> None:
    """The real ``fma-otel watch`` process, SIGKILLed while round 3 is open, restarted."""
    k8s.add_pod(dpc_pod())
    sc = Scenario(k8s)
    out = tmp_path / "out.jsonl"
    cp_file = tmp_path / "cp" / "checkpoint.json"
    margin = ("--replay-margin", f"{int(MARGIN_S)}s")
    p = start_watch(k8s, tmp_path, *margin)
    assert k8s.wait_for_streams("watch", 1, 60) and k8s.wait_for_streams("log", 1, 60)
    sc.start()
    sc.bind(3)
    sc.serve(4)
    u1 = sc.unbind(100)
    sc.bind(110)
    sc.serve(111)
    assert wait_for(lambda: len(traces_in(out)) >= 2, 60)
    u2 = sc.unbind(200)
    b3 = sc.bind(210)

    assert wait_for(lambda: checkpoint_read_past(cp_file, b3), 60)
    kill9(p)
    replay = json.loads(cp_file.read_text())["replay_from_ns"]
    assert u1 < replay < u2

    before = lists(k8s)
    p = start_watch(k8s, tmp_path, *margin)
    assert started(k8s, before)
    sc.serve(211)
    assert wait_for(lambda: tid(3) in traces_in(out), 30), "round 3 was never emitted"
    time.sleep(1.0)
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 0, p.stderr.read().decode() if p.stderr else ""
    assert_rounds(out, sc.expected(), 3)


# ---------------------------------------------------------------------- the seeded count


def _rounds_played(k8s: FakeCluster | None = None, last_bound: bool = True) -> Scenario:
    """Rounds 1-3 served, round 4 bound (or, ``last_bound=False``, only unbound after 3)."""
    sc = Scenario(k8s)
    sc.start()
    for i, s in enumerate((0, 100, 200)):
        if i:
            sc.unbind(s)
        sc.bind(s + 3)
        sc.serve(s + 4)
    sc.unbind(300)
    if last_bound:
        sc.bind(310)
    return sc


def _summary(c: Correlator) -> list[tuple[str, int | None, bool]]:
    out = []
    for a in c.actuations():
        unbound = a.instants.get("D.unbound")
        out.append((a.key, unbound.t_ns if unbound else None, a.complete))
    return out


@pytest.mark.parametrize("last_bound", [True, False], ids=["round-4-bound", "unbound-after-3"])
def test_a_seed_from_the_full_count_keeps_every_key_of_any_replay(last_bound: bool) -> None:
    """Seeded with the anchor a correlator that saw everything gives, one that sees only the
    lines from some instant on numbers every round it sees as the first one did, and a
    round whose start it did not re-read keeps it from the seed."""
    sc = _rounds_played(None, last_bound)
    full = sc.correlator()
    anchors = full.round_anchors()
    want = {k: (u, done) for k, u, done in _summary(full)}
    assert len(want) == (4 if last_bound else 3)
    assert anchors == {UID: (4, sc.at(300), last_bound)}
    assert _summary(sc.correlator(seeds=anchors)) == _summary(full)
    for cut in (50, 100.5, 150, 200.5, 250, 300, 305, 300.5, 400):
        part = sc.correlator(sc.at(cut), anchors)
        got = {k: (u, done) for k, u, done in _summary(part)}
        assert set(got) <= set(want), cut
        # the last round is always there, with its number and its start
        assert got.get(key(4)) == want.get(key(4)), cut
        # rounds it saw every line of are as they were
        starts = {1: None, 2: sc.at(100), 3: sc.at(200), 4: sc.at(300)}
        for n, lo in starts.items():
            if (lo or sc.at(0)) >= sc.at(cut) and key(n) in want:
                assert got[key(n)][0] == want[key(n)][0], (cut, n)
        assert part.round_anchors() == anchors, cut


@pytest.mark.parametrize("saved", [5, 150, 205, 250, 305, 400])
def test_a_seed_written_earlier_keeps_the_keys_of_rounds_begun_since(saved: float) -> None:
    """The anchor of a checkpoint written at ``saved`` (lines up to it seen), and a restart
    that re-reads from any instant up to it: every round begun after the replay point is
    keyed and started as by a correlator that saw everything."""
    sc = _rounds_played(None)
    want = {k: u for k, u, _d in _summary(sc.correlator())}
    seeds = sc.correlator(until_ns=sc.at(saved)).round_anchors()
    for cut in [c for c in (0, 50, 100.5, 150, 200.5, 250, 300.5, 305, 400) if c <= saved]:
        got = {k: u for k, u, _d in _summary(sc.correlator(sc.at(cut), seeds))}
        assert set(got) <= set(want), (cut, got)
        for k, u in want.items():
            if u is not None and u >= sc.at(cut):
                assert got.get(k) == u, (cut, k)


def test_a_seeded_round_whose_lines_are_not_re_read_still_counts() -> None:
    """Round 3 is out and none of its lines is re-read; the next round is 4, not 3."""
    sc = _rounds_played(None, last_bound=False)
    c = sc.correlator(sc.at(299), {UID: (3, sc.at(200), True)})
    sc.bind(310)
    rec = parse_klog_line(sc.lines[-1], 999)
    assert rec is not None
    c.add_dpc(rec)
    assert [k for k, _u, _d in _summary(c)] == [key(3), key(4)]
    assert c.round_anchors() == {UID: (4, sc.at(300), True)}


def test_unseeded_counting_is_unchanged() -> None:
    sc = _rounds_played(None)
    assert [k for k, _u, _d in _summary(sc.correlator())] == [key(1), key(2), key(3), key(4)]
    # counted afresh from a replay that misses the first unbinds: the bug the seed fixes
    assert [k for k, _u, _d in _summary(sc.correlator(sc.at(150)))] == [key(1), key(2), key(3)]


# ---------------------------------------------------------------------- the checkpoint field

OLD = {
    "version": 1,
    "namespace": "ns",
    "savedAt": 1780000000.5,
    "pods": {"resourceVersion": "12345"},
    "logs": {},
    "replay_from_ns": 1779999000000000000,
    "pending": [],
    "pending_traces": {},
    "emitted": {"u-1": 1780000000.25, "u-1/2": 1780000001.0},
}


def test_a_checkpoint_without_rounds_loads_and_counts_afresh(tmp_path: Path) -> None:
    p = tmp_path / "cp.json"
    p.write_text(json.dumps(OLD))
    cp = CP.load(str(p))
    assert cp.rounds == {} and cp.to_json() == OLD  # nor is the field written while empty


def test_rounds_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "cp.json"
    doc = dict(OLD, rounds={"u-1": {"round": 3, "unbound_ns": 1779999500000000000, "begun": True}})
    p.write_text(json.dumps(doc))
    cp = CP.load(str(p))
    assert cp.rounds == {"u-1": (3, 1779999500000000000, True)}
    CP.save(str(p), cp)
    assert CP.load(str(p)).rounds == cp.rounds
    no_begun = dict(OLD, rounds={"u-1": {"round": 2, "unbound_ns": 5}})
    p.write_text(json.dumps(no_begun))
    assert CP.load(str(p)).rounds == {"u-1": (2, 5, True)}


@pytest.mark.parametrize(
    "entry",
    [
        [3, 5],
        {"round": 1, "unbound_ns": 5},
        {"round": "x", "unbound_ns": 5},
        {"round": 3},
        {"round": 3, "unbound_ns": "9" * 400},
        {"round": 3, "unbound_ns": 5, "begun": "yes"},
    ],
    ids=["a-list", "round-1", "round-x", "no-unbound_ns", "unbound_ns-400-digits", "begun-a-string"],
)
def test_a_malformed_rounds_entry_is_refused(tmp_path: Path, entry: Any) -> None:
    p = tmp_path / "cp.json"
    p.write_text(json.dumps(dict(OLD, rounds={"u-1": entry})))
    with pytest.raises(ValueError, match=r"^rounds"):
        CP.load(str(p))


@pytest.mark.slow
def test_pruned_with_the_pods_keys(k8s: FakeCluster, tmp_path: Path) -> None:
    """An entry stays while its Pod is live or any of its keys is remembered."""
    cp = dict(OLD, namespace=NS, emitted={"gone-kept/2": time.time()}, replay_from_ns=None)
    cp["rounds"] = {
        "gone-kept": {"round": 3, "unbound_ns": 5, "begun": True},
        "gone-no-keys": {"round": 2, "unbound_ns": 5, "begun": False},
    }
    (tmp_path / "checkpoint.json").write_text(json.dumps(cp))
    k8s.add_pod(dpc_pod())
    with InProcessWatcher(k8s, tmp_path) as w:
        assert wait_for(lambda: set(checkpoint(tmp_path).get("rounds") or ()) == {"gone-kept"}, 10)
    assert set(checkpoint(tmp_path)["rounds"]) == {"gone-kept"}
    assert set(w.watcher.correlator.round_anchors()) == {"gone-kept"}
