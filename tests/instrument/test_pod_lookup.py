"""The launcher Pod lookup (join by annotation) is never on the create request path.

With the local API server healthy, hung (accepts and never answers) or down, a create is
answered without waiting on it: the launcher reads and watches its own Pod in the
background, and a create it cannot place yet is served at once and its span resolved
after the response - joined by the derived ids once the annotation is known, else
``fma.join=none`` with the reason.  The lookup's own client (``_kubeapi``, ``urllib3``) talks
to ``tests/support/k8s_server.py``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fma_otel import model
from fma_otel.instrument import podinfo as podinfo_mod
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN, LauncherInstrumentor
from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from tests.instrument.conftest import Tracing, wait_until
from tests.support.k8s_server import FakeCluster, make_pod, write_kubeconfig
from tests.support.otlp_receiver import free_port

UID = "5e1f0c2a-0000-4000-8000-0000000000aa"
ENV = {"POD_NAME": "launcher-p", "NAMESPACE": "fma-test"}


class HungServer:
    """Accepts connections and never answers (until closed): an API server that hangs."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def api_at(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """Point the lookup's own client at ``url`` (a fresh client per test)."""

    def point(url: str) -> None:
        monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kubeconfig", url))
        monkeypatch.setattr(podinfo_mod, "_API", None)

    yield point
    podinfo_mod._API = None


def _bound(instance_id: str) -> dict[str, str]:
    return {REQUESTER_ANNOTATION: f"{UID} req-p", INSTANCE_ID_ANNOTATION: instance_id}


def _create(launcher: Any, tracing: Tracing, pi: PodInfo, instance_id: str, during: Any = None) -> int:
    """One create through the instrumented fake launcher; ``during(client)`` runs after it
    is answered and before the launcher stops.  The create's status code."""
    inst = LauncherInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, pod_info=pi, skip_dep_check=True)
    try:
        with TestClient(launcher.app) as client:
            cfg = {"options": f"--model m --port {free_port()} --fake-health-delay 0", "env_vars": {}}
            status = client.put(f"/v2/vllm/instances/{instance_id}", json=cfg).status_code
            if during is not None:
                during(client)
            assert wait_until(lambda: tracing.spans(CREATE_SPAN) and tracing.spans(STARTUP_SPAN), 10)
            client.delete(f"/v2/vllm/instances/{instance_id}")
    finally:
        inst.uninstrument()
    return status


def _assert_joined(tracing: Tracing) -> None:
    trace_hex = model.trace_id_for(model.actuation_key(UID))
    (create,) = tracing.spans(CREATE_SPAN)
    assert create.attributes["fma.join"] == "annotation", create.attributes.get("fma.join.reason")
    assert f"{create.context.trace_id:032x}" == trace_hex
    assert f"{create.context.span_id:016x}" == model.span_id_for(trace_hex, CREATE_SPAN, 0)
    assert f"{create.parent.span_id:016x}" == model.span_id_for(trace_hex, "fma.dpc.create_instance", 0)
    (startup,) = tracing.spans(STARTUP_SPAN)
    assert f"{startup.context.trace_id:032x}" == trace_hex
    assert f"{startup.parent.span_id:016x}" == model.span_id_for(trace_hex, "fma.vllm.ready", 0)


@pytest.mark.slow
def test_healthy_api_server_the_create_joins_by_annotation(
    tracing: Tracing, fake_launcher: Any, api_at: Any
) -> None:
    with FakeCluster() as k8s:
        k8s.add_pod(make_pod("launcher-p", "fma-test", annotations=_bound("inst-h")))
        api_at(k8s.url)
        pi = PodInfo(env=dict(ENV), timeout=2.0)
        assert _create(fake_launcher, tracing, pi, "inst-h") == 201
        assert k8s.requests_to("/pods")  # read (and watched) by the background thread
    _assert_joined(tracing)


@pytest.mark.slow
def test_the_binding_learned_from_the_watch_after_the_create_still_joins(
    tracing: Tracing, fake_launcher: Any, api_at: Any
) -> None:
    """The Pod is unbound when the create arrives; the DPC's annotation comes after the
    response, through the watch: the create span (opened after the response) joins."""
    with FakeCluster() as k8s:
        k8s.add_pod(make_pod("launcher-p", "fma-test"))
        api_at(k8s.url)
        pi = PodInfo(env=dict(ENV), timeout=2.0)

        def bind(_client: Any) -> None:
            assert not tracing.spans(CREATE_SPAN)  # not resolved yet: nothing exported
            k8s.modify_pod("launcher-p", "fma-test", patch={"metadata": {"annotations": _bound("inst-w")}})

        assert _create(fake_launcher, tracing, pi, "inst-w", during=bind) == 201
    _assert_joined(tracing)


@pytest.mark.slow
def test_hung_api_server_the_create_does_not_wait(tracing: Tracing, fake_launcher: Any, api_at: Any) -> None:
    """The API server accepts the lookup's connection and never answers.  With a lookup
    timeout far longer than any create, the create is answered while that read is still
    outstanding, and its span records why it could not join."""
    hung = HungServer()
    try:
        api_at(hung.url)
        pi = PodInfo(env={**ENV, podinfo_mod.ENV_WAIT: "0.5"}, timeout=60.0)
        outstanding: list[bool] = []

        def check(_client: Any) -> None:
            # answered, and the lookup's GET is still waiting on the server
            assert wait_until(lambda: hung.accepted, 10)
            outstanding.append(pi._last is None)

        assert _create(fake_launcher, tracing, pi, "inst-hung", during=check) == 201
        assert outstanding == [True]
    finally:
        hung.close()
    (create,) = tracing.spans(CREATE_SPAN)
    assert create.attributes["fma.join"] == "none"
    assert "not known within 0.5 s" in create.attributes["fma.join.reason"]
    assert create.parent is None


def test_api_server_down_the_create_records_why(tracing: Tracing, fake_launcher: Any, api_at: Any) -> None:
    api_at(f"http://127.0.0.1:{free_port()}")  # nobody listens
    pi = PodInfo(env={**ENV, podinfo_mod.ENV_WAIT: "5"}, timeout=0.5)
    assert _create(fake_launcher, tracing, pi, "inst-down") == 201
    (create,) = tracing.spans(CREATE_SPAN)
    assert create.attributes["fma.join"] == "none"
    assert "pod lookup failed" in create.attributes["fma.join.reason"]


@pytest.fixture(autouse=True)
def _no_kube_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    yield
