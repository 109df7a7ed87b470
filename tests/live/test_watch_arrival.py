"""Through a real watch: a Pod change seen promptly is bounded by the event's arrival.

The fake API server serves a synthetic capture placed so that one change (the requester's
Ready, the launcher's PodScheduled) happens *now*: its whole-second stamp alone leaves up to
a second, and the watch event arriving a moment later cuts that second.  The true instant
(the simulation's) must lie inside, and the source be named.  The other live tests replay
Pods stamped long before they arrive: there the arrival narrows nothing and the live traces
equal the offline ones, byte for byte.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fma_otel import model as M
from fma_otel import podfacts as P
from fma_otel.correlate import Correlator
from tests.live.replay import InProcessWatcher, dpc_pod, play, timeline, traces_in, wait_for
from tests.support import synth
from tests.support.k8s_server import FakeCluster

pytestmark = pytest.mark.slow

S = synth.S
WATCH_ARRIVAL = "watch:arrival"  # the source the contract names (docs/span-model.md)


def _now_capture(path: str, seed: int, instant: str) -> tuple[synth.Capture, dict[str, int]]:
    """A one-actuation capture whose ``instant`` truly happens within the next second, in the
    same fraction of its second as in the default capture (the seeds are picked for a small
    one, so that a prompt arrival cuts the second)."""
    kw = {"n": 1, "seed": seed, "paths": [path], "incomplete": 0, "baseline": 0, "reactuated": 0}
    _, probe = synth.synth_capture_with_true_instants(**kw, noise=False)
    d = next(iter(probe.values()))[instant] - int(synth.DEFAULT_START.timestamp()) * S
    base = time.time_ns() + 50_000_000
    target = base + (d - base) % S
    start = datetime.fromtimestamp((target - d) // S, tz=timezone.utc)
    cap, truth = synth.synth_capture_with_true_instants(**kw, noise=False, start=start)
    (t,) = truth.values()
    assert t[instant] == target and t[instant] % S < S // 3, (
        "pick a seed whose instant is early in its second"
    )
    return cap, t


def _until(t_ns: int) -> None:
    """Wait for the wall clock to pass the true instant: the server then shows the change
    no earlier than it happened."""
    while (left := t_ns - time.time_ns()) > 0:
        time.sleep(left / S)


def test_a_prompt_ready_event_cuts_the_requester_ready_second(k8s: FakeCluster, tmp_path: Path) -> None:
    k8s.add_pod(dpc_pod())
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path):
        cap, truth = _now_capture("hot", 5, "R.ready")
        # the DPC's own notification of the kubelet's write would bound R.ready as tightly
        lines = [(ln, t) for ln, t in zip(cap.dpc_lines, cap.dpc_times, strict=True) if t < truth["R.ready"]]
        cap = dataclasses.replace(cap, dpc_lines=[ln for ln, _ in lines], dpc_times=[t for _, t in lines])
        _until(truth["R.ready"])
        play(k8s, timeline(cap))
        assert wait_for(lambda: len(traces_in(out)) >= 1, 20)
    (trace,) = traces_in(out).values()
    spans = {s.name: s for s in trace}
    for name in ("fma.kubelet.probe", "fma.actuation"):
        s = spans[name]
        assert WATCH_ARRIVAL in str(s.attributes[M.A_END_SRC]).split(" + "), s.attributes
        width = float(s.attributes[M.A_END_PRECISION])
        assert width < 1.0, s.attributes
        # the end is the fused interval's low edge (the Ready second, or the relay call after it)
        assert s.end_ns <= truth["R.ready"] <= s.end_ns + round(width * S), (s.end_ns, width, truth)
    assert spans["fma.request"].attributes["fma.complete"] is True


def test_a_prompt_scheduled_event_cuts_the_launcher_scheduled_second(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    """Cold start: the launcher's PodScheduled arrives at once.  The actuation is not over
    (its later steps are not played), so its instants are read from the correlator once the
    watcher has stopped."""
    k8s.add_pod(dpc_pod())
    iw = InProcessWatcher(k8s, tmp_path)
    with iw:
        cap, truth = _now_capture("cold_launcher", 2, "L.scheduled")
        steps = timeline(cap)
        cut = next(
            i
            for i, s in enumerate(steps)
            if s.kind == "pod"
            and P.role(s.payload[1], None) == P.ROLE_LAUNCHER
            and P.condition_true_ns(s.payload[1], "PodScheduled") is not None
        )
        launcher = steps[cut].payload[1]
        _until(truth["L.scheduled"])
        play(k8s, steps[: cut + 1])
        c = iw.watcher.correlator
        stamp = P.condition_true_ns(launcher, "PodScheduled") or 0
        assert wait_for(
            lambda: (
                ("scheduled", stamp) in c._arrivals.get(P.uid(launcher) or "", {})
                and any(k == "cold" for k in _kinds(c))
            ),
            10,
        )
    (act,) = c.actuations()
    assert act.path == M.COLD_LAUNCHER
    inst = act.instants["L.scheduled"]
    assert WATCH_ARRIVAL in inst.source.split(" + "), inst
    assert inst.hi - inst.lo < S // 2 and inst.lo <= truth["L.scheduled"] <= inst.hi, (inst, truth)
    # L.created, stamped long before it arrived, is as offline: the arrival is not named
    assert WATCH_ARRIVAL not in act.instants["L.created"].source


def _kinds(c: Correlator) -> list[str]:
    """The kinds of the DPC facts the correlator holds (read from the test's thread: a copy)."""
    from fma_otel import facts as F

    out = []
    for facts in list(c._dpc.values()):
        out += ["cold" if f.kind == F.BOUND_COLD else f.kind for f in list(facts)]
    return out
