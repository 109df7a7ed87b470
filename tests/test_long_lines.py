"""Lines and multi-line values past the readers' limits: counted, never held whole.

Why: a reader that holds each line whole holds a 300 MB line (or ``/dev/zero`` given as
a log) in memory; a klog ``key=<`` block or launcher continuation lines could grow a
record's value without bound.  The sizes here are the real limits (16 MiB a log line and
a value, 64 MiB a trace line), written to temporary files in a few tens of milliseconds.
"""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path

import pytest

from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.lines import (
    CR_NOTE,
    MAX_LINE_BYTES,
    MAX_TRACE_LINE_BYTES,
    MAX_VALUE_BYTES,
    TooLong,
    bounded_lines,
)
from fma_otel.query.harvest import Harvest
from fma_otel.query.readers import read_spans
from fma_otel.query.sources import FileSource
from fma_otel.query.window import Window
from fma_otel.sinks.otlp_json import export_request_text
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.launcher_log import iter_launcher_log
from fma_otel.sources.records import SourceStats

HDR = b"I0629 14:00:00.000000       1 a.go:1] "


def _trace(src: object, **kw: object) -> tuple[list[tuple[object, int, int, int]], tuple]:
    """Every record with the counts as they stand when it is yielded, and the final stats
    (lines understood or passed over by the prefilter counted together)."""
    st_ = SourceStats("t")
    out = [(r, st_.read, st_.understood + st_.ignored, st_.skipped) for r in iter_klog(src, st_, **kw)]  # type: ignore[arg-type]
    return out, (st_.read, st_.understood + st_.ignored, st_.skipped, st_.skipped_lines)


def _lines(data: bytes) -> list[bytes]:
    """The lines a binary file iterates, as a list (read without a bound per line)."""
    return list(io.BytesIO(data))


def check(data: bytes, **kw: object) -> list:
    """Assert a file and its list of lines give the same records and counts; the records."""
    want = _trace(_lines(data), **kw)
    assert _trace(io.BytesIO(data), **kw) == want
    return [r for r, *_ in want[0]]


WANTED = frozenset({"Bound server-providing Pod", "other"})
LONG = b"x" * (MAX_LINE_BYTES + 5) + b"\n"


def _peak(fn) -> tuple[object, int]:
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_bounded_lines_gives_the_lines_and_measures_the_long_one():
    data = b"one\n" + b"q" * 99 + b"\nlast"
    got = list(bounded_lines(io.BytesIO(data), 50))
    assert got == [b"one\n", TooLong(100), b"last"] and type(got[1]) is TooLong
    assert list(bounded_lines(io.BytesIO(b"ok\n"), 3)) == [b"ok\n"]  # exactly the limit


def test_klog_line_past_the_limit_is_skipped_with_its_length_on_both_paths():
    before = HDR + b'"Bound server-providing Pod" a=1\n'
    after = HDR + b'"Bound server-providing Pod" a=2\n'
    data = before + LONG + after
    recs = check(data, messages=WANTED)
    assert [(r.line_no, r.get("a")) for r in recs] == [(1, 1), (3, 2)]
    _, stats = _trace(io.BytesIO(data), messages=WANTED)
    assert stats[:3] == (3, 2, 1)
    assert stats[3] == [(2, f"line longer than 16 MiB ({len(LONG)} bytes): not read")]


def test_klog_long_line_inside_an_open_block_ends_that_record_without_the_value():
    data = HDR + b'"Bound server-providing Pod" a=1 v=<\n\tkept\n' + LONG + b"\tafter\n >\n"
    recs = check(data, messages=WANTED)
    assert [(r.line_no, r.get("a"), r.get("v")) for r in recs] == [(1, 1, None)]


