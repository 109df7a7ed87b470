"""``benchmarks/phases.py``: every phase of the bridge is timed, on the same traces.

Why: the "by phase" rows of benchmarks/README.md's table are made by it; a phase left out
(or one source read into the correlator twice) would make that table lie.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from fma_otel import bridge as B

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_phases", ROOT / "benchmarks" / "phases.py")
assert _spec and _spec.loader
phases = importlib.util.module_from_spec(_spec)
sys.modules["bench_phases"] = phases
_spec.loader.exec_module(phases)


def test_every_phase_is_timed_on_the_sample(capsys) -> None:
    rows = phases.phases(str(B.sample_dir()))
    assert list(rows) == [
        "imports (fma_otel's bridge modules)",
        "Pods: read and parse",
        "Pods: facts into the correlator",
        "launcher logs: read and parse",
        "launcher logs: facts into the correlator",
        "DPC log: read and parse",
        "DPC log: facts into the correlator",
        "correlator: assembling actuations",
        "building span trees",
        "encoding OTLP JSON and writing",
    ]
    assert rows["DPC log: read and parse"] > 0
    assert phases.main([str(B.sample_dir())]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| phase | CPU s | share |"
    assert out[-1].startswith("| total | ") and out[-1].endswith(" | 100% |")
    assert len(out) == 2 + len(rows) + 1
