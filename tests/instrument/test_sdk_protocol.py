"""The wrappers' own SDK set-up: which OTLP protocol, and the :4317 warning."""

from __future__ import annotations

import logging

import pytest

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
    ],
)
def test_protocol_default_is_http_and_the_variables_win(env: dict[str, str], want: str) -> None:
    assert _sdk.otlp_protocol(env) == want


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
