"""Numbers and nesting Python refuses to build, in what ``slo`` reads: never a traceback.

CPython 3.11 refuses ``int()`` of more than 4300 digits with a plain ``ValueError`` (no
``json.JSONDecodeError``), ``float()`` of a bigger int raises ``OverflowError``, JSON nested
deeper than the decoder recurses raises ``RecursionError``, and ``NaN``/``Infinity`` come
through ``json.loads`` and ``float()`` as numbers that poison comparisons.  In a trace file
each is a skipped line like any other malformed one; in a server's answer, a one-line
error; in an argument or the SLO spec, a one-line usage error (exit 2).  Every test here
failed on the code before ``fma_otel/jsonsafe.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import A_DPC_SECS, HOT, ROOT
from fma_otel.query import QueryError
from fma_otel.query.dpc_metrics import compare, parse_exposition
from fma_otel.query.harvest import Harvest
from fma_otel.query.sources import FileSource, JaegerSource, TempoSource
from fma_otel.query.window import Window
from fma_otel.sinks.otlp_json import export_request
from fma_otel.span_records import SpanRecord

from . import fake_servers
from .conftest import mixed_acts
from .gen import Act, hot, spans_of, write
from .test_sources_http import WINDOW

BIG = "9" * 5000  # more digits than int() converts
LONG = "9" * 400  # an int Python builds, far beyond float range and OTLP's fixed64
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json's decoder recurses
MARK = "@@MARK@@"


def run(*args: str):
    return CliRunner().invoke(main, ["slo", *args])


def request_with(span_name: str, key: str, raw: str) -> str:
    """One trace as an OTLP JSON line, ``key`` of the span ``span_name`` written as ``raw``
    (raw JSON text: json.dumps itself refuses to write an int of 5000 digits)."""
    req = export_request(spans_of(hot("bad", 3.0)))
    for rs in req["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            if sp["name"] == span_name:
                sp[key] = MARK
    return json.dumps(req, separators=(",", ":")).replace(json.dumps(MARK), raw)


def root_attr(key: str, value_json: str) -> str:
    """One trace as a line, its root carrying the attribute ``key`` with an AnyValue as raw text."""
    req = export_request(spans_of(hot("bad", 3.0)))
    for rs in req["resourceSpans"]:
        for sp in rs["scopeSpans"][0]["spans"]:
            if sp["name"] == ROOT:
                sp["attributes"] = [a for a in sp["attributes"] if a["key"] != key]
                sp["attributes"].append({"key": key, "value": MARK})
    return json.dumps(req, separators=(",", ":")).replace(json.dumps(MARK), value_json)


def metrics_of(path: str) -> Any:
    r = run("--traces", path, "--format", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["metrics"]


# --------------------------------------------------------------------------- trace files


BAD_LINES = {
    "nested-100000-deep": DEEP,
    "nested-deep-inside-a-request": '{"resourceSpans":[],"x":' + DEEP + "}",
    "end-of-400-digits": request_with("fma.actuation", "endTimeUnixNano", f'"{LONG}"'),
    "end-of-400-digits-as-a-number": request_with("fma.actuation", "endTimeUnixNano", LONG),
    "start-of-minus-400-digits": request_with("fma.actuation", "startTimeUnixNano", f'"-{LONG}"'),
    "root-end-of-400-digits": request_with(ROOT, "endTimeUnixNano", f'"{LONG}"'),
    "start-beyond-fixed64": request_with("fma.actuation", "startTimeUnixNano", f'"{1 << 64}"'),
    # these were skipped already; kept so that they stay so
    "start-of-5000-digits": request_with("fma.actuation", "startTimeUnixNano", f'"{BIG}"'),
    "start-of-5000-digits-as-a-number": request_with("fma.actuation", "startTimeUnixNano", BIG),
    "start-NaN": request_with("fma.actuation", "startTimeUnixNano", "NaN"),
    "start-1e400": request_with("fma.actuation", "startTimeUnixNano", "1e400"),
}


@pytest.mark.parametrize("line", list(BAD_LINES.values()), ids=list(BAD_LINES))
def test_a_line_python_will_not_build_is_a_skipped_line(tmp_path, line: str) -> None:
    good = write(str(tmp_path / "good.jsonl"), mixed_acts())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n" + open(good).read())
    r = run("--traces", str(bad), "--format", "json")
    assert r.exit_code == 0, r.output
    assert f"skipped 1 of {len(mixed_acts()) + 1} lines" in r.stderr
    assert json.loads(r.stdout)["metrics"] == metrics_of(good)


def test_only_such_lines_is_the_wrong_kind_of_file(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DEEP + "\n" + BAD_LINES["end-of-400-digits"] + "\n")
    r = run("--traces", str(bad))
    assert r.exit_code == 2 and "not OTLP JSON lines" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "value",
    [
        '{"intValue":"' + LONG + '"}',
        '{"doubleValue":"NaN"}',
        '{"doubleValue":NaN}',
        '{"doubleValue":-Infinity}',
    ],
    ids=["int-of-400-digits", "NaN-string", "NaN-literal", "minus-Infinity"],
)
def test_a_logged_dpc_value_that_is_no_finite_number_is_no_value(tmp_path, value: str) -> None:
    """The actuation still counts (its line is not skipped); only the value is left out,
    and it does not disturb the bucket counts of the values that are numbers."""
    acts = [hot(f"h{i}", 2.0, start_s=10.0 * i, dpc_secs=float(i)) for i in range(1, 4)]
    p = tmp_path / "t.jsonl"
    write(str(tmp_path / "good.jsonl"), acts)
    p.write_text(root_attr(A_DPC_SECS, value) + "\n" + (tmp_path / "good.jsonl").read_text())
    h = Harvest()
    src = FileSource(str(p))
    src.fill(h, Window(), warn=lambda m: None)
    assert src.skipped == 0
    ds = h.dataset()
    assert len(ds.requests) == 4
    assert sorted(r.dpc_secs for r in ds.requests.values() if r.dpc_secs is not None) == [1.0, 2.0, 3.0]
    hist = parse_exposition(
        "\n".join(
            f'fma_actuation_seconds_bucket{{path="hot",le="{le}"}} {n}'
            for le, n in (("1.5", 1), ("2.5", 2), ("+Inf", 3))
        )
    )
    (row,) = compare(hist, ds)
    assert [b["logged"] for b in row["buckets"]] == [1, 2, 3]


def test_a_logged_dpc_value_first_and_nan_does_not_hide_the_others() -> None:
    """Sorting with a NaN in front once left every bucket at 0 (NaN <= le is False)."""
    h = Harvest()
    for i, secs in enumerate([float("nan"), 1.0, 2.0]):
        h.add(
            SpanRecord(
                f"{i:032x}", "", None, ROOT, "INTERNAL", 10, 20, "", {"fma.path": HOT, A_DPC_SECS: secs}
            )
        )
    hist = parse_exposition('fma_actuation_seconds_bucket{path="hot",le="+Inf"} 2\n')
    (row,) = compare(hist, h.dataset())
    assert row["logged_count"] == 2 and row["buckets"][0]["logged"] == 2


# --------------------------------------------------------------------------- arguments and spec


@pytest.mark.parametrize(
    "args",
    [
        ("--since", "99999999999h"),
        ("--since", "100000000000s"),
        ("--until", LONG),
        ("--since", LONG + "s"),
        ("--since", BIG),
    ],
    ids=[
        "hours-beyond-datetime",
        "seconds-beyond-datetime",
        "400-digits",
        "400-digit-seconds",
        "5000-digits",
    ],
)
def test_a_time_beyond_any_date_is_a_usage_error(tmp_path, args: tuple[str, str]) -> None:
    good = write(str(tmp_path / "good.jsonl"), mixed_acts())
    r = run("--traces", good, *args)
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and args[0] in r.stderr


@pytest.mark.slow
def test_an_open_window_ending_before_any_lookback_is_a_usage_error() -> None:
    """``--until`` in year 1 leaves no room for the remote default of 24 h before it."""
    with fake_servers.FakeServer(lambda p, q: (200, {})) as srv:
        r = run("--jaeger", srv.url, "--until", "0001-01-01T00:00:00Z")
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "--until" in r.stderr


SPECS = {
    "p95-NaN": "- {metric: T_actuation, p95: .nan}\n",
    "p95-NaN-string": "- {metric: T_actuation, p95: 'nan'}\n",
    "p95-Infinity": "- {metric: T_actuation, p95: .inf}\n",
    "p95-1e400": "- {metric: T_actuation, p95: 1e400}\n",
    "p95-400-digits": f"- {{metric: T_actuation, p95: {LONG}}}\n",
    "p95-400-digit-string": f"- {{metric: T_actuation, p95: '{LONG}s'}}\n",
    "p95-5000-digits": f"- {{metric: T_actuation, p95: {BIG}}}\n",
    "min_n-400-digits": f"- {{metric: T_actuation, min_n: {LONG}}}\n",
    "max_incomplete-400-digits": f"- {{metric: T_actuation, max_incomplete: {LONG}}}\n",
    "hit-rate-400-digits": f"- {{hit_rate: hot, min: {LONG}}}\n",
    "hit-rate-5000-digits": f"- {{hit_rate: hot, min: {BIG}}}\n",
    "nested-100000-deep": "[" * 100_000 + "\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("text", list(SPECS.values()), ids=list(SPECS))
@pytest.mark.parametrize("command", ["slo", "report"])
def test_a_spec_number_python_will_not_use_is_a_usage_error(tmp_path, text: str, command: str) -> None:
    good = write(str(tmp_path / "good.jsonl"), mixed_acts())
    spec = tmp_path / "slo.yaml"
    spec.write_text(text)
    if command == "slo":
        args = ["slo", "--traces", good, "--slo", str(spec), "--format", "json"]
    else:
        args = ["report", good, "--slo", str(spec), "--out", str(tmp_path / "r.html"), "-q"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "--slo" in r.stderr
    assert "item 1" in r.stderr or "not valid YAML" in r.stderr


def test_a_spec_that_is_not_utf8_is_a_usage_error(tmp_path) -> None:
    """Found on the way: ``UnicodeDecodeError`` is no ``yaml.YAMLError`` either."""
    good = write(str(tmp_path / "good.jsonl"), mixed_acts())
    spec = tmp_path / "slo.yaml"
    spec.write_bytes(b"- {metric: T_actuation, p95: 5s} # \xff\n")
    r = run("--traces", good, "--slo", str(spec))
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "not UTF-8" in r.stderr


# --------------------------------------------------------------------------- DPC /metrics


DPC = {
    "value-NaN": 'fma_actuation_seconds_count{path="hot"} NaN',
    "value-Inf": 'fma_actuation_seconds_bucket{path="hot",le="1"} +Inf',
    "value-5000-digits": 'fma_actuation_seconds_count{path="hot"} ' + BIG,
    "sum-minus-Inf": 'fma_actuation_seconds_sum{path="hot"} -Inf',
    "le-NaN": 'fma_actuation_seconds_bucket{path="hot",le="NaN"} 1',
    "le-not-a-number": 'fma_actuation_seconds_bucket{path="hot",le="fast"} 1',
}


@pytest.mark.parametrize("text", list(DPC.values()), ids=list(DPC))
def test_a_dpc_sample_that_is_no_finite_number_is_a_usage_error(tmp_path, text: str) -> None:
    """The JSON form is a contract: a NaN or Infinity there is no JSON other tools read."""
    good = write(str(tmp_path / "good.jsonl"), mixed_acts())
    m = tmp_path / "metrics.txt"
    m.write_text('fma_actuation_seconds_bucket{path="hot",le="+Inf"} 3\n' + text + "\n")
    r = run("--traces", good, "--dpc-metrics", str(m), "--format", "json")
    assert r.exit_code == 2, r.output
    assert len(r.stderr.strip().splitlines()) == 1 and "--dpc-metrics" in r.stderr and "line 2" in r.stderr


# --------------------------------------------------------------------------- Jaeger and Tempo


def _jaeger_v3(traces: Any) -> Callable[[str, dict[str, str]], tuple[int, Any]]:
    def route(path: str, q: dict[str, str]) -> tuple[int, Any]:
        if path == "/api/v3/services":
            return 200, {"services": ["kubernetes"]}
        if path == "/api/v3/operations":
            return 200, {"operations": [{"name": ROOT}]}
        if path == "/api/v3/traces":
            return 200, traces
        return 404, {}

    return route


def _tempo(search: Any, trace: Any) -> Callable[[str, dict[str, str]], tuple[int, Any]]:
    def route(path: str, q: dict[str, str]) -> tuple[int, Any]:
        if path == "/api/search":
            return 200, search
        if path.startswith("/api/v2/traces/"):
            return 200, trace
        return 404, {}

    return route


def _fill(src: Any) -> Harvest:
    h = Harvest()
    src.fill(h, WINDOW, warn=lambda m: None)
    h.dataset(WINDOW)
    return h


ANSWERS = {
    "jaeger-services-deep": (JaegerSource, lambda p, q: (200, DEEP.encode())),
    "jaeger-services-a-list": (JaegerSource, lambda p, q: (200, [1])),
    "jaeger-services-a-number": (JaegerSource, lambda p, q: (200, b"NaN")),
    "jaeger-traces-deep": (JaegerSource, _jaeger_v3(DEEP.encode())),
    "jaeger-traces-a-list": (JaegerSource, _jaeger_v3([1])),
    "jaeger-operations-a-list": (
        JaegerSource,
        lambda p, q: (200, {"services": ["k"]}) if p == "/api/v3/services" else (200, [1]),
    ),
    "jaeger-error-deep": (JaegerSource, lambda p, q: (500, DEEP.encode())),
    "tempo-search-deep": (TempoSource, _tempo(DEEP.encode(), {})),
    "tempo-search-a-list": (TempoSource, _tempo([1], {})),
    "tempo-trace-deep": (TempoSource, _tempo({"traces": [{"traceID": "ab"}]}, DEEP.encode())),
}


@pytest.mark.slow
@pytest.mark.parametrize("source, route", list(ANSWERS.values()), ids=list(ANSWERS))
def test_an_answer_that_is_no_json_object_is_a_query_error(source: Any, route: Any) -> None:
    with fake_servers.FakeServer(route) as srv:
        with pytest.raises(QueryError, match="answer|HTTP 500") as exc:
            _fill(source(srv.url))
    assert "\n" not in str(exc.value)


ODD_ELEMENTS = {
    "jaeger-service-not-a-string": (
        JaegerSource,
        lambda p, q: (
            (200, {"services": [{"a": 1}, ["x"], 5]})
            if p == "/api/v3/services"
            else (200, {"operations": [{"name": ROOT}]})
            if p == "/api/v3/operations"
            else (404, {})
        ),
    ),
    "jaeger-operation-not-an-object": (
        JaegerSource,
        lambda p, q: (
            (200, {"services": ["k"]})
            if p == "/api/v3/services"
            else (200, {"operations": ["x", 1, None]})
            if p == "/api/v3/operations"
            else (404, {})
        ),
    ),
    "jaeger-result-a-string": (JaegerSource, _jaeger_v3({"result": "x"})),
    "jaeger-result-of-numbers": (JaegerSource, _jaeger_v3({"result": [1, [2], {"resourceSpans": [3]}]})),
    "tempo-traces-of-numbers": (TempoSource, _tempo({"traces": [1, None, "ab"]}, {})),
}


@pytest.mark.slow
@pytest.mark.parametrize("source, route", list(ODD_ELEMENTS.values()), ids=list(ODD_ELEMENTS))
def test_odd_elements_of_an_answer_are_left_out(source: Any, route: Any) -> None:
    with fake_servers.FakeServer(route) as srv:
        h = _fill(source(srv.url))
    assert not h.dataset(WINDOW).samples


@pytest.mark.slow
def test_odd_elements_beside_a_good_trace_leave_the_good_one() -> None:
    """Left out means left out, not everything dropped: the good trace among odd results
    still counts, once."""
    good = export_request(spans_of(hot("good", 2.0, start_s=30.0)))
    route = _jaeger_v3({"result": [1, [2], {"resourceSpans": [3]}, good, "x"]})
    with fake_servers.FakeServer(route) as srv:
        h = _fill(JaegerSource(srv.url))
    samples = h.dataset(WINDOW).samples
    assert {s.metric for s in samples} >= {"T_actuation"}
    assert [round(s.duration_s, 6) for s in samples if s.metric == "T_actuation"] == [2.0]


def _v1(spans: list[dict[str, Any]]) -> Callable[[str, dict[str, str]], tuple[int, Any]]:
    def route(path: str, q: dict[str, str]) -> tuple[int, Any]:
        if path.startswith("/api/v3"):
            return 404, {}
        if path == "/api/services":
            return 200, {"data": ["kubernetes"]}
        if path.startswith("/api/services/"):
            return 200, {"data": [ROOT, "fma.actuation"]}
        if path == "/api/traces":
            return 200, {"data": [{"spans": spans}]}
        return 404, {}

    return route


V1_SPAN = {"traceID": "ab", "spanID": "cd", "operationName": "fma.actuation", "startTime": 1, "duration": 1}


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        {"startTime": int(LONG)},
        {"duration": int(LONG)},
        {"startTime": -1},
        {"startTime": 1e300},
        {"operationName": ROOT, "tags": [{"key": A_DPC_SECS, "type": "int64", "value": int(LONG)}]},
    ],
    ids=[
        "start-of-400-digits",
        "duration-of-400-digits",
        "negative-start",
        "start-1e300",
        "dpc-of-400-digits",
    ],
)
def test_a_jaeger_v1_trace_with_such_a_number(change: dict[str, Any]) -> None:
    """Times outside OTLP's range drop the trace as malformed; a logged value that is no
    finite number is no value (the trace stays)."""
    with fake_servers.FakeServer(_v1([{**V1_SPAN, **change}])) as srv:
        h = _fill(JaegerSource(srv.url))
    if change.get("operationName") == ROOT:
        assert h.malformed == 0 and [r.dpc_secs for r in h.dataset().requests.values()] == [None]
    else:
        assert h.malformed >= 1 and not h.dataset().samples


@pytest.mark.slow
def test_good_answers_are_unchanged(tmp_path) -> None:
    """The guards change nothing for what real servers send."""
    acts: list[Act] = mixed_acts()
    with fake_servers.jaeger(acts) as srv:
        h = _fill(JaegerSource(srv.url))
    assert h.malformed == 0 and len(h.dataset(WINDOW).requests) == len(acts)
