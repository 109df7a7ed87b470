"""The test servers' handler errors stay out of ``sys.stderr`` (another test may own it)."""

from __future__ import annotations

import http.client
import time
from http.server import BaseHTTPRequestHandler

import pytest

from tests.support.serving import QuietThreadingHTTPServer, serve_in_thread


class _Boom(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        raise RuntimeError("handler failed")

    def log_message(self, *args: object) -> None:
        pass


def test_a_handler_error_is_kept_not_printed(capfd: pytest.CaptureFixture[str]) -> None:
    server = QuietThreadingHTTPServer(("127.0.0.1", 0), _Boom)
    serve_in_thread(server)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.getresponse()
        deadline = time.monotonic() + 5
        while not server.errors and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        server.shutdown()
        server.server_close()
    assert [type(e) for e in server.errors] == [RuntimeError]
    assert "Exception occurred during processing of request" not in capfd.readouterr().err
