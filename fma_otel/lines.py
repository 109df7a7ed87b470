"""Lines of any length, read without holding a whole one in memory.

Why: a reader that held each line whole would hold a 300 MB line (or ``/dev/zero`` given
as a log) without bound.  A line longer than a reader's limit is only measured: the reader
counts it as skipped, with its length, and goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class TooLong(int):
    """The length of a line longer than a reader keeps (its line end included)."""

    __slots__ = ()


#: The longest log line the readers parse: far past any real klog or launcher line (a
#: DPC line with a whole vllm-config is a few KiB), short enough to hold.
MAX_LINE_BYTES = 16 << 20


#: The longest OTLP JSON line the trace readers (``show``, ``report``, ``slo``) decode: one
#: actuation's trace is tens of KiB; a line past this is counted as skipped.
MAX_TRACE_LINE_BYTES = 64 << 20

#: The longest multi-line value (klog ``key=<`` block, launcher continuation lines) a
#: record keeps; past it the value is dropped and the line counted as skipped.
MAX_VALUE_BYTES = 16 << 20


def too_long_reason(n: int) -> str:
    return f"line longer than {MAX_LINE_BYTES >> 20} MiB ({n} bytes): not read"


def too_long(head: bytes, readline: Any) -> TooLong:
    """A line whose first ``head`` bytes were read and found over the limit: read the rest
    in 1 MiB pieces only to measure it (never held whole), up to its line end or EOF."""
    n = len(head)
    line = head
    while not line.endswith(b"\n"):
        line = readline(1 << 20)
        if not line:
            break
        n += len(line)
    return TooLong(n)


def bounded_lines(fh: Any, limit: int) -> Iterator[bytes | TooLong]:
    """The lines of a binary file, each as ``for line in fh`` gives it, except that a line
    longer than ``limit`` bytes comes as :class:`TooLong` (its length) and is never held
    whole."""
    readline = fh.readline
    while True:
        line = readline(limit + 1)
        if len(line) <= limit:
            if not line:
                return
            yield line
            continue
        yield too_long(line, readline)


class Ignored(int):
    """A run of lines, given by their number, in which a search for the lines a reader
    wants found none: counted, never cut out of the file."""

    __slots__ = ()


#: A file is searched this many bytes at a time (at most the longest line kept)
BLOCK_BYTES = 1 << 20

#: ``find(block, pos, end)``: the bounds ``(start, stop)`` of the first line of
#: ``block[pos:end]`` (whole lines) that a reader may want, or ``None``
Find = Callable[[bytes, int, int], "tuple[int, int] | None"]
SplitCr = Callable[[bytes, Any, int], Iterator["bytes | TooLong"]]


def searched_lines(
    fh: Any,
    find: Find | None,
    held: Callable[[], bool],
    pushback: list[bytes] | None = None,
    split_cr: SplitCr | None = None,
    limit: int = MAX_LINE_BYTES,
) -> Iterator[bytes | TooLong | Ignored]:
    """The lines of a binary file, searched in blocks: only the lines ``find`` gives come
    one by one, and the runs of lines between them as their number (:class:`Ignored`),
    never sliced or decoded.

    Why: a reader that wants a few lines of a big log paid a Python loop for every line;
    a search over a block (a regular expression, ``bytes.count``) costs a fraction of that.
    Lines still come one by one wherever the reader needs each: the first line and the
    unfinished last one of each block (read on with a bound: past ``limit`` a line comes as
    its length, :class:`TooLong`, or, if it holds carriage returns and ``split_cr`` is
    given, as what ``split_cr(line, readline, limit)`` makes of it), every line of a block
    holding a carriage return that does not end a line, every line while ``held()`` (a
    record the reader keeps is still open), and every line without ``find``.  What the
    reader puts in ``pushback`` (pieces it cut a line into) comes before the next line.
    """
    readline = fh.readline
    read = getattr(fh, "read", None) or readline
    block_bytes = min(BLOCK_BYTES, limit)
    if pushback is None:
        pushback = []
    yield from _finish_line(b"", readline, limit, split_cr)
    while True:
        if pushback:
            yield from pushback
            pushback.clear()
        block = read(block_bytes)
        if not block:
            return
        cut = block.rfind(b"\n") + 1
        if cut:
            bare_cr = b"\r" in block and block.count(b"\r", 0, cut) != block.count(b"\r\n", 0, cut)
            yield from _block_lines(block, cut, None if bare_cr else find, held, pushback)
        if cut < len(block):
            yield from _finish_line(block[cut:], readline, limit, split_cr)


def _block_lines(
    block: bytes, end: int, find: Find | None, held: Callable[[], bool], pushback: list[bytes]
) -> Iterator[bytes | Ignored]:
    """The whole lines of ``block[:end]``: those ``find`` gives, one by one, and the runs
    of lines between them as :class:`Ignored`; every line alone while ``held()`` or
    without ``find``."""
    pos = 0
    while pos < end:
        if pushback:
            yield from pushback
            pushback.clear()
        if find is None or held():
            nl = block.find(b"\n", pos) + 1
            yield block[pos:nl]
            pos = nl
            continue
        hit = find(block, pos, end)
        if hit is None:
            n = block.count(b"\n", pos, end)
            if n:
                yield Ignored(n)
            return
        start, nl = hit
        if start > pos:
            yield Ignored(block.count(b"\n", pos, start))
        yield block[start:nl]
        pos = nl


def _finish_line(
    head: bytes, readline: Any, limit: int, split_cr: SplitCr | None
) -> Iterator[bytes | TooLong]:
    """The line that begins with ``head`` (no line end in it), read on to its end with a
    bound: past ``limit`` it is measured, not held (or given to ``split_cr``)."""
    rest = readline(limit + 1 - len(head))
    if len(head) + len(rest) <= limit:
        if head or rest:
            yield head + rest
    elif split_cr is not None and (b"\r" in head or b"\r" in rest):
        yield from split_cr(head + rest, readline, limit)
    else:
        yield TooLong(len(head) + too_long(rest, readline))


#: Said in ``stats.notes`` for each carriage return read as a line end
CR_NOTE = "carriage return(s) inside a line, read as line ends"


def cr_lines(head: bytes, readline: Any, limit: int, stats: Any) -> Iterator[bytes | TooLong]:
    """The lines, ended by carriage returns, of a line past ``limit`` that begins with
    ``head``: each as its own line (with a ``\n``), up to the ``\n`` that ends it.  At
    most about ``2 * limit`` bytes are held; a piece past ``limit`` comes as its length.
    Each carriage return read as a line end is noted in ``stats`` (a ``SourceStats``).

    The ``split_cr`` of :func:`searched_lines` for a log whose line ends are CR-only (one
    line too big to hold): every line reader of such logs passes it."""
    rest = head
    while True:
        pieces = rest.split(b"\r")
        rest = pieces.pop()
        stats.note(CR_NOTE, len(pieces))
        for p in pieces:
            yield p + b"\n" if len(p) < limit else TooLong(len(p) + 1)
        if rest.endswith(b"\n"):
            if rest != b"\n":  # else the last piece's CR was a CRLF's
                yield rest if len(rest) <= limit else TooLong(len(rest))
            return
        more = readline(limit + 1)
        if not more:
            if rest:
                yield rest if len(rest) <= limit else TooLong(len(rest))
            return
        rest += more
        if len(rest) > limit and b"\r" not in rest:
            # one piece past the limit: measured up to its CR (or the line's end), not held
            n = len(rest)
            while True:
                if rest.endswith(b"\n"):
                    yield TooLong(n)
                    return
                rest = readline(limit + 1)
                if not rest:
                    yield TooLong(n)
                    return
                cr = rest.find(b"\r")
                if cr >= 0:
                    yield TooLong(n + cr + 1)
                    stats.note(CR_NOTE, 1)
                    rest = rest[cr + 1 :]
                    break
                n += len(rest)
