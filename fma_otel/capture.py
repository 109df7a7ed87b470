"""Record a live namespace into a capture directory that ``fma-otel bridge DIR`` replays.

Layout (``docs/capture-format.md``): ``pods.json`` (a v1 ``List`` of the namespace's Pods,
raw JSON as the API server sent it), ``dpc.log`` (the dual-pods controller's log),
``launcher-<pod>.log`` (each launcher Pod's ``inference-server`` log), ``events.json``
(the namespace's core/v1 Events, a v1 ``List`` as ``kubectl get events -o json`` prints),
``vllm/pod-<pod>.log`` (each baseline Pod's vLLM container log, ``--timestamps``) and, with
``vllm_logs``, ``vllm/<instance-id>.log`` (each FMA instance's vLLM log, read from its
launcher through the API server's pod proxy: :mod:`fma_otel.live.vllm_fetch`).

Which instances: every (launcher, instance id) pair that the Pods (a bound launcher's
``instance-id`` annotation, a requester's ``instance`` and ``dual`` labels), the launcher
logs just recorded ("Accepted request to create vLLM instance with id=...", ``PUT
/v2/vllm/instances/<id>``) or the DPC log (``providerName`` with ``instanceID``) name.  An
instance whose launcher Pod is gone, or whose launcher no longer has it (404), is counted
and reported; so is a refused proxy (403 without the RBAC verb, 503 nothing listening).
None of these stops the capture.

Logs are fetched with ``timestamps=true`` because klog headers carry no year: the bridge
takes the year from that prefix (never the instant).  A container that restarted has its
previous instance's log written first, so the file reads in time order.  Everything is
read as raw JSON/text, like the live watcher, so an odd Pod is recorded, not rejected.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import podfacts as P
from .errtext import one_line
from .lines import MAX_LINE_BYTES, bounded_lines
from .live.kube import EVENTS, PODS, TRANSIENT_ERRORS, Kube, KubeError
from .live.logs import restart_count_of
from .live.outfile import write_atomic
from .live.vllm_fetch import LAUNCHER_PORT, fetch_instance_log
from .sources.klog import iter_klog
from .sources.launcher_log import accepted_create_id, iter_launcher_log, put_instance_id
from .sources.records import SourceStats

#: The read timeout of each log fetch, as the Pod list's (``Kube.list_all``).
LOG_READ_TIMEOUT_S = 60.0
#: The most read of one instance's vLLM log (a runaway log must not fill the disk).
VLLM_LOG_MAX_BYTES = 64 << 20
#: What an instance id must look like to name a file (they are 45-character hashes).
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


@dataclass
class CaptureResult:
    directory: Path
    pods: int = 0
    dpc_pods: list[str] = field(default_factory=list)
    launcher_logs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    events: int | None = None  # Events written to events.json (None: not recorded)
    vllm_logs: list[str] = field(default_factory=list)  # instance ids recorded
    vllm_failed: dict[str, str] = field(default_factory=dict)  # instance id -> why not (or partial)
    baseline_logs: list[str] = field(default_factory=list)  # baseline Pod names recorded
    proxy_requests: int = 0


class CaptureWriteError(Exception):
    """A file of the capture directory could not be written (disk full, read-only, ...).

    Its own type because an ``OSError`` is also how a lost connection surfaces: the
    command must not say "cannot reach the API server" for a directory it cannot write.
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
    warn: Callable[[str], None],
    progress: Callable[[int], None] | None = None,
    read_timeout_s: float = LOG_READ_TIMEOUT_S,
) -> int:
    """Previous instance (if any) then current; returns bytes written.

    A log that stops sending for ``read_timeout_s`` (a kubelet on a dead node, a stalled
    proxy) is a warning naming it, not a hung capture; what it sent until then is kept, up
    to its last whole line, and the capture goes on.
    """
    name = P.name(pod) or ""
    write = _writer(fh, progress)
    written = 0
    reads = [True, False] if (restart_count_of(pod, container) or 0) > 0 else [False]
    for previous in reads:
        what = f"{name}/{container}{' (previous)' if previous else ''}"
        try:
            resp = kube.pod_log(
                namespace,
                name,
                container,
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
            for chunk in resp.stream(amt=65536, decode_content=True):
                whole, tail = _whole_lines(tail + chunk)
                written += write(whole)
        except TRANSIENT_ERRORS as exc:
            # the server answered: a stream that stalls or breaks off costs that log's rest,
            # not the capture (the requests after it say if the server itself is gone)
            why = (
                f"nothing for {read_timeout_s:g}s"
                if _is_read_timeout(exc)
                else f"the stream broke ({one_line(exc)})"
            )
            cut = f", an unfinished line of {len(tail)} bytes dropped" if tail else ""
            warn(
                f"{what}: log cut short: {why} after {written} bytes{cut}; the capture goes on without the rest"
            )
            tail = b""
        finally:
            kube.release(resp)
        written += write(tail)
    return written


def _writer(fh: Any, progress: Callable[[int], None] | None) -> Callable[[bytes], int]:
    """``write(data) -> len(data)`` into ``fh``, its failure naming the file, the bytes counted
    in ``progress``."""

    def write(data: bytes) -> int:
        if data:
            with _writing(getattr(fh, "name", "?")):
                fh.write(data)
            if progress is not None:
                progress(len(data))
        return len(data)

    return write


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
    dpc_container: str = P.DPC_CONTAINER,
    dpc_namespace: str | None = None,
    launcher_logs: bool = True,
    progress: Callable[[int], None] | None = None,
    log_read_timeout_s: float = LOG_READ_TIMEOUT_S,
    events: bool = True,
    vllm_logs: bool = False,
    baseline_selector: dict[str, str] | None = None,
    baseline_container: str | None = None,
    launcher_port: int = LAUNCHER_PORT,
    vllm_max_bytes: int = VLLM_LOG_MAX_BYTES,
) -> CaptureResult:
    """Write ``pods.json``, ``dpc.log``, ``launcher-<pod>.log``, ``events.json`` and
    ``vllm/`` files; see the module docstring.

    A file that cannot be written is a :class:`CaptureWriteError` naming it.
    """
    with _writing(out_dir):
        out = prepare_directory(out_dir)
    result = CaptureResult(out)
    warn = result.warnings.append
    items, rv = kube.list_all(PODS, namespace)
    _write_list(out / "pods.json", items, rv)
    result.pods = len(items)

    dpc_ns = dpc_namespace or namespace
    dpc_items = items if dpc_ns == namespace else kube.list_all(PODS, dpc_ns)[0]
    dpcs = sorted(
        (p for p in dpc_items if P.labels_match(dpc_selector, p)),
        key=lambda p: (P.created_ns(p) or 0, P.name(p) or ""),
    )
    # every log the same way: ``write_log(namespace, pod, container, fh)``
    write_log = functools.partial(
        _write_log,
        kube,
        warn=warn,
        progress=progress,
        read_timeout_s=log_read_timeout_s,
    )
    if not dpcs:
        warn(f"no dual-pods controller Pod in {dpc_ns} matches {dpc_selector}; no dpc.log written")
    else:
        with _log_file(out / "dpc.log") as fh:
            for pod in dpcs:
                write_log(dpc_ns, pod, dpc_container, fh)
                result.dpc_pods.append(P.name(pod) or "")
    if launcher_logs:
        for pod in items:
            if P.role(pod, None) != P.ROLE_LAUNCHER:
                continue
            name = P.name(pod) or ""
            if P.LAUNCHER_CONTAINER not in P.container_names(pod):
                warn(f"launcher {name} has no container {P.LAUNCHER_CONTAINER!r}")
                continue
            with _log_file(out / f"launcher-{name}.log") as fh:
                write_log(namespace, pod, P.LAUNCHER_CONTAINER, fh)
            result.launcher_logs.append(name)
    if events:
        _capture_events(kube, namespace, out, result)
    if baseline_selector:
        _capture_baseline_logs(
            write_log, namespace, out, items, baseline_selector, baseline_container, result
        )
    if vllm_logs:
        _capture_vllm_logs(
            kube, namespace, out, items, result, progress, launcher_port, vllm_max_bytes, log_read_timeout_s
        )
    return result


