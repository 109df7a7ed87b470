"""vLLM log phase parser: fixtures of four message families, ranks, years, malformed lines."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fma_otel.sources.vllm_log import (
    DUPLICATES,
    PHASES,
    VllmLogParser,
    parse_vllm_log,
)

FIX = Path(__file__).parent / "fixtures" / "vllm"
NS = 1_000_000_000
STAMP = re.compile(r" (\d\d-\d\d \d\d:\d\d:\d\d) ")


def utc_ns(text: str) -> int:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` read as UTC, in ns."""
    fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in text else "%Y-%m-%d %H:%M:%S"
    return int(datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp() * 1_000_000) * 1000


def parse(name: str, year: int, utc_offset_s: int = 0):
    with open(FIX / name, "rb") as f:
        return parse_vllm_log(f, year=year, utc_offset_s=utc_offset_s)


def table(recs):
    return [(r.phase, r.line_no, r.duration_s) for r in recs]


# --------------------------------------------------------------------------- the families

V073 = [
    ("platform_detected", 1, None),
    ("api_server_setup", 2, None),
    ("engine_config", 4, None),
    ("model_load_start", 8, None),
    ("weights_download", 11, 2.418234),
    ("model_load", 14, None),  # ≤0.7 "Loading model weights took 0.1228 GB": no time
    ("memory_profile", 16, 1.52),
    ("kv_cache_size", 20, None),
    ("cuda_graph_capture", 23, 12.0),
    ("init_engine", 25, 16.02),
    ("api_server_start", 26, None),
    ("api_server_up", 31, None),
    ("sleep_request", 33, None),
    ("sleep", 34, 1.834512),
    ("wake_request", 36, None),
    ("wake", 37, 0.912345),
]

V0101 = [
    ("platform_detected", 1, None),
    ("api_server_setup", 2, None),
    ("engine_config", 7, None),
    ("model_load_start", 12, None),
    ("weights_download", 17, 40.118813),
    ("weights_load", 20, 3.35),
    ("model_load", 22, 44.902113),
    ("dynamo_transform", 25, 7.52),
    ("inductor_compile", 28, 30.41),
    ("torch_compile", 30, 37.93),
    ("kv_cache_memory", 32, None),
    ("kv_cache_size", 34, None),
    ("cuda_graph_capture", 37, 6.0),
    ("init_engine", 39, 54.28),
    ("api_server_start", 42, None),
    ("api_server_up", 47, None),
    ("sleep", 52, 2.641178),
    ("wake_request", 54, None),
    ("wake", 55, 2.803413),
]

V0260 = [
    ("process_start", 1, None),
    ("platform_detected", 2, None),
    ("api_server_setup", 5, None),
    ("engine_config", 13, None),
    ("model_load_start", 15, None),
    ("weights_load", 16, 0.41),
    ("model_load", 17, 2.513408),
    ("dynamo_transform", 19, 4.12),
    ("compile_cache_load", 20, 1.284),
    ("torch_compile", 21, 5.87),
    ("profiling_run", 22, 0.93),
    ("kv_cache_memory", 23, None),
    ("kv_cache_size", 24, None),
    ("cuda_graph_capture", 28, 5.0),
    ("init_engine", 30, 13.91),
    ("api_server_start", 32, None),
    ("api_server_up", 37, None),
    ("sleep", 41, 1.204551),
    ("wake_request", 43, None),
    ("wake", 44, 1.873262),
]

V0340 = [
    ("platform_detected", 1, None),
    ("api_server_setup", 2, None),
    ("engine_config", 4, None),
    ("model_load_start", 5, None),
    ("model_init", 7, 0.812344),
    ("weights_load", 10, 5.91),
    ("model_load", 11, 7.113408),
    ("torch_compile_start", 13, None),
    ("dynamo_transform", 14, 5.58),
    ("inductor_compile", 15, 15.44),
    ("torch_compile", 16, 22.69),
    ("profiling_run", 17, 1.31),
    ("kv_cache_memory", 18, None),
    ("kv_cache_size", 19, None),
    ("cuda_graph_capture", 21, 5.0),
    ("init_engine", 23, 31.07),
    ("api_server_start", 25, None),
    ("api_server_up", 29, None),
    ("sleep", 33, 2.004913),
    ("wake_request", 35, None),
    ("wake", 36, 1.44312),
]


