"""OTLP JSON lines: the embedded default output, and the reader every query uses.

One ``ExportTraceServiceRequest`` per line in the protobuf JSON mapping as OTLP/JSON
specifies it (hex ``traceId``/``spanId``, 64-bit integers as strings, enums as numbers):
the format the OpenTelemetry Collector's ``file`` exporter writes and its ``otlpjsonfile``
receiver reads, so a file written here can be replayed into any collector.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

from .. import __version__
from ..jsonsafe import ns
from ..lines import MAX_TRACE_LINE_BYTES, TooLong, bounded_lines
from ..model import STATUS_ERROR, STATUS_OK, STATUS_UNSET, SpanRecord, resource_attributes

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


@functools.lru_cache(maxsize=65536)
def _key_value(k: str, _type: type, v: Any) -> dict[str, Any]:
    # ``_type`` keeps 1, 1.0 and True apart (equal as cache keys); the result is shared
    # between spans and must never be mutated (json.dumps only reads it)
    return {"key": k, "value": any_value(v)}


def key_values(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Attributes as OTLP ``KeyValue`` s; the same pair recurs on every span of a trace, so
    scalar pairs are encoded once (profiled: a fifth of the bridge was this encoding)."""
    out = []
    for k, v in attrs.items():
        if isinstance(v, (list, tuple, dict)):
            out.append({"key": k, "value": any_value(v)})
        else:
            out.append(_key_value(k, type(v), v))
    return out


def span_to_json(s: SpanRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": s.trace_id,
        "spanId": s.span_id,
        "name": s.name,
        "kind": KIND_TO_OTLP.get(s.kind, 1),
        "startTimeUnixNano": str(s.start_ns),
        "endTimeUnixNano": str(s.end_ns),
        "attributes": key_values(s.attributes),
        "status": {"code": STATUS_TO_OTLP[s.status_code]},
    }
    if s.parent_span_id:
        out["parentSpanId"] = s.parent_span_id
    if s.status_message:
        out["status"]["message"] = s.status_message
    return out


def export_request(spans: Iterable[SpanRecord]) -> dict[str, Any]:
    """Group spans by resource into one ``ExportTraceServiceRequest`` (JSON form)."""
    groups: dict[tuple[tuple[str, Any], ...], list[SpanRecord]] = {}
    for s in spans:
        res = s.resource or resource_attributes(s.service)
        groups.setdefault(tuple(sorted(res.items())), []).append(s)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values(dict(res))},
                "scopeSpans": [
                    {
                        "scope": {"name": SCOPE_NAME, "version": __version__},
                        "spans": [span_to_json(s) for s in group],
                    }
                ],
            }
            for res, group in groups.items()
        ]
    }


# The text encoder below writes, for the fixed shape of a span, exactly the bytes that
# ``json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)`` writes
# (profiled: building the dicts and encoding them was a third of the bridge).  Strings go
# through json's own C escaper; anything unusual goes through ``json.dumps`` itself.
#
# Where the time goes, and so the shape of the code: a bridge span has ~14 attributes, and
# most pairs recur, on every span of a trace (requester, launcher, node) or in every trace
# (path, namespace, instant sources).  So the text of a whole ``{"key":..,"value":..}``
# pair is cached by the pair for the exact classes ``str``, ``int`` and ``bool``; the
# type check comes first because equal values of other classes (``1``, ``1.0``, ``True``,
# an ``IntEnum``, a ``str`` subclass with its own ``__str__``) encode differently.  Every
# other value takes the general path, which is the dict encoder's own code.

_esc = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]
_isfinite = math.isfinite


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _js(x: Any) -> str:
    """``x`` as json.dumps writes it (a ``str`` escaped in C)."""
    return _esc(x) if x.__class__ is str else _dumps(x)


#: Bounds of the caches below: a long capture must not grow them without limit (each
#: holds short strings; a full cache is emptied, and refills with what recurs).
_CACHE_MAX = 1 << 16

_KEY_TEXT: dict[str, str] = {}  # key -> '{"key":<key>,"value":'
_FLOAT_HEAD: dict[str, str] = {}  # key -> '{"key":<key>,"value":{"doubleValue":'
_STR_PAIR: dict[tuple[str, str], str] = {}  # (key, str value) -> the pair's text
_INT_PAIR: dict[tuple[str, int], str] = {}  # (key, int value) -> the pair's text
_BOOL_PAIR: dict[tuple[str, bool], str] = {}  # (key, bool value) -> the pair's text
_NAME_TEXT: dict[str, str] = {}  # span name -> its JSON string


def _cached(cache: dict[Any, str], key: Any, text: str) -> str:
    if len(cache) >= _CACHE_MAX:
        cache.clear()
    cache[key] = text
    return text


