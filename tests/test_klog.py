"""klog parser: real-shaped DPC lines (fma-reference §9.1/§9.2) and every awkward case."""

from __future__ import annotations

import io
import json

import pytest

from fma_otel.lines import CR_NOTE
from fma_otel.sources.klog import (
    KlogParseError,
    go_quote,
    go_unquote,
    iter_klog,
    parse_klog_line,
)
from fma_otel.sources.records import SourceStats
from fma_otel.timeutil import parse_rfc3339_ns

UID = "811f8932-b608-416c-8a90-589b39ed9bde"
REQ = "my-request-29-14-35-40-d45ml"
IID = "IEdwg776EvahNKWszuzCj8YN9pPtRVHTHLI6N0ABjhdki"

CREATED = (
    'I0629 14:35:43.131877       1 inference-server.go:760] "Created launcher-based server-providing pod" '
    f'worker=1 node="gpu-node-3" serverUID="{UID}" requesterName="{REQ}" name="launcher-example-7xk2p" '
    'gpus="GPU-0d1d8df2-4bc7-98fe-1d41-a5d13a5866d1" '
    'annotations={"dual-pods.llm-d.ai/instance-id":"IEdwg776EvahNKWszuzCj8YN9pPtRVHTHLI6N0ABjhdki",'
    '"dual-pods.llm-d.ai/requester":"811f8932-b608-416c-8a90-589b39ed9bde my-request-29-14-35-40-d45ml",'
    '"dual-pods.llm-d.ai/server-port":"8005","dual-pods.llm-d.ai/vllm-config":"{\\"options\\":\\"--model '
    'TinyLlama/TinyLlama-1.1B-Chat-v1.0 --enable-sleep-mode --gpu-memory-utilization 0.825 --port 8005\\",'
    '\\"gpu_uuids\\":[\\"GPU-0d1d8df2-4bc7-98fe-1d41-a5d13a5866d1\\"],\\"env_vars\\":{\\"USER\\":\\"inductor-fantasy\\",'
    '\\"VLLM_LOGGING_LEVEL\\":\\"DEBUG\\",\\"VLLM_SERVER_DEV_MODE\\":\\"1\\"},\\"annotations\\":{\\"inference-port\\":'
    '\\"8005\\",\\"isc-name\\":\\"example\\"}}"} '
    'labels={"app.kubernetes.io/component":"launcher","dual-pods.llm-d.ai/dual":"my-request-29-14-35-40-d45ml",'
    '"dual-pods.llm-d.ai/launcher-config-name":"example","dual-pods.llm-d.ai/node-name":"gpu-node-3",'
    '"dual-pods.llm-d.ai/sleeping":"true"} resourceVersion="24430188" k8sCallStartTime="2026-06-29T14:35:43.121004567Z"'
)
HTTP_CREATE = (
    'I0629 14:36:20.512345       1 inference-server.go:2251] "HTTP call done" worker=0 node="gpu-node-3" '
    f'serverUID="{UID}" requesterName="{REQ}" instanceID="{IID}" providerName="launcher-example-7xk2p" '
    f'purpose="create_instance" method="PUT" url="http://10.244.1.17:8001/v2/vllm/instances/{IID}" '
    'httpCallStartTime="2026-06-29T14:36:20.498765432Z" latencySecs=0.013576543 statusCode=201 err=null'
)
HTTP_REFUSED = (
    'I0629 14:36:20.514002       1 inference-server.go:2251] "HTTP call done" worker=0 node="gpu-node-3" '
    f'serverUID="{UID}" requesterName="{REQ}" instanceID="{IID}" providerName="launcher-example-7xk2p" '
    'purpose="query_sleeping" method="GET" url="http://10.244.1.17:8005/is_sleeping" '
    'httpCallStartTime="2026-06-29T14:36:20.512987Z" latencySecs=0.000998765 statusCode=0 '
    'err="failed to do HTTP GET \\"http://10.244.1.17:8005/is_sleeping\\": Get \\"http://10.244.1.17:8005/is_sleeping\\": '
    'dial tcp 10.244.1.17:8005: connect: connection refused"'
)
TRANSIENT = (
    'I0629 14:36:20.514100       1 inference-server.go:111] "Processing node local item suffered transient error, will retry" '
    f'worker=0 node="gpu-node-3" item={{"UID":"{UID}","RequesterName":"{REQ}"}} '
    'err="failed to do HTTP GET \\"http://10.244.1.17:8005/is_sleeping\\": connection refused" retryAfter="5s"'
)
RELAYED = (
    'I0629 14:36:45.563150       1 inference-server.go:595] "Successfully relayed the readiness" worker=0 '
    f'node="gpu-node-3" serverUID="{UID}" requesterName="{REQ}" instanceID="{IID}" providerName="launcher-example-7xk2p" '
    'readiness="ready" url="http://10.244.2.9:8081/v1/become-ready" requesterCreateTime="2026-06-29T14:35:40Z"'
)
REQUESTER_GPU = (
    'I1121 23:22:48.142001       1 server.go:84] "Got GPU UUIDs" logger="spi-server" '
    'uuids=["GPU-0d1d8df2-4bc7-98fe-1d41-a5d13a5866d1"]'
)
TAIL_BLOCK = [
    '2026-09-03T19:49:04.3398479Z I0903 19:44:11.116529       1 instance-data.go:39] "Fetched tail of log of instance" '
    'worker=0 node="pokprod-b93r39s1" serverUID="9ad23777-576e-4d26-bd5b-0a063ded0277" '
    'instanceID="IzdVruhRecFYZ8OosbTkiuzvGfqc9cgIc-Y3aMjpx3xwi" tail=<',
    "2026-09-03T19:49:04.3399647Z \tindex, uuid, memory.used [MiB]",
    "2026-09-03T19:49:04.3399961Z \t0, GPU-a03ba92b-28df-07c5-63c2-0580029282cd, 76587 MiB",
    "2026-09-03T19:49:04.3399990Z  > after=true",
]


