"""Shared bits of the atheris harnesses (not part of CI: see fuzz/run.sh).

Why a module: each harness must check the same accounting invariant the parsers promise
(every line or object read is either understood or skipped), and turn a broken invariant
into an exception so libFuzzer saves the input as a crash artifact.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


class InvariantBroken(AssertionError):
    """Raised by a harness when a parser's promise does not hold for an input."""


def check_accounting(stats: object, what: str) -> None:
    """``read == understood + ignored + skipped``, all non-negative: the contract of ``SourceStats``."""
    read = stats.read  # type: ignore[attr-defined]
    understood = stats.understood  # type: ignore[attr-defined]
    skipped = stats.skipped  # type: ignore[attr-defined]
    ignored = getattr(stats, "ignored", 0)
    if understood < 0 or skipped < 0 or ignored < 0 or read != understood + ignored + skipped:
        raise InvariantBroken(
            f"{what}: read {read} != understood {understood} + ignored {ignored} + skipped {skipped}"
        )
