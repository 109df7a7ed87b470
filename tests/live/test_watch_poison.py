"""``watch`` with one bad trace among good ones: the others still reach the collector.

Issue 23: one span time out of OTLP's range made every export request that carried it
fail ("Value out of range"), and as the failed trace stayed first in line, every later
trace joined the failing request: export stalled for good.  Now the sink leaves out (and
the watcher records and counts) a trace that cannot be encoded, and a trace the receiver
refuses on its own is retried alone while the others go on.  Real OTLP exporters, to the
in-process gRPC and HTTP receivers.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest

from fma_otel import build
from fma_otel.sinks.otlp_export import ExportError, OtlpSink
from tests.live.replay import (
    InProcessWatcher,
    dpc_pod,
    offline_traces,
    play,
    recent_capture,
    timeline,
    traces_in,
    wait_for,
)
from tests.live.test_watch_export import checkpoint, emitted_ids, pending_ids
from tests.live.test_watch_stream import _complete
from tests.support.k8s_server import FakeCluster


def _metric(w: InProcessWatcher, name: str) -> float:
    for line in w.metrics_text().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_an_unencodable_trace_is_dropped_and_later_traces_still_arrive(
    protocol: str,
    k8s: FakeCluster,
    tmp_path: Path,
    otlp_grpc_receiver,
    otlp_http_receiver,
    clean_otlp_env,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rx = otlp_grpc_receiver if protocol == "grpc" else otlp_http_receiver
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=31)
    want = _complete(offline_traces(cap, tmp_path))
    assert len(want) >= 3
    victim: list[str] = []
    real = build.build_trace

    def poisoning(a: Any) -> list:
        spans = real(a)
        if not victim and spans:  # the first trace built gets a start before 1970
            victim.append(spans[0].trace_id)
            spans = [msgspec.structs.replace(spans[0], start_ns=-1), *spans[1:]]
        return spans

    monkeypatch.setattr(build, "build_trace", poisoning)
    cp = tmp_path / "checkpoint.json"
    w = InProcessWatcher(k8s, tmp_path, otlp_endpoint=rx.endpoint, otlp_protocol=protocol, export_retry_s=0.2)
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: victim and set(want) - set(victim) <= {s.trace_id for s in rx.spans()}, 60)
        assert wait_for(lambda: set(want) <= emitted_ids(cp), 30)  # the victim too: never re-sent
        assert _metric(w, "fma_otel_export_dropped_traces_total") == 1
        assert w.watcher.metrics.export_errors == 0
    assert victim[0] not in {s.trace_id for s in rx.spans()}
    assert victim[0] not in traces_in(tmp_path / "out.jsonl")  # no invalid line in --out either
    assert set(want) - set(victim) <= set(traces_in(tmp_path / "out.jsonl"))
    assert checkpoint(cp)["pending"] == []


class _Refusing:
    """The real sink, except that a request carrying ``victim``'s trace is refused (as a
    collector might refuse one trace for its size); ``victim`` is the first trace sent."""

    def __init__(self, sink: OtlpSink) -> None:
        self.sink = sink
        self.timeout_s = sink.timeout_s
        self.victim: str | None = None
        self.refusing = True
        self.refused_alone = 0
        self._lock = threading.Lock()

    def export(self, spans: list) -> list:
        ids = {s.trace_id for s in spans}
        with self._lock:
            if self.victim is None:
                self.victim = spans[0].trace_id
            if self.refusing and self.victim in ids:
                self.refused_alone += ids == {self.victim}
                raise ExportError("HTTP 413 Request Entity Too Large")
        return self.sink.export(spans)

    def close(self) -> None:
        self.sink.close()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_trace_the_receiver_refuses_is_retried_alone_and_holds_no_other_back(
    protocol: str, k8s: FakeCluster, tmp_path: Path, otlp_grpc_receiver, otlp_http_receiver, clean_otlp_env
) -> None:
    rx = otlp_grpc_receiver if protocol == "grpc" else otlp_http_receiver
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=32)
    want = _complete(offline_traces(cap, tmp_path))
    cp = tmp_path / "checkpoint.json"
    sink = _Refusing(OtlpSink(rx.endpoint, protocol, timeout_s=5))
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2)
    w.watcher.sink = sink
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: sink.victim is not None, 60)
        others = set(want) - {sink.victim}
        assert wait_for(lambda: others <= {s.trace_id for s in rx.spans()}, 60)
        assert wait_for(lambda: sink.refused_alone >= 2, 30)  # retried, alone
        assert _metric(w, "fma_otel_export_isolated_traces") == 1
        assert sink.victim in pending_ids(cp)  # not lost
        sink.refusing = False  # the collector takes it now
        assert wait_for(lambda: sink.victim in {s.trace_id for s in rx.spans()}, 30)
        assert wait_for(lambda: set(want) <= emitted_ids(cp), 30)
        assert _metric(w, "fma_otel_export_isolated_traces") == 0
    spans = rx.spans()
    assert len({(s.trace_id, s.span_id) for s in spans}) == len(spans)  # each trace once


def test_launcher_lines_out_of_the_window_are_counted_not_used() -> None:
    """The watcher's launcher parser: each skip counted in ``/metrics`` as it happens."""
    from fma_otel.live.metrics import Metrics
    from fma_otel.live.watcher import _MeteredStats
    from fma_otel.sources.launcher_log import iter_launcher_log

    lines = [
        b"2026-99-29T13:58:50.0Z 2026-06-29 13:58:50,001 - __main__ - INFO - a bad prefix, first\n",
        b"2026-06-29 13:58:51,078 - __main__ - INFO - Accepted request to create vLLM instance with id=a\n",
        b"1969-06-29 13:58:51,078 - __main__ - INFO - Accepted request to create vLLM instance with id=b\n",
        b"2026-06-29T13:58:52.0Z 2600-06-29 13:58:52,001 - __main__ - INFO - Accepted request id=c\n",
        b"Traceback (most recent call last):\n",  # continues a refused record: skipped too
    ]
    metrics = Metrics()
    stats = _MeteredStats("launcher", lambda: metrics.count("launcher_skipped"))
    recs = list(iter_launcher_log(lines, stats, at_once=True))
    assert [r.message[-4:] for r in recs] == ["id=a"]
    assert metrics.launcher_skipped == stats.skipped == 4
    assert "fma_otel_launcher_lines_skipped_total 4\n" in metrics.render()


