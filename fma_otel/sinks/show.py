"""Terminal waterfalls of actuation traces: the quickest look at a trace without Jaeger.

Rendering is a pure function of the spans (:func:`render_waterfall`) so tests can compare
exact text and the HTML report can reuse it.  Each trace becomes a header line and one line
per span, indented by depth in the tree, with a bar on an axis shared by the whole trace:
what a user sees in Jaeger's timeline, plus the things Jaeger does not show at a glance
(the honest ``[min, max]`` duration interval, where each boundary came from, the FMA metric
the span measures, and whether it is an error or has inconsistent clocks).

Line layout (plain text)::

    r1  cold_launcher  trace 0af7...319c  complete  30.000s
    fma.request            │████████████████████│   30.000s  [29.000, 31.000]  k8s:created → k8s:Ready
      fma.actuation        │      ██████████████│   20.000s  ...  T_actuation

Every line fits in ``width`` columns, never wrapping: long names are cut with an
ellipsis, the bar shrinks (to at least :data:`MIN_BAR` cells), and the detail columns are
shortened or left out, least telling first: the sources go first; the ``[min, max]``
interval of the duration (honest precision: a Kubernetes timestamp is truncated to the
second) is shortened to fewer decimals, rounded outwards, before it goes, and it stays
as long as the error and clock flags do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..jsonsafe import float_or_none, seconds_or_none
from ..model import (
    A_COMPLETE,
    A_END_SRC,
    A_INCONSISTENT,
    A_MAX,
    A_METRIC,
    A_MIN,
    A_PATH,
    A_RAW,
    A_REQ_NAME,
    A_START_SRC,
    ROOT,
    SERVICE_DPC,
    SERVICE_K8S,
    SERVICE_LAUNCHER,
    STATUS_ERROR,
    S,
)
from ..span_records import SpanRecord

MIN_BAR = 10
MAX_NAME = 48
INDENT = "  "
FULL = "█"
TICK = "▏"  # a zero-length span: visible, but clearly not a duration
EDGE = "│"
DUR_WIDTH = 9
#: the shortest the sources column is cut to: shorter says nothing, and is left out
MIN_SOURCES = 24
#: the style of the ``[min, max]`` duration interval
INTERVAL_STYLE = "dim cyan"

#: Bar colours by the service that observed the span's end (who to blame for its length).
SERVICE_STYLE: Mapping[str, str] = {
    SERVICE_K8S: "blue",
    SERVICE_DPC: "green",
    SERVICE_LAUNCHER: "magenta",
}


# --------------------------------------------------------------------------- structure


def group_traces(spans: Iterable[SpanRecord]) -> list[list[SpanRecord]]:
    """Spans grouped by trace id, traces ordered by the start of their root (then id)."""
    by_trace: dict[str, list[SpanRecord]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    return sorted(by_trace.values(), key=lambda t: (_root(t).start_ns, t[0].trace_id))


def _root(trace: Sequence[SpanRecord]) -> SpanRecord:
    """The ``fma.request`` span, else the earliest parentless span, else the earliest span."""
    named = [s for s in trace if s.name == ROOT and not s.parent_span_id]
    if named:
        return min(named, key=_order)
    parentless = [s for s in trace if not s.parent_span_id]
    return min(parentless or trace, key=_order)


def _order(s: SpanRecord) -> tuple[int, str, str]:
    return (s.start_ns, s.name, s.span_id)


def tree_lines(trace: Sequence[SpanRecord]) -> list[tuple[int, SpanRecord, bool]]:
    """Depth-first ``(depth, span, orphan)``; children by start time, then name.

    A span whose parent is not in the file (a wrapper span whose bridge trace was not
    exported, say) is shown at the top level and flagged, rather than hidden.  So is a
    span that no root leads to because the parent links form a cycle (its own id as its
    parent, or two spans each the other's parent): every span is shown exactly once.
    """
    ids = {s.span_id for s in trace}
    children: dict[str | None, list[SpanRecord]] = {}
    for s in trace:
        parent = s.parent_span_id if s.parent_span_id in ids else None
        children.setdefault(parent, []).append(s)
    out: list[tuple[int, SpanRecord, bool]] = []
    seen: set[str] = set()

    def walk(top: SpanRecord, orphan: bool = False) -> None:
        # iterative, so a very deep chain of spans cannot exhaust the stack
        stack = [(top, 0, orphan)]
        while stack:
            s, depth, flag = stack.pop()
            if s.span_id in seen:  # duplicate ids: show each record once, never loop
                continue
            seen.add(s.span_id)
            out.append((depth, s, flag or (bool(s.parent_span_id) and s.parent_span_id not in ids)))
            kids = sorted(children.get(s.span_id, ()), key=_order)
            stack.extend((c, depth + 1, False) for c in reversed(kids))

    for top in sorted(children.get(None, ()), key=_order):
        walk(top)
    if len(seen) < len(ids):  # parent cycles: no root reaches them
        for s in sorted(trace, key=_order):
            if s.span_id not in seen:
                walk(s, orphan=True)
    return out


# --------------------------------------------------------------------------- pieces


def bar(start_ns: int, end_ns: int, t0: int, t1: int, cells: int) -> str:
    """The span's extent as block characters on the ``[t0, t1]`` axis, ``cells`` wide.

    A cell is filled when the span covers any part of it, so a short span is never
    invisible; a zero-length span is a thin tick at its instant.
    """
    total = max(t1 - t0, 1)
    a = (start_ns - t0) / total * cells
    b = (end_ns - t0) / total * cells
    first = min(max(int(math.floor(a)), 0), cells - 1)
    if end_ns <= start_ns:
        return " " * first + TICK + " " * (cells - first - 1)
    last = min(max(int(math.ceil(b)), first + 1), cells)
    return " " * first + FULL * (last - first) + " " * (cells - last)


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f}s"


def interval_forms(lo: float | None, hi: float | None) -> list[str]:
    """The ``[min, max]`` duration interval, widest form first, down to whole seconds.

    Bounds are rounded *outwards* (the lower down, the upper up), so a shorter form is
    only less precise, never wrong: the true duration lies inside every form shown.  The
    shorter forms round the widest one's bounds, so each contains it (rounded directly, a
    bound a hair above a whole number, such as 9.99e-07, fell inside the rounding tolerance).
    """
    out: list[str] = []
    for digits, sep in ((3, ", "), (3, ","), (2, ","), (1, ","), (0, ",")):
        a = "?" if lo is None else outward(lo, digits, math.floor)
        b = "?" if hi is None else outward(hi, digits, math.ceil)
        text = f"[{a}{sep}{b}]"
        if text not in out:
            out.append(text)
        lo, hi = float_or_none(a), float_or_none(b)
    return out


def outward(v: float, digits: int, rnd: Any) -> str:
    unit = 10.0**digits
    # a hair of tolerance: 1.5 stored as 1.4999999 must not print as 1.4 when floored
    x = rnd(v * unit + (1e-6 if rnd is math.floor else -1e-6)) / unit
    return f"{x:.{digits}f}"


class Detail(NamedTuple):
    """A detail column of a span: its text (widest form) and style, its kind (``interval``,
    ``sources``, ``metric`` or ``flag``: how it may be shortened) and, for the interval,
    every form :func:`interval_forms` gives, widest first."""

    text: str
    style: str
    kind: str
    forms: tuple[str, ...] = ()


def details(s: SpanRecord) -> list[Detail]:
    """The detail columns of a span: the duration interval (its widest form;
    :func:`_fit_details` may pick a shorter one), the sources, the metric, and the error and
    clock flags."""
    a = s.attributes
    out: list[Detail] = []
    lo, hi = seconds_or_none(a.get(A_MIN)), seconds_or_none(a.get(A_MAX))
    if lo is not None or hi is not None:
        forms = tuple(interval_forms(lo, hi))
        out.append(Detail(forms[0], INTERVAL_STYLE, "interval", forms))
    src, dst = a.get(A_START_SRC), a.get(A_END_SRC)
    if src or dst:
        out.append(Detail(f"{src or '?'} → {dst or '?'}", "dim", "sources"))
    if a.get(A_METRIC):
        out.append(Detail(str(a[A_METRIC]), "bold cyan", "metric"))
    if s.status_code == STATUS_ERROR:
        out.append(Detail(f"!ERROR{': ' + s.status_message if s.status_message else ''}", "bold red", "flag"))
    if a.get(A_INCONSISTENT) is True:
        raw = seconds_or_none(a.get(A_RAW))
        out.append(Detail(f"!CLOCK{' raw=' + fmt_s(raw) if raw is not None else ''}", "bold yellow", "flag"))
    return out


def trace_attr(trace: Sequence[SpanRecord], key: str) -> Any:
    """``key`` as the trace's root (:func:`_root`) says it, else as its first span that does."""
    root = _root(trace)
    if key in root.attributes:
        return root.attributes[key]
    return next((s.attributes[key] for s in trace if key in s.attributes), None)


