"""``fma-otel show``: exact waterfall text, selection, exit codes, and pipes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.commands.show import command
from fma_otel.model import S
from fma_otel.sinks.otlp_json import write_trace_line
from fma_otel.sinks.show import bar, interval_forms, render_waterfall
from fma_otel.span_records import SpanRecord

REPO = Path(__file__).resolve().parents[1]
TRACE = "0af7651916cd43dd8448eb211c80319c"
T0 = 1_700_000_000 * S
COMMON = {"fma.path": "cold_launcher", "fma.requester.name": "r1"}


def _span(span_id, parent, name, start_s, end_s, service="kubernetes", trace=TRACE, **kw) -> SpanRecord:
    attrs = {**COMMON, **kw.pop("attrs", {})}
    return SpanRecord(
        trace, span_id * 16, parent and parent * 16, name, "INTERNAL", T0 + int(start_s * S), T0 + int(end_s * S),
        service, attrs, **kw,
    )  # fmt: skip


def three_levels() -> list[SpanRecord]:
    """A hand-made 3-level trace, deliberately out of order."""
    return [
        _span("d", "b", "fma.kubelet.probe", 29, 29, "dual-pods-controller",
              attrs={"fma.clock.inconsistent": True, "fma.duration.raw_s": -0.5}),
        _span("c", "b", "fma.dpc.bind", 10, 12, "dual-pods-controller", status_code="ERROR", status_message="boom"),
        _span("b", "a", "fma.actuation", 10, 30, attrs={"fma.metric": "T_actuation"}),
        _span("e", "a", "fma.requester.schedule", 0, 1),
        _span("a", None, "fma.request", 0, 30, attrs={
            "fma.complete": True, "fma.duration.min_s": 29.0, "fma.duration.max_s": 31.0,
            "fma.start.source": "k8s:created", "fma.end.source": "k8s:Ready"}),
    ]  # fmt: skip


def test_render_three_levels_exact():
    out = render_waterfall(three_levels(), 100, color=False)
    assert out.splitlines() == [
        "r1  cold_launcher  trace 0af7651916cd43dd8448eb211c80319c  complete  30.000s",
        "fma.request              │███████████████████████████████│   30.000s  [29.000, 31.000]",
        "  fma.requester.schedule │██                             │    1.000s",
        "  fma.actuation          │          █████████████████████│   20.000s  T_actuation",
        "    fma.dpc.bind         │          ███                  │    2.000s  !ERROR: boom",
        "    fma.kubelet.probe    │                             ▏ │    0.000s  !CLOCK raw=-0.500s",
    ]
    # 31 bar cells for 30 s: 10 s starts in cell 10, 12 s ends in cell 13, 29 s is cell 29;
    # the sources (k8s:created → k8s:Ready) do not fit beside the bar's half: left out
    assert max(len(line) for line in out.splitlines()) <= 100
    wide = render_waterfall(three_levels(), 160, color=False).splitlines()
    assert wide[1].endswith("30.000s  [29.000, 31.000]  k8s:created → k8s:Ready")


def test_render_narrow_shrinks_bar_and_cuts_details_never_wraps():
    out = render_waterfall(three_levels(), 60, color=False)
    assert out.splitlines() == [
        "r1  cold_launcher  trace 0af76519…  complete  30.000s",
        "fma.request              │██████████│   30.000s  [29.0,31.0]",
        "  fma.requester.schedule │█         │    1.000s",
        "  fma.actuation          │   ███████│   20.000s  T_actuation",
        "    fma.dpc.bind         │   █      │    2.000s  !ERROR: bo…",
        "    fma.kubelet.probe    │         ▏│    0.000s  !CLOCK raw…",
    ]
    for width in (30, 45, 80, 120, 200):
        for color in (False, True):
            text = render_waterfall(deep_trace(), width, color=color)
            plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
            assert max(len(line) for line in plain.splitlines()) <= width, (width, color)


def deep_trace() -> list[SpanRecord]:
    """Six levels of long names and long sources, as the bridge's cold_launcher traces."""
    src = {
        "fma.start.source": "dpc:HTTP call done/create_instance",
        "fma.end.source": "dpc:Successfully relayed the readiness",
    }
    spans = [
        _span(
            "a",
            None,
            "fma.request",
            0,
            55,
            trace="3" * 32,
            attrs={
                "fma.requester.name": "my-request-29-14-30-07-c4bwr",
                **src,
                "fma.duration.min_s": 54.0,
                "fma.duration.max_s": 56.0,
            },
        )
    ]
    parent = "a"
    for i, name in enumerate(
        [
            "fma.actuation",
            "fma.launcher.cold_start",
            "fma.instance.ready",
            "fma.dpc.create_instance",
            "fma.launcher.create_instance",
        ]
    ):
        sid = "bcdef"[i]
        spans.append(
            _span(
                sid, parent, name, i, 55 - i, trace="3" * 32, attrs={**src, "fma.metric": "T_instance_create"}
            )
        )
        parent = sid
    return spans


