"""Correlate: facts from Pods and logs -> actuations, each with the instants it knows.

One engine for both the offline bridge and the live watcher: it is fed Pods, DPC lines and
launcher lines in any order and can be asked, at any time, which actuations exist and which
are finished.  Nothing here is order-sensitive: facts are kept per requester and the
actuation is assembled on demand, so a replay of the same capture in another order gives
the same actuations (the replay tests check this).

Rounds: a requester that is unbound (DPC "Unbound server-providing Pod") and bound again is
actuated again; round ``k`` (from 1) has the key ``uid`` (k=1) or ``uid/k``, and its window
runs from the previous unbind to the next one.  Counting from 1 needs every unbind since the
requester's start; a live watcher that restarts re-reads only a recent part of the DPC log,
so it seeds the count (:meth:`Correlator.seed_round`, from :meth:`Correlator.round_anchors`
of the run before) with the number of the round that begins at a known unbind.
"""

from __future__ import annotations

import bisect
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from . import facts as F
from . import model as M
from . import podfacts as P
from .facts import DpcFact, LauncherFact
from .sources.klog import simple_line_pattern, split_timestamp_prefix
from .sources.pods import PodStore
from .sources.records import KlogRecord, LauncherRecord, PodEvent
from .timeutil import END_NS, MIN_NS, civil_to_ns, parse_rfc3339_ns, year_of_ns

INF = 1 << 62
#: how far a launcher's log may be from the DPC's clock and still be paired with its call
LAUNCHER_PAIR_WINDOW_NS = 60 * M.S
#: cap of successful /is_sleeping answers kept per requester (bounded memory on long logs)
MAX_QUERIES = 64


@dataclass(frozen=True)
class Actuation:
    """One actuation as the builder needs it: identity, path, instants, attributes."""

    key: str
    round: int
    path: str
    complete: bool
    instants: Mapping[str, M.Instant]
    attributes: Mapping[str, Any]
    missing: tuple[str, ...] = ()
    dpc_actuation_secs: float | None = None
    has_launcher_data: bool = False

    @property
    def trace_id(self) -> str:
        return M.trace_id_for(self.key)

    @property
    def last_ns(self) -> int:
        return max((i.t_ns for i in self.instants.values()), default=0)


@dataclass
class _PodTrack:
    """Everything seen of one Pod across versions: Ready transitions are kept as a set."""

    ready_true: set[int] = field(default_factory=set)
    updated_wall_ns: int = 0


