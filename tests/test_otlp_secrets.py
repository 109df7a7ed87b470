"""No credential in what the OTLP export says: not a header value from the environment,
not the user part or query of an endpoint URL (``fma-otel bridge`` as a user runs it)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import otlp_env
from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.sinks.otlp_export import ExportError, OtlpSink
from tests.support.otlp_receiver import free_port

SECRET = "s3cretH"
#: invalid: ``;`` may not appear in a value, so the SDK logs the entry and drops it
BAD_HEADERS = f"x-tenant=fma,authorization=Bearer {SECRET};x"

_BRIDGE = """
import sys
from fma_otel import cli
sys.argv[0] = "fma-otel"
cli.run()
"""


def _sample_copy(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(sample_dir(), d)
    return d


def _bridge_process(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The bridge in a process of its own: the SDK's warnings reach stderr as for a user
    (under pytest they would go to its log capture instead)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", _BRIDGE, "bridge", str(_sample_copy(tmp_path)), "-q", *args],
        capture_output=True,
        text=True,
        env={**base, **env},
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize("variable", [otlp_env.ENV_HEADERS, otlp_env.ENV_TRACES_HEADERS])
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_invalid_header_list_is_exit_2_naming_the_variable_not_its_value(
    tmp_path, variable, protocol, otlp_grpc_receiver, otlp_http_receiver
) -> None:
    """It printed the SDK's ``Header format invalid! ...: authorization=Bearer s3cretH;x``
    and exported without the header."""
    rx = otlp_grpc_receiver if protocol == "grpc" else otlp_http_receiver
    p = _bridge_process(
        tmp_path, {variable: BAD_HEADERS}, "--otlp-endpoint", rx.endpoint, "--otlp-protocol", protocol
    )
    assert SECRET not in p.stderr + p.stdout
    assert p.stderr.splitlines() == [
        f"fma-otel bridge: error: {variable} is not a valid header list: entry 2 of 2 not "
        "name=value with a URL-encoded value (the value is not shown)"
    ]
    assert p.returncode == 2
    assert rx.calls == 0  # refused before anything was sent


def test_the_traces_header_variable_is_the_one_checked(clean_otlp_env) -> None:
    """The exporters take the traces variable when it is set (not empty), else the generic one."""
    clean_otlp_env.setenv(otlp_env.ENV_HEADERS, BAD_HEADERS)
    clean_otlp_env.setenv(otlp_env.ENV_TRACES_HEADERS, "x-tenant=fma")
    OtlpSink("http://127.0.0.1:4318", "http/protobuf").close()  # the generic one is not used
    clean_otlp_env.setenv(otlp_env.ENV_TRACES_HEADERS, "")
    with pytest.raises(ExportError, match=f"^{otlp_env.ENV_HEADERS} is not a valid header list"):
        OtlpSink("http://127.0.0.1:4318", "http/protobuf")


@pytest.mark.parametrize(
    "value",
    [
        "a=b,c=d",
        " a = b , c=d ",
        "authorization=Bearer%20t",
        "authorization=Bearer t",  # a space is accepted (the exporters read liberally)
        "a=b=c",
        "k=",
        "a=b,,c=d",
        BAD_HEADERS,
        "token",
        "=v",
        "a=b\tc",
        "a=é",
        'a="b"',
        "a=b\\c",
        "a b=c",
        "a=b,\n,c=d",
        " ",
        "a=b\n",
        "a:b=c",
    ],
)
def test_the_header_rule_is_the_sdks(value: str, caplog) -> None:
    """The check refuses exactly what the installed SDK's public parser drops with a warning."""
    from opentelemetry.util.re import parse_env_headers

    with caplog.at_level(logging.WARNING):
        parse_env_headers(value, liberal=True)  # as both OTLP trace exporters call it
    sdk_drops = any(r.levelno >= logging.WARNING for r in caplog.records)
    problem = otlp_env.header_list_problem({otlp_env.ENV_HEADERS: value})
    assert (problem is not None) == sdk_drops, (value, problem)
    if problem:
        assert SECRET not in problem and "value is not shown" in problem


