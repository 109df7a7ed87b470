"""Instants as intervals fused from every source (fma_otel.instants, issue 21).

What these tests hold: each kind of observation bounds an instant exactly as tightly as it
allows (never tighter); fusion is intersection, with a tolerance only between different
clocks; conflicts keep the most precise source and name who disagreed; and, for random true
instants and random consistent observations, the truth and the point value always lie in the
fused interval, and the true duration in ``[min, max]``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel import instants as I
from fma_otel import model as M
from fma_otel.model import MS, US, S
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.records import KlogRecord, SourceStats

T0 = 1_782_740_000 * S  # a whole second in 2026


def _contains(f: I.Fused | I.Bound, t: int) -> bool:
    return (f.lo is None or f.lo <= t) and (f.hi is None or t <= f.hi)


def _width(f: I.Fused | I.Bound) -> int | None:
    """How many ns the instant may lie in (None when unbounded)."""
    return None if f.lo is None or f.hi is None else f.hi - f.lo + 1


# --------------------------------------------------------------------------- one source each


def test_k8s_timestamp_is_the_whole_second_after_it() -> None:
    f = I.fuse([I.truncated(T0, S, "k8s:creationTimestamp", M.CLOCK_APISERVER)])
    assert (f.lo, f.hi, f.value) == (T0, T0 + S - 1, T0)
    assert _width(f) == S
    assert f.clock == M.CLOCK_APISERVER
    assert f.sources == ("k8s:creationTimestamp",)


def test_api_write_spans_call_start_to_the_end_of_the_log_microsecond() -> None:
    b = I.api_write(T0 + 121_004_567, T0 + 131_877_000, "dpc:Created launcher-based server-providing pod")
    f = I.fuse([b])
    assert (f.lo, f.hi) == (T0 + 121_004_567, T0 + 131_877_999)
    # no point of its own: the midpoint, not either edge
    assert f.value == f.lo + (f.hi - f.lo) // 2
    assert f.clock == M.CLOCK_DPC


def test_api_write_whose_start_follows_its_log_time_is_refused() -> None:
    with pytest.raises(ValueError, match="after the line's own log time"):
        I.api_write(T0 + 2 * MS, T0 + MS, "dpc:Bound server-providing Pod")


def test_exact_is_a_point_bound() -> None:
    b = I.exact(T0 + 498_765_432, "dpc:HTTP call done/create_instance/start")
    assert (b.lo, b.hi, b.value) == (T0 + 498_765_432,) * 3
    assert b.clock == M.CLOCK_DPC
    assert _width(I.fuse([b])) == 1


def test_klog_time_is_one_microsecond_wide() -> None:
    f = I.fuse([I.klog_time(T0 + 563_150_000, "dpc:Successfully relayed the readiness")])
    assert (f.lo, f.hi, f.value) == (T0 + 563_150_000, T0 + 563_150_999, T0 + 563_150_000)


def test_later_observer_bounds_from_above_only() -> None:
    b = I.observed_after(T0 + 7 * S, "dpc:HTTP call done/get_gpu_uuids/end", M.CLOCK_DPC)
    f = I.fuse([b])
    assert (f.lo, f.hi) == (None, T0 + 7 * S)
    assert f.value is None and _width(f) is None
    # a µs-truncated observer time bounds by the end of its microsecond
    assert I.observed_after(T0, "watch", M.CLOCK_WATCHER, precision_ns=US).hi == T0 + US - 1


def test_earlier_observation_bounds_from_below_only() -> None:
    f = I.fuse([I.observed_before(T0, "watch:old state", M.CLOCK_WATCHER)])
    assert (f.lo, f.hi, f.value) == (T0, None, None)


def test_upper_bound_cuts_a_k8s_second_on_the_same_clock_exactly() -> None:
    # R.started: kubelet's startedAt second, and the kubelet-clocked upper bound 300 ms in
    f = I.fuse(
        [
            I.truncated(T0, S, "k8s:startedAt", M.CLOCK_KUBELET),
            I.observed_after(T0 + 300 * MS, "kubelet:probe", M.CLOCK_KUBELET),
        ]
    )
    assert (f.lo, f.hi) == (T0, T0 + 300 * MS)
    assert f.value == T0  # the k8s value, inside the narrowed interval
    assert f.sources == ("k8s:startedAt", "kubelet:probe")


def test_vllm_ready_lies_between_last_failed_poll_start_and_first_ok_poll_end() -> None:
    failed = (T0 + 20 * S, T0 + 20 * S + MS)
    ok = (T0 + 45 * S, T0 + 45 * S + 2 * MS)
    b = I.vllm_ready_from_polls(failed, ok)
    assert (b.lo, b.hi) == (T0 + 20 * S + 1, T0 + 45 * S + 2 * MS)
    assert b.value is None
    # without a failed poll, only the upper side is known
    assert I.vllm_ready_from_polls(None, ok).lo is None
    with pytest.raises(ValueError, match="failed poll started after"):
        I.vllm_ready_from_polls((T0 + 50 * S, T0 + 50 * S), ok)


def test_actuation_secs_recovers_the_whole_second_of_started_at() -> None:
    # fma-reference 9.2: relay_ready ends 14:36:45.562932, logged 14:36:45.563101,
    # actuationSecs=63.563101, so startedAt was 14:35:42 exactly
    log = T0 + 45 * S + 563_101_000
    relay_end = T0 + 45 * S + 560_901_000 + 2_031_000
    b = I.started_from_actuation_secs(log, 63.563101, not_before_ns=relay_end)
    assert (b.lo, b.hi) == (T0 - 18 * S, T0 - 17 * S - 1)
    assert b.value is None
    upper_only = I.started_from_actuation_secs(log, 63.563101)
    assert (upper_only.lo, upper_only.hi) == (None, T0 - 17 * S - 1)


# --------------------------------------------------------------------------- fusion


def test_issue_example_l_created_narrows_to_the_api_write_and_the_point_is_clamped() -> None:
    """L.created: 1 s creationTimestamp + the DPC's create call -> its 12 ms window."""
    created = I.truncated(T0, S, "k8s:creationTimestamp", M.CLOCK_APISERVER)
    write = I.api_write(T0 + 6 * MS, T0 + 18 * MS, "dpc:Created launcher-based server-providing pod")
    l_created = I.fuse([created, write])
    assert (l_created.lo, l_created.hi) == (T0 + 6 * MS, T0 + 18 * MS + US - 1)
    assert l_created.sources == ("dpc:Created launcher-based server-providing pod", "k8s:creationTimestamp")
    assert not l_created.inconsistent
    relayed = I.fuse([I.klog_time(T0 + 50 * S + 160 * MS, "dpc:Successfully relayed the readiness")])
    old = I.duration(I.fuse([created]), relayed)  # today's: the 1 s timestamp alone
    new = I.duration(l_created, relayed)
    assert old.max_ns - old.min_ns > 999 * MS
    assert new.max_ns - new.min_ns < 13 * MS + 2 * US  # the 12 ms window (+ both µs)
    # today's point (50.160 s) lies outside the true interval; the fused point lies inside
    assert old.point_ns == 50 * S + 160 * MS
    assert not new.min_ns <= old.point_ns <= new.max_ns
    assert new.min_ns <= new.point_ns <= new.max_ns
    assert new.point_ns == relayed.value - l_created.value


