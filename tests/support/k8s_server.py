"""A small Kubernetes API server for tests: Pods, Pod logs, Events and the pod proxy, over the
real wire protocol.

Why a hand-written server and not mocks of the ``kubernetes`` client: the live watcher's
hard parts (resourceVersion bookkeeping, ``410 Gone`` mid-stream, chunked watch streams
cut in the middle, ``pods/log?follow=true&timestamps=true`` across container restarts)
live *in the protocol*, and a mock of the client would only test our assumptions about
it.  Here the real client talks HTTP to a server that behaves like kube-apiserver for the
few endpoints fma-otel uses:

* ``GET /api/v1/namespaces/{ns}/pods`` (and ``/api/v1/pods``): a ``PodList`` with
  ``metadata.resourceVersion``; ``labelSelector`` (``=``, ``==``, ``!=``, ``in``,
  ``notin``, exists, ``!``), ``fieldSelector`` on ``metadata.name``/``metadata.namespace``,
  ``limit``/``continue``.
* the same with ``watch=true``: a chunked stream of ``{"type","object"}`` JSON lines with
  the events after ``resourceVersion`` (all current Pods as ``ADDED`` when it is absent or
  ``0``), blocking for new ones up to ``timeoutSeconds``; ``allowWatchBookmarks`` and
  :meth:`FakeCluster.send_bookmarks`.  A ``resourceVersion`` older than the compaction
  window answers HTTP 200 with an ``ERROR`` event holding a ``Status`` with code 410 (what
  kube-apiserver's watch cache does), or a plain HTTP 410 (``gone_mode="http"``).
  :meth:`FakeCluster.expire_watches` sends that ERROR event to watches already streaming.
* ``GET /api/v1/namespaces/{ns}/pods/{name}`` (404 ``Status`` when absent), ``PATCH`` of a
  Pod with a JSON merge patch (strategic merge is treated as merge), ``DELETE``.
* ``GET .../pods/{name}/log`` with ``container``, ``follow``, ``timestamps`` (kubelet's
  fixed 9-digit RFC3339Nano prefix), ``previous``, ``sinceTime``, ``sinceSeconds``,
  ``tailLines``, ``limitBytes``; a follow stream ends when its container restarts or the
  Pod is deleted, like the kubelet's, after the lines that instance wrote before that.
* ``GET /api/v1/namespaces/{ns}/events`` (and ``/api/v1/events``): core/v1 ``EventList``,
  and its watch, with the Pods' protocol (one revision counter, 410 after
  :meth:`FakeCluster.compact`); :func:`make_event`, :meth:`FakeCluster.add_event`,
  :meth:`FakeCluster.modify_event`.  Events watches are streams of kind ``"events-watch"``.
* ``GET .../pods/{name}:{port}/proxy/{path}``: forwarded, ``Range`` header included, to a
  :class:`FakeLauncher` (the launcher's ``/v2/vllm/instances/{id}/log`` with its byte-range
  rules) registered by :meth:`FakeCluster.add_launcher`; 503 as kube-apiserver answers a
  refused dial when none is registered or it ``refuse`` s, 404 for no such Pod.  Every
  proxied request is in :meth:`FakeCluster.proxied` (its ``Range`` and answer).

Tests drive it through :class:`FakeCluster`: add/modify/delete Pods (each change bumps the
resourceVersion and records a watch event), append container log lines, restart a
container (its log becomes the ``previous`` one), compact history, drop open connections,
inject errors, and read the request log.  :meth:`FakeCluster.configuration` and
:meth:`FakeCluster.write_kubeconfig` point the real client at it.

Usage::

    with FakeCluster() as k8s:
        k8s.add_pod(make_pod("r1", labels={"app": "x"}))
        api = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(k8s.configuration()))
        api.list_namespaced_pod("default")
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.serving import QuietThreadingHTTPServer, serve_in_thread

__all__ = [
    "FakeCluster",
    "FakeLauncher",
    "make_event",
    "make_pod",
    "format_log_timestamp",
    "parse_label_selector",
    "rfc3339",
]

# --------------------------------------------------------------------------- helpers


def rfc3339(t: float | None = None) -> str:
    """A whole-second Kubernetes timestamp (``metav1.Time``), as the API server writes it."""
    t = time.time() if t is None else t
    return datetime.fromtimestamp(int(t), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_log_timestamp(ts_ns: int) -> str:
    """The kubelet's ``timestamps=true`` prefix: RFC3339 with a fixed 9-digit fraction."""
    sec, frac = divmod(ts_ns, 1_000_000_000)
    return datetime.fromtimestamp(sec, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _parse_time(value: str) -> int:
    """RFC3339 (any fraction) -> ns since the epoch."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})", value)
    if not m:
        raise ValueError(f"bad time {value!r}")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    base = datetime.fromisoformat(m.group(1) + zone)
    return int(base.timestamp()) * 1_000_000_000 + int((m.group(2) or "0").ljust(9, "0"))


def _truthy(value: str | None) -> bool:
    """Go's strconv.ParseBool, which the API server uses for query flags."""
    return (value or "").lower() in ("1", "t", "true")


Selector = Callable[[dict[str, str]], bool]


def parse_label_selector(text: str) -> Selector:
    """A label selector string as kube-apiserver accepts it, as a predicate on labels."""
    reqs: list[Selector] = []
    # split on commas that are not inside parentheses
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for raw in parts:
        p = raw.strip()
        if not p:
            continue
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)", p)
        if m:
            key, op = m.group(1), m.group(2)
            vals = {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                reqs.append(lambda lb, k=key, vs=vals: lb.get(k) in vs)
            else:
                reqs.append(lambda lb, k=key, vs=vals: lb.get(k) not in vs)
            continue
        m = re.fullmatch(r"([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)", p)
        if m:
            key, op, val = m.groups()
            if op == "!=":
                reqs.append(lambda lb, k=key, v=val: lb.get(k) != v)
            else:
                reqs.append(lambda lb, k=key, v=val: lb.get(k) == v)
            continue
        m = re.fullmatch(r"(!?)([\w./-]+)", p)
        if m:
            neg, key = m.groups()
            if neg:
                reqs.append(lambda lb, k=key: k not in lb)
            else:
                reqs.append(lambda lb, k=key: k in lb)
            continue
        raise ValueError(f"unable to parse requirement: {p!r}")
    return lambda labels: all(r(labels) for r in reqs)


def _parse_field_selector(text: str) -> Selector:
    """``metadata.name=x,metadata.namespace=y`` (the fields the Pod watch cache indexes)."""
    reqs: list[tuple[str, str, str]] = []
    for p in filter(None, (s.strip() for s in text.split(","))):
        m = re.fullmatch(r"([\w.]+)\s*(==|=|!=)\s*(.*)", p)
        if not m or m.group(1) not in (
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "status.phase",
            "involvedObject.kind",
            "involvedObject.name",
            "involvedObject.uid",
            "reason",
        ):
            raise ValueError(f"field label not supported: {p!r}")
        reqs.append(m.groups())  # type: ignore[arg-type]

    def pred(fields: dict[str, str]) -> bool:
        for key, op, val in reqs:
            eq = fields.get(key, "") == val
            if eq == (op == "!="):
                return False
        return True

    return pred


def _pod_fields(pod: dict[str, Any]) -> dict[str, str]:
    md = pod.get("metadata") or {}
    if pod.get("kind") == "Event" or "involvedObject" in pod:
        ref = pod.get("involvedObject") or {}
        return {
            "metadata.name": md.get("name", ""),
            "metadata.namespace": md.get("namespace", ""),
            "involvedObject.kind": ref.get("kind", ""),
            "involvedObject.name": ref.get("name", ""),
            "involvedObject.uid": ref.get("uid", ""),
            "reason": pod.get("reason", ""),
        }
    return {
        "metadata.name": md.get("name", ""),
        "metadata.namespace": md.get("namespace", ""),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "status.phase": (pod.get("status") or {}).get("phase", ""),
    }


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge_patch(out.get(k), v)
    return out


def status_object(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``metav1.Status`` as the API server sends for errors."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def make_pod(
    name: str,
    namespace: str = "default",
    *,
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    containers: list[str] | None = None,
    created: str | None = None,
    node: str | None = None,
    phase: str = "Pending",
) -> dict[str, Any]:
    """A minimal but well-formed Pod object (what tests need when they do not bring their own)."""
    containers = containers or ["main"]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or str(uuid.uuid4()),
            "creationTimestamp": created or rfc3339(),
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": {"containers": [{"name": c, "image": "example/image:1"} for c in containers]},
        "status": {"phase": phase},
    }
    if node:
        pod["spec"]["nodeName"] = node
    return pod