@pytest.mark.parametrize(
    ("name", "year", "offset", "expected", "duplicates"),
    [
        ("v0.7.3-tp2-newyear.log", 2025, 0, V073, 5),
        ("v0.10.1-tp2.log", 2025, 0, V0101, 12),
        ("v0.26.0-fma-instance.log", 2026, -7 * 3600, V0260, 0),
        ("v0.34.0-pod-tp2-timestamps.log", 2027, 0, V0340, 4),
    ],
)
def test_each_family_gives_its_phases_with_the_logged_durations(name, year, offset, expected, duplicates):
    recs, stats = parse(name, year, offset)
    assert table(recs) == expected
    assert stats.skipped == 0
    assert stats.notes.get(DUPLICATES, 0) == duplicates
    assert len(recs) == len(expected)
    assert all(r.phase in PHASES for r in recs)


@pytest.mark.parametrize(
    "name",
    [
        "v0.7.3-tp2-newyear.log",
        "v0.10.1-tp2.log",
        "v0.26.0-fma-instance.log",
        "v0.34.0-pod-tp2-timestamps.log",
    ],
)
def test_end_lies_in_the_stamps_second_and_start_is_end_minus_duration(name):
    recs, _ = parse(name, 2026)
    lines = (FIX / name).read_bytes().decode().split("\n")
    for r in recs:
        if r.phase in ("process_start", "api_server_up"):
            continue
        stamp = STAMP.search(lines[r.line_no - 1])[1]  # "MM-DD HH:MM:SS"
        year = datetime.fromtimestamp(r.end_lo_ns / NS, timezone.utc).year
        assert r.end_lo_ns == utc_ns(f"{year}-{stamp}"), (r, stamp)
        assert r.end_hi_ns == r.end_lo_ns + NS
        d = r.duration_s or 0.0
        assert r.start_lo_ns == r.end_lo_ns - round(d * NS)
        assert r.start_hi_ns == r.end_hi_ns - round(d * NS)


def test_wording_families_are_named():
    recs, _ = parse("v0.10.1-tp2.log", 2025)
    fam = {r.phase: r.family for r in recs}
    assert fam["torch_compile"] == "<=0.17"  # "takes"
    assert fam["inductor_compile"] == "0.10-0.12"  # "dynamic shape"
    assert fam["init_engine"] == "<=0.19"  # "seconds"
    assert fam["api_server_start"] == "0.9.2-0.17"
    recs, _ = parse("v0.34.0-pod-tp2-timestamps.log", 2027)
    fam = {r.phase: r.family for r in recs}
    assert fam["torch_compile"] == "0.18+"
    assert fam["init_engine"] == "0.20+"
    assert fam["api_server_setup"] == "0.15+ (one-line banner)"
    assert fam["model_load_start"] == "0.9.2+"  # MRV2: no "Starting to load model"


def test_details_carry_what_the_message_names():
    recs, _ = parse("v0.34.0-pod-tp2-timestamps.log", 2027)
    by = {r.phase: r for r in recs}
    assert by["api_server_setup"].detail == "0.34.0"
    assert by["inductor_compile"].detail == "[language_model] compile range (1, 8192)"
    assert by["torch_compile"].detail == "[language_model]"
    assert by["init_engine"].detail == "compilation: 22.69 s — language_model: 22.69 s, encoder: 0.00 s"
    assert by["wake"].detail == "['weights']"
    assert by["cuda_graph_capture"].duration_unc_s == 0.5  # "%.0f secs"
    assert by["weights_load"].duration_unc_s == pytest.approx(0.005)
    assert by["wake"].duration_unc_s == pytest.approx(5e-7)
    recs, _ = parse("v0.26.0-fma-instance.log", 2026, -7 * 3600)
    by = {r.phase: r for r in recs}
    assert by["api_server_setup"].detail == "0.26.0"  # the logo's "version" row only
    assert by["wake"].detail == "{'kv_cache', 'weights'}"
    assert by["model_load"].detail == "1.12 GiB"


# --------------------------------------------------------------------------- ranks, prefixes


