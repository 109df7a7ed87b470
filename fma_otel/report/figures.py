"""The report's figures, drawn with matplotlib from :mod:`.data`, never from files.

Each ``*_figure`` function returns a matplotlib ``Figure`` (object API only, no pyplot, so
no global state and no GUI backend) plus the :class:`~.svg.Hover` texts of its artists.
Every figure is FIG_WIDTH_PX wide at PNG_DPI and as high as each ``*_figure`` states (in
px), so ``--png`` output has a known size.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from ..jsonsafe import seconds_or_none
from ..model import (
    A_END_SRC,
    A_INCONSISTENT,
    A_MAX,
    A_METRIC,
    A_MIN,
    A_RAW,
    A_START_SRC,
    COLD_LAUNCHER,
    COLD_NO_FMA,
    HOT,
    SERVICE_DPC,
    SERVICE_K8S,
    SERVICE_LAUNCHER,
    STATUS_ERROR,
    UNKNOWN,
    WARM,
    S,
)
from ..query.breakdown import UNCOVERED, PathBreakdown
from ..query.formats import secs_text
from ..query.slo_spec import HIT_RATES, Verdict
from ..query.stats import HitRates
from ..sinks.show import tree_lines
from ..span_records import SpanRecord
from .data import Distribution, TraceSummary, Trend, thin
from .svg import FIG_WIDTH_PX, Hover, size_in
from .words import humanize

PATH_COLOR: Mapping[str, str] = {
    COLD_LAUNCHER: "#1f77b4",
    WARM: "#ff7f0e",
    HOT: "#2ca02c",
    COLD_NO_FMA: "#9467bd",
    UNKNOWN: "#7f7f7f",
}
SERVICE_COLOR: Mapping[str, str] = {
    SERVICE_K8S: "#4c72b0",
    SERVICE_DPC: "#55a868",
    SERVICE_LAUNCHER: "#8172b3",
}
ERROR_COLOR = "#d62728"
INCOMPLETE_FILL = "#f7c4c4"  # light, so that the hatch (drawn in the edge colour) shows
CLOCK_COLOR = "#e6a100"
UNCOVERED_COLOR = "#d9d9d9"
_PART_PALETTE = (
    "#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#64b5cd",
    "#ccb974", "#2f4b7c", "#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99",
    "#1b9e77", "#e7298a", "#66a61e", "#e6ab02",
)  # fmt: skip
#: marker of each percentile drawn on a distribution, with its interval
PERCENTILE_MARKER: Mapping[int, str] = {50: "D", 90: "s", 99: "^"}
#: points drawn per path in a strip plot (the CDF always uses every value)
MAX_STRIP_POINTS = 300
#: vertices per CDF line (values are thinned by rank beyond this)
MAX_CDF_POINTS = 400


def color_of_path(path: str) -> str:
    return PATH_COLOR.get(path, PATH_COLOR[UNKNOWN])


#: seconds for a person, as ``slo`` prints them but with spaced units: "250 ms", "3.20 s", "2.5 min"
fmt_secs = functools.partial(secs_text, units=(" ms", " s", " min"))


def short(name: str) -> str:
    """Span names without the ``fma.`` prefix, which every one of them has."""
    return name[4:] if name.startswith("fma.") else name


_OP = {"<=": "≤", ">=": "≥", "<": "<", ">": ">"}
#: the statistics an SLO threshold on a metric can be drawn for (a duration in seconds)
_DRAWN_STATS = ("p50", "p90", "p95", "p99", "max", "mean")
#: the bars of every horizontal bar chart
_BARH: Mapping[str, Any] = {"height": 0.6, "linewidth": 0.8}


def slo_label(v: Verdict, value: str) -> str:
    """How an SLO mark is named in a legend: which path, which bound, met or not."""
    where = v.path or "all paths"
    state = {"pass": "met", "fail": "NOT met"}.get(v.status, "no data")
    stat = "" if v.kind == "hit_rate" else f"{v.stat} "
    return f"SLO {where}: {stat}{_OP.get(v.op, v.op)} {value} ({state})"


def _figure(h_px: int, margins: Mapping[str, float], *grid: int, **subplots: Any) -> tuple[Figure, Any]:
    """A figure FIG_WIDTH_PX x ``h_px`` and its axes (``Figure.subplots(*grid, **subplots)``),
    laid out inside ``margins`` (``subplots_adjust``'s keywords, as fractions of the figure)."""
    fig = Figure(figsize=size_in(FIG_WIDTH_PX, h_px))
    fig.subplots_adjust(**margins)
    return fig, fig.subplots(*grid, **subplots)


def _metric_slos(verdicts: Sequence[Verdict], metric: str) -> list[Verdict]:
    return [v for v in verdicts if v.kind == "metric" and v.subject == metric and v.stat in _DRAWN_STATS]


# --------------------------------------------------------------------------- distribution


def dist_figure(
    d: Distribution, verdicts: Sequence[Verdict], anchors: Mapping[str, str]
) -> tuple[Figure, Hover]:
    """CDF per path (left) and box + strip per path (right) of one metric.

    Every dot is one finished actuation; its hover names the requester and the trace, and
    where that actuation has a waterfall in the report the dot links to it (``anchors``).
    Under each box, p50 (◆), p90 (■) and p99 (▲) with a bar over the interval each can be
    in.  SLO thresholds on this metric are drawn as dashed lines.
    """
    hover = Hover()
    n_slo = len(_metric_slos(verdicts, d.metric))
    # 480 px, more with over 5 paths, and a legend line per three SLO marks
    h_px = max(480, 180 + 60 * len(d.per_path)) + _slo_legend_px(n_slo)
    margins = {
        "left": 0.07,
        "right": 0.98,
        "top": 1 - 67 / h_px,
        "bottom": (77 + _slo_legend_px(n_slo)) / h_px,
    }
    fig, (cdf, box) = _figure(h_px, margins, 1, 2, gridspec_kw={"width_ratios": (1, 1.25), "wspace": 0.3})
    drawn = [(p, pts) for p, pts in d.per_path if pts]
    inc_total = sum(d.incomplete.values())
    title = f"{d.metric}: distribution per path"
    if inc_total:
        title += f"  ({inc_total} unfinished, not counted)"
    fig.suptitle(title, x=0.07, ha="left")

    for row, (path, pts) in enumerate(drawn):
        color = color_of_path(path)
        xs = [p.seconds for p in thin(pts, MAX_CDF_POINTS)]
        n = len(xs)
        ys = [(i + 1) / n for i in range(n)]
        (line,) = cdf.step(
            [xs[0], *xs], [0.0, *ys], where="post", color=color, lw=1.5, label=f"{path} (n={len(pts)})"
        )
        p50 = pts[(len(pts) - 1) // 2].seconds
        line.set_url(
            hover.token(
                f"{path}: n={len(pts)}, median {fmt_secs(p50)}, max {fmt_secs(pts[-1].seconds)}", "cdf"
            )
        )
        bp = box.boxplot(
            [[p.seconds for p in pts]],
            positions=[row],
            widths=0.5,
            showfliers=False,
            patch_artist=True,
            **_horizontal(),
        )
        for patch in bp["boxes"]:
            patch.set(facecolor=color, alpha=0.18, edgecolor=color)
        for key in ("medians", "whiskers", "caps"):
            for art in bp[key]:
                art.set(color=color)
        shown = thin(pts, MAX_STRIP_POINTS)
        ys = [row + 0.32 * (((i * 0.618034) % 1.0) - 0.5) for i in range(len(shown))]
        sc = box.scatter(
            [p.seconds for p in shown], ys, s=14, color=color, alpha=0.75, edgecolors="none", clip_on=False
        )
        sc.set_urls(
            [
                hover.token(
                    f"{p.label}\n{d.metric} = {fmt_secs(p.seconds)} ({path})", "pt", anchors.get(p.trace_id)
                )
                for p in shown
            ]
        )
        _percentile_marks(box, hover, d, path, row, color)
        if len(shown) < len(pts):
            box.annotate(
                f"{len(shown)} of {len(pts)} shown",
                (1.0, row),
                xycoords=("axes fraction", "data"),
                ha="right",
                va="bottom",
                fontsize=7,
                color="#666",
            )
    cdf.set_xlabel("seconds")
    cdf.set_ylabel("fraction of actuations")
    cdf.set_ylim(0, 1.02)
    cdf.grid(alpha=0.3)
    if drawn:
        cdf.legend(loc="lower right")

    box.set_yticks(range(len(drawn)), [f"{p}\nn={len(pts)}" for p, pts in drawn])
    box.set_ylim(max(len(drawn), 1) - 0.5, -0.5)
    box.set_xlabel("seconds")
    box.grid(axis="x", alpha=0.3)
    if not drawn:
        box.text(0.5, 0.5, "no finished actuation", ha="center", va="center", transform=box.transAxes)
        box.set_yticks([])

    slo_lines = []
    for v in _metric_slos(verdicts, d.metric):
        color = color_of_path(v.path) if v.path else "#000000"
        label = slo_label(v, fmt_secs(v.threshold))
        for ax in (cdf, box):
            ln = ax.axvline(v.threshold, color=color, ls="--", lw=1.0, label=label)
            ln.set_url(hover.token(label, "slo"))
        slo_lines.append(ln)
    if slo_lines:  # the dashed marks say what they are, under both panels
        fig.legend(
            handles=slo_lines,
            loc="lower left",
            bbox_to_anchor=(0.065, 0.0),
            ncols=min(3, len(slo_lines)),
        )
    # durations from zero, on one scale for both panels, without an offset like "+2.006e1"
    right = max(cdf.get_xlim()[1], box.get_xlim()[1]) * 1.02
    for ax in (cdf, box):
        ax.set_xlim(0, right)
        ax.ticklabel_format(axis="x", useOffset=False, style="plain")
    return fig, hover


def _percentile_marks(ax: Any, hover: Hover, d: Distribution, path: str, row: int, color: str) -> None:
    """p50, p90 and p99 of ``path`` under its box, each with a bar over the interval the
    true percentile can be in (the same percentile of the spans' ``min_s`` and ``max_s``)."""
    y = row + 0.36
    for q, value, lo, hi in d.percentiles.get(path, ()):
        if hi > lo:
            ax.plot([lo, hi], [y, y], color="#222", lw=1.2, solid_capstyle="butt")
            ax.plot([lo, hi], [y, y], ls="none", marker="|", ms=7, color="#222")
        (mark,) = ax.plot(
            [value],
            [y],
            ls="none",
            marker=PERCENTILE_MARKER.get(q, "o"),
            ms=5,
            color=color,
            mec="#222",
            mew=0.8,
        )
        mark.set_url(
            hover.token(
                f"{path}: p{q} {fmt_secs(value)}, can be anywhere in [{fmt_secs(lo)}, {fmt_secs(hi)}]"
                " (the boundaries' precision)",
                "pctl",
            )
        )


def _horizontal() -> dict[str, Any]:
    """``boxplot`` orientation keyword across matplotlib versions (``vert`` is deprecated)."""
    import matplotlib

    major, minor = (int(x) for x in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


# --------------------------------------------------------------------------- over time

TREND_COLUMNS = 2


def _slo_legend_px(slo_marks: int) -> int:
    """Room under the panels for the SLO legend, three marks a line."""
    return 16 + 24 * ((slo_marks + 2) // 3) if slo_marks else 0


def utc(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / S, tz=timezone.utc)


def trend_figure(
    trends: Sequence[Trend], verdicts: Sequence[Verdict], time_range: tuple[int, int] | None = None
) -> tuple[Figure, Hover]:
    """Small multiples: per metric, each finished actuation's duration at its start time.

    One panel per metric (x: when the actuation began, UTC; y: seconds from 0; colour:
    path), so a drift, a slow hour or a path that got slower after a change is seen at a
    glance.  The panels share the time axis, which spans ``time_range`` (the capture) when
    given; SLO thresholds on a metric are dashed lines, named in a legend.
    """
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    hover = Hover()
    slos = [v for t in trends for v in _metric_slos(verdicts, t.metric)]
    rows = max(1, -(-len(trends) // TREND_COLUMNS))
    # 150 px of title, legends and axis, 230 px per row of panels
    h_px = 150 + 230 * rows + _slo_legend_px(len(slos))
    margins = {"left": 0.06, "right": 0.98, "top": 1 - 105 / h_px, "hspace": 0.45, "wspace": 0.14}
    margins["bottom"] = (62 + _slo_legend_px(len(slos))) / h_px
    fig, axes = _figure(h_px, margins, rows, TREND_COLUMNS, sharex=True, squeeze=False)
    fig.suptitle(
        "Each metric over time (one dot per finished actuation, at its start)",
        x=0.06,
        y=1 - 8 / h_px,
        va="top",
        ha="left",
    )
    handles: dict[str, Any] = {}  # path -> a dot of its colour
    marks: dict[str, Any] = {}  # SLO label -> its line
    for i, tr in enumerate(trends):
        ax = axes[i // TREND_COLUMNS][i % TREND_COLUMNS]
        thinned = []
        for path, pts, n in tr.per_path:
            color = color_of_path(path)
            sc = ax.scatter(
                [utc(p.x_ns) for p in pts],
                [p.seconds for p in pts],
                s=12,
                color=color,
                alpha=0.8,
                edgecolors="none",
                label=path,
            )
            sc.set_urls(
                [
                    hover.token(
                        f"{p.label}\n{tr.metric} = {fmt_secs(p.seconds)} ({path})\n"
                        f"began {utc(p.x_ns):%Y-%m-%d %H:%M:%S} UTC",
                        "tp",
                    )
                    for p in pts
                ]
            )
            handles.setdefault(path, sc)
            if len(pts) < n:
                thinned.append(f"{path} {len(pts)} of {n}")
        for v in _metric_slos(verdicts, tr.metric):
            label = slo_label(v, fmt_secs(v.threshold))
            ln = ax.axhline(v.threshold, color=color_of_path(v.path) if v.path else "#000", ls="--", lw=1.0)
            ln.set_url(hover.token(f"{tr.metric}: {label}", "slo"))
            marks.setdefault(f"{tr.metric}: {label}", ln)
        ax.set_title(tr.metric, loc="left", fontsize=9)
        if thinned:
            ax.set_title("shown: " + ", ".join(thinned), loc="right", fontsize=7, color="#666")
        top = max([p.seconds for _path, pts, _n in tr.per_path for p in pts] + [0.0])
        top = max([top] + [v.threshold for v in _metric_slos(verdicts, tr.metric)])
        ax.set_ylim(0, top * 1.15 or 1.0)
        ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        if time_range is not None:  # the whole capture, so an empty stretch shows as one
            pad = max(S, (time_range[1] - time_range[0]) // 50)
            ax.set_xlim(utc(time_range[0] - pad), utc(time_range[1] + pad))
        loc = AutoDateLocator(minticks=3, maxticks=7)
        ax.xaxis.set_major_locator(loc)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(loc, tz=timezone.utc))
    for j in range(len(trends), rows * TREND_COLUMNS):  # an empty cell: the panel above keeps its dates
        axes[j // TREND_COLUMNS][j % TREND_COLUMNS].set_visible(False)
        if j >= TREND_COLUMNS:
            axes[j // TREND_COLUMNS - 1][j % TREND_COLUMNS].xaxis.set_tick_params(labelbottom=True)
    paths = sorted(handles, key=lambda p: list(PATH_COLOR).index(p) if p in PATH_COLOR else 99)
    fig.legend(
        [handles[k] for k in paths],
        paths,
        loc="upper left",
        bbox_to_anchor=(0.055, 1 - 34 / h_px),
        ncols=len(paths) or 1,
    )
    if marks:
        fig.legend(
            list(marks.values()),
            list(marks),
            loc="lower left",
            bbox_to_anchor=(0.06, 0.0),
            ncols=3,
        )
    return fig, hover


# --------------------------------------------------------------------------- hit rates


def hit_figure(h: HitRates, verdicts: Sequence[Verdict]) -> tuple[Figure, Hover]:
    """Hot, warm and cold-with-launcher shares of FMA requesters, with SLO bounds.

    The bars are the ``slo`` engine's per-requester rates (each requester Pod counted once,
    by its first actuation, as FMA defines the hit rates); the title also gives how many
    actuations that was, since a requester bound a second time is one requester, two
    actuations.
    """
    hover = Hover()
    fig, ax = _figure(300, {"left": 0.17, "right": 0.8, "top": 0.82, "bottom": 0.2})
    fig.suptitle(
        f"Hit rates over {h.requesters} FMA requesters (their first actuation; {h.actuations} actuations in all)",
        x=0.17,
        ha="left",
    )
    rows = list(HIT_RATES.items())
    for i, (path, name) in enumerate(rows):
        rate = getattr(h, path)
        value = 0.0 if rate is None else rate * 100
        bars = ax.barh([i], [value], color=color_of_path(path), **_BARH)
        text = "no data" if rate is None else f"{value:.1f}%"
        bars[0].set_url(hover.token(f"{name}: {text} of {h.requesters} FMA requesters", "bar"))
        ax.text(value + 1, i, text, va="center", fontsize=9)
    marks: dict[bool, Any] = {}
    for v in verdicts:
        if v.kind != "hit_rate" or v.path not in HIT_RATES:
            continue
        i = list(HIT_RATES).index(v.path)
        x = v.threshold * 100
        ok = v.status != "fail"
        ln = ax.plot([x, x], [i - 0.42, i + 0.42], color="#000" if ok else ERROR_COLOR, lw=2)[0]
        ln.set_url(hover.token(slo_label(v, f"{x:.1f}%").replace("SLO ", f"SLO {v.subject} on ", 1), "slo"))
        marks.setdefault(ok, ln)
    if marks:  # what the ticks mean, beside the bars
        ax.legend(
            [marks[k] for k in sorted(marks, reverse=True)],
            ["SLO bound, met" if k else "SLO bound, NOT met" for k in sorted(marks, reverse=True)],
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
        )
    ax.set_yticks(range(len(rows)), [name for _p, name in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, 105)
    ax.set_xlabel("% of FMA actuations")
    ax.grid(axis="x", alpha=0.3)
    return fig, hover


# --------------------------------------------------------------------------- where did the time go


def part_colors(bds: Sequence[PathBreakdown]) -> dict[str, str]:
    """A colour per leaf span name, in order of first appearance, the same on every bar;
    the uncovered parts are grey (and hatched where drawn)."""
    names = dict.fromkeys(r.name for b in bds for r in b.leaves)
    return {name: _PART_PALETTE[i % len(_PART_PALETTE)] for i, name in enumerate(names)}


def breakdown_figure(bds: Sequence[PathBreakdown]) -> tuple[Figure, Hover]:
    """Per path, the mean ``T_actuation`` as stacked leaf spans plus what no leaf covers.

    Each part is the leaf's share of the time that no shorter leaf covers (so overlaps are
    counted once and the bar's length is the mean ``T_actuation``); each "uncovered in X"
    part, grey and hatched, is time inside span X that none of its leaves covers.
    """
    hover = Hover()
    colors = part_colors(bds)
    n_legend = len(colors) + len({r.name for b in bds for r in b.uncovered})
    h_px = max(150 + 80 * max(len(bds), 2), 90 + 15 * n_legend)  # the bars, or the legend beside them
    fig, ax = _figure(h_px, {"left": 0.12, "right": 0.72, "top": 1 - 45 / h_px, "bottom": 70 / h_px})
    fig.suptitle(
        "Where did the time go: mean T_actuation per path, by leaf span (cold_no_fma: the baseline without FMA)",
        x=0.12,
        ha="left",
    )
    widest = max((b.total.mean for b in bds), default=0.0) or 1.0
    seen: dict[str, Any] = {}
    gaps: dict[str, Any] = {}
    for row, bd in enumerate(bds):
        left = 0.0
        for r in (*bd.leaves, *bd.uncovered):
            secs = r.part_s
            is_gap = r.kind == "uncovered"
            if secs <= 0 and not is_gap:
                continue  # a leaf wholly inside a shorter one: in the table, not the bar
            bar = ax.barh(
                [row],
                [secs],
                left=left,
                color=UNCOVERED_COLOR if is_gap else colors.get(r.name, "#999"),
                edgecolor="#777" if is_gap else "white",
                hatch="//" if is_gap else None,
                **_BARH,
            )[0]
            label = UNCOVERED + short(r.name) if is_gap else short(r.name)
            bar.set_url(
                hover.token(
                    f"{bd.path}: {label} {fmt_secs(secs)} ({100 * r.share:.1f}% of mean T_actuation"
                    f" {fmt_secs(bd.total.mean)}, n={bd.n}); p50 {fmt_secs(r.p50)}, p90 {fmt_secs(r.p90)},"
                    f" p99 {fmt_secs(r.p99)} in {r.seen} actuation(s)",
                    "gap" if is_gap else "part",
                )
            )
            (gaps if is_gap else seen).setdefault(label, bar)
            if secs / widest > 0.07:
                ax.text(left + secs / 2, row, fmt_secs(secs), ha="center", va="center", fontsize=7)
            left += secs
        ax.text(
            left + widest * 0.01,
            row,
            f"{fmt_secs(bd.total.mean)}  ({100 * bd.covered.share:.0f}% in named leaves)",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(len(bds)), [f"{b.path}\nn={b.n}" + ("\n(no FMA)" if b.baseline else "") for b in bds])
    ax.set_ylim(len(bds) - 0.5, -0.5)
    ax.set_xlim(0, widest * 1.3)
    ax.set_xlabel("seconds (mean over finished actuations)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    seen.update(gaps)  # the uncovered parts last in the legend, as in every bar
    if seen:
        ax.legend(
            list(seen.values()),
            list(seen),
            loc="center left",
            bbox_to_anchor=(1.01, 0.5),
            fontsize=7,
        )
    return fig, hover


# --------------------------------------------------------------------------- waterfall


def _span_title(s: SpanRecord, t0: int) -> str:
    a = s.attributes
    lines = [f"{s.name}  {fmt_secs(s.duration_s)}  (+{(s.start_ns - t0) / S:.3f} s)"]
    lo, hi = a.get(A_MIN), a.get(A_MAX)
    lo_n, hi_n = seconds_or_none(lo), seconds_or_none(hi)
    if lo_n is not None and hi_n is not None:
        lines.append(f"duration between {lo_n:.3f} s and {hi_n:.3f} s (boundary precision)")
    lines.append(f"start: {a.get(A_START_SRC, '?')}")
    lines.append(f"end: {a.get(A_END_SRC, '?')}")
    lines.append(f"observed by: {s.service}")
    if a.get(A_METRIC):
        lines.append(f"metric: {a[A_METRIC]}")
    if s.status_code == STATUS_ERROR:
        why = humanize(s.status_message).removeprefix("incomplete: ") if s.status_message else "status ERROR"
        lines.append(f"INCOMPLETE: {why}")
    if a.get(A_INCONSISTENT) is True:
        lines.append(f"clock inconsistent (raw {a.get(A_RAW)} s)")
    return "\n".join(lines)


def waterfall_figure(t: TraceSummary, spans: Sequence[SpanRecord]) -> tuple[Figure, Hover]:
    """One actuation's span tree on a time axis (seconds from its first span).

    Bars are coloured by the service that observed the span's end; a whisker at the end
    spans ``start + fma.duration.min_s`` .. ``start + fma.duration.max_s``, the durations
    the boundaries' precision allows.  Unfinished spans (status ERROR or
    ``fma.complete=false``) are red and hatched; clock-inconsistent ones get a marker.
    """
    hover = Hover()
    lines = tree_lines(spans)
    n = len(lines)
    h_px = 90 + 30 * n
    fig, ax = _figure(h_px, {"left": 0.26, "right": 0.9, "top": 1 - 40 / h_px, "bottom": 64 / h_px})
    t0 = min(s.start_ns for s in spans)
    t1 = max(s.end_ns for s in spans)
    span_s = max((t1 - t0) / S, 1e-3)
    state = "complete" if t.finished else "INCOMPLETE"
    fig.suptitle(
        f"{t.requester} · {t.path} · {state} · T_actuation {fmt_secs(t.actuation_s)} · trace {t.trace_id}",
        x=0.01,
        ha="left",
        fontsize=9,
        color="#000" if t.finished else ERROR_COLOR,
    )
    label_tf = blended_transform_factory(fig.transFigure, ax.transData)
    wx, wlo, whi, wy = [], [], [], []
    for row, (depth, s, orphan) in enumerate(lines):
        a = s.attributes
        start = (s.start_ns - t0) / S
        dur = max(0.0, s.duration_s)
        incomplete = s.status_code == STATUS_ERROR or a.get("fma.complete") is False
        color = INCOMPLETE_FILL if incomplete else SERVICE_COLOR.get(s.service, "#999")
        bar = ax.barh(
            [row],
            [max(dur, span_s / 400)],
            left=start,
            color=color,
            hatch="xx" if incomplete else None,
            edgecolor=ERROR_COLOR if incomplete else color,
            **_BARH,
        )[0]
        css = "wf-span wf-incomplete" if incomplete else "wf-span"
        bar.set_url(hover.token(_span_title(s, t0), css))
        ax.text(
            0.01 + 0.012 * depth,
            row,
            short(s.name) + (" ↑?" if orphan else ""),
            transform=label_tf,
            va="center",
            fontsize=8,
            fontweight="bold" if a.get(A_METRIC) else "normal",
        )
        lo, hi = seconds_or_none(a.get(A_MIN)), seconds_or_none(a.get(A_MAX))
        note = fmt_secs(dur)
        if incomplete:
            note += "  unfinished"
        if a.get(A_INCONSISTENT) is True:
            note += "  clock!"
        ax.text(
            start + max(dur, hi or 0.0) + span_s * 0.01,
            row,
            note,
            va="center",
            fontsize=7,
            color=ERROR_COLOR if incomplete else CLOCK_COLOR if a.get(A_INCONSISTENT) is True else "#333",
        )
        if lo is not None and hi is not None and hi > lo:
            wx.append(start + dur)
            wlo.append(max(0.0, start + dur - (start + lo)))
            whi.append(max(0.0, start + hi - (start + dur)))
            wy.append(row)
    if wx:
        ax.errorbar(wx, wy, xerr=[wlo, whi], fmt="none", ecolor="#222", elinewidth=0.9, capsize=2.5)
    ax.set_yticks([])
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_xlim(0, span_s * 1.12)
    ax.set_xlabel("seconds from the first span")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.spines["left"].set_visible(False)
    return fig, hover
