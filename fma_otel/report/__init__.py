"""``fma-otel report``: one self-contained HTML file of plots and waterfalls.

The floors, each small:

- :mod:`.data`    what to show, as plain data (pure; reuses the ``slo`` engine's figures);
- :mod:`.load`    two streaming passes over an OTLP JSON lines file;
- :mod:`.figures` matplotlib figures drawn from :mod:`.data`;
- :mod:`.svg`     figures as inline SVG with native hover, and as PNG of a stated size;
- :mod:`.html`    the HTML document.

matplotlib is imported only by :mod:`.figures`, :mod:`.svg` and :mod:`.html`, so the data
layer works (and is tested) without the optional ``report`` extra.
"""

from __future__ import annotations