def test_tensor_parallel_ranks_do_not_duplicate_and_rank_zero_is_kept():
    recs, stats = parse("v0.10.1-tp2.log", 2025)
    phases = [r.phase for r in recs]
    assert len(phases) == len(set(phases))
    assert {r.process for r in recs if r.process and "Worker" in r.process} == {"VllmWorker TP0"}
    # TP1 logged its download first (line 16) but rank 0's line (17) is the one kept.
    dl = next(r for r in recs if r.phase == "weights_download")
    assert (dl.line_no, dl.duration_s) == (17, 40.118813)
    recs, _ = parse("v0.34.0-pod-tp2-timestamps.log", 2027)
    cap = next(r for r in recs if r.phase == "cuda_graph_capture")
    assert (cap.process, cap.duration_s) == ("Worker_TP0", 5.0)  # not TP1's 6 secs
    recs, _ = parse("v0.7.3-tp2-newyear.log", 2025)
    cap = next(r for r in recs if r.phase == "cuda_graph_capture")
    assert cap.duration_s == 12.0  # the driver's, not VllmWorkerProcess's 13


@pytest.mark.parametrize(
    ("process", "kept"),
    [
        ("Worker_TP0", True),
        ("Worker_PP1_TP0", False),
        ("Worker_DP0_PP0_TP0_EP0", True),
        ("Worker_TP0_EP3", False),
        ("VllmWorker rank=0", True),
        ("VllmWorker rank=2", False),
        ("VllmWorkerProcess", False),
        ("EngineCore_DP1", False),
        ("EngineCore_1", False),
        ("EngineCore", True),
        ("ApiServer_1", False),
        ("Worker", True),
    ],
)
def test_rank_rule(process, kept):
    p = VllmLogParser(year=2026)
    out = p.feed(
        f"({process} pid=7) INFO 03-01 10:00:26 [default_loader.py:330] Loading weights took 5.91 seconds"
    )
    assert bool(out) is kept
    assert p.stats.notes.get(DUPLICATES, 0) == (0 if kept else 1)


def test_ansi_and_carriage_returns_are_stripped():
    recs, stats = parse("v0.10.1-tp2.log", 2025)
    assert all("\x1b" not in (r.process or "") for r in recs)
    assert stats.read == 56  # physical lines; the tqdm line with \r segments counts once


def test_timestamps_prefix_is_kept_apart_never_used_as_the_instant():
    recs, _ = parse("v0.34.0-pod-tp2-timestamps.log", 2027)
    wake = next(r for r in recs if r.phase == "wake")
    assert wake.prefix_ns == utc_ns("2027-03-01 10:07:31.450000")
    assert wake.end_lo_ns == utc_ns("2027-03-01 10:07:31")
    up = next(r for r in recs if r.phase == "api_server_up")
    assert up.prefix_ns == utc_ns("2027-03-01 10:00:58.530000")


# --------------------------------------------------------------------------- time


def test_year_boundary_rolls_over_to_the_next_year():
    recs, _ = parse("v0.7.3-tp2-newyear.log", 2025)
    by = {r.phase: r for r in recs}
    assert by["weights_download"].end_lo_ns == utc_ns("2025-12-31 23:59:59")
    assert by["model_load"].end_lo_ns == utc_ns("2026-01-01 00:00:01")
    assert by["wake"].end_lo_ns == utc_ns("2026-01-01 00:02:01")
    # start = end - duration may cross back into the old year
    assert by["weights_download"].start_lo_ns == utc_ns("2025-12-31 23:59:56.581766")


def test_a_late_rank_line_from_the_old_year_stays_in_the_old_year():
    p = VllmLogParser(year=2025)
    a = p.feed("(EngineCore pid=1) INFO 01-01 00:00:00 [core.py:1] It took 1.000000 seconds to fall asleep.")
    b = p.feed(
        "(Worker_TP0 pid=2) INFO 12-31 23:59:59 [default_loader.py:1] Loading weights took 1.00 seconds"
    )
    c = p.feed(
        "(EngineCore pid=1) INFO 01-01 00:00:02 [core.py:1] It took 1.000000 seconds to wake up tags None."
    )
    # the first stamp takes the year parameter; the next ones the nearest year
    assert a[0].end_lo_ns == utc_ns("2025-01-01 00:00:00")
    assert b[0].end_lo_ns == utc_ns("2024-12-31 23:59:59")
    assert c[0].end_lo_ns == utc_ns("2025-01-01 00:00:02")


