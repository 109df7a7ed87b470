"""Output forms of ``fma-otel slo``: table, json (a contract), csv, clusterloader2 PerfData.

The JSON form is a contract that other tools parse: ``{"window", "metrics": [{metric, path, n, p50, p90, p95, p99, min, max, mean,
incomplete, p50_lo, p50_hi, ..., p99_lo, p99_hi}], "hit_rates": {hot, warm, cold_launcher,
requesters}, "slo": [...]}``, every duration in seconds and ``null`` where there is no data.
``pXX_lo``/``pXX_hi`` bound the percentile (see :mod:`.stats`); they come after the original
keys, as extra columns at the end of the csv, so older readers are unaffected.
``dpc_metrics`` is added only when ``--dpc-metrics`` was given, ``breakdown`` only with
``--breakdown`` (:mod:`.breakdown`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, astuple, fields
from typing import Any

from .breakdown import PathBreakdown, Row
from .breakdown import to_json as breakdown_json
from .slo_spec import FAIL, HIT_RATES, PASS, Verdict
from .stats import MetricRow, Report

FORMATS: tuple[str, ...] = ("table", "json", "csv", "perfdata", "llm-d-benchmark")
#: the json and csv keys of a metric row: :class:`.stats.MetricRow`'s fields, whose
#: percentile intervals come after the original keys; the table shows those original keys
KEYS: tuple[str, ...] = tuple(f.name for f in fields(MetricRow))
ROW_KEYS: tuple[str, ...] = KEYS[: KEYS.index("p50_lo")]


def to_json(
    report: Report,
    window: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    dpc: list[dict[str, Any]] | None = None,
    breakdown: Sequence[PathBreakdown] | None = None,
) -> str:
    h = report.hit_rates
    out: dict[str, Any] = {
        "window": dict(window),
        "metrics": [asdict(r) for r in report.rows],
        "hit_rates": {
            "hot": h.hot,
            "warm": h.warm,
            "cold_launcher": h.cold_launcher,
            "requesters": h.requesters,
            "actuations": h.actuations,
            "per_actuation": {"hot": h.act_hot, "warm": h.act_warm, "cold_launcher": h.act_cold_launcher},
        },
        "slo": [asdict(v) for v in verdicts],
    }
    if dpc is not None:
        out["dpc_metrics"] = dpc
    if breakdown is not None:
        out["breakdown"] = breakdown_json(breakdown)
    return json.dumps(out, indent=2) + "\n"


#: a breakdown row's csv keys: its path and ``n``, then the fields of ``-o json``'s rows
BREAKDOWN_KEYS: tuple[str, ...] = ("path", "n", *(f.name for f in fields(Row) if f.name != "part_s"))


def breakdown_csv(bds: Sequence[PathBreakdown]) -> str:
    """``slo --breakdown -o csv``: one row per path and breakdown row, the fields of
    ``-o json``'s rows (:func:`.breakdown.to_json`) after the path and its ``n``."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(BREAKDOWN_KEYS)
    for b in breakdown_json(bds):
        for r in b["rows"]:
            w.writerow([b["path"], b["n"], *("" if v is None else _num(v) for v in r.values())])
    return buf.getvalue()


def breakdown_section(bds: Sequence[PathBreakdown]) -> tuple[str, list[str], list[list[str]]]:
    """The breakdown as a table section: per path a row for its ``T_actuation``, then each
    leaf, each "uncovered in X" row (indented) and the union of the leaves with the
    smallest share of any one actuation and that actuation's trace (first 8 digits).
    The path heads its group rather than filling a column, so the table fits 80 columns."""
    rows: list[list[str]] = []
    for b in bds:
        for r in b.rows:
            if r.kind == "total":
                label = f"{b.path} n={b.n}{' (baseline)' if b.baseline else ''}: T_actuation"
            elif r.kind == "covered":
                label = f"  leaves together, min {_rate(b.min_covered_share)} in {b.min_covered_trace[:8]}"
            else:
                label = "  " + r.label
            seen = "" if r.kind in ("total", "covered") else f"{r.seen}/{b.n}"
            pcts = [secs_interval(getattr(r, f"p{q}"), *r.interval(q)) for q in (50, 90, 99)]
            rows.append([label, seen, *pcts, secs_text(r.mean), _rate(r.share)])
    title = "Where the time goes (leaf spans under fma.actuation; share of mean T_actuation)"
    return (title, ["span", "in", "p50", "p90", "p99", "mean", "share"], rows)


