"""The test API server speaks what the real ``kubernetes`` client expects.

These tests pin the server's behaviour so the watcher's tests can trust it: if the fake
drifted from kube-apiserver's protocol, the watcher's tests would prove nothing.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from kubernetes import client, config, watch

from tests.support.k8s_server import (
    FakeCluster,
    format_log_timestamp,
    iter_events,
    make_pod,
    parse_label_selector,
)


@pytest.mark.slow
def test_list_has_resource_version_and_selects_labels(k8s: FakeCluster, core_api) -> None:
    k8s.add_pod(make_pod("a", labels={"app": "x", "tier": "1"}))
    k8s.add_pod(make_pod("b", labels={"app": "y"}))
    k8s.add_pod(make_pod("c", namespace="other", labels={"app": "x"}))
    r = core_api.list_namespaced_pod("default", label_selector="app=x")
    assert [p.metadata.name for p in r.items] == ["a"]
    assert int(r.metadata.resource_version) == k8s.rv
    r = core_api.list_namespaced_pod("default", label_selector="app notin (x),!tier")
    assert [p.metadata.name for p in r.items] == ["b"]
    assert len(core_api.list_pod_for_all_namespaces(label_selector="app=x").items) == 2


@pytest.mark.slow
def test_list_pages_with_limit_and_continue(k8s: FakeCluster, core_api) -> None:
    for i in range(5):
        k8s.add_pod(make_pod(f"p{i}"))
    names, cont = [], None
    while True:
        r = core_api.list_namespaced_pod("default", limit=2, _continue=cont)
        names += [p.metadata.name for p in r.items]
        cont = r.metadata._continue
        if not cont:
            break
    assert names == [f"p{i}" for i in range(5)]


def test_label_selector_parser() -> None:
    sel = parse_label_selector("a=1,b!=2,c in (x, y),d,!e")
    assert sel({"a": "1", "c": "y", "d": ""})
    assert not sel({"a": "1", "c": "y", "d": "", "e": "1"})
    assert not sel({"a": "1", "b": "2", "c": "x", "d": ""})
    with pytest.raises(ValueError):
        parse_label_selector("a=(")


@pytest.mark.slow
def test_watch_streams_events_after_resource_version(k8s: FakeCluster, core_api) -> None:
    k8s.add_pod(make_pod("a", labels={"app": "x"}))
    rv = core_api.list_namespaced_pod("default").metadata.resource_version

    def later() -> None:
        time.sleep(0.2)
        k8s.modify_pod("a", patch={"status": {"phase": "Running"}})
        k8s.add_pod(make_pod("b", labels={"app": "x"}))
        k8s.modify_pod("b", patch={"metadata": {"labels": {"app": "z"}}})  # leaves the selector
        k8s.delete_pod("a")

    threading.Thread(target=later).start()
    resp = core_api.list_namespaced_pod(
        "default",
        watch=True,
        resource_version=rv,
        label_selector="app=x",
        timeout_seconds=1,
        _preload_content=False,
    )
    evs = [(e["type"], e["object"]["metadata"]["name"]) for e in iter_events(resp)]
    assert evs == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "b"), ("DELETED", "a")]


@pytest.mark.slow
def test_watch_without_rv_starts_with_added(k8s: FakeCluster, core_api) -> None:
    k8s.add_pod(make_pod("a"))
    resp = core_api.list_namespaced_pod("default", watch=True, timeout_seconds=1, _preload_content=False)
    assert [e["type"] for e in iter_events(resp)] == ["ADDED"]


@pytest.mark.slow
def test_410_as_error_event_and_as_http(core_api, k8s: FakeCluster) -> None:
    k8s.add_pod(make_pod("a"))
    k8s.modify_pod("a", patch={"metadata": {"labels": {"x": "1"}}})
    k8s.compact()
    resp = core_api.list_namespaced_pod(
        "default", watch=True, resource_version="1001", _preload_content=False
    )
    (ev,) = list(iter_events(resp))
    assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
    # the client library's own Watch turns it into ApiException(410) after one retry
    with pytest.raises(client.ApiException) as exc:
        for _ in watch.Watch().stream(core_api.list_namespaced_pod, "default", resource_version="1001"):
            pass
    assert exc.value.status == 410
    k8s.gone_mode = "http"
    with pytest.raises(client.ApiException) as exc:
        core_api.list_namespaced_pod("default", watch=True, resource_version="1001", _preload_content=True)
    assert exc.value.status == 410


@pytest.mark.slow
def test_expire_and_drop_open_watch(k8s: FakeCluster, core_api) -> None:
    rv = core_api.list_namespaced_pod("default").metadata.resource_version
    resp = core_api.list_namespaced_pod("default", watch=True, resource_version=rv, _preload_content=False)
    assert k8s.wait_for_streams("watch")
    k8s.add_pod(make_pod("a"))
    threading.Timer(0.2, k8s.expire_watches).start()
    evs = list(iter_events(resp))
    assert [e["type"] for e in evs] == ["ADDED", "ERROR"]
    resp = core_api.list_namespaced_pod(
        "default", watch=True, resource_version=str(k8s.rv), _preload_content=False
    )
    assert k8s.wait_for_streams("watch")
    k8s.drop_connections("watch")
    with pytest.raises(Exception):  # noqa: B017 - urllib3 ProtocolError family
        list(iter_events(resp))


@pytest.mark.slow
def test_bookmarks(k8s: FakeCluster, core_api) -> None:
    resp = core_api.list_namespaced_pod(
        "default",
        watch=True,
        resource_version=str(k8s.rv),
        allow_watch_bookmarks=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    assert k8s.wait_for_streams("watch")
    k8s.add_pod(make_pod("other", namespace="elsewhere"))
    k8s.send_bookmarks()
    evs = list(iter_events(resp))
    assert evs[-1]["type"] == "BOOKMARK"
    assert evs[-1]["object"]["metadata"]["resourceVersion"] == str(k8s.rv)


@pytest.mark.slow
def test_get_patch_delete_and_kubeconfig(k8s: FakeCluster, tmp_path) -> None:
    k8s.add_pod(make_pod("a"))
    path = k8s.write_kubeconfig(str(tmp_path / "kubeconfig"))
    api = client.CoreV1Api(config.new_client_from_config(config_file=path))
    assert api.read_namespaced_pod("a", "default").metadata.name == "a"
    with pytest.raises(client.ApiException) as exc:
        api.read_namespaced_pod("nope", "default")
    assert exc.value.status == 404
    assert api.patch_namespaced_pod("a", "default", {"metadata": {"labels": {"q": "1"}}}).metadata.labels == {
        "q": "1"
    }
    api.delete_namespaced_pod("a", "default")
    assert api.list_namespaced_pod("default").items == []


@pytest.mark.slow
def test_log_timestamps_since_previous_and_follow(k8s: FakeCluster, core_api) -> None:
    k8s.add_pod(make_pod("dpc", containers=["controller", "side"]))
    t0 = 1_782_000_000_000_000_000
    k8s.append_log("dpc", "controller", "one", "two", ts_ns=t0)
    text = core_api.read_namespaced_pod_log("dpc", "default", container="controller", timestamps=True)
    assert text == f"{format_log_timestamp(t0)} one\n{format_log_timestamp(t0 + 1)} two\n"
    assert format_log_timestamp(t0).endswith(".000000000Z")
    with pytest.raises(client.ApiException) as exc:
        core_api.read_namespaced_pod_log("dpc", "default")  # two containers: must name one
    assert exc.value.status == 400
    with pytest.raises(client.ApiException):
        core_api.read_namespaced_pod_log("dpc", "default", container="controller", previous=True)

    resp = core_api.read_namespaced_pod_log(
        "dpc", "default", container="controller", follow=True, _preload_content=False
    )
    got: list[bytes] = []

    def produce() -> None:
        k8s.wait_for_streams("log")
        k8s.append_log("dpc", "controller", "three")
        time.sleep(0.1)
        k8s.restart_container("dpc", "controller")  # ends the follow stream

    threading.Thread(target=produce).start()
    for chunk in resp.stream(amt=None, decode_content=False):
        got.append(chunk)
    assert b"".join(got) == b"one\ntwo\nthree\n"
    prev = core_api.read_namespaced_pod_log("dpc", "default", container="controller", previous=True)
    assert prev == "one\ntwo\nthree\n"
    assert k8s.get_pod("dpc")["status"]["containerStatuses"][0]["restartCount"] == 1

    # sinceTime is not in this client's typed signature; it is a plain query parameter
    k8s.append_log("dpc", "controller", "a", "b", ts_ns=t0 + 5_000_000_000)
    api_client = core_api.api_client
    params = api_client.param_serialize(
        method="GET",
        resource_path="/api/v1/namespaces/default/pods/dpc/log",
        query_params=[
            ("container", "controller"),
            ("sinceTime", "2026-06-21T00:00:05Z"),
            ("timestamps", True),
        ],
    )
    del params  # only checks serialisation works
    r = k8s.requests_to("/pods/dpc/log")
    assert r and r[0].query.get("container") == "controller"


@pytest.mark.slow
def test_injected_error(k8s: FakeCluster, core_api) -> None:
    k8s.inject_error("GET", r"/pods$", 500)
    with pytest.raises(client.ApiException) as exc:
        core_api.list_namespaced_pod("default")
    assert exc.value.status == 500
    assert core_api.list_namespaced_pod("default").items == []
    assert json.loads(json.dumps(k8s.requests[0].query)) == {}


@pytest.mark.slow
@pytest.mark.parametrize("end", ["delete", "restart"])
def test_follow_stream_carries_lines_written_before_the_end(k8s: FakeCluster, core_api, end: str) -> None:
    """A follow stream ends after every line its container wrote, however late it looks.

    The kubelet reads the instance's log file to its end; the fake must not drop lines it
    had not sent yet when the Pod is deleted or the container restarts (a follower that
    looked late, on a loaded machine, would then lose them where a real cluster would not).
    Holding the lock keeps the stream from sending between the appends and the end.
    """
    k8s.add_pod(make_pod("dpc", containers=["controller"]))
    k8s.append_log("dpc", "controller", "one")
    resp = core_api.read_namespaced_pod_log(
        "dpc", "default", container="controller", follow=True, _preload_content=False
    )
    assert k8s.wait_for_streams("log")
    with k8s.cond:
        k8s.append_log("dpc", "controller", "two", "three")
        if end == "delete":
            k8s.delete_pod("dpc")
        else:
            k8s.restart_container("dpc", "controller", update_status=False)
    got = b"".join(resp.stream(amt=None, decode_content=False))
    assert got == b"one\ntwo\nthree\n"


@pytest.mark.slow
def test_events_list_and_watch_with_the_typed_client(k8s: FakeCluster, core_api) -> None:
    """core/v1 Events: the typed client reads the list and a watch from its version."""
    from tests.support.k8s_server import make_event

    pod = k8s.add_pod(make_pod("p"))
    k8s.add_event(
        make_event(
            "Scheduled",
            "assigned",
            pod=pod,
            component="default-scheduler",
            event_time_us=1_700_000_000_123_456,
        )
    )
    r = core_api.list_namespaced_event("default")
    assert [(e.reason, e.involved_object.name) for e in r.items] == [("Scheduled", "p")]
    assert int(r.metadata.resource_version) == k8s.rv
    assert r.items[0].event_time.microsecond == 123456
    k8s.add_event(make_event("Started", "started", pod=pod, container="main", first=1_700_000_001))
    w = watch.Watch()
    got = []
    for ev in w.stream(
        core_api.list_namespaced_event,
        "default",
        resource_version=r.metadata.resource_version,
        timeout_seconds=2,
    ):
        got.append((ev["type"], ev["object"].reason, ev["object"].involved_object.field_path))
        w.stop()
    assert got == [("ADDED", "Started", "spec.containers{main}")]
    # the Pod watch does not see Events, nor the Events watch Pods
    pods = core_api.list_namespaced_pod(
        "default", watch=True, resource_version=str(k8s.rv - 2), timeout_seconds=1, _preload_content=False
    )
    assert [e["object"]["kind"] for e in iter_events(pods)] == []


@pytest.mark.slow
def test_pod_proxy_forwards_range_to_the_fake_launcher(k8s: FakeCluster, core_api) -> None:
    """pods/proxy as the real client calls it; the launcher log endpoint's Range rules."""
    k8s.add_pod(make_pod("launcher-a"))
    backend = k8s.add_launcher("launcher-a")
    backend.max_response = 4
    backend.append("I1", b"0123456789")
    api = core_api.api_client

    def get(rng: str | None, instance: str = "I1", pod: str = "launcher-a:8001"):  # noqa: ANN202
        headers = {"Range": rng} if rng else {}
        method, url, hdrs, body, post = api.param_serialize(
            "GET",
            f"/api/v1/namespaces/default/pods/{{name}}/proxy/v2/vllm/instances/{instance}/log",
            path_params={"name": pod},
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        r = api.call_api(method, url, header_params=hdrs).response
        return r.status, r.headers.get("Content-Range"), r.data

    assert get("bytes=2-") == (206, "bytes 2-5/10", b"2345")  # at most max_response
    assert get("bytes=8-100") == (206, "bytes 8-9/10", b"89")
    assert get(None) == (200, "bytes 0-3/10", b"0123")
    assert get("bytes=10-")[:2] == (416, "bytes */10")
    assert get("bytes=5-2")[0] == 400 and get("lines=1-2")[0] == 400
    assert get("bytes=0-", instance="I2")[0] == 404
    assert get("bytes=0-", pod="launcher-a:9999")[0] == 503  # nothing listens there
    assert get("bytes=0-", pod="nope:8001")[0] == 404
    assert [r.range for r in k8s.proxied("launcher-a")][:3] == ["bytes=2-", "bytes=8-100", None]
