"""Tests of the capture synthesizer: the truth it claims must be what the data says.

These checks read the generated data with a deliberately small, independent reader (not the
project's parsers), so a bug in the synthesizer cannot hide behind the same bug in a parser.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.support import synth
from tests.support.synth import (
    BASELINE,
    COLD,
    HOT,
    PATHS,
    SAMPLE_DIR,
    SECRET_PREFIX,
    WARM,
    load_truth,
    stream_big_capture,
    synth_capture,
    write_capture,
)

# fma-reference §9.6
KLOG = re.compile(r"^([IWEF])(\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6}) +(\d+) ([^:\]]+):(\d+)\] (.*)$")
PREFIX_TS = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z) (.*)$")
S = 1_000_000_000
REPO = Path(__file__).resolve().parents[1]


def _rfc_ns(s: str) -> int:
    """RFC3339(Nano) to ns, exactly (no float)."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z", s)
    assert m, s
    sec = int(datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp())
    return sec * S + int((m.group(2) or "").ljust(9, "0"))


def _header_ns(line: str, year: int) -> int:
    m = KLOG.match(line)
    assert m, line
    mo, d, hh, mm, ss, us = (int(m.group(i)) for i in (2, 3, 4, 5, 6, 7))
    sec = int(datetime(year, mo, d, hh, mm, ss, tzinfo=timezone.utc).timestamp())
    return sec * S + us * 1000


def _kv(line: str, key: str) -> str | None:
    """The raw text of ``key=`` in a klog line (quoted strings keep their quotes)."""
    m = re.search(rf" {re.escape(key)}=", line)
    if not m:
        return None
    pos = m.end()
    q = re.match(r'"(?:[^"\\]|\\.)*"', line[pos:])
    if q:
        return q.group(0)
    _, end = json.JSONDecoder().raw_decode(line, pos)
    return line[pos:end]


def _str(line: str, key: str) -> str | None:
    v = _kv(line, key)
    return json.loads(v) if v is not None else None


def _dec_ns(text: str) -> int:
    return int(Decimal(text) * S)


