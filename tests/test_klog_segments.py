"""Reading a klog file in byte segments (worker processes) against one serial read, its reference.

Why: the bridge reads a long DPC log in segments, one worker process each, and must get
exactly what one serial :func:`iter_klog` gets: the same records with the same line numbers,
the same read/understood/skipped counts and the same first skip reasons.  The cut points
are the risky part (a multi-line block, a cut block, a blank line, a ``--timestamps``
prefix at the cut), so besides the cut points the reader picks itself, every line start it
may cut at is tried as a cut.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel import workers as W
from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.correlate import dpc_row
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sinks.otlp_json import export_request_text
from fma_otel.sources import klog_segments as S
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.records import SourceStats

from .fuzz._mutate import mutated_file
from .support.hosts import host, still_running
from .test_klog_fastpath import DPC, HDR, NASTY, PREFIX

KW = {"messages": WANTED_MESSAGES, "contains": WANTED_CONTAINS}
BLOCKS = (
    HDR
    + b'"other" err=<\n\tone\n\ttwo\n > after=1 next=<\n\tmore\n >\n'
    + HDR
    + b'"Bound server-providing Pod" err=<\n\tbody\n >\n'
    + HDR
    + b'"Created vLLM instance" a=<\n\tcut here\n'  # a block that is never closed
    + b"\n"
    + PREFIX
    + HDR
    + b'"Bound server-providing Pod" x=<\n'
    + PREFIX
    + b"\tprefixed\n"
    + PREFIX
    + b" > y=2\n"
)


@pytest.fixture(autouse=True)
def _no_silent_takeover(monkeypatch, request):
    """Every segment must come from its worker.  This process reads one itself (``_items``)
    only when a worker failed, and a failure is silent in the results (they are the same),
    so only the tests that make a worker fail (asking for ``takeover``) may see it.  A
    forked worker calls its own copy of the wrapper: only this process's calls count."""
    calls: list[tuple] = []
    real, me = S._items, os.getpid()

    def recording(*args, **kw):
        # a takeover passes no progress array (args[5]); the local segment of a plan that
        # gives one to this process (SegmentedRead's ``local``) passes its own
        if os.getpid() == me and args[5] is None:
            calls.append(args[:3])
        return real(*args, **kw)

    monkeypatch.setattr(S, "_items", recording)
    yield calls
    if "takeover" not in request.fixturenames:
        assert calls == [], f"this process read segments its workers should have: {calls}"


@pytest.fixture
def takeover(_no_silent_takeover) -> list[tuple]:
    """The segments this process read itself, in a test that makes a worker fail."""
    return _no_silent_takeover


def _serial(path: Path, kw: dict) -> tuple[list, tuple]:
    st_ = SourceStats("t")
    with open(path, "rb") as fh:
        recs = list(iter_klog(fh, st_, **kw))
    return recs, (st_.read, st_.understood, st_.skipped, st_.skipped_lines)


def _segmented(
    path: Path, starts: list[int], kw: dict, progress=None, local: bool = False
) -> tuple[list, tuple]:
    st_ = SourceStats("t")
    seg = S.SegmentedRead(
        str(path), starts, path.stat().st_size, kw.get("messages"), kw.get("contains"), local=local
    )
    assert seg.segments == len(starts) and seg.local is local
    recs = list(seg.records(st_, progress))
    return recs, (st_.read, st_.understood, st_.skipped, st_.skipped_lines)


def _safe_starts(data: bytes) -> list[int]:
    """Every offset after a ``\\n`` whose line a segment may start at."""
    out, nl = [], data.find(b"\n")
    while 0 <= nl < len(data) - 1:
        end = data.find(b"\n", nl + 1)
        if S._safe_start(data[nl + 1 : end + 1 if end >= 0 else len(data)]):
            out.append(nl + 1)
        nl = end
    return out


def test_every_possible_cut_gives_the_serial_result(tmp_path: Path):
    data = (
        BLOCKS + b"".join(DPC[:30]) + BLOCKS + b"".join(n if n.endswith(b"\n") else n + b"\n" for n in NASTY)
    )
    path = tmp_path / "dpc.log"
    path.write_bytes(data)
    want = _serial(path, KW)
    assert want[1][2] > 0 and want[0], "the input has records and skipped lines"
    cuts = _safe_starts(data)
    assert len(cuts) > 40
    for c in cuts:
        assert data[c - 1 : c] == b"\n" and data[c : c + 1] not in (b"\t", b" ")
        assert _segmented(path, [0, c], KW) == want, f"cut at {c}: {data[c : c + 40]!r}"
    assert _segmented(path, [0, *cuts[::7]], KW) == want


