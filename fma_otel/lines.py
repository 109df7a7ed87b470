r"""Lines of any length, read without holding a whole one in memory.

Why: a reader that held each line whole would hold a 300 MB line (or ``/dev/zero`` given
as a log) without bound.  A line longer than a reader's limit is only measured: the reader
counts it as skipped, with its length, and goes on.

The klog and launcher logs are read by :func:`read_lines`, the one place that says what
ends a line there (``\n``, ``\r\n``, or a carriage return alone).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Iterator
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


#: Why a log line that :func:`text_of` refuses is skipped.
CORRUPT_REASON = "NUL byte or invalid UTF-8 (neither log writes them raw): a corrupted line"


def text_of(line: bytes) -> str | None:
    """A DPC or launcher log line as text, or ``None`` when it holds a NUL byte or is not
    UTF-8.  Why: klog quotes both away (``\\x00``, ``\\xff``) and Python's logging writes
    UTF-8, so such bytes are corruption; read with replacement characters, a field the
    bridge uses would be misread (a key that no longer matches, an id with U+FFFD in it)
    and its instant lost or wrong without a word."""
    if b"\x00" in line:
        return None
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None


#: a NUL, or a byte that is not UTF-8 as ``surrogateescape`` decodes it (U+DC80..U+DCFF)
_BAD_CHAR = re.compile("[\x00\udc80-\udcff]")


def corrupt_line_ends(block: bytes, pos: int, end: int) -> list[int]:
    """The ends of the lines of ``block[pos:end]`` (whole lines) that :func:`text_of`
    refuses, in order: a prefilter that looks for a wanted text passes over a line whose
    corrupt bytes hid it, so a reader searches for these lines too (:func:`also_finding`).

    One decode of the block (``surrogateescape`` turns each byte that is not UTF-8 into
    one character, so no error stops it) and one search: decoding again after each bad
    line would cost the rest of the block per line, the square of a bad log's size."""
    ends: list[int] = []
    if block.isascii():  # a cheap first test: ASCII is UTF-8 (most logs are ASCII)
        at = block.find(b"\x00", pos, end)
        while at >= 0:
            at = block.find(b"\n", at, end) + 1 or end
            ends.append(at)
            at = block.find(b"\x00", at, end)
        return ends
    text = block[pos:end].decode("utf-8", "surrogateescape")
    s_at, b_at = 0, pos  # a character of ``text`` and the byte it starts at
    m = _BAD_CHAR.search(text)
    while m:
        nl = text.find("\n", m.start())
        j = len(text) if nl < 0 else nl + 1
        b_at += len(text[s_at:j].encode("utf-8", "surrogateescape"))
        s_at = j
        ends.append(b_at)
        m = _BAD_CHAR.search(text, j)
    return ends


def too_long_reason(n: int) -> str:
    return f"line longer than {MAX_LINE_BYTES >> 20} MiB ({n} bytes): not read"


def bounded_lines(fh: Any, limit: int) -> Iterator[bytes | TooLong]:
    r"""The lines of a binary file, each as ``for line in fh`` gives it (ended by ``\n``
    only: the vLLM log's feeders and the trace readers), except that a line longer than
    ``limit`` bytes comes as :class:`TooLong` (its length) and is never held whole: the
    rest is read in 1 MiB pieces only to measure it."""
    readline = fh.readline
    while True:
        line = readline(limit + 1)
        if len(line) <= limit:
            if not line:
                return
            yield line
            continue
        n = len(line)
        while not line.endswith(b"\n"):
            line = readline(1 << 20)
            n += len(line)
            if not line:
                break
        yield TooLong(n)


class Ignored(int):
    """A run of lines, given by their number, in which a search for the lines a reader
    wants found none: counted, never cut out of the file."""

    __slots__ = ()


#: A file is read this many bytes at a time (at most the longest line kept)
BLOCK_BYTES = 1 << 20

#: ``find(block, pos, end)``: the bounds ``(start, stop)`` of the first line of
#: ``block[pos:end]`` (whole lines) that a reader may want, or ``None``
Find = Callable[[bytes, int, int], "tuple[int, int] | None"]


