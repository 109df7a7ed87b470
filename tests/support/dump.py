"""A readable, deterministic dump of span trees, for replay tests and debugging (a test helper:
not shipped in the package).

kspan's lesson: compare a whole trace as text, so a failing replay shows exactly which
span moved.  One line per span, depth-first, children by start time then name:
``<indent>name [kind] +start_offset_s dur_s service status {selected attrs}``.
"""

from __future__ import annotations

from collections.abc import Iterable

from fma_otel import model as M
from fma_otel.span_records import SpanRecord

DEFAULT_KEYS = (M.A_PATH, M.A_METRIC, M.A_START_SRC, M.A_END_SRC, M.A_COMPLETE, M.A_INCONSISTENT)


def dump_traces(spans: Iterable[SpanRecord], keys: tuple[str, ...] = DEFAULT_KEYS) -> str:
    by_trace: dict[str, list[SpanRecord]] = {}
    for s in spans:
        by_trace.setdefault(s.trace_id, []).append(s)
    out: list[str] = []
    for tid in sorted(by_trace, key=lambda t: (min(s.start_ns for s in by_trace[t]), t)):
        out.append(_dump_one(by_trace[tid], keys))
    return "\n".join(out)


def _dump_one(spans: list[SpanRecord], keys: tuple[str, ...]) -> str:
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    for s in spans:
        parent = s.parent_span_id if s.parent_span_id in ids else None
        children.setdefault(parent, []).append(s)
    for lst in children.values():
        lst.sort(key=lambda s: (s.start_ns, s.name))
    t0 = min(s.start_ns for s in spans)
    lines = [f"trace {spans[0].trace_id}"]

    def walk(parent: str | None, depth: int) -> None:
        for s in children.get(parent, []):
            attrs = " ".join(f"{k}={s.attributes[k]}" for k in keys if k in s.attributes)
            status = s.status_code + (f"({s.status_message})" if s.status_message else "")
            lines.append(
                f"{'  ' * depth}{s.name} [{s.kind}] +{(s.start_ns - t0) / 1e9:.6f}s "
                f"{(s.end_ns - s.start_ns) / 1e9:.6f}s {s.service} {status} {attrs}".rstrip()
            )
            walk(s.span_id, depth + 1)

    walk(None, 1)
    return "\n".join(lines)
