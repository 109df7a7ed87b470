"""The fast paths give exactly what the plain code gives.

* ``write_trace_line`` formats the OTLP JSON text itself: byte for byte what
  ``json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)`` writes.
"""

from __future__ import annotations

import enum
import io
import json
import math
import random

import pytest

from fma_otel import model as M
from fma_otel.sinks.otlp_json import export_request, export_request_text, write_trace_line


def _reference(spans: list[M.SpanRecord]) -> str:
    return json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)


class _Color(enum.IntEnum):
    RED = 1


class _Str(str):
    pass


_VALUES = [
    "",
    "plain",
    'quote " and \\ backslash',
    "caf\xe9 \u2603 \U0001f600 \x00\x1f\n\t",
    0,
    1,
    -7,
    10**30,
    True,
    False,
    0.0,
    -0.0,
    1.0,
    0.1,
    1e-9,
    123456.789,
    -2.5e300,
    math.inf,
    -math.inf,
    math.nan,
    [1, "a", 2.5, True, math.nan],
    ("t", 1),
    [],
    {"k": 1},
    None,
    _Color.RED,
    _Str("sub"),
]
_KEYS = ["fma.a", "fma.b", "k\xe9y \u2603", 'q"k', "service.name"]


def _span(rng: random.Random, i: int) -> M.SpanRecord:
    attrs = {
        rng.choice(_KEYS) + str(rng.randrange(3)): rng.choice(_VALUES) for _ in range(rng.randrange(0, 8))
    }
    resource = rng.choice(
        [
            {},
            M.resource_attributes("dpc"),
            M.resource_attributes("launcher"),
            {"service.name": "x", "n": 1},
            {"service.name": "x", "b": True, "f": 0.5},
        ]
    )
    return M.SpanRecord(
        trace_id=rng.choice(["0af7651916cd43dd8448eb211c80319c", "T\u2603"]),
        span_id=f"{i:016x}",
        parent_span_id=rng.choice([None, "", "b7ad6b7169203331"]),
        name=rng.choice(["R.actuation", 'n\xe9"x']),
        kind=rng.choice(["INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER", "WEIRD"]),
        start_ns=rng.randrange(0, 2**63),
        end_ns=rng.randrange(0, 2**63),
        service=rng.choice(["dpc", "launcher", "s\xe9"]),
        attributes=attrs,
        status_code=rng.choice([M.STATUS_UNSET, M.STATUS_OK, M.STATUS_ERROR]),
        status_message=rng.choice(["", "incomplete: X not seen", '\u2603\n"']),
        resource=resource,
    )


@pytest.mark.parametrize("seed", range(30))
def test_text_encoder_is_byte_identical(seed: int) -> None:
    rng = random.Random(seed)
    spans = [_span(rng, i) for i in range(rng.randrange(0, 12))]
    assert export_request_text(spans) == _reference(spans)
    out = io.StringIO()
    write_trace_line(out, spans)
    assert out.getvalue() == _reference(spans) + "\n"


def test_text_encoder_non_string_keys_and_cache_order() -> None:
    # the same value under both spellings of zero, in both orders, and odd keys
    for zeros in ([0.0, -0.0], [-0.0, 0.0]):
        spans = [
            M.SpanRecord("t" * 32, f"{i:016x}", None, "n", "INTERNAL", 1, 2, "s", {"z.zero": z, 5: "five"})
            for i, z in enumerate(zeros)
        ]
        assert export_request_text(spans) == _reference(spans)


def test_text_encoder_on_built_traces() -> None:
    from fma_otel.bridge import inputs_from_capture, run_bridge, sample_dir

    result = run_bridge(inputs_from_capture(sample_dir()), baseline_selector={"app": "vllm"})
    assert result.traces
    for trace in result.traces:
        assert export_request_text(trace) == _reference(trace)
