"""vLLM phase records -> phase spans (the plan), and the plan -> finished span records.

Two steps, because two places make these spans: the bridge (after the fact, from a captured
instance log) and the launcher wrapper (live, from the same file as it grows).  Both call
:func:`plan_vllm` on the records of :mod:`fma_otel.sources.vllm_log` and number the result
with :func:`number_spans`, so they derive the same names, boundaries and span ids
(``docs/span-model.md``, "vLLM and Kubernetes spans").

The plan is pure: records in, :class:`PhaseSpan` out, no actuation needed.  Boundaries follow
the log's own meaning (``docs/vllm-phases.md``): a message logged at the end of a phase with
a duration gives ``end = stamp`` (the lower end of the stamp's second) and
``start = end - duration``, so the span's length is the logged duration exactly and its end
lies in the stamp's second; a span between two instants runs from one stamp to the other.
A span whose start or end record is missing is left out: fewer spans, never invented ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from . import model as M
from .sources import vllm_log as V
from .sources.vllm_log import VllmPhase

__all__ = [
    "PhaseSpan",
    "SRC_VLLM",
    "number_spans",
    "plan_vllm",
    "vllm_parent",
]

NS = 1_000_000_000

#: ``fma.start.source`` / ``fma.end.source`` of a boundary read from the vLLM log.
SRC_VLLM = "vllm:log"
#: the rank rule of :mod:`fma_otel.sources.vllm_log`, carried as ``vllm.rank_rule``
RANK_RULE = "rank0"

# span names
BOOT = "vllm.process.boot"
ENGINE_CONFIG = "vllm.engine.config"
ENGINE_SPAWN = "vllm.engine.spawn"
MODEL_LOAD = "vllm.model.load"
WEIGHTS_DOWNLOAD = "vllm.weights.download"
MODEL_INIT = "vllm.model.init"
WEIGHTS_LOAD = "vllm.weights.load"
ENGINE_INIT = "vllm.engine.init"
TORCH_COMPILE = "vllm.torch_compile"
DYNAMO = "vllm.dynamo"
INDUCTOR = "vllm.inductor.compile"
CACHE_LOAD = "vllm.compile.cache_load"
PROFILING_RUN = "vllm.profiling_run"
MEMORY_PROFILE = "vllm.memory.profile"
CUDA_GRAPHS = "vllm.cuda_graphs.capture"
API_SERVER_START = "vllm.api_server.start"
WAKE = "vllm.wake"

#: span name -> ``fma.metric`` for the vLLM spans that are metrics
METRICS: Mapping[str, str] = {
    BOOT: "T_vllm_boot",
    MODEL_LOAD: "T_vllm_model_load",
    WEIGHTS_DOWNLOAD: "T_vllm_weights_download",
    WEIGHTS_LOAD: "T_vllm_weights_load",
    ENGINE_INIT: "T_vllm_engine_init",
    TORCH_COMPILE: "T_vllm_compile",
    MEMORY_PROFILE: "T_vllm_memory_profile",
    CUDA_GRAPHS: "T_vllm_cuda_graphs",
    API_SERVER_START: "T_vllm_api_server_start",
    WAKE: "T_vllm_wake",
}

# attribute names
A_LINE = "vllm.log.line"
A_FAMILY = "vllm.version.family"
A_PROCESS = "vllm.process"
A_LOGGED = "vllm.duration.logged_s"
A_RANK_RULE = "vllm.rank_rule"
A_VERSION = "vllm.version"
A_COMPILATION = "vllm.compilation_s"
A_INCLUDES_PROFILING = "vllm.compile.includes_profiling"
A_RANGE = "vllm.compile.range"
A_KV_MEMORY = "vllm.kv_cache.memory"
A_KV_TOKENS = "vllm.kv_cache.tokens"
A_PLATFORM = "vllm.platform"
A_WAKE_TAGS = "vllm.wake.tags"
A_WAKE_REQUEST = "vllm.wake.request_time_unix_nano"
A_MODEL_MEMORY = "vllm.model.memory"
A_CLOCK_ASSUMED = "fma.clock.assumed_utc"


class PhaseSpan(NamedTuple):
    """One planned span: what :func:`number_spans` turns into a :class:`~fma_otel.model.SpanRecord`.

    ``start_ns``/``end_ns`` are the lower ends of the boundaries' intervals;
    ``min_s``/``max_s`` the duration those intervals allow (``max_s`` is ``None`` when the
    end has no upper bound in the log: uvicorn's unstamped line; the caller bounds it).
    ``parent_name`` names a span of the same trace (the model's table or another
    :class:`PhaseSpan`).
    """

    name: str
    parent_name: str
    start_ns: int
    end_ns: int
    min_s: float
    max_s: float | None
    metric: str | None
    attributes: dict[str, Any]
    start_source: str
    end_source: str


def vllm_parent(path: str) -> str | None:
    """Where a vLLM startup phase hangs on ``path``: under the span that waits for vLLM on
    an FMA path, under the actuation itself on the baseline (so both compare phase by
    phase); ``None`` on a hot path (its instance started in another actuation)."""
    if path in (M.COLD_LAUNCHER, M.WARM):
        return "fma.vllm.ready"
    if path == M.COLD_NO_FMA:
        return "fma.actuation"
    return None


class _B(NamedTuple):
    """A boundary: the interval ``[lo, hi)`` holding the instant (``hi`` ``None``: open)."""

    lo: int
    hi: int | None


def _end(p: VllmPhase) -> _B:
    return _B(p.end_lo_ns, p.end_hi_ns)


def _start(p: VllmPhase) -> _B:
    return _B(p.start_lo_ns, p.start_hi_ns)


def _s(ns: int) -> float:
    return round(ns / NS, 9)


_COMPILATION = re.compile(r"compilation: (\d+(?:\.\d+)?) s")


class _Planner:
    def __init__(self, phases: Sequence[VllmPhase], top: str) -> None:
        self.top = top
        self.first: dict[str, VllmPhase] = {}
        self.all: dict[str, list[VllmPhase]] = {}
        for p in phases:
            self.first.setdefault(p.phase, p)
            self.all.setdefault(p.phase, []).append(p)
        self.out: list[PhaseSpan] = []

    def attrs(self, rec: VllmPhase, *, logged: bool) -> dict[str, Any]:
        a: dict[str, Any] = {A_LINE: rec.line_no, A_FAMILY: rec.family, A_RANK_RULE: RANK_RULE}
        if rec.process:
            a[A_PROCESS] = rec.process
        if logged and rec.duration_s is not None:
            a[A_LOGGED] = rec.duration_s
        return a

    def between(
        self,
        name: str,
        parent: str,
        start: _B,
        end_rec: VllmPhase,
        *,
        start_source: str = SRC_VLLM,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """A span from one instant to the end of ``end_rec`` (no duration of its own)."""
        end = _end(end_rec)
        lo = end.lo - (start.hi if start.hi is not None else start.lo)
        max_s = None if end.hi is None else _s(max(0, end.hi - start.lo))
        attrs = self.attrs(end_rec, logged=False)
        if extra:
            attrs.update(extra)
        self._add(name, parent, start.lo, end.lo, _s(max(0, lo)), max_s, attrs, start_source)

    def logged(self, name: str, parent: str, rec: VllmPhase, extra: Mapping[str, Any] | None = None) -> None:
        """A span whose end and duration the record states: ``[end - d, end]``."""
        assert rec.duration_s is not None
        d, unc = rec.duration_s, rec.duration_unc_s
        attrs = self.attrs(rec, logged=True)
        if extra:
            attrs.update(extra)
        self._add(
            name,
            parent,
            rec.start_lo_ns,
            rec.end_lo_ns,
            max(0.0, round(d - unc, 9)),
            round(d + unc, 9),
            attrs,
        )

    def _add(
        self,
        name: str,
        parent: str,
        start_ns: int,
        end_ns: int,
        min_s: float,
        max_s: float | None,
        attrs: dict[str, Any],
        start_source: str = SRC_VLLM,
    ) -> None:
        self.out.append(
            PhaseSpan(
                name, parent, start_ns, end_ns, min_s, max_s, METRICS.get(name), attrs, start_source, SRC_VLLM
            )
        )

    def timed(self, phase: str) -> VllmPhase | None:
        """The first record of ``phase`` if it carries a duration."""
        rec = self.first.get(phase)
        return rec if rec is not None and rec.duration_s is not None else None

    # ------------------------------------------------------------------ the table

    def startup(self, boot_start: tuple[int, int, str] | None) -> None:
        f, top = self.first, self.top
        setup = f.get(V.API_SERVER_SETUP)
        config = f.get(V.ENGINE_CONFIG)
        version = {A_VERSION: setup.detail} if setup is not None and setup.detail else {}
        platform = f.get(V.PLATFORM_DETECTED)
        if platform is not None and platform.detail:
            version[A_PLATFORM] = platform.detail
        # process start -> API server setup
        ps = f.get(V.PROCESS_START)
        if setup is not None:
            if ps is not None:
                self.between(BOOT, top, _end(ps), setup, extra=version)
            elif boot_start is not None:
                lo, hi, src = boot_start
                self.between(BOOT, top, _B(lo, hi), setup, start_source=src, extra=version)
        if setup is not None and config is not None and config.line_no > setup.line_no:
            self.between(
                ENGINE_CONFIG,
                top,
                _end(setup),
                config,
                extra={A_VERSION: config.detail} if config.detail else None,
            )
        # engine config -> model load start; the load itself
        load = f.get(V.MODEL_LOAD)
        load_start = f.get(V.MODEL_LOAD_START)
        load_begin: _B | None = None
        load_begin_rec: VllmPhase | None = None
        if load is not None and load.duration_s is not None:
            load_begin = _start(load)
        elif load is not None and load_start is not None and load_start.line_no < load.line_no:
            load_begin, load_begin_rec = _end(load_start), load_start
        if config is not None and load_begin is not None:
            end_rec = load_begin_rec if load_begin_rec is not None else load
            assert end_rec is not None
            if load_begin_rec is not None:
                self.between(ENGINE_SPAWN, top, _end(config), load_begin_rec)
            else:
                # ends where the load's logged duration puts its start
                self._add(
                    ENGINE_SPAWN,
                    top,
                    config.end_lo_ns,
                    load_begin.lo,
                    _s(max(0, load_begin.lo - (config.end_hi_ns or config.end_lo_ns))),
                    None if load_begin.hi is None else _s(max(0, load_begin.hi - config.end_lo_ns)),
                    self.attrs(end_rec, logged=False),
                )
        if load is not None and load_begin is not None:
            mem = {A_MODEL_MEMORY: load.detail} if load.detail else {}
            if load.duration_s is not None:
                self.logged(MODEL_LOAD, top, load, mem)
            else:
                self.between(MODEL_LOAD, top, load_begin, load, extra=mem)
            for phase, name in (
                (V.WEIGHTS_DOWNLOAD, WEIGHTS_DOWNLOAD),
                (V.MODEL_INIT, MODEL_INIT),
                (V.WEIGHTS_LOAD, WEIGHTS_LOAD),
            ):
                rec = self.timed(phase)
                if rec is not None:
                    extra = {"vllm.model": rec.detail} if phase == V.WEIGHTS_DOWNLOAD and rec.detail else None
                    self.logged(name, MODEL_LOAD, rec, extra)
        # engine init and what it holds
        init = self.timed(V.INIT_ENGINE)
        if init is not None:
            extra: dict[str, Any] = {}
            cm = _COMPILATION.search(init.detail or "")
            if cm:
                extra[A_COMPILATION] = float(cm[1])
            kv = f.get(V.KV_CACHE_SIZE)
            if kv is not None and kv.detail:
                extra[A_KV_TOKENS] = kv.detail
            self.logged(ENGINE_INIT, top, init, extra)
            self.engine_init()
        # engine init -> uvicorn's "Application startup complete."
        up = f.get(V.API_SERVER_UP)
        if init is not None and up is not None and up.line_no > init.line_no:
            server = f.get(V.API_SERVER_START)
            extra2 = {"vllm.api_server.url": server.detail} if server is not None and server.detail else None
            self.between(API_SERVER_START, top, _end(init), up, extra=extra2)

    def engine_init(self) -> None:
        compile_rec = self.timed(V.TORCH_COMPILE)
        extra: dict[str, Any] = {}
        if compile_rec is None:
            compile_rec = self.timed(V.COMPILE_AND_PROFILING_RUN)
            extra[A_INCLUDES_PROFILING] = True
        if compile_rec is not None:
            self.logged(TORCH_COMPILE, ENGINE_INIT, compile_rec, extra)
            for phase, name in (
                (V.DYNAMO_TRANSFORM, DYNAMO),
                (V.INDUCTOR_COMPILE, INDUCTOR),
                (V.COMPILE_CACHE_LOAD, CACHE_LOAD),
            ):
                for rec in self.all.get(phase, ()):
                    if rec.duration_s is not None:
                        rng = {A_RANGE: rec.detail} if rec.detail and name != DYNAMO else None
                        self.logged(name, TORCH_COMPILE, rec, rng)
        prof = self.timed(V.PROFILING_RUN)
        if prof is not None:
            self.logged(PROFILING_RUN, ENGINE_INIT, prof)
        mem = self.timed(V.MEMORY_PROFILE)
        kv = self.first.get(V.KV_CACHE_MEMORY)
        kv_attr = {A_KV_MEMORY: kv.detail} if kv is not None and kv.detail else {}
        if mem is not None:
            self.logged(MEMORY_PROFILE, ENGINE_INIT, mem, kv_attr)
        elif kv is not None:
            before = [r for r in (prof, compile_rec) if r is not None and r.line_no < kv.line_no]
            if before:
                last = max(before, key=lambda r: r.line_no)
                self.between(MEMORY_PROFILE, ENGINE_INIT, _end(last), kv, extra=kv_attr)
        graphs = self.timed(V.CUDA_GRAPH_CAPTURE)
        if graphs is not None:
            self.logged(
                CUDA_GRAPHS,
                ENGINE_INIT,
                graphs,
                {"vllm.cuda_graphs.memory": graphs.detail} if graphs.detail else None,
            )

    def wakes(self, phases: Iterable[VllmPhase]) -> None:
        request: VllmPhase | None = None
        for p in phases:
            if p.phase == V.WAKE_REQUEST:
                request = p
            elif p.phase == V.WAKE and p.duration_s is not None:
                extra: dict[str, Any] = {}
                if p.detail:
                    extra[A_WAKE_TAGS] = p.detail
                if request is not None:
                    extra[A_WAKE_REQUEST] = request.end_lo_ns
                self.logged(WAKE, "fma.vllm.wake", p, extra)
                request = None


def plan_vllm(
    phases: Sequence[VllmPhase],
    *,
    path: str,
    boot_start: tuple[int, int, str] | None = None,
) -> list[PhaseSpan]:
    """The vLLM spans that ``phases`` (one instance's records, in line order) state for an
    actuation on ``path``.

    Startup phases on ``cold_launcher``/``warm`` (under ``fma.vllm.ready``) and
    ``cold_no_fma`` (under ``fma.actuation``); on ``hot``, one ``vllm.wake`` per wake record
    (under ``fma.vllm.wake``; the caller keeps the one inside its wake call).  The first
    record of each startup phase is used (a process that restarts in the same log gives its
    first startup only); compile records that legitimately repeat give one span each, in
    line order.  ``boot_start``: ``(lo_ns, hi_ns, source)`` of the process start when the log
    has no launcher first line (a baseline Pod: its container's ``R.started``).

    Spans come out parents before children, each name's spans in line order, so numbering
    them in list order (:func:`number_spans`) gives the ids the contract's ``n`` rule gives.
    """
    top = vllm_parent(path)
    if path == M.HOT:
        p = _Planner(phases, "fma.vllm.wake")
        p.wakes(phases)
        return p.out
    if top is None:
        return []
    p = _Planner(phases, top)
    p.startup(boot_start)
    return p.out


def number_spans(
    trace_id: str,
    spans: Sequence[PhaseSpan],
    parent_ids: Mapping[str, str],
    *,
    counts: Mapping[str, int] | None = None,
    attributes: Mapping[str, Any] | None = None,
    service: str = M.SERVICE_LAUNCHER,
    max_s_bound: float | None = None,
) -> list[M.SpanRecord]:
    """Finished span records for ``spans``, ids by the contract's rule: ``n`` is the index
    among spans of that name in the trace (``counts``: how many of each name the trace has
    already), in list order.  A span whose parent is neither in ``parent_ids`` (the
    trace's spans by name, first of each) nor planned before it is left out, with its
    children.  ``max_s_bound`` bounds an open ``max_s`` (the caller's ready instant)."""
    seen = dict(counts or {})
    ids = dict(parent_ids)
    resource = M.resource_attributes(service)
    out: list[M.SpanRecord] = []
    for sp in spans:
        parent = ids.get(sp.parent_name)
        if parent is None:
            continue
        n = seen.get(sp.name, 0)
        seen[sp.name] = n + 1
        sid = M.span_id_for(trace_id, sp.name, n)
        ids.setdefault(sp.name, sid)
        attrs: dict[str, Any] = dict(attributes or {})
        attrs.update(sp.attributes)
        if sp.metric:
            attrs[M.A_METRIC] = sp.metric
        attrs[M.A_START_SRC] = sp.start_source
        attrs[M.A_END_SRC] = sp.end_source
        attrs[M.A_MIN] = sp.min_s
        max_s = sp.max_s
        if max_s is None and max_s_bound is not None:
            max_s = max(max_s_bound, sp.min_s)
        if max_s is not None:
            attrs[M.A_MAX] = max_s
        start, end = sp.start_ns, sp.end_ns
        if end < start:
            attrs[M.A_INCONSISTENT] = True
            attrs[M.A_RAW] = _s(end - start)
            end = start
        out.append(
            M.SpanRecord(
                trace_id, sid, parent, sp.name, M.INTERNAL, start, end, service, attrs, resource=resource
            )
        )
    return out
