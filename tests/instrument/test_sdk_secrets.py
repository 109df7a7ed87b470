"""The wrappers' SDK set-up logs no credential: not an entry of an invalid
``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`` (the exporter's own warning quoted it, bearer
token and all), not the user part or query of the endpoint; and such a list never stops
the host process from running, traced."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from fma_otel import otlp_env
from fma_otel.instrument import _sdk
from tests.instrument.test_sdk_protocol import _clear, _no_proxy, rx_spans
from tests.support.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver

SECRET = "s3cretH"
BAD_HEADERS = f"x-tenant=fma,authorization=Bearer {SECRET};x"
SAYS = (
    "fma-otel: {var} is not a valid header list: entry 2 of 2 not name=value with a URL-encoded "
    "value (the value is not shown); exporting without the invalid entries"
)


@pytest.mark.slow
@pytest.mark.parametrize("var", [otlp_env.ENV_HEADERS, otlp_env.ENV_TRACES_HEADERS])
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_invalid_header_list_is_one_line_without_its_value(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, protocol: str, var: str
) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    _clear(monkeypatch)
    _no_proxy(monkeypatch)
    for name in (otlp_env.ENV_HEADERS, otlp_env.ENV_TRACES_HEADERS):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(var, BAD_HEADERS)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    with GrpcOtlpReceiver() if protocol == "grpc" else HttpOtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        with caplog.at_level(logging.DEBUG):
            exp = _sdk._exporter("otlp")
        try:
            logged = [r.getMessage() for r in caplog.records]
            assert not [m for m in logged if SECRET in m]
            assert [m for m in logged if var in m] == [SAYS.format(var=var)]
            # and it goes on: the valid entry is sent, the invalid one is not
            assert exp.export(rx_spans()) == SpanExportResult.SUCCESS
            assert rx.headers[0]["x-tenant"] == "fma" and "authorization" not in rx.headers[0]
        finally:
            exp.shutdown()


_HOST = """
from opentelemetry import trace
from fma_otel.instrument._sdk import ensure_sdk
assert ensure_sdk()
trace.get_tracer("t").start_span("fma.host").end()
trace.get_tracer_provider().shutdown()
print("host went on")
"""


@pytest.mark.slow
def test_a_host_process_with_an_invalid_header_list_runs_traced() -> None:
    """As in the launcher: stderr shows one line without the value, the span arrives."""
    with HttpOtlpReceiver() as rx:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and "PROXY" not in k.upper()}
        env |= {otlp_env.ENV_HEADERS: BAD_HEADERS, otlp_env.ENV_ENDPOINT: rx.endpoint}
        p = subprocess.run([sys.executable, "-c", _HOST], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.strip() == "host went on"
        assert SECRET not in p.stderr
        assert p.stderr.splitlines() == [SAYS.format(var=otlp_env.ENV_HEADERS)]
        assert [s.name for s in rx.wait_for(1)] == ["fma.host"]


@pytest.mark.parametrize(
    "url",
    [
        "http://user:s3cretPW@collector:4317",
        "http://collector:4317/?api_key=s3cretK",
        "s3cretT@collector:4317",
    ],
)
def test_the_grpc_port_warning_shows_no_endpoint_credentials(url: str) -> None:
    msg = _sdk.grpc_port_warning({otlp_env.ENV_ENDPOINT: url})
    assert msg is not None and "collector:4317" in msg
    assert "s3cret" not in msg and "<redacted>" in msg
