"""``fma-otel bridge`` on inputs a reviewer found lost or invented silently (session 11):
empty paths, non-finite tolerances, Pods files cut short, DPC lines cut between fields or
repeated, and logs that pair with nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel.bridge import sample_dir
from fma_otel.cli import main

SAMPLE = sample_dir()


def run(*args: str):
    return CliRunner().invoke(main, ["bridge", *args], catch_exceptions=False)


def _sample_copy(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)
    return d


def _one_line_error(r, exit_code: int = 2) -> str:
    assert r.exit_code == exit_code, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    return err


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("",), "CAPTURE"),
        (("--dpc-log", ""), "--dpc-log"),
        (("--pods", "", "--dpc-log", str(SAMPLE / "dpc.log")), "--pods"),
        (("--events", ""), "--events"),
    ],
)
def test_an_empty_path_is_a_usage_error_naming_it(tmp_path: Path, clean_otlp_env, args, name: str) -> None:
    """An unset ``$CAPTURE`` ran the embedded sample and exited 0; an empty ``--dpc-log``
    was taken as not given."""
    out = tmp_path / "t.jsonl"
    err = _one_line_error(run(*args, "-q", "--out", str(out)))
    assert f"error: {name} is empty" in err
    assert not out.exists()


@pytest.mark.parametrize("value", ["nan", "NaN"])
def test_a_non_finite_clock_tolerance_is_a_usage_error(tmp_path: Path, clean_otlp_env, value: str) -> None:
    err = _one_line_error(run("-q", "--out", str(tmp_path / "t.jsonl"), "--clock-tolerance-ms", value))
    assert "--clock-tolerance-ms" in err and "must be a finite number" in err


@pytest.mark.parametrize("value", ["inf", "1e308", "1e300", "3600000.5"])
def test_a_clock_tolerance_past_an_hour_is_a_usage_error(tmp_path: Path, clean_otlp_env, value: str) -> None:
    """1e300 was taken: durations and precisions of 1e297 s, which the readers refuse."""
    err = _one_line_error(run("-q", "--out", str(tmp_path / "t.jsonl"), "--clock-tolerance-ms", value))
    assert "--clock-tolerance-ms" in err and "is not in the range 0<=x<=3600000.0" in err


def test_an_empty_out_is_a_usage_error(clean_otlp_env) -> None:
    err = _one_line_error(run("-q", "--out", ""))
    assert "--out" in err and "is empty" in err


# --------------------------------------------------------------------------- a Pods file with no Pod


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("", True),
        ("  \n\t\n", True),
        ("[]", False),
        ('{"kind":"List","items":[]}\n', False),
    ],
)
def test_a_pods_file_with_no_pod_fails_strict(tmp_path: Path, clean_otlp_env, text: str, cut: bool) -> None:
    """An empty ``pods.json`` passed ``--strict`` with 0 traces, the summary saying
    "(0 DPC line(s) name them)": the DPC lines naming the lost requesters are counted and
    fail ``--strict``, and an empty file is a skipped line."""
    d = _sample_copy(tmp_path)
    pods = d / "pods.json"
    pods.write_text(text)
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0, r.stderr
    assert "not traced: 4 requester(s) in the DPC log have no Pod in the capture (0 " not in r.stderr
    assert "not traced: 4 requester(s) in the DPC log have no Pod in the capture (81 DPC line(s)" in r.stderr
    assert f"source {pods}: read {int(cut)}, understood 0, skipped {int(cut)}\n" in r.stderr
    r = run(str(d), "--strict", "-q", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{d / 'dpc.log'}:10: not traced: names a requester: uid " in r.stderr
    assert (f"{pods}:1: skipped: " in r.stderr) is cut
    assert r.stderr.strip().endswith(("1 line(s) skipped, " if cut else "") + "81 read but not traced")


@pytest.mark.parametrize("text", ["[", '{"kind":"List","items":[', '{"kind": "List",\n "items": [\n'])
def test_a_pods_file_cut_before_its_first_pod_is_unusable(tmp_path: Path, clean_otlp_env, text: str) -> None:
    """Cut before its first Pod, the file holds none: exit 2 saying why (it was exit 0)."""
    d = _sample_copy(tmp_path)
    (d / "pods.json").write_text(text)
    r = run(str(d), "-q", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2
    assert "not Kubernetes Pod JSON (no Pod object found; line " in r.stderr
    assert "cut: the List or array ends without its closing ]" in r.stderr


# --------------------------------------------------------------------------- a DPC line cut between fields

WAKE_LINE = 96  # the sample's "HTTP call done" purpose="wake" line


def test_a_call_line_cut_before_its_status_is_a_skip_not_a_failed_call(
    tmp_path: Path, clean_otlp_env
) -> None:
    """Cut right after ``latencySecs=...``: read as statusCode 0 it was a failed wake (the
    trace listed D.wake.start/D.wake.end as missing), exit 0 under ``--strict``."""
    d = _sample_copy(tmp_path)
    lines = (d / "dpc.log").read_bytes().splitlines(keepends=True)
    line = lines[WAKE_LINE - 1]
    assert b'purpose="wake"' in line
    lines[WAKE_LINE - 1] = line[: line.index(b" statusCode=")] + b"\n"
    (d / "dpc.log").write_bytes(b"".join(lines))
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert f"source {d / 'dpc.log'}: read 209, understood 88, ignored 120, skipped 1\n" in r.stderr
    r = run(str(d), "--strict", "-q", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{d / 'dpc.log'}:{WAKE_LINE}: skipped: HTTP call done without its statusCode" in r.stderr


# --------------------------------------------------------------------------- repeated DPC lines

DELETE_LINE = 36  # the sample's "HTTP call done" purpose="delete_instance" line


@pytest.mark.parametrize("how", ["one line", "whole log"])
def test_repeated_dpc_lines_are_taken_once_and_noted(tmp_path: Path, clean_otlp_env, how: str) -> None:
    """A repeated delete_instance line made a second identical fma.dpc.delete_instance span
    (and a log concatenated twice inflated fma.instances_deleted): the traces are those of
    the log without the repeats, and the summary counts them."""
    d = _sample_copy(tmp_path)
    want = run(str(d), "-q", "--out", str(tmp_path / "want.jsonl"))
    assert want.exit_code == 0
    raw = (d / "dpc.log").read_bytes()
    lines = raw.splitlines(keepends=True)
    assert b'purpose="delete_instance"' in lines[DELETE_LINE - 1]
    if how == "one line":
        lines.insert(DELETE_LINE, lines[DELETE_LINE - 1])
        doubled = b"".join(lines)
    else:
        doubled = raw + raw
    (d / "dpc.log").write_bytes(doubled)
    r = run(str(d), "--strict", "--out", str(tmp_path / "got.jsonl"))
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "got.jsonl").read_bytes() == (tmp_path / "want.jsonl").read_bytes()
    assert (
        "duplicate line(s): the same instant, message and fields as an earlier line, taken once" in r.stderr
    )
    if how == "one line":
        assert "  note: 1 duplicate line(s)" in r.stderr


# --------------------------------------------------------------------------- logs that pair with nothing

LAUNCHER = "launcher-example-4lgw5"
BASELINE_LOG = SAMPLE / "vllm" / "pod-vllm-baseline-7c9d5b8f6-tx2nj.log"


def test_a_launcher_log_whose_name_matches_no_launcher_fails_strict(tmp_path: Path, clean_otlp_env) -> None:
    """A capture's launcher log renamed (its ``launcher-`` prefix dropped) was "understood"
    and paired with nothing: two spans lost, exit 0 under ``--strict``."""
    d = _sample_copy(tmp_path)
    renamed = d / f"{LAUNCHER}.log"
    (d / f"launcher-{LAUNCHER}.log").rename(renamed)
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert (
        f"not traced: 1 launcher log(s) match no launcher Pod, nor a launcher the DPC log names (first: {renamed})"
        in r.stderr
    )
    r = run(str(d), "--strict", "-q", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{renamed}: not traced: a launcher log: example-4lgw5 is no launcher Pod's name" in r.stderr
    assert r.stderr.strip().endswith("--strict: 1 read but not traced")


def test_logs_given_under_a_key_that_matches_nothing_fail_strict(tmp_path: Path, clean_otlp_env) -> None:
    """``--launcher-log nosuchpod=FILE`` and ``--vllm-log nosuch=FILE`` were read and paired
    with nothing, exit 0 under ``--strict``; under their right keys they pass."""
    base = ["--pods", str(SAMPLE / "pods.json"), "--dpc-log", str(SAMPLE / "dpc.log")]
    base += ["--baseline-selector", "app=vllm", "--out", str(tmp_path / "o.jsonl"), "-q", "--strict"]
    launcher_log = SAMPLE / f"launcher-{LAUNCHER}.log"
    good = run(
        *base,
        f"--launcher-log={LAUNCHER}={launcher_log}",
        f"--vllm-log=vllm-baseline-7c9d5b8f6-tx2nj={BASELINE_LOG}",
    )
    assert good.exit_code == 0, good.stderr
    r = run(*base, f"--launcher-log=nosuchpod={launcher_log}", f"--vllm-log=nosuch={BASELINE_LOG}")
    assert r.exit_code == 1
    assert f"{launcher_log}: not traced: a launcher log: nosuchpod is no launcher Pod's name" in r.stderr
    assert f"{BASELINE_LOG}: not traced: a vLLM log: nosuch is no actuation's FMA instance id" in r.stderr
    assert r.stderr.strip().endswith("--strict: 2 read but not traced")
    # a capture's vllm/ holds every instance its launchers served (the sample's IvGI_... is
    # in no actuation): only a --vllm-log key is meant for one, and checked
    assert (SAMPLE / "vllm" / "IvGI_DI05pRp5R4mxq9hJeQPYCk7ZYegdG2ycyVA4WYci.log").is_file()
    assert run("--strict", "-q", "--out", str(tmp_path / "s.jsonl")).exit_code == 0
