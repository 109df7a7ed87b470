"""Events and vLLM logs that fit a synthetic capture, for the phase-span replay tests.

A synthetic capture (``tests/support/synth``) has Pods, a DPC log and launcher logs; the
phase spans also need each instance's vLLM log and the Pods' Events.  This module writes
them from the capture's own offline trace (what ``fma-otel bridge`` makes of it), so their
instants sit inside the spans they refine: a vLLM startup (in the format of vLLM 0.26,
stamps in UTC) inside ``fma.vllm.ready``, a wake inside ``fma.vllm.wake``, the kubelet's
and scheduler's Events inside ``fma.launcher.startup`` / ``fma.requester.startup``.

Every item carries its time, so a test can add them to the fake cluster in any order: all
up front, or each at its moment in the timeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from fma_otel import model as M
from fma_otel.span_records import SpanRecord
from tests.support.k8s_server import make_event

S = 1_000_000_000


def _stamp(ns: int) -> str:
    return datetime.fromtimestamp(ns // S, timezone.utc).strftime("%m-%d %H:%M:%S")


def _asctime(ns: int) -> str:
    d = datetime.fromtimestamp(ns // S, timezone.utc)
    return d.strftime("%Y-%m-%d %H:%M:%S") + f",{(ns % S) // 1_000_000:03d}"


def startup_lines(t0: int, span_s: float, launcher: bool = True) -> list[tuple[int, str]]:
    """A vLLM 0.26 startup from ``t0`` (ns), compressed to fit ``span_s`` seconds: (t, line)."""
    f = min(1.0, max(0.2, (span_s - 2.0) / 20.0))

    def at(s: float) -> int:
        return t0 + int(s * f * S)

    e = "(EngineCore pid=418) INFO"
    out: list[tuple[int, str]] = []
    if launcher:
        out.append((t0, f"{_asctime(t0)} - __main__ - INFO - VLLM process (PID: 412) started."))
    rows = [
        (1.0, "INFO {} [__init__.py:216] Automatically detected platform cuda."),
        (
            3.0,
            e
            + " {} [core.py:101] Initializing a V1 LLM engine (v0.26.0) with config: model='Qwen/Qwen3-0.6B', "
            "tokenizer='Qwen/Qwen3-0.6B', load_format=auto, tensor_parallel_size=1, enforce_eager=False",
        ),
        (4.0, e + " {} [gpu_model_runner.py:3354] Starting to load model Qwen/Qwen3-0.6B..."),
        (6.0, e + " {} [default_loader.py:314] Loading weights took %.2f seconds" % (1.5 * f)),
        (
            7.0,
            e
            + " {} [gpu_model_runner.py:3431] Model loading took 1.12 GiB memory and %.6f seconds"
            % (2.9 * f),
        ),
        (11.0, e + " {} [backends.py:647] Dynamo bytecode transform time: %.2f s" % (3.1 * f)),
        (13.0, e + " {} [monitor.py:47] torch.compile took %.2f s in total" % (5.2 * f)),
        (14.0, e + " {} [monitor.py:74] Initial profiling/warmup run took %.2f s" % (0.9 * f)),
        (14.0, e + " {} [gpu_worker.py:359] Available KV cache memory: 61.2 GiB"),
        (
            18.0,
            e
            + " {} [gpu_model_runner.py:4244] Graph capturing finished in "
            + f"{max(1, int(4 * f))} secs, took 0.62 GiB",
        ),
        (
            18.0,
            e
            + " {} [core.py:250] init engine (profile, create kv cache, warmup model) took %.2f s"
            % (10.5 * f),
        ),
        (19.0, "INFO {} [api_server.py:1873] Starting vLLM server on http://0.0.0.0:8005"),
    ]
    for s, text in rows:
        t = at(s)
        out.append((t, text.format(_stamp(t))))
    t = at(19.5)
    out.append((t, "(APIServer pid=412) INFO:     Application startup complete."))
    return out


def wake_lines(ws: int, we: int) -> list[tuple[int, str]]:
    """vLLM's wake-up inside the DPC's wake call ``[ws, we]`` (ns)."""
    took = max(0.05, (we - ws) / S - 0.3)
    end = we - int(0.1 * S)
    return [
        (ws, f"INFO {_stamp(ws)} [api_router.py:52] wake up the engine with tags: None"),
        (
            end,
            f"(EngineCore pid=418) INFO {_stamp(end)} [abstract.py:318] It took {took:.6f} seconds to wake up "
            "tags {'kv_cache', 'weights'}.",
        ),
    ]


@dataclass
class Scenario:
    """What to add: instance logs per (launcher, instance), baseline container log lines,
    Events; each with its time."""

    instance_logs: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    baseline_logs: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    events: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def _span(trace: list[SpanRecord], name: str) -> SpanRecord | None:
    return next((s for s in trace if s.name == name), None)


def _pod(cap: Any, name: str) -> dict[str, Any]:
    return next(p for _t, p in cap.pod_events if p["metadata"]["name"] == name)


def _startup_events(
    pod: dict[str, Any], span: SpanRecord, container: str, pulled: str
) -> list[tuple[int, dict]]:
    s = span.start_ns
    name = pod["metadata"]["name"]
    us = s // 1000 - 400_000  # the scheduler's, with microseconds, before the Pod is scheduled
    return [
        (
            us * 1000,
            make_event(
                "Scheduled",
                f"Successfully assigned {name} to gpu-node-1",
                pod=pod,
                component="default-scheduler",
                event_time_us=us,
            ),
        ),
        (
            s + S,
            make_event(
                "Pulling", 'Pulling image "example/image:1"', pod=pod, container=container, first=(s + S) / S
            ),
        ),
        (s + S, make_event("Pulled", pulled, pod=pod, container=container, first=(s + S) / S)),
        (
            s + S,
            make_event(
                "Created", f"Created container {container}", pod=pod, container=container, first=(s + S) / S
            ),
        ),
        (
            s + S,
            make_event(
                "Started", f"Started container {container}", pod=pod, container=container, first=(s + S) / S
            ),
        ),
    ]


def build(cap: Any, offline: dict[str, list[SpanRecord]]) -> Scenario:
    """The vLLM logs and Events that fit ``cap``'s offline traces."""
    sc = Scenario()
    seen_launchers: set[str] = set()
    seen_requesters: set[str] = set()
    fma_events: set[str] = set()  # the paths that got one of FMA's own Events
    for trace in sorted(offline.values(), key=lambda t: min(s.start_ns for s in t)):
        root = next(s for s in trace if not s.parent_span_id)
        a = root.attributes
        path, inst, launcher, req = a[M.A_PATH], a.get(M.A_INSTANCE), a.get(M.A_LAUNCHER), a[M.A_REQ_NAME]
        if path == M.COLD_NO_FMA:
            act = _span(trace, "fma.actuation")
            assert act is not None
            lines = startup_lines(act.start_ns + S // 2, (act.end_ns - act.start_ns) / S, launcher=False)
            sc.baseline_logs[(req, "vllm")] = lines
        elif inst and launcher:
            log = sc.instance_logs.setdefault((launcher, inst), [])
            ready = _span(trace, "fma.vllm.ready")
            wake = _span(trace, "fma.vllm.wake")
            if ready is not None:
                log.extend(startup_lines(ready.start_ns + S // 5, (ready.end_ns - ready.start_ns) / S))
            elif not log:  # an instance started before the capture: its startup long before
                log.extend(startup_lines(root.start_ns - 600 * S, 30.0))
            if wake is not None:
                log.extend(wake_lines(wake.start_ns, wake.end_ns))
        act_span = _span(trace, "fma.actuation")
        if act_span is not None and path in (M.COLD_LAUNCHER, M.WARM) and path not in fma_events and launcher:
            # FMA's own Events, in the middle of the actuation: span events on fma.actuation
            fma_events.add(path)
            mid = (act_span.start_ns + act_span.end_ns) // 2
            if path == M.COLD_LAUNCHER:
                ev = make_event(
                    "LauncherStuck",
                    f"launcher {launcher} is not Ready after 5m",
                    pod=_pod(cap, launcher),
                    etype="Warning",
                    component="launcher-populator",
                    first=mid / S,
                )
            else:
                ev = make_event(
                    "OutdatedRoutingMetadata",
                    "routing labels out of date",
                    pod=_pod(cap, req),
                    etype="Warning",
                    component="dual-pods-controller",
                    first=mid / S,
                )
            sc.events.append((mid, ev))
        ls = _span(trace, "fma.launcher.startup")
        if ls is not None and launcher and launcher not in seen_launchers:
            seen_launchers.add(launcher)
            sc.events += _startup_events(
                _pod(cap, launcher),
                ls,
                "inference-server",
                'Successfully pulled image "example/image:1" in 12.3s (12.5s including waiting). '
                "Image size: 9876543210 bytes.",
            )
        rs = _span(trace, "fma.requester.startup")
        if rs is not None and req not in seen_requesters:
            seen_requesters.add(req)
            container = "vllm" if path == M.COLD_NO_FMA else "inference-server"
            sc.events += _startup_events(
                _pod(cap, req), rs, container, 'Container image "example/image:1" already present on machine'
            )
    for log in sc.instance_logs.values():
        log.sort(key=lambda x: x[0])
    return sc


def log_bytes(lines: list[tuple[int, str]]) -> bytes:
    return "".join(text + "\n" for _t, text in lines).encode()
