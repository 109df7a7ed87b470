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
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

from msgspec.structs import replace

from . import model as M
from .model import MS, S, seconds
from .sources import vllm_log as V
from .sources.k8s_events import KubeEvent
from .sources.vllm_log import VllmPhase
from .span_records import SpanEvent, SpanRecord

__all__ = [
    "PhaseSpan",
    "assign_fma_events",
    "native_phases",
    "extra_spans",
    "with_fma_events",
    "vllm_clock",
    "vllm_key",
    "vllm_reference",
    "read_dated",
    "SRC_VLLM",
    "number_spans",
    "plan_vllm",
    "vllm_parent",
]

#: ``service.name`` of the spans whose end vLLM's own log states
SERVICE_VLLM = "vllm"
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
    """One planned span: what :func:`number_spans` turns into a :class:`~fma_otel.span_records.SpanRecord`.

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


def _between_s(start: _B, end: _B) -> tuple[float, float | None]:
    """The least and most seconds from ``start`` to ``end`` (never below 0): from the
    start's upper end to the end's lower end, and from lower to upper (``None``: the end is
    open)."""
    least = end.lo - (start.hi if start.hi is not None else start.lo)
    most = None if end.hi is None else seconds(max(0, end.hi - start.lo))
    return seconds(max(0, least)), most


_COMPILATION = re.compile(r"compilation: (\d+(?:\.\d+)?) s")


class _Planner:
    """Walks the span table of ``docs/span-model.md`` over one log's records: the first record
    of each phase (``first``), all of them for phases that repeat (``all``)."""

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
        end: _B | None = None,
        start_source: str = SRC_VLLM,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """A span from one instant to the end of ``end_rec`` (no duration of its own), or to
        ``end`` where another record's logged duration puts it (``end_rec`` then only
        gives the attributes)."""
        if end is None:
            end = _end(end_rec)
        attrs = self.attrs(end_rec, logged=False)
        if extra:
            attrs.update(extra)
        self._add(name, parent, start.lo, end.lo, *_between_s(start, end), attrs, start_source)

    def logged(self, name: str, parent: str, rec: VllmPhase, extra: Mapping[str, Any] | None = None) -> None:
        """A span whose end and duration the record states: ``[end - d, end]``."""
        assert rec.duration_s is not None
        d, unc = rec.duration_s, rec.duration_unc_s
        attrs = self.attrs(rec, logged=True)
        if extra:
            attrs.update(extra)
        min_s, max_s = max(0.0, round(d - unc, 9)), round(d + unc, 9)
        self._add(name, parent, rec.start_lo_ns, rec.end_lo_ns, min_s, max_s, attrs)

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
        if setup is not None and config is not None and config.order > setup.order:
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
        # the load begins where its logged duration puts its start, else at its start line
        load_begin: _B | None = None
        begin_rec = load  # the record the spawn's attributes name
        if load is not None and load.duration_s is not None:
            load_begin = _start(load)
        elif load is not None and load_start is not None and load_start.order < load.order:
            load_begin, begin_rec = _end(load_start), load_start
        if config is not None and load_begin is not None and begin_rec is not None:
            self.between(ENGINE_SPAWN, top, _end(config), begin_rec, end=load_begin)
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
        if init is not None and up is not None and up.order > init.order:
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
            before = [r for r in (prof, compile_rec) if r is not None and r.order < kv.order]
            if before:
                last = max(before, key=lambda r: r.order)
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


#: the first vLLM version that exports its own startup spans (``--otlp-traces-endpoint``)
NATIVE_SINCE = (0, 16)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


def native_phases(phases: Sequence[VllmPhase]) -> bool:
    """vLLM traces its own startup: its args set ``--otlp-traces-endpoint`` (the ``non-default
    args`` line) and its version is 0.16 or later.  Under the launcher wrapper those spans
    join the actuation through ``TRACEPARENT``, so the log's startup spans would be
    duplicates: the bridge and the wrapper then both leave them out (``vllm.wake`` stays:
    vLLM has no wake span)."""
    if not any(p.phase == V.OTLP_TRACES for p in phases):
        return False
    for p in phases:
        if p.phase in (V.ENGINE_CONFIG, V.API_SERVER_SETUP) and p.detail:
            m = _VERSION.match(p.detail)
            if m:
                return (int(m[1]), int(m[2])) >= NATIVE_SINCE
    return False


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

    None on ``cold_launcher``/``warm`` when vLLM traces its own startup
    (:func:`native_phases`).

    Spans come out parents before children, each name's spans in line order, so numbering
    them in list order (:func:`number_spans`) gives the ids the contract's ``n`` rule gives.
    """
    top = vllm_parent(path)
    if path in (M.COLD_LAUNCHER, M.WARM) and native_phases(phases):
        return []  # vLLM's own startup spans are in this trace already
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
    service: str = SERVICE_VLLM,
    ready_hi_ns: int | None = None,
) -> list[SpanRecord]:
    """Finished span records for ``spans``, ids by the contract's rule: ``n`` is the index
    among spans of that name in the trace (``counts``: how many of each name the trace has
    already), in list order.  A span whose parent is neither in ``parent_ids`` (the
    trace's spans by name, first of each) nor planned before it is left out, with its
    children.  ``ready_hi_ns``: an instant by which every open end had happened (the first
    healthy answer, ``D.serving``); it bounds an open ``max_s``."""
    seen = dict(counts or {})
    ids = dict(parent_ids)
    resources: dict[str, Mapping[str, Any]] = {}
    out: list[SpanRecord] = []
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
        if max_s is None and ready_hi_ns is not None:
            max_s = max(seconds(ready_hi_ns - sp.start_ns), sp.min_s)
        if max_s is not None:
            attrs[M.A_MAX] = max_s
        start, end = sp.start_ns, sp.end_ns
        if end < start:
            if sp.max_s is not None and sp.max_s > 0:
                end = start  # the end's interval reaches past the start: at least 0 long
            else:
                attrs[M.A_INCONSISTENT] = True
                attrs[M.A_RAW] = seconds(end - start)
                end = start
        svc = _SERVICE_OF.get(sp.name, service)
        resource = resources.get(svc)
        if resource is None:
            resource = resources[svc] = M.resource_attributes(svc)
        out.append(
            SpanRecord(trace_id, sid, parent, sp.name, M.INTERNAL, start, end, svc, attrs, resource=resource)
        )
    return out


