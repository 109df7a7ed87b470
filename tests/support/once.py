"""Make an expensive, read-only test input once per test run, even under pytest-xdist.

Why: a session-scoped fixture runs once per xdist worker, so the sample report (seconds of
matplotlib drawing) was drawn by both workers of ``-n 2``.  The first worker to need it
makes it under a file lock in the run's temporary folder (shared by its workers); the
others wait for it and read what it left.  Without xdist it is simply made.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def made_once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], dict[str, Any]]
) -> dict[str, Any]:
    """``make(folder)`` once per run; its result (JSON-able, paths as strings) for every caller."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return make(tmp_path_factory.mktemp(name))
    root = tmp_path_factory.getbasetemp().parent  # this run's folder: one per run, all workers
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = root / f"{name}.json"
        if done.exists():
            return json.loads(done.read_text())
        folder = root / name
        folder.mkdir()
        result = make(folder)
        done.write_text(json.dumps(result))
        return result
