"""The offline bridge: capture files -> correlator -> span trees, one data path.

This is the pipeline behind ``fma-otel bridge`` (and the reference the live watcher is
tested against): sources yield records, the correlator takes them, the builder makes one
trace per actuation, and the caller's sink writes each trace as it is made.  Sources are
read in a fixed order (Pods first, so the klog year can be resolved against Pod
timestamps; then launcher logs; then the DPC log, streamed), every line is counted.

Why traces are made lazily (:meth:`BridgeResult.iter_traces`): the output of a long
capture is several times the state the correlator keeps, so holding it would make the
output, not the input, bound the memory of a run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from operator import attrgetter
from pathlib import Path
from typing import IO, NamedTuple

from . import podfacts as P
from .build import build_trace
from .correlate import Actuation, Correlator
from .facts import WANTED_CONTAINS, WANTED_MESSAGES
from .instants import DEFAULT_TOLERANCE_NS
from .lines import MAX_LINE_BYTES, read_lines
from .phase_inputs import PhaseSources, read_events
from .phase_spans import vllm_key
from .sources.klog import KlogParseError, iter_klog, parse_klog_line, split_timestamp_prefix
from .sources.launcher_log import iter_launcher_log, parse_launcher_line
from .sources.pods import iter_pod_events
from .sources.records import SourceStats
from .span_records import SpanRecord
from .timeutil import days_off

CAPTURE_PODS = "pods.json"
CAPTURE_DPC = "dpc.log"
CAPTURE_LAUNCHER_PREFIX = "launcher-"
CAPTURE_LAUNCHER_SUFFIX = ".log"
CAPTURE_VLLM_DIR = "vllm"
CAPTURE_VLLM_POD_PREFIX = "pod-"
CAPTURE_EVENTS = "events.json"


class InputError(Exception):
    """An unusable argument or file: the CLI prints it on one line and exits 2."""


@dataclass
class BridgeInputs:
    pods: list[str]
    dpc_log: str | None
    launcher_logs: dict[str, str] = field(default_factory=dict)
    #: instance id (or baseline Pod name) -> vLLM log; Kubernetes Events files
    vllm_logs: dict[str, str] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    #: the keys of ``vllm_logs`` named by the user (``--vllm-log``), each meant for an
    #: actuation; a capture's ``vllm/`` holds every instance its launchers served, some
    #: from before the capture's actuations, so its files may pair with none
    vllm_named: set[str] = field(default_factory=set)


class Loss(NamedTuple):
    """Something read that no trace shows, though nothing in it was malformed."""

    source: str  # the file
    where: int  # its line (a Pod: its position among the file's Pod objects, from 0); 0: the file
    why: str


#: the summary's note of DPC lines that repeat one already taken (each is taken once)
DUPLICATE_LINES = "duplicate line(s): the same instant, message and fields as an earlier line, taken once"

#: Loss.why prefixes, for the summary's counts
LOST_UID = "Pod shares its uid"
LOST_REQUESTER = "names a requester"
LOST_LAUNCHER_LOG = "a launcher log"
LOST_VLLM_LOG = "a vLLM log"


@dataclass
class BridgeResult:
    """Every source read into one correlator; the traces are made on demand.

    :meth:`iter_traces` builds each actuation's trace as it is asked for (what the CLI
    writes); ``actuations`` and ``traces`` hold them all, for callers of small captures.
    """

    correlator: Correlator
    stats: list[SourceStats]
    #: requesters the DPC log names whose Pod is not in the capture (nothing to trace)
    orphans: int = 0
    #: what was read and is in no trace (``--strict`` fails on these too), first ones
    lost: list[Loss] = field(default_factory=list)
    #: how many of each kind (``Loss.why`` up to its first ``:``)
    lost_counts: Counter[str] = field(default_factory=Counter)
    #: vLLM logs and Events: the spans they add to each trace
    phases: PhaseSources | None = None

    #: the ``--vllm-log`` keys of the actuations built so far (see :meth:`lose_unpaired_logs`)
    vllm_keys: set[str] = field(default_factory=set)
    #: the vLLM logs named by the user (key -> file), to say which paired with no actuation
    vllm_logs: Mapping[str, str] = field(default_factory=dict)

    def _build(self, act: Actuation) -> list[SpanRecord]:
        trace = build_trace(act)
        if self.phases is None or self.phases.empty:
            return trace
        if self.vllm_logs:
            key = vllm_key(act)
            if key:
                self.vllm_keys.add(key)
        return self.phases.add_phases(act, trace, self.iter_actuations)

    def lose_unpaired_logs(self) -> None:
        """Once every trace is built: count each ``--vllm-log`` whose key no actuation has
        (its lines reach no trace: a key mistyped), as read but not traced."""
        for key, path in self.vllm_logs.items():
            if key not in self.vllm_keys:
                self.lost_counts[LOST_VLLM_LOG] += 1
                if len(self.lost) < MAX_LOSSES:
                    why = (
                        f"{LOST_VLLM_LOG}: {key} is no actuation's FMA instance id nor a baseline Pod's name"
                    )
                    self.lost.append(Loss(path, 0, why))
        self.vllm_logs = {}  # counted once

    def iter_actuations(self) -> Iterator[Actuation]:
        """Every actuation, ordered by requester creation, one requester at a time."""
        c = self.correlator
        for pod in c.requesters_in_order():
            yield from c.actuations_of(pod)

    def iter_traces(self) -> Iterator[tuple[Actuation, list[SpanRecord]]]:
        """Each actuation with its finished trace, built when it is reached."""
        for act in self.iter_actuations():
            yield act, self._build(act)

    @cached_property
    def actuations(self) -> list[Actuation]:
        return list(self.iter_actuations())

    @cached_property
    def traces(self) -> list[list[SpanRecord]]:
        return [self._build(a) for a in self.actuations]


@dataclass
class Tally:
    """What was written, counted as it goes: traces, spans, actuations by (path, complete)."""

    traces: int = 0
    spans: int = 0
    paths: Counter[tuple[str, bool]] = field(default_factory=Counter)

    def add(self, act: Actuation, trace: list[SpanRecord]) -> None:
        self.traces += 1
        self.spans += len(trace)
        self.paths[act.path, act.complete] += 1


def sample_dir() -> Path:
    """The embedded sample capture shipped inside the package."""
    return Path(str(resources.files("fma_otel") / "data" / "sample"))


def inputs_from_capture(directory: str | os.PathLike[str]) -> BridgeInputs:
    """A capture directory: ``pods.json``, ``dpc.log``, ``launcher-<pod>.log``, ``vllm/*.log``,
    ``events.json`` (docs/capture-format.md)."""
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"{d}: not a capture directory")
    pods = _capture_file(d / CAPTURE_PODS)
    if pods is None:
        raise InputError(f"{d}: capture directory has no {CAPTURE_PODS}")
    launchers = _logs_in(d, CAPTURE_LAUNCHER_PREFIX)
    inputs = BridgeInputs([pods], _capture_file(d / CAPTURE_DPC), launchers)
    vdir = d / CAPTURE_VLLM_DIR  # vllm/<instance-id>.log, vllm/pod-<pod>.log
    if vdir.is_dir():
        for key, path in _logs_in(vdir).items():
            key = key.removeprefix(CAPTURE_VLLM_POD_PREFIX)
            if key:
                inputs.vllm_logs[key] = path
    events = _capture_file(d / CAPTURE_EVENTS)
    if events is not None:
        inputs.events.append(events)
    return inputs


def _logs_in(d: Path, prefix: str = "") -> dict[str, str]:
    """The ``<prefix><key>.log`` files of a capture folder, by key in name order: found with
    one ``scandir`` (a capture may hold thousands of launcher logs)."""
    suf = CAPTURE_LAUNCHER_SUFFIX
    try:
        with os.scandir(d) as entries:
            found = sorted(
                (
                    e
                    for e in entries
                    if e.name.startswith(prefix)
                    and e.name.endswith(suf)
                    and len(e.name) >= len(prefix) + len(suf)
                ),
                key=attrgetter("name"),
            )
    except OSError as exc:
        raise _os_error(str(d), exc) from None
    out: dict[str, str] = {}
    for e in found:
        # a regular file, or a link to one, as scandir already knows; anything else is
        # judged (and refused) the way every capture file is
        path = str(d / e.name) if e.is_file() else _capture_file(d / e.name)
        if path is not None:
            out[e.name[len(prefix) : -len(suf)]] = path
    return out


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


def check_readable(paths: Iterable[str]) -> None:
    """Fail fast, before any work, on a missing or unreadable input (or a directory).

    With ``os.open``, not ``open``: no file object per input (a capture has one per
    launcher)."""
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


def run_bridge(
    inputs: BridgeInputs,
    *,
    baseline_selector: Mapping[str, str] | None = None,
    baseline_container: str | None = None,
    progress: Callable[[int], None] | None = None,
    clock_tolerance_ns: int = DEFAULT_TOLERANCE_NS,
) -> BridgeResult:
    """Read every source into one correlator (the traces are built later, on demand).

    With a DPC log and no Pods, every actuation the log shows is traced from it alone
    (keyed by ``serverUID``, the requester's uid, so the trace ids are those a run with Pods
    gives).  Raises :class:`InputError` for an unusable input, before any work when it can."""
    check_readable(
        [*inputs.pods, *([inputs.dpc_log] if inputs.dpc_log else []), *inputs.launcher_logs.values()]
        + [*inputs.vllm_logs.values(), *inputs.events]
    )
    c = Correlator(
        baseline_selector=baseline_selector,
        baseline_container=baseline_container,
        tolerance_ns=clock_tolerance_ns,
        dpc_only=not inputs.pods and bool(inputs.dpc_log),
    )
    stats: list[SourceStats] = []
    lost: list[Loss] = []
    counts: Counter[str] = Counter()

    def lose(source: str, where: int, kind: str, detail: str) -> None:
        counts[kind] += 1
        if len(lost) < MAX_LOSSES:
            lost.append(Loss(source, where, f"{kind}: {detail}"))

    for path in inputs.pods:
        st = SourceStats(path)
        with _reading(path) as fh:
            n = 0
            for ev in iter_pod_events(fh, st):
                if not c.add_pod(ev):
                    lose(
                        path,
                        ev.line or ev.index + 1,
                        LOST_UID,
                        f"{_pod_name(ev.pod)} has uid {P.uid(ev.pod)}, {c.conflict}",
                    )
                n += 1
        if n == 0 and st.read and not st.understood:
            first = f"; line {st.skipped_lines[0][0]}: {st.skipped_lines[0][1]}" if st.skipped_lines else ""
            raise InputError(f"{path}: not Kubernetes Pod JSON (no Pod object found{first})")
        if n == 0 and not st.read:
            _check_no_pods(path, st)
        stats.append(st)
    center = c.years.center_ns()
    for launcher, path in inputs.launcher_logs.items():
        st = SourceStats(path)
        c.mark_launcher_log(launcher)
        with _reading(path) as fh:
            for rec in iter_launcher_log(fh, st, facts_only=True):
                # a stamp in another year (an asctime in 2150) lost the create's spans unsaid
                days = days_off(rec.t_ns, center)
                if days is not None:
                    st.skip(
                        rec.line_no,
                        f"time {days:+.0f} days from the capture's Pods: not a time of this capture",
                    )
                    st.understood -= 1
                    continue
                c.add_launcher(launcher, rec)
        _require_some(st, path, "a launcher log", _is_launcher_log)
        stats.append(st)
    if inputs.dpc_log:
        st = SourceStats(inputs.dpc_log)
        with _reading(inputs.dpc_log) as fh:
            src = _ProgressReader(fh, progress) if progress else fh
            for rec in iter_klog(src, st, messages=WANTED_MESSAGES, contains=WANTED_CONTAINS):
                try:
                    c.add_dpc(rec)
                except ValueError as exc:  # a wanted line without what makes it meaningful
                    st.skip(rec.line_no, str(exc))
                    st.understood -= 1
        if c.duplicates:
            st.note(DUPLICATE_LINES, c.duplicates)
        _require_some(st, inputs.dpc_log, "a klog (DPC) log", _is_klog)
        stats.append(st)
        for line_no, key in c.unknown_requester_lines():
            who = f"name {key[5:]}" if key.startswith("name:") else f"uid {key}"
            lose(inputs.dpc_log, line_no, LOST_REQUESTER, f"{who}, which no Pod in the capture has")
    unpaired = c.unpaired_launcher_logs()
    for launcher, path in inputs.launcher_logs.items():
        if launcher in unpaired:
            lose(
                path, 0, LOST_LAUNCHER_LOG, f"{launcher} is no launcher Pod's name, nor one the DPC log names"
            )
    phases = _phase_sources(inputs, stats, center)
    if phases is not None:
        c.add_kube_events(phases.kube_events)
    named = {k: p for k, p in inputs.vllm_logs.items() if k in inputs.vllm_named}
    return BridgeResult(c, stats, c.orphan_requesters(), lost, counts, phases, vllm_logs=named)


_JSON_SPACE = b" \t\r\n"


def _check_no_pods(path: str, st: SourceStats) -> None:
    """A Pods file that gave nothing at all: empty, or only whitespace, is a counted skip
    (``--strict`` fails): the capture's Pods were lost, and every DPC line then names a
    requester no Pod has.  (A whole empty List is read as one; a value cut before its first
    item is the reader's own counted skip.)"""
    with _reading(path) as fh:
        first = True
        while block := fh.read(1 << 20):
            if first:
                block, first = block.removeprefix(b"\xef\xbb\xbf"), False
            if block.strip(_JSON_SPACE):
                return
    st.read += 1
    st.skip(1, "no Pod JSON at all (an empty file: cut short?)")


def _read_bytes(path: str) -> bytes:
    with _reading(path) as fh:
        return fh.read()


def _phase_sources(
    inputs: BridgeInputs, stats: list[SourceStats], center_ns: int | None = None
) -> PhaseSources | None:
    """vLLM logs and Events, read and counted (the vLLM logs again per actuation's clock)."""
    if not inputs.vllm_logs and not inputs.events:
        return None
    try:
        events, est = read_events(inputs.events, _read_bytes, center_ns)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    stats.extend(est)
    # year 2000: a leap year, so a log's 02-29 is never counted as impossible here
    ps = PhaseSources(
        vllm_logs=inputs.vllm_logs,
        events=events,
        launcher_logs=inputs.launcher_logs,
        open_=_reading,
        year=2000,
    )
    stats.extend(ps.stats)
    return ps


#: Losses itemised for ``--strict`` (all are counted)
MAX_LOSSES = 100


def _pod_name(pod: Mapping[str, object]) -> str:
    return f"{P.namespace(pod) or '?'}/{P.name(pod) or '?'}"  # type: ignore[arg-type]


def _require_some(st: SourceStats, path: str, what: str, first_line_ok: Callable[[bytes], bool]) -> None:
    """A log none of whose lines the bridge could use: refuse it if its first line is not
    of its format either (a Pod list or another file given in its place), since the lines
    a prefilter passed over were not read."""
    if not st.read or st.understood:
        return
    if st.ignored:
        with _reading(path) as fh:
            # as its reader reads lines: any line end, a line past the bound passed over
            lines = read_lines(fh, SourceStats(path), limit=MAX_LINE_BYTES)
            first = next((line for line in lines if line.__class__ is bytes and line.strip()), b"")
        if first.__class__ is bytes and first_line_ok(first):
            return
    raise InputError(f"{path}: not {what} (none of its {st.read} lines could be read)")


def _is_klog(line: bytes) -> bool:
    try:
        return parse_klog_line(line) is not None
    except KlogParseError:
        return False


def _is_launcher_log(line: bytes) -> bool:
    s = line.decode("utf-8", "replace").rstrip("\r\n")
    try:
        if s[10:11] in ("T", "t"):  # a --timestamps prefix
            s = split_timestamp_prefix(s)[1]
        parse_launcher_line(s)
    except ValueError:  # LauncherParseError included
        return False
    return True


class _ProgressReader:
    """Wraps a binary file to report bytes read (for a progress bar on long logs); the line
    reader reads a file in blocks only (``read``)."""

    def __init__(self, fh: IO[bytes], report: Callable[[int], None]) -> None:
        self._fh, self._report = fh, report

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        self._report(len(data))
        return data


def summary(result: BridgeResult, tally: Tally) -> str:
    """The stderr summary: actuations per path, completeness, lines per source, spans,
    and what was lost and why.  ``tally``: what was written."""
    by_path: dict[str, list[int]] = {}
    for (path, complete), n in tally.paths.items():
        by_path.setdefault(path, [0, 0])[0 if complete else 1] += n
    lines = [f"actuations: {sum(tally.paths.values())}"]
    for path in sorted(by_path):
        done, open_ = by_path[path]
        lines.append(f"  {path:<14} complete {done:>5}  incomplete {open_:>5}")
    for st in result.stats:
        ignored = f", ignored {st.ignored}" if st.ignored else ""
        lines.append(
            f"source {st.name}: read {st.read}, understood {st.understood}{ignored}, skipped {st.skipped}"
        )
        lines.extend(f"  note: {n} {what}" for what, n in st.notes.items())
        if st.skipped:
            reasons = Counter(why for _, why in st.skipped_lines)
            more = st.skipped - len(st.skipped_lines)
            lines.extend(f"  skipped {n}: {why}" for why, n in reasons.most_common(5))
            if more:
                lines.append(f"  (and {more} more skipped lines not itemised)")
    if result.orphans:
        n = result.lost_counts[LOST_REQUESTER]
        lines.append(
            f"not traced: {result.orphans} requester(s) in the DPC log have no Pod in the capture "
            f"({n} DPC line(s) name them; deleted before it was taken, or a corrupted uid? "
            "capture Pods with kubectl get pods -w)"
        )
    for kind, what in (
        (LOST_LAUNCHER_LOG, "launcher log(s) match no launcher Pod, nor a launcher the DPC log names"),
        (LOST_VLLM_LOG, "vLLM log(s) match no actuation's FMA instance id, nor a baseline Pod's name"),
    ):
        if result.lost_counts[kind]:
            first = next((loss.source for loss in result.lost if loss.why.startswith(kind)), "?")
            lines.append(f"not traced: {result.lost_counts[kind]} {what} (first: {first})")
    if result.lost_counts[LOST_UID]:
        lines.append(
            f"not traced: {result.lost_counts[LOST_UID]} Pod object(s) have the uid of another Pod "
            "(another name or namespace): a corrupt capture; the first Pod of each uid is kept"
        )
    if result.correlator.dpc_only:
        lines.append(
            "no Pods given: traced from the DPC log alone (keyed by serverUID); what only Pods "
            "know (R.ready, L.scheduled, ...) is listed in fma.missing"
        )
    lines.append(f"spans: {tally.spans} in {tally.traces} traces")
    return "\n".join(lines)
