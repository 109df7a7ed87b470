"""``fma-otel report``: exit codes, one-line errors, the empty file, PNG sizes, SLO verdicts."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.report.svg import FIG_WIDTH_PX, PNG_DPI

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args: str):
    return CliRunner().invoke(main, ["report", *args], prog_name="fma-otel")


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG format puts first."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_MAGIC, f"{path.name}: not a PNG"
    assert head[12:16] == b"IHDR", f"{path.name}: no IHDR first"
    return struct.unpack(">II", head[16:24])


@pytest.mark.slow
def test_empty_file_says_so(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "r.html"
    r = run(str(empty), "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "No actuations in this file." in text
    assert "<svg" not in text


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.jsonl", "no such file"),
        (lambda p: p, "is a directory"),
        (
            lambda p: (p / "x.json").write_text('{"kind": "PodList"}\n') and p / "x.json",
            "not an OTLP JSON lines file",
        ),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path, make, message):
    r = run(str(make(tmp_path)), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_bad_slo_spec_exit_2(sample_traces, tmp_path):
    spec = tmp_path / "slo.yaml"
    spec.write_text("- {metric: T_actuatoin, p95: 5s}\n")
    r = run(sample_traces, "--slo", str(spec), "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2 and "unknown metric 'T_actuatoin'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_png_files_are_valid_and_of_the_stated_size(sample_report):
    assert sample_report.exit_code == 0, sample_report.stderr  # a failed SLO is shown; 'slo' is the gate
    assert "wrote" in sample_report.stderr
    files = sorted(sample_report.png_dir.glob("*.png"))
    names = {f.name for f in files}
    assert {"hit-rates.png", "dist-T_actuation.png", "time-breakdown.png"} <= names
    assert sum(n.startswith("waterfall-") for n in names) == 2
    assert any(n.startswith("unfinished-") for n in names)
    for f in files:
        w, h = png_size(f)
        assert w == FIG_WIDTH_PX, f.name
        assert 150 <= h <= 3000, f.name
    assert png_size(sample_report.png_dir / "hit-rates.png") == (1500, 300)
    # one SLO mark on T_actuation: one legend line under the panels
    assert png_size(sample_report.png_dir / "dist-T_actuation.png") == (1500, 480 + 40)
    assert png_size(sample_report.png_dir / "dist-T_wake.png") == (1500, 480)
    # 22 metrics (8 of the model's table, 14 of the vLLM and Pod phases) in 11 rows of two
    # panels, and the legend line of that SLO mark
    assert png_size(sample_report.png_dir / "trends.png") == (1500, 150 + 11 * 230 + 40)
    assert FIG_WIDTH_PX / PNG_DPI == 10  # inches: the stated size
    html = sample_report.html.read_text()
    assert html.count('<svg class="fig"') == len(files)
    assert 'class="fail">FAIL' in html  # hot p95 of the sample is above 5 s


@pytest.mark.slow
def test_report_is_self_contained_and_small(sample_report):
    html = sample_report.html.read_text()
    for needle in ("<script src", "<link", "@import", "url(http", 'href="http', 'src="http', "<img"):
        assert needle not in html
    assert html.count("<script>") == 1  # the table's sort, inline
    # small: the sample's ~20 metrics (vLLM and Kubernetes phases included), each a
    # figure, plus the breakdown, stay well under half a megabyte
    assert len(html.encode()) < 500_000


@pytest.mark.slow
def test_output_is_deterministic_but_for_the_timestamp(tmp_path):
    from fma_otel.sinks.otlp_json import write_trace_line

    from .test_data import hot_trace

    traces = tmp_path / "t.jsonl"
    with open(traces, "w") as fh:
        write_trace_line(fh, hot_trace("1" * 32, "r1", 4.0))
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert run(str(traces), "--out", str(a), "-q").exit_code == 0
    assert run(str(traces), "--out", str(b), "-q").exit_code == 0

    def body(p: Path) -> list[str]:
        return [ln for ln in p.read_text().splitlines() if "UTC</div>" not in ln]

    assert body(a) == body(b)


def test_trace_url_must_hold_the_trace_id(sample_traces, tmp_path):
    out = tmp_path / "r.html"
    r = run(sample_traces, "--trace-url", "http://jaeger:16686/trace/", "--out", str(out))
    assert r.exit_code == 2
    assert len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith("fma-otel report: ") and "must contain {trace_id}" in r.stderr
    assert not out.exists()


@pytest.mark.slow
def test_trace_url_links_every_actuation(sample_traces, sample_report, tmp_path):
    import re

    out = tmp_path / "r.html"
    plain = sample_report.html  # the same sample's report without --trace-url (shared rendering)
    url = "http://tempo:3200/explore?trace={trace_id}&x=1"
    assert run(sample_traces, "--trace-url", url, "--top", "1", "--out", str(out), "-q").exit_code == 0
    assert sample_report.exit_code == 0, sample_report.stderr
    text = out.read_text()
    table = text[text.index('id="actuations"') : text.index("</table>", text.index('id="actuations"'))]
    linked = re.findall(
        r'<a class="trace" href="http://tempo:3200/explore\?trace=([0-9a-f]{32})&amp;x=1"', table
    )
    assert len(linked) == len(set(linked)) == 6  # every actuation of the sample, once
    assert table.count("<tr>") == 1 + 6  # the header and a row per actuation
    # the waterfalls link too: one slowest and the unfinished one
    assert text.count(">open trace</a>") == 2
    assert 'class="trace"' not in plain.read_text()


@pytest.mark.slow
def test_trace_url_with_braces_of_its_own(sample_traces, tmp_path):
    """Grafana's explore URL holds JSON: only {trace_id} is replaced, quotes are escaped."""
    tid = "a86df125dc587d97def37508e975f400"  # the sample's unfinished actuation
    # that actuation alone: its row in the table carries the link; nothing to draw
    one = tmp_path / "one.jsonl"
    one.write_text("".join(ln for ln in Path(sample_traces).read_text().splitlines(True) if tid in ln))
    assert one.read_text().count("\n") == 1
    out = tmp_path / "r.html"
    url = 'http://grafana:3000/explore?left={"queries":[{"query":"{trace_id}"}]}'
    assert run(str(one), "--trace-url", url, "--top", "0", "--out", str(out), "-q").exit_code == 0
    text = out.read_text()
    want = (
        f"http://grafana:3000/explore?left={{&quot;queries&quot;:[{{&quot;query&quot;:&quot;{tid}&quot;}}]}}"
    )
    assert f'<a class="trace" href="{want}"' in text


