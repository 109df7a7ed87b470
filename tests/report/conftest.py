"""Fixtures for the report tests: trace files made by the real bridge and by hand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.model import S
from fma_otel.span_records import SpanRecord
from tests.support.once import made_once_per_run

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts"
T0 = 1_780_000_000 * S


@pytest.fixture(scope="session")
def sample_traces(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The bridge's output for its embedded sample: every path, one unfinished actuation."""

    def make(d: Path) -> dict[str, str]:
        out = d / "traces.jsonl"
        r = CliRunner().invoke(main, ["bridge", "--out", str(out)])
        assert r.exit_code == 0, r.output
        return {"path": str(out)}

    return made_once_per_run(tmp_path_factory, "sample", make)["path"]


@dataclass(frozen=True)
class SampleReport:
    """One rendering of the sample, shared: rendering is the slow part of these tests."""

    html: Path
    png_dir: Path
    stderr: str
    exit_code: int


@pytest.fixture(scope="session")
def sample_report(sample_traces: str, tmp_path_factory: pytest.TempPathFactory) -> SampleReport:
    """The sample's report with an SLO spec (one check fails), two waterfalls and PNGs
    (drawn once per run: the tests only read it)."""

    def make(d: Path) -> dict[str, object]:
        spec = d / "slo.yaml"
        spec.write_text("- {metric: T_actuation, path: hot, p95: 5s}\n- {hit_rate: hot, min: 0.2}\n")
        out, png = d / "report.html", d / "png"
        r = CliRunner().invoke(
            main,
            ["report", sample_traces, "--slo", str(spec), "--png", str(png), "--top", "2", "--out", str(out)],
        )
        return {"html": str(out), "png_dir": str(png), "stderr": r.stderr, "exit_code": r.exit_code}

    made = made_once_per_run(tmp_path_factory, "report", make)
    return SampleReport(Path(made["html"]), Path(made["png_dir"]), made["stderr"], made["exit_code"])


def span(
    trace: str,
    name: str,
    start_s: float,
    end_s: float,
    parent: str | None = None,
    span_id: str | None = None,
    status: str = "UNSET",
    **attrs: object,
) -> SpanRecord:
    """A span of a hand-made trace; times in seconds after T0."""
    sid = span_id or (name.encode().hex() + "0" * 16)[:16]
    return SpanRecord(
        trace_id=trace,
        span_id=sid,
        parent_span_id=parent,
        name=name,
        kind="INTERNAL",
        start_ns=T0 + round(start_s * S),
        end_ns=T0 + round(end_s * S),
        service="kubernetes",
        attributes=attrs,
        status_code=status,
    )