# --------------------------------------------------------------------------- state


@dataclass
class _Event:
    rv: int
    namespace: str
    type: str  # ADDED MODIFIED DELETED
    old: dict[str, Any] | None
    new: dict[str, Any]
    resource: str = "pods"  # pods | events: one history, one revision counter, like etcd's


@dataclass
class _ContainerLog:
    """One container's log: the current instance and the previous one (after a restart)."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    previous: list[tuple[int, str]] | None = None
    generation: int = 0  # bumped on restart: ends follow streams of the old instance


@dataclass
class _Stream:
    """An open streaming response, so tests can drop it or inject an error into it."""

    kind: str  # "watch" (Pods) | "events-watch" | "log"
    conn: socket.socket
    killed: bool = False
    expire: bool = False
    bookmark: bool = False


@dataclass
class RequestRecord:
    """One request the server answered (for assertions such as "it relisted")."""

    method: str
    path: str
    query: dict[str, str]
    status: int = 0


#: The launcher's ``MAX_LOG_RESPONSE_BYTES``: one answer of its log endpoint holds at most this.
LAUNCHER_MAX_LOG_RESPONSE_BYTES = 1 << 20

_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


@dataclass
class ProxyRequest:
    """One request that reached (or was refused on the way to) a Pod through pods/proxy."""

    namespace: str
    pod: str
    port: int | None
    method: str
    path: str
    range: str | None
    status: int
    sent: int = 0  # body bytes answered


class FakeLauncher:
    """The FMA launcher's instance-log endpoint, in process, behind the fake pods/proxy.

    ``GET /v2/vllm/instances/{id}/log`` as ``/work/shared/fma-reference.md`` §3.3 has it:
    ``Range: bytes=S-E`` or ``bytes=S-`` answered 206 with ``Content-Range: bytes S-E/TOTAL``
    and at most :data:`LAUNCHER_MAX_LOG_RESPONSE_BYTES` bytes; no Range: 200 with the first
    such bytes; a start past the end: 416 with ``Content-Range: bytes */TOTAL``; a bad
    Range: 400; an unknown instance: 404 (FastAPI ``{"detail": ...}`` bodies).  ``refuse``
    makes the API server answer as it does when nothing listens on the port (503).
    """

    def __init__(self, max_response: int = LAUNCHER_MAX_LOG_RESPONSE_BYTES) -> None:
        self.max_response = max_response
        self.logs: dict[str, bytearray] = {}
        self.refuse = False
        self.lock = threading.Lock()

    def append(self, instance_id: str, data: str | bytes) -> None:
        """Append to an instance's log file (creating the instance)."""
        with self.lock:
            self.logs.setdefault(instance_id, bytearray()).extend(
                data.encode() if isinstance(data, str) else data
            )

    def delete(self, instance_id: str) -> None:
        """The instance is deleted, and its log with it."""
        with self.lock:
            self.logs.pop(instance_id, None)

    def handle(self, method: str, path: str, range_header: str | None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one request."""

        def detail(code: int, text: str) -> tuple[int, dict[str, str], bytes]:
            return code, {"Content-Type": "application/json"}, json.dumps({"detail": text}).encode()

        m = re.fullmatch(r"/v2/vllm/instances/([^/]+)/log", path)
        if m is None or method != "GET":
            return detail(404, "Not Found")
        with self.lock:
            data = self.logs.get(m.group(1))
            data = None if data is None else bytes(data)
        if data is None:
            return detail(404, f"Instance {m.group(1)} not found")
        total = len(data)
        start, end = 0, None
        if range_header is not None:
            rm = _RANGE.fullmatch(range_header.strip())
            if rm is None or (rm.group(2) and int(rm.group(2)) < int(rm.group(1))):
                return detail(400, f"Invalid range header: {range_header}")
            start = int(rm.group(1))
            end = int(rm.group(2)) if rm.group(2) else None
        if start >= total and (range_header is not None or total):
            return 416, {"Content-Range": f"bytes */{total}", "Content-Type": "application/json"}, b"{}"
        last = total - 1 if end is None else min(end, total - 1)
        last = min(last, start + self.max_response - 1)
        body = data[start : last + 1]
        headers = {"Content-Type": "application/octet-stream"}
        if total:
            headers["Content-Range"] = f"bytes {start}-{last}/{total}"
        return (206 if range_header is not None else 200), headers, body


def make_event(
    reason: str,
    message: str,
    *,
    pod: dict[str, Any] | None = None,
    pod_name: str | None = None,
    namespace: str = "default",
    kind: str = "Pod",
    container: str | None = None,
    etype: str = "Normal",
    component: str = "kubelet",
    host: str | None = None,
    first: float | None = None,
    last: float | None = None,
    count: int = 1,
    event_time_us: int | None = None,
) -> dict[str, Any]:
    """A core/v1 Event as the API server stores it (``kubectl get events -o json`` items).

    ``event_time_us`` (µs since the epoch) sets ``eventTime``, as the scheduler's events
    carry; the kubelet's have whole-second ``firstTimestamp``/``lastTimestamp`` only.
    """
    md = (pod or {}).get("metadata") or {}
    ref: dict[str, Any] = {
        "kind": kind,
        "namespace": md.get("namespace", namespace),
        "name": pod_name or md.get("name", ""),
        "apiVersion": "v1",
    }
    if md.get("uid"):
        ref["uid"] = md["uid"]
    if container:
        ref["fieldPath"] = f"spec.containers{{{container}}}"
    ev: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": ref["namespace"]},
        "involvedObject": ref,
        "reason": reason,
        "message": message,
        "type": etype,
        "source": {"component": component, **({"host": host} if host else {})},
        "reportingComponent": component,
        "count": count,
    }
    if event_time_us is not None:
        sec, us = divmod(event_time_us, 1_000_000)
        stamp = datetime.fromtimestamp(sec, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        ev["eventTime"] = f"{stamp}.{us:06d}Z"
        ev["firstTimestamp"] = None
        ev["lastTimestamp"] = None
    else:
        ev["firstTimestamp"] = rfc3339(first)
        ev["lastTimestamp"] = rfc3339(last if last is not None else first)
    return ev


#: core/v1 Event field -> its events.k8s.io/v1 name (kube-apiserver's conversion)
_EVENTS_V1_NAMES = {
    "involvedObject": "regarding",
    "message": "note",
    "source": "deprecatedSource",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}


def events_v1(event: dict[str, Any]) -> dict[str, Any]:
    """A core/v1 Event as events.k8s.io/v1 serves the same object."""
    out = {_EVENTS_V1_NAMES.get(k, k): v for k, v in event.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    return out


class FakeCluster:
    """The state behind the test server, and the API tests use to change it.

    Every mutation takes the one lock and notifies waiting streams; resourceVersions are
    one global counter like etcd's revision.
    """

    def __init__(
        self, *, gone_mode: str = "event", max_watch_seconds: float = 300.0, start_rv: int = 1000
    ) -> None:
        if gone_mode not in ("event", "http"):
            raise ValueError("gone_mode is 'event' or 'http'")
        self.gone_mode = gone_mode
        self.max_watch_seconds = max_watch_seconds
        self.cond = threading.Condition()
        self.rv = start_rv
        self.compacted_rv = start_rv
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[_Event] = []
        self.kube_events: dict[tuple[str, str], dict[str, Any]] = {}  # core/v1 Event objects
        self.backends: dict[tuple[str, str, int], FakeLauncher] = {}  # pods/proxy targets
        self.proxy_requests: list[ProxyRequest] = []
        self.logs: dict[tuple[str, str, str], _ContainerLog] = {}
        self.streams: list[_Stream] = []
        self.requests: list[RequestRecord] = []
        self._errors: list[tuple[str, re.Pattern[str], int, int]] = []  # method, path re, code, remaining
        self._log_delays: list[tuple[re.Pattern[str], float, int]] = []  # path re, seconds, remaining
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeCluster:
        """Listen on 127.0.0.1 at an ephemeral port, serving from a daemon thread."""
        handler = type("Handler", (_Handler,), {"cluster": self})
        self._server = QuietThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = serve_in_thread(self._server, "fake-k8s")
        return self

    def stop(self) -> None:
        """Stop serving and end every open stream."""
        with self.cond:
            self._stopping = True
            for s in self.streams:
                s.killed = True
            self.cond.notify_all()
        self.drop_connections()
        if self._server:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> FakeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def configuration(self) -> Any:
        """A ``kubernetes.client.Configuration`` pointing at this server."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        cfg.verify_ssl = False
        return cfg

    def write_kubeconfig(self, path: str, namespace: str = "default") -> str:
        """Write a kubeconfig file for this server (what ``--kubeconfig`` is given)."""
        return write_kubeconfig(path, self.url, namespace=namespace)

    # ------------------------------------------------------------------ pods

    def _record(
        self, etype: str, old: dict[str, Any] | None, new: dict[str, Any], resource: str = "pods"
    ) -> dict[str, Any]:
        self.rv += 1
        new["metadata"]["resourceVersion"] = str(self.rv)
        ns = new["metadata"].get("namespace", "default")
        self.events.append(_Event(self.rv, ns, etype, old, copy.deepcopy(new), resource))
        self.cond.notify_all()
        return copy.deepcopy(new)

    def add_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Create a Pod (ADDED); fills uid/namespace/creationTimestamp when absent."""
        pod = copy.deepcopy(pod)
        pod.setdefault("apiVersion", "v1")
        pod.setdefault("kind", "Pod")
        md = pod.setdefault("metadata", {})
        md.setdefault("namespace", "default")
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", rfc3339())
        key = (md["namespace"], md["name"])
        with self.cond:
            if key in self.pods:
                raise ValueError(f"pod {key} exists")
            self.pods[key] = pod
            return self._record("ADDED", None, pod)

    def get_pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.pods[(namespace, name)])

    def modify_pod(
        self,
        name: str,
        namespace: str = "default",
        *,
        patch: dict[str, Any] | None = None,
        mutate: Callable[[dict[str, Any]], None] | None = None,
        replace: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Change a Pod (MODIFIED): a merge patch, an in-place function, or a whole object."""
        with self.cond:
            old = self.pods[(namespace, name)]
            if replace is not None:
                new = copy.deepcopy(replace)
                new.setdefault("metadata", {}).update(namespace=namespace, name=name)
                new["metadata"].setdefault("uid", old["metadata"].get("uid"))
            else:
                new = copy.deepcopy(old)
                if patch is not None:
                    new = _merge_patch(new, patch)
                if mutate is not None:
                    mutate(new)
            self.pods[(namespace, name)] = new
            return self._record("MODIFIED", copy.deepcopy(old), new)

    def delete_pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """Delete a Pod (DELETED); its follow log streams end, its logs are gone."""
        with self.cond:
            old = self.pods.pop((namespace, name))
            for k in [k for k in self.logs if k[0] == namespace and k[1] == name]:
                self.logs[k].generation += 1
                del self.logs[k]
            return self._record("DELETED", copy.deepcopy(old), copy.deepcopy(old))

    def apply_pod(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Add or replace (convenient for replaying a capture's Pod states in order)."""
        md = pod["metadata"]
        key = (md.get("namespace", "default"), md["name"])
        with self.cond:
            exists = key in self.pods
        if exists:
            return self.modify_pod(key[1], key[0], replace=pod)
        return self.add_pod(pod)

    def compact(self) -> int:
        """Forget all history up to now: a watch from an older resourceVersion gets 410.

        The revision moves on first (as etcd's does with the writes that precede a
        compaction), so even a watcher that had seen every event is then too old: otherwise
        whether it gets 410 would depend on a race with its last event.
        """
        with self.cond:
            self.rv += 1
            self.compacted_rv = self.rv
            self.events = [e for e in self.events if e.rv > self.compacted_rv]
            return self.compacted_rv

    def expire_watches(self, kind: str = "watch") -> None:
        """Compact, and send ``ERROR`` 410 to every open watch of ``kind`` (then end it):
        ``"watch"`` the Pod watches, ``"events-watch"`` the Events watches."""
        with self.cond:
            self.compact()
            for s in self.streams:
                if s.kind == kind:
                    s.expire = True
            self.cond.notify_all()

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK with the current resourceVersion to watches that allow them."""
        with self.cond:
            for s in self.streams:
                if s.kind in ("watch", "events-watch"):
                    s.bookmark = True
            self.cond.notify_all()

    def drop_connections(self, kind: str | None = None) -> int:
        """Cut open streams (``"watch"``, ``"log"`` or all) mid-response, like a broken LB."""
        with self.cond:
            victims = [s for s in self.streams if kind is None or s.kind == kind]
            for s in victims:
                s.killed = True
            self.cond.notify_all()
        for s in victims:
            try:
                s.conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return len(victims)

    def inject_error(self, method: str, path_regex: str, code: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` matching requests with ``code`` (a Status body)."""
        with self.cond:
            self._errors.append((method.upper(), re.compile(path_regex), code, count))

    def delay_log_body(self, path_regex: str, seconds: float, count: int = 1) -> None:
        """Send the body of the next ``count`` matching ``pods/log`` answers ``seconds`` after
        their headers (a loaded kubelet or link): the client has its response, and no line yet."""
        with self.cond:
            self._log_delays.append((re.compile(path_regex), seconds, count))

    def _take_log_delay(self, path: str) -> float:
        with self.cond:
            for i, (rx, seconds, left) in enumerate(self._log_delays):
                if rx.search(path):
                    if left <= 1:
                        self._log_delays.pop(i)
                    else:
                        self._log_delays[i] = (rx, seconds, left - 1)
                    return seconds
        return 0.0

    def open_streams(self, kind: str | None = None) -> int:
        with self.cond:
            return sum(1 for s in self.streams if kind is None or s.kind == kind)

    def wait_for_streams(self, kind: str, n: int = 1, timeout: float = 5.0) -> bool:
        """Wait until at least ``n`` streams of ``kind`` are open (a client has (re)connected)."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while sum(1 for s in self.streams if s.kind == kind) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def requests_to(self, path_contains: str, **query: str) -> list[RequestRecord]:
        """Requests whose path contains a string and whose query has the given values."""
        with self.cond:
            return [
                r
                for r in self.requests
                if path_contains in r.path and all(r.query.get(k) == v for k, v in query.items())
            ]

    # ------------------------------------------------------------------ events (core/v1)

    def add_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """Create an Event object (ADDED in an events watch); see :func:`make_event`."""
        event = copy.deepcopy(event)
        event.setdefault("apiVersion", "v1")
        event.setdefault("kind", "Event")
        md = event.setdefault("metadata", {})
        md.setdefault("namespace", "default")
        md.setdefault("uid", str(uuid.uuid4()))
        md.setdefault("creationTimestamp", rfc3339())
        if not md.get("name"):
            ref = event.get("involvedObject") or {}
            md["name"] = f"{ref.get('name', 'x')}.{uuid.uuid4().hex[:16]}"
        key = (md["namespace"], md["name"])
        with self.cond:
            if key in self.kube_events:
                raise ValueError(f"event {key} exists")
            self.kube_events[key] = event
            return self._record("ADDED", None, event, "events")

    def modify_event(self, name: str, namespace: str = "default", *, patch: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch an Event (MODIFIED), as the kubelet does when it counts a repeat."""
        with self.cond:
            old = self.kube_events[(namespace, name)]
            new = _merge_patch(old, patch)
            self.kube_events[(namespace, name)] = new
            return self._record("MODIFIED", copy.deepcopy(old), new, "events")

    # ------------------------------------------------------------------ pods/proxy

    def add_launcher(self, pod: str, namespace: str = "default", port: int = 8001) -> FakeLauncher:
        """An in-process launcher behind ``pods/{pod}:{port}/proxy`` (its log endpoint)."""
        backend = FakeLauncher()
        with self.cond:
            self.backends[(namespace, pod, port)] = backend
        return backend

    def proxied(self, pod: str | None = None) -> list[ProxyRequest]:
        """The pods/proxy requests answered so far (of one Pod, or all)."""
        with self.cond:
            return [r for r in self.proxy_requests if pod is None or r.pod == pod]

    # ------------------------------------------------------------------ logs

    def _log(self, namespace: str, pod: str, container: str) -> _ContainerLog:
        return self.logs.setdefault((namespace, pod, container), _ContainerLog())

    def append_log(
        self, pod: str, container: str, *lines: str, namespace: str = "default", ts_ns: int | None = None
    ) -> None:
        """Append lines to a container's current log, stamped now (or at ``ts_ns``, +1 ns each)."""
        with self.cond:
            log = self._log(namespace, pod, container)
            for i, line in enumerate(lines):
                t = (ts_ns + i) if ts_ns is not None else time.time_ns()
                if log.lines and t < log.lines[-1][0]:
                    t = log.lines[-1][0]  # a container's log is in time order
                log.lines.append((t, line.rstrip("\n")))
            self.cond.notify_all()

    def log_lines(
        self, pod: str, container: str, namespace: str = "default", previous: bool = False
    ) -> list[str]:
        with self.cond:
            log = self._log(namespace, pod, container)
            src = log.previous if previous else log.lines
            return [line for _, line in (src or [])]

    def restart_container(
        self, pod: str, container: str, namespace: str = "default", update_status: bool = True
    ) -> None:
        """The container exits and starts again: its log becomes ``previous``, follows end."""
        with self.cond:
            log = self._log(namespace, pod, container)
            log.previous = log.lines
            log.lines = []
            log.generation += 1
            self.cond.notify_all()
        if update_status and (namespace, pod) in self.pods:

            def bump(p: dict[str, Any]) -> None:
                statuses = p.setdefault("status", {}).setdefault("containerStatuses", [])
                for cs in statuses:
                    if cs.get("name") == container:
                        cs["restartCount"] = int(cs.get("restartCount", 0)) + 1
                        cs["state"] = {"running": {"startedAt": rfc3339()}}
                        break
                else:
                    statuses.append(
                        {
                            "name": container,
                            "restartCount": 1,
                            "ready": True,
                            "state": {"running": {"startedAt": rfc3339()}},
                        }
                    )

            self.modify_pod(pod, namespace, mutate=bump)


# --------------------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    cluster: FakeCluster
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver/0.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    # ------------------------------------------------------------------ plumbing

    def _send_json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, message: str, reason: str | None = None) -> None:
        reason = reason or {
            400: "BadRequest",
            404: "NotFound",
            405: "MethodNotAllowed",
            410: "Expired",
            415: "UnsupportedMediaType",
            500: "InternalError",
        }.get(code, HTTPStatus(code).phrase.replace(" ", ""))
        self._send_json(code, status_object(code, reason, message))

    def _start_chunked(self, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _end_chunked(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _route(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        rec = RequestRecord(method, path, query)
        c = self.cluster
        with c.cond:
            c.requests.append(rec)
            for i, (m, rx, code, left) in enumerate(c._errors):
                if m == method and rx.search(path):
                    if left <= 1:
                        c._errors.pop(i)
                    else:
                        c._errors[i] = (m, rx, code, left - 1)
                    rec.status = code
                    break
        if rec.status:
            self._status(rec.status, f"injected error {rec.status}")
            return
        try:
            rec.status = self._dispatch(method, path, query) or 200
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True

    #: which API an Events request came through: ``v1`` or ``events.k8s.io/v1``
    events_api = "v1"

    def _wire(self, obj: dict[str, Any]) -> dict[str, Any]:
        """An object as the requested API writes it (a core/v1 Event converted to
        events.k8s.io/v1 when asked through that API; anything else as stored)."""
        if self.events_api != "events.k8s.io/v1" or obj.get("kind", "Event") != "Event":
            return obj
        return events_v1(obj)

    def _dispatch(self, method: str, path: str, query: dict[str, str]) -> int | None:
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/log", path)
        if m and method == "GET":
            return self._pod_log(m.group(1), m.group(2), query)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/proxy(/.*)?", path)
        if m:
            return self._proxy(method, m.group(1), m.group(2), m.group(3) or "/")
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/events|/api/v1/events", path)
        m2 = re.fullmatch(
            r"/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events|/apis/events\.k8s\.io/v1/events", path
        )
        if (m or m2) and method == "GET":
            # the same Event objects through either API, as kube-apiserver converts them
            self.events_api = "events.k8s.io/v1" if m2 else "v1"
            ns = (m or m2).group(1)  # type: ignore[union-attr]
            if _truthy(query.get("watch")):
                return self._watch(ns, query, "events")
            return self._list(ns, query, "events")
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", path)
        if m:
            return self._pod(method, m.group(1), m.group(2))
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods|/api/v1/pods", path)
        if m and method == "GET":
            ns = m.group(1)
            if _truthy(query.get("watch")):
                return self._watch(ns, query)
            return self._list(ns, query)
        if path in ("/healthz", "/readyz", "/livez"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return 200
        if path == "/version":
            self._send_json(200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake"})
            return 200
        self._status(404, f"the server could not find the requested resource ({method} {path})")
        return 404

    def do_GET(self) -> None:  # noqa: N802
        self._route("GET")

    def do_PATCH(self) -> None:  # noqa: N802
        self._route("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._route("DELETE")

    # ------------------------------------------------------------------ pods

    def _selectors(self, query: dict[str, str]) -> tuple[Selector, Selector] | None:
        try:
            return (
                parse_label_selector(query.get("labelSelector", "")),
                _parse_field_selector(query.get("fieldSelector", "")),
            )
        except ValueError as exc:
            self._status(400, str(exc))
            return None

    @staticmethod
    def _matches(pod: dict[str, Any] | None, ns: str | None, sel: tuple[Selector, Selector]) -> bool:
        if pod is None:
            return False
        md = pod.get("metadata") or {}
        if ns is not None and md.get("namespace") != ns:
            return False
        return sel[0](md.get("labels") or {}) and sel[1](_pod_fields(pod))

    def _list(self, ns: str | None, query: dict[str, str], resource: str = "pods") -> int:
        sel = self._selectors(query)
        if sel is None:
            return 400
        c = self.cluster
        start_after = ""
        if query.get("continue"):
            try:
                tok = json.loads(base64.urlsafe_b64decode(query["continue"].encode()))
                start_after, tok_rv = tok["start"], int(tok["rv"])
            except (ValueError, KeyError):
                self._status(400, "invalid continue token")
                return 400
            if tok_rv < c.compacted_rv:
                self._status(410, "The provided continue parameter is too old", "Expired")
                return 410
        store = c.pods if resource == "pods" else c.kube_events
        with c.cond:
            items = sorted(
                (copy.deepcopy(p) for p in store.values() if self._matches(p, ns, sel)),
                key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"]),
            )
            rv = c.rv
        items = [
            p for p in items if f"{p['metadata'].get('namespace')}/{p['metadata']['name']}" > start_after
        ]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        limit = int(query.get("limit") or 0)
        if limit and len(items) > limit:
            items = items[:limit]
            last = items[-1]["metadata"]
            tok = {"rv": rv, "start": f"{last.get('namespace')}/{last['name']}"}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(tok).encode()).decode()
        items = [self._wire(p) for p in items]
        for p in items:  # list items carry no kind/apiVersion, like the real server's
            p.pop("kind", None)
            p.pop("apiVersion", None)
        kind = "PodList" if resource == "pods" else "EventList"
        api = self.events_api if resource == "events" else "v1"
        self._send_json(200, {"kind": kind, "apiVersion": api, "metadata": meta, "items": items})
        return 200

    def _pod(self, method: str, ns: str, name: str) -> int:
        c = self.cluster
        if method == "GET":
            with c.cond:
                pod = copy.deepcopy(c.pods.get((ns, name)))
            if pod is None:
                self._status(404, f'pods "{name}" not found')
                return 404
            self._send_json(200, pod)
            return 200
        if method == "DELETE":
            try:
                pod = c.delete_pod(name, ns)
            except KeyError:
                self._status(404, f'pods "{name}" not found')
                return 404
            self._send_json(200, pod)
            return 200
        if method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                self._status(415, f"unsupported patch type {ctype!r}")
                return 415
            try:
                patch = json.loads(body or b"{}")
                pod = c.modify_pod(name, ns, patch=patch)
            except KeyError:
                self._status(404, f'pods "{name}" not found')
                return 404
            except ValueError as exc:
                self._status(400, str(exc))
                return 400
            self._send_json(200, pod)
            return 200
        self._status(405, f"method {method} not allowed")
        return 405

    # ------------------------------------------------------------------ watch

    def _register(self, kind: str) -> _Stream:
        s = _Stream(kind, self.connection)
        with self.cluster.cond:
            self.cluster.streams.append(s)
            self.cluster.cond.notify_all()
        return s

    def _unregister(self, s: _Stream) -> None:
        with self.cluster.cond:
            if s in self.cluster.streams:
                self.cluster.streams.remove(s)
            self.cluster.cond.notify_all()

    def _watch(self, ns: str | None, query: dict[str, str], resource: str = "pods") -> int:
        sel = self._selectors(query)
        if sel is None:
            return 400
        c = self.cluster
        rv_param = query.get("resourceVersion", "")
        bookmarks = _truthy(query.get("allowWatchBookmarks"))
        timeout = float(query.get("timeoutSeconds") or c.max_watch_seconds)
        timeout = min(timeout, c.max_watch_seconds)
        try:
            from_rv = int(rv_param) if rv_param not in ("", "0") else None
        except ValueError:
            self._status(400, f"invalid resourceVersion {rv_param!r}")
            return 400
        gone = from_rv is not None and from_rv < c.compacted_rv
        if gone and c.gone_mode == "http":
            self._status(410, f"too old resource version: {from_rv} ({c.compacted_rv})", "Expired")
            self.close_connection = True
            return 410
        self._start_chunked("application/json")
        if gone:
            err = status_object(410, "Expired", f"too old resource version: {from_rv} ({c.compacted_rv})")
            self._chunk(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
            self._end_chunked()
            return 200
        # an Events watch is its own kind of stream, so that tests of the Pod watch (which
        # count, expire and cut "watch" streams) see only theirs
        stream = self._register("watch" if resource == "pods" else "events-watch")
        try:
            with c.cond:
                if from_rv is None:  # initial events: the current state as ADDED
                    store = c.pods if resource == "pods" else c.kube_events
                    initial = [copy.deepcopy(p) for p in store.values() if self._matches(p, ns, sel)]
                    pos = c.rv
                else:
                    initial = []
                    pos = from_rv
            for p in initial:
                self._chunk(json.dumps({"type": "ADDED", "object": self._wire(p)}).encode() + b"\n")
            deadline = time.monotonic() + timeout
            while True:
                with c.cond:
                    while True:
                        if stream.killed or c._stopping:
                            raise ConnectionAbortedError
                        pending = [e for e in c.events if e.rv > pos and e.resource == resource]
                        if pending or stream.expire or stream.bookmark:
                            break
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        c.cond.wait(min(left, 0.5))
                    expire, stream.expire = stream.expire, False
                    bookmark, stream.bookmark = stream.bookmark, False
                    current_rv = c.rv
                out: list[dict[str, Any]] = []
                for e in pending:
                    pos = e.rv
                    was, now = self._matches(e.old, ns, sel), self._matches(e.new, ns, sel)
                    if e.type == "DELETED":
                        if was:
                            out.append({"type": "DELETED", "object": e.new})
                    elif was and now:
                        out.append({"type": "MODIFIED", "object": e.new})
                    elif now:
                        out.append({"type": "ADDED", "object": e.new})
                    elif was:
                        out.append({"type": "DELETED", "object": e.new})
                for ev in out:
                    ev["object"] = self._wire(ev["object"])
                    self._chunk(json.dumps(ev).encode() + b"\n")
                if expire:
                    err = status_object(410, "Expired", f"too old resource version: {pos} ({c.compacted_rv})")
                    self._chunk(json.dumps({"type": "ERROR", "object": err}).encode() + b"\n")
                    break
                if bookmark and bookmarks:
                    pos = max(pos, current_rv)
                    kind = "Pod" if resource == "pods" else "Event"
                    api = self.events_api if resource == "events" else "v1"
                    bm = {"kind": kind, "apiVersion": api, "metadata": {"resourceVersion": str(pos)}}
                    self._chunk(json.dumps({"type": "BOOKMARK", "object": bm}).encode() + b"\n")
                if time.monotonic() >= deadline and not pending:
                    break
            self._end_chunked()
        except ConnectionAbortedError:
            self.close_connection = True
        finally:
            self._unregister(stream)
        return 200

    # ------------------------------------------------------------------ pods/proxy

    def _proxy(self, method: str, ns: str, target: str, rest: str) -> int:
        """``pods/{name}[:port]/proxy/...``: forwarded (Range header included) to the
        :class:`FakeLauncher` registered for that Pod and port; the answer goes back as is.
        Nothing registered, or ``refuse``: 503 as kube-apiserver answers a refused dial."""
        c = self.cluster
        name, _, port_text = target.partition(":")
        port = int(port_text) if port_text.isdigit() else None
        rng = self.headers.get("Range")
        rec = ProxyRequest(ns, name, port, method, rest, rng, 0)
        with c.cond:
            c.proxy_requests.append(rec)
            exists = (ns, name) in c.pods
            backend = c.backends.get((ns, name, port or 80))
        if not exists:
            rec.status = 404
            self._status(404, f'pods "{name}" not found')
            return 404
        if backend is None or backend.refuse:
            rec.status = 503
            self._status(
                503,
                f"error trying to reach service: dial tcp 10.0.0.7:{port or 80}: connect: connection refused",
                "ServiceUnavailable",
            )
            return 503
        code, headers, body = backend.handle(method, rest, rng)
        rec.status, rec.sent = code, len(body)
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        return code

    # ------------------------------------------------------------------ logs

    def _pod_log(self, ns: str, name: str, query: dict[str, str]) -> int:
        c = self.cluster
        with c.cond:
            pod = copy.deepcopy(c.pods.get((ns, name)))
        if pod is None:
            self._status(404, f'pods "{name}" not found')
            return 404
        names = [ct.get("name") for ct in (pod.get("spec") or {}).get("containers") or []]
        container = query.get("container") or ""
        if not container:
            if len(names) != 1:
                self._status(
                    400,
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
                )
                return 400
            container = names[0]
        elif container not in names:
            self._status(400, f"container {container} is not valid for pod {name}")
            return 400
        follow = _truthy(query.get("follow"))
        stamps = _truthy(query.get("timestamps"))
        previous = _truthy(query.get("previous"))
        since_ns: int | None = None
        try:
            if query.get("sinceTime"):
                since_ns = _parse_time(query["sinceTime"])
            elif query.get("sinceSeconds"):
                since_ns = time.time_ns() - int(query["sinceSeconds"]) * 1_000_000_000
            tail = int(query["tailLines"]) if query.get("tailLines") else None
            limit_bytes = int(query["limitBytes"]) if query.get("limitBytes") else None
        except ValueError as exc:
            self._status(400, str(exc))
            return 400
        with c.cond:
            log = c._log(ns, name, container)
            if previous:
                if log.previous is None:
                    self._status(
                        400, f'previous terminated container "{container}" in pod "{name}" not found'
                    )
                    return 400
                src = log.previous
                follow = False  # a terminated container's log does not grow
            else:
                src = log.lines  # this instance's lines (a restart or deletion swaps the list)
            lines = list(src)
            gen = log.generation
        sent = len(lines)
        if since_ns is not None:
            lines = [ln for ln in lines if ln[0] >= since_ns]
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        budget = [limit_bytes if limit_bytes is not None else -1]

        def emit(batch: list[tuple[int, str]]) -> bool:
            data = b"".join(
                ((format_log_timestamp(t) + " ") if stamps else "").encode() + text.encode() + b"\n"
                for t, text in batch
            )
            if budget[0] >= 0:
                data = data[: budget[0]]
                budget[0] -= len(data)
            self._chunk(data)
            return budget[0] != 0

        self._start_chunked("text/plain")
        stream = self._register("log") if follow else None
        try:
            delay = c._take_log_delay(urlsplit(self.path).path)
            if delay:
                self.wfile.flush()
                time.sleep(delay)
            more = emit(lines)
            while follow and more:
                with c.cond:
                    while True:
                        if stream is not None and (stream.killed or c._stopping):
                            raise ConnectionAbortedError
                        cur = c.logs.get((ns, name, container))
                        if cur is None or cur.generation != gen:
                            # container restarted or Pod deleted: like the kubelet, which
                            # reads the instance's log file to its end, the stream still
                            # carries every line written before that, then ends
                            batch, ended = src[sent:], True
                            sent = len(src)
                            break
                        if len(src) > sent:
                            batch, ended = src[sent:], False
                            sent = len(src)
                            break
                        c.cond.wait(0.5)
                if batch:
                    more = emit(batch)
                if ended:
                    break
            self._end_chunked()
        except ConnectionAbortedError:
            self.close_connection = True
        finally:
            if stream is not None:
                self._unregister(stream)
        return 200


def iter_events(resp: Any) -> Iterator[dict[str, Any]]:
    """Decode a raw watch response (urllib3) into event dicts: a convenience for tests."""
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


def write_kubeconfig(
    path: str | os.PathLike[str],
    server: str,
    user: dict[str, Any] | None = None,
    namespace: str = "default",
) -> str:
    """Write a one-context kubeconfig for ``server`` (``user`` defaults to a bearer token);
    its path.  For a server that is not a :class:`FakeCluster` too (hung, down)."""
    import yaml

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "fake", "user": user if user is not None else {"token": "test-token"}}],
        "contexts": [
            {"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}
        ],
        "current-context": "fake",
    }
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(doc, fh)
    return str(path)
