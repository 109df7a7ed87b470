"""Issue 23, no silent loss: line ends other than LF in the launcher and vLLM logs.

A launcher log with CR-only line ends was read as one line ("read 1, skipped 0"): the
create's ``fma.launcher.create_instance`` and ``fma.instance.create`` vanished and
``--strict`` exited 0.  A vLLM log with CR-only ends lost the phases whose order in the log
decides them (``vllm.engine.config``, ``vllm.memory.profile``, ``vllm.api_server.start``):
its records all had line 1.  Each case rewrites one log's line ends and expects exactly the
spans of the untouched capture (checked to fail before the fix).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main

LAUNCHER = "launcher-launcher-example-4lgw5.log"
VLLM = "vllm/IAXCObeWozl5IPaRSSXL-i3CRGr7aCmuPNRjAM-t2Beoi.log"


def _spans(cap: Path, out: Path) -> tuple[int, str, list[tuple[str, str, str, str]]]:
    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out), "--strict"])
    spans = []
    for line in out.read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    spans.append((s["name"], s["spanId"], s["startTimeUnixNano"], s["endTimeUnixNano"]))
    return res.exit_code, res.output, sorted(spans)


def _mixed(b: bytes) -> bytes:
    ends = [b"\r", b"\r\n", b"\n", b"\n\r"]
    lines = b.split(b"\n")
    return b"".join(line + ends[i % 4] for i, line in enumerate(lines[:-1])) + lines[-1]


EDITS: dict[str, Callable[[bytes], bytes]] = {
    "cr-only": lambda b: b.replace(b"\n", b"\r"),
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "mixed": _mixed,
}


@pytest.fixture(scope="module")
def untouched(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str, str, str]]:
    d = tmp_path_factory.mktemp("base")
    shutil.copytree(sample_dir(), d / "cap")
    rc, out, spans = _spans(d / "cap", d / "t.jsonl")
    assert rc == 0, out
    return spans


#: Each log whose line ends are rewritten, and the reader's summary it must still give
#: (the vLLM log's counts are not printed as one line).  The DPC log: a CR in a short line
#: was kept inside it, so with mixed ends the record after it was glued onto the one
#: before, and lost.
LOGS = {
    LAUNCHER: f"{LAUNCHER}: read 41, understood 11, ignored 30, skipped 0",
    VLLM: None,
    "dpc.log": "dpc.log: read 209, understood 89, ignored 120, skipped 0",
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("name", list(LOGS))
def test_line_ends_lose_nothing(
    tmp_path: Path, untouched: list[tuple[str, str, str, str]], name: str, edit: str
) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / name
    log.write_bytes(EDITS[edit](log.read_bytes()))

    rc, out, spans = _spans(cap, tmp_path / "t.jsonl")

    assert rc == 0, out
    if LOGS[name] is not None:
        assert LOGS[name] in out
    assert spans == untouched


@pytest.mark.parametrize("year", ["2150", "2001"])
def test_a_launcher_stamp_years_from_the_capture_fails_strict(tmp_path: Path, year: str) -> None:
    """A launcher asctime inside the accepted window (2000..2200) but in another year than
    the capture's Pods: the create's spans were lost, exit 0 (checked before the fix)."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / LAUNCHER
    lines = log.read_text().split("\n")
    i = next(i for i, s in enumerate(lines) if "Accepted request to create vLLM instance" in s)
    lines[i] = year + lines[i][4:]
    log.write_text("\n".join(lines))

    rc, out, _ = _spans(cap, tmp_path / "t.jsonl")

    assert rc == 1, out
    assert f"{LAUNCHER}:{i + 1}: skipped: time " in out


@pytest.mark.slow
def test_a_cr_only_launcher_log_too_big_for_one_line_is_read_line_by_line() -> None:
    """Past the 16 MiB line bound a CR-only log came as one too-long line: every record
    lost (one line skipped).  It is read on as the lines its CRs end, as the DPC log is."""
    import io

    from fma_otel.lines import CR_NOTE, MAX_LINE_BYTES
    from fma_otel.sources.launcher_log import iter_launcher_log
    from fma_otel.sources.records import SourceStats

    one = (sample_dir() / LAUNCHER).read_bytes()
    copies = MAX_LINE_BYTES // len(one) + 2
    per_copy = sum(1 for _ in iter_launcher_log(io.BytesIO(one), SourceStats("x"), facts_only=True))
    st = SourceStats("x")
    recs = list(iter_launcher_log(io.BytesIO(one.replace(b"\n", b"\r") * copies), st, facts_only=True))

    assert per_copy > 0
    assert len(recs) == per_copy * copies
    assert st.skipped == 0
    assert st.notes[CR_NOTE] == one.count(b"\n") * copies - 1  # each CR but the one ending the log
