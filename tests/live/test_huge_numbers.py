"""Numbers and nesting Python refuses to build, in what ``watch`` reads: never a traceback.

The checkpoint (a file an operator may edit), the API server's answers and the command's
own arguments.  CPython 3.11 refuses ``int()`` of more than 4300 digits with a plain
``ValueError``, ``float()`` of a bigger int raises ``OverflowError``, deep JSON nesting
raises ``RecursionError``, and NaN/Infinity pass ``float()``.  A checkpoint holding any of
them is refused at start with one line (exit 2), not loaded to stop the loop later; an odd
watch line is a counted odd line; an odd answer is a :class:`KubeError`.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.live import checkpoint as CP
from fma_otel.live.kube import PODS, Kube, KubeError
from fma_otel.live.logs import restart_count_of
from fma_otel.live.pods import PodWatcher, rv_number, rv_older

BIG = "9" * 5000  # more digits than int() converts
LONG = "9" * 400  # an int Python builds, beyond float range
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than json's decoder recurses

GOOD: dict[str, Any] = {
    "version": 1,
    "namespace": "ns",
    "savedAt": 1780000000.5,
    "pods": {"resourceVersion": "12345"},
    "logs": {"dpc-0/controller": {"uid": "u-1", "restartCount": 2, "ts_ns": 1780000000123456789, "n": 3}},
    "replay_from_ns": 1779999000000000000,
    "pending": ["u-2/1"],
    "pending_traces": {},
    "emitted": {"u-1/1": 1780000000.25},
}


def text_with(key: str, raw: str, inner: str | None = None) -> str:
    """The good checkpoint with ``key`` (or ``key.inner``) written as the raw JSON ``raw``."""
    doc = json.loads(json.dumps(GOOD))
    if inner is None:
        doc[key] = "@@"
    else:
        doc[key] = {inner: "@@"} if key != "logs" else {"dpc-0/controller": {"uid": "u-1", inner: "@@"}}
    return json.dumps(doc).replace('"@@"', raw)


BAD = {
    "savedAt-5000-digits": text_with("savedAt", BIG),
    "savedAt-400-digits": text_with("savedAt", LONG),
    "savedAt-5000-digit-string": text_with("savedAt", f'"{BIG}"'),
    "savedAt-NaN": text_with("savedAt", "NaN"),
    "savedAt-Infinity": text_with("savedAt", "Infinity"),
    "savedAt-a-list": text_with("savedAt", "[1]"),
    "nested-100000-deep": DEEP,
    "nested-deep-inside": text_with("namespace", DEEP),
    "emitted-400-digits": text_with("emitted", LONG, "u-1/1"),
    "emitted-NaN": text_with("emitted", "NaN", "u-1/1"),
    "emitted-a-list-value": text_with("emitted", "[1]", "u-1/1"),
    "emitted-a-string": text_with("emitted", '"abc"'),
    "pending-a-number": text_with("pending", "5"),
    "pending_traces-a-list": text_with("pending_traces", "[1]"),
    "pods-a-list": text_with("pods", "[1]"),
    "resourceVersion-a-list": text_with("pods", "[5]", "resourceVersion"),
    "logs-a-list": text_with("logs", "[1]"),
    "logs-ts_ns-5000-digit-string": text_with("logs", f'"{BIG}"', "ts_ns"),
    "logs-ts_ns-400-digits": text_with("logs", LONG, "ts_ns"),
    "logs-ts_ns-NaN": text_with("logs", "NaN", "ts_ns"),
    "logs-restartCount-x": text_with("logs", '"x"', "restartCount"),
    "replay_from_ns-400-digits": text_with("replay_from_ns", LONG),
    "replay_from_ns-a-string": text_with("replay_from_ns", '"x"'),
    "replay_from_ns-NaN": text_with("replay_from_ns", "NaN"),
    "namespace-a-list": text_with("namespace", "[1]"),
}


@pytest.mark.parametrize("text", list(BAD.values()), ids=list(BAD))
def test_a_malformed_checkpoint_is_refused_by_load(tmp_path: Path, text: str) -> None:
    p = tmp_path / "cp.json"
    p.write_text(text)
    with pytest.raises(ValueError) as exc:
        CP.load(str(p))
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 200


@pytest.mark.parametrize(
    "text",
    [BAD["nested-100000-deep"], BAD["savedAt-400-digits"], BAD["pods-a-list"]],
    ids=["nested-100000-deep", "savedAt-400-digits", "pods-a-list"],
)
def test_the_watch_command_refuses_it_in_one_line(tmp_path: Path, text: str) -> None:
    p = tmp_path / "cp.json"
    p.write_text(text)
    r = CliRunner().invoke(main, ["watch", "-n", "ns", "--checkpoint", str(p)])
    assert r.exit_code == 2, r.output
    assert "--checkpoint" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_good_checkpoint_loads_as_before(tmp_path: Path) -> None:
    p = tmp_path / "cp.json"
    p.write_text(json.dumps(GOOD))
    cp = CP.load(str(p))
    assert cp.to_json() == GOOD
    cp.saved_at = 0.0
    CP.save(str(p), cp)
    again = CP.load(str(p))
    assert again.emitted == cp.emitted and again.logs == cp.logs and again.pod_rv == "12345"


def test_hand_edited_spellings_still_load(tmp_path: Path) -> None:
    """What the loader always tolerated keeps loading: a list of emitted keys, nulls."""
    p = tmp_path / "cp.json"
    p.write_text(json.dumps({"version": 1, "emitted": ["a/1"], "savedAt": None, "pods": None, "logs": None}))
    cp = CP.load(str(p))
    assert cp.emitted == {"a/1": 0.0} and cp.pod_rv is None and cp.logs == {}


def test_what_the_watcher_may_write_loads_back(tmp_path: Path) -> None:
    """A replay point before 1970 (a long --replay-margin) and a position in year 9999 are
    times ``sinceTime`` can carry: refused, they would make the watcher's own checkpoint
    unusable.  Year 10000 is not."""
    p = tmp_path / "cp.json"
    p.write_text(text_with("replay_from_ns", str(-(10**18))))
    assert CP.load(str(p)).replay_from_ns == -(10**18)
    p.write_text(text_with("logs", str(253_402_300_799 * 10**9), "ts_ns"))
    assert CP.load(str(p)).logs["dpc-0/controller"]["ts_ns"] == 253_402_300_799 * 10**9
    p.write_text(text_with("logs", str(253_402_300_800 * 10**9), "ts_ns"))
    with pytest.raises(ValueError, match="ts_ns: out of range"):
        CP.load(str(p))


@pytest.mark.parametrize("raw", ["1e400", LONG, "-1"], ids=["1e400", "400-digits", "negative"])
def test_a_restart_count_that_is_no_int64_is_zero(raw: str) -> None:
    """1e400 (infinity once parsed) raised OverflowError; 400 digits went into the
    checkpoint, which the next start would refuse."""
    pod = json.loads('{"status":{"containerStatuses":[{"name":"c","restartCount":' + raw + "}]}}")
    assert restart_count_of(pod, "c") == 0


# --------------------------------------------------------------------------- resourceVersions


def test_a_resource_version_too_long_for_int_is_no_number() -> None:
    assert rv_number("12345") == 12345
    assert rv_number(BIG) is None and rv_number("²") is None and rv_number("") is None
    assert rv_older("5", "6") and not rv_older("6", "5")
    assert not rv_older(BIG, "5") and not rv_older("5", BIG)  # "not older": a fresh list


class _Kube:
    def __init__(self, rv: str) -> None:
        self.rv = rv

    def list_all(self, resource: object, namespace: str) -> tuple[list, str]:
        return [], self.rv


def test_resuming_from_a_5000_digit_checkpoint_version_lists_afresh() -> None:
    """It raised ValueError in the watch thread on every retry: the watch never synced."""
    got: list[tuple[Any, ...]] = []
    w = PodWatcher(_Kube("7"), "ns", got.append, stop=threading.Event(), resume_rv=BIG)  # type: ignore[arg-type]
    w._list()
    assert got == [("synced", "7")]


# --------------------------------------------------------------------------- the API server's answers


@pytest.mark.parametrize(
    "line",
    [DEEP.encode(), b'{"type":"ADDED","object":' + BIG.encode() + b"}", b"NaN", b"[1]"],
    ids=["deep", "5000-digits", "NaN", "a-list"],
)
def test_an_odd_watch_line_is_counted(line: bytes) -> None:
    w = PodWatcher(None, "ns", lambda item: None, stop=threading.Event())  # type: ignore[arg-type]
    assert w._handle(line) is True
    assert w.stats.odd_lines == 1


@pytest.mark.parametrize(
    "code", ['"x"', "1e400", f'"{BIG}"', "true"], ids=["x", "1e400", "5000-digit-string", "true"]
)
def test_an_error_event_with_an_odd_code_is_a_kube_error(code: str) -> None:
    w = PodWatcher(None, "ns", lambda item: None, stop=threading.Event())  # type: ignore[arg-type]
    with pytest.raises(KubeError) as exc:
        w._handle(('{"type":"ERROR","object":{"code":' + code + ',"message":"m"}}').encode())
    assert exc.value.status == 500


class _Resp:
    def __init__(self, data: bytes, status: int = 200) -> None:
        self.data = data
        self.status = status
        self.reason = "odd"

    def release_conn(self) -> None:
        pass


def _kube(data: bytes, status: int = 200) -> Kube:
    """A Kube whose every request answers ``data`` (its one request path stubbed)."""
    k = Kube.__new__(Kube)
    k._get = lambda *args, **kwargs: _Resp(data, status)  # type: ignore[method-assign]
    return k


@pytest.mark.parametrize(
    "body", [DEEP.encode(), BIG.encode(), b"[1]", b"not json"], ids=["deep", "5000-digits", "a-list", "text"]
)
def test_an_answer_that_is_no_json_object_is_a_kube_error(body: bytes) -> None:
    with pytest.raises(KubeError):
        _kube(body).list_all(PODS, "ns")
    with pytest.raises(KubeError):
        _kube(body).get_pod("ns", "p")


def test_an_error_answer_nested_deep_is_still_a_kube_error() -> None:
    with pytest.raises(KubeError) as exc:
        _kube(DEEP.encode(), status=500).list_all(PODS, "ns")
    assert exc.value.status == 500


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    "args",
    [
        ("--tick", LONG),
        ("--grace", LONG + "s"),
        ("--incomplete-after", BIG),
        ("--replay-margin", "9" * 20 + "h"),
        ("--metrics-port", "70000"),
        ("--metrics-port", LONG),
        ("--watch-timeout", LONG),
    ],
    ids=[
        "tick",
        "grace",
        "incomplete-after",
        "replay-margin",
        "port-70000",
        "port-400-digits",
        "watch-timeout",
    ],
)
def test_an_argument_no_clock_can_hold_is_a_usage_error(tmp_path: Path, args: tuple[str, str]) -> None:
    r = CliRunner().invoke(main, ["watch", "-n", "ns", "--out", str(tmp_path / "o.jsonl"), *args])
    assert r.exit_code == 2, r.output
    assert args[0] in r.output + r.stderr
