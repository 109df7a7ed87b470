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
- ``rounds``: per requester unbound at least once: ``{"round": k, "unbound_ns": t,
  "begun": b}``, its round ``k`` begins at its unbind at ``t`` (the DPC log time of that
  line; the requester's last unbind), ``b`` whether anything of that round had been seen
  (else ``k`` is the number its first fact starts).  The next run seeds the correlator's
  round count with it (:meth:`fma_otel.correlate.Correlator.seed_round`): its replay does
  not reach back to the requester's earlier unbinds, and counted afresh the round would
  get a lower number, a key already emitted.  Absent (older checkpoints, no requester
  unbound yet): the count starts afresh, as before.  An entry goes when its Pod is gone and
  none of its keys is left in ``emitted`` or ``pending``.

Keeping it: a file on a volume (``--checkpoint /var/lib/fma-otel/checkpoint.json`` with a
PersistentVolumeClaim, as in ``deploy/``).  A ConfigMap can hold it too (it is small: tens
of bytes per live requester), by a sidecar that syncs the file, at the price of extra RBAC
(get/update on that one ConfigMap); see ``docs/watch.md``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ..jsonsafe import brief, finite_float, loads
from .outfile import write_atomic

VERSION = 1

log = logging.getLogger(__name__)


@dataclass
class Checkpoint:
    namespace: str = ""
    emitted: dict[str, float] = field(default_factory=dict)
    pending: list[str] = field(default_factory=list)
    pending_traces: dict[str, dict[str, Any]] = field(default_factory=dict)
    pod_rv: str | None = None
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)
    replay_from_ns: int | None = None
    #: requester uid -> (round, unbound_ns, begun): see the module docstring
    rounds: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    saved_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        doc = {
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
        if self.rounds:  # (absent means none, as in checkpoints written before it existed)
            doc["rounds"] = {
                uid: {"round": k, "unbound_ns": t, "begun": b} for uid, (k, t, b) in self.rounds.items()
            }
        return doc

    @classmethod
    def from_json(cls, doc: Any) -> Checkpoint:
        """A checkpoint from its JSON form; :class:`ValueError` naming the field for anything
        malformed in it.

        Why so strict: the file may be edited by hand (see the module docstring), and a value
        that loads but is not what the watcher computes with (a string where a position
        belongs, a NaN or a 400-digit time, a list where a mapping belongs) would otherwise
        stop the watcher later, in its loop or at its next checkpoint, with a traceback,
        instead of at start with one line that says which field to fix.
        """
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise ValueError("not an fma-otel watch checkpoint (version 1)")
        emitted = _of(doc, "emitted", (dict, list)) or {}
        if isinstance(emitted, list):  # tolerate a hand-written list of keys
            emitted = {k: 0.0 for k in emitted}
        logs = {}
        for k, v in (_of(doc, "logs", dict) or {}).items():
            if isinstance(v, dict):
                entry = dict(v)
                for f, bounds in (("ts_ns", _NS), ("n", _COUNT), ("restartCount", _COUNT)):
                    if f in entry:
                        entry[f] = _whole(entry[f], f"logs.{k}.{f}", bounds)
                logs[str(k)] = entry
        rv = (_of(doc, "pods", dict) or {}).get("resourceVersion")
        if isinstance(rv, int) and not isinstance(rv, bool):
            rv = str(rv)
        elif rv is not None and not isinstance(rv, str):
            raise ValueError(f"pods.resourceVersion: not a string: {brief(rv)}")
        replay = doc.get("replay_from_ns")
        rounds: dict[str, tuple[int, int, bool]] = {}
        for uid, v in (_of(doc, "rounds", dict) or {}).items():
            if not isinstance(v, dict):
                raise ValueError(f"rounds.{uid}: unexpected {type(v).__name__}")
            for f in ("round", "unbound_ns"):
                if v.get(f) is None:
                    raise ValueError(f"rounds.{uid}.{f}: missing")
            begun = v.get("begun", True)
            if not isinstance(begun, bool):
                raise ValueError(f"rounds.{uid}.begun: not true or false: {brief(begun)}")
            rounds[str(uid)] = (
                _whole(v.get("round"), f"rounds.{uid}.round", _ROUND),
                _whole(v.get("unbound_ns"), f"rounds.{uid}.unbound_ns", _NS),
                begun,
            )
        return cls(
            namespace=_of(doc, "namespace", str) or "",
            emitted={str(k): _seconds(v, f"emitted.{k}") for k, v in emitted.items()},
            pending=[str(k) for k in _of(doc, "pending", list) or ()],
            pending_traces={
                str(k): v for k, v in (_of(doc, "pending_traces", dict) or {}).items() if isinstance(v, dict)
            },
            pod_rv=rv,
            logs=logs,
            replay_from_ns=None if replay is None else _whole(replay, "replay_from_ns", _NS),
            rounds=rounds,
            saved_at=_seconds(doc.get("savedAt"), "savedAt"),
        )


def _of(doc: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    """``doc[key]`` when it is of ``kind`` (``None`` when absent or null), else ValueError."""
    v = doc.get(key)
    if v is not None and not isinstance(v, kind):
        raise ValueError(f"{key}: unexpected {type(v).__name__}")
    return v


def _seconds(v: Any, where: str) -> float:
    """A unix time (absent or null: 0), finite: NaN or Infinity never prunes nor compares."""
    try:
        return finite_float(v or 0)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


#: log positions (``ts_ns``, ``replay_from_ns``): nanoseconds of a time ``datetime`` can
#: carry (years 1..9999; a replay point may be before 1970), as ``sinceTime`` needs one
_NS = (-62_135_596_800 * 10**9, 253_402_300_800 * 10**9)
#: counts (``n``, ``restartCount``): int64, as the API server's are
_COUNT = (0, 1 << 63)
#: a seeded round number: a re-actuation (round 1 needs no seed)
_ROUND = (2, 1 << 63)


def _whole(v: Any, where: str, bounds: tuple[int, int]) -> int:
    """A whole number in ``[lo, hi)`` (``int()`` of a string, a float or null, as the
    watcher always read these fields), never one that its later arithmetic or a
    ``sinceTime`` cannot take."""
    if isinstance(v, bool):
        raise ValueError(f"{where}: not a whole number: {brief(v)}")
    try:
        n = int(v or 0)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: not a whole number: {brief(v)}") from None
    if not bounds[0] <= n < bounds[1]:
        raise ValueError(f"{where}: out of range: {brief(n)}")
    return n


def load(path: str | None) -> Checkpoint:
    """The checkpoint at ``path``; an empty one when there is none yet.

    A file that exists but cannot be read is an error (raised), never silently replaced:
    starting from scratch would re-export everything.  Every way its content can be bad is
    a :class:`ValueError` (deep nesting included, see :func:`fma_otel.jsonsafe.loads`).
    """
    if not path or not os.path.exists(path):
        return Checkpoint()
    with open(path, encoding="utf-8") as fh:
        return Checkpoint.from_json(loads(fh.read()))


def check_writable(path: str) -> None:
    """Raise the ``OSError`` that writing a checkpoint at ``path`` would (its directory is
    created, as :func:`save` does), so ``watch`` refuses a place it cannot write at start
    instead of failing at its first checkpoint."""
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.exists(directory) and not os.path.isdir(directory):  # makedirs says "File exists"
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), directory)
    os.makedirs(directory, exist_ok=True)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    fd, tmp = tempfile.mkstemp(prefix=".checkpoint-", suffix=".tmp", dir=directory)
    os.close(fd)
    os.unlink(tmp)


def save(path: str | None, cp: Checkpoint) -> bool:
    """Write atomically (see the module docstring); ``False`` when the write failed.

    A write that fails (disk full, the volume gone read-only) is logged as an error and
    leaves the previous checkpoint file as it was; it never stops the watcher, which
    writes the checkpoint again at its next one.  Until then a restart resumes from the
    previous checkpoint: traces already in ``--out`` are not written again (their ids are
    read back from the file) and an OTLP re-export carries the same derived ids.
    """
    if not path:
        return True
    cp.saved_at = time.time()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_atomic(path, json.dumps(cp.to_json(), separators=(",", ":"), sort_keys=True).encode())
    except OSError as exc:
        log.error("checkpoint %s: cannot write it (%s); keeping the previous one, retrying", path, exc)
        return False
    return True
