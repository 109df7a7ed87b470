"""Fetch a vLLM instance's log from its launcher, through the API server's pod proxy.

Why through the pod proxy: the launcher keeps each instance's vLLM output in a file that
only its ``GET /v2/vllm/instances/{id}/log`` serves (port 8001, no Service in front), and
fma-otel runs wherever a kubeconfig reaches the API server, rarely on the Pod network.
``pods/proxy`` reaches any Pod's port with the caller's credentials; it is also why the
feature is opt-in (``--vllm-logs``): that RBAC verb reaches *every* port of every Pod in
the namespace, more than reading Pods and their logs (see ``deploy/vllm-logs/``).

The endpoint answers at most 1 MiB per request (the launcher's ``MAX_LOG_RESPONSE_BYTES``)
and takes ``Range: bytes=S-E``; we ask for consecutive ranges of at most
:data:`MAX_RANGE_BYTES` until ``Content-Range``'s total is reached (or a 416 says the
start is past the end), so a large log never sits whole in one answer, and a byte bound
and a deadline stop a log that grows faster than we read it.  Every way it can fail
(404 instance or Pod gone, 403 without the RBAC verb, 503 nothing listening, a launcher
that ignores ``Range``, a broken connection) is a :class:`FetchResult` with ``error`` set
and the bytes already written kept: counted and reported by the caller, never raised.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import quote

from ..errtext import one_line
from ..jsonsafe import loads
from .kube import TRANSIENT_ERRORS, Kube, KubeError

#: ``LauncherServicePort`` (the DPC's constant; the launcher listens there).
LAUNCHER_PORT = 8001
#: The largest range asked for: the launcher answers no more than this per request.
MAX_RANGE_BYTES = 1 << 20

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")


@dataclass
class FetchResult:
    """How one log fetch went.  ``error`` is ``None`` when the whole log was read (else it
    says why not, a byte or time bound that stopped it included)."""

    written: int = 0
    requests: int = 0
    status: int | None = None  # the last HTTP status seen
    total: int | None = None  # the log's size as the last Content-Range said
    error: str | None = None

    def unanswered(self, exc: BaseException) -> FetchResult:
        """This result, saying why a request got no log: the API server's refusal
        (:class:`KubeError`, its status kept) or a transient error."""
        if isinstance(exc, KubeError):
            self.status, self.error = exc.status, f"HTTP {exc.status}: {exc.message}"
        else:
            self.error = f"no answer: {one_line(exc, limit=200)}"
        return self


def instance_log_path(instance_id: str) -> str:
    """The launcher path of an instance's log, the id quoted as one path segment."""
    return f"/v2/vllm/instances/{quote(instance_id, safe='')}/log"


def _why(status: int, body: bytes) -> str:
    """One line for a non-2xx answer: the launcher's ``detail`` or the API server's ``message``."""
    text = ""
    try:
        doc = loads(body) if body else None
        if isinstance(doc, dict):
            text = str(doc.get("detail") or doc.get("message") or "")
    except ValueError:
        text = body[:200].decode("utf-8", "replace")
    text = " ".join(text.split())[:200]
    what = {
        403: " (forbidden: the pods/proxy RBAC verb is needed, see deploy/vllm-logs/)",
        503: " (the launcher is not reachable through the pod proxy)",
    }.get(status, "")
    return f"HTTP {status}{what}{': ' + text if text else ''}"


