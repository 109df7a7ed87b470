"""Issue 23, no silent loss: a wanted DPC line cut before its fields begin.

The first fix counted a ``create_instance`` line cut inside its fields.  A line cut inside
its klog header, inside its quoted message, or right after the message was still passed
over: the prefilter looks for a wanted message whole, so the cut line was "ignored" with
the DPC's chatter, its spans vanished and ``--strict`` exited 0 (found by cutting every
wanted line kind of the sample at random lengths: 21 of 624 cuts).  Each case below was
checked to exit 0 before the fix.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.sources.klog import Prefilter, cut_line, iter_klog
from fma_otel.sources.records import SourceStats

CASES = [
    # (the line's message, where to cut: "header" | "message" | "after")
    ("Created launcher-based server-providing pod", "message"),
    ("Bound server-providing Pod", "header"),
    ("Bound server-providing Pod", "after"),
    ("Set status/finalizers", "header"),
    ("Reconciled bound launcher Pod labels and annotations", "message"),
    ("Successfully relayed the readiness", "header"),
    ("Unbound server-providing Pod", "after"),
    ("Unbound server-providing Pod", "bracket"),
    ("Successfully relayed the readiness", "before:readiness"),
]


def _cut(line: str, where: str) -> str:
    msg = line.index('] "') + 3
    if where == "header":
        return line[: msg - 20]
    if where == "message":
        return line[: msg + 8]
    if where == "bracket":
        return line[: msg - 1]  # "...go:1322] ": the header whole, nothing after it
    if where.startswith("before:"):
        return line[: line.index(f" {where[7:]}=")]  # cut between two fields
    return line[: line.index('"', msg) + 1]  # the message whole, no field


@pytest.mark.parametrize(("message", "where"), CASES)
def test_a_wanted_line_cut_early_fails_strict_naming_it(tmp_path: Path, message: str, where: str) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / "dpc.log"
    lines = log.read_text().split("\n")
    i = next(i for i, s in enumerate(lines) if f'] "{message}"' in s)
    lines[i] = _cut(lines[i], where)
    log.write_text("\n".join(lines))

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"dpc.log:{i + 1}: skipped:" in res.output


@pytest.mark.parametrize(
    ("line", "cut"),
    [
        (b"I0629 14:30:43.807052", True),
        (b"I0629 14:30:43.807052       1 inference-server.go:1460", True),
        (b'I0629 14:30:43.807052       1 inference-server.go:1460] "Bound server-prov', True),
        (b'2026-06-29T14:30:43.8Z I0629 14:30:43.807052       1 x.go:1] "Bound', True),
        (b'I0629 14:30:43.807052       1 x.go:1] "Bound server-providing Pod" a="b"', False),
        (b"I0629 14:30:43.807052       1 reflector.go:1] Listing and watching", False),
        (b'\tHTTP GET "http://10.0.0.1', False),
    ],
)
def test_cut_line(line: bytes, cut: bool) -> None:
    assert cut_line(line) is cut


@pytest.mark.parametrize("junk", [b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80"])
def test_a_corrupted_byte_in_a_wanted_message_fails_strict_naming_it(tmp_path: Path, junk: bytes) -> None:
    """A NUL or a byte that is not UTF-8 inside the message hid the line from the
    prefilter: ignored, its spans lost, exit 0 (checked to fail before the fix)."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / "dpc.log"
    lines = log.read_bytes().split(b"\n")
    i = next(i for i, s in enumerate(lines) if b'] "Successfully relayed the readiness"' in s)
    at = lines[i].index(b"relayed")
    lines[i] = lines[i][:at] + junk + lines[i][at:]
    log.write_bytes(b"\n".join(lines))

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"dpc.log:{i + 1}: skipped: NUL byte or invalid UTF-8" in res.output


