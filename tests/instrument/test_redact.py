"""The redaction rules themselves (``fma_otel.instrument.redact``), case by case."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fma_otel.instrument import redact as R

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("--model tiny --port 8005 --enforce-eager", "--model tiny --port 8005 --enforce-eager"),
        (
            "--max-model-len=4096 --gpu-memory-utilization 0.9",
            "--max-model-len=4096 --gpu-memory-utilization 0.9",
        ),
        ("--swap-space 4GiB --dtype auto", "--swap-space 4GiB --dtype auto"),
        ("--model https://u:pw@hf.co/m?rev=x", "--model https://hf.co/m?rev=<redacted>"),
        ("--api-key 12345", "--api-key <redacted>"),
        ("--hf-token=abc", "--hf-token=<redacted>"),
        ('--hf-overrides {"token": "x", "n": 1} --port 1', "--hf-overrides <redacted> --port 1"),
        ("--download-dir /data/models", "--download-dir <redacted>"),
        ("--quantization awq", "--quantization <redacted>"),
    ],
)
def test_options_keep_only_harmless_values(options: str, expected: str) -> None:
    assert R.redact_options(options)[0] == expected


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # the allowlisted flag is kept although its name says "token" (docs/wrappers.md)
        ("--tokenizer org/tok", "--tokenizer org/tok"),
        ("--tokenizer=org/tok --port 1", "--tokenizer=org/tok --port 1"),
        ("--tokenizer https://u:pw@hf.co/t?rev=x", "--tokenizer https://hf.co/t?rev=<redacted>"),
        # only the exact name: a flag that merely starts or ends like it is not kept
        ("--tokenizer-secret org/tok", "--tokenizer-secret <redacted>"),
        ("--tokenizer-mode slow", "--tokenizer-mode <redacted>"),
        ("--hf-token org/tok", "--hf-token <redacted>"),
        ("--my-tokenizer org/tok", "--my-tokenizer <redacted>"),
        ("--Tokenizer org/tok", "--Tokenizer <redacted>"),
    ],
)
def test_the_allowlist_wins_over_the_secret_name_rule_for_its_exact_names(
    options: str, expected: str
) -> None:
    red, found = R.redact_options(options)
    assert red == expected
    assert ("org/tok" in found) == ("<redacted>" in red and "org/tok" in options)


def test_options_report_what_they_redacted() -> None:
    _, found = R.redact_options('--model https://u:pw1234@h/m --x {"token": "tok5678"}')
    secrets = R.known_secrets(found)
    assert "pw1234" in secrets and "tok5678" in secrets  # JSON leaves too


def test_config_redacts_every_env_value_and_any_annotation() -> None:
    cfg = {
        "options": "--model m --port 1",
        "env_vars": {"A": "1", "B": "value"},
        "annotations": {"isc-name": "isc", "inference-port": "8000", "anything": "zzz"},
        "gpu_uuids": ["GPU-0"],
    }
    red, found = R.redact_config(cfg)
    assert red == {
        "options": "--model m --port 1",
        "env_vars": {"A": "<redacted>", "B": "<redacted>"},
        "annotations": {"isc-name": "isc", "inference-port": "8000", "anything": "<redacted>"},
        "gpu_uuids": ["GPU-0"],
    }
    assert {"value", "zzz"} <= set(found)


def test_urls_in_free_text() -> None:
    text = "GET http://user:pw@h:1/x?api_key=K1&b=2 failed; see https://h/y?token=T2"
    assert (
        R.scrub_urls(text)
        == "GET http://h:1/x?api_key=<redacted>&b=<redacted> failed; see https://h/y?token=<redacted>"
    )
    assert R.redact_query("detail=false&flag") == "detail=<redacted>&<redacted>"


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "Basic", "BASIC", "Token", "TOKEN"])
def test_an_authorization_credential_is_redacted_whatever_the_schemes_case(scheme: str) -> None:
    """An HTTP authorization scheme is case-insensitive (RFC 9110), and so is the rule; the
    literal test before it (that spares the rule most texts) was not: ``BEARER <token>``
    went out unredacted."""
    assert R.scrub_text(f"401 for Authorization: {scheme} abc.DEF-123") == (
        f"401 for Authorization: {scheme} <redacted>"
    )


def test_known_secrets_replace_longest_first() -> None:
    assert R.scrub_text("a=secretvalue b=secret", R.known_secrets(["secret", "secretvalue"])) == (
        "a=<redacted> b=<redacted>"
    )


def test_the_configurator_installs_the_derived_id_generator() -> None:
    """In a fresh interpreter: ``FmaConfigurator`` configures the global provider once,
    built with ``DerivedIdGenerator``; a second call leaves it as it is."""
    code = (
        "from opentelemetry import trace\n"
        "from fma_otel.instrument.configurator import FmaConfigurator\n"
        "FmaConfigurator().configure(); p = trace.get_tracer_provider()\n"
        "FmaConfigurator().configure()\n"
        "print(type(p.id_generator).__name__, trace.get_tracer_provider() is p)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(OTEL_TRACES_EXPORTER="none", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["DerivedIdGenerator", "True"]


def test_a_provider_without_it_is_warned_about_once(caplog: pytest.LogCaptureFixture) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from fma_otel.instrument._common import TracerSource

    provider = TracerProvider()
    with caplog.at_level("WARNING", logger="fma_otel.instrument"):
        TracerSource(provider).get()
        TracerSource(provider).get()
    assert len([r for r in caplog.records if "DerivedIdGenerator" in r.getMessage()]) == 1