def _key_text(k: str) -> str:
    """``{"key":<k>,"value":`` for a ``str`` key (cached: keys recur on every span)."""
    return _KEY_TEXT.get(k) or _cached(_KEY_TEXT, k, '{"key":' + _esc(k) + ',"value":')


def _float_head(k: str) -> str:
    return _cached(_FLOAT_HEAD, k, _key_text(k) + '{"doubleValue":')


def _pair_text(k: Any, v: Any) -> str:
    """One attribute pair as text, and into its cache if it has one: what
    ``_attributes_text`` does when its caches have no answer."""
    t = v.__class__
    if k.__class__ is str:
        if t is str:
            return _cached(_STR_PAIR, (k, v), _key_text(k) + '{"stringValue":' + _esc(v) + "}}")
        if t is int:
            return _cached(_INT_PAIR, (k, v), _key_text(k) + '{"intValue":"' + int.__repr__(v) + '"}}')
        if t is bool:
            return _cached(
                _BOOL_PAIR, (k, v), _key_text(k) + ('{"boolValue":true}}' if v else '{"boolValue":false}}')
            )
        if t is float:
            if v and _isfinite(v):
                return _float_head(k) + float.__repr__(v) + "}}"
            # zero and non-finite: through the dict encoder's cache (which hands a -0.0
            # the text of an equal 0.0 encoded before it, and back; the same here)
            d = _key_value(k, t, v)["value"]["doubleValue"]
            return _float_head(k) + (float.__repr__(d) if d.__class__ is float else _esc(d)) + "}}"
    if isinstance(v, (list, tuple, dict)):
        return _dumps({"key": k, "value": any_value(v)})
    return _dumps(_key_value(k, t, v))


def _attributes_text(attrs: Mapping[str, Any]) -> str:
    """``<pair>,<pair>,...`` (no brackets): the writer's hot loop, shaped by the comment above."""
    out = []
    append = out.append
    str_pair, float_head, isfinite, float_repr = _STR_PAIR, _FLOAT_HEAD, _isfinite, float.__repr__
    for k, v in attrs.items():
        t = v.__class__
        if k.__class__ is not str:
            append(_pair_text(k, v))
        elif t is str:
            append(str_pair.get((k, v)) or _pair_text(k, v))
        elif t is float and v and isfinite(v):
            append((float_head.get(k) or _float_head(k)) + float_repr(v) + "}}")
        elif t is bool:
            append(_BOOL_PAIR.get((k, v)) or _pair_text(k, v))
        elif t is int:
            append(_INT_PAIR.get((k, v)) or _pair_text(k, v))
        else:
            append(_pair_text(k, v))
    return ",".join(out)


@functools.lru_cache(maxsize=1024)
def _resource_head(res: tuple[tuple[str, str], ...]) -> str:
    return (
        '{"resource":{"attributes":'
        + _dumps(key_values(dict(res)))
        + '},"scopeSpans":[{"scope":'
        + _dumps({"name": SCOPE_NAME, "version": __version__})
        + ',"spans":['
    )


_KIND_TEXT = {k: str(v) for k, v in KIND_TO_OTLP.items()}
_STATUS_TEXT = {k: str(v) for k, v in STATUS_TO_OTLP.items()}
_MESSAGE = ',"message":'
_PARENT = ',"parentSpanId":'


def _name_text(name: str) -> str:
    """A span name's JSON string, into the cache (a bridge has a dozen names)."""
    return _cached(_NAME_TEXT, name, _esc(name))


def _str_body(x: Any) -> str:
    """``str(x)`` as a JSON string, without its quotes (the dict encoder writes times as
    ``str(ns)``; an ``int``'s needs no escaping and does not come here)."""
    return _esc(str(x))[1:-1]


def _append_spans(parts: list[str], group: list[SpanRecord]) -> None:
    """Append the spans of one resource to ``parts``, as text, comma-separated.

    One f-string per span.  The ids go through ``json``'s C escaper (a hex id needs no
    escaping, but checking that costs as much as escaping); the trace id once for the
    spans that share it; ``str(ns)`` of an ``int`` needs no escaping at all.
    """
    append = parts.append
    trace_id: Any = parts  # not any span's trace id
    head = ""
    separator = ""
    esc, attributes_text = _esc, _attributes_text
    name_text, kind_text, status_text = _NAME_TEXT, _KIND_TEXT, _STATUS_TEXT
    for s in group:
        if s.trace_id is not trace_id:
            trace_id = s.trace_id
            head = '{"traceId":' + _js(trace_id) + ',"spanId":'
        span_id, name, start, end = s.span_id, s.name, s.start_ns, s.end_ns
        message, parent = s.status_message, s.parent_span_id
        append(
            f"{separator}{head}{esc(span_id) if span_id.__class__ is str else _dumps(span_id)}"
            f',"name":{(name_text.get(name) or _name_text(name)) if name.__class__ is str else _dumps(name)}'
            f',"kind":{kind_text.get(s.kind, "1")}'
            f',"startTimeUnixNano":"{start if start.__class__ is int else _str_body(start)}"'
            f',"endTimeUnixNano":"{end if end.__class__ is int else _str_body(end)}"'
            f',"attributes":[{attributes_text(s.attributes)}]'
            f',"status":{{"code":{status_text[s.status_code]}'
            f"{_MESSAGE + _js(message) if message else ''}}}"
            f"{_PARENT + _js(parent) if parent else ''}}}"
        )
        separator = ","