@pytest.mark.slow
def test_table_and_breakdown_say_what_a_person_needs(sample_report):
    text = sample_report.html.read_text()
    assert 'id="range">capture covers 2026-' in text and " UTC (" in text
    table = text[text.index('id="actuations"') :]
    table = table[: table.index("</table>")]
    assert "no: the requester never became Ready; " in table  # words, not R.ready
    assert "R.ready" not in table
    assert "≥ " in table  # the unfinished actuation's T_actuation is a lower bound
    # each duration with the interval it is known to lie in (cold_launcher: 52 s, 1 s stamps)
    assert re.search(r'<td data-v="52.000" title="the duration is in \[[\d.]+, [\d.]+\] s \(boundary precision\)">'
                     r'52.00s<span class="iv">\[[\d.]+, [\d.]+\]</span></td>', table), table  # fmt: skip
    phases = text[text.index('id="phases"') :]
    phases = phases[: phases.index("</table>")]
    assert "<th>p50</th><th>p90</th><th>p99</th>" in phases
    assert "cold_no_fma (n=1), baseline" in phases
    assert phases.count("T_actuation (whole)") == 4  # cold_launcher, warm, hot and the baseline
    assert phases.count("named leaves together") == 4
    assert "uncovered in " in phases  # gaps no leaf covers are shown, not hidden
    # the SLO table: each percentile with its interval (the slo engine's cells)
    assert re.search(
        r'<td>52.00s<span class="iv">\[[\d.]+, [\d.]+\]</span></td>', text[: text.index('id="hit"')]
    )
    # the sample re-actuates one requester: 4 FMA requesters, 5 actuations; the rates (the
    # slo engine's) are per requester, and the figure says both counts
    assert "Hit rates over 4 FMA requesters (their first actuation; 5 actuations in all)" in text


