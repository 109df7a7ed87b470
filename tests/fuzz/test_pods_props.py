"""Property tests of the Pod JSON / watch-stream reader, and of Pod order independence.

Why order independence is tested through the whole bridge: ``kubectl get -w`` output is
often merged from several watches, re-listed after a resync, or concatenated by hand, so
the same Pod states arrive in another order and more than once.  The traces must not
change: they are compared as :func:`tests.support.dump.dump_traces` text, so a failure
shows which span moved.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fma_otel.bridge import BridgeInputs, inputs_from_capture, run_bridge
from fma_otel.sources.pods import PodStore, iter_pod_events
from fma_otel.sources.records import SourceStats
from tests.support.dump import dump_traces

from ._mutate import SAMPLE

POD_TEXT = Path(SAMPLE, "pods.json").read_bytes()
FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: reading the whole sample stream 7 bytes at a time is slow; fewer examples keep the dir < 40 s
SLOW = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _read(data: bytes, chunk: int) -> tuple[SourceStats, list[tuple[str, str]]]:
    st_ = SourceStats("t")
    store = PodStore()
    got = []
    for ev in iter_pod_events(io.BytesIO(data), st_, chunk_size=chunk):
        store.add(ev)
        got.append((ev.event_type, json.dumps(ev.pod, sort_keys=True)))
    assert st_.read == st_.understood + st_.skipped, (st_.read, st_.understood, st_.skipped)
    return st_, got


@FAST
@given(st.binary(max_size=400), st.sampled_from([1, 7, 64, 1 << 16]))
def test_arbitrary_bytes_are_counted(data: bytes, chunk: int) -> None:
    _read(data, chunk)


@pytest.mark.slow
@SLOW
@given(
    st.integers(0, len(POD_TEXT)),
    st.integers(0, 40),
    st.binary(max_size=12)
    | st.sampled_from([b"{", b"}", b'"', b"\n{", b",", b"]", b"\xff"])
    | st.sampled_from([b"9" * 4400, b"[" * 3000]),  # too long for int(), too deep for json
)
def test_mutated_real_stream_is_counted_and_chunk_size_free(at: int, cut: int, junk: bytes) -> None:
    """A real watch stream with a splice of junk: counted, and the same whatever the read size."""
    data = POD_TEXT[:at] + junk + POD_TEXT[at + cut :]
    big = _read(data, 1 << 16)
    small = _read(data, 7)
    assert small[1] == big[1]
    assert (small[0].read, small[0].skipped) == (big[0].read, big[0].skipped)


@FAST
@given(st.integers(0, len(POD_TEXT)))
def test_truncated_stream_is_counted(at: int) -> None:
    _read(POD_TEXT[:at], 64)


# --------------------------------------------------------------------------- order


def _events() -> list[dict]:
    with open(Path(SAMPLE, "pods.json"), "rb") as fh:
        return [{"type": ev.event_type, "object": ev.pod} for ev in iter_pod_events(fh, SourceStats("s"))]


EVENTS = _events()


@lru_cache(maxsize=1)
def _baseline() -> str:
    cap = inputs_from_capture(SAMPLE)  # Pods, DPC and launcher logs: the Pods' order is the point
    res = run_bridge(BridgeInputs(cap.pods, cap.dpc_log, dict(cap.launcher_logs)))
    return dump_traces(s for t in res.traces for s in t)


def _bridge_with(pods_path: Path) -> str:
    cap = inputs_from_capture(SAMPLE)
    res = run_bridge(BridgeInputs([str(pods_path)], cap.dpc_log, dict(cap.launcher_logs)))
    return dump_traces(s for t in res.traces for s in t)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(range(len(EVENTS))), st.lists(st.integers(0, len(EVENTS) - 1), max_size=15))
def test_pod_order_and_duplicates_do_not_change_traces(
    tmp_path_factory, order: list[int], dups: list[int]
) -> None:
    idx = list(order)
    for d in dups:  # a duplicate lands right after a random earlier position
        idx.insert(min(len(idx), (d * 7919) % (len(idx) + 1)), d)
    p = tmp_path_factory.mktemp("pods") / "pods.json"
    p.write_text("".join(json.dumps(EVENTS[i]) + "\n" for i in idx), encoding="utf-8")
    assert _bridge_with(p) == _baseline()


@pytest.mark.parametrize("form", ["pretty", "array", "crlf"])
def test_other_forms_of_the_same_events_give_the_same_traces(tmp_path: Path, form: str) -> None:
    """The same watch events pretty-printed (``kubectl get -w -o json``), as one JSON array,
    or with CRLF line ends: the form of the file must not leak into the traces."""
    if form == "pretty":
        text = "".join(json.dumps(e, indent=4) + "\n" for e in reversed(EVENTS))
    elif form == "array":
        text = json.dumps(EVENTS[::-1])
    else:
        text = "".join(json.dumps(e) + "\r\n" for e in EVENTS)
    p = tmp_path / "pods.json"
    p.write_text(text, encoding="utf-8", newline="")
    assert _bridge_with(p) == _baseline()
