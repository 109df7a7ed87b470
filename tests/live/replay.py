"""Play a synthetic capture into the fake API server as a timeline, and compare trees.

Why a timeline and not the final states: the live watcher must see what a cluster shows
over time (a requester Pending, then bound, then Ready; the DPC writing its lines in
between), and the offline bridge gets the same data as a capture directory written with
the watch-stream form of ``pods.json`` and ``--timestamps`` logs.  Both must then give the
same span trees.

The capture is shifted to end about now, so ``--incomplete-after`` means what it says.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fma_otel.bridge import inputs_from_capture, run_bridge
from fma_otel.query.readers import read_spans
from fma_otel.span_records import SpanRecord
from fma_otel.timeutil import parse_rfc3339_ns
from tests.support import synth
from tests.support.k8s_server import FakeCluster, make_pod

NS = synth.DEFAULT_NAMESPACE
DPC_POD = "fma-controllers-dual-pods-controller-7d9f8b6c5-x2x9q"
DPC_LABELS = {
    "app.kubernetes.io/name": "fma-controllers",
    "app.kubernetes.io/component": "dual-pods-controller",
}
BASELINE = {"app": "vllm"}


@dataclass(frozen=True)
class Step:
    t_ns: int
    order: int
    kind: str  # pod | dpc | launcher
    payload: Any


def recent_capture(seed: int = 0, ago_s: float = 30.0, **kw: Any) -> synth.Capture:
    """A synthetic capture whose last event is ``ago_s`` seconds before now."""
    probe = synth.synth_capture(seed=seed, **kw)
    span = probe.end_ns - int(synth.DEFAULT_START.timestamp()) * synth.S
    start = int(time.time() - ago_s) - span // synth.S - 1
    return synth.synth_capture(seed=seed, start=datetime.fromtimestamp(start, tz=timezone.utc), **kw)


def _pod_time(pod: dict[str, Any]) -> int:
    """The latest timestamp an object shows: when (to the second) this state was written."""
    times: list[str] = []
    md = pod.get("metadata") or {}
    times += [md.get("creationTimestamp") or "", md.get("deletionTimestamp") or ""]
    st = pod.get("status") or {}
    times += [c.get("lastTransitionTime") or "" for c in st.get("conditions") or ()]
    for cs in st.get("containerStatuses") or ():
        for state in (cs.get("state") or {}).values():
            if isinstance(state, dict):
                times += [state.get("startedAt") or "", state.get("finishedAt") or ""]
    return max((parse_rfc3339_ns(t) for t in times if t), default=0)


def _prefixed(lines: list[str], times: list[int]) -> list[tuple[int, str]]:
    out = []
    for full in synth._with_prefix(lines, times):
        stamp, _, line = full.partition(" ")
        out.append((parse_rfc3339_ns(stamp), line))
    return out


def timeline(cap: synth.Capture) -> list[Step]:
    """Pod events and log lines of a capture, in the order a cluster would show them."""
    steps: list[Step] = []
    order = 0
    last = 0
    for typ, obj in cap.pod_events:
        last = max(last, _pod_time(obj))
        steps.append(Step(last, order, "pod", (typ, obj)))
        order += 1
    for t, line in _prefixed(list(cap.dpc_lines), cap.dpc_times):
        steps.append(Step(t, order, "dpc", line))
        order += 1
    for name, lines in cap.launcher_logs.items():
        for t, line in _prefixed(lines, cap.launcher_times.get(name, [])):
            steps.append(Step(t, order, "launcher", (name, line)))
            order += 1
    steps.sort(key=lambda s: (s.t_ns, s.order))
    return steps


def dpc_pod(created: str = "2026-01-01T00:00:00Z", name: str = DPC_POD) -> dict[str, Any]:
    pod = make_pod(name, NS, labels=DPC_LABELS, containers=["controller"], created=created, phase="Running")
    pod["status"]["containerStatuses"] = [
        {"name": "controller", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": created}}}
    ]
    return pod


def apply(k8s: FakeCluster, step: Step, dpc: str = DPC_POD) -> None:
    """One step into the fake cluster."""
    if step.kind == "pod":
        typ, obj = step.payload
        if typ == "DELETED":
            k8s.delete_pod(obj["metadata"]["name"], NS)
        else:
            k8s.apply_pod(obj)
    elif step.kind == "dpc":
        k8s.append_log(dpc, "controller", step.payload, namespace=NS, ts_ns=step.t_ns)
    else:
        name, line = step.payload
        k8s.append_log(name, "inference-server", line, namespace=NS, ts_ns=step.t_ns)


def play(k8s: FakeCluster, steps: Iterable[Step], pause_every: int = 0, pause_s: float = 0.0) -> None:
    for i, s in enumerate(steps):
        apply(k8s, s)
        if pause_every and i % pause_every == pause_every - 1:
            time.sleep(pause_s)


def offline_traces(cap: synth.Capture, tmp: Path, launcher_logs: bool = True) -> dict[str, list[SpanRecord]]:
    """What ``fma-otel bridge`` gives for the same data, by trace id."""
    d = tmp / "offline-capture"
    synth.write_capture(cap, d, timestamps=True, pods_form="watch")
    if not launcher_logs:
        for p in d.glob("launcher-*.log"):
            p.unlink()
    result = run_bridge(inputs_from_capture(d), baseline_selector=BASELINE)
    return {t[0].trace_id: t for t in result.traces if t}


def traces_in(path: Path) -> dict[str, list[SpanRecord]]:
    """Trace id -> spans, from an OTLP JSON lines file; asserts one line per trace.

    Tests poll the file while the watcher appends to it, and a reader can see a write in
    progress: a last line without its newline is not written yet and is left out (a trace
    the watcher never finishes writing is then missing, which the comparisons catch).
    """
    out: dict[str, list[SpanRecord]] = {}
    if not path.exists():
        return out
    for line in path.read_text().split("\n")[:-1]:
        if not line.strip():
            continue
        spans = list(_spans_of_line(line))
        tid = spans[0].trace_id
        assert tid not in out, f"trace {tid} written twice"
        out[tid] = spans
    return out


def _spans_of_line(line: str) -> Iterable[SpanRecord]:
    from fma_otel.sinks.otlp_json import spans_from_request

    return spans_from_request(json.loads(line))


def tree(spans: Iterable[SpanRecord]) -> list[tuple[Any, ...]]:
    """A comparable form of a span tree: everything but the order spans were written in."""
    return sorted(
        (
            s.span_id,
            s.parent_span_id,
            s.name,
            s.kind,
            s.start_ns,
            s.end_ns,
            s.service,
            s.status_code,
            s.status_message,
            json.dumps(dict(s.attributes), sort_keys=True, default=str),
        )
        for s in spans
    )


def read_file_traces(path: Path) -> dict[str, list[SpanRecord]]:
    spans: dict[str, list[SpanRecord]] = {}
    for s in read_spans(str(path)):
        spans.setdefault(s.trace_id, []).append(s)
    return spans


def wait_for(pred: Any, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


class InProcessWatcher:
    """A :class:`LiveWatcher` on a thread, pointed at a fake cluster (fast: no subprocess)."""

    def __init__(self, k8s: FakeCluster, tmp: Path, wait_logs: int = 1, **overrides: Any) -> None:
        from kubernetes import client

        self.k8s = k8s
        self.wait_logs = wait_logs
        from fma_otel.live.watcher import LiveWatcher, WatchConfig

        cfg = WatchConfig(
            namespace=NS,
            launcher_logs=True,
            baseline_selector="app=vllm",
            checkpoint=str(tmp / "checkpoint.json"),
            out=str(tmp / "out.jsonl"),
            grace_s=0.3,
            incomplete_after_s=3600,
            metrics_port=0,
            metrics_host="127.0.0.1",
            tick_s=0.05,
            checkpoint_interval_s=0.2,
            watch_timeout_s=5,
            backoff_base_s=0.02,
            backoff_max_s=0.2,
            log_read_timeout_s=5,
        )
        for k, v in overrides.items():
            setattr(cfg, k, v)
        self.cfg = cfg
        self.watcher = LiveWatcher(cfg, api_client=client.ApiClient(k8s.configuration()))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.code: int | None = None

    def _run(self) -> None:
        self.code = self.watcher.run()

    def __enter__(self) -> InProcessWatcher:
        before = self.k8s.open_streams("watch")
        logs = self.k8s.open_streams("log")
        self.thread.start()
        # play nothing before the watch is open: a list would only show final states.
        # The timeouts only bound how long a failure takes (a loaded machine needs more
        # than 10 s); a failure stops the thread, else it would go on watching (and
        # drawing on ``random`` under later tests' Hypothesis) for the rest of the run.
        try:
            assert self.k8s.wait_for_streams("watch", before + 1, timeout=30)
            if self.wait_logs:
                assert self.k8s.wait_for_streams("log", logs + self.wait_logs, timeout=30)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.watcher.request_stop()
        self.thread.join(10)

    def metrics_text(self) -> str:
        import urllib.request

        assert self.watcher.metrics_server is not None
        port = self.watcher.metrics_server.port
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            return r.read().decode()