def test_render_orders_traces_by_root_start_and_flags_incomplete():
    later = [_span("a", None, "fma.request", 100, 130, trace="1" * 32)]
    incomplete = [
        _span("a", None, "fma.request", 50, 60, trace="2" * 32, status_code="ERROR",
              status_message="missing R.ready", attrs={"fma.complete": False, "fma.requester.name": "r2"}),
        _span("f", "9", "fma.vllm.startup", 51, 52, trace="2" * 32),
    ]  # fmt: skip
    out = render_waterfall(later + incomplete + three_levels(), 120, color=False)
    headers = [line for line in out.splitlines() if "trace " in line]
    assert [h.split("trace ")[1].split()[0] for h in headers] == [TRACE, "2" * 32, "1" * 32]
    assert "INCOMPLETE (missing R.ready)" in headers[1]
    assert "fma.vllm.startup ↑?" in out  # parent not in the file: shown at top level, flagged
    assert "\n\n" in out and not out.endswith("\n\n")


def test_render_no_root_and_color():
    spans = [_span("b", "a", "fma.actuation", 0, 1)]
    assert "INCOMPLETE (no fma.request span)" in render_waterfall(spans, 100, color=False)
    colored = render_waterfall(three_levels(), 60, color=True)
    assert "\x1b[" in colored
    assert "fma.dpc.bind" in colored
    assert render_waterfall([], 60, color=False) == ""


def test_bar_edges():
    assert bar(0, 10, 0, 10, 10) == "█" * 10
    assert bar(0, 1, 0, 1000, 10) == "█" + " " * 9  # tiny spans stay visible
    assert bar(10, 10, 0, 10, 10) == " " * 9 + "▏"
    assert bar(5, 5, 5, 5, 4) == "▏   "  # a trace of one instant


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    p = tmp_path / "traces.jsonl"
    with p.open("w") as fh:
        write_trace_line(fh, three_levels())
        write_trace_line(fh, [_span("a", None, "fma.request", 100, 130, trace="1" * 32,
                                    attrs={"fma.requester.name": "r9"})])  # fmt: skip
    return p


def _run(*args: str):
    return CliRunner().invoke(command, list(args), prog_name="fma-otel show")


def test_cli_shows_all_then_filters(trace_file):
    res = _run(str(trace_file))
    assert res.exit_code == 0, res.output
    assert res.output.count(" trace ") == 2
    res = _run(str(trace_file), "--trace", TRACE[:8], "--width", "60")
    assert res.exit_code == 0
    assert res.output == render_waterfall(three_levels(), 60, color=False)
    res = _run(str(trace_file), "--requester", "r9")
    assert res.exit_code == 0 and "r9" in res.output and TRACE not in res.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--trace", "deadbeef"], 1, "no trace with id deadbeef"),
        (["--requester", "nobody"], 1, "no trace for requester nobody"),
    ],
)
def test_cli_selection_misses(trace_file, args, code, message):
    res = _run(str(trace_file), *args)
    assert res.exit_code == code
    assert message in res.stderr
    assert "Traceback" not in res.output


def test_cli_bad_files(tmp_path: Path):
    res = _run(str(tmp_path / "missing.jsonl"))
    assert res.exit_code == 2
    assert res.stderr.strip().endswith("missing.jsonl: no such file")
    assert len(res.stderr.strip().splitlines()) == 1
    text = tmp_path / "notes.txt"
    text.write_text("hello\nthis is not json\n")
    res = _run(str(text))
    assert res.exit_code == 2
    assert "not an OTLP JSON lines file" in res.stderr
    res = _run(str(tmp_path))
    assert res.exit_code == 2 and "is a directory" in res.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    res = _run(str(empty))
    assert res.exit_code == 0 and "no spans" in res.stderr


def test_cli_skipped_lines_are_reported(trace_file):
    with trace_file.open("a") as fh:
        fh.write("garbage\n")
    res = _run(str(trace_file))
    assert res.exit_code == 0
    assert "warning: " in res.stderr and "skipped 1 of " in res.stderr


