"""The span model's fixed rules: derived ids, the tree table, redaction."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from fma_otel import model as M
from fma_otel.span_records import SpanRecord


def test_trace_id_is_first_16_bytes_of_sha256() -> None:
    key = "811f8932-b608-416c-8a90-589b39ed9bde"
    expected = hashlib.sha256(("fma-actuation/" + key).encode()).digest()[:16].hex()
    assert M.trace_id_for(key) == expected
    assert len(expected) == 32 and expected == expected.lower()


def test_span_id_rule_and_n() -> None:
    tid = M.trace_id_for("u")
    expected = hashlib.sha256(f"{tid}/fma.actuation/0".encode()).digest()[:8].hex()
    assert M.span_id_for(tid, "fma.actuation") == expected
    assert M.span_id_for(tid, "fma.actuation", 1) != expected


def test_actuation_keys() -> None:
    assert M.actuation_key("u", 1) == "u"
    assert M.actuation_key("u", 2) == "u/2"
    assert [M.key_uid(M.actuation_key("u", n)) for n in (1, 2, 12)] == ["u", "u", "u"]
    assert M.trace_id_for("u/2") != M.trace_id_for("u")


def test_all_zero_digest_takes_next_chunk() -> None:
    assert M._first_nonzero(bytes(16) + bytes.fromhex("01" * 16), 16) == "01" * 16


def test_table_parents_exist_for_every_path() -> None:
    for d in M.SPANS:
        for path in d.paths:
            parent = d.parent_name(path)
            if d.name == M.ROOT:
                assert parent is None
                continue
            assert parent in M.SPANS_BY_NAME, (d.name, path)
            assert path in M.SPANS_BY_NAME[parent].paths, (d.name, path, parent)
            assert d.start_instant(path) in M.INSTANTS
            assert d.end_instant(path) in M.INSTANTS


def test_metric_spans() -> None:
    assert M.metric_span("T_actuation").name == "fma.actuation"
    assert M.metric_span("T_wake").kind == M.CLIENT
    assert set(M.METRICS) == {
        "T_actuation",
        "T_cold_launcher",
        "T_launcher_schedule",
        "T_launcher_startup",
        "T_dpc_react",
        "T_instance_ready",
        "T_instance_create",
        "T_wake",
    }
    with pytest.raises(KeyError):
        M.metric_span("T_nope")


def test_relay_start_depends_on_path() -> None:
    relay = M.SPANS_BY_NAME["fma.readiness.relay"]
    assert relay.start_instant(M.HOT) == "D.wake.end"
    assert relay.start_instant(M.WARM) == "D.serving"
    assert relay.parent_name(M.HOT) == "fma.actuation"
    assert relay.parent_name(M.COLD_LAUNCHER) == "fma.instance.ready"


def test_span_id_when_the_first_eight_bytes_are_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast check of the first 8 bytes still falls back to the next 8 (2**-64 odds)."""

    class _Digest:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def digest(self) -> bytes:
            return bytes(8) + bytes.fromhex("0102030405060708") + bytes(16)

    monkeypatch.setattr(M.hashlib, "sha256", _Digest)
    assert M.span_id_for("t", "fma.actuation") == "0102030405060708"


@pytest.mark.parametrize("name", ["fma.request", "fma.vllm.wake", "x/y", "\u2603"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_span_id_matches_the_documented_rule(name: str, n: int) -> None:
    for key in ("u", "u/2", "811f8932-b608-416c-8a90-589b39ed9bde"):
        tid = M.trace_id_for(key)
        expected = hashlib.sha256(f"{tid}/{name}/{n}".encode()).digest()[:8].hex()
        assert M.span_id_for(tid, name, n) == expected


def test_span_record_is_a_frozen_record_built_by_its_constructor() -> None:
    """Every record comes from ``SpanRecord``'s own constructor; it is immutable, compares
    by value, pickles, and is edited only as a copy."""
    import pickle

    args = (
        "t" * 32,
        "s" * 16,
        None,
        "fma.request",
        M.INTERNAL,
        1,
        2,
        M.SERVICE_DPC,
        {"a": 1},
        M.STATUS_ERROR,
        "m",
        M.resource_attributes(M.SERVICE_DPC),
    )
    rec = SpanRecord(*args)
    assert msgspec.structs.astuple(rec) == (*args, ())  # no span events
    assert msgspec.structs.replace(rec, name="x").name == "x"
    assert rec.name == "fma.request"
    assert pickle.loads(pickle.dumps(rec)) == rec
    assert rec.duration_s == 1e-9
    with pytest.raises(AttributeError):
        rec.name = "x"  # type: ignore[misc]
    # a default mapping is the record's own, never shared with another record
    a, b = (SpanRecord(*args[:8]) for _ in range(2))
    assert a.attributes == {} and a.attributes is not b.attributes


def test_instant_short_form_fills_its_interval_and_clock() -> None:
    import pickle

    i = M.Instant(1_000, M.S, "k8s:creationTimestamp", M.SERVICE_K8S)
    assert (i.lo, i.hi, i.clock) == (1_000, 1_000 + M.S - 1, "k8s-apiserver")
    assert (i.inconsistent, i.disagreed) == (False, ())
    assert M.Instant(5, 0, "x", "some-service").hi == 5  # a zero precision is one nanosecond wide
    assert M.Instant(5, 1, "x", "some-service").clock == "some-service"  # no clock known: its own
    full = M.Instant(
        7, 3, "a + b", M.SERVICE_DPC, lo=0, hi=9, clock="kubelet", inconsistent=True, disagreed=("b",)
    )
    assert (full.lo, full.hi, full.clock, full.inconsistent, full.disagreed) == (
        0,
        9,
        "kubelet",
        True,
        ("b",),
    )
    assert pickle.loads(pickle.dumps(full)) == full
    with pytest.raises(AttributeError):
        full.t_ns = 1  # type: ignore[misc]