# --------------------------------------------------------------------------- the vLLM log's clock

_QUARTER_HOUR_S = 900


def _round_offset(diff_ns: int) -> int | None:
    """A local-minus-UTC difference rounded to 15 min (time zones are whole quarters); ``None``
    when it is not a time zone's (beyond ±24 h)."""
    q = round(diff_ns / (_QUARTER_HOUR_S * S))
    off = q * _QUARTER_HOUR_S
    return off if -86400 < off < 86400 else None


def vllm_clock(act: Any, probe: Sequence[VllmPhase]) -> tuple[int, bool]:
    """The UTC offset (seconds, local = UTC + offset) of the vLLM log behind ``act``, and
    whether it was assumed (``fma.clock.assumed_utc``).

    ``probe``: the log's records parsed with offset 0 and the year of :func:`vllm_reference`.
    The offset is the difference, rounded to 15 min, between what the log says and an
    instant known in UTC that it states too: a ``--timestamps`` prefix (a baseline Pod's
    ``kubectl logs``), else the launcher's first line against ``D.create.start`` (the process
    starts within a second of the create call), else the wake record against ``D.wake.end``.
    With none of them, 0 (assumed).
    """
    inst = act.instants
    for r in probe:
        if r.prefix_ns is not None and r.phase != V.API_SERVER_UP:
            off = _round_offset(r.end_lo_ns - r.prefix_ns)
            if off is not None:
                return off, False
    start = inst.get("D.create.start")
    ps = next((r for r in probe if r.phase == V.PROCESS_START), None)
    if start is not None and ps is not None:
        off = _round_offset(ps.end_lo_ns - start.t_ns)
        if off is not None:
            return off, False
    wake_end = inst.get("D.wake.end")
    wakes = [r for r in probe if r.phase == V.WAKE]
    if wake_end is not None and wakes:
        w = min(wakes, key=lambda r: abs(r.end_lo_ns - wake_end.t_ns))
        off = _round_offset(w.end_lo_ns - wake_end.t_ns)
        if off is not None:
            return off, False
    return 0, True


def vllm_reference(act: Any) -> int | None:
    """The instant (UTC ns) whose year the vLLM log of ``act`` starts in: the create call
    (FMA), the wake call (hot), the container start (baseline)."""
    inst = act.instants
    for name in ("D.create.start", "R.started", "D.wake.start", "R.created"):
        i = inst.get(name)
        if i is not None:
            return int(i.t_ns)
    return None


