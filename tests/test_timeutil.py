from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel import timeutil
from fma_otel.timeutil import civil_to_ns, format_rfc3339_ns, parse_rfc3339, parse_rfc3339_ns


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("2026-06-29T14:35:40Z", 1782743740_000000000),
        ("2026-06-29T14:36:20.498765432Z", 1782743780_498765432),
        ("2026-06-29T14:36:20.4987654Z", 1782743780_498765400),
        ("2026-06-29T16:35:40+02:00", 1782743740_000000000),
        ("2026-06-29t12:05:40.5-02:30", 1782743740_500000000),
        ("2026-06-29T14:35:40.1234567891Z", 1782743740_123456789),  # past ns: dropped
        ("2026-06-29T14:35:60Z", 1782743760_000000000),  # a leap second counts on
        ("2028-02-29T00:00:00z", 1835395200_000000000),
    ],
)
def test_parse_exact_ns(text: str, ns: int) -> None:
    assert parse_rfc3339_ns(text) == ns


@pytest.mark.parametrize(
    ("text", "digits"),
    [
        ("2026-06-29T14:35:40Z", 0),
        ("2026-06-29T14:35:40.5+02:00", 1),
        ("2026-06-29T14:35:40.118264z", 6),
        ("2026-06-29T14:35:40.1234567891Z", 9),  # past ns: dropped, so 9
    ],
)
def test_parse_gives_the_fraction_digits_with_the_instant(text: str, digits: int) -> None:
    assert parse_rfc3339(text) == (parse_rfc3339_ns(text), digits)


def test_a_date_the_calendar_lacks_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match=r"not an RFC3339 time \(no such date\): '2026-13-29T14:35:45Z'"):
        parse_rfc3339_ns("2026-13-29T14:35:45Z")


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


@pytest.mark.parametrize(
    "text",
    [
        "2026-06-29T14:35:40",  # no zone: Go and Kubernetes always write one
        "2026-06-29 14:35:40Z",
        "2026-02-30T00:00:00Z",  # never rolled into March
        "2027-02-29T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-06-00T00:00:00Z",
        "2026-06-29T24:00:00Z",
        "2026-06-29T14:60:00Z",
        "2026-06-29T14:35:61Z",
        "2026-06-29T14:35:40.Z",
        "2026-06-29T14:35:4Z",
        "2026-06-29T14:35:40+0200",
        "2026-06-29T14:35:40.5+02:0x",
        "2026-06-29T14:35:40.5 Z",
        " 2026-06-29T14:35:40Z",
        "2026-06-29T14:35:40Zx",
        "2026-06-29T14:35:\u0664\u0660Z",  # Arabic-Indic digits
        "2026-06-29T14:35:40.\u00b2Z",
        "2026-06-29T14:35:40.1_2Z",
        "x",
        "",
    ],
)
def test_not_rfc3339_is_a_value_error(text: str) -> None:
    for _ in range(2):  # cold and warm minute cache: the same answer
        with pytest.raises(ValueError, match="not an RFC3339 time"):
            parse_rfc3339_ns(text)


_IN_WINDOW = st.datetimes(datetime(2000, 1, 2), datetime(2199, 12, 30), timezones=st.just(timezone.utc))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    _IN_WINDOW,
    st.integers(0, 999_999_999),
    st.integers(0, 9),
    st.sampled_from(["Z", "z", "+02:00", "-01:30", "+00:00"]),
    st.sampled_from("Tt"),
)
def test_agrees_with_datetime(when: datetime, ns: int, digits: int, zone: str, sep: str) -> None:
    """Any stamp written as RFC3339Nano (any zone, 0-9 fraction digits) reads back as the
    instant ``datetime`` computes, to the nanosecond kept."""
    frac = f"{ns:09d}"[:digits]
    offset = (
        0 if zone in ("Z", "z") else (int(zone[1:3]) * 60 + int(zone[4:])) * (1 if zone[0] == "+" else -1)
    )
    local = when.astimezone(timezone(timedelta(minutes=offset)))
    text = local.strftime(f"%Y-%m-%d{sep}%H:%M:%S") + ("." + frac if frac else "") + zone
    want = int(when.replace(microsecond=0).timestamp()) * 10**9 + int(frac.ljust(9, "0") or 0)
    assert parse_rfc3339_ns(text) == want
    assert parse_rfc3339_ns(text) == want  # warm minute cache


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
        "2199-12-31T23:59:60Z",  # a leap second carries it past the window's end
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


def test_date_seconds_is_the_one_date_rule() -> None:
    """The date rule RFC3339 times and the launcher's asctime share: a real calendar date
    in ASCII digits, never rolled over."""
    assert timeutil.date_seconds("2026-06-29") == 1782691200
    assert timeutil.date_seconds("2028-02-29") == 1835395200
    for bad in ["2027-02-29", "2026-13-01", "2026-06-00", "2026-6-29", "\uff12026-06-29", "2026/06/29"]:
        with pytest.raises(ValueError, match="bad date"):
            timeutil.date_seconds(bad)
