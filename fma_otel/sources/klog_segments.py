"""Read one big klog file in byte segments, one worker process per segment.

Why: reading the DPC log is the bridge's largest cost (it grows with the log, not with the
actuations), it is pure (bytes in, records out), and the machines the bridge runs on have
more than one CPU.  So a long log is cut into ``jobs`` byte ranges, each read by
:func:`~fma_otel.sources.klog.iter_klog` in a worker process, while the parent process goes
on reading the Pods and launcher logs; the parent then takes the records in line order.

The result is exactly what one serial :func:`iter_klog` over the whole file gives (the
records, their line numbers, every count and skip reason, in the same order), because:

* a segment starts at a line whose first byte (after a ``--timestamps`` prefix) is neither
  a tab nor a space.  The serial parser, whatever state it was in, treats such a line the
  same way as a fresh parser does: it is never the continuation of a multi-line ``key=<``
  block, and a block still open before it is closed there as cut -- exactly as the previous
  segment's reader closes it at its end of input;
* each worker counts lines from 1; the parent adds the number of lines the segments before
  it read (``stats.read`` counts every physical line, blank ones included);
* each worker sends its records and its kept skip reasons as one ordered stream, and the
  parent replays the skips in their place between the records, so a caller that records
  skips of its own while it takes the records (the bridge, for lines that make no fact)
  interleaves them exactly as with a serial read.

A caller may have the workers turn each record into a row of its own (``transform``; the
bridge makes the DPC facts there), and then takes those rows instead of the records.

The parent takes segment 0's records as they come, while the later segments are still
read (their batches are held until then).  When the caller says how much other work it has
(``other_bytes``), it is one of the ``jobs`` processes and reads segment 0 itself, after
that work, sized so that every process has about the same share (:func:`plan_segments`):
``jobs`` processes on ``jobs`` CPUs, not ``jobs + 1``.  Workers are forked when the calling process
runs no other thread, spawned otherwise (``workers.py``: forking a threaded process is
unsafe); where neither start method exists, the file is read serially by the caller.  A
worker that fails for any reason has the rest of its segment read by the parent, from
where its batches stopped, so a failure costs time, never records.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import fields
from itertools import islice
from multiprocessing.connection import wait as mp_wait
from typing import Any

from ..workers import start_method, stop
from .klog import iter_klog
from .records import KlogRecord, SourceStats

#: Logs smaller than this are read serially: a fork and a pipe cost more than they save.
MIN_PARALLEL_BYTES = 16 << 20
#: No segment is planned smaller than this, whatever ``jobs`` asks for (one process per
#: few lines would cost far more than it saves).
MIN_SEGMENT_BYTES = 4 << 20
#: Bytes looked at, from a cut point, to find a line a segment may start at.
_PROBE = 1 << 16


def _safe_start(line: bytes, whole: bool = True) -> bool:
    """A line a segment may start at: not a block continuation, whatever came before.

    ``whole=False``: ``line`` is only the head of a longer line.  A head that starts with a
    digit and holds no space cannot tell whether a ``--timestamps`` prefix ends in a tab
    further on (a continuation), so it is not taken: a later cut is always safe.
    """
    h = 0
    if line[:1].isdigit():
        sp = line.find(b" ")
        if sp < 0 and not whole:
            return False
        h = sp + 1
    return line[h : h + 1] not in (b"\t", b" ", b"")


def cut_points(path: str, jobs: int) -> list[int]:
    """Byte offsets where segments start: 0, then up to ``jobs - 1`` safe line starts."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        return _cuts(fh, 0, size, jobs)


