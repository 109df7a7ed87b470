"""Kubernetes Events parser: core/v1 and events.k8s.io/v1 Lists, watch streams, bad items."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel import timeutil
from fma_otel.sources.k8s_events import (
    KNOWN,
    UNPARSED,
    parse_event_item,
    parse_events,
    parse_go_duration,
    rfc3339_time,
)
from fma_otel.sources.records import SourceStats

FIX = Path(__file__).parent / "fixtures" / "events"
NS = 1_000_000_000


def utc_ns(text: str) -> int:
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if "." in text else "%Y-%m-%dT%H:%M:%SZ"
    return int(datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp() * 1_000_000) * 1000


def load(name: str):
    return parse_events((FIX / name).read_bytes())


LAUNCHER_UID = "5b1f3c52-8f1d-4a53-9c8e-0f3a7b7d2e11"


def test_core_v1_list_launcher_startup():
    recs, st = load("core-v1-list.json")
    assert [(r.index, r.reason) for r in recs] == [
        (0, "Scheduled"),
        (1, "Pulling"),
        (2, "Pulled"),
        (3, "Created"),
        (4, "Started"),
        (5, "Unhealthy"),
        (6, "Pulled"),
        (7, "LauncherStuck"),
        (8, "other"),
    ]
    assert (st.read, len(recs), st.understood, st.skipped) == (13, 9, 9, 4)
    sched, pulling, pulled, created, started, unhealthy, present, stuck, other = recs
    assert all(r.api == "v1" and r.watch_type == "LISTED" for r in recs)
    # the scheduler's eventTime: microseconds, an upper bound for L.scheduled
    assert (sched.first_ns, sched.first_prec_ns) == (utc_ns("2026-06-29T14:35:41.118264Z"), 1000)
    assert sched.component == "default-scheduler"
    assert (sched.object_kind, sched.object_name, sched.object_uid, sched.object_namespace) == (
        "Pod",
        "launcher-qwen-7x2kd",
        LAUNCHER_UID,
        "fma",
    )
    assert sched.event_uid == "e0000001-0000-4000-8000-000000000001"
    # kubelet events: whole seconds
    assert (pulling.first_ns, pulling.first_prec_ns) == (utc_ns("2026-06-29T14:35:42Z"), NS)
    assert pulling.image == "ghcr.io/llm-d-incubation/llm-d-fast-model-actuation/launcher:v0.4.1"
    assert (pulling.component, pulling.host, pulling.container) == (
        "kubelet",
        "gpu-node-3",
        "inference-server",
    )
    assert (pulled.pull_s, pulled.pull_waiting_s, pulled.image_size) == (31.874, 31.874, 9876543210)
    assert pulled.image == pulling.image and not pulled.image_present
    assert created.container == "inference-server" and started.container == "inference-server"
    assert started.first_ns == utc_ns("2026-06-29T14:36:15Z")
    # a repeated event: count, first and last
    assert (unhealthy.count, unhealthy.type) == (3, "Warning")
    assert (unhealthy.first_ns, unhealthy.last_ns) == (
        utc_ns("2026-06-29T14:36:17Z"),
        utc_ns("2026-06-29T14:36:19Z"),
    )
    assert present.image_present and present.pull_s is None and present.container == "notifier"
    assert (stuck.component, stuck.type) == ("launcher-populator", "Warning")
    assert "stuck_scheduling" in stuck.message
    assert (other.raw_reason, other.object_kind) == ("SuccessfulCreate", "ReplicaSet")


def test_core_v1_bad_items_are_counted_skips_with_their_index():
    """Each skip names its item's index and is reported at the line where the item starts
    (the reader is pod_json's, which knows lines): ``--strict`` says ``events.json:LINE``,
    as for Pods, not the index as if it were a line."""
    _, st = load("core-v1-list.json")
    at = [line for line, _ in st.skipped_lines]
    assert at == [203, 214, 224, 232]
    assert [why.split(":")[0] for _, why in st.skipped_lines] == [f"Event item {i}" for i in (9, 10, 11, 12)]
    assert all(why.endswith(f"(line {line})") for line, why in st.skipped_lines)
    reasons = {
        i: why.partition(": ")[2] for i, (_, why) in zip((9, 10, 11, 12), st.skipped_lines, strict=True)
    }
    lines = (FIX / "core-v1-list.json").read_text().splitlines()
    assert reasons[9] == "Event without involvedObject/regarding (line 203)"
    assert lines[202] == "        {" and '"name": "broken.1"' in lines[209]
    assert "$.count" in reasons[10]
    assert reasons[11] == "Event without eventTime, firstTimestamp or lastTimestamp (line 224)"
    assert "not an RFC3339 time (no such date): '2026-13-29T14:35:45Z'" in reasons[12]


def test_events_k8s_io_v1_list():
    recs, st = load("events-v1-list.json")
    assert [r.reason for r in recs] == [
        "Scheduled",
        "Pulled",
        "Unhealthy",
        "OutdatedRoutingMetadata",
        "Killing",
        "Pulled",
    ]
    assert all(r.api == "events.k8s.io/v1" for r in recs)
    sched, pulled, unhealthy, outdated, killing, weird = recs
    assert sched.first_ns == utc_ns("2026-06-29T14:35:40.902117Z") and sched.first_prec_ns == 1000
    assert sched.object_uid == "9c4e2b7a-3333-4d4d-9e9e-1a2b3c4d5e6f"
    # a legacy kubelet event seen through the new API: deprecated* fields, 1 s
    assert (pulled.first_ns, pulled.first_prec_ns) == (utc_ns("2026-06-29T14:35:42Z"), NS)
    assert (pulled.pull_s, pulled.pull_waiting_s) == (0.512, 62.5)
    assert (pulled.component, pulled.host) == ("kubelet", "gpu-node-3")
    # series: count and the last observation, in microseconds
    assert unhealthy.count == 4
    assert (unhealthy.first_ns, unhealthy.last_ns) == (
        utc_ns("2026-06-29T14:36:40.000001Z"),
        utc_ns("2026-06-29T14:37:10.250000Z"),
    )
    assert unhealthy.last_prec_ns == 1000
    assert outdated.component == "dual-pods-controller" and outdated.type == "Warning"
    assert outdated.message.startswith("Deleting server-requesting Pod because bound launcher")
    assert killing.container == "inference-server"
    # a Pulled in no known form: kept, no duration invented, counted in a note
    assert weird.pull_s is None and not weird.image_present and weird.index == 5
    assert st.notes == {UNPARSED: 1}
    assert st.skipped == 0


def test_watch_stream_ndjson():
    recs, st = load("watch-events-v1.ndjson")
    assert [(r.index, r.watch_type, r.reason) for r in recs] == [
        (0, "ADDED", "Scheduled"),
        (1, "ADDED", "Pulling"),
        (3, "ADDED", "Pulled"),
        (6, "MODIFIED", "Unhealthy"),
    ]
    assert recs[2].pull_s == pytest.approx(0.177) and recs[2].pull_waiting_s is None
    assert (st.read, st.ignored, st.skipped) == (7, 1, 2)
    assert st.skipped_lines[0][0] == 5 and st.skipped_lines[0][1].startswith("Event item 4: ")
    assert "line 5" in st.skipped_lines[0][1]
    # the reader's message for a watch ERROR (the same as for Pods), at its line
    assert st.skipped_lines[1] == (
        6,
        "Event item 5: watch ERROR event: too old resource version: 1 (90000) (line 6)",
    )


def test_kubectl_watch_pretty_json_values_one_after_another():
    doc = json.loads((FIX / "core-v1-list.json").read_text())
    text = "".join(json.dumps(item, indent=4) + "\n" for item in doc["items"][:5])
    text += "{ not json\n"
    text += json.dumps(doc["items"][5], indent=4) + "\n"
    recs, st = parse_events(text)
    assert [r.reason for r in recs] == ["Scheduled", "Pulling", "Pulled", "Created", "Started", "Unhealthy"]
    # the reader's message for a value that is no JSON (the same as for Pods), with its line
    assert st.skipped_lines == [
        (
            144,
            "Event item 5: malformed JSON object: JSON is malformed: object keys must be strings (byte 2) (line 144)",
        )
    ]


def test_single_event_object_and_list_of_events():
    doc = json.loads((FIX / "core-v1-list.json").read_text())
    recs, _ = parse_events(json.dumps(doc["items"][2]))
    assert [r.reason for r in recs] == ["Pulled"]
    recs, _ = parse_events(json.dumps(doc["items"][:2]))
    assert [r.reason for r in recs] == ["Scheduled", "Pulling"]


@pytest.mark.parametrize(
    "item",
    [
        "a string",
        42,
        None,
        {"reason": "Started"},
        {"involvedObject": {"kind": "Pod"}, "firstTimestamp": "2026-06-29T14:35:42Z"},
        {"involvedObject": "pod/x", "reason": "Started", "firstTimestamp": "2026-06-29T14:35:42Z"},
        {"involvedObject": {"kind": "Pod"}, "reason": "Started", "firstTimestamp": "yesterday"},
        {
            "involvedObject": {"kind": "Pod"},
            "reason": "Started",
            "firstTimestamp": "2026-06-29T14:35:42Z",
            "count": -1,
        },
        {
            "regarding": {"kind": "Pod"},
            "reason": "Started",
            "eventTime": "2026-06-29T14:35:42.1Z",
            "series": [],
        },
    ],
)
def test_malformed_items_never_raise(item):
    recs, st = parse_events(json.dumps({"kind": "List", "items": [item]}))
    assert recs == [] and st.skipped == 1 and st.skipped_lines[0][0] == 1  # the file's line 1


def test_count_zero_means_unset():
    item = {
        "involvedObject": {"kind": "Pod"},
        "reason": "Started",
        "firstTimestamp": "2026-06-29T14:35:42Z",
        "count": 0,
    }
    recs, _ = parse_events(json.dumps(item))
    assert recs[0].count == 1


def test_garbage_input_is_a_counted_skip():
    recs, st = parse_events(b"\xff\xfe not json at all")
    assert recs == [] and st.skipped == 1


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1.661s", 1.661),
        ("313ms", 0.313),
        ("1m2.5s", 62.5),
        ("1h0m0s", 3600.0),
        ("250us", 250e-6),
        ("0s", 0.0),
    ],
)
def test_go_durations(text, seconds):
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "1.5", "s", "1.5x", "-1s", "1s 2s"])
def test_bad_go_durations(text):
    with pytest.raises(ValueError, match="not a Go duration"):
        parse_go_duration(text)


def test_known_reasons_are_the_documented_ones():
    assert {"Scheduled", "Pulling", "Pulled", "Created", "Started", "Killing"} <= KNOWN
    assert {"LauncherStuck", "OutdatedRoutingMetadata"} <= KNOWN


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
_event_like = st.fixed_dictionaries(
    {},
    optional={
        "reason": st.sampled_from(["Pulled", "Scheduled", "Started", "Zzz"]) | _json,
        "involvedObject": st.fixed_dictionaries(
            {}, optional={"kind": _json, "uid": _json, "fieldPath": _json}
        )
        | _json,
        "regarding": st.fixed_dictionaries({}, optional={"kind": _json, "name": _json}),
        "firstTimestamp": st.sampled_from(["2026-06-29T14:35:42Z", "2026-02-30T00:00:00Z", ""]) | _json,
        "eventTime": st.sampled_from(["2026-06-29T14:35:42.123456Z", "0000-01-01T00:00:00Z"]) | _json,
        "series": st.fixed_dictionaries({}, optional={"count": _json, "lastObservedTime": _json}) | _json,
        "count": st.integers(min_value=-(2**70), max_value=2**70) | _json,
        "message": st.sampled_from(
            ['Successfully pulled image "x" in 1h2m3.5s', 'Container image "x" already present on machine']
        )
        | _json,
    },
)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(st.lists(_event_like | _json, max_size=5), st.sampled_from(["list", "ndjson", "pretty", "watch"]))
def test_arbitrary_json_never_raises(items, shape):
    if shape == "list":
        text = json.dumps({"kind": "List", "items": items})
    elif shape == "ndjson":
        text = "\n".join(json.dumps(i) for i in items)
    elif shape == "pretty":
        text = "".join(json.dumps(i, indent=2) for i in items)
    else:
        text = "\n".join(json.dumps({"type": "ADDED", "object": i}) for i in items)
    recs, st_ = parse_events(text)
    assert st_.understood == len(recs) + st_.ignored  # a bookmark is understood and ignored
    assert st_.read == st_.understood + st_.skipped
    assert all(r.reason in KNOWN or r.reason == "other" for r in recs)


def test_live_items_one_at_a_time_equal_the_stream():
    lines = (FIX / "watch-events-v1.ndjson").read_text().splitlines()
    stream, _ = load("watch-events-v1.ndjson")
    stats = SourceStats("events")
    live = []
    for i, line in enumerate(lines):
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            stats.read += 1
            continue
        if ev["type"] in ("BOOKMARK", "ERROR"):  # the live watch's own (live.pods.PodWatcher)
            stats.read += 1
            continue
        rec = parse_event_item(ev["object"], stats, index=i, watch_type=ev["type"])
        if rec is not None:
            live.append(rec)
    assert live == stream
    assert (stats.read, stats.understood, stats.skipped) == (7, 4, 0)


@pytest.mark.parametrize(
    ("text", "prec"),
    [
        ("2026-06-29T14:35:42Z", NS),
        ("2026-06-29T14:35:42.118264Z", 1000),
        ("2026-06-29T14:35:42.5+02:00", 10**8),
    ],
)
def test_rfc3339_time_reads_the_one_grammar_with_its_precision(text: str, prec: int) -> None:
    assert rfc3339_time(text) == (timeutil.parse_rfc3339_ns(text), prec)


@pytest.mark.parametrize("text", ["1969-12-31T23:59:59Z", "2026-06-29T14:35:42.1234567891Z"])
def test_rfc3339_time_applies_the_window_and_the_ninth_digit_rule(text: str) -> None:
    """The same grammar as every other reader: a year outside 2000..2200 is an error (it
    was once read), and digits past the ninth are dropped (they were once an error)."""
    if text.startswith("1969"):
        with pytest.raises(ValueError, match="outside the accepted window"):
            rfc3339_time(text)
    else:
        assert rfc3339_time(text) == (timeutil.parse_rfc3339_ns(text), 1)


def test_a_list_with_a_broken_item_keeps_the_good_ones():
    """The reader of Pod JSON recovers the items around one that is no JSON (before, the
    whole List was one skip), and the skip names the line where the broken item starts."""
    doc = json.loads((FIX / "core-v1-list.json").read_text())
    doc["items"] = doc["items"][:3]
    text = json.dumps(doc, indent=4)
    second = text.index('"Pulling"')
    text = text[:second] + '"Pulling" "oops"' + text[second + len('"Pulling"') :]
    recs, st = parse_events(text)
    assert [r.reason for r in recs] == ["Scheduled", "Pulled"]
    assert [r.index for r in recs] == [0, 2]
    assert (st.read, st.understood, st.skipped) == (3, 2, 1)
    at, why = st.skipped_lines[0]
    line = int(why.rpartition("(line ")[2].rstrip(")"))
    assert at == line and why.startswith("Event item 1: malformed JSON object: ")
    assert text.splitlines()[line - 1] == "        {" and '"Pulling" "oops"' in "\n".join(
        text.splitlines()[line:]
    )


def test_an_unknown_watch_type_is_a_skip_as_for_pods():
    """A watch type the API does not have is a counted skip, as for Pods (it was once kept
    as the record's watch_type)."""
    doc = json.loads((FIX / "core-v1-list.json").read_text())
    recs, st = parse_events(json.dumps({"type": "FOO", "object": doc["items"][0]}))
    assert recs == [] and st.skipped_lines == [(1, "Event item 0: unknown watch event type 'FOO' (line 1)")]


def test_values_run_together_on_a_line_are_each_read():
    """``}{``: each value is read (as the Events' own reader once did with raw_decode);
    text after them is garbage and a broken last one a skip, each with its line."""
    doc = json.loads((FIX / "core-v1-list.json").read_text())
    text = "".join(json.dumps(i, indent=2) for i in doc["items"][:3])
    recs, st = parse_events(text)
    assert [r.reason for r in recs] == ["Scheduled", "Pulling", "Pulled"] and st.skipped == 0
    recs, st = parse_events(text + ' {"reason": \n')
    assert [r.reason for r in recs] == ["Scheduled", "Pulling", "Pulled"]
    assert st.skipped_lines[0][0] == text.count("\n") + 1 and st.skipped_lines[0][1].startswith(
        "Event item 3: malformed JSON object"
    )
    last = text.count("\n") + 1
    recs, st = parse_events(text + "  junk\n")
    assert len(recs) == 3 and st.skipped_lines == [
        (last, f"Event item 3: garbage between JSON objects (line {last})")
    ]


def test_strict_names_a_bad_event_by_its_file_line(tmp_path: Path, clean_otlp_env) -> None:
    """``bridge --strict`` names a skipped Event as ``events.json:LINE``, the line where
    its item starts (as for pods.json), not its index in the List read as a line."""
    import shutil

    from click.testing import CliRunner

    from fma_otel.bridge import sample_dir
    from fma_otel.cli import main

    d = tmp_path / "cap"
    shutil.copytree(sample_dir(), d)
    doc = json.loads((d / "events.json").read_text())
    doc["items"][0]["lastTimestamp"] = 12
    text = json.dumps(doc, indent=4)
    (d / "events.json").write_text(text)
    assert text.splitlines()[3] == "        {"  # item 0 starts on line 4
    r = CliRunner().invoke(main, ["bridge", str(d), "--strict", "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 1
    assert f"{d / 'events.json'}:4: skipped: Event item 0: not an Event: " in r.stderr
    assert "(line 4)" in r.stderr
