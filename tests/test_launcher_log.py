"""Launcher log parser: the observed log of fma-reference §9.3a plus the awkward cases."""

from __future__ import annotations

import pytest

from fma_otel.lines import CORRUPT_REASON
from fma_otel.sources.launcher_log import (
    BAD_PUT,
    CUT_ACCEPTED,
    CUT_AT_END,
    NO_ID,
    NOT_A_LINE,
    LauncherParseError,
    accepted_create_id,
    iter_launcher_log,
    parse_access,
    parse_launcher_line,
    parse_launcher_text,
    put_instance_id,
)
from fma_otel.sources.records import SourceStats
from fma_otel.timeutil import parse_rfc3339_ns

IID = "Iharnessxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxi"
OBSERVED = f"""\
2026-12-02 16:07:35,054 - gputranslator - INFO - using package: nvidia-ml-py version: 13.615.71
2026-12-02 16:07:35,055 - gputranslator - ERROR - Failed to initialize pynvml: NVML Shared Library Not Found
2026-12-02 16:07:35,099 - __main__ - INFO - Launcher starting with args: mock_gpus=True, mock_gpu_count=8, host=127.0.0.1, port=52141, log_level=info, node_name=None, namespace=None
2026-12-02 16:07:35,099 - gputranslator - INFO - GPU Translator initialized in mock mode with 8 mock GPUs
2026-12-02 16:07:35,115 - uvicorn.error - INFO - Started server process [8962]
2026-12-02 16:07:35,115 - uvicorn.error - INFO - Waiting for application startup.
2026-12-02 16:07:35,116 - uvicorn.error - INFO - Application startup complete.
2026-12-02 16:07:35,117 - uvicorn.error - INFO - Uvicorn running on http://127.0.0.1:52141 (Press CTRL+C to quit)
2026-12-02 16:07:35,142 - uvicorn.access - INFO - 127.0.0.1:60980 - "GET /health HTTP/1.1" 200
2026-12-02 16:07:35,144 - __main__ - INFO - Accepted request to create vLLM instance with id={IID}
2026-12-02 16:07:35,154 - uvicorn.access - INFO - 127.0.0.1:60986 - "PUT /v2/vllm/instances/{IID} HTTP/1.1" 201
2026-12-02 16:07:49,680 - uvicorn.access - INFO - 127.0.0.1:37234 - "GET /v2/vllm/instances/{IID} HTTP/1.1" 200
2026-12-02 16:07:59,695 - uvicorn.access - INFO - 127.0.0.1:37236 - "DELETE /v2/vllm/instances/{IID} HTTP/1.1" 200
2026-12-02 16:07:59,798 - uvicorn.error - INFO - Shutting down
2026-12-02 16:07:59,898 - uvicorn.error - INFO - Waiting for application shutdown.
2026-12-02 16:07:59,899 - __main__ - INFO - Launcher shutting down, stopping all vLLM instances...
2026-12-02 16:07:59,899 - uvicorn.error - INFO - Application shutdown complete.
2026-12-02 16:07:59,899 - uvicorn.error - INFO - Finished server process [8962]
""".encode().splitlines(keepends=True)


def run(lines):
    stats = SourceStats("launcher")
    return list(iter_launcher_log(lines, stats)), stats


def test_observed_log_all_understood():
    recs, st = run(OBSERVED)
    assert len(recs) == 18
    assert (st.read, st.understood, st.skipped) == (18, 18, 0)
    first = recs[0]
    assert (first.line_no, first.logger, first.level) == (1, "gputranslator", "INFO")
    assert first.message == "using package: nvidia-ml-py version: 13.615.71"
    assert first.t_ns == parse_rfc3339_ns("2026-12-02T16:07:35.054Z")
    assert recs[1].level == "ERROR"
    assert [r.logger for r in recs].count("uvicorn.access") == 4


