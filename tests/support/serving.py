"""Serve a ``socketserver`` server from a daemon thread, quick to stop.

Why: ``serve_forever`` checks for ``shutdown()`` only between ``select`` calls of
``poll_interval`` seconds (0.5 by default), so every stop of a test server waited up to
half a second; tests start hundreds of them.  A short interval costs a few idle wake-ups.
"""

from __future__ import annotations

import sys
import threading
from http.server import ThreadingHTTPServer
from socketserver import BaseServer

#: how long ``shutdown()`` may wait for the serving loop to notice
POLL_INTERVAL_S = 0.02


def serve_in_thread(server: BaseServer, name: str | None = None) -> threading.Thread:
    """Start ``server.serve_forever`` in a daemon thread; ``server.shutdown()`` stops it."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": POLL_INTERVAL_S}, name=name, daemon=True
    )
    thread.start()
    return thread


class QuietThreadingHTTPServer(ThreadingHTTPServer):
    """A ``ThreadingHTTPServer`` whose handler errors are kept in ``errors``, not printed.

    Why: a handler thread outlives ``shutdown()`` (a watch stream still open, a client that
    hangs up later), and ``socketserver`` prints its traceback to whatever ``sys.stderr``
    is then, which may be another test's ``CliRunner`` capture, failing that test's
    one-line error assertion.  Tests assert on what the server recorded, never on this.
    """

    daemon_threads = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.errors: list[BaseException | None] = []

    def handle_error(self, request: object, client_address: object) -> None:
        self.errors.append(sys.exc_info()[1])
