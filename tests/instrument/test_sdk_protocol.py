"""The wrappers' own SDK set-up: which OTLP protocol, and the :4317 warning."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fma_otel import otlp_env
from fma_otel.instrument import _sdk


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": ""}, "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": " grpc "}, "grpc"),
        (
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
            "http/protobuf",
        ),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": " ", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"),
    ],
)
def test_protocol_default_is_http_and_the_variables_win(env: dict[str, str], want: str) -> None:
    assert otlp_env.protocol(env) == want


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector.observability:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c:4317/v1/traces"},
    ],
)
def test_grpc_port_without_protocol_is_named(env: dict[str, str]) -> None:
    msg = _sdk.grpc_port_warning(env)
    assert msg is not None
    endpoint = next(iter(env.values()))
    assert msg.startswith(f"fma-otel: OTLP endpoint {endpoint} is on port 4317 (OTLP/gRPC)")
    assert "OTEL_EXPORTER_OTLP_PROTOCOL=grpc" in msg and "4318" in msg


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        },
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:notaport"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://[::1"},
    ],
)
def test_no_warning_when_the_choice_is_explicit_or_not_grpcs_port(env: dict[str, str]) -> None:
    assert _sdk.grpc_port_warning(env) is None


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"},
        {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "c:4317", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": " ", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
    ],
)
def test_cli_sink_and_wrappers_follow_one_rule(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """The bridge's CLI, its OTLP sink and the wrappers pick the same protocol from the same
    variables, and warn about port 4317 in the same cases."""
    import click
    from click.testing import CliRunner

    from fma_otel.commands import params
    from fma_otel.sinks import otlp_export

    _clear(monkeypatch)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    @click.command("probe")
    @params.otlp_options
    def probe(otlp_endpoint: str | None, otlp_protocol: str) -> None:
        click.echo(otlp_protocol)

    r = CliRunner().invoke(probe, [], prog_name="fma-otel probe")
    assert r.exit_code == 0, r.output
    wrappers = "http/protobuf" if otlp_env.protocol(env).startswith("http") else "grpc"
    assert r.stdout.strip() == otlp_export.resolve_protocol(None) == wrappers
    assert ("4317" in r.stderr) == (_sdk.grpc_port_warning(env) is not None)


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ):
        monkeypatch.delenv(name, raising=False)


def test_exporter_is_otlp_http_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _clear(monkeypatch)
    exp = _sdk._exporter("otlp")
    try:
        assert isinstance(exp, OTLPSpanExporter)
    finally:
        exp.shutdown()


def test_exporter_is_grpc_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    _clear(monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    exp = _sdk._exporter("otlp")
    try:
        assert isinstance(exp, OTLPSpanExporter)
    finally:
        exp.shutdown()


def test_exporter_warns_for_grpc_port(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    with caplog.at_level(logging.WARNING, logger="fma_otel.instrument"):
        _sdk._exporter("otlp").shutdown()
    assert [r.getMessage() for r in caplog.records if "4317" in r.getMessage()] == [
        _sdk.grpc_port_warning({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    ]


# --------------------------------------------------------------------------- transport


def _transport_name(exp: object) -> str:
    return type(exp._client._transport).__name__  # type: ignore[attr-defined]


def _built_transport() -> str:
    """The transport class ``_exporter`` gives the HTTP exporter under the current env."""
    exp = _sdk._exporter("otlp")
    try:
        return _transport_name(exp)
    finally:
        exp.shutdown()


def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, "http://localhost:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "http://c:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces"),
        (
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t/x",
            },
            "http://t/x",
        ),
    ],
)
def test_http_endpoint_follows_the_exporter(env: dict[str, str], want: str) -> None:
    assert _sdk.http_endpoint(env) == want


def test_http_exporter_uses_urllib3_not_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    _no_proxy(monkeypatch)
    assert _built_transport() == "Urllib3HTTPTransport"


@pytest.mark.slow
def test_wrapped_process_never_imports_requests(tmp_path: Path) -> None:
    """The point of the urllib3 transport: ``requests`` stays out of the launcher; and with
    no proxy variable, so does ``urllib.request`` (read only to apply a proxy)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and "PROXY" not in k.upper()}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9"
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "1"  # its exit gives up on the absent collector soon
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    code = (
        "import sys, fma_otel.auto\n"
        "from opentelemetry import trace\n"
        "trace.get_tracer('t').start_span('x').end()\n"
        "trace.get_tracer_provider().force_flush(2000)\n"
        "print('requests' in sys.modules, 'urllib3' in sys.modules, 'urllib.request' in sys.modules,\n"
        "      'click' in sys.modules, 'fma_otel.sinks' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "True", "False", "False", "False"], out.stderr


@pytest.mark.parametrize("name", ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"])
def test_any_proxy_variable_is_still_seen(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    _no_proxy(monkeypatch)
    url = f"{name[:-6].lower()}://collector.example:4318/v1/traces"
    assert not _sdk.proxy_applies(url)
    monkeypatch.setenv(name, "http://proxy.example:3128")
    assert _sdk.proxy_applies(url)
    monkeypatch.setenv("no_proxy", "collector.example")
    assert not _sdk.proxy_applies(url)


def test_proxied_endpoint_keeps_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    _no_proxy(monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector.example:4318")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert _built_transport() == "RequestsHTTPTransport"
    monkeypatch.setenv("NO_PROXY", "collector.example")
    assert _built_transport() == "Urllib3HTTPTransport"


def test_tls_settings_reach_the_transport(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ca, crt, key = (tmp_path / n for n in ("ca.pem", "c.pem", "k.pem"))
    env = {
        "OTEL_EXPORTER_OTLP_CERTIFICATE": str(ca),
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "",
        "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": str(crt),
        "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": str(key),
    }
    kw = _sdk.light_transport(env)._pool.connection_pool_kw
    assert (kw["cert_reqs"], kw["ca_certs"], kw["cert_file"], kw["key_file"]) == (
        "CERT_REQUIRED",
        str(ca),
        str(crt),
        str(key),
    )
    kw = _sdk.light_transport({})._pool.connection_pool_kw
    assert kw["cert_reqs"] == "CERT_REQUIRED" and "ca_certs" not in kw and "cert_file" not in kw


@pytest.mark.slow
def test_light_exporter_against_a_real_receiver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spans, headers, a failing collector (no exception, FAILURE) and a dead one."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

    from tests.support.otlp_receiver import HttpOtlpReceiver, free_port

    _clear(monkeypatch)
    _no_proxy(monkeypatch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=fma,authorization=Bearer%20t")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    with HttpOtlpReceiver() as rx:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.endpoint)
        exp = _sdk._exporter("otlp")
        assert _transport_name(exp) == "Urllib3HTTPTransport"
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exp))
        provider.get_tracer("t").start_span("fma.test", attributes={"k": "v"}).end()
        (span,) = rx.wait_for(1)
        assert (span.name, span.attributes["k"]) == ("fma.test", "v")
        assert rx.headers[0]["x-tenant"] == "fma"
        assert rx.headers[0]["authorization"] == "Bearer t"
        assert rx.headers[0]["content-type"] == "application/x-protobuf"
        rx.fail_with = 503
        started = time.monotonic()
        assert exp.export(rx_spans()) == SpanExportResult.FAILURE
        assert time.monotonic() - started < 5
        assert rx.calls >= 2  # the first call and at least one retry
        rx.fail_with = None
        assert exp.export(rx_spans()) == SpanExportResult.SUCCESS
        provider.shutdown()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    dead = _sdk._exporter("otlp")
    try:
        assert dead.export(rx_spans()) == SpanExportResult.FAILURE
    finally:
        dead.shutdown()


def rx_spans() -> list[object]:
    """One finished SDK span to hand an exporter directly."""
    from opentelemetry.sdk.trace import TracerProvider

    span = TracerProvider().get_tracer("t").start_span("fma.direct")
    span.end()
    return [span]
