"""``blocks.finder``: where the bulk scanner must stop, found with ``bytes.find``.

Why: a line holding a ``contains`` substring must never be counted away in a run, so the
finder must report every occurrence inside the bounds it is given (the regex alternation
it replaced did), in ascending order, and nothing outside them.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fma_otel.sources.blocks import finder


def test_every_occurrence_within_the_bounds_ascending():
    find = finder([b"aa", b"b"])
    buf = b"aaab\nbaa\n"
    assert find(buf, 0, len(buf)) == [0, 1, 3, 5, 6]  # overlapping "aa" at 0 and 1
    assert find(buf, 1, 4) == [1, 3]  # only matches wholly inside [1, 4)
    assert find(buf, 6, 7) == []
    assert finder([b"x", b"x", b""])(b"xx", 0, 2) == [0, 1]  # duplicates and empties ignored


def test_no_needles_is_an_error():
    with pytest.raises(ValueError, match="non-empty needle"):
        finder([b""])


@given(
    st.lists(st.sampled_from([b"a", b"b", b"\n"]), max_size=40).map(b"".join),
    st.lists(st.sampled_from([b"ab", b"b", b"ba", b"\n", b"abab"]), min_size=1, max_size=3),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_agrees_with_a_lookahead_regex(buf: bytes, needles: list[bytes], pos: int, end: int):
    """The reference: a zero-width search finds every start, overlapping ones included."""
    rx = re.compile(b"(?=" + b"|".join(re.escape(n) for n in needles) + b")")
    want = [
        m.start()
        for m in rx.finditer(buf, pos, end)
        if any(buf.startswith(n, m.start(), end) for n in needles)
    ]
    assert finder(needles)(buf, pos, end) == want
