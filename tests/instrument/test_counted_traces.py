"""The launcher keeps span counts (the ``n`` of the span-id rule) for few traces.

Why: with the Pod annotation every actuation is a trace of its own, so the counts of the
create, start-up and vLLM phase spans grew by about 0.7 KiB a create up to 4096 traces
(2.8 MiB after a few thousand actuations), all of it copied page table by page table at
every ``fork()`` of a vLLM instance.
"""

from __future__ import annotations

from fma_otel.instrument import _common as c
from fma_otel.instrument import vllm_phases


def _trace(i: int) -> str:
    return f"{i:032x}"


def test_ordinals_count_per_trace_and_name() -> None:
    oc = c.OrdinalCounter()
    assert [oc.next(_trace(1), "a") for _ in range(3)] == [0, 1, 2]
    assert oc.next(_trace(1), "b") == 0
    assert oc.next(_trace(2), "a") == 0
    assert oc.next(_trace(1), "a") == 3
    assert len(oc) == 2


def test_ordinals_keep_the_traces_used_last_up_to_the_bound() -> None:
    oc = c.OrdinalCounter()
    oc.next(_trace(0), "a")
    for i in range(1, 1000):
        oc.next(_trace(i), "a")
        oc.next(_trace(0), "a")  # in use all along: never dropped
    assert len(oc) == c.MAX_COUNTED_TRACES <= 256
    assert oc.next(_trace(0), "a") == 1000
    assert oc.next(_trace(1), "a") == 0  # dropped long ago: counted afresh


def test_phase_counts_keep_the_traces_used_last_up_to_the_bound() -> None:
    counts = c.OrdinalCounter()
    for i in range(1000):
        counts.add(_trace(i), ["vllm.model_load", "vllm.model_load", "vllm.api_server"])
    assert len(counts) == c.MAX_COUNTED_TRACES
    assert counts.get(_trace(999)) == {"vllm.model_load": 2, "vllm.api_server": 1}
    assert counts.get(_trace(0)) == {}
    assert len(vllm_phases._COUNTS) <= c.MAX_COUNTED_TRACES
