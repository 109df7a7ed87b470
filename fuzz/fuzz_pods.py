"""Coverage-guided fuzzing of the Pod JSON / watch-stream reader (``fma_otel.sources.pods``).

    python fuzz/fuzz_pods.py /tmp/fma-fuzz/pods-corpus -max_total_time=300

Why a tiny read size: the reader decodes one value at a time from a sliding window, and
most of its edge cases live at chunk boundaries; reading 7 bytes at a time crosses them
all.  Every Pod-level object or garbage stretch read must be understood or skipped, and
whatever is yielded must go through the correlator without raising.
"""

from __future__ import annotations

import io
import sys

import _common  # noqa: F401  (puts the repo on sys.path)
import atheris

with atheris.instrument_imports():
    from fma_otel.correlate import Correlator
    from fma_otel.sources.pods import PodStore, iter_pod_events
    from fma_otel.sources.records import SourceStats


def test_one_input(data: bytes) -> None:
    for chunk in (7, 1 << 16):
        st = SourceStats("fuzz")
        store = PodStore()
        c = Correlator(clock_ns=lambda: 0)
        for ev in iter_pod_events(io.BytesIO(data), st, chunk_size=chunk):
            store.add(ev)
            c.add_pod(ev)
        _common.check_accounting(st, f"iter_pod_events chunk={chunk}")
        c.actuations()


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
