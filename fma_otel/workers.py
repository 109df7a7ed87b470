"""How many worker processes the bridge uses, and how it may start them here and now.

One place for the policy the two parallel steps share (``sources/klog_segments.py`` reads
a long DPC log in segments; ``trace_lines.py`` builds and encodes trace lines in slices):

* as many workers as CPUs this process may run on (the cgroup/affinity view), at most 4:
  past that the steps are bound by this process taking their results in order;
* forked only when this process runs no other thread: a thread holding a lock at the
  fork leaves it held forever in the child (Python 3.12+ warns about it), and a host that
  embeds the bridge, or a test run, may well have some.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading


def default_jobs() -> int:
    """CPUs this process may run on (the cgroup/affinity view where there is one), max 4."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(4, n))


def can_fork() -> bool:
    """Whether worker processes may be forked here and now (see the module doc)."""
    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1


def start_method() -> str | None:
    """How workers that need nothing of this process's memory are started: ``fork`` when
    it is safe, else ``spawn``; ``None`` where the platform has neither."""
    if can_fork():
        return "fork"
    return "spawn" if "spawn" in mp.get_all_start_methods() else None
