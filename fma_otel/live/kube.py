"""The few Kubernetes API calls the live bridge makes, as raw HTTP through the real client.

Why raw: the ``kubernetes`` client's typed models validate fields strictly, and a Pod
carrying a field or value they do not expect (a newer API server, a webhook's odd
annotation) would raise inside deserialisation and stop a watch.  Every request is
serialised by the client (``param_serialize``: its auth, TLS and base URL) and its
undecoded response read as JSON by us, so an odd Pod costs one counted skip.  The same
path takes what the typed methods cannot say (``sinceTime`` on ``pods/log``, ``pods/proxy``
with a ``Range`` header).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errtext import one_line
from ..jsonsafe import loads
from ..lines import MAX_LINE_BYTES
from ..timeutil import format_rfc3339_ns

#: errors on the wire that mean "reconnect", as opposed to a bug in our code
try:  # pragma: no cover - import shape differs across urllib3 versions
    from urllib3.exceptions import HTTPError as _Urllib3Error
except ImportError:  # pragma: no cover
    _Urllib3Error = OSError  # type: ignore[assignment,misc]

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (_Urllib3Error, OSError, ConnectionError, TimeoutError)


class KubeError(Exception):
    """A non-2xx answer from the API server, with its code and Status message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class KubeConfigError(ValueError):
    """The Kubernetes client cannot be configured; the message is one line naming the file.

    A ``ValueError`` (an unusable argument or environment): ``watch`` and ``capture`` both
    print it as one line and exit 2.  The client raises a ``ConfigException``, a YAML
    error over several lines, an ``OSError`` or even a ``TypeError`` (a YAML list) for
    the ways a kubeconfig can be unusable; they once reached the user as a traceback.
    """


def _load_kubeconfig(config: Any, cfg: Any, path: str, context: str | None, label: str) -> None:
    """``load_kube_config`` of one file (``path``) or of ``$KUBECONFIG`` (``path=""``)."""
    if path:
        if os.path.isdir(path):
            raise KubeConfigError(f"{label} {path}: is a directory, not a kubeconfig file")
        if not os.path.exists(path):
            raise KubeConfigError(f"{label} {path}: no such file")
    where = f"{label} {path or os.environ.get('KUBECONFIG') or os.path.expanduser('~/.kube/config')}"
    try:
        if path:
            config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        else:
            config.load_kube_config(context=context, client_configuration=cfg)
    except OSError as exc:
        raise KubeConfigError(f"{where}: cannot read: {exc.strerror or one_line(exc, limit=300)}") from None
    except config.ConfigException as exc:
        raise KubeConfigError(f"{where}: {one_line(exc, limit=300)}") from None
    except Exception as exc:  # noqa: BLE001 - YAML errors, a YAML list (TypeError), ...
        import yaml

        what = "not valid YAML" if isinstance(exc, yaml.YAMLError) else "not a usable kubeconfig"
        raise KubeConfigError(f"{where}: {what} ({one_line(exc, limit=300)})") from None


def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """An ``ApiClient`` from a kubeconfig file, else in-cluster config, else the default kubeconfig.

    The order matters in a Pod: the ServiceAccount token is what the Deployment in
    ``deploy/`` relies on, and a stray ``~/.kube/config`` must not override an explicit flag.
    Every way this can fail is a :class:`KubeConfigError` with a one-line message.
    """
    from kubernetes import client, config

    cfg = client.Configuration()
    if kubeconfig:
        _load_kubeconfig(config, cfg, kubeconfig, context, "--kubeconfig")
        return client.ApiClient(cfg)
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException as exc:
        env = os.environ.get("KUBECONFIG")
        default = os.path.expanduser("~/.kube/config")
        if not env and not os.path.exists(default):
            raise KubeConfigError(
                f"no Kubernetes configuration: not in a cluster ({one_line(exc, limit=300)}) and no {default}; "
                "give --kubeconfig or set KUBECONFIG"
            ) from None
        _load_kubeconfig(config, cfg, "", context, "KUBECONFIG" if env else "kubeconfig")
    except Exception as exc:  # noqa: BLE001 - e.g. an unreadable ServiceAccount token
        raise KubeConfigError(f"in-cluster configuration: {one_line(exc, limit=300)}") from None
    return client.ApiClient(cfg)


def _check(resp: Any) -> Any:
    """Raise :class:`KubeError` for a non-2xx raw response (and release its connection)."""
    status = getattr(resp, "status", 200)
    if 200 <= int(status) < 300:
        return resp
    try:
        body = resp.data if hasattr(resp, "data") else resp.read()
        msg = loads(body).get("message", "") if body else ""
    except Exception:  # noqa: BLE001 - best effort for the message only
        msg = ""
    finally:
        with contextlib.suppress(Exception):
            resp.release_conn()
    raise KubeError(int(status), msg or getattr(resp, "reason", "") or "")


