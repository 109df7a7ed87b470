"""``correlate.failed_poll``: the failed ``/is_sleeping`` polls the bridge counts unparsed.

The promise (``iter_klog(drop=...)``): a line it takes is one the full parser turns into a
record that ``dpc_row`` drops and ``Correlator.add_dpc`` ignores, so reading with and
without it gives the same records kept, the same counts and the same skips.  Checked on
the sample's own polls, on hand-made near misses, and on mutated lines (hypothesis).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel.correlate import Correlator, dpc_row, failed_poll
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources.klog import iter_klog, parse_klog_line
from fma_otel.sources.records import SourceStats

from .fuzz._mutate import mutated_file, mutated_line, sample_lines

DPC = sample_lines("dpc.log")
POLLS = [line for line in DPC if b'purpose="query_sleeping"' in line]
FAILED = [line for line in POLLS if b' err="' in line]
#: the same as `fma-otel capture` writes them (kubelet's --timestamps prefix)
PREFIXED = [b"2026-06-29T14:30:%02d.123456789Z " % i + line for i, line in enumerate(FAILED)]
KW = {"messages": WANTED_MESSAGES, "contains": WANTED_CONTAINS}

POLL = (
    'I0629 14:30:30.332473       1 inference-server.go:2251] "HTTP call done" worker=1'
    ' node="gpu-node-3" serverUID="bee7fca7" requesterName="my-request-29"'
    ' instanceID="ImHWf" providerName="launcher-example-7lh2p" purpose="query_sleeping"'
    ' method="GET" url="http://10.244.3.22:8006/is_sleeping"'
    ' httpCallStartTime="2026-06-29T14:30:30.331326092Z" latencySecs=0.001138291 statusCode=0'
    ' err="failed to do HTTP GET \\"http://10.244.3.22:8006/is_sleeping\\": dial tcp: connect:'
    ' connection refused"'
)


def _read(lines: list[bytes], drop, as_file: bool) -> tuple[list, tuple]:
    st_ = SourceStats("t")
    src = io.BytesIO(b"".join(lines)) if as_file else iter(lines)
    recs = [r for r in iter_klog(src, st_, **KW, drop=drop) if dpc_row(r) is not None]
    return recs, (st_.read, st_.understood, st_.skipped, st_.skipped_lines)


def _drops_the_same(lines: list[bytes]) -> None:
    for as_file in (False, True):
        assert _read(lines, failed_poll, as_file) == _read(lines, None, as_file)


def test_the_sample_has_failed_polls_and_each_is_taken() -> None:
    assert len(FAILED) >= 10
    assert all(failed_poll(line) for line in FAILED)
    assert all(failed_poll(line) for line in PREFIXED)
    assert not any(failed_poll(line) for line in DPC if line not in FAILED)
    _drops_the_same(DPC)
    _drops_the_same([b"2026-06-29T14:30:00Z " + line for line in DPC])


def test_a_taken_line_is_a_record_that_makes_no_row_and_no_fact() -> None:
    c = Correlator()
    for line in FAILED:
        rec = parse_klog_line(line, 1)
        assert rec is not None and rec.get("purpose") == "query_sleeping"
        assert dpc_row(rec) is None
        fact = c.add_dpc(rec)
        assert fact is not None and fact.ok is False
    assert c._dpc == {}  # nothing kept


@pytest.mark.parametrize(
    ("edit", "taken"),
    [
        (lambda s: s, True),
        (lambda s: s.replace("statusCode=0", "statusCode=200"), True),  # err decides
        (lambda s: s.replace("statusCode=0", "statusCode=503"), True),
        (lambda s: s[: s.index(' err="')] + " err=null", False),  # a success
        (lambda s: s[: s.index(' err="')] + ' err=""', False),
        (lambda s: s[: s.index(' err="')] + ' err="null"', False),
        (lambda s: s[: s.index(' err="')] + ' err="a\\nb"', False),  # another escape
        (lambda s: s.replace("I0629", "I0229"), False),  # Feb 29: not in every year
        (lambda s: s.replace("I0629", "I1329"), False),
        (lambda s: s.replace("I0629", "I0600"), False),
        (lambda s: s.replace("I0629 14:", "I0629 24:"), False),
        (lambda s: "2026-06-29T14:30:30.5Z " + s, True),  # a --timestamps prefix
        (lambda s: "2026-06-29T14:30:30.123456789+02:00 " + s, True),
        (lambda s: "2026-13-29T14:30:30.5Z " + s, False),  # a prefix that is no time
        (lambda s: "2026 " + s, False),
        (lambda s: "2026-06-29T14:30:000123456789Z " + s, False),  # klog's reader refuses it
        (lambda s: "2026-06-29 14:30:00Z " + s, False),  # no T: the prefix ends at the space
        (lambda s: "2026-06-29T14:30:30.5Z\t" + s, False),  # no space: one long "prefix"
        (lambda s: "1969-12-31T23:59:59Z " + s, False),  # before 1970: not sure
        (lambda s: "2\xe9 " + s, False),  # not ASCII
        (lambda s: s.replace("       1 inf", " " + "9" * 20 + " inf"), False),
        (lambda s: s.replace("2026-06-29T14:30:30.331326092Z", "2026-13-29T14:30:30Z"), False),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=1.5e-05"), True),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=99999999.5"), True),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=100000001"), False),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=1e99"), False),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=1e300"), False),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=1e999"), False),
        (lambda s: s.replace("latencySecs=0.001138291", "latencySecs=-1"), False),
        (lambda s: s.replace(' method="GET"', ""), False),  # another order
        (lambda s: s.replace('"HTTP call done"', '"HTTP call Done"'), False),
        (lambda s: s.replace(' node="gpu-node-3"', ' node="gpu\\"3"'), True),
        (lambda s: s.replace(' node="gpu-node-3"', " node=gpu-node-3"), False),  # not a pair
        (lambda s: s.replace(' purpose="query_sleeping"', ' purpose="wake" purpose="query_sleeping"'), True),
        (lambda s: s + ' err="again"', False),
    ],
)
@pytest.mark.parametrize("end", ["\n", "\r\n", ""])
def test_near_misses_go_the_full_way(edit, taken: bool, end: str) -> None:
    line = (edit(POLL) + end).encode()
    assert failed_poll(line) is taken
    _drops_the_same([DPC[0], line, DPC[1]])


def test_a_carriage_return_that_is_not_the_line_end_goes_the_full_way() -> None:
    for line in ((POLL + "\r").encode(), (POLL + "\r\r\n").encode()):
        assert not failed_poll(line)
        _drops_the_same([DPC[0], DPC[1], line])


def test_a_dropped_line_keeps_a_block_open_before_it_out_of_the_fast_path(tmp_path: Path) -> None:
    """A poll line right after a ``key=<`` opener is a block line to the parser, not a poll."""
    opener = b'I0629 14:30:30.000000       1 x.go:1] "Observed actuation latency" path="cold" v=<\n'
    lines = [opener, FAILED[0], b" >\n", FAILED[1]]
    _drops_the_same(lines)


FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.lists(mutated_line(FAILED + PREFIXED), min_size=1, max_size=8))
def test_mutated_polls_are_dropped_only_where_the_full_path_drops_them(lines: list[bytes]) -> None:
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    for line in lines:
        if failed_poll(line):
            st_ = SourceStats("t")
            recs = list(iter_klog(iter([line]), st_))
            assert len(recs) == 1 and (st_.understood, st_.skipped) == (1, 0)
            assert dpc_row(recs[0]) is None
    _drops_the_same(lines)


@FAST
@given(mutated_file(DPC, max_size=40))
def test_mutated_logs_read_the_same_with_and_without(lines: list[bytes]) -> None:
    lines = [line if line.endswith(b"\n") else line + b"\n" for line in lines]
    _drops_the_same(lines)


@FAST
@given(st.text(alphabet="0123456789-:.TtZz+ \t", max_size=40), st.sampled_from(["", "2026-06-29T14:30:0"]))
def test_any_prefix_is_read_as_the_parser_reads_it(prefix: str, head: str) -> None:
    """The prefix goes through the parser's own RFC 3339 reader (klog's, stricter than
    timeutil's: a CI run of the mutation test found ``14:30:000123456789Z`` read apart)."""
    line = (head + prefix + " " + POLL + "\n").encode()
    if failed_poll(line):
        st_ = SourceStats("t")
        recs = list(iter_klog(iter([line]), st_))
        assert len(recs) == 1 and (st_.understood, st_.skipped) == (1, 0)
        assert dpc_row(recs[0]) is None
    _drops_the_same([DPC[0], line])