def test_a_point_value_outside_the_intersection_is_clamped_to_its_edge() -> None:
    # the more precise source has a value (klog 1 µs) that a same-clock bound cuts off
    f = I.fuse(
        [
            I.truncated(T0, MS, "launcher:log", M.CLOCK_LAUNCHER),
            I.observed_before(T0 + 400 * US, "launcher:earlier", M.CLOCK_LAUNCHER),
        ]
    )
    assert (f.lo, f.hi) == (T0 + 400 * US, T0 + MS - 1)
    assert f.value == T0 + 400 * US


def test_tolerance_applies_between_different_clocks() -> None:
    # apiserver says [T0, T0+1s); DPC's write ended 0.5 ms before T0: within 1 ms, consistent
    write = I.api_write(T0 - 3 * MS, T0 - 500 * US, "dpc:write")
    f = I.fuse([I.truncated(T0, S, "k8s:creationTimestamp", M.CLOCK_APISERVER), write])
    assert not f.inconsistent
    assert f.clock == M.CLOCK_DPC
    assert (f.lo, f.hi) == (T0 - MS, T0 - 500 * US + US - 1)  # k8s's lo, widened by 1 ms
    # with no tolerance the same two bounds conflict
    strict = I.fuse([I.truncated(T0, S, "k8s:creationTimestamp", M.CLOCK_APISERVER), write], tolerance_ns=0)
    assert strict.inconsistent