def test_a_carriage_return_inside_a_live_launcher_line_ends_a_record() -> None:
    """Line ends as in the bridge's reader: two records a CR separates are two records
    (the second was glued onto the first's message)."""
    from fma_otel.sources.launcher_log import iter_launcher_log
    from fma_otel.sources.records import SourceStats

    a = b"2026-06-29 13:58:51,078 - __main__ - INFO - Accepted request to create vLLM instance with id=a"
    b = b'2026-06-29 13:58:51,090 - uvicorn.access - INFO - 10.0.0.1:5 - "PUT /v2/vllm/instances/a HTTP/1.1" 201'
    recs = list(iter_launcher_log([a + b"\r" + b + b"\n"], SourceStats("launcher"), at_once=True))
    assert [(r.line_no, r.message[-4:]) for r in recs] == [(1, "id=a"), (2, " 201")]


class _Screening:
    """The real sink, as if it found the first trace it is handed unencodable (the way a
    trace read back from --out after a restart reaches it): left out, returned."""

    def __init__(self, sink: OtlpSink) -> None:
        self.sink = sink
        self.timeout_s = sink.timeout_s
        self.victim: str | None = None

    def export(self, spans: list) -> list:
        from fma_otel.sinks.otlp_export import Dropped

        if self.victim is None:
            self.victim = spans[0].trace_id
        rest = [s for s in spans if s.trace_id != self.victim]
        dropped = [Dropped(self.victim, len(spans) - len(rest), "test")] if len(rest) < len(spans) else []
        if rest:
            self.sink.export(rest)
        return dropped

    def close(self) -> None:
        self.sink.close()


@pytest.mark.slow
def test_a_trace_the_sink_leaves_out_is_recorded_and_counted(
    k8s: FakeCluster, tmp_path: Path, otlp_http_receiver, clean_otlp_env
) -> None:
    rx = otlp_http_receiver
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=33)
    want = _complete(offline_traces(cap, tmp_path))
    cp = tmp_path / "checkpoint.json"
    sink = _Screening(OtlpSink(rx.endpoint, "http/protobuf", timeout_s=5))
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2)
    w.watcher.sink = sink
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: sink.victim is not None and set(want) <= emitted_ids(cp), 60)
        assert _metric(w, "fma_otel_export_dropped_traces_total") == 1
    assert set(want) - {sink.victim} <= {s.trace_id for s in rx.spans()}
    assert sink.victim not in {s.trace_id for s in rx.spans()}
    assert checkpoint(cp)["pending"] == []


def test_corrupt_and_cut_dpc_lines_are_counted_in_metrics() -> None:
    """The followed DPC log's parser counts its skips in ``/metrics``, as the launcher's
    does (it parsed with stats nobody read: 0 while the bridge reported 3 on the same lines)."""
    from fma_otel.live.metrics import Metrics
    from fma_otel.live.watcher import log_parser

    good = b'I0629 14:30:23.134293       1 x.go:1] "Successfully relayed the readiness" serverUID="u" readiness="ready"\n'
    lines = [
        good.replace(b"relayed", b"rel\x00ayed"),  # a NUL that hides it from the prefilter
        good.replace(b"readiness=", b"readiness\xff="),  # not UTF-8
        good[: good.index(b"the readiness")] + b"\n",  # cut inside its message
        good,
    ]
    metrics = Metrics()
    recs = list(log_parser("dpc", metrics)(lines))
    assert [r.line_no for r in recs] == [4]
    assert metrics.dpc_skipped == 3
    assert "fma_otel_dpc_lines_skipped_total 3\n" in metrics.render()


@pytest.mark.parametrize("spec", ["a string", 7, [], {"containers": "x"}, {"containers": [1, {"name": "c"}]}])
def test_a_pod_spec_of_the_wrong_type_has_no_container_names(spec) -> None:
    """``spec`` as a string crashed ``capture`` and logged a traceback in ``watch``."""
    from fma_otel import podfacts

    want = ["c"] if isinstance(spec, dict) and isinstance(spec.get("containers"), list) else []
    assert podfacts.container_names({"spec": spec}) == want
