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
from fma_otel.synth import synth_capture, write_capture


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


def _plain(acts) -> tuple[str, int, int]:
    traces = [build_trace(a) for a in acts]
    text = "".join(export_request_text(t) + "\n" for t in traces)
    return text, len(traces), sum(len(t) for t in traces)


def _joined(chunks) -> tuple[str, int, int]:
    chunks = list(chunks)
    return "".join(c[0] for c in chunks), sum(c[1] for c in chunks), sum(c[2] for c in chunks)


@pytest.mark.parametrize("jobs", [1, 2, 3, 5])
def test_any_number_of_workers_gives_the_same_bytes_and_counts(acts, jobs: int, fork_ok):
    chunks = list(T.trace_lines(acts, jobs, min_actuations=0))
    assert len(chunks) == jobs
    assert _joined(chunks) == _plain(acts)
    assert not mp.active_children()


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
    def dying(conn, fd, parts):
        os._exit(3)  # no answer at all

    monkeypatch.setattr(T, "_work", dying)
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)

    def raising(conn, fd, parts):
        conn.send("MemoryError")
        conn.close()

    monkeypatch.setattr(T, "_work", raising)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)


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
    monkeypatch.setattr(T, "encode_slice", lambda part: slices.append(len(part)) or real(part))
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
    assert slices == [n, n // 3]  # --jobs 1: all here; --jobs 3: the first third here, two forked
    assert code == 0 and n > 0 and f"in {n} traces" in err


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

    def two_then_gone(conn, fd, parts):
        real(conn, fd, parts[:2])
        os._exit(3)

    monkeypatch.setattr(T, "_work", two_then_gone)
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()


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
    assert _joined(T.trace_lines(acts, 2, min_actuations=0)) == _plain(acts)
    assert not mp.active_children()


def test_a_length_the_file_does_not_hold_has_the_slice_done_here(acts, fork_ok, monkeypatch):
    def lying(conn, fd, parts):
        conn.send((1 << 30, 1, 1))  # more than it wrote
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
    assert _joined(T.trace_lines(acts, 3, min_actuations=0)) == _plain(acts)
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


_SIGPIPE_HOST = """
import signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # a host that does not ignore SIGPIPE
from fma_otel import trace_lines as T
from fma_otel.bridge import inputs_from_capture, run_bridge
acts = run_bridge(inputs_from_capture(sys.argv[1]), build=False).actuations
T.MAX_SLICE = 2
chunks = list(T.trace_lines(acts, 3, min_actuations=0))
print(len(chunks), sum(c[1] for c in chunks), len(acts))
"""


def test_a_host_that_does_not_ignore_sigpipe_survives_the_workers_ending(tmp_path: Path):
    """No write to a worker's pipe after its last slice: it may be gone by then."""
    import subprocess
    import sys

    d = tmp_path / "cap"
    write_capture(synth_capture(seed=11, n=12), d)
    for _ in range(3):  # the worker's exit races the parent's last read
        done = subprocess.run(
            [sys.executable, "-c", _SIGPIPE_HOST, str(d)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        chunks, traces, acts = map(int, done.stdout.split())
        assert traces == acts and chunks == -(-acts // 2)