def test_create_receipt_and_response():
    recs, _ = run(OBSERVED)
    accepted = [(r.line_no, accepted_create_id(r)) for r in recs if accepted_create_id(r)]
    assert accepted == [(10, IID)]
    puts = [(r.line_no, put_instance_id(r), r.access[4]) for r in recs if put_instance_id(r)]
    assert puts == [(11, IID, 201)]
    put = recs[10]
    assert put.access == ("127.0.0.1:60986", "PUT", f"/v2/vllm/instances/{IID}", "1.1", 201)
    assert put.t_ns - recs[9].t_ns == 10_000_000  # 10 ms between receipt and response


def test_access_parsing_variants():
    assert parse_access('10.244.1.1:49822 - "GET /v2/vllm/instances HTTP/1.1" 200') == (
        "10.244.1.1:49822",
        "GET",
        "/v2/vllm/instances",
        "1.1",
        200,
    )
    assert parse_access('10.0.0.1:1 - "PUT /v2/vllm/instances/abc?x=1 HTTP/2" 409 Conflict')[4] == 409
    assert parse_access(' - "GET /health HTTP/1.1" 200')[0] == ""
    assert parse_access("Started server process [1]") is None


def test_put_instance_id_rejects_other_requests():
    def rec(msg):
        return parse_launcher_line(f"2026-06-29 14:36:20,511 - uvicorn.access - INFO - {msg}")

    assert put_instance_id(rec('1.2.3.4:5 - "PUT /v2/vllm/instances/abc%2Dd?x=1 HTTP/1.1" 201')) == "abc-d"
    assert put_instance_id(rec('1.2.3.4:5 - "POST /v2/vllm/instances/abc HTTP/1.1" 201')) is None
    assert put_instance_id(rec('1.2.3.4:5 - "PUT /v2/vllm/instances/abc/log HTTP/1.1" 200')) is None
    assert put_instance_id(rec('1.2.3.4:5 - "PUT /v2/vllm/instances/ HTTP/1.1" 200')) is None
    other = parse_launcher_line(
        '2026-06-29 14:36:20,511 - __main__ - INFO - 1.2.3.4:5 - "PUT /v2/vllm/instances/a HTTP/1.1" 201'
    )
    assert other.access is None and put_instance_id(other) is None  # only uvicorn.access lines
    assert accepted_create_id(rec("Accepted request to create vLLM instance with id=")) is None


def test_traceback_lines_join_the_previous_record():
    lines = [
        "2026-06-29 14:36:20,600 - __main__ - ERROR - Failed to create vLLM instance abc: boom",
        "Traceback (most recent call last):",
        '  File "/app/launcher.py", line 1, in <module>',
        "RuntimeError: boom",
        "2026-06-29 14:36:21,000 - __main__ - INFO - next",
    ]
    recs, st = run(lines)
    assert len(recs) == 2
    assert recs[0].message.splitlines() == [
        "Failed to create vLLM instance abc: boom",
        "Traceback (most recent call last):",
        '  File "/app/launcher.py", line 1, in <module>',
        "RuntimeError: boom",
    ]
    assert recs[1].line_no == 5
    assert (st.read, st.understood, st.skipped) == (5, 5, 0)


def test_uvicorn_cli_lines_are_skipped_for_lack_of_time():
    lines = [
        "2026-05-26 15:28:17,787 - __main__ - INFO - Launcher starting with args: ...",
        "INFO:     Started server process [1]",
        'INFO:     10.131.6.2:34340 - "GET /v2/vllm/instances HTTP/1.1" 200 OK',
    ]
    recs, st = run(lines)
    assert [r.message for r in recs] == ["Launcher starting with args: ..."]  # not glued
    assert (st.read, st.understood, st.skipped) == (3, 1, 2)
    assert all("without a time" in why for _, why in st.skipped_lines)


