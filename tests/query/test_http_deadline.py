"""An overall deadline per HTTP request: a server that trickles its answer a byte at a time
(each read well under the per-read timeout) must not hold ``slo --jaeger``/``--tempo`` forever;
and an answer bigger than the body cap is a one-line error, not a MemoryError."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.query import QueryError, sources
from fma_otel.query.harvest import Harvest
from fma_otel.query.sources import JaegerSource, TempoSource
from fma_otel.query.stats import build_report
from tests.support.serving import serve_in_thread

from . import fake_servers
from .conftest import mixed_acts
from .test_sources_http import WINDOW

DEADLINE_S = 1.0
MARGIN_S = 5.0  # generous: load must not make the upper bound flaky
BYTE_EVERY_S = 0.2

#: the first request each source makes, and the start of a valid-looking answer to it
FIRST = {
    "jaeger": ("/api/v3/services", b'{"services": [', b'"kubernetes", '),
    "tempo": ("/api/search", b'{"traces": [', b'{"traceID": "1", "rootTraceName": "fma.request"}, '),
}
SOURCES = {"jaeger": JaegerSource, "tempo": TempoSource}


class Trickler:
    """A real HTTP server on 127.0.0.1 that answers 200 with a JSON body that never ends,
    one byte every 0.2 s, until the client goes away or the server stops."""

    def __init__(self, head: bytes, item: bytes) -> None:
        stop = self.stop = threading.Event()
        self.paths: list[str] = []
        outer = self

        def body() -> Iterator[int]:
            yield from head
            for _ in itertools.count():
                yield from item

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer.paths.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # HTTP/1.0, no Content-Length: the body runs until close
                try:
                    for b in body():
                        if stop.wait(BYTE_EVERY_S):
                            return
                        self.wfile.write(bytes([b]))
                        self.wfile.flush()
                except OSError:  # the client disconnected
                    return

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = fake_servers._Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Trickler:
        self.thread = serve_in_thread(self.httpd)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def message(kind: str, url: str) -> str:
    path = FIRST[kind][0]
    return f"--{kind} {url}{path}: no complete answer within the 1 s deadline"


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_trickling_server_meets_the_deadline(kind):
    path, head, item = FIRST[kind]
    with Trickler(head, item) as srv:
        src = SOURCES[kind](srv.url, deadline_s=DEADLINE_S)
        t0 = time.monotonic()
        with pytest.raises(QueryError) as exc:
            src.fill(Harvest(), WINDOW, warn=lambda m: None)
        took = time.monotonic() - t0
        assert srv.paths and srv.paths[0].startswith(path)
    assert DEADLINE_S <= took < DEADLINE_S + MARGIN_S
    assert str(exc.value) == message(kind, srv.url)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_cli_exits_2_with_one_line(kind, monkeypatch):
    monkeypatch.setattr(sources, "DEFAULT_DEADLINE_S", DEADLINE_S)  # what the CLI's sources take
    _, head, item = FIRST[kind]
    with Trickler(head, item) as srv:
        t0 = time.monotonic()
        r = CliRunner().invoke(main, ["slo", f"--{kind}", srv.url, "--since", "1h"])
        took = time.monotonic() - t0
    assert took < DEADLINE_S + MARGIN_S
    assert r.exit_code == 2, r.output
    assert r.stderr == f"fma-otel slo: error: {message(kind, srv.url)}\n"
    assert "Traceback" not in r.output and isinstance(r.exception, SystemExit)


def test_default_deadline_is_a_minute():
    assert sources.DEFAULT_DEADLINE_S == 60.0
    assert JaegerSource("http://localhost:1").deadline_s == 60.0
    assert TempoSource("http://localhost:1", deadline_s=2.5).deadline_s == 2.5


@pytest.mark.slow
@pytest.mark.parametrize("declared", [True, False])
def test_answer_over_the_body_cap_is_a_query_error(declared):
    big = json.dumps({"services": ["s" * 100] * 100}).encode()

    srv = fake_servers.FakeServer(lambda p, q: (200, big))
    if not declared:  # no Content-Length: the cap is met while reading
        handler = srv.httpd.RequestHandlerClass
        orig = handler.send_header
        handler.send_header = lambda self, k, v: None if k == "Content-Length" else orig(self, k, v)
    with srv:
        with pytest.raises(QueryError) as exc:
            JaegerSource(srv.url, max_body=1000).fill(Harvest(), WINDOW, warn=lambda m: None)
    assert str(exc.value) == f"--jaeger {srv.url}/api/v3/services: the answer is larger than 1000 bytes"


@pytest.mark.slow
def test_fast_servers_still_answer_under_a_short_deadline():
    acts = mixed_acts()
    with fake_servers.jaeger(acts) as j, fake_servers.tempo(acts) as t:
        for src in (JaegerSource(j.url, deadline_s=DEADLINE_S), TempoSource(t.url, deadline_s=DEADLINE_S)):
            h = Harvest()
            src.fill(h, WINDOW, warn=lambda m: None)
            assert build_report(h.dataset(WINDOW)).hit_rates.requesters == 20
