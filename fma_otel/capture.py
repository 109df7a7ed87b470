"""Record a live namespace into a capture directory that ``fma-otel bridge DIR`` replays.

Layout (``docs/capture-format.md``): ``pods.json`` (a v1 ``List`` of the namespace's Pods,
raw JSON as the API server sent it), ``dpc.log`` (the dual-pods controller's log) and
``launcher-<pod>.log`` (each launcher Pod's ``inference-server`` log).

Logs are fetched with ``timestamps=true`` because klog headers carry no year: the bridge
takes the year from that prefix (never the instant).  A container that restarted has its
previous instance's log written first, so the file reads in time order.  Everything is
read as raw JSON/text, like the live watcher, so an odd Pod is recorded, not rejected.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import podfacts as P
from .live.kube import TRANSIENT_ERRORS, Kube, KubeError
from .live.logs import restart_count_of

LAUNCHER_CONTAINER = "inference-server"
#: The read timeout of each log fetch, as the Pod list's (``Kube.list_pods``).
LOG_READ_TIMEOUT_S = 60.0


@dataclass
class CaptureResult:
    directory: Path
    pods: int = 0
    dpc_pods: list[str] = field(default_factory=list)
    launcher_logs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _labels_match(selector: dict[str, str], pod: dict[str, Any]) -> bool:
    labels = P.labels(pod)
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


class CaptureWriteError(Exception):
    """A file of the capture directory could not be written (disk full, read-only, ...).

    Its own type because an ``OSError`` is also how a lost connection surfaces, and the
    command reported "cannot reach the API server" for a directory it could not write.
    """

    def __init__(self, path: str | os.PathLike[str], exc: OSError) -> None:
        super().__init__(f"{path}: {exc.strerror or exc}")
        self.path = str(path)
        self.error = exc


@contextlib.contextmanager
def _writing(path: str | os.PathLike[str]) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise CaptureWriteError(path, exc) from exc


@contextlib.contextmanager
def _log_file(path: Path) -> Iterator[Any]:
    """A log file open for writing; its open and close (the last flush) name it on failure
    (:func:`_write_log` names it for each write), never the network's errors in between."""
    with _writing(path):
        fh = open(path, "wb")  # noqa: SIM115 - closed below, its error named
    try:
        yield fh
    finally:
        with _writing(path):
            fh.close()


