"""Trace lines built and encoded by forked workers against building them here, in order.

Why: ``fma-otel bridge --out`` writes what :func:`trace_lines` gives; whatever the number
of workers, a failing worker, a process with threads, or a caller that stops early, the
bytes must be those of ``build_trace`` + ``export_request_text`` per actuation, in order,
and no worker may be left behind.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import trace_lines as T
from fma_otel import workers as W
from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.build import build_trace
from fma_otel.cli import main
from fma_otel.sinks.otlp_json import export_request_text
from tests.support.synth import synth_capture, write_capture

from .support.hosts import host, still_running


@pytest.fixture
def fork_ok(monkeypatch):
    """Fork even if earlier tests left idle threads in this process (the wrappers' poller,
    a test receiver's pool): the workers only build and encode, holding no lock of theirs.
    The CLI never has such threads; the threaded case has its own test."""
    monkeypatch.setattr(T, "can_fork", lambda: True)


@pytest.fixture(scope="module")
def acts(tmp_path_factory):
    d = tmp_path_factory.mktemp("cap")
    write_capture(synth_capture(seed=11, n=40), d)
    got = run_bridge(inputs_from_capture(d), baseline_selector={"app": "vllm"}).actuations
    assert len(got) >= 30
    return got


@pytest.fixture(scope="module")
def deferred(tmp_path_factory, acts):
    """The same capture read with ``build=False``: its requesters and ``actuations_of``."""
    d = tmp_path_factory.mktemp("cap")
    write_capture(synth_capture(seed=11, n=40), d)
    res = run_bridge(inputs_from_capture(d), baseline_selector={"app": "vllm"}, build=False)
    assert res.actuations == [] and res.traces == [] and res.actuations_of is not None
    assert len(res.requesters) >= 30
    return res.requesters, res.actuations_of


def _paths(acts) -> dict[tuple[str, bool], int]:
    out: dict[tuple[str, bool], int] = {}
    for a in acts:
        out[a.path, a.complete] = out.get((a.path, a.complete), 0) + 1
    return out


def _parent_slices(monkeypatch, items) -> list[int]:
    """Record, by the index of its first item, each slice this process encodes itself (a
    forked worker records into its own copy of the list, which this process never sees)."""
    at = {id(x): i for i, x in enumerate(items)}
    done: list[int] = []
    real = T.encode_slice

    def recording(part, expand=None):
        done.append(at[id(part[0])])
        return real(part, expand)

    monkeypatch.setattr(T, "encode_slice", recording)
    return done


def _plain(acts) -> tuple[str, int, int]:
    traces = [build_trace(a) for a in acts]
    text = "".join(export_request_text(t) + "\n" for t in traces)
    return text, len(traces), sum(len(t) for t in traces)


def _joined(chunks) -> tuple[str, int, int]:
    chunks = list(chunks)
    return "".join(c[0] for c in chunks), sum(c[1] for c in chunks), sum(c[2] for c in chunks)


@pytest.mark.parametrize("jobs", [1, 2, 3, 5])
def test_any_number_of_workers_gives_the_same_bytes_and_counts(acts, jobs: int, fork_ok, monkeypatch):
    done = _parent_slices(monkeypatch, acts)
    chunks = list(T.trace_lines(acts, jobs, min_actuations=0))
    assert len(chunks) == jobs
    assert _joined(chunks) == _plain(acts)
    assert done == _firsts(len(acts), jobs)[::jobs]  # the workers did theirs
    assert not mp.active_children()


def _firsts(n: int, jobs: int) -> list[int]:
    """The index of each slice's first item, as ``trace_lines`` cuts ``n`` items."""
    return [sl[0] for sl in T._slices(list(range(n)), jobs)]


def test_few_actuations_one_job_or_threads_stay_in_this_process(acts, monkeypatch):
    assert T.can_fork is W.can_fork

    def no_fork(*a, **k):
        raise AssertionError("forked")

    monkeypatch.setattr(T.mp, "get_context", no_fork)
    assert len(list(T.trace_lines(acts, 4))) == 1  # fewer than MIN_PARALLEL_ACTUATIONS
    assert len(list(T.trace_lines(acts, 1, min_actuations=0))) == 1
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:
        assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
    finally:
        stop.set()
        t.join()


def test_a_failing_worker_has_its_slice_redone_here(acts, monkeypatch, fork_ok):
    done = _parent_slices(monkeypatch, acts)

    def dying(conn, fd, parts, expand, inherited):
        os._exit(3)  # no answer at all

    monkeypatch.setattr(T, "_work", dying)
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
    assert done == [0, len(acts) // 3, 2 * len(acts) // 3]  # every slice, here
    done.clear()

    def raising(conn, fd, parts, expand, inherited):
        conn.send("MemoryError")
        conn.close()

    monkeypatch.setattr(T, "_work", raising)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert done == [0, len(acts) // 2]


def test_no_process_to_be_had_means_the_slice_is_done_here(acts, monkeypatch, fork_ok):
    real = T.mp.get_context

    class Ctx:
        def __init__(self) -> None:
            self._ctx, self.started = real("fork"), 0

        def Pipe(self, duplex):  # noqa: N802
            return self._ctx.Pipe(duplex=duplex)

        def Process(self, **kw):  # noqa: N802
            p = self._ctx.Process(**kw)
            if self.started:
                p.start = lambda: (_ for _ in ()).throw(OSError(11, "Resource temporarily unavailable"))
            self.started += 1
            return p

    monkeypatch.setattr(T.mp, "get_context", lambda method: Ctx())
    assert _joined(T.trace_lines(acts, 4, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()


def test_a_caller_that_stops_early_leaves_no_worker(acts, fork_ok):
    gen = T.trace_lines(acts, 3, min_actuations=0)
    first = next(gen)
    assert first[1] == len(acts) // 3
    gen.close()
    assert not mp.active_children()


def test_cli_writes_the_same_file_and_summary_with_any_jobs(
    tmp_path: Path, clean_otlp_env, monkeypatch, fork_ok
):
    monkeypatch.setattr(T, "MIN_PARALLEL_ACTUATIONS", 0)
    slices = []
    real = T.encode_slice
    monkeypatch.setattr(
        T, "encode_slice", lambda part, expand=None: slices.append(len(part)) or real(part, expand)
    )
    runs = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"o{jobs}.jsonl"
        r = CliRunner().invoke(
            main, ["bridge", str(sample_dir()), "--jobs", jobs, "--out", str(out)], catch_exceptions=False
        )
        runs[jobs] = (r.exit_code, r.stderr, out.read_bytes())
    assert runs["1"] == runs["3"]
    code, err, data = runs["3"]
    n = data.count(b"\n")
    r = len(
        run_bridge(
            inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"}, build=False
        ).requesters
    )
    assert 0 < r < n  # the sample has a requester with two rounds
    assert slices == [r, r // 3]  # --jobs 1: all here; --jobs 3: the first third here, two forked
    assert code == 0 and f"in {n} traces" in err and f"actuations: {n}" in err


@pytest.mark.parametrize("jobs", [2, 3])
def test_many_small_slices_taken_in_turn_give_the_same_bytes(acts, jobs: int, fork_ok, monkeypatch):
    monkeypatch.setattr(T, "MAX_SLICE", 3)
    chunks = list(T.trace_lines(acts, jobs, min_actuations=0))
    assert len(chunks) == -(-len(acts) // 3) and all(c[1] <= 3 for c in chunks)
    assert _joined(chunks) == _plain(acts)
    assert not mp.active_children()


def test_a_worker_dying_after_some_slices_has_the_rest_done_here(acts, fork_ok, monkeypatch):
    monkeypatch.setattr(T, "MAX_SLICE", 4)
    real = T._work
    done = _parent_slices(monkeypatch, acts)

    def two_then_gone(conn, fd, parts, expand, inherited):
        real(conn, fd, parts[:2], expand, inherited)
        os._exit(3)

    monkeypatch.setattr(T, "_work", two_then_gone)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()
    firsts = _firsts(len(acts), 2)
    # here: its own (even) slices, and the worker's from its third on
    assert done == [f for i, f in enumerate(firsts) if i % 2 == 0 or i >= 5]


def test_a_slice_is_overwritten_only_after_it_was_read(acts, fork_ok, monkeypatch):
    """The worker writes its next slice into the shared file only on this process's ack:
    reading each slice late (after the worker could have written the next) still gives the
    same bytes."""
    monkeypatch.setattr(T, "MAX_SLICE", 3)
    real = T._read_all

    def late(fd, n):
        time.sleep(0.02)
        return real(fd, n)

    monkeypatch.setattr(T, "_read_all", late)
    done = _parent_slices(monkeypatch, acts)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert done == _firsts(len(acts), 2)[::2]
    assert not mp.active_children()


def test_a_length_the_file_does_not_hold_has_the_slice_done_here(acts, fork_ok, monkeypatch):
    def lying(conn, fd, parts, expand, inherited):
        conn.send((1 << 30, 1, 1, {}))  # more than it wrote
        conn.recv_bytes()

    monkeypatch.setattr(T, "_work", lying)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to tell the files apart")
def test_without_memfd_a_temporary_file_carries_the_slices(acts, fork_ok, monkeypatch):
    monkeypatch.delattr(T.os, "memfd_create", raising=False)
    fds, kinds = [], []
    real = T._buffer

    def buffer():
        fds.append(real())
        kinds.append(os.readlink(f"/proc/self/fd/{fds[-1]}"))
        return fds[-1]

    monkeypatch.setattr(T, "_buffer", buffer)
    done = _parent_slices(monkeypatch, acts)
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
    assert done == _firsts(len(acts), 3)[::3]
    assert len(fds) == 2 and not any(k.startswith("/memfd:") for k in kinds), kinds
    for fd in fds:  # closed once the workers are done
        with pytest.raises(OSError):
            os.fstat(fd)


def test_no_file_to_be_had_means_the_slices_are_done_here(acts, fork_ok, monkeypatch):
    def none():
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(T, "_buffer", none)
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()


#: What every host script below starts with: a capture's requesters, read as the bridge does.
_HOST_HEAD = """
import os, signal, sys, time
import multiprocessing as mp
from fma_otel import trace_lines as T
from fma_otel.bridge import inputs_from_capture, run_bridge
res = run_bridge(inputs_from_capture(sys.argv[1]), build=False)
"""

_SIGPIPE_HOST = """
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a host that does not ignore SIGPIPE
T.MAX_SLICE = 2
parent, slices = os.getpid(), T._slices(res.requesters, int(sys.argv[2]))
bad = id(slices[3][0]) if sys.argv[3] == "fail" else None  # a worker's second slice

def expand(pod):
    if id(pod) == bad and os.getpid() != parent:
        raise MemoryError("in the worker only")
    return res.actuations_of(pod)

chunks = list(T.trace_lines(res.requesters, int(sys.argv[2]), min_actuations=0, expand=expand))
acts = [a for p in res.requesters for a in res.actuations_of(p)]
print(len(chunks), sum(c[1] for c in chunks), len(acts), len(res.requesters))
"""


@pytest.fixture(scope="module")
def host_capture(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("cap") / "cap"
    write_capture(synth_capture(seed=11, n=12), d)
    return d


def _host(script: str, *args: str):
    return host(_HOST_HEAD + script, *args)


@pytest.mark.parametrize(("jobs", "case"), [(3, "ok"), (2, "fail")])
def test_a_host_that_does_not_ignore_sigpipe_survives_its_workers(host_capture: Path, jobs: int, case: str):
    """No write to a worker's pipe may raise SIGPIPE in the host: not after its last slice
    (it may be gone by then), nor after it failed between two slices ("fail": the ack to a
    dead worker)."""
    for _ in range(3):  # the worker's exit races the parent's read
        with _host(_SIGPIPE_HOST, str(host_capture), str(jobs), case) as p:
            out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (p.returncode, err[-2000:])
        chunks, traces, acts, requesters = map(int, out.split())
        assert traces == acts > 0 and chunks == -(-requesters // 2)


_KILLED_HOST = """
T.MAX_SLICE = 1
gen = T.trace_lines(res.requesters, 3, min_actuations=0, expand=res.actuations_of)
next(gen)
print(" ".join(str(w.pid) for w in mp.active_children()), flush=True)
time.sleep(60)
"""


def test_workers_end_when_the_host_is_killed(host_capture: Path):
    """A worker waiting to hand over its next slice sees the host's end of its pipe close
    (it holds no copy of it) and ends, instead of living on with a copy of the heap."""
    with _host(_KILLED_HOST, str(host_capture)) as p:
        pids = [int(x) for x in p.stdout.readline().split()]
        assert len(pids) == 2
        p.kill()  # the host alone: its workers are left to notice
        p.wait()
        alive = still_running(pids)
    assert not alive, f"workers outlived their host: {alive}"


_SIGTERM_HOST = """
signal.signal(signal.SIGTERM, lambda *a: None)  # a host whose SIGTERM handler does not exit
T.MAX_SLICE = 1
gen = T.trace_lines(res.requesters, 2, min_actuations=0, expand=res.actuations_of)
next(gen); next(gen)
gen.close()  # a caller that stops early (a failed write)
print(len(mp.active_children()), flush=True)
"""


_STUBBORN_HOST = """
signal.signal(signal.SIGTERM, lambda *a: None)  # a host whose SIGTERM handler does not exit
from fma_otel import workers
workers.STOP_GRACE_S = 0.5
T.MAX_SLICE = 1
parent = os.getpid()

def expand(pod):
    if os.getpid() != parent:
        time.sleep(600)  # a worker busy for good: only a kill ends it
    return res.actuations_of(pod)

gen = T.trace_lines(res.requesters, 2, min_actuations=0, expand=expand)
next(gen)
t = time.monotonic()
gen.close()
print(round(time.monotonic() - t, 1), len(mp.active_children()), flush=True)
"""


def test_a_busy_worker_that_ignores_sigterm_is_killed_when_the_caller_stops(host_capture: Path):
    with _host(_STUBBORN_HOST, str(host_capture)) as p:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err[-2000:]
    took, alive = out.split()
    assert float(took) < 5 and alive == "0"


def test_a_caller_stopping_early_in_a_host_that_ignores_sigterm_does_not_hang(host_capture: Path):
    with _host(_SIGTERM_HOST, str(host_capture)) as p:
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err[-2000:]
    assert out.split() == ["0"]


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_requesters_expanded_by_the_workers_give_the_same_bytes_and_paths(
    acts, deferred, jobs: int, fork_ok, monkeypatch
):
    """The bridge's way: each process correlates its own requesters' actuations."""
    requesters, expand = deferred
    monkeypatch.setattr(T, "MAX_SLICE", 7)
    done = _parent_slices(monkeypatch, requesters)
    chunks = list(T.trace_lines(requesters, jobs, min_actuations=0, expand=expand))
    assert _joined(chunks) == _plain(acts)
    paths: dict[tuple[str, bool], int] = {}
    for c in chunks:
        for k, n in c[3].items():
            paths[k] = paths.get(k, 0) + n
    assert paths == _paths(acts) and len(paths) >= 2
    firsts = _firsts(len(requesters), jobs)
    assert done == firsts[::jobs] if jobs > 1 else done == [0]
    assert not mp.active_children()


def test_the_collector_is_off_while_slices_are_made_and_as_it_was_after(acts):
    import gc

    assert gc.isenabled()
    gen = T.trace_lines(acts, 1)
    next(gen)
    assert not gc.isenabled()
    gen.close()  # also when the caller stops early
    assert gc.isenabled()
    gc.disable()
    try:
        assert _joined(T.trace_lines(acts, 1)) == _plain(acts)
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_no_pipe_to_be_had_leaves_no_file_open(acts, fork_ok, monkeypatch):
    fds = []
    real_buffer, real_ctx = T._buffer, T.mp.get_context

    class NoPipe:
        def __init__(self, method):
            self._ctx = real_ctx(method)

        def Pipe(self, duplex):  # noqa: N802
            raise OSError(24, "Too many open files")

        def Process(self, **kw):  # noqa: N802
            return self._ctx.Process(**kw)

    monkeypatch.setattr(T, "_buffer", lambda: fds.append(real_buffer()) or fds[-1])
    monkeypatch.setattr(T.mp, "get_context", NoPipe)
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
    assert len(fds) == 1
    with pytest.raises(OSError):
        os.fstat(fds[0])


def test_no_more_workers_than_the_items_give_work_for(acts, fork_ok):
    """``--jobs 64`` on as many actuations as the threshold: each process gets at least
    half the threshold, so two in all (it used to fork one per slice asked for)."""
    chunks = list(T.trace_lines(acts, 64, min_actuations=len(acts)))
    assert len(chunks) == 2
    assert _joined(chunks) == _plain(acts)
    assert not mp.active_children()
