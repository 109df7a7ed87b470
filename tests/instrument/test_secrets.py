"""No planted secret leaves the wrappers: 27 cases, each planted once, looked for in every
exported attribute, event attribute and status message.

The secrets sit where a list of secret-looking names does not look: URL userinfo inside
vLLM options, JSON-valued options, annotations under any name, query strings on the
launcher's SERVER spans and on DPC-side httpx spans, and exception messages that embed
the whole config.  The redaction is by rule (``fma_otel.instrument.redact``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN
from tests.instrument.conftest import Tracing, wait_until
from tests.support.otlp_receiver import free_port


def exported_text(tracing: Tracing) -> str:
    """Everything a span carries out: attributes, events (names and attributes), status."""
    parts = []
    for s in tracing.spans():
        parts.append(repr(dict(s.attributes or {})))
        parts += [f"{e.name} {dict(e.attributes or {})!r}" for e in s.events]
        parts.append(repr(s.status.description))
    return "\n".join(parts)


# ----------------------------------------------------------------------------- the create

#: (case, what the create carries: extra options, env_vars, annotations, query) -> the
#: secret planted in it.
CREATE_CASES: dict[str, tuple[dict[str, Any], str]] = {
    "model-userinfo": ({"model": "https://user:SECRET01@hf.example/org/m"}, "SECRET01"),
    "otlp-endpoint-userinfo": ({"extra": "--otlp-traces-endpoint https://u:SECRET02@c:4318"}, "SECRET02"),
    "json-option-spaced": ({"extra": '--hf-overrides {"token": "SECRET03", "n": 1}'}, "SECRET03"),
    "json-option-quoted": ({"extra": '--hf-overrides \'{"hf_token":"SECRET04"}\''}, "SECRET04"),
    "api-key": ({"extra": "--api-key SECRET05"}, "SECRET05"),
    "hf-token-equals": ({"extra": "--hf-token=SECRET06"}, "SECRET06"),
    "unknown-flag": ({"extra": "--brand-new-flag SECRET07"}, "SECRET07"),
    "model-query": ({"model": "https://hf.example/m?token=SECRET08"}, "SECRET08"),
    "served-name-userinfo": ({"extra": "--served-model-name https://a:SECRET09@x/y"}, "SECRET09"),
    "path-value": ({"extra": "--download-dir /mnt/SECRET10/models"}, "SECRET10"),
    "env-token": ({"env": {"HF_TOKEN": "SECRET11"}}, "SECRET11"),
    "env-any-name": ({"env": {"WHATEVER": "SECRET12"}}, "SECRET12"),
    "annotation-any-name": ({"annotations": {"my-annotation": "SECRET13"}}, "SECRET13"),
    "annotation-json": (
        {"annotations": {"dual-pods.llm-d.ai/vllm-config": '{"options": "--api-key SECRET14"}'}},
        "SECRET14",
    ),
    "annotation-url": ({"annotations": {"note": "https://u:SECRET15@h/x"}}, "SECRET15"),
    "positional-model-userinfo": ({"positional": "https://u:SECRET16@h/model"}, "SECRET16"),
    "create-query-api-key": ({"query": "api_key=SECRET17"}, "SECRET17"),
    "raise-env": ({"raise": True, "env": {"K": "SECRET23"}}, "SECRET23"),
    "raise-api-key": ({"raise": True, "extra": "--api-key SECRET24"}, "SECRET24"),
    "raise-json-option": ({"raise": True, "extra": '--hf-overrides {"token": "SECRET25"}'}, "SECRET25"),
    "raise-annotation": ({"raise": True, "annotations": {"x-note": "SECRET26"}}, "SECRET26"),
}


def _create_config(port: int, case: dict[str, Any]) -> dict[str, Any]:
    options = " ".join(
        p
        for p in (
            case.get("positional", ""),
            f"--model {case.get('model', 'tiny')}",
            f"--port {port} --fake-health-delay 0",
            case.get("extra", ""),
            "--fake-raise-config" if case.get("raise") else "",
        )
        if p
    )
    return {
        "options": options,
        "env_vars": case.get("env", {"VLLM_LOGGING_LEVEL": "DEBUG"}),
        "annotations": {"inference-port": str(port), "isc-name": "example", **case.get("annotations", {})},
    }


@pytest.mark.parametrize("name", list(CREATE_CASES))
def test_no_planted_secret_leaves_a_create(instrumented: Any, name: str) -> None:
    tracing, launcher = instrumented
    case, secret = CREATE_CASES[name]
    port = free_port()
    query = f"?{case['query']}" if "query" in case else ""
    with TestClient(launcher.app, raise_server_exceptions=False) as client:
        r = client.put(f"/v2/vllm/instances/inst-s{query}", json=_create_config(port, case))
        if case.get("raise"):
            assert r.status_code == 500
        else:
            assert r.status_code == 201, r.text
            assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
            client.delete("/v2/vllm/instances/inst-s")
    (create,) = tracing.spans(CREATE_SPAN)
    text = exported_text(tracing)
    assert secret not in text
    if case.get("raise"):  # the exception was recorded, scrubbed, not dropped
        (event,) = [e for e in create.events if e.name == "exception"]
        assert "<redacted>" in event.attributes["exception.message"]
        assert "cannot start inst-s" in event.attributes["exception.message"]
        assert "<redacted>" in (create.status.description or "")
    else:
        (startup,) = tracing.spans(STARTUP_SPAN)
        options = startup.attributes["fma.vllm.options"]
        assert f"--port {port}" in options  # harmless values are kept
        assert "<redacted>" in options or "<redacted>" in startup.attributes["fma.vllm.config"] or query


# ----------------------------------------------------------------------------- other requests


@pytest.mark.parametrize(
    ("path", "secret"),
    [("/v2/vllm/instances?token=SECRET18", "SECRET18"), ("/health?x=SECRET19", "SECRET19")],
    ids=["list-query-token", "health-query"],
)
def test_no_query_value_on_a_launcher_server_span(instrumented: Any, path: str, secret: str) -> None:
    tracing, launcher = instrumented
    with TestClient(launcher.app) as client:
        assert client.get(path).status_code == 200
    (span,) = [s for s in tracing.spans() if s.attributes.get("url.query")]
    assert span.attributes["url.query"].endswith("=<redacted>")
    assert secret not in exported_text(tracing)


# ----------------------------------------------------------------------------- DPC-side httpx


@pytest.fixture
def httpx_traced(tracing: Tracing) -> Iterator[Tracing]:
    inst = HttpxDpcInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, skip_dep_check=True)
    yield tracing
    inst.uninstrument()


def _client(fail: bool = False) -> httpx.Client:
    def handler(req: httpx.Request) -> httpx.Response:
        if fail:  # an error whose text names the URL, as many do
            raise httpx.ConnectError(f"cannot reach {req.url}", request=req)
        return httpx.Response(200, json={})

    return httpx.Client(transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("url", "secret", "fail"),
    [
        ("http://10.0.0.1:8001/v2/vllm/instances?api_key=SECRET20", "SECRET20", False),
        ("http://user:SECRET21@10.0.0.1:8001/health", "SECRET21", False),
        ("http://10.0.0.1:8005/is_sleeping?token=SECRET22", "SECRET22", False),
        ("http://10.0.0.1:8005/is_sleeping?token=SECRET27", "SECRET27", True),
    ],
    ids=["api-key-query", "userinfo", "token-query", "exception-names-the-url"],
)
def test_no_secret_on_an_httpx_span(httpx_traced: Tracing, url: str, secret: str, fail: bool) -> None:
    with _client(fail) as client:
        if fail:
            with pytest.raises(httpx.ConnectError):
                client.get(url)
        else:
            client.get(url)
    (span,) = httpx_traced.spans()
    assert secret not in exported_text(httpx_traced)
    full = span.attributes["url.full"]
    assert "@" not in full and ("?" not in url or full.endswith("=<redacted>"))
    if fail:
        (event,) = [e for e in span.events if e.name == "exception"]
        assert "cannot reach" in event.attributes["exception.message"]


def test_the_cases_are_27() -> None:
    assert len(CREATE_CASES) + 2 + 4 == 27
