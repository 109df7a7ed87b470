"""fma_otel.lines.read_lines: the one line reader of the klog and launcher logs.

Every way of ending a line (LF, CRLF, CR alone, LF CR) gives the same lines, whether the
log is a file read in blocks (wherever the block edges fall) or an iterable of lines; a
carriage return that adds a line is noted once; a line past the limit is measured.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel import lines
from fma_otel.lines import CR_NOTE, Ignored, TooLong, read_lines
from fma_otel.sources.records import SourceStats

TEXT = [b"alpha one", b"", b"beta two", b"gamma three", b"delta"]


def _read(source: object, **kw: object) -> tuple[list[object], dict[str, int]]:
    st = SourceStats("t")
    got = [x if x.__class__ is not bytes else x.rstrip(b"\r\n") for x in read_lines(source, st, **kw)]
    return got, st.notes


def _ends(ends: list[bytes]) -> bytes:
    return b"".join(line + ends[i % len(ends)] for i, line in enumerate(TEXT))


CASES = {
    "lf": ([b"\n"], 0),
    "crlf": ([b"\r\n"], 0),
    "cr-only": ([b"\r"], len(TEXT) - 1),  # the CR that ends the log adds no line
    "lf-cr": ([b"\n\r"], 0),  # (its last CR is a blank last line, as an LF reader has it)
    "mixed": ([b"\r", b"\r\n", b"\n", b"\n\r"], 1),  # ends: CR CRLF LF LFCR CR(last)
}


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
@pytest.mark.parametrize("case", list(CASES))
def test_every_line_end_gives_the_same_lines_at_any_block_size(monkeypatch, case: str, block: int) -> None:
    ends, notes = CASES[case]
    data = _ends(ends)
    monkeypatch.setattr(lines, "BLOCK_BYTES", block)
    got, noted = _read(io.BytesIO(data))
    assert got == (TEXT + [b""] if case == "lf-cr" else TEXT)
    assert noted == ({CR_NOTE: notes} if notes else {})
    # the same lines and notes from the log as an iterable of its LF-ended lines
    assert _read(list(io.BytesIO(data))) == (got, noted)


def test_a_stray_carriage_return_in_a_short_line_of_an_lf_log_ends_that_line() -> None:
    """The rule is the same for every line: a record after a stray CR is read, not glued
    onto the line before it (and the line numbers after it count one more line)."""
    data = b"one\rtwo\nthree\n"
    assert _read(io.BytesIO(data)) == ([b"one", b"two", b"three"], {CR_NOTE: 1})
    assert _read([b"one\rtwo\n", b"three\n"]) == ([b"one", b"two", b"three"], {CR_NOTE: 1})
    assert _read(["one\rtwo", "three"]) == ([b"one", b"two", b"three"], {CR_NOTE: 1})


@pytest.mark.parametrize("block", [4, 1 << 20])
def test_a_line_past_the_limit_is_measured_wherever_its_end(monkeypatch, block: int) -> None:
    monkeypatch.setattr(lines, "BLOCK_BYTES", block)
    for end in (b"\n", b"\r\n", b"\r"):
        data = b"ok" + end + b"x" * 40 + end + b"fine" + end + b"y" * 30
        got, _ = _read(io.BytesIO(data), limit=16)
        assert got == [b"ok", TooLong(40 + len(end)), b"fine", TooLong(30)], end
        assert [x.__class__ for x in got] == [bytes, TooLong, bytes, TooLong]


def test_a_line_past_the_limit_inside_a_block_read_on_past_a_cr_is_still_skipped(monkeypatch) -> None:
    """A block that ends with a CR is read on (what the CR ends depends on the byte after
    it): a line past the limit can then lie whole inside it and come whole from
    ``read_lines``; ``counted_lines`` skips it all the same, with its length."""
    monkeypatch.setattr(lines, "BLOCK_BYTES", 8)
    data = b"abcdefg\r0123456789abc\r\rz\n"
    got, _ = _read(io.BytesIO(data), limit=8)
    assert got == [b"abcdefg", b"0123456789abc", b"", b"z"]
    st = SourceStats("t")
    assert list(lines.counted_lines(io.BytesIO(data), st, limit=8)) == [
        (1, b"abcdefg\n"),
        (2, None),
        (3, b"\n"),
        (4, b"z\n"),
    ]
    assert st.skipped_lines == [(2, lines.too_long_reason(14))]


def test_lines_a_search_passes_over_come_as_their_number() -> None:
    data = b"a1\nb2\nWANT3\nc4\r\nd5\rWANT6\re7\n"

    def find(block: bytes, pos: int, end: int) -> tuple[int, int] | None:
        i = block.find(b"WANT", pos, end)
        return None if i < 0 else (i, block.find(b"\n", i, end) + 1)

    got, _ = _read(io.BytesIO(data), find=find)
    assert got == [Ignored(2), b"WANT3", Ignored(2), b"WANT6", Ignored(1)]
    assert [x.__class__ for x in got] == [Ignored, bytes, Ignored, bytes, Ignored]


PIECES = [b"a", b"bc", b"\r", b"\n", b"\r\n", b"\n\r", b"\r\r\r"]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), max_size=40),
    st.integers(1, 9),
)
def test_blocks_and_items_agree_with_the_rule_over_the_whole_log(pieces: list[bytes], block: int) -> None:
    """Whatever the line ends and wherever the block edges fall, a file gives the lines
    (and notes) that the rule applied to the whole log gives, and so does the log as an
    iterable of its LF-ended lines."""
    data = b"".join(pieces)
    whole = lines._cr_to_lf(data, st_ := SourceStats("t"))
    want = [ln.rstrip(b"\r\n") for ln in whole.splitlines(keepends=True) if ln]
    old = lines.BLOCK_BYTES
    lines.BLOCK_BYTES = block
    try:
        got = _read(io.BytesIO(data))
        searched, _ = _read(io.BytesIO(data), find=_find_bc)
    finally:
        lines.BLOCK_BYTES = old
    assert got == (want, st_.notes)
    assert _read(list(io.BytesIO(data))) == got
    # with a search: each line it finds comes whole; the others are counted (or come
    # whole: a line cut by a block edge is read on alone); none is lost
    flat = [x for x in searched for x in ([None] * x if x.__class__ is Ignored else [x])]
    assert len(flat) == len(want)
    assert all(x == ln if b"bc" in ln else x in (None, ln) for x, ln in zip(flat, want, strict=True))


def _find_bc(block: bytes, pos: int, end: int) -> tuple[int, int] | None:
    i = block.find(b"bc", pos, end)
    return None if i < 0 else (block.rfind(b"\n", pos, i) + 1 or pos, block.find(b"\n", i, end) + 1)


def test_items_without_their_line_ends_were_ended_by_a_line_feed() -> None:
    """A live stream's lines come without their ``\\n``: a CR that begins the next one is
    the second half of an LF CR line end (no blank line), as in a file, also after an item
    ending with a CR (a CRLF line); only at the log's start does it end a blank line."""
    assert _read([b"x", b"\ry", b"z"]) == ([b"x", b"y", b"z"], {})
    assert _read(io.BytesIO(b"x\n\ry\nz")) == ([b"x", b"y", b"z"], {})
    # "x\r" without its LF was "x\r\n": the CR after it is an LF CR's, as in the file
    assert _read([b"x\r", b"\ry"]) == ([b"x", b"y"], {})
    assert _read(io.BytesIO(b"x\r\n\ry\n")) == ([b"x", b"y"], {})
    # a CR beginning the log (no LF before it) ends a blank line
    assert _read([b"\rx", b"y"]) == ([b"", b"x", b"y"], {CR_NOTE: 1})


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40))
def test_items_without_their_line_ends_give_the_files_lines(pieces: list[bytes]) -> None:
    """The live stream (``live.kube.iter_lines``) gives each line without its ``\n``: the
    lines and notes are those of the same log read as a file, whatever its line ends."""
    data = b"".join(pieces) + b"\n"
    assert _read(data.split(b"\n")[:-1]) == _read(io.BytesIO(data))


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=60), st.integers(1, 9), st.integers(1, 6))
def test_lines_past_a_small_bound_are_counted_and_the_rule_holds(
    pieces: list[bytes], block: int, limit: int
) -> None:
    """With a bound of a few bytes (runs of CRs past it, lines past it cut by block edges),
    every line is still counted once, each one within the bound comes whole, and the notes
    are those of the rule over the whole log."""
    data = b"".join(pieces)
    whole = lines._cr_to_lf(data, st_ := SourceStats("t"))
    want = [ln for ln in whole.splitlines(keepends=True) if ln]
    old = lines.BLOCK_BYTES
    lines.BLOCK_BYTES = block
    try:
        got = list(lines.counted_lines(io.BytesIO(data), stats := SourceStats("t"), limit=limit))
    finally:
        lines.BLOCK_BYTES = old
    assert [n for n, _ in got] == list(range(1, len(want) + 1))
    # a line is skipped exactly when it is past the bound (its line end as the rule writes it)
    assert [x is None for _, x in got] == [len(w) > limit for w in want]
    assert all(
        x is None or x.rstrip(b"\r\n") == w.rstrip(b"\r\n") for (_, x), w in zip(got, want, strict=True)
    )
    assert stats.notes == st_.notes
    assert stats.read == len(want) and stats.skipped == sum(x is None for _, x in got)


