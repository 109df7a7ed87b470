"""The launcher's own-Pod lookup over ``urllib3`` (``_kubeapi``), against the local API server.

Why these: the lookup no longer uses the ``kubernetes`` client (its size made every fork of
a vLLM instance slower), so the wire protocol is ours to get right: the GET, a watch from
the version read, resuming after a drop without a re-read, a re-read on 410 Gone, a watch
refused, the token file re-read on each connect, and credentials we cannot use refused
with a clear reason.  ``tests/support/k8s_server.py`` speaks the real protocol.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fma_otel.instrument import _kubeapi
from fma_otel.instrument import podinfo as podinfo_mod
from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from tests.instrument.conftest import FAKE_DIR, wait_until
from tests.support import k8s_server
from tests.support.k8s_server import FakeCluster, make_pod, write_kubeconfig
from tests.support.otlp_receiver import free_port

ROOT = Path(__file__).resolve().parents[2]
NS, NAME = "fma-test", "launcher-k"
ENV = {"POD_NAME": NAME, "NAMESPACE": NS, podinfo_mod.ENV_REFRESH: "0.2"}


def _bound(instance_id: str) -> dict[str, str]:
    return {REQUESTER_ANNOTATION: f"uid-{instance_id} req", INSTANCE_ID_ANNOTATION: instance_id}


@pytest.fixture
def auth_headers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(path?query, Authorization) of every request the local API server receives."""
    seen: list[tuple[str, str]] = []
    route = k8s_server._Handler._route

    def recording(self: Any, method: str) -> None:
        seen.append((self.path, self.headers.get("Authorization", "")))
        route(self, method)

    monkeypatch.setattr(k8s_server._Handler, "_route", recording)
    return seen


@pytest.fixture
def k8s(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCluster]:
    """The local API server with the launcher Pod (bound to ``inst-1``), and the lookup's
    client pointed at it through a kubeconfig whose user reads a token file."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(podinfo_mod, "_API", None)
    (tmp_path / "token").write_text("token-1\n")
    with FakeCluster() as cluster:
        cluster.add_pod(make_pod(NAME, NS, annotations=_bound("inst-1")))
        monkeypatch.setenv(
            "KUBECONFIG", write_kubeconfig(tmp_path / "kc", cluster.url, {"tokenFile": "token"})
        )
        yield cluster


@pytest.fixture
def pod_info() -> Iterator[PodInfo]:
    pi = PodInfo(env=dict(ENV), timeout=2.0)
    yield pi
    pi.stop()
    podinfo_mod._API = None


def _gets(k8s: FakeCluster) -> int:
    """The reads of the Pod (field-selected lists)."""
    return len([r for r in k8s.requests_to(f"/namespaces/{NS}/pods") if r.query.get("watch") != "true"])


def _watches(k8s: FakeCluster, **query: str) -> list[Any]:
    return k8s.requests_to(f"/namespaces/{NS}/pods", watch="true", **query)


def _knows(pi: PodInfo, instance_id: str) -> bool:
    return pi.cached(instance_id) is not None


def test_the_annotation_is_read_at_start_then_watched_from_that_version(
    k8s: FakeCluster, pod_info: PodInfo, auth_headers: list[tuple[str, str]]
) -> None:
    rv = str(k8s.rv)
    pod_info.start_background()
    assert wait_until(lambda: _knows(pod_info, "inst-1"), 10)
    got = pod_info.cached("inst-1")
    assert got is not None and got.requester_uid == "uid-inst-1" and got.requester_name == "req"
    assert k8s.wait_for_streams("watch")
    (watch,) = _watches(k8s)
    assert watch.query["fieldSelector"] == f"metadata.name={NAME}"
    assert watch.query["resourceVersion"] == rv
    assert {auth for _, auth in auth_headers} == {"Bearer token-1"}


def test_an_annotation_added_later_arrives_by_the_watch(k8s: FakeCluster, pod_info: PodInfo) -> None:
    pod_info.start_background()
    assert wait_until(lambda: _knows(pod_info, "inst-1"), 10) and k8s.wait_for_streams("watch")
    k8s.modify_pod(NAME, NS, patch={"metadata": {"annotations": _bound("inst-2")}})
    assert wait_until(lambda: _knows(pod_info, "inst-2"), 10)
    assert _gets(k8s) == 1  # learned from the stream, not a re-read
    assert pod_info._rv == k8s.get_pod(NAME, NS)["metadata"]["resourceVersion"]


@pytest.mark.slow
@pytest.mark.parametrize("gone_mode", ["event", "http"])
def test_410_gone_re_reads_the_pod_and_watches_from_the_new_version(
    gone_mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pod_info: PodInfo
) -> None:
    monkeypatch.setattr(podinfo_mod, "_API", None)
    with FakeCluster(gone_mode=gone_mode) as k8s:
        k8s.add_pod(make_pod(NAME, NS, annotations=_bound("inst-1")))
        monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", k8s.url, {"token": "t"}))
        pod_info.start_background()
        assert wait_until(lambda: _knows(pod_info, "inst-1"), 10) and k8s.wait_for_streams("watch")
        if gone_mode == "event":
            k8s.expire_watches()  # ERROR 410 on the open stream
        else:
            k8s.compact()
            k8s.drop_connections("watch")  # the resumed watch gets HTTP 410
        assert wait_until(lambda: _gets(k8s) == 2, 10)
        assert wait_until(lambda: k8s.open_streams("watch") == 1, 10)
        new_rv = str(k8s.rv)  # the list's version, past the compaction
        assert _watches(k8s, resourceVersion=new_rv)
        k8s.modify_pod(NAME, NS, patch={"metadata": {"annotations": _bound("inst-3")}})
        assert wait_until(lambda: _knows(pod_info, "inst-3"), 10)


@pytest.mark.slow
def test_a_dropped_watch_resumes_from_the_last_version_with_the_token_read_again(
    k8s: FakeCluster, pod_info: PodInfo, tmp_path: Path, auth_headers: list[tuple[str, str]]
) -> None:
    pod_info.start_background()
    assert wait_until(lambda: _knows(pod_info, "inst-1"), 10) and k8s.wait_for_streams("watch")
    k8s.modify_pod(NAME, NS, patch={"metadata": {"labels": {"x": "1"}}})
    last_rv = k8s.get_pod(NAME, NS)["metadata"]["resourceVersion"]
    assert wait_until(lambda: pod_info._rv == last_rv, 10)
    (tmp_path / "token").write_text("token-2\n")  # the kubelet rotated the bound token
    assert k8s.drop_connections("watch") == 1
    assert wait_until(lambda: _watches(k8s, resourceVersion=last_rv), 10)
    assert _gets(k8s) == 1  # resumed, not re-read
    assert auth_headers[-1][1] == "Bearer token-2"
    assert auth_headers[0][1] == "Bearer token-1"


def test_a_refused_watch_falls_back_to_re_reading(
    k8s: FakeCluster, pod_info: PodInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``watch`` permission (here a 403 on every watch): the Pod is re-read every
    ``refresh`` seconds instead, so a later annotation is still learned."""

    def forbidden(self: Any, ns: str | None, query: dict[str, str]) -> int:
        self._status(403, 'pods is forbidden: cannot watch resource "pods"')
        return 403

    monkeypatch.setattr(k8s_server._Handler, "_watch", forbidden)
    pod_info.start_background()
    assert wait_until(lambda: _knows(pod_info, "inst-1"), 10)
    k8s.modify_pod(NAME, NS, patch={"metadata": {"annotations": _bound("inst-4")}})
    assert wait_until(lambda: _knows(pod_info, "inst-4"), 10)
    assert _gets(k8s) >= 2
    assert not k8s.open_streams("watch")


