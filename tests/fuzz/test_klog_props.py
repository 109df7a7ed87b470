"""Property tests of the klog parser: nothing escapes, every line is counted once.

Why these properties: the bridge must survive any DPC log (cut by a line-length limit,
concatenated with another container's output, corrupted) and still say exactly how many
lines it could not use; ``read == understood + ignored + skipped`` is what ``--strict``
relies on (a carriage return alone ends a line too, and is noted).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel.facts import WANTED_MESSAGES
from fma_otel.sources.klog import KlogParseError, go_unquote, iter_klog, parse_klog_line
from fma_otel.sources.records import SourceStats

from ._mutate import mutated_file, mutated_line, sample_lines

DPC = sample_lines("dpc.log")
CONTAINS = {"HTTP call done": ("purpose", ("create_instance", "wake", "query_sleeping"))}
MODES = [{}, {"messages": WANTED_MESSAGES}, {"messages": WANTED_MESSAGES, "contains": CONTAINS}]
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _counted(lines: list[bytes] | list[str], **kw: object) -> tuple[SourceStats, list]:
    st_ = SourceStats("t")
    recs = list(iter_klog(iter(lines), st_, **kw))  # type: ignore[arg-type]
    assert st_.read == len(lines) + sum(st_.notes.values())
    assert st_.understood >= 0 and st_.skipped >= 0 and st_.ignored >= 0
    assert st_.read == st_.understood + st_.ignored + st_.skipped, (st_.read, st_.understood, st_.skipped)
    return st_, recs


@pytest.mark.slow
@FAST
@given(st.lists(st.binary(max_size=200), max_size=20))
def test_arbitrary_bytes_are_counted(lines: list[bytes]) -> None:
    for kw in MODES:
        _counted(lines, **kw)


@pytest.mark.slow
@FAST
@given(st.lists(st.text(max_size=120), max_size=15))
def test_arbitrary_text_is_counted(lines: list[str]) -> None:
    for kw in MODES:
        _counted(lines, **kw)


@pytest.mark.slow
@FAST
@given(mutated_file(DPC))
def test_mutated_real_lines_are_counted(lines: list[bytes]) -> None:
    for kw in MODES:
        _counted(lines, **kw)


@pytest.mark.slow
@FAST
@given(mutated_line(DPC))
def test_parse_line_raises_only_its_own_error(line: bytes) -> None:
    try:
        rec = parse_klog_line(line)
    except KlogParseError as e:
        assert e.reason
        return
    if rec is not None:
        assert isinstance(rec.msg, str) and isinstance(rec.kv, tuple)


@pytest.mark.slow
@FAST
@given(st.lists(st.sampled_from(DPC), max_size=40))
def test_real_lines_in_any_order_are_all_understood(lines: list[bytes]) -> None:
    """Reordered real lines can orphan a block's continuation lines (those may be skipped,
    with a reason) but never make a whole header line unreadable."""
    st_, _ = _counted(lines)
    headers = [ln for ln in lines if ln[:1] in b"IWEF"]
    assert st_.understood >= len(headers)


def _key(r: object) -> tuple:
    return (r.line_no, r.msg, r.kv, r.tod_us)  # type: ignore[attr-defined]


@pytest.mark.slow
@FAST
@given(mutated_file(DPC))
def test_prefilter_loses_no_wanted_record(lines: list[bytes]) -> None:
    """The bridge reads the DPC log through the ``messages`` prefilter; whatever a full
    parse finds with a wanted message, the prefiltered parse must yield the same."""
    _, full = _counted(lines)
    _, pre = _counted(lines, messages=WANTED_MESSAGES)
    want = [_key(r) for r in full if r.msg in WANTED_MESSAGES]
    assert [_key(r) for r in pre] == want


@pytest.mark.slow
@FAST
@given(
    st.lists(st.sampled_from([*DPC[:20], b"", b"x" * 90]), max_size=30),
    st.lists(st.sampled_from([b"\n", b"\r", b"\r\n"]), min_size=1, max_size=30),
)
def test_a_file_with_any_line_ends_and_a_small_limit_is_counted_and_loses_no_wanted_record(
    pieces: list[bytes], ends: list[bytes]
) -> None:
    """Read as a file with a line limit smaller than many lines: however CRs and LFs mix,
    every line is counted once, and the prefilter loses no record a full read finds."""
    import io
    from unittest import mock

    from fma_otel.sources import klog

    data = b"".join(p + ends[i % len(ends)] for i, p in enumerate(pieces))
    with mock.patch.object(klog, "MAX_LINE_BYTES", 200):
        runs = []
        for kw in ({}, {"messages": WANTED_MESSAGES}):
            st_ = SourceStats("t")
            recs = list(iter_klog(io.BytesIO(data), st_, **kw))  # type: ignore[arg-type]
            assert st_.read == st_.understood + st_.ignored + st_.skipped
            assert st_.read >= data.count(b"\n")
            runs.append((st_.read, [_key(r) for r in recs]))
    (read_full, full), (read_pre, pre) = runs
    assert read_full == read_pre
    assert pre == [k for k in full if k[1] in WANTED_MESSAGES]


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='ab\\" n', max_size=12), st.sampled_from(["", " x=1", ' y="z"', "x"]))
def test_a_quoted_value_ends_at_its_closing_quote_and_keeps_its_escapes(body: str, after: str) -> None:
    """Whatever backslashes and quotes a value holds, the pair reads what Go wrote: the
    value ends at the first quote after an even run of backslashes (escape by escape, as
    written here), and is decoded, or kept as written when not a valid Go literal."""
    line = f'I0629 14:30:00.000000       1 x.go:1] "m" k="{body}"{after}'
    rec = parse_klog_line(line)
    assert rec is not None
    i, end = line.index('k="') + 2, None
    j = i + 1
    while j < len(line):  # the closing quote: one after an even run of backslashes
        if line[j] == "\\":
            j += 2
            continue
        if line[j] == '"':
            end = j + 1
            break
        j += 1
    kv = dict(rec.kv)
    if end is None or (end < len(line) and line[end] != " "):
        return  # cut, or not a value the pairs regex takes whole: the other ways are tested elsewhere
    written = line[i:end]
    try:
        want = go_unquote(written)
    except ValueError:
        want = written
    assert kv.get("k") == want
