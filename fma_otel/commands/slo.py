"""``fma-otel slo``: percentiles, hit rates and SLO verdicts from actuation traces.

Exit status is part of the interface, for CI gates: 0 when every SLO holds (or none was
given; an empty window is an empty report, not an error), 1 on any SLO violation, 2 on bad
arguments, unreadable files or an unusable server answer, always with one line on stderr.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import IO, Any

import click

from ..query import QueryError
from ..query.formats import FORMATS
from . import params
from ._common import byte_progress, fail, open_out, reading_traces, terminal_width

_HELP_EPILOG = """
\b
Examples:
  fma-otel slo out/traces.jsonl
  fma-otel slo out/traces.jsonl --metric T_actuation,T_wake --path hot
  fma-otel slo out/traces.jsonl --slo slo.yaml -o json
  fma-otel slo out/traces.jsonl -o llm-d-benchmark --out fma.json
  fma-otel bridge --out - | fma-otel slo -
  fma-otel slo --jaeger http://localhost:16686 --since 24h
  fma-otel slo --tempo http://localhost:3200 --since 2026-08-20T00:00:00Z --until 6h
  fma-otel slo out/traces.jsonl --breakdown
  fma-otel slo --print-queries
"""


@click.command(
    "slo",
    help="Percentiles, hit rates and SLO verdicts from actuation traces: a trace FILE "
    "('-': stdin; OTLP JSON lines, OTLP JSON or Jaeger JSON), Jaeger or Tempo.",
    epilog=_HELP_EPILOG,
)
@params.traces_input
@click.option("--jaeger", metavar="URL", help="Jaeger query service, e.g. http://localhost:16686.")
@click.option("--tempo", metavar="URL", help="Tempo HTTP API, e.g. http://localhost:3200.")
@click.option(
    "--since", metavar="TIME", help="RFC3339 time or a duration back from now (24h). Remote default: 24h."
)
@click.option("--until", metavar="TIME", help="RFC3339 time or a duration back from now. Default: now.")
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME[,NAME]",
    help="Only these metrics in the table/json/csv (repeatable).",
)
@click.option("--path", "paths", multiple=True, metavar="PATH[,PATH]", help="Only these paths (repeatable).")
@click.option("--slo", "slo_file", metavar="FILE", help="YAML SLO spec; exit 1 on any violation.")
@params.format_option(FORMATS, "table")
@click.option(
    "--out",
    metavar="FILE",
    default="-",
    callback=params.check_out,
    help="Write the output here (default '-': stdout).",
)
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
@click.option(
    "--breakdown",
    is_flag=True,
    help="Also show where the time goes: per path, the leaf spans under fma.actuation "
    "(p50/p90/p99 of each), the time no leaf covers, and the share the leaves cover "
    "(table, json; with csv: only this table).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar on stderr.")
def command(
    traces_file: str | None,
    traces_alias: str | None,
    metrics: tuple[str, ...],
    paths: tuple[str, ...],
    out: str,
    **kw: Any,
) -> None:
    """The options as :func:`run` takes them (the others by their names, as they are)."""
    from ..model import ALL_PATHS, METRICS
    from ..query.stats import PATH_ORDER

    traces = params.one_trace_file(traces_file, traces_alias)
    want_metrics = params.pick("metric", params.split_list(metrics), METRICS)
    valid_paths = [p for p in PATH_ORDER if p in ALL_PATHS]
    want_paths = params.pick("path", params.split_list(paths), valid_paths)
    try:
        with open_out(out) as fh:
            code = run(traces, out=fh, metrics=want_metrics, paths=want_paths, **kw)
    except QueryError as exc:
        fail(str(exc))
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
    out: IO[str] | None = None,
    metrics: Sequence[str] = (),
    paths: Sequence[str] = (),
    breakdown: bool = False,
) -> int:
    """The command without click, returning the exit status; raises :class:`QueryError`."""
    from ..query.window import make_window

    out = out or sys.stdout
    empty = params.empty_option(
        [
            ("FILE", traces),
            ("--jaeger", jaeger),
            ("--tempo", tempo),
            ("--slo", slo_file),
            ("--dpc-metrics", dpc_metrics),
        ]
    )
    if empty:
        raise QueryError(f"{empty} is empty: give a path or URL (an unset variable?)")
    window = make_window(since, until)
    if print_queries:
        from ..query.queries import render

        out.write(render(window=_prom_range(since)))
        return 0
    given = [(n, v) for n, v in (("FILE", traces), ("--jaeger", jaeger), ("--tempo", tempo)) if v]
    if len(given) != 1:
        which = " and ".join(n for n, _ in given) if given else "none"
        raise QueryError(
            f"give exactly one of FILE (or --traces FILE), --jaeger URL, --tempo URL (got {which})"
        )
    if fmt == "llm-d-benchmark":
        if not traces:
            raise QueryError("--format llm-d-benchmark reads a trace FILE (not --jaeger/--tempo)")
        if breakdown:
            raise QueryError("--breakdown is not part of --format llm-d-benchmark (use table, json or csv)")
        return _llmd_benchmark(traces, out)

    from ..query import breakdown as bd_mod
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
        src = sources.JaegerSource(jaeger, limit=limit)
    else:
        src = sources.TempoSource(tempo or "", limit=limit)
    harvest = Harvest(bd_mod.TreeCollector() if breakdown else None)
    total = os.path.getsize(traces) if traces and traces != "-" and os.path.isfile(traces) else 0
    with byte_progress("reading traces", total, quiet) as advance:
        if isinstance(src, sources.FileSource):
            src.advance = advance
        src.fill(harvest, window)
    ds = harvest.dataset(window)
    report = build_report(ds)
    verdicts = slo_spec.evaluate(checks, report)
    dpc = dpc_mod.compare(hist, ds) if hist is not None else None
    if metrics or paths:
        report.rows = [
            r for r in report.rows if (not metrics or r.metric in metrics) and (not paths or r.path in paths)
        ]

    bds = None
    if harvest.tree is not None:
        done = {tid: (r.path, r.complete) for tid, r in ds.requests.items()}
        bds = [b for b in bd_mod.summarize_paths(harvest.tree.splits(done)) if not paths or b.path in paths]

    win = {**window.as_json(), "source": src.description, "traces": len(ds.requests)}
    if fmt == "json":
        out.write(formats.to_json(report, win, verdicts, dpc, bds))
    elif fmt == "csv":
        out.write(formats.breakdown_csv(bds) if bds is not None else formats.to_csv(report))
    elif fmt == "perfdata":
        out.write(formats.to_perfdata(report))
    else:
        sections = formats.table_sections(report, verdicts, dpc)
        if bds is not None:
            sections.append(formats.breakdown_section(bds))
        if out.isatty():
            width = terminal_width(tty=True)
            formats.render_rich(formats.fit_sections(sections, width, gap=3), out, width)
        else:
            out.write(formats.render_plain(formats.fit_sections(sections, terminal_width(tty=False))))
    if dpc is not None and fmt in ("csv", "perfdata"):
        click.echo("fma-otel slo: note: --dpc-metrics is shown in the table and json formats only", err=True)
    if bds is not None and fmt == "perfdata":
        click.echo(
            "fma-otel slo: note: --breakdown is shown in the table, json and csv formats only", err=True
        )
    out.flush()
    return 1 if any(v.status == slo_spec.FAIL for v in verdicts) else 0


def _llmd_benchmark(traces: str, out: IO[str]) -> int:
    from ..query.llmdbench import to_llmd_benchmark
    from ..query.readers import read_spans, skipped_note

    stats: dict[str, int] = {}
    with reading_traces(traces):  # (as show and report read a trace file)
        spans = list(read_spans(traces, stats))
    note = skipped_note(traces, stats)
    if note:
        click.echo(f"fma-otel slo: warning: {note}", err=True)
    out.write(to_llmd_benchmark(spans))
    out.flush()
    return 0


def _prom_range(since: str | None) -> str:
    """A PromQL range for the window: ``--since`` when it is a plain duration, else 24h."""
    if since and since.strip()[-1:] in "smhdw" and since.strip()[:1].isdigit() and "T" not in since:
        return since.strip()
    return "24h"