def _asctime_ns(s: str) -> int:
    d = datetime.strptime(s, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
    return int(d.replace(microsecond=0).timestamp()) * S + d.microsecond * 1000


@pytest.fixture(scope="module")
def cap() -> synth.Capture:
    return synth_capture(6, seed=0)


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample as ``scripts/make_sample.py`` writes it, run as a user would run it."""
    d = tmp_path_factory.mktemp("sample")
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "make_sample.py"), "--out", str(d)],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return d


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write_capture(synth_capture(7, seed=11), a, timestamps=True)
    write_capture(synth_capture(7, seed=11), b, timestamps=True)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


def test_other_seed_differs() -> None:
    assert list(synth_capture(6, seed=1).dpc_lines) != list(synth_capture(6, seed=2).dpc_lines)


def test_committed_sample_is_regenerated_identically(sample_dir: Path) -> None:
    committed = sorted(
        str(p.relative_to(SAMPLE_DIR))
        for p in SAMPLE_DIR.rglob("*")
        if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts
    )
    fresh = sorted(str(p.relative_to(sample_dir)) for p in sample_dir.rglob("*") if p.is_file())
    assert committed == fresh
    for n in fresh:
        assert (SAMPLE_DIR / n).read_bytes() == (sample_dir / n).read_bytes(), (
            f"{n}: run python scripts/make_sample.py"
        )


def test_shipped_package_does_not_import_the_synthesizer() -> None:
    """The synthesizer is test code: no module of ``fma_otel`` may import or name it."""
    offenders = [
        str(p.relative_to(REPO))
        for p in sorted((REPO / "fma_otel").rglob("*.py"))
        if re.search(r"\bsynth\b", p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    assert not (REPO / "fma_otel" / "synth.py").exists()


# --------------------------------------------------------------------------- format


def test_every_dpc_line_is_klog_or_block_continuation(cap: synth.Capture) -> None:
    in_block = False
    blocks = 0
    for line in cap.dpc_lines:
        if in_block:
            if line.startswith(" >"):
                in_block = False
                continue
            assert line.startswith("\t"), line
            continue
        assert KLOG.match(line), line
        if line.endswith("=<"):
            in_block = True
            blocks += 1
    assert not in_block
    assert blocks >= 1  # noise includes a multi-line err=< block


def test_header_times_never_go_backwards(cap: synth.Capture) -> None:
    times = [_header_ns(ln, 2026) for ln in cap.dpc_lines if KLOG.match(ln)]
    assert times == sorted(times)


def test_timestamps_prefix_is_monotonic_and_removable(tmp_path: Path, cap: synth.Capture) -> None:
    write_capture(cap, tmp_path / "p", timestamps=True)
    write_capture(cap, tmp_path / "q", timestamps=False)
    for name in ["dpc.log", *(f"launcher-{n}.log" for n in cap.launcher_logs)]:
        pre = (tmp_path / "p" / name).read_text().splitlines()
        plain = (tmp_path / "q" / name).read_text().splitlines()
        stamps, bodies = zip(*(PREFIX_TS.match(ln).groups() for ln in pre), strict=True)  # type: ignore[union-attr]
        assert list(bodies) == plain
        ns = [_rfc_ns(s) for s in stamps]
        assert ns == sorted(ns)


def test_klog_value_encodings(cap: synth.Capture) -> None:
    lines = list(cap.dpc_lines)
    http = [ln for ln in lines if '"HTTP call done"' in ln]
    assert http and all(
        re.search(r" latencySecs=\d+(\.\d+)? statusCode=\d+ err=(null|\")", ln) for ln in http
    )
    assert any(' statusCode=0 err="failed to do HTTP GET \\"' in ln for ln in http)
    # the unbound-launcher context repeats node
    assert any(re.search(r' node="[^"]+" node="[^"]+"', ln) for ln in lines)
    # "Bound server-providing Pod": call-site node/instanceID replace the context copies
    for ln in (ln for ln in lines if '"Bound server-providing Pod"' in ln):
        assert ln.count(" node=") == 1 and ln.count(" instanceID=") == 1
        assert _kv(ln, "k8sCallStartTime")
    created = [ln for ln in lines if '"Created launcher-based server-providing pod"' in ln]
    assert created
    for ln in created:
        ann = json.loads(_kv(ln, "annotations") or "")
        cfg = json.loads(ann["dual-pods.llm-d.ai/vllm-config"])
        assert cfg["env_vars"]["HF_TOKEN"].startswith(SECRET_PREFIX)
        assert list(ann) == sorted(ann)
    assert any(SECRET_PREFIX in json.dumps(p) for p in cap.pods)


def test_launcher_log_lines(cap: synth.Capture) -> None:
    fmt = re.compile(
        r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3} - (__main__|gputranslator|uvicorn\.error|uvicorn\.access) - (INFO|WARNING|ERROR) - .+$"
    )
    for name, lines in cap.launcher_logs.items():
        assert lines, name
        for ln in lines:
            assert fmt.match(ln), ln
    assert any(
        "Accepted request to create vLLM instance with id=" in ln
        for v in cap.launcher_logs.values()
        for ln in v
    )


# --------------------------------------------------------------------------- scenario


def test_scenario_covers_every_path(cap: synth.Capture) -> None:
    truth = cap.truth
    assert {t.path for t in truth} == set(PATHS)
    assert len(truth) == 6
    assert sum(not t.complete for t in truth) == 1
    assert any(t.path == WARM and t.instances_deleted == 1 for t in truth)
    second = [t for t in truth if t.key.endswith("/2")]
    assert len(second) == 1 and second[0].path == HOT and second[0].dpc_actuation_secs is None
    first = next(t for t in truth if t.key == second[0].requester_uid)
    assert "R.ready" not in first.instants and "R.ready" in first.watch_instants
    # the re-actuation has no Pod instants of its own: it starts at the DPC's unbind
    assert not {"R.created", "R.scheduled", "R.started"} & set(second[0].instants)
    assert first.instants["D.relayed"] < second[0].instants["D.unbound"] < second[0].instants["D.bound"]
    inc = next(t for t in truth if not t.complete)
    assert "D.create.end" in inc.instants
    assert not {"D.serving", "D.relayed", "R.ready"} & set(inc.instants)
    base = next(t for t in truth if t.path == BASELINE)
    assert set(base.instants) == {"R.created", "R.scheduled", "R.started", "R.ready"}
    for t in truth:
        if t.complete and t.path != BASELINE and not t.key.endswith("/2"):
            assert t.dpc_actuation_secs is not None


def test_paths_argument_and_errors() -> None:
    c = synth_capture(paths=[COLD, HOT, WARM, WARM], incomplete=0, reactuated=0, noise=False)
    assert [t.path for t in c.truth] == [COLD, HOT, WARM, WARM]
    assert [t.instances_deleted for t in c.truth if t.path == WARM] == [1, 0]
    with pytest.raises(ValueError):
        synth_capture(paths=["tepid"])
    with pytest.raises(ValueError):
        synth_capture(2)


def test_plausible_durations(cap: synth.Capture) -> None:
    for t in cap.truth:
        i = t.instants
        if not t.complete:
            continue
        start = i.get("R.started", i.get("D.unbound"))
        act = (i["R.ready"] - start) / S if "R.ready" in i else None
        if t.path == COLD:
            assert 35 <= (i["D.relayed"] - i["L.created"]) / S <= 90
            assert i["L.created"] <= i["L.scheduled"] <= i["L.ready"] <= i["D.create.start"]
            assert 0 <= i["D.create.start"] - i["L.ready"] < 3 * S
        if t.path == HOT:
            assert 1 <= (i["D.wake.end"] - i["D.wake.start"]) / S <= 5
            if act is not None and not t.key.endswith("/2"):
                assert act < 15
        if t.path == WARM and act is not None:
            assert 10 < act < 45
        if "X.receipt" in i:
            assert abs(i["X.receipt"] - i["D.create.start"]) < 5_000_000
            assert i["X.receipt"] <= i["X.response"]
        if "D.relayed" in i and "R.ready" in i:
            assert 0 <= i["R.ready"] - i["D.relayed"] < 6 * S


# --------------------------------------------------------------------------- truth vs data


def _pods_by_name(cap: synth.Capture) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in cap.pods}


def _cond(pod: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == ctype), None)


def test_truth_matches_pods(cap: synth.Capture) -> None:
    pods = _pods_by_name(cap)
    for t in cap.truth:
        r = pods[t.requester_name]
        assert r["metadata"]["uid"] == t.requester_uid
        i = t.instants
        # a re-actuation's Pod instants are the first actuation's (it has none of its own)
        own = next(u for u in cap.truth if u.key == t.requester_uid).instants if t.key.endswith("/2") else i
        assert own["R.created"] == _rfc_ns(r["metadata"]["creationTimestamp"])
        assert own["R.scheduled"] == _rfc_ns(_cond(r, "PodScheduled")["lastTransitionTime"])  # type: ignore[index]
        cname = "vllm" if t.path == BASELINE else "inference-server"
        cs = next(c for c in r["status"]["containerStatuses"] if c["name"] == cname)
        assert own["R.started"] == _rfc_ns(cs["state"]["running"]["startedAt"])
        ready = _cond(r, "Ready")
        if "R.ready" in i:
            assert ready["status"] == "True" and i["R.ready"] == _rfc_ns(ready["lastTransitionTime"])  # type: ignore[index]
        if t.path == BASELINE:
            assert r["metadata"]["labels"]["app"] == "vllm" and not r["metadata"]["annotations"]
            assert len(r["spec"]["containers"]) == 1
            continue
        assert r["metadata"]["annotations"]["dual-pods.llm-d.ai/inference-server-config"] == t.isc_name
        assert t.launcher_name in pods
        lp = pods[t.launcher_name]
        assert lp["metadata"]["labels"]["dual-pods.llm-d.ai/launcher-config-name"]
        if t.complete:
            assert r["metadata"]["labels"]["dual-pods.llm-d.ai/dual"] == t.launcher_name
            assert (
                lp["metadata"]["annotations"]["dual-pods.llm-d.ai/requester"]
                == f"{t.requester_uid} {t.requester_name}"
            )
        if t.path == COLD:
            assert i["L.created"] == _rfc_ns(lp["metadata"]["creationTimestamp"])
            assert i["L.scheduled"] == _rfc_ns(_cond(lp, "PodScheduled")["lastTransitionTime"])  # type: ignore[index]
            assert i["L.ready"] == _rfc_ns(_cond(lp, "Ready")["lastTransitionTime"])  # type: ignore[index]
        else:
            assert not any(k.startswith("L.") for k in i)
    inc = next(t for t in cap.truth if not t.complete)
    assert _cond(pods[inc.requester_name], "Ready")["status"] == "False"  # type: ignore[index]


def _lines_for(cap: synth.Capture, uid: str, msg: str) -> list[str]:
    return [ln for ln in cap.dpc_lines if f'] "{msg}"' in ln and f'serverUID="{uid}"' in ln]


def test_truth_matches_dpc_and_launcher_logs(cap: synth.Capture) -> None:
    for t in cap.truth:
        if t.path == BASELINE:
            assert not _lines_for(cap, t.requester_uid, "HTTP call done")
            continue
        i = t.instants
        bound_msg = (
            "Created launcher-based server-providing pod" if t.path == COLD else "Bound server-providing Pod"
        )
        bound = _lines_for(cap, t.requester_uid, bound_msg)
        assert i["D.bound"] in [_header_ns(ln, 2026) for ln in bound]
        http = _lines_for(cap, t.requester_uid, "HTTP call done")
        if "D.create.start" in i:
            (create,) = [ln for ln in http if _str(ln, "purpose") == "create_instance"]
            start = _rfc_ns(_str(create, "httpCallStartTime") or "")
            assert i["D.create.start"] == start
            assert i["D.create.end"] == start + _dec_ns(_kv(create, "latencySecs") or "")
            assert _str(create, "url").endswith(t.instance_id)  # type: ignore[union-attr]
            log = cap.launcher_logs[t.launcher_name]  # type: ignore[index]
            acc = [ln for ln in log if ln.endswith(f"with id={t.instance_id}")]
            assert i["X.receipt"] in [_asctime_ns(ln[:23]) for ln in acc]
            puts = [ln for ln in log if f'"PUT /v2/vllm/instances/{t.instance_id} HTTP/1.1" 201' in ln]
            assert i["X.response"] in [_asctime_ns(ln[:23]) for ln in puts]
            if "D.serving" in i:
                ok = [
                    ln
                    for ln in http
                    if _str(ln, "purpose") == "query_sleeping"
                    and _kv(ln, "statusCode") == "200"
                    and _rfc_ns(_str(ln, "httpCallStartTime") or "") > i["D.create.end"]
                ]
                first = ok[0]
                assert i["D.serving"] == _rfc_ns(_str(first, "httpCallStartTime") or "") + _dec_ns(
                    _kv(first, "latencySecs") or ""
                )
                fails = [
                    ln
                    for ln in http
                    if _str(ln, "purpose") == "query_sleeping" and _kv(ln, "statusCode") == "0"
                ]
                assert fails
        if "D.wake.start" in i:
            wakes = [ln for ln in http if _str(ln, "purpose") == "wake"]
            starts = [_rfc_ns(_str(w, "httpCallStartTime") or "") for w in wakes]
            k = starts.index(i["D.wake.start"])
            assert i["D.wake.end"] == starts[k] + _dec_ns(_kv(wakes[k], "latencySecs") or "")
            hdr = _header_ns(wakes[k], 2026)
            assert 0 < hdr - i["D.wake.end"] < 100_000  # header a few µs after the end
        if "D.relayed" in i:
            rel = [
                ln
                for ln in _lines_for(cap, t.requester_uid, "Successfully relayed the readiness")
                if 'readiness="ready"' in ln
            ]
            assert i["D.relayed"] in [_header_ns(ln, 2026) for ln in rel]
            ln = next(x for x in rel if _header_ns(x, 2026) == i["D.relayed"])
            first = next(u for u in cap.truth if u.key == t.requester_uid)
            assert _str(ln, "requesterCreateTime") == synth.k8s_time(first.instants["R.created"])
        obs = _lines_for(cap, t.requester_uid, "Observed actuation latency")
        if t.dpc_actuation_secs is not None:
            assert len(obs) == 1
            assert _str(obs[0], "path") == {COLD: "cold", WARM: "warm", HOT: "hot"}[t.path]
            assert float(_kv(obs[0], "actuationSecs") or "") == t.dpc_actuation_secs
        if t.instances_deleted:
            assert _lines_for(
                cap, t.requester_uid, "Ensured vLLM instance absent to reclaim launcher capacity"
            )
    second = next(t for t in cap.truth if t.key.endswith("/2"))
    assert _lines_for(cap, second.requester_uid, "Unbound server-providing Pod")


def test_watch_form(tmp_path: Path, cap: synth.Capture) -> None:
    write_capture(cap, tmp_path, pods_form="watch")
    text = (tmp_path / "pods.json").read_text()
    dec = json.JSONDecoder()
    pos, events = 0, []
    while pos < len(text.rstrip()):
        obj, end = dec.raw_decode(text, pos)
        events.append(obj)
        pos = end
        while pos < len(text) and text[pos].isspace():
            pos += 1
    assert {e["type"] for e in events} <= {"ADDED", "MODIFIED"}
    # after the initial listing (ADDED, any order), resourceVersions only grow
    start = next(i for i, e in enumerate(events) if e["type"] == "MODIFIED")
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events[start:]]
    assert rvs == sorted(rvs)
    last = {e["object"]["metadata"]["name"]: e["object"] for e in events}
    assert last == _pods_by_name(cap)
    per_pod: dict[str, int] = {}
    for e in events:
        per_pod[e["object"]["metadata"]["name"]] = per_pod.get(e["object"]["metadata"]["name"], 0) + 1
    assert max(per_pod.values()) >= 4
    # the first actuation of the re-actuated requester: its Ready=True shows in the stream
    truth = load_truth(tmp_path / "truth.json")
    first = next(t for t in truth if any(u.key == t.key + "/2" for u in truth))
    readies = {
        _rfc_ns(c["lastTransitionTime"])
        for e in events
        if e["object"]["metadata"]["uid"] == first.requester_uid
        for c in e["object"]["status"].get("conditions", [])
        if c["type"] == "Ready" and c["status"] == "True"
    }
    assert first.instants["R.ready"] in readies


def test_truth_json_roundtrip(sample_dir: Path) -> None:
    truth = load_truth(sample_dir / "truth.json")
    from tests.support.synth import _merge_watch

    assert truth == [_merge_watch(t) for t in synth_capture(6, seed=0).truth]


# --------------------------------------------------------------------------- big captures


@pytest.mark.slow
def test_stream_big_capture_hits_target(tmp_path: Path) -> None:
    target = 1_000_000  # 3.6x what the 20 actuations write: mostly padding, as in a big capture
    t0 = time.monotonic()
    truth = stream_big_capture(tmp_path, actuations=20, target_dpc_bytes=target, seed=3)
    assert time.monotonic() - t0 < 60
    size = (tmp_path / "dpc.log").stat().st_size
    assert 0.9 * target <= size <= 1.1 * target
    assert len(truth) == 20
    assert sum(not t.complete for t in truth) == 1
    assert {t.path for t in truth} == set(PATHS)
    last = 0
    in_block = False
    with open(tmp_path / "dpc.log") as f:
        for line in f:
            line = line.rstrip("\n")
            if in_block:
                in_block = not line.startswith(" >")
                continue
            assert KLOG.match(line), line
            in_block = line.endswith("=<")
            t = _header_ns(line, 2026)
            assert t >= last
            last = t
    pods = json.loads((tmp_path / "pods.json").read_text())["items"]
    names = {p["metadata"]["name"] for p in pods}
    assert all(t.requester_name in names for t in truth)
    assert load_truth(tmp_path / "truth.json") == truth


def test_stream_big_capture_without_padding(tmp_path: Path) -> None:
    truth = stream_big_capture(tmp_path, actuations=8, target_dpc_bytes=None, seed=5, timestamps=True)
    assert len(truth) == 8
    first = (tmp_path / "dpc.log").read_text().splitlines()[0]
    assert PREFIX_TS.match(first)


def test_dense_capture_shape(tmp_path: Path) -> None:
    """Half to two thirds of the DPC lines are ones the bridge wants (their message is one it reads),
    at about the documented bytes and lines per actuation; Pods for every actuation."""
    from fma_otel.facts import MESSAGES

    n = 60
    truth = synth.dense_capture(tmp_path, n, seed=2)
    assert len(truth) == n
    data = (tmp_path / "dpc.log").read_bytes()
    lines = data.splitlines()
    msgs = [re.search(rb'\] "((?:[^"\\]|\\.)*)"', ln) for ln in lines]
    wanted = sum(1 for m in msgs if m and m.group(1).decode() in MESSAGES)
    # 0.59 before the API writes' "Set status/finalizers" and label lines were read (issue 21)
    assert 0.35 < wanted / len(lines) < 0.75
    assert 0.7 < len(data) / (n * synth.DENSE_BYTES_PER_ACTUATION) < 1.3
    assert 0.7 < len(lines) / (n * synth.DENSE_LINES_PER_ACTUATION) < 1.3
    pods = json.loads((tmp_path / "pods.json").read_text())["items"]
    assert len(pods) > n