def _request_parts(spans: Iterable[SpanRecord]) -> list[str]:
    """The text of ``export_request(spans)`` in pieces, for one join (see below)."""
    groups: dict[tuple[tuple[str, Any], ...], list[SpanRecord]] = {}
    # the sorted items of each resource mapping, by its id: the spans of a trace share a
    # few (the builder's, the decoder's); the spans keep them alive, so no id is reused
    sorted_items: dict[int, tuple[tuple[str, Any], ...]] = {}
    for s in spans:
        res = s.resource
        if res:
            key = sorted_items.get(id(res))
            if key is None:
                key = sorted_items[id(res)] = tuple(sorted(res.items()))
        else:
            key = tuple(sorted(resource_attributes(s.service).items()))
        group = groups.get(key)
        if group is None:
            groups[key] = [s]
        else:
            group.append(s)
    parts = ['{"resourceSpans":[']
    separator = ""
    for res, group in groups.items():
        if all(k.__class__ is str and v.__class__ is str for k, v in res):
            head = _resource_head(res)
        else:
            head = (
                '{"resource":{"attributes":'
                + _dumps(key_values(dict(res)))
                + '},"scopeSpans":[{"scope":'
                + _dumps({"name": SCOPE_NAME, "version": __version__})
                + ',"spans":['
            )
        parts.append(separator + head)
        _append_spans(parts, group)
        parts.append("]}]}")
        separator = ","
    parts.append("]}")
    return parts


def export_request_text(spans: Iterable[SpanRecord]) -> str:
    """``json.dumps(export_request(spans), separators=(",", ":"), allow_nan=False)``, faster."""
    return "".join(_request_parts(spans))


def write_trace_line(out: IO[str], spans: Iterable[SpanRecord]) -> None:
    """Write one trace (or any batch of spans) as one line of strict JSON (no bare NaN)."""
    parts = _request_parts(spans)
    parts.append("\n")
    out.write("".join(parts))


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
                    start_ns=ns(sp.get("startTimeUnixNano")),  # fixed64: else the line is bad
                    end_ns=ns(sp.get("endTimeUnixNano")),
                    service=service,
                    attributes=attrs_of(sp.get("attributes")),
                    status_code=OTLP_TO_STATUS.get(code, STATUS_UNSET),
                    status_message=_text(status.get("message")),
                    resource=res,
                )


class OtlpJsonError(ValueError):
    """A file that is not OTLP JSON lines."""


def read_spans(
    path: str, stats: dict[str, int] | None = None, advance: Callable[[int], None] | None = None
) -> Iterator[SpanRecord]:
    """Stream spans from an OTLP JSON lines file.

    Bad lines are counted in ``stats['skipped']`` (never fatal): not JSON, not an object
    with ``resourceSpans``, or valid JSON that is malformed OTLP anywhere in it (the whole
    line is skipped, never part of it).  A file with no good line at all raises
    :class:`OtlpJsonError` so the CLI can say "wrong kind of file".  ``advance`` is told
    the bytes of every line read (a progress bar).
    """
    st = stats if stats is not None else {}
    st.setdefault("lines", 0)
    st.setdefault("skipped", 0)
    good = 0
    with open(path, "rb") as fh:
        for raw in bounded_lines(fh, MAX_TRACE_LINE_BYTES):
            if advance is not None:
                advance(int(raw) if raw.__class__ is TooLong else len(raw))
            if raw.__class__ is TooLong:
                st["lines"] += 1
                st["skipped"] += 1  # never held, never decoded (lines.py)
                continue
            if not raw.strip():
                continue
            st["lines"] += 1
            try:
                req = json.loads(raw)
            except (ValueError, RecursionError):
                st["skipped"] += 1
                continue
            if not isinstance(req, dict) or not ("resourceSpans" in req or "resource_spans" in req):
                st["skipped"] += 1
                continue
            try:
                spans = decode_request(req)
            except MALFORMED:
                st["skipped"] += 1
                continue
            good += 1
            yield from spans
    if st["lines"] and not good:
        raise OtlpJsonError(f"{path}: not OTLP JSON lines (no line holds resourceSpans)")