def header(trace: Sequence[SpanRecord]) -> list[tuple[str, str]]:
    """Requester, path, trace id, complete/INCOMPLETE and total duration."""
    root = _root(trace)
    requester = trace_attr(trace, A_REQ_NAME) or "?"
    path = trace_attr(trace, A_PATH) or "?"
    has_root = root.name == ROOT and not root.parent_span_id
    complete = has_root and root.attributes.get(A_COMPLETE, True) is not False
    t0 = min(s.start_ns for s in trace)
    t1 = max(s.end_ns for s in trace)
    out = [(str(requester), "bold"), (str(path), ""), (f"trace {root.trace_id}", "dim")]
    if complete:
        out.append(("complete", "green"))
    else:
        why = root.status_message if has_root and root.status_code == STATUS_ERROR else ""
        if not has_root:
            why = f"no {ROOT} span"
        out.append((f"INCOMPLETE{' (' + why + ')' if why else ''}", "bold red"))
    out.append((fmt_s((t1 - t0) / S), ""))
    return out


# --------------------------------------------------------------------------- render


def _labels(lines: list[tuple[int, SpanRecord, bool]], cap: int) -> list[str]:
    """Indented span names; the indent narrows to one space a level when two would not fit."""
    for indent in (INDENT, " "):
        labels = [indent * d + s.name + (" ↑?" if orphan else "") for d, s, orphan in lines]
        if max(len(x) for x in labels) <= cap:
            break
    return labels