def run(lines, **kw):
    """Parse ``lines`` given as lines, and as a binary file (read with a bound per line),
    which must give the same records and counts."""
    raw = [(x + "\n").encode() if isinstance(x, str) else x for x in lines]
    stats = SourceStats("dpc")
    recs = list(iter_klog(raw, stats, **kw))
    if all(x.endswith(b"\n") for x in raw[:-1]):
        as_file = SourceStats("dpc")
        assert list(iter_klog(io.BytesIO(b"".join(raw)), as_file, **kw)) == recs
        assert as_file == stats
    return recs, stats


# --------------------------------------------------------------------------- header & values


def test_header_fields_and_time_of_day():
    r = parse_klog_line(HTTP_CREATE, 7)
    assert r is not None
    assert (r.line_no, r.level, r.month, r.day, r.pid, r.file, r.src_line) == (
        7,
        "I",
        6,
        29,
        1,
        "inference-server.go",
        2251,
    )
    assert r.tod_us == ((14 * 60 + 36) * 60 + 20) * 1_000_000 + 512345
    assert r.msg == "HTTP call done"
    assert r.prefix_ns is None


def test_http_call_done_values_are_typed():
    r = parse_klog_line(HTTP_CREATE)
    assert r.get("worker") == 0
    assert r.get("purpose") == "create_instance"
    assert r.get("latencySecs") == pytest.approx(0.013576543)
    assert r.get("statusCode") == 201 and isinstance(r.get("statusCode"), int)
    assert r.get("err", "missing") is None
    assert r.get("httpCallStartTime") == "2026-06-29T14:36:20.498765432Z"
    assert [k for k, _ in r.kv][:6] == [
        "worker",
        "node",
        "serverUID",
        "requesterName",
        "instanceID",
        "providerName",
    ]


def test_err_with_escaped_quotes():
    r = parse_klog_line(HTTP_REFUSED)
    assert r.get("statusCode") == 0
    assert r.get("err") == (
        'failed to do HTTP GET "http://10.244.1.17:8005/is_sleeping": Get "http://10.244.1.17:8005/is_sleeping": '
        "dial tcp 10.244.1.17:8005: connect: connection refused"
    )


