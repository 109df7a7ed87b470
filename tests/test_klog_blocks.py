"""The klog reader searches a file in blocks: every rule of a line holds across block edges.

Why: the reader cuts out of each block only the lines that may be wanted and counts the
rest by their number, so a line split by a block's edge, a multi-line value that spans
blocks, carriage returns and line numbers must come out as when the same lines are given
one by one (a list, which is read a line at a time).  Small blocks put edges everywhere.
"""

from __future__ import annotations

import io

import pytest

from fma_otel import lines
from fma_otel.bridge import sample_dir
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources import klog
from fma_otel.sources.records import SourceStats
from tests.test_klog import CREATED, HTTP_CREATE, HTTP_REFUSED, RELAYED, TAIL_BLOCK, TRANSIENT

KW = {"messages": WANTED_MESSAGES, "contains": WANTED_CONTAINS}


def _trace(src: object, **kw: object) -> tuple[list[tuple[object, ...]], tuple[object, ...]]:
    """Each record with the counts as they stand when it is yielded, and the final stats."""
    st = SourceStats("dpc")
    out = [(r, st.read, st.understood, st.ignored, st.skipped) for r in klog.iter_klog(src, st, **kw)]  # type: ignore[arg-type]
    return out, (st.read, st.understood, st.ignored, st.skipped, st.skipped_lines, st.notes)


def _mixed() -> bytes:
    """Wanted and unwanted lines, multi-line values of both, CRLF ends, a bad wanted line."""
    err_block = [
        'I0629 14:30:00.085800       1 inference-server.go:111] "Processing node local item suffered '
        'transient error, will retry" worker=1 err=<',
        '\tHTTP GET "http://10.244.7.24:8001/v2/vllm/instances" returned 503',
        '\t] "Successfully relayed the readiness" inside a block line',
        ' > item={"LauncherPodName":"launcher-example-vrmft"} retryAfter="5s"',
    ]
    wanted_block = [RELAYED + " tail=<", "\tline one", "\tline two", " > after=true"]
    cut = 'I0629 14:36:45.563150       1 inference-server.go:595] "Successfully relayed the readiness" a="cut'
    bad = 'I1399 14:36:45.563150       1 inference-server.go:595] "Successfully relayed the readiness" a=1'
    lines = [
        HTTP_CREATE,
        TRANSIENT,
        *err_block,
        CREATED,
        HTTP_REFUSED,
        *wanted_block,
        cut,
        bad,
        *TAIL_BLOCK,
        RELAYED,
    ]
    text = "\n".join(lines * 3) + "\n"
    return text.encode() + text.replace("\n", "\r\n").encode()


@pytest.mark.parametrize("block", [1, 7, 64, 333, 4096])
def test_records_and_counts_are_the_same_at_any_block_size(monkeypatch, block: int) -> None:
    data = _mixed() + (sample_dir() / "dpc.log").read_bytes()
    want = _trace(list(io.BytesIO(data)), **KW)
    assert want[1][2] > 0 and want[1][3] > 0  # some lines ignored, some skipped
    monkeypatch.setattr(lines, "BLOCK_BYTES", block)
    assert _trace(io.BytesIO(data), **KW) == want


@pytest.mark.parametrize("block", [5, 100])
def test_a_bare_carriage_return_ends_a_line_wherever_the_block_edges_fall(monkeypatch, block: int) -> None:
    """A carriage return alone ends a line, in a short line as in a long one (before, a
    short one was kept whole: a line's record then swallowed the next); line numbers
    count the lines so ended, and a CRLF is one line end, wherever the edges fall."""
    long_unwanted = TRANSIENT + " pad=" + "p" * 5000 + "\r" + RELAYED
    short = TRANSIENT + "\r" + RELAYED
    data = "\n".join([HTTP_CREATE, short, long_unwanted, RELAYED + "\r"]).encode() + b"\n" + RELAYED.encode()
    monkeypatch.setattr(lines, "BLOCK_BYTES", block)
    recs, stats = _trace(io.BytesIO(data), **KW)
    assert [(r.line_no, r.msg) for r, *_ in recs] == [
        (1, "HTTP call done"),
        (3, "Successfully relayed the readiness"),
        (5, "Successfully relayed the readiness"),
        (6, "Successfully relayed the readiness"),
        (7, "Successfully relayed the readiness"),
    ]
    assert stats[:4] == (7, 5, 2, 0) and stats[5] == {lines.CR_NOTE: 2}
    assert _trace(list(io.BytesIO(data)), **KW) == (recs, stats)
