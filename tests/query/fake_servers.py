"""In-process HTTP servers that answer like Jaeger's query service and like Tempo.

Shapes follow the projects' documentation (see ``docs/explore.md`` for the endpoints):
Jaeger api/v3 answers OTLP JSON under ``result`` with hex ids and 404 "No traces found"
for an empty search, and requires a service name and both start-time bounds; Jaeger's v1
``/api/traces`` answers ``{"data": [...]}`` with microsecond times and typed tags; Tempo's
``/api/search`` answers ``{"traces": [...]}`` with hex ids (leading zeros trimmed) and its
trace-by-id endpoints answer OTLP JSON with base64 ids (``/api/v2/traces`` wrapped in
``trace``, the older ``/api/traces`` as ``batches``).  Each server truncates searches at
the requested limit, so clients must split their windows to see everything.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from fma_otel.model import ROOT
from fma_otel.sinks.otlp_json import export_request
from tests.support.serving import QuietThreadingHTTPServer, serve_in_thread

from .gen import Act, spans_of

Route = Callable[[str, dict[str, str]], tuple[int, Any]]


class _Server(QuietThreadingHTTPServer):
    request_queue_size = 128  # clients fetch in parallel; the default 5 drops SYNs (1 s retries)


class FakeServer:
    """A ThreadingHTTPServer on 127.0.0.1, an ephemeral port, in a daemon thread."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.log: list[tuple[str, dict[str, str]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                u = urlparse(self.path)
                q = {k: v[-1] for k, v in parse_qs(u.query).items()}
                outer.log.append((u.path, q))
                status, body = outer.route(unquote(u.path), q)
                # bytes go out as they are: a test can answer with what json.dumps never writes
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> FakeServer:
        self.thread = serve_in_thread(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def calls(self, path_prefix: str) -> list[dict[str, str]]:
        return [q for p, q in self.log if p.startswith(path_prefix)]


def _traces(acts: Iterable[Act]) -> list[dict[str, Any]]:
    return [export_request(spans_of(a)) for a in acts]


def _spans(req: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    for rs in req["resourceSpans"]:
        svc = next(
            kv["value"]["stringValue"] for kv in rs["resource"]["attributes"] if kv["key"] == "service.name"
        )
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                yield svc, sp


def _rfc3339_ns(text: str) -> int:
    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(t.timestamp()) * 1_000_000_000 + t.microsecond * 1000


def _err(code: int, msg: str) -> tuple[int, Any]:
    return code, {"error": {"httpCode": code, "message": msg}}


# --------------------------------------------------------------------------- Jaeger


def jaeger(acts: Iterable[Act], v3: bool = True) -> FakeServer:
    traces = _traces(acts)

    def matching(service: str, op: str, lo: int, hi: int, limit: int) -> list[dict[str, Any]]:
        found = [
            t
            for t in traces
            if any(
                s == service and sp["name"] == op and lo <= int(sp["startTimeUnixNano"]) <= hi
                for s, sp in _spans(t)
            )
        ]
        found.sort(key=lambda t: -min(int(sp["startTimeUnixNano"]) for _, sp in _spans(t)))  # newest first
        return found[:limit]

    services = sorted({s for t in traces for s, _ in _spans(t)})

    def ops(service: str) -> list[str]:
        return sorted({sp["name"] for t in traces for s, sp in _spans(t) if s == service})

    def route(path: str, q: dict[str, str]) -> tuple[int, Any]:
        if path.startswith("/api/v3/"):
            if not v3:
                return 404, {"error": "404 page not found"}
            if path == "/api/v3/services":
                return 200, {"services": services}
            if path == "/api/v3/operations":
                return 200, {"operations": [{"name": o, "spanKind": ""} for o in ops(q.get("service", ""))]}
            if path == "/api/v3/traces":
                if "query.service_name" not in q:
                    return _err(400, "service name is required")
                if "query.start_time_min" not in q or "query.start_time_max" not in q:
                    return _err(400, "start time min and max are required parameters")
                lo, hi = _rfc3339_ns(q["query.start_time_min"]), _rfc3339_ns(q["query.start_time_max"])
                depth = int(q.get("query.search_depth") or q.get("query.num_traces") or 100)
                found = matching(q["query.service_name"], q.get("query.operation_name", ""), lo, hi, depth)
                if not found:
                    return _err(404, "No traces found")
                return 200, {"result": {"resourceSpans": [rs for t in found for rs in t["resourceSpans"]]}}
            return 404, {}
        if v3:
            return 404, {}
        if path == "/api/services":
            return 200, {"data": services, "total": len(services), "limit": 0, "offset": 0, "errors": None}
        if path.startswith("/api/services/") and path.endswith("/operations"):
            return 200, {"data": ops(path.split("/")[3]), "errors": None}
        if path == "/api/traces":
            lo, hi = int(q["start"]) * 1000, int(q["end"]) * 1000
            found = matching(q["service"], q.get("operation", ""), lo, hi, int(q.get("limit", 20)))
            return 200, {
                "data": [_v1_trace(t) for t in found],
                "total": 0,
                "limit": 0,
                "offset": 0,
                "errors": None,
            }
        return 404, {}

    return FakeServer(route)


def _v1_tag(kv: dict[str, Any]) -> dict[str, Any]:
    v = kv["value"]
    if "boolValue" in v:
        return {"key": kv["key"], "type": "bool", "value": v["boolValue"]}
    if "intValue" in v:
        return {"key": kv["key"], "type": "int64", "value": int(v["intValue"])}
    if "doubleValue" in v:
        return {"key": kv["key"], "type": "float64", "value": v["doubleValue"]}
    return {"key": kv["key"], "type": "string", "value": v.get("stringValue", "")}


def _v1_trace(req: dict[str, Any]) -> dict[str, Any]:
    procs: dict[str, str] = {}
    spans = []
    for svc, sp in _spans(req):
        pid = procs.setdefault(svc, f"p{len(procs) + 1}")
        start, end = int(sp["startTimeUnixNano"]), int(sp["endTimeUnixNano"])
        refs = (
            [{"refType": "CHILD_OF", "traceID": sp["traceId"], "spanID": sp["parentSpanId"]}]
            if sp.get("parentSpanId")
            else []
        )
        spans.append(
            {
                "traceID": sp["traceId"],
                "spanID": sp["spanId"],
                "operationName": sp["name"],
                "references": refs,
                "startTime": start // 1000,
                "duration": (end - start) // 1000,
                "tags": [_v1_tag(kv) for kv in sp["attributes"]],
                "logs": [],
                "processID": pid,
                "warnings": None,
            }
        )
    tid = spans[0]["traceID"]
    return {
        "traceID": tid,
        "spans": spans,
        "processes": {pid: {"serviceName": svc, "tags": []} for svc, pid in procs.items()},
        "warnings": None,
    }


# --------------------------------------------------------------------------- Tempo


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def _tempo_body(req: dict[str, Any]) -> list[dict[str, Any]]:
    out = json.loads(json.dumps(req["resourceSpans"]))
    for rs in out:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if sp.get(k):
                        sp[k] = _b64(sp[k])
    return out


def tempo(acts: Iterable[Act], v2: bool = True) -> FakeServer:
    traces = {}
    for t in _traces(acts):
        root = next(sp for _, sp in _spans(t) if sp["name"] == ROOT)
        traces[root["traceId"]] = (t, root)

    def route(path: str, q: dict[str, str]) -> tuple[int, Any]:
        if path == "/api/search":
            if f'name = "{ROOT}"' not in q.get("q", ""):
                return 400, {"error": "unexpected query"}
            lo, hi = int(q["start"]) * 1_000_000_000, int(q["end"]) * 1_000_000_000
            limit = int(q.get("limit", 20))
            hits = [
                {
                    "traceID": tid.lstrip("0"),
                    "rootServiceName": "kubernetes",
                    "rootTraceName": ROOT,
                    "startTimeUnixNano": root["startTimeUnixNano"],
                    "durationMs": (int(root["endTimeUnixNano"]) - int(root["startTimeUnixNano"]))
                    // 1_000_000,
                    "spanSets": [
                        {
                            "spans": [
                                {"spanID": root["spanId"], "startTimeUnixNano": root["startTimeUnixNano"]}
                            ],
                            "matched": 1,
                        }
                    ],
                }
                for tid, (_t, root) in traces.items()
                if lo <= int(root["startTimeUnixNano"]) <= hi
            ]
            return 200, {"traces": hits[:limit], "metrics": {"inspectedTraces": len(traces)}}
        for prefix in ("/api/v2/traces/", "/api/traces/"):
            if path.startswith(prefix):
                if prefix == "/api/v2/traces/" and not v2:
                    return 404, {"error": "404 page not found"}
                tid = path[len(prefix) :].lower().zfill(32)
                if tid not in traces:
                    return 404, {"error": "trace not found"}
                body = _tempo_body(traces[tid][0])
                return 200, (
                    {"trace": {"resourceSpans": body}} if prefix == "/api/v2/traces/" else {"batches": body}
                )
        return 404, {}

    return FakeServer(route)
