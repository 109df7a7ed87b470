"""Host processes for tests of forked workers: what happens to the workers when the
process that forked them is killed, ignores signals, or does not ignore ``SIGPIPE``.

Why a separate process: those conditions cannot be set up in the test runner itself
without risking it (a ``SIGPIPE`` at its default kills it, a kill ends the run).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator


@contextlib.contextmanager
def host(script: str, *args: str) -> Iterator[subprocess.Popen[str]]:
    """A Python process running ``script`` with ``args``, in a session of its own; it and
    every process of its group are killed when done (a failing test must leave none)."""
    p = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        yield p
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan is reaped by init, which may take a moment)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def still_running(pids: list[int], within: float = 10.0) -> list[int]:
    """Those of ``pids`` still running after up to ``within`` seconds of waiting for them."""
    deadline = time.monotonic() + within
    alive = [pid for pid in pids if running(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if running(pid)]
    return alive