def test_get_pod_errors_carry_the_status_and_message(k8s: FakeCluster) -> None:
    api = podinfo_mod._api()
    with pytest.raises(_kubeapi.ApiError) as err:
        api.read_pod(NS, "no-such-pod", 2.0)
    assert err.value.status == 404 and "no-such-pod" in str(err.value)
    k8s.inject_error("GET", rf"^/api/v1/namespaces/{NS}/pods$", code=403)
    with pytest.raises(_kubeapi.ApiError) as err:
        api.read_pod(NS, NAME, 2.0)
    assert err.value.status == 403 and "injected error 403" in str(err.value)
    res = PodInfo(env={"POD_NAME": "no-such-pod", "NAMESPACE": NS}, timeout=2.0).lookup()
    assert res.failed and "pod lookup failed: ApiError: HTTP 404" in res.reason


def test_an_unsupported_kubeconfig_user_is_refused_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kc = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", {"exec": {"command": "aws"}})
    monkeypatch.setenv("KUBECONFIG", kc)
    monkeypatch.setattr(podinfo_mod, "_API", None)
    res = PodInfo(env={"POD_NAME": NAME, "NAMESPACE": NS}).lookup()
    podinfo_mod._API = None
    assert res.failed
    assert "KubeConfigError" in res.reason and "'exec' is not supported" in res.reason


def test_no_credentials_at_all_says_so(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(tmp_path / "absent")}
    if os.path.exists(os.path.expanduser("~/.kube/config")):
        pytest.skip("this machine has a ~/.kube/config")
    with pytest.raises(_kubeapi.KubeConfigError, match="no in-cluster credentials"):
        _kubeapi.load(env)


