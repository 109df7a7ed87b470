"""Who is this launcher bound to?  Read the launcher Pod's ``dual-pods.llm-d.ai/requester``.

Why: the Go DPC sends no ``traceparent``, yet the launcher's create span must join the
actuation's trace.  The DPC records the binding on the launcher Pod itself
(``dual-pods.llm-d.ai/requester: "<uid> <name>"``, plus ``dual-pods.llm-d.ai/instance-id``),
so the launcher can derive the trace id from its own Pod.  ``POD_NAME``/``NAMESPACE`` come
from the downward API (the notifier sidecar already uses them); credentials are the Pod's
service account, or a kubeconfig outside a cluster.

Costs are kept off the hot path: the lookup has a short timeout, *failures* (API errors,
timeouts) are cached negatively (a cluster without access must not pay a timeout on every
create), and a successful answer is reused for a create whose instance id matches the
Pod's ``instance-id`` annotation (the binding that answer describes), so the cold path -
where the launcher Pod is created already bound - usually costs nothing at create time
once the start-up prefetch has run.

An *unbound* answer (the Pod was read, but has no requester annotation) is not a failure
and is never reused for a create: a launcher created unbound (by the populator) and bound
moments later must join at its first create.  Such an answer - like a bound one whose
``instance-id`` is another create's - is a miss, and the create pays one bounded ``GET``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REQUESTER_ANNOTATION = "dual-pods.llm-d.ai/requester"
INSTANCE_ID_ANNOTATION = "dual-pods.llm-d.ai/instance-id"

ENV_TIMEOUT = "FMA_OTEL_POD_LOOKUP_TIMEOUT"
ENV_TTL = "FMA_OTEL_POD_CACHE_TTL"


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
    if not value:
        return None, None
    parts = value.split()
    if not parts:
        return None, None
    return parts[0], (parts[1] if len(parts) > 1 else None)


_API: Any = None


def _api() -> Any:
    """One ``CoreV1Api`` per process (building a client is slow: config, pools)."""
    global _API
    if _API is None:
        from kubernetes import client, config

        cfg = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=cfg)
        except Exception:  # noqa: BLE001 - not in a cluster: fall back to kubeconfig
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"), client_configuration=cfg)
        _API = client.CoreV1Api(client.ApiClient(cfg))
    return _API


def _default_fetch(namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """GET the Pod with the ``kubernetes`` client (in-cluster credentials, else kubeconfig).

    Our own kubernetes-client instrumentation is suppressed here: this lookup is plumbing,
    not part of anyone's actuation.
    """
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    api = _api()
    with suppress_instrumentation():
        pod = api.read_namespaced_pod(name, namespace, _request_timeout=timeout)
    meta = pod.metadata
    return {
        "annotations": dict(meta.annotations or {}),
        "node_name": getattr(pod.spec, "node_name", None) if pod.spec else None,
    }


class PodInfo:
    """Cached, time-bounded lookup of the launcher Pod's binding annotations."""

    def __init__(
        self,
        fetch: Callable[[str, str, float], dict[str, Any]] | None = None,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        negative_ttl: float = 15.0,
        env: dict[str, str] | None = None,
    ) -> None:
        e = os.environ if env is None else env
        self._fetch = fetch or _default_fetch
        self.pod_name = e.get("POD_NAME") or None
        self.namespace = e.get("NAMESPACE") or e.get("POD_NAMESPACE") or None
        self.timeout = timeout if timeout is not None else _float(e.get(ENV_TIMEOUT), 0.5)
        self.ttl = ttl if ttl is not None else _float(e.get(ENV_TTL), 60.0)
        self.negative_ttl = negative_ttl
        self._lock = threading.Lock()
        self._last: PodLookup | None = None
        self._started = 0  # fetches begun (under the lock)
        self._last_gen = 0  # which of them produced ``_last``
        self._no_env: PodLookup | None = None

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
        if age >= self.ttl:
            return None
        if instance_id is not None and last.instance_id != instance_id:
            return None  # the answer describes another binding (or cannot say which)
        return last

    def lookup(self, instance_id: str | None = None, *, force: bool = False) -> PodLookup:
        """The requester bound to this launcher (blocking, bounded by ``timeout``).

        Concurrent misses share one ``GET``: an answer whose ``GET`` began after this call
        did is as fresh as a fetch of our own would be, so a caller that waited on the lock
        uses it (one begun earlier - a prefetch in flight - may predate the binding).
        """
        if not self.pod_name or not self.namespace:
            res = self._no_env
            if res is None:  # the same answer every time: made once
                res = self._no_env = PodLookup(reason="POD_NAME/NAMESPACE not set (downward API missing)")
            self._last = res
            return res
        asked = self._started  # fetches begun so far: one begun later is fresher than our ask
        if not force:
            hit = self.cached(instance_id)
            if hit is not None:
                return hit
        with self._lock:
            if not force:
                hit = self.cached(instance_id)
                if hit is not None:
                    return hit
                last = self._last
                if last is not None and self._last_gen > asked:
                    return last
            self._started += 1
            res = self._do_fetch()
            self._last, self._last_gen = res, self._started
            return res

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

    def prefetch(self) -> None:
        """Warm the cache (and the ``kubernetes`` import) in a daemon thread; never raises."""
        if not self.pod_name or not self.namespace:
            return

        def run() -> None:
            try:
                self.lookup(force=True)
            except Exception:  # noqa: BLE001
                pass

        threading.Thread(target=run, name="fma-otel-podinfo", daemon=True).start()


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value else default
    except ValueError:
        return default
