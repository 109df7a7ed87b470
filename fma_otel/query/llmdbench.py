"""llm-d-benchmark's FMA block, from our spans: ``slo --format llm-d-benchmark``.

Why: llm-d-benchmark's FMA harness writes its measurements as the ``extra_metrics``
entry named ``fma`` of its result (per iteration ``hot_hit_rate``, ``warm_hit_rate``,
``cold_launcher_hit_rate`` and a ``launcher_infos`` list, one per requester).  Writing the
same block from our traces lets its users swap this tool in without changing what reads
the result.  The shape follows the harness's public result files; the *numbers* follow our
span model (docs/span-model.md), and where the two define a figure differently the
difference is stated in docs/llm-d-benchmark.md and in :data:`DEFINITIONS`, which is
written into the block (``fma_otel_definitions``) so no reader mixes them blindly.

Iterations: the harness runs one requester per iteration; here every FMA actuation is
one iteration, numbered from 1 in the order the requesters were created.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model import (
    A_INSTANCE,
    A_LAUNCHER,
    A_NAMESPACE,
    A_NODE,
    A_PATH,
    A_REQ_NAME,
    COLD_LAUNCHER,
    HOT,
    ROOT,
    WARM,
    S,
)
from ..sinks.show import group_traces, trace_attr
from ..span_records import SpanRecord

#: our path -> the harness's ``actuation_condition``
CONDITION: Mapping[str, str] = {COLD_LAUNCHER: "T_cold_launcher", WARM: "T_warm", HOT: "T_hot"}
#: the value of ``timing_source`` on every launcher info written here
TIMING_SOURCE = "fma-otel"

DEFINITIONS: Mapping[str, str] = {
    "timing_source": "fma-otel: durations are fma-otel span durations (docs/span-model.md), "
    "not the harness's dpc/kube_* fallbacks",
    "actuation_condition": "the path the DPC took, from its own log (cold: it created a launcher; "
    "warm: it created an instance in an existing launcher; hot: it woke a sleeping one), "
    "not inferred from launcher age or vLLM sleep/wake logs",
    "t_wake": "fma.vllm.wake: the DPC's /wake_up call, request to response (T_wake); "
    "the harness's DPC-refined figure ends at the readiness relay call's start instead",
    "t_instance_create": "fma.instance.create: the launcher's receipt of the create request to the "
    "DPC's readiness relay (T_instance_create), for warm and cold_launcher actuations",
    "t_cold_launcher": "fma.launcher.cold_start: launcher Pod creation to the DPC's readiness relay "
    "(T_cold_launcher)",
    "hit rates": "per iteration, over that iteration's FMA actuations; null when it has none",
    "timestamps": "seconds since the epoch; Kubernetes times are whole seconds",
}


def _secs(ns: int | None) -> float:
    return 0.0 if ns is None else ns / S


def _dur(span: SpanRecord | None) -> float | None:
    return None if span is None else round(span.duration_s, 6)


def launcher_info(trace: Sequence[SpanRecord]) -> dict[str, Any] | None:
    """One actuation as the harness's ``launcher_info``; ``None`` for a non-FMA one."""
    path = trace_attr(trace, A_PATH)
    if path not in CONDITION:
        return None
    spans: dict[str, SpanRecord] = {}  # the first of each name (a trace has one of each)
    for s in trace:
        spans.setdefault(s.name, s)
    root = spans.get(ROOT)
    act = spans.get("fma.actuation")
    bind = spans.get("fma.dpc.bind")
    cold = spans.get("fma.launcher.cold_start")
    launcher = str(trace_attr(trace, A_LAUNCHER) or "")
    complete = root is not None and root.attributes.get("fma.complete", True) is not False
    return {
        "namespace": str(trace_attr(trace, A_NAMESPACE) or ""),
        "pod_name": launcher,
        "name": launcher,
        "requester_info": {
            "name": str(trace_attr(trace, A_REQ_NAME) or ""),
            "creation_timestamp": _secs(root.start_ns if root else None),
            "ready_timestamp": _secs(root.end_ns) if root is not None and complete else 0.0,
            "dual_label_timestamp": _secs(bind.end_ns if bind else None),
            "container_start_timestamp": _secs(act.start_ns if act else None),
        },
        "vllm_instance_id": trace_attr(trace, A_INSTANCE),
        "actuation_condition": CONDITION[path],
        "launcher_creation_timestamp": _secs(cold.start_ns if cold else None),
        "launcher_node": str(trace_attr(trace, A_NODE) or ""),
        "t_wake": _dur(spans.get("fma.vllm.wake")) if complete else None,
        "t_instance_create": _dur(spans.get("fma.instance.create")) if complete else None,
        "t_cold_launcher": _dur(cold) if complete else None,
        "timing_source": TIMING_SOURCE,
        "dpc_timing_available": False,
        "fma_otel_trace_id": trace[0].trace_id,
        "fma_otel_complete": complete,
    }


def to_llmd_benchmark(spans: Iterable[SpanRecord]) -> str:
    """``{"extra_metrics": [the entry named fma]}`` as indented JSON (YAML readers take it
    too): one iteration per FMA actuation."""
    iterations = []
    for trace in group_traces(spans):  # in the order the requesters were created
        info = launcher_info(trace)
        if info is None:
            continue
        cond = info["actuation_condition"]  # one actuation an iteration: each rate is 0 or 1
        iterations.append(
            {
                "iteration": len(iterations) + 1,
                "launcher_infos": [info],
                "hot_hit_rate": float(cond == "T_hot"),
                "warm_hit_rate": float(cond == "T_warm"),
                "cold_launcher_hit_rate": float(cond == "T_cold_launcher"),
            }
        )
    block = {"name": "fma", "iterations": iterations, "fma_otel_definitions": dict(DEFINITIONS)}
    return json.dumps({"extra_metrics": [block]}, indent=2) + "\n"
