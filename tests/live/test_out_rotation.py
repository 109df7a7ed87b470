"""``watch --out`` rotation by size (issue 23: the file grew until the volume was full).

Unit tests of :class:`OutFile` first (boundaries, keep count, whole lines, a line longer
than the limit, reopening), then the watcher across restarts: no trace lost or doubled
whether a restart follows a rotation, a SIGKILL or an OTLP outage.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from fma_otel.live.outfile import OutFile, rotated_paths
from fma_otel.model import trace_id_for
from fma_otel.sinks.otlp_json import export_request_bytes
from fma_otel.span_records import SpanRecord
from tests.live.replay import (
    InProcessWatcher,
    dpc_pod,
    offline_traces,
    play,
    recent_capture,
    timeline,
    wait_for,
)
from tests.live.test_watch_crash import _no_stray_watchers, kill9, lists, start_watch, started  # noqa: F401
from tests.live.test_watch_export import (
    FakeSink,
    checkpoint,
    pending_ids,
    resend_after_forgetting,
)
from tests.live.test_watch_stream import _complete, assert_same
from tests.support.k8s_server import FakeCluster


def _trace(i: int, pad: int = 0) -> list[SpanRecord]:
    tid = trace_id_for(f"uid-{i}/0")
    attrs = {"pad": "x" * pad} if pad else {}
    t0 = 1_782_743_740_000_000_000 + i
    return [
        SpanRecord(tid, "b7ad6b7169203331", None, "fma.request", "INTERNAL", t0, t0 + 1, "kubernetes", attrs)
    ]


def _line(t: list[SpanRecord]) -> bytes:
    return export_request_bytes(t) + b"\n"


def _files(path: Path, keep: int) -> list[Path]:
    """Oldest first, only those that exist."""
    return [Path(p) for p in [*rotated_paths(str(path), keep), str(path)] if os.path.exists(p)]


def _ids(p: Path) -> list[str]:
    out = []
    for raw in p.read_bytes().split(b"\n")[:-1]:
        out.append(json.loads(raw)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"])
    assert p.read_bytes().endswith(b"\n") or not p.read_bytes()  # whole lines only
    return out


def test_rotation_boundaries_keep_whole_lines_in_order(tmp_path: Path) -> None:
    traces = [_trace(i) for i in range(10)]
    size = len(_line(traces[0]))
    assert all(len(_line(t)) == size for t in traces)
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=3 * size, keep=10)  # exactly three lines fit
    out.write(traces[:2])
    out.write(traces[2:3])  # fills the file to the byte: no rotation yet
    assert path.stat().st_size == 3 * size and out.rotations == 0
    out.write(traces[3:8])  # one batch across two rotations
    out.write(traces[8:])
    out.close()
    files = _files(path, 10)
    assert [f.name for f in files] == ["traces.jsonl.3", "traces.jsonl.2", "traces.jsonl.1", "traces.jsonl"]
    assert [len(_ids(f)) for f in files] == [3, 3, 3, 1]
    assert [i for f in files for i in _ids(f)] == [t[0].trace_id for t in traces]
    assert all(f.stat().st_size <= 3 * size for f in files)
    assert out.rotations == 3


def test_keep_drops_the_oldest(tmp_path: Path) -> None:
    traces = [_trace(i) for i in range(20)]
    size = len(_line(traces[0]))
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=2 * size, keep=3)
    for t in traces:
        out.write([t])
    out.close()
    files = _files(path, 3)
    assert [f.name for f in files] == ["traces.jsonl.3", "traces.jsonl.2", "traces.jsonl.1", "traces.jsonl"]
    assert not (tmp_path / "traces.jsonl.4").exists()
    # 4 files of 2 lines: the newest 8 traces, in order; the oldest 12 went with old files
    assert [i for f in files for i in _ids(f)] == [t[0].trace_id for t in traces[-8:]]
    assert sorted(os.listdir(tmp_path)) == sorted(f.name for f in files)


def test_a_line_longer_than_the_limit_goes_alone_into_a_fresh_file(tmp_path: Path) -> None:
    small, big = _trace(1), _trace(2, pad=5000)
    limit = 3 * len(_line(small))
    assert len(_line(big)) > limit
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=limit, keep=5)
    out.write([small, big, _trace(3)])
    out.write([_trace(4)])
    out.close()
    files = _files(path, 5)
    assert [_ids(f) for f in files] == [
        [small[0].trace_id],
        [big[0].trace_id],
        [_trace(3)[0].trace_id, _trace(4)[0].trace_id],
    ]
    assert files[1].read_bytes() == _line(big)  # whole, unsplit


def test_big_line_first_in_an_empty_file_does_not_rotate_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=100, keep=2)
    out.write([_trace(1, pad=500)])
    out.close()
    assert out.rotations == 0 and [f.name for f in _files(path, 2)] == ["traces.jsonl"]


def test_no_limit_never_rotates(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    for limit in (None, 0):
        out = OutFile(str(path), max_bytes=limit, keep=1)
        out.write([_trace(i) for i in range(50)])
        out.close()
    assert [f.name for f in _files(path, 1)] == ["traces.jsonl"]
    with pytest.raises(ValueError, match="keep"):
        OutFile(str(path), keep=0)


def test_reopening_counts_the_rotated_files_and_repairs_only_the_torn_live_one(tmp_path: Path) -> None:
    traces = [_trace(i) for i in range(7)]
    size = len(_line(traces[0]))
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=2 * size, keep=4)
    out.write(traces[:5])
    out.close()
    with open(path, "ab") as fh:  # a kill in mid-write of the next line
        fh.write(_line(traces[5])[:40])
    again = OutFile(str(path), max_bytes=2 * size, keep=4)
    assert again.present == {t[0].trace_id for t in traces[:5]}
    assert [_ids(f) for f in _files(path, 4)][-1] == [traces[4][0].trace_id]  # torn part gone
    assert again.paths() == [str(f) for f in _files(path, 4)]
    again.write(traces[5:])
    again.close()
    assert [i for f in _files(path, 4) for i in _ids(f)] == [t[0].trace_id for t in traces]


def test_a_rotation_cut_short_by_a_kill_loses_nothing(tmp_path: Path) -> None:
    """A kill between two renames leaves a gap in the numbers; the next rotation closes it."""
    traces = [_trace(i) for i in range(6)]
    size = len(_line(traces[0]))
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=size, keep=5)
    out.write(traces[:3])  # .2 .1 live
    out.close()
    os.replace(f"{path}.2", f"{path}.3")  # the rotation's first rename, then the kill
    again = OutFile(str(path), max_bytes=size, keep=5)
    assert again.present == {t[0].trace_id for t in traces[:3]}
    again.write(traces[3:])
    again.close()
    assert [i for f in _files(path, 5) for i in _ids(f)] == [t[0].trace_id for t in traces]


def test_a_failed_rename_is_an_out_file_error(tmp_path: Path) -> None:
    from fma_otel.live.outfile import OutFileError

    traces = [_trace(i) for i in range(3)]
    size = len(_line(traces[0]))
    path = tmp_path / "traces.jsonl"
    out = OutFile(str(path), max_bytes=size, keep=1)
    out.write(traces[:1])
    os.mkdir(f"{path}.1")  # os.replace of a file onto a directory fails
    (Path(f"{path}.1") / "x").write_text("x")
    with pytest.raises(OutFileError):
        out.write(traces[1:2])
    with pytest.raises(OutFileError):  # and keeps failing, writing nothing
        out.write(traces[2:])
    out.close()
    assert _ids(path) == [traces[0][0].trace_id]


# --------------------------------------------------------------------------- the watcher


def _all_traces(path: Path, keep: int) -> dict[str, list[SpanRecord]]:
    """Trace id -> spans over the live file and its rotated ones; asserts each line once."""
    from fma_otel.sinks.otlp_json import spans_from_request

    out: dict[str, list[SpanRecord]] = {}
    for f in _files(path, keep):
        for line in f.read_text().split("\n")[:-1]:
            spans = list(spans_from_request(json.loads(line)))
            tid = spans[0].trace_id
            assert tid not in out, f"trace {tid} written twice"
            out[tid] = spans
    return out


@pytest.mark.slow
def test_sigkills_and_restarts_with_rotation_lose_and_double_nothing(
    k8s: FakeCluster, tmp_path: Path
) -> None:
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=41)
    want = _complete(offline_traces(cap, tmp_path))
    steps = timeline(cap)
    out = tmp_path / "out.jsonl"
    rotate = ("--out-max-bytes", "20000", "--out-keep", "1000")  # a file every line or two
    n = len(steps)

    p = start_watch(k8s, tmp_path, *rotate)
    assert k8s.wait_for_streams("watch", 1, 60)
    play(k8s, steps[: n // 3], pause_every=20, pause_s=0.05)
    kill9(p)
    # killed just after a write (which may have rotated), before the checkpoint has it
    p = start_watch(k8s, tmp_path, *rotate, env={"FMA_OTEL_FAULT": "after-write:1"})
    assert k8s.wait_for_streams("watch", 1, 60)
    play(k8s, steps[n // 3 :])
    assert p.wait(60) == -signal.SIGKILL
    before = lists(k8s)
    p = start_watch(k8s, tmp_path, *rotate)
    assert started(k8s, before)
    assert wait_for(lambda: len(_all_traces(out, 1000)) >= len(want), 60)
    # a trace a killed run wrote is in the checkpoint once this run has rebuilt it
    cp = tmp_path / "cp" / "checkpoint.json"
    assert wait_for(lambda: set(want) <= {trace_id_for(k) for k in checkpoint(cp).get("emitted") or ()}, 60)
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 0
    assert len(_files(out, 1000)) > 3  # it did rotate
    assert_same(_all_traces(out, 1000), want)  # each once (asserted by _all_traces), none missing
    assert checkpoint(cp)["pending"] == []


@pytest.mark.slow
def test_pending_traces_are_read_back_from_rotated_files(k8s: FakeCluster, tmp_path: Path) -> None:
    """Stopped while OTLP is down, their requesters then deleted: the restart re-sends them
    from --out, though rotations moved them to ``out.jsonl.N``."""
    k8s.add_pod(dpc_pod())
    cap = recent_capture(seed=42)
    want = _complete(offline_traces(cap, tmp_path))
    out, cp = tmp_path / "out.jsonl", tmp_path / "checkpoint.json"
    rotate = {"out_max_bytes": 1, "out_keep": 1000}  # one line a file
    down = FakeSink()
    down.down = True
    w = InProcessWatcher(k8s, tmp_path, export_retry_s=0.2, **rotate)
    w.watcher.sink = down
    with w:
        play(k8s, timeline(cap))
        assert wait_for(lambda: pending_ids(cp) >= set(want), 60)
    assert len(_files(out, 1000)) >= len(want)
    up = resend_after_forgetting(k8s, tmp_path, cp, want, **rotate)
    assert checkpoint(cp)["pending"] == []
    assert_same({t: s for t, s in up.traces().items() if t in want}, want)
    assert_same(_all_traces(out, 1000), want)


# --------------------------------------------------------------------------- the flags


@pytest.mark.parametrize(
    ("text", "n"),
    [
        ("100Mi", 100 * 2**20),
        ("500M", 500 * 10**6),
        ("1Gi", 2**30),
        ("4096", 4096),
        ("10KiB", 10240),
        ("0", 0),
    ],
)
def test_sizes(text: str, n: int) -> None:
    from fma_otel.commands.watch import parse_size

    assert parse_size(text) == n


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--out-max-bytes", "lots"], "not a size: 'lots'"),
        (["--out-max-bytes", "-5"], "not a size"),
        (["--out-max-bytes", "9" * 40], "too large a size"),
        (["--out-keep", "0"], "0 is not in the range 1<=x<=1000"),
    ],
)
def test_bad_rotation_flags_are_usage_errors(args: list[str], says: str) -> None:
    from click.testing import CliRunner

    from fma_otel.cli import main

    r = CliRunner().invoke(main, ["watch", "-n", "x", *args])
    assert r.exit_code == 2
    assert says in r.stderr


def test_rotation_flags_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from fma_otel.cli import main

    monkeypatch.setenv("FMA_OTEL_OUT_MAX_BYTES", "ten")
    r = CliRunner().invoke(main, ["watch", "-n", "x"])
    assert r.exit_code == 2 and "not a size: 'ten'" in r.stderr
