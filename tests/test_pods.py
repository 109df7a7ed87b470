"""Pod JSON reader and store: every kubectl output form, out-of-order events, garbage."""

from __future__ import annotations

import io
import json
import random

import pytest

from fma_otel.sources.pods import PodStore, iter_pod_events
from fma_otel.sources.records import PodEvent, SourceStats

R_UID = "811f8932-b608-416c-8a90-589b39ed9bde"
L_UID = "0b6e3c1d-2a4f-4e8b-9c7d-5f1a2b3c4d5e"


def pod(uid=R_UID, rv="24430101", name="my-request-29-14-35-40-d45ml", ready=None, kind=True):
    """A requester-shaped Pod (fma-reference §9.4), with an optional Ready condition."""
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-06-29T14:35:40Z"}]
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": ready})
    p = {
        "metadata": {
            "name": name,
            "namespace": "fma-test",
            "uid": uid,
            "resourceVersion": rv,
            "creationTimestamp": "2026-06-29T14:35:40Z",
            "annotations": {"dual-pods.llm-d.ai/status": '{"Errors":null}', "note": 'line\nbreak "q" é'},
        },
        "spec": {"nodeName": "gpu-node-3"},
        "status": {"phase": "Running", "podIP": "10.244.2.9", "conditions": conds},
    }
    if kind:
        p = {"apiVersion": "v1", "kind": "Pod", **p}
    return p


def read(text: str | bytes, chunk: int = 1 << 16):
    stats = SourceStats("pods")
    data = text.encode() if isinstance(text, str) else text
    return list(iter_pod_events(io.BytesIO(data), stats, chunk)), stats


def as_list(*pods, kind="List"):
    return json.dumps(
        {"apiVersion": "v1", "items": list(pods), "kind": kind, "metadata": {"resourceVersion": ""}}, indent=4
    )


CHUNKS = [1, 5, 64, 1 << 16]


@pytest.mark.parametrize("chunk", CHUNKS)
def test_list_is_streamed_item_by_item(chunk):
    evs, st = read(as_list(pod(), pod(L_UID, name="launcher-example-7xk2p")), chunk)
    assert [(e.event_type, e.pod["metadata"]["uid"], e.index) for e in evs] == [
        ("LISTED", R_UID, 0),
        ("LISTED", L_UID, 1),
    ]
    assert evs[0].pod["metadata"]["annotations"]["note"] == 'line\nbreak "q" é'
    assert (st.read, st.understood, st.skipped) == (2, 2, 0)


def test_pods_share_the_strings_they_repeat():
    """Every Pod is kept to the end: the values many Pods repeat are one string each."""
    evs, _ = read(as_list(pod(), pod(L_UID, name="launcher-example-7xk2p")))
    a, b = (e.pod for e in evs)
    ca, cb = a["status"]["conditions"][0], b["status"]["conditions"][0]
    assert ca == cb
    assert all(ca[k] is cb[k] for k in ("type", "status", "lastTransitionTime"))
    assert a["metadata"]["namespace"] is b["metadata"]["namespace"]
    assert a["spec"]["nodeName"] is b["spec"]["nodeName"]


def test_podlist_from_api_without_item_kind():
    evs, st = read(as_list(pod(kind=False), kind="PodList"))
    assert len(evs) == 1 and evs[0].event_type == "LISTED"
    assert st.skipped == 0


def test_single_pod_object_keeps_only_the_fields_read():
    evs, st = read(json.dumps(pod(), indent=4) + "\n")
    assert [e.event_type for e in evs] == ["LISTED"]
    want = pod()
    del want["apiVersion"], want["status"]["phase"], want["status"]["podIP"]
    assert evs[0].pod == want


