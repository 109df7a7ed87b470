"""OTLP JSON lines: the embedded default output, and the reader every query uses.

One ``ExportTraceServiceRequest`` per line in the protobuf JSON mapping as OTLP/JSON
specifies it (hex ``traceId``/``spanId``, 64-bit integers as strings, enums as numbers):
the format the OpenTelemetry Collector's ``file`` exporter writes and its ``otlpjsonfile``
receiver reads, so a file written here can be replayed into any collector.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

import orjson

from .. import __version__
from ..jsonsafe import ns
from ..model import STATUS_ERROR, STATUS_OK, STATUS_UNSET, resource_attributes
from ..span_records import SpanEvent, SpanRecord

SCOPE_NAME = "fma-otel"

KIND_TO_OTLP = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}
OTLP_TO_KIND = {v: k for k, v in KIND_TO_OTLP.items()}
OTLP_TO_KIND.update({f"SPAN_KIND_{k}": k for k in KIND_TO_OTLP})
STATUS_TO_OTLP = {STATUS_UNSET: 0, STATUS_OK: 1, STATUS_ERROR: 2}
OTLP_TO_STATUS = {v: k for k, v in STATUS_TO_OTLP.items()}
OTLP_TO_STATUS.update({f"STATUS_CODE_{k}": k for k in STATUS_TO_OTLP})


# --------------------------------------------------------------------------- encode


def any_value(v: Any) -> dict[str, Any]:
    """A Python value as an OTLP ``AnyValue`` in JSON form."""
    if v.__class__ is str:  # most attributes: first, and exactly ``str`` (a subclass prints its own way)
        return {"stringValue": v}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        if math.isfinite(v):
            return {"doubleValue": v}
        # JSON has no Infinity/NaN: the protobuf JSON mapping spells them as strings
        return {"doubleValue": "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    return {"stringValue": str(v)}


def key_values(
    attrs: Mapping[str, Any], shared: dict[tuple[str, str], dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Attributes as OTLP ``KeyValue`` s.  A string and a finite float (``v - v == 0``
    holds for no other float), the values of nearly every attribute, are written inline;
    the others as :func:`any_value` writes them.

    ``shared``: the ``KeyValue`` of each string attribute made so far, by key and value.
    The spans of one trace repeat their actuation's attributes (requester, launcher,
    instance, node, path ...) and sources: each such pair is made once per trace, and
    the encoder writes the same object again."""
    if shared is None:
        shared = {}
    out = []
    for k, v in attrs.items():
        if v.__class__ is str:
            kv = shared.get((k, v))
            if kv is None:
                kv = shared[(k, v)] = {"key": k, "value": {"stringValue": v}}
            out.append(kv)
        elif v.__class__ is float and v - v == 0:
            out.append({"key": k, "value": {"doubleValue": v}})
        else:
            out.append({"key": k, "value": any_value(v)})
    return out


def span_to_json(
    s: SpanRecord, shared: dict[tuple[str, str], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """One span in JSON form; ``shared`` as in :func:`key_values`."""
    out: dict[str, Any] = {
        "traceId": s.trace_id,
        "spanId": s.span_id,
        "name": s.name,
        "kind": KIND_TO_OTLP.get(s.kind, 1),
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
        "attributes": key_values(s.attributes, shared),
        "status": {"code": STATUS_TO_OTLP[s.status_code]},
    }
    if s.parent_span_id:
        out["parentSpanId"] = s.parent_span_id
    if s.status_message:
        out["status"]["message"] = s.status_message
    if s.events:
        out["events"] = [
            {"timeUnixNano": str(e.time_ns), "name": e.name, "attributes": key_values(e.attributes, shared)}
            for e in s.events
        ]
    return out


def export_request(spans: Iterable[SpanRecord]) -> dict[str, Any]:
    """Group spans by resource into one ``ExportTraceServiceRequest`` (JSON form)."""
    groups: dict[tuple[tuple[str, Any], ...], list[SpanRecord]] = {}
    # the spans of a trace share a few resource mappings: sort each one once (the spans keep
    # them alive, so no ``id`` is reused while this runs)
    keys: dict[int, tuple[tuple[str, Any], ...]] = {}
    for s in spans:
        res = s.resource
        if res:
            key = keys.get(id(res))
            if key is None:
                key = keys[id(res)] = tuple(sorted(res.items()))
        else:  # a fresh mapping each time: its id may be reused, so never cached
            key = tuple(sorted(resource_attributes(s.service).items()))
        groups.setdefault(key, []).append(s)
    shared: dict[tuple[str, str], dict[str, Any]] = {}
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values(dict(res))},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE_NAME, "version": __version__},
                        "spans": [span_to_json(s, shared) for s in group],
                    }
                ],
            }
            for res, group in groups.items()
        ]
    }


def export_request_bytes(spans: Iterable[SpanRecord]) -> bytes:
    """``export_request(spans)`` as compact, strict JSON (UTF-8, no bare ``NaN``).

    ``orjson`` encodes the dicts; it refuses what strict UTF-8 JSON cannot hold (a lone
    surrogate that a JSON-valued log field decoded to) and integers beyond 64 bits in a
    place :func:`any_value` does not turn into a string (a non-``str`` attribute key): such
    a request goes through ``json.dumps``, which escapes the first and writes the second,
    so odd input never stops the writer.
    """
    req = export_request(spans)
    try:
        return orjson.dumps(req)
    except orjson.JSONEncodeError:
        return json.dumps(req, separators=(",", ":"), allow_nan=False).encode()


