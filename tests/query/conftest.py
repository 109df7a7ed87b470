"""Shared fixtures: a generated trace file with hand-checkable figures."""

from __future__ import annotations

import pytest

from fma_otel.model import COLD_LAUNCHER, COLD_NO_FMA, UNKNOWN, WARM

from .gen import Act, hot, write


def mixed_acts() -> list[Act]:
    """10 hot (T_actuation 1..10 s), 2 unfinished hot, 3 warm, 4 cold, 1 baseline, 1 unknown.

    FMA requesters: 10 + 2 + 3 + 4 + 1 (unknown) = 20; the baseline is not one.
    """
    acts = [hot(f"h{i}", float(i), start_s=10.0 * i) for i in range(1, 11)]
    acts += [hot(f"hx{i}", 100.0, complete=False, start_s=200.0 + i) for i in range(2)]
    acts += [Act(f"w{i}", WARM, {"T_actuation": 20.0 + i, "T_instance_ready": 15.0 + i}) for i in range(3)]
    acts += [
        Act(
            f"c{i}", COLD_LAUNCHER, {"T_actuation": 60.0, "T_cold_launcher": 55.0, "T_launcher_schedule": 1.0}
        )
        for i in range(4)
    ]
    acts.append(Act("b0", COLD_NO_FMA, {"T_actuation": 30.0}))
    acts.append(Act("u0", UNKNOWN, {}))
    return acts


@pytest.fixture
def mixed_file(tmp_path) -> str:
    return write(str(tmp_path / "traces.jsonl"), mixed_acts())
