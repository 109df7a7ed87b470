"""The OTLP JSON text writer is the dict encoder, byte for byte, on generated span trees.

``export_request_text`` / ``write_trace_line`` format the text themselves with caches of
whole attribute pairs; the reference is ``json.dumps(export_request(spans), ...)``.
Generated here: odd strings (quotes, backslashes, control characters, DEL, non-ASCII,
lone surrogates), integers at and past the 64-bit limits, floats (zeros of both signs,
subnormals, NaN and infinities), bools next to equal ints and floats under one key, values
whose class is a subclass of ``str``/``int``/``float`` (some with their own ``__str__``),
lists, mappings, ``None``, non-``str`` keys, empty attributes, missing or empty parents,
shared and unshared resources.  Where the dict encoder raises, the writer must raise too.
"""

from __future__ import annotations

import enum
import io
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel import model as M
from fma_otel.sinks.otlp_json import (
    decode_request,
    export_request,
    export_request_text,
    write_trace_line,
)


def _reference(spans: list[M.SpanRecord]) -> str:
    return json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)


def _assert_same(spans: list[M.SpanRecord]) -> None:
    """The writer gives the reference's text, or raises where the reference raises."""
    try:
        text = export_request_text(spans)
    except (TypeError, ValueError, KeyError):
        # the error may differ (the dict encoder builds everything, then encodes): both raise
        with pytest.raises((TypeError, ValueError, KeyError)):
            _reference(spans)
        return
    assert text == _reference(spans)
    out = io.StringIO()
    write_trace_line(out, spans)
    assert out.getvalue() == text + "\n"
    json.loads(text)  # strict JSON


class _Color(enum.IntEnum):
    RED = 1


class _Loud(str):
    """A ``str`` that prints otherwise: ``any_value`` writes ``str(v)``."""

    def __str__(self) -> str:
        return "LOUD:" + self.upper()


class _Plain(str):
    pass


class _Int(int):
    def __str__(self) -> str:
        return "int!"


class _Float(float):
    pass


_CHARS = st.characters(codec=None, exclude_categories=())  # surrogates included
_ODD = st.sampled_from(
    ['"', "\\", "\x00", "\x1f", "\x7f", "\n", "\u2028", "\ud800", "\U0001f600", "%s", "{}"]
)
_TEXT = st.one_of(st.text(_CHARS, max_size=12), st.lists(_ODD, max_size=4).map("".join), st.just(""))
_INTS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, 2**64, -(2**64), 10**30]),
)
_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 5e-324, 1e308, math.inf, -math.inf, math.nan, 0.1, 51.734756]),
)
_SCALARS = st.one_of(
    _TEXT,
    _INTS,
    st.booleans(),
    _FLOATS,
    st.none(),
    st.sampled_from([_Color.RED, _Loud("a"), _Loud(""), _Plain("a"), _Int(1), _Float(1.5), _Float(-0.0)]),
)
_VALUES = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=3),
    st.tuples(_SCALARS, _SCALARS),
    st.dictionaries(_TEXT, _SCALARS, max_size=2),
)
#: a few keys recur, so that pairs hit the writer's caches with other values and types
_KEYS = st.one_of(
    st.sampled_from(["fma.a", "fma.b", M.A_MIN, M.A_COMPLETE, 'q"k', "k\xe9y \u2603", "a"]),
    _TEXT,
    st.sampled_from([5, True, None, 1.5, _Plain("fma.a"), _Loud("fma.a")]),
)
_ATTRIBUTES = st.one_of(st.just({}), st.dictionaries(_KEYS, _VALUES, max_size=8))
_RESOURCES = st.one_of(
    st.just({}),
    st.sampled_from([M.SERVICE_DPC, M.SERVICE_K8S, "s\xe9"]).map(M.resource_attributes),
    st.dictionaries(st.sampled_from(["service.name", "n", "b", "f"]), _SCALARS, max_size=3),
)
_IDS = st.one_of(
    st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "T\u2603", ""]),
    _TEXT,
    st.sampled_from([None, 7, _Plain("ab")]),
)