def fetch_instance_log(
    kube: Kube,
    namespace: str,
    launcher: str,
    instance_id: str,
    write: Callable[[bytes], None],
    *,
    start: int = 0,
    port: int = LAUNCHER_PORT,
    range_bytes: int = MAX_RANGE_BYTES,
    max_bytes: int | None = None,
    deadline_s: float | None = None,
    read_timeout_s: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
) -> FetchResult:
    """Read instance ``instance_id``'s log from launcher Pod ``launcher``, in ranges, from
    byte ``start`` (a caller that kept the bytes before it reads only what was added).

    ``write`` gets each range's bytes in order (an ``OSError`` it raises is the caller's:
    it is not a fetch failure).  ``max_bytes`` bounds what this call reads; ``deadline_s``
    (a duration, from now) bounds how long the ranges are asked for.  ``total`` in the
    result is the log's size as the launcher last said (a 416 included), so a caller can
    tell a log that was replaced (shorter than ``start``).
    """
    if not 0 < range_bytes <= MAX_RANGE_BYTES:
        raise ValueError(f"range_bytes must be in 1..{MAX_RANGE_BYTES}: {range_bytes}")
    res = FetchResult()
    path = instance_log_path(instance_id)
    end_at = None if deadline_s is None else clock() + deadline_s
    offset = start
    while True:
        if max_bytes is not None and offset - start >= max_bytes:
            res.error = f"stopped at the byte bound ({max_bytes} bytes)"
            return res
        if end_at is not None and clock() >= end_at:
            res.error = f"stopped at the time bound ({deadline_s:g}s) after {offset - start} bytes"
            return res
        want = range_bytes if max_bytes is None else min(range_bytes, max_bytes - (offset - start))
        headers = {"Range": f"bytes={offset}-{offset + want - 1}"}
        try:
            resp = kube.proxy_get(
                namespace, launcher, port, path, headers=headers, read_timeout_s=read_timeout_s
            )
        except (KubeError, *TRANSIENT_ERRORS) as exc:
            return res.unanswered(exc)
        res.requests += 1
        try:
            status = int(getattr(resp, "status", 0))
            res.status = status
            if status == 416:  # the start is past the end: nothing more
                m = re.match(r"^\s*bytes\s+\*/(\d+)\s*$", resp.headers.get("Content-Range") or "")
                res.total = int(m.group(1)) if m else None
                return res
            if status not in (200, 206):
                res.error = _why(status, resp.read(4096) or b"")
                return res
            crange = _CONTENT_RANGE.match(resp.headers.get("Content-Range") or "")
            if status == 200 and offset > 0 and crange is None:
                res.error = "the launcher ignored the Range header (HTTP 200 without Content-Range)"
                return res
            if crange is not None and int(crange.group(1)) != offset:
                res.error = f"asked for bytes from {offset}, got Content-Range {crange.group(0).strip()!r}"
                return res
            body = resp.read(want) or b""
        except TRANSIENT_ERRORS as exc:
            res.error = f"cut short after {offset - start} bytes: {one_line(exc, limit=200)}"
            return res
        finally:
            kube.release(resp)
        if body:
            write(body)
            offset += len(body)
            res.written = offset - start
        total = crange.group(3) if crange is not None else None
        if total is not None and total != "*":
            res.total = int(total)
        if not body or (total is not None and total != "*" and offset >= int(total)):
            return res
        if crange is None and len(body) < want:
            return res  # no total given: a short answer is the end


def fetch_pod_log(
    kube: Kube,
    namespace: str,
    pod: str,
    container: str,
    write: Callable[[bytes], None],
    *,
    max_bytes: int | None = None,
    read_timeout_s: float = 60.0,
) -> FetchResult:
    """A baseline Pod's container log with ``timestamps=true`` (the bridge needs the year),
    bounded by ``max_bytes`` (``limitBytes``); errors as :func:`fetch_instance_log`'s."""
    res = FetchResult()
    try:
        resp = kube.pod_log(
            namespace, pod, container, timestamps=True, read_timeout_s=read_timeout_s, limit_bytes=max_bytes
        )
    except (KubeError, *TRANSIENT_ERRORS) as exc:
        return res.unanswered(exc)
    res.requests, res.status = 1, 200
    try:
        for chunk in resp.stream(amt=65536, decode_content=True):
            write(chunk)
            res.written += len(chunk)
    except TRANSIENT_ERRORS as exc:
        res.error = f"cut short after {res.written} bytes: {one_line(exc, limit=200)}"
    finally:
        kube.release(resp)
    if max_bytes is not None and res.written >= max_bytes and res.error is None:
        res.error = f"stopped at the byte bound ({max_bytes} bytes)"
    return res