def read_dated(act: Any, parse: Callable[[int, int], list[VllmPhase]]) -> tuple[list[VllmPhase], bool] | None:
    """The records of ``act``'s vLLM log read with its clock, and whether that clock was
    assumed; ``None`` when the actuation has no instant to date the log by.  ``parse(year,
    utc_offset_s)`` reads the log: first with offset 0 in the year of :func:`vllm_reference`
    (the probe :func:`vllm_clock` reads), then, when the clock is not UTC, with it.  The
    bridge and ``watch`` both read a log this way, so both give the same spans."""
    ref = vllm_reference(act)
    if ref is None:
        return None
    probe = parse(_year(ref), 0)
    offset, assumed = vllm_clock(act, probe)
    return (probe if offset == 0 else parse(_year(ref, offset), offset)), assumed


def _year(t_ns: int, offset_s: int = 0) -> int:
    return datetime.fromtimestamp(t_ns // S + offset_s, timezone.utc).year


def vllm_key(act: Any) -> str | None:
    """The ``--vllm-log`` key of an actuation: its FMA instance id, or a baseline Pod's name."""
    if act.path == M.COLD_NO_FMA:
        return act.attributes.get(M.A_REQ_NAME) or None
    if act.path in (M.COLD_LAUNCHER, M.WARM, M.HOT):
        return act.attributes.get(M.A_INSTANCE) or None
    return None


# --------------------------------------------------------------------------- one actuation

#: span names of the Kubernetes and launcher-boot spans
POD_SETUP = "k8s.pod.setup"
IMAGE_PULL = "k8s.image.pull"
CONTAINER_START = "k8s.container.start"
LAUNCHER_BOOT = "fma.launcher.boot"
READINESS_PROBE = "k8s.readiness.probe"
K8S_METRICS: Mapping[str, str] = {
    IMAGE_PULL: "T_image_pull",
    CONTAINER_START: "T_container_start",
    LAUNCHER_BOOT: "T_launcher_boot",
    READINESS_PROBE: "T_readiness_probe",
}
#: the container whose Events make the container spans (FMA's launcher and requester both)
MAIN_CONTAINER = "inference-server"
#: FMA's own Event reasons that become span events on ``fma.actuation``
FMA_EVENT_REASONS: tuple[str, ...] = ("LauncherStuck", "OutdatedRoutingMetadata")
SRC_LAUNCHER_BOOT = "launcher:log/Application startup complete"
#: who observed the end of the spans not observed by the caller's default service
_SERVICE_OF: Mapping[str, str] = {LAUNCHER_BOOT: M.SERVICE_LAUNCHER, READINESS_PROBE: M.SERVICE_K8S}


def _src(ev: KubeEvent) -> str:
    return f"k8s:event/{ev.raw_reason}"


#: a boundary of a Kubernetes span: (instant ns, its precision ns, source)
_Edge = tuple[int, int, str]


def _edge(ev: KubeEvent) -> _Edge:
    return (ev.first_ns, ev.first_prec_ns, _src(ev))


def _pod_events(
    events: Sequence[KubeEvent], *, uid: str | None, name: str | None, namespace: str | None
) -> list[KubeEvent]:
    """The Events of one Pod: by uid where both know it, else by namespace and name.  One
    record per Event object (a watch stream repeats an Event as its count grows): the
    latest state of each, so the input's order and repeats do not matter."""
    out: dict[Any, KubeEvent] = {}
    for e in events:
        if e.object_kind not in (None, "Pod"):
            continue
        if uid and e.object_uid:
            if e.object_uid != uid:
                continue
        elif not (
            name and e.object_name == name and (not namespace or e.object_namespace in (None, namespace))
        ):
            continue
        key = e.event_uid or (e.raw_reason, e.container, e.first_ns, e.message)
        old = out.get(key)
        if old is None or _latest(e) > _latest(old):
            out[key] = e
    return sorted(out.values(), key=_order)


def _latest(e: KubeEvent) -> tuple[int, int, str]:
    return (e.count, e.last_ns, e.message)


def _order(e: KubeEvent) -> tuple[int, str, str, str]:
    """A content order (never the input's): the first occurrence, then what tells Events apart."""
    return (e.first_ns, e.raw_reason, e.container or "", e.event_uid or e.message)


def _first(evs: Iterable[KubeEvent], reason: str, container: str | None = None) -> KubeEvent | None:
    for e in evs:  # in _order: the first occurrence first
        if e.raw_reason == reason and (container is None or e.container == container):
            return e
    return None


def _main_container(evs: Sequence[KubeEvent]) -> str | None:
    """``inference-server`` where the Pod has it (FMA); else the container of the first
    ``Started`` (a baseline Pod's single container)."""
    names = [e.container for e in evs if e.container]
    if MAIN_CONTAINER in names:
        return MAIN_CONTAINER
    started = _first(evs, "Started")
    return started.container if started is not None else None


def _k8s_plan(
    evs: Sequence[KubeEvent],
    parent: str,
    *,
    boot_ns: int | None = None,
    ready: M.Instant | None = None,
) -> list[PhaseSpan]:
    """The Pod startup spans its Events state (``docs/span-model.md``); with ``boot_ns`` (the
    launcher's "Application startup complete.") and ``ready`` also the boot and the
    readiness probe."""
    out: list[PhaseSpan] = []

    def add(name: str, start: _Edge, end: _Edge, attrs: dict[str, Any]) -> None:
        (a, a_prec, src_a), (b, b_prec, src_b) = start, end
        lo_s, hi_s = _between_s(_B(a, a + a_prec), _B(b, b + b_prec))
        out.append(PhaseSpan(name, parent, a, b, lo_s, hi_s, K8S_METRICS.get(name), attrs, src_a, src_b))

    container = _main_container(evs)
    sched = _first(evs, "Scheduled")
    pulling = _first(evs, "Pulling", container)
    pulled = _first(evs, "Pulled", container)
    started = _first(evs, "Started", container)
    cattr: dict[str, Any] = {"k8s.container.name": container} if container else {}
    # scheduled -> the kubelet starts on the image
    setup_end = (
        pulling if pulling is not None else (pulled if pulled is not None and pulled.image_present else None)
    )
    if sched is not None and setup_end is not None:
        attrs = {"k8s.scheduled.event_time_unix_nano": sched.first_ns}
        add(POD_SETUP, _edge(sched), _edge(setup_end), attrs)
    # the pull: its logged duration, ending at Pulled
    pull_end: _Edge | None = None
    if pulled is not None and pulled.pull_s is not None:
        d = round(pulled.pull_s * S)
        attrs = dict(cattr)
        attrs["k8s.image.pull_s"] = pulled.pull_s
        if pulled.image:
            attrs["k8s.image.name"] = pulled.image
        if pulled.image_size is not None:
            attrs["k8s.image.size"] = pulled.image_size
        if pulled.pull_waiting_s is not None:
            attrs["k8s.image.pull_waiting_s"] = pulled.pull_waiting_s
        # the logged duration, to the millisecond kubelet prints it
        add(IMAGE_PULL, (pulled.first_ns - d, MS, _src(pulled)), (pulled.first_ns, MS, _src(pulled)), attrs)
        pull_end = _edge(pulled)
    elif pulled is not None and pulled.image_present:
        pull_end = _edge(pulled)
    if pull_end is not None and started is not None:
        attrs = dict(cattr)
        if pulled is not None and pulled.image_present:
            attrs["k8s.image.present"] = True
        add(CONTAINER_START, pull_end, _edge(started), attrs)
    if started is None or boot_ns is None or boot_ns < started.first_ns:
        return out
    boot: _Edge = (boot_ns, MS, SRC_LAUNCHER_BOOT)  # the launcher log's asctime: 1 ms
    add(LAUNCHER_BOOT, _edge(started), boot, dict(cattr))
    if ready is not None:
        failures = sum(
            e.count
            for e in evs
            if e.raw_reason == "Unhealthy"
            and e.container in (None, container)
            and started.first_ns <= e.last_ns <= ready.t_ns + ready.precision_ns  # since the start
        )
        attrs = dict(cattr)
        attrs["k8s.probe.failures"] = failures
        add(READINESS_PROBE, boot, (ready.t_ns, ready.precision_ns, ready.source), attrs)
    return out


def _startup_records(phases: Sequence[VllmPhase], create_end_ns: int | None) -> list[VllmPhase]:
    """The records of the run that the create call started: from the last launcher first
    line at or before the call's end (+ 5 s of slack for clocks) to the next one."""
    if create_end_ns is None:
        return list(phases)
    starts = [i for i, r in enumerate(phases) if r.phase == V.PROCESS_START]
    if not starts:
        return list(phases)
    before = [i for i in starts if phases[i].end_lo_ns <= create_end_ns + 5 * S]
    i0 = before[-1] if before else starts[0]
    later = [i for i in starts if i > i0]
    return list(phases[i0 : later[0] if later else len(phases)])


def _within_call(p: PhaseSpan, call_start_ns: int) -> PhaseSpan:
    """vLLM's wake lies inside the DPC's wake call: its end is in the stamp's second *and*
    at least the logged duration after the call started, so the span takes the lower end
    of that intersection (never past the stamp's second; sources say both)."""
    shift = call_start_ns - p.start_ns
    if shift <= 0 or shift >= S:
        return p
    return p._replace(
        start_ns=p.start_ns + shift,
        end_ns=p.end_ns + shift,
        start_source=f"{p.start_source}+dpc:D.wake.start",
        end_source=f"{p.end_source}+dpc:D.wake.start",
    )


def extra_spans(
    act: Any,
    trace: Sequence[SpanRecord],
    *,
    vllm: Mapping[str, Sequence[VllmPhase]] | None = None,
    events: Sequence[KubeEvent] = (),
    launcher_boot_ns: Mapping[str, int] | None = None,
    vllm_clock_assumed: Iterable[str] = (),
) -> list[SpanRecord]:
    """The spans that vLLM's log and the Kubernetes Events add to ``trace`` (the finished
    tree of ``act``): vLLM phases, Pod startup phases, the launcher's boot and readiness
    probe.  ``vllm`` is keyed by FMA instance id, or by Pod name for a baseline Pod (records
    already read with the log's clock, see :func:`vllm_clock`); ``launcher_boot_ns`` by
    launcher Pod name (its log's first ``Application startup complete.``).  Ids follow the
    contract: ``n`` continues the trace's count of each name.  A span whose parent is not in
    the trace (a re-actuation has no ``fma.requester.startup``) is left out."""
    ids: dict[str, str] = {}
    counts: dict[str, int] = {}
    for s in trace:
        ids.setdefault(s.name, s.span_id)
        counts[s.name] = counts.get(s.name, 0) + 1
    if not ids:
        return []
    base = act.attributes
    inst = act.instants
    tid = act.trace_id
    out: list[SpanRecord] = []

    def emit(
        plan: Sequence[PhaseSpan],
        service: str,
        ready_hi: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        attrs = dict(base)
        if extra:
            attrs.update(extra)
        recs = number_spans(
            tid, plan, ids, counts=counts, attributes=attrs, service=service, ready_hi_ns=ready_hi
        )
        for r in recs:
            ids.setdefault(r.name, r.span_id)
            counts[r.name] = counts.get(r.name, 0) + 1
        out.extend(recs)

    # ---- Kubernetes: the launcher's and the requester's Pod startup
    ns = base.get(M.A_NAMESPACE) or None
    if events:
        launcher = base.get(M.A_LAUNCHER)
        if launcher and "fma.launcher.startup" in ids:
            lo = inst["L.created"].t_ns - S if "L.created" in inst else None
            evs = [
                e
                for e in _pod_events(events, uid=None, name=launcher, namespace=ns)
                if lo is None or e.last_ns >= lo
            ]
            boot = (launcher_boot_ns or {}).get(launcher)
            emit(
                _k8s_plan(evs, "fma.launcher.startup", boot_ns=boot, ready=inst.get("L.ready")), M.SERVICE_K8S
            )
        if "fma.requester.startup" in ids:
            evs = _pod_events(events, uid=base.get(M.A_REQ_UID), name=base.get(M.A_REQ_NAME), namespace=ns)
            emit(_k8s_plan(evs, "fma.requester.startup"), M.SERVICE_K8S)
    # ---- vLLM
    key = vllm_key(act)
    phases = (vllm or {}).get(key) if key else None
    if phases:
        clock = {A_CLOCK_ASSUMED: True} if key in set(vllm_clock_assumed) else None
        if act.path == M.HOT:
            ws, we = inst.get("D.wake.start"), inst.get("D.wake.end")
            if ws is not None and we is not None:
                plan = [
                    _within_call(p, ws.t_ns)
                    for p in plan_vllm(phases, path=M.HOT)
                    if p.end_ns <= we.t_ns + we.precision_ns and p.end_ns + S > ws.t_ns
                ]
                emit(plan, SERVICE_VLLM, extra=clock)
        elif act.path in (M.COLD_LAUNCHER, M.WARM):
            ce = inst.get("D.create.end")
            recs = _startup_records(phases, ce.t_ns if ce is not None else None)
            serving = inst.get("D.serving")
            hi = serving.t_ns + serving.precision_ns if serving is not None else None
            emit(plan_vllm(recs, path=act.path), SERVICE_VLLM, hi, clock)
        elif act.path == M.COLD_NO_FMA:
            started = inst.get("R.started")
            boot = (started.t_ns, started.t_ns + started.precision_ns, started.source) if started else None
            ready = inst.get("R.ready")
            hi = ready.t_ns + ready.precision_ns if ready is not None else None
            plan = plan_vllm(phases, path=M.COLD_NO_FMA, boot_start=boot)
            up = next((r for r in phases if r.phase == V.API_SERVER_UP), None)
            if ready is not None and up is not None and any(p.name == API_SERVER_START for p in plan):
                plan.append(
                    PhaseSpan(
                        READINESS_PROBE,
                        "fma.actuation",
                        up.end_lo_ns,
                        ready.t_ns,
                        0.0,
                        seconds(max(0, ready.t_ns + ready.precision_ns - up.end_lo_ns)),
                        K8S_METRICS[READINESS_PROBE],
                        {A_LINE: up.line_no},
                        SRC_VLLM,
                        ready.source,
                    )
                )
            emit(plan, SERVICE_VLLM, hi, clock)
    return out


# --------------------------------------------------------------------------- FMA's own Events


def _actuation_range(act: Any) -> tuple[int, int] | None:
    """``fma.actuation``'s start and end (its last instant while incomplete)."""
    inst = act.instants
    start = inst.get("R.started") or inst.get("D.unbound")
    if start is None:
        return None
    end = inst.get("R.ready")
    return start.t_ns, end.t_ns if end is not None else act.last_ns


def _concerns(act: Any, e: KubeEvent) -> bool:
    """``LauncherStuck`` concerns the actuations of its launcher Pod, ``OutdatedRoutingMetadata``
    those of its requester Pod (by uid, else by namespace and name)."""
    base = act.attributes
    ns = base.get(M.A_NAMESPACE)
    if e.object_namespace and ns and e.object_namespace != ns:
        return False
    if e.raw_reason == "LauncherStuck":
        return bool(e.object_name) and e.object_name == base.get(M.A_LAUNCHER)
    if e.object_uid and base.get(M.A_REQ_UID):
        return e.object_uid == base.get(M.A_REQ_UID)
    return bool(e.object_name) and e.object_name == base.get(M.A_REQ_NAME)


def assign_fma_events(actuations: Iterable[Any], events: Sequence[KubeEvent]) -> dict[str, list[KubeEvent]]:
    """Actuation key -> FMA's own Events on it: the actuation of that Pod whose
    ``fma.actuation`` holds the Event's first time, else the latest one that started before
    it.  An Event no actuation of its Pod had started by is on none."""
    fma = [e for e in events if e.raw_reason in FMA_EVENT_REASONS]
    out: dict[str, list[KubeEvent]] = {}
    if not fma:
        return out
    best: dict[Any, tuple[tuple[int, int], str]] = {}
    seen: dict[Any, KubeEvent] = {}
    for act in actuations:
        rng = _actuation_range(act)
        if rng is None:
            continue
        for e in fma:
            if not _concerns(act, e) or rng[0] > e.first_ns:
                continue
            key = e.event_uid or (e.raw_reason, e.object_uid, e.object_name, e.first_ns, e.message)
            old = seen.get(key)
            if old is None or _latest(e) > _latest(old):
                seen[key] = e
            rank = (1 if e.first_ns <= rng[1] else 0, rng[0])  # holds it, then the latest start
            if key not in best or rank > best[key][0]:
                best[key] = (rank, act.key)
    for key, (_, act_key) in best.items():
        out.setdefault(act_key, []).append(seen[key])
    for evs in out.values():
        evs.sort(key=_order)
    return out


def with_fma_events(trace: Sequence[SpanRecord], events: Sequence[KubeEvent]) -> list[SpanRecord]:
    """``trace`` with ``events`` as span events ``k8s.event.<Reason>`` on ``fma.actuation``."""
    if not events:
        return list(trace)
    evs = tuple(
        SpanEvent(
            f"k8s.event.{e.raw_reason}",
            e.first_ns,
            {
                "k8s.event.message": e.message,
                "k8s.event.count": e.count,
                "k8s.event.component": e.component or "",
                "k8s.event.type": e.type or "",
                "k8s.pod.name": e.object_name or "",
            },
        )
        for e in events
    )
    return [replace(s, events=s.events + evs) if s.name == "fma.actuation" else s for s in trace]