def test_cut_points_are_safe_line_starts_and_cover_the_file(tmp_path: Path):
    data = (BLOCKS * 50) + b"\tno newline at the end"
    path = tmp_path / "dpc.log"
    path.write_bytes(data)
    for jobs in (1, 2, 3, 7, 64):
        starts = S.cut_points(str(path), jobs)
        assert starts[0] == 0 and starts == sorted(set(starts)) and len(starts) <= jobs
        for c in starts[1:]:
            assert data[c - 1 : c] == b"\n" and S._safe_start(data[c : data.find(b"\n", c) + 1])
        assert _segmented(path, starts, KW) == _serial(path, KW)
    assert len(S.cut_points(str(path), 7)) == 7


def test_a_line_longer_than_the_probe_is_not_taken_for_a_segment_start(tmp_path: Path):
    """A continuation whose ``--timestamps``-like prefix (digits) runs past the 64 KiB the
    cut probe reads: the probe cannot see the tab after it, so that line is no cut; the
    next whole line that is safe is.  (Taken, the segment began inside a block.)"""
    long = b"1" * (S._PROBE + 10) + b" \tcontinued\n"
    data = HDR + b'"Bound server-providing Pod" note=<\n' + long + b" > worker=w\n" + HDR + b'"after"\n'
    path = tmp_path / "dpc.log"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        cut = S._next_safe_start(fh, data.index(long))
    assert cut == data.index(HDR + b'"after"')
    assert _segmented(path, [0, cut], KW) == _serial(path, KW)
    assert not S._safe_start(long[: S._PROBE], whole=False)
    assert S._safe_start(b"1" * 20 + b"\n")  # a whole line of digits starts no block


def test_no_segment_is_planned_under_the_floor_whatever_jobs_asks(tmp_path: Path):
    """``--jobs 50`` on a 9 MiB log (with an 8 MiB threshold): 4 MiB segments at least, so
    two workers, not fifty (``--jobs 999999`` used to fork one per line)."""
    path = tmp_path / "dpc.log"
    line = HDR + b'"other" k=v\n'
    path.write_bytes(line * ((9 << 20) // len(line)))
    seg = S.SegmentedRead.start(str(path), *KW.values(), 50, min_bytes=8 << 20)
    assert seg is not None
    try:
        assert seg.segments == 2
        st_ = SourceStats("t")
        assert list(seg.records(st_)) == [] and st_.read == st_.understood == (9 << 20) // len(line)
    finally:
        seg.close()


def test_no_safe_line_after_the_cut_means_one_segment(tmp_path: Path):
    path = tmp_path / "dpc.log"
    path.write_bytes(HDR + b'"other" err=<\n' + b"\tcontinued\n" * 5000)
    assert S.cut_points(str(path), 4) == [0]
    assert S.SegmentedRead.start(str(path), WANTED_MESSAGES, None, 4, min_bytes=0) is None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_file(DPC, max_size=40), st.integers(2, 5), st.booleans())
def test_mutated_logs_in_any_number_of_segments(tmp_path_factory, lines, jobs, prefixed):
    path = tmp_path_factory.mktemp("seg") / "dpc.log"
    path.write_bytes(b"".join((PREFIX if prefixed else b"") + ln for ln in lines))
    starts = S.cut_points(str(path), jobs)
    assert _segmented(path, starts, KW) == _serial(path, KW)


def test_more_than_100_skipped_lines_keep_the_first_100_in_order(tmp_path: Path):
    path = tmp_path / "dpc.log"
    path.write_bytes((b"garbage\n" * 70 + b"".join(DPC[:20])) * 4)
    want = _serial(path, KW)
    assert want[1][2] == 280 and len(want[1][3]) == 100
    assert _segmented(path, S.cut_points(str(path), 4), KW) == want


def test_progress_reports_every_byte_once(tmp_path: Path):
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 20)
    seen: list[int] = []
    _segmented(path, S.cut_points(str(path), 3), KW, progress=seen.append)
    assert sum(seen) == path.stat().st_size and all(n >= 0 for n in seen)


