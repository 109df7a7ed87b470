"""Deterministic synthesizer of FMA captures, with ground truth.

Why this exists: real captures of a cluster running llm-d Fast Model Actuation are rare,
large and full of secrets, yet the bridge needs inputs whose *correct* trace is known exactly.
This module simulates a small cluster (nodes with GPUs, InferenceServerConfigs, launcher
Pods, requester Pods, a plain vLLM baseline Pod), plays out actuations on every path, and
writes what ``kubectl`` would have captured: the Pods as JSON, the dual-pods controller's
klog text and each launcher's Python-logging text.  Alongside, it records for every
actuation the instants that a correct parser reads from exactly that data
(:class:`TruthActuation`), so tests and benchmarks compare against ground truth instead of
against the bridge's own opinion.

Everything derives from ``random.Random(seed)``: the same arguments give byte-identical
output, which is what lets the embedded sample (``fma_otel/data/sample``) be regenerated and
checked in CI (``scripts/make_sample.py``).  It lives under ``tests/support/`` because only tests
and benchmarks use it; nothing in the shipped ``fma_otel`` package imports it.

Formats follow ``fma-reference.md`` (klog header and value encoding §2.1, context keys §2.2,
lines §2.3-2.5, launcher lines §3.4/§9.3, Pod shapes §9.4); nothing here is copied from FMA.

Decisions a reader of the truth must know (also in ``docs/capture-format.md``):

- Instants are the values *as printed*: Kubernetes timestamps floor to whole seconds, klog
  headers to microseconds, launcher ``asctime`` to milliseconds (on the launcher's own, slightly
  skewed clock); ``httpCallStartTime`` is exact to the nanosecond and ``latencySecs`` is printed
  as an exact decimal of whole nanoseconds, so ``start + latency`` is exact in integer ns.
- Launcher Pod instants (``L.*``) belong only to the cold start that created the launcher; a
  warm or hot actuation that reuses a launcher has none.
- A requester actuated twice (bound, unbound, bound again hot) yields keys ``<uid>`` and
  ``<uid>/2``.  A Pod cannot be re-created, so ``<uid>/2`` has no ``R.created``,
  ``R.scheduled`` or ``R.started`` of its own: it starts at ``D.unbound``, the DPC's
  "Unbound server-providing Pod" line (the span model's recorded change).  Pod status only keeps the newest ``Ready`` transition: in
  a List capture ``R.ready`` belongs to the *last* actuation only, and the earlier one's
  ``R.ready`` is visible only in a watch stream (``TruthActuation.watch_instants``).  The DPC
  observes ``fma_actuation_seconds`` only on a requester's first positive relay, so the second
  actuation has no ``"Observed actuation latency"`` line (``dpc_actuation_secs`` is ``None``)
  and its path must be read from the selection lines ("Found launcher with sleeping instance").
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import heapq
import json
import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any

S = 1_000_000_000
MS = 1_000_000
US = 1_000

COLD = "cold_launcher"
WARM = "warm"
HOT = "hot"
BASELINE = "cold_no_fma"
PATHS: tuple[str, ...] = (COLD, WARM, HOT, BASELINE)
_DPC_LABEL = {COLD: "cold", WARM: "warm", HOT: "hot"}

DEFAULT_START = datetime(2026, 6, 29, 14, 30, 0, tzinfo=timezone.utc)
DEFAULT_NAMESPACE = "fma-test"
#: Every synthetic secret starts with this, so tests can grep outputs for leaks.
SECRET_PREFIX = "hf_synthSECRET"
PREFIX = "dual-pods.llm-d.ai/"
DPC_IP = "10.244.0.12"
LAUNCHER_PORT = 8001
ADMIN_PORT = 8081
LAUNCHER_CONFIG = "example"
MAX_INSTANCES = 2
REQUESTER_IMAGE = "ghcr.io/llm-d-incubation/llm-d-fast-model-actuation/requester:v0.6.2"
LAUNCHER_IMAGE = "ghcr.io/llm-d-incubation/llm-d-fast-model-actuation/launcher:v0.6.2"
VLLM_IMAGE = "docker.io/vllm/vllm-openai:v0.26.0"

_GO = "inference-server.go"
_CTL = "controller.go"
_Q = "queue-work.go"

# --------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class TruthActuation:
    """What a correct bridge must find for one actuation (see the module docstring)."""

    key: str
    requester_name: str
    requester_uid: str
    namespace: str
    path: str
    complete: bool
    launcher_name: str | None
    instance_id: str | None
    isc_name: str | None
    node: str
    instances_deleted: int
    instants: dict[str, int]
    dpc_actuation_secs: float | None
    #: instants visible only when Pods come as a watch stream (overwritten in final status)
    watch_instants: dict[str, int] = field(default_factory=dict)

    def instants_for(self, pods_form: str = "list") -> dict[str, int]:
        """The instants a parser finds given the form of ``pods.json``."""
        if pods_form == "watch":
            return {**self.instants, **self.watch_instants}
        return dict(self.instants)


@dataclass
class Capture:
    """A synthetic capture held in memory; :func:`write_capture` lays it out on disk.

    ``dpc_lines`` are physical lines (a multi-line ``key=<`` block spans several);
    ``dpc_times`` / ``launcher_times`` hold each line's true emission time (ns), used only
    for the ``kubectl logs --timestamps`` prefix.  ``pod_events`` is the watch-stream form
    of the Pods (``type``, object) in order.
    """

    pods: list[dict]
    dpc_lines: Iterable[str]
    launcher_logs: dict[str, list[str]]
    truth: list[TruthActuation]
    dpc_times: list[int] = field(default_factory=list)
    launcher_times: dict[str, list[int]] = field(default_factory=dict)
    pod_events: list[tuple[str, dict]] = field(default_factory=list)
    end_ns: int = 0


# --------------------------------------------------------------------------- formatting


@lru_cache(maxsize=16384)
def _sec_parts(sec: int) -> tuple[str, str]:
    d = datetime.fromtimestamp(sec, timezone.utc)
    return d.strftime("%m%d %H:%M:%S"), d.strftime("%Y-%m-%dT%H:%M:%S")


def klog_time(ns: int) -> str:
    """klog header time: ``mmdd hh:mm:ss.uuuuuu`` (no year, UTC)."""
    sec, rem = divmod(ns, S)
    return f"{_sec_parts(sec)[0]}.{rem // US:06d}"


def rfc3339nano(ns: int) -> str:
    """Go ``time.RFC3339Nano``: trailing zeros of the fraction trimmed."""
    sec, rem = divmod(ns, S)
    base = _sec_parts(sec)[1]
    if rem:
        return f"{base}.{f'{rem:09d}'.rstrip('0')}Z"
    return base + "Z"


def k8s_time(ns: int) -> str:
    """Kubernetes ``metav1.Time``: whole seconds."""
    return _sec_parts(ns // S)[1] + "Z"


def asctime(ns: int) -> str:
    """Python logging ``asctime``: ``YYYY-MM-DD HH:MM:SS,mmm``."""
    sec, rem = divmod(ns, S)
    return f"{_sec_parts(sec)[1].replace('T', ' ')},{rem // MS:03d}"


def secs_text(ns: int) -> str:
    """Seconds as the exact decimal of whole nanoseconds, the way Go prints the float."""
    whole, frac = divmod(ns, S)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:09d}".rstrip("0")


def floor_to(ns: int, unit: int) -> int:
    return ns - ns % unit


class Raw(str):
    """A value already in its printed form (numbers printed exactly, see :func:`secs_text`)."""


_ESC = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\v": "\\v",
}


def go_quote(s: str) -> str:
    """Go ``strconv.Quote`` for the characters we produce (printable Unicode kept)."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = []
    for ch in s:
        if ch in _ESC:
            out.append(_ESC[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def go_json(v: Any) -> str:
    """Go ``json.Encoder`` output: compact, HTML-escaped; dict order as given (sort Go maps first)."""
    text = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def gomap(d: dict[str, Any]) -> dict[str, Any]:
    """A Go map as JSON-encoded: keys sorted."""
    return dict(sorted(d.items()))


def _enc(v: Any) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, str):
        return go_quote(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    return go_json(v)


def klog_lines(
    t: int,
    level: str,
    fileline: str,
    msg: str,
    ctx: Sequence[tuple[str, Any]],
    kvs: Sequence[tuple[str, Any]],
) -> list[str]:
    """Format one klog record; returns physical lines (several for a ``key=<`` block).

    Context keys that the call site repeats are dropped from the context (klog ``MergeKVs``);
    repeats *inside* the context stay (the unbound-launcher ``node`` twice).
    """
    call = {k for k, _ in kvs}
    parts = [f"{level}{klog_time(t)} {1:>7} {fileline}] {go_quote(msg)}"]
    for k, v in [*((k, v) for k, v in ctx if k not in call), *kvs]:
        if isinstance(v, str) and not isinstance(v, Raw) and "\n" in v:
            body = "\n".join("\t" + ln for ln in v.split("\n"))
            parts.append(f" {k}=<\n{body}\n >")
        else:
            parts.append(f" {k}={_enc(v)}")
    return "".join(parts).split("\n")


# --------------------------------------------------------------------------- world model


_SFX = "bcdfghjklmnpqrstvwxz2456789"

ISCS: tuple[dict[str, Any], ...] = (
    {
        "name": "example",
        "port": 8005,
        "options": "--model TinyLlama/TinyLlama-1.1B-Chat-v1.0 --enable-sleep-mode --gpu-memory-utilization 0.825",
        "env": {"VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_SERVER_DEV_MODE": "1"},
        "labels": {"e2e-test.fma.llm-d.ai/isc-label": "test-value"},
    },
    {
        "name": "granite",
        "port": 8006,
        "options": "--model ibm-granite/granite-3.3-2b-instruct --enable-sleep-mode --max-model-len 8192",
        "env": {"VLLM_SERVER_DEV_MODE": "1"},
        "labels": {"llm-d.ai/model": "granite-3.3-2b"},
    },
    {
        "name": "qwen",
        "port": 8007,
        "options": "--model Qwen/Qwen2.5-0.5B-Instruct --enable-sleep-mode --gpu-memory-utilization 0.4",
        "env": {"VLLM_SERVER_DEV_MODE": "1", "VLLM_USE_V1": "1"},
        "labels": {"llm-d.ai/model": "qwen2.5-0.5b"},
    },
)

_COND_ORDER = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


@dataclass
class _Node:
    name: str
    index: int
    host_ip: str
    gpus: list[str]
    next_ip: int = 20


@dataclass
class _PodSim:
    """A Pod as a base object plus timed mutations, so it can be rendered at any instant."""

    base: dict[str, Any]
    created: int
    facts: list[tuple[int, int, Callable[[dict[str, Any]], None]]] = field(default_factory=list)

    def render(self, until: int | None, rv: Callable[[int], str]) -> dict[str, Any] | None:
        if until is not None and self.created > until:
            return None
        pod = copy.deepcopy(self.base)
        last = self.created
        for t, _, f in sorted(self.facts, key=lambda x: (x[0], x[1])):
            if until is not None and t > until:
                break
            f(pod)
            last = max(last, t)
        pod["metadata"]["resourceVersion"] = rv(last)
        return pod


@dataclass
class _Launcher:
    name: str
    uid: str
    node: _Node
    ip: str
    pod: _PodSim
    skew: int
    started: int = 0
    up: int = 0
    ready: int = 0
    probe_phase: int = 0
    instances: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> isc
    windows: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class _Act:
    key: str
    path: str
    name: str
    uid: str
    node: _Node
    gpu: str
    gpu_index: int
    isc: dict[str, Any] | None
    instance_id: str | None
    ip: str
    pod: _PodSim | None = None
    launcher: _Launcher | None = None
    created: int = 0
    started: int = 0
    deleted: int = 0
    incomplete: bool = False
    dpc_secs: float | None = None
    label: bool = True  # log "Observed actuation latency"
    worker: int = -1
    instants: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (value, emitted at)
    vllm_up: int = 0  # true time of vLLM's "Application startup complete." (phase logs)
    ready_true: int = 0  # true time of the Ready transition this actuation caused
    relayed_true: int = 0
    #: true instants no log line prints (issue 21): ``V.ready`` (vLLM began answering) and
    #: the relay call's ends; read by :func:`true_instants`
    true_extra: dict[str, int] = field(default_factory=dict)


def instance_id_for(isc: dict[str, Any], gpus: Sequence[str]) -> str:
    """A 45-character nominal instance ID (``I`` + base64url sha256 + ``i``), as FMA shapes them."""
    blob = json.dumps({k: isc[k] for k in ("port", "options", "env", "labels")}, sort_keys=True)
    digest = hashlib.sha256(f"{blob};gpus={','.join(gpus)}".encode()).digest()
    return "I" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "i"


class _Sim:
    """One simulated cluster over one time window; emits DPC lines, launcher lines and Pods."""

    def __init__(
        self, seed: int, start_ns: int, namespace: str, noise: bool, pre_before: int | None = None
    ) -> None:
        self.rng = random.Random(seed)
        self.t0 = start_ns
        self.pre_before = start_ns if pre_before is None else pre_before
        self.ns = namespace
        self.noise = noise
        self.seq = 0
        self.dpc: list[tuple[int, int, list[str]]] = []
        self.llog: dict[str, list[tuple[int, int, str]]] = {}
        self.pods: list[_PodSim] = []
        self.launchers: list[_Launcher] = []
        self.acts: list[_Act] = []
        self.nodes: list[_Node] = []
        self.rv_epoch = self.pre_before - 4 * 3600 * S
        self.secrets = {
            isc["name"]: SECRET_PREFIX + "".join(self.rng.choice("abcdef0123456789") for _ in range(20))
            for isc in ISCS
        }
        self.end = 0
        self.horizon = start_ns  # when the complete actuations are done (bounds incomplete polling)
        self.last_unbound = 0
        self.ready_transitions: dict[str, list[int]] = {}

    #: also print the DPC's V5 "Processing inference server" line (off by default, so the
    #: default capture and the embedded sample keep their bytes): see :func:`true_instants_of`
    reconcile_lines = False

    def processing_line(self, t: int, a: _Act, ctx: list[tuple[str, Any]]) -> None:
        """The DPC's reconcile of a requester whose container it sees running (issue 21:
        its ``requesterRCS`` bounds ``R.started``); draws nothing from the random stream."""
        rcs = {
            "State": {"running": {"startedAt": k8s_time(a.started)}},
            "LastTerminationState": {},
            "Ready": False,
            "RestartCount": 0,
            "Started": True,
        }
        self.log(
            t,
            f"{_GO}:196",
            "Processing inference server",
            ctx,
            [("requesterResourceVersion", self.rv(t)), ("requesterRCS", rcs), ("GPUIDs", None)],
        )

    # ---- small helpers

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    def u(self, a: float, b: float) -> int:
        """A random duration in ns, uniform in [a, b] seconds."""
        return int(self.rng.uniform(a, b) * S)

    def m(self, a: float, b: float) -> int:
        """A random duration in ns, uniform in [a, b] milliseconds."""
        return int(self.rng.uniform(a, b) * MS)

    def rv(self, t: int) -> str:
        return str(20_000_000 + (t - self.rv_epoch) // 100_000)

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def sfx(self, n: int = 5) -> str:
        return "".join(self.rng.choice(_SFX) for _ in range(n))

    def node(self, i: int) -> _Node:
        while len(self.nodes) <= i:
            k = len(self.nodes) + 1
            gpus = [
                f"GPU-{self.rng.getrandbits(32):08x}-{self.rng.getrandbits(16):04x}-{self.rng.getrandbits(16):04x}-"
                f"{self.rng.getrandbits(16):04x}-{self.rng.getrandbits(48):012x}"
                for _ in range(8)
            ]
            self.nodes.append(_Node(f"gpu-node-{k}", k, f"10.0.0.{20 + k}", gpus))
        return self.nodes[i]

    def pod_ip(self, node: _Node) -> str:
        node.next_ip += 1
        return f"10.244.{node.index}.{node.next_ip}"

    def log(
        self,
        t: int,
        fl: str,
        msg: str,
        ctx: Sequence[tuple[str, Any]],
        kvs: Sequence[tuple[str, Any]],
        level: str = "I",
    ) -> int:
        self.dpc.append((t, self._next(), klog_lines(t, level, fl, msg, ctx, kvs)))
        return t

    def llog_line(self, lch: _Launcher, t: int, logger: str, msg: str, level: str = "INFO") -> None:
        text = f"{asctime(t + lch.skew)} - {logger} - {level} - {msg}"
        self.llog.setdefault(lch.name, []).append((t, self._next(), text))

    def access(self, lch: _Launcher, t: int, client: str, method: str, path: str, status: int) -> None:
        port = self.rng.randrange(32768, 61000)
        self.llog_line(lch, t, "uvicorn.access", f'{client}:{port} - "{method} {path} HTTP/1.1" {status}')

    def http(
        self,
        t: int,
        lat: int,
        ctx: Sequence[tuple[str, Any]],
        purpose: str,
        method: str,
        url: str,
        status: int,
        err: str | None = None,
    ) -> int:
        """Log "HTTP call done" for a call starting at ``t``; returns the header time (≈ end)."""
        hdr = t + lat + self.rng.randrange(2, 40) * US
        kvs = [
            ("purpose", purpose),
            ("method", method),
            ("url", url),
            ("httpCallStartTime", rfc3339nano(t)),
            ("latencySecs", Raw(secs_text(lat))),
            ("statusCode", status),
            ("err", err),
        ]
        return self.log(hdr, f"{_GO}:2251", "HTTP call done", ctx, kvs)

    def fact(self, pod: _PodSim, t: int, f: Callable[[dict[str, Any]], None]) -> None:
        pod.facts.append((t, self._next(), f))

    # ---- Pods

    def _pod_base(
        self,
        name: str,
        uid: str,
        created: int,
        labels: dict[str, str],
        annotations: dict[str, str],
        spec: dict[str, Any],
        generate: str | None = None,
    ) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if generate:
            meta["generateName"] = generate
        meta.update(
            {
                "namespace": self.ns,
                "uid": uid,
                "resourceVersion": "",
                "creationTimestamp": k8s_time(created),
                "labels": labels,
                "annotations": annotations,
            }
        )
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }

    @staticmethod
    def _cond(
        pod: dict[str, Any],
        ctype: str,
        status: bool,
        t: int,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        conds = [c for c in pod["status"].get("conditions", []) if c["type"] != ctype]
        c: dict[str, Any] = {
            "type": ctype,
            "status": "True" if status else "False",
            "lastProbeTime": None,
            "lastTransitionTime": k8s_time(t),
        }
        if reason:
            c["reason"] = reason
        if message:
            c["message"] = message
        conds.append(c)
        conds.sort(key=lambda c: _COND_ORDER.index(c["type"]))
        pod["status"]["conditions"] = conds

    def lifecycle(
        self,
        ps: _PodSim,
        node: _Node,
        ip: str,
        sched: int,
        init: int,
        started: int,
        containers: list[tuple[str, str]],
    ) -> None:
        """Schedule, sandbox and container start, as the scheduler and kubelet record them."""

        def on_sched(p: dict[str, Any]) -> None:
            p["spec"]["nodeName"] = node.name
            self._cond(p, "PodScheduled", True, sched)

        def on_init(p: dict[str, Any]) -> None:
            st = p["status"]
            st["hostIP"] = node.host_ip
            st["podIP"] = ip
            st["startTime"] = k8s_time(sched)
            self._cond(p, "Initialized", True, sched)
            self._cond(p, "PodReadyToStartContainers", True, init)

        def on_start(p: dict[str, Any]) -> None:
            p["status"]["phase"] = "Running"
            names = ", ".join(n for n, _ in containers)
            self._cond(
                p, "Ready", False, started, "ContainersNotReady", f"containers with unready status: [{names}]"
            )
            self._cond(
                p,
                "ContainersReady",
                False,
                started,
                "ContainersNotReady",
                f"containers with unready status: [{names}]",
            )
            p["status"]["containerStatuses"] = [
                {
                    "name": n,
                    "image": img,
                    "ready": False,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": k8s_time(started)}},
                }
                for n, img in containers
            ]

        self.fact(ps, sched, on_sched)
        self.fact(ps, init, on_init)
        self.fact(ps, started, on_start)

    def set_ready(self, ps: _PodSim, t: int, ready: bool, container: str | None = None) -> None:
        def f(p: dict[str, Any]) -> None:
            for c in p["status"].get("containerStatuses", []):
                if container is None or c["name"] == container:
                    c["ready"] = ready
            unready = [c["name"] for c in p["status"].get("containerStatuses", []) if not c["ready"]]
            if unready:
                msg = f"containers with unready status: [{', '.join(unready)}]"
                self._cond(p, "Ready", False, t, "ContainersNotReady", msg)
                self._cond(p, "ContainersReady", False, t, "ContainersNotReady", msg)
            else:
                self._cond(p, "Ready", True, t)
                self._cond(p, "ContainersReady", True, t)

        self.fact(ps, t, f)

    def meta_patch(
        self,
        ps: _PodSim,
        t: int,
        labels: dict[str, str | None] | None = None,
        annotations: dict[str, str | None] | None = None,
        finalizers: list[str] | None = None,
    ) -> None:
        def f(p: dict[str, Any]) -> None:
            md = p["metadata"]
            for k, v in (labels or {}).items():
                if v is None:
                    md["labels"].pop(k, None)
                else:
                    md["labels"][k] = v
            for k, v in (annotations or {}).items():
                if v is None:
                    md["annotations"].pop(k, None)
                else:
                    md["annotations"][k] = v
            if finalizers is not None:
                if finalizers:
                    md["finalizers"] = finalizers
                else:
                    md.pop("finalizers", None)

        self.fact(ps, t, f)

    # ---- ISC / launcher helpers

    def vllm_config(self, isc: dict[str, Any], gpu: str) -> dict[str, Any]:
        env = gomap({**isc["env"], "HF_TOKEN": self.secrets[isc["name"]]})
        return {
            "options": f"{isc['options']} --port {isc['port']}",
            "gpu_uuids": [gpu],
            "env_vars": env,
            "annotations": gomap({"inference-port": str(isc["port"]), "isc-name": isc["name"]}),
        }

    def bound_annotations(self, a: _Act) -> dict[str, str]:
        assert a.isc is not None and a.instance_id is not None
        return {
            PREFIX + "instance-id": a.instance_id,
            PREFIX + "requester": f"{a.uid} {a.name}",
            PREFIX + "server-port": str(a.isc["port"]),
            PREFIX + "vllm-config": go_json(self.vllm_config(a.isc, a.gpu)),
        }

    def new_launcher(self, node: _Node, created: int, bound_to: _Act | None) -> _Launcher:
        name = f"launcher-{LAUNCHER_CONFIG}-{self.sfx()}"
        uid = self.uid()
        labels = {
            "app.kubernetes.io/component": "launcher",
            PREFIX + "launcher-config-name": LAUNCHER_CONFIG,
            PREFIX + "node-name": node.name,
            PREFIX + "sleeping": "true",
        }
        ann = {
            PREFIX + "launcher-config-hash": hashlib.sha256(
                f"{LAUNCHER_CONFIG}/{node.name}".encode()
            ).hexdigest()[:16],
            PREFIX + "launcher-populator-template-hash": hashlib.sha256(LAUNCHER_CONFIG.encode()).hexdigest()[
                :16
            ],
        }
        if bound_to is not None:
            labels[PREFIX + "dual"] = bound_to.name
            ann.update(self.bound_annotations(bound_to))
        spec = {
            "nodeSelector": {"kubernetes.io/hostname": node.name},
            "containers": [
                {
                    "name": "inference-server",
                    "image": LAUNCHER_IMAGE,
                    "command": ["/app/launcher.py", "--log-level=info"],
                    "ports": [{"containerPort": LAUNCHER_PORT, "protocol": "TCP"}],
                    "readinessProbe": {
                        "httpGet": {"path": "/v2/vllm/instances", "port": LAUNCHER_PORT},
                        "initialDelaySeconds": 2,
                        "periodSeconds": 5,
                    },
                },
                {
                    "name": "state-change-reflector",
                    "image": LAUNCHER_IMAGE,
                    "command": ["python3", "/app/launcher_pod_notifier.py"],
                },
            ],
        }
        base = self._pod_base(
            name, uid, created, gomap(labels), gomap(ann), spec, generate=f"launcher-{LAUNCHER_CONFIG}-"
        )
        base["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "fma.llm-d.ai/v1alpha1",
                "kind": "LauncherConfig",
                "name": LAUNCHER_CONFIG,
                "uid": self.uid(),
                "controller": False,
                "blockOwnerDeletion": False,
            }
        ]
        if bound_to is not None:
            base["metadata"]["finalizers"] = [PREFIX + "provider"]
        ps = _PodSim(base, created)
        self.pods.append(ps)
        lch = _Launcher(name, uid, node, self.pod_ip(node), ps, skew=self.rng.randrange(-1500, 1500) * US)
        self.launchers.append(lch)
        return lch

    def boot_launcher(self, lch: _Launcher, created: int) -> None:
        """Schedule, start and make Ready a launcher; write its startup log lines."""
        sched = created + self.u(0.02, 0.9)
        init = sched + self.u(0.4, 1.4)
        started = init + self.u(0.8, 2.5)
        self.lifecycle(
            lch.pod,
            lch.node,
            lch.ip,
            sched,
            init,
            started,
            [("inference-server", LAUNCHER_IMAGE), ("state-change-reflector", LAUNCHER_IMAGE)],
        )
        self.set_ready(lch.pod, started + self.m(5, 40), True, "state-change-reflector")
        up = started + self.u(18, 27)
        t = up - self.m(240, 300)
        self.llog_line(lch, t, "gputranslator", "using package: nvidia-ml-py version: 13.590.48")
        self.llog_line(
            lch, t + self.m(90, 120), "gputranslator", "GPU Translator initialized with 8 real GPUs"
        )
        self.llog_line(
            lch,
            t + self.m(125, 140),
            "__main__",
            "Launcher starting with args: mock_gpus=False, mock_gpu_count=8, host=0.0.0.0, port=8001, log_level=info, node_name=None, namespace=None",
        )
        self.llog_line(
            lch, t + self.m(141, 150), "gputranslator", "using package: nvidia-ml-py version: 13.590.48"
        )
        self.llog_line(
            lch, t + self.m(240, 250), "gputranslator", "GPU Translator initialized with 8 real GPUs"
        )
        self.llog_line(lch, up - self.m(2, 3), "uvicorn.error", "Started server process [1]")
        self.llog_line(lch, up - self.m(1, 2), "uvicorn.error", "Waiting for application startup.")
        self.llog_line(lch, up - self.m(0.5, 1), "uvicorn.error", "Application startup complete.")
        self.llog_line(
            lch, up, "uvicorn.error", "Uvicorn running on http://0.0.0.0:8001 (Press CTRL+C to quit)"
        )
        phase = started + 2 * S + self.m(0, 400)
        k = max(0, -(-(up - phase) // (5 * S)))
        probe = phase + k * 5 * S
        ready = probe + self.m(5, 250)
        self.set_ready(lch.pod, ready, True, "inference-server")
        lch.started, lch.up, lch.ready, lch.probe_phase = started, up, ready, phase
        lch.windows.append((probe, probe + self.u(8, 14)))
        self._sched, self._created = sched, created

    def pre_launcher(self, node: _Node, instances: list[tuple[dict[str, Any], str]]) -> _Launcher:
        """A launcher the populator made before the capture, holding sleeping instances."""
        created = self.pre_before - self.u(900, 3600)
        lch = self.new_launcher(node, created, None)
        self.boot_launcher(lch, created)
        t = lch.ready + self.u(30, 120)
        for isc, gpu in instances:
            iid = instance_id_for(isc, [gpu])
            self.launcher_create_lines(lch, t, iid, gpu, node.gpus.index(gpu))
            lch.instances[iid] = isc
            t += self.u(60, 240)
        sig = self.signature(lch)
        self.meta_patch(lch.pod, t, annotations={PREFIX + "vllm-instance-signature": sig})
        return lch

    @staticmethod
    def signature(lch: _Launcher) -> str:
        items = sorted([iid, "running"] for iid in lch.instances)
        return hashlib.sha256(json.dumps(items, separators=(",", ":")).encode()).hexdigest()

    def launcher_create_lines(
        self, lch: _Launcher, recv: int, iid: str, gpu: str, idx: int, resp: int | None = None
    ) -> int:
        self.llog_line(lch, recv, "__main__", f"Accepted request to create vLLM instance with id={iid}")
        t = recv + self.m(0.05, 0.4)
        self.llog_line(lch, t, "__main__", f"Translated GPU UUIDs ['{gpu}'] to indices ['{idx}'].")
        self.llog_line(
            lch, t + self.m(0.01, 0.1), "__main__", f"Set CUDA_VISIBLE_DEVICES to {idx} based on UUIDs."
        )
        resp = resp if resp is not None else t + self.m(4, 12)
        self.access(lch, resp, DPC_IP, "PUT", f"/v2/vllm/instances/{iid}", 201)
        return resp

    # ---- DPC contexts

    @staticmethod
    def rctx(a: _Act, worker: int, inst: bool = False, provider: bool = False) -> list[tuple[str, Any]]:
        kv: list[tuple[str, Any]] = [
            ("worker", worker),
            ("node", a.node.name),
            ("serverUID", a.uid),
            ("requesterName", a.name),
        ]
        if inst and a.instance_id:
            kv.append(("instanceID", a.instance_id))
        if provider and a.launcher:
            kv.append(("providerName", a.launcher.name))
        return kv

    def enqueue(self, t: int, a: _Act, kind: str, manager: str) -> None:
        self.log(
            t,
            f"{_CTL}:735",
            "Enqueuing inference server reference due to notification of update",
            [("logger", "dual-pods-controller")],
            [
                ("nodeName", a.node.name),
                ("item", {"UID": a.uid, "RequesterName": a.name}),
                ("infSvrItemType", kind),
                ("resourceVersion", self.rv(t)),
                ("lastWrite", {"Manager": manager, "Time": k8s_time(t)}),
            ],
            level="I",
        )

    def enqueue_launcher(self, t: int, lch: _Launcher, manager: str) -> None:
        self.log(
            t,
            f"{_CTL}:812",
            "Enqueuing launcher reference due to notification of update",
            [("logger", "dual-pods-controller")],
            [
                ("nodeName", lch.node.name),
                ("launcherPod", lch.name),
                ("resourceVersion", self.rv(t)),
                ("lastWrite", {"Manager": manager, "Time": k8s_time(t)}),
            ],
        )

    def k8s_call(
        self,
        t: int,
        fl: str,
        msg: str,
        ctx: list[tuple[str, Any]],
        kvs: list[tuple[str, Any]],
        lo: float = 4,
        hi: float = 15,
    ) -> int:
        """A Kubernetes API call logged at its end with ``k8sCallStartTime``; returns header time."""
        hdr = t + self.m(lo, hi)
        return self.log(hdr, fl, msg, ctx, [*kvs, ("k8sCallStartTime", rfc3339nano(t))])

    def set_status(self, t: int, a: _Act, ctx: list[tuple[str, Any]], finalizers: bool) -> int:
        assert a.launcher is not None
        hdr = self.k8s_call(
            t,
            f"{_GO}:2071",
            "Set status/finalizers",
            ctx,
            [
                ("serverRequestingPod", a.name),
                ("status", {"Errors": None}),
                ("accelerators", a.gpu),
                ("boundName", a.launcher.name),
                ("instanceID", a.instance_id),
                ("finalizers", [PREFIX + "requester"] if finalizers else None),
                ("newResourceVersion", self.rv(t + 3 * MS)),
            ],
        )
        assert a.pod is not None
        self.meta_patch(
            a.pod,
            hdr,
            labels={PREFIX + "dual": a.launcher.name, PREFIX + "instance": a.instance_id},
            annotations={PREFIX + "status": '{"Errors":null}', PREFIX + "accelerators": a.gpu},
            finalizers=[PREFIX + "requester"] if finalizers else None,
        )
        return hdr

    def inst(self, a: _Act, name: str, value: int, at: int) -> None:
        a.instants[name] = (value, at)

    # ---- requester

    def new_requester(self, a: _Act, created: int) -> int:
        """Create, schedule and start a requester; returns when the DPC has its GPUs."""
        labels = {"app": "dp-example"}
        ann = {
            PREFIX + "inference-server-config": a.isc["name"] if a.isc else "",
            PREFIX + "admin-port": str(ADMIN_PORT),
        }
        spec = {
            "containers": [
                {
                    "name": "inference-server",
                    "image": REQUESTER_IMAGE,
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    "readinessProbe": {
                        "httpGet": {"path": "/ready", "port": 8080},
                        "initialDelaySeconds": 2,
                        "periodSeconds": 5,
                    },
                }
            ]
        }
        ps = _PodSim(
            self._pod_base(a.name, a.uid, created, labels, gomap(ann), spec, generate=a.name[:-5]), created
        )
        self.pods.append(ps)
        a.pod, a.created = ps, created
        sched = created + self.u(0.05, 1.2)
        init = sched + self.u(0.3, 0.9)
        started = init + self.u(0.6, 2.2)
        a.started = started
        self.lifecycle(ps, a.node, a.ip, sched, init, started, [("inference-server", REQUESTER_IMAGE)])
        self.inst(a, "R.created", floor_to(created, S), created)
        self.inst(a, "R.scheduled", floor_to(sched, S), sched)
        self.inst(a, "R.started", floor_to(started, S), started)
        self.log(
            created + self.m(2, 20),
            f"{_CTL}:690",
            "Ignoring add of non-scheduled server-requesting Pod",
            [("logger", "dual-pods-controller")],
            [("name", a.name)],
        )
        self.enqueue(sched + self.m(2, 15), a, "requester", "kube-scheduler")
        t = started + self.m(15, 60)
        self.enqueue(t, a, "requester", "kubelet")
        w = a.worker = self.rng.randrange(2)
        ctx = self.rctx(a, w)
        url = f"http://{a.ip}:{ADMIN_PORT}/v1/dual-pods/accelerators"
        t += self.m(0.3, 2)
        if self.reconcile_lines:
            self.processing_line(t - 40 * US, a, ctx)
        if self.rng.random() < 0.5:
            err = f'failed to do HTTP GET "{url}": Get "{url}": dial tcp {a.ip}:{ADMIN_PORT}: connect: connection refused'
            hdr = self.http(t, self.m(0.2, 1), ctx, "get_gpu_uuids", "GET", url, 0, err)
            self.log(
                hdr + self.rng.randrange(30, 120) * US,
                f"{_GO}:111",
                "Processing node local item suffered transient error, will retry",
                [("worker", w), ("node", a.node.name)],
                [("item", {"UID": a.uid, "RequesterName": a.name}), ("err", err), ("retryAfter", "1s")],
            )
            t = hdr + S + self.m(1, 5)
        hdr = self.http(t, self.m(0.8, 3), ctx, "get_gpu_uuids", "GET", url, 200)
        return hdr + self.rng.randrange(50, 400) * US

    def requester_ready(self, a: _Act, relayed: int, ready: bool = True) -> int:
        """The kubelet's readiness probe (period 5 s) notices the relay; returns the transition."""
        assert a.pod is not None
        phase = (
            a.started
            + 2 * S
            + (int.from_bytes(hashlib.sha256(a.uid.encode()).digest()[:4], "big") % 1000) * MS
        )
        k = max(0, -(-(relayed - phase) // (5 * S)))
        t = phase + k * 5 * S + self.m(3, 200)
        self.set_ready(a.pod, t, ready)
        self.ready_transitions.setdefault(a.uid, []).append(t)
        self.enqueue(t + self.m(5, 40), a, "requester", "kubelet")
        if self.noise:
            self.log(
                t + self.m(41, 45),
                f"{_GO}:2040",
                "No need to update status, accelerators, boundName, instanceID, or finalizers",
                self.rctx(a, self.rng.randrange(2), True, True),
                [],
            )
        return t

    # ---- paths

    def cold(self, a: _Act, t: int) -> None:
        w = a.worker if a.worker >= 0 else self.rng.randrange(2)
        ctx = self.rctx(a, w)
        self.log(
            t,
            f"{_GO}:947",
            "No suitable launcher Pod found with sleeping instance, capacity, or reclaimable capacity",
            ctx,
            [],
        )
        k8s = t + self.m(0.2, 1.5)
        created = k8s + self.m(2, 6)
        lch = self.new_launcher(a.node, created, a)
        a.launcher = lch
        hdr = self.k8s_call(
            k8s,
            f"{_GO}:760",
            "Created launcher-based server-providing pod",
            ctx,
            [
                ("name", lch.name),
                ("gpus", a.gpu),
                ("annotations", gomap(self.bound_annotations(a))),
                ("labels", lch.pod.base["metadata"]["labels"]),
                ("resourceVersion", self.rv(created)),
            ],
            lo=8,
            hi=18,
        )
        self.inst(a, "D.bound", floor_to(hdr, US), hdr)
        self.log(
            hdr + self.rng.randrange(40, 120) * US,
            f"{_GO}:773",
            "Setting duality metric",
            ctx,
            [("value", 1), ("gpuUUIDs", [a.gpu])],
        )
        self.set_status(hdr + self.m(0.2, 0.6), a, ctx, finalizers=False)
        self.boot_launcher(lch, created)
        self.inst(a, "L.created", floor_to(created, S), created)
        self.inst(a, "L.scheduled", floor_to(self._sched, S), self._sched)
        self.inst(a, "L.ready", floor_to(lch.ready, S), lch.ready)
        ctx2 = self.rctx(a, self.rng.randrange(2), True, True)
        for tt, ip in ((self._sched + self.m(3, 20), ""), (lch.started + self.m(10, 60), lch.ip)):
            self.enqueue_launcher(tt, lch, "kubelet" if ip else "kube-scheduler")
            self.log(
                tt + self.m(0.3, 2),
                f"{_GO}:441",
                "Bound launcher pod not yet reachable, waiting",
                ctx2,
                [("podIP", ip), ("ready", False)],
            )
        lch.windows.append((t - S, lch.ready + 3 * S))
        see = lch.ready + self.m(5, 120)
        self.enqueue(see, a, "bound_provider", "kubelet")
        self.create_and_serve(a, see + self.m(0.5, 3), self.u(16, 34))

    def warm(self, a: _Act, t: int, lch: _Launcher, deletion: bool) -> None:
        w = a.worker if a.worker >= 0 else self.rng.randrange(2)
        ctx = self.rctx(a, w)
        a.launcher = lch
        lch.windows.append((t - 2 * S, t + S))
        hdr = self.list_instances(lch, t, ctx)
        if deletion:
            victim = next(iter(lch.instances))
            url = f"http://{lch.ip}:{LAUNCHER_PORT}/v2/vllm/instances/{victim}"
            s = hdr + self.m(0.3, 1)
            lat = self.u(0.4, 2.5)
            self.access(
                lch, s + lat - self.m(0.2, 0.6), DPC_IP, "DELETE", f"/v2/vllm/instances/{victim}", 200
            )
            hdr = self.http(s, lat, ctx, "delete_instance", "DELETE", url, 200)
            del lch.instances[victim]
            self.log(
                hdr + self.m(0.05, 0.2),
                f"{_GO}:909",
                "Ensured vLLM instance absent to reclaim launcher capacity",
                ctx,
                [("launcherPod", lch.name), ("instanceID", victim), ("maxOthers", MAX_INSTANCES - 1)],
            )
            a.deleted = 1
            hdr += self.m(0.3, 0.5)
        else:
            self.log(
                hdr + self.m(0.05, 0.2),
                f"{_GO}:868",
                "Found launcher with capacity for new instance",
                ctx,
                [("name", lch.name), ("totalInstances", len(lch.instances))],
            )
            self.log(
                hdr + self.m(0.21, 0.3),
                f"{_GO}:871",
                "Selected launcher with capacity (slower path)",
                ctx,
                [("name", lch.name)],
            )
            hdr += self.m(0.31, 0.5)
        self.bind(a, hdr, ctx, sleeping=False)
        self.create_and_serve(a, a.instants["D.bound"][1] + self.m(20, 60), self.u(12, 28), enqueue=True)

    def hot(self, a: _Act, t: int, lch: _Launcher, label: bool = True) -> None:
        w = a.worker if a.worker >= 0 else self.rng.randrange(2)
        ctx = self.rctx(a, w)
        a.launcher = lch
        lch.windows.append((t - 2 * S, t + S))
        hdr = self.list_instances(lch, t, ctx)
        self.log(
            hdr + self.m(0.05, 0.2),
            f"{_GO}:861",
            "Found launcher with sleeping instance (fastest path)",
            ctx,
            [
                ("name", lch.name),
                ("instanceID", a.instance_id),
                ("totalInstances", len(lch.instances)),
                ("runningInstances", len(lch.instances)),
            ],
        )
        self.bind(a, hdr + self.m(0.3, 0.6), ctx, sleeping=True)
        t = a.instants["D.bound"][1] + self.m(20, 60)
        self.enqueue(t, a, "bound_provider", "dual-pods-controller")
        ctx2 = self.rctx(a, self.rng.randrange(2), True, True)
        hdr = self.list_instances(lch, t + self.m(0.5, 2), ctx2)
        self.log(
            hdr + self.m(0.05, 0.1),
            f"{_GO}:2172",
            "Synced launcher instances",
            ctx2,
            [
                ("launcherPod", lch.name),
                ("totalInstances", len(lch.instances)),
                ("runningInstances", len(lch.instances)),
                ("instanceCount", len(lch.instances)),
            ],
        )
        assert a.isc is not None
        base = f"http://{lch.ip}:{a.isc['port']}"
        hdr = self.http(
            hdr + self.m(0.2, 1), self.m(0.8, 3), ctx2, "query_sleeping", "GET", base + "/is_sleeping", 200
        )
        self.log(
            hdr + self.m(0.02, 0.1),
            f"{_GO}:514",
            "Determined whether provider is sleeping",
            ctx2,
            [("isSleeping", True)],
        )
        ws = hdr + self.m(0.2, 1.5)
        wl = self.u(1.2, 4.5)
        if self.rng.random() < 0.5:
            wl = floor_to(wl, US)
        whdr = self.http(ws, wl, ctx2, "wake", "POST", base + "/wake_up", 200)
        self.inst(a, "D.wake.start", ws, whdr)
        self.inst(a, "D.wake.end", ws + wl, whdr)
        self.log(
            whdr + self.m(0.05, 0.2),
            f"{_GO}:1502",
            "Woke inference server",
            ctx2,
            [("endpoint", f"{lch.ip}:{a.isc['port']}"), ("description", "discovered-bound")],
        )
        self.serve_tail(a, whdr + self.m(0.3, 1), ctx2, label)

    def list_instances(self, lch: _Launcher, t: int, ctx: list[tuple[str, Any]]) -> int:
        lat = self.m(0.8, 4)
        self.access(lch, t + lat - self.m(0.1, 0.4), DPC_IP, "GET", "/v2/vllm/instances", 200)
        return self.http(
            t, lat, ctx, "list_instances", "GET", f"http://{lch.ip}:{LAUNCHER_PORT}/v2/vllm/instances", 200
        )

    def bind(self, a: _Act, t: int, ctx: list[tuple[str, Any]], sleeping: bool) -> None:
        assert a.launcher is not None
        lch = a.launcher
        self.log(
            t,
            f"{_GO}:1431",
            "Selected launcher Pod, binding first",
            ctx,
            [("name", lch.name), ("hasSleepingInstance", sleeping)],
        )
        k8s = t + self.m(0.1, 0.5)
        hdr = self.k8s_call(
            k8s,
            f"{_GO}:1460",
            "Bound server-providing Pod",
            ctx,
            [
                ("name", lch.name),
                ("node", a.node.name),
                ("gpus", a.gpu),
                ("newResourceVersion", self.rv(k8s + 3 * MS)),
                ("instanceID", a.instance_id),
            ],
            lo=6,
            hi=16,
        )
        self.inst(a, "D.bound", floor_to(hdr, US), hdr)
        assert a.isc is not None
        ann: dict[str, str | None] = dict(self.bound_annotations(a))
        ann[PREFIX + "isc-routing-metadata"] = go_json({"annotations": {}, "labels": gomap(a.isc["labels"])})
        self.meta_patch(
            lch.pod, hdr, labels={PREFIX + "dual": a.name}, annotations=ann, finalizers=[PREFIX + "provider"]
        )
        self.set_status(hdr + self.m(0.2, 0.6), a, ctx, finalizers=False)

    def create_and_serve(self, a: _Act, t: int, startup: int, enqueue: bool = False) -> None:
        assert a.launcher is not None and a.isc is not None and a.instance_id is not None
        lch = a.launcher
        if enqueue:
            self.enqueue(t, a, "bound_provider", "dual-pods-controller")
            t += self.m(0.5, 2)
        ctx = self.rctx(a, self.rng.randrange(2), True, True)
        hdr = self.list_instances(lch, t, ctx)
        n = len(lch.instances)
        self.log(
            hdr + self.m(0.05, 0.1),
            f"{_GO}:2172",
            "Synced launcher instances",
            ctx,
            [("launcherPod", lch.name), ("totalInstances", n), ("runningInstances", n), ("instanceCount", n)],
        )
        cs = hdr + self.m(0.3, 2) + self.rng.randrange(0, 1000)
        ra, fk, rb = self.m(0.6, 2.5), self.m(4, 14), self.m(0.4, 1.5)
        lat = ra + fk + rb
        recv, resp = cs + ra, cs + ra + fk
        self.launcher_create_lines(lch, recv, a.instance_id, a.gpu, a.gpu_index, resp)
        url = f"http://{lch.ip}:{LAUNCHER_PORT}/v2/vllm/instances/{a.instance_id}"
        chdr = self.http(cs, lat, ctx, "create_instance", "PUT", url, 201)
        self.inst(a, "D.create.start", cs, chdr)
        self.inst(a, "D.create.end", cs + lat, chdr)
        self.inst(a, "X.receipt", floor_to(recv + lch.skew, MS), recv)
        self.inst(a, "X.response", floor_to(resp + lch.skew, MS), resp)
        self.log(
            chdr + self.m(0.03, 0.1),
            f"{_GO}:505",
            "Created vLLM instance",
            ctx,
            [("instance_id", a.instance_id), ("status", "running")],
        )
        lch.instances[a.instance_id] = a.isc
        lch.windows.append((cs - 2 * S, cs + 4 * S))
        # the notifier sidecar notices the new instance and patches the launcher Pod
        sig_t = resp + self.u(0.3, 2.0)
        self.meta_patch(lch.pod, sig_t, annotations={PREFIX + "vllm-instance-signature": self.signature(lch)})
        self.enqueue(sig_t + self.m(3, 15), a, "bound_provider", "OpenAPI-Generator")
        # an incomplete actuation's vLLM never answers within the capture
        up = cs + lat + (startup if not a.incomplete else 10**6 * S)
        a.true_extra["V.ready"] = up
        polls = [chdr + self.m(0.2, 1.5)]
        a.vllm_up = up
        extra = sig_t + self.m(16, 30)
        base = f"http://{lch.ip}:{a.isc['port']}"
        url = base + "/is_sleeping"
        err = f'failed to do HTTP GET "{url}": Get "{url}": dial tcp {lch.ip}:{a.isc["port"]}: connect: connection refused'
        served = None
        extra_at = -1
        while served is None:
            p = polls.pop(0)
            if p >= up:
                lat2 = self.m(1, 4)
                h = self.http(p, lat2, ctx, "query_sleeping", "GET", url, 200)
                self.inst(a, "D.serving", p + lat2, h)
                served = h
                break
            h = self.http(p, self.m(0.3, 1.5), ctx, "query_sleeping", "GET", url, 0, err)
            self.log(
                h + self.rng.randrange(30, 120) * US,
                f"{_GO}:111",
                "Processing node local item suffered transient error, will retry",
                [ctx[0], ctx[1]],
                [("item", {"UID": a.uid, "RequesterName": a.name}), ("err", err), ("retryAfter", "5s")],
            )
            if p == extra_at:
                continue  # the event-triggered poll does not start a second retry chain
            nxt = h + 5 * S + self.m(0.5, 10)
            if extra is not None and h < extra < nxt:
                polls.append(extra)
                extra_at, extra = extra, None
            polls.append(nxt)
            polls.sort()
            if a.incomplete and p > max(self.horizon, cs + lat) + 60 * S:
                return  # the capture ends long before this vLLM would answer
        self.log(
            served + self.m(0.02, 0.1),
            f"{_GO}:514",
            "Determined whether provider is sleeping",
            ctx,
            [("isSleeping", False)],
        )
        self.serve_tail(a, served + self.m(0.3, 1), ctx, a.label)

    def serve_tail(self, a: _Act, t: int, ctx: list[tuple[str, Any]], label: bool) -> None:
        """Routing labels, finalizer, readiness relay: the end of every FMA path."""
        assert a.launcher is not None and a.isc is not None and a.pod is not None
        lch = a.launcher
        hdr = self.k8s_call(
            t,
            f"{_GO}:1204",
            "Reconciled bound launcher Pod labels and annotations",
            ctx,
            [
                ("name", lch.name),
                ("sleeping", "false"),
                ("labelsApplied", True),
                ("instanceID", a.instance_id),
                ("newResourceVersion", self.rv(t + 3 * MS)),
            ],
        )
        self.meta_patch(lch.pod, hdr, labels={PREFIX + "sleeping": "false", **a.isc["labels"]})
        hdr = self.set_status(hdr + self.m(0.1, 0.4), a, ctx, finalizers=True)
        self.log(
            hdr + self.m(0.05, 0.2), f"{_GO}:566", "Server-providing pod is ready", ctx, [("name", lch.name)]
        )
        rs = hdr + self.m(0.25, 0.6)
        url = f"http://{a.ip}:{ADMIN_PORT}/v1/become-ready"
        rlat = self.m(1, 4)
        rhdr = self.http(rs, rlat, ctx, "relay_ready", "POST", url, 200)
        a.true_extra["D.relay.start"], a.true_extra["D.relay.end"] = rs, rs + rlat
        t_obs = rhdr + self.rng.randrange(20, 90) * US
        if label:
            secs = t_obs - floor_to(a.started, S)
            self.log(
                t_obs,
                f"{_GO}:590",
                "Observed actuation latency",
                ctx,
                [("path", _DPC_LABEL[a.path]), ("actuationSecs", Raw(secs_text(secs)))],
            )
            a.dpc_secs = float(secs_text(secs))
        rel = t_obs + self.rng.randrange(20, 80) * US
        self.log(
            rel,
            f"{_GO}:595",
            "Successfully relayed the readiness",
            ctx,
            [("readiness", "ready"), ("url", url), ("requesterCreateTime", k8s_time(a.created))],
        )
        self.inst(a, "D.relayed", floor_to(rel, US), rel)
        a.relayed_true = rel
        lch.windows.append((rel - 3 * S, rel + 6 * S))
        rt = self.requester_ready(a, rel)
        a.ready_true = rt
        self.inst(a, "R.ready", floor_to(rt, S), rt)

    def unbind(self, a: _Act, t: int) -> int:
        """Put the instance to sleep and unbind, leaving the requester Pod in place."""
        assert a.launcher is not None and a.isc is not None and a.pod is not None
        lch = a.launcher
        ctx = self.rctx(a, self.rng.randrange(2), True, True)
        hdr = self.k8s_call(
            t,
            f"{_GO}:1251",
            "Removed ISC routing labels from launcher Pod before sleeping",
            ctx,
            [("removed", True), ("newResourceVersion", self.rv(t + 3 * MS))],
        )
        self.meta_patch(lch.pod, hdr, labels=dict.fromkeys(a.isc["labels"]))
        base = f"http://{lch.ip}:{a.isc['port']}"
        hdr = self.http(hdr + self.m(0.3, 1), self.u(0.5, 2.5), ctx, "sleep", "POST", base + "/sleep", 200)
        self.log(
            hdr + self.m(0.05, 0.2),
            f"{_GO}:1290",
            "Put inference server to sleep",
            ctx,
            [("endpoint", f"{lch.ip}:{a.isc['port']}")],
        )
        k8s = hdr + self.m(0.3, 1)
        hdr = self.k8s_call(
            k8s,
            f"{_GO}:1322",
            "Unbound server-providing Pod",
            ctx,
            [
                ("name", lch.name),
                ("node", a.node.name),
                ("gpus", a.gpu),
                ("newResourceVersion", self.rv(k8s + 3 * MS)),
            ],
        )
        self.last_unbound = hdr  # a re-actuation starts here (span model: D.unbound)
        self.meta_patch(
            lch.pod,
            hdr,
            labels={PREFIX + "dual": None, PREFIX + "sleeping": "true"},
            annotations={
                PREFIX + "requester": None,
                PREFIX + "instance-id": None,
                PREFIX + "server-port": None,
                PREFIX + "vllm-config": None,
                PREFIX + "isc-routing-metadata": None,
            },
            finalizers=[],
        )
        self.meta_patch(a.pod, hdr + self.m(5, 12), labels={PREFIX + "dual": None, PREFIX + "instance": None})
        url = f"http://{a.ip}:{ADMIN_PORT}/v1/become-unready"
        rhdr = self.http(hdr + self.m(13, 20), self.m(1, 3), ctx, "relay_unready", "POST", url, 200)
        rel = rhdr + self.rng.randrange(20, 80) * US
        self.log(
            rel,
            f"{_GO}:595",
            "Successfully relayed the readiness",
            ctx,
            [("readiness", "unready"), ("url", url), ("requesterCreateTime", k8s_time(a.created))],
        )
        lch.windows.append((t - S, rel + 3 * S))
        return self.requester_ready(a, rel, ready=False)

    def baseline(self, a: _Act, created: int) -> None:
        spec = {
            "containers": [
                {
                    "name": "vllm",
                    "image": VLLM_IMAGE,
                    "args": ["--model", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "--port", "8000"],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": 8000},
                        "initialDelaySeconds": 10,
                        "periodSeconds": 10,
                    },
                }
            ]
        }
        ps = _PodSim(
            self._pod_base(
                a.name,
                a.uid,
                created,
                {"app": "vllm", "pod-template-hash": "7c9d5b8f6"},
                {},
                spec,
                generate=a.name[:-5],
            ),
            created,
        )
        self.pods.append(ps)
        a.pod, a.created = ps, created
        sched = created + self.u(0.05, 1.5)
        init = sched + self.u(0.3, 1.0)
        started = init + self.u(1.0, 4.0)
        a.started = started
        self.lifecycle(ps, a.node, a.ip, sched, init, started, [("vllm", VLLM_IMAGE)])
        ready = started + self.u(45, 100)
        self.set_ready(ps, ready, True)
        self.ready_transitions.setdefault(a.uid, []).append(ready)
        a.ready_true = ready
        for k, t in (
            ("R.created", created),
            ("R.scheduled", sched),
            ("R.started", started),
            ("R.ready", ready),
        ):
            self.inst(a, k, floor_to(t, S), t)

    # ---- noise

    def noise_lines(self, t: int) -> None:
        """One piece of background chatter at ``t`` (unrelated to any actuation's instants)."""
        r = self.rng.random()
        idle = [
            lc
            for lc in self.launchers
            if not lc.pod.base["metadata"]["annotations"].get(PREFIX + "requester")
        ]
        if r < 0.3 and idle:
            lch = self.rng.choice(idle)
            w = self.rng.randrange(2)
            ctx = [("worker", w), ("node", lch.node.name), ("launcherPod", lch.name), ("node", lch.node.name)]
            self.enqueue_launcher(t, lch, "OpenAPI-Generator")
            lat = self.m(0.8, 3)
            hdr = self.http(
                t + self.m(0.5, 2),
                lat,
                ctx,
                "list_instances",
                "GET",
                f"http://{lch.ip}:{LAUNCHER_PORT}/v2/vllm/instances",
                200,
            )
            n = self.rng.randrange(0, MAX_INSTANCES + 1)
            self.log(
                hdr + self.m(0.05, 0.1),
                f"{_GO}:2172",
                "Synced launcher instances",
                ctx,
                [
                    ("launcherPod", lch.name),
                    ("totalInstances", n),
                    ("runningInstances", n),
                    ("instanceCount", n),
                ],
            )
        elif r < 0.45 and self.nodes:
            node = self.rng.choice(self.nodes)
            self.log(
                t,
                f"{_CTL}:842",
                "Enqueuing unbound infSvrItems on node",
                [("logger", "dual-pods-controller")],
                [
                    ("node", node.name),
                    ("whyEnqueue", f"launcher pod launcher-{LAUNCHER_CONFIG}-{self.sfx()} changed"),
                    ("itemCount", self.rng.randrange(0, 3)),
                ],
            )
        elif r < 0.6 and self.launchers:
            lch = self.rng.choice(self.launchers)
            w = self.rng.randrange(2)
            url = f"http://{lch.ip}:{LAUNCHER_PORT}/v2/vllm/instances"
            err = (
                f'HTTP GET "{url}" returned unexpected status 503; bodyReadErr=<nil>; responseBody=<html>\n'
                "<head><title>503 Service Temporarily Unavailable</title></head>\n"
                "<body><center><h1>503 Service Temporarily Unavailable</h1></center></body>\n</html>"
            )
            self.log(
                t,
                f"{_GO}:111",
                "Processing node local item suffered transient error, will retry",
                [("worker", w), ("node", lch.node.name)],
                [("err", err), ("item", {"LauncherPodName": lch.name}), ("retryAfter", "5s")],
            )
        elif r < 0.8 and self.nodes:
            node = self.rng.choice(self.nodes)
            w = self.rng.randrange(2)
            self.log(
                t,
                f"{_GO}:98",
                "Processing items for node",
                [("worker", w), ("node", node.name)],
                [("readyCount", self.rng.randrange(1, 4))],
            )
            self.log(
                t + self.m(0.2, 3),
                f"{_GO}:131",
                "Done processing items for node",
                [("worker", w), ("node", node.name)],
                [("numToRetry", 0)],
            )
        else:
            w = self.rng.randrange(2)
            node = self.rng.choice(self.nodes) if self.nodes else self.node(0)
            self.log(
                t,
                f"{_Q}:71",
                "Popped workqueue item",
                [("worker", w)],
                [("item", node.name), ("itemType", "string")],
            )
            self.log(
                t + self.m(0.3, 4),
                f"{_Q}:88",
                "Processed workqueue item successfully.",
                [("worker", w)],
                [("item", node.name), ("itemType", "string")],
            )

    def launcher_chatter(self, end: int) -> None:
        """Kubelet probes (every 5 s) and notifier polls (every 2 s) inside activity windows."""
        for lch in self.launchers:
            wins = sorted((max(a, lch.ready), min(b, end)) for a, b in lch.windows)
            merged: list[list[int]] = []
            for a, b in wins:
                if a >= b:
                    continue
                if merged and a <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], b)
                else:
                    merged.append([a, b])
            gw = f"10.244.{lch.node.index}.1"
            for a, b in merged:
                k = max(0, -(-(a - lch.probe_phase) // (5 * S)))
                t = lch.probe_phase + k * 5 * S
                while t <= b:
                    self.access(lch, t + self.m(1, 4), gw, "GET", "/v2/vllm/instances", 200)
                    t += 5 * S
                if self.noise:
                    t = a + self.m(0, 2000)
                    while t <= b:
                        self.access(lch, t, "127.0.0.1", "GET", "/v2/vllm/instances", 200)
                        t += 2 * S + self.m(5, 60)

    # ---- assembly

    def truncate(self, end: int) -> None:
        self.end = end
        self.dpc = [x for x in self.dpc if x[0] <= end]
        for k in list(self.llog):
            self.llog[k] = [x for x in self.llog[k] if x[0] <= end]

    def sorted_dpc(self) -> list[tuple[int, list[str]]]:
        return [(t, lines) for t, _, lines in sorted(self.dpc, key=lambda x: (x[0], x[1]))]

    def sorted_llog(self) -> dict[str, list[tuple[int, str]]]:
        return {
            lch.name: [(t, s) for t, _, s in sorted(self.llog.get(lch.name, []), key=lambda x: (x[0], x[1]))]
            for lch in self.launchers
        }

    def final_pods(self) -> list[dict[str, Any]]:
        out = [p.render(self.end, self.rv) for p in self.pods]
        return [p for p in out if p is not None]

    def watch_events(self) -> list[tuple[str, dict[str, Any]]]:
        """``kubectl get pods -w --output-watch-events -o json``: initial ADDED, then changes."""
        evs: list[tuple[int, int, int, str]] = []
        for i, p in enumerate(self.pods):
            if p.created <= self.t0:
                evs.append((self.t0, -1, i, "ADDED"))
            else:
                evs.append((p.created, 0, i, "ADDED"))
            times = sorted({t for t, _, _ in p.facts if max(self.t0, p.created) < t <= self.end})
            evs.extend((t, 1, i, "MODIFIED") for t in times)
        evs.sort()
        out = []
        for t, _, i, typ in evs:
            pod = self.pods[i].render(t, self.rv)
            if pod is not None and t <= self.end:
                out.append((typ, pod))
        return out

    def truth(self) -> list[TruthActuation]:
        # Pod status keeps only the newest Ready transition (True or False)
        last_ready = {
            uid: max([t for t in ts if t <= self.end], default=0)
            for uid, ts in self.ready_transitions.items()
        }
        out = []
        for a in self.acts:
            inst = {k: v for k, (v, at) in a.instants.items() if at <= self.end}
            watch: dict[str, int] = {}
            if "R.ready" in inst and a.ready_true != last_ready.get(a.uid):
                watch["R.ready"] = inst.pop("R.ready")
            if a.path == BASELINE:
                complete = a.ready_true <= self.end
            else:
                complete = a.relayed_true > 0 and a.relayed_true <= self.end and 0 < a.ready_true <= self.end
            out.append(
                TruthActuation(
                    key=a.key,
                    requester_name=a.name,
                    requester_uid=a.uid,
                    namespace=self.ns,
                    path=a.path,
                    complete=complete,
                    launcher_name=a.launcher.name if a.launcher else None,
                    instance_id=a.instance_id,
                    isc_name=a.isc["name"] if a.isc else None,
                    node=a.node.name,
                    instances_deleted=a.deleted,
                    instants=dict(sorted(inst.items(), key=lambda kv: (kv[1], kv[0]))),
                    dpc_actuation_secs=a.dpc_secs if complete else None,
                    watch_instants=watch,
                )
            )
        return out


# --------------------------------------------------------------------------- scenario


@dataclass
class _Plan:
    path: str
    incomplete: bool = False
    deletion: bool = False
    reactuate: bool = False  # this requester is unbound and bound again (hot) later


def _plan(
    n: int, rng: random.Random, paths: Sequence[str] | None, incomplete: int, baseline: int, reactuated: int
) -> list[_Plan]:
    if paths is not None:
        bad = [p for p in paths if p not in PATHS]
        if bad:
            raise ValueError(f"unknown paths {bad}; expected {PATHS}")
        first = list(paths)
    else:
        k = n - incomplete - reactuated
        if k < 1 or k - baseline < max(1, reactuated):
            raise ValueError(
                f"n={n} too small for incomplete={incomplete}, baseline={baseline}, reactuated={reactuated}"
            )
        fma = k - baseline
        cycle = [COLD, WARM, HOT]
        first = [cycle[i] if i < 3 else rng.choice(cycle) for i in range(fma)]
        first = [BASELINE] * baseline + first
    plans = [_Plan(p) for p in first]
    warm_i = 0
    for p in plans:
        if p.path == WARM:
            p.deletion = warm_i % 2 == 0
            warm_i += 1
    fma_plans = [p for p in plans if p.path != BASELINE]
    candidates = [p for p in fma_plans if p.path == COLD] + [p for p in fma_plans if p.path != COLD]
    for p in candidates[:reactuated]:
        p.reactuate = True
    for i in range(incomplete):
        plans.append(_Plan(COLD if i % 2 == 0 else WARM, incomplete=True))
    return plans


def _simulate(
    seed: int,
    start_ns: int,
    namespace: str,
    noise: bool,
    plans: list[_Plan],
    gap: tuple[float, float] = (8.0, 20.0),
    pre_before: int | None = None,
    uid_prefix: str = "",
) -> _Sim:
    sim = _Sim(seed, start_ns, namespace, noise, pre_before)
    rng = sim.rng
    # prepare the world: a node per plan (wrapping), pre-existing launchers for warm/hot
    acts: list[tuple[_Plan, _Act, _Launcher | None]] = []
    nnodes = min(max(3, len(plans)), 12)
    for i, p in enumerate(plans):
        node = sim.node(i % nnodes)
        isc = None if p.path == BASELINE else ISCS[rng.randrange(len(ISCS)) if i else 0]
        gi = rng.randrange(8)
        gpu = node.gpus[gi]
        created_name_t = start_ns
        uid = sim.uid()
        dd = datetime.fromtimestamp(created_name_t // S + i * 7, timezone.utc)
        if p.path == BASELINE:
            name = f"vllm-baseline-7c9d5b8f6-{sim.sfx()}"
        else:
            name = f"my-request-{dd:%d-%H-%M-%S}-{sim.sfx()}"
        a = _Act(
            uid,
            p.path,
            name,
            uid,
            node,
            gpu,
            gi,
            isc,
            instance_id_for(isc, [gpu]) if isc else None,
            sim.pod_ip(node),
            incomplete=p.incomplete,
        )
        lch = None
        if p.path == WARM:
            others = [x for x in ISCS if x is not isc]
            if p.deletion:
                inst = [(others[0], node.gpus[(gi + 1) % 8]), (others[1], node.gpus[(gi + 2) % 8])]
            else:
                inst = [(others[0], node.gpus[(gi + 3) % 8])] if rng.random() < 0.5 else []
            lch = sim.pre_launcher(node, inst)
        elif p.path == HOT:
            assert isc is not None
            lch = sim.pre_launcher(node, [(isc, gpu)])
        acts.append((p, a, lch))
    t = start_ns + sim.u(2, 6)
    later: list[tuple[_Plan, _Act]] = []
    done_until = start_ns
    for p, a, lch in acts:
        if p.incomplete:
            continue
        sim.acts.append(a)
        if p.path == BASELINE:
            sim.baseline(a, t)
        else:
            ready = sim.new_requester(a, t)
            if p.path == COLD:
                sim.cold(a, ready)
            elif p.path == WARM:
                assert lch is not None
                sim.warm(a, ready, lch, p.deletion)
            else:
                assert lch is not None
                sim.hot(a, ready, lch)
            if p.reactuate:
                later.append((p, a))
        done_until = max(done_until, a.ready_true)
        t += sim.u(*gap)
    for _, a in later:
        assert a.launcher is not None
        unready = sim.unbind(a, max(t, a.ready_true + sim.u(3, 8)))
        a2 = _Act(
            f"{a.uid}/2",
            HOT,
            a.name,
            a.uid,
            a.node,
            a.gpu,
            a.gpu_index,
            a.isc,
            a.instance_id,
            a.ip,
            pod=a.pod,
            created=a.created,
            started=a.started,
            label=False,
        )
        # the Pod's own creation/schedule/start belong to the first actuation; the
        # re-actuation starts when the DPC unbinds it (docs/span-model.md, change 1)
        a2.instants["D.unbound"] = (floor_to(sim.last_unbound, US), sim.last_unbound)
        sim.acts.append(a2)
        sim.hot(a2, unready + sim.u(3, 10), a.launcher, label=False)
        done_until = max(done_until, a2.ready_true)
        t = max(t, unready) + sim.u(*gap)
    inc_min = 0
    sim.horizon = done_until
    for p, a, lch in acts:
        if not p.incomplete:
            continue
        sim.acts.append(a)
        # start late enough that the capture ends a few polls after its create call
        lead = sim.u(20, 28) if p.path == COLD else sim.u(2, 5)
        t = max(start_ns + sim.u(2, 6), min(t, done_until - lead))
        ready = sim.new_requester(a, t)
        if p.path == COLD:
            sim.cold(a, ready)
        else:
            assert lch is not None
            sim.warm(a, ready, lch, p.deletion)
        inc_min = max(inc_min, a.instants["D.create.end"][1] + sim.u(6, 12))
        t += sim.u(*gap)
    end = max(done_until + sim.u(1, 4), inc_min)
    if noise:
        tn = start_ns + sim.u(0.5, 3)
        while tn < end:
            sim.noise_lines(tn)
            tn += sim.u(2, 9)
    sim.launcher_chatter(end)
    sim.truncate(end)
    return sim


def synth_capture(
    n: int = 6,
    seed: int = 0,
    *,
    paths: Sequence[str] | None = None,
    noise: bool = True,
    incomplete: int = 1,
    baseline: int = 1,
    reactuated: int = 1,
    start: datetime = DEFAULT_START,
    namespace: str = DEFAULT_NAMESPACE,
) -> Capture:
    """Simulate ``n`` actuations (truth entries) and return the capture with its truth.

    Default mix for ``n=6``: one baseline (``cold_no_fma``), cold/warm(with deletion)/hot
    complete actuations, the cold requester unbound and re-actuated hot (key ``<uid>/2``), and
    one incomplete actuation at the end.  ``paths`` fixes the first actuations' paths
    (``cold_no_fma`` entries are baselines) and then ``n`` and ``baseline`` are ignored.
    """
    rng = random.Random(f"plan/{seed}")
    plans = _plan(n, rng, paths, incomplete, baseline, reactuated)
    start_ns = int(start.timestamp()) * S
    sim = _simulate(seed, start_ns, namespace, noise, plans)
    return _capture_from(sim)


def _capture_from(sim: _Sim) -> Capture:
    dpc_lines: list[str] = []
    dpc_times: list[int] = []
    for t, lines in sim.sorted_dpc():
        dpc_lines.extend(lines)
        dpc_times.extend([t] * len(lines))
    ll = sim.sorted_llog()
    return Capture(
        pods=sim.final_pods(),
        dpc_lines=dpc_lines,
        launcher_logs={k: [s for _, s in v] for k, v in ll.items()},
        truth=sim.truth(),
        dpc_times=dpc_times,
        launcher_times={k: [t for t, _ in v] for k, v in ll.items()},
        pod_events=sim.watch_events(),
        end_ns=sim.end,
    )


# --------------------------------------------------------------------------- true instants (issue 21)

#: instants printed exactly (``httpCallStartTime`` ``+ latencySecs``): the printed value is true
_EXACT_INSTANTS = frozenset({"D.create.start", "D.create.end", "D.serving", "D.wake.start", "D.wake.end"})
#: the launchers' clocks differ from the others' by up to this much (``_Launcher.skew``)
MAX_LAUNCHER_SKEW_NS = 1500 * US


def true_instants_of(sim: _Sim) -> dict[str, dict[str, int]]:
    """Each actuation's *true* instants (key -> name -> ns), before any printing truncated them.

    Why beside :meth:`_Sim.truth` (the values as printed): issue 21 bounds every instant by
    every source, so a correct bridge no longer reports the printed (truncated) value but an
    interval that must contain the true instant.  True times are on the simulation's single
    clock; the launcher's log is on its own clock, up to :data:`MAX_LAUNCHER_SKEW_NS` off.
    Only instants emitted before the capture ends are given.
    """
    out: dict[str, dict[str, int]] = {}
    for a in sim.acts:
        got: dict[str, int] = {}
        for name, (value, at) in a.instants.items():
            if at <= sim.end:
                got[name] = value if name in _EXACT_INSTANTS else at
        if "D.create.end" in got and "D.serving" in got and "V.ready" in a.true_extra:
            got["V.ready"] = a.true_extra["V.ready"]
        if "D.relayed" in got and "D.relay.start" in a.true_extra:
            got["D.relay.start"] = a.true_extra["D.relay.start"]
            got["D.relay.end"] = a.true_extra["D.relay.end"]
        out[a.key] = got
    return out


def synth_capture_with_true_instants(
    n: int = 6, seed: int = 0, **kwargs: Any
) -> tuple[Capture, dict[str, dict[str, int]]]:
    """:func:`synth_capture` (same arguments, same bytes) and :func:`true_instants_of` its actuations.

    ``reconcile_lines=True`` also prints the DPC's "Processing inference server" lines (a
    real V5 line the default capture leaves out); the other lines stay byte-identical."""
    rng = random.Random(f"plan/{seed}")
    plans = _plan(
        n,
        rng,
        kwargs.pop("paths", None),
        kwargs.pop("incomplete", 1),
        kwargs.pop("baseline", 1),
        kwargs.pop("reactuated", 1),
    )
    start = kwargs.pop("start", DEFAULT_START)
    namespace = kwargs.pop("namespace", DEFAULT_NAMESPACE)
    noise = kwargs.pop("noise", True)
    reconcile = kwargs.pop("reconcile_lines", False)
    if kwargs:
        raise TypeError(f"unexpected arguments {sorted(kwargs)}")
    saved, _Sim.reconcile_lines = _Sim.reconcile_lines, reconcile
    try:
        sim = _simulate(seed, int(start.timestamp()) * S, namespace, noise, plans)
    finally:
        _Sim.reconcile_lines = saved
    return _capture_from(sim), true_instants_of(sim)


# --------------------------------------------------------------------------- writing


def _prefix_lag(t: int, i: int) -> int:
    """Deterministic container-runtime receive lag for the ``--timestamps`` prefix (20 µs-2 ms)."""
    h = int.from_bytes(hashlib.blake2b(f"{t}/{i}".encode(), digest_size=4).digest(), "big")
    return 20_000 + h % 1_980_000


def _with_prefix(lines: Iterable[str], times: Iterable[int]) -> Iterator[str]:
    """``kubectl logs --timestamps``: the runtime's receive time, never decreasing."""
    last = 0
    for i, (line, t) in enumerate(zip(lines, times, strict=True)):
        last = max(last + 137, t + _prefix_lag(t, i))
        yield f"{rfc3339nano(last)} {line}"


def truth_to_json(truth: Sequence[TruthActuation]) -> str:
    return json.dumps([asdict(t) for t in truth], indent=2) + "\n"


def load_truth(path: str | Path) -> list[TruthActuation]:
    """Read a ``truth.json`` written by :func:`write_capture`."""
    return [TruthActuation(**d) for d in json.loads(Path(path).read_text())]


def _pods_list_json(pods: Iterable[dict[str, Any]]) -> Iterator[str]:
    yield '{\n    "apiVersion": "v1",\n    "items": ['
    first = True
    for p in pods:
        text = json.dumps(p, indent=4)
        text = "\n".join("        " + ln for ln in text.split("\n"))
        yield ("\n" if first else ",\n") + text
        first = False
    yield '\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n'


def write_capture(
    cap: Capture, out_dir: str | Path, *, timestamps: bool = False, pods_form: str = "list"
) -> None:
    """Lay a capture out as ``kubectl`` would have: pods.json, dpc.log, launcher-<pod>.log, truth.json.

    ``pods_form="list"`` writes a ``kubectl get pods -o json`` List; ``"watch"`` writes the
    ``kubectl get pods -w -o json --output-watch-events`` stream (one pretty-printed
    ``{"type", "object"}`` per event, concatenated); ``"watch-jsonl"`` writes the same events
    one compact JSON object per line (what a log shipper or ``jq -c`` keeps; smaller, so the
    embedded sample uses it).  ``timestamps`` prefixes every log line
    as ``kubectl logs --timestamps`` does.  truth.json matches the chosen Pod form.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "pods.json", "w", encoding="utf-8", newline="\n") as f:
        if pods_form == "list":
            f.writelines(_pods_list_json(cap.pods))
        elif pods_form in ("watch", "watch-jsonl"):
            compact = pods_form == "watch-jsonl"
            for typ, obj in cap.pod_events:
                ev = {"type": typ, "object": obj}
                f.write(
                    (json.dumps(ev, separators=(",", ":")) if compact else json.dumps(ev, indent=4)) + "\n"
                )
        else:
            raise ValueError(f"pods_form must be 'list', 'watch' or 'watch-jsonl', not {pods_form!r}")
    lines = list(cap.dpc_lines)
    with open(out / "dpc.log", "w", encoding="utf-8", newline="\n") as f:
        body = _with_prefix(lines, cap.dpc_times) if timestamps else lines
        f.writelines(ln + "\n" for ln in body)
    for name, llines in cap.launcher_logs.items():
        with open(out / f"launcher-{name}.log", "w", encoding="utf-8", newline="\n") as f:
            body = _with_prefix(llines, cap.launcher_times.get(name, [])) if timestamps else llines
            f.writelines(ln + "\n" for ln in body)
    truth = cap.truth
    if pods_form != "list":
        truth = [_merge_watch(t) for t in truth]
    (out / "truth.json").write_text(truth_to_json(truth), encoding="utf-8")


def _merge_watch(t: TruthActuation) -> TruthActuation:
    inst = dict(sorted(t.instants_for("watch").items(), key=lambda kv: (kv[1], kv[0])))
    return TruthActuation(**{**asdict(t), "instants": inst, "watch_instants": {}})


# --------------------------------------------------------------------------- phase inputs
# Kubernetes Events and vLLM instance logs for a simulated capture (issue 22), made after the
# simulation from its true instants, with their own random streams: the Pods, the DPC log
# and the launcher logs are the same bytes with or without them.

VLLM_VERSION = "0.26.0"  # the FMA benchmark image's vLLM (vllm/vllm-openai:v0.26.0)
_MODEL_OF_ISC = {isc["name"]: isc["options"].split()[1] for isc in ISCS}


def _vstamp(ns: int) -> str:
    """vLLM's ``%m-%d %H:%M:%S``: local time (UTC here), truncated to the second."""
    return datetime.fromtimestamp(ns // S, timezone.utc).strftime("%m-%d %H:%M:%S")


class _VllmLog:
    """One vLLM 0.26 server log as it is written: (true time, text) lines."""

    def __init__(
        self, rng: random.Random, *, api: str | None, engine: str, worker: str | None = None
    ) -> None:
        self.rng = rng
        self.api = api  # the API server's prefix on its own lines (None: unprefixed, FMA caveat)
        self.engine = engine
        self.lines: list[tuple[int, str]] = []

    def add(
        self, t: int, msg: str, *, who: str | None = None, src: str = "core.py:101", level: str = "INFO"
    ) -> None:
        pre = f"({who}) " if who else ""
        self.lines.append((t, f"{pre}{level} {_vstamp(t)} [{src}] {msg}"))

    def raw(self, t: int, text: str) -> None:
        self.lines.append((t, text))

    def startup(self, p: int, up: int, model: str, port: int, *, download: bool) -> None:
        """Process start ``p`` to uvicorn's "Application startup complete." at ``up``."""
        r = self.rng
        total = up - p
        api, eng = self.api, self.engine
        setup = p + int(total * r.uniform(0.2, 0.26))
        self.add(
            p + int((setup - p) * 0.7),
            "Automatically detected platform cuda.",
            who=api,
            src="__init__.py:216",
        )
        self.add(setup, "", who=api, src="api_utils.py:254")
        for row in (
            "       █     █     █▄   ▄█",
            f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VLLM_VERSION}",
            f"  █▄█▀ █     █     █     █  model   {model}",
            "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
            "",
        ):
            self.add(setup, row, who=api, src="api_utils.py:254")
        self.add(
            setup + 2 * MS,
            f"non-default args: {{'model': '{model}', 'port': {port}, 'enable_sleep_mode': True}}",
            who=api,
            src="api_utils.py:261",
        )
        self.add(
            setup + 3 * MS,
            "SECURITY WARNING: Development endpoints are enabled! This should NOT be used in production!",
            who=api,
            src="api_server.py:1102",
            level="WARNING",
        )
        cfg = setup + int(total * r.uniform(0.1, 0.14))
        self.add(cfg - 6 * MS, "Waiting for init message from front-end.", who=eng, src="core.py:93")
        self.add(
            cfg,
            f"Initializing a V1 LLM engine (v{VLLM_VERSION}) with config: model='{model}', "
            f"speculative_config=None, tokenizer='{model}', load_format=auto, tensor_parallel_size=1, "
            "enforce_eager=False, compilation_config={'mode': 3}",
            who=eng,
            src="core.py:101",
        )
        load_start = cfg + int(total * r.uniform(0.04, 0.06))
        self.add(load_start, f"Starting to load model {model}...", who=eng, src="gpu_model_runner.py:3354")
        load = int(total * r.uniform(0.14, 0.18))
        t = load_start + int(load * r.uniform(0.03, 0.08))  # the model's modules are built first
        if download:
            dl = int(load * r.uniform(0.35, 0.5))
            t += dl
            self.add(
                t,
                f"Time spent downloading weights for {model}: {dl / S:.6f} seconds",
                who=eng,
                src="weight_utils.py:312",
            )
        wl = load_start + load - t - int(load * r.uniform(0.02, 0.05))  # then post-processing
        t += wl
        self.add(t, f"Loading weights took {wl / S:.2f} seconds", who=eng, src="default_loader.py:314")
        load_end = load_start + load
        self.add(
            load_end,
            f"Model loading took {r.uniform(1, 5):.2f} GiB memory and {(load_end - load_start) / S:.6f} seconds",
            who=eng,
            src="gpu_model_runner.py:3431",
        )
        init_start = load_end + r.randrange(20, 120) * MS
        api_part = r.randrange(700, 1600) * MS
        init_end = up - api_part
        span = init_end - init_start
        c0 = init_start + r.randrange(50, 300) * MS  # the profiling forward compiles first
        dyn = int(span * r.uniform(0.2, 0.28))
        self.add(
            c0 + dyn - 3 * MS,
            "Using cache directory: /root/.cache/vllm/torch_compile_cache/5c2a/rank_0_0/backbone "
            "for vLLM's torch.compile",
            who=eng,
            src="backends.py:631",
        )
        self.add(c0 + dyn, f"Dynamo bytecode transform time: {dyn / S:.2f} s", who=eng, src="backends.py:647")
        cl = int(span * r.uniform(0.08, 0.12))
        c1 = c0 + dyn + cl
        self.add(
            c1,
            f"Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took {cl / S:.3f} s",
            who=eng,
            src="backends.py:251",
        )
        c2 = c1 + r.randrange(5, 30) * MS
        self.add(c2, f"torch.compile took {(c2 - c0) / S:.2f} s in total", who=eng, src="monitor.py:47")
        pr = int(span * r.uniform(0.06, 0.1))
        self.add(c2 + pr, f"Initial profiling/warmup run took {pr / S:.2f} s", who=eng, src="monitor.py:74")
        kv = c2 + pr + int(span * r.uniform(0.03, 0.06))
        self.add(
            kv, f"Available KV cache memory: {r.uniform(20, 60):.1f} GiB", who=eng, src="gpu_worker.py:359"
        )
        self.add(
            kv + 4 * MS,
            f"GPU KV cache size: {r.randrange(200, 900) * 1000 + r.randrange(1000):,} tokens",
            who=eng,
            src="kv_cache_utils.py:1229",
        )
        cg_end = init_end - r.randrange(40, 200) * MS
        cg = cg_end - (kv + r.randrange(30, 90) * MS)
        self.add(
            cg_end,
            f"Graph capturing finished in {cg / S:.0f} secs, took {r.uniform(0.3, 0.9):.2f} GiB",
            who=eng,
            src="gpu_model_runner.py:4244",
        )
        self.add(
            init_end,
            f"init engine (profile, create kv cache, warmup model) took {span / S:.2f} s "
            f"(compilation: {(c2 - c0) / S:.2f} s)",
            who=eng,
            src="core.py:250",
        )
        t = init_end + api_part // 3
        self.add(t, "Supported tasks: ['generate']", who=api, src="api_server.py:1544")
        self.add(
            t + 2 * MS, f"Starting vLLM server on http://0.0.0.0:{port}", who=api, src="api_server.py:1873"
        )
        self.add(t + 3 * MS, "Available routes are:", who=api, src="launcher.py:36")
        self.add(t + 4 * MS, "Route: /health, Methods: GET", who=api, src="launcher.py:44")
        upre = f"({self.api_uvicorn}) "
        self.raw(up - 3 * MS, f"{upre}INFO:     Started server process [{self.pid}]")
        self.raw(up - 2 * MS, f"{upre}INFO:     Waiting for application startup.")
        self.raw(up, f"{upre}INFO:     Application startup complete.")

    api_uvicorn = "APIServer pid=1"
    pid = 1

    def sleep(self, end: int, dur: int) -> None:
        self.add(
            end - 2 * MS,
            f"Sleep mode freed {self.rng.uniform(20, 60):.2f} GiB memory, 0.98 GiB memory is still in use.",
            who=self.engine,
            src="gpu_worker.py:117",
        )
        self.add(
            end, f"It took {dur / S:.6f} seconds to fall asleep.", who=self.engine, src="abstract.py:301"
        )
        self.raw(
            end + MS,
            f'({self.api_uvicorn}) INFO:     127.0.0.1:{self.rng.randrange(32768, 61000)} - "POST /sleep?level=1 HTTP/1.1" 200 OK',
        )

    def wake(self, start: int, end: int) -> None:
        """A ``/wake_up`` call from ``start`` to ``end`` (the DPC's view)."""
        r = self.rng
        got = start + r.randrange(1, 4) * MS
        self.add(got, "wake up the engine with tags: None", who=self.api, src="api_router.py:52")
        done = end - r.randrange(2, 10) * MS
        began = got + r.randrange(1, 5) * MS
        self.add(
            done,
            f"It took {(done - began) / S:.6f} seconds to wake up tags {{'kv_cache', 'weights'}}.",
            who=self.engine,
            src="abstract.py:318",
        )
        self.raw(
            done + MS,
            f'({self.api_uvicorn}) INFO:     127.0.0.1:{r.randrange(32768, 61000)} - "POST /wake_up HTTP/1.1" 200 OK',
        )

    def text(self, until: int) -> list[tuple[int, str]]:
        return [(t, s) for t, s in sorted(self.lines, key=lambda x: x[0]) if t <= until]


def _true_lifecycle(ps: _PodSim) -> dict[str, int]:
    """The true schedule, sandbox-ready and container-start times of a simulated Pod."""
    names = {"on_sched": "sched", "on_init": "init", "on_start": "started"}
    return {names[f.__name__]: t for t, _, f in ps.facts if f.__name__ in names}


def _event(
    ns: str,
    pod: dict[str, Any],
    reason: str,
    message: str,
    first: int,
    *,
    last: int | None = None,
    count: int = 1,
    container: str | None = None,
    component: str = "kubelet",
    etype: str = "Normal",
    event_time: int | None = None,
    seq: int = 0,
) -> dict[str, Any]:
    md = pod["metadata"]
    ref: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": md["name"],
        "namespace": ns,
        "uid": md["uid"],
    }
    if container:
        ref["fieldPath"] = f"spec.containers{{{container}}}"
    ev: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{md['name']}.{_hex16(md['uid'], seq)}",
            "namespace": ns,
            "uid": str(
                uuid.UUID(bytes=hashlib.sha256(f"event/{md['uid']}/{seq}".encode()).digest()[:16], version=4)
            ),
            "creationTimestamp": k8s_time(first),
        },
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": etype,
    }
    if event_time is not None:
        ev.update(
            {
                "eventTime": _micro_time(event_time),
                "firstTimestamp": None,
                "lastTimestamp": None,
                "source": {},
                "reportingComponent": component,
                "reportingInstance": f"{component}-control-plane-1",
                "action": "Binding",
            }
        )
    else:
        ev.update(
            {
                "firstTimestamp": k8s_time(first),
                "lastTimestamp": k8s_time(last if last is not None else first),
                "count": count,
                "source": {"component": component, "host": pod["spec"].get("nodeName", "")},
                "eventTime": None,
                "reportingComponent": component,
                "reportingInstance": pod["spec"].get("nodeName", ""),
            }
        )
    return ev


def _hex16(uid: str, seq: int) -> str:
    return hashlib.sha256(f"{uid}/{seq}".encode()).hexdigest()[:16]


def _micro_time(ns: int) -> str:
    """Kubernetes ``MicroTime``: always six fraction digits."""
    sec, rem = divmod(ns, S)
    return f"{_sec_parts(sec)[1]}.{rem // US:06d}Z"


def _go_secs(ns: int) -> str:
    """A Go ``time.Duration`` as the kubelet prints a pull time, to the millisecond."""
    ms = ns // MS
    return f"{ms // 1000}.{ms % 1000:03d}s" if ms >= 1000 else f"{ms}ms"


def synth_events(sim: _Sim, seed: int = 0) -> list[dict[str, Any]]:
    """``kubectl get events -o json`` items for every Pod that started in the simulation."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    for i, ps in enumerate(sim.pods):
        out.extend(_pod_events_of(sim, i, ps, seed))
    out.sort(key=lambda x: (x[0], x[1]))
    return [e for _, _, e in out]


def _pod_events_of(sim: _Sim, i: int, ps: _PodSim, seed: int) -> list[tuple[int, int, dict[str, Any]]]:
    """The scheduler's and kubelet's Events of one Pod, from its true lifecycle."""
    out: list[tuple[int, int, dict[str, Any]]] = []
    pod = ps.render(sim.end, sim.rv)
    life = _true_lifecycle(ps)
    if pod is None or "sched" not in life:
        return out
    rng = random.Random(f"events/{seed}/{pod['metadata']['uid']}")

    def add(t: int, reason: str, message: str, **kw: Any) -> None:
        if t <= sim.end:
            n = len(out) + 1
            out.append((t, i * 100 + n, _event(sim.ns, pod, reason, message, t, seq=n, **kw)))

    sched = life["sched"]
    node = pod["spec"].get("nodeName", "")
    add(
        sched,
        "Scheduled",
        f"Successfully assigned {sim.ns}/{pod['metadata']['name']} to {node}",
        component="default-scheduler",
        event_time=sched,
    )
    if "started" not in life:
        return out
    started = life["started"]
    init = min(life.get("init", sched), started - 300 * MS)
    containers = pod["spec"]["containers"]
    main = containers[0]
    image = main["image"]
    pull_start = init + rng.randrange(10, 60) * MS
    pull_end = started - rng.randrange(80, 200) * MS
    if pull_end - pull_start > 200 * MS and rng.random() < 0.7:
        add(pull_start, "Pulling", f'Pulling image "{image}"', container=main["name"])
        d = pull_end - pull_start
        w = d + rng.randrange(0, 30) * MS
        size = rng.randrange(200, 9000) * 1_000_000 + rng.randrange(1_000_000)
        add(
            pull_end,
            "Pulled",
            f'Successfully pulled image "{image}" in {_go_secs(d)} ({_go_secs(w)} including waiting). '
            f"Image size: {size} bytes.",
            container=main["name"],
        )
    else:
        add(
            pull_start,
            "Pulled",
            f'Container image "{image}" already present on machine',
            container=main["name"],
        )
    for c in containers:
        if c is not main:
            msg = f'Container image "{c["image"]}" already present on machine'
            add(started - 20 * MS, "Pulled", msg, container=c["name"])
        add(
            started - rng.randrange(10, 40) * MS,
            "Created",
            f"Created container: {c['name']}",
            container=c["name"],
        )
        add(started, "Started", f"Started container {c['name']}", container=c["name"])
    lch = next((x for x in sim.launchers if x.pod is ps), None)
    if lch is not None and lch.ready > lch.probe_phase:
        seen = [t for t in range(lch.probe_phase, lch.ready - S, 5 * S) if t <= sim.end]
        if seen:
            ip = lch.ip
            msg = (
                f'Readiness probe failed: Get "http://{ip}:{LAUNCHER_PORT}/v2/vllm/instances": '
                f"dial tcp {ip}:{LAUNCHER_PORT}: connect: connection refused"
            )
            add(
                seen[0],
                "Unhealthy",
                msg,
                last=seen[-1],
                count=len(seen),
                container=main["name"],
                etype="Warning",
            )
    return out


def events_json(items: Sequence[dict[str, Any]]) -> str:
    """``kubectl get events -o json``: a core/v1 List."""
    return (
        json.dumps(
            {"apiVersion": "v1", "items": list(items), "kind": "List", "metadata": {"resourceVersion": ""}},
            indent=4,
        )
        + "\n"
    )


def synth_vllm_logs(sim: _Sim, seed: int = 0) -> dict[str, list[tuple[int, str]]]:
    """Each live FMA instance's log (``<instance-id>.log``, the launcher's
    ``GET /v2/vllm/instances/{id}/log``) and the baseline Pod's (``pod-<name>.log``), as
    (true time, line) up to the capture's end."""
    logs: dict[str, list[tuple[int, str]]] = {}
    by_instance: dict[str, list[_Act]] = {}
    for a in sim.acts:
        if a.instance_id:
            by_instance.setdefault(a.instance_id, []).append(a)
    accepted = "Accepted request to create vLLM instance with id="
    for lch in sim.launchers:
        recvs = {
            text.split(accepted, 1)[1]: t for t, _, text in sim.llog.get(lch.name, []) if accepted in text
        }
        for iid, isc in lch.instances.items():
            if iid not in recvs:
                continue
            rng = random.Random(f"vllm/{seed}/{iid}")
            acts = by_instance.get(iid, [])
            creator = next((a for a in acts if a.path in (COLD, WARM) and a.launcher is lch), None)
            pid = rng.randrange(200, 900)
            log = _VllmLog(rng, api=None, engine=f"EngineCore pid={pid + 6}")
            log.api_uvicorn, log.pid = f"APIServer pid={pid}", pid
            p = recvs[iid] + rng.randrange(1, 3) * MS
            log.raw(p, f"{asctime(p + lch.skew)} - __main__ - INFO - VLLM process (PID: {pid}) started.")
            up = getattr(creator, "vllm_up", 0) if creator is not None else 0
            if not up or up > sim.end + 3600 * S:  # a pre-existing instance, or one still starting
                up = (
                    p + rng.randrange(24_000, 40_000) * MS
                    if not (creator and creator.incomplete)
                    else p + 60 * S
                )
            log.startup(p, up, _MODEL_OF_ISC[isc["name"]], isc["port"], download=rng.random() < 0.5)
            wakes = sorted(
                (a for a in acts if a.path == HOT and "D.wake.start" in a.instants),
                key=lambda a: a.instants["D.wake.start"][0],
            )
            for a in wakes:
                ws, we = a.instants["D.wake.start"][0], a.instants["D.wake.end"][0]
                unbound = a.instants.get("D.unbound")
                sleep_end = (
                    unbound[0] - rng.randrange(15, 40) * MS
                    if unbound
                    else min(up + rng.randrange(20, 90) * S, ws - 60 * S)
                )
                log.sleep(sleep_end, rng.randrange(400_000, 1_500_000) * US)
                log.wake(ws, we)
            if not wakes and creator is None:  # a pre-existing instance sleeps after it started
                log.sleep(up + rng.randrange(20, 90) * S, rng.randrange(400_000, 1_500_000) * US)
            logs[f"{iid}.log"] = log.text(sim.end)
    for a in sim.acts:
        if a.path != BASELINE or a.pod is None:
            continue
        rng = random.Random(f"vllm/{seed}/{a.uid}")
        log = _VllmLog(rng, api="APIServer pid=1", engine="EngineCore pid=212")
        p = a.started + rng.randrange(300, 900) * MS
        up = max(p + 20 * S, a.ready_true - rng.randrange(200, 9000) * MS)
        log.startup(p, up, "TinyLlama/TinyLlama-1.1B-Chat-v1.0", 8000, download=True)
        logs[f"pod-{a.name}.log"] = log.text(sim.end)
    return logs


def write_phase_files(sim: _Sim, out_dir: str | Path, seed: int = 0) -> None:
    """``events.json`` and ``vllm/*.log`` (baseline Pod logs with ``--timestamps``) beside a capture."""
    out = Path(out_dir)
    (out / "events.json").write_text(events_json(synth_events(sim, seed)), encoding="utf-8")
    vdir = out / "vllm"
    vdir.mkdir(exist_ok=True)
    for old in vdir.glob("*.log"):
        old.unlink()
    for name, lines in synth_vllm_logs(sim, seed).items():
        body = [s for _, s in lines]
        if name.startswith("pod-"):
            body = list(_with_prefix(body, [t for t, _ in lines]))
        with open(vdir / name, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(s + "\n" for s in body)


def sample_sim(n: int = 6, seed: int = 0) -> _Sim:
    """The simulation behind :func:`synth_capture` with the default mix (what the sample is)."""
    rng = random.Random(f"plan/{seed}")
    plans = _plan(n, rng, None, 1, 1, 1)
    return _simulate(seed, int(DEFAULT_START.timestamp()) * S, DEFAULT_NAMESPACE, True, plans)


# --------------------------------------------------------------------------- big captures


_AVG_NOISE_LINE = 330


def stream_big_capture(
    out_dir: str | Path,
    *,
    actuations: int,
    target_dpc_bytes: int | None,
    seed: int,
    timestamps: bool = False,
    start: datetime = DEFAULT_START,
    namespace: str = DEFAULT_NAMESPACE,
    batch: int = 40,
    noise_rate: float = 150.0,
) -> list[TruthActuation]:
    """Write a capture of ``actuations`` actuations, padded with noise to ~``target_dpc_bytes``.

    Why batches: actuations are simulated ``batch`` at a time over consecutive time windows,
    so memory holds one batch's lines, never the whole dpc.log.  Padding is background DPC
    chatter (enqueues, node reconciles, transient-error retries with multi-line ``err=<``
    blocks, list_instances on idle launchers) interleaved in time order, at about
    ``noise_rate`` lines per second of simulated time (the windows stretch to fit the target).
    The last batch carries the one incomplete actuation.  Returns the truth (also in truth.json).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    nb = max(1, -(-actuations // batch))
    start_ns = int(start.timestamp()) * S
    est_act = actuations * 9000
    pad_total = max(0, (target_dpc_bytes or 0) - est_act)
    pad_secs = pad_total / (_AVG_NOISE_LINE * noise_rate)
    per_gap = pad_secs / max(1, actuations)
    gap = (max(8.0, per_gap * 0.8), max(20.0, per_gap * 1.2))
    truth: list[TruthActuation] = []
    written = 0
    li = last_prefix = 0
    t_batch = start_ns
    remaining = actuations
    pods_tmp = out / ".pods.items.tmp"
    npods = 0
    with (
        open(out / "dpc.log", "w", encoding="utf-8", newline="\n") as dpc,
        open(pods_tmp, "w", encoding="utf-8") as ptmp,
    ):
        for bi in range(nb):
            k = min(batch, remaining)
            remaining -= k
            last = bi == nb - 1
            inc = 1 if last and k >= 2 else 0
            base = 1 if k - inc >= 4 else 0
            rea = 1 if k - inc - base >= 2 else 0
            plans = _plan(k, random.Random(f"plan/{seed}/{bi}"), None, inc, base, rea)
            sim = _simulate(
                seed * 1_000_003 + bi, t_batch, namespace, False, plans, gap=gap, pre_before=start_ns
            )
            for tr in sim.truth():
                truth.append(tr)
            # padding budget for this batch
            goal = (target_dpc_bytes or 0) * (bi + 1) // nb
            act_lines = sim.sorted_dpc()
            act_bytes = sum(len(ln) + 1 for _, lines in act_lines for ln in lines)
            budget = goal - written - act_bytes
            noise = _noise_stream(sim, t_batch, sim.end, budget, seed * 7919 + bi)
            merged = heapq.merge(((t, 0, i, lines) for i, (t, lines) in enumerate(act_lines)), noise)
            for t, _, _, lines in merged:
                for ln in lines:
                    if timestamps:
                        last_prefix = max(last_prefix + 137, t + _prefix_lag(t, li))
                        text = f"{rfc3339nano(last_prefix)} {ln}\n"
                    else:
                        text = ln + "\n"
                    li += 1
                    dpc.write(text)
                    written += len(text)
            for name, items in sim.sorted_llog().items():
                with open(out / f"launcher-{name}.log", "w", encoding="utf-8", newline="\n") as lf:
                    texts = [s for _, s in items]
                    body = _with_prefix(texts, [t for t, _ in items]) if timestamps else texts
                    lf.writelines(ln + "\n" for ln in body)
            for p in sim.final_pods():
                ptmp.write(json.dumps(p, separators=(",", ":")) + "\n")
                npods += 1
            t_batch = sim.end + sim.u(1, 3)
    with (
        open(out / "pods.json", "w", encoding="utf-8", newline="\n") as f,
        open(pods_tmp, encoding="utf-8") as ptmp,
    ):
        f.writelines(_pods_list_json(json.loads(line) for line in ptmp))
    pods_tmp.unlink()
    (out / "truth.json").write_text(truth_to_json(truth), encoding="utf-8")
    return truth


#: What the dense workload's dpc.log holds per actuation, about (``dense_capture``).
DENSE_BYTES_PER_ACTUATION = 14_500
DENSE_LINES_PER_ACTUATION = 33


def dense_capture(out_dir: str | Path, actuations: int, *, seed: int = 0) -> list[TruthActuation]:
    """A capture shaped like a busy real DPC log: actuations back to back, no padding.

    Why: the padded captures are mostly lines the bridge skips, which says little about
    the work per wanted line.  Here most lines are wanted (every line of an actuation's
    flow, with the DPC's own retries and enqueues around it: about two thirds since the
    bridge reads the DPC's API writes too), at roughly
    :data:`DENSE_BYTES_PER_ACTUATION` bytes and :data:`DENSE_LINES_PER_ACTUATION` lines per
    actuation: 8,000 actuations are ~115 MB and ~265k lines, with ~15k Pods in pods.json.
    """
    return stream_big_capture(out_dir, actuations=actuations, target_dpc_bytes=None, seed=seed)


def _noise_stream(
    sim: _Sim, t0: int, t1: int, budget: int, seed: int
) -> Iterator[tuple[int, int, int, list[str]]]:
    """Background lines in time order within ~[t0, t1] until ``budget`` bytes are produced.

    One piece of chatter can span a few ms (a call and its result), so pieces are held in a
    heap and released only once no later piece can start before them.
    """
    if budget <= 0 or t1 <= t0:
        return
    sim.rng = random.Random(seed)
    sim.noise = True
    t = t0
    produced = 0
    n = 0
    pending: list[tuple[int, int, int, list[str]]] = []
    while produced < budget:
        # re-aim every step so the chatter spreads evenly over what is left of the window
        avg = produced / n if n else _AVG_NOISE_LINE
        left = max(1, int((budget - produced) / avg))
        step = max(1, (t1 - t) // left)
        t = min(t + sim.rng.randrange(1, 2 * step + 1), t1)
        sim.dpc = []
        sim.noise_lines(t)
        for tt, _, lines in sim.dpc:
            produced += sum(len(ln) + 1 for ln in lines)
            n += 1
            heapq.heappush(pending, (tt, 1, n, lines))
        while pending and pending[0][0] <= t:
            yield heapq.heappop(pending)
    while pending:
        yield heapq.heappop(pending)


# --------------------------------------------------------------------------- sample / CLI

#: The embedded sample inside the shipped package (this file lives in tests/support/).
SAMPLE_DIR = Path(__file__).resolve().parents[2] / "fma_otel" / "data" / "sample"


def write_sample(out_dir: str | Path = SAMPLE_DIR) -> None:
    """(Re)generate the embedded sample capture; deterministic, so the bytes never drift."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("launcher-*.log"):
        old.unlink()
    sim = sample_sim(6, seed=0)
    write_capture(_capture_from(sim), out, pods_form="watch-jsonl")
    write_phase_files(sim, out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.support.synth", description="Write a synthetic FMA capture with ground truth."
    )
    ap.add_argument("--sample", action="store_true", help="regenerate fma_otel/data/sample")
    ap.add_argument("--out", help="output directory")
    ap.add_argument("-n", "--actuations", type=int, default=6)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-noise", action="store_true")
    ap.add_argument("--timestamps", action="store_true")
    ap.add_argument("--watch", action="store_true", help="write pods.json as a watch stream")
    args = ap.parse_args(argv)
    if args.sample:
        write_sample()
        return 0
    if not args.out:
        ap.error("--out or --sample is required")
    cap = synth_capture(args.actuations, seed=args.seed, noise=not args.no_noise)
    write_capture(cap, args.out, timestamps=args.timestamps, pods_form="watch" if args.watch else "list")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
