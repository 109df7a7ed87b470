"""``OTEL_PYTHON_FMA_LAUNCHER_EXCLUDED_URLS`` / ``OTEL_PYTHON_EXCLUDED_URLS``: launcher
paths served without spans (``docs/wrappers.md``).  The list is read at install, and its
module (``opentelemetry.util.http``) loaded only when one of them is set
(``test_launcher_memory`` checks that it is not loaded otherwise)."""

from __future__ import annotations

from types import ModuleType

import pytest
from fastapi.testclient import TestClient

from fma_otel.instrument.launcher import CREATE_SPAN, LauncherInstrumentor
from tests.instrument.conftest import Tracing, no_pod
from tests.support.otlp_receiver import free_port


def _requests(client: TestClient) -> None:
    assert client.get("/health").status_code == 200
    assert client.get("/v2/vllm/instances").status_code == 200
    cfg = {"options": f"--model tiny --port {free_port()}"}
    assert client.put("/v2/vllm/instances/ex-1", json=cfg).status_code == 201
    assert client.delete("/v2/vllm/instances/ex-1").status_code == 200


def _server_spans(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tracing: Tracing, fake_launcher: ModuleType
) -> list[str]:
    """The names of the server spans of :func:`_requests`, instrumented with ``env`` set
    (and neither variable otherwise)."""
    monkeypatch.delenv("OTEL_PYTHON_FMA_LAUNCHER_EXCLUDED_URLS", raising=False)
    monkeypatch.delenv("OTEL_PYTHON_EXCLUDED_URLS", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        with TestClient(fake_launcher.app) as client:
            _requests(client)
    finally:
        inst.uninstrument()
    return sorted(s.name for s in tracing.spans() if s.kind.name == "SERVER")


@pytest.mark.parametrize("var", ["OTEL_PYTHON_FMA_LAUNCHER_EXCLUDED_URLS", "OTEL_PYTHON_EXCLUDED_URLS"])
def test_excluded_paths_get_no_span(
    var: str, monkeypatch: pytest.MonkeyPatch, tracing: Tracing, fake_launcher: ModuleType
) -> None:
    names = _server_spans({var: "health,v2/vllm/instances$"}, monkeypatch, tracing, fake_launcher)
    assert names == ["DELETE /v2/vllm/instances/{instance_id}", CREATE_SPAN]


def test_without_the_variables_every_path_gets_its_span(
    monkeypatch: pytest.MonkeyPatch, tracing: Tracing, fake_launcher: ModuleType
) -> None:
    assert _server_spans({}, monkeypatch, tracing, fake_launcher) == [
        "DELETE /v2/vllm/instances/{instance_id}",
        "GET /health",
        "GET /v2/vllm/instances",
        CREATE_SPAN,
    ]
