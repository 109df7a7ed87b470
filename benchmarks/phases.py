"""Where the bridge's CPU time goes, by phase, without a profiler.

Why not cProfile: its per-call overhead is uneven (it inflates the phases made of many
small calls, such as the klog pair parser, far more than those made of a few library calls,
such as the orjson encoder), so its shares mislead.  Here each phase is timed with
``time.process_time`` around the same public calls :func:`fma_otel.bridge.run_bridge`
and ``fma-otel bridge`` make, in the same order.  Each source is read twice: once only
parsed (its "read+parse" row), once parsed and fed to the correlator (the difference is its
"facts into the correlator" row), so the two costs are told apart.

    python benchmarks/phases.py /tmp/fma-bench/dense-8000a-s1

Prints a Markdown table: phase, CPU seconds, share.  The interpreter's start-up and the
CLI's imports are not in it (``run.py`` measures the whole command).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence

# Measured first, before the package is imported.
_T0 = time.process_time()
from fma_otel import bridge as B  # noqa: E402
from fma_otel.build import build_trace  # noqa: E402
from fma_otel.correlate import Correlator  # noqa: E402
from fma_otel.sinks.otlp_json import export_request_bytes  # noqa: E402
from fma_otel.sources.klog import iter_klog  # noqa: E402
from fma_otel.sources.launcher_log import iter_launcher_log  # noqa: E402
from fma_otel.sources.pod_json import iter_pod_events  # noqa: E402
from fma_otel.sources.records import SourceStats  # noqa: E402

_IMPORTS = time.process_time() - _T0


def phases(capture: str) -> dict[str, float]:
    """CPU seconds by phase of the bridge on the capture directory ``capture``."""
    inp = B.inputs_from_capture(capture)

    def pods(c: Correlator | None) -> None:
        for p in inp.pods:
            with open(p, "rb") as fh:
                for ev in iter_pod_events(fh, SourceStats(p)):
                    if c is not None:
                        c.add_pod(ev)

    def launchers(c: Correlator | None) -> None:
        for launcher, p in inp.launcher_logs.items():
            if c is not None:
                c.mark_launcher_log(launcher)
            with open(p, "rb") as fh:
                for rec in iter_launcher_log(fh, SourceStats(p), facts_only=True):
                    if c is not None:
                        c.add_launcher(launcher, rec)

    def dpc(c: Correlator | None) -> None:
        if not inp.dpc_log:
            return
        with open(inp.dpc_log, "rb") as fh:
            for rec in iter_klog(
                fh, SourceStats(inp.dpc_log), messages=B.WANTED_MESSAGES, contains=B.WANTED_CONTAINS
            ):
                if c is not None:
                    try:
                        c.add_dpc(rec)
                    except ValueError:
                        pass  # counted as a skipped line by the bridge

    clock = time.process_time
    rows = {"imports (fma_otel's bridge modules)": _IMPORTS}
    c = Correlator()
    read: Callable[[Correlator | None], None]
    for name, read in (("Pods", pods), ("launcher logs", launchers), ("DPC log", dpc)):
        t = clock()
        read(None)
        parse = clock() - t
        t = clock()
        read(c)
        rows[f"{name}: read and parse"] = parse
        rows[f"{name}: facts into the correlator"] = clock() - t - parse
    assemble = build = encode = 0.0
    with open(os.devnull, "wb") as out:
        for pod in c.requesters_in_order():
            t = clock()
            acts = list(c.actuations_of(pod))
            assemble += clock() - t
            for act in acts:
                t = clock()
                trace = build_trace(act)
                build += clock() - t
                t = clock()
                out.write(export_request_bytes(trace) + b"\n")
                encode += clock() - t
    rows["correlator: assembling actuations"] = assemble
    rows["building span trees"] = build
    rows["encoding OTLP JSON and writing"] = encode
    return rows


def render(rows: dict[str, float]) -> str:
    total = sum(rows.values()) or 1.0
    lines = ["| phase | CPU s | share |", "|---|---|---|"]
    lines += [f"| {k} | {v:.2f} | {100 * v / total:.0f}% |" for k, v in rows.items()]
    lines.append(f"| total | {sum(rows.values()):.2f} | 100% |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("capture", help="a capture directory (gen_capture.py's --out)")
    args = ap.parse_args(argv)
    print(render(phases(args.capture)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
