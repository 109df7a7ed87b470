"""The OTLP JSON lines of many actuations, built and encoded by forked workers.

Why: once the sources are read, building each actuation's span tree and encoding it as
one OTLP JSON line is the bridge's last serial step (about a third of its time on a big
capture), while the other CPUs sit idle.  That work is per actuation, pure and
independent, so contiguous slices of the actuations are handed to forked workers, which
build and encode their slice and send back only its text; this process does the first
slice itself and writes the slices in order.  The bytes are exactly those of building and
encoding every actuation here, in order (``tests/test_trace_lines.py``).

Workers are only forked (they need this process's actuations, which a spawned worker
would have to be sent), and only when this process runs no other thread (see
``workers.py``); otherwise, for few actuations, or with ``jobs=1``,
everything is done here.  A worker that fails for any reason has its slice redone here,
so a failure costs time, never lines.
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


def _work(conn: Any, acts: Sequence[Actuation]) -> None:
    # No collections in the worker: a full one would walk (and so copy, page by page) the
    # whole heap it shares with the parent; it lives for one slice.
    gc.disable()
    try:
        conn.send(encode_slice(acts))
    except BaseException as exc:  # noqa: BLE001  (the parent redoes the slice)
        conn.send(exc.__class__.__name__)
    finally:
        conn.close()


def trace_lines(
    acts: Sequence[Actuation], jobs: int, min_actuations: int | None = None
) -> Iterator[tuple[str, int, int]]:
    """``(text, traces, spans)`` per slice of ``acts``, in order; see the module doc.

    ``min_actuations`` defaults to :data:`MIN_PARALLEL_ACTUATIONS`.
    """
    if min_actuations is None:
        min_actuations = MIN_PARALLEL_ACTUATIONS
    if jobs < 2 or len(acts) < min_actuations or not can_fork():
        yield encode_slice(acts)
        return
    cuts = [len(acts) * k // jobs for k in range(jobs + 1)]
    slices = [acts[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]
    ctx = mp.get_context("fork")
    workers: list[tuple[Any, Any, Sequence[Actuation]]] = []
    # Everything allocated so far is left out of this process's collections while the
    # workers run: a full collection here would write to every object's header, and so
    # copy every page this process shares with them (measured: a third of the gain lost).
    gc.freeze()
    for part in slices[1:]:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_work, args=(send, part), daemon=True)
        try:
            p.start()
        except OSError:
            recv.close()
            send.close()
            break  # no more processes to be had: the slices without a worker are done here
        send.close()
        workers.append((p, recv, part))
    try:
        yield encode_slice(slices[0])
        for _p, recv, part in workers:
            try:
                got = recv.recv()
            except (EOFError, OSError):
                got = None
            yield got if isinstance(got, tuple) else encode_slice(part)
        for part in slices[1 + len(workers) :]:
            yield encode_slice(part)
    finally:
        gc.unfreeze()
        for p, recv, _ in workers:  # also when the caller stops early (a failed write)
            recv.close()
            if p.is_alive():
                p.terminate()
            p.join()
