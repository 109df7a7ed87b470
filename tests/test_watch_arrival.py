"""A live watch event's arrival bounds the change it shows from above, only where it narrows.

Issue 21: "a later observer's time is an upper bound (... a live watch event's arrival bounds
the change it reports)".  The live watcher must still give the offline trace wherever the
arrival adds nothing (a replay of old Pods), so the bound is used, and named, only where it
cuts the fused interval.  These tests drive the rule in ``bounding`` and its wiring in the
correlator with arrivals given by hand; ``tests/live/test_watch_arrival.py`` drives it
through a real watch.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from fma_otel import model as M
from fma_otel import podfacts as P
from fma_otel.bounding import Bounds
from fma_otel.bridge import inputs_from_capture, run_bridge
from fma_otel.correlate import WATCH_ARRIVAL, Actuation, Correlator
from fma_otel.model import MS, US, S
from tests.support import synth

T = 1_760_000_000 * S  # a whole second
ARRIVAL = "watch:arrival"


def _ready_bounds(arrival_ns: int | None, clock: str = M.CLOCK_WATCHER) -> Bounds:
    b = Bounds()
    b.k8s("R.ready", T, "k8s:Ready", M.CLOCK_KUBELET)
    b.before_if_narrows("R.ready", arrival_ns, ARRIVAL, clock, US)
    return b


def test_an_arrival_that_does_not_narrow_is_not_listed() -> None:
    f = _ready_bounds(T + 2 * S).fuse_all().instants["R.ready"]
    assert f.source == "k8s:Ready"
    assert (f.lo, f.hi) == (T, T + S - 1)


def test_an_arrival_within_the_second_cuts_it_and_is_named() -> None:
    f = _ready_bounds(T + 300 * MS).fuse_all().instants["R.ready"]
    assert f.source == "k8s:Ready + " + ARRIVAL
    # µs slack for the watcher's float clock, then the tolerance to the kubelet's clock
    assert (f.lo, f.hi, f.t_ns) == (T, T + 300 * MS + US - 1 + MS, T)


def test_narrowing_is_judged_after_the_clock_tolerance() -> None:
    """Widened by 1 ms (another clock), an arrival that only reaches the second's end is no
    bound; one nanosecond earlier it is."""
    edge = T + S - US - MS  # widened, its upper end is exactly the second's last ns
    assert _ready_bounds(edge).fuse_all().instants["R.ready"].source == "k8s:Ready"
    cut = _ready_bounds(edge - 1).fuse_all().instants["R.ready"]
    assert cut.source == "k8s:Ready + " + ARRIVAL and cut.hi == T + S - 2
    # on the kubelet's own clock no tolerance applies
    same = _ready_bounds(T + S - US - MS, clock=M.CLOCK_KUBELET).fuse_all().instants["R.ready"]
    assert same.source == "k8s:Ready + " + ARRIVAL and same.hi == T + S - MS - 1


def test_an_arrival_alone_makes_no_instant() -> None:
    """Nothing to narrow: an instant no other source bounds stays missing (as offline)."""
    b = Bounds()
    b.before_if_narrows("R.ready", T, ARRIVAL, M.CLOCK_WATCHER, US)
    fusion = b.fuse_all()
    assert "R.ready" not in fusion.instants and "R.ready" not in fusion.partial


def test_an_arrival_before_the_change_conflicts_and_is_reported() -> None:
    """A watcher clock far behind the kubelet's: the arrival is dropped and the instant says
    so, as for any source beyond the tolerance."""
    f = _ready_bounds(T - 5 * MS).fuse_all().instants["R.ready"]
    assert f.source == "k8s:Ready" and f.inconsistent
    assert ARRIVAL in f.disagreed


def test_the_order_bound_still_applies_with_an_arrival() -> None:
    """An arrival cuts from above, the causal order from below: both are named."""
    b = Bounds()
    b.log_time("R.scheduled", T + 400 * MS, "dpc:x")
    b.k8s("R.started", T, "k8s:startedAt", M.CLOCK_KUBELET)
    b.before_if_narrows("R.started", T + 600 * MS, ARRIVAL, M.CLOCK_WATCHER, US)
    f = b.fuse_all().instants["R.started"]
    assert f.source == "k8s:startedAt + order:after R.scheduled + " + ARRIVAL
    assert (f.lo, f.hi) == (T + 400 * MS - MS, T + 600 * MS + US - 1 + MS)


# --------------------------------------------------------------------------- the correlator


def _cold(tmp_path: Path) -> tuple[Any, dict[str, int], synth.Capture]:
    cap, truth = synth.synth_capture_with_true_instants(
        n=1, seed=4, paths=["cold_launcher"], incomplete=0, baseline=0, reactuated=0, noise=False
    )
    synth.write_capture(cap, tmp_path / "cap", timestamps=True, pods_form="watch")
    c = run_bridge(inputs_from_capture(tmp_path / "cap")).correlator
    (key,) = truth
    return c, truth[key], cap


def _only(c: Correlator) -> Actuation:
    (a,) = c.actuations()
    return a


def _final(cap: synth.Capture, role: str) -> dict[str, Any]:
    return next(p for p in cap.pods if P.role(p, None) == role)


def test_arrivals_narrow_the_pod_instants_they_show_and_hold_the_truth(tmp_path: Path) -> None:
    c, truth, cap = _cold(tmp_path)
    before = _only(c)
    assert before.path == "cold_launcher"
    launcher, requester = _final(cap, P.ROLE_LAUNCHER), _final(cap, P.ROLE_REQUESTER)
    # each final state arrives 1 µs after its last change (a prompt watch)
    c.add_arrival(launcher, truth["L.ready"] + US)
    c.add_arrival(requester, truth["R.ready"] + US)
    after = _only(c)
    for name in ("L.ready", "R.ready"):
        old, new = before.instants[name], after.instants[name]
        arrival_hi = truth[name] + US + US - 1 + MS
        assert old.hi > arrival_hi, f"{name}: the capture already bounds it as tightly"
        assert new.hi == arrival_hi and new.lo == old.lo
        assert WATCH_ARRIVAL in new.source.split(" + ")
        assert new.lo <= truth[name] <= new.hi
    # instants the arrival does not narrow (changed long before it) are as offline
    for name, old in before.instants.items():
        if name not in ("L.ready", "R.ready"):
            assert after.instants[name] == old, name


def test_a_later_arrival_never_replaces_an_earlier_one(tmp_path: Path) -> None:
    """A re-list after a restart or a 410 sees the state again, later: looser, so unused."""
    c, truth, cap = _cold(tmp_path)
    requester = _final(cap, P.ROLE_REQUESTER)
    c.add_arrival(requester, truth["R.ready"] + US)
    first = _only(c).instants["R.ready"]
    assert first.hi == truth["R.ready"] + US + US - 1 + MS
    c.add_arrival(copy.deepcopy(requester), truth["R.ready"] + 2 * MS)  # would narrow too, alone
    assert _only(c).instants["R.ready"] == first


def test_an_arrival_of_another_ready_transition_is_not_used(tmp_path: Path) -> None:
    """The arrival is kept under the Ready stamp it showed: a state showing another
    transition (a later round, a flap) bounds that one, not the instant taken."""
    c, truth, cap = _cold(tmp_path)
    before = _only(c).instants["R.ready"]
    other = copy.deepcopy(_final(cap, P.ROLE_REQUESTER))
    for cond in other["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["lastTransitionTime"] = synth.k8s_time(before.lo + 7 * S)
    c.add_arrival(other, before.lo + 7 * S + 10 * MS)
    assert _only(c).instants["R.ready"] == before


def test_forget_pod_drops_its_arrivals(tmp_path: Path) -> None:
    c, truth, cap = _cold(tmp_path)
    requester = _final(cap, P.ROLE_REQUESTER)
    c.add_arrival(requester, truth["R.ready"] + US)
    uid = P.uid(requester) or ""
    assert c._arrivals.get(uid)
    c.forget_pod(uid)
    assert uid not in c._arrivals
