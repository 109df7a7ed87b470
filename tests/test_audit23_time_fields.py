"""Issue 23, instants in range: values found by the adversarial pass of 2026-12-05.

Each case is a time that must never become an instant: the reader raises (a counted skip),
so no span can start in a year the capture never saw."""

from __future__ import annotations

import pytest

from fma_otel.timeutil import parse_rfc3339_ns


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-29T14:30:01+99:00",  # an offset of 99 hours moved the instant by four days
        "2026-06-29T14:30:01-24:00",
        "2026-06-29T14:30:01+05:60",
        "2026-06-29T14:30:01.5+23:99",
    ],
)
def test_a_zone_offset_outside_rfc3339_is_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="zone"):
        parse_rfc3339_ns(text)


def test_the_largest_offsets_rfc3339_allows_still_read() -> None:
    assert parse_rfc3339_ns("2026-06-29T23:59:00+23:59") == parse_rfc3339_ns("2026-06-29T00:00:00Z")
    assert parse_rfc3339_ns("2026-06-29T00:00:00-23:59") == parse_rfc3339_ns("2026-06-29T23:59:00Z")