def test_utc_offset_and_the_launchers_full_date_line():
    recs, _ = parse("v0.26.0-fma-instance.log", 1999, -7 * 3600)  # the launcher's date wins
    by = {r.phase: r for r in recs}
    ps = by["process_start"]
    assert (ps.end_lo_ns, ps.end_hi_ns) == (
        utc_ns("2026-06-29 14:36:20.511"),
        utc_ns("2026-06-29 14:36:20.512"),
    )
    assert ps.detail == "412"
    assert by["engine_config"].end_lo_ns == utc_ns("2026-06-29 14:36:38")


def test_uvicorn_line_is_bounded_below_by_the_previous_stamp_only():
    recs, _ = parse("v0.26.0-fma-instance.log", 2026, -7 * 3600)
    up = next(r for r in recs if r.phase == "api_server_up")
    assert up.end_lo_ns == utc_ns("2026-06-29 14:36:59")
    assert up.end_hi_ns is None and up.start_hi_ns is None
    assert up.process == "APIServer"


def test_uvicorn_line_before_any_stamp_is_a_counted_skip():
    p = VllmLogParser(year=2026)
    assert p.feed("INFO:     Application startup complete.") == []
    assert p.stats.skipped_lines == [(1, "uvicorn 'Application startup complete.' before any dated line")]


def test_impossible_stamp_is_a_counted_skip():
    p = VllmLogParser(year=2025)
    out = p.feed("INFO 02-30 10:00:00 [x.py:1] Loading weights took 1.00 seconds")
    assert out == []
    assert p.stats.skipped == 1 and p.stats.skipped_lines[0][0] == 1


def test_a_line_whose_two_cr_segments_are_skipped_counts_once_and_lists_both():
    p = VllmLogParser(year=2025)
    seg = "INFO 02-30 10:00:0{} [x.py:1] Loading weights took 1.00 seconds"
    assert p.feed(seg.format(1) + "\r" + seg.format(2)) == []
    assert (p.stats.read, p.stats.skipped, p.stats.understood) == (1, 1, 0)
    assert [n for n, _ in p.stats.skipped_lines] == [1, 1]
    assert p.feed(seg.format(3)) == []
    assert (p.stats.read, p.stats.skipped, p.stats.understood) == (2, 2, 0)


def test_a_line_of_two_unknown_dated_segments_is_ignored_once():
    p = VllmLogParser(year=2025)
    assert p.feed("INFO 03-01 10:00:00 [x.py:1] one\rINFO 03-01 10:00:01 [x.py:1] two") == []
    assert (p.stats.read, p.stats.understood, p.stats.ignored) == (1, 0, 1)


def test_each_line_counts_once_understood_ignored_or_skipped():
    """read = understood + ignored + skipped, as for the DPC and launcher logs (an ignored
    line was counted as understood too: "read 37, understood 37, ignored 17")."""
    p = VllmLogParser(year=2026)
    phase = "INFO 03-01 10:00:26 [x.py:1] Loading weights took 5.91 seconds"
    unknown = "INFO 03-01 10:00:27 [x.py:2] something else"
    undated = "an undated line"
    malformed = "INFO 03-01 10:00:28 [x.py:3] Loading weights took many seconds"
    for line in (phase, unknown, undated, "", "(APIServer pid=1) ", malformed):
        p.feed(line)
    p.feed(unknown + "\r" + phase.replace("03-01", "03-02"))  # a phase in it: understood
    p.feed(unknown + "\r" + undated)  # only unknown segments: ignored once
    p.feed(unknown + "\r" + malformed)  # a skipped segment: skipped
    st = p.stats
    assert (st.read, st.understood, st.ignored, st.skipped) == (9, 4, 3, 2)


def test_feb_29_takes_the_leap_year_near_the_anchor():
    p = VllmLogParser(year=2024)
    out = p.feed("INFO 02-29 10:00:00 [x.py:1] Loading weights took 1.00 seconds")
    assert out[0].end_lo_ns == utc_ns("2024-02-29 10:00:00")


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="year"):
        VllmLogParser(year=0)
    with pytest.raises(ValueError, match="utc_offset_s"):
        VllmLogParser(year=2026, utc_offset_s=86400)


