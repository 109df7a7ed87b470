"""The OTLP JSON lines of many actuations, built and encoded by forked workers.

Why: once the sources are read, building each actuation's span tree and encoding it as
one OTLP JSON line is the bridge's last serial step (about a third of its time on a big
capture), while the other CPUs sit idle.  That work is per actuation, pure and
independent, so the actuations are cut into contiguous slices (at most ``MAX_SLICE``
each), dealt in turn to this process and forked workers; a worker builds and encodes its
slices and sends back only their text, one at a time, and this process writes the slices
in order.  The bytes are exactly those of building and
encoding every actuation here, in order (``tests/test_trace_lines.py``).

Workers are only forked (they need this process's actuations, which a spawned worker
would have to be sent), and only when this process runs no other thread (see
``workers.py``); otherwise, for few actuations, or with ``jobs=1``,
everything is done here.  A worker that fails for any reason has its remaining slices
done here, so a failure costs time, never lines.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

from .build import build_trace
from .correlate import Actuation
from .sinks.otlp_json import export_request_text
from .workers import can_fork

#: Fewer actuations than this are done here: a fork and a pipe cost more than they save.
MIN_PARALLEL_ACTUATIONS = 256


def encode_slice(acts: Sequence[Actuation]) -> tuple[str, int, int]:
    """``(text, traces, spans)`` of ``acts``: one OTLP JSON line per actuation, in order."""
    lines: list[str] = []
    spans = 0
    for act in acts:
        trace = build_trace(act)
        spans += len(trace)
        lines.append(export_request_text(trace))
        lines.append("\n")
    return "".join(lines), len(acts), spans


#: At most this many actuations per slice, so that the text held at once (a slice per
#: process, a few MB) does not grow with the capture.
MAX_SLICE = 500


def _slices(acts: Sequence[Actuation], jobs: int) -> list[Sequence[Actuation]]:
    """Contiguous slices, as even as ``jobs`` allow and none over :data:`MAX_SLICE`."""
    n = len(acts)
    count = max(jobs, -(-n // MAX_SLICE))
    cuts = [n * k // count for k in range(count + 1)]
    return [acts[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def _buffer() -> int:
    """A file descriptor for one worker's slice text: an anonymous memory file (Linux),
    else an unlinked temporary file.  Created before the fork, so the worker inherits it."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None:
        try:
            return memfd_create("fma-otel-slice", os.MFD_CLOEXEC)
        except OSError:
            pass
    with tempfile.TemporaryFile() as f:
        return os.dup(f.fileno())


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` at the start of ``fd`` (``pwrite`` may write less than asked)."""
    view, at = memoryview(data), 0
    while at < len(data):
        at += os.pwrite(fd, view[at:], at)


def _read_all(fd: int, n: int) -> bytes:
    """The first ``n`` bytes of ``fd``; fewer only if the file is shorter (a worker's bug)."""
    parts, at = [], 0
    while at < n:
        got = os.pread(fd, n - at, at)
        if not got:
            break
        parts.append(got)
        at += len(got)
    return b"".join(parts)


#: The text's bytes as written to and read from the memory file: the JSON is ASCII, but any
#: ``str`` survives the round trip exactly.
_CODEC = ("utf-8", "surrogatepass")


def _work(conn: Any, fd: int, parts: Sequence[Sequence[Actuation]]) -> None:
    """Worker: encode its slices in order; write each into ``fd`` once this process has read
    the one before (its ack on ``conn``), then send ``(length, traces, spans)``."""
    # No collections in the worker: a full one would walk (and so copy, page by page) the
    # whole heap it shares with the parent.
    gc.disable()
    try:
        for i, part in enumerate(parts):
            text, traces, spans = encode_slice(part)
            data = text.encode(*_CODEC)
            del text
            if i:
                conn.recv_bytes()  # the last slice has been read out of fd
            _write_all(fd, data)
            conn.send((len(data), traces, spans))
    except BaseException as exc:  # noqa: BLE001  (the parent does the rest of its slices)
        conn.send(exc.__class__.__name__)
    finally:
        conn.close()


def _take(conn: Any, fd: int, more: bool) -> tuple[str, int, int] | None:
    """A worker's next slice, read out of ``fd``, or ``None`` if it is gone or failed, or
    what it sent makes no sense.  Acked only when the worker has ``more`` slices to hand
    over: after its last one it may be gone, and writing to a closed pipe raises
    ``SIGPIPE`` in a host that does not ignore it."""
    try:
        got = conn.recv()
    except (EOFError, OSError):
        return None
    if not (isinstance(got, tuple) and len(got) == 3):
        return None
    n, traces, spans = got
    data = _read_all(fd, n)
    if len(data) != n:
        return None
    if more:
        try:
            conn.send_bytes(b"")
        except OSError:
            pass  # it has stopped after this slice: the next recv says so
    return data.decode(*_CODEC), traces, spans


def trace_lines(
    acts: Sequence[Actuation], jobs: int, min_actuations: int | None = None
) -> Iterator[tuple[str, int, int]]:
    """``(text, traces, spans)`` per slice of ``acts``, in order; see the module doc.

    Slice ``i`` is encoded by process ``i % jobs`` (0 is this one), so each worker has the
    next of its slices ready while this process writes and encodes; a worker waits for this
    process to take a slice before it hands over the next, which keeps the text held at
    once to two slices per worker and one here.
    ``min_actuations`` defaults to :data:`MIN_PARALLEL_ACTUATIONS`.
    """
    if min_actuations is None:
        min_actuations = MIN_PARALLEL_ACTUATIONS
    if jobs < 2 or len(acts) < min_actuations or not can_fork():
        yield encode_slice(acts)
        return
    slices = _slices(acts, jobs)
    ctx = mp.get_context("fork")
    workers: list[tuple[Any, Any, int]] = []
    # Everything allocated so far is left out of this process's collections while the
    # workers run: a full collection here would write to every object's header, and so
    # copy every page this process shares with them (measured: a third of the gain lost).
    gc.freeze()
    for w in range(1, jobs):
        try:
            fd = _buffer()
        except OSError:
            break  # no file to be had: the slices without a worker are done here
        recv, send = ctx.Pipe(duplex=True)
        p = ctx.Process(target=_work, args=(send, fd, slices[w::jobs]), daemon=True)
        try:
            p.start()
        except OSError:
            recv.close()
            send.close()
            os.close(fd)
            break  # no more processes to be had: the slices without a worker are done here
        send.close()
        workers.append((p, recv, fd))
    alive = [True] * len(workers)
    try:
        for i, part in enumerate(slices):
            w = i % jobs
            got: tuple[str, int, int] | None = None
            if 0 < w <= len(workers) and alive[w - 1]:
                _, recv, fd = workers[w - 1]
                got = _take(recv, fd, i + jobs < len(slices))
                if got is None:
                    alive[w - 1] = False  # gone or failed: its slices are done here from now on
            yield got if got is not None else encode_slice(part)
    finally:
        gc.unfreeze()
        for p, recv, fd in workers:  # also when the caller stops early (a failed write)
            recv.close()
            os.close(fd)
            if p.is_alive():
                p.terminate()
            p.join()