def test_no_tolerance_within_one_clock() -> None:
    # two DPC-clock bounds 0.5 ms apart do not overlap: a conflict, tolerance or not
    a = I.api_write(T0, T0 + MS, "dpc:a")
    b = I.observed_after(T0 - 500 * US, "dpc:b", M.CLOCK_DPC)
    f = I.fuse([a, b], tolerance_ns=10 * MS)
    assert f.inconsistent
    assert (f.lo, f.hi) == (a.lo, a.hi)  # the more precise source kept
    assert f.rejected == ("dpc:b",)


def test_conflict_keeps_the_most_precise_source_and_names_who_disagreed() -> None:
    http_end = I.exact(T0 + 5 * S, "dpc:HTTP call done/wake/end")
    stale = I.truncated(T0 + 7 * S, S, "k8s:Ready", M.CLOCK_KUBELET)
    agreeing = I.klog_time(T0 + 5 * S, "dpc:Woke inference server", M.CLOCK_DPC)
    f = I.fuse([stale, agreeing, http_end])
    assert f.inconsistent
    assert (f.lo, f.hi, f.value) == (T0 + 5 * S, T0 + 5 * S, T0 + 5 * S)
    assert f.sources == ("dpc:HTTP call done/wake/end", "dpc:Woke inference server")
    assert f.rejected == ("k8s:Ready",)
    assert set(f.disagreed) == {"k8s:Ready", "dpc:HTTP call done/wake/end", "dpc:Woke inference server"}
    assert f.disagreed[-1] == "k8s:Ready"


def test_one_sided_bounds_combine_into_an_interval_with_a_midpoint() -> None:
    f = I.fuse(
        [
            I.observed_before(T0, "dpc:failed poll", M.CLOCK_DPC),
            I.observed_after(T0 + 2 * S, "dpc:ok poll", M.CLOCK_DPC),
        ]
    )
    assert (f.lo, f.hi, f.value) == (T0, T0 + 2 * S, T0 + S)
    assert f.sources == ("dpc:failed poll", "dpc:ok poll")


def test_fuse_refuses_nothing_and_negative_tolerance() -> None:
    with pytest.raises(ValueError, match="not observed"):
        I.fuse([])
    with pytest.raises(ValueError, match="tolerance"):
        I.fuse([I.klog_time(T0, "x")], tolerance_ns=-1)


def test_bound_refuses_an_inverted_interval_and_a_value_outside() -> None:
    with pytest.raises(ValueError, match="ends before it starts"):
        I.Bound(T0 + 1, T0, "x", M.CLOCK_DPC)
    with pytest.raises(ValueError, match="outside its own bound"):
        I.Bound(T0, T0 + 1, "x", M.CLOCK_DPC, value=T0 + 2)


# --------------------------------------------------------------------------- durations


