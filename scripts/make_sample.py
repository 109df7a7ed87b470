"""Regenerate the embedded sample capture (``fma_otel/data/sample``) from the synthesizer.

The sample holds Pods, the DPC log and launcher logs, and (issue 22) Kubernetes Events
(``events.json``) and vLLM 0.26 logs (``vllm/*.log``) made from the same simulation.

Why a script: the synthesizer is test code (``tests/support/synth.py``) and is not shipped, yet
the sample it writes is.  The output is deterministic, so a test runs this script into a
temporary directory and compares bytes with the committed files.

    python scripts/make_sample.py               # rewrite fma_otel/data/sample in place
    python scripts/make_sample.py --out DIR     # write the sample elsewhere
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.synth import SAMPLE_DIR, write_sample  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=SAMPLE_DIR, help=f"output directory (default {SAMPLE_DIR})")
    args = ap.parse_args(argv)
    write_sample(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
