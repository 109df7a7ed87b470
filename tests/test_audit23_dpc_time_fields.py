"""Issue 23: a DPC time field that is present but unreadable is a counted skip.

``k8sCallStartTime``, ``requesterCreateTime`` and ``lastWrite.Time`` only narrow an instant,
so a line that has a corrupted one was read as if the field were absent: "skipped 0",
``--strict`` exit 0, one bound silently lost.  Each case below plants one such value (a year
no capture has, or not a time) in a line the bridge uses; on the code before
``facts._time_field`` every one of them exited 0 under ``--strict``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main

CASES = [
    # (what the line says, field regex, bad value)
    ('"Set status/finalizers"', r'k8sCallStartTime="([^"]*)"', "2600-01-01T00:00:00Z"),
    ('"Bound server-providing Pod"', r'k8sCallStartTime="([^"]*)"', "1969-12-31T23:59:59Z"),
    ('"Reconciled bound launcher Pod labels', r'k8sCallStartTime="([^"]*)"', "2026-06-29T14:31:14+99:00"),
    ('"Successfully relayed the readiness"', r'requesterCreateTime="([^"]*)"', "0001-01-01T00:00:00Z"),
    ('"Successfully relayed the readiness"', r'requesterCreateTime="([^"]*)"', "NaN"),
    ('lastWrite={"Manager":"kubelet"', r'"Time":"([^"]*)"', "9999-12-31T23:59:59Z"),
]


@pytest.mark.parametrize(("line_has", "field", "bad"), CASES)
def test_a_corrupted_time_field_fails_strict_naming_its_line(
    tmp_path: Path, line_has: str, field: str, bad: str
) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / "dpc.log"
    lines = log.read_text().split("\n")
    i = next(i for i, s in enumerate(lines) if line_has in s)
    m = re.search(field, lines[i])
    assert m is not None
    lines[i] = lines[i][: m.start(1)] + bad + lines[i][m.end(1) :]
    log.write_text("\n".join(lines))

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"dpc.log:{i + 1}: skipped:" in res.output
    assert "--strict: 1 line(s) skipped" in res.output


def test_an_absent_or_null_time_field_is_not_a_skip(tmp_path: Path) -> None:
    """Go writes an unset time as null; a line without the field at all says less, not
    something wrong."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    log = cap / "dpc.log"
    text = log.read_text()
    text = re.sub(r' k8sCallStartTime="[^"]*"', "", text, count=3)
    text = text.replace(
        'lastWrite={"Manager":"kubelet","Time":"', 'lastWrite={"Manager":"kubelet","Time":null,"x":"', 1
    )
    log.write_text(text)

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 0, res.output
    assert "dpc.log: read 209, understood 89, ignored 120, skipped 0" in res.output


FAR = [
    # inside the accepted window (2000..2200) but years from the line that states them:
    # each made a span decades from the capture (fma.dpc.relay_ready in 2001, ...)
    ('purpose="relay_ready"', r'httpCallStartTime="([^"]*)"', "2001-01-01T00:00:00Z"),
    ('purpose="wake"', r'httpCallStartTime="([^"]*)"', "2150-06-29T14:31:00.8Z"),
    ('"Bound server-providing Pod"', r'k8sCallStartTime="([^"]*)"', "2026-06-27T14:30:43Z"),
    ('"Successfully relayed the readiness"', r'requesterCreateTime="([^"]*)"', "2026-07-01T14:30:07Z"),
    ('lastWrite={"Manager":"kubelet"', r'"Time":"([^"]*)"', "2024-06-29T14:30:23Z"),
]


@pytest.mark.parametrize(("line_has", "field", "bad"), FAR)
def test_a_time_field_far_from_its_line_fails_strict_naming_it(
    tmp_path: Path, line_has: str, field: str, bad: str
) -> None:
    test_a_corrupted_time_field_fails_strict_naming_its_line(tmp_path, line_has, field, bad)
    assert (
        "days from the line's own log time"
        in CliRunner()
        .invoke(main, ["bridge", str(tmp_path / "cap"), "--out", str(tmp_path / "u.jsonl")])
        .output
    )


def test_one_corrupted_pod_time_does_not_move_the_dpc_log_to_its_year(tmp_path: Path) -> None:
    """klog prints no year; it was taken from the extreme Pod times, so one
    ``creationTimestamp`` in 2150 on the DPC log's own day put every DPC line in 2150
    (spans there; with the stamps above checked, every DPC line skipped).  The year now
    comes from the median Pod time; nothing lands outside the capture's day."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    pods = cap / "pods.json"
    lines = pods.read_text().split("\n")
    i = next(i for i, s in enumerate(lines) if '"creationTimestamp":"2026-06-29T13:57:30Z"' in s)
    lines[i] = lines[i].replace("2026-06-29T13:57:30Z", "2150-06-29T14:30:01Z", 1)
    pods.write_text("\n".join(lines))
    out = tmp_path / "t.jsonl"

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out)])

    assert res.exit_code == 0, res.output
    assert "dpc.log: read 209, understood 89, ignored 120, skipped 0" in res.output
    times = [int(t) for t in re.findall(r'TimeUnixNano":"([0-9]+)"', out.read_text())]
    day0 = 1_782_691_200_000_000_000  # 2026-06-29T00:00:00Z
    assert times and all(day0 <= t < day0 + 86_400_000_000_000 for t in times)


def test_an_event_years_from_the_capture_fails_strict(tmp_path: Path) -> None:
    """An Event time inside the accepted window but in 2150 made k8s.pod.setup and
    k8s.container.start spans in 2150 with exit 0 (checked to fail before the fix)."""
    import json

    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    events = cap / "events.json"
    doc = json.loads(events.read_text())
    i = next(i for i, e in enumerate(doc["items"]) if e.get("reason") == "Started")
    for k in ("firstTimestamp", "lastTimestamp", "eventTime"):
        if doc["items"][i].get(k):
            doc["items"][i][k] = "2150-06-29T14:30:01Z" if k != "eventTime" else "2150-06-29T14:30:01.000000Z"
    events.write_text(json.dumps(doc))
    out = tmp_path / "t.jsonl"

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(out), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"events.json:{i}: skipped: Event item {i}: time " in res.output
    times = [int(t) for t in re.findall(r'TimeUnixNano":"([0-9]+)"', out.read_text())]
    assert times and max(times) < 1_782_777_600_000_000_000  # 2026-06-30T00:00:00Z
