"""The OTLP JSON lines of many actuations, built and encoded by forked workers.

Why: once the sources are read, correlating each requester's actuations, building each
actuation's span tree and encoding it as one OTLP JSON line is the bridge's last serial
step (about a third of its time on a big capture), while the other CPUs sit idle.  That
work is per requester, pure and independent, so the items (actuations, or requester Pods
with the ``expand`` that makes their actuations: ``Correlator.actuations_of``) are cut
into contiguous slices (at most ``MAX_SLICE`` each), dealt in turn to this process and
forked workers; a worker correlates, builds and encodes its slices and hands back only
their text, one at a time, and this process writes the slices in order.  The bytes are
exactly those of building and encoding every actuation here, in order
(``tests/test_trace_lines.py``).

A slice's text (~7 MB for 500 actuations) goes through a memory file each worker shares
with this process (``memfd``; an unlinked temporary file where there is none), and only
its length through the pipe.  Why: pickled through the pipe, 64 KiB at a time, a slice
took 50-90 ms to cross on a 2-CPU VM, with both processes waiting on each other, twice on
the critical path; written and read as a file it takes ~10 ms on each side.  The worker
writes its next slice there only once this process says it has read the last one, so a
worker holds at most two slices (one in the file, one encoded and waiting).

Workers are only forked (they need this process's actuations or correlator, which a
spawned worker would have to be sent), and only when this process runs no other thread
(see ``workers.py``); otherwise, for few items, or with ``jobs=1``, everything is done
here.  A worker that fails for any reason has its remaining slices done here, so a
failure costs time, never lines.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .build import build_trace
from .correlate import Actuation
from .sinks.otlp_json import export_request_text
from .workers import can_fork, no_cyclic_gc, stop

#: Fewer items than this are done here: a fork and a pipe cost more than they save.
MIN_PARALLEL_ACTUATIONS = 256

#: What makes an item's actuations (``Correlator.actuations_of`` for a requester Pod).
Expand = Callable[[Any], Sequence[Actuation]]

#: ``(text, traces, spans, paths)`` of a slice; ``paths`` counts its actuations by
#: ``(path, complete)``, which is what the bridge's summary needs of them.
Slice = tuple[str, int, int, dict[tuple[str, bool], int]]


def encode_slice(items: Sequence[Any], expand: Expand | None = None) -> Slice:
    """One OTLP JSON line per actuation of ``items``, in order: the items themselves, or
    each one's ``expand(item)``."""
    lines: list[str] = []
    spans = traces = 0
    paths: dict[tuple[str, bool], int] = {}
    for item in items:
        for act in (item,) if expand is None else expand(item):
            trace = build_trace(act)
            traces += 1
            spans += len(trace)
            lines.append(export_request_text(trace))
            lines.append("\n")
            key = (act.path, act.complete)
            paths[key] = paths.get(key, 0) + 1
    return "".join(lines), traces, spans, paths


#: At most this many items per slice, so that the text held at once (a few slices, a few
#: MB each) does not grow with the capture.  Items are requesters in the bridge: a slice
#: then holds their actuations, one each as a rule, one per round for a requester bound
#: again after an unbind (what the correlator holds of them anyway).
MAX_SLICE = 500