def test_without_matplotlib_says_which_extra(sample_traces, tmp_path):
    """matplotlib made unimportable (as on an install without the extra): one line, exit 2."""
    import os
    import subprocess
    import sys

    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(shim), env.get("PYTHONPATH", "")])
    out = tmp_path / "r.html"
    entry = shim / "fma-otel"  # the console script's name, which the error line starts with
    entry.write_text("from fma_otel.cli import run\nrun()\n")
    r = subprocess.run(
        [sys.executable, str(entry), "report", sample_traces, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("fma-otel report: ")
    assert "pip install 'fma-otel[report]'" in lines[0]
    assert "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.slow
def test_only_unfinished_actuations_still_list_them(tmp_path):
    """Nothing finished: no trend, no breakdown, no warning; the table still has them all."""
    import warnings

    from fma_otel.sinks.otlp_json import write_trace_line

    from .test_data import hot_trace

    traces = tmp_path / "t.jsonl"
    with open(traces, "w") as fh:
        write_trace_line(fh, hot_trace("1" * 32, "r1", 4.0, complete=False))
        write_trace_line(fh, hot_trace("2" * 32, "r2", 9.0, complete=False))
    out = tmp_path / "r.html"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a matplotlib warning would be an exception: exit 1
        r = run(str(traces), "--out", str(out), "-q")
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "No finished actuation to show over time." in text
    assert '<h2 id="all">All 2 actuation(s)</h2>' in text
    assert text.count('<td class="why">no: ') == 2


def _table_rows(html: str) -> int:
    table = html[html.index('id="actuations"') :]
    return table[: table.index("</table>")].count("<tr") - 1  # less the header row


def _paths(line: str) -> set[str]:
    """The ``fma.path`` values in one OTLP JSON line."""
    import json

    return {
        a["value"]["stringValue"]
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for sp in ss["spans"]
        for a in sp.get("attributes", [])
        if a["key"] == "fma.path"
    }


@pytest.mark.slow
def test_stdin_alias_and_pretty_json_give_the_same_report(sample_traces, tmp_path):
    """``-`` (spooled: the report reads twice) and ``--traces`` with a pretty-printed OTLP
    JSON file both go through the one reader and give every actuation of the input.

    The input is the sample's two hot actuations: two documents, each over many lines when
    pretty, and the fewest figures to draw (the other paths' phases only add drawing)."""
    import json

    lines = [ln for ln in Path(sample_traces).read_text().splitlines() if _paths(ln) == {"hot"}]
    pretty = tmp_path / "pretty.json"
    pretty.write_text("\n".join(json.dumps(json.loads(x), indent=2) for x in lines))
    for how, args, stdin in [
        ("stdin", ["-"], "".join(ln + "\n" for ln in lines)),
        ("alias-pretty", ["--traces", str(pretty)], None),
    ]:
        out = tmp_path / f"{how}.html"
        r = CliRunner().invoke(
            main, ["report", *args, "--out", str(out), "-q", "--top", "0"], input=stdin, prog_name="fma-otel"
        )
        assert r.exit_code == 0, (how, r.output)
        assert _table_rows(out.read_text()) == len(lines) == 2, how


def test_no_trace_file_is_a_usage_error(tmp_path):
    r = run("--out", str(tmp_path / "r.html"))
    assert r.exit_code == 2
    assert "give the trace file" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("quiet", [[], ["--quiet"]], ids=["", "quiet"])
def test_skipped_lines_are_said_on_stderr_as_slo_and_show_say_them(tmp_path, quiet):
    """``show`` and ``slo`` warned on stderr; ``report`` said it only on the page."""
    from ..query.gen import hot, write

    traces = write(str(tmp_path / "t.jsonl"), [hot("ok", 2.0)])
    with open(traces, "a", encoding="utf-8") as fh:
        fh.write("not json\n")
    r = run(traces, "--out", str(tmp_path / "r.html"), *quiet)
    assert r.exit_code == 0, r.output
    note = f"{traces}: skipped 1 of 2 lines that are not (well-formed) OTLP JSON or Jaeger JSON"
    assert f"fma-otel report: warning: {note}" in r.stderr.splitlines()
    for cmd in ("show", "slo"):
        other = CliRunner().invoke(main, [cmd, traces], prog_name="fma-otel")
        assert f"fma-otel {cmd}: warning: {note}" in other.stderr.splitlines(), other.stderr
