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


class OutFile:
    """Appends one trace per line; ``fsync`` per batch."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.present = scan_and_repair(path) if path != "-" else set()
        self._fh = open(path, "a", encoding="utf-8") if path != "-" else None

    def write(self, traces: Sequence[Sequence[SpanRecord]]) -> None:
        import json
        import sys

        data = "".join(json.dumps(export_request(t), separators=(",", ":")) + "\n" for t in traces)
        if self._fh is None:
            sys.stdout.write(data)
            sys.stdout.flush()
            return
        self._fh.write(data)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        for t in traces:
            if t:
                self.present.add(t[0].trace_id)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


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