def _slices(items: Sequence[Any], jobs: int) -> list[Sequence[Any]]:
    """Contiguous slices, as even as ``jobs`` allow and none over :data:`MAX_SLICE`."""
    n = len(items)
    count = max(jobs, -(-n // MAX_SLICE))
    cuts = [n * k // count for k in range(count + 1)]
    return [items[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


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


def _work(
    conn: Any, fd: int, parts: Sequence[Sequence[Any]], expand: Expand | None, inherited: Sequence[Any] = ()
) -> None:
    """Worker: encode its slices in order; write each into ``fd`` once this process has read
    the one before (its ack on ``conn``), then send ``(length, traces, spans, paths)``.

    ``inherited`` are the parent's ends of the pipes (its own and earlier workers') that the
    fork copied here: closed first, so that when the parent is gone (killed, or it stopped
    early) the wait for an ack ends with ``EOFError`` instead of outliving it.
    """
    for theirs in inherited:
        theirs.close()
    # No collections in the worker (it inherits the collector off from trace_lines): a full
    # one would walk (and so copy, page by page) the whole heap it shares with the parent.
    try:
        for i, part in enumerate(parts):
            text, traces, spans, paths = encode_slice(part, expand)
            data = text.encode(*_CODEC)
            del text
            if i:
                conn.recv_bytes()  # the last slice has been read out of fd
            _write_all(fd, data)
            conn.send((len(data), traces, spans, paths))
    except EOFError:
        pass  # the parent has stopped taking slices: nothing to do, nobody to tell
    except BaseException as exc:  # noqa: BLE001  (the parent does the rest of its slices)
        try:
            conn.send(exc.__class__.__name__)
        except OSError:
            pass  # the parent is gone too; its end of the pipe says so if not
    finally:
        conn.close()


def _ack(conn: Any) -> None:
    """Tell a worker its last slice was read: ``SIGPIPE`` held back meanwhile.

    The worker may have died since it sent the slice (a failure, an OOM kill); writing to
    its closed end then raises ``SIGPIPE``, which kills a host that does not ignore it.
    Blocked for this thread, the signal is taken back if the write raised it, and the write
    fails with ``EPIPE`` instead, which the next receive turns into "done here".  (A
    ``SIGPIPE`` sent to this process from outside in the microseconds of the write would
    be taken back too: no sender does that on purpose.)
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        conn.send_bytes(b"")
    except OSError:
        pass
    finally:
        if signal.SIGPIPE not in old:
            try:
                if signal.SIGPIPE in signal.sigpending():
                    if hasattr(signal, "sigtimedwait"):
                        signal.sigtimedwait({signal.SIGPIPE}, 0)
                    else:  # macOS: pending, so this returns at once
                        signal.sigwait({signal.SIGPIPE})
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _take(conn: Any, fd: int, more: bool) -> Slice | None:
    """A worker's next slice, read out of ``fd``, or ``None`` if it is gone or failed, or
    what it sent makes no sense.  Acked only when the worker has ``more`` slices to hand
    over: after its last one it may be gone, and writing to a closed pipe raises
    ``SIGPIPE`` in a host that does not ignore it."""
    try:
        got = conn.recv()
    except (EOFError, OSError):
        return None
    if not (isinstance(got, tuple) and len(got) == 4):
        return None
    n, traces, spans, paths = got
    data = _read_all(fd, n)
    if len(data) != n:
        return None
    if more:
        _ack(conn)
    return data.decode(*_CODEC), traces, spans, paths


def trace_lines(
    items: Sequence[Any], jobs: int, min_actuations: int | None = None, expand: Expand | None = None
) -> Iterator[Slice]:
    """``(text, traces, spans, paths)`` per slice of ``items``, in order; see the module doc.

    ``items`` are actuations, or (with ``expand``) what ``expand`` makes each one's
    actuations of: a ``Correlator``'s requesters in order with its ``actuations_of``, after
    its ``prepare`` (so that the workers share its indexes instead of each building them).
    Slice ``i`` is encoded by process ``i % jobs`` (0 is this one), so each worker has the
    next of its slices ready while this process writes and encodes; a worker waits for this
    process to take a slice before it hands over the next, which keeps the text held at
    once to two slices per worker and one here.
    ``min_actuations`` (items) defaults to :data:`MIN_PARALLEL_ACTUATIONS`.

    CPython's cyclic collector is off until the last slice is taken or the generator is
    closed (then back as it was): see ``workers.no_cyclic_gc``.
    """
    with no_cyclic_gc():
        yield from _trace_lines(
            items, jobs, MIN_PARALLEL_ACTUATIONS if min_actuations is None else min_actuations, expand
        )


def _trace_lines(items: Sequence[Any], jobs: int, min_items: int, expand: Expand | None) -> Iterator[Slice]:
    """:func:`trace_lines` with the collector already off: here, or dealt to workers."""
    if jobs < 2 or len(items) < min_items or not can_fork():
        yield encode_slice(items, expand)
        return
    # no more processes than the items give work for (half the threshold each)
    jobs = min(jobs, max(2, len(items) // max(1, min_items // 2)))
    slices = _slices(items, jobs)
    ctx = mp.get_context("fork")
    workers: list[tuple[Any, Any, int]] = []
    for w in range(1, jobs):
        try:
            fd = _buffer()
        except OSError:
            break  # no file to be had: the slices without a worker are done here
        try:
            recv, send = ctx.Pipe(duplex=True)
        except OSError:
            os.close(fd)
            break  # no pipe to be had (out of descriptors): as above
        inherited = (recv, *(r for _, r, _ in workers))
        p = ctx.Process(target=_work, args=(send, fd, slices[w::jobs], expand, inherited), daemon=True)
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
            got: Slice | None = None
            if 0 < w <= len(workers) and alive[w - 1]:
                _, recv, fd = workers[w - 1]
                got = _take(recv, fd, i + jobs < len(slices))
                if got is None:
                    alive[w - 1] = False  # gone or failed: its slices are done here from now on
            yield got if got is not None else encode_slice(part, expand)
    finally:
        # Also when the caller stops early (a failed write): a worker waiting for an ack
        # sees its pipe closed and ends; one still encoding is stopped, and killed if the
        # host's own SIGTERM handler (which it inherited) does not end it.
        for _, recv, fd in workers:
            recv.close()
            os.close(fd)
        stop(p for p, _, _ in workers)