@pytest.mark.parametrize(
    ("log", "needle", "junk_at"),
    [
        ("dpc.log", b'purpose="get_gpu_uuids"', b"purpos"),  # inside a key the bridge reads
        ("launcher-launcher-example-4lgw5.log", b"Accepted request to create", b"INF"),
    ],
)
@pytest.mark.parametrize("junk", [b"\x00", b"\xff"])
def test_a_corrupted_byte_in_a_line_the_prefilter_wants_fails_strict_naming_it(
    tmp_path: Path, log: str, needle: bytes, junk_at: bytes, junk: bytes
) -> None:
    """The prefilter found the wanted message, so the line was parsed with U+FFFD for the
    byte: a NUL inside ``purpose=`` lost the get_gpu_uuids bound (the actuation's start
    went from 0.135 s to 1 s precise), "skipped 0", exit 0 under ``--strict``."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    path = cap / log
    lines = path.read_bytes().split(b"\n")
    i = next(i for i, s in enumerate(lines) if needle in s)
    at = lines[i].index(junk_at) + len(junk_at)
    lines[i] = lines[i][:at] + junk + lines[i][at:]
    path.write_bytes(b"\n".join(lines))

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"{log}:{i + 1}: skipped: NUL byte or invalid UTF-8" in res.output


def test_cut_lines_one_after_another_are_each_skipped_with_their_number() -> None:
    """Cut lines next to each other, the file's first among them: the search for them in
    a block must find each (a search that consumed a line's end missed the next line)."""
    header = b"I0629 14:30:43.807052       1 inference-server.go:1460"
    message = b'I0629 14:30:43.807052       1 x.go:1] "Bound server-prov'
    chatter = b'I0629 14:30:43.807052       1 x.go:1] "Popped workqueue item" worker=0'
    log = b"\n".join([header, message, header, chatter, message[: message.index(b"]") + 2], b""])
    stats = SourceStats("dpc.log")

    records = list(iter_klog(io.BytesIO(log), stats, messages={"Bound server-providing Pod"}))

    assert records == []
    reason = "line cut inside its header or message"
    assert stats.skipped_lines == [(1, reason), (2, reason), (3, reason), (5, reason)]
    assert (stats.read, stats.ignored, stats.skipped) == (5, 1, 4)


#: characters a line may hold that are neither a line end nor corruption: control bytes,
#: DEL, and UTF-8 sequences of two, three and four bytes (each byte past ``\x7f``)
ODD = ["\x01", "\t", "\x0b", "\x0c", "\x1f", "\x7f", "\u00e9", "\u20ac", "\U0001f600"]


@pytest.mark.parametrize("odd", ODD)
def test_a_cut_line_holding_any_byte_is_skipped_when_read_in_blocks(odd: str) -> None:
    """The block search for cut lines runs a class of every byte but ``]`` (or ``"``) and
    the line end over each header (and message): a byte the class left out would hide the
    cut line behind it, which would then be ignored, not skipped."""
    o = odd.encode()
    header = b"I0629 14:30:43.807052       1 x" + o + b".go:1460"
    message = b'I0629 14:30:43.807052       1 x.go:1] "Bound ' + o + b"server-prov"
    chatter = b'I0629 14:30:43.807052       1 x.go:1] "Popped ' + o + b' item" a="' + o + b'"'
    stats = SourceStats("dpc.log")

    records = list(
        iter_klog(
            io.BytesIO(b"\n".join([chatter, header, message, chatter, b""])),
            stats,
            {"Bound server-providing Pod"},
        )
    )

    assert records == []
    reason = "line cut inside its header or message"
    assert stats.skipped_lines == [(2, reason), (3, reason)]
    assert (stats.read, stats.ignored, stats.skipped) == (4, 2, 2)


@pytest.mark.parametrize("odd", ODD)
def test_a_narrowed_field_holding_any_byte_is_passed_over_only_when_whole(odd: str) -> None:
    """The prefilter passes over a line whose narrowing field holds a whole value that is
    not wanted, whatever bytes it holds, and finds one cut inside that value."""
    prefilter = Prefilter({"HTTP call done"}, {"HTTP call done": ("purpose", ("wake",))})
    line = b'I0629 14:30:43.807052       1 x.go:1] "HTTP call done" purpose="sl' + odd.encode() + b'eep" a=1'

    assert not prefilter.wanted(line)
    assert prefilter.wanted(line[: line.index(b"eep")])