@pytest.mark.parametrize(
    "time", ["9" * 400, "-" + "9" * 400, str(1 << 64)], ids=["400-digits", "minus-400-digits", "2**64"]
)
@pytest.mark.parametrize("key", ["startTimeUnixNano", "endTimeUnixNano"])
def test_cli_a_time_outside_otlp_is_skipped_not_a_traceback(trace_file, key, time):
    """int() takes 400 digits, but no float holds such a span's duration or bar position:
    this was an OverflowError in sinks/show.py.  The reader skips the line, counted."""
    good = _run(str(trace_file)).output
    bad_trace = "2" * 32
    with trace_file.open("a") as fh:
        write_trace_line(fh, [_span("a", None, "fma.request", 0, 30, trace=bad_trace)])
    text = trace_file.read_text()
    at = text.index(bad_trace)
    field = f'"{key}":"'
    start = text.index(field, at) + len(field)
    end = text.index('"', start)
    trace_file.write_text(text[:start] + time + text[end:])
    res = _run(str(trace_file))
    assert res.exit_code == 0, res.output
    assert (
        "warning: " in res.stderr
        and "skipped 1 of " in res.stderr
        and len(res.stderr.strip().splitlines()) == 1
    )
    assert res.stdout == good


@pytest.mark.parametrize("width", ["9" * 400, "99999999999", "10001"])
def test_cli_a_width_no_terminal_has_is_a_usage_error(trace_file, width):
    """400 digits overflowed float in the bars, 10**11 exhausted memory: each a traceback."""
    res = _run(str(trace_file), "--width", width)
    assert res.exit_code == 2 and "--width" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_pipe_to_head_is_quiet(tmp_path: Path):
    big = tmp_path / "big.jsonl"
    with big.open("w") as fh:
        for i in range(1500):  # far more than a pipe buffer of output
            write_trace_line(fh, [_span("a", None, "fma.request", i, i + 30, trace=f"{i + 1:032x}"),
                                  _span("b", "a", "fma.actuation", i + 5, i + 30, trace=f"{i + 1:032x}")])  # fmt: skip
    cli = [sys.executable, "-c", "from fma_otel.cli import run; run()", "show", str(big)]
    proc = subprocess.run(
        f"{' '.join(map(repr, cli))} | head -1; echo \"rc=${{PIPESTATUS[0]}}\"",
        shell=True, executable="/bin/bash", cwd=REPO, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},  # the fixed pipe width
    )  # fmt: skip
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("r1  cold_launcher  trace 00000000000000000000000000000001")
    assert lines[-1] == "rc=0"
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


@pytest.fixture
def deep_file(tmp_path: Path) -> Path:
    p = tmp_path / "deep.jsonl"
    with p.open("w") as fh:
        write_trace_line(fh, deep_trace())
        write_trace_line(fh, three_levels())
    return p


