from __future__ import annotations

import pytest

from fma_otel.timeutil import civil_to_ns, format_rfc3339_ns, parse_rfc3339_ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2026-06-29T14:35:40Z", 1782743740_000000000),
        ("2026-06-29T14:36:20.498765432Z", 1782743780_498765432),
        ("2026-06-29T14:36:20.4987654Z", 1782743780_498765400),
        ("2026-06-29T16:35:40+02:00", 1782743740_000000000),
        ("2026-06-29T14:35:40", 1782743740_000000000),
    ],
)
def test_parse_exact_ns(text: str, ns: int) -> None:
    assert parse_rfc3339_ns(text) == ns


def test_roundtrip_and_errors() -> None:
    assert format_rfc3339_ns(1782743780_498765432) == "2026-06-29T14:36:20.498765432Z"
    with pytest.raises(ValueError, match="not an RFC3339 time"):
        parse_rfc3339_ns("yesterday")


def test_civil() -> None:
    assert civil_to_ns(2026, 6, 29, (14 * 3600 + 35 * 60 + 40) * 10**6 + 5) == 1782743740_000005000


def test_impossible_date_is_an_error_not_a_roll_over() -> None:
    with pytest.raises(ValueError, match="2027-02-29"):
        civil_to_ns(2027, 2, 29, 0)
    assert civil_to_ns(2028, 2, 29, 0) > civil_to_ns(2027, 12, 31, 0)
