"""Write a synthetic FMA capture (with truth.json) for benchmarks.

Why a script and not only the library call: benchmark runs want captures of a given size on
disk, made the same way every time (seeded), without holding a 1 GB dpc.log in memory.

    python benchmarks/gen_capture.py --out /tmp/cap --actuations 200 --size-mb 100 --seed 1

``--dense`` writes the dense workload (``dense_capture``: actuations back to back, about half
the DPC lines wanted).  Without ``--size-mb`` the capture is simulated in memory (``synth_capture``; ``--noise`` adds
background DPC chatter).  With it, ``stream_big_capture`` writes dpc.log incrementally and pads
it with realistic chatter to about that size.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.synth import dense_capture, stream_big_capture, synth_capture, write_capture  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="capture directory to write")
    ap.add_argument("--actuations", type=int, required=True, help="number of actuations (truth entries)")
    ap.add_argument("--size-mb", type=float, help="pad dpc.log to about this many MB (streams to disk)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", action="store_true", help="background DPC chatter (in-memory mode)")
    ap.add_argument("--timestamps", action="store_true", help="prefix log lines as kubectl logs --timestamps")
    ap.add_argument("--dense", action="store_true", help="the dense workload (synth.dense_capture)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    if args.dense:
        truth = dense_capture(args.out, args.actuations, seed=args.seed)
    elif args.size_mb is not None:
        truth = stream_big_capture(
            args.out,
            actuations=args.actuations,
            target_dpc_bytes=int(args.size_mb * 1_000_000),
            seed=args.seed,
            timestamps=args.timestamps,
        )
    else:
        cap = synth_capture(args.actuations, seed=args.seed, noise=args.noise)
        write_capture(cap, args.out, timestamps=args.timestamps)
        truth = cap.truth
    size = (Path(args.out) / "dpc.log").stat().st_size
    print(
        f"wrote {args.out}: {len(truth)} actuations, dpc.log {size / 1e6:.1f} MB, {time.monotonic() - t0:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
