"""``fma-otel report FILE --out report.html``: one self-contained HTML file to look at.

FILE may be ``-`` (standard input), which is spooled to a temporary file first: the report
reads its input twice (a summary pass, then the waterfalls' spans).

Exit codes: 0 written (an empty trace file gives a report that says so); 1 the output
cannot be written; 2 bad input (missing or unreadable file, not OTLP JSON lines, a bad SLO
spec, matplotlib not installed), always with one line on stderr.  Unlike ``slo``, a failed
SLO is not an error here: the report shows it, and ``slo`` is the CI gate.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import click

from . import params
from ._common import byte_progress, fail, open_out, reading_traces
from .params import check_out

_EPILOG = """
\b
Examples:
  fma-otel report out/traces.jsonl --out report.html
  fma-otel report out/traces.jsonl --slo slo.yaml --top 5 --png figures/ --out report.html
  fma-otel report out/traces.jsonl --trace-url 'http://jaeger:16686/trace/{trace_id}' --out report.html
"""


@click.command("report", help="Write a self-contained HTML report with plots and waterfalls.", epilog=_EPILOG)
@params.traces_input
@click.option(
    "--out",
    "out",
    required=True,
    metavar="FILE",
    callback=check_out,
    help="The HTML file to write ('-' for stdout).",
)
@click.option("--slo", "slo_file", metavar="FILE", help="YAML SLO spec (as for 'fma-otel slo').")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Waterfalls of the N slowest finished actuations (and up to N unfinished ones).",
)
@click.option(
    "--png", "png_dir", metavar="DIR", help="Also write every plot as a PNG (1500 px wide, 150 dpi)."
)
@click.option(
    "--trace-url",
    metavar="URL",
    help="Link each actuation to its trace: a URL with {trace_id}, e.g. 'http://jaeger:16686/trace/{trace_id}'.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary on stderr.")
def command(
    traces_file: str | None,
    traces_alias: str | None,
    out: str,
    slo_file: str | None,
    top: int,
    png_dir: str | None,
    trace_url: str | None,
    quiet: bool,
) -> None:
    from ..query import QueryError

    traces = params.one_trace_file(traces_file, traces_alias)
    if traces is None:
        raise click.UsageError("give the trace file (FILE, '-' for stdin)")
    if trace_url is not None and "{trace_id}" not in trace_url:
        fail(
            f"--trace-url {trace_url!r} must contain {{trace_id}} (e.g. 'http://jaeger:16686/trace/{{trace_id}}')"
        )
    from ..query.slo_spec import load_spec

    try:  # matplotlib itself, up front: the report modules import it only when drawing
        import matplotlib  # noqa: F401

        from ..report.html import render_report
    except ImportError as exc:
        if exc.name and exc.name.split(".")[0] == "matplotlib":
            fail("matplotlib is not installed; pip install 'fma-otel[report]'")
        raise
    from ..query.readers import skipped_note
    from ..report.load import load

    try:
        checks = load_spec(slo_file) if slo_file else []
    except QueryError as exc:
        fail(str(exc))
    with reading_traces(traces), _readable_twice(traces) as path:
        data = load(path, checks, top, progress=functools.partial(byte_progress, quiet=quiet))
    try:
        if png_dir:
            os.makedirs(png_dir, exist_ok=True)
        text, figs = render_report(data, png_dir, trace_url=trace_url)
    except OSError as exc:  # the folder, or a PNG in it, cannot be written
        fail(f"--png {png_dir}: {exc.strerror or exc}", 1)
    # as show and slo say it, also with --quiet: a line lost is no summary
    note = skipped_note(traces, {"skipped": data.skipped_lines, "lines": data.lines})
    if note:
        click.echo(f"fma-otel report: warning: {note}", err=True)
    with open_out(out) as fh:
        fh.write(text)
    if not quiet and out != "-":
        size = len(text.encode())
        pngs = f", {len(figs.pngs)} PNG in {png_dir}" if png_dir else ""
        what = "no actuations" if data.empty else f"{data.traces} actuation(s), {figs.count} figure(s)"
        click.echo(f"fma-otel report: wrote {out} ({size / 1024:.0f} KiB; {what}{pngs})", err=True)


@contextlib.contextmanager
def _readable_twice(path: str) -> Iterator[str]:
    """``path`` itself, or for ``-`` standard input copied to a temporary file (removed after)."""
    if path != "-":
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="fma-otel-report-", suffix=".jsonl") as tmp:
        shutil.copyfileobj(sys.stdin.buffer, tmp)
        tmp.flush()
        yield tmp.name
