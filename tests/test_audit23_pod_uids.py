"""Issue 23, no silent loss: a byte-corrupted uid in one state of a Pod's watch stream.

One watch event of a requester with its uid corrupted (a byte flipped, cut short, not hex)
started a trace of its own (``fma.request``, ``fma.requester.*`` under a uid the cluster
never had) with ``--strict`` exit 0.  The same Pod (namespace, name, creationTimestamp)
under another uid before it was seen deleted is now refused, counted and named by file:line
(checked to fail before the fix).  The loss messages also name the line (1-based), not the
event's 0-based position.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main

REQUESTER = "my-request-29-14-30-14-xvm2p"


def _corrupt(uid: str, how: str) -> str:
    if how == "flip":
        return uid[:-1] + ("0" if uid[-1] != "0" else "1")
    if how == "short":
        return uid[:20]
    return "zz" + uid[2:]


@pytest.mark.parametrize("how", ["flip", "short", "nonhex"])
def test_a_corrupted_uid_in_one_pod_state_fails_strict_naming_its_line(tmp_path: Path, how: str) -> None:
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    pods = cap / "pods.json"
    lines = pods.read_text().split("\n")
    # the requester's last state: its earlier ones were read with the right uid
    i = max(i for i, s in enumerate(lines) if f'"name":"{REQUESTER}"' in s)
    ev = json.loads(lines[i])
    good = ev["object"]["metadata"]["uid"]
    ev["object"]["metadata"]["uid"] = _corrupt(good, how)
    lines[i] = json.dumps(ev, separators=(",", ":"))
    pods.write_text("\n".join(lines))

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert res.exit_code == 1, res.output
    assert f"pods.json:{i + 1}: not traced: Pod shares its uid" in res.output
    assert f"had uid {good}" in res.output
    traces = {
        json.loads(x)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
        for x in (tmp_path / "t.jsonl").read_text().splitlines()
    }
    assert len(traces) == 5  # the sample's five actuations, no sixth


def test_a_pod_recreated_under_its_name_is_another_pod(tmp_path: Path) -> None:
    """Deleted, then created again with the same name: a new uid is no corruption."""
    cap = tmp_path / "cap"
    shutil.copytree(sample_dir(), cap)
    pods = cap / "pods.json"
    lines = pods.read_text().rstrip("\n").split("\n")
    i = max(i for i, s in enumerate(lines) if f'"name":"{REQUESTER}"' in s)
    ev = json.loads(lines[i])
    gone = dict(ev, type="DELETED")
    again = json.loads(lines[i])
    again["type"] = "ADDED"
    again["object"]["metadata"]["uid"] = "0badc0de-0000-4000-8000-000000000001"
    pods.write_text("\n".join([*lines, json.dumps(gone), json.dumps(again)]) + "\n")

    res = CliRunner().invoke(main, ["bridge", str(cap), "--out", str(tmp_path / "t.jsonl"), "--strict"])

    assert "Pod shares its uid" not in res.output
