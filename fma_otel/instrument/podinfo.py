"""Who is this launcher bound to?  Read the launcher Pod's ``dual-pods.llm-d.ai/requester``.

Why: the Go DPC sends no ``traceparent``, yet the launcher's create span must join the
actuation's trace.  The DPC records the binding on the launcher Pod itself
(``dual-pods.llm-d.ai/requester: "<uid> <name>"``, plus ``dual-pods.llm-d.ai/instance-id``),
so the launcher can derive the trace id from its own Pod.  ``POD_NAME``/``NAMESPACE`` come
from the downward API; credentials are the Pod's service account, or a kubeconfig with a
token or client-certificate user (``_kubeapi``).  The lookup speaks to the API server with
``urllib3`` and ``json``, never the ``kubernetes`` client: that client would make the
launcher tens of MB bigger, and every fork of a vLLM instance slower.

A create never waits on the API server: a background thread (``start_background``) reads
the Pod at start-up and then *watches* it (a field-selected watch of this one Pod), so the
binding - which the DPC writes before it sends the create - is usually known when the
create arrives (``cached``, no I/O).  When it is not (the watch is late, the API server
is hung or down), the launcher answers the create at once and resolves the span after the
response (``wait_for``, on its own thread), parenting by the derived ids.

An *unbound* answer (the Pod was read, but has no requester annotation) is never reused
for a create, nor one whose ``instance-id`` is another create's: the create then waits
(off the request path) for the answer that describes it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fma_otel.instrument._common import env_float

REQUESTER_ANNOTATION = "dual-pods.llm-d.ai/requester"
INSTANCE_ID_ANNOTATION = "dual-pods.llm-d.ai/instance-id"

ENV_TIMEOUT = "FMA_OTEL_POD_LOOKUP_TIMEOUT"
ENV_TTL = "FMA_OTEL_POD_CACHE_TTL"
ENV_WAIT = "FMA_OTEL_POD_JOIN_WAIT"
ENV_REFRESH = "FMA_OTEL_POD_REFRESH"


@dataclass(frozen=True)
class PodLookup:
    """The answer: a requester (uid, name) or the reason there is none."""

    requester_uid: str | None = None
    requester_name: str | None = None
    instance_id: str | None = None
    pod_name: str | None = None
    namespace: str | None = None
    node_name: str | None = None
    reason: str = ""
    #: The Pod could not be read (API error, timeout): the only answer cached negatively.
    failed: bool = False
    at: float = field(default_factory=time.monotonic)

    @property
    def ok(self) -> bool:
        return bool(self.requester_uid)


def parse_requester(value: str | None) -> tuple[str | None, str | None]:
    """``"<uid> <name>"`` -> (uid, name); tolerant of a bare uid."""
    parts = (value or "").split()
    return (parts[0] if parts else None), (parts[1] if len(parts) > 1 else None)


_API: Any = None


def _api() -> Any:
    """One :class:`~fma_otel.instrument._kubeapi.PodClient` per process (credentials are
    resolved once; a token file is still re-read on every connect)."""
    global _API
    if _API is None:
        from fma_otel.instrument import _kubeapi

        _API = _kubeapi.PodClient(_kubeapi.load())
    return _API


def _pod_data(pod: dict[str, Any], resource_version: str | None = None) -> dict[str, Any]:
    meta = pod.get("metadata") or {}
    return {
        "annotations": dict(meta.get("annotations") or {}),
        "node_name": (pod.get("spec") or {}).get("nodeName"),
        "resource_version": resource_version or meta.get("resourceVersion"),
    }


def _default_fetch(namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """Read the Pod (``_kubeapi``: ``urllib3`` and ``json``, never the ``kubernetes`` client),
    with the list's resourceVersion for the watch that follows.

    Instrumentation is suppressed here: this lookup is plumbing, not part of anyone's
    actuation.
    """
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    api = _api()
    with suppress_instrumentation():
        return _pod_data(*api.read_pod(namespace, name, timeout))


def _default_watch(
    namespace: str,
    name: str,
    timeout: float,
    on_pod: Callable[[dict[str, Any]], None],
    resource_version: str | None = None,
) -> None:
    """Stream this Pod's changes from ``resource_version`` (one field-selected watch) into
    ``on_pod`` until the server ends the watch; raises on errors (``Gone`` on 410).

    A BOOKMARK or DELETED event only moves the resourceVersion on (``{"bookmark": True}``):
    a deleted Pod's last annotations still describe the creates it served."""
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    api = _api()
    with suppress_instrumentation():
        for event in api.watch_pod(namespace, name, resource_version, timeout):
            obj = event.get("object")
            if not isinstance(obj, dict):
                continue
            data = _pod_data(obj)
            if event.get("type") in ("BOOKMARK", "DELETED"):
                data = {"bookmark": True, "resource_version": data["resource_version"]}
            on_pod(data)