def _object(resp: Any) -> dict[str, Any]:
    """The JSON object of a 2xx raw response (its connection released); :class:`KubeError`
    when the answer is no JSON object (deep nesting, a number too long for ``int()``, text).

    A KubeError, not a ``ValueError``: callers already retry (the watch) or report (capture)
    an answer they cannot use, and a surprise here once escaped them as a traceback.
    """
    try:
        doc = loads(resp.data)
    except ValueError as exc:
        raise KubeError(int(getattr(resp, "status", 200)), f"the answer is not JSON ({exc})"[:200]) from None
    finally:
        resp.release_conn()
    if not isinstance(doc, dict):
        raise KubeError(int(getattr(resp, "status", 200)), "the answer is not a JSON object")
    return doc


def iter_lines(
    resp: Any, max_line: int = MAX_LINE_BYTES, on_long: Callable[[int], None] | None = None
) -> Iterator[bytes]:
    """Lines of a streaming (chunked) response as they arrive, without the newline.

    A final line without a newline (a cut stream) is not yielded: it may be incomplete, and
    the next connection reads it again from the position we keep.  A line longer than
    ``max_line`` bytes (its newline included) is not held: it is dropped as it arrives and
    ``on_long`` is told its length.  Each byte is searched for a newline once (a line
    arriving in many chunks used to be searched from its start at every chunk).
    """
    buf = bytearray()
    scanned = 0  # buf[:scanned] holds no newline
    dropped = 0  # bytes of an overlong line let go so far
    for chunk in resp.stream(amt=None, decode_content=False):
        buf.extend(chunk)
        while True:
            i = buf.find(b"\n", scanned)
            if i < 0:
                if dropped or len(buf) > max_line:
                    dropped += len(buf)
                    buf.clear()
                    scanned = 0
                else:
                    scanned = len(buf)
                break
            n = dropped + i + 1
            if n > max_line:
                if on_long is not None:
                    on_long(n)
            else:
                yield bytes(buf[:i])
            del buf[: i + 1]
            scanned = dropped = 0


@dataclass(frozen=True)
class Resource:
    """A kind the live bridge lists and watches: where, and the ``apiVersion``/``kind``
    that list and watch items lack."""

    path: str
    api_version: str
    kind: str

    def typed(self, item: dict[str, Any]) -> dict[str, Any]:
        item.setdefault("apiVersion", self.api_version)
        item.setdefault("kind", self.kind)
        return item


PODS = Resource("/api/v1/namespaces/{namespace}/pods", "v1", "Pod")
#: through events.k8s.io/v1, the Events API of record (see :mod:`.events`)
EVENTS = Resource("/apis/events.k8s.io/v1/namespaces/{namespace}/events", "events.k8s.io/v1", "Event")