def test_timestamps_prefix_and_prefixed_continuations():
    lines = [
        "2026-06-29T14:36:20.5019876Z 2026-06-29 14:36:20,501 - __main__ - INFO - Accepted request to create vLLM instance with id=X",
        "2026-06-29T14:36:20.5020000Z   more text",
    ]
    recs, st = run(lines)
    assert recs[0].prefix_ns == parse_rfc3339_ns("2026-06-29T14:36:20.5019876Z")
    assert recs[0].t_ns == parse_rfc3339_ns("2026-06-29T14:36:20.501Z")
    assert recs[0].message.endswith("id=X\n  more text")
    assert accepted_create_id(recs[0]) == "X"
    assert st.skipped == 0


def test_bad_lines_and_reasons():
    lines = [
        "orphan line before any record",
        "2026-06-29 14:35:47,250 INFO launcher_pod_notifier: Launcher Pod notifier started",
        "2026-06-29 14:36:20,501 - __main__ - INFO - ok",
        "2026-06-29 14:35:47,250 INFO launcher_pod_notifier: not glued onto ok",
        "2026-13-29 14:36:20,501 - __main__ - INFO - bad month",
        "2026-06-29T99:00:00Z 2026-06-29 14:36:20,501 - __main__ - INFO - bad prefix",
        b"2026-06-29 14:36:20,502 - __main__ - INFO - caf\xe9\n",
        b"  its continuation: no record to join\n",
        b"2026-06-29 14:36:20,503 - __main__ - INFO - Accepted request to create vLLM instance with id=a\x00b\n",
    ]
    recs, st = run(lines)
    # a line that is not UTF-8 or holds a NUL is corrupt: skipped, never read with U+FFFD
    # (an id misread that way matches nothing, and its instant was lost without a word)
    assert [r.message for r in recs] == ["ok"]
    assert (st.read, st.understood, st.skipped) == (9, 1, 8)
    assert dict(st.skipped_lines)[7] == dict(st.skipped_lines)[9] == CORRUPT_REASON
    assert dict(st.skipped_lines)[8] == "continuation line before any launcher record"
    reasons = dict(st.skipped_lines)
    assert reasons[1] == "continuation line before any launcher record"
    assert reasons[2] == reasons[4] == "timestamped line not in the launcher format"
    assert "asctime" in reasons[5]
    assert reasons[6] == "bad timestamp prefix"


def test_empty_message_and_parse_errors():
    rec = parse_launcher_line("2026-06-29 14:36:20,501 - __main__ - INFO -")
    assert rec.message == ""
    with pytest.raises(LauncherParseError):
        parse_launcher_line('I0629 14:35:43.131877       1 x.go:1] "klog"')


def test_parse_launcher_text_is_the_readers_step_for_one_line():
    """One line with or without the kubelet's prefix, as iter_launcher_log reads it."""
    line = "2026-06-29 14:36:20,501 - __main__ - INFO - Accepted request to create vLLM instance with id=X"
    prefixed = "2026-06-29T14:36:20.5019876Z " + line
    assert parse_launcher_text(line, 3) == parse_launcher_line(line, 3)
    rec = parse_launcher_text(prefixed, 4)
    assert (rec.line_no, rec.prefix_ns) == (4, parse_rfc3339_ns("2026-06-29T14:36:20.5019876Z"))
    assert rec == run([prefixed])[0][0]._replace(line_no=4)
    with pytest.raises(LauncherParseError) as bad:
        parse_launcher_text("2026-06-29T99:00:00Z " + line)
    assert bad.value.reason == "bad timestamp prefix"
    with pytest.raises(LauncherParseError) as cont:
        parse_launcher_text("2026-06-29T14:36:20.5Z Traceback (most recent call last):")
    assert cont.value.reason == NOT_A_LINE  # a continuation: no record starts there


# --------------------------------------------------------------------------- facts_only

