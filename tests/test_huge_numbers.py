"""Numbers and nesting Python refuses to build, in the bridge's inputs: never a traceback.

CPython (3.11, and 3.10 from 3.10.7) refuses ``int()`` of more than
``sys.get_int_max_str_digits()`` (4300) digits with a plain ``ValueError``, which is not the
``json.JSONDecodeError`` the readers caught; ``float()`` of such an int raises
``OverflowError``; JSON nested deeper than the decoder recurses raises ``RecursionError``.
Each of these once stopped ``fma-otel bridge`` with a traceback.  Now: a klog value Python
will not build is kept as written (the line still counts), a klog header with such a number
and a Pod holding one are counted skips with a reason, and an HTTP status that is no finite
number is a failed call, as a missing one is.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import facts as F
from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir
from fma_otel.cli import main
from fma_otel.facts import WANTED_CONTAINS, WANTED_MESSAGES
from fma_otel.sources.klog import KlogParseError, iter_klog, parse_klog_line
from fma_otel.sources.pods import PodEvent, PodStore, iter_pod_events
from fma_otel.sources.records import SourceStats

BIG = "9" * 5000  # over any int_max_str_digits default
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json's C decoder recurses

HEAD = 'I0629 14:30:43.878952       1 inference-server.go:2251] "HTTP call done" worker=1'
CREATE = (
    HEAD + ' serverUID="u-1" requesterName="r-1" providerName="l-1" purpose="create_instance"'
    ' method="PUT" url="http://10.0.0.1:8001/v2/vllm/instances/i-1"'
    ' httpCallStartTime="2026-06-29T14:30:43.000000000Z" latencySecs=0.5 statusCode=200 err=null'
)


def test_the_limit_is_what_these_tests_cross() -> None:
    if hasattr(sys, "get_int_max_str_digits"):
        assert 0 < sys.get_int_max_str_digits() < len(BIG)
    with pytest.raises(ValueError):
        int(BIG)


@pytest.mark.parametrize("token", [BIG, "-" + BIG], ids=["positive", "negative"])
def test_a_klog_integer_too_long_is_kept_as_written(token: str) -> None:
    rec = parse_klog_line(CREATE + " big=" + token + " after=1", 7)
    assert rec is not None and rec.line_no == 7
    assert rec.get("big") == token  # the text, not a number Python could not make
    assert rec.get("after") == 1 and rec.get("statusCode") == 200  # the other pairs intact


@pytest.mark.parametrize(
    ("value", "kept"),
    [('{"a":' + BIG + "}", '{"a":' + BIG + "}"), (DEEP, DEEP)],
    ids=["json-int-too-long", "json-too-deep"],
)
def test_a_klog_json_value_python_will_not_build_is_kept_as_written(value: str, kept: str) -> None:
    rec = parse_klog_line(CREATE + " v=" + value + ' tail="x"', 1)
    assert rec is not None
    assert rec.get("v") == kept
    assert rec.get("tail") == "x"


def test_a_klog_header_number_too_long_is_a_parse_error() -> None:
    line = CREATE.replace("       1 inference", " " + BIG + " inference")
    with pytest.raises(KlogParseError, match="number too long"):
        parse_klog_line(line, 1)
    line = CREATE.replace("inference-server.go:2251]", "inference-server.go:" + BIG + "]")
    with pytest.raises(KlogParseError, match="number too long"):
        parse_klog_line(line, 1)


@pytest.mark.parametrize("prefilter", [False, True], ids=["all-lines", "bridge-prefilter"])
@pytest.mark.parametrize("as_file", [False, True], ids=["per-line", "bulk"])
def test_iter_klog_counts_the_bad_header_and_reads_on(tmp_path: Path, prefilter: bool, as_file: bool) -> None:
    lines = [
        CREATE.replace("       1 inference", " " + BIG + " inference"),
        CREATE + " big=" + BIG,
        CREATE,
    ]
    path = tmp_path / "dpc.log"
    path.write_text("\n".join(lines) + "\n")
    st = SourceStats(str(path))
    kw = {"messages": WANTED_MESSAGES, "contains": WANTED_CONTAINS} if prefilter else {}
    with open(path, "rb") as fh:
        recs = list(iter_klog(fh if as_file else iter(fh.readlines()), st, **kw))
    assert [r.line_no for r in recs] == [2, 3]
    assert recs[0].get("big") == BIG
    assert (st.read, st.understood, st.skipped) == (3, 2, 1)
    assert st.skipped_lines == [(1, "klog header with a number too long")]


#: CREATE's own log time (a DPC line's time fields must lie near it)
_T = 1_782_743_443_500_000_000


def test_a_status_code_beyond_any_float_is_a_failed_call() -> None:
    assert F._finite(10**400) is None
    assert F._finite(-(10**400)) is None
    rec = parse_klog_line(CREATE.replace("statusCode=200", "statusCode=" + "9" * 400), 1)
    fact = F.dpc_fact(rec, _T)
    assert fact is not None and fact.kind == F.CREATE
    assert fact.ok is False and fact.status == 0
    # a latency that no float holds, or that no end time in ns does: a counted skip (1e300
    # once raised OverflowError from round(lat * 1e9))
    for lat in ("9" * 400, "1e300", "1e11", "100000001"):
        rec = parse_klog_line(CREATE.replace("latencySecs=0.5", "latencySecs=" + lat), 1)
        with pytest.raises(ValueError, match="latencySecs"):
            F.dpc_fact(rec, _T)
    assert F.dpc_fact(parse_klog_line(CREATE.replace("latencySecs=0.5", "latencySecs=1e8"), 1), _T).ok


@pytest.mark.parametrize(
    "raw", ['{"annotations":{"isc-name":' + BIG + "}}", DEEP], ids=["int-too-long", "too-deep"]
)
def test_a_vllm_config_python_will_not_build_names_no_isc(raw: str) -> None:
    assert F._isc_from_vllm_config(raw) is None


def _pod(uid: str, rv: str, extra: str = "") -> str:
    return (
        '{"kind":"Pod","metadata":{"uid":"' + uid + '","name":"p-' + uid + '","resourceVersion":"'
        + rv + '"' + extra + '},"spec":{},"status":{}}'
    )  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "reason"),
    [(',"n":' + BIG, "a number too long"), (',"n":' + DEEP, "JSON nested too deeply")],
    ids=["int-too-long", "too-deep"],
)
@pytest.mark.parametrize("chunk", [1 << 20, 4096])
def test_a_pod_python_will_not_build_is_a_counted_skip(
    tmp_path: Path, bad: str, reason: str, chunk: int
) -> None:
    path = tmp_path / "pods.json"
    path.write_text(_pod("a", "1") + "\n" + _pod("b", "2", bad) + "\n" + _pod("c", "3") + "\n")
    st = SourceStats(str(path))
    with open(path, "rb") as fh:
        uids = [ev.pod["metadata"]["uid"] for ev in iter_pod_events(fh, st, chunk_size=chunk)]
    assert uids == ["a", "c"]
    assert (st.read, st.understood, st.skipped) == (3, 2, 1)
    assert st.skipped_lines[0][0] == 2
    assert st.skipped_lines[0][1].startswith("malformed JSON object: " + reason)


def test_a_pod_number_one_digit_too_long_is_found_wherever_it_starts() -> None:
    """The reader looks at a whole Pod only when one of every limit-th bytes is a digit:
    a run one digit past the limit is found at every offset, one at the limit never."""
    from fma_otel.sources.pod_json import _may_hold_huge

    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 4300
    for start in [0, 1, 2, limit // 2, limit - 1, limit, limit + 1, 2 * limit - 3]:
        pad = b"x" * start
        assert _may_hold_huge(pad + b"7" * (limit + 1) + b"x" * 5), start
        assert not _may_hold_huge(pad + b"7" * limit + b"x" * (limit + 5)), start


@pytest.mark.parametrize(
    ("older", "newer"),
    [("9" * 30, "1" + "0" * 30), (BIG, "1" + BIG), ("0007", "8"), ("5", "0000006")],
    ids=["30-digits", "5000-digits", "leading-zeros-older", "leading-zeros-newer"],
)
def test_resource_versions_of_any_length_order_as_integers(older: str, newer: str) -> None:
    def ev(rv: str, phase: str) -> PodEvent:
        return PodEvent(
            "MODIFIED", {"metadata": {"uid": "u", "resourceVersion": rv}, "status": {"phase": phase}}, 0
        )

    for first, second, want in ((older, newer, "new"), (newer, older, "new")):
        store = PodStore()
        store.add(ev(first, "new" if first == newer else "old"))
        store.add(ev(second, "new" if second == newer else "old"))
        assert store.get("u")["status"]["phase"] == want


def _corrupt_sample(tmp_path: Path) -> Path:
    """The sample capture with one of each: a create call's status code of 400 digits, a
    wanted klog line with a 5000-digit value, one with a 5000-digit thread id, one with a
    latency of 1e300 s, and a Pod with a 5000-digit number."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / "dpc.log"
    lines = log.read_text().splitlines(keepends=True)
    creates = [i for i, line in enumerate(lines) if 'purpose="create_instance"' in line]
    lines[creates[0]] = lines[creates[0]].replace("statusCode=200", "statusCode=" + "9" * 400)
    lines[creates[1]] = lines[creates[1]].rstrip("\n") + " big=" + BIG + "\n"
    lines[creates[2]] = lines[creates[2]].replace("       1 inference", " " + BIG + " inference", 1)
    ok_poll = next(
        i for i, line in enumerate(lines) if 'purpose="query_sleeping"' in line and "err=null" in line
    )
    lines[ok_poll] = re.sub(r"latencySecs=[0-9.e-]+", "latencySecs=1e300", lines[ok_poll])
    log.write_text("".join(lines))
    pods = cap / "pods.json"
    text = pods.read_text()
    at = text.index('"metadata"')
    pods.write_text(text[:at] + '"big": ' + BIG + ", " + text[at:])
    return cap


def test_the_bridge_reads_on_past_every_one(tmp_path: Path) -> None:
    cap = _corrupt_sample(tmp_path)
    res = run_bridge(inputs_from_capture(cap))
    by_name = {Path(st.name).name: st for st in res.stats}
    dpc, pods = by_name["dpc.log"], by_name["pods.json"]
    assert sorted(why for _, why in dpc.skipped_lines) == [
        "HTTP call done without a valid httpCallStartTime/latencySecs",
        "klog header with a number too long",
    ]
    assert dpc.read == dpc.understood + dpc.ignored + dpc.skipped
    assert pods.skipped == 1 and "a number too long" in pods.skipped_lines[0][1]
    assert res.traces  # the other actuations are all there


def test_the_cli_reports_them_and_strict_names_the_lines(tmp_path: Path) -> None:
    cap = _corrupt_sample(tmp_path)
    out = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output and out.stat().st_size > 0
    r = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out), "--strict"], catch_exceptions=False)
    assert r.exit_code == 1
    assert "klog header with a number too long" in r.output
    assert "without a valid httpCallStartTime/latencySecs" in r.output
    assert "malformed JSON object: a number too long" in r.output
