"""One self-contained HTML file: inline CSS, SVG and a few lines of script; no network.

Why so little JavaScript: the native tooltip of an SVG ``<title>`` gives the hover the
report needs, so the only script is the table's click-to-sort (:data:`SORT_JS`, inline, no
library).  Where scripts are blocked (mail, some CI artifact viewers) everything still
shows; the table then stays in its default order, earliest actuation first.
"""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .. import __version__
from ..model import METRICS, S
from ..query.breakdown import UNCOVERED, PathBreakdown, Row
from ..query.formats import secs_interval, table_sections
from ..query.slo_spec import FAIL, PASS
from ..sinks.show import outward
from .data import ReportData, TraceSummary
from .svg import PNG_DPI, Hover, to_inline_svg
from .words import humanize, missing_text

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
.scroll{overflow-x:auto;max-height:640px;overflow-y:auto;border:1px solid #eee}
table.all{margin:0;font-size:12px}table.all th.l,table.all td:nth-child(-n+3),table.all td:last-child{text-align:left}
table.all th{position:sticky;top:0;cursor:pointer;user-select:none}
table.all th[aria-sort=ascending]::after{content:" ▲";font-size:9px}
table.all th[aria-sort=descending]::after{content:" ▼";font-size:9px}
table.all td.why,table.all td.ok{text-align:left}table.all td.why{color:#cf222e}table.all td.lb{color:#cf222e}
table.all code{font-size:11px}table.all td{white-space:nowrap}table.all td.why{white-space:normal;min-width:280px}
table.all th{white-space:normal;vertical-align:bottom}table.phases td.l{text-align:left}table.phases tr.total td{font-weight:600}
table.phases tr.first td{border-top:1px solid #bbb}table.phases tr.uncovered td{color:#666;font-style:italic}
table.phases tr.covered td{font-weight:600}span.iv{display:block;font-size:10px;color:#666}
"""

#: click a header of a ``table.sortable`` (or Tab to it and press Enter) to sort by it; again
#: to reverse.  Cells sort by
#: ``data-v`` when they have one (numbers: seconds, microseconds), else by their text; an
#: empty value sorts last either way.
SORT_JS = """
document.querySelectorAll("table.sortable").forEach(function(t){
var hs=t.tHead.rows[0].cells;Array.prototype.forEach.call(hs,function(th,i){th.tabIndex=0;
th.addEventListener("keydown",function(e){if(e.key==="Enter"||e.key===" "){e.preventDefault();th.click()}});
th.addEventListener("click",function(){
var num=th.dataset.type==="num",dir=th.getAttribute("aria-sort")==="ascending"?-1:1,
b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);
Array.prototype.forEach.call(hs,function(h){h.removeAttribute("aria-sort")});
th.setAttribute("aria-sort",dir>0?"ascending":"descending");
function k(r){var c=r.cells[i],v=c.dataset.v;return v===undefined?c.textContent:v}
rows.sort(function(x,y){var a=k(x),c=k(y);if(a==="")return c===""?0:1;if(c==="")return -1;
return dir*(num?(+a)-(+c):a.localeCompare(c))});
var f=document.createDocumentFragment();rows.forEach(function(r){f.appendChild(r)});b.appendChild(f)})})});
"""


class Figures:
    """Renders each figure to inline SVG (and PNG when asked) exactly once; counts them and
    keeps the PNG files written."""

    def __init__(self, png_dir: str | None) -> None:
        self.png_dir = png_dir
        self.pngs: list[str] = []
        self.count = 0

    def render(self, fig: Figure, hover: Hover, name: str, css: str, attrs: str = "") -> str:
        """The figure as ``<figure class="plot {css}"{attrs}>`` holding its inline SVG."""
        self.count += 1
        svg = to_inline_svg(fig, hover, f"f{self.count}")
        if self.png_dir is not None:
            self.pngs.append(os.path.join(self.png_dir, f"{name}.png"))
            # at PNG_DPI, never cropped: svg.size_in gave the figure its size in px
            fig.savefig(self.pngs[-1], format="png", dpi=PNG_DPI, metadata={"Software": None})
        return f'<figure class="plot {css}"{attrs}>{svg}</figure>'


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
            cells.append(f'<td class="{css}">{html.escape(c)}</td>' if css else f"<td>{_cell(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    if not rows:
        out.append(f'<tr><td colspan="{len(header)}">(none)</td></tr>')
    out.append("</tbody></table>")
    return "".join(out)


_WITH_INTERVAL = re.compile(r"(\S+) (\[[^\]]*\])(.*)")


def _cell(text: str) -> str:
    """A table cell; a value with its interval (``52.00s [51.00, 53.00]``, as ``slo``
    prints it) gets the interval on a line of its own, small, as in the actuations table."""
    m = _WITH_INTERVAL.fullmatch(text)
    if not m:
        return html.escape(text)
    value, interval, rest = (html.escape(g) for g in m.groups())
    return f'{value}<span class="iv">{interval}{rest}</span>'


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


def why_unfinished(t: TraceSummary) -> str:
    """What never happened, in words: ``fma.missing`` first, else the root's status."""
    if not t.has_root:
        return "no fma.request span in this file"
    if t.missing:
        return missing_text(t.missing)
    if t.status:
        return humanize(t.status)
    return "not finished" if not t.finished else ""


def trace_link(url: str | None, trace_id: str, text: str) -> str:
    """``text`` linked to the trace in Jaeger or Tempo when ``--trace-url`` was given."""
    if not url:
        return text
    href = html.escape(url.replace("{trace_id}", trace_id))
    return f'<a class="trace" href="{href}" target="_blank" rel="noopener">{text}</a>'


def _trace_heading(t: TraceSummary, rank: int | None, url: str | None = None) -> str:
    state = "complete" if t.finished else '<span class="bad">INCOMPLETE</span>'
    why = "" if t.finished else f" — {html.escape(why_unfinished(t))}"
    num = f"#{rank} " if rank is not None else ""
    dur = "-" if t.actuation_s is None else f"{t.actuation_s:.3f} s"
    open_it = f" · {trace_link(url, t.trace_id, 'open trace')}" if url else ""
    return (
        f"<h3>{num}{html.escape(t.requester)} · {html.escape(t.path)} · T_actuation {dur} · {state}{why}</h3>"
        f'<div class="meta">trace <code>{html.escape(t.trace_id)}</code>{open_it}</div>'
    )


def utc_text(ns: int) -> str:
    return datetime.fromtimestamp(ns / S, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def duration_text(secs: float) -> str:
    """A span of wall time for a person: "1 h 05 min", "3 min 20 s", "42 s"."""
    secs = max(0, round(secs))
    h, rest = divmod(secs, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h} h {m:02d} min"
    return f"{m} min {sec:02d} s" if m else f"{sec} s"


def range_text(time_range: tuple[int, int] | None) -> str:
    """The time the capture covers: first to last instant of any span."""
    if time_range is None:
        return ""
    lo, hi = time_range
    return f"{utc_text(lo)} – {utc_text(hi)} UTC ({duration_text((hi - lo) / S)})"


def _secs_cell(v: float | None, lower_bound: bool = False, bounds: tuple[float, float] | None = None) -> str:
    """A duration cell; ``bounds``, the ``[min, max]`` its boundaries' precision allows,
    is shown under the value (rounded outwards) and sorts nothing."""
    if v is None:
        return "<td></td>"  # sorts last: the script sorts an empty cell after every value
    if lower_bound:
        return f'<td class="lb" data-v="{v:.3f}" title="unfinished: a lower bound">≥ {v:.2f}s</td>'
    if bounds is None:
        return f'<td data-v="{v:.3f}">{v:.2f}s</td>'
    lo, hi = bounds
    iv = f"[{outward(lo, 2, math.floor)}, {outward(hi, 2, math.ceil)}]"
    return (
        f'<td data-v="{v:.3f}" title="the duration is in {iv} s (boundary precision)">{v:.2f}s'
        f'<span class="iv">{iv}</span></td>'
    )


def _breakable(metric: str) -> str:
    """A metric name that may wrap after an underscore, but never right after ``T_``."""
    text = html.escape(metric)
    return text[:2] + text[2:].replace("_", "_<wbr>")


def actuations_table(data: ReportData, anchors: dict[str, str], url: str | None) -> str:
    """Every actuation, earliest first; click a header to sort (:data:`SORT_JS`).

    Metric columns are ``T_actuation`` and the other metrics that occur in the file; a
    value whose span never finished is shown as a lower bound ("≥"), in red.
    """
    present = {m for t in data.actuations for m in t.metrics}
    metrics = [m for m in METRICS if m in present] + sorted(present - set(METRICS))
    if "T_actuation" in metrics:
        metrics.remove("T_actuation")
    metrics.insert(0, "T_actuation")
    head = (
        '<th class="l">requester</th><th class="l">path</th>'
        '<th class="l" data-type="num" aria-sort="ascending">started (UTC)</th>'
        + "".join(f'<th data-type="num">{_breakable(m)}</th>' for m in metrics)
        + '<th data-type="num" title="share of T_actuation that named leaf spans cover">in leaves</th>'
        + '<th class="l">complete</th><th class="l">trace</th>'
    )
    out = [
        '<div class="scroll"><table class="all sortable" id="actuations">',
        f"<thead><tr>{head}</tr></thead><tbody>",
    ]
    for t in data.actuations:
        req = html.escape(t.requester)
        if t.trace_id in anchors:
            req = f'<a href="{anchors[t.trace_id]}">{req}</a>'
        x = t.actuation_start_ns
        start = f'<td data-v="{x // 1000}">{utc_text(x)}</td>' if x is not None else "<td></td>"
        cells = [f"<td>{req}</td>", f"<td>{html.escape(t.path)}</td>", start]
        for m in metrics:
            v = t.metrics.get(m)
            if m == "T_actuation" and v is None:
                v = t.actuation_s
            lower = m in t.open_metrics or (m == "T_actuation" and not t.finished)
            cells.append(_secs_cell(v, lower, t.metric_bounds.get(m)))
        share = data.covered.get(t.trace_id)
        cells.append("<td></td>" if share is None else f'<td data-v="{share:.4f}">{100 * share:.1f}%</td>')
        if t.finished:
            cells.append('<td class="ok">yes</td>')
        else:
            cells.append(f'<td class="why">no: {html.escape(why_unfinished(t))}</td>')
        tid = html.escape(t.trace_id)
        short_id = f'<code title="{tid}">{tid[:16]}…</code>'
        cells.append(f"<td>{trace_link(url, t.trace_id, short_id)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def phases_table(bds: Sequence[PathBreakdown]) -> str:
    """Per path: ``T_actuation``, each leaf span, each "uncovered in X", and the union of
    the leaves, with nearest-rank p50/p90/p99, the mean, in how many actuations each
    occurs, and the share of the mean ``T_actuation`` each accounts for."""
    from .figures import fmt_secs, short

    def row(path: str, r: Row, b: PathBreakdown, cls: str) -> str:
        if r.kind == "total":
            name = "T_actuation (whole)"
        elif r.kind == "covered":
            name = "named leaves together"
        elif r.kind == "uncovered":
            name = "  " + UNCOVERED + short(r.name)
        else:
            name = "  " + r.name
        share = f"{100 * r.share:.1f}%"
        if r.kind == "covered":
            share += f" (min {100 * b.min_covered_share:.1f}%)"
        seen = "" if r.kind in ("total", "covered") else f"{r.seen}/{b.n}"
        cells = [path, name, seen]
        tds = "".join(
            f'<td class="l">{html.escape(c)}</td>' if i < 2 else f"<td>{html.escape(c)}</td>"
            for i, c in enumerate(cells)
        )
        for q in (50, 90, 99):
            v, (lo, hi) = getattr(r, f"p{q}"), r.interval(q)
            iv = "" if lo is None or hi is None else secs_interval(v, lo, hi).split(" ", 1)[1]
            tds += (
                f"<td>{html.escape(fmt_secs(v))}"
                + (f'<span class="iv">{html.escape(iv)}</span>' if iv else "")
                + "</td>"
            )
        tds += f"<td>{html.escape(fmt_secs(r.mean))}</td><td>{html.escape(share)}</td>"
        return f'<tr class="{cls}">{tds}</tr>'

    out = [
        '<table class="phases" id="phases"><thead><tr><th>path</th><th>span</th><th>in</th><th>p50</th>'
        "<th>p90</th><th>p99</th><th>mean</th><th>share</th></tr></thead><tbody>"
    ]
    for b in bds:
        label = f"{b.path} (n={b.n})" + (", baseline" if b.baseline else "")
        for i, r in enumerate(b.rows):
            cls = "first total" if i == 0 else r.kind
            out.append(row(label if i == 0 else "", r, b, cls))
    out.append("</tbody></table>")
    return "".join(out)


def render_report(
    data: ReportData,
    png_dir: str | None = None,
    title: str = "FMA actuation report",
    trace_url: str | None = None,
) -> tuple[str, Figures]:
    """The whole report as HTML text, and the figures drawn (PNG files in ``png_dir`` when given).

    ``trace_url`` is a URL template holding ``{trace_id}`` (Jaeger's or Tempo's trace
    page; the command checks that it does); each actuation then links to its trace there.
    """
    from matplotlib import rc_context

    from . import figures as F
    from .svg import RC

    figs = Figures(png_dir)
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
    if data.time_range is not None:
        parts.append(
            f'<div class="meta" id="range">capture covers {html.escape(range_text(data.time_range))}</div>'
        )
    if data.skipped_lines:
        parts.append(f'<div class="meta">skipped {data.skipped_lines} line(s) that are not OTLP JSON</div>')
    if data.empty:
        parts.append('<p class="empty" id="empty">No actuations in this file.</p></body></html>')
        return "\n".join(parts), figs

    anchors = {t.trace_id: f"#trace-{t.trace_id}" for t in (*data.slowest, *data.unfinished)}
    parts.append(
        '<nav><a href="#slo">SLO</a><a href="#hit">Hit rates</a><a href="#trend">Over time</a>'
        '<a href="#dist">Distributions</a><a href="#time">Where did the time go</a>'
        '<a href="#all">All actuations</a><a href="#slowest">Slowest actuations</a>'
        + ('<a href="#unfinished">Unfinished</a>' if data.unfinished else "")
        + "</nav>"
    )
    with rc_context(RC):
        parts.append(f'<h2 id="slo">SLO</h2><p>{_summary_line(data)}</p>')
        for sec_title, header, rows in table_sections(data.report, data.verdicts, None):
            cls = "verdicts" if sec_title.startswith("SLO") else "stats"
            parts.append(_table(sec_title, header, rows, cls))

        parts.append('<h2 id="hit">Hit rates</h2>')
        parts.append(figs.render(*F.hit_figure(data.report.hit_rates, data.verdicts), "hit-rates", "hit"))

        parts.append('<h2 id="trend">Over time</h2>')
        if data.trends:
            parts.append(
                f'<p class="meta">Capture: {html.escape(range_text(data.time_range))}. Finished actuations'
                " only; hover a dot for the actuation.</p>"
            )
            fig, hov = F.trend_figure(data.trends, data.verdicts, data.time_range)
            parts.append(figs.render(fig, hov, "trends", "trend"))
        else:
            parts.append("<p>No finished actuation to show over time.</p>")

        parts.append(
            '<h2 id="dist">Distributions</h2><p class="meta">Finished actuations only; hover a dot for the'
            " actuation, click it to jump to its waterfall when it has one below. Under each box:"
            " p50 ◆, p90 ■ and p99 ▲, each with a bar over the interval the true percentile can be in"
            " (the same percentile of the spans' <code>fma.duration.min_s</code> and"
            " <code>max_s</code>: Kubernetes timestamps are whole seconds).</p>"
        )
        for d in data.distributions:
            name = f"dist-{_slug(d.metric)}"
            parts.append(
                figs.render(*F.dist_figure(d, data.verdicts, anchors), name, "dist", f' id="{name}"')
            )

        parts.append('<h2 id="time">Where did the time go</h2>')
        if data.breakdowns:
            parts.append(
                '<p class="meta">The <b>leaf spans</b> under <code>fma.actuation</code> (spans without'
                " children, whatever their names), mean seconds over finished actuations; where leaves"
                " overlap, the shorter one is drawn. Time inside a span that none of its leaves covers"
                " is shown as <b>uncovered in</b> that span, never hidden.</p>"
            )
            parts.append(figs.render(*F.breakdown_figure(data.breakdowns), "time-breakdown", "time"))
            parts.append(
                '<p class="meta">Per leaf, over the actuations it occurs in (<i>in</i>): the nearest-rank'
                " percentiles and the mean of its whole duration; <i>share</i>: of the mean T_actuation"
                " that the bar gives it (so leaves and uncovered rows add up to 100%). <i>named leaves"
                " together</i>: their union, overlaps counted once, with the smallest share of any one"
                " actuation. cold_no_fma is the baseline: a plain vLLM Pod, from its container start"
                " to Ready.</p>"
            )
            parts.append(phases_table(data.breakdowns))
        else:
            parts.append("<p>No finished FMA actuation to break down.</p>")

        n_all = len(data.actuations)
        parts.append(
            f'<h2 id="all">All {n_all} actuation(s)</h2><p class="meta">Click a header to sort;'
            " again to reverse. Under each duration: the interval it is known to lie in."
            " ≥: the span never finished, so the value is a lower bound."
            + (
                " A trace id opens the trace."
                if trace_url
                else " (<code>--trace-url</code> links trace ids.)"
            )
            + "</p>"
        )
        parts.append(actuations_table(data, anchors, trace_url))

        parts.append(f'<h2 id="slowest">Slowest {len(data.slowest)} finished actuation(s)</h2>')
        parts.append(
            '<p class="meta">Bars by observer: <span style="color:#4c72b0">kubernetes</span>,'
            ' <span style="color:#55a868">DPC</span>, <span style="color:#8172b3">launcher</span>;'
            ' <span style="color:#d62728">red hatched: unfinished</span>. Whiskers: the duration range'
            " that the boundaries' precision allows. Hover a bar for where its start and end came"
            " from.</p>"
        )
        for i, t in enumerate(data.slowest, start=1):
            parts.append(_waterfall(figs, data, t, i, trace_url))
        if not data.slowest:
            parts.append("<p>No finished actuation.</p>")
        if data.unfinished:
            parts.append(f'<h2 id="unfinished">Unfinished actuations ({len(data.unfinished)} shown)</h2>')
            for t in data.unfinished:
                parts.append(_waterfall(figs, data, t, None, trace_url))
    parts.append(f"<script>{SORT_JS}</script></body></html>")
    return "\n".join(parts), figs


def _waterfall(figs: Figures, data: ReportData, t: TraceSummary, rank: int | None, url: str | None) -> str:
    from .figures import waterfall_figure

    spans = data.spans.get(t.trace_id, [])
    head = f'<section class="wf" id="trace-{html.escape(t.trace_id)}">{_trace_heading(t, rank, url)}'
    if not spans:
        return head + "<p>(no spans)</p></section>"
    name = (
        f"waterfall-{rank:02d}-{_slug(t.requester)}"
        if rank
        else f"unfinished-{_slug(t.requester)}-{t.trace_id[:8]}"
    )
    return head + figs.render(*waterfall_figure(t, spans), name, "waterfall") + "</section>"