@pytest.mark.slow
def test_klog_value_past_the_limit_is_dropped_and_the_rest_of_the_block_counted():
    body = b"\t" + b"v" * 1023 + b"\n"
    n = 3 * (MAX_VALUE_BYTES // (len(body) - 1))  # a line's bytes count without its line end
    data = HDR + b'"Bound server-providing Pod" a=1 v=<\n' + body * n + b" > b=2\n" + HDR + b'"other" c=3\n'
    (out, stats), peak = _peak(lambda: _trace(io.BytesIO(data), messages=WANTED))
    recs = [r for r, *_ in out]
    assert [(r.get("a"), r.get("v"), r.get("c")) for r in recs] == [(1, None, None), (None, None, 3)]
    over = 1 + MAX_VALUE_BYTES // (len(body) - 1) + 1  # the opener, then the line that crossed it
    assert stats[:3] == (n + 3, n + 2, 1)
    assert stats[3] == [(over, "multi-line value longer than 16 MiB: dropped")]
    assert _trace(_lines(data), messages=WANTED) == (out, stats)
    assert peak < MAX_VALUE_BYTES * 3 // 2, peak  # a 48 MiB block: no more than the limit held


def test_a_huge_line_is_not_held():
    """48 MB with no line end, read with a bound per line: peak memory about the limit."""
    data = HDR + b'"other" a=1\n' + b"x" * (48 << 20)
    (out, stats), peak = _peak(lambda: _trace(io.BytesIO(data), messages=WANTED))
    assert stats[:3] == (2, 1, 1)
    assert peak < MAX_LINE_BYTES + (4 << 20), peak  # the test's own ``data`` is not traced here


def test_launcher_long_line_and_continuations_past_the_limit():
    log = (sample_dir() / "launcher-launcher-example-4lgw5.log").read_bytes().splitlines(keepends=True)
    head, rest = log[:3], log[3:]
    cont = b"  continuation " + b"c" * 1000 + b"\n"
    n = MAX_VALUE_BYTES // (len(cont) - 1) + 3
    data = b"".join(head) + cont * n + LONG + b"".join(rest)
    for src in (io.BytesIO(data), _lines(data)):
        st = SourceStats("l")
        recs = list(iter_launcher_log(src, st))
        assert st.read == len(log) + n + 1 and st.read == st.understood + st.skipped
        reasons = {why for _, why in st.skipped_lines}
        assert reasons == {
            "continuation lines past 16 MiB: not kept",
            f"line longer than 16 MiB ({len(LONG)} bytes): not read",
        }
        assert MAX_VALUE_BYTES - 4096 < len(recs[2].message) <= MAX_VALUE_BYTES + 4096
        assert len(recs) == len(log)


@pytest.mark.slow
def test_trace_readers_skip_a_line_past_the_limit(tmp_path: Path):
    """``show``/``report`` (``read_spans``) and ``slo`` (``FileSource``) count it skipped."""
    trace = run_bridge(inputs_from_capture(sample_dir())).traces[0]
    line = (export_request_text(trace) + "\n").encode()
    big = b'{"resourceSpans": [], "pad": "' + b"p" * MAX_TRACE_LINE_BYTES + b'"}\n'
    src = tmp_path / "t.jsonl"
    src.write_bytes(line + big + line)
    stats: dict[str, int] = {}
    spans = list(read_spans(str(src), stats))
    assert stats == {"lines": 3, "skipped": 1} and len(spans) == 2 * len(trace)
    fs = FileSource(str(src))
    fs.fill(Harvest(), Window(), warn=lambda msg: None)
    assert (fs.lines, fs.skipped) == (3, 1)


@pytest.mark.slow
def test_a_run_of_carriage_returns_past_the_bound_is_read_in_bounded_memory(monkeypatch) -> None:
    """What a CR at a block's end ends depends on the byte after it, so the reader reads on
    past it, but no further than the bound: a log of blank CR-ended lines is not held."""
    from fma_otel import lines

    monkeypatch.setattr(lines, "BLOCK_BYTES", 256 << 10)
    run = (2 << 20) + 5
    data = (
        HDR
        + b'"Bound server-providing Pod" a=1\n'
        + b"\r" * run
        + HDR
        + b'"Bound server-providing Pod" a=2\n'
    )
    st = SourceStats("t")
    recs, peak = _peak(lambda: list(iter_klog(io.BytesIO(data), st, messages=WANTED)))
    assert [r.get("a") for r in recs] == [1, 2]  # type: ignore[attr-defined]
    # the first CR, after a LF, is one line end with it; each other one ends a blank line
    assert (st.read, st.understood, st.ignored, st.skipped) == (run + 1, 2, run - 1, 0)
    assert st.notes == {CR_NOTE: run - 1}
    assert peak < 3 << 20, peak  # a few blocks, not the run
