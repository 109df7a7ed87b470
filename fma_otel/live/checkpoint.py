"""The watcher's checkpoint: which actuations were emitted, and where each stream stands.

Written atomically (temporary file in the same directory, ``fsync``, ``os.replace``, then
``fsync`` of the directory) so that a SIGKILL at any instant leaves either the old or the
new checkpoint, never a torn one.  JSON, so an operator can read and, in an emergency, edit
it.

Contents and why each is there:

- ``emitted``: actuation key -> unix time of emission.  The only thing that decides
  "already exported"; a restart skips these keys.  Pruned once the requester Pod is gone
  and the entry is older than the retention (the Pod cannot come back, so neither can the
  key), which keeps the file bounded by live Pods.
- ``pending``: keys being exported right now (written before an OTLP export, cleared
  after it was delivered).  On restart each pending key's trace is exported again (same
  derived ids: idempotent for the backend), read back from the ``--out`` file.
- ``pending_traces``: only without an ``--out`` file (OTLP only): pending key -> its trace
  as an OTLP JSON request, so that a restart can re-send it even if the correlator cannot
  rebuild it (its requester was deleted while the watcher was down).
- ``pods.resourceVersion``: the Pod watch's position; the next run replays the watch from
  it (when the API server still has it) to see what changed while it was down.
- ``logs``: per ``pod/container``: the Pod's uid, the container's ``restartCount``, and the
  kubelet timestamp position ``(ts_ns, n)`` of the last line handed to the correlator.
- ``replay_from_ns``: the earliest log timestamp the next run must re-read so the
  correlator can rebuild every actuation that was still open (its facts lived only in
  memory).  See ``docs/watch.md``.

Keeping it: a file on a volume (``--checkpoint /var/lib/fma-otel/checkpoint.json`` with a
PersistentVolumeClaim, as in ``deploy/``).  A ConfigMap can hold it too (it is small: tens
of bytes per live requester), by a sidecar that syncs the file, at the price of extra RBAC
(get/update on that one ConfigMap); see ``docs/watch.md``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

VERSION = 1


@dataclass
class Checkpoint:
    namespace: str = ""
    emitted: dict[str, float] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    pending_traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_rv: str | None = None
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)
    replay_from_ns: int | None = None
    saved_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "namespace": self.namespace,
            "savedAt": self.saved_at,
            "pods": {"resourceVersion": self.pod_rv},
            "logs": self.logs,
            "replay_from_ns": self.replay_from_ns,
            "pending": list(self.pending),
            "pending_traces": self.pending_traces,
            "emitted": self.emitted,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Checkpoint:
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise ValueError("not an fma-otel watch checkpoint (version 1)")
        emitted = doc.get("emitted") or {}
        if isinstance(emitted, list):  # tolerate a hand-written list of keys
            emitted = {k: 0.0 for k in emitted}
        return cls(
            namespace=str(doc.get("namespace") or ""),
            emitted={str(k): float(v or 0) for k, v in emitted.items()},
            pending=[str(k) for k in doc.get("pending") or ()],
            pending_traces={
                str(k): v for k, v in (doc.get("pending_traces") or {}).items() if isinstance(v, dict)
            },
            pod_rv=(doc.get("pods") or {}).get("resourceVersion"),
            logs={str(k): dict(v) for k, v in (doc.get("logs") or {}).items() if isinstance(v, dict)},
            replay_from_ns=doc.get("replay_from_ns"),
            saved_at=float(doc.get("savedAt") or 0),
        )


def load(path: str | None) -> Checkpoint:
    """The checkpoint at ``path``; an empty one when there is none yet.

    A file that exists but cannot be read is an error (raised), never silently replaced:
    starting from scratch would re-export everything.
    """
    if not path or not os.path.exists(path):
        return Checkpoint()
    with open(path, encoding="utf-8") as fh:
        return Checkpoint.from_json(json.load(fh))


def save(path: str | None, cp: Checkpoint) -> None:
    """Write atomically (see the module docstring)."""
    if not path:
        return
    cp.saved_at = time.time()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(cp.to_json(), fh, separators=(",", ":"), sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(dfd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dfd)
