"""How many worker processes the bridge uses, and how it may start them here and now.

One place for the policy the two parallel steps share (``sources/klog_segments.py`` reads
a long DPC log in segments; ``trace_lines.py`` builds and encodes trace lines in slices):

* as many workers as CPUs this process may run on (the cgroup/affinity view), at most 4:
  past that the steps are bound by this process taking their results in order;
* forked only when this process runs no other thread: a thread holding a lock at the
  fork leaves it held forever in the child (Python 3.12+ warns about it), and a host that
  embeds the bridge, or a test run, may well have some;
* stopped the same way (:func:`stop`), and run with the cyclic collector off
  (:func:`no_cyclic_gc`), which forked workers inherit.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

#: The most processes ``--jobs`` may ask for: past the CPUs there is nothing to gain, and
#: each worker holds file descriptors and a share of memory.
MAX_JOBS = 64


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


#: How long stopped workers are given, all together, to end before they are killed.
STOP_GRACE_S = 5.0


def stop(processes: Iterable[Any]) -> None:
    """End worker processes and reap them: ``SIGTERM`` to those still running, then, after
    at most :data:`STOP_GRACE_S` seconds for all of them together, ``SIGKILL`` to any left.  Why the kill: a forked worker inherits its host's signal handlers, and a
    host whose ``SIGTERM`` handler does not exit would otherwise wait for it for ever."""
    started = [p for p in processes if p.pid is not None]
    for p in started:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in started:
        p.join(max(0.0, deadline - time.monotonic()))
        if p.is_alive():
            p.kill()
            p.join()


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """CPython's cyclic collector off for the block, back as it was after.

    Why: the bridge allocates millions of objects (Pod JSON, records, facts, then
    actuations, spans and text) that are all acyclic and live until the traces are written;
    the collector kept walking them, 0.2-0.3 s of a 2 s run on a 200 MB capture (and 0.1 s
    of the 0.45 s ``trace_lines`` step, where with workers forked a full collection also
    writes to every object's header, and so copies every page shared with them).
    Reference counting still frees everything as usual; only garbage in reference cycles
    waits, and the bridge makes none at scale.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