class Kube:
    """The calls we make, raw, on one ``ApiClient``."""

    def __init__(self, api_client: Any, *, connect_timeout_s: float = 10.0) -> None:
        self.api_client = api_client
        self.connect_timeout_s = connect_timeout_s
        self._open: set[Any] = set()
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- open responses

    def _track(self, resp: Any) -> Any:
        with self._lock:
            self._open.add(resp)
        return resp

    def release(self, resp: Any) -> None:
        with self._lock:
            self._open.discard(resp)
        with contextlib.suppress(Exception):
            resp.release_conn()

    def shutdown(self) -> None:
        """Unblock every thread reading a stream (used on stop)."""
        with self._lock:
            victims = list(self._open)
        for r in victims:
            with contextlib.suppress(Exception):
                r.shutdown()

    def _get(
        self,
        path: str,
        path_params: dict[str, str],
        query: list[tuple[str, Any]],
        read_timeout_s: float | None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """A GET serialised by the client (its auth, TLS, base URL), raw and unchecked.

        Every call goes this one way, never through the typed API methods (see the module
        docstring), so each answer is read as the same undecoded response.
        """
        from kubernetes.client import ApiException

        method, url, hdrs, body, post = self.api_client.param_serialize(
            method="GET",
            resource_path=path,
            path_params=path_params,
            query_params=query,
            header_params={"Accept": "application/json", **(headers or {})},
            auth_settings=["BearerToken"],
        )
        try:
            rest = self.api_client.call_api(
                method,
                url,
                header_params=hdrs,
                body=body,
                post_params=post,
                _request_timeout=(self.connect_timeout_s, read_timeout_s) if read_timeout_s else None,
            )
        except ApiException as exc:
            msg = ""
            with contextlib.suppress(ValueError, AttributeError):
                msg = loads(exc.body or "{}").get("message", "")
            raise KubeError(int(exc.status or 0), msg or str(exc.reason)) from None
        return rest.response

    # ---------------------------------------------------------------- list + watch

    def list_all(self, resource: Resource, namespace: str) -> tuple[list[dict[str, Any]], str]:
        """Every item of a paginated list (following ``continue``) and the list's
        resourceVersion; each item with ``apiVersion``/``kind`` set, as list items lack them."""
        items: list[dict[str, Any]] = []
        cont: str | None = None
        rv = ""
        while True:
            # 500 items per request (``continue`` asks for the next page)
            query: list[tuple[str, Any]] = [("limit", 500), *([("continue", cont)] if cont else [])]
            doc = _object(_check(self._get(resource.path, {"namespace": namespace}, query, 60)))
            meta = doc.get("metadata") or {}
            rv = rv or str(meta.get("resourceVersion") or "")
            for it in doc.get("items") or []:
                if isinstance(it, dict):
                    resource.typed(it)
                    items.append(it)
            cont = meta.get("continue")
            if not cont:
                return items, rv

    def open_watch(self, resource: Resource, namespace: str, resource_version: str, timeout_s: int) -> Any:
        """Open a watch from ``resource_version``; the caller reads it with :func:`iter_lines`."""
        query = [
            ("watch", True),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", True),
            ("timeoutSeconds", int(timeout_s)),
        ]
        # the read timeout is a safety net a bit longer than the server-side timeout
        return self._track(_check(self._get(resource.path, {"namespace": namespace}, query, timeout_s + 15)))

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        """One Pod as a raw dict, or ``None`` when it does not exist."""
        try:
            resp = _check(self._get(PODS.path + "/{name}", {"namespace": namespace, "name": name}, [], 30))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        return _object(resp)

    # ---------------------------------------------------------------- logs and pods/proxy

    def pod_log(
        self,
        namespace: str,
        name: str,
        container: str,
        *,
        follow: bool = False,
        timestamps: bool = True,
        previous: bool = False,
        since_ns: int | None = None,
        read_timeout_s: float | None = None,
        limit_bytes: int | None = None,
    ) -> Any:
        """Open ``pods/log`` (raw, streaming).  ``since_ns`` is sent as whole-second ``sinceTime``."""
        query: list[tuple[str, Any]] = [("container", container)]
        if follow:
            query.append(("follow", True))
        if timestamps:
            query.append(("timestamps", True))
        if previous:
            query.append(("previous", True))
        if since_ns:
            # whole seconds, rounded down: what ``sinceTime`` (a ``metav1.Time``) carries
            query.append(("sinceTime", format_rfc3339_ns(since_ns - since_ns % 1_000_000_000)))
        if limit_bytes:
            query.append(("limitBytes", int(limit_bytes)))
        params = {"namespace": namespace, "name": name}
        resp = self._get(PODS.path + "/{name}/log", params, query, read_timeout_s, {"Accept": "text/plain"})
        return self._track(_check(resp))

    def proxy_get(
        self,
        namespace: str,
        pod: str,
        port: int,
        path: str,
        *,
        headers: dict[str, str] | None = None,
        read_timeout_s: float | None = 60.0,
    ) -> Any:
        """``GET`` ``path`` on ``pod:port`` through the API server's pod proxy (``pods/proxy``).

        Raw and unchecked: the caller reads the status, because through the proxy it is
        the backend's (a launcher's 206/416/404 with a FastAPI body) or the API server's
        own (403 without the RBAC verb, 503 when nothing listens, 404 for no such Pod).
        ``path`` is sent as given: quote its segments first.
        """
        resp = self._get(
            PODS.path + "/{name}/proxy" + path,
            {"namespace": namespace, "name": f"{pod}:{int(port)}"},
            [],
            read_timeout_s,
            {"Accept": "*/*", **(headers or {})},
        )
        return self._track(resp)


class Backoff:
    """Exponential backoff with full jitter, reset after success.

    Jitter matters when many watchers (or one watcher's several streams) lose the API
    server at once: they must not all come back in the same instant.
    """

    def __init__(self, base_s: float = 0.5, max_s: float = 30.0) -> None:
        self.base_s = base_s
        self.max_s = max_s
        self.failures = 0

    def next(self) -> float:
        self.failures += 1
        cap = min(self.max_s, self.base_s * (2 ** min(self.failures - 1, 20)))
        return random.uniform(cap / 2, cap)

    def reset(self) -> None:
        self.failures = 0