def test_annotations_json_with_nested_escaped_vllm_config():
    r = parse_klog_line(CREATED)
    ann = r.get("annotations")
    assert isinstance(ann, dict)
    assert ann["dual-pods.llm-d.ai/requester"] == f"{UID} {REQ}"
    cfg = json.loads(ann["dual-pods.llm-d.ai/vllm-config"])
    assert cfg["env_vars"]["USER"] == "inductor-fantasy"
    assert "--port 8005" in cfg["options"]
    assert r.get("labels")["dual-pods.llm-d.ai/sleeping"] == "true"
    assert r.get("resourceVersion") == "24430188"
    assert r.get("k8sCallStartTime") == "2026-06-29T14:35:43.121004567Z"


def test_item_json_and_json_array():
    r = parse_klog_line(TRANSIENT)
    assert r.get("item") == {"UID": UID, "RequesterName": REQ}
    assert r.get("retryAfter") == "5s"
    g = parse_klog_line(REQUESTER_GPU)
    assert g.get("logger") == "spi-server"
    assert g.get("uuids") == ["GPU-0d1d8df2-4bc7-98fe-1d41-a5d13a5866d1"]


def test_json_strings_with_spaces_and_quotes_and_nested_values():
    line = (
        'I0629 14:36:45.560317       1 x.go:1] "m" status={"Errors":["a \\"quoted\\" b=c d","e f"]} '
        'n=-1.5e-3 obj={"a":{"b":[1,2,{"c":null}]}} t=true'
    )
    r = parse_klog_line(line)
    assert r.get("status") == {"Errors": ['a "quoted" b=c d', "e f"]}
    assert r.get("n") == pytest.approx(-0.0015)
    assert r.get("obj") == {"a": {"b": [1, 2, {"c": None}]}}
    assert r.get("t") is True


def test_pairs_read_the_same_before_and_after_a_json_value():
    """Simple pairs are cut out by one expression up to a JSON value, which is read on its
    own, then the expression goes on: each value reads the same wherever it is (a
    leading-zero number, a bad escape kept as written, an empty string, a constant), and
    the many JSON values of one line all come."""
    simple = 's=01 q="bad\\q" e="" t=false f=2.5 u="a\\"b"'
    line = f'I0629 14:36:45.560317       1 x.go:1] "m" {simple} j={{"a":1}} {simple} k=[1] {simple}'
    r = parse_klog_line(line)
    assert r.get_all("s") == [1, 1, 1]
    assert r.get_all("q") == ['"bad\\q"'] * 3
    assert r.get_all("e") == [""] * 3
    assert r.get_all("t") == [False] * 3
    assert r.get_all("f") == [2.5] * 3
    assert r.get_all("u") == ['a"b'] * 3
    assert r.get("j") == {"a": 1} and r.get("k") == [1]
    many = " ".join(f'k{i}={{"i":{i}}} v{i}="x"' for i in range(2000))
    r = parse_klog_line(f'I0629 14:36:45.560317       1 x.go:1] "m" {many}')
    assert len(r.kv) == 4000 and r.get("k1999") == {"i": 1999} and r.get("v1999") == "x"
    assert not r.truncated


def test_repeated_keys_are_kept_in_order():
    line = (
        'I0629 14:40:00.000001       1 inference-server.go:146] "Launcher pod deleted, cleaning up launcher data" '
        'worker=1 node="gpu-node-3" launcherPod="launcher-x" node="gpu-node-4"'
    )
    r = parse_klog_line(line)
    assert r.get_all("node") == ["gpu-node-3", "gpu-node-4"]
    assert r.get("node") == "gpu-node-4"
    assert [k for k, _ in r.kv] == ["worker", "node", "launcherPod", "node"]


def test_go_escapes_in_message_and_values():
    line = 'E0101 00:00:00.000000       1 a.go:2] "bell\\a tab\\t \\u00e9 \\U0001F600 \\x41" b="\\xe2\\x82\\xac \\xff \\101 \\\\ \\v"'
    r = parse_klog_line(line)
    assert r.level == "E"
    assert r.msg == "bell\a tab\t \u00e9 \U0001f600 A"
    assert r.get("b") == "€ \ufffd A \\ \v"


