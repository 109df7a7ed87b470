"""The Pod lookup's background thread backs off when the API server fails, whatever creates
do meanwhile: it shares the launcher's GIL, so a thread that retried in a tight loop would
slow every create.  The API server is replaced by counting ``fetch``/``watch`` callables
(the wire protocol is ``test_kubeapi.py``'s)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fma_otel.instrument.podinfo import INSTANCE_ID_ANNOTATION, REQUESTER_ANNOTATION, PodInfo
from tests.instrument.conftest import wait_until

ENV = {"POD_NAME": "launcher-b", "NAMESPACE": "fma-test", "FMA_OTEL_POD_REFRESH": "5"}
BOUND = {
    "annotations": {REQUESTER_ANNOTATION: "uid-1 req", INSTANCE_ID_ANNOTATION: "inst-1"},
    "resource_version": "7",
}


class Counting:
    """``fetch`` and ``watch`` of a server that answers reads as told and fails every watch
    at once (``watch_error``) or ends it at once without an event (``watch_error=None``)."""

    def __init__(self, watch_error: Exception | None, fetch_error: Exception | None = None) -> None:
        self.reads = 0
        self.watches = 0
        self.watch_error = watch_error
        self.fetch_error = fetch_error

    def fetch(self, namespace: str, name: str, timeout: float) -> dict[str, Any]:
        self.reads += 1
        if self.fetch_error is not None:
            raise self.fetch_error
        return BOUND

    def watch(
        self, namespace: str, name: str, timeout: float, on_pod: Callable[..., None], rv: Any = None
    ) -> None:
        self.watches += 1
        if self.watch_error is not None:
            raise self.watch_error


@pytest.fixture
def running() -> Iterator[Callable[[Counting], PodInfo]]:
    started: list[PodInfo] = []

    def start(server: Counting) -> PodInfo:
        pi = PodInfo(server.fetch, watch=server.watch, env=ENV)
        pi.start_background()
        started.append(pi)
        return pi

    yield start
    for pi in started:
        pi.stop()
        if pi._thread is not None:
            pi._thread.join(5)


def _kick_for(pi: PodInfo, seconds: float) -> None:
    """Creates that miss the cache, as fast as a busy launcher sends them."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pi.kick()
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.parametrize(
    "error",
    [ConnectionRefusedError("down"), None],
    ids=["watch-drops-at-once", "watch-ends-at-once"],
)
def test_a_failing_watch_backs_off_after_a_kick(running: Any, error: Exception | None) -> None:
    """One create's kick must not turn the reconnect backoff off for good (the kick used to
    stay set, so every later wait returned at once: a tight reconnect loop)."""
    server = Counting(error)
    pi = running(server)
    assert wait_until(lambda: server.watches >= 1, 2)
    pi.kick()  # one create missed the cache
    time.sleep(1.2)
    # Backoff 0.5 s then 1 s: a few attempts, never hundreds.
    assert server.watches + server.reads <= 8, (server.watches, server.reads)


@pytest.mark.slow
def test_kicks_do_not_shorten_the_backoff_after_failed_reads(running: Any) -> None:
    """API server down: creates kicking all the time do not make the thread retry sooner."""
    server = Counting(ConnectionRefusedError("down"), fetch_error=ConnectionRefusedError("down"))
    pi = running(server)
    assert wait_until(lambda: server.reads >= 1, 2)
    t = threading.Thread(target=_kick_for, args=(pi, 1.0))
    t.start()
    t.join()
    # Reads at 0, 0.5 and 1.5 s (backoff 0.5, 1, 2...): not one per kick (100 kicks).
    assert server.reads <= 4, server.reads