def to_csv(report: Report) -> str:
    """One row per metric x path; hit rates follow as rows named ``Hot_hit_rate`` etc.

    For those rows ``n`` holds the number of requesters and ``mean`` the rate, so that the
    file stays one rectangular table that spreadsheets and ``pandas.read_csv`` take as is.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(KEYS)
    for r in report.rows:
        w.writerow(["" if v is None else _num(v) for v in astuple(r)])
    h = report.hit_rates
    pad = [""] * (len(KEYS) - len(ROW_KEYS))
    for path, name in HIT_RATES.items():
        rate = getattr(h, path)
        w.writerow(
            [name, path, h.requesters, "", "", "", "", "", "", "" if rate is None else _num(rate), "", *pad]
        )
    return buf.getvalue()


def to_perfdata(report: Report) -> str:
    """clusterloader2's PerfData: one data item per metric x path with data, in seconds.

    Rows without a complete actuation are left out (clusterloader2 would print zeros, which
    perfdash would plot as a real, impossibly good figure).
    """
    items: list[dict[str, Any]] = []
    for r in report.rows:
        if not r.n:
            continue
        items.append(
            {
                "data": {"Perc50": r.p50, "Perc90": r.p90, "Perc95": r.p95, "Perc99": r.p99},
                "unit": "s",
                "labels": {"Metric": r.metric, "Path": r.path, "Count": str(r.n)},
            }
        )
    h = report.hit_rates
    if h.requesters:
        for path, name in HIT_RATES.items():
            items.append(
                {
                    "data": {"Value": getattr(h, path)},
                    "unit": "ratio",
                    "labels": {"Metric": name, "Path": path, "Count": str(h.requesters)},
                }
            )
    return json.dumps({"version": "v1", "dataItems": items}, indent=2) + "\n"


def _num(v: float | int | str) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def secs_text(v: float | None, units: tuple[str, str, str] = ("ms", "s", "m")) -> str:
    """Seconds for a person: ms below a second, s below two minutes, then minutes."""
    if v is None:
        return "-"
    if v < 1:
        return f"{v * 1000:.0f}{units[0]}"
    if v < 120:
        return f"{v:.2f}{units[1]}"
    return f"{v / 60:.1f}{units[2]}"


def secs_interval(v: float | None, lo: float | None, hi: float | None) -> str:
    """A percentile with the interval it could be in: ``50.15s [50.01, 50.02]``.

    The bounds are in the point's unit and rounded outwards (down and up), so the printed
    interval never claims more precision than the data has.
    """
    if v is None:
        return "-"
    if lo is None or hi is None:
        return secs_text(v)
    if v < 1:
        scale, digits = 1000.0, 0
    elif v < 120:
        scale, digits = 1.0, 2
    else:
        scale, digits = 1 / 60, 1
    unit = 10.0**digits
    a = math.floor(lo * scale * unit + 1e-9) / unit
    b = math.ceil(hi * scale * unit - 1e-9) / unit
    return f"{secs_text(v)} [{a:.{digits}f}, {b:.{digits}f}]"


def _count(v: float | None) -> str:
    return "-" if v is None else f"{v:g}"


def _rate(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def table_sections(
    report: Report, verdicts: Sequence[Verdict], dpc: list[dict[str, Any]] | None
) -> list[tuple[str, list[str], list[list[str]]]]:
    """The table form as data (title, header, rows): rendered by rich or as plain text."""
    sections: list[tuple[str, list[str], list[list[str]]]] = []
    rows = [
        [
            r.metric,
            r.path,
            str(r.n),
            *(secs_interval(getattr(r, f"p{q}"), *r.interval(q)) for q in (50, 90, 95, 99)),
            *(secs_text(getattr(r, k)) for k in ("min", "max", "mean")),
            str(r.incomplete),
        ]
        for r in report.rows
    ]
    sections.append(
        (
            "FMA metrics (nearest rank [interval it can be in]; unfin: unfinished)",
            list(ROW_KEYS),
            rows,
        )
    )
    h = report.hit_rates
    sections.append(
        (
            f"Hit rates per requester Pod ({h.requesters}, each once) and per actuation ({h.actuations})",
            ["rate", "per requester", "per actuation"],
            [
                [name, _rate(getattr(h, path)), _rate(getattr(h, "act_" + path))]
                for path, name in HIT_RATES.items()
            ],
        )
    )
    if verdicts:
        vr = []
        for v in verdicts:
            fmt = _rate if v.kind == "hit_rate" else _count if v.stat in ("n", "incomplete") else secs_text
            where = v.subject if v.kind == "hit_rate" else f"{v.subject}/{v.path or '*'}"
            status = {PASS: "PASS", FAIL: "FAIL"}.get(v.status, "NO DATA")
            value = fmt(v.value)
            if v.value_lo is not None and v.value_hi is not None:
                value = secs_interval(v.value, v.value_lo, v.value_hi)
                if v.certain is False:
                    value += " (straddles)"
            vr.append([str(v.item), where, v.stat, f"{v.op} {fmt(v.threshold)}", value, status])
        title = "SLO verdicts"
        if any(v.certain is False for v in verdicts):
            title += (
                " (straddles: the threshold is inside the interval the value can be in; could go either way)"
            )
        sections.append((title, ["item", "target", "stat", "threshold", "value", "verdict"], vr))
    if dpc is not None:
        from .dpc_metrics import summary_rows

        sections.append(
            (
                "DPC fma_actuation_seconds vs traces (T_actuation)",
                ["path", "dpc count", "trace count", "bucket agreement", "logged agreement"],
                [list(r) for r in summary_rows(dpc)],
            )
        )
    return sections


Section = tuple[str, list[str], list[list[str]]]

#: short column labels for the terminal (the JSON and CSV keys stay as they are)
SHORT_HEADERS: Mapping[str, str] = {
    "incomplete": "unfin",
    "per requester": "/requester",
    "per actuation": "/actuation",
    "dpc count": "dpc n",
    "trace count": "trace n",
    "bucket agreement": "buckets",
    "logged agreement": "logged",
}
#: the columns left out, in this order, while a table is wider than the terminal; the
#: metric and path columns are never cut, so no two rows ever read the same.  ``X [..]``
#: keeps column X but cuts the ``[lo, hi]`` interval from its cells (the title says so)
DROP_ORDER: tuple[str, ...] = ("mean", "min", "p90", "p95", "threshold", "p99 [..]", "p90 [..]", "p50 [..]")


def _widths(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]


def fit_sections(sections: list[Section], width: int | None, gap: int = 2) -> list[Section]:
    """The sections with short column labels and, for a ``width``, the least needed
    columns (:data:`DROP_ORDER`) left out until each table fits; what was left out is
    said in the title.  ``gap``: the characters between two columns (and their borders)."""
    out: list[Section] = []
    for title, header, rows in sections:
        header = [SHORT_HEADERS.get(h, h) for h in header]
        dropped: list[str] = []
        for name in DROP_ORDER:
            if width is None or sum(_widths(header, rows)) + gap * (len(header) - 1) <= width:
                break
            col, _, what = name.partition(" ")
            if col not in header:
                continue
            i = header.index(col)
            if what:  # only the interval of the column's cells
                rows = [[*r[:i], r[i].split(" [")[0], *r[i + 1 :]] for r in rows]
                dropped.append(f"{col}'s interval")
            else:
                header = header[:i] + header[i + 1 :]
                rows = [r[:i] + r[i + 1 :] for r in rows]
                dropped.append(name)
        if dropped:
            title += f" [{', '.join(dropped)} left out to fit; -o json has all]"
        if width is not None and len(title) > width:
            title = title[: width - 1] + "…"
        out.append((title, header, rows))
    return out


def render_plain(sections: list[Section]) -> str:
    out: list[str] = []
    for title, header, rows in sections:
        widths = _widths(header, rows)
        out.append(title)
        out.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
        out.append("  ".join("-" * w for w in widths))
        for r in rows:
            out.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if not rows:
            out.append("(none)")
        out.append("")
    return "\n".join(out)


def render_rich(sections: list[Section], file: Any, width: int | None = None) -> None:
    """Tables for a terminal; with the sections fitted (:func:`fit_sections`, ``gap=3``)
    to ``width`` no cell is cut (the first two columns never are)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file, width=width)
    for title, header, rows in sections:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for i, h in enumerate(header):
            t.add_column(h, justify="left" if i < 2 else "right", no_wrap=i < 2)
        for r in rows:
            styled = [
                f"[red]{c}[/red]" if c == "FAIL" else f"[green]{c}[/green]" if c == "PASS" else c for c in r
            ]
            t.add_row(*styled)
        console.print(t)