def _clip(text: str, room: int) -> str:
    """``text`` in at most ``room`` characters, an ellipsis marking a cut."""
    if len(text) <= room:
        return text
    return text[: room - 1] + "…" if room > 0 else ""


def fit_row(row: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """The row cut at ``width`` characters (the last kept piece ends in an ellipsis).

    The last resort that guarantees no line is ever wider than asked: the layout below
    already shortens the bar and drops or shortens details so this rarely cuts anything.
    """
    out: list[tuple[str, str]] = []
    used = 0
    for text, style in row:
        if used + len(text) <= width:
            out.append((text, style))
            used += len(text)
            continue
        room = width - used
        if room > 0:
            out.append((_clip(text, room), style))
        break
    while out and not out[-1][0].strip():  # no trailing separator
        out.pop()
    return out


#: the kinds of detail that may be cut (with an ellipsis), and to how few characters
_CUT_TO = {"flag": len("!ERROR"), "sources": MIN_SOURCES}


def _shortest(piece: Detail) -> int:
    """The fewest characters that still say something of ``piece``."""
    if piece.kind == "interval":
        return min(len(f) for f in piece.forms)
    return min(len(piece.text), _CUT_TO.get(piece.kind, len(piece.text)))


def _fit_piece(piece: Detail, room: int) -> str | None:
    """``piece`` in at most ``room`` characters, or ``None`` when it says nothing there."""
    if piece.kind == "interval":
        return next((f for f in piece.forms if len(f) <= room), None)
    if len(piece.text) <= room or (piece.kind in _CUT_TO and room >= _shortest(piece)):
        return _clip(piece.text, room)
    return None


#: who gets room first: first each of these at its shortest (the error and clock flags,
#: then the interval, then the metric), then each at its widest in the second order; the
#: sources (``a → b``), least telling, get what is left
_RESERVE_ORDER = ("flag", "interval", "metric")
_EXPAND_ORDER = ("flag", "metric", "interval", "sources")


def _fit_details(pieces: list[Detail], room: int) -> list[tuple[str, str]]:
    """The detail pieces that fit in ``room`` characters (each after two spaces), in their
    display order; the least telling are shortened, then dropped, first."""
    kinds = [p.kind for p in pieces]
    reserved: dict[int, int] = {}
    left = room
    for kind in _RESERVE_ORDER:
        for i, k in enumerate(kinds):
            if k == kind and _shortest(pieces[i]) + 2 <= left:
                reserved[i] = _shortest(pieces[i]) + 2
                left -= reserved[i]
    keep: dict[int, str] = {}
    for kind in _EXPAND_ORDER:
        for i, k in enumerate(kinds):
            if k != kind:
                continue
            have = left + reserved.get(i, 0)
            text = _fit_piece(pieces[i], have - 2) if have > 2 else None
            if text is None:
                continue
            keep[i] = text
            left = have - len(text) - 2
            reserved.pop(i, None)
    out: list[tuple[str, str]] = []
    for i in sorted(keep):
        out += [("  ", ""), (keep[i], pieces[i].style)]
    return out


def _header_fit(pieces: list[tuple[str, str]], width: int) -> list[tuple[str, str]]:
    """The header in ``width``: the trace id shortened to 8 digits (enough for ``--trace``)
    before anything else is cut."""
    if sum(len(t) for t, _ in pieces) + 2 * (len(pieces) - 1) > width:
        pieces = [(t[:14] + "…", st) if t.startswith("trace ") else (t, st) for t, st in pieces]
    return fit_row(
        [p for i, piece in enumerate(pieces) for p in ([("  ", "")] if i else []) + [piece]], width
    )


def _trace_rows(trace: Sequence[SpanRecord], width: int) -> list[list[tuple[str, str]]]:
    """One trace as rows of styled pieces (the single source of both plain and colour).

    Every row fits in ``width`` characters: the name column takes at most 5/12 of it
    (names are cut with an ellipsis past that), the bar what the details leave but at least half
    of what the name and duration leave (20 cells when that allows), and the detail
    columns the rest, the least telling shortened or left out first.
    """
    lines = tree_lines(trace)
    fixed = len(" " + EDGE + EDGE + " ") + DUR_WIDTH
    cap = min(MAX_NAME, max(24, width * 5 // 12), max(width - fixed - MIN_BAR, 4))
    labels = _labels(lines, cap)
    name_w = min(max(len(x) for x in labels), cap)
    room = max(width - name_w - fixed, MIN_BAR)
    all_details = [details(s) for _d, s, _o in lines]
    widest = max((sum(len(p.text) + 2 for p in d) for d in all_details), default=0)
    cells = max(MIN_BAR, room - widest, min(room, max(room // 2, 20)))
    # an error or clock flag, and the duration interval at its shortest, are worth more
    # than bar cells: make room for (most of) them
    flags = max((len(p.text) + 2 for d in all_details for p in d if p.kind == "flag"), default=0)
    interval = max((_shortest(p) + 2 for d in all_details for p in d if p.kind == "interval"), default=0)
    cells = max(MIN_BAR, min(cells, room - max(min(flags, 20), interval)))
    t0 = min(s.start_ns for s in trace)
    t1 = max(s.end_ns for s in trace)
    rows: list[list[tuple[str, str]]] = [_header_fit(header(trace), width)]
    for (_depth, s, _orphan), label, dets in zip(lines, labels, all_details, strict=True):
        if s.status_code == STATUS_ERROR:
            style = "red"
        elif s.attributes.get(A_INCONSISTENT) is True:
            style = "yellow"
        else:
            style = SERVICE_STYLE.get(s.service, "white")
        row = [
            (_clip(label, name_w).ljust(name_w), ""),
            (" " + EDGE, "dim"),
            (bar(s.start_ns, s.end_ns, t0, t1, cells), style),
            (EDGE + " ", "dim"),
            (fmt_s(s.duration_s).rjust(DUR_WIDTH), ""),
        ]
        row += _fit_details(dets, width - sum(len(t) for t, _ in row))
        rows.append(fit_row(row, width))
    return rows


def render_waterfall(spans: list[SpanRecord], width: int, color: bool) -> str:
    """Every trace in ``spans`` as a waterfall; traces separated by a blank line.

    With ``color`` the text carries ANSI styles made by rich; without, it is plain and
    deterministic (no trailing spaces), which is what tests and pipes get.
    """
    blocks: list[list[list[tuple[str, str]]]] = [_trace_rows(t, width) for t in group_traces(spans)]
    if not color:
        text_blocks = ["\n".join("".join(t for t, _ in row).rstrip() for row in rows) for rows in blocks]
        return "\n\n".join(text_blocks) + ("\n" if text_blocks else "")
    return _ansi(blocks)


def _ansi(blocks: list[list[list[tuple[str, str]]]]) -> str:
    import io

    from rich.console import Console
    from rich.text import Text

    buf = io.StringIO()
    console = Console(
        file=buf, force_terminal=True, color_system="standard", width=100_000, highlight=False, emoji=False
    )
    for i, rows in enumerate(blocks):
        if i:
            console.print()
        for row in rows:
            text = Text(no_wrap=True, overflow="ignore")
            for piece, style in row:
                text.append(piece, style=style or None)
            text.rstrip()
            console.print(text, soft_wrap=True)
    return buf.getvalue()
