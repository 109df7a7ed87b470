"""``kube.iter_lines``: the lines of a streamed response, whatever the chunking, with a
line past the limit dropped as it arrives (a log or watch stream is never held whole)."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterable, Iterator

import pytest

from fma_otel.live.kube import iter_lines


class _Resp:
    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = chunks

    def stream(self, amt=None, decode_content=False) -> Iterator[bytes]:  # noqa: ANN001
        yield from self._chunks


def _chunked(data: bytes, rng: random.Random) -> list[bytes]:
    out, i = [], 0
    while i < len(data):
        n = rng.randint(1, 9)
        out.append(data[i : i + n])
        i += n
    return out


@pytest.mark.parametrize("seed", range(5))
def test_any_chunking_gives_the_lines_and_holds_back_a_cut_last_line(seed: int):
    data = b"one\n\ntwo words\nthree\ncut"
    got = list(iter_lines(_Resp(_chunked(data, random.Random(seed)))))
    assert got == [b"one", b"", b"two words", b"three"]


@pytest.mark.parametrize("seed", range(5))
def test_a_line_past_the_limit_is_dropped_and_measured(seed: int):
    data = b"a\n" + b"x" * 30 + b"\n" + b"b\n" + b"y" * 9 + b"\n" + b"z" * 25
    longs: list[int] = []
    got = list(iter_lines(_Resp(_chunked(data, random.Random(seed))), max_line=10, on_long=longs.append))
    assert got == [b"a", b"b", b"y" * 9]  # 9 bytes and its newline: exactly the limit
    assert longs == [31]  # the cut last line is neither yielded nor measured


def test_an_endless_line_is_not_held():
    """20 MiB without a newline in 64 KiB chunks, limit 1 MiB: memory stays near the limit."""
    chunk = b"x" * (64 << 10)
    longs: list[int] = []

    def chunks() -> Iterator[bytes]:
        for _ in range(320):
            yield chunk
        yield b"\nnext\n"

    tracemalloc.start()
    try:
        got = list(iter_lines(_Resp(chunks()), max_line=1 << 20, on_long=longs.append))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == [b"next"] and longs == [320 * len(chunk) + 1]
    assert peak < 3 << 20, peak