_PIECES = [
    '2026-06-29 15:26:24,764 - uvicorn.access - INFO - 10.244.0.12:33626 - "GET /v2/vllm/instances HTTP/1.1" 200',
    f"2026-06-29 15:26:24,768 - __main__ - INFO - Accepted request to create vLLM instance with id={IID}",
    f'2026-06-29 15:26:24,780 - uvicorn.access - INFO - 10.244.0.12:45710 - "PUT /v2/vllm/instances/{IID} HTTP/1.1" 201',
    f'2026-06-29 15:26:24,781 - uvicorn.access - INFO - 10.244.0.12:45710 - "PUT /v2/vllm/instances/{IID}/log HTTP/1.1" 200',
    '2026-06-29 15:26:24,782 - uvicorn.access - INFO - 1.2.3.4:1 - "PUT /other HTTP/1.1" 200',
    f"2026-06-29 15:26:24,783 - x - INFO - not first: Accepted request to create vLLM instance with id={IID}",
    "2026-06-29 15:26:24,784 - __main__ - INFO - Accepted request to create vLLM instance with id=",
    "2026-06-29 15:26:21,676 - uvicorn.error - INFO - Started server process [1]",
    "2026-06-29 15:26:21,676 - uvicorn.error - INFO - ",
    "2026-06-29 15:26:21,676 - uvicorn.error - INFO -",
    "2026-06-29 15:26:21,676 - uvicorn error - INFO - logger with a space",
    "2026-06-29 15:26:21,676 -  - INFO - empty logger",
    "2026-06-29 15:26:21,676 - x - INFO",
    "2026-02-29 15:26:21,676 - x - INFO - no such day",
    "2028-02-29 15:26:21,676 - x - INFO - a leap day",
    "2026-04-31 15:26:21,676 - x - INFO - no such day",
    "2026-12-31 23:59:60,999 - x - INFO - leap second",
    "2026-12-31 24:00:00,000 - x - INFO - bad hour",
    "2026-13-01 00:00:00,000 - x - INFO - bad month",
    "2026-06-29 15:26:21.676 - x - INFO - dot not comma",
    "2026-06-29 15:35:47,250 INFO launcher_pod_notifier: other container",
    "2026-06-29T15:26:24.764000000Z 2026-06-29 15:26:24,764 - x - INFO - prefixed",
    f"2026-06-29T15:26:24.764000000Z 2026-06-29 15:26:24,768 - __main__ - INFO - Accepted request to create vLLM instance with id={IID}",
    "2026-06-29Tjunk line",
    'INFO:     10.131.6.2:34340 - "GET /health HTTP/1.1" 200 OK',
    "Traceback (most recent call last):",
    '  File "x.py", line 1, in <module>',
    "",
    "   ",
    "2026-06-29 15:26:21,676 - x - INFO - caf\xe9 \u2603",
    "2026-06-29 15:26:21,676 - \xe9\u2603 - INFO - unicode logger",
    "2026-06-29 15:26:21,676 - x - INFO - " + "long " * 40,
    # facts cut short: skipped in every mode (a cut at the file's end is the file's)
    "2026-06-29 15:26:24,768 - __main__ - INFO - Accepted request",
    "2026-06-29 15:26:24,768 - launcher - INFO -",
    f'2026-06-29 15:26:24,780 - uvicorn.access - INFO - 10.244.0.12:45710 - "PUT /v2/vllm/instances/{IID[:9]}',
    f"2026-06-29 15:26:24,768 - __main__ - INFO - Accepted request to create vLLM instance with id={IID[:9]}",
    "2026-06-29 15:26:24,780 - uvicorn.access - INFO - 10.244.0.1",
    '2026-06-29 15:26:24,780 - uvicorn.access - INFO - 10.244.0.1:1 - "GET /v2/vllm/ins',
    "2026-06-29 15:26:24,7",
]
_RAW_PIECES = [
    b"2026-06-29 15:26:21,676 - x - INFO - bad \xff\xfe utf-8",
    b"\xff\xfe",
    b"2026-06-29 15:26:21,676 - x\xa0y - INFO - z",
]


