"""The bridge's phase sources: vLLM logs, Kubernetes Events and the launchers' boot lines.

Why a separate reader: a vLLM log has no year and no zone, so its records depend on the
actuation that dates it (:func:`fma_otel.phase_spans.vllm_clock`); the log is therefore read
once up front for its counts (what ``--strict`` reports) and again, per clock, when an
actuation that names it is built (cached: an instance's cold start and later wakes share
one clock).  Events are read once, whole.  Everything here is counted in
:class:`~fma_otel.sources.records.SourceStats` like the other sources; nothing is invented.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import IO, Any

from . import model as M
from .lines import MAX_LINE_BYTES, bounded_lines
from .phase_spans import (
    FMA_EVENT_REASONS,
    assign_fma_events,
    extra_spans,
    read_dated,
    vllm_key,
    with_fma_events,
)
from .sources.k8s_events import KubeEvent, parse_events, skip_item
from .sources.launcher_log import LauncherParseError, parse_launcher_text
from .sources.records import SourceStats
from .sources.vllm_log import VllmPhase, parse_vllm_log
from .span_records import SpanRecord
from .timeutil import days_off

__all__ = ["PhaseSources", "add_phases", "read_events"]

BOOT_LINE = "Application startup complete."
#: how far into a launcher log its boot line is looked for
_BOOT_SCAN_LINES = 2000


def add_phases(
    act: Any,
    trace: Sequence[SpanRecord],
    *,
    events: Sequence[KubeEvent],
    fma_events: Sequence[KubeEvent],
    vllm: Mapping[str, Sequence[VllmPhase]],
    vllm_clock_assumed: Iterable[str],
    boot_ns: int | None,
) -> list[SpanRecord]:
    """``trace`` with what the phase sources add, the one way the bridge and the live
    watcher build it: ``fma_events`` (FMA's own Events that :func:`assign_fma_events` gave
    this actuation) as span events on ``fma.actuation``, then :func:`extra_spans` over
    ``events`` (those that may concern its Pods), its vLLM log's phases and ``boot_ns``,
    its launcher's boot instant."""
    trace = with_fma_events(trace, fma_events)
    launcher = act.attributes.get(M.A_LAUNCHER)
    return trace + extra_spans(
        act,
        trace,
        vllm=vllm,
        events=events,
        launcher_boot_ns={launcher: boot_ns} if launcher and boot_ns is not None else {},
        vllm_clock_assumed=vllm_clock_assumed,
    )


def read_events(
    paths: Sequence[str], read: Any, center_ns: int | None = None
) -> tuple[list[KubeEvent], list[SourceStats]]:
    """Every Event of ``paths`` (``read(path) -> bytes``), with one SourceStats per file; a
    skipped item is reported as ``file:N`` where N is its index in the file (from 0).  A file
    none of whose items is an Event (another file given in its place) raises ValueError.

    With ``center_ns`` (the capture's median Pod time), an Event whose time lies more than a
    year from it is skipped too (``timeutil.days_off``): it made startup spans in 2150."""
    events: list[KubeEvent] = []
    stats: list[SourceStats] = []
    for path in paths:
        recs, st = parse_events(read(path), path)
        if st.read and not recs and st.skipped == st.read:
            raise ValueError(f"{path}: not Kubernetes Events (none of its {st.read} items is an Event)")
        if center_ns is not None:
            kept = []
            for r in recs:
                off = [abs(d) for d in (days_off(r.first_ns, center_ns), days_off(r.last_ns, center_ns)) if d]
                if off:
                    skip_item(st, r.index, f"time {max(off):.0f} days from the capture's Pods")
                    st.understood -= 1
                else:
                    kept.append(r)
            recs = kept
        events.extend(recs)
        stats.append(st)
    return events, stats