@st.composite
def _span_trees(draw: st.DrawFn) -> list[M.SpanRecord]:
    """A batch of spans: a few traces, parents from earlier spans, resources shared or not."""
    shared = draw(st.lists(_RESOURCES, min_size=1, max_size=3))
    trace_ids = draw(st.lists(_IDS, min_size=1, max_size=2))
    spans: list[M.SpanRecord] = []
    for i in range(draw(st.integers(0, 10))):
        parent = draw(
            st.one_of(
                st.none(),
                st.just(""),
                st.sampled_from([s.span_id for s in spans] or [None]),
                _IDS,
            )
        )
        resource = draw(st.one_of(st.sampled_from(shared), _RESOURCES))
        spans.append(
            M.SpanRecord(
                trace_id=draw(st.sampled_from(trace_ids)),
                span_id=draw(st.one_of(st.just(f"{i:016x}"), _IDS)),
                parent_span_id=parent,
                name=draw(
                    st.one_of(st.sampled_from([M.ROOT, "fma.actuation", 'n\xe9"x']), _TEXT, st.just(["x"]))
                ),
                kind=draw(st.sampled_from(["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER", "WEIRD"])),
                start_ns=draw(st.one_of(_INTS, st.sampled_from([True, 1.5, _Int(3)]))),
                end_ns=draw(_INTS),
                service=draw(st.sampled_from([M.SERVICE_DPC, "s\xe9"])),
                attributes=draw(_ATTRIBUTES),
                status_code=draw(st.sampled_from([M.STATUS_UNSET, M.STATUS_OK, M.STATUS_ERROR])),
                status_message=draw(st.one_of(st.just(""), _TEXT)),
                resource=resource,
            )
        )
    return spans


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_span_trees())
def test_text_writer_is_the_dict_encoder(spans: list[M.SpanRecord]) -> None:
    _assert_same(spans)


def test_equal_values_of_other_types_under_one_key() -> None:
    """``1``, ``True``, ``1.0``, an ``IntEnum`` and ``str`` subclasses equal to a cached
    pair's value must not be given that pair's text, in one request or the next."""
    values: list[Any] = [1, True, 1.0, _Color.RED, _Int(1), "a", _Loud("a"), _Plain("a"), 0, False, 0.0]
    for order in (values, values[::-1]):
        spans = [
            M.SpanRecord("t" * 32, f"{i:016x}", None, "n", "INTERNAL", 1, 2, "s", {"fma.k": v})
            for i, v in enumerate(order)
        ]
        _assert_same(spans)
        for s in spans:
            _assert_same([s])
    text = export_request_text(
        [M.SpanRecord("t" * 32, "s" * 16, None, "n", "INTERNAL", 1, 2, "s", {"fma.k": _Loud("a")})]
    )
    assert '"stringValue":"LOUD:A"' in text


def test_zeros_of_both_signs_follow_the_dict_encoder() -> None:
    for zeros in ([0.0, -0.0], [-0.0, 0.0]):
        for key in ("fma.zero.a", "fma.zero.b"):
            spans = [
                M.SpanRecord("t" * 32, f"{i:016x}", None, "n", "INTERNAL", 1, 2, "s", {key: z})
                for i, z in enumerate(zeros)
            ]
            _assert_same(spans)


def test_non_finite_floats_are_strings_and_nan_keys_raise() -> None:
    spans = [
        M.SpanRecord(
            "t" * 32,
            "s" * 16,
            None,
            "n",
            "INTERNAL",
            1,
            2,
            "s",
            {"a": math.inf, "b": -math.inf, "c": math.nan},
        )
    ]
    _assert_same(spans)
    assert [a.attributes for a in decode_request(json.loads(export_request_text(spans)))][0]["a"] == math.inf
    bad = [M.SpanRecord("t" * 32, "s" * 16, None, "n", "INTERNAL", 1, 2, "s", {math.nan: 1})]
    with pytest.raises(ValueError):
        export_request_text(bad)
    with pytest.raises(ValueError):
        _reference(bad)


def test_unhashable_scalars_raise_like_the_dict_encoder() -> None:
    spans = [M.SpanRecord("t" * 32, "s" * 16, None, "n", "INTERNAL", 1, 2, "s", {"a": {1, 2}})]
    with pytest.raises(TypeError):
        export_request_text(spans)
    with pytest.raises(TypeError):
        _reference(spans)


def test_empty_batch_and_empty_attributes() -> None:
    _assert_same([])
    _assert_same([M.SpanRecord("t" * 32, "s" * 16, None, "n", "INTERNAL", 1, 2, "s", {})])


def test_full_caches_are_emptied_and_refilled(monkeypatch: pytest.MonkeyPatch) -> None:
    from fma_otel.sinks import otlp_json

    monkeypatch.setattr(otlp_json, "_CACHE_MAX", 3)
    spans = [
        M.SpanRecord(
            "t" * 32,
            f"{i:016x}",
            None,
            f"n{i % 5}",
            "INTERNAL",
            1,
            2,
            "s",
            {f"k{i % 7}": f"v{i % 4}", "i": i % 6},
        )
        for i in range(40)
    ]
    _assert_same(spans)
    assert len(otlp_json._STR_PAIR) <= 3 and len(otlp_json._NAME_TEXT) <= 3


def test_built_traces_decode_to_the_same_spans() -> None:
    from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir

    result = run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})
    for trace in result.traces:
        _assert_same(trace)
        decoded = decode_request(json.loads(export_request_text(trace)))
        assert sorted(decoded, key=lambda s: s.span_id) == sorted(trace, key=lambda s: s.span_id)
