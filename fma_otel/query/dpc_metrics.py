"""The DPC's own ``fma_actuation_seconds`` histogram beside the trace-based figures.

Why: the dual-pods controller observes every actuation it completes in a Prometheus
histogram (labels ``path=cold|warm|hot``).  Putting its counts and buckets next to the
traces' is the cross-check that shows whether the traces are complete (counts agree) and
whether the two clocks agree (buckets agree).  Two known, honest differences: the DPC's
histogram ends at the readiness *relay*, while ``T_actuation`` ends at the requester's
``Ready`` (the kubelet probe comes after), so traces may sit one bucket higher; and the DPC's
counters are cumulative since it started, not limited to the window.  The bucket counts of
``fma.dpc.actuation_secs`` (the DPC's logged value, carried on ``fma.request``) are shown as
well: those should agree exactly.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errtext import hide_credentials, one_line, safe_url
from ..jsonsafe import brief, finite_float
from ..model import DPC_PATH_LABELS
from . import QueryError
from .harvest import Dataset

METRIC = "fma_actuation_seconds"
_T_ACTUATION = "T_actuation"
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')


def parse_labels(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m:
            if text[pos:].strip():
                raise QueryError(f"bad label set {{{text}}}")
            break
        out[m.group(1)] = m.group(2).replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        pos = m.end()
    return out


def _bound(s: str) -> float:
    """A bucket's ``le``: a number or ``+Inf``, never NaN (no bucket has that bound)."""
    le = float(s)  # also "+Inf", "Inf", "-Inf"
    if math.isnan(le):
        raise ValueError(f"bucket bound le={brief(s)} is not a number")
    return le


@dataclass
class DpcHistogram:
    """``fma_actuation_seconds`` summed over every label but ``path`` (mapped to ours)."""

    #: our path -> {le: cumulative count}
    buckets: dict[str, dict[float, float]] = field(default_factory=lambda: defaultdict(dict))
    count: dict[str, float] = field(default_factory=dict)
    total: dict[str, float] = field(default_factory=dict)


def parse_exposition(text: str) -> DpcHistogram:
    """Read the Prometheus text exposition format; other metric families are ignored."""
    h = DpcHistogram()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or not line.startswith(METRIC):
            continue
        m = _LINE.match(line)
        if not m:
            raise QueryError(f"line {lineno}: not a Prometheus sample: {line[:80]!r}")
        name, labels_text, value = m.group(1), m.group(2) or "", m.group(3)
        try:
            labels = parse_labels(labels_text)
            # counts and sums of durations are finite: a NaN or an Inf here would be
            # written into the JSON form, which no strict JSON reader then accepts
            v = finite_float(value)
            le = _bound(labels.get("le", "+Inf")) if name == METRIC + "_bucket" else 0.0
        except (QueryError, ValueError) as exc:
            raise QueryError(f"line {lineno}: {exc}") from None
        dpc_path = labels.get("path", "")
        path = DPC_PATH_LABELS.get(dpc_path, dpc_path or "unknown")
        if name == METRIC + "_bucket":
            h.buckets[path][le] = h.buckets[path].get(le, 0.0) + v
        elif name == METRIC + "_count":
            h.count[path] = h.count.get(path, 0.0) + v
        elif name == METRIC + "_sum":
            h.total[path] = h.total.get(path, 0.0) + v
    return h


