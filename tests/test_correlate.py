"""Correlator and builder edge cases, on hand-written lines and Pods."""

from __future__ import annotations

import pytest

from fma_otel import facts as F
from fma_otel import model as M
from fma_otel.build import build_trace
from fma_otel.correlate import MAX_FAILED_POLLS, Actuation, Correlator, YearResolver
from fma_otel.facts import DpcFact
from fma_otel.sources.klog import parse_klog_line
from fma_otel.sources.records import KlogRecord, PodEvent
from fma_otel.timeutil import parse_rfc3339_ns

UID = "811f8932-b608-416c-8a90-589b39ed9bde"
NAME = "my-request-29-14-35-40-d45ml"
CTX = f'worker=0 node="gpu-node-3" serverUID="{UID}" requesterName="{NAME}"'


def requester(ready: str | None = "2026-06-29T14:36:47Z", rv: str = "10") -> dict:
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-06-29T14:35:40Z"}]
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": ready})
    return {
        "kind": "Pod",
        "metadata": {
            "name": NAME,
            "namespace": "fma-test",
            "uid": UID,
            "resourceVersion": rv,
            "creationTimestamp": "2026-06-29T14:35:40Z",
            "annotations": {"dual-pods.llm-d.ai/inference-server-config": "example"},
            "labels": {"dual-pods.llm-d.ai/dual": "launcher-example-7xk2p"},
        },
        "spec": {"nodeName": "gpu-node-3", "containers": [{"name": "inference-server"}]},
        "status": {
            "conditions": conds,
            "containerStatuses": [
                {"name": "inference-server", "state": {"running": {"startedAt": "2026-06-29T14:35:42Z"}}}
            ],
        },
    }


def line(t: str, msg: str, kv: str) -> KlogRecord:
    rec = parse_klog_line(f'I0629 {t}       1 inference-server.go:1] "{msg}" {kv}', 1)
    assert rec is not None
    return rec


def http(t: str, purpose: str, start: str, lat: str, status: int = 200, ctx: str = CTX) -> KlogRecord:
    err = "null" if 200 <= status < 300 else '"boom"'
    return line(
        t,
        "HTTP call done",
        f'{ctx} purpose="{purpose}" method="GET" url="http://x" httpCallStartTime="{start}" latencySecs={lat} statusCode={status} err={err}',
    )


def correlator(*recs: KlogRecord, ready: str | None = "2026-06-29T14:36:47Z") -> Correlator:
    c = Correlator()
    c.add_pod(PodEvent("LISTED", requester(ready)))
    for r in recs:
        c.add_dpc(r)
    return c


def test_facts_share_the_strings_their_lines_repeat() -> None:
    """The correlator keeps facts until their actuation is assembled: the uid, name and
    node that a requester's lines repeat are one string each."""
    from fma_otel.facts import dpc_fact

    a = dpc_fact(
        http("14:36:21.000000", "query_sleeping", "2026-06-29T14:36:21Z", "0.001", 503),
        1_782_743_781_000_000_000,
    )
    b = dpc_fact(
        http("14:36:22.000000", "query_sleeping", "2026-06-29T14:36:22Z", "0.001", 503),
        1_782_743_782_000_000_000,
    )
    assert a is not None and b is not None and a.uid == UID and not a.ok
    assert a.uid is b.uid and a.name is b.name and a.node is b.node


