"""Numbers and nesting Python refuses to build, in what ``report`` reads: never a traceback.

A span time of 400 digits is an int Python builds, but no float holds its duration: it was
an ``OverflowError`` in the harvest; a logged ``fma.dpc.actuation_secs`` of 400 digits was
one in ``_request_obs``.  Now such a line is skipped whole and counted on the page, and a
logged value that is no finite number is no value (its actuation stays).
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import A_DPC_SECS, A_MAX, ROOT
from fma_otel.sinks.otlp_json import export_request

from ..query.gen import hot, spans_of, write

pytestmark = pytest.mark.slow

LONG = "9" * 400
MARK = "@@MARK@@"


def _line(span_name: str, key: str, raw: str) -> str:
    """One trace as a line, ``key`` of span ``span_name`` (a field, or a root attribute
    when ``key`` is the DPC's) written as the raw JSON text ``raw``."""
    req = export_request(spans_of(hot("bad", 3.0, start_s=500.0)))
    for rs in req["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            if sp["name"] != span_name:
                continue
            if key == A_DPC_SECS:
                sp["attributes"].append({"key": key, "value": MARK})
            else:
                sp[key] = MARK
    return json.dumps(req, separators=(",", ":")).replace(json.dumps(MARK), raw)


#: two good hot actuations beside the bad line: enough for every figure kind the bad value
#: reaches (distributions, trend, a waterfall), a quarter of the drawing of the query tests'
#: twenty mixed ones (the drawing is nearly all of a report's time)
BASE = [hot("ok1", 1.0, start_s=100.0), hot("ok2", 2.0, start_s=200.0)]


def _report_with(tmp_path, line: str) -> str:
    """The report page of :data:`BASE` plus ``line``; exit 0 required."""
    traces = write(str(tmp_path / "t.jsonl"), BASE)
    with open(traces, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    out = tmp_path / "r.html"
    r = CliRunner().invoke(main, ["report", traces, "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return out.read_text()


@pytest.mark.parametrize(
    ("line", "note"),
    [
        (_line("fma.actuation", "endTimeUnixNano", f'"{LONG}"'), "skipped 1 line(s)"),
        (_line("fma.actuation", "startTimeUnixNano", f'"-{LONG}"'), "skipped 1 line(s)"),
        (_line(ROOT, "endTimeUnixNano", LONG), "skipped 1 line(s)"),
        (_line(ROOT, A_DPC_SECS, '{"intValue":"' + LONG + '"}'), None),
        (_line(ROOT, A_DPC_SECS, '{"doubleValue":NaN}'), None),
        ("[" * 100_000, "skipped 1 line(s)"),
    ],
    ids=[
        "end-400-digits",
        "start-minus-400-digits",
        "root-end-400-digits",
        "dpc-400-digits",
        "dpc-NaN",
        "deep",
    ],
)
def test_a_number_python_will_not_use_is_no_traceback(tmp_path, line: str, note: str | None) -> None:
    page = _report_with(tmp_path, line)
    if note:
        assert note in page
    else:
        assert "skipped" not in page


@pytest.mark.parametrize(
    "raw",
    ['{"intValue":"1' + "0" * 400 + '"}', '{"doubleValue":"NaN"}', '{"stringValue":"x"}'],
    ids=["400-digits", "NaN", "text"],
)
def test_a_precision_bound_that_is_no_number_is_not_drawn(tmp_path, raw: str) -> None:
    """``fma.duration.max_s`` on a span of a drawn waterfall (the slowest trace): float() of
    400 digits was an OverflowError in report/figures.py; now the whisker is left out."""
    req = export_request(spans_of(hot("slowest", 3000.0, start_s=500.0)))
    for rs in req["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            sp["attributes"].append({"key": A_MAX, "value": MARK})
    page = _report_with(tmp_path, json.dumps(req, separators=(",", ":")).replace(json.dumps(MARK), raw))
    assert "slowest" in page and "skipped" not in page