def prepare_directory(out_dir: str | os.PathLike[str]) -> Path:
    """Create the capture directory and prove a file can be written in it (``OSError`` if not)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".capture-", dir=out)
    os.close(fd)
    os.unlink(probe)
    return out


def _is_read_timeout(exc: BaseException) -> bool:
    """The API server (or the kubelet behind it) accepted the request and then sent nothing
    for the read timeout: urllib3's ``ReadTimeoutError``, bare while streaming, wrapped in a
    ``MaxRetryError`` while waiting for the headers."""
    from urllib3.exceptions import MaxRetryError, ReadTimeoutError

    if isinstance(exc, MaxRetryError):
        exc = exc.reason  # type: ignore[assignment]
    return isinstance(exc, (ReadTimeoutError, TimeoutError))


def _write_log(
    kube: Kube,
    namespace: str,
    pod: dict[str, Any],
    container: str,
    fh: Any,
    timestamps: bool,
    warn: Callable[[str], None],
    progress: Callable[[int], None] | None = None,
    read_timeout_s: float = LOG_READ_TIMEOUT_S,
) -> int:
    """Previous instance (if any) then current; returns bytes written.

    A log that stops sending for ``read_timeout_s`` (a kubelet on a dead node, a stalled
    proxy) is a warning naming it; what it sent until then is kept, up to its last whole
    line, and the capture goes on.  Without the timeout one such log hung the capture.
    """
    name = P.name(pod) or ""
    path = getattr(fh, "name", "?")
    written = 0
    reads = [True, False] if (restart_count_of(pod, container) or 0) > 0 else [False]
    for previous in reads:
        what = f"{name}/{container}{' (previous)' if previous else ''}"
        try:
            resp = kube.pod_log(
                namespace,
                name,
                container,
                timestamps=timestamps,
                previous=previous,
                read_timeout_s=read_timeout_s,
            )
        except KubeError as exc:
            warn(f"{what}: log unavailable: {exc}")
            continue
        except TRANSIENT_ERRORS as exc:
            if not _is_read_timeout(exc):
                raise
            warn(f"{what}: log not recorded: no answer within {read_timeout_s:g}s")
            continue
        tail = b""  # bytes after the last newline: written once the next one comes
        try:
            chunks = resp.stream(amt=65536, decode_content=True)
            while True:
                try:
                    chunk = next(chunks)
                except StopIteration:
                    chunk, tail = tail, b""
                    if not chunk:
                        break
                except TRANSIENT_ERRORS as exc:
                    if not _is_read_timeout(exc):
                        raise
                    cut = f", an unfinished line of {len(tail)} bytes dropped" if tail else ""
                    warn(
                        f"{what}: log cut short: nothing for {read_timeout_s:g}s after "
                        f"{written} bytes{cut}; the capture goes on without the rest"
                    )
                    break
                else:
                    chunk, tail = _whole_lines(tail + chunk)
                if chunk:
                    with _writing(path):
                        fh.write(chunk)
                    written += len(chunk)
                    if progress is not None:
                        progress(len(chunk))
        finally:
            kube.release(resp)
    return written


def _whole_lines(data: bytes) -> tuple[bytes, bytes]:
    """``data`` split after its last newline: (whole lines, the unfinished rest)."""
    i = data.rfind(b"\n") + 1
    return data[:i], data[i:]


def capture_namespace(
    kube: Kube,
    namespace: str,
    out_dir: str | os.PathLike[str],
    *,
    dpc_selector: dict[str, str],
    dpc_container: str = "controller",
    dpc_namespace: str | None = None,
    launcher_logs: bool = True,
    launcher_container: str = LAUNCHER_CONTAINER,
    timestamps: bool = True,
    progress: Callable[[int], None] | None = None,
    log_read_timeout_s: float = LOG_READ_TIMEOUT_S,
) -> CaptureResult:
    """Write ``pods.json``, ``dpc.log`` and ``launcher-<pod>.log`` files; see the module docstring.

    A file that cannot be written is a :class:`CaptureWriteError` naming it.
    """
    with _writing(out_dir):
        out = prepare_directory(out_dir)
    result = CaptureResult(out)
    warn = result.warnings.append
    items, rv = kube.list_pods(namespace)
    for pod in items:
        pod.setdefault("apiVersion", "v1")
        pod.setdefault("kind", "Pod")
    result.pods = len(items)
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": rv}, "items": items}
    tmp = out / ".pods.json.tmp"
    with _writing(out / "pods.json"):
        tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        tmp.replace(out / "pods.json")

    dpc_ns = dpc_namespace or namespace
    dpc_items = items if dpc_ns == namespace else kube.list_pods(dpc_ns)[0]
    dpcs = sorted(
        (p for p in dpc_items if _labels_match(dpc_selector, p)),
        key=lambda p: (P.created_ns(p) or 0, P.name(p) or ""),
    )
    if not dpcs:
        warn(f"no dual-pods controller Pod in {dpc_ns} matches {dpc_selector}; no dpc.log written")
    else:
        with _log_file(out / "dpc.log") as fh:
            for pod in dpcs:
                _write_log(
                    kube, dpc_ns, pod, dpc_container, fh, timestamps, warn, progress, log_read_timeout_s
                )
                result.dpc_pods.append(P.name(pod) or "")
    if launcher_logs:
        for pod in items:
            if P.role(pod, None) != P.ROLE_LAUNCHER:
                continue
            name = P.name(pod) or ""
            containers = [
                c.get("name") for c in (pod.get("spec") or {}).get("containers") or () if isinstance(c, dict)
            ]
            if launcher_container not in containers:
                warn(f"launcher {name} has no container {launcher_container!r}")
                continue
            with _log_file(out / f"launcher-{name}.log") as fh:
                _write_log(
                    kube,
                    namespace,
                    pod,
                    launcher_container,
                    fh,
                    timestamps,
                    warn,
                    progress,
                    log_read_timeout_s,
                )
            result.launcher_logs.append(name)
    return result