def test_duration_is_exact_on_one_clock_and_widened_across_clocks() -> None:
    s = I.fuse([I.exact(T0, "dpc:wake/start")])
    e_same = I.fuse([I.exact(T0 + 3 * S, "dpc:wake/start")])
    d = I.duration(s, e_same)
    assert (d.min_ns, d.max_ns, d.point_ns) == (3 * S, 3 * S, 3 * S)
    e_other = I.fuse([I.Bound(T0 + 3 * S, T0 + 3 * S, "launcher", M.CLOCK_LAUNCHER, T0 + 3 * S)])
    d = I.duration(s, e_other)
    assert (d.min_ns, d.max_ns, d.point_ns) == (3 * S - MS, 3 * S + MS, 3 * S)


def test_duration_never_below_zero_and_marks_an_end_wholly_before_its_start() -> None:
    s = I.fuse([I.klog_time(T0 + S, "dpc:late")])
    e = I.fuse([I.klog_time(T0, "dpc:early")])
    d = I.duration(s, e)
    assert d.inconsistent
    assert (d.min_ns, d.max_ns, d.point_ns) == (0, 0, 0)
    # overlapping intervals whose points are reversed: not inconsistent, point floored at 0
    s2 = I.fuse([I.truncated(T0, S, "k8s:a", M.CLOCK_APISERVER)])
    e2 = I.fuse([I.api_write(T0 - 2 * MS, T0 + 5 * MS, "dpc:b")])
    d2 = I.duration(s2, e2)
    assert not d2.inconsistent
    assert d2.min_ns == 0 and d2.max_ns == 5 * MS + US - 1 + MS
    assert 0 <= d2.point_ns <= d2.max_ns


def test_duration_with_an_unbounded_end_has_no_max() -> None:
    s = I.fuse([I.klog_time(T0, "dpc:start")])
    e = I.fuse([I.observed_before(T0 + S, "dpc:after", M.CLOCK_DPC)])
    d = I.duration(s, e)
    assert d.max_ns is None
    assert d.min_ns == S - US + 1
    assert d.point_ns is None


# --------------------------------------------------------------------------- properties

CLOCKS = (M.CLOCK_APISERVER, M.CLOCK_KUBELET, M.CLOCK_DPC, M.CLOCK_LAUNCHER)
TOL = MS


