"""OTLP JSON lines: what the writer encodes, the reader decodes to the same spans.

The writer builds the protobuf-JSON-mapping dicts (``export_request``) and lets ``orjson``
encode them; byte-identical text to any other encoder is not promised, the decoded spans
are.  Checked on the bridge's output for the embedded sample and a synthetic capture, and
on generated spans with odd values (control characters, non-ASCII, lone surrogates, 64-bit
limits, zeros of both signs, infinities).
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel import model as M
from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.query.readers import read_spans
from fma_otel.sinks.otlp_json import (
    decode_request,
    export_request,
    export_request_bytes,
    write_trace_line,
)
from fma_otel.span_records import SpanEvent, SpanRecord
from tests.support.synth import synth_capture, write_capture


def _strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses the bare ``NaN``/``Infinity`` a collector would refuse."""

    def refuse(name: str) -> Any:
        raise ValueError(f"bare {name} in OTLP JSON")

    return json.loads(text, parse_constant=refuse)


def _bridge(capture: Path, out: Path) -> list[str]:
    r = CliRunner().invoke(main, ["bridge", str(capture), "--out", str(out), "-q"], catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    return out.read_text(encoding="utf-8").splitlines()


def _assert_round_trip(lines: list[str], tmp_path: Path) -> None:
    """Each line decodes to spans that encode and decode again to the same spans, whether
    re-encoded by the writer or by ``json.dumps`` of the same dicts."""
    assert lines
    again = tmp_path / "again.jsonl"
    with open(again, "w", encoding="utf-8") as out:
        for line in lines:
            spans = decode_request(_strict(line))
            assert spans
            assert decode_request(_strict(export_request_bytes(spans))) == spans
            reference = json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)
            assert decode_request(_strict(reference)) == spans
            write_trace_line(out, spans)
    assert list(read_spans(str(again))) == [s for ln in lines for s in decode_request(_strict(ln))]


def test_sample_round_trip(tmp_path: Path, clean_otlp_env: pytest.MonkeyPatch) -> None:
    lines = _bridge(sample_dir(), tmp_path / "t.jsonl")
    assert len(lines) == 6  # one request per actuation
    _assert_round_trip(lines, tmp_path)


def test_synthetic_capture_round_trip(tmp_path: Path, clean_otlp_env: pytest.MonkeyPatch) -> None:
    cap = tmp_path / "cap"
    write_capture(synth_capture(14, seed=5), cap, timestamps=True, pods_form="watch")
    lines = _bridge(cap, tmp_path / "t.jsonl")
    assert len(lines) >= 12  # one request per actuation the bridge finds
    _assert_round_trip(lines, tmp_path)


def test_one_line_per_call_with_the_documented_fields() -> None:
    span = SpanRecord(
        "ab" * 16, "cd" * 8, "ef" * 8, "fma.actuation", M.SERVER, 10, 3 * 10**18, M.SERVICE_DPC,
        {"i": 2**63 - 1, "f": 0.5, "b": True, "s": "x", "l": ["a", "b"]}, M.STATUS_ERROR, "boom",
    )  # fmt: skip
    out = io.StringIO()
    write_trace_line(out, [span])
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 1
    req = _strict(text)
    (rs,) = req["resourceSpans"]
    attrs = {kv["key"]: kv["value"]["stringValue"] for kv in rs["resource"]["attributes"]}
    assert attrs == {"service.name": M.SERVICE_DPC, "service.namespace": M.SERVICE_NAMESPACE}
    (sp,) = rs["scopeSpans"][0]["spans"]
    # 64-bit integers as strings, enums as numbers, hex ids (OTLP/JSON)
    assert sp["startTimeUnixNano"] == "10" and sp["endTimeUnixNano"] == str(3 * 10**18)
    assert sp["kind"] == 2 and sp["status"] == {"code": 2, "message": "boom"}
    assert (sp["traceId"], sp["spanId"], sp["parentSpanId"]) == ("ab" * 16, "cd" * 8, "ef" * 8)
    values = {kv["key"]: kv["value"] for kv in sp["attributes"]}
    assert values["i"] == {"intValue": str(2**63 - 1)}
    assert values["f"] == {"doubleValue": 0.5}
    assert values["b"] == {"boolValue": True}
    assert values["l"] == {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}}


