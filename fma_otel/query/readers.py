"""One reader for every trace file the CLI reads (``show``, ``slo``, ``report``).

Why one: people hand these commands whatever their tools wrote.  Accepted here, told apart
by content, never by file name:

- OTLP JSON lines: one ``ExportTraceServiceRequest`` per line (the bridge, the
  collector's ``file`` exporter), streamed line by line;
- pretty-printed OTLP JSON: a whole file that is one indented request, several in a row,
  or a JSON array of them;
- Jaeger's JSON: the UI's "Download JSON" and the v1 API answer (``{"data": [trace,
  ...]}``, µs times, ``tags``, ``references``, ``processes``), and the api/v3 answer (OTLP
  JSON under ``result``); Tempo's by-id answer (``{"trace": ...}``, ``batches``) too.

Everything becomes OTLP JSON requests, decoded by the one span decoder
(:func:`fma_otel.sinks.otlp_json.decode_request`).
``-`` is standard input.  A unit (a line, or a document) that is not trace data is
counted in ``stats["skipped"]``; input with units but not one good is
:class:`~fma_otel.sinks.otlp_json.OtlpJsonError`, so the CLI can say "wrong kind of file".
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

import msgspec

from ..jsonsafe import ns
from ..lines import MAX_TRACE_LINE_BYTES, TooLong, bounded_lines
from ..sinks.otlp_json import MALFORMED, OtlpJsonError, decode_request, key_values
from ..span_records import SpanRecord

Advance = Callable[[int], None]

#: a unit that is not JSON at all
_BAD = object()
_DECODE = msgspec.json.Decoder().decode

#: Jaeger's ``span.kind`` tag -> OTLP's SpanKind number
_KINDS = {"internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
#: Jaeger tags that OTLP carries elsewhere (kind, status, scope), not as attributes
_SPECIAL_TAGS = frozenset(
    {
        "span.kind",
        "otel.status_code",
        "otel.status_description",
        "error",
        "internal.span.format",
        "otel.scope.name",
        "otel.scope.version",
        "otel.library.name",
        "otel.library.version",
    }
)


def _values(fh: IO[bytes], advance: Advance | None) -> Iterator[Any]:
    """The JSON values of the input: one per line, or the whole-file documents.

    The first non-blank line decides: JSON on its own means lines; else, when it opens an
    object or array, the rest is read and decoded as one or more documents in a row (a
    pretty-printed file).  Should that fail at its very start, the text is taken as lines
    after all, so a lines file whose first line is broken still yields its good lines.
    """
    units = _units(fh, advance)
    for first in units:
        if first is not _BAD:
            break
        yield _BAD
    else:
        return
    value = _loads(first)
    if value is not _BAD or first.lstrip()[:1] not in (b"{", b"["):
        yield value
        yield from (u if u is _BAD else _loads(u) for u in units)
        return
    rest = fh.read()
    if advance is not None:
        advance(len(rest))
    text = (first + rest).decode("utf-8", "replace")
    docs = _documents(text)
    if docs is None:
        for line in text.splitlines():
            if line.strip():
                yield _loads(line.encode())
        return
    yield from docs


def _units(fh: IO[bytes], advance: Advance | None) -> Iterator[Any]:
    """The non-blank lines, and ``_BAD`` for each line too long to read."""
    for raw in bounded_lines(fh, MAX_TRACE_LINE_BYTES):
        if advance is not None:
            advance(int(raw) if raw.__class__ is TooLong else len(raw))
        if raw.__class__ is TooLong:
            yield _BAD
        elif raw.strip():
            yield raw


def _loads(raw: bytes) -> Any:
    """One unit's JSON value, or ``_BAD``.  ``msgspec`` first (reading a big file is mostly
    this call); it keeps integers past 64 bits whole, and what it refuses that the standard
    library takes (a bare ``NaN``, ``1e400``, a lone surrogate escape, a byte-order mark,
    deep nesting) goes to ``json``: the values read are the standard library's."""
    try:
        return _DECODE(raw)
    except (msgspec.DecodeError, RecursionError):
        pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting too deep
        return _BAD


