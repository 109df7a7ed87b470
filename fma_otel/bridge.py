"""The offline bridge: capture files -> correlator -> span trees.

This is the pipeline behind ``fma-otel bridge`` (and the reference the live watcher is
tested against): sources are read in a fixed order (Pods first, so the klog year can be
resolved against Pod timestamps; then launcher logs; then the DPC log, streamed), every
line is counted, and the result is a list of finished traces.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO, Any

from . import model as M
from .build import build_trace
from .correlate import Actuation, Correlator, dpc_row, failed_poll
from .facts import WANTED_CONTAINS, WANTED_MESSAGES
from .sources.klog import iter_klog
from .sources.klog_segments import MIN_PARALLEL_BYTES, SegmentedRead
from .sources.launcher_log import iter_launcher_log
from .sources.pods import iter_pod_events
from .sources.records import SourceStats
from .workers import default_jobs, no_cyclic_gc

CAPTURE_PODS = "pods.json"
CAPTURE_DPC = "dpc.log"
CAPTURE_LAUNCHER_PREFIX = "launcher-"
CAPTURE_LAUNCHER_SUFFIX = ".log"


class InputError(Exception):
    """An unusable argument or file: the CLI prints it on one line and exits 2."""


@dataclass
class BridgeInputs:
    pods: list[str]
    dpc_log: str | None
    launcher_logs: dict[str, str] = field(default_factory=dict)


@dataclass
class BridgeResult:
    actuations: list[Actuation]
    traces: list[list[M.SpanRecord]]
    stats: list[SourceStats]
    #: requesters the DPC log names whose Pod is not in the capture (nothing to trace)
    orphans: int = 0
    #: segments the DPC log was read in, by workers and (its head) this process; 1: in one
    #: piece, serially here or by one worker while this process read the other sources
    dpc_segments: int = 1
    #: with ``build=False``: the requester Pods in order and what makes each one's
    #: actuations (``actuations`` is then empty: the caller correlates them where it
    #: builds and encodes them, ``trace_lines.py``)
    requesters: list[dict[str, Any]] = field(default_factory=list)
    actuations_of: Callable[[dict[str, Any]], list[Actuation]] | None = None

    @property
    def span_count(self) -> int:
        return sum(len(t) for t in self.traces)


def sample_dir() -> Path:
    """The embedded sample capture shipped inside the package."""
    return Path(str(resources.files("fma_otel") / "data" / "sample"))


def inputs_from_capture(directory: str | os.PathLike[str]) -> BridgeInputs:
    """A capture directory: ``pods.json``, ``dpc.log``, ``launcher-<pod>.log`` (docs/capture-format.md).

    The launcher logs are found with one ``scandir`` and sorted by name (what ``glob`` and
    sorting ``Path`` objects gave, ~40 ms for 1900 launchers, on the bridge's critical path
    before its workers start)."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{d}: not a capture directory")
    pods = _capture_file(d / CAPTURE_PODS)
    if pods is None:
        raise InputError(f"{d}: capture directory has no {CAPTURE_PODS}")
    pre, suf = CAPTURE_LAUNCHER_PREFIX, CAPTURE_LAUNCHER_SUFFIX
    try:
        with os.scandir(d) as entries:
            found = sorted(
                (
                    e
                    for e in entries
                    if e.name.startswith(pre) and e.name.endswith(suf) and len(e.name) >= len(pre) + len(suf)
                ),
                key=attrgetter("name"),
            )
    except OSError as exc:
        raise _os_error(str(d), exc) from None
    launchers: dict[str, str] = {}
    for e in found:
        # a regular file, or a link to one, as scandir already knows; anything else is
        # judged (and refused) the way every capture file is
        path = str(d / e.name) if e.is_file() else _capture_file(d / e.name)
        if path is not None:
            launchers[e.name[len(pre) : -len(suf)]] = path
    return BridgeInputs([pods], _capture_file(d / CAPTURE_DPC), launchers)


def _capture_file(path: Path) -> str | None:
    """A capture file's path, ``None`` if there is none.  A capture holds regular files
    only: a directory, FIFO or device in its place is an error (a FIFO would block the run
    forever, ``/dev/zero`` never end), and so is a broken or looping link."""
    if not path.exists():
        if path.is_symlink():
            raise InputError(f"{path}: broken symbolic link")
        return None
    if not path.is_file():
        raise InputError(f"{path}: not a regular file")
    return str(path)