def load(source: str, timeout: float = 10.0) -> DpcHistogram:
    """From a URL (``http://dpc:8002/metrics``) or a file holding a scrape.

    Every error names the source as :func:`~fma_otel.errtext.safe_url` shows it: a URL
    may carry credentials, and the one-line error goes to logs and CI output."""
    shown = safe_url(source)
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            resp = httpx.get(source, timeout=timeout)
        except httpx.HTTPError as exc:
            raise QueryError(f"--dpc-metrics {shown}: {hide_credentials(str(exc), source)}") from None
        except (httpx.InvalidURL, ValueError) as exc:  # ``http://[::1``: no httpx.HTTPError
            raise QueryError(
                f"--dpc-metrics {shown}: not a valid URL: {hide_credentials(one_line(exc), source)}"
            ) from None
        if resp.status_code != 200:
            raise QueryError(f"--dpc-metrics {shown}: HTTP {resp.status_code}")
        text = resp.text
    else:
        try:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise QueryError(f"--dpc-metrics {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:  # a binary file: a scrape is text
            raise QueryError(
                f"--dpc-metrics {source}: not UTF-8 text (a Prometheus /metrics scrape is)"
            ) from None
    try:
        return parse_exposition(text)
    except QueryError as exc:
        raise QueryError(f"--dpc-metrics {shown}: {hide_credentials(str(exc), source)}") from None


def _cumulative(values: Iterable[float], bounds: list[float]) -> list[int]:
    v = sorted(values)
    out: list[int] = []
    i = 0
    for le in bounds:  # Prometheus buckets are "less than or equal"
        while i < len(v) and v[i] <= le:
            i += 1
        out.append(i)
    return out


def compare(h: DpcHistogram, ds: Dataset) -> list[dict[str, Any]]:
    """Per path: counts, and per bucket the DPC's vs the traces' cumulative counts.

    ``agreement`` is the share of buckets whose own (non-cumulative) count is the same on
    both sides; ``None`` where there is nothing to compare.
    """
    trace_vals: dict[str, list[float]] = defaultdict(list)
    for s in ds.samples:
        if s.metric == _T_ACTUATION and s.complete:
            trace_vals[s.path].append(s.duration_s)
    logged: dict[str, list[float]] = defaultdict(list)
    for r in ds.requests.values():
        if r.dpc_secs is not None:
            logged[r.path].append(r.dpc_secs)
    paths = [p for p in DPC_PATH_LABELS.values() if p in h.buckets or p in trace_vals or p in h.count]
    paths += sorted(p for p in h.buckets if p not in paths)
    out: list[dict[str, Any]] = []
    for path in paths:
        bounds = sorted(h.buckets.get(path, {}))
        dpc_cum = [h.buckets[path][b] for b in bounds]
        tr_cum = _cumulative(trace_vals.get(path, ()), bounds)
        lg_cum = _cumulative(logged.get(path, ()), bounds)
        out.append(
            {
                "path": path,
                "dpc_count": h.count.get(path, dpc_cum[-1] if dpc_cum else 0.0),
                "dpc_sum": h.total.get(path),
                "trace_count": len(trace_vals.get(path, ())),
                "logged_count": len(logged.get(path, ())),
                "buckets": [
                    {"le": "+Inf" if math.isinf(b) else b, "dpc": d, "traces": t, "logged": g}
                    for b, d, t, g in zip(bounds, dpc_cum, tr_cum, lg_cum, strict=True)
                ],
                "agreement": _agreement(dpc_cum, tr_cum),
                "agreement_logged": _agreement(dpc_cum, lg_cum),
            }
        )
    return out


def _agreement(a: list[float], b: list[int]) -> float | None:
    if not a or (not a[-1] and not (b and b[-1])):
        return None
    da = [x - y for x, y in zip(a, [0.0, *a[:-1]], strict=True)]
    db = [x - y for x, y in zip(b, [0, *b[:-1]], strict=True)]
    return sum(1 for x, y in zip(da, db, strict=True) if x == y) / len(da)


def summary_rows(comparison: list[Mapping[str, Any]]) -> list[tuple[str, str, str, str, str]]:
    """Rows for a plain table: path, DPC count, trace count, agreement, logged agreement."""
    return [
        (
            c["path"],
            f"{c['dpc_count']:g}",
            str(c["trace_count"]),
            _pct(c["agreement"]),
            _pct(c["agreement_logged"]),
        )
        for c in comparison
    ]


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.0f}%"
