"""Reading a trace file for the report: two streaming passes, bounded memory.

Pass 1 keeps a small summary per actuation and feeds the ``slo`` engine's harvest; pass 2
keeps the full spans of only the few actuations drawn as waterfalls.  Why two passes and
not one: a file of 100k actuations holds millions of spans, and a trace's spans may be
spread over several lines (a collector's file exporter batches by time, not by trace).

Files are read by the one reader of trace files, :func:`fma_otel.query.readers.read_spans`
(OTLP JSON lines, pretty-printed OTLP JSON, Jaeger's JSON), as ``show`` and ``slo`` read them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from ..query.readers import Advance, read_spans
from ..query.slo_spec import Check
from .data import ReportData, Summaries, prepare

Progress = Callable[[str, int], AbstractContextManager[Advance | None]]


def load(
    path: str,
    checks: list[Check],
    top: int,
    progress: Progress = lambda label, total: nullcontext(None),
) -> ReportData:
    """Everything the report needs from ``path``.

    ``progress(label, total_bytes)`` may return a context manager yielding an ``advance``
    callback (such as :func:`fma_otel.commands._common.byte_progress` with ``quiet`` bound).
    ``path`` must be a file that can be read twice (the command spools standard input).
    """
    size = os.path.getsize(path)
    summaries = Summaries()
    stats: dict[str, int] = {}
    with progress("reading traces", size) as advance:
        for s in read_spans(path, stats, advance):
            summaries.add(s)
    data = prepare(path, summaries, checks, top)
    data.skipped_lines = stats.get("skipped", 0)
    data.lines = stats.get("lines", 0)
    wanted = {t.trace_id for t in (*data.slowest, *data.unfinished)}
    if wanted:
        with progress("waterfalls", size) as advance:
            for s in read_spans(path, {}, advance):
                if s.trace_id in wanted:
                    data.spans.setdefault(s.trace_id, []).append(s)
    return data
