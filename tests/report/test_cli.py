"""``fma-otel report``: exit codes, one-line errors, the empty file, PNG sizes, SLO verdicts."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.report.svg import FIG_WIDTH_PX, PNG_DPI

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(*args: str):
    return CliRunner().invoke(main, ["report", *args])


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG format puts first."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_MAGIC, f"{path.name}: not a PNG"
    assert head[12:16] == b"IHDR", f"{path.name}: no IHDR first"
    return struct.unpack(">II", head[16:24])


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
    assert png_size(sample_report.png_dir / "dist-T_actuation.png") == (1500, 480)
    assert FIG_WIDTH_PX / PNG_DPI == 10  # inches: the stated size
    html = sample_report.html.read_text()
    assert html.count('<svg class="fig"') == len(files)
    assert 'class="fail">FAIL' in html  # hot p95 of the sample is above 5 s


def test_report_is_self_contained_and_small(sample_report):
    html = sample_report.html.read_text()
    for needle in ("<script", "<link", "@import", "url(http", 'href="http', 'src="http', "<img"):
        assert needle not in html
    assert len(html.encode()) < 300_000


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