def test_go_unquote_and_quote_round_trip():
    for s in [
        "plain",
        'q"uote',
        "back\\slash",
        "nl\nand\ttab",
        "bell\a\b\f\r\v",
        "é ü",
        "\x01\x7f",
        "\U0001f600",
    ]:
        assert go_unquote(go_quote(s)) == s
    assert go_quote("HTTP call done") == '"HTTP call done"'
    for bad in ['"\\q"', '"\\x4"', '"\\ud800"', '"\\U00110000"', '"abc\\"', "noquotes"]:
        with pytest.raises(ValueError):
            go_unquote(bad)


def test_byte_string_value_percent_plus_q():
    line = 'I0629 14:35:43.000000       1 a.go:3] "Computed nominalHash" modifiedJSON="{\\"a\\":\\"\\u00e9\\"}\\n" x=1'
    r = parse_klog_line(line)
    assert r.get("modifiedJSON") == '{"a":"é"}\n'
    assert r.get("x") == 1


def test_unparseable_value_is_kept_raw_and_parser_resyncs():
    line = 'I0629 14:35:43.000000       1 a.go:3] "m" a=&{Name:foo Size:3} b="ok" c={not json} d=2'
    r = parse_klog_line(line)
    assert r.get("a") == "&{Name:foo Size:3}"
    assert r.get("b") == "ok"
    assert r.get("c") == "{not json}"
    assert r.get("d") == 2


def test_unstructured_infof_line_is_understood():
    r = parse_klog_line("W0629 14:35:43.000000       1 reflector.go:561] failed to list *v1.Pod: timeout")
    assert r.level == "W" and r.msg == "failed to list *v1.Pod: timeout" and r.kv == ()


@pytest.mark.parametrize(
    "line, reason",
    [
        ("hello world", "not a klog line"),
        ("I0629 14:35:43.131877 x.go:1] no pid", "not a klog line"),
        ('I1329 14:35:43.131877       1 x.go:1] "bad month"', "impossible"),
        ('I0629 25:35:43.131877       1 x.go:1] "bad hour"', "impossible"),
        ('I0629 14:35:61.000000       1 x.go:1] "bad second"', "impossible"),
        ('I0629 14:35:43.131877       1 x.go:1] "cut in the mess', "cut inside the message"),
        ('2026-13-03T19:49:03.7972878Z I0903 19:38:46.319013       1 x.go:1] "m"', "bad timestamp prefix"),
    ],
)
def test_not_klog_raises_with_reason(line, reason):
    with pytest.raises(KlogParseError) as ei:
        parse_klog_line(line)
    assert reason in ei.value.reason


def test_a_leap_second_and_the_microseconds_are_read() -> None:
    r = parse_klog_line('I0629 23:59:60.000042       1 x.go:1] "leap"')
    assert r is not None and r.tod_us == ((23 * 60 + 59) * 60 + 60) * 1_000_000 + 42


def test_blank_line_is_none():
    assert parse_klog_line("   \n") is None


# --------------------------------------------------------------------------- prefix & time


def test_timestamps_prefix_gives_prefix_ns_not_the_instant():
    line = "2026-09-03T19:49:03.7972878Z " + HTTP_CREATE
    r = parse_klog_line(line)
    assert r.prefix_ns == parse_rfc3339_ns("2026-09-03T19:49:03.7972878Z")
    assert r.prefix_ns % 1_000_000_000 == 797287800
    assert r.tod_us == parse_klog_line(HTTP_CREATE).tod_us


def test_rfc3339_parser():
    assert parse_rfc3339_ns("2000-01-01T00:00:00Z") == 946_684_800 * 10**9
    assert parse_rfc3339_ns("2000-01-01T00:00:01.000000001Z") == 946_684_801_000_000_001
    assert parse_rfc3339_ns("2026-06-29T14:35:40Z") == 1782743740 * 10**9
    assert parse_rfc3339_ns("2026-06-29T14:36:20.4987654Z") == 1782743780 * 10**9 + 498765400
    assert parse_rfc3339_ns("2026-06-29T16:35:40+02:00") == parse_rfc3339_ns("2026-06-29T14:35:40Z")
    assert parse_rfc3339_ns("2026-06-29T14:35:40.1234567891Z") == 1782743740 * 10**9 + 123456789
    for bad in [
        "2026-02-30T00:00:00Z",
        "2026-06-29 14:35:40Z",
        "2026-06-29T14:35:40",
        "2026-06-29T14:35:40.Z",
        "x",
    ]:
        with pytest.raises(ValueError):
            parse_rfc3339_ns(bad)