def export_request_text(spans: Iterable[SpanRecord]) -> str:
    """:func:`export_request_bytes` as ``str``."""
    return export_request_bytes(spans).decode()


def write_trace_line(out: IO[str], spans: Iterable[SpanRecord]) -> None:
    """Write one trace (or any batch of spans) as one line of strict JSON (no bare NaN)."""
    out.write(export_request_text(spans) + "\n")


# --------------------------------------------------------------------------- decode


def value_of(av: Mapping[str, Any]) -> Any:
    """An OTLP JSON ``AnyValue`` as a Python value."""
    if "stringValue" in av:
        return av["stringValue"]
    if "boolValue" in av:
        return bool(av["boolValue"])
    if "intValue" in av:
        return int(av["intValue"])
    if "doubleValue" in av:
        # a number, or a string ("Infinity", "-Infinity", "NaN", or digits) as protobuf JSON allows
        return float(av["doubleValue"])
    if "arrayValue" in av:
        return [value_of(x) for x in av["arrayValue"].get("values", [])]
    if "kvlistValue" in av:
        return {kv["key"]: value_of(kv.get("value", {})) for kv in av["kvlistValue"].get("values", [])}
    if "bytesValue" in av:
        return av["bytesValue"]
    return None


def attrs_of(kvs: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {kv["key"]: value_of(kv.get("value", {})) for kv in kvs or ()}


def normalize_id(raw: str | None, nbytes: int) -> str | None:
    """Hex id from either OTLP/JSON hex or protobuf-JSON base64 (Tempo, Jaeger v3)."""
    if not raw:
        return None
    if len(raw) == nbytes * 2:
        try:
            int(raw, 16)
            return raw.lower()
        except ValueError:
            pass
    try:
        b = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return raw.lower()
    if len(b) != nbytes:
        return raw.lower()
    return b.hex()


#: What decoding a request that is valid JSON but not valid OTLP raises (a list where an
#: object belongs, a missing ``key``, ``"startTimeUnixNano": "x"``, ...): the caller skips
#: the whole line.  OverflowError: a huge number; RecursionError: absurd nesting.
MALFORMED = (TypeError, KeyError, ValueError, AttributeError, OverflowError, RecursionError)


def _text(v: Any) -> str:
    """A field that must be a string (name, status message); null is the default, ""."""
    if v is None:
        return ""
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return v


def span_time(v: Any) -> int:
    """A span's ``startTimeUnixNano`` or ``endTimeUnixNano`` (:func:`~fma_otel.jsonsafe.ns`),
    :class:`ValueError` when unset: absent, ``null``, ``""`` and ``0`` are all protobuf's
    default, which OTLP says no span has.  Read as 0 it was 1970, and the span lasted
    56 years (a ``T_actuation`` of 29712391.2 minutes beside its ``[0.8, 0.9]`` s interval)."""
    t = ns(v)
    if t == 0:
        raise ValueError("a span without its start or end time")
    return t


def decode_request(req: Mapping[str, Any]) -> list[SpanRecord]:
    """All spans of one request, or one of :data:`MALFORMED` if any part of it is malformed.

    All or nothing, so a reader that skips a bad line never keeps part of it.
    """
    return list(spans_from_request(req))


def spans_from_request(req: Mapping[str, Any]) -> Iterator[SpanRecord]:
    """All spans of one ``ExportTraceServiceRequest`` (or ``TracesData``) in JSON form.

    Lazy: a malformed span raises one of :data:`MALFORMED` only when reached, after the
    spans before it were yielded; use :func:`decode_request` for all-or-nothing.
    """
    for rs in req.get("resourceSpans") or req.get("resource_spans") or ():
        res = attrs_of((rs.get("resource") or {}).get("attributes"))
        service = str(res.get("service.name", ""))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or ():
            for sp in ss.get("spans") or ():
                status = sp.get("status") or {}
                kind = sp.get("kind", 1)
                code = status.get("code", 0)
                yield SpanRecord(
                    trace_id=normalize_id(sp.get("traceId"), 16) or "",
                    span_id=normalize_id(sp.get("spanId"), 8) or "",
                    parent_span_id=normalize_id(sp.get("parentSpanId"), 8),
                    name=_text(sp.get("name")),
                    kind=OTLP_TO_KIND.get(kind, "INTERNAL"),
                    # fixed64 and set: else the line is bad
                    start_ns=span_time(sp.get("startTimeUnixNano")),
                    end_ns=span_time(sp.get("endTimeUnixNano")),
                    service=service,
                    attributes=attrs_of(sp.get("attributes")),
                    status_code=OTLP_TO_STATUS.get(code, STATUS_UNSET),
                    status_message=_text(status.get("message")),
                    resource=res,
                    events=tuple(
                        SpanEvent(
                            _text(e.get("name")), ns(e.get("timeUnixNano")), attrs_of(e.get("attributes"))
                        )
                        for e in sp.get("events") or ()
                    ),
                )


class OtlpJsonError(ValueError):
    """A file that is not OTLP JSON lines."""
