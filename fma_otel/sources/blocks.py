"""The bulk block scanner shared by the klog and launcher-log readers.

Why: both readers spend their time on lines they only count (klog lines whose message the
bridge does not want, launcher header lines that state no fact).  Reading the file in large
blocks and letting one compiled regex match a whole run of such lines, in C, costs a
fraction of a Python loop over those lines.  Each reader supplies what a run is (its
``run`` regex and the ``subs`` finder of substrings a run must stop before) and, for klog,
when a multi-line block may be open (then lines go one by one); this module only cuts
blocks into runs and lines.  Each reader's per-line code stays the only judge of what a
line means, and ``tests/test_klog_fastpath.py`` / ``tests/test_launcher_log.py`` hold the
bulk path equal to the per-line one.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fma_otel.lines import MAX_LINE_BYTES, TooLong


class Plain(int):
    """A count of consecutive lines the scanner proved the reader would only count.

    A distinct type (not a bare ``int``) so the per-line loop tells it from a line with one
    identity check, and so a caller's stray ``int`` still fails as it always did.
    """

    __slots__ = ()


def bulk_readable(src: object) -> bool:
    """Whether ``src`` is read in blocks: its *class* has ``read`` and it is not text.

    An object that only forwards ``read`` through ``__getattr__`` (a wrapper counting what
    it iterates) is read per line, so its own ``__iter__`` still sees every line.
    """
    return callable(getattr(type(src), "read", None)) and not isinstance(src, io.TextIOBase)


def finder(needles: Iterable[bytes]) -> Callable[[bytes, int, int], list[int]]:
    """``find(buf, pos, endpos)``: the start of every occurrence of any of ``needles`` that
    lies wholly in ``buf[pos:endpos]``, ascending, each start once (overlapping occurrences
    included).

    Why not one ``re`` alternation: ``bytes.find`` searches with the C library's vectorised
    byte search, about a hundredth of the instructions ``re`` spends per byte of a 1 MiB
    block, and the needles are rare, so the Python loop around it runs a few times a block.
    """
    subs = tuple(dict.fromkeys(n for n in needles if n))
    if not subs:
        raise ValueError("finder needs at least one non-empty needle")

    def find(buf: bytes, pos: int, endpos: int) -> list[int]:
        out: list[int] = []
        for sub in subs:
            at = buf.find(sub, pos, endpos)
            while at >= 0:
                out.append(at)
                at = buf.find(sub, at + 1, endpos)
        if len(subs) > 1:
            out = sorted(set(out))
        return out

    return find


def bulk_items(
    read: Callable[[int], Any],
    block_size: int,
    run: Callable[[bytes, int, int], Any],
    subs: Callable[[bytes, int, int], list[int]] | None,
    may_block: Callable[[bytes, bool], bool] | None = None,
    max_line: int = MAX_LINE_BYTES,
) -> Iterator[bytes | Plain | TooLong]:
    r"""Read blocks with ``read``; give the lines that must be seen one by one (with their
    ``\n``), and :class:`Plain` counts for the runs in between.

    ``run(block, pos, endpos)`` matches a run of countable lines from a line start (its
    ``end()`` is where the run stops); ``subs(block, pos, endpos)`` gives the ascending starts
    of substrings (see :func:`finder`) a run
    must not take the line of; ``may_block(line, before)`` says whether, after ``line`` went
    one by one, the next lines must too (a multi-line value may be open).

    Each block is cut after its last ``\n``; the partial line is carried (as parts, so a
    line longer than a block is joined once, not re-copied per block).  A line longer than
    ``max_line`` comes as :class:`TooLong`: its parts are let go as soon as it is known to
    be too long, and the lines after it go one by one until ``may_block`` says otherwise
    (what it held is unknown: it may have opened a block).
    """
    carry: list[bytes] = []
    carried = 0  # bytes of the line being carried (also once its parts are let go)
    maybe_block = False
    while True:
        chunk = read(block_size)
        if not chunk:
            break
        if chunk.__class__ is not bytes:
            chunk = chunk.encode("utf-8", "surrogateescape") if isinstance(chunk, str) else bytes(chunk)
        pos = 0
        if carried:
            nl = chunk.find(b"\n")
            carried += len(chunk) if nl < 0 else nl + 1
            if carried > max_line:
                carry = []  # let the parts go; only the length is kept
            else:
                carry.append(chunk if nl < 0 else chunk[: nl + 1])
            if nl < 0:
                continue
            pos = nl + 1
            if carry:
                line = b"".join(carry)
                carry, carried = [], 0
                yield line
                if may_block is not None:
                    maybe_block = may_block(line, maybe_block)
            else:
                yield TooLong(carried)
                carried, maybe_block = 0, may_block is not None
        end = chunk.rfind(b"\n") + 1
        if end <= pos:
            if pos < len(chunk):
                carry.append(chunk[pos:])
                carried = len(chunk) - pos
            continue
        stops = [chunk.rfind(b"\n", 0, at) + 1 for at in subs(chunk, pos, end)] if subs else []
        si, ns = 0, len(stops)
        while pos < end:
            if not maybe_block:
                while si < ns and stops[si] < pos:
                    si += 1
                e = run(chunk, pos, stops[si] if si < ns else end).end()
                if e > pos:
                    yield Plain(chunk.count(b"\n", pos, e))
                    pos = e
                    if pos >= end:
                        break
            nl = chunk.index(b"\n", pos) + 1
            if nl - pos > max_line:
                yield TooLong(nl - pos)
                maybe_block = may_block is not None
            else:
                line = chunk[pos:nl]
                yield line
                if may_block is not None:
                    maybe_block = may_block(line, maybe_block)
            pos = nl
        if end < len(chunk):
            carry.append(chunk[end:])
            carried = len(chunk) - end
    if carried:
        yield TooLong(carried) if carried > max_line or not carry else b"".join(carry)