class YearResolver:
    """klog prints no year: take it from a ``--timestamps`` prefix, else nearest Pod time."""

    def __init__(self) -> None:
        self._refs: list[int] = []
        self._known: set[int] = set()
        self._cache: dict[tuple[int, int], int] = {}  # (month, day) -> year

    def add_reference(self, t_ns: int | None) -> None:
        """One reference per distinct time: every event of a Pod repeats its creation time."""
        if t_ns is None or t_ns in self._known:
            return
        self._known.add(t_ns)
        bisect.insort(self._refs, t_ns)
        self._cache.clear()

    def resolve(self, rec: KlogRecord) -> int:
        return self.resolve_fields(rec.month, rec.day, rec.tod_us, rec.prefix_ns)

    def resolve_fields(self, month: int, day: int, tod_us: int, prefix_ns: int | None) -> int:
        """:meth:`resolve` from a record's date fields (raises ``ValueError`` as it does)."""
        if prefix_ns is not None:
            tm = time.gmtime(prefix_ns // M.S)
            year = tm.tm_year
            # the prefix is read after the line was written: December line, January prefix
            if month == 12 and tm.tm_mon == 1:
                year -= 1
            return civil_to_ns(year, month, day, tod_us)
        key = (month, day)
        year = self._cache.get(key)
        if year is None:
            year = self._nearest_year(month, day, tod_us)
            self._cache[key] = year
        # civil_to_ns caches each day's start; it raises for a day that year lacks
        return civil_to_ns(year, month, day, tod_us)

    def _nearest_year(self, month: int, day: int, tod_us: int) -> int:
        if not self._refs:
            return time.gmtime().tm_year
        years = {year_of_ns(self._refs[0]), year_of_ns(self._refs[-1])}
        best: tuple[int, int] | None = None
        for y0 in years:
            for y in (y0 - 1, y0, y0 + 1):
                try:
                    t = civil_to_ns(y, month, day, tod_us)
                except (ValueError, OverflowError):
                    continue
                i = bisect.bisect_left(self._refs, t)
                d = min(abs(self._refs[j] - t) for j in (i - 1, i) if 0 <= j < len(self._refs))
                if best is None or d < best[0] or (d == best[0] and y > best[1]):
                    best = (d, y)
        return best[1] if best else year_of_ns(self._refs[-1])


#: Days every year's month has (February: 28): a date within them resolves in any year.
_SURE_DAYS = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
#: ``--timestamps`` prefixes in timeutil's window resolve for any such date, from its
#: February on (a December line with a January prefix is placed in the year before).
_PREFIX_MIN_NS = MIN_NS + 31 * 86_400 * M.S
_PREFIX_MAX_NS = END_NS


#: A failed ``/is_sleeping`` poll as the DPC prints it: an "HTTP call done" line whose
#: call-site pairs come last, in the order of ``logger.V(5).Info("HTTP call done",
#: "purpose", .., "method", .., "url", .., "httpCallStartTime", .., "latencySecs", ..,
#: "statusCode", .., "err", err)``, with an ``err`` string whose only escapes are ``\"`` and
#: a ``latencySecs`` under 10**8 (within ``facts.MAX_LATENCY_S``, so the fact cannot raise).
#: The line is matched in two parts, the tail from its `` purpose=`` on (groups: the start
#: time, the ``err`` body) and the head before it, so neither regex backtracks.  Anything
#: else (another order, other escapes) is parsed in full, as before.
_POLL_AT = b' purpose="query_sleeping" method="'
_POLL_HEAD = simple_line_pattern(F.MSG_HTTP).fullmatch
_POLL_TAIL = re.compile(
    rb' purpose="query_sleeping" method="[^"\\]*" url="[^"\\]*"'
    rb' httpCallStartTime="([0-9][-0-9T:.Zz+]*)"'
    rb" latencySecs=[0-9]{1,8}(?:\.[0-9]{1,20})?(?:[eE]-[0-9]{1,2})? statusCode=[0-9]{1,9}"
    rb' err="([^"\\]*(?:\\"[^"\\]*)*)"'
).fullmatch


def failed_poll(line: bytes) -> bool:
    """Whether a raw DPC line (line end included) is surely a failed ``/is_sleeping`` poll
    that :func:`dpc_row` would drop: a record, a fact that does not raise, not ``ok``, and
    a date that resolves in any year (with or without a ``--timestamps`` prefix).  ``iter_klog(drop=failed_poll)`` then counts it
    without parsing it.

    Why: in a real DPC log most wanted lines are these polls (every 5 s until vLLM
    serves: 7,482 of 19,830 in the benchmark capture), and a full parse and fact cost
    ~35 us each, this check a fraction of that.  It only says yes where the full path
    surely drops the line; ``tests/test_failed_poll.py`` holds the two equal.
    """
    if line[-1:] == b"\n":
        line = line[:-2] if line[-2:-1] == b"\r" else line[:-1]
    at = line.rfind(_POLL_AT)
    if at < 0:
        return False
    tail = _POLL_TAIL(line, at)
    if tail is None:
        return False
    h = 0
    if line[:1].isdigit():
        # a --timestamps prefix (what `fma-otel capture` writes): read as the parser reads
        # it, and within the range dpc_row takes as sure
        h = line.find(b" ") + 1
        try:  # the parser's own reading (klog's RFC 3339 reader, not timeutil's)
            prefix_ns = split_timestamp_prefix(line[:h].decode("ascii"))[0] if h else None
        except ValueError:  # UnicodeDecodeError included: the parser decides such a line
            return False
        if prefix_ns is None or not _PREFIX_MIN_NS <= prefix_ns < _PREFIX_MAX_NS:
            return False
    head = _POLL_HEAD(line, h, at)
    if head is None:
        return False
    mo, dd, hh, mi, ss = head.groups()
    month = int(mo)
    if not (1 <= month <= 12 and 1 <= int(dd) <= _SURE_DAYS[month]):
        return False
    start, err = tail.groups()
    if int(hh) > 23 or int(mi) > 59 or int(ss) > 60 or not err or err == b"null":
        return False
    try:
        parse_rfc3339_ns(start.decode("ascii"))
    except ValueError:
        return False
    return True


def dpc_row(rec: KlogRecord) -> tuple[Any, ...] | None:
    """What :meth:`Correlator.add_dpc_row` needs of a DPC line, worked out where the line
    was read (a DPC-log worker, ``klog_segments``), or ``None`` when the line cannot change
    anything: ``(line_no, month, day, tod_us, prefix_ns, payload)``.

    The payload is the fact without its time (:func:`facts.fact_payload`), the reason of
    the ``ValueError`` the fact raised, or ``None`` for no fact.  The time stays with the
    parent because the year comes from the Pods it reads.  Dropped outright: lines that make
    no fact, and failed ``/is_sleeping`` answers (which ``add_dpc`` never keeps: see
    ``_keep_query``), when their date surely resolves (so no year could raise for them).
    Why: most wanted DPC lines are such failed polls, so they no longer cross the pipe.
    """
    if rec.msg not in F.MESSAGES:
        return None
    try:
        fact = F.dpc_fact(rec, 0)
    except ValueError as exc:
        return (rec.line_no, rec.month, rec.day, rec.tod_us, rec.prefix_ns, str(exc))
    if fact is None or (fact.kind == F.SLEEP_QUERY and not fact.ok):
        p = rec.prefix_ns
        if (
            1 <= rec.month <= 12
            and 1 <= rec.day <= _SURE_DAYS[rec.month]
            and (p is None or _PREFIX_MIN_NS <= p < _PREFIX_MAX_NS)
        ):
            return None
        return (rec.line_no, rec.month, rec.day, rec.tod_us, p, None)
    return (rec.line_no, rec.month, rec.day, rec.tod_us, rec.prefix_ns, F.fact_payload(fact))


class Correlator:
    """Feed Pods, DPC records and launcher records; ask for actuations."""

    def __init__(
        self,
        *,
        baseline_selector: Mapping[str, str] | None = None,
        baseline_container: str | None = None,
        clock_ns: Any = None,
    ) -> None:
        self.baseline_selector = dict(baseline_selector) if baseline_selector else None
        self.baseline_container = baseline_container
        self._clock = clock_ns or time.time_ns
        self.store = PodStore()
        self._tracks: dict[str, _PodTrack] = {}
        self._dpc: dict[str, list[DpcFact]] = {}
        self._launcher: dict[tuple[str, str], list[LauncherFact]] = {}
        self._launchers_with_logs: set[str] = set()
        self._updated: dict[str, int] = {}  # requester uid or name-key -> wall ns of last fact
        self.years = YearResolver()
        self._evicted: OrderedDict[str, None] = OrderedDict()
        self.dpc_errors = 0
        #: launcher name -> newest launcher Pod; rebuilt lazily after any add_pod
        self._launcher_index: dict[str, dict[str, Any]] | None = None
        #: Pod name -> [(creation, uid)] oldest first; rebuilt lazily after any add_pod
        self._name_index: dict[str, list[tuple[int, str | None]]] | None = None
        #: requester uid -> (k, t, begun): round k begins at its unbind at t (see seed_round)
        self._seeds: dict[str, tuple[int, int, bool]] = {}

    # ------------------------------------------------------------------ feeding

    def add_pod(self, ev: PodEvent) -> None:
        pod = ev.pod
        u = P.uid(pod)
        if not u:
            return
        self.store.add(ev)
        self._launcher_index = self._name_index = None
        track = self._tracks.setdefault(u, _PodTrack())
        ready = P.condition_true_ns(pod, "Ready")
        if ready is not None:
            track.ready_true.add(ready)
        track.updated_wall_ns = self._clock()
        self._updated[u] = track.updated_wall_ns
        self.years.add_reference(P.created_ns(pod))

    def add_dpc(self, rec: KlogRecord) -> DpcFact | None:
        """Add one DPC line; returns its fact.  Raises ``ValueError`` for a malformed wanted line."""
        if rec.msg not in F.MESSAGES:
            return None
        fact = F.dpc_fact(rec, self.years.resolve(rec))
        if fact is None:
            return None
        return self._add_fact(fact)

    def add_dpc_row(self, row: tuple[Any, ...]) -> DpcFact | None:
        """Add what :func:`dpc_row` made of a DPC line in a worker: the same effect, the same
        fact and the same ``ValueError`` (in the same order) as :meth:`add_dpc` of the line."""
        line_no, month, day, tod_us, prefix_ns, payload = row
        t_ns = self.years.resolve_fields(month, day, tod_us, prefix_ns)
        if payload is None:
            return None
        if payload.__class__ is str:
            raise ValueError(payload)
        return self._add_fact(F.fact_from_payload(payload, t_ns, line_no))

    def _add_fact(self, fact: DpcFact) -> DpcFact:
        key = fact.uid or (f"name:{fact.name}" if fact.name else None)
        if key is None:
            return fact
        if fact.kind == F.SLEEP_QUERY and not self._keep_query(key, fact):
            return fact
        facts = self._dpc.get(key)
        if facts is None:
            self._dpc[key] = [fact]
        else:
            facts.append(fact)
        self._updated[key] = self._clock()
        return fact

    def add_launcher(self, launcher: str, rec: LauncherRecord) -> LauncherFact | None:
        self._launchers_with_logs.add(launcher)
        fact = F.launcher_fact(launcher, rec)
        if fact is not None:
            self._launcher.setdefault((launcher, fact.instance_id), []).append(fact)
        return fact

    def seed_round(self, uid: str, rnd: int, unbound_ns: int, begun: bool = True) -> None:
        """Say that the requester's round ``rnd`` (>= 2) begins at its unbind at ``unbound_ns``
        (the DPC log time of that "Unbound server-providing Pod" line); ``begun``: whether
        that round had begun (facts after the unbind had been seen), else ``rnd`` is the
        number its first fact will start.

        Why: rounds are counted from the unbinds the correlator has seen, and a live watcher
        that restarts re-reads the DPC log only from its replay point, so unbinds before it
        would be missing from the count: the requester's open round would get a lower
        number, a key already emitted, and never be emitted.  With a seed, unbinds after
        ``unbound_ns`` count on from ``rnd``, rounds before it count back, and the round
        that begins there keeps ``D.unbound`` (and its number) even when its lines are not
        re-read.
        """
        if rnd >= 2:
            self._seeds[uid] = (rnd, unbound_ns, begun)

    def unseed_round(self, uid: str) -> None:
        self._seeds.pop(uid, None)

    def round_anchors(self) -> dict[str, tuple[int, int, bool]]:
        """What :meth:`seed_round` needs to keep each requester's count after a restart:
        ``uid -> (k, t, begun)`` where ``t`` is the requester's last unbind (or its seed),
        ``k`` the number of the round that begins there, and ``begun`` whether anything of
        that round has been seen yet.  Requesters never unbound are left out (their count
        starts at 1 anyway); seeds whose Pod has not been seen are returned as they are.
        """
        out: dict[str, tuple[int, int, bool]] = {}
        for pod in self.requesters():
            if P.role(pod, self.baseline_selector) != P.ROLE_REQUESTER:
                continue
            uid = P.uid(pod) or ""
            anchor = self._numbered(uid, P.name(pod))[1]
            if anchor is not None:
                out[uid] = anchor
        for uid, seed in self._seeds.items():
            out.setdefault(uid, seed)
        return out

    def mark_launcher_log(self, launcher: str) -> None:
        """Say that a launcher's log is part of the input even if it holds no create."""
        self._launchers_with_logs.add(launcher)

    def _keep_query(self, key: str, q: DpcFact) -> bool:
        """Keep only the first successful /is_sleeping answer after each create call."""
        if not q.ok:
            return False
        # one pass: the last successful create that ended by the query's start, and the
        # starts of the queries already kept
        at = q.start_ns
        last = None
        kept: list[int] = []
        for f in self._dpc.get(key, ()):
            kind = f.kind
            if kind == _SLEEP_QUERY:
                kept.append(f.start_ns)
            elif kind == _CREATE and f.ok and f.end_ns <= at and (last is None or f.end_ns > last):
                last = f.end_ns
        if last is not None and any(last <= t <= at for t in kept):
            return False
        return len(kept) < MAX_QUERIES

    # ------------------------------------------------------------------ asking

    def requesters(self) -> list[dict[str, Any]]:
        return [
            p
            for p in self.store.pods()
            if P.role(p, self.baseline_selector) in (P.ROLE_REQUESTER, P.ROLE_BASELINE)
        ]

    def actuations(self) -> list[Actuation]:
        """Every actuation the data shows, complete or not, ordered by requester creation."""
        out: list[Actuation] = []
        for pod in self.requesters_in_order():
            out.extend(self.actuations_of(pod))
        return out

    def requesters_in_order(self) -> list[dict[str, Any]]:
        """The requester (and baseline) Pods in the order :meth:`actuations` takes them."""
        return sorted(self.requesters(), key=lambda p: (P.created_ns(p) or 0, P.name(p) or ""))

    def actuations_of(self, pod: dict[str, Any]) -> list[Actuation]:
        """One requester's actuations, as :meth:`actuations` lists them.

        Reads the correlator and writes nothing but its lookup indexes (see
        :meth:`prepare`), so forked processes may each take a share of the requesters
        (``trace_lines.py``) and together list exactly what :meth:`actuations` does.
        """
        evicted = self._evicted
        return [a for a in self._actuations_of(pod) if a.key not in evicted]

    def prepare(self) -> None:
        """Build the lookup indexes now, once, before processes are forked from here:
        each would otherwise build its own copy on its first :meth:`actuations_of`."""
        self._names()
        self._launchers()

    def orphan_requesters(self) -> int:
        """Requesters the DPC log talks about whose Pod is not in the input (not traced)."""
        uids = {P.uid(p) for p in self.store.pods()}
        names = {P.name(p) for p in self.store.pods()}
        return sum(1 for k in self._dpc if (k[5:] not in names if k.startswith("name:") else k not in uids))

    def finished(self, now_ns: int, grace_ns: int, incomplete_after_ns: int) -> list[Actuation]:
        """Actuations ready to emit live: complete and quiet for ``grace_ns``, or too old.

        A complete FMA actuation waits for the relay line too, but no longer than 30 s past
        its requester's Ready (the line may be missing, as FMA #583 saw).  So does a requester
        whose DPC lines have not arrived at all yet (path still ``unknown``): the DPC log can
        lag the Pod watch (a reconnect, a new DPC Pod), and an actuation emitted too early is
        never emitted again.
        """
        out = []
        for act in self.actuations():
            uid = act.attributes.get(M.A_REQ_UID, "")
            quiet = now_ns - max(
                self._updated.get(uid, 0), self._updated.get(f"name:{act.attributes.get(M.A_REQ_NAME)}", 0)
            )
            if act.complete:
                relayed = "D.relayed" in act.instants or act.path == M.COLD_NO_FMA
                if quiet >= grace_ns and (relayed or quiet >= max(grace_ns, 30 * M.S)):
                    out.append(act)
            else:
                began = act.instants.get("R.created") or act.instants.get("D.unbound")
                if began is not None and now_ns - began.t_ns >= incomplete_after_ns and quiet >= grace_ns:
                    out.append(act)
        return out

    def evict(self, key: str) -> None:
        """Forget an emitted actuation (memory stays bounded by open actuations)."""
        self._evicted[key] = None
        while len(self._evicted) > 200_000:
            self._evicted.popitem(last=False)
        uid = key.split("/", 1)[0]
        pod = self.store.get(uid)
        if pod is None:
            return
        # once every round so far is out, keep only the facts that number the rounds
        # (unbinds and binds): dropping those would restart the count and mis-key the
        # requester's next actuation
        name = P.name(pod)
        rounds = self._rounds(uid, name)
        if all(M.actuation_key(uid, r[0]) in self._evicted for r in rounds):
            for k in (uid, f"name:{name}"):
                if k in self._dpc:
                    self._dpc[k] = [f for f in self._dpc[k] if f.kind in _ROUND_MARKERS]

    def forget_pod(self, uid: str) -> None:
        """Drop a deleted Pod whose actuations were all emitted: its Pod, its facts, its track."""
        pod = self.store.get(uid)
        if pod is not None:
            name = P.name(pod)
            self._dpc.pop(f"name:{name}", None)
            self._updated.pop(f"name:{name}", None)
            if P.role(pod, None) == P.ROLE_LAUNCHER:  # a launcher's log facts go with it
                for k in [k for k in self._launcher if k[0] == name]:
                    del self._launcher[k]
                self._launchers_with_logs.discard(name or "")
        self.store.remove(uid)
        self._launcher_index = self._name_index = None
        self._dpc.pop(uid, None)
        self._tracks.pop(uid, None)
        self._updated.pop(uid, None)
        self._seeds.pop(uid, None)

    # ------------------------------------------------------------------ assembly

    def _facts_for(self, uid: str, name: str | None) -> list[DpcFact]:
        facts = list(self._dpc.get(uid, ()))
        if name:
            by_name = self._dpc.get(f"name:{name}", ())
            if by_name:
                lo, hi = self._lifetime(uid, name)
                facts.extend(f for f in by_name if lo <= f.t_ns < hi)
        facts.sort(key=lambda f: (f.t_ns, f.line_no))
        return facts

    def _lifetime(self, uid: str, name: str) -> tuple[int, int]:
        """When a Pod of this name was *this* Pod: a line that names a requester only by name
        belongs to the same-named Pod created last before it (names are reused over time)."""
        created = self._names().get(name, [])
        lo, hi = -INF, INF
        for i, (t, u) in enumerate(created):
            if u == uid:
                lo = t - t % M.S if len(created) > 1 else -INF
                hi = created[i + 1][0] if i + 1 < len(created) else INF
        return lo, hi

    def _names(self) -> dict[str, list[tuple[int, str | None]]]:
        """Pod name -> [(creation, uid)] oldest first (rebuilt after any ``add_pod``)."""
        index = self._name_index
        if index is None:
            index = {}
            for p in self.store.pods():
                index.setdefault(P.name(p) or "", []).append((P.created_ns(p) or 0, P.uid(p)))
            for lst in index.values():
                lst.sort(key=lambda x: (x[0], x[1] or ""))
            self._name_index = index
        return index

    def _rounds(self, uid: str, name: str | None) -> list[tuple[int, int, int, list[DpcFact]]]:
        """Split a requester's facts at each unbind: [(round, window_start, window_end, facts)]."""
        return self._numbered(uid, name)[0]

    def _numbered(
        self, uid: str, name: str | None
    ) -> tuple[list[tuple[int, int, int, list[DpcFact]]], tuple[int, int, bool] | None]:
        """:meth:`_rounds`, and the requester's anchor for :meth:`round_anchors` (``None``
        before its first unbind).

        A round after an unbind exists only if something happened in it; the first round
        always does (it has the Pod's own instants).  With a seed ``(k, t, begun)`` the facts
        are also split at ``t`` (when the unbind line at ``t`` was not re-read): the window
        from ``t`` is round ``k`` (kept even if empty when ``begun``: its facts may lie
        before the replay), later rounds count on, earlier ones count back (any that would
        be numbered below 1 are left out), and the first window is not kept for being first.
        """
        facts = self._facts_for(uid, name)
        seed = self._seeds.get(uid)
        windows: list[tuple[int, int, list[DpcFact]]] = []
        start, cur = -INF, []
        if seed is None:
            for f in facts:
                if f.kind == F.UNBOUND:
                    windows.append((start, f.t_ns, cur))
                    start, cur = f.t_ns, []
                else:
                    cur.append(f)
            windows.append((start, INF, cur))
            k0, at, forced = 1, 0, 0  # the first window is round 1, always
        else:
            k0, t0, begun = seed
            at = -1
            for f in facts:
                if at < 0 and (f.t_ns > t0 or (f.t_ns == t0 and f.kind == F.UNBOUND)):
                    windows.append((start, t0, cur))
                    start, cur = t0, []
                    at = len(windows)
                    if f.kind == F.UNBOUND and f.t_ns == t0:
                        continue  # the seed's own unbind, re-read
                if f.kind == F.UNBOUND:
                    windows.append((start, f.t_ns, cur))
                    start, cur = f.t_ns, []
                else:
                    cur.append(f)
            if at < 0:
                windows.append((start, t0, cur))
                start, cur = t0, []
                at = len(windows)
            windows.append((start, INF, cur))
            forced = at if begun else -1
        out: list[tuple[int, int, int, list[DpcFact]]] = []
        n = k0 - sum(1 for i in range(at) if windows[i][2] or i == forced)  # the first kept's
        for i, (lo, hi, fs) in enumerate(windows):
            if fs or i == forced:
                if n >= 1:
                    out.append((n, lo, hi, fs))
                n += 1
        # the last window: the round it is (when kept), else the number its first fact starts
        last_lo, last_fs = windows[-1][0], windows[-1][2]
        begun = bool(last_fs) or len(windows) - 1 == forced
        k = n - 1 if begun else n
        return out, (k, last_lo, begun) if k >= 2 and last_lo > -INF else None

    def _actuations_of(self, pod: dict[str, Any]) -> list[Actuation]:
        uid = P.uid(pod) or ""
        name = P.name(pod)
        role = P.role(pod, self.baseline_selector)
        if role == P.ROLE_BASELINE:
            return [self._assemble(pod, 1, -INF, INF, [], baseline=True)]
        return [self._assemble(pod, rnd, lo, hi, fs) for rnd, lo, hi, fs in self._rounds(uid, name)]

    def _assemble(
        self, pod: dict[str, Any], rnd: int, lo: int, hi: int, fs: list[DpcFact], baseline: bool = False
    ) -> Actuation:
        uid = P.uid(pod) or ""
        inst: dict[str, M.Instant] = {}

        def put(name: str, t: int | None, source: str) -> None:
            if t is not None:
                d = M.INSTANTS[name]
                inst[name] = M.Instant(t, d.precision_ns, source, d.service)

        container = self.baseline_container if baseline else P.REQUESTER_CONTAINER
        if rnd == 1:
            put("R.created", P.created_ns(pod), "k8s:creationTimestamp")
            put("R.scheduled", P.condition_true_ns(pod, "PodScheduled"), "k8s:PodScheduled")
            put("R.started", P.container_started_ns(pod, container), "k8s:startedAt")
        else:
            # a re-actuation: the Pod was created, scheduled and started long before; it
            # starts waiting again when the DPC unbinds it
            # (unknown when a seeded count reaches back past the unbinds re-read)
            put("D.unbound", lo if lo > -INF else None, "dpc:Unbound server-providing Pod")
        track = self._tracks.get(uid)
        lo_s = lo - lo % M.S if lo > -INF else -INF
        readies = sorted(t for t in (track.ready_true if track else ()) if lo_s <= t < hi)
        put("R.ready", readies[0] if readies else None, "k8s:Ready")

        first = _first_by(fs)
        bound = first(F.BOUND_COLD) or first(F.BOUND)
        create = first(F.CREATE, ok=True)
        wake = first(F.WAKE, ok=True)
        relayed = first(F.RELAYED)
        observed = first(F.OBSERVED)
        if bound:
            put(
                "D.bound",
                bound.t_ns,
                "dpc:"
                + (
                    "Created launcher-based server-providing pod"
                    if bound.kind == F.BOUND_COLD
                    else "Bound server-providing Pod"
                ),
            )
        if create:
            put("D.create.start", create.start_ns, "dpc:HTTP call done/create_instance")
            put("D.create.end", create.end_ns, "dpc:HTTP call done/create_instance")
            serving = [f for f in fs if f.kind == F.SLEEP_QUERY and f.ok and f.start_ns >= create.end_ns]
            if serving:
                put(
                    "D.serving",
                    min(serving, key=lambda f: f.start_ns).end_ns,
                    "dpc:HTTP call done/query_sleeping",
                )
        if wake:
            put("D.wake.start", wake.start_ns, "dpc:HTTP call done/wake")
            put("D.wake.end", wake.end_ns, "dpc:HTTP call done/wake")
        if relayed:
            put("D.relayed", relayed.t_ns, "dpc:Successfully relayed the readiness")

        # path: what the DPC did in this round, then what it said, then its hints
        direct = P.is_direct_requester(pod)
        if baseline:
            path = M.COLD_NO_FMA
        elif direct:
            # a direct (server-patch) provider: the span model has no path for it, and the
            # DPC labels every direct actuation "hot"; only a wake call proves a hot start
            path = M.HOT if wake else M.UNKNOWN
        elif bound and bound.kind == F.BOUND_COLD:
            path = M.COLD_LAUNCHER
        elif create:
            path = M.WARM
        elif wake:
            path = M.HOT
        elif observed and observed.path_label in M.DPC_PATH_LABELS:
            path = M.DPC_PATH_LABELS[observed.path_label]
        elif first(F.HINT_HOT):
            path = M.HOT
        elif first(F.HINT_WARM):
            path = M.WARM
        else:
            path = M.UNKNOWN

        labels = P.labels(pod)
        launcher = next((f.launcher for f in (bound, create, wake, relayed) if f and f.launcher), None)
        if launcher is None and not baseline:
            launcher = labels.get(P.L_DUAL)
        instance = next((f.instance_id for f in (bound, create, wake, relayed) if f and f.instance_id), None)
        if instance is None and not baseline:
            instance = labels.get(P.L_INSTANCE)
        lpod = self._launcher_pod(launcher) if launcher else None
        if lpod is not None and path == M.COLD_LAUNCHER:
            put("L.created", P.created_ns(lpod), "k8s:creationTimestamp")
            put("L.scheduled", P.condition_true_ns(lpod, "PodScheduled"), "k8s:PodScheduled")
            ltrack = self._tracks.get(P.uid(lpod) or "")
            lready = sorted(ltrack.ready_true) if ltrack else []
            cut = create.start_ns if create else INF
            before = [t for t in lready if t <= cut]
            put("L.ready", before[-1] if before else (lready[0] if lready else None), "k8s:Ready")

        has_launcher_data = bool(launcher and launcher in self._launchers_with_logs)
        if has_launcher_data and instance and path in (M.COLD_LAUNCHER, M.WARM):
            anchor = create.start_ns if create else (bound.t_ns if bound else None)
            self._pair_launcher(launcher, instance, anchor, put)

        attrs: dict[str, Any] = {
            M.A_PATH: path,
            M.A_NAMESPACE: P.namespace(pod) or "",
            M.A_REQ_NAME: P.name(pod) or "",
            M.A_REQ_UID: uid,
        }
        if launcher:
            attrs[M.A_LAUNCHER] = launcher
        if instance:
            attrs[M.A_INSTANCE] = instance
        isc = P.annotations(pod).get(P.A_ISC_CONFIG) or next((f.isc_name for f in fs if f.isc_name), None)
        if isc and not baseline and not direct:
            attrs[M.A_ISC] = isc
        node = P.node_name(pod)
        if node:
            attrs[M.A_NODE] = node
        if path == M.WARM:
            attrs[M.A_DELETED] = sum(1 for f in fs if f.kind == F.RECLAIM)

        complete = "R.ready" in inst
        missing = tuple(n for n in _expected_instants(path, has_launcher_data, rnd) if n not in inst)
        return Actuation(
            key=M.actuation_key(uid, rnd),
            round=rnd,
            path=path,
            complete=complete,
            instants=inst,
            attributes=attrs,
            missing=missing,
            dpc_actuation_secs=observed.secs if observed else None,
            has_launcher_data=has_launcher_data,
        )

    def _launcher_pod(self, launcher_name: str) -> dict[str, Any] | None:
        """The newest launcher Pod of that name.  Why an index: a scan of every Pod per
        actuation made ``actuations()`` quadratic (60% of the bridge on 2000 actuations)."""
        return self._launchers().get(launcher_name)

    def _launchers(self) -> dict[str, dict[str, Any]]:
        """Launcher name -> its newest Pod (rebuilt after any ``add_pod``)."""
        index = self._launcher_index
        if index is None:
            index = {}
            for p in self.store.pods():
                n = P.name(p)
                if n is None or P.role(p, None) != P.ROLE_LAUNCHER:
                    continue
                found = index.get(n)
                if found is None or (P.created_ns(p) or 0) > (P.created_ns(found) or 0):
                    index[n] = p
            self._launcher_index = index
        return index

    def _pair_launcher(self, launcher: str, instance: str, anchor: int | None, put: Any) -> None:
        """The launcher's receipt nearest the DPC's call, then the PUT response after it."""
        facts = self._launcher.get((launcher, instance), [])
        receipts = [f for f in facts if f.kind == "receipt"]
        if not receipts or anchor is None:
            return
        receipt = min(receipts, key=lambda f: abs(f.t_ns - anchor))
        if abs(receipt.t_ns - anchor) > LAUNCHER_PAIR_WINDOW_NS:
            return
        put("X.receipt", receipt.t_ns, "launcher:log")
        responses = [
            f
            for f in facts
            if f.kind == "response" and receipt.t_ns <= f.t_ns <= receipt.t_ns + LAUNCHER_PAIR_WINDOW_NS
        ]
        if responses:
            put("X.response", min(responses, key=lambda f: f.t_ns).t_ns, "launcher:log")


def _first_by(fs: list[DpcFact]) -> Any:
    def first(kind: str, ok: bool | None = None) -> DpcFact | None:
        best = None
        for f in fs:
            if f.kind != kind or (ok is not None and f.ok != ok):
                continue
            t = f.start_ns if f.start_ns is not None else f.t_ns
            if best is None or t < (best.start_ns if best.start_ns is not None else best.t_ns):
                best = f
        return best

    return first


_SLEEP_QUERY, _CREATE = F.SLEEP_QUERY, F.CREATE
_OWN_REQUESTER_INSTANTS = ("R.created", "R.scheduled", "R.started")
_ROUND_MARKERS = frozenset({F.UNBOUND, F.BOUND, F.BOUND_COLD, F.CREATE, F.WAKE, F.RELAYED})


def _expected_instants(path: str, launcher_data: bool, rnd: int) -> tuple[str, ...]:
    """The instants a full tree of this path needs (re-actuations start at D.unbound)."""
    key = (path, launcher_data, rnd > 1)
    names = _EXPECTED.get(key)
    if names is None:
        names = _EXPECTED[key] = _expected_instants_uncached(path, launcher_data, rnd)
    return names


#: (path, launcher data, re-actuation) -> expected instants: a function of the span model
#: only, which was recomputed for every actuation
_EXPECTED: dict[tuple[str, bool, bool], tuple[str, ...]] = {}


def _expected_instants_uncached(path: str, launcher_data: bool, rnd: int) -> tuple[str, ...]:
    names: list[str] = []
    for d in M.SPANS:
        if path not in d.paths or (d.needs_launcher_data and not launcher_data):
            continue
        for n in (d.start_instant(path), d.end_instant(path)):
            if rnd > 1 and n in _OWN_REQUESTER_INSTANTS:
                n = "D.unbound"
            if n and n not in names:
                names.append(n)
    return tuple(names)