@st.composite
def observation(draw: st.DrawFn, true_ns: int, offsets: dict[str, int]) -> I.Bound:
    """A random observation of ``true_ns`` consistent with it, read on a random clock."""
    clock = draw(st.sampled_from(CLOCKS))
    t = true_ns + offsets[clock]  # the instant as that clock reads it
    kind = draw(st.sampled_from(("k8s", "klog", "ms", "write", "http", "after", "before", "polls")))
    if kind == "k8s":
        return I.truncated(t // S * S, S, "k8s", clock)
    if kind == "klog":
        return I.klog_time(t // US * US, "klog", clock)
    if kind == "ms":
        return I.truncated(t // MS * MS, MS, "ms", clock)
    if kind == "write":
        before = draw(st.integers(0, 50 * MS))
        after = draw(st.integers(0, 50 * MS))
        return I.api_write(t - before, (t + after) // US * US, "write", clock)
    if kind == "http":
        return I.exact(t, "http/start", clock)
    if kind == "after":
        return I.observed_after(t + draw(st.integers(0, 10 * S)), "after", clock)
    if kind == "before":
        return I.observed_before(t - draw(st.integers(0, 10 * S)), "before", clock)
    failed_start = t - draw(st.integers(1, 10 * S))
    ok_start = t + draw(st.integers(-MS, 5 * S))
    ok_end = max(ok_start, t) + draw(st.integers(0, 10 * MS))
    return I.vllm_ready_from_polls((failed_start, failed_start + MS), (ok_start, ok_end), "polls", clock)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[int, dict[str, int], list[I.Bound]]:
    true_ns = T0 + draw(st.integers(0, 100 * S))
    # every clock within TOL/2 of the truth, so any two are within TOL of each other
    offsets = {c: draw(st.integers(-TOL // 2, TOL // 2)) for c in CLOCKS}
    bounds = draw(st.lists(observation(true_ns, offsets), min_size=1, max_size=6))
    return true_ns, offsets, bounds


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(scenario())
def test_truth_and_point_lie_in_the_fused_interval(case: tuple[int, dict[str, int], list[I.Bound]]) -> None:
    true_ns, offsets, bounds = case
    f = I.fuse(bounds, tolerance_ns=TOL)
    assert not f.inconsistent
    truth_on_ref = true_ns + offsets[f.clock]
    assert _contains(f, truth_on_ref)
    if f.value is not None:
        assert _contains(f, f.value)
    # never wider than the most precise source alone
    widths = [w for w in map(_width, bounds) if w is not None]
    if widths:
        w = _width(f)
        assert w is not None and w <= min(widths)


@st.composite
def two_instants(draw: st.DrawFn) -> tuple[int, list[I.Bound], list[I.Bound]]:
    """A start and a later end, observed on the same clocks (same offsets): (gap, starts, ends)."""
    start_true = T0 + draw(st.integers(0, 100 * S))
    gap = draw(st.integers(0, 100 * S))
    offsets = {c: draw(st.integers(-TOL // 2, TOL // 2)) for c in CLOCKS}
    starts = draw(st.lists(observation(start_true, offsets), min_size=1, max_size=5))
    ends = draw(st.lists(observation(start_true + gap, offsets), min_size=1, max_size=5))
    return gap, starts, ends


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(two_instants())
def test_true_duration_lies_in_min_max_and_the_point_too(
    case: tuple[int, list[I.Bound], list[I.Bound]],
) -> None:
    gap, starts, ends = case
    d = I.duration(I.fuse(starts, TOL), I.fuse(ends, TOL), TOL)
    assert not d.inconsistent
    assert d.min_ns <= gap
    assert d.max_ns is None or gap <= d.max_ns
    if d.point_ns is not None:
        assert d.min_ns <= d.point_ns and (d.max_ns is None or d.point_ns <= d.max_ns)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 100 * S),
    st.lists(st.tuples(st.integers(0, 2 * S), st.integers(0, 2 * S)), min_size=1, max_size=6),
)
def test_on_one_clock_fusion_is_exactly_the_intersection(true_off: int, spans: list[tuple[int, int]]) -> None:
    """Bounds on one clock that all hold the truth fuse to max(lo)..min(hi), no wider, no tighter."""
    t = T0 + true_off
    bounds = [
        I.Bound(t - before, t + after, f"dpc:{i}", M.CLOCK_DPC) for i, (before, after) in enumerate(spans)
    ]
    f = I.fuse(bounds, tolerance_ns=10 * MS)
    assert (f.lo, f.hi) == (max(b.lo for b in bounds), min(b.hi for b in bounds))
    assert not f.inconsistent and sorted(f.sources) == sorted(b.source for b in bounds)


SAMPLE = Path(I.__file__).parent / "data" / "sample"


def test_issue_figures_on_the_embedded_sample() -> None:
    """Issue 21's numbers, from the sample's raw lines: T_cold_launcher of ccfdba9b."""
    uid, launcher = "ccfdba9b-ba26-4851-b5e8-579a7aaf0e89", "launcher-example-bfqwv"
    stats = SourceStats("dpc.log")
    with (SAMPLE / "dpc.log").open("rb") as fh:
        recs = [r for r in iter_klog(fh, stats) if r.get("serverUID") == uid]
    write = next(r for r in recs if r.msg == "Created launcher-based server-providing pod")
    relay = next(
        r for r in recs if r.msg == "Successfully relayed the readiness" and r.get("readiness") == "ready"
    )
    created = None
    for line in (SAMPLE / "pods.json").read_text().splitlines():
        meta = json.loads(line)["object"]["metadata"]
        if meta["name"] == launcher:
            created = _rfc3339_ns(meta["creationTimestamp"])
    assert created is not None
    k8s_only = I.fuse([I.truncated(created, S, "k8s:creationTimestamp", M.CLOCK_APISERVER)])
    l_created = I.fuse(
        [
            I.truncated(created, S, "k8s:creationTimestamp", M.CLOCK_APISERVER),
            I.api_write(_rfc3339_ns(write.get("k8sCallStartTime")), _log_ns(write, 2026), "dpc:" + write.msg),
        ]
    )
    relayed = I.fuse([I.klog_time(_log_ns(relay, 2026), "dpc:" + relay.msg)])
    # today's computation knows no clocks: compare without the tolerance (with it, 1.002 s)
    old, new = I.duration(k8s_only, relayed, tolerance_ns=0), I.duration(l_created, relayed)
    wide = I.duration(k8s_only, relayed)
    assert round((old.max_ns - old.min_ns) / S, 3) == 1.0
    assert round((wide.max_ns - wide.min_ns) / S, 3) == 1.002
    assert round((new.max_ns - new.min_ns) / S, 3) == 0.012
    assert (round(new.min_ns / S, 3), round(new.max_ns / S, 3)) == (50.006, 50.018)
    assert round(old.point_ns / S, 3) == 50.154  # today's point value ...
    assert round((old.point_ns - new.max_ns) / S, 2) == 0.14  # ... lies 0.14 s outside the true interval
    assert new.min_ns <= new.point_ns <= new.max_ns


# --------------------------------------------------------------------------- DPC-log-only fixtures

FIXTURES = Path(__file__).parent / "fixtures" / "dpc_only"
YEAR = 2026  # the fixtures' README gives the year klog does not print


def _rfc3339_ns(text: str) -> int:
    """RFC3339Nano (``Z``, 0-9 fraction digits) to ns, exact (datetime stops at µs)."""
    whole, _, frac = text.rstrip("Z").partition(".")
    dt = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return int(dt.timestamp()) * S + int((frac or "0").ljust(9, "0"))


def _log_ns(rec: KlogRecord, year: int = YEAR) -> int:
    day = datetime(year, rec.month, rec.day, tzinfo=timezone.utc)
    return int(day.timestamp()) * S + rec.tod_us * US


def _num(v: object) -> float:
    """A klog number, also when written as a quoted string (``latencySecs="0.51"``)."""
    return float(v)  # type: ignore[arg-type]


def _call(rec: KlogRecord) -> tuple[I.Bound, I.Bound]:
    start = _rfc3339_ns(rec.get("httpCallStartTime"))
    latency = round(_num(rec.get("latencySecs")) * S)
    source = "dpc:HTTP call done/" + rec.get("purpose")
    return I.exact(start, source + "/start"), I.exact(start + latency, source + "/end")


def dpc_only_quantities(path: Path) -> dict[str, I.Duration | I.Fused | float]:
    """What a DPC log alone bounds, for its one actuation, via fma_otel.instants.

    The next session's ``bridge --dpc-log`` must give the same figures; this is the
    reference computation the fixture README's numbers are checked against.
    """
    stats = SourceStats(path.name)
    with path.open("rb") as fh:
        recs = list(iter_klog(fh, stats))
    assert stats.skipped == 0, stats.skipped_lines
    calls: dict[str, list[tuple[KlogRecord, I.Bound, I.Bound]]] = {}
    b: dict[str, list[I.Bound]] = {}
    relay_log: KlogRecord | None = None
    actuation: KlogRecord | None = None
    for rec in recs:
        t = _log_ns(rec)
        if rec.msg == "HTTP call done":
            s, e = _call(rec)
            calls.setdefault(rec.get("purpose"), []).append((rec, s, e))
        elif rec.msg == "Created launcher-based server-providing pod":
            b.setdefault("L.created", []).append(
                I.api_write(_rfc3339_ns(rec.get("k8sCallStartTime")), t, "dpc:" + rec.msg)
            )
        elif rec.msg == "Successfully relayed the readiness" and rec.get("readiness") == "ready":
            relay_log = rec
            b.setdefault("D.relayed", []).append(I.klog_time(t, "dpc:" + rec.msg))
            b.setdefault("R.created", []).append(
                I.truncated(
                    _rfc3339_ns(rec.get("requesterCreateTime")),
                    S,
                    "dpc:requesterCreateTime",
                    M.CLOCK_APISERVER,
                )
            )
        elif rec.msg == "Observed actuation latency":
            actuation = rec
    ok = lambda c: 200 <= int(_num(c[0].get("statusCode"))) < 300  # noqa: E731
    q: dict[str, I.Duration | I.Fused | float] = {}
    for purpose, start_name in (
        ("wake", "D.wake"),
        ("create_instance", "D.create"),
        ("relay_ready", "D.relay"),
    ):
        good = [c for c in calls.get(purpose, []) if ok(c)]
        if good:
            b[start_name + ".start"] = [good[-1 if purpose == "relay_ready" else 0][1]]
            b[start_name + ".end"] = [good[-1 if purpose == "relay_ready" else 0][2]]
    gpu = [c for c in calls.get("get_gpu_uuids", []) if ok(c)]
    if gpu:
        end = gpu[0][2]
        b.setdefault("R.started", []).append(
            I.observed_after(end.hi, "dpc:HTTP call done/get_gpu_uuids", M.CLOCK_DPC)
        )
    if actuation is not None:
        relay_end = b["D.relay.end"][0].hi if "D.relay.end" in b else None
        b.setdefault("R.started", []).append(
            I.started_from_actuation_secs(_log_ns(actuation), _num(actuation.get("actuationSecs")), relay_end)
        )
    if "L.created" in b and calls.get("list_instances"):
        # the DPC calls a launcher it created only once it saw it Ready: an upper bound on L.ready
        first = calls["list_instances"][0][1]
        b["L.ready"] = [I.observed_after(first.lo, "dpc:HTTP call done/list_instances/start", M.CLOCK_DPC)]
    if "D.create.end" in b:
        after = [c for c in calls.get("query_sleeping", []) if c[1].lo >= b["D.create.end"][0].lo]
        first_ok = next((i for i, c in enumerate(after) if ok(c)), None)
        if first_ok is not None:
            okc = after[first_ok]
            failed = (after[first_ok - 1][1].lo, after[first_ok - 1][2].hi) if first_ok else None
            b["V.ready"] = [I.vllm_ready_from_polls(failed, (okc[1].lo, okc[2].hi))]
            b["D.serving"] = [okc[2]]
    f = {name: I.fuse(bs) for name, bs in b.items()}
    for name in ("R.created", "R.started", "L.created", "L.ready", "V.ready"):
        if name in f:
            q[name] = f[name]
    spans = {
        "T_wake": ("D.wake.start", "D.wake.end"),
        "T_instance_ready": ("D.create.start", "D.relayed"),
        "T_cold_launcher": ("L.created", "D.relayed"),
        "vllm_becomes_ready": ("D.create.end", "V.ready"),
        "fma.dpc.poll_lag": ("V.ready", "D.serving"),
        "fma.dpc.relay_ready": ("D.relay.start", "D.relay.end"),
    }
    for metric, (s_name, e_name) in spans.items():
        if s_name in f and e_name in f:
            q[metric] = I.duration(f[s_name], f[e_name])
    # llm-d-benchmark's own figures: relay_ready start minus wake / create / launcher-create start
    if "D.relay.start" in b and relay_log is not None:
        relay_start = b["D.relay.start"][0].lo
        for name, key in (("bench t_hot", "D.wake.start"), ("bench t_instance_create", "D.create.start")):
            if key in b:
                q[name] = (relay_start - b[key][0].lo) / S
        if "L.created" in b:
            q["bench t_cold_launcher"] = (relay_start - b["L.created"][0].lo) / S
    return q


def _readme_rows() -> list[list[str]]:
    rows = []
    for line in (FIXTURES / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].endswith(".log"):
            rows.append(cells)
    return rows


def _tod(ns: int | None) -> str:
    if ns is None:
        return "-"
    t = ns % (86_400 * S)
    return f"{t // 3_600_000_000_000:02d}:{t // 60_000_000_000 % 60:02d}:{t // S % 60:02d}.{t % S:09d}"


def _sec(ns: int | None) -> str:
    return "-" if ns is None else f"{ns / S:.9f}"


def fixture_cells(q: I.Duration | I.Fused | float) -> list[str]:
    """How the README writes a quantity: min/max/point seconds, lo/hi/point times, or a figure."""
    if isinstance(q, I.Duration):
        return [_sec(q.min_ns), _sec(q.max_ns), _sec(q.point_ns)]
    if isinstance(q, I.Fused):
        return [_tod(q.lo), _tod(q.hi), _tod(q.value)]
    return [f"{q:.9f}", "", ""]


def test_dpc_only_fixture_readme_numbers_are_what_the_lines_bound() -> None:
    rows = _readme_rows()
    assert {r[0] for r in rows} == {"hot.log", "warm.log", "cold_launcher.log"}
    computed = {name: dpc_only_quantities(FIXTURES / name) for name in {r[0] for r in rows}}
    for file, quantity, *cells in rows:
        assert quantity in computed[file], f"{file}: {quantity} not bounded by the log"
        want = [c for c in cells if c]
        assert fixture_cells(computed[file][quantity])[: len(want)] == want, f"{file}: {quantity}"
    # every quantity the logs bound is in the README
    for file, q in computed.items():
        assert set(q) == {r[1] for r in rows if r[0] == file}, file


def test_dpc_only_quoted_number_is_read_as_that_number() -> None:
    q = dpc_only_quantities(FIXTURES / "hot.log")
    wake = q["T_wake"]
    assert isinstance(wake, I.Duration)
    assert (wake.min_ns, wake.max_ns, wake.point_ns) == (510 * MS, 510 * MS, 510 * MS)


def test_dpc_only_l_created_is_the_create_call_window_not_a_second() -> None:
    cold = dpc_only_quantities(FIXTURES / "cold_launcher.log")
    t = cold["T_cold_launcher"]
    assert isinstance(t, I.Duration)
    assert t.max_ns - t.min_ns < 13 * MS  # the API write's ~12 ms, not the 1 s creationTimestamp


@st.composite
def one_sided(draw: st.DrawFn) -> I.Bound:
    """A one-sided bound anywhere near the scenarios' instants (it may conflict with them)."""
    t = T0 + draw(st.integers(-10 * S, 110 * S))
    clock = draw(st.sampled_from(CLOCKS))
    if draw(st.booleans()):
        return I.observed_after(t, "later observer", clock)
    return I.observed_before(t, "earlier observer", clock)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(scenario(), st.lists(one_sided(), min_size=1, max_size=3))
def test_a_one_sided_bound_added_after_fusing_is_what_fusing_it_with_the_rest_gives(
    case: tuple[int, dict[str, int], list[I.Bound]], extra: list[I.Bound]
) -> None:
    """Why: ``Bounds.fuse_all`` adds the causal order and live arrivals to an instant already
    fused (only where they narrow it) instead of fusing its bounds again; that is the same
    only because a one-sided bound sorts after every other one."""
    _, _, bounds = case
    f = I.fusing(bounds, tolerance_ns=TOL)
    for b in extra:
        f.add(b)
    assert f.result() == I.fuse([*bounds, *extra], tolerance_ns=TOL)
