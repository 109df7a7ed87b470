"""The OTLP JSON lines of many actuations, built and encoded by forked workers.

Why: once the sources are read, building each actuation's span tree and encoding it as
one OTLP JSON line is the bridge's last serial step (about a third of its time on a big
capture), while the other CPUs sit idle.  That work is per actuation, pure and
independent, so the actuations are cut into contiguous slices (at most ``MAX_SLICE``
each), dealt in turn to this process and forked workers; a worker builds and encodes its
slices and sends back only their text, one at a time, and this process writes the slices
in order.  The bytes are exactly those of building and
encoding every actuation here, in order (``tests/test_trace_lines.py``).

Workers are only forked (they need this process's actuations, which a spawned worker
would have to be sent), and only when this process runs no other thread (see
``workers.py``); otherwise, for few actuations, or with ``jobs=1``,
everything is done here.  A worker that fails for any reason has its remaining slices
done here, so a failure costs time, never lines.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
from collections.abc import Iterator, Sequence
from typing import Any

from .build import build_trace
from .correlate import Actuation
from .sinks.otlp_json import export_request_text
from .workers import can_fork

#: Fewer actuations than this are done here: a fork and a pipe cost more than they save.
MIN_PARALLEL_ACTUATIONS = 256


def encode_slice(acts: Sequence[Actuation]) -> tuple[str, int, int]:
    """``(text, traces, spans)`` of ``acts``: one OTLP JSON line per actuation, in order."""
    lines: list[str] = []
    spans = 0
    for act in acts:
        trace = build_trace(act)
        spans += len(trace)
        lines.append(export_request_text(trace))
        lines.append("\n")
    return "".join(lines), len(acts), spans


#: At most this many actuations per slice, so that the text held at once (a slice per
#: process, a few MB) does not grow with the capture.
MAX_SLICE = 500


def _slices(acts: Sequence[Actuation], jobs: int) -> list[Sequence[Actuation]]:
    """Contiguous slices, as even as ``jobs`` allow and none over :data:`MAX_SLICE`."""
    n = len(acts)
    count = max(jobs, -(-n // MAX_SLICE))
    cuts = [n * k // count for k in range(count + 1)]
    return [acts[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


def _work(conn: Any, parts: Sequence[Sequence[Actuation]]) -> None:
    """Worker: encode its slices in order, sending each as soon as it is done."""
    # No collections in the worker: a full one would walk (and so copy, page by page) the
    # whole heap it shares with the parent.
    gc.disable()
    try:
        for part in parts:
            conn.send(encode_slice(part))
    except BaseException as exc:  # noqa: BLE001  (the parent does the rest of its slices)
        conn.send(exc.__class__.__name__)
    finally:
        conn.close()


def trace_lines(
    acts: Sequence[Actuation], jobs: int, min_actuations: int | None = None
) -> Iterator[tuple[str, int, int]]:
    """``(text, traces, spans)`` per slice of ``acts``, in order; see the module doc.

    Slice ``i`` is encoded by process ``i % jobs`` (0 is this one), so each worker has the
    next of its slices ready while this process writes and encodes; a worker blocks on its
    pipe until its slice is taken, which keeps the text held at once to a slice per process.
    ``min_actuations`` defaults to :data:`MIN_PARALLEL_ACTUATIONS`.
    """
    if min_actuations is None:
        min_actuations = MIN_PARALLEL_ACTUATIONS
    if jobs < 2 or len(acts) < min_actuations or not can_fork():
        yield encode_slice(acts)
        return
    slices = _slices(acts, jobs)
    ctx = mp.get_context("fork")
    workers: list[tuple[Any, Any]] = []
    # Everything allocated so far is left out of this process's collections while the
    # workers run: a full collection here would write to every object's header, and so
    # copy every page this process shares with them (measured: a third of the gain lost).
    gc.freeze()
    for w in range(1, jobs):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_work, args=(send, slices[w::jobs]), daemon=True)
        try:
            p.start()
        except OSError:
            recv.close()
            send.close()
            break  # no more processes to be had: the slices without a worker are done here
        send.close()
        workers.append((p, recv))
    alive = [True] * len(workers)
    try:
        for i, part in enumerate(slices):
            w = i % jobs
            got: Any = None
            if 0 < w <= len(workers) and alive[w - 1]:
                try:
                    got = workers[w - 1][1].recv()
                except (EOFError, OSError):
                    got = None
                if not isinstance(got, tuple):
                    alive[w - 1] = False  # gone or failed: its slices are done here from now on
            yield got if isinstance(got, tuple) else encode_slice(part)
    finally:
        gc.unfreeze()
        for p, recv in workers:  # also when the caller stops early (a failed write)
            recv.close()
            if p.is_alive():
                p.terminate()
            p.join()