def _facts_only_case(lines: list[bytes], eol: bytes, final_eol: bool) -> None:
    import io

    data = eol.join(lines) + (eol if final_eol else b"")
    st_all, st_few = SourceStats("x"), SourceStats("x")
    every = list(iter_launcher_log(io.BytesIO(data).readlines(), st_all))
    few = list(iter_launcher_log(io.BytesIO(data), st_few, facts_only=True))
    from fma_otel.facts import launcher_fact
    from fma_otel.sources.launcher_log import _is_fact

    # a file's last line without its end was cut: the lines cannot tell
    cut = [n for n, why in st_few.skipped_lines if why == CUT_AT_END]
    assert cut in ([], [st_few.read]) and not (cut and final_eol)
    every = [r for r in every if r.line_no not in cut]
    assert few == [r for r in every if _is_fact(r)]
    assert [r for r in every if launcher_fact("l", r) is not None] == [
        r for r in few if launcher_fact("l", r) is not None
    ]
    assert st_few.read == st_all.read
    assert st_few.read == st_few.understood + st_few.ignored + st_few.skipped
    # lines passed over are not checked (but for the cut one)
    assert st_few.skipped <= st_all.skipped + len(cut)
    assert st_all.read == st_all.understood + st_all.skipped
    # given as lines, the same, but for the last line when the file says it was cut
    st_lines = SourceStats("x")
    given = io.BytesIO(data).readlines()
    assert list(iter_launcher_log(given[: len(given) - len(cut)], st_lines, facts_only=True)) == few
    for n in cut:
        st_lines.read += 1
        st_lines.skip(n, CUT_AT_END)
    assert st_lines == st_few


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_facts_only_is_the_subset_with_the_same_stats(seed: int, eol: bytes) -> None:
    import random

    pieces = [p.encode() for p in _PIECES] + _RAW_PIECES
    rng = random.Random(seed * 7 + len(eol))
    for _ in range(40):
        lines = [rng.choice(pieces) for _ in range(rng.randrange(0, 60))]
        _facts_only_case(lines, eol, rng.random() < 0.7)
    _facts_only_case(pieces, eol, True)
    _facts_only_case(pieces[::-1], eol, False)


def test_facts_only_keeps_continuations_of_kept_records() -> None:
    import io

    tail = f"2026-12-02 16:07:36,000 - __main__ - INFO - Accepted request to create vLLM instance with id={IID}\n  more\n\n"
    data = b"".join(OBSERVED) + tail.encode()
    st = SourceStats("x")
    recs = list(iter_launcher_log(io.BytesIO(data), st, facts_only=True))
    assert [r.message.startswith("Accepted") or r.access[1] == "PUT" for r in recs] == [True] * len(recs)
    assert recs[-1].message.endswith("\n  more\n")


@pytest.mark.parametrize("block", [1, 13, 200])
def test_facts_only_reads_the_same_at_any_block_size(monkeypatch, block: int) -> None:
    """A file is searched in blocks (``lines.read_lines``): block edges anywhere, in a
    line, a record's continuation lines or a CRLF, change nothing."""
    import random

    from fma_otel import lines

    monkeypatch.setattr(lines, "BLOCK_BYTES", block)
    pieces = [p.encode() for p in _PIECES] + _RAW_PIECES
    rng = random.Random(block)
    for eol in (b"\n", b"\r\n"):
        for _ in range(10):
            _facts_only_case(
                [rng.choice(pieces) for _ in range(rng.randrange(0, 60))], eol, rng.random() < 0.7
            )
        _facts_only_case([x.rstrip(b"\n") for x in OBSERVED], eol, True)


# --------------------------------------------------------------------------- at_once