def test_the_docstrings_about_line_ends_hold_no_line_end_characters() -> None:
    """``\\n`` written in a docstring that is not raw is a line feed, and ``\\r`` a carriage
    return: ``help()`` then showed the line-end rule garbled (a CR sends the cursor back)."""
    import inspect

    from fma_otel.sources import klog, launcher_log

    objs = [lines, launcher_log, klog, *(f for _, f in inspect.getmembers(lines, inspect.isfunction))]
    for obj in objs:
        doc = obj.__doc__ or ""
        assert "\r" not in doc and "``\n``" not in doc, obj


_PIECES = [b"a", b"\n", b"\x00", b"\xe9", b"\xc3\xa9", b"\xed\xa0\x80", b"\xf0\x9f\x98\x80", b"\xff", b"z"]


@given(st.lists(st.sampled_from(_PIECES), max_size=40), st.integers(min_value=0, max_value=40))
@settings(max_examples=400, deadline=None)
def test_corrupt_line_ends_are_the_lines_text_of_refuses(pieces: list[bytes], start: int) -> None:
    """One decode of the block finds exactly the lines a per-line :func:`lines.text_of`
    refuses (it decoded the rest of the block again after each bad line: the square of a
    bad log's size)."""
    block = b"".join(pieces)
    pos = block.rfind(b"\n", 0, min(start, len(block))) + 1  # a line's start
    want, at = [], pos
    while at < len(block):
        e = block.find(b"\n", at) + 1 or len(block)
        if lines.text_of(block[at:e].rstrip(b"\n")) is None:
            want.append(e)
        at = e
    assert lines.corrupt_line_ends(block, pos, len(block)) == want
