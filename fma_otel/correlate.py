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
import contextlib
import functools
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec

from . import facts as F
from . import instants as I
from . import model as M
from . import podfacts as P
from .bounding import Bounds, exact_call, write_call
from .facts import DpcFact, LauncherFact
from .sources.k8s_events import KubeEvent
from .sources.pods import PodStore
from .sources.records import KlogRecord, LauncherRecord, PodEvent
from .timeutil import check_ns, civil_to_ns, day_start_ns, parse_rfc3339_ns, year_of_ns

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
    #: instants the path needs that are bounded from one side only (no point value)
    missing_point: tuple[str, ...] = ()
    #: spans made one per call (``fma.dpc.delete_instance``): (name, start, end, attributes)
    calls: tuple[tuple[str, M.Instant, M.Instant, Mapping[str, Any]], ...] = ()
    #: built from the DPC log alone (no Pods): what only Pods know is missing, not unfinished
    dpc_only: bool = False
    #: the clock tolerance the instants were fused with (the builder's durations use it too)
    tolerance_ns: int = I.DEFAULT_TOLERANCE_NS

    @property
    def trace_id(self) -> str:
        return M.trace_id_for(self.key)

    @property
    def last_ns(self) -> int:
        return max((i.t_ns for i in self.instants.values()), default=0)


