"""Reading a trace file for the report: two streaming passes, bounded memory.

Pass 1 keeps a small summary per actuation and feeds the ``slo`` engine's harvest; pass 2
keeps the full spans of only the few actuations drawn as waterfalls.  Why two passes and
not one: a file of 100k actuations holds millions of spans, and a trace's spans may be
spread over several lines (a collector's file exporter batches by time, not by trace).

The line loop mirrors :func:`fma_otel.sinks.otlp_json.read_spans` (same decoding through
:func:`~fma_otel.sinks.otlp_json.spans_from_request`, same "wrong kind of file" rule) but
reports bytes read, which a progress bar needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext

from ..model import SpanRecord
from ..query.harvest import Harvest
from ..query.slo_spec import Check
from ..sinks.otlp_json import read_spans
from .data import ReportData, Summaries, prepare

Advance = Callable[[int], None]
Progress = Callable[[str, int], AbstractContextManager[Advance | None]]


def iter_spans(path: str, stats: dict[str, int], advance: Advance | None = None) -> Iterator[SpanRecord]:
    """Spans of an OTLP JSON lines file; ``stats`` counts ``lines`` and ``skipped``.

    The one reader of these files (:func:`fma_otel.sinks.otlp_json.read_spans`): a malformed
    line is skipped whole, a span time outside OTLP's ``fixed64`` range included.  Raises
    :class:`OSError` for an unreadable file and :class:`OtlpJsonError` when no line is OTLP
    JSON (an empty file is fine: it simply has no actuation).
    """
    return read_spans(path, stats, advance)


def load(
    path: str,
    checks: list[Check],
    top: int,
    progress: Progress | None = None,
) -> ReportData:
    """Everything the report needs from ``path``.

    ``progress(label, total_bytes)`` may return a context manager yielding an ``advance``
    callback (such as :func:`fma_otel.commands._common.byte_progress` with ``quiet`` bound).
    """
    size = os.path.getsize(path)
    harvest = Harvest()
    summaries = Summaries()
    stats: dict[str, int] = {}
    with _maybe(progress, "reading traces", size) as advance:
        for s in iter_spans(path, stats, advance):
            summaries.add(s)
            harvest.add_span(s.trace_id, s.span_id, s.name, s.start_ns, s.end_ns, s.attributes)
    data = prepare(path, harvest, summaries, checks, top)
    data.skipped_lines = stats.get("skipped", 0)
    wanted = {t.trace_id for t in (*data.slowest, *data.unfinished)}
    if wanted:
        with _maybe(progress, "waterfalls", size) as advance:
            for s in iter_spans(path, {}, advance):
                if s.trace_id in wanted:
                    data.spans.setdefault(s.trace_id, []).append(s)
    return data


def _maybe(progress: Progress | None, label: str, total: int) -> AbstractContextManager[Advance | None]:
    return progress(label, total) if progress is not None else nullcontext(None)