def test_kept_fields_of_unexpected_types_are_read_as_they_are():
    """A label that is a number, a condition list that is a string: the Pod is still read
    (the accessors in podfacts ignore what they cannot use), only its kept fields."""
    p = pod()
    p["metadata"]["labels"] = {"n": 5}
    p["status"]["conditions"] = "odd"
    p["status"]["containerStatuses"] = [{"name": "c", "state": {"running": {"startedAt": 7}}, "ready": True}]
    p["spec"] = {"containers": [7, {"name": "c", "image": "x"}]}
    evs, st = read(json.dumps(p) + "\n")
    assert st.skipped == 0 and len(evs) == 1
    got = evs[0].pod
    assert got["metadata"]["labels"] == {"n": 5} and got["status"]["conditions"] == "odd"
    assert "phase" not in got["status"] and "apiVersion" not in got
    # the objects inside are cut to their kept fields, as in a Pod of the expected types
    assert got["spec"]["containers"] == [7, {"name": "c"}]
    assert got["status"]["containerStatuses"] == [{"name": "c", "state": {"running": {"startedAt": 7}}}]


@pytest.mark.parametrize(
    ("part", "field", "value"),
    [("status", "conditions", 5), ("status", "containerStatuses", True), ("spec", "containers", {"a": 1})],
)
def test_a_list_field_holding_a_number_or_an_object_is_a_counted_skip(part, field, value):
    """The accessors iterate these fields (and index ``spec.containers``): a number there
    once stopped the bridge with a traceback."""
    p = pod()
    p.setdefault(part, {})[field] = value
    evs, st = read(json.dumps(p) + "\n" + json.dumps(pod(L_UID)) + "\n")
    assert [e.pod["metadata"]["uid"] for e in evs] == [L_UID]
    assert (st.read, st.understood, st.skipped) == (2, 1, 1)
    assert st.skipped_lines == [(1, f"{part}.{field} is not a list")]


@pytest.mark.parametrize("chunk", CHUNKS)
def test_watch_stream_pretty_printed_without_event_wrappers(chunk):
    text = "\n".join(json.dumps(pod(rv=str(rv)), indent=4) for rv in (1, 2, 3)) + "\n"
    evs, st = read(text, chunk)
    assert [e.pod["metadata"]["resourceVersion"] for e in evs] == ["1", "2", "3"]
    assert {e.event_type for e in evs} == {"LISTED"}
    assert (st.read, st.understood) == (3, 3)


@pytest.mark.parametrize("chunk", CHUNKS)
def test_watch_stream_with_output_watch_events(chunk):
    events = [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "3")]
    text = "".join(json.dumps({"type": t, "object": pod(rv=rv)}, indent=4) + "\n" for t, rv in events)
    text += json.dumps(
        {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}, indent=4
    )
    evs, st = read(text, chunk)
    assert [(e.event_type, e.pod["metadata"]["resourceVersion"]) for e in evs] == events
    assert (st.read, st.understood, st.skipped) == (4, 4, 0)  # bookmark understood, not yielded


def test_json_lines_of_mixed_forms():
    lines = [
        json.dumps({"type": "ADDED", "object": pod(rv="5")}),
        json.dumps(pod(L_UID, rv="6")),
        json.dumps({"kind": "List", "items": [pod(rv="7")]}),
        json.dumps([pod(rv="8"), {"type": "MODIFIED", "object": pod(rv="9")}]),
    ]
    evs, st = read("\n".join(lines) + "\n")
    assert [(e.event_type, e.pod["metadata"]["resourceVersion"]) for e in evs] == [
        ("ADDED", "5"),
        ("LISTED", "6"),
        ("LISTED", "7"),
        ("LISTED", "8"),
        ("MODIFIED", "9"),
    ]
    assert [e.index for e in evs] == [0, 1, 2, 3, 4]
    assert st.skipped == 0


