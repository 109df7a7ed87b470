"""The live bridge behind ``fma-otel watch``: the offline engine, fed from the API server.

Layout (each module says why it is shaped the way it is):

- :mod:`.kube` - client construction and the few raw HTTP calls we make.  Pods are read as
  raw JSON, never through the typed models, so one Pod the models reject cannot stop us.
- :mod:`.pods` - list + watch of the namespace's Pods with resourceVersion tracking,
  ``410 Gone`` -> relist, reconnect with backoff.
- :mod:`.logs` - container log followers (``follow``, ``timestamps``) that survive dropped
  connections and container restarts (``previous``) without repeating or losing a line.
- :mod:`.checkpoint` - what was emitted and where each stream stands, written atomically.
- :mod:`.outfile` - the ``--out`` file, append-only and duplicate-free across crashes.
- :mod:`.metrics` - ``/healthz`` and ``/metrics`` (Prometheus text format).
- :mod:`.watcher` - the single-threaded main loop that owns the correlator.
"""
