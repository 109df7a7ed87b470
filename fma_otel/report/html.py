"""One self-contained HTML file: inline CSS and SVG, no script, no font, no network.

Why no JavaScript: the native tooltip of an SVG ``<title>`` gives the hover the report
needs, the file opens the same in any browser and in mail or CI artifact viewers that block
scripts, and there is nothing to keep in sync with a JS library's version.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .. import __version__
from ..query.formats import table_sections
from ..query.slo_spec import FAIL, PASS
from .data import ReportData, TraceSummary
from .svg import Hover, save_png, to_inline_svg

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1120px;
padding:0 20px 40px;color:#1b1b1b}
h1{font-size:22px;margin:18px 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 4px}.meta{color:#555;font-size:13px}
nav a{margin-right:14px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #eee;text-align:right}
th:first-child,td:first-child,th:nth-child(2),td:nth-child(2){text-align:left}
th{background:#f6f6f6}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:700}
.nodata{color:#777}.empty{font-size:18px;padding:30px;background:#f6f8fa;border:1px solid #ddd}
svg.fig{width:100%;height:auto;display:block;margin:4px 0 12px}
svg a.pt:hover use,svg a.wf-span:hover path{stroke:#000;stroke-width:1.2}
.wf h3 .bad{color:#cf222e}code{font-size:12px}
"""


@dataclass
class PngFile:
    path: str
    width: int
    height: int


@dataclass
class Output:
    html: str
    pngs: list[PngFile] = field(default_factory=list)
    figures: int = 0


