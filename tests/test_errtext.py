"""errtext.safe_url: what an error message may show of a URL."""

from __future__ import annotations

import pytest

from fma_otel.errtext import safe_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@h:9/v1/traces?api_key=x", "http://<redacted>@h:9/v1/traces?<redacted>"),
        ("https://tok3n@h/x", "https://<redacted>@h/x"),
        ("http://h?k=v", "http://h?<redacted>"),
        ("http://h:4318/v1/traces", "http://h:4318/v1/traces"),
        ("h:4317", "h:4317"),
        ("http://[::1", "http://[::1"),
        ("http://h/a@b", "http://h/a@b"),  # an @ in the path is not a user part
        ("", ""),
    ],
)
def test_safe_url_hides_credentials_and_query(url: str, shown: str) -> None:
    assert safe_url(url) == shown