class PodInfo:
    """The launcher Pod's binding annotations: kept current off the request path."""

    def __init__(
        self,
        fetch: Callable[[str, str, float], dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        negative_ttl: float = 15.0,
        env: dict[str, str] | None = None,
        watch: Callable[..., None] | None = None,
    ) -> None:
        e = os.environ if env is None else env
        self._fetch = fetch or _default_fetch
        #: The watch of the Pod (``_default_watch``'s signature); with an injected
        #: ``fetch`` and no ``watch``, re-reads instead.
        self._watch = watch if watch is not None else (_default_watch if fetch is None else None)
        self.join_wait = env_float(ENV_WAIT, 10.0, e)
        self.refresh = env_float(ENV_REFRESH, 5.0, e)
        self._changed = threading.Condition()
        self._kick = threading.Event()
        #: Set by ``stop``: the only thing that ends a backoff early.
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Set at exit: ``wait_for`` stops waiting (the process is going away).
        self.closing = False
        self._stopped = False
        #: True while a watch streams: its answer is current however old it is.
        self._watching = False
        self.pod_name = e.get("POD_NAME") or None
        self.namespace = e.get("NAMESPACE") or e.get("POD_NAMESPACE") or None
        self.timeout = timeout if timeout is not None else env_float(ENV_TIMEOUT, 0.5, e)
        self.ttl = ttl if ttl is not None else env_float(ENV_TTL, 60.0, e)
        self.negative_ttl = negative_ttl
        self._last: PodLookup | None = None
        #: The resourceVersion last seen (a read, a watch event, a bookmark): a watch
        #: resumes from it after a drop, without a re-read.
        self._rv: str | None = None

    def cached(self, instance_id: str | None) -> PodLookup | None:
        """A still-valid answer for this create, without any I/O (``None`` when a fetch is due)."""
        last = self._last
        if last is None:
            return None
        age = time.monotonic() - last.at
        if last.failed:
            return last if age < self.negative_ttl else None
        if not last.ok:
            return None  # unbound when read: it may be bound now (populator, then the DPC)
        if age >= self.ttl and not self._watching:
            return None
        if instance_id is not None and last.instance_id != instance_id:
            return None  # the answer describes another binding (or cannot say which)
        return last

    def lookup(self, instance_id: str | None = None, *, force: bool = False) -> PodLookup:
        """The cached answer for this create (``cached``), else - or with ``force`` - the
        Pod read now (blocking, bounded by ``timeout``).  In the launcher the background thread
        reads (``_run``); a create looks at ``cached``, or reads through ``wait_for`` (off the
        request path) only when that thread is not running."""
        if not self.pod_name or not self.namespace:
            self._last = PodLookup(reason="POD_NAME/NAMESPACE not set (downward API missing)")
            return self._last
        hit = None if force else self.cached(instance_id)
        if hit is None:
            hit = self._last = self._do_fetch()
            self._notify()
        return hit

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _on_pod(self, data: dict[str, Any]) -> None:
        """A watch event: the Pod as it is now (or, for a bookmark, just a newer version)."""
        if data.get("resource_version"):
            self._rv = data["resource_version"]
        if data.get("bookmark"):
            return
        self._last = self._answer(data)
        self._notify()

    def _do_fetch(self) -> PodLookup:
        assert self.pod_name and self.namespace
        try:
            data = self._fetch(self.namespace, self.pod_name, self.timeout)
        except Exception as exc:  # noqa: BLE001 - any failure is just "could not join"
            return PodLookup(
                pod_name=self.pod_name,
                namespace=self.namespace,
                reason=f"pod lookup failed: {type(exc).__name__}: {str(exc)[:200]}",
                failed=True,
            )
        self._rv = data.get("resource_version") or None
        return self._answer(data)

    def _answer(self, data: dict[str, Any]) -> PodLookup:
        ann = data.get("annotations") or {}
        uid, name = parse_requester(ann.get(REQUESTER_ANNOTATION))
        return PodLookup(
            requester_uid=uid,
            requester_name=name,
            instance_id=ann.get(INSTANCE_ID_ANNOTATION),
            pod_name=self.pod_name,
            namespace=self.namespace,
            node_name=data.get("node_name"),
            reason="" if uid else f"launcher Pod has no {REQUESTER_ANNOTATION} annotation (unbound)",
        )

    def kick(self) -> None:
        """Ask the background thread for a fresh read now (a create missed): no I/O here.
        Already asked (every create kicks while the answer is missing): nothing to do - not
        even ``set``, which takes the event's lock and notifies."""
        if not self._kick.is_set():
            self._kick.set()

    def wait_for(self, instance_id: str | None, timeout: float | None = None) -> PodLookup:
        """The answer for this create, waiting up to ``timeout`` (default ``join_wait``)
        for the background thread to learn it.  Call only off the request path."""
        if not self.pod_name or not self.namespace:
            return self.lookup(instance_id)
        deadline = time.monotonic() + (self.join_wait if timeout is None else timeout)
        thread = self._thread
        if thread is None or not thread.is_alive():
            hit = self.cached(instance_id)
            return hit if hit is not None else self.lookup(instance_id)
        self.kick()
        with self._changed:
            while True:
                hit = self.cached(instance_id)
                left = deadline - time.monotonic()
                if hit is not None or left <= 0 or self.closing:
                    break
                self._changed.wait(left)
        if hit is not None:
            return hit
        last = self._last
        why = last.reason if last is not None and last.reason else "no answer from the API server yet"
        return PodLookup(
            pod_name=self.pod_name,
            namespace=self.namespace,
            node_name=last.node_name if last is not None else None,
            reason=f"pod annotation for this instance not known within {self.join_wait:g} s ({why})",
        )

    def start_background(self) -> None:
        """Read, then watch, the Pod in a daemon thread (once); never raises."""
        if not self.pod_name or not self.namespace:
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopped = self.closing = False
        self._kick.clear()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fma-otel-podinfo", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """End the background thread after its current read or watch (``uninstrument``)."""
        self._stopped = self.closing = True
        self._stop.set()
        self._kick.set()
        self._notify()

    #: A watch that ends (or is refused as too old) sooner than this after it began counts
    #: as a failure for the backoff: a server or proxy that closes every watch at once must
    #: not be reconnected to in a loop.
    MIN_WATCH_S = 1.0

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds``, or less if a create kicks (the kick is used up)."""
        if self._kick.wait(seconds):
            self._kick.clear()

    def _back_off(self, seconds: float) -> None:
        """Wait ``seconds`` whatever creates do; only ``stop`` ends it early.  Why kicks do
        not (they do not even wake the thread): every create kicks while the answer is
        missing, and this thread shares the launcher's GIL."""
        self._stop.wait(seconds)

    def _run(self) -> None:
        """GET the Pod; then watch it from the version read, reconnecting from the last
        version seen when the server ends the watch (at once) or the stream drops (after a
        backoff, doubling to at most 30 s); re-read on 410 Gone.  After a failed read, back
        off likewise; a watch that ends or is gone within ``MIN_WATCH_S`` backs off too.  A
        create's kick never shortens a backoff.  A watch the server refuses (no ``watch``
        permission) falls back to re-reading every ``refresh`` s or when kicked.  Without a
        watch (an injected ``fetch``), re-read every ``refresh`` s or when kicked."""
        from fma_otel.instrument._kubeapi import ApiError, Gone

        backoff = 0.5
        relist = True
        while not self._stopped:
            if relist:
                self._kick.clear()
                res = self.lookup(force=True)  # never raises: a failure is a ``failed`` answer
                if self._stopped:
                    return
                if res.failed:
                    self._back_off(backoff)
                    backoff = min(30.0, backoff * 2)
                    continue
                relist = False
            if self._watch is None:
                backoff = 0.5
                self._pause(self.refresh)
                relist = True
                continue
            assert self.pod_name and self.namespace
            self._watching = True
            began = time.monotonic()
            quick = False
            try:
                self._watch(self.namespace, self.pod_name, self.timeout, self._on_pod, self._rv)
                quick = time.monotonic() - began < self.MIN_WATCH_S  # else the server's timeout
            except Gone:
                relist = True  # our version is too old: read the Pod afresh
                quick = time.monotonic() - began < self.MIN_WATCH_S
            except ApiError:
                self._watching = False
                relist = True  # refused (RBAC, an injected error): poll by re-reading
                self._pause(self.refresh)
            except Exception:  # noqa: BLE001 - a dropped stream; the thread must outlive it
                self._watching = False
                quick = True
            finally:
                self._watching = False
            if quick:
                self._back_off(backoff)
                backoff = min(30.0, backoff * 2)
            else:
                backoff = 0.5
