"""Serve a ``socketserver`` server from a daemon thread, quick to stop.

Why: ``serve_forever`` checks for ``shutdown()`` only between ``select`` calls of
``poll_interval`` seconds (0.5 by default), so every stop of a test server waited up to
half a second; tests start hundreds of them.  A short interval costs a few idle wake-ups.
"""

from __future__ import annotations

import threading
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
