"""Per-call instructions of the wrappers' cases, counted by valgrind's callgrind (not run in CI).

    python benchmarks/count_instructions.py                    # every case, about 8 min
    python benchmarks/count_instructions.py --cases h_un h_in b_h --json /tmp/h.json

CPU time on a shared two-CPU machine moves by tens of microseconds from run to run; the
number of instructions a call executes does not depend on the load.  Each case of
``bench_wrappers.py`` (the same definitions: this script runs
``bench_wrappers.py --case KEY --n N --no-timing``) runs in its own process under
``valgrind --tool=callgrind``, once with ``--n-low`` and once with ``--n-high`` calls after
the same warm-up; the per-call figure is the difference of the two totals divided by the
difference of the call counts, so interpreter start-up, imports, the warm-up and the
provider's shutdown cancel out.  ``PYTHONHASHSEED`` is fixed so that both runs of a case
hash alike.  Two valgrinds run at once (``--jobs``); each takes about 45 s.

Two tables, from the same runs (callgrind ``--separate-threads=yes``):

* **calling thread**: the thread that makes the calls (the request's own cost: what the
  create request or the httpx call waits for);
* **all threads**: that plus the wrappers' background work for those calls - the startup
  poller opening and ending ``fma.vllm.startup``, the batch processor exporting.

Each: instructions per call; added = the case minus its uninstrumented case; "/ bare
span" = added divided by a bare SDK span of the same shape (issue 7's target: <= 1.5; a
create with a ``traceparent`` is compared with a bare span that reads the header with the
SDK's propagator and starts under it, as a hand-made span for that request would);
"/ in bare span" = the wrapped call divided by the same call inside one bare span of that
shape and nothing else (total, and added over added): how far the wrapper is from the
floor of one span opened in place.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = HERE / "bench_wrappers.py"

sys.path.insert(0, str(HERE))
import bench_wrappers  # noqa: E402  (the cases' one definition: labels, references)

LABELS = bench_wrappers.LABELS
#: case -> (its uninstrumented case, the bare span of its shape, the same call in one bare
#: span of that shape or ``None``).
REFERENCES = {
    key: (base, bare, {"c_own": "c_bare", "c_tp": "c_bare", "h_in": "h_bare"}.get(key))
    for key, (base, bare) in bench_wrappers.REFERENCES.items()
}
#: The cases that are wrappers (judged against the target); the rest are floors.
WRAPPED = ("c_own", "c_tp", "h_in")
TARGET = 1.5

_COLLECTED = re.compile(r"^==\d+== Collected : (\d+)\s*$", re.MULTILINE)
_SUMMARY = re.compile(r"^(?:summary|totals):\s*(\d+)\s*$", re.MULTILINE)
_THREAD_FILE = re.compile(r"-(\d+)$")


def parse_collected(stderr: str) -> int:
    """The instruction total callgrind prints at exit (``==pid== Collected : N``)."""
    found = _COLLECTED.findall(stderr)
    if len(found) != 1:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise ValueError(f"expected one 'Collected :' line from callgrind, found {len(found)}:\n{tail}")
    return int(found[0])


def parse_thread_files(out_dir: Path, stem: str) -> dict[int, int]:
    """Instructions per thread from callgrind's ``--separate-threads=yes`` files
    (``<stem>-01``, ``<stem>-02``, ...; thread 1 is the main thread): ``{thread: total}``."""
    found: dict[int, int] = {}
    for f in out_dir.glob(f"{stem}-*"):
        m = _THREAD_FILE.search(f.name)
        if m is None or f.name[: m.start()] != stem:
            continue
        totals = _SUMMARY.findall(f.read_text(errors="replace"))
        if not totals:
            raise ValueError(f"{f.name}: no 'summary:' or 'totals:' line")
        found[int(m.group(1))] = int(totals[0])
    if 1 not in found:
        raise ValueError(f"no callgrind file for the main thread ({stem}-01) in {out_dir}")
    return found


@dataclass(frozen=True)
class Counted:
    """One run's totals: every thread (callgrind's ``Collected``) and the calling thread."""

    total: int
    calling: int


def per_call(low: int, high: int, n_low: int, n_high: int) -> float:
    """Instructions per call from two totals: (high - low) / (n_high - n_low)."""
    if n_high <= n_low:
        raise ValueError("n_high must be greater than n_low")
    return (high - low) / (n_high - n_low)


@dataclass
class Row:
    key: str
    label: str
    instructions: float
    added: float | None = None
    vs_bare_span: float | None = None
    vs_in_bare_total: float | None = None
    vs_in_bare_added: float | None = None

    @property
    def verdict(self) -> str:
        if self.key not in WRAPPED or self.vs_bare_span is None:
            return ""
        return "ok" if self.vs_bare_span <= TARGET else "MISS"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def table_rows(counts: dict[str, float]) -> list[Row]:
    """One row per counted case, in table order, with the ratios its references allow
    (a reference that was not counted leaves its ratio empty)."""
    rows = []
    for key, label in LABELS.items():
        if key not in counts:
            continue
        row = Row(key, label, counts[key])
        if key in REFERENCES:
            base, bare, in_bare = REFERENCES[key]
            if base in counts:
                row.added = counts[key] - counts[base]
                row.vs_bare_span = _ratio(row.added, counts.get(bare))
                if in_bare is not None and in_bare in counts:
                    row.vs_in_bare_total = counts[key] / counts[in_bare]
                    row.vs_in_bare_added = _ratio(row.added, counts[in_bare] - counts[base])
        rows.append(row)
    return rows


def format_table(rows: Sequence[Row]) -> str:
    def num(v: float | None, fmt: str) -> str:
        return "" if v is None else format(v, fmt)

    out = [
        f"{'case':55} {'instr/call':>11} {'added':>10} {'/ bare span':>11} "
        f"{'/ in bare span':>14} {'(added)':>8}"
    ]
    for r in rows:
        line = (
            f"{r.label:55} {r.instructions:11,.0f} {num(r.added, '+,.0f'):>10} "
            f"{num(r.vs_bare_span, '.2f'):>11} {num(r.vs_in_bare_total, '.2f'):>14} "
            f"{num(r.vs_in_bare_added, '.2f'):>8}"
        )
        out.append(f"{line} {r.verdict}".rstrip())
    return "\n".join(out)


def _python() -> str:
    """The interpreter binary itself (valgrind must not count a launcher script such as a
    pyenv shim; ``sys.executable`` is the running interpreter, not the shim)."""
    return os.path.realpath(sys.executable)


def count(key: str, n: int, warmup: int, settle: float, python: str) -> Counted:
    """Instructions of one ``bench_wrappers.py --case key --n n`` run under callgrind: all
    threads, and the main thread (the one that makes the calls)."""
    with tempfile.TemporaryDirectory(prefix="fma-cg-") as tmp:
        out = Path(tmp) / "cg"
        cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}"]
        cmd += [python, str(BENCH), "--case", key, "--n", str(n), "--warmup", str(warmup)]
        cmd += ["--settle", str(settle), "--no-timing"]
        env = dict(os.environ, PYTHONHASHSEED="0")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            raise RuntimeError(f"{key} n={n}: exit {proc.returncode}\n{tail}")
        threads = parse_thread_files(Path(tmp), out.name)
    return Counted(parse_collected(proc.stderr), threads[1])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=list(LABELS), default=list(LABELS), metavar="CASE")
    ap.add_argument("--n-low", type=int, default=100, help="calls in the first run of a case")
    ap.add_argument("--n-high", type=int, default=300, help="calls in the second run of a case")
    ap.add_argument("--warmup", type=int, default=50, help="calls before the counted ones (both runs)")
    ap.add_argument(
        "--settle", type=float, default=1.2, help="seconds for the startup poller, before and after"
    )
    ap.add_argument("--jobs", type=int, default=2, help="valgrinds at once")
    ap.add_argument(
        "--json",
        type=Path,
        help='also write {"calling_thread": {case: per call}, "all_threads": {...}} here',
    )
    opts = ap.parse_args(argv)
    if opts.n_high <= opts.n_low:
        ap.error("--n-high must be greater than --n-low")
    if shutil.which("valgrind") is None:
        print(
            "count_instructions.py: valgrind is not installed (or not on PATH); it counts with "
            "valgrind --tool=callgrind.  Install it (e.g. apt-get install valgrind) or use "
            "bench_wrappers.py for CPU-time figures.",
            file=sys.stderr,
        )
        return 2
    python = _python()
    keys = [k for k in LABELS if k in opts.cases]
    print(
        f"{len(keys)} cases x 2 runs under callgrind, {opts.jobs} at once (about "
        f"{-(-len(keys) * 2 // opts.jobs) * 45 // 60 + 1} min)",
        file=sys.stderr,
    )
    with ThreadPoolExecutor(opts.jobs) as ex:
        futs = {
            (k, n): ex.submit(count, k, n, opts.warmup, opts.settle, python)
            for k in keys
            for n in (opts.n_low, opts.n_high)
        }
        counts: dict[str, float] = {}
        calling: dict[str, float] = {}
        try:
            for k in keys:
                low, high = futs[k, opts.n_low].result(), futs[k, opts.n_high].result()
                counts[k] = per_call(low.total, high.total, opts.n_low, opts.n_high)
                calling[k] = per_call(low.calling, high.calling, opts.n_low, opts.n_high)
                print(
                    f"  {k}: {calling[k]:,.0f} instructions per call in the calling thread, "
                    f"{counts[k]:,.0f} in all",
                    file=sys.stderr,
                    flush=True,
                )
        except (RuntimeError, ValueError) as exc:
            for f in futs.values():
                f.cancel()
            print(f"count_instructions.py: a callgrind run failed: {exc}", file=sys.stderr)
            return 1
    print(
        f"instructions per call, callgrind, (n={opts.n_high} - n={opts.n_low}) / {opts.n_high - opts.n_low}, "
        f"after {opts.warmup} warm-up calls"
    )
    print("\ncalling thread (what the call itself pays):")
    print(format_table(table_rows(calling)))
    print("\nall threads (with the startup poller's and the batch processor's work for those calls):")
    print(format_table(table_rows(counts)))
    print(
        f"added = minus the uninstrumented call; / bare span = added / a bare SDK span of the same shape "
        f"(target <= {TARGET}); / in bare span = the call / the same call inside one bare span "
        "(total; added over added); a create with a traceparent: / a bare span under the same "
        "traceparent"
    )
    if opts.json:
        opts.json.write_text(json.dumps({"calling_thread": calling, "all_threads": counts}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