@pytest.mark.parametrize(
    ("protocol", "url"),
    [
        ("http/protobuf", "http://user:s3cretPW@127.0.0.1:{port}"),
        ("http/protobuf", "http://127.0.0.1:{port}/v1/traces?api_key=s3cretK"),
        ("grpc", "http://user:s3cretPW@127.0.0.1:{port}"),
        ("grpc", "http://s3cretTOKEN@127.0.0.1:{port}"),
    ],
)
def test_export_failure_does_not_echo_endpoint_credentials(protocol, url, short_otlp_timeout) -> None:
    """It said ``... to http://user:s3cretPW@127.0.0.1:9/v1/traces failed ...`` (and gRPC's
    resolver error quoted ``user:s3cretPW@`` again)."""
    endpoint = url.format(port=free_port())
    r = CliRunner().invoke(
        main,
        ["bridge", str(sample_dir()), "-q", "--out", os.devnull, "--otlp-endpoint", endpoint],
        env={"OTEL_EXPORTER_OTLP_PROTOCOL": protocol},
    )
    assert r.exit_code == 1, r.output
    assert "s3cret" not in r.output
    assert "fma-otel bridge: error: export failed: OTLP export" in r.stderr
    assert "<redacted>" in r.stderr and "127.0.0.1" in r.stderr


def test_endpoint_credentials_from_the_environment_are_not_echoed(short_otlp_timeout) -> None:
    url = f"http://tok:s3cretPW@127.0.0.1:{free_port()}/v1/traces?api_key=s3cretK"
    r = CliRunner().invoke(
        main,
        ["bridge", str(sample_dir()), "-q", "--out", os.devnull],
        env={otlp_env.ENV_TRACES_ENDPOINT: url},
    )
    assert r.exit_code == 1, r.output
    assert "s3cret" not in r.output
    port = url.split(":")[3].partition("/")[0]
    assert f"to http://<redacted>@127.0.0.1:{port}/v1/traces?<redacted> failed" in r.stderr


@pytest.mark.parametrize(
    ("endpoint", "says"),
    [
        (
            "http://user:s3cretPW@127.0.0.1:99999",
            "OTLP endpoint 'http://<redacted>@127.0.0.1:99999' is not a valid URL",
        ),
        (
            "ftp://user:s3cretPW@h/?k=s3cretK",
            "OTLP/HTTP endpoint 'ftp://<redacted>@h/?<redacted>' is not an http://",
        ),
    ],
)
def test_unusable_endpoint_error_does_not_echo_credentials(endpoint, says, clean_otlp_env) -> None:
    r = CliRunner().invoke(
        main,
        ["bridge", str(sample_dir()), "-q", "--otlp-endpoint", endpoint, "--otlp-protocol", "http/protobuf"],
    )
    assert r.exit_code == 2, r.output
    assert "s3cret" not in r.output
    assert says in r.stderr


@pytest.mark.slow
def test_the_error_watch_logs_has_no_credentials(otlp_http_receiver, clean_otlp_env) -> None:
    """``watch`` logs the sink's ExportError as it is (``OTLP export of N trace(s) failed
    (...)``): the sink's words must be safe, here a refusing receiver behind a token."""
    from tests.test_otlp_export import _spans

    otlp_http_receiver.fail_with = 503
    host = otlp_http_receiver.endpoint.partition("://")[2]
    with OtlpSink(
        f"http://u:s3cretPW@{host}/v1/traces?api_key=s3cretK", "http/protobuf", timeout_s=1
    ) as sink:
        with pytest.raises(ExportError) as err:
            sink.export(_spans())
    msg = str(err.value)
    assert "s3cret" not in msg and ("503" in msg or "Service Unavailable" in msg)  # as the SDK words it
    assert "s3cret" not in repr(sink)