# --------------------------------------------------------------------------- stream


def test_stream_of_reference_timeline_counts():
    recs, st = run([CREATED, HTTP_CREATE, HTTP_REFUSED, TRANSIENT, RELAYED])
    assert [r.msg for r in recs] == [
        "Created launcher-based server-providing pod",
        "HTTP call done",
        "HTTP call done",
        "Processing node local item suffered transient error, will retry",
        "Successfully relayed the readiness",
    ]
    assert [r.line_no for r in recs] == [1, 2, 3, 4, 5]
    assert (st.read, st.understood, st.skipped) == (5, 5, 0)


def test_multiline_block_with_timestamps_prefix_and_pairs_after_it():
    recs, st = run([*TAIL_BLOCK, RELAYED])
    assert len(recs) == 2
    r = recs[0]
    assert r.msg == "Fetched tail of log of instance"
    assert (
        r.get("tail")
        == "index, uuid, memory.used [MiB]\n0, GPU-a03ba92b-28df-07c5-63c2-0580029282cd, 76587 MiB"
    )
    assert r.get("after") is True
    assert r.prefix_ns == parse_rfc3339_ns("2026-09-03T19:49:04.3398479Z")
    assert (st.read, st.understood, st.skipped) == (5, 5, 0)


def test_block_without_prefix_and_two_blocks_on_one_record():
    lines = ['I0629 14:00:00.000000       1 a.go:1] "m" a=<', "\tx", " > b=<", "\ty", "\tz", " >"]
    recs, st = run(lines)
    assert recs[0].kv == (("a", "x"), ("b", "y\nz"))
    assert (st.read, st.understood, st.skipped) == (6, 6, 0)


def test_unterminated_block_keeps_record_drops_value():
    lines = ['I0629 14:00:00.000000       1 a.go:1] "m" k=1 a=<', "\tx", RELAYED]
    recs, st = run(lines)
    assert recs[0].kv == (("k", 1),)
    assert recs[1].msg == "Successfully relayed the readiness"
    assert (st.read, st.understood, st.skipped) == (3, 3, 0)
    recs, _ = run(lines[:2])  # cut by the end of the file
    assert recs[0].kv == (("k", 1),)


def test_continuation_outside_block_and_garbage_are_skipped_with_reasons():
    recs, st = run(["\torphan", "panic: runtime error", "", RELAYED, " >"])
    assert len(recs) == 1
    assert (st.read, st.understood, st.skipped) == (5, 1, 4)
    reasons = dict(st.skipped_lines)
    assert reasons[1] == "continuation line outside a multi-line value"
    assert reasons[2] == "not a klog line"
    assert reasons[3] == "blank line"
    assert reasons[5] == "continuation line outside a multi-line value"


@pytest.mark.parametrize("cut", [40, 65, 120, 260, 330, 420, len(HTTP_CREATE) - 3])
def test_truncated_line_keeps_complete_pairs(cut):
    full = parse_klog_line(HTTP_CREATE)
    recs, st = run([HTTP_CREATE[:cut]])
    if cut < HTTP_CREATE.index('"HTTP call done"'):
        assert recs == [] and st.skipped_lines == [(1, "not a klog line")]  # cut in the header
        return
    if cut < HTTP_CREATE.index('"HTTP call done"') + len('"HTTP call done"'):
        assert recs == [] and st.skipped_lines == [(1, "line cut inside the message")]
        return
    assert len(recs) == 1 and st.understood == 1 and st.skipped == 0
    got = recs[0].kv
    assert got == full.kv[: len(got)]  # a prefix of the true pairs: nothing cut is kept
    assert len(got) < len(full.kv)