@pytest.mark.parametrize("chunk", CHUNKS)
def test_garbage_and_bad_objects_are_skipped_and_reader_resyncs(chunk):
    text = (
        "Warning: something from kubectl\n"
        + json.dumps(pod(rv="1"), indent=4)
        + "\nerror: the server doesn't have a resource type\n"
        + json.dumps({"kind": "Event", "metadata": {"uid": "e"}}, indent=4)
        + "\n"
        + '{"type": "ERROR", "object": {"kind": "Status", "message": "too old resource version"}}\n'
        + '{"apiVersion": "v1", "kind": "Pod", "metadata": {"uid": "x", \n'  # cut object
        + json.dumps(pod(L_UID, rv="2"), indent=4)
        + "\n"
        + json.dumps({"kind": "Pod", "metadata": {"name": "no-uid"}})
        + "\n"
    )
    evs, st = read(text, chunk)
    assert [e.pod["metadata"]["uid"] for e in evs] == [R_UID, L_UID]
    reasons = [why for _, why in st.skipped_lines]
    assert reasons[0] == "garbage between JSON objects"
    assert reasons[1] == "garbage between JSON objects"
    assert reasons[2] == "not a Pod (kind=Event)"
    assert reasons[3] == "watch ERROR event: too old resource version"
    assert reasons[4].startswith("malformed JSON object")
    assert reasons[5] == "Pod without metadata.uid"
    assert (st.read, st.understood, st.skipped) == (8, 2, 6)
    assert st.skipped_lines[0][0] == 1  # line numbers point at the bad text


def test_non_utf8_bytes_do_not_stop_the_reader():
    raw = json.dumps(pod(rv="1")).encode().replace(b"fma-test", b"fma-\xfftest") + b"\n"
    evs, st = read(raw, 3)
    assert evs[0].pod["metadata"]["namespace"] == "fma-\ufffdtest"
    assert st.skipped == 0


def test_text_file_objects_work_too():
    stats = SourceStats("pods")
    evs = list(iter_pod_events(io.StringIO(as_list(pod())), stats))
    assert len(evs) == 1


def test_big_list_memory_window_and_order():
    pods = [pod(f"uid-{i:05d}", rv=str(i)) for i in range(2000)]
    evs, st = read(as_list(*pods), 4096)
    assert [e.pod["metadata"]["uid"] for e in evs] == [p["metadata"]["uid"] for p in pods]
    assert st.understood == 2000


# --------------------------------------------------------------------------- store


def ev(t, rv, uid=R_UID, **kw):
    return PodEvent(t, pod(uid=uid, rv=rv, **kw))


def test_store_keeps_newest_by_resource_version_whatever_the_order():
    events = [ev("ADDED", "100"), ev("MODIFIED", "105", ready="2026-06-29T14:36:47Z"), ev("MODIFIED", "99")]
    events += [ev("ADDED", "7", uid=L_UID), ev("MODIFIED", "12", uid=L_UID)]
    for seed in range(20):
        order = events * 2
        random.Random(seed).shuffle(order)
        store = PodStore()
        for e in order:
            store.add(e)
        assert store.get(R_UID)["metadata"]["resourceVersion"] == "105"
        assert store.get(L_UID)["metadata"]["resourceVersion"] == "12"
        assert len(store) == 2


def test_store_add_reports_changes():
    store = PodStore()
    assert store.add(ev("ADDED", "10")) is True
    assert store.add(ev("MODIFIED", "10")) is False  # same version again
    assert store.add(ev("MODIFIED", "9")) is False  # older
    assert store.add(ev("MODIFIED", "11")) is True
    assert store.add(PodEvent("BOOKMARK", {"metadata": {"resourceVersion": "12"}})) is False
    assert store.add(PodEvent("ADDED", {"kind": "Pod", "metadata": {}})) is False
    assert store.get("nope") is None and "nope" not in store and R_UID in store


def test_store_deleted_keeps_last_state_and_ignores_older_events():
    store = PodStore()
    store.add(ev("MODIFIED", "20", ready="2026-06-29T14:36:47Z"))
    assert store.add(ev("DELETED", "25", ready="2026-06-29T14:36:47Z")) is True
    assert store.add(ev("MODIFIED", "21")) is False
    assert store.get(R_UID)["metadata"]["resourceVersion"] == "25"
    assert store.pods() == [store.get(R_UID)]
    # a DELETED that arrives before older updates still wins
    store2 = PodStore()
    store2.add(ev("DELETED", "30"))
    assert store2.add(ev("MODIFIED", "29")) is False
    assert store2.get(R_UID)["metadata"]["resourceVersion"] == "30"