def test_warm_path_with_reclaim_and_missing_serving_answer() -> None:
    c = correlator(
        line(
            "14:35:43.000001",
            "Ensured vLLM instance absent to reclaim launcher capacity",
            f'{CTX} launcherPod="l" instanceID="old" maxOthers=1',
        ),
        line(
            "14:35:43.000002",
            "Ensured vLLM instance absent to reclaim launcher capacity",
            f'{CTX} launcherPod="l" instanceID="old2" maxOthers=1',
        ),
        line(
            "14:35:43.100000",
            "Bound server-providing Pod",
            f'{CTX} name="launcher-example-7xk2p" node="gpu-node-3" instanceID="Iabc"',
        ),
        http("14:35:44.000000", "create_instance", "2026-06-29T14:35:43.9Z", "0.1", 201),
        line(
            "14:36:45.000000", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="http://x"'
        ),
    )
    [act] = c.actuations()
    assert act.path == M.WARM and act.complete
    assert act.attributes[M.A_DELETED] == 2
    assert act.attributes[M.A_INSTANCE] == "Iabc"
    assert "D.serving" in act.missing
    names = {s.name for s in build_trace(act)}
    # the end of vLLM readiness was never seen in a finished actuation: those spans are left out
    assert "fma.vllm.ready" not in names and "fma.readiness.relay" not in names
    assert "fma.instance.ready" in names and "fma.kubelet.probe" in names
    root = build_trace(act)[0]
    # V.ready (vLLM answered) is bracketed by the polls D.serving ends: missing with it
    assert root.attributes[M.A_MISSING] == ["V.ready", "D.serving"]


def test_first_successful_query_after_create_is_serving() -> None:
    c = correlator(
        http(
            "14:35:44.000000", "query_sleeping", "2026-06-29T14:35:43.5Z", "0.001", 200
        ),  # before create: ignored
        http("14:35:44.100000", "create_instance", "2026-06-29T14:35:44Z", "0.1", 201),
        http("14:35:45.000000", "query_sleeping", "2026-06-29T14:35:44.9Z", "0.001", 0),  # refused
        http("14:35:50.000000", "query_sleeping", "2026-06-29T14:35:49.9Z", "0.002", 200),
        http("14:35:55.000000", "query_sleeping", "2026-06-29T14:35:54.9Z", "0.002", 200),
    )
    [act] = c.actuations()
    assert act.instants["D.serving"].t_ns == parse_rfc3339_ns("2026-06-29T14:35:49.902Z")
    assert act.instants["D.create.end"].t_ns == parse_rfc3339_ns("2026-06-29T14:35:44.1Z")


def test_line_without_server_uid_matches_by_requester_name_then_item() -> None:
    by_name = f'worker=0 node="n" requesterName="{NAME}"'
    c = correlator(
        line("14:35:43.100000", "Bound server-providing Pod", f'{by_name} name="l1" instanceID="I1"'),
        http(
            "14:36:13.000000",
            "wake",
            "2026-06-29T14:36:10Z",
            "3",
            200,
            ctx=f'item={{"UID":"{UID}","RequesterName":"{NAME}"}}',
        ),
    )
    [act] = c.actuations()
    assert act.path == M.HOT
    assert act.instants["D.wake.end"].t_ns == parse_rfc3339_ns("2026-06-29T14:36:13Z")
    assert "D.bound" in act.instants


def test_evidence_beats_the_dpc_path_label() -> None:
    """After a DPC restart the DPC calls everything "hot"; the create call says warm."""
    c = correlator(
        http("14:35:44.100000", "create_instance", "2026-06-29T14:35:44Z", "0.1", 201),
        line("14:36:45.000000", "Observed actuation latency", f'{CTX} path="hot" actuationSecs=63.5'),
    )
    [act] = c.actuations()
    assert act.path == M.WARM and act.dpc_actuation_secs == 63.5


def test_failed_create_is_not_an_instant() -> None:
    c = correlator(http("14:35:44.100000", "create_instance", "2026-06-29T14:35:44Z", "0.1", 409), ready=None)
    [act] = c.actuations()
    assert "D.create.start" not in act.instants and not act.complete


def test_wanted_line_without_fields_raises_for_counting() -> None:
    c = correlator()
    bad = line("14:35:44.100000", "HTTP call done", f'{CTX} purpose="wake" statusCode=200')
    with pytest.raises(ValueError, match="httpCallStartTime"):
        c.add_dpc(bad)


def test_pod_versions_in_any_order_keep_every_ready_transition() -> None:
    c = Correlator()
    newer = requester("2026-06-29T14:36:47Z", rv="20")
    older = requester(None, rv="5")
    c.add_pod(PodEvent("MODIFIED", newer))
    c.add_pod(PodEvent("MODIFIED", older))
    [act] = c.actuations()
    assert act.instants["R.ready"].t_ns == parse_rfc3339_ns("2026-06-29T14:36:47Z")