def _capture_events(kube: Kube, namespace: str, out: Path, result: CaptureResult) -> None:
    """``events.json``: the namespace's core/v1 Events as ``kubectl get events -o json``
    prints them.  A refusal (a Role without ``list`` on events) is a warning: the Pods and
    logs are still worth having."""
    try:
        items, rv = kube.list_all(EVENTS, namespace)
    except KubeError as exc:
        result.warnings.append(f"events not recorded: {exc} (the Role needs list on events, see deploy/)")
        return
    _write_list(out / "events.json", items, rv)
    result.events = len(items)


def _write_list(path: Path, items: list[dict[str, Any]], rv: Any) -> None:
    """A v1 ``List`` of ``items`` as ``kubectl get -o json`` prints it, written whole or not
    at all (a temporary file renamed)."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": rv}, "items": items}
    with _writing(path):
        write_atomic(path, (json.dumps(doc, indent=2) + "\n").encode())


def _vllm_dir(out: Path) -> Path:
    with _writing(out / "vllm"):
        (out / "vllm").mkdir(exist_ok=True)
    return out / "vllm"


def _capture_baseline_logs(
    write_log: Callable[..., int],
    namespace: str,
    out: Path,
    items: list[dict[str, Any]],
    selector: dict[str, str],
    container: str | None,
    result: CaptureResult,
) -> None:
    """``vllm/pod-<name>.log`` for each baseline Pod: its vLLM container's log (``pods/log``,
    which the base Role grants), previous instance first, with timestamps."""
    for pod in items:
        if P.role(pod, selector) != P.ROLE_BASELINE:
            continue
        name = P.name(pod) or ""
        names = P.container_names(pod)
        use = container or (names[0] if names else None)
        if not use or use not in names or not _SAFE_ID.match(name):
            result.warnings.append(f"baseline {name}: no container {use!r}; its vLLM log not recorded")
            continue
        with _log_file(_vllm_dir(out) / f"pod-{name}.log") as fh:
            write_log(namespace, pod, use, fh)
        result.baseline_logs.append(name)


def _records(path: Path, parse: Callable[..., Iterator[Any]], **kw: Any) -> list[Any]:
    """A recorded log's records, read by the bridge's own parser of its format; none if absent."""
    try:
        with open(path, "rb") as fh:
            return list(parse(fh, SourceStats(str(path)), **kw))
    except OSError:
        return []


#: the keys a DPC line names an instance and its launcher by
_PAIR_KEYS = (b"instanceID=", b"providerName=")


def _pair_lines(fh: Any) -> Iterator[bytes]:
    """The lines of a DPC log that hold either key of a pair, for the bridge's klog parser:
    a literal test, so that the bulk of the log (lines of neither) is not parsed.  A line
    with one key is kept: the other may follow a multi-line value, on its closing line."""
    for line in bounded_lines(fh, MAX_LINE_BYTES):
        if line.__class__ is bytes and (_PAIR_KEYS[0] in line or _PAIR_KEYS[1] in line):
            yield line  # type: ignore[misc]


def find_instances(out: Path, items: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Instance id -> the launcher Pods that hosted it, most telling source first.

    The Pods say what is bound now; the launcher logs and the DPC log recorded in ``out``
    say what was created before (an instance id is a hash of its configuration, so the
    same id may have run on several launchers).
    """
    found: dict[str, list[str]] = {}

    def add(instance: str, launcher: str) -> None:
        if instance and launcher:
            names = found.setdefault(instance, [])
            if launcher not in names:
                names.append(launcher)

    for pod in items:
        role = P.role(pod, None)
        if role == P.ROLE_LAUNCHER:
            add(P.annotations(pod).get(P.A_INSTANCE_ID, ""), P.name(pod) or "")
        elif role == P.ROLE_REQUESTER:
            labels = P.labels(pod)
            add(labels.get(P.L_INSTANCE, ""), labels.get(P.L_DUAL, ""))
    for path in sorted(out.glob("launcher-*.log")):
        launcher = path.name[len("launcher-") : -len(".log")]
        for rec in _records(path, iter_launcher_log, facts_only=True):
            add(accepted_create_id(rec) or put_instance_id(rec) or "", launcher)
    for rec in _records(out / "dpc.log", lambda fh, stats: iter_klog(_pair_lines(fh), stats)):
        kv = dict(rec.kv)
        provider, instance = kv.get("providerName"), kv.get("instanceID")
        if isinstance(provider, str) and isinstance(instance, str):
            add(instance, provider)
    return found