def test_in_cluster_credentials_use_the_service_account_files(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token\n")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    creds = _kubeapi.in_cluster(env, sa_dir=str(tmp_path))
    assert creds is not None
    assert creds.server == "https://[fd00::1]:443"
    assert creds.ca_file == str(tmp_path / "ca.crt")
    assert creds.headers()["Authorization"] == "Bearer sa-token"
    (tmp_path / "token").write_text("sa-token-rotated\n")
    assert creds.headers()["Authorization"] == "Bearer sa-token-rotated"
    assert _kubeapi.in_cluster({}, sa_dir=str(tmp_path)) is None
    with pytest.raises(_kubeapi.KubeConfigError, match="no .*token"):
        _kubeapi.in_cluster(env, sa_dir=str(tmp_path / "nowhere"))


LAUNCHER_SHAPED = """
import sys, time
sys.path.insert(0, {fake!r})
import fma_otel.auto  # what launcher.py's first line does
import launcher
from fastapi.testclient import TestClient
from fma_otel.instrument.launcher import LauncherInstrumentor
with TestClient(launcher.app) as client:
    assert client.get("/health").status_code == 200
    pi = LauncherInstrumentor().podinfo
    deadline = time.monotonic() + 20
    while pi.cached("inst-1") is None and time.monotonic() < deadline:
        time.sleep(0.02)
    print(pi.cached("inst-1") is not None, "kubernetes" in sys.modules, "yaml" in sys.modules)
"""


@pytest.mark.slow
def test_a_launcher_with_the_lookup_configured_never_imports_the_kubernetes_client(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",  # OTLP/HTTP, collector down
        OTEL_EXPORTER_OTLP_TIMEOUT="1",  # its exit gives up on the absent collector soon
        POD_NAME=NAME,
        NAMESPACE=NS,
        KUBECONFIG=str(tmp_path / "kc"),
    )
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER_SHAPED.format(fake=str(FAKE_DIR))],
        env=env,
        cwd=str(FAKE_DIR),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    # the Pod was read (through a kubeconfig, so PyYAML is loaded), the client never imported
    assert out.stdout.split()[-3:] == ["True", "False", "True"], out.stdout + out.stderr
    assert _gets(k8s)


@pytest.mark.slow
def test_a_json_kubeconfig_is_read_without_pyyaml(k8s: FakeCluster, tmp_path: Path) -> None:
    """A kubeconfig written as JSON is read with ``json``: PyYAML (more than a megabyte of the
    launcher, which every fork copies) is never imported."""
    import json

    import yaml

    kc = tmp_path / "kc"
    kc.write_text(json.dumps(yaml.safe_load(kc.read_text())))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env.update(
        PYTHONPATH=str(ROOT),
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
        POD_NAME=NAME,
        NAMESPACE=NS,
        KUBECONFIG=str(kc),
    )
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER_SHAPED.format(fake=str(FAKE_DIR))],
        env=env,
        cwd=str(FAKE_DIR),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["True", "False", "False"], out.stdout + out.stderr


def test_a_broken_json_kubeconfig_says_why(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text('{"clusters": [')
    with pytest.raises(_kubeapi.KubeConfigError, match="cannot read kubeconfig"):
        _kubeapi.from_kubeconfig(str(kc))
    kc.write_text("[1, 2]")
    with pytest.raises(_kubeapi.KubeConfigError, match="not a mapping"):
        _kubeapi.from_kubeconfig(str(kc))


def _tls_files(d: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate for 127.0.0.1 signed by it: (ca.crt, server.crt, server.key)."""
    pytest.importorskip("cryptography")
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = d / "ca.crt", d / "server.crt", d / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


def test_in_cluster_over_tls_verifies_the_server_with_the_service_account_ca(
    tmp_path: Path, auth_headers: list[tuple[str, str]]
) -> None:
    import ssl

    sa, other = tmp_path / "sa", tmp_path / "other"
    sa.mkdir(), other.mkdir()
    ca, cert, key = _tls_files(sa)
    (sa / "token").write_text("sa-token\n")
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(cert), str(key))
    with FakeCluster() as k8s:
        k8s.add_pod(make_pod(NAME, NS, annotations=_bound("inst-1")))
        srv = k8s._server
        assert srv is not None
        srv.socket = server_ctx.wrap_socket(srv.socket, server_side=True)
        env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(srv.server_address[1])}
        creds = _kubeapi.in_cluster(env, sa_dir=str(sa))
        assert creds is not None and creds.server.startswith("https://127.0.0.1:")
        pod, _rv = _kubeapi.PodClient(creds).read_pod(NS, NAME, 5.0)
        assert pod["metadata"]["annotations"][INSTANCE_ID_ANNOTATION] == "inst-1"
        assert auth_headers[-1][1] == "Bearer sa-token"
        # a CA that did not sign the server's certificate: refused, never sent the token
        _tls_files(other)
        (other / "token").write_text("other-token\n")
        untrusted = _kubeapi.in_cluster(env, sa_dir=str(other))
        assert untrusted is not None
        with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
            _kubeapi.PodClient(untrusted).read_pod(NS, NAME, 5.0)
        assert all(auth != "Bearer other-token" for _, auth in auth_headers)