def test_truncated_inside_json_value_drops_it():
    line = CREATED[: CREATED.index("vllm-config") + 30]
    r = parse_klog_line(line)
    assert r.get("gpus") == "GPU-0d1d8df2-4bc7-98fe-1d41-a5d13a5866d1"
    assert r.get("annotations") is None
    assert r.msg == "Created launcher-based server-providing pod"


@pytest.mark.parametrize("junk", [b"\xff\xfe", b"\x00", b"\xed\xa0\x80"])
def test_a_parsed_line_with_a_nul_or_non_utf8_byte_is_skipped_naming_it(junk: bytes):
    """klog quotes such bytes away, so they are corruption: read with replacement
    characters, a key or value the bridge uses was misread without a word (a NUL inside
    ``purpose=`` lost the get_gpu_uuids bound).  The lines around it are still read."""
    good = b'I0629 14:00:00.000000       1 a.go:1] "m" b="ok"\n'
    bad = b'I0629 14:00:00.000000       1 a.go:1] "m" raw={"a":"' + junk + b'"} b="ok"\n'
    recs, st = run([good, bad, good])
    assert [r.line_no for r in recs] == [1, 3]
    assert (st.understood, st.skipped) == (2, 1)
    assert st.skipped_lines == [
        (2, "NUL byte or invalid UTF-8 (neither log writes them raw): a corrupted line")
    ]


def test_crlf_line_endings():
    recs, _ = run([(RELAYED + "\r\n").encode()])
    assert recs[0].get("requesterCreateTime") == "2026-06-29T14:35:40Z"


def test_huge_value_line():
    big = {"k": "x" * 500_000, "q": 'a "b" c ' * 10_000}
    line = (
        'I0629 14:00:00.000000       1 a.go:1] "m" big='
        + json.dumps(big, separators=(",", ":"))
        + ' s="'
        + "y" * 300_000
        + '" n=3'
    )
    recs, st = run([line])
    assert recs[0].get("big") == big
    assert len(recs[0].get("s")) == 300_000
    assert recs[0].get("n") == 3


# --------------------------------------------------------------------------- prefilter


def test_prefilter_parses_only_wanted_messages_and_counts_the_rest():
    lines = [CREATED, HTTP_CREATE, HTTP_REFUSED, *TAIL_BLOCK, TRANSIENT, "not klog", RELAYED]
    recs, st = run(lines, messages=frozenset({"HTTP call done", "Successfully relayed the readiness"}))
    assert [r.msg for r in recs] == ["HTTP call done", "HTTP call done", "Successfully relayed the readiness"]
    assert [r.line_no for r in recs] == [2, 3, 10]
    assert recs[1].get("err").startswith('failed to do HTTP GET "http')
    # ignored lines (the ignored record's block lines and garbage too) are not read at all
    assert (st.read, st.understood, st.ignored, st.skipped) == (10, 3, 7, 0)
    assert st.skipped_lines == []


def test_prefilter_matches_messages_with_escapes_and_block_records():
    lines = [
        'I0629 14:00:00.000000       1 a.go:1] "say \\"hi\\"" k=1',
        *TAIL_BLOCK,
        'I0629 14:00:00.000000       1 a.go:1] "other" k=2',
    ]
    recs, st = run(lines, messages=frozenset({'say "hi"', "Fetched tail of log of instance"}))
    assert [r.msg for r in recs] == ['say "hi"', "Fetched tail of log of instance"]
    assert recs[1].get("after") is True
    assert (st.read, st.understood, st.ignored, st.skipped) == (6, 5, 1, 0)


def test_prefilter_contains_narrows_by_raw_substring():
    recs, st = run(
        [HTTP_CREATE, HTTP_REFUSED, RELAYED],
        messages=frozenset({"HTTP call done", "Successfully relayed the readiness"}),
        contains={"HTTP call done": ("purpose", ("create_instance", "wake"))},
    )
    assert [(r.msg, r.get("purpose")) for r in recs] == [
        ("HTTP call done", "create_instance"),
        ("Successfully relayed the readiness", None),
    ]
    assert (st.read, st.understood, st.ignored) == (3, 2, 1)