def _capture_vllm_logs(
    kube: Kube,
    namespace: str,
    out: Path,
    items: list[dict[str, Any]],
    result: CaptureResult,
    progress: Callable[[int], None] | None,
    port: int,
    max_bytes: int,
    read_timeout_s: float,
) -> None:
    """``vllm/<instance-id>.log`` for each instance :func:`find_instances` names, from the
    first of its launchers that still has it; what fails is in ``result.vllm_failed``."""
    present = {P.name(p) for p in items if P.role(p, None) == P.ROLE_LAUNCHER}
    for instance, launchers in sorted(find_instances(out, items).items()):
        if not _SAFE_ID.match(instance):
            result.vllm_failed[instance[:80]] = "not an instance id that can name a file"
            continue
        live = [name for name in launchers if name in present]
        if not live:
            result.vllm_failed[instance] = f"launcher Pod {', '.join(launchers)} is gone"
            continue
        path = _vllm_dir(out) / f"{instance}.log"
        whys: list[str] = []
        for launcher in live:
            with _log_file(path) as fh:
                res = fetch_instance_log(
                    kube,
                    namespace,
                    launcher,
                    instance,
                    _writer(fh, progress),
                    port=port,
                    max_bytes=max_bytes,
                    read_timeout_s=read_timeout_s,
                )
            result.proxy_requests += res.requests
            if res.written:
                result.vllm_logs.append(instance)
                if res.error:
                    result.vllm_failed[instance] = (
                        f"from {launcher}: partial ({res.written} bytes): {res.error}"
                    )
                others = [n for n in live if n != launcher]
                if others:
                    result.warnings.append(
                        f"vLLM log of instance {instance}: recorded from {launcher}; it also ran on "
                        f"{', '.join(others)}, not recorded (a capture keeps one log per instance id)"
                    )
                break
            whys.append(f"from {launcher}: {res.error or 'empty log'}")
        else:
            with _writing(path):
                path.unlink(missing_ok=True)
            result.vllm_failed[instance] = "; ".join(whys)
