"""Duration strings and --since/--until times."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from fma_otel.query import QueryError
from fma_otel.query.window import make_window, parse_duration, parse_time, rfc3339

NOW = datetime(2026, 8, 21, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "secs"),
    [
        ("5s", 5),
        ("250ms", 0.25),
        ("2m", 120),
        ("1h30m", 5400),
        ("7d", 604800),
        ("1.5s", 1.5),
        (3, 3),
        ("0", 0),
    ],
)
def test_parse_duration(text, secs):
    assert parse_duration(text) == pytest.approx(secs)


@pytest.mark.parametrize("bad", ["fast", "5 s", "-1", "s", True, None, "5x"])
def test_parse_duration_rejects(bad):
    with pytest.raises(QueryError):
        parse_duration(bad)


def test_parse_time_forms():
    assert parse_time("24h", NOW) == datetime(2026, 8, 20, 12, tzinfo=timezone.utc)
    t = parse_time("2026-08-20T01:02:03.123456789Z")
    assert rfc3339(t) == "2026-08-20T01:02:03.123456Z"
    assert parse_time("2026-08-20T01:02:03") == datetime(2026, 8, 20, 1, 2, 3, tzinfo=timezone.utc)
    assert parse_time("2026-08-20T03:02:03+02:00") == datetime(2026, 8, 20, 1, 2, 3, tzinfo=timezone.utc)


def test_make_window_errors_name_the_option():
    with pytest.raises(QueryError, match="--until"):
        make_window("1h", "soon", NOW)
    with pytest.raises(QueryError, match="is not before"):
        make_window("1h", "2h", NOW)
    w = make_window("2h", "1h", NOW)
    assert w.as_json() == {"since": "2026-08-21T10:00:00Z", "until": "2026-08-21T11:00:00Z"}