def also_finding(find: Find, suspect_ends: Callable[[bytes, int, int], list[int]]) -> Find:
    """``find`` that also finds the lines ``suspect_ends`` gives (their ends, in order): a
    line a prefilter passes over, yet which may be a wanted one cut short or with corrupt
    bytes, must reach the parser to be counted as skipped, not ignored.  They are rare, so
    they are searched for once per block, and ``find`` is asked only up to the next one."""
    memo: list[Any] = [None, []]  # the block, the ends of its suspect lines

    def both(block: bytes, pos: int, end: int) -> tuple[int, int] | None:
        if memo[0] is not block:
            memo[:] = [block, suspect_ends(block, pos, end)]
        ends = memo[1]
        i = bisect.bisect_right(ends, pos)
        cut = ends[i] if i < len(ends) else 0
        if not cut or cut > end:
            return find(block, pos, end)
        start = block.rfind(b"\n", pos, cut - 1) + 1 or pos
        hit = find(block, pos, start)
        return hit if hit is not None else (start, cut)

    return both


#: Said in ``stats.notes`` for each carriage return read as a line end
CR_NOTE = "carriage return(s) inside a line, read as line ends"

#: A carriage return after a line feed, before more of the log: with it, one line end
_LFCR = re.compile(rb"(?<=\n)\r(?=[^\n])")
#: A carriage return that is no half of a two-byte line end: a line end of its own
_CR = re.compile(rb"\r(?!\n)")
_ENDS = (b"\r", b"\n")


def _cr_to_lf(data: bytes, stats: Any, at_end: bool = True) -> bytes:
    r"""``data`` with each carriage return that ends a line written ``\n`` (``\r\n`` and
    ``\n\r`` are one line end each), noted in ``stats`` where it adds a line; else
    ``data`` itself.

    Why one rule for every log: a log written with CR-only line ends (or a CR among LF
    ones) was read as one line whose first record swallowed the rest, without a word.
    A CRLF log is left as it is (each reader strips ``\r\n``): an LF log pays one search
    of each block, a CRLF log two counts.  ``data`` ends at a line end, or where the log
    ends (``at_end``), or inside a run of CRs."""
    if b"\r" not in data:
        return data
    crlf = data.count(b"\r\n")
    bare = data.count(b"\r") - crlf
    if not bare:
        return data
    if b"\n\r" in data:
        data = _LFCR.sub(b"", data)
        bare = data.count(b"\r") - crlf
    added = bare - (at_end and data.endswith(b"\r"))  # the log's last adds none
    if added:
        stats.note(CR_NOTE, added)
    return _CR.sub(b"\n", data) if crlf else data.replace(b"\r", b"\n")


def read_lines(
    source: Any,
    stats: Any,
    find: Find | None = None,
    held: Callable[[], bool] = lambda: False,
    limit: int = MAX_LINE_BYTES,
) -> Iterator[bytes | TooLong | Ignored]:
    r"""The lines of a log, ended by ``\n``, ``\r\n`` or a carriage return alone (noted in
    ``stats``, a ``SourceStats``): the one line reader of the klog and launcher logs.

    ``source`` is a binary file, read in blocks, or any iterable of lines (``str`` or
    ``bytes``), taken one at a time (a live stream must not wait for a block).  In a file,
    only the lines ``find`` gives come one by one, and the runs of lines between them as
    their number (:class:`Ignored`), never sliced or decoded: a search over a block costs
    a fraction of a Python loop over its lines.  Every line comes alone while ``held()``
    (a record the reader keeps is still open) and without ``find``.  A line past ``limit``
    that runs past its block comes as its length (:class:`TooLong`), never held whole; one
    inside a block read on past a CR (at most twice ``limit`` and 4 KiB) may come whole:
    :func:`counted_lines` skips either."""
    read = getattr(source, "read", None)
    if not callable(read):
        yield from _item_lines(source, stats)
        return
    block_bytes = min(BLOCK_BYTES, limit)
    head: list[bytes] = []  # the pieces of the unfinished line the last block ended with
    size = 0  # their length, or of a line past ``limit`` measured so far (then not held)
    last = b""  # the byte before the block, as read
    carry = before = b""  # a CR to put before the next block, and the byte before it
    while True:
        block = read(block_bytes)
        if carry:
            block, carry = carry + block, b""
        if block[-1:] == b"\r":  # what a CR ends depends on the byte after it: read on
            buf = bytearray(block)
            while buf[-1:] == b"\r":
                if len(buf) - len(block) >= block_bytes:  # read on no further: the last CR
                    carry = b"\r"  # waits for the next block (it may begin a CRLF)
                    del buf[-1]
                    before = buf[-1:]
                    if buf.endswith(b"\n\r"):  # an LF CR line end (a CR follows): its CR
                        del buf[-1]
                    break
                more = read(1 << 12)
                if not more:
                    break
                buf += more
            block = bytes(buf)
        if not block:
            break
        if block[:1] == b"\r" and last == b"\n" and (block[1:2] or carry) not in (b"\n", b""):
            block = block[1:]  # an LF CR line end cut at the edge: its CR
        last = bytes(before) if carry else block[-1:]
        block = _cr_to_lf(block, stats, not carry)
        pos = 0
        if size:
            nl = block.find(b"\n") + 1
            if not nl:  # the line goes on past this block
                size += len(block)
                head = [*head, block] if size <= limit else []
                continue
            size += nl
            yield b"".join([*head, block[:nl]]) if size <= limit else TooLong(size)
            head, size, pos = [], 0, nl
        cut = block.rfind(b"\n") + 1
        if cut > pos:
            yield from _block_lines(block, pos, cut, find, held)
            pos = cut
        if pos < len(block):
            head, size = [block[pos:]], len(block) - pos
    if size:
        yield b"".join(head) if size <= limit else TooLong(size)


