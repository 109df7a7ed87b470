"""``fma-otel bridge`` as a user runs it: exit codes, one-line errors, --strict, export."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from fma_otel import model as M
from fma_otel.bridge import sample_dir
from fma_otel.cli import main
from fma_otel.query.readers import read_spans

SAMPLE = sample_dir()
SAMPLE_LAUNCHER = "launcher-example-4lgw5"


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["bridge", *args], env=env, catch_exceptions=False)


def test_embedded_default_writes_every_trace(tmp_path: Path, clean_otlp_env) -> None:
    out = tmp_path / "t.jsonl"
    r = run("--out", str(out))
    assert r.exit_code == 0, r.stderr
    assert "embedded sample" in r.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 6  # one ExportTraceServiceRequest per actuation
    spans = list(read_spans(str(out)))
    assert len({s.trace_id for s in spans}) == 6
    assert "actuations: 6" in r.stderr and "spans:" in r.stderr
    assert "cold_launcher" in r.stderr and "understood" in r.stderr


def test_explicit_flags_equal_capture_directory(tmp_path: Path, clean_otlp_env) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    launchers = [f"--launcher-log={p.name[9:-4]}={p}" for p in sorted(SAMPLE.glob("launcher-*.log"))]
    vllm = [f"--vllm-log={p.stem.removeprefix('pod-')}={p}" for p in sorted(SAMPLE.glob("vllm/*.log"))]
    assert len(vllm) >= 5
    r1 = run(
        "--pods",
        str(SAMPLE / "pods.json"),
        "--dpc-log",
        str(SAMPLE / "dpc.log"),
        *launchers,
        "--events",
        str(SAMPLE / "events.json"),
        *vllm,
        "--out",
        str(a),
        "-q",
    )
    r2 = run(str(SAMPLE), "--out", str(b), "-q")
    assert r1.exit_code == r2.exit_code == 0
    assert a.read_text() == b.read_text()


def test_stdout_when_no_out(clean_otlp_env) -> None:
    r = run(str(SAMPLE), "-q")
    assert r.exit_code == 0
    first = json.loads(r.stdout.splitlines()[0])
    assert first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--pods", "/nonexistent/pods.json", "--dpc-log", str(SAMPLE / "dpc.log")],
            "/nonexistent/pods.json: no such file",
        ),
        (["--pods", str(SAMPLE), "--dpc-log", str(SAMPLE / "dpc.log")], "is a directory"),
        (["--pods", str(SAMPLE / "pods.json"), "--dpc-log", "/proc/self/mem"], "/proc/self/mem: cannot read"),
        (
            ["--pods", str(SAMPLE / "dpc.log"), "--dpc-log", str(SAMPLE / "dpc.log")],
            "not Kubernetes Pod JSON",
        ),
        (
            ["--pods", str(SAMPLE / "pods.json"), "--dpc-log", str(SAMPLE / "pods.json")],
            "not a klog (DPC) log",
        ),
        (["--pods", str(SAMPLE / "pods.json"), "--launcher-log", "nope"], "expected POD_NAME=PATH"),
        (["/nonexistent-capture"], "not a capture directory"),
        (["--baseline-selector", "app in (a,b)"], "--baseline-selector: selector 'app in (a,b)'"),
        (["--baseline-selector", "app!=vllm"], "'app!=vllm' is not a key=value term"),
        (["--baseline-selector", "==="], "'===' is not a key=value term"),
        (["--baseline-selector", "app=a=b"], "'app=a=b' is not a key=value term"),
        (["--baseline-selector", ","], "selector ',': no key=value term"),
        (
            [str(SAMPLE), "--pods", str(SAMPLE / "pods.json")],
            "capture directory or --pods/--dpc-log, not both",
        ),
        (
            [str(SAMPLE), "--dpc-log", str(SAMPLE / "dpc.log")],
            "capture directory or --pods/--dpc-log, not both",
        ),
        (
            ["--pods", str(SAMPLE / "pods.json"), "--dpc-log", str(SAMPLE / "dpc.log")]
            + ["--launcher-log", "a=/dev/null", "--launcher-log", "a=/dev/null"],
            "'a=/dev/null': a already has a log (/dev/null)",
        ),
        (
            [str(SAMPLE), "--launcher-log", f"{SAMPLE_LAUNCHER}=/dev/null"],
            f"{SAMPLE_LAUNCHER} already has a log",
        ),
    ],
)
def test_unusable_input_is_one_line_and_exit_2(
    tmp_path: Path, args: list[str], message: str, clean_otlp_env
) -> None:
    r = run(*args, "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def _capture_with_bad_lines(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)  # with its vllm/ directory
    lines = (d / "dpc.log").read_bytes().splitlines(keepends=True)
    # lines the bridge does not want are passed over unread; wanted ones that are malformed
    # are skipped and named, and so is a line with a NUL or non-UTF-8 byte (klog writes
    # neither; such corruption may hide a wanted message: issue 23)
    lines.insert(
        3, b'I0629 14:30:43.878952       1 x.go:1] "HTTP call done" purpose="wake" httpCallStartTime="bad"\n'
    )
    lines.insert(5, b"this is not a klog line\n")
    lines.insert(10, b'Zgarbage] "Bound server-providing Pod" serverUID="x"\n')
    lines.insert(12, b"\xff\xfe garbage \x00\n")
    (d / "dpc.log").write_bytes(b"".join(lines))
    return d


def test_bad_lines_are_counted_not_fatal(tmp_path: Path, clean_otlp_env) -> None:
    d = _capture_with_bad_lines(tmp_path)
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert "skipped 3" in r.stderr
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 5


def test_strict_names_file_and_line(tmp_path: Path, clean_otlp_env) -> None:
    d = _capture_with_bad_lines(tmp_path)
    r = run(str(d), "--strict", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{d / 'dpc.log'}:4: skipped" in r.stderr
    assert f"{d / 'dpc.log'}:11: skipped" in r.stderr
    assert f"{d / 'dpc.log'}:13: skipped: NUL byte or invalid UTF-8" in r.stderr
    assert "--strict: 3 line(s) skipped" in r.stderr
    # what was good is still written
    assert (tmp_path / "o.jsonl").read_text()


def test_out_on_full_disk_is_a_clear_error(clean_otlp_env) -> None:
    r = run(str(SAMPLE), "--out", "/dev/full", "-q")
    assert r.exit_code == 1
    assert "no space left on device" in r.stderr


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_export_over_otlp(
    tmp_path: Path, protocol: str, otlp_grpc_receiver, otlp_http_receiver, clean_otlp_env
) -> None:
    rx = otlp_grpc_receiver if protocol == "grpc" else otlp_http_receiver
    out = tmp_path / "t.jsonl"
    r = run(str(SAMPLE), "--out", str(out), "--otlp-endpoint", rx.endpoint, "--otlp-protocol", protocol, "-q")
    assert r.exit_code == 0, r.stderr
    sent = sorted(
        (s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_ns, s.end_ns) for s in read_spans(str(out))
    )
    got = sorted((s.trace_id, s.span_id, s.parent_span_id, s.name, s.start_ns, s.end_ns) for s in rx.spans())
    assert got == sent
    services = {s.resource.get("service.name") for s in rx.spans()}
    assert services == {M.SERVICE_K8S, M.SERVICE_DPC, M.SERVICE_LAUNCHER, "vllm"}  # vllm: its log's phases


@pytest.mark.slow
def test_export_by_environment_only(otlp_http_receiver, clean_otlp_env) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": otlp_http_receiver.traces_url,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    r = run(str(SAMPLE), "-q", env=env)
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""  # exporting, and no --out: nothing on stdout
    assert len({s.trace_id for s in otlp_http_receiver.spans()}) == 6  # the sample implies app=vllm


def test_a_blank_endpoint_variable_does_not_turn_export_on(short_otlp_timeout) -> None:
    """``OTEL_EXPORTER_OTLP_ENDPOINT=" "`` is unset, as everywhere else: the traces go to
    stdout (it used to turn export on, to the default localhost, and write nothing)."""
    r = run(str(SAMPLE), "-q", env={"OTEL_EXPORTER_OTLP_ENDPOINT": " "})
    assert r.exit_code == 0, r.stderr
    assert len(r.stdout.splitlines()) == 6  # one line per actuation


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_a_blank_endpoint_flag_is_a_usage_error(
    tmp_path: Path, blank: str, protocol: str, clean_otlp_env
) -> None:
    """``--otlp-endpoint " "`` names no collector: exit 2 naming the option, and nothing
    written (with gRPC it used to send to the exporter's default localhost and fail with
    "to  failed"; an empty one silently turned export off)."""
    out = tmp_path / "t.jsonl"
    r = run(str(SAMPLE), "-q", "--out", str(out), "--otlp-endpoint", blank, "--otlp-protocol", protocol)
    assert r.exit_code == 2, r.stderr
    assert "Invalid value for '--otlp-endpoint': is blank" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.slow
def test_export_without_out_prints_the_summary(otlp_http_receiver, clean_otlp_env) -> None:
    """Exporting only (no ``--out``), with the summary on: it counts what was exported
    (this crashed with an unbound ``written`` before the summary was given its counts)."""
    r = run(str(SAMPLE), "--otlp-endpoint", otlp_http_receiver.traces_url, "--otlp-protocol", "http/protobuf")
    assert r.exit_code == 0, r.stderr
    assert r.stdout == ""
    spans = otlp_http_receiver.spans()
    assert "actuations: 6" in r.stderr
    assert f"spans: {len(spans)} in 6 traces" in r.stderr


@pytest.mark.slow
def test_export_failure_keeps_the_file_and_exits_1(tmp_path: Path, short_otlp_timeout) -> None:
    from tests.support.otlp_receiver import free_port

    out = tmp_path / "t.jsonl"
    r = run(
        str(SAMPLE),
        "--out",
        str(out),
        "--otlp-endpoint",
        f"http://127.0.0.1:{free_port()}",
        "--otlp-protocol",
        "grpc",
        "-q",
    )
    assert r.exit_code == 1
    assert "export failed" in r.stderr and "127.0.0.1" in r.stderr
    assert len(out.read_text().splitlines()) == 6


def test_summary_counts_requesters_without_pods(tmp_path: Path, clean_otlp_env) -> None:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)  # with its vllm/ directory
    # keep only the baseline Pod's events: every FMA requester is gone from the capture
    kept = [ln for ln in (d / "pods.json").read_text().splitlines() if "vllm-baseline" in ln]
    (d / "pods.json").write_text("\n".join(kept) + "\n")
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert "not traced: 4 requester(s) in the DPC log have no Pod" in r.stderr


def test_jobs_is_gone_and_says_so(tmp_path: Path, clean_otlp_env) -> None:
    """The bridge is one process: an old ``--jobs`` is a usage error, not silently ignored."""
    r = run("--jobs", "2", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2
    assert "No such option '--jobs'" in r.stderr and "Traceback" not in r.stderr


def _sample_copy(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)  # with its vllm/ directory
    return d


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("dpc.log", lambda p: p.mkdir(), "dpc.log: not a regular file"),
        ("dpc.log", lambda p: os.mkfifo(p), "dpc.log: not a regular file"),
        ("dpc.log", lambda p: p.symlink_to("/dev/zero"), "dpc.log: not a regular file"),
        ("dpc.log", lambda p: p.symlink_to(p.parent / "gone"), "dpc.log: broken symbolic link"),
        ("dpc.log", lambda p: p.symlink_to(p), "dpc.log: broken symbolic link"),
        ("launcher-x.log", lambda p: os.mkfifo(p), "launcher-x.log: not a regular file"),
        ("pods.json", lambda p: p.mkdir(), "pods.json: not a regular file"),
    ],
)
def test_capture_directory_holds_regular_files_only(
    tmp_path: Path, name: str, make, message: str, clean_otlp_env
) -> None:
    """A FIFO would block the run for ever and /dev/zero never end: one line, exit 2."""
    d = _sample_copy(tmp_path)
    target = d / name
    if target.exists():
        target.unlink()
    make(target)
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().endswith(message) and len(r.stderr.strip().splitlines()) == 1


def test_capture_without_dpc_log_warns_and_traces_pod_status_only(tmp_path: Path, clean_otlp_env) -> None:
    """``fma-otel capture`` writes no dpc.log where no DPC Pod matched: the bridge says so."""
    d = _sample_copy(tmp_path)
    (d / "dpc.log").unlink()
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert f"warning: {d} has no dpc.log" in r.stderr
    spans = list(read_spans(str(tmp_path / "o.jsonl")))
    assert spans and {s.attributes.get(M.A_PATH) for s in spans} <= {"unknown", "cold_no_fma"}
    quiet = run(str(d), "--out", str(tmp_path / "q.jsonl"), "-q")
    assert quiet.exit_code == 0 and quiet.stderr == ""


# --------------------------------------------------------------------------- silent losses (issue 23)


def _sample_copy(tmp_path: Path) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(SAMPLE, d)  # with its vllm/ directory
    return d


CREATE_LINE = 44  # the sample's first "HTTP call done" purpose=create_instance line
CREATE_UID = "68ef8f5f-ae68-490a-b8bc-71750361524c"


@pytest.mark.parametrize("cut", [150, 220, 300])
def test_a_wanted_line_cut_short_is_a_counted_skip(tmp_path: Path, clean_otlp_env, cut: int) -> None:
    d = _sample_copy(tmp_path)
    lines = (d / "dpc.log").read_bytes().splitlines(keepends=True)
    assert b'purpose="create_instance"' in lines[CREATE_LINE - 1]
    lines[CREATE_LINE - 1] = lines[CREATE_LINE - 1][:cut] + b"\n"
    (d / "dpc.log").write_bytes(b"".join(lines))
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert "skipped 1\n" in r.stderr and "cut short" in r.stderr
    r = run(str(d), "--strict", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{d / 'dpc.log'}:{CREATE_LINE}: skipped: " in r.stderr and "cut short" in r.stderr
    assert "--strict: 1 line(s) skipped" in r.stderr


def test_cr_only_line_ends_give_the_same_traces_and_are_noted(tmp_path: Path, clean_otlp_env) -> None:
    d = _sample_copy(tmp_path)
    want = run(str(d), "-q", "--out", str(tmp_path / "lf.jsonl"))
    assert want.exit_code == 0
    (d / "dpc.log").write_bytes((d / "dpc.log").read_bytes().replace(b"\n", b"\r"))
    r = run(str(d), "--strict", "--out", str(tmp_path / "cr.jsonl"))
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "cr.jsonl").read_bytes() == (tmp_path / "lf.jsonl").read_bytes()
    assert "dpc.log: read 209," in r.stderr
    assert "note: 208 carriage return(s) inside a line, read as line ends" in r.stderr


def test_two_pods_with_one_uid_are_never_merged(tmp_path: Path, clean_otlp_env) -> None:
    d = _sample_copy(tmp_path)
    base = run(str(d), "-q", "--out", str(tmp_path / "base.jsonl"))
    assert base.exit_code == 0
    events = (d / "pods.json").read_text().splitlines()
    first = next(json.loads(e) for e in events if CREATE_UID in e)
    twin = first["object"]
    twin["metadata"]["name"] = "someone-else"
    twin["metadata"]["namespace"] = "elsewhere"
    (d / "pods.json").write_text("\n".join([*events, json.dumps(first)]) + "\n")
    r = run(str(d), "--strict", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert (tmp_path / "o.jsonl").read_bytes() == (tmp_path / "base.jsonl").read_bytes()
    assert "not traced: 1 Pod object(s) have the uid of another Pod" in r.stderr
    assert (
        # the appended twin is line len(events) + 1 (1-based: the line, not the event's index)
        f"{d / 'pods.json'}:{len(events) + 1}: not traced: Pod shares its uid: elsewhere/someone-else"
        in r.stderr
    )
    assert "--strict: 1 read but not traced" in r.stderr


def test_a_dpc_line_naming_no_pod_is_counted_and_fails_strict(tmp_path: Path, clean_otlp_env) -> None:
    d = _sample_copy(tmp_path)
    lines = (d / "dpc.log").read_bytes().splitlines(keepends=True)
    bad = CREATE_UID.replace("68ef8f5f", "68ef8f5e")
    lines[CREATE_LINE - 1] = lines[CREATE_LINE - 1].replace(CREATE_UID.encode(), bad.encode())
    (d / "dpc.log").write_bytes(b"".join(lines))
    r = run(str(d), "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 0
    assert (
        "not traced: 1 requester(s) in the DPC log have no Pod in the capture (1 DPC line(s) name them"
        in r.stderr
    )
    r = run(str(d), "--strict", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1
    assert f"{d / 'dpc.log'}:{CREATE_LINE}: not traced: names a requester: uid {bad}" in r.stderr


@pytest.mark.parametrize(
    "line",
    [
        # a header date no year has: the year resolver raises ValueError
        b'I0230 14:40:00.000000       1 x.go:1] "Bound server-providing Pod" serverUID="u" name="l"\n',
        # a --timestamps prefix that is no time
        b'2026-13-45T99:00:00Z I0629 14:40:00.000000       1 x.go:1] "Bound server-providing Pod" serverUID="u"\n',
        # a wanted call whose start is no time
        b'I0629 14:40:00.000000       1 x.go:1] "HTTP call done" purpose="wake" httpCallStartTime="2026-06-29 at noon"'
        b" latencySecs=0.1 statusCode=200 err=null\n",
    ],
)
def test_a_wanted_line_with_a_bad_time_is_a_counted_skip(tmp_path: Path, clean_otlp_env, line: bytes) -> None:
    d = _sample_copy(tmp_path)
    with (d / "dpc.log").open("ab") as fh:
        fh.write(line)
    r = run(str(d), "--strict", "--out", str(tmp_path / "o.jsonl"))
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    assert f"{d / 'dpc.log'}:210: skipped: " in r.stderr
    assert "--strict: 1 line(s) skipped" in r.stderr
