"""``fma-otel slo``: percentiles, hit rates and SLO verdicts from actuation traces.

Exit status is part of the interface, for CI gates: 0 when every SLO holds (or none was
given; an empty window is an empty report, not an error), 1 on any SLO violation, 2 on bad
arguments, unreadable files or an unusable server answer, always with one line on stderr.
"""

from __future__ import annotations

import os
import sys

import click

from ..query import QueryError
from ..query.formats import FORMATS
from ._common import byte_progress

_HELP_EPILOG = """
\b
Examples:
  fma-otel slo --traces out/traces.jsonl
  fma-otel slo --traces out/traces.jsonl --slo slo.yaml --format json
  fma-otel slo --jaeger http://localhost:16686 --since 24h
  fma-otel slo --tempo http://localhost:3200 --since 2026-08-20T00:00:00Z --until 6h
  fma-otel slo --print-queries
"""


@click.command(
    "slo",
    help="Percentiles, hit rates and SLO verdicts from actuation traces.",
    epilog=_HELP_EPILOG,
)
@click.option("--traces", "traces", metavar="FILE", help="OTLP JSON lines (the bridge's output).")
@click.option("--jaeger", metavar="URL", help="Jaeger query service, e.g. http://localhost:16686.")
@click.option("--tempo", metavar="URL", help="Tempo HTTP API, e.g. http://localhost:3200.")
@click.option(
    "--since", metavar="TIME", help="RFC3339 time or a duration back from now (24h). Remote default: 24h."
)
@click.option("--until", metavar="TIME", help="RFC3339 time or a duration back from now. Default: now.")
@click.option("--slo", "slo_file", metavar="FILE", help="YAML SLO spec; exit 1 on any violation.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--print-queries", is_flag=True, help="Print the equivalent TraceQL and PromQL, then exit.")
@click.option(
    "--dpc-metrics", metavar="URL|FILE", help="The DPC's /metrics (fma_actuation_seconds) to compare."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Remote search page size (Jaeger 1000, Tempo 500).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar on stderr.")
def command(
    traces: str | None,
    jaeger: str | None,
    tempo: str | None,
    since: str | None,
    until: str | None,
    slo_file: str | None,
    fmt: str,
    print_queries: bool,
    dpc_metrics: str | None,
    limit: int | None,
    quiet: bool,
) -> None:
    try:
        code = run(
            traces, jaeger, tempo, since, until, slo_file, fmt, print_queries, dpc_metrics, limit, quiet
        )
    except QueryError as exc:
        click.echo(f"fma-otel slo: error: {exc}", err=True)
        sys.exit(2)
    sys.exit(code)


def run(
    traces: str | None,
    jaeger: str | None,
    tempo: str | None,
    since: str | None,
    until: str | None,
    slo_file: str | None,
    fmt: str,
    print_queries: bool,
    dpc_metrics: str | None,
    limit: int | None,
    quiet: bool = False,
) -> int:
    """The command without click, returning the exit status; raises :class:`QueryError`."""
    from ..query.window import make_window

    window = make_window(since, until)
    if print_queries:
        from ..query.queries import render

        click.echo(render(window=_prom_range(since)), nl=False)
        return 0
    given = [(n, v) for n, v in (("--traces", traces), ("--jaeger", jaeger), ("--tempo", tempo)) if v]
    if len(given) != 1:
        which = " and ".join(n for n, _ in given) if given else "none"
        raise QueryError(f"give exactly one of --traces FILE, --jaeger URL, --tempo URL (got {which})")

    from ..query import dpc_metrics as dpc_mod
    from ..query import formats, slo_spec, sources
    from ..query.harvest import Harvest
    from ..query.stats import build_report

    checks = slo_spec.load_spec(slo_file) if slo_file else []
    hist = dpc_mod.load(dpc_metrics) if dpc_metrics else None

    src: sources.Source
    if traces:
        src = sources.FileSource(traces)
    elif jaeger:
        src = sources.JaegerSource(jaeger, limit=limit or 1000)
    else:
        src = sources.TempoSource(tempo or "", limit=limit or 500)
    harvest = Harvest()
    total = os.path.getsize(traces) if traces and os.path.isfile(traces) else 0
    with byte_progress("reading traces", total, quiet) as advance:
        if isinstance(src, sources.FileSource):
            src.advance = advance
        src.fill(harvest, window)
    ds = harvest.dataset(window)
    report = build_report(ds)
    verdicts = slo_spec.evaluate(checks, report)
    dpc = dpc_mod.compare(hist, ds) if hist is not None else None

    win = {**window.as_json(), "source": src.description, "traces": len(ds.requests)}
    out = sys.stdout
    if fmt == "json":
        out.write(formats.to_json(report, win, verdicts, dpc))
    elif fmt == "csv":
        out.write(formats.to_csv(report))
    elif fmt == "perfdata":
        out.write(formats.to_perfdata(report))
    else:
        sections = formats.table_sections(report, verdicts, dpc)
        if out.isatty():
            formats.render_rich(sections, out)
        else:
            out.write(formats.render_plain(sections))
    if dpc is not None and fmt in ("csv", "perfdata"):
        click.echo("fma-otel slo: note: --dpc-metrics is shown in the table and json formats only", err=True)
    out.flush()
    return 1 if slo_spec.violated(verdicts) else 0


def _prom_range(since: str | None) -> str:
    """A PromQL range for the window: ``--since`` when it is a plain duration, else 24h."""
    if since and since.strip()[-1:] in "smhdw" and since.strip()[:1].isdigit() and "T" not in since:
        return since.strip()
    return "24h"