def counted_lines(
    source: Any,
    stats: Any,
    find: Find | None = None,
    held: Callable[[], bool] = lambda: False,
    limit: int = MAX_LINE_BYTES,
) -> Iterator[tuple[int, bytes | None]]:
    """The lines of :func:`read_lines` with their 1-based numbers, counted in ``stats`` (a
    ``SourceStats``) as every reader counts them: each in ``read``; a run the search
    passed over in ``ignored``; a line past ``limit`` skipped with its length and given
    as ``(number, None)``, so that the reader can end what it holds there."""
    no = 0
    for line in read_lines(source, stats, find, held, limit):
        if line.__class__ is Ignored:
            no += line  # type: ignore[operator]
            stats.read += line
            stats.ignored += line
            continue
        no += 1
        stats.read += 1
        if line.__class__ is TooLong or len(line) > limit:  # (an item of an iterable too)
            stats.skip(no, too_long_reason(line if line.__class__ is TooLong else len(line)))  # type: ignore[arg-type]
            yield no, None
            continue
        yield no, line  # type: ignore[misc]


def _item_lines(items: Iterable[str | bytes], stats: Any) -> Iterator[bytes]:
    r"""The lines of an iterable of lines, as bytes: each item is a line, or more where a
    carriage return inside it ends one (the rule of :func:`_cr_to_lf`, with the item
    before in view: a ``\n\r`` across two items is one line end, as in a file).  An item
    without its line end (a live stream's, a list's) was ended by a ``\n``: one that ends
    with a CR too (a CRLF line, its LF cut off) is read as in the file, where that LF makes
    a CR beginning the next line the second half of an LF CR line end."""
    after_lf = False  # only the log's first item has no LF before it
    for item in items:
        b: bytes = item.encode("utf-8", "surrogateescape") if item.__class__ is str else item  # type: ignore[assignment,union-attr]
        if b"\r" in b:
            end = len(b) - (2 if b.endswith(b"\r\n") else b[-1:] in _ENDS)  # its line end
            body = b[1:end] if after_lf and b[:1] == b"\r" else b[:end]
            pieces = _LFCR.sub(b"", body).split(b"\r")
            if len(pieces) > 1:
                stats.note(CR_NOTE, len(pieces) - 1)
                yield from (p + b"\n" for p in pieces[:-1])
            b = pieces[-1] + b[end:]
        after_lf = True
        yield b


def _block_lines(
    block: bytes, pos: int, end: int, find: Find | None, held: Callable[[], bool]
) -> Iterator[bytes | Ignored]:
    """The whole lines of ``block[pos:end]``: those ``find`` gives, one by one, and the
    runs of lines between them as :class:`Ignored`; every line alone while ``held()`` or
    without ``find``."""
    while pos < end:
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
