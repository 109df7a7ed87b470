"""Hypothesis strategies shared by the property tests: real capture lines, mutated.

Why mutate real lines rather than only draw random text: random text almost never looks
like klog, so it exercises the "not a klog line" branch and little else; a real line with
one byte changed, a cut or a splice reaches the parser's deep branches (quoted values cut
in half, JSON values with a stray quote, blocks that never close).
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import strategies as st

from fma_otel.bridge import sample_dir

SAMPLE = sample_dir()


def sample_lines(name: str) -> list[bytes]:
    """The lines of a file of the embedded sample capture, newlines kept."""
    return Path(SAMPLE, name).read_bytes().splitlines(keepends=True)


def launcher_sample_lines() -> list[bytes]:
    out: list[bytes] = []
    for p in sorted(Path(SAMPLE).glob("launcher-*.log")):
        out.extend(p.read_bytes().splitlines(keepends=True))
    return out


#: bytes that matter to the parsers' grammars, drawn more often than uniform bytes would be
_INTERESTING = b'"\\ =<>\t\n\r{}[]:,-.0123456789IWEFZT\xff\xc3'


@st.composite
def mutated_line(draw: st.DrawFn, lines: list[bytes]) -> bytes:
    """One real line with one mutation: cut, insert, delete, replace, or splice with another."""
    line = draw(st.sampled_from(lines))
    if not line:
        return line
    op = draw(st.sampled_from(["cut", "insert", "delete", "replace", "splice", "keep", "hostile"]))
    i = draw(st.integers(0, len(line)))
    if op == "cut":
        return line[:i]
    if op == "keep":
        return line
    if op == "hostile":
        # one number of the line made too long for int(), or one JSON opener nested too deep
        spots = [(m.start(), m.end(), b"9" * 4400) for m in re.finditer(rb"[0-9]+", line)]
        spots += [(m.start(), m.start(), b"[" * 3000) for m in re.finditer(rb"[\[{]", line)]
        if not spots:
            return line
        a, b, piece = draw(st.sampled_from(spots))
        return line[:a] + piece + line[b:]
    piece = draw(
        st.one_of(
            st.binary(min_size=1, max_size=4),
            st.lists(st.sampled_from(list(_INTERESTING)), min_size=1, max_size=3).map(bytes),
        )
    )
    if op == "insert":
        return line[:i] + piece + line[i:]
    if op == "delete":
        j = draw(st.integers(i, min(len(line), i + 12)))
        return line[:i] + line[j:]
    if op == "replace":
        return line[:i] + piece + line[i + len(piece) :]
    other = draw(st.sampled_from(lines))
    j = draw(st.integers(0, len(other)))
    return line[:i] + other[j:]


def mutated_file(lines: list[bytes], max_size: int = 30) -> st.SearchStrategy[list[bytes]]:
    """A list of lines: real ones, mutated ones and arbitrary bytes, in any order."""
    return st.lists(
        st.one_of(
            st.sampled_from(lines),
            mutated_line(lines),
            st.binary(max_size=80),
        ),
        max_size=max_size,
    )
