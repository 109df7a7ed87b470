"""Inputs that once gave Python tracebacks: each is now a counted skip or a one-line error.

- lines that are valid JSON but malformed OTLP, in ``show`` and ``slo`` (the whole line is
  skipped, never part of it; good lines in the same file still count);
- parent cycles in ``show`` (shown as orphans, marked ``↑?``);
- an OTLP endpoint that is not a URL in ``bridge`` (exit 2, one line, before any work);
- non-finite floats, written as the protobuf JSON mapping's strings so the line stays JSON.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import A_COMPLETE, A_PATH, A_REQ_NAME, ROOT, S
from fma_otel.query.harvest import Harvest
from fma_otel.query.readers import read_spans
from fma_otel.sinks import otlp_export
from fma_otel.sinks.otlp_json import any_value, value_of, write_trace_line
from fma_otel.sinks.show import render_waterfall, tree_lines
from fma_otel.span_records import SpanRecord

GOOD_TRACE = "0af7651916cd43dd8448eb211c80319c"
BAD_TRACE = "ff" * 16
T0 = 1_700_000_000 * S


def invoke(*args: str):
    """Run the CLI; an exception escaping it fails the test (that is the crash we look for)."""
    r = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "Traceback" not in r.stderr
    return r


def good_line() -> str:
    """One complete hot actuation: the root and its ``fma.actuation`` (T_actuation = 7 s)."""
    attrs = {A_PATH: "hot", A_REQ_NAME: "good-requester", A_COMPLETE: True}
    spans = [
        SpanRecord(GOOD_TRACE, "a" * 16, None, ROOT, "INTERNAL", T0, T0 + 9 * S, "kubernetes", attrs),
        SpanRecord(GOOD_TRACE, "b" * 16, "a" * 16, "fma.actuation", "INTERNAL", T0 + S, T0 + 8 * S,
                   "kubernetes", dict(attrs)),
    ]  # fmt: skip
    buf = io.StringIO()
    write_trace_line(buf, spans)
    return buf.getvalue()


def _span(**over: Any) -> dict[str, Any]:
    sp: dict[str, Any] = {
        "traceId": BAD_TRACE,
        "spanId": "c" * 16,
        "name": "fma.actuation",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + S),
        "attributes": [{"key": A_PATH, "value": {"stringValue": "hot"}}],
    }
    sp.update(over)
    return sp


def _req(*spans: dict[str, Any], resource: Any = None) -> dict[str, Any]:
    rs: dict[str, Any] = {"scopeSpans": [{"spans": list(spans)}]}
    if resource is not None:
        rs["resource"] = resource
    return {"resourceSpans": [rs]}


#: name -> (the malformed line, whether the bad part is in a field ``slo``'s statistics use)
MALFORMED: dict[str, tuple[str, bool]] = {
    "resourceSpans item not an object": ('{"resourceSpans":[1]}', True),
    "resourceSpans a string": ('{"resourceSpans":"x"}', True),
    "resourceSpans a number": ('{"resourceSpans":5}', True),
    "span attribute without key": (
        json.dumps(_req(_span(attributes=[{"value": {"stringValue": "x"}}]))),
        True,
    ),
    "resource attribute without key": (
        json.dumps(_req(_span(), resource={"attributes": [{"value": {"stringValue": "x"}}]})),
        False,
    ),
    "start time not a number": (json.dumps(_req(_span(startTimeUnixNano="x"))), True),
    "end time a list": (json.dumps(_req(_span(endTimeUnixNano=[1]))), True),
    "kind a list": (json.dumps(_req(_span(kind=[1]))), False),
    "status a string": (json.dumps(_req(_span(status="bad"))), False),
    "status message a number": (json.dumps(_req(_span(status={"code": 2, "message": 5}))), False),
    "doubleValue not a number": (
        json.dumps(_req(_span(attributes=[{"key": A_PATH, "value": {"doubleValue": "abc"}}]))),
        True,
    ),
    "intValue not a number": (
        json.dumps(_req(_span(attributes=[{"key": A_PATH, "value": {"intValue": "x1"}}]))),
        True,
    ),
    "name a list": (json.dumps(_req(_span(name=[1]))), True),
    "traceId a number": (json.dumps(_req(_span(traceId=5))), True),
    "spans an object": ('{"resourceSpans":[{"scopeSpans":[{"spans":{"a":1}}]}]}', True),
}


def _file(tmp_path: Path, *lines: str) -> str:
    p = tmp_path / "t.jsonl"
    p.write_text("".join(x if x.endswith("\n") else x + "\n" for x in lines))
    return str(p)


# --------------------------------------------------------------------------- show


@pytest.mark.parametrize("name", list(MALFORMED))
def test_show_skips_a_malformed_line_and_shows_the_good_one(tmp_path: Path, name: str) -> None:
    bad, _ = MALFORMED[name]
    r = invoke("show", _file(tmp_path, bad, good_line()))
    assert r.exit_code == 0, r.stderr
    assert "skipped 1 of 2 lines" in r.stderr
    assert f"trace {GOOD_TRACE}" in r.stdout and "good-requester" in r.stdout
    assert BAD_TRACE not in r.stdout


@pytest.mark.parametrize("name", list(MALFORMED))
def test_show_with_only_malformed_lines_is_the_wrong_kind_of_file(tmp_path: Path, name: str) -> None:
    bad, _ = MALFORMED[name]
    r = invoke("show", _file(tmp_path, bad, bad))
    assert r.exit_code == 2
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1
    assert "not an OTLP JSON lines file" in r.stderr


def test_a_malformed_line_is_skipped_whole_never_in_part(tmp_path: Path) -> None:
    """The first span of the line is fine; the second is not: neither is kept."""
    line = json.dumps(_req(_span(spanId="d" * 16), _span(startTimeUnixNano="x")))
    stats: dict[str, int] = {}
    spans = list(read_spans(_file(tmp_path, line, good_line()), stats))
    assert stats == {"lines": 2, "skipped": 1}
    assert {s.trace_id for s in spans} == {GOOD_TRACE}

    h = Harvest()
    assert h.add_otlp(json.loads(line)) is False
    assert h.malformed == 1
    assert h.dataset().samples == [] and not h.dataset().requests
    assert h.add_otlp(json.loads(good_line())) is True
    assert set(h.dataset().requests) == {GOOD_TRACE}


def test_null_fields_are_defaults_not_errors(tmp_path: Path) -> None:
    """Protobuf JSON may write ``null`` for a default value.  Not for a span's times: a
    start or end of ``null`` (or 0) is no time, and the span is malformed
    (tests/query/test_unusable_spans.py)."""
    line = json.dumps(_req(_span(name=None, status={"code": None, "message": None})))
    spans = list(read_spans(_file(tmp_path, line)))
    assert len(spans) == 1 and spans[0].name == "" and spans[0].status_message == ""


# --------------------------------------------------------------------------- slo


@pytest.mark.parametrize("name", list(MALFORMED))
def test_slo_survives_a_malformed_line_and_counts_the_good_one(tmp_path: Path, name: str) -> None:
    bad, slo_looks = MALFORMED[name]
    r = invoke("slo", "--traces", _file(tmp_path, bad, good_line()), "--format", "json")
    assert r.exit_code == 0, r.stderr
    out = json.loads(r.stdout)
    hot = [m for m in out["metrics"] if m["metric"] == "T_actuation" and m["path"] == "hot"]
    if slo_looks:  # the bad line added nothing: only the good actuation is there
        assert out["window"]["traces"] == 1
        assert hot and hot[0]["n"] == 1 and hot[0]["max"] == 7.0
    else:  # the bad part is in a field no statistic uses; the good one counts either way
        assert hot and hot[0]["max"] == 7.0


@pytest.mark.parametrize("name", [n for n, (_, looks) in MALFORMED.items() if looks])
def test_slo_lean_reader_refuses_the_malformed_request(name: str) -> None:
    bad, _ = MALFORMED[name]
    h = Harvest()
    assert h.add_otlp(json.loads(bad)) is False
    assert h.malformed == 1
    assert not h.dataset().requests and not h.dataset().samples


@pytest.mark.parametrize("name", list(MALFORMED))
def test_slo_with_only_malformed_lines_does_not_crash(tmp_path: Path, name: str) -> None:
    bad, _ = MALFORMED[name]
    r = invoke("slo", "--traces", _file(tmp_path, bad), "--format", "json")
    assert r.exit_code in (0, 2), r.stderr
    if r.exit_code == 2:
        assert len(r.stderr.strip().splitlines()) == 1


def test_slo_warns_about_the_malformed_line(tmp_path: Path) -> None:
    bad, _ = MALFORMED["start time not a number"]
    r = invoke("slo", "--traces", _file(tmp_path, bad, good_line()), "--format", "json")
    assert "skipped 1 of 2 lines" in r.stderr


def test_slo_on_only_malformed_lines_is_a_wrong_kind_of_file(tmp_path: Path) -> None:
    bad, _ = MALFORMED["start time not a number"]
    r = invoke("slo", "--traces", _file(tmp_path, bad), "--format", "json")
    assert r.exit_code == 2 and "not OTLP JSON lines" in r.stderr


@pytest.mark.slow
def test_report_skips_a_malformed_line(tmp_path: Path) -> None:
    bad, _ = MALFORMED["start time not a number"]
    out = tmp_path / "r.html"
    r = invoke("report", _file(tmp_path, bad, good_line()), "--out", str(out), "-q")
    assert r.exit_code == 0, r.stderr
    assert "Traceback" not in r.stderr and out.read_text().startswith("<!")


# --------------------------------------------------------------------------- cycles


def _rec(span_id: str, parent: str | None, name: str, start_s: float = 0, end_s: float = 1) -> SpanRecord:
    return SpanRecord(
        GOOD_TRACE, span_id * 16, parent and parent * 16, name, "INTERNAL",
        T0 + int(start_s * S), T0 + int(end_s * S), "kubernetes", {},
    )  # fmt: skip


def test_tree_lines_shows_a_self_parent_as_an_orphan() -> None:
    s = _rec("a", "a", ROOT)
    assert tree_lines([s]) == [(0, s, True)]


def test_tree_lines_shows_a_two_cycle_once_each() -> None:
    a, b = _rec("a", "b", "x", 0, 2), _rec("b", "a", "y", 1, 2)
    assert tree_lines([b, a]) == [(0, a, True), (1, b, False)]


def test_tree_lines_keeps_the_tree_and_adds_the_cycle_after_it() -> None:
    root, child = _rec("a", None, ROOT, 0, 5), _rec("b", "a", "fma.actuation", 1, 4)
    c1, c2 = _rec("c", "d", "p", 2, 3), _rec("d", "c", "q", 2, 3)
    got = tree_lines([c2, child, c1, root])
    assert got == [(0, root, False), (1, child, False), (0, c1, True), (1, c2, False)]


@pytest.mark.slow
def test_a_very_deep_chain_does_not_exhaust_the_stack() -> None:
    n = 5000
    spans = [
        SpanRecord(GOOD_TRACE, f"{i + 1:016x}", f"{i:016x}" if i else None, f"s{i}", "INTERNAL", T0, T0 + S,
                   "kubernetes", {})
        for i in range(n)
    ]  # fmt: skip
    lines = tree_lines(spans)
    assert [d for d, _, _ in lines] == list(range(n))
    assert render_waterfall(spans, 120, False).count("\n") == n + 1


@pytest.mark.parametrize(
    "spans",
    [
        [_rec("a", "a", ROOT)],
        [_rec("a", "b", "x", 0, 2), _rec("b", "a", "y", 1, 2)],
    ],
    ids=["self-parent", "two-cycle"],
)
def test_show_draws_parent_cycles(tmp_path: Path, spans: list[SpanRecord]) -> None:
    p = tmp_path / "c.jsonl"
    with p.open("w") as fh:
        write_trace_line(fh, spans)
    r = invoke("show", str(p))
    assert r.exit_code == 0, r.stderr
    body = r.stdout.splitlines()[1:]
    assert len(body) == len(spans)
    assert "↑?" in body[0]


# --------------------------------------------------------------------------- bridge endpoint


@pytest.mark.parametrize("url", ["http://[::1", "http://collector:99999", "http://collector:abc"])
def test_bridge_bad_endpoint_is_a_one_line_usage_error(tmp_path: Path, url: str, clean_otlp_env) -> None:
    out = tmp_path / "o.jsonl"
    r = invoke("bridge", "--otlp-endpoint", url, "--out", str(out), "-q")
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "not a valid URL" in r.stderr and url in r.stderr
    assert not out.exists()  # failed before the bridge ran


def test_bad_endpoint_in_the_environment_is_a_usage_error_too(tmp_path: Path, clean_otlp_env) -> None:
    clean_otlp_env.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1")
    r = invoke("bridge", "--out", str(tmp_path / "o.jsonl"), "-q")
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_sink_constructor_raises_export_error_for_a_bad_url(protocol: str, clean_otlp_env) -> None:
    with pytest.raises(otlp_export.ExportError, match="not a valid URL"):
        otlp_export.OtlpSink(endpoint="http://[::1", protocol=protocol)
    with pytest.raises(otlp_export.ExportError, match="not a valid URL"):
        otlp_export.resolve_endpoint("http://h:70000", protocol)


# --------------------------------------------------------------------------- non-finite floats


def _strict_loads(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"bare {name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_round_trip_as_strict_json(tmp_path: Path) -> None:
    attrs = {"inf": math.inf, "ninf": -math.inf, "nan": math.nan, "x": 1.5, "arr": [math.inf, 2.0]}
    assert any_value(math.inf) == {"doubleValue": "Infinity"}
    assert any_value(-math.inf) == {"doubleValue": "-Infinity"}
    assert any_value(math.nan) == {"doubleValue": "NaN"}
    assert value_of({"doubleValue": "-Infinity"}) == -math.inf
    assert math.isnan(value_of({"doubleValue": "NaN"}))

    p = tmp_path / "n.jsonl"
    with p.open("w") as fh:
        write_trace_line(fh, [msgspec.structs.replace(_rec("a", None, ROOT), attributes=attrs)])
    text = p.read_text()
    for line in text.splitlines():
        _strict_loads(line)
    (back,) = list(read_spans(str(p)))
    a = back.attributes
    assert a["inf"] == math.inf and a["ninf"] == -math.inf and math.isnan(a["nan"])
    assert a["x"] == 1.5 and a["arr"] == [math.inf, 2.0]
    assert invoke("show", str(p)).exit_code == 0


def test_jaeger_v1_trace_with_bad_fields_is_dropped_whole() -> None:
    from fma_otel.query.harvest import Harvest

    h = Harvest()
    h.add_otlp(
        {"spans": [{"traceID": "ab", "spanID": "cd", "operationName": "fma.request", "startTime": "x"}]}
    )
    h.add_otlp({"spans": [{"tags": [{"value": 1}]}]})  # a tag without a key
    assert h.malformed == 2
