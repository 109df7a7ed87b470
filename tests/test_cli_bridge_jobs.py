"""``fma-otel bridge --jobs``: a long DPC log read by worker processes, as a user runs it.

Why: the segmented read must be invisible in everything the user sees -- the traces, the
summary, and ``--strict``'s file:line of each skipped line, also for lines after a cut.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.commands._common import byte_progress
from fma_otel.sources import klog_segments as S

SAMPLE = sample_dir()
NOISE = (
    b'I0629 14:30:00.207885       1 queue-work.go:71] "Popped workqueue item" worker=1 item="gpu-node-1"\n'
)


def _long_capture(tmp_path: Path) -> tuple[Path, int]:
    """The sample with 17 MiB of ignored DPC lines and a bad line near the end."""
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    log = d / "dpc.log"
    head = log.read_bytes()
    noise = NOISE * ((17 << 20) // len(NOISE))
    log.write_bytes(head + noise + b"not a klog line\n" + NOISE + BAD_FACTS)
    bad_line = head.count(b"\n") + noise.count(b"\n") + 1
    return d, bad_line


#: After the cut, lines the workers turn into rows that fail in the parent: an "HTTP call
#: done" whose start is no time (the fact's error), and a failed poll dated 0230 (no year
#: has it: resolve's error, though the poll itself would be dropped).
_HTTP = (
    'I{date} 14:31:00.000000       1 inference-server.go:2251] "HTTP call done" serverUID="u-x" '
    'purpose="query_sleeping" method="GET" url="http://10.0.0.9:8005/is_sleeping" '
    'httpCallStartTime="{start}" latencySecs=0.001 statusCode=0 err="connection refused"\n'
)
BAD_FACTS = (
    _HTTP.format(date="0629", start="not a time") + _HTTP.format(date="0230", start="2026-06-29T14:31:00Z")
).encode()


def test_jobs_give_the_same_output_summary_and_strict_lines(tmp_path: Path, clean_otlp_env, monkeypatch):
    d, bad_line = _long_capture(tmp_path)
    started: list[object] = []
    real_start = S.SegmentedRead.start.__func__

    def spy(cls, *args, **kw):
        seg = real_start(cls, *args, **kw)
        started.append(seg)
        return seg

    monkeypatch.setattr(S.SegmentedRead, "start", classmethod(spy))
    runs = {}
    for jobs in ("1", "3"):
        out = tmp_path / f"o{jobs}.jsonl"
        r = CliRunner().invoke(
            main,
            [
                "bridge",
                str(d),
                "--baseline-selector",
                "app=vllm",
                "--strict",
                "--jobs",
                jobs,
                "--out",
                str(out),
            ],
            catch_exceptions=False,
        )
        runs[jobs] = (r.exit_code, r.stderr, out.read_bytes())
    assert started[0] is None and started[1] is not None and started[1].segments == 3
    assert runs["1"] == runs["3"]
    code, err, out = runs["3"]
    assert code == 1 and f"{d / 'dpc.log'}:{bad_line}: skipped" in err and out.count(b"\n") == 6
    assert f"{d / 'dpc.log'}:{bad_line + 2}: skipped" in err and "not an RFC3339 time" in err
    assert f"{d / 'dpc.log'}:{bad_line + 3}: skipped" in err and "2026-02-30" in err


def test_jobs_must_be_positive(clean_otlp_env):
    r = CliRunner().invoke(main, ["bridge", "--jobs", "0", "--out", "/dev/null"])
    assert r.exit_code == 2 and "--jobs" in r.stderr


def test_progress_bar_runs_no_thread(monkeypatch):
    """Forking workers needs a process without other threads: the bar must not start one."""
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    before = set(threading.enumerate())
    with byte_progress("bridge", 64 << 20, False) as advance:
        assert advance is not None
        advance(2 << 20)
        assert set(threading.enumerate()) == before