# --------------------------------------------------------------------------- unknown, malformed


def test_unknown_format_yields_no_record():
    recs, stats = parse("unknown-format.log", 2025)
    assert recs == []
    assert (stats.read, stats.understood, stats.ignored, stats.skipped) == (7, 0, 7, 0)


@pytest.mark.parametrize(
    "msg",
    [
        "Loading weights took abc seconds",
        "Loading weights took 3.35 minutes",
        "It took -1.000000 seconds to wake up tags None.",
        "Model loading took 7.6 TiB and 3 seconds",
        "torch.compile takes nan s in total",
        "init engine (profile, create kv cache, warmup model) took 3.1 hours",
    ],
)
def test_malformed_known_message_is_a_counted_skip_with_its_line(msg):
    p = VllmLogParser(year=2026)
    p.feed("INFO 03-01 10:00:00 [x.py:1] Something else")
    assert p.feed(f"INFO 03-01 10:00:01 [x.py:2] {msg}") == []
    assert p.stats.skipped == 1
    assert p.stats.skipped_lines[0][0] == 2
    assert "malformed" in p.stats.skipped_lines[0][1]
    assert p.stats.ignored == 1


def test_logo_rows_without_a_version_are_not_malformed():
    recs, stats = parse("v0.26.0-fma-instance.log", 2026)
    assert stats.skipped == 0
    assert [r.line_no for r in recs if r.phase == "api_server_setup"] == [5]


def test_incremental_feed_equals_offline_parse():
    data = (FIX / "v0.10.1-tp2.log").read_bytes().splitlines(keepends=True)
    offline, _ = parse_vllm_log(data, year=2025)
    p = VllmLogParser(year=2025)
    live = []
    for i in range(0, len(data), 7):  # as a growing file: a few lines at a time
        for line in data[i : i + 7]:
            live.extend(p.feed(line))
    assert live == offline


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=20))
def test_arbitrary_text_never_raises(lines):
    recs, stats = parse_vllm_log(lines, year=2026)
    assert stats.read == len(lines) and stats.understood == stats.read - stats.skipped - stats.ignored
    assert min(stats.understood, stats.ignored, stats.skipped) >= 0
    assert all(r.phase in PHASES for r in recs)


def test_a_torn_line_goes_back_to_the_rank_that_was_torn():
    p = VllmLogParser(year=2026)
    a = p.feed(
        "(Worker_TP2 pid=12) (Worker_TP0 pid=10) INFO 03-01 10:00:26 [x.py:1] Loading weights took 5.91 seconds"
    )
    b = p.feed("INFO 03-01 10:00:26 [x.py:1] Loading weights took 5.97 seconds")
    c = p.feed("INFO 03-01 10:00:27 [x.py:2] Model loading took 7.52 GiB memory and 7.113408 seconds")
    assert [(r.process, r.duration_s) for r in a] == [("Worker_TP0", 5.91)]
    assert b == [] and p.stats.notes == {DUPLICATES: 1}  # TP2's text, not a second weights_load
    assert [r.process for r in c] == [None]  # only the line right after the torn one


def test_rankless_worker_names_keep_the_first_pid():
    p = VllmLogParser(year=2025)
    lines = [
        "(RayWorkerWrapper pid=304442) INFO 07-25 02:39:40 [gpu_model_runner.py:1782] Model loading took 13.9902 GiB and 5.912311 seconds",
        "(RayWorkerWrapper pid=304431) INFO 07-25 02:39:41 [gpu_model_runner.py:1782] Model loading took 13.9902 GiB and 5.940045 seconds",
        "(RayWorkerWrapper pid=304442) INFO 07-25 02:39:53 [monitor.py:34] torch.compile takes 6.89 s in total",
        "(RayWorkerWrapper pid=304431) INFO 07-25 02:39:53 [monitor.py:34] torch.compile takes 6.95 s in total",
        "(EngineCore_0 pid=3000) INFO 07-25 02:40:20 [core.py:214] init engine (profile, create kv cache, warmup model) took 30.10 seconds",
    ]
    recs = [r for line in lines for r in p.feed(line)]
    assert [(r.phase, r.duration_s) for r in recs] == [
        ("model_load", 5.912311),
        ("torch_compile", 6.89),
        ("init_engine", 30.10),
    ]
    assert p.stats.notes == {DUPLICATES: 2}