def _at_once_case(lines: list[bytes]) -> None:
    """``at_once`` gives the records of the joined reading, each without its continuation
    lines, each before the line after its own is read, with the same stats."""
    st_all, st_once = SourceStats("x"), SourceStats("x")
    every = list(iter_launcher_log(lines, st_all))
    pulled = 0

    def arriving():
        nonlocal pulled
        for line in lines:
            pulled += 1
            yield line

    once = []
    for rec in iter_launcher_log(arriving(), st_once, at_once=True):
        assert pulled == rec.line_no  # out before the next line is asked for
        once.append(rec)
    assert once == [r._replace(message=r.message.split("\n", 1)[0]) for r in every]
    assert st_once == st_all


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_at_once_yields_each_record_as_its_line_arrives(seed: int) -> None:
    import random

    pieces = [p.encode() + b"\n" for p in _PIECES] + [p + b"\n" for p in _RAW_PIECES]
    rng = random.Random(seed)
    for _ in range(40):
        _at_once_case([rng.choice(pieces) for _ in range(rng.randrange(0, 60))])
    _at_once_case(pieces)
    _at_once_case(OBSERVED)


def test_at_once_keeps_the_boot_line_and_reads_a_traceback_unjoined() -> None:
    lines = [
        b"2026-06-29 14:36:19,000 - uvicorn.error - INFO - Application startup complete.",
        b"2026-06-29 14:36:20,600 - __main__ - ERROR - Failed to create vLLM instance abc: boom",
        b"Traceback (most recent call last):",
        b"RuntimeError: boom",
        b'INFO:     10.131.6.2:34340 - "GET /health HTTP/1.1" 200 OK',
        b"  a continuation after a line that ends the record",
    ]
    st = SourceStats("launcher")
    recs = list(iter_launcher_log(lines, st, at_once=True))
    assert [(r.line_no, r.message) for r in recs] == [
        (1, "Application startup complete."),
        (2, "Failed to create vLLM instance abc: boom"),
    ]
    assert (st.read, st.understood, st.skipped) == (6, 4, 2)
    assert [why for _, why in st.skipped_lines] == [
        "uvicorn CLI line without a time (no asctime)",
        "continuation line before any launcher record",
    ]


# --------------------------------------------------------------------------- facts cut or hidden

_SAMPLE_LOG = "launcher-launcher-example-4lgw5.log"
_ACC, _PUT = 29, 32  # the create receipt's and the PUT's line numbers in that log


def _mutated(line_no: int, change, *, end: bool = False) -> bytes:
    """The sample launcher log with one line changed; ``end``: the file ends inside it."""
    from fma_otel.bridge import sample_dir

    lines = (sample_dir() / _SAMPLE_LOG).read_bytes().split(b"\n")
    assert b"Accepted request" in lines[_ACC - 1] and b'"PUT ' in lines[_PUT - 1]
    lines[line_no - 1] = change(lines[line_no - 1])
    return b"\n".join(lines[:line_no] if end else lines)


def _cut(n: int):
    return lambda line: line[:n]


def _insert(at: int, junk: bytes):
    return lambda line: line[:at] + junk + line[at:]