def _act(instants: dict[str, M.Instant], complete: bool = True, path: str = M.COLD_NO_FMA) -> Actuation:
    return Actuation("k", 1, path, complete, instants, {M.A_PATH: path}, missing=())


def inst(t: int, p: int = M.S, src: str = "k8s:x") -> M.Instant:
    return M.Instant(t, p, src, M.SERVICE_K8S)


def test_end_before_start_is_zero_length_and_marked() -> None:
    base = 1_000 * M.S
    spans = build_trace(
        _act(
            {
                "R.created": inst(base),
                "R.scheduled": inst(base + 5 * M.S),
                "R.started": inst(base + 3 * M.S),  # before scheduled: clocks disagree
                "R.ready": inst(base + 9 * M.S),
            }
        )
    )
    startup = next(s for s in spans if s.name == "fma.requester.startup")
    assert startup.start_ns == startup.end_ns == base + 5 * M.S
    assert startup.attributes[M.A_INCONSISTENT] is True
    assert startup.attributes[M.A_RAW] == -2.0
    assert startup.attributes[M.A_MIN] == 0 and startup.attributes[M.A_MAX] == 0
    ok = next(s for s in spans if s.name == "fma.actuation")
    # [t, t + 1 s) is [t, t + 1 s - 1 ns] in whole ns: 5 s + 1 ns at least, 7 s - 1 ns at most
    assert (ok.attributes[M.A_MIN], ok.attributes[M.A_MAX]) == (5.000000001, 6.999999999)
    assert M.A_INCONSISTENT not in ok.attributes


def test_unknown_start_leaves_span_out_and_children_reparent() -> None:
    base = 1_000 * M.S
    i = {
        "R.created": inst(base),
        "R.started": inst(base + 2 * M.S),
        "R.ready": inst(base + 60 * M.S),
        "D.create.start": inst(base + 30 * M.S, 1, "dpc:x"),
        "D.create.end": inst(base + 31 * M.S, 1, "dpc:x"),
        "D.relayed": inst(base + 55 * M.S, 1000, "dpc:y"),
    }
    spans = {s.name: s for s in build_trace(_act(i, path=M.COLD_LAUNCHER))}
    assert "fma.launcher.cold_start" not in spans  # L.created unknown
    assert spans["fma.instance.ready"].parent_span_id == spans["fma.actuation"].span_id
    assert "fma.requester.schedule" not in spans  # R.scheduled unknown: no end, complete: left out