@pytest.mark.parametrize(
    ("line", "phase", "duration", "process"),
    [
        (  # docker compose prefixes each line with the service name
            "voxtral-tts-provider  | (EngineCore pid=884) INFO 03-29 18:56:46 [core.py:281] "
            "init engine (profile, create kv cache, warmup model) took 0.42 seconds",
            "init_engine",
            0.42,
            "EngineCore",
        ),
        (
            "(RayWorkerWrapper pid=304442) INFO 07-25 02:39:52 [backends.py:155] "
            "Directly load the compiled graph(s) for shape None from the cache, took 0.501 s",
            "compile_cache_load",
            0.501,
            "RayWorkerWrapper",
        ),
        (
            "(EngineCore_DP0 pid=685) INFO 05-13 12:02:31 [abstract.py:330] "
            "It took 0.005755 seconds to wake up tags {'weights', 'kv_cache'}.",
            "wake",
            0.005755,
            "EngineCore_DP0",
        ),
        (
            "INFO 11-03 15:47:45 [model_runner.py:1671] Graph capturing finished in 2 secs, took 0.11 GiB",
            "cuda_graph_capture",
            2.0,
            None,
        ),
        (
            "INFO 11-03 15:47:45 [model_runner.py:1] Graph capturing finished in 12 secs.",
            "cuda_graph_capture",
            12.0,
            None,
        ),
        (
            "(Worker_TP1 pid=1806414) INFO 10-23 15:14:25 [backends.py:550] Dynamo bytecode transform time: 6.75 s",
            None,
            None,
            None,
        ),
    ],
)
def test_real_pasted_lines(line, phase, duration, process):
    p = VllmLogParser(year=2025)
    out = p.feed(line)
    if phase is None:
        assert out == [] and p.stats.notes == {DUPLICATES: 1}
        return
    assert [(r.phase, r.duration_s, r.process) for r in out] == [(phase, duration, process)]


def test_years_stay_in_range_whatever_the_stamps():
    # 01 -> 09 -> 05 -> 01 ...: each stamp is nearest four months *back*, so the anchor walks
    # back a year every three lines until it would leave the supported range.
    p = VllmLogParser(year=1972, utc_offset_s=50000)
    recs = []
    for i in range(15):
        stamp = ("01-15", "09-15", "05-15")[i % 3]
        recs += p.feed(f"INFO {stamp} 12:00:00 [x.py:1] It took 1.000000 seconds to fall asleep.")
    recs += p.feed("9999-12-31 23:59:59,999 - __main__ - INFO - VLLM process (PID: 1) started.")
    years = {datetime.fromtimestamp(r.end_lo_ns / NS, timezone.utc).year for r in recs}
    assert min(years) == 1971 and all(r.phase == "sleep" for r in recs)
    assert p.stats.skipped > 0 and len(recs) + p.stats.skipped == 16
    with pytest.raises(ValueError, match="year out of range"):
        VllmLogParser(year=9999)


def test_timestamps_prefix_is_read_by_the_one_rfc3339_grammar():
    """The prefix is klog's ``--timestamps`` prefix, read by the same function: ``t``/``z``
    are RFC3339 too (once not removed, so the undated uvicorn line was lost), and a prefix
    that grammar rejects (outside the window) leaves the line whole, its dated vLLM
    message still read."""
    p = VllmLogParser(year=2027)
    line = (
        "9999-03-01T10:05:00Z (EngineCore pid=90) INFO 03-01 10:05:00 [abstract.py:330]"
        " It took 2.004913 seconds to fall asleep."
    )
    (asleep,) = p.feed(line)
    assert asleep.prefix_ns is None and asleep.end_lo_ns == utc_ns("2027-03-01 10:05:00")
    (up,) = p.feed("2027-03-01t10:05:00.53z INFO:     Application startup complete.\n")
    assert (up.phase, up.prefix_ns) == ("api_server_up", utc_ns("2027-03-01 10:05:00.530000"))