def test_prefilter_keeps_a_wanted_line_cut_before_the_narrowing_field():
    """An "HTTP call done" line cut before its ``purpose`` cannot be told apart from a
    wanted one: it is parsed (and its record says it was cut), never passed over unread."""
    cut = HTTP_CREATE[: HTTP_CREATE.index(" purpose=")] + ' url="http://10.244'
    recs, st = run(
        [cut, HTTP_REFUSED],
        messages=frozenset({"HTTP call done"}),
        contains={"HTTP call done": ("purpose", ("create_instance",))},
    )
    assert [(r.line_no, r.get("purpose"), r.truncated) for r in recs] == [(1, None, True)]
    assert (st.read, st.understood, st.ignored, st.skipped) == (2, 1, 1, 0)


def test_prefilter_search_passes_over_a_narrowed_message_only_where_the_test_would():
    """The block search skips a narrowed message's lines whose field holds a whole unwanted
    value, and finds the rest (a wanted value, the field missing, cut inside its value, a
    wanted value in either copy of a repeated field: the prefilter only says "maybe", and
    the record's last copy is the one a fact reads): the file read gives the records and
    counts of the line-by-line test (``run`` compares the two)."""
    purpose = HTTP_CREATE.index(' purpose="')
    head, tail = HTTP_CREATE[:purpose], HTTP_CREATE[purpose:]
    lines = [
        HTTP_CREATE,  # wanted value
        HTTP_CREATE.replace('purpose="create_instance"', 'purpose="sleep"'),  # unwanted value
        head,  # the field missing (cut before it)
        head + ' purpose="create_ins',  # cut inside the value
        head + ' purpose="sleep"' + tail,  # unwanted first, wanted later
        head + ' purpose="wake"' + tail.replace('purpose="create_instance"', 'purpose="sleep"'),
        RELAYED,
    ]
    recs, st = run(
        lines,
        messages=frozenset({"HTTP call done", "Successfully relayed the readiness"}),
        contains={"HTTP call done": ("purpose", ("create_instance", "wake"))},
    )
    assert [(r.line_no, r.get_all("purpose"), r.truncated) for r in recs] == [
        (1, ["create_instance"], False),
        (3, [], False),
        (4, [], True),
        (5, ["sleep", "create_instance"], False),
        (6, ["wake", "sleep"], False),
        (7, [], False),
    ]
    assert (st.read, st.understood, st.ignored, st.skipped) == (7, 6, 1, 0)


def _list_call(launcher: str, t: str) -> str:
    return (
        f'I0629 14:00:{t}.000000       1 inference-server.go:2251] "HTTP call done" worker=0 '
        f'launcherPod="{launcher}" purpose="list_instances" method="GET" '
        f'httpCallStartTime="2026-06-29T14:00:{t}.000000000Z" latencySecs=0.002 statusCode=200 err=null'
    )


@pytest.mark.parametrize("block", [1, 64, 4096])
def test_prefilter_first_by_keeps_the_first_line_per_value_of_a_field(block: int, monkeypatch) -> None:
    """The DPC polls each launcher's ``list_instances`` for ever; only the first call to
    each launcher bounds an instant, so later ones are passed over unread (counted as
    ignored).  A line that lacks the field (cut short) stays wanted, as for the narrowing."""
    import fma_otel.lines as lines_mod

    monkeypatch.setattr(lines_mod, "BLOCK_BYTES", block, raising=False)
    cut = _list_call("l-b", "05")[: _list_call("l-b", "05").index(" launcherPod=")]
    lines = [_list_call("l-a", "01"), _list_call("l-b", "02"), _list_call("l-a", "03"), cut, HTTP_CREATE]
    lines += [_list_call("l-b", "06")]
    recs, st = run(
        lines,
        messages=frozenset({"HTTP call done"}),
        contains={
            "HTTP call done": (
                "purpose",
                ("list_instances", "create_instance"),
                {"list_instances": "launcherPod"},
            )
        },
    )
    assert [(r.line_no, r.get("launcherPod"), r.get("purpose")) for r in recs] == [
        (1, "l-a", "list_instances"),
        (2, "l-b", "list_instances"),
        (4, None, None),
        (5, None, "create_instance"),
    ]
    assert (st.read, st.understood, st.ignored) == (6, 4, 2)


