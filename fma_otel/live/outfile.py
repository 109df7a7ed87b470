"""The ``--out`` file of the live watcher: append-only OTLP JSON lines, no duplicates ever.

The watcher emits a trace and *then* checkpoints its key; a SIGKILL between the two would
make the next run emit it again.  For the file we close that window by reading the file
itself on start: every trace id already in it counts as emitted.  A last line cut by the
kill (no newline) is truncated away first and its trace emitted again, whole.

Each trace is one line, written with a single ``write`` and ``fsync``-ed before the
checkpoint is written, so "in the checkpoint" implies "in the file".
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence

from ..model import SpanRecord
from ..sinks.otlp_json import export_request

_TRACE_ID = re.compile(rb'"traceId":"([0-9a-fA-F]{32})"')


def scan_and_repair(path: str) -> set[str]:
    """Trace ids present in ``path``; truncates a torn last line.  Missing file -> empty."""
    ids: set[str] = set()
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return ids
    if not stat.S_ISREG(st.st_mode):
        # /dev/zero or /dev/full never end, a FIFO blocks: nothing to read back from them
        # (``check_out`` refuses them at start; this is the watcher's own guard)
        return ids
    good_end = 0
    with open(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            good_end += len(line)
            ids.update(m.group(1).decode().lower() for m in _TRACE_ID.finditer(line))
    if good_end != os.path.getsize(path):
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return ids


class OutFileError(Exception):
    """Writing ``--out`` failed (disk full, I/O error); the file holds only whole lines."""

    def __init__(self, path: str, error: OSError) -> None:
        super().__init__(f"{path}: {error.strerror or error}")
        self.path = path
        self.error = error


class OutFile:
    """Appends one trace per line; ``fsync`` per batch.

    Unbuffered (``os.write`` on an ``O_APPEND`` descriptor): a write that fails leaves
    nothing queued to be written again at close, and is cut back to the last whole line.
    After a failure every write raises :class:`OutFileError` again without writing.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.present = scan_and_repair(path) if path != "-" else set()
        self._fd: int | None = (
            os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
            if path != "-"
            else None
        )
        self.failed: OutFileError | None = None

    def write(self, traces: Sequence[Sequence[SpanRecord]]) -> None:
        import json
        import sys

        if self.failed is not None:
            raise self.failed
        data = "".join(json.dumps(export_request(t), separators=(",", ":")) + "\n" for t in traces)
        if self._fd is None:
            try:
                sys.stdout.write(data)
                sys.stdout.flush()
            except OSError as exc:
                self.failed = OutFileError("standard output", exc)
                raise self.failed from None
            return
        fd = self._fd
        size: int | None = None
        try:
            size = os.fstat(fd).st_size
            view = memoryview(data.encode("utf-8"))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            if size is not None:
                try:
                    os.ftruncate(fd, size)  # no torn line for the next run to repair
                except OSError:
                    pass
            self.failed = OutFileError(self.path, exc)
            raise self.failed from None
        for t in traces:
            if t:
                self.present.add(t[0].trace_id)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:  # pragma: no cover - everything was fsync-ed already
                pass


NOT_REGULAR_HINT = "--out is appended to and read back on start; use '-' for stdout"


def check_out(path: str) -> None:
    """Raise the ``OSError`` that opening ``path`` as the ``--out`` file would (a missing
    directory, a directory, no permission), so ``watch`` says so at start, in one line;
    also for anything but a regular file (a device, a FIFO).

    Creates the file (empty) when it does not exist, as the watcher would a moment later.
    """
    if path == "-":
        return
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISREG(st.st_mode):
            # it is read back on start: /dev/zero never ends, a FIFO blocks, /dev/full fails
            raise OSError(errno.EINVAL, f"not a regular file ({NOT_REGULAR_HINT})", path)
    with open(path, "ab"):
        pass
    with open(path, "rb"):  # read back on start (trace ids already written)
        pass