def test_plan_gives_the_caller_the_head_of_the_log_less_its_other_work(tmp_path: Path):
    """Each of the ``jobs`` processes gets about the same share of the work: the caller its
    other work plus the head of the log, the workers equal parts of the rest."""
    path = tmp_path / "dpc.log"
    data = BLOCKS * 400
    path.write_bytes(data)
    size, small = len(data), 1000

    def check(starts: list[int]) -> None:
        assert starts[0] == 0 and starts == sorted(set(starts))
        for c in starts[1:]:
            assert data[c - 1 : c] == b"\n" and S._safe_start(data[c : data.find(b"\n", c) + 1])

    starts, local = S.plan_segments(str(path), 3, small, 0)
    check(starts)
    assert local and len(starts) == 3
    assert abs(starts[1] - size // 3) < 200 and abs(starts[2] - 2 * size // 3) < 200

    other = size // 4  # a share is (size + other) / 3 = 5/12 size: the head 5/12 - 3/12 = size / 6
    starts, local = S.plan_segments(str(path), 3, small, other)
    check(starts)
    mine = (size + other) // 3 - other
    assert local and len(starts) == 3 and abs(starts[1] - mine) < 200
    assert abs((starts[2] - starts[1]) - (size - starts[2])) < 400  # the workers' parts alike

    # other work worth a share already: the whole log to jobs - 1 workers, never fewer than one
    starts, local = S.plan_segments(str(path), 3, small, size)
    check(starts)
    assert not local and len(starts) == 2
    assert S.plan_segments(str(path), 2, small, size) == ([0], False)
    # never more segments than the floor allows, the caller's included
    assert len(S.plan_segments(str(path), 64, size // 3, 0)[0]) == 3


@pytest.mark.parametrize("jobs", [2, 3, 4])
def test_a_local_head_gives_the_serial_result_and_only_it_is_read_here(tmp_path: Path, monkeypatch, jobs):
    path = tmp_path / "dpc.log"
    path.write_bytes((BLOCKS + b"".join(DPC) + b"garbage\n") * 30)
    want = _serial(path, KW)
    assert want[1][2] > 0 and want[0]
    mine: list[tuple] = []
    real, me = S._items, os.getpid()

    def recording(*args, **kw):
        if os.getpid() == me:
            mine.append(args[:3])
        return real(*args, **kw)

    monkeypatch.setattr(S, "_items", recording)
    starts = S.cut_points(str(path), jobs)
    seen: list[int] = []
    assert _segmented(path, starts, KW, progress=seen.append, local=True) == want
    assert mine == [(str(path), 0, starts[1])]  # the head, here; every other segment by its worker
    assert sum(seen) == path.stat().st_size and all(n >= 0 for n in seen)
    assert _segmented(path, starts, KW, local=True) == want  # and without progress


def test_workers_hold_their_batches_until_the_caller_waits_for_them(tmp_path: Path, monkeypatch):
    """While this process reads its head, a worker must not be blocked sending to it: the
    flag that lets workers send is set only when this process turns to their segments."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 40)
    seg = S.SegmentedRead(
        str(path), S.cut_points(str(path), 2), path.stat().st_size, *KW.values(), local=True
    )
    flags: list[int] = []
    real = S._replay

    def watching(items, offset, *args):
        flags.append(seg._done[seg.segments])
        return (yield from real(items, offset, *args))

    monkeypatch.setattr(S, "_replay", watching)
    st_ = SourceStats("t")
    list(seg.records(st_))
    assert flags[0] == 0 and flags[-1] == 1  # off while the head is read here, on for the worker's


@pytest.mark.parametrize("local", [False, True])
def test_a_failing_worker_makes_the_parent_read_serially(tmp_path: Path, monkeypatch, takeover, local):
    """``local``: the head is this process's own, and the two workers' segments after it
    are taken over."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 5)
    want = _serial(path, KW)
    starts = S.cut_points(str(path), 3 if local else 2)
    workers = list(zip(starts, [*starts[1:], path.stat().st_size], strict=True))[1 if local else 0 :]

    def dying(conn, *args):  # the forked child runs this copy
        os._exit(3)

    monkeypatch.setattr(S, "_work", dying)
    assert _segmented(path, starts, KW, local=local) == want

    def raising(conn, *args):
        conn.send("OSError")
        conn.close()

    monkeypatch.setattr(S, "_work", raising)
    assert _segmented(path, starts, KW, local=local) == want
    assert [c[1:] for c in takeover] == workers * 2  # every worker's segment, both times


def test_small_files_one_job_and_missing_files_read_serially(tmp_path: Path):
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC))
    assert S.SegmentedRead.start(str(path), WANTED_MESSAGES, None, 2) is None  # < MIN_PARALLEL_BYTES
    assert S.SegmentedRead.start(str(path), WANTED_MESSAGES, None, 1, min_bytes=0) is None
    assert S.SegmentedRead.start(str(tmp_path / "missing"), WANTED_MESSAGES, None, 2, min_bytes=0) is None


@pytest.mark.parametrize("other_bytes", [None, 0])
def test_a_process_with_threads_spawns_its_workers(tmp_path: Path, other_bytes):
    """Forking with threads running is unsafe: the workers are spawned, same records (also
    with the head of the log read here: ``other_bytes=0``)."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 3)
    want = _serial(path, KW)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert not W.can_fork() and W.start_method() == "spawn"
        seg = S.SegmentedRead.start(str(path), *KW.values(), 3, min_bytes=0, other_bytes=other_bytes)
        assert seg is not None and seg.method == "spawn" and seg.segments == 3
        assert seg.local is (other_bytes is not None)
        st_ = SourceStats("t")
        got = list(seg.records(st_)), (st_.read, st_.understood, st_.skipped, st_.skipped_lines)
    finally:
        stop.set()
        t.join()
    assert got == want
    if threading.active_count() == 1:
        assert W.start_method() == "fork"


def test_no_start_method_reads_serially(tmp_path: Path, monkeypatch):
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC))
    monkeypatch.setattr(W.mp, "get_all_start_methods", lambda: [])
    assert W.start_method() is None
    assert S.SegmentedRead.start(str(path), WANTED_MESSAGES, None, 2, min_bytes=0) is None


@pytest.mark.parametrize("jobs", [2, 3])
@pytest.mark.parametrize("local", [False, True])
def test_bridge_in_segments_gives_the_same_traces(jobs: int, local: bool, monkeypatch):
    """``local``: the bridge reads the head of the log itself (its other work counted as
    nothing); else the sample's Pods and launcher logs outweigh a share of its small DPC
    log, and all of it goes to ``jobs - 1`` workers."""
    inputs = inputs_from_capture(sample_dir())
    serial = run_bridge(inputs, baseline_selector={"app": "vllm"}, jobs=1)
    started: list[S.SegmentedRead | None] = []
    real_start = S.SegmentedRead.start.__func__

    def spy(cls, *args, **kw):
        if local:
            kw["other_bytes"] = 0
        started.append(real_start(cls, *args, **kw))
        return started[-1]

    monkeypatch.setattr(S.SegmentedRead, "start", classmethod(spy))
    par = run_bridge(inputs, baseline_selector={"app": "vllm"}, jobs=jobs, parallel_min_bytes=0)
    seg = started[0]
    assert seg is not None and seg.local is local
    assert serial.dpc_segments == 1 and par.dpc_segments == (jobs if local else jobs - 1)
    assert [export_request_text(t) for t in par.traces] == [export_request_text(t) for t in serial.traces]
    assert [(s.name, s.read, s.understood, s.skipped, s.skipped_lines) for s in par.stats] == [
        (s.name, s.read, s.understood, s.skipped, s.skipped_lines) for s in serial.stats
    ]


def test_a_worker_dying_after_some_batches_is_taken_over_where_it_stopped(
    tmp_path: Path, monkeypatch, takeover
):
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC + NASTY) * 4)
    want = _serial(path, KW)
    monkeypatch.setattr(S, "BATCH", 5)

    def dies_midway(conn, path_, a, b, messages, contains, done, slot, transform, drop, inherited):
        it = S._items(path_, a, b, messages, contains, None, 0, transform, drop)
        for _ in range(3):  # three full batches, then gone without a word
            conn.send([item for _, item in zip(range(5), it, strict=False)])
        os._exit(3)

    monkeypatch.setattr(S, "_work", dies_midway)
    assert _segmented(path, S.cut_points(str(path), 3), KW) == want
    assert len(takeover) == 3
    rows_want = _serial_rows(path)
    assert _segmented_rows(path, S.cut_points(str(path), 3)) == rows_want


def _serial_rows(path: Path) -> tuple[list, tuple]:
    """What a serial read gives, each record put through ``dpc_row`` (``None`` dropped)."""
    recs, stats = _serial(path, KW)
    return [row for row in map(dpc_row, recs) if row is not None], stats


def _segmented_rows(path: Path, starts: list[int], method: str = "fork") -> tuple[list, tuple]:
    st_ = SourceStats("t")
    size = path.stat().st_size
    seg = S.SegmentedRead(str(path), starts, size, *KW.values(), method=method, transform=dpc_row)
    rows = list(seg.records(st_))
    return rows, (st_.read, st_.understood, st_.skipped, st_.skipped_lines)


def test_workers_transform_records_into_rows_in_line_order(tmp_path: Path):
    """With ``transform`` the workers send what it makes of each record: the rows arrive in
    line order with line numbers counted over the whole file, skips in their place, and
    the records it drops never arrive (the sample's failed polls)."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC + NASTY) * 5)
    want = _serial_rows(path)
    recs = _serial(path, KW)[0]
    assert 0 < len(want[0]) < len(recs)
    assert want[0][-1][0] == recs[-1].line_no > path.read_bytes().count(b"\n") // 2  # a later segment's
    for jobs in (2, 3):
        assert _segmented_rows(path, S.cut_points(str(path), jobs)) == want
    assert _segmented_rows(path, S.cut_points(str(path), 2), method="spawn") == want


def _consumed(records, st_: SourceStats) -> list:
    """Records as the bridge takes them: some fail to make a fact and are skipped then."""
    out = []
    for r in records:
        out.append(r)
        if r.line_no % 3 == 0:
            st_.skip(r.line_no, "no fact")
    return out


def test_the_callers_skips_interleave_with_the_readers_as_in_a_serial_read(tmp_path: Path):
    """``--strict`` lists the first 100 skips in the order they were met: the reader's own
    (bad lines) and the caller's (records that make no fact) must interleave as serially."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC + NASTY) * 6)
    st_a = SourceStats("t")
    with open(path, "rb") as fh:
        a = _consumed(iter_klog(fh, st_a, **KW), st_a)
    for jobs in (2, 3, 5):
        st_b = SourceStats("t")
        seg = S.SegmentedRead(str(path), S.cut_points(str(path), jobs), path.stat().st_size, *KW.values())
        b = _consumed(seg.records(st_b), st_b)
        assert b == a
        assert (st_b.read, st_b.understood, st_b.skipped, st_b.skipped_lines) == (
            st_a.read,
            st_a.understood,
            st_a.skipped,
            st_a.skipped_lines,
        )
    assert any(why == "no fact" for _, why in st_a.skipped_lines)
    assert any(why != "no fact" for _, why in st_a.skipped_lines)


_KILLED_HOST = """
import sys, time
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources import klog_segments as S
seg = S.SegmentedRead.start(sys.argv[1], WANTED_MESSAGES, WANTED_CONTAINS, 2, min_bytes=0, method="fork")
print(" ".join(str(p.pid) for p, _ in seg._workers), flush=True)
time.sleep(60)  # never takes a record: the workers end up blocked sending their batches
"""


def test_workers_end_when_the_process_that_forked_them_is_killed(tmp_path: Path):
    """A worker holds no copy of the parent's end of its pipe (nor of an earlier worker's),
    so once the parent is gone its blocked send fails and it ends, instead of living on."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 400)  # batches well over a pipe's 64 KiB
    with host(_KILLED_HOST, str(path)) as p:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 2
        time.sleep(0.5)  # let them read their segments and block
        p.kill()
        p.wait()
        alive = still_running(pids)
    assert not alive, f"workers outlived the process that forked them: {alive}"


def test_a_source_failing_before_the_dpc_log_leaves_no_worker(tmp_path: Path):
    """The Pods are read while the DPC-log workers run; when that fails (here: no Pod in the
    file), the workers are stopped, not left blocked holding their segments' rows."""
    import multiprocessing as mp

    from fma_otel.bridge import BridgeInputs, InputError

    dpc = tmp_path / "dpc.log"
    dpc.write_bytes(b"".join(DPC) * 400)  # batches well over a pipe's 64 KiB
    pods = tmp_path / "pods.json"
    pods.write_text("not json at all\n")
    with pytest.raises(InputError, match="no Pod object found"):
        run_bridge(BridgeInputs([str(pods)], str(dpc)), jobs=2, parallel_min_bytes=0)
    assert not mp.active_children()


_STUBBORN_HOST = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: None)  # a host whose SIGTERM handler does not exit
from fma_otel import workers
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources import klog_segments as S
workers.STOP_GRACE_S = 0.5
S._items = lambda *a, **k: time.sleep(600) or iter(())  # the forked workers never finish
seg = S.SegmentedRead.start(sys.argv[1], WANTED_MESSAGES, WANTED_CONTAINS, 2, min_bytes=0, method="fork")
time.sleep(0.2)
t = time.monotonic()
seg.close()  # an abandoned read
print(round(time.monotonic() - t, 1), sum(p.is_alive() for p, _ in seg._workers), flush=True)
"""


def test_closing_stops_workers_that_ignore_sigterm(tmp_path: Path):
    """A forked worker inherits its host's SIGTERM handler: one that does not exit is
    killed after the grace period instead of being waited for for ever."""
    path = tmp_path / "dpc.log"
    path.write_bytes(b"".join(DPC) * 5)
    with host(_STUBBORN_HOST, str(path)) as p:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err[-2000:]
    took, alive = out.split()
    assert float(took) < 5 and alive == "0"