class _Figures:
    """Renders each figure to inline SVG (and PNG when asked) exactly once, then closes it."""

    def __init__(self, png_dir: str | None) -> None:
        self.png_dir = png_dir
        self.pngs: list[PngFile] = []
        self.count = 0

    def render(self, fig: Figure, hover: Hover, name: str) -> str:
        self.count += 1
        svg = to_inline_svg(fig, hover, f"f{self.count}")
        if self.png_dir is not None:
            path = os.path.join(self.png_dir, f"{name}.png")
            w, h = save_png(fig, path)
            self.pngs.append(PngFile(path, w, h))
        return svg


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "x"


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]], cls: str) -> str:
    out = [f"<h3>{html.escape(title)}</h3>", f'<table class="{cls}"><thead><tr>']
    out += [f"<th>{html.escape(h)}</th>" for h in header]
    out.append("</tr></thead><tbody>")
    for r in rows:
        cells = []
        for c in r:
            css = {"PASS": "pass", "FAIL": "fail", "NO DATA": "nodata"}.get(c)
            cells.append(f'<td class="{css}">{html.escape(c)}</td>' if css else f"<td>{html.escape(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    if not rows:
        out.append(f'<tr><td colspan="{len(header)}">(none)</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


def _summary_line(data: ReportData) -> str:
    v = data.verdicts
    if not v:
        return "No SLO spec given (use <code>--slo FILE</code>)."
    fails = sum(x.status == FAIL for x in v)
    passes = sum(x.status == PASS for x in v)
    nodata = len(v) - fails - passes
    cls = "fail" if fails else "pass"
    word = f"{fails} SLO check(s) FAIL" if fails else "every SLO check holds"
    return f'<span class="{cls}">{word}</span>: {passes} pass, {fails} fail, {nodata} without data.'


def _trace_heading(t: TraceSummary, rank: int | None) -> str:
    state = "complete" if t.finished else '<span class="bad">INCOMPLETE</span>'
    why = f" — {html.escape(t.status)}" if t.status else ""
    if not t.has_root:
        why = " — no fma.request span in this file"
    num = f"#{rank} " if rank is not None else ""
    dur = "-" if t.actuation_s is None else f"{t.actuation_s:.3f} s"
    return (
        f"<h3>{num}{html.escape(t.requester)} · {html.escape(t.path)} · T_actuation {dur} · {state}{why}</h3>"
        f'<div class="meta">trace <code>{html.escape(t.trace_id)}</code></div>'
    )


def render_report(
    data: ReportData, png_dir: str | None = None, title: str = "FMA actuation report"
) -> Output:
    """The whole report as HTML text (and PNG files in ``png_dir`` when given)."""
    from matplotlib import rc_context

    from . import figures as F
    from .svg import RC

    figs = _Figures(png_dir)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width,initial-scale=1">',
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f'<div class="meta">{html.escape(os.path.basename(data.source))} · {data.traces} actuation(s) ·'
        f" fma-otel {html.escape(__version__)} · {now}</div>",
    ]
    if data.skipped_lines:
        parts.append(f'<div class="meta">skipped {data.skipped_lines} line(s) that are not OTLP JSON</div>')
    if data.empty:
        parts.append('<p class="empty" id="empty">No actuations in this file.</p></body></html>')
        return Output("\n".join(parts))

    anchors = {t.trace_id: f"#trace-{t.trace_id}" for t in (*data.slowest, *data.unfinished)}
    parts.append(
        '<nav><a href="#slo">SLO</a><a href="#hit">Hit rates</a><a href="#dist">Distributions</a>'
        '<a href="#time">Where did the time go</a><a href="#slowest">Slowest actuations</a>'
        + ('<a href="#unfinished">Unfinished</a>' if data.unfinished else "")
        + "</nav>"
    )
    with rc_context(RC):
        parts.append(f'<h2 id="slo">SLO</h2><p>{_summary_line(data)}</p>')
        for sec_title, header, rows in table_sections(data.report, data.verdicts, None):
            cls = "verdicts" if sec_title.startswith("SLO") else "stats"
            parts.append(_table(sec_title, header, rows, cls))

        parts.append('<h2 id="hit">Hit rates</h2>')
        fig, hov = F.hit_figure(data.report.hit_rates, data.verdicts)
        parts.append(f'<figure class="plot hit">{figs.render(fig, hov, "hit-rates")}</figure>')

        parts.append(
            '<h2 id="dist">Distributions</h2><p class="meta">Finished actuations only; hover a dot for the'
            " actuation, click it to jump to its waterfall when it has one below.</p>"
        )
        for d in data.distributions:
            fig, hov = F.dist_figure(d, data.verdicts, anchors)
            parts.append(
                f'<figure class="plot dist" id="dist-{_slug(d.metric)}">'
                f"{figs.render(fig, hov, f'dist-{_slug(d.metric)}')}</figure>"
            )

        parts.append('<h2 id="time">Where did the time go</h2>')
        if data.breakdowns:
            parts.append(
                '<p class="meta">Mean seconds per constituent span over finished actuations; time no span'
                " covers is <b>unexplained</b>. Overlaps are counted once.</p>"
            )
            fig, hov = F.breakdown_figure(data.breakdowns)
            parts.append(f'<figure class="plot time">{figs.render(fig, hov, "time-breakdown")}</figure>')
        else:
            parts.append("<p>No finished FMA actuation to break down.</p>")

        parts.append(f'<h2 id="slowest">Slowest {len(data.slowest)} finished actuation(s)</h2>')
        parts.append(
            '<p class="meta">Bars by observer: <span style="color:#4c72b0">kubernetes</span>,'
            ' <span style="color:#55a868">DPC</span>, <span style="color:#8172b3">launcher</span>;'
            ' <span style="color:#d62728">red hatched: unfinished</span>. Whiskers: the duration range'
            " that the boundaries' precision allows. Hover a bar for where its start and end came"
            " from.</p>"
        )
        for i, t in enumerate(data.slowest, start=1):
            parts.append(_waterfall(figs, data, t, i))
        if not data.slowest:
            parts.append("<p>No finished actuation.</p>")
        if data.unfinished:
            parts.append(f'<h2 id="unfinished">Unfinished actuations ({len(data.unfinished)} shown)</h2>')
            for t in data.unfinished:
                parts.append(_waterfall(figs, data, t, None))
    parts.append("</body></html>")
    return Output("\n".join(parts), figs.pngs, figs.count)


def _waterfall(figs: _Figures, data: ReportData, t: TraceSummary, rank: int | None) -> str:
    from .figures import waterfall_figure

    spans = data.spans.get(t.trace_id, [])
    head = f'<section class="wf" id="trace-{html.escape(t.trace_id)}">{_trace_heading(t, rank)}'
    if not spans:
        return head + "<p>(no spans)</p></section>"
    fig, hov, _rows = waterfall_figure(t, spans)
    name = (
        f"waterfall-{rank:02d}-{_slug(t.requester)}"
        if rank
        else f"unfinished-{_slug(t.requester)}-{t.trace_id[:8]}"
    )
    return head + f'<figure class="plot waterfall">{figs.render(fig, hov, name)}</figure></section>'
