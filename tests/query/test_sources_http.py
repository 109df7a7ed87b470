"""The remote sources against local servers that answer like Jaeger and Tempo."""

from __future__ import annotations

import pytest

from fma_otel.model import HOT
from fma_otel.query import QueryError
from fma_otel.query.harvest import Harvest
from fma_otel.query.sources import FileSource, JaegerSource, TempoSource
from fma_otel.query.stats import build_report
from fma_otel.query.window import Window, from_ns

from . import fake_servers
from .conftest import mixed_acts
from .gen import BASE_NS, S, hot, write

pytestmark = pytest.mark.slow

WINDOW = Window(from_ns(BASE_NS - 3600 * S), from_ns(BASE_NS + 3600 * S))


def remote_report(src):
    h = Harvest()
    src.fill(h, WINDOW, warn=lambda m: None)
    return build_report(h.dataset(WINDOW))


def file_report(tmp_path, acts):
    h = Harvest()
    FileSource(write(str(tmp_path / "t.jsonl"), acts)).fill(h, WINDOW)
    return build_report(h.dataset(WINDOW))


def many_hot(n: int, root_service: str = "kubernetes"):
    return [hot(f"m{i}", 1.0 + i, start_s=7.0 * i, root_service=root_service) for i in range(n)]


def test_jaeger_v3_matches_file(tmp_path):
    acts = mixed_acts()
    with fake_servers.jaeger(acts) as srv:
        rep = remote_report(JaegerSource(srv.url))
        assert srv.calls("/api/v3/traces"), "used api/v3"
        q = srv.calls("/api/v3/traces")[0]
        assert q["query.operation_name"] == "fma.request"
        assert q["query.start_time_min"].endswith("Z") and q["query.start_time_max"].endswith("Z")
    assert rep.rows == file_report(tmp_path, acts).rows
    assert rep.hit_rates.requesters == 20


def test_jaeger_v3_paginates_by_splitting_the_window(tmp_path):
    acts = many_hot(25)
    with fake_servers.jaeger(acts) as srv:
        rep = remote_report(JaegerSource(srv.url, limit=10))
        assert len(srv.calls("/api/v3/traces")) > 3
    (row,) = [r for r in rep.rows if r.metric == "T_actuation"]
    assert row.n == 25 and rep.hit_rates.hot == 1.0


def test_jaeger_finds_roots_under_any_service(tmp_path):
    acts = many_hot(3, root_service="someone-else")
    with fake_servers.jaeger(acts) as srv:
        rep = remote_report(JaegerSource(srv.url))
        assert {q["query.service_name"] for q in srv.calls("/api/v3/traces")} == {"someone-else"}
    assert rep.hit_rates.requesters == 3


def test_jaeger_empty_is_empty_report():
    with fake_servers.jaeger([]) as srv:
        rep = remote_report(JaegerSource(srv.url))
    assert rep.rows == [] and rep.hit_rates.requesters == 0


def test_jaeger_v1_fallback(tmp_path):
    acts = mixed_acts()
    with fake_servers.jaeger(acts, v3=False) as srv:
        src = JaegerSource(srv.url, limit=4)
        rep = remote_report(src)
        assert src.api == "v1" and len(srv.calls("/api/traces")) > 1
    want = file_report(tmp_path, acts)
    assert [(r.metric, r.path, r.n, r.p50, r.p99, r.incomplete) for r in rep.rows] == [
        (r.metric, r.path, r.n, r.p50, r.p99, r.incomplete) for r in want.rows
    ]
    assert rep.hit_rates == want.hit_rates


def test_tempo_search_then_trace_by_id_with_base64_ids(tmp_path):
    acts = mixed_acts()
    with fake_servers.tempo(acts) as srv:
        rep = remote_report(TempoSource(srv.url))
        search = srv.calls("/api/search")[0]
        assert search["q"] == '{ name = "fma.request" }'
        assert search["start"].isdigit() and search["end"].isdigit()
        assert len(srv.calls("/api/v2/traces/")) == len(acts)
    assert rep.rows == file_report(tmp_path, acts).rows


def test_tempo_paginates_and_falls_back_to_v1_by_id():
    acts = many_hot(30)
    with fake_servers.tempo(acts, v2=False) as srv:
        rep = remote_report(TempoSource(srv.url, limit=7))
        assert len(srv.calls("/api/search")) > 4
        assert len(srv.calls("/api/v2/traces/")) == 1  # tried once, then the v1 path
    row = next(r for r in rep.rows if r.metric == "T_actuation" and r.path == HOT)
    assert row.n == 30


def test_server_errors_are_query_errors():
    with fake_servers.FakeServer(lambda p, q: (500, {"error": {"message": "boom"}})) as srv:
        with pytest.raises(QueryError, match="HTTP 500: boom"):
            remote_report(TempoSource(srv.url))


def test_unreachable_and_bad_urls():
    with pytest.raises(QueryError, match="not an http"):
        JaegerSource("localhost:16686")
    with fake_servers.FakeServer(lambda p, q: (200, {})) as srv:
        url = srv.url
    with pytest.raises(QueryError, match="--jaeger"):
        remote_report(JaegerSource(url))
