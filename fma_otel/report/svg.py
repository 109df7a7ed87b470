"""Matplotlib figures as small inline SVG with hover text, and as PNG of a stated size.

Hover without JavaScript: matplotlib writes an artist's URL as an SVG ``<a>`` around it
(one per point of a scatter, via ``set_urls``).  Each artist that deserves a hover gets a
token URL from :class:`Hover`; after rendering, :func:`to_inline_svg` replaces every token
``<a>`` with an ``<a>`` that holds a ``<title>`` (the browser's native tooltip), a CSS class
that tests and styles can find, and a real link only where one is useful (a dot of a
distribution to that actuation's waterfall further down).

Why post-process ids: every figure is inlined into one HTML document, and matplotlib's ids
(clip paths, marker definitions) are only unique within one SVG.  A per-figure prefix keeps
them unique; a fixed hash salt keeps the file identical for identical input.
"""

from __future__ import annotations

import html
import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: PNG resolution; every figure is FIG_WIDTH_PX wide at this resolution.
PNG_DPI = 150
FIG_WIDTH_PX = 1500

RC: dict[str, Any] = {
    "svg.fonttype": "none",  # text as <text>, not paths: far smaller, selectable
    "svg.hashsalt": "fma-otel-report",  # deterministic ids
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8,
    "figure.titlesize": 11,
    "legend.frameon": False,
}

_TOKEN = "fmahover:"
_A_OPEN = re.compile(r'<a xlink:href="' + _TOKEN + r'(\d+)"[^>]*>')
_ID = re.compile(r' id="([^"]+)"')
_REF = re.compile(r'(?:url\(#|href="#)([^")]+)')


@dataclass
class Hover:
    """Hands out URL tokens for artists, each standing for the ``<a>`` that replaces it: the
    tooltip (``<title>``), a CSS class, and a link where one is useful."""

    tags: list[str] = field(default_factory=list)

    def token(self, title: str, css: str, href: str | None = None) -> str:
        link = f' href="{html.escape(href)}"' if href else ""
        self.tags.append(f'<a class="{css}"{link}><title>{html.escape(title)}</title>')
        return f"{_TOKEN}{len(self.tags) - 1}"


def size_in(width_px: int, height_px: int) -> tuple[float, float]:
    """Figure size in inches for a PNG of exactly ``width_px`` x ``height_px`` at PNG_DPI.

    A quarter pixel is added so that float error can never truncate a pixel away.
    """
    return ((width_px + 0.25) / PNG_DPI, (height_px + 0.25) / PNG_DPI)


def to_inline_svg(fig: Figure, hover: Hover, prefix: str) -> str:
    """The figure as an ``<svg>`` element ready to paste into HTML."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = _prefix_ids(text, prefix)
    text = _A_OPEN.sub(lambda m: hover.tags[int(m.group(1))], text)
    text = _shrink(text)
    # matplotlib fixes width/height in pt; let CSS scale the figure to the page instead
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    return text.replace("<svg", f'<svg class="fig" data-fig="{prefix}"', 1)


_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_FONT_FAMILY = re.compile(r"font-family: [^;\"]*;? ?")
_NO_ROTATE = re.compile(r' transform="rotate\(-?0 [^)]*\)"')
_GEOMETRY = re.compile(r'\b(d|x|y|x1|x2|y1|y2|width|height|viewBox)="([^"]*)"')
_LONG_DECIMAL = re.compile(r"(\d\.\d\d)\d+")
_INDENT = re.compile(r"\n +")
_PATH_BREAK = re.compile(r" \n(?=[MLCQZz])")
#: a bare <g> around one self-closing element (or a lone empty pair): the group adds nothing
_BARE_GROUP = re.compile(r"<g>\n(<[^<>]*/>\n)?</g>\n")


def _shrink(text: str) -> str:
    """Drop what a browser does not need; keep every drawn shape and every hover.

    Metadata, the long font fallback list on every ``<text>`` (the page's CSS sets one),
    no-op rotations, indentation, and coordinates beyond 1/100 pt (far below a pixel).
    Only geometry attributes are rounded: hover texts keep their exact figures.
    """
    text = _METADATA.sub("", text)
    text = _FONT_FAMILY.sub("", text)
    text = _NO_ROTATE.sub("", text)
    text = _GEOMETRY.sub(_round_geometry, text)
    text = _INDENT.sub("\n", text)
    text = _PATH_BREAK.sub(" ", text)
    while True:
        shorter = _BARE_GROUP.sub(lambda m: m.group(1) or "", text)
        if shorter == text:
            return text
        text = shorter


def _round_geometry(m: re.Match[str]) -> str:
    return m.group(1) + '="' + _LONG_DECIMAL.sub(r"\1", m.group(2)) + '"'


def _prefix_ids(text: str, prefix: str) -> str:
    refs = set(_REF.findall(text))
    # ids that nothing points at (matplotlib names every group) are only bytes
    text = _ID.sub(lambda m: m.group(0) if m.group(1) in refs else "", text)
    if not refs:
        return text
    pattern = re.compile(
        r'(id="|#)(' + "|".join(re.escape(i) for i in sorted(refs, key=len, reverse=True)) + r")\b"
    )
    return pattern.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
