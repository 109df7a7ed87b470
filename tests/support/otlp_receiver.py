"""In-process OTLP receivers for tests: gRPC and HTTP, with switchable faults.

Why not a real collector: tests must run in seconds on a machine with no services, and
they need to see exactly what arrived (ids, resources, headers) and to make the receiver
fail on purpose.  Both receivers bind 127.0.0.1 on an ephemeral port, keep every
``ExportTraceServiceRequest`` they are sent, and convert what they got into
:class:`~fma_otel.span_records.SpanRecord` through the same reader the OTLP JSON files use, so a
test compares like with like.

Faults (set on a running receiver, take effect on the next request):

- ``fail_with``: a gRPC status name (``"UNAVAILABLE"``) or an HTTP status (``503``) to
  answer instead of accepting; ``None`` to accept again.
- ``delay_s``: sleep this long before answering (a slow receiver).

Usage::

    with GrpcOtlpReceiver() as rx:
        sink = OtlpSink(rx.endpoint, "grpc")
        ...
        assert rx.spans()[0].name == "fma.request"
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from fma_otel.sinks.otlp_json import spans_from_request
from fma_otel.span_records import SpanRecord
from tests.support.serving import QuietThreadingHTTPServer, serve_in_thread

ExportTraceServiceRequest = trace_service_pb2.ExportTraceServiceRequest


class _Base:
    """What both receivers share: the collected requests, headers and fault switches."""

    endpoint: str

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        #: one dict (lowercased keys) per request, in the same order as ``requests``
        self.headers: list[dict[str, str]] = []
        self.fail_with: str | int | None = None
        self.delay_s: float = 0.0
        self.calls = 0  # every request, accepted or not (retries show up here)
        self._lock = threading.Lock()
        #: set by ``stop``: a slow answer still pending ends at once, so no thread outlives it
        self._stopping = threading.Event()
        self._received = threading.Condition(self._lock)

    def _record(self, req: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        with self._received:
            self.requests.append(req)
            self.headers.append(headers)
            self._received.notify_all()

    def _count_call(self) -> None:
        with self._lock:
            self.calls += 1

    def spans(self) -> list[SpanRecord]:
        """Every span received so far, as SpanRecords (ids in lowercase hex)."""
        with self._lock:
            reqs = list(self.requests)
        out: list[SpanRecord] = []
        for req in reqs:
            out.extend(spans_from_request(json_format.MessageToDict(req)))
        return out

    def wait_for(self, n_spans: int, timeout_s: float = 5.0) -> list[SpanRecord]:
        """Wait until at least ``n_spans`` spans arrived (exporters are synchronous, but
        a test that exports from another thread needs this); return them."""
        deadline = time.monotonic() + timeout_s
        with self._received:
            while sum(
                len(ss.spans) for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans
            ) < (n_spans):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._received.wait(left)
        return self.spans()

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.calls = 0

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --------------------------------------------------------------------------- gRPC


class GrpcOtlpReceiver(_Base):
    """OTLP/gRPC TraceService on 127.0.0.1:<ephemeral>; ``endpoint`` is ``http://host:port``."""

    def __init__(self) -> None:
        super().__init__()
        self._server: Any = None
        self._pool: Any = None
        self.port = 0

    def start(self) -> GrpcOtlpReceiver:
        import grpc

        receiver = self

        class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 (gRPC name)
                receiver._count_call()
                if receiver.delay_s:
                    receiver._stopping.wait(receiver.delay_s)
                if receiver.fail_with is not None:
                    code = getattr(grpc.StatusCode, str(receiver.fail_with).upper())
                    context.abort(code, f"test receiver answers {code.name}")
                md = {k.lower(): v for k, v in context.invocation_metadata() if isinstance(v, str)}
                receiver._record(request, md)
                return trace_service_pb2.ExportTraceServiceResponse()

        self._stopping.clear()
        self._pool = futures.ThreadPoolExecutor(max_workers=4)
        self._server = grpc.server(self._pool)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.stop(grace=0).wait(5)
            self._server = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


# --------------------------------------------------------------------------- HTTP


class HttpOtlpReceiver(_Base):
    """OTLP/HTTP ``POST /v1/traces`` (protobuf or JSON) on 127.0.0.1:<ephemeral>.

    ``endpoint`` is the base URL (``http://127.0.0.1:port``); ``traces_url`` the full one.
    """

    def __init__(self) -> None:
        super().__init__()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def traces_url(self) -> str:
        return f"{self.endpoint}/v1/traces"

    def start(self) -> HttpOtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def _answer(self, code: int, body: bytes = b"", ctype: str = "application/x-protobuf") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    self.close_connection = True

            def do_POST(self) -> None:  # noqa: N802 (http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver._count_call()
                if receiver.delay_s:
                    receiver._stopping.wait(receiver.delay_s)
                if self.path.split("?")[0] != "/v1/traces":
                    return self._answer(404, b"not found", "text/plain")
                if receiver.fail_with is not None:
                    return self._answer(int(receiver.fail_with), b"test receiver error", "text/plain")
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
                req = ExportTraceServiceRequest()
                try:
                    if ctype == "application/json":
                        json_format.Parse(body, req, ignore_unknown_fields=True)
                    elif ctype == "application/x-protobuf":
                        req.ParseFromString(body)
                    else:
                        return self._answer(415, b"unsupported content type", "text/plain")
                except Exception:  # malformed body: answer like a collector would
                    return self._answer(400, b"bad request", "text/plain")
                receiver._record(req, {k.lower(): v for k, v in self.headers.items()})
                if ctype == "application/json":
                    return self._answer(200, b"{}", "application/json")
                return self._answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

        self._stopping.clear()
        self._server = QuietThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = serve_in_thread(self._server, "otlp-http-rx")
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """A port nobody listens on right now (for "receiver is down" tests)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def otlp_receiver(protocol: str) -> Iterator[_Base]:
    """A started receiver for ``"grpc"`` or ``"http/protobuf"`` (or ``"http"``)."""
    rx: _Base = GrpcOtlpReceiver() if protocol == "grpc" else HttpOtlpReceiver()
    with rx:
        yield rx
