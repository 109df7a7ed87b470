"""The ``--out`` file of the live watcher: append-only OTLP JSON lines, no duplicates ever.

The watcher emits a trace and *then* checkpoints its key; a SIGKILL between the two would
make the next run emit it again.  For the file we close that window by reading the file
itself on start: every trace id already in it counts as emitted.  A last line cut by the
kill (no newline) is truncated away first and its trace emitted again, whole.

Each trace is one line, written with a single ``write`` and ``fsync``-ed before the
checkpoint is written, so "in the checkpoint" implies "in the file".

Rotation by size (``max_bytes``, ``keep``): before a line that would take the file past
``max_bytes`` the file is renamed ``<path>.1`` (``.1`` to ``.2`` ... up to ``.<keep>``,
whose old content is dropped) and a fresh ``<path>`` begun.  A line is never split: it
goes whole into one file, and a line longer than ``max_bytes`` goes alone into a fresh
one.  Each rename is atomic and happens only after the lines before it are ``fsync``-ed,
so a kill anywhere in a rotation loses nothing but the oldest file (as intended).  On
start the trace ids of ``<path>`` and ``<path>.1 .. .<keep>`` all count as written, so a
restart neither duplicates nor loses a trace across a rotation.  At most ``keep + 1``
files of ``max_bytes`` (plus at most one line each) are on disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Sequence

from ..sinks.otlp_json import export_request_text
from ..span_records import SpanRecord

_TRACE_ID = re.compile(rb'"traceId":"([0-9a-fA-F]{32})"')

#: Default ``--out-keep``: with the live file, at most 5 files on the volume.
DEFAULT_KEEP = 4


def rotated_paths(path: str, keep: int) -> list[str]:
    """``<path>.<keep>`` .. ``<path>.1``: the rotated files, oldest first."""
    return [f"{path}.{i}" for i in range(keep, 0, -1)]


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

    def __init__(self, path: str, max_bytes: int | None = None, keep: int = DEFAULT_KEEP) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.path = path
        #: rotate before a line that would take the file past this (None or 0: never)
        self.max_bytes = max_bytes if max_bytes and max_bytes > 0 else None
        self.keep = keep
        self.rotations = 0
        self.present: set[str] = set()
        if path != "-":
            for old in rotated_paths(path, keep):
                self.present |= scan_and_repair(old)
            self.present |= scan_and_repair(path)
        self._fd: int | None = self._open() if path != "-" else None
        self.failed: OutFileError | None = None

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)

    def paths(self) -> list[str]:
        """The files that exist now, oldest first (rotated ones, then ``path``)."""
        if self.path == "-":
            return []
        return [p for p in [*rotated_paths(self.path, self.keep), self.path] if os.path.exists(p)]

    def write(self, traces: Sequence[Sequence[SpanRecord]]) -> None:
        """The traces, one line each, as the bridge writes them (:func:`export_request_text`)."""
        import sys

        if self.failed is not None:
            raise self.failed
        lines = [export_request_text(t) + "\n" for t in traces]
        if self._fd is None:
            try:
                sys.stdout.write("".join(lines))
                sys.stdout.flush()
            except OSError as exc:
                self.failed = OutFileError("standard output", exc)
                raise self.failed from None
            return
        try:
            size = os.fstat(self._fd).st_size
        except OSError as exc:
            self.failed = OutFileError(self.path, exc)
            raise self.failed from None
        chunk: list[bytes] = []
        ids: list[str] = []
        for t, text in zip(traces, lines, strict=True):
            line = text.encode("utf-8")
            if self.max_bytes is not None and size > 0 and size + len(line) > self.max_bytes:
                self._append(chunk, ids)  # whole lines only, then the file moves on
                chunk, ids = [], []
                self._rotate()
                size = 0
            chunk.append(line)
            if t:
                ids.append(t[0].trace_id)
            size += len(line)
        self._append(chunk, ids)

    def _append(self, chunk: list[bytes], ids: list[str]) -> None:
        """Write ``chunk`` (whole lines) and ``fsync``; on failure cut the file back."""
        if not chunk:
            return
        fd = self._fd
        assert fd is not None
        size: int | None = None
        try:
            size = os.fstat(fd).st_size
            view = memoryview(b"".join(chunk))
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError as exc:
            if size is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)  # no torn line for the next run to repair
            self.failed = OutFileError(self.path, exc)
            raise self.failed from None
        self.present.update(ids)

    def _rotate(self) -> None:
        """``path`` -> ``path.1`` -> ... -> ``path.<keep>`` (the old last one dropped)."""
        fd, self._fd = self._fd, None
        try:
            if fd is not None:
                os.close(fd)
            chain = [*rotated_paths(self.path, self.keep), self.path]  # oldest first
            for dst, src in zip(chain, chain[1:], strict=False):
                with contextlib.suppress(FileNotFoundError):  # (fewer files so far, or a cut rotation)
                    os.replace(src, dst)
            self._fd = self._open()
            fsync_dir(self.path)
        except OSError as exc:
            self.failed = OutFileError(self.path, exc)
            raise self.failed from None
        self.rotations += 1

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):  # pragma: no cover - everything was fsync-ed already
                os.close(fd)


def fsync_dir(path: str) -> None:
    """Make renames into ``path``'s directory durable (a power cut, not a kill, could
    otherwise undo them)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """``path`` holds ``data`` whole, or what it held before, whenever the process dies: a
    temporary file in the same directory, ``fsync``-ed, renamed over it, the rename made
    durable."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path)


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