class YearResolver:
    """klog prints no year: take it from a ``--timestamps`` prefix, else nearest Pod time."""

    def __init__(self) -> None:
        self._refs: list[int] = []
        self._known: set[int] = set()
        #: (month, day) -> 00:00 UTC of that day in the year resolved for it (ns): the
        #: year is resolved once a day of log, not once a line
        self._cache: dict[tuple[int, int], int] = {}

    def add_reference(self, t_ns: int | None) -> None:
        """One reference per distinct time: every event of a Pod repeats its creation time."""
        if t_ns is None or t_ns in self._known:
            return
        self._known.add(t_ns)
        bisect.insort(self._refs, t_ns)
        self._cache.clear()

    def has_references(self) -> bool:
        return bool(self._refs)

    def center_ns(self) -> int | None:
        """The median reference (Pod time), None without any: where the capture is."""
        return self._refs[len(self._refs) // 2] if self._refs else None

    def resolve(self, rec: KlogRecord) -> int:
        """The line's time (ns); raises ``ValueError`` for a date its year does not have."""
        month, day, tod_us, prefix_ns = rec.month, rec.day, rec.tod_us, rec.prefix_ns
        if prefix_ns is not None:
            tm = time.gmtime(prefix_ns // M.S)
            year = tm.tm_year
            # the prefix is read after the line was written: December line, January prefix
            if month == 12 and tm.tm_mon == 1:
                year -= 1
            return civil_to_ns(year, month, day, tod_us)
        key = (month, day)
        day_ns = self._cache.get(key)
        if day_ns is None:  # raises for a day that year lacks (then nothing is cached)
            day_ns = self._cache[key] = day_start_ns(self._nearest_year(month, day, tod_us), month, day)
        return check_ns(day_ns + tod_us * 1_000)

    def _nearest_year(self, month: int, day: int, tod_us: int) -> int:
        if not self._refs:
            return time.gmtime().tm_year
        # the years around the median reference, not the extremes: one corrupted Pod time
        # (a creationTimestamp in 2150) put every DPC line in 2150 (spans there, or, with
        # each line's own stamps checked against its time, every line skipped)
        y0 = year_of_ns(self._refs[len(self._refs) // 2])
        best: tuple[int, int] | None = None
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


class Correlator:
    """Feed Pods, DPC records and launcher records; ask for actuations."""

    def __init__(
        self,
        *,
        baseline_selector: Mapping[str, str] | None = None,
        baseline_container: str | None = None,
        clock_ns: Any = None,
        tolerance_ns: int = I.DEFAULT_TOLERANCE_NS,
        dpc_only: bool = False,
    ) -> None:
        if tolerance_ns < 0:
            raise ValueError(f"clock tolerance must not be negative, got {tolerance_ns}")
        #: how far two hosts' clocks may differ (``--clock-tolerance-ms``)
        self.tolerance_ns = tolerance_ns
        #: no Pods are given: every requester the DPC log names by uid is traced from the log
        #: alone (``bridge --dpc-log`` without ``--pods``), keyed by that uid
        self.dpc_only = dpc_only
        self.baseline_selector = dict(baseline_selector) if baseline_selector else None
        self.baseline_container = baseline_container
        self._clock = clock_ns or time.time_ns
        self.store = PodStore()
        #: Pod uid -> every Ready=True transition seen across its versions
        self._ready: dict[str, set[int]] = {}
        self._dpc: dict[str, list[DpcFact]] = {}
        #: per key of ``_dpc``: the instants of its facts taken so far (a repeated line is
        #: dropped, see ``_add_fact``)
        self._seen: dict[str, set[int]] = {}
        #: DPC lines dropped as repeats of one taken (the same fact on another line)
        self.duplicates = 0
        self._launcher: dict[tuple[str, str], list[LauncherFact]] = {}
        self._launchers_with_logs: set[str] = set()
        #: launcher name -> the DPC's notifications of kube-scheduler writes to it
        self._launcher_notes: dict[str, list[DpcFact]] = {}
        #: Pod uid -> the scheduler's ``Scheduled`` Event time (µs): it records the Event
        #: after binding the Pod, so the time bounds the Pod's scheduling from above
        self._scheduled: dict[str, int] = {}
        #: Pod uid -> {(change, the Pod's own stamp of it): first arrival (ns, watcher's
        #: clock)}: live only (:meth:`add_arrival`)
        self._arrivals: dict[str, dict[tuple[str, int], int]] = {}
        self._updated: dict[str, int] = {}  # requester uid or name-key -> wall ns of last fact
        self.years = YearResolver()
        self._evicted: OrderedDict[str, None] = OrderedDict()
        #: why :meth:`add_pod` refused its last Pod state (for the caller's message)
        self.conflict: str = ""
        #: (namespace, name) -> (uid, creationTimestamp ns) of the live Pod of that name; a
        #: state with another uid is another Pod only once that one was seen deleted
        self._uid_by_name: dict[tuple[str | None, str | None], tuple[str, int | None]] = {}
        #: launcher name -> newest launcher Pod; rebuilt lazily after any add_pod
        self._launcher_index: dict[str, dict[str, Any]] | None = None
        #: Pod name -> [(creation, uid)] oldest first; rebuilt lazily after any add_pod
        self._name_index: dict[str, list[tuple[int, str | None]]] | None = None
        #: requester uid -> (k, t, begun): round k begins at its unbind at t (see seed_round)
        self._seeds: dict[str, tuple[int, int, bool]] = {}

    # ------------------------------------------------------------------ feeding

    def add_pod(self, ev: PodEvent) -> bool:
        """Take one Pod state; ``False`` when it is refused: a Pod whose uid is already
        another Pod's (another name or namespace).  Two objects never share a uid, so one of
        them is corrupt; merging them would make one trace of two requesters, silently.
        The first one seen is kept; the caller counts the others (:attr:`conflict` says why)."""
        pod = ev.pod
        u = P.uid(pod)
        if not u:
            return True
        cur = self.store.get(u)
        if cur is not None and (P.name(cur), P.namespace(cur)) != (P.name(pod), P.namespace(pod)):
            self.conflict = f"already that of {P.namespace(cur)}/{P.name(cur)}"
            return False
        # The same Pod (name, namespace, creation) under another uid before it was deleted:
        # a corrupted uid (one byte flipped, cut short), which would start a trace of its own.
        key = (P.namespace(pod), P.name(pod))
        created = P.created_ns(pod)
        prev = self._uid_by_name.get(key)
        if prev is not None and prev[0] != u and prev[1] == created:
            self.conflict = f"but the same Pod (same creationTimestamp, not deleted) had uid {prev[0]}"
            return False
        if ev.event_type == "DELETED" or P.meta(pod).get("deletionTimestamp"):
            self._uid_by_name.pop(key, None)
        else:
            self._uid_by_name[key] = (u, created)
        self.store.add(ev)
        self._launcher_index = self._name_index = None
        readies = self._ready.setdefault(u, set())
        ready = P.condition_true_ns(pod, "Ready")
        if ready is not None:
            readies.add(ready)
        self._updated[u] = self._clock()
        self.years.add_reference(created)
        if cur is None and self._evicted:  # keys evicted before the Pod was known (a restart)
            self._trim_emitted(u)
        return True

    def add_dpc(self, rec: KlogRecord) -> DpcFact | None:
        """Add one DPC line; returns its fact.  Raises ``ValueError`` for a malformed wanted line."""
        if rec.msg not in F.MESSAGES:
            return None
        if self.dpc_only and not self.years.has_references() and rec.prefix_ns is None:
            self.years.add_reference(_rfc3339_in(rec))
        fact = F.dpc_fact(rec, self.years.resolve(rec))
        if fact is None:
            return None
        return self._add_fact(fact)

    def _add_fact(self, fact: DpcFact) -> DpcFact:
        kind = fact.kind
        if kind == F.LAUNCHER_NOTIFIED:
            return self._add_launcher_note(fact)
        key = fact.uid or (f"name:{fact.name}" if fact.name else None)
        if key is None:
            return fact
        if kind == F.NOTIFIED and fact.manager != "kubelet":
            return fact  # only the kubelet's writes bound an instant (R.ready)
        # a line repeated (a log concatenated twice, a re-read after a reconnect) states
        # nothing new: taken twice it would make a second identical span and inflate counts
        # (fma.instances_deleted).  The same fact but for its line: the same instant to the
        # µs, message and every field read.  One set lookup per fact: the set holds the
        # instants of the requester's facts (two lines rarely share a µs), and only a fact
        # whose instant was seen is compared with the kept facts of that instant
        t = fact.t_ns
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = {t}
        elif t in seen:
            same = _lineless(fact)
            if any(f.t_ns == t and _lineless(f) == same for f in self._dpc.get(key, ())):
                self.duplicates += 1
                return fact
        else:
            seen.add(t)
        facts = self._dpc.get(key)
        if facts is None:
            self._dpc[key] = [fact]
        else:
            # the first fact of a requester is always kept: no cap is reached yet
            if kind == _SLEEP_QUERY:
                keep = (
                    _keep_query(facts, fact) if fact.ok else _within_cap(facts, fact, MAX_FAILED_POLLS, True)
                )
            else:
                cap = _CAPPED.get(kind)
                keep = cap is None or _within_cap(facts, fact, *cap)
            if not keep:
                return fact
            facts.append(fact)
        self._updated[key] = self._clock()
        return fact

    def _add_launcher_note(self, fact: DpcFact) -> DpcFact:
        """Keep the DPC's notifications of kube-scheduler writes to a launcher Pod (the
        earliest few): one stamped in the launcher's PodScheduled second bounds
        ``L.scheduled`` from above."""
        if fact.launcher and fact.manager == "kube-scheduler":
            notes = self._launcher_notes.setdefault(fact.launcher, [])
            notes.append(fact)
            if len(notes) > MAX_QUERIES:
                notes.remove(max(notes, key=_LOG_ORDER))
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
            anchor = self._rounds(uid, P.name(pod))[1]
            if anchor is not None:
                out[uid] = anchor
        for uid, seed in self._seeds.items():
            out.setdefault(uid, seed)
        return out

    def mark_launcher_log(self, launcher: str) -> None:
        """Say that a launcher's log is part of the input even if it holds no create."""
        self._launchers_with_logs.add(launcher)

    # ------------------------------------------------------------------ asking

    def unpaired_launcher_logs(self) -> set[str]:
        """The launchers given a log that neither a launcher Pod nor any DPC line names: the
        log is paired by that name (a launcher Pod's, as the DPC logs it), so its lines can
        reach no trace (a file renamed, a ``--launcher-log`` key mistyped)."""
        known = set(self._launchers())
        known.update(self._launcher_notes)
        for facts in self._dpc.values():
            known.update(f.launcher for f in facts if f.launcher)
        return self._launchers_with_logs - known

    def requesters(self) -> list[dict[str, Any]]:
        if self.dpc_only and not len(self.store):
            return self._dpc_only_requesters()
        return [
            p
            for p in self.store.pods()
            if P.role(p, self.baseline_selector) in (P.ROLE_REQUESTER, P.ROLE_BASELINE)
        ]

    def _dpc_only_requesters(self) -> list[dict[str, Any]]:
        """A stand-in Pod for each requester the DPC log names by uid (no Pods given).

        Only what the log says: the uid and the name the lines give; no timestamps, so
        every instant comes from the log.  Lines that name a requester only by name join
        the uid whose lines give that name."""
        out = []
        for key, facts in self._dpc.items():
            if key.startswith("name:") or not any(f.kind in _ACTUATION_KINDS for f in facts):
                continue  # a requester the DPC only heard of (notifications) was not actuated
            name = next((f.name for f in facts if f.name), None)
            meta: dict[str, Any] = {"uid": key, "annotations": {P.A_ISC_CONFIG: ""}}
            if name:
                meta["name"] = name
            out.append({"metadata": meta, _DPC_ONLY: min(f.t_ns for f in facts)})
        return out

    def actuations(self) -> list[Actuation]:
        """Every actuation the data shows, complete or not, ordered by requester creation."""
        out: list[Actuation] = []
        for pod in self.requesters_in_order():
            out.extend(self.actuations_of(pod))
        return out

    def requesters_in_order(self) -> list[dict[str, Any]]:
        """The requester (and baseline) Pods in the order :meth:`actuations` takes them."""
        return sorted(
            self.requesters(), key=lambda p: (P.created_ns(p) or p.get(_DPC_ONLY) or 0, P.name(p) or "")
        )

    def actuations_of(self, pod: dict[str, Any]) -> list[Actuation]:
        """One requester's actuations, as :meth:`actuations` lists them.

        Why a method of its own: the bridge builds and writes each requester's traces as
        it goes (:meth:`actuations` would hold them all).
        """
        if P.role(pod, self.baseline_selector) == P.ROLE_BASELINE:
            acts = [self._assemble(pod, 1, -INF, INF, [], baseline=True)]
        else:
            dpc_only = _DPC_ONLY in pod
            acts = [
                self._assemble(pod, rnd, lo, hi, fs, dpc_only=dpc_only)
                for rnd, lo, hi, fs in self._rounds(P.uid(pod) or "", P.name(pod))[0]
            ]
        evicted = self._evicted
        return [a for a in acts if a.key not in evicted]

    def orphan_requesters(self) -> int:
        """Requesters the DPC log talks about whose Pod is not in the input (not traced)."""
        if self.dpc_only and not len(self.store):
            return 0
        return len(self._unknown_keys())

    def unknown_requester_lines(self) -> list[tuple[int, str]]:
        """``(line_no, requester)`` of every kept DPC fact about a requester that no Pod in
        the input is (by uid, or by name for lines that give only a name), in line order.

        Why: such a line changes no trace, whether its requester was deleted before the
        capture or its uid was corrupted; the bridge says how many there were and where.
        Empty when the log is traced alone (no Pods given: each requester is its own trace),
        as :meth:`orphan_requesters` counts; Pods given but none read (an empty or cut
        ``pods.json``) leave every line here."""
        if self.dpc_only and not len(self.store):
            return []
        return sorted((f.line_no, key) for key in self._unknown_keys() for f in self._dpc[key])

    def _unknown_keys(self) -> list[str]:
        """The keys of DPC facts (a uid, or ``name:`` and a name) that no Pod in the input is."""
        uids = {P.uid(p) for p in self.store.pods()}
        names = {P.name(p) for p in self.store.pods()}
        return [k for k in self._dpc if (k[5:] not in names if k.startswith("name:") else k not in uids)]

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
        self._trim_emitted(M.key_uid(key))

    def _trim_emitted(self, uid: str) -> None:
        """Drop the facts of a requester whose every round is out; only once its Pod is known
        (:meth:`add_pod` calls it then), since the rounds are counted from the Pod's facts."""
        pod = self.store.get(uid)
        if pod is None:
            return
        # once every round so far is out, keep only the facts that number the rounds
        # (unbinds and binds): dropping those would restart the count and mis-key the
        # requester's next actuation
        name = P.name(pod)
        rounds = self._rounds(uid, name)[0]
        if all(M.actuation_key(uid, r[0]) in self._evicted for r in rounds):
            for k in (uid, f"name:{name}"):
                if k in self._dpc:
                    kept = self._dpc[k] = [f for f in self._dpc[k] if f.kind in _ROUND_MARKERS]
                    self._seen[k] = {f.t_ns for f in kept}  # bounded as the facts are

    def add_kube_events(self, events: Iterable[KubeEvent]) -> None:
        """Kubernetes Events: the scheduler's ``Scheduled`` ones with a µs ``eventTime``
        bound ``R.scheduled``/``L.scheduled`` from above (the rest make phase spans, not
        instants).  Given before the actuations are assembled."""
        for ev in events:
            if ev.raw_reason == "Scheduled" and ev.object_uid and ev.first_prec_ns <= M.US:
                old = self._scheduled.get(ev.object_uid)
                self._scheduled[ev.object_uid] = ev.first_ns if old is None else min(old, ev.first_ns)

    def add_arrival(self, pod: dict[str, Any], arrival_ns: int) -> None:
        """The live watcher received this Pod state (a watch event or a list item) at
        ``arrival_ns`` on its own clock: every change it shows had happened by then.

        Each change is kept under the Pod's own stamp of it (``creationTimestamp``,
        ``PodScheduled``, the container's ``startedAt``, each ``Ready`` transition), so the
        arrival bounds exactly the change the assembled instant takes (a Ready transition of
        another round, a restarted container, are other keys).  The earliest arrival is kept:
        a re-list after a restart or a 410 only sees it later.  :meth:`_assemble` uses it
        only where it narrows (``Bounds.before_if_narrows``), so a replay of old Pods gives
        the offline trace.  Not needed after a restart: a later arrival is looser, not wrong.
        """
        u = P.uid(pod)
        if not u:
            return
        role = P.role(pod, self.baseline_selector)
        seen = {
            ARRIVAL_CREATED: P.created_ns(pod),
            ARRIVAL_SCHEDULED: P.condition_true_ns(pod, "PodScheduled"),
            ARRIVAL_STARTED: self._started_ns(pod, role == P.ROLE_BASELINE)
            if role != P.ROLE_LAUNCHER
            else None,
            ARRIVAL_READY: P.condition_true_ns(pod, "Ready"),
        }
        mine = self._arrivals.setdefault(u, {})
        for change, stamp in seen.items():
            if stamp is None:
                continue
            key = (change, stamp)
            old = mine.get(key)
            if old is None and len(mine) >= MAX_ARRIVALS:
                continue  # a Pod flapping Ready: later transitions go without (looser, not wrong)
            mine[key] = arrival_ns if old is None else min(old, arrival_ns)

    def forget_pod(self, uid: str) -> None:
        """Drop a deleted Pod whose actuations were all emitted: its Pod, its facts, its track."""
        pod = self.store.get(uid)
        if pod is not None:
            name = P.name(pod)
            self._dpc.pop(f"name:{name}", None)
            self._seen.pop(f"name:{name}", None)
            self._updated.pop(f"name:{name}", None)
            if P.role(pod, None) == P.ROLE_LAUNCHER:  # a launcher's log facts go with it
                for k in [k for k in self._launcher if k[0] == name]:
                    del self._launcher[k]
                self._launcher_notes.pop(name or "", None)
                self._launchers_with_logs.discard(name or "")
        self.store.remove(uid)
        self._launcher_index = self._name_index = None
        self._dpc.pop(uid, None)
        self._seen.pop(uid, None)
        self._ready.pop(uid, None)
        self._updated.pop(uid, None)
        self._seeds.pop(uid, None)
        self._scheduled.pop(uid, None)
        self._arrivals.pop(uid, None)

    # ------------------------------------------------------------------ assembly

    def _facts_for(self, uid: str, name: str | None) -> list[DpcFact]:
        facts = list(self._dpc.get(uid, ()))
        if name:
            by_name = self._dpc.get(f"name:{name}", ())
            if by_name:
                lo, hi = self._lifetime(uid, name)
                facts.extend(f for f in by_name if lo <= f.t_ns < hi)
        facts.sort(key=_LOG_ORDER)
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

    def _rounds(
        self, uid: str, name: str | None
    ) -> tuple[list[tuple[int, int, int, list[DpcFact]]], tuple[int, int, bool] | None]:
        """A requester's facts split at each unbind, ``[(round, window_start, window_end,
        facts)]``, and its anchor for :meth:`round_anchors` (``None`` before its first unbind).

        A round after an unbind exists only if something happened in it; the first round
        always does (it has the Pod's own instants).  With a seed ``(k, t, begun)`` the facts
        are also split at ``t`` (when the unbind line at ``t`` was not re-read): the window
        from ``t`` is round ``k`` (kept even if empty when ``begun``: its facts may lie
        before the replay), later rounds count on, earlier ones count back (any that would
        be numbered below 1 are left out), and the first window is not kept for being first.
        """
        facts = self._facts_for(uid, name)
        seed = self._seeds.get(uid)
        t0 = seed[1] if seed is not None else None
        windows: list[tuple[int, int, list[DpcFact]]] = []
        start, cur = -INF, []
        at = -1  # the index of the window from t0
        for f in facts:
            if t0 is not None and at < 0 and (f.t_ns > t0 or (f.t_ns == t0 and f.kind == F.UNBOUND)):
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
        if t0 is not None and at < 0:
            windows.append((start, t0, cur))
            start, cur = t0, []
            at = len(windows)
        windows.append((start, INF, cur))
        if seed is None:
            k0, at, forced = 1, 0, 0  # the first window is round 1, always
        else:
            k0, _, begun = seed
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

    def _assemble(
        self,
        pod: dict[str, Any],
        rnd: int,
        lo: int,
        hi: int,
        fs: list[DpcFact],
        baseline: bool = False,
        dpc_only: bool = False,
    ) -> Actuation:
        uid = P.uid(pod) or ""
        b = Bounds(self.tolerance_ns)
        apiserver, kubelet, dpc = M.CLOCK_APISERVER, M.CLOCK_KUBELET, M.CLOCK_DPC

        # the round's facts by kind (each in log order): an actuation asks for a dozen kinds
        by_kind: dict[str, list[DpcFact]] = {}
        for f in fs:
            by_kind.setdefault(f.kind, []).append(f)

        def of(kind: str) -> list[DpcFact]:
            return by_kind.get(kind, [])

        def first(kind: str, ok: bool | None = None) -> DpcFact | None:
            """The earliest fact of a kind (by call start, else log time), of any or one outcome."""
            return min((f for f in of(kind) if ok is None or f.ok == ok), key=_when, default=None)

        bound = first(F.BOUND_COLD) or first(F.BOUND)
        create = first(F.CREATE, ok=True)
        wake = first(F.WAKE, ok=True)
        relayed = first(F.RELAYED)
        observed = first(F.OBSERVED)
        relay = _last_call_by(of(F.RELAY_CALL), relayed.t_ns + M.US - 1 if relayed else None)

        if rnd == 1:
            self._created_scheduled(b, pod, "R.created", "R.scheduled")
            started = self._started_ns(pod, baseline)
            b.k8s("R.started", started, "k8s:startedAt", kubelet)
            self._bound_by_arrival(b, uid, "R.started", ARRIVAL_STARTED, started)
            if relayed and relayed.ref_ns is not None:
                b.k8s("R.created", relayed.ref_ns, "dpc:requesterCreateTime", apiserver)
            gpu_any = first(F.GPU_QUERY)
            gpu_ok = first(F.GPU_QUERY, ok=True)
            if gpu_any is not None:
                # the DPC reconciles a requester only once it is scheduled
                b.before("R.scheduled", gpu_any.start_ns, "dpc:HTTP call done/get_gpu_uuids/start")
            seen_running = first(F.PROCESSING) if not baseline else None
            if seen_running is not None and seen_running.uid == uid:
                # the DPC saw the container running (its cache lags, never leads, the truth)
                b.before(
                    "R.started", seen_running.t_ns, "dpc:Processing inference server (running)", dpc, M.US
                )
                if seen_running.ref_ns is not None:
                    b.k8s("R.started", seen_running.ref_ns, "dpc:requesterRCS startedAt", kubelet)
            if gpu_ok is not None:
                # the requester's SPI server answered: its container had started
                b.before("R.started", gpu_ok.end_ns, "dpc:HTTP call done/get_gpu_uuids/end")
            if observed is not None and observed.secs is not None:
                with contextlib.suppress(ValueError):  # no whole second fits: the line is not used
                    b.add(
                        "R.started",
                        I.started_from_actuation_secs(
                            observed.t_ns, observed.secs, relay.end_ns if relay else None
                        ),
                    )
        else:
            # a re-actuation: the Pod was created, scheduled and started long before; it
            # starts waiting again when the DPC unbinds it
            # (unknown when a seeded count reaches back past the unbinds re-read)
            b.log_time("D.unbound", lo if lo > -INF else None, "dpc:Unbound server-providing Pod")
        lo_s = lo - lo % M.S if lo > -INF else -INF
        ready_s = min((t for t in self._ready.get(uid, ()) if lo_s <= t < hi), default=None)
        b.k8s("R.ready", ready_s, "k8s:Ready", kubelet)
        self._bound_by_arrival(b, uid, "R.ready", ARRIVAL_READY, ready_s)
        if ready_s is not None and relay is not None:
            # the requester turns Ready only after the DPC told it to become ready ...
            b.after("R.ready", relay.start_ns, "dpc:HTTP call done/relay_ready/start")
            # ... and the DPC's informer saw the kubelet's write of that second after it
            seen = next(
                (
                    f
                    for f in of(F.NOTIFIED)
                    if f.manager == "kubelet" and f.ref_ns == ready_s and f.t_ns >= relay.start_ns
                ),
                None,
            )
            if seen is not None:
                b.before("R.ready", seen.t_ns, "dpc:notification of update (kubelet)", dpc, M.US)

        if bound:
            b.log_time("D.bound", bound.t_ns, "dpc:" + _MESSAGE_OF[bound.kind])
        if create:
            b.exact("D.create.start", create.start_ns, "dpc:HTTP call done/create_instance")
            b.exact("D.create.end", create.end_ns, "dpc:HTTP call done/create_instance")
            polls = sorted(
                (f for f in of(F.SLEEP_QUERY) if f.start_ns >= create.end_ns),
                key=attrgetter("start_ns", "line_no"),
            )
            ok = next((f for f in polls if f.ok), None)
            if ok is not None:
                b.exact("D.serving", ok.end_ns, "dpc:HTTP call done/query_sleeping")
                failed = [f for f in polls if not f.ok and f.start_ns < ok.start_ns]
                last = failed[-1] if failed else None
                b.add(
                    "V.ready",
                    I.vllm_ready_from_polls(
                        (last.start_ns, last.end_ns) if last else None, (ok.start_ns, ok.end_ns)
                    ),
                )
        if wake:
            b.exact("D.wake.start", wake.start_ns, "dpc:HTTP call done/wake")
            b.exact("D.wake.end", wake.end_ns, "dpc:HTTP call done/wake")
        if relayed:
            b.log_time("D.relayed", relayed.t_ns, "dpc:Successfully relayed the readiness")
            if relay is not None:
                b.exact("D.relay.start", relay.start_ns, "dpc:HTTP call done/relay_ready")
                b.exact("D.relay.end", relay.end_ns, "dpc:HTTP call done/relay_ready")
                b.after("D.relayed", relay.end_ns, "dpc:HTTP call done/relay_ready/end")

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
        if path == M.COLD_LAUNCHER and bound is not None:
            # the launcher Pod was created by the DPC's create call: [k8sCallStartTime, log time]
            b.write("L.created", bound.ref_ns, bound.t_ns, "dpc:Created launcher-based server-providing pod")
            # the DPC calls a launcher it created only once it has seen it Ready
            listed = [
                f
                for f in of(F.LIST)
                if f.start_ns >= bound.t_ns and (launcher is None or f.launcher == launcher)
            ]
            if listed:
                b.before(
                    "L.ready", min(f.start_ns for f in listed), "dpc:HTTP call done/list_instances/start"
                )
        lpod = self._launchers().get(launcher) if launcher and path == M.COLD_LAUNCHER else None
        if lpod is not None:
            l_sched = self._created_scheduled(b, lpod, "L.created", "L.scheduled")
            luid = P.uid(lpod) or ""
            # the scheduler writes a Pod to bind it: the DPC saw its write of that second
            note = (
                min(
                    (f for f in self._launcher_notes.get(launcher or "", ()) if f.ref_ns == l_sched),
                    key=lambda f: f.t_ns,
                    default=None,
                )
                if l_sched is not None
                else None
            )
            if note is not None:
                b.before(
                    "L.scheduled",
                    note.t_ns,
                    "dpc:launcher notification of update (kube-scheduler)",
                    dpc,
                    M.US,
                )
            lready = sorted(self._ready.get(luid, ()))
            cut = create.start_ns if create else INF
            before = [t for t in lready if t <= cut]
            l_ready = before[-1] if before else (lready[0] if lready else None)
            b.k8s("L.ready", l_ready, "k8s:Ready", kubelet)
            self._bound_by_arrival(b, luid, "L.ready", ARRIVAL_READY, l_ready)

        has_launcher_data = bool(launcher and launcher in self._launchers_with_logs)
        if has_launcher_data and instance and path in (M.COLD_LAUNCHER, M.WARM):
            anchor = create.start_ns if create else (bound.t_ns if bound else None)
            self._pair_launcher(launcher, instance, anchor, b, create)

        fusion = b.fuse_all()
        inst = fusion.instants
        calls: list[tuple[str, M.Instant, M.Instant, Mapping[str, Any]]] = []
        if path == M.WARM:
            cut = bound.t_ns if bound else (create.start_ns if create else INF)
            for f in sorted((f for f in of(F.DELETE) if f.ok), key=lambda f: f.start_ns):
                if f.end_ns <= cut:
                    s_i, e_i = exact_call(f.start_ns, f.end_ns, "dpc:HTTP call done/delete_instance")
                    extra = {M.A_INSTANCE: f.instance_id} if f.instance_id else {}
                    calls.append(("fma.dpc.delete_instance", s_i, e_i, extra))
        # the DPC's Kubernetes API writes of this round, one span each: the bind (which is
        # D.bound), on a re-actuation the unbind that began the round (which is D.unbound),
        # and the last label and status writes of the readiness relay: logged after its start
        # (D.serving, D.wake.end on hot) and by the relay call's start (else D.relayed); the
        # status writes around the bind, before that start, are not in it
        writes = [bound] if bound else []
        if rnd > 1:
            writes.append(self._unbind_at(uid, P.name(pod), lo))
        relay_from = inst.get(M.SPANS_BY_NAME["fma.readiness.relay"].start_instant(path) or "")
        if relay_from is not None:
            w_hi = relay.start_ns if relay else (relayed.t_ns if relayed else hi)
            for kind in (F.LABELED, F.SET_STATUS):
                inside = [f for f in of(kind) if relay_from.lo <= f.t_ns <= w_hi]
                writes.append(max(inside, key=_LOG_ORDER, default=None))
        for f in writes:
            call = write_call(f.ref_ns, f.t_ns, "dpc:" + _MESSAGE_OF[f.kind]) if f else None
            if call is not None:
                calls.append((M.DPC_WRITE_SPANS[_MESSAGE_OF[f.kind]], *call, {}))

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
        node = P.node_name(pod) or (next((f.node for f in fs if f.node), None) if dpc_only else None)
        if node:
            attrs[M.A_NODE] = node
        if path == M.WARM:
            attrs[M.A_DELETED] = len(of(F.RECLAIM))

        complete = ("D.relayed" in inst) if dpc_only else ("R.ready" in inst)
        expected = _expected_instants(path, has_launcher_data, rnd > 1)
        missing = tuple(n for n in expected if n not in inst and n not in fusion.partial)
        one_sided = tuple(n for n in expected if n in fusion.partial)
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
            missing_point=one_sided,
            calls=tuple(calls),
            dpc_only=dpc_only,
            tolerance_ns=self.tolerance_ns,
        )

    def _created_scheduled(
        self, b: Bounds, pod: dict[str, Any], created_name: str, scheduled_name: str
    ) -> int | None:
        """Bound a Pod's creation and scheduling (``R.*`` or ``L.*``) by its own stamps, the
        scheduler's ``Scheduled`` Event and the watch's arrivals; returns its PodScheduled time."""
        uid = P.uid(pod) or ""
        created = P.created_ns(pod)
        scheduled = P.condition_true_ns(pod, "PodScheduled")
        b.k8s(created_name, created, "k8s:creationTimestamp", M.CLOCK_APISERVER)
        # PodScheduled=True is set by the API server when it records the binding
        b.k8s(scheduled_name, scheduled, "k8s:PodScheduled", M.CLOCK_APISERVER)
        b.before(scheduled_name, self._scheduled.get(uid), SCHEDULED_EVENT, M.CLOCK_SCHEDULER, M.US)
        self._bound_by_arrival(b, uid, created_name, ARRIVAL_CREATED, created)
        self._bound_by_arrival(b, uid, scheduled_name, ARRIVAL_SCHEDULED, scheduled)
        return scheduled

    def _started_ns(self, pod: dict[str, Any], baseline: bool) -> int | None:
        """When the requester's (or baseline's) serving container started: ``R.started``."""
        return P.container_started_ns(pod, self.baseline_container if baseline else P.REQUESTER_CONTAINER)

    def _bound_by_arrival(self, b: Bounds, uid: str, name: str, change: str, stamp: int | None) -> None:
        """Bound ``name`` by the first arrival (live) of the Pod state showing ``change`` with
        ``stamp``, where that narrows it."""
        mine = self._arrivals.get(uid) if stamp is not None else None
        if mine:
            b.before_if_narrows(name, mine.get((change, stamp)), WATCH_ARRIVAL, M.CLOCK_WATCHER, M.US)

    def _launchers(self) -> dict[str, dict[str, Any]]:
        """Launcher name -> its newest Pod (rebuilt after any ``add_pod``).  Why an index: a
        scan of every Pod per actuation made ``actuations()`` quadratic."""
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

    def _unbind_at(self, uid: str, name: str | None, t_ns: int) -> DpcFact | None:
        """The "Unbound server-providing Pod" line at ``t_ns`` (a round's window start), if read."""
        for key in (uid, f"name:{name}" if name else ""):
            for f in self._dpc.get(key, ()):
                if f.kind == F.UNBOUND and f.t_ns == t_ns:
                    return f
        return None

    def _pair_launcher(
        self, launcher: str, instance: str, anchor: int | None, b: Bounds, create: DpcFact | None = None
    ) -> None:
        """The launcher's receipt nearest the DPC's call, then the PUT response after it.

        Both happen inside the DPC's ``create_instance`` call (``create``), so each stamp
        the launcher log gave is also bounded by ``[D.create.start, D.create.end]`` (the
        DPC's clock, no value): fusion widens the other clock by the tolerance and marks
        a launcher stamp that lies outside it beyond that."""
        facts = self._launcher.get((launcher, instance), [])
        receipts = [f for f in facts if f.kind == "receipt"]
        if not receipts or anchor is None:
            return
        receipt = min(receipts, key=lambda f: abs(f.t_ns - anchor))
        if abs(receipt.t_ns - anchor) > LAUNCHER_PAIR_WINDOW_NS:
            return
        call = (
            I.Bound(create.start_ns, create.end_ns, "dpc:HTTP call done/create_instance", M.CLOCK_DPC)
            if create is not None and create.start_ns is not None and create.end_ns is not None
            else None
        )
        b.add("X.receipt", I.truncated(receipt.t_ns, M.MS, "launcher:log", M.CLOCK_LAUNCHER))
        b.add("X.receipt", call)
        responses = [
            f
            for f in facts
            if f.kind == "response" and receipt.t_ns <= f.t_ns <= receipt.t_ns + LAUNCHER_PAIR_WINDOW_NS
        ]
        if responses:
            t = min(responses, key=lambda f: f.t_ns).t_ns
            b.add("X.response", I.truncated(t, M.MS, "launcher:log", M.CLOCK_LAUNCHER))
            b.add("X.response", call)


#: the key of a stand-in Pod made from the DPC log alone (its value: the first line's time)
_DPC_ONLY = "_fma_dpc_only"


def _lineless(fact: DpcFact) -> DpcFact:
    """``fact`` but for its line number: what a repeated DPC line shares with the first."""
    return msgspec.structs.replace(fact, line_no=0)


_YEAR_FIELDS = ("httpCallStartTime", "k8sCallStartTime", "requesterCreateTime")


def _rfc3339_in(rec: KlogRecord) -> int | None:
    """A full date on a DPC line (klog's header has no year): for a log read without Pods."""
    for k in _YEAR_FIELDS:
        v = rec.get(k)
        if isinstance(v, str):
            try:
                return parse_rfc3339_ns(v)
            except ValueError:
                continue
    return None


def _within_cap(facts: list[DpcFact], fact: DpcFact, cap: int, keep_latest: bool) -> bool:
    """Keep at most ``cap`` facts of a kind (and outcome) in a requester's ``facts``: the
    earliest (calls whose first one is the bound) or the latest (failed polls, whose last
    one before success is); makes room in ``facts`` when ``fact`` is to be kept.  Whichever
    way the facts arrive, the same ones are kept."""
    if len(facts) < cap:
        return True  # fewer facts of any kind than the cap
    kind, ok = fact.kind, fact.ok
    same = [f for f in facts if f.kind == kind and f.ok == ok]
    if len(same) < cap:
        return True

    def order(f: DpcFact) -> tuple[int, int]:
        return (_when(f), f.line_no)

    drop = min(same, key=order) if keep_latest else max(same, key=order)
    if (order(fact) < order(drop)) if keep_latest else (order(fact) > order(drop)):
        return False
    facts.remove(drop)
    return True


def _keep_query(facts: list[DpcFact], q: DpcFact) -> bool:
    """Keep only the first successful /is_sleeping answer after each create call (``q`` is
    one, ``facts`` the requester's so far)."""
    # one pass: the last successful create that ended by the query's start, and the
    # starts of the queries already kept
    at = q.start_ns
    last = None
    kept: list[int] = []
    for f in facts:
        kind = f.kind
        if kind == _SLEEP_QUERY and f.ok:
            kept.append(f.start_ns)
        elif kind == _CREATE and f.ok and f.end_ns <= at and (last is None or f.end_ns > last):
            last = f.end_ns
    if last is not None and any(last <= t <= at for t in kept):
        return False
    return len(kept) < MAX_QUERIES


def _last_call_by(calls: list[DpcFact], until_ns: int | None) -> DpcFact | None:
    """The last successful one of ``calls`` that ended by ``until_ns`` (None: no such bound)."""
    if until_ns is None:
        return None
    best = None
    for f in calls:
        if f.ok and f.end_ns <= until_ns and (best is None or f.start_ns > best.start_ns):
            best = f
    return best


#: facts in the order of the log: by log time, then line
_LOG_ORDER = attrgetter("t_ns", "line_no")


def _when(f: DpcFact) -> int:
    """A fact's time: its call's start, else its log time."""
    return f.start_ns if f.start_ns is not None else f.t_ns


_SLEEP_QUERY, _CREATE = F.SLEEP_QUERY, F.CREATE
#: fact kind -> its DPC message (the API writes' spans and sources are named by it)
_MESSAGE_OF: dict[str, str] = {kind: msg for msg, kind in F.MESSAGES.items() if kind}
#: a live watch event's (or list's) arrival: the change it showed had happened by then
WATCH_ARRIVAL = "watch:arrival"
#: the Pod changes an arrival bounds (keys of :meth:`Correlator.add_arrival`)
ARRIVAL_CREATED = "created"
ARRIVAL_SCHEDULED = "scheduled"
ARRIVAL_STARTED = "started"
ARRIVAL_READY = "ready"
#: arrivals kept per Pod (each Ready transition is one): bounded memory on a flapping Pod
MAX_ARRIVALS = 64
SCHEDULED_EVENT = "k8s:event/Scheduled"
#: kind -> (how many per requester, keep the latest (else the earliest)): bounded memory on
#: long logs; the ones kept are those that bound an instant
_CAPPED: dict[str, tuple[int, bool]] = {
    F.GPU_QUERY: (MAX_QUERIES, False),
    F.PROCESSING: (4, False),
    F.LIST: (MAX_QUERIES, False),
    F.DELETE: (MAX_QUERIES, False),
    F.RELAY_CALL: (MAX_QUERIES, True),
    F.NOTIFIED: (MAX_QUERIES, True),
    F.SET_STATUS: (MAX_QUERIES, True),
    F.LABELED: (MAX_QUERIES, True),
}
#: failed /is_sleeping polls kept per requester (the last one before vLLM answered matters)
MAX_FAILED_POLLS = 256
_OWN_REQUESTER_INSTANTS = ("R.created", "R.scheduled", "R.started")
_ROUND_MARKERS = frozenset({F.UNBOUND, F.BOUND, F.BOUND_COLD, F.CREATE, F.WAKE, F.RELAYED})
#: facts that show the DPC actuating a requester (a DPC-log-only trace needs one)
_ACTUATION_KINDS = _ROUND_MARKERS | {F.OBSERVED, F.HINT_HOT, F.HINT_WARM}


#: spans of calls that older DPC logs do not show ("HTTP call done" came with FMA #586):
#: their instants are not listed as missing when absent
_OPTIONAL_SPANS = frozenset({"fma.dpc.relay_ready"})


@functools.cache
def _expected_instants(path: str, launcher_data: bool, reactuation: bool) -> tuple[str, ...]:
    """The instants a full tree of this path needs (re-actuations start at D.unbound): a
    function of the span model only, so computed once per combination."""
    names: list[str] = []
    for d in M.SPANS:
        if path not in d.paths or (d.needs_launcher_data and not launcher_data) or d.repeated:
            continue
        if d.name in _OPTIONAL_SPANS:
            continue
        for n in (d.start_instant(path), d.end_instant(path)):
            if reactuation and n in _OWN_REQUESTER_INSTANTS:
                n = "D.unbound"
            if n and n not in names:
                names.append(n)
    return tuple(names)
