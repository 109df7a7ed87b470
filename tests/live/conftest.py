"""Fixtures for the live-bridge tests: a fresh fake API server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.k8s_server import FakeCluster


@pytest.fixture
def k8s() -> Iterator[FakeCluster]:
    with FakeCluster(max_watch_seconds=30) as cluster:
        yield cluster


@pytest.fixture
def core_api(k8s: FakeCluster):  # noqa: ANN201 - kubernetes types are untyped
    from kubernetes import client

    return client.CoreV1Api(client.ApiClient(k8s.configuration()))


@pytest.fixture
def kubeconfig(k8s, tmp_path) -> str:  # noqa: ANN001
    """A kubeconfig file for the test API server, namespace ``NS``."""
    from tests.live.replay import NS

    return k8s.write_kubeconfig(str(tmp_path / "kubeconfig"), NS)