@pytest.mark.parametrize(
    ("prefix", "month", "expected_year"),
    [
        ("2027-01-01T00:00:02Z", 12, 2026),  # written in December, read in January
        ("2027-01-01T00:00:02Z", 1, 2027),
    ],
)
def test_year_from_timestamps_prefix(prefix: str, month: int, expected_year: int) -> None:
    import time

    rec = KlogRecord(
        1, "I", month, 31 if month == 12 else 1, 0, 1, "f.go", 1, "m", (), parse_rfc3339_ns(prefix)
    )
    assert time.gmtime(YearResolver().resolve(rec) // M.S).tm_year == expected_year


def test_year_from_nearest_pod_across_new_year() -> None:
    import time

    y = YearResolver()
    y.add_reference(parse_rfc3339_ns("2026-12-31T23:59:00Z"))
    y.add_reference(parse_rfc3339_ns("2027-01-01T00:01:00Z"))
    dec = KlogRecord(1, "I", 12, 31, 86_399_000_000, 1, "f.go", 1, "m", ())
    jan = KlogRecord(2, "I", 1, 1, 30_000_000, 1, "f.go", 1, "m", ())
    assert time.gmtime(y.resolve(dec) // M.S).tm_year == 2026
    assert time.gmtime(y.resolve(jan) // M.S).tm_year == 2027


def test_feb_29_resolves_to_the_near_leap_year_else_fails_every_line() -> None:
    """The year is resolved once a day of log; a day no near year has is never cached, so
    each of its lines is a counted error (not the first one only)."""
    import time

    feb29 = KlogRecord(1, "I", 2, 29, 3_600_000_000, 1, "f.go", 1, "m", ())
    near_leap = YearResolver()
    near_leap.add_reference(parse_rfc3339_ns("2027-03-01T00:00:00Z"))  # 2026..2028: 2028 has it
    assert time.gmtime(near_leap.resolve(feb29) // M.S)[:4] == (2028, 2, 29, 1)
    none_near = YearResolver()
    none_near.add_reference(parse_rfc3339_ns("2030-03-01T00:00:00Z"))  # 2029..2031: none has it
    for _ in range(2):
        with pytest.raises(ValueError, match="no 2030-02-29"):
            none_near.resolve(feb29)


def test_forget_pod_drops_all_state() -> None:
    c = correlator(http("14:35:44.100000", "create_instance", "2026-06-29T14:35:44Z", "0.1", 201))
    assert c.actuations()
    c.forget_pod(UID)
    assert c.actuations() == [] and len(c.store) == 0
    assert UID not in c._dpc and UID not in c._ready


def _hot_round(hour: int) -> list[KlogRecord]:
    h = f"{hour:02d}"
    return [
        line(f"{h}:00:00.000001", "Bound server-providing Pod", f'{CTX} name="l1" instanceID="I1"'),
        http(f"{h}:00:03.000000", "wake", f"2026-06-29T{h}:00:01Z", "2", 200),
        line(f"{h}:00:03.100000", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"'),
        line(f"{h}:30:00.000000", "Unbound server-providing Pod", f'{CTX} name="l1"'),
    ]


def test_every_round_is_emitted_once_under_eviction() -> None:
    """Live use: emit, evict, feed the next round; the count of rounds must not restart."""
    c = Correlator()
    pod = requester(None)
    c.add_pod(PodEvent("LISTED", pod))
    emitted: list[str] = []
    for i, hour in enumerate((15, 16, 17, 18)):
        for r in _hot_round(hour):
            c.add_dpc(r)
        ready = dict(pod, metadata=dict(pod["metadata"], resourceVersion=str(20 + i)))
        ready["status"] = dict(
            pod["status"],
            conditions=[
                *pod["status"]["conditions"],
                {"type": "Ready", "status": "True", "lastTransitionTime": f"2026-06-29T{hour}:00:06Z"},
            ],
        )
        c.add_pod(PodEvent("MODIFIED", ready))
        for act in c.finished(now_ns=2**62, grace_ns=0, incomplete_after_ns=2**62):
            emitted.append(act.key)
            c.evict(act.key)
    assert emitted == [UID, f"{UID}/2", f"{UID}/3", f"{UID}/4"]


def test_eviction_trims_the_repeated_line_instants_with_the_facts() -> None:
    """Once a requester's rounds are out, only the facts that number them are kept; the
    instants that tell a repeated line are trimmed with them (they grew with every fact of a
    live requester until its Pod was deleted)."""
    c = Correlator()
    c.evict(UID)
    for r in _hot_round(15):
        c.add_dpc(r)
    c.add_dpc(http("15:00:02.000000", "query_sleeping", "2026-06-29T15:00:01.5Z", "0.1"))
    assert len(c._seen[UID]) == 5
    c.add_pod(PodEvent("LISTED", requester(None)))  # the eviction applies: trimmed
    kinds = [f.kind for f in c._dpc[UID]]
    assert F.SLEEP_QUERY not in kinds
    assert len(c._seen[UID]) == len(kinds)


def test_eviction_before_the_pod_is_known_applies_when_it_arrives() -> None:
    """A restarted watcher evicts the checkpoint's keys before any Pod is listed: when the
    Pod shows up, that round's facts are dropped as if evicted then (only the facts
    that number the rounds stay) and the next round is still numbered 2."""
    c = Correlator()
    c.evict(UID)
    for r in _hot_round(15):
        c.add_dpc(r)
    c.add_dpc(http("15:00:02.000000", "query_sleeping", "2026-06-29T15:00:01.5Z", "0.1"))
    assert F.SLEEP_QUERY in [f.kind for f in c._dpc[UID]]
    c.add_pod(PodEvent("LISTED", requester(None)))
    assert [f.kind for f in c._dpc[UID]] == [F.BOUND, F.WAKE, F.RELAYED, F.UNBOUND]
    assert c.actuations() == []
    for r in _hot_round(16):
        c.add_dpc(r)
    assert [a.key for a in c.actuations()] == [f"{UID}/2"]


def test_deleted_requester_keeps_its_container_start() -> None:
    gone = requester()
    gone["status"]["containerStatuses"] = [
        {
            "name": "inference-server",
            "state": {"terminated": {"startedAt": "2026-06-29T14:35:42Z", "exitCode": 0}},
        }
    ]
    c = Correlator()
    c.add_pod(PodEvent("DELETED", gone))
    [act] = c.actuations()
    assert act.instants["R.started"].t_ns == parse_rfc3339_ns("2026-06-29T14:35:42Z")


def test_name_only_lines_go_to_the_pod_of_that_name_alive_then() -> None:
    first = requester()
    second = requester("2026-06-29T16:00:09Z")
    second["metadata"] = dict(second["metadata"], uid="second-uid", creationTimestamp="2026-06-29T15:59:00Z")
    c = Correlator()
    c.add_pod(PodEvent("LISTED", first))
    c.add_pod(PodEvent("LISTED", second))
    by_name = f'worker=0 node="n" requesterName="{NAME}"'
    c.add_dpc(http("14:36:13.000000", "wake", "2026-06-29T14:36:10Z", "3", 200, ctx=by_name))
    c.add_dpc(http("16:00:05.000000", "wake", "2026-06-29T16:00:02Z", "3", 200, ctx=by_name))
    acts = {a.key: a for a in c.actuations()}
    assert acts[UID].instants["D.wake.start"].t_ns == parse_rfc3339_ns("2026-06-29T14:36:10Z")
    assert acts["second-uid"].instants["D.wake.start"].t_ns == parse_rfc3339_ns("2026-06-29T16:00:02Z")


def test_direct_provider_requester_and_its_provider() -> None:
    direct = requester()
    direct["metadata"] = dict(
        direct["metadata"], annotations={"dual-pods.llm-d.ai/server-patch": "{}"}, labels={"app": "vllm"}
    )
    provider = requester()
    provider["metadata"] = dict(
        provider["metadata"],
        name=NAME + "-dual-abcde",
        uid="provider-uid",
        labels={"app": "vllm"},
        annotations={"dual-pods.llm-d.ai/requester": f"{UID} {NAME}"},
    )
    c = Correlator(baseline_selector={"app": "vllm"})
    c.add_pod(PodEvent("LISTED", direct))
    c.add_pod(PodEvent("LISTED", provider))
    c.add_dpc(line("14:36:45.000000", "Observed actuation latency", f'{CTX} path="hot" actuationSecs=60'))
    [act] = c.actuations()  # the provider is no baseline
    assert act.key == UID
    assert act.path == M.UNKNOWN  # the DPC's "hot" label is not evidence for a direct provider


@pytest.mark.parametrize("field", ["latencySecs=1e999", "latencySecs=-1", "statusCode=1e999 latencySecs=0.1"])
def test_non_finite_numbers_are_a_counted_bad_line(field: str) -> None:
    c = correlator()
    kv = f'{CTX} purpose="wake" httpCallStartTime="2026-06-29T14:36:10Z" {field}'
    if "statusCode" in field:
        fact = c.add_dpc(line("14:36:13.000000", "HTTP call done", kv))
        assert fact is not None and fact.status == 0 and not fact.ok
    else:
        with pytest.raises(ValueError):
            c.add_dpc(line("14:36:13.000000", "HTTP call done", kv))


def test_live_waits_for_dpc_lines_of_a_ready_requester() -> None:
    """The Pod says Ready but the DPC log has not arrived: hold it back (up to 30 s)."""
    t = [0]
    c = Correlator(clock_ns=lambda: t[0])
    c.add_pod(PodEvent("LISTED", requester()))
    t[0] = 10 * M.S
    assert c.finished(now_ns=12 * M.S, grace_ns=M.S, incomplete_after_ns=2**62) == []
    c.add_dpc(http("14:36:13.000000", "wake", "2026-06-29T14:36:10Z", "3", 200))
    c.add_dpc(
        line("14:36:14.000000", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"')
    )
    t[0] = 13 * M.S
    [act] = c.finished(now_ns=15 * M.S, grace_ns=M.S, incomplete_after_ns=2**62)
    assert act.path == M.HOT and "D.relayed" in act.instants


def test_year_references_do_not_grow_with_events() -> None:
    c = Correlator()
    for rv in range(1, 200):
        c.add_pod(PodEvent("MODIFIED", requester(rv=str(rv))))
    assert len(c.years._refs) == 1


def _kept(c: Correlator, kind: str) -> list[int]:
    return sorted(f.t_ns for f in c._dpc.get(UID, ()) if f.kind == kind)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_capped_kind_keeps_the_same_facts_whatever_order_they_arrive_in(reverse: bool) -> None:
    """Per requester, at most 4 "Processing inference server" lines (the earliest) and 256
    failed /is_sleeping polls (the latest, the last one before vLLM answered bounds V.ready)
    are kept; facts of other kinds do not count against a kind's cap."""
    c = Correlator()
    for i in range(10):  # other kinds first: the requester has more facts than a cap
        c._add_fact(DpcFact(F.BOUND, 1_000 + i, UID, NAME, 1_000 + i))
    processing = [DpcFact(F.PROCESSING, t, UID, NAME, t) for t in range(1, 7)]
    polls = [
        DpcFact(F.SLEEP_QUERY, t, UID, NAME, t, start_ns=t, end_ns=t, ok=False)
        for t in range(2_000, 2_000 + MAX_FAILED_POLLS + 5)
    ]
    for f in (processing + polls)[:: -1 if reverse else 1]:
        c._add_fact(f)
    assert _kept(c, F.PROCESSING) == [1, 2, 3, 4]
    assert _kept(c, F.SLEEP_QUERY) == list(range(2_005, 2_000 + MAX_FAILED_POLLS + 5))
    assert len(_kept(c, F.BOUND)) == 10


def test_only_the_first_answered_poll_after_each_create_is_kept() -> None:
    """Why: the first successful /is_sleeping answer after a create call is D.serving; the
    polls after it say nothing more, and a long-running requester makes many."""
    c = Correlator()

    def call(kind: str, t: int) -> None:
        c._add_fact(DpcFact(kind, t, UID, NAME, t, start_ns=t, end_ns=t + 1))

    for kind, t in ((F.CREATE, 10), (F.SLEEP_QUERY, 12), (F.SLEEP_QUERY, 14), (F.SLEEP_QUERY, 16)):
        call(kind, t)
    for kind, t in ((F.CREATE, 20), (F.SLEEP_QUERY, 22), (F.SLEEP_QUERY, 24)):
        call(kind, t)
    assert _kept(c, F.SLEEP_QUERY) == [12, 22]
    assert _kept(c, F.CREATE) == [10, 20]


def test_a_repeated_line_is_taken_once_and_another_fact_of_its_instant_is_kept() -> None:
    """A line read twice (a log concatenated, a re-read) is one fact; two different facts
    of the same µs are both kept: only the whole fact, its line aside, makes a repeat."""
    c = Correlator()
    bound, wake, relayed, _unbound = _hot_round(15)
    twin = line("15:00:03.000000", "Successfully relayed the readiness", f'{CTX} readiness="ready" url="u"')
    for rec in (bound, wake, twin, wake, relayed, relayed._replace(line_no=99)):
        c.add_dpc(rec)
    assert [f.kind for f in c._dpc[UID]] == [F.BOUND, F.WAKE, F.RELAYED, F.RELAYED]
    assert c.duplicates == 2
