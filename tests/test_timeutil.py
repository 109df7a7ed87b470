from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel import timeutil
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


_D2 = st.integers(0, 99).map(lambda n: f"{n:02d}")
_STAMP = st.builds(
    lambda y, mo, d, h, mi, s, frac, zone: f"{y:04d}-{mo}-{d}T{h}:{mi}:{s}{frac}{zone}",
    st.integers(0, 9999),
    _D2,
    _D2,
    _D2,
    _D2,
    _D2,
    st.one_of(st.just(""), st.text("0123456789", max_size=12).map(lambda f: "." + f)),
    st.sampled_from(["Z", "z", "", "+02:00", "-0130", "Zx", " "]),
)


def _outcome(fn, text: str) -> object:
    try:
        return fn(text)
    except ValueError:
        return ValueError


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(st.one_of(_STAMP, _STAMP.map(lambda s: s.replace("0", "\u0660")), st.text(max_size=30)))
def test_fast_path_agrees_with_the_general_parser(text: str) -> None:
    """The cached-minute path decides nothing the general regex path would decide otherwise."""
    want = _outcome(timeutil._parse_rfc3339_general, text)
    assert _outcome(parse_rfc3339_ns, text) == want  # cold cache for this minute
    assert _outcome(parse_rfc3339_ns, text) == want  # and warm


@pytest.mark.parametrize(
    "text",
    [
        "1969-12-31T23:59:59.999999999Z",  # negative ns: not an OTLP time at all
        "0001-01-01T00:00:00Z",
        "1999-12-31T23:59:59.999999999Z",
        "2200-01-01T00:00:00Z",
        "2600-06-29T14:35:40Z",  # past 2**64 ns
        "9999-12-31T23:59:59Z",
        "2000-01-01T00:00:00+00:01",  # the offset takes it before the window
        "2199-12-31T23:59:99Z",  # 99 seconds carry it past the window's end
    ],
)
def test_instants_outside_the_window_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError, match="outside the accepted window 2000-01-01T00:00:00Z"):
        parse_rfc3339_ns(text)
    with pytest.raises(timeutil.OutOfWindowError):  # warm minute cache: the same answer
        parse_rfc3339_ns(text)


def test_window_edges_are_exact() -> None:
    assert parse_rfc3339_ns("2000-01-01T00:00:00Z") == timeutil.MIN_NS
    assert parse_rfc3339_ns("2199-12-31T23:59:59.999999999Z") == timeutil.END_NS - 1
    assert timeutil.END_NS < 2**64  # every accepted instant is an OTLP fixed64
    assert timeutil.check_ns(timeutil.MIN_NS) == timeutil.MIN_NS
    with pytest.raises(ValueError, match=r"prefix -1 ns since the epoch|prefix 1969"):
        timeutil.check_ns(-1, "prefix")
    with pytest.raises(ValueError, match=r"time 10\*\*30|ns since the epoch"):
        timeutil.check_ns(10**30)


@pytest.mark.parametrize(
    ("year", "tod_us"), [(1, 0), (1969, 0), (1999, 86_399_999_999), (2600, 0), (9999, 0)]
)
def test_civil_outside_the_window_is_a_value_error(year: int, tod_us: int) -> None:
    with pytest.raises(ValueError, match="outside the accepted window"):
        civil_to_ns(year, 12, 31, tod_us)
    with pytest.raises(ValueError, match="outside the accepted window"):  # cached day
        civil_to_ns(year, 12, 31, tod_us)


def test_civil_time_of_day_past_the_window_end() -> None:
    assert civil_to_ns(2199, 12, 31, 0) < timeutil.END_NS
    with pytest.raises(ValueError, match="outside the accepted window"):
        civil_to_ns(2199, 12, 31, 86_400 * 10**6)
