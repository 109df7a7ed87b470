"""``fma_otel.actuation(requester_pod)``: make work done for one actuation join its trace.

Why: DPC-side Python code (test requesters, controllers acting for the DPC, benchmark
harnesses) has no ``traceparent`` to start from; the actuation trace is *derived* from the
requester Pod's UID.  Inside the context manager the current span context is the
actuation's (trace id = ``trace_id_for(actuation_key(uid, n))``, span id = the derived id of
``fma.actuation``), so httpx calls made inside become its children, are named by their
DPC purpose and - for the spans the model names (``fma.dpc.create_instance``,
``fma.vllm.wake``) - get the derived ids themselves, parented where the bridge puts them.

By default the ``fma.actuation`` span itself is *not* emitted (``emit=False``): the bridge
emits it with the true Kubernetes instants, and two spans with one id would collide.  Pass
``emit=True`` when no bridge will run (a harness that wants a live tree of its own).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import redact

ACTUATION_SPAN = model.SPANS_BY_NAME["fma.actuation"].name
_CURRENT: contextvars.ContextVar[Actuation | None] = contextvars.ContextVar("fma_actuation", default=None)
_tracers = c.TracerSource()


@dataclass
class Actuation:
    """The identity of one actuation and a per-name counter (the ``n`` of the id rule)."""

    requester_uid: str
    requester_name: str | None
    namespace: str | None
    n: int
    path: str | None
    key: str = ""
    trace_id: str = ""
    _counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.key = model.actuation_key(self.requester_uid, self.n)
        self.trace_id = model.trace_id_for(self.key)

    def span_id(self, name: str, n: int = 0) -> str:
        return model.span_id_for(self.trace_id, name, n)

    def next_index(self, name: str) -> int:
        """0 for the first span of ``name`` opened in this actuation, then 1, 2, ..."""
        n = self._counts.get(name, 0)
        self._counts[name] = n + 1
        return n

    def parent_of(self, name: str) -> str | None:
        """The model's parent span name for ``name`` on this actuation's path."""
        d = model.SPANS_BY_NAME.get(name)
        if d is None:
            return None
        path = self.path if self.path in d.paths else sorted(d.paths)[0]
        return d.parent_name(path)

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {model.A_REQ_UID: self.requester_uid, model.A_ACTUATION_KEY: self.key}
        if self.requester_name:
            attrs[model.A_REQ_NAME] = self.requester_name
        if self.namespace:
            attrs[model.A_NAMESPACE] = self.namespace
        if self.path:
            attrs[model.A_PATH] = self.path
        return attrs


def current_actuation() -> Actuation | None:
    return _CURRENT.get()


def _identity(pod: Any) -> tuple[str, str | None, str | None]:
    """UID, name, namespace from a V1Pod, a Pod dict (JSON) or a bare UID string.

    Raises (``ValueError``) when there is no UID; ``actuation`` turns that into a no-op.
    """
    if isinstance(pod, str):
        uid, name, ns = pod, None, None
    elif isinstance(pod, Mapping):
        meta = pod.get("metadata", pod)
        uid, name, ns = meta.get("uid"), meta.get("name"), meta.get("namespace")
    else:
        meta = getattr(pod, "metadata", pod)
        uid, name, ns = (
            getattr(meta, "uid", None),
            getattr(meta, "name", None),
            getattr(meta, "namespace", None),
        )
    if not uid or not str(uid).strip():
        raise ValueError("requester_pod has no metadata.uid")
    return str(uid), name, ns


@contextmanager
def actuation(
    requester_pod: Any,
    *,
    n: int = 1,
    path: str | None = None,
    emit: bool = False,
    tracer_provider: Any = None,
) -> Iterator[Actuation]:
    """Run the block inside the actuation trace of ``requester_pod`` (see module doc).

    ``n`` is the actuation number of that requester (1 for the first binding); ``path``
    (``cold_launcher``, ``warm``, ``hot``) picks the model parent where it depends on it.
    A requester without a usable UID never raises into the caller: the block runs once,
    untraced, with a falsy :class:`NoActuation` (a warning is logged the first time).
    """
    act: Actuation | None
    try:
        uid, name, ns = _identity(requester_pod)
        act = Actuation(uid, name, ns, n, path)
        parent_name = model.SPANS_BY_NAME[ACTUATION_SPAN].parent_name(path or model.COLD_LAUNCHER)
    except Exception as exc:  # noqa: BLE001 - do no harm: run the block untraced
        _unusable(requester_pod, exc)
        act = None
    if act is None:
        # Outside the ``except``: the block's own exception must not be chained to ours.
        yield NoActuation(path=path, n=n)
        return
    span: trace.Span | None = None
    ctx = None
    try:
        if emit and not c.sdk_disabled() and c.active():
            tracer = (c.TracerSource(tracer_provider) if tracer_provider else _tracers).get()
            parent_ctx = c.remote_context(act.trace_id, act.span_id(parent_name)) if parent_name else None
            span = c.start_span(
                tracer,
                ACTUATION_SPAN,
                context=parent_ctx,
                attributes={**act.attributes(), model.A_START_SRC: "wrapper", model.A_END_SRC: "wrapper"},
                span_id=act.span_id(ACTUATION_SPAN),
            )
            ctx = trace.set_span_in_context(span, parent_ctx)
        else:
            ctx = c.remote_context(act.trace_id, act.span_id(ACTUATION_SPAN))
    except Exception:  # noqa: BLE001 - do no harm
        ctx = None
    token = _CURRENT.set(act)
    ctx_token = c.attach_safe(ctx)
    try:
        yield act
    except BaseException as exc:
        if span is not None:
            _end(span, exc)
            span = None
        raise
    finally:
        c.detach_safe(ctx_token)
        with contextlib.suppress(Exception):  # the block ended in another context
            _CURRENT.reset(token)
        if span is not None:
            _end(span, None)


_WARNED = False


def _unusable(requester_pod: Any, exc: Exception) -> None:
    """Say once (warning) that a requester without a usable identity runs untraced; then debug."""
    global _WARNED
    try:
        level = logging.DEBUG if _WARNED else logging.WARNING
        _WARNED = True
        c.logger.log(
            level,
            "fma-otel: actuation(%s): no requester UID (%s: %s); the block runs without the actuation trace",
            type(requester_pod).__name__,
            type(exc).__name__,
            exc,
        )
    except Exception:  # noqa: BLE001
        pass


class NoActuation(Actuation):
    """What ``actuation(...)`` yields when the requester has no usable identity.

    Same attributes as an :class:`Actuation`, all empty (``requester_uid``, ``key`` and
    ``trace_id`` are ``""``); it is never made current, so nothing inside the block is
    attributed to it.
    """

    def __init__(self, path: str | None = None, n: int = 1) -> None:
        super().__init__("", None, None, n, path)

    def __post_init__(self) -> None:
        self.key = ""
        self.trace_id = ""

    def __bool__(self) -> bool:
        return False

    def span_id(self, name: str, n: int = 0) -> str:
        return ""


@c.swallow()
def _end(span: trace.Span, exc: BaseException | None) -> None:
    if exc is not None:
        redact.record_exception(span, exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
    span.end()
