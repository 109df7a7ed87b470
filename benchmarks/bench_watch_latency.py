"""Ready-event-to-export latency of ``fma-otel watch`` (the issue's goal: under 2 s).

Plays synthetic captures (every path) into the test Kubernetes API server at a compressed
pace, with the watcher at its *default* settings (``--grace 1s``, 100 ms tick), and measures
for each complete actuation the wall time from the API server accepting the requester's
Ready=True state to the trace's line appearing in the ``--out`` file.  Also prints the
watcher's own ``fma_otel_ready_to_export_seconds`` (from receiving the event to export).

    python benchmarks/bench_watch_latency.py [--seeds 5] [--grace 1.0] [--step-ms 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live.replay import (  # noqa: E402
    InProcessWatcher,
    apply,
    dpc_pod,
    recent_capture,
    timeline,
)
from tests.support.k8s_server import FakeCluster  # noqa: E402


def _ready(obj: dict) -> bool:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") == "True":
            return True
    return False


def run(seed: int, grace: float, step_s: float) -> tuple[list[float], float]:
    cap = recent_capture(seed=seed)
    readies: dict[str, list[float]] = {}  # requester uid -> wall times Ready became True
    seen: dict[str, float] = {}  # trace id -> wall time first in the file
    with tempfile.TemporaryDirectory() as d, FakeCluster(max_watch_seconds=60) as k8s:
        tmp = Path(d)
        k8s.add_pod(dpc_pod())
        out = tmp / "out.jsonl"
        stop = threading.Event()

        def poll() -> None:
            import json

            pos = 0
            while not stop.is_set():
                if out.exists():
                    with open(out) as fh:
                        fh.seek(pos)
                        for line in fh:
                            if line.endswith("\n"):
                                pos += len(line.encode())
                                req = json.loads(line)
                                span = req["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
                                seen.setdefault(span["traceId"], time.time())
                time.sleep(0.005)

        with InProcessWatcher(k8s, tmp, grace_s=grace, tick_s=0.1, checkpoint_interval_s=5.0) as w:
            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            was_ready: dict[str, bool] = {}
            for s in timeline(cap):
                apply(k8s, s)
                if s.kind == "pod":
                    obj = s.payload[1]
                    uid = obj["metadata"]["uid"]
                    r = _ready(obj)
                    if r and not was_ready.get(uid):
                        readies.setdefault(uid, []).append(time.time())
                    was_ready[uid] = r
                time.sleep(step_s)
            time.sleep(grace + 1.5)
            stop.set()
            poller.join()
            m = w.watcher.metrics
            internal = m.ready_to_export_sum / max(1, m.ready_to_export_count)
            traces = _traces(out)
    lat: list[float] = []
    for tid, spans in traces.items():
        root = spans[0]
        if root.attributes.get("fma.complete") is False:
            continue
        uid = root.attributes.get("fma.requester.uid")
        t_seen = seen.get(tid)
        before = [t for t in readies.get(uid, []) if t_seen is not None and t <= t_seen]
        if before:
            lat.append(t_seen - before[-1])
    return lat, internal


def _traces(path: Path) -> dict:
    from tests.live.replay import traces_in

    return traces_in(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--grace", type=float, default=1.0)
    ap.add_argument("--step-ms", type=float, default=5.0)
    args = ap.parse_args()
    all_lat: list[float] = []
    internals: list[float] = []
    for seed in range(args.seeds):
        lat, internal = run(seed, args.grace, args.step_ms / 1000)
        all_lat += lat
        internals.append(internal)
        print(f"seed {seed}: {len(lat)} actuations, latency " + ", ".join(f"{x:.3f}" for x in sorted(lat)))
    all_lat.sort()
    q = statistics.quantiles(all_lat, n=10) if len(all_lat) >= 2 else all_lat
    print(
        f"Ready -> export (grace {args.grace}s): n={len(all_lat)} median={statistics.median(all_lat):.3f}s "
        f"p90={q[-1]:.3f}s max={all_lat[-1]:.3f}s; watcher's own mean={statistics.mean(internals):.3f}s"
    )


if __name__ == "__main__":
    main()