@pytest.mark.parametrize(
    ("line_no", "change", "end", "why"),
    [
        # (c) a create receipt cut inside its text (60 characters), or with no id
        (_ACC, _cut(60), False, CUT_ACCEPTED),
        (_ACC, _cut(44 + 49), False, NO_ID),
        # (c) a PUT access line cut inside its request
        (_PUT, _cut(110), False, BAD_PUT),
        (_PUT, _cut(-8), False, BAD_PUT),  # inside its status
        # (b) the file ends inside the line: mid-id, in the text, in the header
        (_ACC, _cut(100), True, CUT_AT_END),
        (_ACC, _cut(60), True, CUT_ACCEPTED),
        (_ACC, _cut(20), True, CUT_AT_END),
        (_PUT, _cut(60), True, CUT_AT_END),  # cut before its method: a PUT as well as any
        (_PUT, _cut(110), True, BAD_PUT),
        # (a) a NUL or invalid UTF-8 that hides the fact's text from the search
        (_ACC, _insert(47, b"\x00"), False, CORRUPT_REASON),
        (_PUT, lambda line: line.replace(b'"PUT', b'"P\xffUT'), False, CORRUPT_REASON),
        (_PUT, lambda line: line.replace(b'"PUT', b'"PUT\x00'), True, CORRUPT_REASON),
        (11, _insert(47, b"\x00"), False, CORRUPT_REASON),  # no fact there: still corrupt
    ],
)
def test_a_fact_cut_or_hidden_is_skipped_not_passed_over(line_no, change, end, why) -> None:
    """Cut or corrupted, the create receipt and the PUT line were passed over unsaid
    ("skipped 0", exit 0 under ``--strict``: fma.launcher.create_instance and
    fma.instance.create gone): each is skipped, at its line, with why, and read the same
    way in full and facts-only reading."""
    import io

    data = _mutated(line_no, change, end=end)
    for facts_only in (True, False):
        st = SourceStats("x")
        recs = list(iter_launcher_log(io.BytesIO(data), st, facts_only=facts_only))
        # (reading every line, a cut header is skipped for its own reason: as any such line)
        assert st.skipped_lines[0][0] == line_no and len(st.skipped_lines) == 1
        assert st.skipped_lines[0][1] == why or (not facts_only and why == CUT_AT_END)
        assert line_no not in [r.line_no for r in recs]
        assert st.read == st.understood + st.ignored + st.skipped


@pytest.mark.parametrize(
    ("line_no", "change"),
    [
        (_ACC, _cut(None)),  # the whole line, only its line end missing
        (_PUT, _cut(None)),
        (_ACC + 1, _cut(60)),  # a line that is no fact, cut in its text
        (_ACC + 2, _cut(60)),
        (_PUT + 1, _cut(90)),  # an access line of a GET, cut
    ],
)
def test_the_last_line_without_its_end_is_read_when_whole_or_no_fact(line_no, change) -> None:
    import io

    data = _mutated(line_no, change, end=True)
    st = SourceStats("x")
    recs = list(iter_launcher_log(io.BytesIO(data), st, facts_only=True))
    assert st.skipped == 0 and st.read == line_no
    assert (recs[-1].line_no == line_no) == (line_no in (_ACC, _PUT))


def test_cuts_that_cannot_be_told_from_a_good_line_are_read_as_they_are() -> None:
    """Documented limits: an id cut mid-way on a line that still ends (the launcher takes
    any id), and an access line cut inside its client address (any access line may be
    cut so; facts-only reading reads none of them)."""
    import io

    from fma_otel.sources.launcher_log import accepted_create_id

    st = SourceStats("x")
    recs = list(iter_launcher_log(io.BytesIO(_mutated(_ACC, _cut(100))), st, facts_only=True))
    assert st.skipped == 0
    assert [accepted_create_id(r) for r in recs if r.line_no == _ACC] == ["IHQql8-"]
    st = SourceStats("x")
    list(iter_launcher_log(io.BytesIO(_mutated(_PUT, _cut(60))), st, facts_only=True))
    assert st.skipped == 0


def test_strict_fails_naming_a_cut_create_receipt(tmp_path, clean_otlp_env) -> None:
    """The reviewers' case end to end: line 29 cut to 60 characters, ``bridge --strict``."""
    import shutil

    from click.testing import CliRunner

    from fma_otel.bridge import sample_dir
    from fma_otel.cli import main

    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    (cap / _SAMPLE_LOG).write_bytes(_mutated(_ACC, _cut(60)))
    r = CliRunner().invoke(main, ["bridge", str(cap), "--strict", "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 1
    assert f"{_SAMPLE_LOG}:{_ACC}: skipped: {CUT_ACCEPTED}" in r.stderr