def test_store_non_integer_resource_versions_later_arrival_wins():
    store = PodStore()
    store.add(ev("ADDED", "abc"))
    assert store.add(ev("MODIFIED", "10")) is True  # one side not an int: later wins
    assert store.add(ev("MODIFIED", "x9")) is True
    assert store.get(R_UID)["metadata"]["resourceVersion"] == "x9"
    assert store.add(ev("MODIFIED", "x9")) is False  # identical state: no change


def test_store_pods_in_first_arrival_order():
    store = PodStore()
    for uid in ("c", "a", "b"):
        store.add(ev("ADDED", "1", uid=uid))
    store.add(ev("MODIFIED", "2", uid="c"))
    assert [p["metadata"]["uid"] for p in store.pods()] == ["c", "a", "b"]


@pytest.mark.slow
def test_a_pretty_list_is_read_item_by_item_not_held_whole():
    """``kubectl get pods -o json`` output: memory follows one item, not the List."""
    import tracemalloc

    pods = [pod(f"uid-{i:05d}", rv=str(i)) for i in range(3000)]
    data = as_list(*pods).encode()
    tracemalloc.start()
    try:
        stats = SourceStats("pods")
        n = sum(1 for _ in iter_pod_events(io.BytesIO(data), stats, 1 << 16))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert n == 3000 and stats.skipped == 0
    assert peak < len(data) // 4, (peak, len(data))


def test_the_kept_fields_are_every_field_podfacts_reads():
    """Each accessor of ``podfacts`` answers the same on the reader's slim Pod as on the
    whole Pod it came from (the sample's watch stream: every role, every state)."""
    from fma_otel import podfacts as P
    from fma_otel.bridge import sample_dir

    path = sample_dir() / "pods.json"
    whole = [json.loads(line)["object"] for line in path.read_text().splitlines() if line.strip()]
    with open(path, "rb") as fh:
        slim = [e.pod for e in iter_pod_events(fh, SourceStats("pods"))]
    assert len(slim) == len(whole) > 20

    def answers(p):
        return (
            P.uid(p), P.name(p), P.namespace(p), P.node_name(p), dict(P.labels(p)),
            dict(P.annotations(p)), P.created_ns(p), P.resource_version(p),
            P.is_direct_requester(p), P.role(p, {"app": "vllm"}), P.container_started_ns(p, None),
            P.container_started_ns(p, P.REQUESTER_CONTAINER), P.container_names(p),
            [P.condition_true_ns(p, c) for c in ("PodScheduled", "Initialized", "Ready", "ContainersReady")],
        )  # fmt: skip

    assert [answers(p) for p in slim] == [answers(p) for p in whole]
    assert any(P.container_started_ns(p, None) for p in slim)  # the check reaches the statuses


def test_container_names_are_spec_containers_names_in_order() -> None:
    from fma_otel import podfacts as P

    pod = {"spec": {"containers": [{"name": "a"}, "not an object", {"name": "b"}, {}]}}
    assert P.container_names(pod) == ["a", "b", None]
    assert P.container_names({}) == [] == P.container_names({"spec": None})


def test_labels_match_is_the_one_selector_test_role_uses_too():
    """Every label of the selector, with its value; an empty selector matches nothing (the
    DPC Pod's and a baseline's test alike)."""
    from fma_otel import podfacts as P

    pod = {"metadata": {"name": "v", "labels": {"app": "vllm", "tier": "x"}}}
    assert P.labels_match({"app": "vllm"}, pod)
    assert not P.labels_match({"app": "vllm", "tier": "y"}, pod)
    assert not P.labels_match({}, pod) and not P.labels_match(None, pod)
    assert not P.labels_match({"app": "vllm"}, {"metadata": {"name": "v"}})
    assert P.role(pod, {"app": "vllm"}) == P.ROLE_BASELINE
    assert P.role(pod, {"app": "other"}) is None and P.role(pod, {}) is None
    assert P.labels_match(
        P.parse_selector(P.DPC_SELECTOR), {"metadata": {"labels": P.parse_selector(P.DPC_SELECTOR)}}
    )
