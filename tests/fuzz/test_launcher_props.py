"""Property tests of the launcher-log parser: nothing escapes, every line is counted once."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel.facts import launcher_fact
from fma_otel.sources.launcher_log import (
    LauncherParseError,
    accepted_create_id,
    iter_launcher_log,
    parse_launcher_line,
    put_instance_id,
)
from fma_otel.sources.records import SourceStats

from ._mutate import launcher_sample_lines, mutated_file, mutated_line

LINES = launcher_sample_lines()
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _counted(lines: list[bytes] | list[str]) -> SourceStats:
    st_ = SourceStats("t")
    recs = list(iter_launcher_log(iter(lines), st_))  # type: ignore[arg-type]
    for rec in recs:
        # what the correlator does with each record must not raise either
        accepted_create_id(rec)
        put_instance_id(rec)
        launcher_fact("launcher-x", rec)
    assert st_.read == len(lines) + sum(st_.notes.values())  # a CR inside a line ends one
    assert st_.read == st_.understood + st_.skipped, (st_.read, st_.understood, st_.skipped)
    # the watcher's reading: the same records, each without its continuation lines
    st_once = SourceStats("t")
    once = list(iter_launcher_log(iter(lines), st_once, at_once=True))  # type: ignore[arg-type]
    assert [o._replace(message="") for o in once] == [r._replace(message="") for r in recs]
    for o, r in zip(once, recs, strict=True):  # (an item of lines may hold an LF: one line)
        assert r.message == o.message or r.message.startswith(o.message + "\n")
    assert st_once == st_
    return st_


@pytest.mark.slow
@FAST
@given(st.lists(st.binary(max_size=200), max_size=20))
def test_arbitrary_bytes_are_counted(lines: list[bytes]) -> None:
    _counted(lines)


@pytest.mark.slow
@FAST
@given(st.lists(st.text(max_size=120), max_size=15))
def test_arbitrary_text_is_counted(lines: list[str]) -> None:
    _counted(lines)


@pytest.mark.slow
@FAST
@given(mutated_file(LINES))
def test_mutated_real_lines_are_counted(lines: list[bytes]) -> None:
    _counted(lines)


@pytest.mark.slow
@FAST
@given(mutated_line(LINES))
def test_parse_line_raises_only_its_own_error(line: bytes) -> None:
    try:
        parse_launcher_line(line.decode("utf-8", "replace").rstrip("\r\n"))
    except LauncherParseError as e:
        assert e.reason


@pytest.mark.slow
@FAST
@given(st.lists(st.sampled_from(LINES), max_size=40))
def test_real_header_lines_are_understood(lines: list[bytes]) -> None:
    st_ = _counted(lines)
    assert st_.skipped == 0 or any(not ln[:1].isdigit() for ln in lines)
