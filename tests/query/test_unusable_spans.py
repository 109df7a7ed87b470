"""Spans whose values no duration can have, in what ``show``, ``slo`` and ``report`` read.

- ``fma.duration.max_s`` of ``1e308`` is a finite double, but scaled for display it is
  ``inf``: ``math.floor``/``ceil`` raised ``OverflowError`` in ``sinks/show.py`` and
  ``query/formats.py``.  Now a bound past the longest span OTLP can hold is unreadable,
  as ``inf`` and ``NaN`` already were: the attribute is left out, the span stays.
- A span without its start (absent, ``null``, ``""``, ``"0"``) was read as starting in
  1970: ``slo`` showed ``T_actuation`` as ``29712391.2m [0.8, 0.9]``.  Now it is a
  malformed span, and its line is skipped and counted like any other malformed one.
"""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import A_MAX, A_MIN, HOT
from fma_otel.sinks.otlp_json import export_request

from .gen import Act, spans_of, write

MARK = "@@MARK@@"
GOOD = [
    Act("ok1", HOT, {"T_actuation": 2.0}, start_s=100.0),
    Act("ok2", HOT, {"T_actuation": 4.0}, start_s=200.0),
]


def _bad_line(field: str, raw: str) -> str:
    """One hot actuation of 3 s (T_actuation known to [2.8, 3.2]) as a line, ``field`` of its
    T_actuation span (a span field, or the attribute ``fma.duration.max_s``) written as the
    raw JSON text ``raw``; ``raw=None`` leaves a span field out."""
    spans = []
    for s in spans_of(Act("bad", HOT, {"T_actuation": 3.0}, start_s=300.0)):
        if s.attributes.get("fma.metric") == "T_actuation":
            s = msgspec.structs.replace(s, attributes={**s.attributes, A_MIN: 2.8, A_MAX: 3.2})
        spans.append(s)
    req = export_request(spans)
    for rs in req["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            if sp["name"] != "fma.actuation":
                continue
            if field == A_MAX:
                (kv,) = [kv for kv in sp["attributes"] if kv["key"] == A_MAX]
                kv["value"] = MARK
            elif raw is None:
                del sp[field]
            else:
                sp[field] = MARK
    return json.dumps(req, separators=(",", ":")).replace(json.dumps(MARK), raw or "")


def _file(tmp_path, line: str) -> str:
    path = write(str(tmp_path / "t.jsonl"), GOOD)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return path


def _t_actuation(path: str) -> dict:
    r = CliRunner().invoke(main, ["slo", path, "-o", "json"])
    assert r.exit_code == 0, r.output
    (row,) = [m for m in json.loads(r.stdout)["metrics"] if m["metric"] == "T_actuation" and m["path"] == HOT]
    return row


# --------------------------------------------------------------------------- finding 1


HUGE = {
    "1e308": '{"doubleValue":1e308}',
    "minus-1e308": '{"doubleValue":-1e308}',
    "1e300": '{"doubleValue":1e300}',
}
#: each a traceback, or the value shown, before: (the command, the bound)
CASES = [
    *((["show"], b) for b in ("1e308", "minus-1e308")),
    *(
        (args, b)
        for args in (["slo"], ["slo", "--breakdown"], ["slo", "-o", "csv"])
        for b in ("1e308", "1e300")
    ),
]


@pytest.mark.parametrize(("args", "bound"), CASES, ids=[f"{' '.join(a)}-{b}" for a, b in CASES])
def test_a_duration_bound_no_span_can_have_is_left_out_not_a_traceback(tmp_path, args, bound) -> None:
    path = _file(tmp_path, _bad_line(A_MAX, HUGE[bound]))
    r = CliRunner().invoke(main, [*args, path])
    assert r.exit_code == 0, r.output
    assert r.exception is None and "skipped" not in r.stderr
    # the value is not shown either (1e300 was, as 300 digits or as 1e+300)
    assert "e+30" not in r.stdout and not re.search(r"\d{20}", r.stdout)


def test_such_a_bound_is_read_as_absent(tmp_path) -> None:
    """As ``inf`` is: the span's actuation counts, its interval ends at its point."""
    row = _t_actuation(_file(tmp_path, _bad_line(A_MAX, HUGE["1e308"])))
    assert row["n"] == 3 and row["p99"] == 4.0
    assert (row["p50"], row["p50_lo"], row["p50_hi"]) == (3.0, 2.8, 3.0)


@pytest.mark.slow
def test_report_leaves_such_a_bound_out_too(tmp_path) -> None:
    path = _file(tmp_path, _bad_line(A_MAX, HUGE["1e308"]))
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", path, "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert r.exception is None and "skipped" not in out.read_text()


# --------------------------------------------------------------------------- finding 2


NO_START = {"missing": None, "null": "null", "empty": '""', "zero": '"0"', "zero-number": "0"}


@pytest.mark.parametrize("raw", list(NO_START.values()), ids=list(NO_START))
@pytest.mark.parametrize("field", ["startTimeUnixNano", "endTimeUnixNano"])
def test_a_span_without_its_start_or_end_is_a_skipped_line(tmp_path, field, raw) -> None:
    path = _file(tmp_path, _bad_line(field, raw))
    r = CliRunner().invoke(main, ["slo", path])
    assert r.exit_code == 0, r.output
    assert "skipped 1 of 3 lines" in r.stderr
    row = _t_actuation(path)
    assert (row["n"], row["p50"], row["max"]) == (2, 2.0, 4.0)  # the other two alone
    r = CliRunner().invoke(main, ["show", path])
    assert r.exit_code == 0 and "skipped 1" in r.stderr and "1970" not in r.stdout