def test_cr_only_line_ends_are_line_ends_and_noted():
    data = (HTTP_CREATE + "\r" + CREATED + "\r" + RELAYED + "\r").encode()
    st = SourceStats("dpc")
    recs = list(iter_klog(io.BytesIO(data), st, messages=frozenset({"Successfully relayed the readiness"})))
    assert [(r.line_no, r.msg) for r in recs] == [(3, "Successfully relayed the readiness")]
    assert (st.read, st.understood, st.ignored, st.skipped) == (3, 1, 2, 0)
    assert st.notes == {"carriage return(s) inside a line, read as line ends": 2}


def test_prefilter_gives_same_records_as_full_parse():
    lines = [CREATED, HTTP_CREATE, HTTP_REFUSED, TRANSIENT, RELAYED, REQUESTER_GPU] * 3
    wanted = frozenset({"HTTP call done", "Got GPU UUIDs"})
    full, _ = run(lines)
    filt, _ = run(lines, messages=wanted)
    assert filt == [r for r in full if r.msg in wanted]


def test_str_lines_are_accepted_and_stats_flush_between_records():
    stats = SourceStats("dpc")
    it = iter_klog([HTTP_CREATE, "junk", RELAYED], stats)
    next(it)
    assert stats.read == 1
    rest = list(it)
    assert len(rest) == 1 and (stats.read, stats.understood, stats.skipped) == (3, 2, 1)


def test_a_cr_only_log_longer_than_a_line_may_be_is_still_read_line_by_line(monkeypatch):
    """Past the longest line the reader holds, a CR-only log is read on in pieces, never
    held whole and never lost as one line too long."""
    from fma_otel.sources import klog

    monkeypatch.setattr(klog, "MAX_LINE_BYTES", 1300)
    lines = [HTTP_CREATE, CREATED, RELAYED] * 4
    data = ("\r".join(lines) + "\r\n" + RELAYED + "\n").encode()
    assert len(data) > 6 * 1300
    st = SourceStats("dpc")
    recs = list(iter_klog(io.BytesIO(data), st, messages=frozenset({"Successfully relayed the readiness"})))
    assert [r.line_no for r in recs] == [3, 6, 9, 12, 13]
    assert (st.read, st.understood, st.ignored, st.skipped) == (13, 5, 8, 0)
    assert st.notes == {CR_NOTE: 11}  # the CR of the CRLF ends no line of its own
    # a piece past the limit is measured up to its CR, and the pieces after it still read
    monkeypatch.setattr(klog, "MAX_LINE_BYTES", 600)
    st = SourceStats("dpc")
    recs = list(iter_klog(io.BytesIO(data), st, messages=frozenset({"Successfully relayed the readiness"})))
    assert [r.line_no for r in recs] == [3, 6, 9, 12, 13]
    assert [ln for ln, _ in st.skipped_lines] == [2, 5, 8, 11]  # CREATED, 1250 bytes
    assert (st.read, st.understood, st.ignored, st.skipped) == (13, 5, 4, 4)


def test_a_line_the_prefilter_passes_whose_message_is_not_wanted_is_ignored():
    """An unquoted (``Infof``) message that quotes a wanted one further on passes the
    prefilter's literal search, but its parsed message is not a wanted one: ignored, as a
    full parse would leave it (found by the prefilter property in tests/fuzz)."""
    wanted_msg = "Enqueuing launcher reference due to notification of update"
    line = (
        b"I0629 14:30:01.166980       1 inference-server.go:2251] I0629 14:30:01.164680       1 "
        b'controller.go:812] "' + wanted_msg.encode() + b'" launcherPod="launcher-a" '
        b'lastWrite={"Manager":"kube-scheduler","Time":"2026-06-29T14:30:01Z"}\n'
    )
    full_stats, pre_stats = SourceStats("t"), SourceStats("t")
    full = list(iter_klog([line], full_stats))
    assert len(full) == 1 and full[0].msg != wanted_msg
    assert list(iter_klog([line], pre_stats, messages=[wanted_msg])) == []
    assert (pre_stats.read, pre_stats.understood, pre_stats.ignored) == (1, 0, 1)