def test_spans_of_one_request_keep_their_own_attribute_values() -> None:
    """The string attributes the spans of a trace repeat are made once per request: each
    span still reads back its own values (same value under another key, another value
    under the same key, a ``str`` subclass, an event's attributes)."""

    class Tag(str):
        pass

    def span(i: int, attrs: dict[str, Any]) -> SpanRecord:
        return SpanRecord("ab" * 16, f"{i:016x}", None, "n", M.INTERNAL, 1, 2, "s", attrs)

    shared = {"fma.path": "cold", "k8s.node.name": "node-a"}
    spans = [
        span(1, {**shared, "x": "cold"}),
        span(2, {**shared, "fma.path": "warm"}),
        span(3, {**shared, "k8s.node.name": Tag("node-a"), "y": 1.0, "z": True}),
    ]
    spans.append(
        msgspec.structs.replace(spans[0], span_id="f" * 16, events=(SpanEvent("e", 1, {"fma.path": "hot"}),))
    )
    back = decode_request(_strict(export_request_bytes(spans)))
    assert [s.attributes for s in back] == [s.attributes for s in spans]
    assert back[3].events[0].attributes == {"fma.path": "hot"}


def test_non_finite_floats_are_strings_not_bare_literals() -> None:
    span = SpanRecord(
        "ab" * 16, "cd" * 8, None, "n", M.INTERNAL, 1, 2, "s", {"p": math.inf, "m": -math.inf, "n": math.nan}
    )
    req = _strict(export_request_bytes([span]))
    values = {
        kv["key"]: kv["value"] for kv in req["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    }
    assert values == {
        "p": {"doubleValue": "Infinity"},
        "m": {"doubleValue": "-Infinity"},
        "n": {"doubleValue": "NaN"},
    }
    (back,) = decode_request(req)
    assert back.attributes["p"] == math.inf and math.isnan(back.attributes["n"])


def test_a_lone_surrogate_is_written_not_raised() -> None:
    """orjson refuses a lone surrogate (a JSON-valued log field can decode to one): the
    writer falls back to ``json.dumps``'s escape and the line still reads back."""
    span = SpanRecord("ab" * 16, "cd" * 8, None, "n\ud800", M.INTERNAL, 1, 2, "s", {"k": "v\udfff"})
    out = io.StringIO()
    write_trace_line(out, [span])
    (back,) = decode_request(_strict(out.getvalue()))
    assert back == _as_decoded(span)


_text = st.text(st.characters(codec=None), max_size=12)
_scalar = st.one_of(
    _text,
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
)
_value = st.one_of(_scalar, st.lists(_text, max_size=3))
_hex = st.sampled_from("0123456789abcdef")


@st.composite
def _spans(draw: st.DrawFn) -> list[SpanRecord]:
    n = draw(st.integers(0, 5))
    resource = draw(st.sampled_from([{}, M.resource_attributes(M.SERVICE_DPC, {"k8s.pod.name": "p"})]))
    out = []
    for i in range(n):
        # from 1: a time of 0 is OTLP's unset, which the reader refuses (otlp_json.span_time)
        start = draw(st.integers(1, 2**64 - 2))
        out.append(
            SpanRecord(
                trace_id=draw(st.text(_hex, min_size=32, max_size=32)),
                span_id=f"{i + 1:016x}",
                parent_span_id=draw(st.sampled_from([None, "00000000000000ff"])),
                name=draw(_text),
                kind=draw(st.sampled_from([M.INTERNAL, M.CLIENT, M.SERVER])),
                start_ns=start,
                end_ns=draw(st.integers(start, 2**64 - 1)),
                service=M.SERVICE_DPC,
                attributes=draw(st.dictionaries(_text, _value, max_size=5)),
                status_code=draw(st.sampled_from([M.STATUS_UNSET, M.STATUS_OK, M.STATUS_ERROR])),
                status_message=draw(_text),
                resource=resource,
            )
        )
    return out


def _as_decoded(s: SpanRecord) -> SpanRecord:
    """What a reader makes of ``s``: its resource, or the service's default one."""
    return SpanRecord(
        s.trace_id, s.span_id, s.parent_span_id, s.name, s.kind, s.start_ns, s.end_ns,
        s.service, s.attributes, s.status_code, s.status_message,
        s.resource or M.resource_attributes(s.service),
    )  # fmt: skip


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spans())
def test_generated_spans_round_trip(spans: list[SpanRecord]) -> None:
    back = decode_request(_strict(export_request_bytes(spans)))
    # grouped by resource: one resource here, so the order is kept
    assert back == [_as_decoded(s) for s in spans]
