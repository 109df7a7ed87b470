"""Issue 23, no secrets from the wrappers: shapes the first 27 cases did not plant.

Found by the adversarial pass of 2026-12-05: a secret that begins with a dash (taken for a
flag and kept verbatim, even after ``--api-key``), a URL in quotes (``urlsplit`` keeps it
whole, userinfo included), userinfo without a scheme (``--host u:p@10.0.0.1``), and any
word after ``--dtype`` (an allowlisted flag).  Each goes through the real launcher wrapper
(the fake launcher, a real create) and is looked for in everything exported; on the code
before this file's fix each of them was exported as planted.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN
from fma_otel.instrument.redact import redact_options
from tests.instrument.conftest import wait_until
from tests.instrument.test_secrets import _create_config, exported_text
from tests.support.otlp_receiver import free_port

CASES: dict[str, tuple[dict[str, Any], str]] = {
    "api-key-dash": ({"extra": "--api-key -AUDITSECRET01"}, "AUDITSECRET01"),
    "hf-token-dash": ({"extra": "--hf-token -AUDITSECRET02x"}, "AUDITSECRET02"),
    "model-quoted-userinfo": ({"model": "'https://u:AUDITSECRET03@hf.example/m'"}, "AUDITSECRET03"),
    "model-dquoted-userinfo": ({"model": '"https://u:AUDITSECRET04@hf.example/m"'}, "AUDITSECRET04"),
    "host-bare-userinfo": ({"extra": "--host u:AUDITSECRET05@10.0.0.1"}, "AUDITSECRET05"),
    "model-bare-userinfo": ({"model": "u:AUDITSECRET06@hf.example/m"}, "AUDITSECRET06"),
    "dtype-word": ({"extra": "--dtype AUDITSECRET07"}, "AUDITSECRET07"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_no_planted_secret_of_a_new_shape_leaves_a_create(instrumented: Any, name: str) -> None:
    tracing, launcher = instrumented
    case, secret = CASES[name]
    port = free_port()
    with TestClient(launcher.app, raise_server_exceptions=False) as client:
        r = client.put("/v2/vllm/instances/inst-a", json=_create_config(port, case))
        assert r.status_code == 201, r.text
        assert wait_until(lambda: tracing.spans(STARTUP_SPAN), 5)
        client.delete("/v2/vllm/instances/inst-a")
    assert tracing.spans(CREATE_SPAN)
    text = exported_text(tracing)
    assert secret not in text
    assert f"--port {port}" in tracing.spans(STARTUP_SPAN)[0].attributes["fma.vllm.options"]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("-tp 2 -O3 -dcp 2 --dtype bfloat16", "-tp 2 -O3 -dcp 2 --dtype bfloat16"),
        ("--api-key -abc123 --port 8000", "--api-key <redacted> --port 8000"),
        ("--host 0.0.0.0 --model org/m", "--host 0.0.0.0 --model org/m"),
        ("--model 'https://u:p@h/m'", "--model 'https://h/m'"),
    ],
)
def test_short_flags_and_names_are_kept(options: str, expected: str) -> None:
    assert redact_options(options)[0] == expected


# ----------------------------------------------------------------------------- DPC side


def test_a_kubernetes_error_body_is_not_copied(tracing: Any) -> None:
    """A 422 from the API server names the invalid value it was sent (here an env value of
    the launcher Pod the DPC creates); the text of the ``ApiException`` carried it into
    ``exception.message`` and ``exception.stacktrace`` (checked to leak before the fix)."""
    from kubernetes.client.rest import ApiException

    from fma_otel.instrument.k8s_client import KubernetesClientWrappers

    body = (
        '{"kind":"Status","status":"Failure","message":"Pod \\"l\\" is invalid: '
        'spec.containers[0].env[0].value: Invalid value: \\"AUDITSECRET20\\"","code":422}'
    )
    exc = ApiException(status=422, reason="Unprocessable Entity", body=body)
    span = tracing.provider.get_tracer("t").start_span("create pods")
    KubernetesClientWrappers()._end(span, None, exc)

    (s,) = tracing.spans()
    (event,) = [e for e in s.events if e.name == "exception"]
    text = repr(dict(event.attributes)) + repr(s.status.description) + repr(dict(s.attributes))
    assert "AUDITSECRET20" not in text
    assert "(422)" in event.attributes["exception.message"]
    assert s.attributes["http.response.status_code"] == 422


@pytest.mark.parametrize(
    "text",
    ["upstream said: Authorization: Bearer AUDITSECRET21", "retry with basic QVVESVRTRUNSRVQyMg=="],
)
def test_an_authorization_credential_in_an_exception_text_is_redacted(text: str) -> None:
    from fma_otel.instrument.redact import scrub_text

    out = scrub_text(text)
    assert "AUDITSECRET21" not in out and "QVVESVRTRUNSRVQyMg" not in out
    assert "<redacted>" in out
