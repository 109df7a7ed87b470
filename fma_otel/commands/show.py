"""``fma-otel show FILE``: a waterfall of each trace in a trace file (``-``: stdin).

The file may be OTLP JSON lines, pretty-printed OTLP JSON or Jaeger's JSON
(:mod:`fma_otel.query.readers`); every line fits the width (:mod:`fma_otel.sinks.show`).

Exit codes: 0 shown (also when the reader of a pipe goes away: ``show | head`` is normal
use, not an error); 1 ``--trace``/``--requester`` matched nothing; 2 the file is missing,
unreadable or not OTLP JSON lines.
"""

from __future__ import annotations

import os
import sys

import click

from ..model import A_REQ_NAME
from ..query.readers import read_spans, skipped_note
from ..sinks.show import group_traces, render_waterfall
from ..span_records import SpanRecord
from ._common import fail, prog_name, reading_traces, terminal_width

#: Width when stdout is not a terminal: fixed, so piped output is the same everywhere.
PIPE_WIDTH = 120
#: The widest ``--width``: 400 digits of it overflowed float in the bars (OverflowError)
#: and 10**11 exhausted memory, each a traceback; no terminal is anywhere near this wide.
MAX_WIDTH = 10_000


def _warn(message: str) -> None:
    """A note on stderr, prefixed like :func:`fail`'s errors."""
    click.echo(f"{prog_name()}: {message}", err=True)


def _load(path: str) -> list[SpanRecord]:
    stats: dict[str, int] = {}
    with reading_traces(path):
        spans = list(read_spans(path, stats))
    note = skipped_note(path, stats)
    if note:  # as slo and report say it
        _warn(f"warning: {note}")
    return spans


def _select(spans: list[SpanRecord], trace: str | None, requester: str | None) -> list[list[SpanRecord]]:
    """Keep the traces asked for: ``--trace`` by id (a unique prefix will do), ``--requester``
    by the requester Pod name on any of the trace's spans."""
    traces = group_traces(spans)
    if trace:
        want = trace.strip().lower()
        exact = [t for t in traces if t[0].trace_id == want]
        hits = exact or [t for t in traces if t[0].trace_id.startswith(want)]
        if not hits:
            fail(f"no trace with id {trace}", 1)
        if len(hits) > 1:
            fail(f"trace id prefix {trace} matches {len(hits)} traces; give more digits", 1)
        traces = hits
    if requester:
        traces = [t for t in traces if any(s.attributes.get(A_REQ_NAME) == requester for s in t)]
        if not traces:
            fail(f"no trace for requester {requester}", 1)
    return traces


def _default_width(tty: bool) -> int:
    """COLUMNS when set (also through a pipe: ``COLUMNS=80 fma-otel show f | less``), else
    the terminal's width, else :data:`PIPE_WIDTH`; within ``[30, MAX_WIDTH]`` as for
    ``--width``, since COLUMNS may say anything."""
    width = terminal_width(tty, PIPE_WIDTH) or PIPE_WIDTH
    return min(max(width, 30), MAX_WIDTH)


@click.command(
    "show",
    help="Print a terminal waterfall of the traces in FILE ('-': stdin): OTLP JSON lines, "
    "pretty-printed OTLP JSON, or Jaeger JSON.",
)
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
@click.option("--trace", "trace_id", metavar="ID", help="Only this trace (hex id, or a unique prefix).")
@click.option("--requester", metavar="NAME", help="Only traces of this requester Pod.")
@click.option(
    "--width",
    type=click.IntRange(min=30, max=MAX_WIDTH),
    help="Line width; no line is wider (default: COLUMNS, else the terminal's, else 120).",
)
@click.option("--no-color", is_flag=True, help="Plain text even on a terminal (also: NO_COLOR set).")
def command(
    file: str, trace_id: str | None, requester: str | None, width: int | None, no_color: bool
) -> None:
    traces = _select(_load(file), trace_id, requester)
    if not traces:
        _warn(f"{file}: no spans")
        return
    tty = sys.stdout.isatty()
    color = tty and not no_color and not os.environ.get("NO_COLOR")
    if width is None:
        width = _default_width(tty)
    # One trace at a time: `show big.jsonl | head` stops early instead of rendering all (a
    # closed pipe is the reader having seen enough: ``cli.run`` makes it exit 0, no noise).
    for i, trace in enumerate(traces):
        sys.stdout.write(("\n" if i else "") + render_waterfall(trace, width, color))
        sys.stdout.flush()
