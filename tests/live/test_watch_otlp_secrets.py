"""``fma-otel watch`` says nothing of a credential when it refuses an OTLP setting at start:
not a header list's value, not an endpoint's user part or query.  (Its export errors while
running are the sink's ExportError as is: ``tests/test_otlp_secrets.py``.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.live.test_watch_cli_faults import one_line_exit_2, watch
from tests.support.k8s_server import FakeCluster


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ["--otlp-endpoint", "http://127.0.0.1:4318"],
            {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer s3cretH;x"},
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS is not a valid header list: entry 1 of 1 not "
            "name=value with a URL-encoded value (the value is not shown)",
        ),
        (
            ["--otlp-endpoint", "http://u:s3cretPW@h:99999/?k=s3cretK", "--otlp-protocol", "http/protobuf"],
            {},
            "OTLP endpoint 'http://<redacted>@h:99999/?<redacted>' is not a valid URL: "
            "Port out of range 0-65535",
        ),
    ],
    ids=["bad-headers", "endpoint-credentials"],
)
def test_refused_otlp_setting_shows_no_credential(
    kubeconfig: str, k8s: FakeCluster, tmp_path: Path, clean_otlp_env, args, env, message
) -> None:
    r = watch("--kubeconfig", kubeconfig, "--out", str(tmp_path / "o.jsonl"), *args, env=env)
    assert one_line_exit_2(r) == f"fma-otel watch: error: {message}"
    assert "s3cret" not in r.output
    assert not k8s.requests_to("/pods")