def _os_error(path: str, exc: OSError) -> InputError:
    if isinstance(exc, FileNotFoundError):
        return InputError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return InputError(f"{path}: is a directory, expected a file")
    if isinstance(exc, PermissionError):
        return InputError(f"{path}: permission denied")
    return InputError(f"{path}: cannot read ({exc.strerror or exc})")


@contextlib.contextmanager
def _reading(path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` for reading; any OS error, at open or mid-read, becomes an InputError."""
    try:
        with open(path, "rb") as fh:
            yield fh
    except OSError as exc:
        raise _os_error(path, exc) from None


def check_readable(paths: Iterable[str]) -> dict[str, int]:
    """Fail fast, before any work, on a missing or unreadable input (or a directory); give
    each input's size in bytes (0 for a pipe).

    With ``os.open``, not ``open``: no file object per input (a capture has one per
    launcher, and this runs before the DPC-log workers start)."""
    sizes: dict[str, int] = {}
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise _os_error(p, exc) from None
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise _os_error(p, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
        sizes[p] = st.st_size if stat.S_ISREG(st.st_mode) else 0
    return sizes


def run_bridge(
    inputs: BridgeInputs,
    *,
    baseline_selector: Mapping[str, str] | None = None,
    baseline_container: str | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = None,
    parallel_min_bytes: int = MIN_PARALLEL_BYTES,
    build: bool = True,
) -> BridgeResult:
    """Read every source, correlate, and build one finished trace per actuation.

    A DPC log of ``parallel_min_bytes`` or more is read by ``jobs`` worker processes
    (default: the CPUs this process may use, at most 4; forked, or spawned when this process
    runs other threads) while this process reads the Pods and launcher logs: same records,
    counts and output as a serial read (``sources/klog_segments.py``).  The workers also make
    each line's fact (``correlate.dpc_row``), so only what the correlator can keep crosses
    the pipe, and this process adds those in line order.

    ``build=False`` leaves ``actuations`` and ``traces`` empty and gives ``requesters`` and
    ``actuations_of`` instead, for a caller that correlates, builds and encodes the
    actuations itself (``trace_lines.py``, in parallel).
    """
    sizes = check_readable(
        [*inputs.pods, *([inputs.dpc_log] if inputs.dpc_log else []), *inputs.launcher_logs.values()]
    )
    with no_cyclic_gc():
        return _run_bridge(
            inputs, sizes, baseline_selector, baseline_container, progress, jobs, parallel_min_bytes, build
        )


def _run_bridge(
    inputs: BridgeInputs,
    sizes: Mapping[str, int],
    baseline_selector: Mapping[str, str] | None,
    baseline_container: str | None,
    progress: Callable[[int], None] | None,
    jobs: int | None,
    parallel_min_bytes: int,
    build: bool,
) -> BridgeResult:
    segmented = (
        SegmentedRead.start(
            inputs.dpc_log,
            WANTED_MESSAGES,
            WANTED_CONTAINS,
            default_jobs() if jobs is None else jobs,
            parallel_min_bytes,
            transform=dpc_row,
            drop=failed_poll,
            other_bytes=_other_work_bytes(inputs, sizes),
        )
        if inputs.dpc_log
        else None
    )
    try:
        return _read_sources(inputs, segmented, baseline_selector, baseline_container, progress, build)
    finally:
        # Also when a source fails (an InputError, an unreadable file): the DPC-log workers
        # would otherwise stay blocked holding their segments' rows until this process exits.
        if segmented is not None:
            segmented.close()


#: What reading the other sources costs, in bytes of DPC log read in the same time
#: (measured on the 200 MB benchmark capture, one process: the DPC log into rows ~9 ns a
#: byte, pods.json ~11 ns a byte, a launcher log ~95 us, mostly per file).  Only the
#: balance between the processes depends on it, never the result.
POD_BYTE_WEIGHT = 1.25
LAUNCHER_FILE_BYTES = 8 << 10


def _other_work_bytes(inputs: BridgeInputs, sizes: Mapping[str, int]) -> int:
    """The Pods and launcher logs this process reads while the DPC-log workers run, as
    bytes of DPC log (``SegmentedRead.start``'s ``other_bytes``); ``sizes`` from
    :func:`check_readable`."""
    pods = sum(sizes.get(p, 0) for p in inputs.pods)
    launchers = sum(sizes.get(p, 0) for p in inputs.launcher_logs.values())
    return int(pods * POD_BYTE_WEIGHT) + launchers + LAUNCHER_FILE_BYTES * len(inputs.launcher_logs)


def _read_sources(
    inputs: BridgeInputs,
    segmented: SegmentedRead | None,
    baseline_selector: Mapping[str, str] | None,
    baseline_container: str | None,
    progress: Callable[[int], None] | None,
    build: bool,
) -> BridgeResult:
    """Read the Pods and launcher logs here, then the DPC log (from ``segmented``'s workers,
    or serially); correlate; build the traces unless ``build`` is false."""
    c = Correlator(baseline_selector=baseline_selector, baseline_container=baseline_container)
    stats: list[SourceStats] = []
    for path in inputs.pods:
        st = SourceStats(path)
        with _reading(path) as fh:
            n = 0
            for ev in iter_pod_events(fh, st):
                c.add_pod(ev)
                n += 1
        if n == 0 and st.read and not st.understood:
            raise InputError(f"{path}: not Kubernetes Pod JSON (no Pod object found)")
        stats.append(st)
    for launcher, path in inputs.launcher_logs.items():
        st = SourceStats(path)
        c.mark_launcher_log(launcher)
        with _reading(path) as fh:
            for rec in iter_launcher_log(fh, st, facts_only=True):
                c.add_launcher(launcher, rec)
        _require_some(st, path, "a launcher log")
        stats.append(st)
    if inputs.dpc_log:
        st = SourceStats(inputs.dpc_log)
        with _reading(inputs.dpc_log) as fh:
            items: Iterable[Any]
            if segmented is not None:
                # the workers made each line's fact (dpc_row): add those rows in line order
                items, add, line_of = segmented.records(st, progress), c.add_dpc_row, itemgetter(0)
            else:
                src = _ProgressReader(fh, progress) if progress else fh
                items = iter_klog(
                    src, st, messages=WANTED_MESSAGES, contains=WANTED_CONTAINS, drop=failed_poll
                )
                add, line_of = c.add_dpc, attrgetter("line_no")
            for item in items:
                try:
                    add(item)
                except ValueError as exc:
                    st.skip(line_of(item), str(exc))
                    st.understood -= 1
        _require_some(st, inputs.dpc_log, "a klog (DPC) log")
        stats.append(st)
    segments = segmented.segments if segmented is not None else 1
    if not build:
        c.prepare()
        return BridgeResult(
            [], [], stats, c.orphan_requesters(), segments, c.requesters_in_order(), c.actuations_of
        )
    acts = c.actuations()
    return BridgeResult(acts, [build_trace(a) for a in acts], stats, c.orphan_requesters(), segments)


def _require_some(st: SourceStats, path: str, what: str) -> None:
    if st.read and not st.understood:
        raise InputError(f"{path}: not {what} (none of its {st.read} lines could be read)")


class _ProgressReader:
    """Wraps a binary file to report bytes read (for a progress bar on long logs)."""

    def __init__(self, fh, report: Callable[[int], None]) -> None:  # noqa: ANN001
        self._fh, self._report = fh, report

    def __iter__(self):  # noqa: ANN204
        for line in self._fh:
            self._report(len(line))
            yield line

    def read(self, n: int = -1) -> bytes:
        """Blocks for the klog parser's bulk scan, reported as they are read."""
        data = self._fh.read(n)
        self._report(len(data))
        return data

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self._fh, name)


def summary(
    result: BridgeResult,
    written: tuple[int, int] | None = None,
    paths: Mapping[tuple[str, bool], int] | None = None,
) -> str:
    """The stderr summary: actuations per path, completeness, lines per source, spans.

    ``written`` is ``(traces, spans)`` and ``paths`` the actuations counted by ``(path,
    complete)`` when they were correlated and built outside ``result``.
    """
    if paths is None:
        paths = Counter((a.path, a.complete) for a in result.actuations)
    by_path: dict[str, list[int]] = {}
    for (path, complete), n in paths.items():
        by_path.setdefault(path, [0, 0])[0 if complete else 1] += n
    lines = [f"actuations: {sum(paths.values())}"]
    for path in sorted(by_path):
        done, open_ = by_path[path]
        lines.append(f"  {path:<14} complete {done:>5}  incomplete {open_:>5}")
    for st in result.stats:
        lines.append(f"source {st.name}: read {st.read}, understood {st.understood}, skipped {st.skipped}")
    if result.orphans:
        lines.append(
            f"not traced: {result.orphans} requester(s) in the DPC log have no Pod in the capture "
            "(deleted before it was taken? capture Pods with kubectl get pods -w)"
        )
    n_traces, n_spans = written if written is not None else (len(result.traces), result.span_count)
    lines.append(f"spans: {n_spans} in {n_traces} traces")
    return "\n".join(lines)
