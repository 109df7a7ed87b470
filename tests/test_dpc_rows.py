"""DPC facts made in the log's worker processes (``dpc_row``) against ``add_dpc``, their reference.

Why: with ``--jobs`` the workers that read the DPC log also make each line's fact and send
only what the correlator can keep; the parent adds those rows with ``add_dpc_row``.  That
must be invisible: the same facts kept, the same ``ValueError`` (same reason, same lines,
resolve's before the fact's), whatever the dates and prefixes, and failed ``/is_sleeping``
answers dropped in the worker only where no year could make them raise.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel import facts as F
from fma_otel.correlate import Correlator, dpc_row
from fma_otel.sources.klog import iter_klog
from fma_otel.sources.records import KlogRecord, SourceStats
from fma_otel.timeutil import parse_rfc3339_ns

from .fuzz._mutate import sample_lines

DPC = sample_lines("dpc.log")
#: Pod creation times that make the nearest year of a January line 2025, of a December
#: line 2024 (a leap year: 0229 resolves there only).
REFS = ("2024-12-30T10:00:00Z", "2025-01-02T10:00:00Z")
_UID = 'serverUID="u-1" requesterName="r-1"'


def _http(
    date: str, purpose: str, status: int, start: str = "2024-12-30T10:00:00.5Z", err: str = ""
) -> bytes:
    tail = f' err="{err}"' if err else ""
    return (
        f'I{date} 10:00:01.000000       1 inference-server.go:2251] "HTTP call done" {_UID} '
        f'purpose="{purpose}" method="GET" url="http://10.0.0.1:8005/is_sleeping" '
        f'httpCallStartTime="{start}" latencySecs=0.001 statusCode={status}{tail}\n'
    ).encode()


def _line(date: str, msg: str, pairs: str = "") -> bytes:
    return f'I{date} 10:00:02.000000       1 x.go:1] "{msg}" {_UID} {pairs}\n'.encode()


#: Lines for every branch: kept facts, failed and good polls, no-fact lines, bad starts,
#: and dates that resolve in every year, in some years only (0229) or in none (0230, 0431).
EDGE = [
    _http(d, purpose, status, **kw)
    for d in ("1230", "0102", "0229", "0230", "0431", "0228")
    for purpose, status, kw in (
        ("query_sleeping", 0, {"err": "connection refused"}),
        ("query_sleeping", 200, {}),
        ("query_sleeping", 503, {}),
        ("create_instance", 200, {}),
        ("query_sleeping", 0, {"start": "not a time"}),
        ("wake", 200, {"start": "2024-13-01T00:00:00Z"}),
    )
] + [
    _line(d, msg, pairs)
    for d in ("1230", "0229", "0230")
    for msg, pairs in (
        ("Successfully relayed the readiness", 'readiness="unready"'),
        ("Successfully relayed the readiness", 'readiness="ready"'),
        ("Observed actuation latency", 'path="cold" actuationSecs=12.5'),
        ("Some other line", ""),
    )
]
PREFIXES = [b"", b"2024-12-30T10:00:03.0Z ", b"2025-01-01T00:00:00.0Z ", b"1969-12-31T23:59:59.0Z "]


def _records(lines: list[bytes]) -> list[KlogRecord]:
    """Every record of ``lines`` (no prefilter: lines the bridge never wants are included)."""
    return list(iter_klog(list(io.BytesIO(b"".join(lines))), SourceStats("t")))


def _correlator() -> Correlator:
    c = Correlator()
    for ref in REFS:
        c.years.add_reference(parse_rfc3339_ns(ref))
    return c


def _outcome(add: Any, arg: Any) -> Any:
    try:
        return ("fact", add(arg))
    except ValueError as exc:
        return ("error", str(exc))


def _compare(recs: list[KlogRecord]) -> tuple[int, int]:
    """Feed ``recs`` both ways; assert the same outcomes and state.  (rows sent, dropped)"""
    ref, rows = _correlator(), _correlator()
    sent = dropped = 0
    for rec in recs:
        want = _outcome(ref.add_dpc, rec)
        row = dpc_row(rec)
        if row is None:
            dropped += 1
            # nothing kept, nothing raised: the serial path would have kept nothing either
            assert want[0] == "fact"
            continue
        sent += 1
        assert len(row) == 6 and row[0] == rec.line_no
        got = _outcome(rows.add_dpc_row, row)
        if want[0] == "fact" and want[1] is not None and got[1] is None:
            # a fact the reference made but did not keep (a failed poll whose date needed the year)
            assert want[1].kind == F.SLEEP_QUERY and not want[1].ok
            continue
        assert got == want, rec
    assert rows._dpc == ref._dpc
    assert rows._updated.keys() == ref._updated.keys()
    return sent, dropped


def test_rows_keep_and_raise_exactly_what_records_do():
    recs = _records([p + ln for p in PREFIXES for ln in EDGE])
    sent, dropped = _compare(recs)
    assert sent and dropped  # both ways taken
    reasons = {r for r in (_outcome(_correlator().add_dpc, x) for x in recs) if r[0] == "error"}
    assert any("0229" in why or "02-29" in why for _, why in reasons)  # resolve's reason
    assert any("not an RFC3339 time" in why for _, why in reasons)  # the fact's reasons
    assert any("month must be in 1..12" in why for _, why in reasons)


def test_failed_polls_are_dropped_only_where_no_year_can_make_them_raise():
    def row(line: bytes) -> Any:
        (rec,) = _records([line])
        return dpc_row(rec)

    failed = {"err": "connection refused"}
    assert row(_http("1230", "query_sleeping", 0, **failed)) is None
    assert row(_http("0228", "query_sleeping", 503)) is None
    assert row(_line("0102", "Successfully relayed the readiness", 'readiness="unready"')) is None
    assert row(_line("0102", "Some other line")) is None
    # 0229 resolves in leap years only, 0230 in none: the parent must still try the year
    assert row(_http("0229", "query_sleeping", 0, **failed))[5] is None
    assert row(_http("0230", "query_sleeping", 0, **failed))[5] is None
    # a prefix before 1970 is not trusted to resolve either
    assert row(b"1969-12-31T23:59:59.0Z " + _http("1230", "query_sleeping", 0, **failed)) is not None
    good = row(_http("1230", "query_sleeping", 200))
    assert good[5][0] == F.SLEEP_QUERY and good[5][6] is True
    assert (
        row(_http("1230", "query_sleeping", 0, start="not a time"))[5] == "not an RFC3339 time: 'not a time'"
    )


def test_fact_payload_round_trips():
    (rec,) = _records([_http("1230", "create_instance", 200)])
    fact = F.dpc_fact(rec, 123)
    assert fact is not None
    assert F.fact_from_payload(F.fact_payload(fact), 123, rec.line_no) == fact


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(DPC + EDGE), max_size=40), st.sampled_from(PREFIXES))
def test_any_mix_of_sample_and_edge_lines(lines: list[bytes], prefix: bytes):
    _compare(_records([prefix + ln for ln in lines]))


@pytest.mark.parametrize("jobs", [2, 3])
def test_sample_capture_rows_equal_records(jobs: int):
    """The shipped sample, every wanted record, both ways."""
    from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES

    recs = list(
        iter_klog(
            io.BytesIO(b"".join(DPC * jobs)),
            SourceStats("t"),
            messages=WANTED_MESSAGES,
            contains=WANTED_CONTAINS,
        )
    )
    sent, dropped = _compare(recs)
    assert dropped >= 13 * jobs  # the sample's failed polls