@pytest.mark.parametrize("width", [80, 120, 200])
def test_cli_fits_width_and_columns(deep_file, width, monkeypatch):
    """No line wider than --width, nor than COLUMNS (also when piped, as here)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    by_flag = _run(str(deep_file), "--width", str(width))
    monkeypatch.setenv("COLUMNS", str(width))
    by_env = _run(str(deep_file))
    for res in (by_flag, by_env):
        assert res.exit_code == 0, res.output
        lines = res.stdout.splitlines()
        assert len(lines) == 14  # 2 headers, 6 + 5 spans, 1 blank: nothing wrapped or lost
        assert max(len(line) for line in lines) <= width
        assert sum("fma.launcher.create_" in line for line in lines) == 1
    assert by_flag.stdout == by_env.stdout


def test_cli_reads_stdin(trace_file):
    res = CliRunner().invoke(
        command, ["-", "--width", "60"], input=trace_file.read_text(), prog_name="fma-otel show"
    )
    assert res.exit_code == 0, res.output
    assert res.stdout == _run(str(trace_file), "--width", "60").stdout


def test_cli_reads_pretty_otlp_and_jaeger_json(trace_file, tmp_path: Path):
    want = _run(str(trace_file), "--width", "100").stdout
    reqs = [json.loads(line) for line in trace_file.read_text().splitlines()]
    pretty = tmp_path / "pretty.json"
    pretty.write_text("\n".join(json.dumps(r, indent=2) for r in reqs))
    res = _run(str(pretty), "--width", "100")
    assert res.exit_code == 0, res.output
    assert res.stdout == want and not res.stderr
    jaeger = tmp_path / "jaeger.json"
    jaeger.write_text(json.dumps({"data": [_to_jaeger(r) for r in reqs]}, indent=1))
    res = _run(str(jaeger), "--width", "100")
    assert res.exit_code == 0, res.output
    # Jaeger keeps µs: the waterfall of whole-second spans is the same
    assert res.stdout == want and not res.stderr


def _to_jaeger(req: dict) -> dict:
    """An OTLP JSON request as Jaeger's UI "Download JSON" writes a trace (test helper)."""
    spans, processes = [], {}
    for i, rs in enumerate(req["resourceSpans"]):
        attrs = {a["key"]: a["value"] for a in rs["resource"]["attributes"]}
        processes[f"p{i}"] = {"serviceName": attrs["service.name"]["stringValue"], "tags": []}
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                tags = []
                for a in sp.get("attributes", []):
                    ((kind, value),) = a["value"].items()
                    typ = {"boolValue": "bool", "intValue": "int64", "doubleValue": "float64"}.get(
                        kind, "string"
                    )
                    tags.append({"key": a["key"], "type": typ, "value": value})
                if sp.get("status", {}).get("code") == 2:
                    tags += [{"key": "otel.status_code", "type": "string", "value": "ERROR"},
                             {"key": "otel.status_description", "type": "string",
                              "value": sp["status"].get("message", "")}]  # fmt: skip
                start = int(sp["startTimeUnixNano"]) // 1000
                refs = [{"refType": "CHILD_OF", "traceID": sp["traceId"], "spanID": sp["parentSpanId"]}] \
                    if sp.get("parentSpanId") else []  # fmt: skip
                spans.append({"traceID": sp["traceId"], "spanID": sp["spanId"], "operationName": sp["name"],
                              "references": refs, "startTime": start,
                              "duration": int(sp["endTimeUnixNano"]) // 1000 - start,
                              "tags": tags, "processID": f"p{i}"})  # fmt: skip
    return {"traceID": spans[0]["traceID"], "spans": spans, "processes": processes}


def test_no_width_from_30_to_220_is_ever_exceeded():
    """Every width a terminal may have, not only the three the issue names."""
    spans = deep_trace() + three_levels()
    for width in range(30, 221):
        text = render_waterfall(spans, width, color=False)
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= width, width
        assert len(lines) == 14 and text.count("\n\n") == 1, width  # nothing wrapped or lost


def test_interval_forms_round_outwards():
    assert interval_forms(49.1537, 50.1541) == [
        "[49.153, 50.155]",
        "[49.153,50.155]",
        "[49.15,50.16]",
        "[49.1,50.2]",
        "[49,51]",
    ]
    assert interval_forms(1.5, 1.5)[-2:] == ["[1.5,1.5]", "[1,2]"]  # whole seconds: never narrower
    assert interval_forms(None, 2.0)[0] == "[?, 2.000]"
    # each form contains the one before: a bound just above 0 is never rounded to 0
    assert interval_forms(0.0, 9.99e-07) == [
        "[0.000, 0.001]",
        "[0.000,0.001]",
        "[0.00,0.01]",
        "[0.0,0.1]",
        "[0,1]",
    ]


@pytest.fixture(scope="module")
def sample_spans(tmp_path_factory) -> list[SpanRecord]:
    from fma_otel.cli import main
    from fma_otel.query.readers import read_spans

    out = tmp_path_factory.mktemp("show") / "sample.jsonl"
    r = CliRunner().invoke(main, ["bridge", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return list(read_spans(str(out), {}))


_SHOWN = re.compile(r"│ +(\d+\.\d{3})s  \[([\d.]+), ?([\d.]+)\]")


@pytest.mark.slow
def test_every_span_shows_its_interval_beside_the_duration_and_it_holds_min_max(sample_spans):
    """From 68 columns on, every span of the bridge's sample (each has min_s/max_s) shows
    ``[min, max]`` right after its duration, in some form that contains the true bounds."""
    from fma_otel.sinks.show import group_traces, tree_lines

    assert all("fma.duration.min_s" in s.attributes for s in sample_spans) and len(sample_spans) > 50
    for width in range(68, 221):
        for trace in group_traces(sample_spans):
            lines = render_waterfall(trace, width, color=False).splitlines()[1:]
            for line, (_d, s, _o) in zip(lines, tree_lines(trace), strict=True):
                m = _SHOWN.search(line)
                assert m, (width, line)
                a, b = s.attributes["fma.duration.min_s"], s.attributes["fma.duration.max_s"]
                assert float(m.group(2)) <= a + 1e-9 and float(m.group(3)) >= b - 1e-9, (width, line, a, b)
                assert float(m.group(1)) == pytest.approx(s.duration_s, abs=5e-4)
