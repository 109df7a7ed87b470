"""Shared pytest fixtures (generic ones only; each test module keeps its own specifics).

The OTLP receivers run in-process on ephemeral ports so export tests need no collector.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver


@pytest.fixture
def otlp_grpc_receiver() -> Iterator[GrpcOtlpReceiver]:
    """A running OTLP/gRPC receiver; ``.endpoint`` is ``http://127.0.0.1:<port>``."""
    with GrpcOtlpReceiver() as rx:
        yield rx


@pytest.fixture
def otlp_http_receiver() -> Iterator[HttpOtlpReceiver]:
    """A running OTLP/HTTP receiver; ``.endpoint`` is the base URL, ``.traces_url`` the full."""
    with HttpOtlpReceiver() as rx:
        yield rx


@pytest.fixture
def clean_otlp_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ``OTEL_*`` variable from the developer's shell leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    return monkeypatch