def _cuts(fh: Any, lo: int, size: int, parts: int) -> list[int]:
    """``lo`` (a safe start), then up to ``parts - 1`` safe line starts cutting ``[lo, size)``
    into parts of about equal size."""
    starts = [lo]
    for k in range(1, parts):
        at = _next_safe_start(fh, max(lo + (size - lo) * k // parts, starts[-1] + 1))
        if at is None:
            break
        starts.append(at)
    return starts


def plan_segments(path: str, jobs: int, smallest: int, other_bytes: int) -> tuple[list[int], bool]:
    """Segment starts for ``jobs`` processes, the caller one of them, and whether segment 0
    is the caller's own.

    Why: the caller has other work to do while the workers read (the bridge: the Pods and
    launcher logs), worth ``other_bytes`` bytes of this log.  Giving every segment to a
    worker puts ``jobs + 1`` processes on ``jobs`` CPUs, and the caller then idles while
    it waits for them; instead each of the ``jobs`` processes gets about the same share of
    the whole work, the caller's being its other work plus the head of the log.  When that
    head would be smaller than ``smallest`` (the other work is already a share), all of the
    log goes to ``jobs - 1`` workers (at least one).
    """
    size = os.path.getsize(path)
    n = min(jobs, max(1, size // smallest))
    mine = (size + other_bytes) // n - other_bytes
    with open(path, "rb") as fh:
        if n >= 2 and mine >= smallest:
            at = _next_safe_start(fh, mine)
            if at is not None:
                return [0, *_cuts(fh, at, size, n - 1)], True
        return _cuts(fh, 0, size, max(1, n - 1)), False


def _next_safe_start(fh: Any, pos: int) -> int | None:
    """The first line start at or after ``pos`` (>= 1) that :func:`_safe_start` accepts."""
    fh.seek(pos - 1)
    _skip_line(fh)  # to just after the next ``\n``: the byte at pos - 1 may be that ``\n``
    while True:
        start = fh.tell()
        head = fh.readline(_PROBE)
        if not head:
            return None
        if _safe_start(head, whole=head.endswith(b"\n") or len(head) < _PROBE):
            return start
        if not head.endswith(b"\n"):
            _skip_line(fh)


def _skip_line(fh: Any) -> None:
    """Read past the next ``\n`` (or to the end), holding at most ``_PROBE`` bytes."""
    while True:
        part = fh.readline(_PROBE)
        if not part or part.endswith(b"\n"):
            return


class _Range:
    """A binary reader over ``[start, end)`` of a file, for the bulk scanner's ``read1``."""

    def __init__(self, fh: Any, start: int, end: int, done: Any, slot: int) -> None:
        fh.seek(start)
        self._fh, self._left, self._done, self._slot = fh, end - start, done, slot

    def read1(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._fh.read(self._left if n < 0 else min(n, self._left))
        self._left -= len(data)
        if self._done is not None:
            self._done[self._slot] += len(data)
        return data

    read = read1


def _as_row(r: KlogRecord) -> tuple[Any, ...]:
    """A record as a plain tuple (cheaper to pickle), its repeated strings interned so that
    pickle writes each once per message."""
    kv = tuple([(_intern(k), v) for k, v in r.kv])
    return (
        r.line_no,
        r.level,
        r.month,
        r.day,
        r.tod_us,
        r.pid,
        _intern(r.file),
        r.src_line,
        _intern(r.msg),
        kv,
        r.prefix_ns,
    )


_intern = sys.intern


class _StreamedStats(SourceStats):
    """Counts like :class:`SourceStats`, and hands each kept skip to the item stream, so the
    caller can replay the skips in their place between the records."""

    def __init__(self, name: str, events: list[tuple[Any, ...]]) -> None:
        super().__init__(name)
        self._events = events

    def skip(self, line_no: int, reason: str) -> None:
        self.skipped += 1
        if len(self.skipped_lines) < 100:  # later ones can never be listed (see records())
            self.skipped_lines.append((line_no, reason))
            self._events.append((line_no, reason))


#: What a ``transform`` returns for a record: a tuple of this length whose first item is
#: the record's line number (then offset by the parent like a record's), or ``None``.
TRANSFORM_ROW = 6

#: ``transform(record)`` run by the workers on each record (see :meth:`SegmentedRead.start`).
Transform = Callable[[KlogRecord], "tuple[Any, ...] | None"]


def _items(
    path: str,
    start: int,
    end: int,
    messages: Any,
    contains: Any,
    done: Any = None,
    slot: int = 0,
    transform: Transform | None = None,
    drop: Callable[[bytes], bool] | None = None,
) -> Iterator[tuple[Any, ...]]:
    """A segment read as one ordered stream: record rows (11-tuples, or what ``transform``
    makes of each record: ``TRANSFORM_ROW``-tuples, ``None`` dropped), kept skips
    ``(line_no, reason)`` where the serial reader records them, and last
    ``("end", read, understood, skipped_not_listed)``.  Line numbers count from the segment.
    ``drop`` goes to :func:`iter_klog` (lines counted, not parsed)."""
    events: list[tuple[Any, ...]] = []
    st = _StreamedStats(path, events)
    with open(path, "rb") as fh:
        for r in iter_klog(_Range(fh, start, end, done, slot), st, messages, contains, drop=drop):
            if events:
                yield from events
                events.clear()
            if transform is None:
                yield _as_row(r)
            else:
                row = transform(r)
                if row is not None:
                    yield row
    yield from events
    yield ("end", st.read, st.understood, st.skipped - len(st.skipped_lines))


#: Items per message from a worker: the parent takes a segment's records while it is read.
BATCH = 2048


def _work(
    conn: Any,
    path: str,
    start: int,
    end: int,
    messages: Any,
    contains: Any,
    done: Any,
    slot: int,
    transform: Transform | None,
    drop: Callable[[bytes], bool] | None = None,
    inherited: tuple[Any, ...] = (),
) -> None:
    """Worker: send the segment's :func:`_items` in batches (lists); a failure as a ``str``.

    Batches are held until the parent waits for the workers' records (the last slot of
    ``done`` says so): a send blocks until the parent reads it, and before that the parent
    is busy with its own work (the Pods and launcher logs, and a local head of the log), so
    sending earlier would only stall this worker.

    ``inherited`` are the parent's ends of the pipes that a fork copied here (this worker's
    and the earlier ones'): closed first, so that a parent that is gone (killed) makes the
    next send fail instead of blocking this worker for ever.
    """
    for theirs in inherited:
        theirs.close()
    taking = len(done) - 1
    try:
        batch: list[tuple[Any, ...]] = []
        for item in _items(path, start, end, messages, contains, done, slot, transform, drop):
            batch.append(item)
            if len(batch) >= BATCH and done[taking]:
                conn.send(batch)
                batch = []
        conn.send(batch)
    except BaseException as exc:  # noqa: BLE001  (reported to the parent, which reads the segment)
        try:
            conn.send(exc.__class__.__name__)
        except OSError:
            pass  # the parent is gone: nobody to tell
    finally:
        conn.close()


_FAILED = "failed"


def _record_maker() -> Callable[[tuple[Any, ...], int], KlogRecord]:
    """``row, offset -> KlogRecord`` through the slots' own descriptors: the frozen
    dataclass' ``__init__`` sets each of its 11 fields by name, twice as slow, and the
    parent builds every record of the log's later segments this way."""
    setters = tuple(KlogRecord.__dict__[f.name].__set__ for f in fields(KlogRecord))
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10 = setters
    new = object.__new__

    def make(row: tuple[Any, ...], offset: int) -> KlogRecord:
        r = new(KlogRecord)
        s0(r, row[0] + offset)
        s1(r, row[1])
        s2(r, row[2])
        s3(r, row[3])
        s4(r, row[4])
        s5(r, row[5])
        s6(r, row[6])
        s7(r, row[7])
        s8(r, row[8])
        s9(r, row[9])
        s10(r, row[10])
        return r

    return make


_record = _record_maker()


def _offset_row(row: tuple[Any, ...], offset: int) -> tuple[Any, ...]:
    """A transformed row with its line number (its first item) offset."""
    return (row[0] + offset, *row[1:]) if offset else row


def _replay(
    items: Iterable[tuple[Any, ...]],
    offset: int,
    stats: SourceStats,
    taken: list[int],
    transformed: bool = False,
) -> Generator[Any, None, tuple[Any, ...] | None]:
    """Yield the records (or transformed rows) of a segment's items, line numbers offset;
    record its skips in ``stats`` in their place, count the items in ``taken[0]``; return
    its end, if reached."""
    row_len, make = (TRANSFORM_ROW, _offset_row) if transformed else (11, _record)
    for item in items:
        taken[0] += 1
        n = len(item)
        if n == row_len:
            yield make(item, offset)
        elif n == 2:
            stats.skip(item[0] + offset, item[1])
        else:
            return item
    return None


class SegmentedRead:
    """Segments being read by workers; :meth:`records` waits for them in order.

    Started with :meth:`start` (``None`` when the file is better read serially), so the
    caller can do other work while the workers run.  With ``local``, segment 0 has no
    worker: :meth:`records` reads it in the calling process (see :func:`plan_segments`).
    """

    def __init__(
        self,
        path: str,
        starts: list[int],
        size: int,
        messages: Any,
        contains: Any,
        method: str = "fork",
        transform: Transform | None = None,
        drop: Callable[[bytes], bool] | None = None,
        local: bool = False,
    ) -> None:
        ctx = mp.get_context(method)
        self.path, self.size, self.method = path, size, method
        self._args = (messages, contains)
        self._transform, self._drop = transform, drop
        self._bounds = list(zip(starts, [*starts[1:], size], strict=True))
        # bytes read per segment, and a last slot set when records() begins to wait for
        # the workers (see _work)
        self._done = ctx.Array("q", len(starts) + 1, lock=False)
        #: (process, its pipe's receiving end) per segment; ``None`` for the local one
        self._workers: list[tuple[Any, Any] | None] = []
        try:
            for slot, (a, b) in enumerate(self._bounds):
                if local and slot == 0:
                    self._workers.append(None)
                    continue
                recv, send = ctx.Pipe(duplex=False)
                # a forked worker holds copies of the parent's ends (see _work); a spawned
                # one gets only what it is passed, so it must not be passed those
                inherited = (recv, *(w[1] for w in self._workers if w)) if method == "fork" else ()
                args = (send, path, a, b, messages, contains, self._done, slot, transform, drop, inherited)
                p = ctx.Process(target=_work, args=args, daemon=True)
                self._workers.append((p, recv))
                p.start()
                send.close()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the workers still running (a failed start, or an abandoned read)."""
        running = [w for w in self._workers if w is not None]
        for _, recv in running:
            recv.close()
        stop(p for p, _ in running)

    @classmethod
    def start(
        cls,
        path: str,
        messages: frozenset[str] | None,
        contains: Mapping[str, Iterable[str]] | None,
        jobs: int,
        min_bytes: int = MIN_PARALLEL_BYTES,
        method: str | None = None,
        transform: Transform | None = None,
        drop: Callable[[bytes], bool] | None = None,
        other_bytes: int | None = None,
    ) -> SegmentedRead | None:
        """Start the workers, or ``None`` when the file is better read serially.

        ``method`` forces a start method (tests); by default :func:`start_method` decides.
        ``transform`` (a module-level function, so a spawned worker can import it) is run by
        the workers on each record; :meth:`records` then yields what it returns instead of
        the records (``None`` dropped, line numbers offset).  Why: the caller's own per-record
        work then runs in parallel too, and what crosses the pipe is only what it keeps.
        ``drop`` (module-level too) is passed to each worker's :func:`iter_klog`.

        ``other_bytes``: the caller is one of the ``jobs`` processes, with other work worth
        that many bytes of this log to do before it takes the records; it then reads the
        head of the log itself (:func:`plan_segments`).  ``None``: every segment has a
        worker, ``jobs`` of them.
        """
        try:
            size = os.path.getsize(path)
            if jobs < 2 or size < min_bytes:
                return None
            method = method or start_method()
            if method is None:
                return None
            smallest = max(1, min(min_bytes, MIN_SEGMENT_BYTES))  # tests split tiny logs
            if other_bytes is None:
                starts, local = cut_points(path, min(jobs, max(1, size // smallest))), False
                if len(starts) < 2:
                    return None
            else:
                starts, local = plan_segments(path, jobs, smallest, max(0, other_bytes))
        except OSError:
            return None  # the serial reader reports it properly
        try:
            return cls(path, starts, size, messages, contains, method, transform, drop, local)
        except OSError:
            return None  # no processes to be had (limits, no /dev/shm): read serially

    @property
    def segments(self) -> int:
        """Segments the file is read in (by workers, and by the caller when ``local``)."""
        return len(self._workers)

    @property
    def local(self) -> bool:
        """Whether segment 0 is read by the calling process itself."""
        return bool(self._workers) and self._workers[0] is None

    def bytes_done(self) -> int:
        return sum(self._done[: len(self._workers)])

    def _read_here(self, i: int, done: Any) -> Iterator[tuple[Any, ...]]:
        """Segment ``i``'s items read in this process; ``done`` (this read's progress slots,
        or ``None`` for a takeover, whose worker already counted what it read)."""
        return _items(self.path, *self._bounds[i], *self._args, done, i, self._transform, self._drop)

    def records(self, stats: SourceStats, progress: Callable[[int], None] | None = None) -> Iterator[Any]:
        """The records (or the ``transform``'s rows) of the whole file in line order, as they
        arrive; ``stats`` gets the file's counts, and each kept skip in its place between
        the records (as the serial reader records it, so the caller's own skips interleave
        the same way).

        Segment ``i`` is taken while the later ones are still read (their batches are held
        here); its line numbers are offset by the lines of the segments before it.  The
        local segment (``local``) is read here, now.  A worker that fails has its segment
        read here, from where its batches stopped.
        """
        k = len(self._workers)
        transformed = self._transform is not None
        queues: list[deque[list[tuple[Any, ...]]]] = [deque() for _ in range(k)]
        over = [False] * k
        waiting = {w[1]: i for i, w in enumerate(self._workers) if w is not None}
        reported = [0]
        offset = 0

        def report() -> None:
            if progress is not None:
                now = self.bytes_done()
                progress(now - reported[0])
                reported[0] = now

        try:
            for i in range(k):
                taken = [0]  # items of segment i replayed so far
                end: tuple[Any, ...] | None = None
                if self._workers[i] is None:  # the local segment (its bytes counted for progress)
                    mine: Iterator[tuple[Any, ...]] = self._read_here(i, self._done)
                    if progress is not None:
                        mine = _every(mine, report)
                    end = yield from _replay(mine, offset, stats, taken, transformed)
                else:
                    # workers send their batches from now on (they held them until here)
                    self._done[k] = 1
                while end is None:
                    q = queues[i]
                    while q and end is None:
                        end = yield from _replay(q.popleft(), offset, stats, taken, transformed)
                    if end is not None:
                        break
                    if over[i]:  # the worker is gone without its end: read the rest here
                        rest = islice(self._read_here(i, None), taken[0], None)
                        end = yield from _replay(rest, offset, stats, taken, transformed)
                        break
                    for recv in mp_wait(list(waiting), 0.2 if progress is not None else None):
                        j = waiting[recv]
                        try:
                            got = recv.recv()
                        except (EOFError, OSError):
                            got = _FAILED
                        if isinstance(got, list):
                            queues[j].append(got)
                            if got and len(got[-1]) != 4:
                                continue
                        over[j] = True
                        del waiting[recv]
                    report()
                _, read, understood, unlisted = end
                stats.read += read
                stats.understood += understood
                stats.skipped += unlisted
                offset += read
            if progress is not None:
                progress(self.size - reported[0])
        finally:
            self.close()


def _every(items: Iterator[tuple[Any, ...]], report: Callable[[], None]) -> Iterator[tuple[Any, ...]]:
    """``items``, with ``report()`` called every :data:`BATCH` items and at the end."""
    n = 0
    for item in items:
        yield item
        n += 1
        if n % BATCH == 0:
            report()
    report()
    report()