class PhaseSources:
    """The phase inputs of one bridge run; :meth:`add_phases` adds an actuation's phases."""

    def __init__(
        self,
        *,
        vllm_logs: Mapping[str, str],
        events: Sequence[KubeEvent],
        launcher_logs: Mapping[str, str],
        open_: Callable[[str], AbstractContextManager[IO[bytes]]],
        year: int,
    ) -> None:
        self._paths = dict(vllm_logs)
        self._events = list(events)
        self._launchers = dict(launcher_logs)
        self._open = open_
        self._parsed: dict[tuple[str, int, int], list[VllmPhase]] = {}
        self._boot: dict[str, int | None] = {}
        self._fma_events: dict[str, list[KubeEvent]] | None = None
        # the Events of each Pod, by uid and by (namespace, name): an actuation looks at its
        # own Pods' only (a long capture holds many Events)
        self._by_uid: dict[str, list[KubeEvent]] = {}
        self._by_name: dict[tuple[str | None, str], list[KubeEvent]] = {}
        for e in self._events:
            if e.object_uid:
                self._by_uid.setdefault(e.object_uid, []).append(e)
            if e.object_name:
                self._by_name.setdefault((e.object_namespace, e.object_name), []).append(e)
        self.has_fma_events = any(e.raw_reason in FMA_EVENT_REASONS for e in self._events)
        self.stats: list[SourceStats] = []
        for path in self._paths.values():
            too_long: list[int] = []
            _, st = parse_vllm_log(self._lines(path, too_long), year=year, name=path)
            for n in too_long:  # fed as a blank line (so line numbers stay right), counted read
                st.skip(n, f"line longer than {MAX_LINE_BYTES} bytes")
                st.understood -= 1
            self.stats.append(st)

    @property
    def kube_events(self) -> list[KubeEvent]:
        """Every Event read (the correlator takes the scheduler's ``Scheduled`` ones)."""
        return self._events

    @property
    def empty(self) -> bool:
        return not self._paths and not self._events

    def _lines(self, path: str, too_long: list[int] | None = None) -> Iterator[bytes]:
        """The file's lines, streamed (never held whole); an over-long line comes as an empty
        one, so line numbers stay right (its number goes to ``too_long``)."""
        with self._open(path) as fh:
            for n, line in enumerate(bounded_lines(fh, MAX_LINE_BYTES), 1):
                if line.__class__ is bytes:
                    yield line  # type: ignore[misc]
                else:
                    if too_long is not None:
                        too_long.append(n)
                    yield b""

    def _records(self, path: str, year: int, offset: int) -> list[VllmPhase]:
        got = self._parsed.get((path, year, offset))
        if got is None:
            got, _ = parse_vllm_log(self._lines(path), year=year, utc_offset_s=offset)
            self._parsed[path, year, offset] = got
        return got

    def _vllm_of(self, act: Any) -> tuple[dict[str, list[VllmPhase]], list[str]]:
        """``add_phases``'s ``vllm`` and ``vllm_clock_assumed``: the actuation's vLLM log, read
        with its clock (nothing when it names none, or none was given)."""
        key = vllm_key(act)
        path = self._paths.get(key) if key else None
        got = read_dated(act, lambda year, offset: self._records(path, year, offset)) if path else None
        if key is None or got is None:
            return {}, []
        return {key: got[0]}, [key] if got[1] else []

    def boot_ns(self, launcher: str) -> int | None:
        """The launcher log's first ``Application startup complete.`` (its asctime, 1 ms)."""
        if launcher not in self._boot:
            self._boot[launcher] = None
            path = self._launchers.get(launcher)
            if path is not None:
                for n, raw in enumerate(self._lines(path)):
                    if n >= _BOOT_SCAN_LINES:
                        break
                    if BOOT_LINE.encode() not in raw:
                        continue
                    try:
                        rec = parse_launcher_text(raw.decode("utf-8", "replace").rstrip("\r\n"), n + 1)
                    except LauncherParseError:
                        continue
                    if rec.message == BOOT_LINE:
                        self._boot[launcher] = rec.t_ns
                        break
        return self._boot[launcher]

    def add_phases(
        self, act: Any, trace: Sequence[SpanRecord], actuations: Callable[[], Iterable[Any]]
    ) -> list[SpanRecord]:
        """:func:`add_phases` with this run's inputs; which actuation each of FMA's own
        Events concerns is decided once over all of them (``actuations()``)."""
        mine: Sequence[KubeEvent] = ()
        if self.has_fma_events:
            if self._fma_events is None:
                self._fma_events = assign_fma_events(actuations(), self._events)
            mine = self._fma_events.get(act.key, ())
        vllm, assumed = self._vllm_of(act)
        launcher = act.attributes.get(M.A_LAUNCHER)
        return add_phases(
            act,
            trace,
            events=self._events_of(act),
            fma_events=mine,
            vllm=vllm,
            vllm_clock_assumed=assumed,
            boot_ns=self.boot_ns(launcher) if launcher else None,
        )

    def _events_of(self, act: Any) -> list[KubeEvent]:
        """The Events that may concern the actuation's requester and launcher Pods (extra_spans
        picks among them)."""
        a = act.attributes
        ns = a.get(M.A_NAMESPACE) or None
        found: dict[int, KubeEvent] = {}
        groups = [self._by_uid.get(a.get(M.A_REQ_UID) or "", [])]
        for name in (a.get(M.A_REQ_NAME), a.get(M.A_LAUNCHER)):
            if name:
                groups += [self._by_name.get((ns, name), []), self._by_name.get((None, name), [])]
        for group in groups:
            for e in group:
                found[id(e)] = e
        return list(found.values())  # extra_spans orders them by content
