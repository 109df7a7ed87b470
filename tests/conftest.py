"""Shared pytest fixtures (generic ones only; each test module keeps its own specifics).

The OTLP receivers run in-process on ephemeral ports so export tests need no collector.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator

import pytest

from tests.support.otlp_receiver import GrpcOtlpReceiver, HttpOtlpReceiver


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[object]:
    """Keep pytest's assertion-rewritten test modules in ``__pycache__`` while collecting,
    even when the shell sets ``PYTHONDONTWRITEBYTECODE``.

    Why: pytest then rewrites every test module from source at every run, in every xdist
    worker, and that was most of the collection's CPU.  Only this process is affected,
    only during collection (subprocesses keep the shell's setting); the files are the
    ordinary, gitignored caches, and pytest checks them against the source's mtime.
    """
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


#: The longest module (a real browser, and the shared sample report its first test draws):
#: started first under xdist, so that no worker is left running it alone at the end.
_FIRST = ("tests/report/test_browser.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the longest module first, then the slow tests, then the fast tier.

    Why: xdist hands tests out in collection order, and a worker that draws a long test
    near the end runs it while the other one idles.  Long tests first and the many short
    ones last (``--maxschedchunk`` keeping each worker's queue short) let the short
    ones fill in at the end.  The sort is stable: each group keeps its collection order,
    identical on every worker as xdist requires.  Runs without xdist keep pytest's order.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item: pytest.Item) -> int:
        if item.nodeid.startswith(_FIRST):
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2

    items.sort(key=rank)


@pytest.fixture(autouse=True)
def _restore_signal_handlers() -> Iterator[None]:
    """Put back SIGTERM/SIGINT handlers a test installed in this process.

    ``fma-otel watch`` run in-process (``CliRunner``) installs its own; left behind, a
    child forked by a later test inherits a SIGTERM handler that does not exit, and
    whatever stops that child waits out its kill timeout (seconds per test) first.
    """
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:  # None: not set from Python
            signal.signal(sig, handler)


@pytest.fixture
def otlp_grpc_receiver() -> Iterator[GrpcOtlpReceiver]:
    """A running OTLP/gRPC receiver; ``.endpoint`` is ``http://127.0.0.1:<port>``."""
    with GrpcOtlpReceiver() as rx:
        yield rx


@pytest.fixture
def otlp_http_receiver() -> Iterator[HttpOtlpReceiver]:
    """A running OTLP/HTTP receiver; ``.endpoint`` is the base URL, ``.traces_url`` the full."""
    with HttpOtlpReceiver() as rx:
        yield rx


@pytest.fixture
def clean_otlp_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No ``OTEL_*`` variable from the developer's shell leaks into a test."""
    import os

    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    return monkeypatch


@pytest.fixture
def short_otlp_timeout(clean_otlp_env: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """``OtlpSink`` with a 0.5 s budget per batch instead of the CLI's 10 s.

    For tests of an export that fails (collector down, refusing, slow): the budget only
    bounds how long the failure takes to come; the message and exit code are the same.
    """
    import functools

    from fma_otel.sinks import otlp_export

    clean_otlp_env.setattr(otlp_export, "OtlpSink", functools.partial(otlp_export.OtlpSink, timeout_s=0.5))
    return clean_otlp_env
