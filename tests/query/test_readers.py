"""The one trace-file reader: OTLP JSON lines, pretty OTLP JSON, Jaeger JSON (UI, v1, v3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fma_otel.query.readers import jaeger_trace_to_otlp, read_spans
from fma_otel.sinks.otlp_json import OtlpJsonError

TID = "0af7651916cd43dd8448eb211c80319c"


def _req(span_id: str, name: str, parent: str | None = None) -> dict:
    sp = {"traceId": TID, "spanId": span_id * 16, "name": name, "kind": 1,
          "startTimeUnixNano": "1700000000000000000", "endTimeUnixNano": "1700000002000000000",
          "attributes": [{"key": "fma.path", "value": {"stringValue": "hot"}}]}  # fmt: skip
    if parent:
        sp["parentSpanId"] = parent * 16
    res = {"attributes": [{"key": "service.name", "value": {"stringValue": "kubernetes"}}]}
    return {"resourceSpans": [{"resource": res, "scopeSpans": [{"spans": [sp]}]}]}


def _read(tmp_path: Path, text: str) -> tuple[list, dict]:
    p = tmp_path / "in.json"
    p.write_text(text)
    stats: dict[str, int] = {}
    return list(read_spans(str(p), stats)), stats


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(_req("a", "fma.request")) + "\n" + json.dumps(_req("b", "fma.actuation", "a")) + "\n",
        json.dumps(_req("a", "fma.request"), indent=2)
        + "\n"
        + json.dumps(_req("b", "fma.actuation", "a"), indent=4),
        json.dumps([_req("a", "fma.request"), _req("b", "fma.actuation", "a")], indent=2),
        json.dumps(
            {
                "result": {
                    "resourceSpans": _req("a", "fma.request")["resourceSpans"]
                    + _req("b", "fma.actuation", "a")["resourceSpans"]
                }
            },
            indent=2,
        ),  # api/v3
    ],
    ids=["lines", "pretty-several", "array", "jaeger-api-v3"],
)
def test_otlp_forms(tmp_path, text):
    spans, stats = _read(tmp_path, text)
    assert [(s.name, s.parent_span_id, s.service, s.duration_s) for s in spans] == [
        ("fma.request", None, "kubernetes", 2.0),
        ("fma.actuation", "a" * 16, "kubernetes", 2.0),
    ]
    assert stats["skipped"] == 0


def test_jaeger_ui_download(tmp_path):
    trace = {
        "traceID": TID[16:],  # Jaeger drops leading zeros / may give 64-bit ids
        "spans": [
            {"traceID": TID[16:], "spanID": "1", "operationName": "fma.request", "references": [],
             "startTime": 1_700_000_000_000_000, "duration": 2_500_000, "processID": "p1",
             "tags": [{"key": "fma.complete", "type": "bool", "value": True},
                      {"key": "span.kind", "type": "string", "value": "client"},
                      {"key": "otel.status_code", "type": "string", "value": "ERROR"},
                      {"key": "otel.status_description", "type": "string", "value": "missing R.ready"},
                      {"key": "n", "type": "int64", "value": 3}]},
            {"traceID": TID[16:], "spanID": "2", "operationName": "fma.actuation",
             "references": [{"refType": "CHILD_OF", "traceID": TID[16:], "spanID": "1"}],
             "startTime": 1_700_000_000_500_000, "duration": 1_000, "processID": "p2", "tags": []},
        ],
        "processes": {"p1": {"serviceName": "kubernetes", "tags": [{"key": "host", "type": "string", "value": "h"}]},
                      "p2": {"serviceName": "dual-pods-controller", "tags": []}},
    }  # fmt: skip
    spans, stats = _read(tmp_path, json.dumps({"data": [trace], "total": 0, "errors": None}, indent=2))
    root, act = spans
    assert root.trace_id == ("0" * 16 + TID[16:]) and root.span_id == "0" * 15 + "1"
    assert root.kind == "CLIENT" and root.status_code == "ERROR" and root.status_message == "missing R.ready"
    assert root.attributes == {"fma.complete": True, "n": 3}
    assert root.resource == {"service.name": "kubernetes", "host": "h"}
    assert root.duration_s == 2.5
    assert act.parent_span_id == root.span_id and act.service == "dual-pods-controller"
    assert act.end_ns - act.start_ns == 1_000_000
    assert stats == {"lines": 1, "skipped": 0}


def test_bad_units_counted_and_wrong_kind_of_file(tmp_path):
    good = json.dumps(_req("a", "fma.request"))
    spans, stats = _read(tmp_path, "{broken\n" + good + "\nnot json\n")
    assert len(spans) == 1 and stats == {"lines": 3, "skipped": 2}
    bad_jaeger = json.dumps({"data": [{"traceID": "x", "spans": [{"spanID": "zz", "traceID": "q"}]}]})
    spans, stats = _read(tmp_path, bad_jaeger + "\n" + good + "\n")
    assert len(spans) == 1 and stats["skipped"] == 1
    with pytest.raises(OtlpJsonError):
        _read(tmp_path, json.dumps({"kind": "PodList", "items": []}, indent=2))
    assert _read(tmp_path, "\n\n") == ([], {"lines": 0, "skipped": 0})


def test_jaeger_float_tags_are_written_as_the_otlp_sink_writes_them(tmp_path):
    """One ``KeyValue`` encoder for both: a non-finite ``float64`` tag becomes the protobuf
    JSON string ("Infinity"), so the converted request is strict JSON, and reads back."""
    tags = [
        {"key": "inf", "type": "float64", "value": "Infinity"},
        {"key": "x", "type": "float64", "value": 0.5},
    ]
    trace = {"traceID": TID, "processes": {"p": {"serviceName": "s"}}, "spans": [
        {"traceID": TID, "spanID": "1", "operationName": "op", "startTime": 1_700_000_000_000_000,
         "duration": 1, "processID": "p", "tags": tags}]}  # fmt: skip
    req = jaeger_trace_to_otlp(trace)
    attrs = req["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    assert attrs == [
        {"key": "inf", "value": {"doubleValue": "Infinity"}},
        {"key": "x", "value": {"doubleValue": 0.5}},
    ]
    (span,), _ = _read(tmp_path, json.dumps(req, allow_nan=False))
    assert span.attributes == {"inf": float("inf"), "x": 0.5}


def test_slo_and_show_drop_the_same_malformed_request(tmp_path):
    """``slo``'s harvest decodes with the one OTLP JSON decoder, so a request whose only
    fault is in a span no statistic uses (a ``kind`` that is a list) is left out whole, as
    ``show`` and ``report`` leave it out; the good line is kept by all of them."""
    from fma_otel.query.harvest import Harvest
    from fma_otel.query.sources import FileSource
    from fma_otel.query.window import Window

    bad = _req("a", "fma.actuation")
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"].append(
        {**_req("c", "fma.dpc.write")["resourceSpans"][0]["scopeSpans"][0]["spans"][0], "kind": [1]}
    )
    text = json.dumps(bad) + "\n" + json.dumps(_req("b", "fma.request")) + "\n"
    spans, stats = _read(tmp_path, text)
    assert [s.name for s in spans] == ["fma.request"] and stats == {"lines": 2, "skipped": 1}
    h = Harvest()
    assert h.add_otlp(bad) is False and h.malformed == 1 and not h.dataset().requests
    src = FileSource(str(tmp_path / "in.json"))
    h = Harvest()
    warnings: list[str] = []
    src.fill(h, Window(), warn=warnings.append)
    assert (src.lines, src.skipped) == (2, 1) and len(warnings) == 1
    assert not h.dataset().samples and list(h.dataset().requests) == [TID]


def test_a_jaeger_trace_whose_ids_are_on_its_spans_alone_is_read_and_a_harvest_takes_any_form(tmp_path):
    """A Jaeger trace is told by its ``spans``, not by a trace-level ``traceID`` or
    ``processes``; the file reader and a remote source's harvest take the same shapes."""
    from fma_otel.query.harvest import Harvest

    sp = {"traceID": TID, "spanID": "b" * 16, "operationName": "fma.request", "startTime": 1, "duration": 2}
    spans, stats = _read(tmp_path, json.dumps({"data": [{"spans": [sp]}]}))
    assert [(s.trace_id, s.name, s.end_ns - s.start_ns) for s in spans] == [(TID, "fma.request", 2000)]
    assert stats["skipped"] == 0
    h = Harvest()
    assert h.add_otlp({"spans": [sp]}) and h.add_otlp({"trace": _req("a", "fma.request")})
    assert h.add_otlp({"batches": _req("c", "fma.request")["resourceSpans"]})  # Tempo < 2.5
    assert not h.add_otlp({"spans": []}) and not h.add_otlp([1]) and h.malformed == 2
    assert set(h.dataset().requests) == {TID}


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), 2**70, -(2**64) - 1, "\ud800", 1.7976931348623157e308, 5e-324],
    ids=["nan", "inf", "int-71-bit", "int-below-int64", "lone-surrogate", "max-float", "min-subnormal"],
)
def test_values_past_the_fast_decoder_are_read_as_the_standard_library_reads_them(tmp_path, value):
    """Lines are decoded with msgspec first, with ``json`` for what msgspec refuses: either
    way a value is what ``json.loads`` makes of it (an integer past 64 bits stays an
    integer, not a float; a NaN, an infinity and a lone surrogate are read, not skipped)."""
    req = _req("a", "fma.request")
    attrs = req["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    kind = (
        "intValue" if isinstance(value, int) else "doubleValue" if isinstance(value, float) else "stringValue"
    )
    attrs.append({"key": "x", "value": {kind: value}})
    line = json.dumps(req)
    (span,), stats = _read(tmp_path, line + "\n")
    assert stats == {"lines": 1, "skipped": 0}
    got = span.attributes["x"]
    assert type(got) is type(value) and (got == value or (got != got and value != value))


def test_a_line_neither_decoder_takes_is_counted_as_skipped(tmp_path):
    spans, stats = _read(tmp_path, '{"resourceSpans": [}\n' + json.dumps(_req("a", "fma.request")) + "\n")
    assert [s.name for s in spans] == ["fma.request"] and stats == {"lines": 2, "skipped": 1}