def _documents(text: str) -> list[Any] | None:
    """The JSON documents written one after another in ``text``; ``None`` when the first
    does not decode; a later broken one ends the list with one ``_BAD``."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return out
        try:
            value, i = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            if not out:
                return None
            out.append(_BAD)
            return out
        out.append(value)


def requests_of(value: Any) -> list[dict[str, Any]] | None:
    """The OTLP JSON requests one JSON value holds, or ``None`` when it holds no trace data.

    Raises one of :data:`~fma_otel.sinks.otlp_json.MALFORMED` for a Jaeger trace that is
    malformed where it is converted.
    """
    if isinstance(value, list):
        found = [requests_of(v) for v in value]
        if not any(f is not None for f in found):
            return None
        return [r for f in found if f for r in f]
    if not isinstance(value, dict):
        return None
    if "resourceSpans" in value or "resource_spans" in value:
        return [value]
    if isinstance(value.get("batches"), list):  # Tempo's older by-id answer
        return [{"resourceSpans": value["batches"]}]
    if value.get("spans"):  # Jaeger: a trace's id may be on its spans alone
        return [jaeger_trace_to_otlp(value)]
    for key in ("result", "trace", "data"):  # Jaeger api/v3, Tempo by-id, Jaeger v1 / UI
        if key in value:
            return requests_of(value[key])
    return None


def _tag_value(tag: Mapping[str, Any]) -> Any:
    kind = str(tag.get("type", "string")).lower()
    v = tag.get("value")
    if kind == "bool":
        return v if isinstance(v, bool) else str(v).lower() == "true"
    if kind == "int64":
        return int(v)
    if kind == "float64":
        return float(v)
    return "" if v is None else str(v)


def _hex(raw: Any, digits: int) -> str:
    text = str(raw or "").lower()
    int(text or "0", 16)  # not hex: ValueError, the trace is malformed
    return text.zfill(digits)


def jaeger_trace_to_otlp(trace: Mapping[str, Any]) -> dict[str, Any]:
    """One Jaeger JSON trace (UI download / v1 API) as an OTLP JSON request.

    Spans are grouped by process (``processID``, or an inline ``process``), whose
    ``serviceName`` and tags become the resource.  ``startTime``/``duration`` are µs;
    the parent is the ``CHILD_OF`` reference (else the first); ``span.kind``,
    ``otel.status_code``/``error`` and ``otel.status_description`` become kind and status.
    """
    processes = trace.get("processes") or {}
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for sp in trace["spans"]:
        pid = sp.get("processID")
        proc = sp.get("process") or processes.get(pid) or {}
        key = str(pid) if pid is not None else json.dumps(proc, sort_keys=True)
        if key not in groups:
            res = {"service.name": str(proc.get("serviceName", ""))}
            res.update({str(t["key"]): _tag_value(t) for t in proc.get("tags") or ()})
            groups[key] = ({"attributes": key_values(res)}, [])
        groups[key][1].append(_jaeger_span(sp))
    return {
        "resourceSpans": [
            {"resource": res, "scopeSpans": [{"scope": {}, "spans": spans}]} for res, spans in groups.values()
        ]
    }


def _jaeger_span(sp: Mapping[str, Any]) -> dict[str, Any]:
    tags = {str(t["key"]): _tag_value(t) for t in sp.get("tags") or ()}
    refs = [r for r in sp.get("references") or () if isinstance(r, dict)]
    parent_ref = next((r for r in refs if r.get("refType") == "CHILD_OF"), refs[0] if refs else None)
    parent = parent_ref.get("spanID") if parent_ref else sp.get("parentSpanID")
    start = ns(int(sp["startTime"]) * 1000)
    end = ns(start + int(sp.get("duration") or 0) * 1000)
    status = str(tags.get("otel.status_code", "")).upper()
    code = (
        2 if status == "ERROR" or (not status and tags.get("error") is True) else 1 if status == "OK" else 0
    )
    out: dict[str, Any] = {
        "traceId": _hex(sp["traceID"], 32),
        "spanId": _hex(sp["spanID"], 16),
        "name": str(sp.get("operationName", "")),
        "kind": _KINDS.get(str(tags.get("span.kind", "internal")).lower(), 1),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": key_values({k: v for k, v in tags.items() if k not in _SPECIAL_TAGS}),
        "status": {"code": code, "message": str(tags.get("otel.status_description", ""))},
    }
    if parent and str(parent).strip("0"):
        out["parentSpanId"] = _hex(parent, 16)
    return out


def skipped_note(path: str, stats: Mapping[str, int]) -> str | None:
    """The warning ``show``, ``slo`` and ``report`` give on stderr when :func:`read_spans`
    skipped units of ``path`` (``None`` when it skipped none): one wording, so a script or a
    person reading any of them sees the same thing."""
    skipped = stats.get("skipped", 0)
    if not skipped:
        return None
    return (
        f"{path}: skipped {skipped} of {stats.get('lines', 0)} lines that are not (well-formed) "
        "OTLP JSON or Jaeger JSON"
    )


def read_spans(
    path: str, stats: dict[str, int] | None = None, advance: Advance | None = None
) -> Iterator[SpanRecord]:
    """The spans in ``path`` (``-``: stdin), whatever the accepted format.

    ``stats["lines"]`` counts units read (lines, or documents), ``stats["skipped"]`` those
    that are not trace data and the requests that are malformed (each skipped whole).
    Raises :class:`OSError` for an unreadable file and :class:`OtlpJsonError` when there
    were units but none held (well-formed) trace data.
    """
    st = stats if stats is not None else {}
    st.setdefault("lines", 0)
    st.setdefault("skipped", 0)
    units = decoded = 0
    with contextlib.nullcontext(sys.stdin.buffer) if path == "-" else open(path, "rb") as fh:
        for value in _values(fh, advance):
            st["lines"] += 1
            try:
                reqs = None if value is _BAD else requests_of(value)
            except MALFORMED:
                reqs = None
            if reqs is None:
                st["skipped"] += 1
                continue
            units += 1
            for req in reqs:
                try:
                    spans = decode_request(req)
                except MALFORMED:
                    st["skipped"] += 1
                    continue
                decoded += 1
                yield from spans
    if st["lines"] and not units:
        raise OtlpJsonError(f"{path}: not OTLP JSON or Jaeger JSON (no resourceSpans, no Jaeger trace)")
    if st["lines"] and not decoded:
        raise OtlpJsonError(f"{path}: no well-formed OTLP JSON or Jaeger JSON trace in it")
