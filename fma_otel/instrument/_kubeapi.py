"""Just enough of the Kubernetes API for the launcher's own-Pod lookup: GET one Pod, watch it.

Why not the ``kubernetes`` client: importing it grows the launcher by tens of MB, and every
``fork()`` of a vLLM instance copies the page tables of that memory, so each create got
slower with the lookup configured whatever the API server's state.  ``urllib3`` is already
loaded by the OTLP/HTTP exporter and ``json`` is in the standard library, so the lookup
costs the launcher almost nothing.

Credentials: in a cluster, the Pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT``,
its CA file, its token file - re-read on every connect, since bound tokens rotate).  Outside
a cluster, a kubeconfig whose user has a token, a token file or a client certificate; any
other kind of user (``exec``, ``auth-provider``, basic auth) is refused with a clear error,
and the lookup is then off (the create span says why).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: The server ends a watch after this many seconds; we then reconnect from the last version.
WATCH_SECONDS = 300


class KubeConfigError(Exception):
    """No usable credentials (not in a cluster, no kubeconfig, an unsupported user)."""


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Gone(ApiError):
    """410: the resourceVersion we watch from is too old; the caller must re-list."""


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate to it."""

    server: str
    token: str | None = None
    #: Read on every connect (a projected service-account token is rotated in place).
    token_file: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    insecure: bool = False

    def headers(self) -> dict[str, str]:
        token = self.token
        if self.token_file:
            with open(self.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        h = {"Accept": "application/json"}
        if token:
            h["Authorization"] = f"Bearer {token}"
        return h


def in_cluster(env: Any = None, sa_dir: str = SA_DIR) -> Credentials | None:
    """The Pod's service-account credentials, or ``None`` outside a cluster."""
    e = os.environ if env is None else env
    host, port = e.get("KUBERNETES_SERVICE_HOST"), e.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        return None
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    token_file = os.path.join(sa_dir, "token")
    if not os.path.exists(token_file):
        raise KubeConfigError(f"in a cluster (KUBERNETES_SERVICE_HOST set) but no {token_file}")
    return Credentials(
        server=f"https://{host}:{port}", token_file=token_file, ca_file=os.path.join(sa_dir, "ca.crt")
    )


def _read_kubeconfig(path: str) -> dict[str, Any]:
    """A kubeconfig's document.  One written as JSON (``kubectl config view -o json``; JSON
    is YAML too) is read with ``json``: PyYAML, imported only for YAML ones, adds more than
    a megabyte to the launcher, which every ``fork()`` of a vLLM instance then copies the
    page tables of."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise KubeConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    else:
        import yaml  # only outside a cluster, for a YAML kubeconfig

        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise KubeConfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeConfigError(f"cannot read kubeconfig {path}: not a mapping")
    return doc


def from_kubeconfig(path: str) -> Credentials:
    """The current context's cluster and user of a kubeconfig (token or client-cert users)."""
    doc = _read_kubeconfig(path)
    base = os.path.dirname(os.path.abspath(path))

    def named(kind: str, name: str | None) -> dict[str, Any]:
        items = doc.get(kind) or []
        for item in items:
            if name is None or item.get("name") == name:
                return item.get(kind[:-1]) or {}
        raise KubeConfigError(f"kubeconfig {path}: no {kind[:-1]} {name!r}")

    ctx = named("contexts", doc.get("current-context"))
    cluster = named("clusters", ctx.get("cluster"))
    user = named("users", ctx.get("user")) if ctx.get("user") or doc.get("users") else {}
    server = cluster.get("server")
    if not server:
        raise KubeConfigError(f"kubeconfig {path}: the cluster has no server")
    for unsupported in ("exec", "auth-provider", "username"):
        if unsupported in user:
            raise KubeConfigError(
                f"kubeconfig {path}: a user with {unsupported!r} is not supported by the launcher's "
                "Pod lookup (use in-cluster credentials, a token or a client certificate)"
            )

    def rel(p: str | None) -> str | None:
        return None if not p else (p if os.path.isabs(p) else os.path.join(base, p))

    ca_data = cluster.get("certificate-authority-data")
    return Credentials(
        server=server.rstrip("/"),
        token=user.get("token"),
        token_file=rel(user.get("tokenFile")),
        ca_file=rel(cluster.get("certificate-authority")),
        ca_data=base64.b64decode(ca_data).decode("ascii") if ca_data else None,
        cert_file=rel(user.get("client-certificate")),
        key_file=rel(user.get("client-key")),
        cert_data=base64.b64decode(user["client-certificate-data"])
        if user.get("client-certificate-data")
        else None,
        key_data=base64.b64decode(user["client-key-data"]) if user.get("client-key-data") else None,
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def load(env: Any = None) -> Credentials:
    """In-cluster credentials, else the kubeconfig (``KUBECONFIG``'s first file, or
    ``~/.kube/config``); raises :class:`KubeConfigError` when there is neither."""
    e = os.environ if env is None else env
    creds = in_cluster(e)
    if creds is not None:
        return creds
    paths = [p for p in (e.get("KUBECONFIG") or "").split(os.pathsep) if p]
    paths.append(os.path.expanduser("~/.kube/config"))
    for p in paths:
        if os.path.exists(p):
            return from_kubeconfig(p)
    raise KubeConfigError("no in-cluster credentials (KUBERNETES_SERVICE_HOST) and no kubeconfig")


def _ssl_context(c: Credentials) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=c.ca_file, cadata=c.ca_data)
    if c.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if c.cert_file:
        ctx.load_cert_chain(c.cert_file, c.key_file)
    elif c.cert_data:
        # ``ssl`` loads a client certificate only from files: a private temporary
        # directory, removed as soon as the context holds the key.
        with tempfile.TemporaryDirectory(prefix="fma-otel-") as d:
            cert, key = os.path.join(d, "cert"), os.path.join(d, "key")
            for p, data in ((cert, c.cert_data), (key, c.key_data or b"")):
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            ctx.load_cert_chain(cert, key if c.key_data else None)
    return ctx


class PodClient:
    """GET and watch Pods over one small ``urllib3`` pool."""

    def __init__(self, creds: Credentials) -> None:
        self.creds = creds
        kw: dict[str, Any] = {}
        if creds.server.startswith("https:"):
            kw["ssl_context"] = _ssl_context(creds)
            if creds.insecure:
                kw.update(cert_reqs="CERT_NONE", assert_hostname=False)
        # No retries: the caller owns backoff, and a retry would hide a hung server.
        self._pool = urllib3.PoolManager(num_pools=1, maxsize=2, retries=False, **kw)

    def _url(self, namespace: str, name: str | None = None, **query: str) -> str:
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        return self.creds.server + path + (f"?{urlencode(query)}" if query else "")

    @staticmethod
    def _error(status: int, body: bytes) -> ApiError:
        message = body[:300].decode("utf-8", "replace")
        try:
            message = json.loads(body).get("message") or message
        except (ValueError, AttributeError):
            pass
        return (Gone if status == 410 else ApiError)(status, message)

    def read_pod(self, namespace: str, name: str, timeout: float) -> tuple[dict[str, Any], str | None]:
        """The Pod, and the resourceVersion to watch it from: a field-selected *list*, not a
        GET, because the list's version is the store's current one, while the Pod's own is
        that of its last change - which may already be compacted away (a watch from it
        would get 410 again and again).  Raises :class:`ApiError` (404 when there is no such
        Pod) or a ``urllib3`` error."""
        resp = self._pool.request(
            "GET",
            self._url(namespace, fieldSelector=f"metadata.name={name}"),
            headers=self.creds.headers(),
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
        )
        if resp.status != 200:
            raise self._error(resp.status, resp.data)
        doc = json.loads(resp.data)
        items = [i for i in doc.get("items") or () if (i.get("metadata") or {}).get("name") == name]
        if not items:
            raise ApiError(404, f'pods "{name}" not found')
        return items[0], (doc.get("metadata") or {}).get("resourceVersion")

    def watch_pod(
        self, namespace: str, name: str, resource_version: str | None, timeout: float
    ) -> Iterator[dict[str, Any]]:
        """The events (``{"type", "object"}``) of a field-selected watch of one Pod, from
        ``resource_version``, until the server ends it.  An ``ERROR`` event or HTTP status
        410 raises :class:`Gone`; other errors raise :class:`ApiError`."""
        query = {
            "fieldSelector": f"metadata.name={name}",
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        if resource_version:
            query["resourceVersion"] = resource_version
        resp = self._pool.request(
            "GET",
            self._url(namespace, **query),
            headers=self.creds.headers(),
            timeout=urllib3.Timeout(connect=timeout, read=WATCH_SECONDS + 30),
            preload_content=False,
        )
        try:
            if resp.status != 200:
                raise self._error(resp.status, resp.read())
            for line in resp:  # urllib3 splits the stream into lines
                if line.strip():
                    yield self._event(line)
        finally:
            resp.release_conn()

    @staticmethod
    def _event(line: bytes) -> dict[str, Any]:
        event = json.loads(line)
        if event.get("type") == "ERROR":
            obj = event.get("object") or {}
            code = int(obj.get("code") or 0)
            raise (Gone if code == 410 else ApiError)(code, str(obj.get("message") or "watch error"))
        return event
