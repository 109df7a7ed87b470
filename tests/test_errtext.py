"""errtext.safe_url: what an error message may show of a URL."""

from __future__ import annotations

import pytest

from fma_otel.errtext import hide_credentials, safe_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@h:9/v1/traces?api_key=x", "http://<redacted>@h:9/v1/traces?<redacted>"),
        ("https://tok3n@h/x", "https://<redacted>@h/x"),
        ("http://h?k=v", "http://h?<redacted>"),
        ("http://h:4318/v1/traces", "http://h:4318/v1/traces"),
        ("h:4317", "h:4317"),
        ("http://[::1", "http://[::1"),
        ("http://user:s3cr/etTOKEN@collector:4318/v1/traces", "http://<redacted>@collector:4318/v1/traces"),
        ("http://u:p@ss@h:1/x?q=@", "http://<redacted>@h:1/x?<redacted>"),  # the last @ before the query
        ("http://h/a@b", "http://<redacted>@b"),  # an @ in a path reads as a user part: shown less
        ("http://h/x?next=a@b", "http://h/x?<redacted>"),
        ("", ""),
    ],
)
def test_safe_url_hides_credentials_and_query(url: str, shown: str) -> None:
    assert safe_url(url) == shown


def test_hide_credentials_hides_each_piece_of_a_user_part() -> None:
    """A URL parser quotes the bit of a password it took for a port ('s3cr' of
    's3cr/etTOKEN'): every piece of the user part is hidden, with the query's values."""
    url = "http://user:s3cr/etTOKEN@h:1/p?api_key=k3y&x=1"
    text = f"Invalid port: 's3cr' in {url}; user:s3cr/etTOKEN; k3y"
    shown = hide_credentials(text, url)
    for secret in ("s3cr", "etTOKEN", "k3y"):
        assert secret not in shown
    assert "http://<redacted>@h:1/p?<redacted>" in shown


@pytest.mark.parametrize(
    "args",
    [
        [
            "bridge",
            "--dpc-log",
            "DPC",
            "-q",
            "--otlp-endpoint",
            "http://user:s3cr/etTOKEN@collector:4318/v1/traces",
        ],
        ["slo", "--jaeger", "http://user:s3cr/etTOKEN@127.0.0.1:9/"],
        ["slo", "--tempo", "http://user:s3cr/etTOKEN@127.0.0.1:9/"],
    ],
)
def test_a_password_holding_a_slash_is_never_shown(args: list[str]) -> None:
    """Cut at its first '/', the user part was shown whole (base64 tokens hold '/'), and
    the parser's complaint quoted its first piece."""
    from click.testing import CliRunner

    from fma_otel.bridge import sample_dir
    from fma_otel.cli import main

    args = [str(sample_dir() / "dpc.log") if a == "DPC" else a for a in args]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "<redacted>@" in r.output
    assert "s3cr" not in r.output and "etTOKEN" not in r.output
