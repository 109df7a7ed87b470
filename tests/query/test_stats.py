"""Percentiles and hit rates against hand-computed values."""

from __future__ import annotations

import pytest

from fma_otel.model import COLD_NO_FMA, HOT
from fma_otel.query.harvest import Harvest
from fma_otel.query.sources import FileSource
from fma_otel.query.stats import build_report, merged, nearest_rank, summarize
from fma_otel.query.window import Window, from_ns

from .gen import BASE_NS, S, hot, write


def report_of(path: str, window: Window | None = None):
    h = Harvest()
    FileSource(path).fill(h, window or Window())
    return build_report(h.dataset(window))


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (list(range(1, 11)), {50: 5, 90: 9, 95: 10, 99: 10}),
        (list(range(1, 21)), {50: 10, 90: 18, 95: 19, 99: 20}),  # 20*95/100 = 19 exactly
        ([2, 2, 2, 5], {50: 2, 90: 5, 95: 5, 99: 5}),  # ties
        ([7], {50: 7, 90: 7, 95: 7, 99: 7}),  # n = 1
        (list(range(1, 101)), {50: 50, 90: 90, 95: 95, 99: 99}),
    ],
)
def test_nearest_rank(values, expected):
    for p, want in expected.items():
        assert nearest_rank(values, p) == want


def test_nearest_rank_empty_raises_and_summary_is_none():
    with pytest.raises(ValueError):
        nearest_rank([], 50)
    row = summarize("T_actuation", HOT, [])
    assert row.n == 0 and row.p50 is None and row.mean is None


def test_report_from_generated_file(mixed_file):
    rep = report_of(mixed_file)
    rows = {(r.metric, r.path): r for r in rep.rows}
    r = rows[("T_actuation", HOT)]
    assert (r.n, r.p50, r.p90, r.p95, r.p99, r.min, r.max, r.mean) == (10, 5, 9, 10, 10, 1, 10, 5.5)
    assert r.incomplete == 2  # the two unfinished hot actuations: counted, never durations
    w = rows[("T_wake", HOT)]
    assert (w.n, w.p50, w.max, w.incomplete) == (10, 2.5, 5, 2)
    warm = rows[("T_actuation", "warm")]
    assert (warm.n, warm.p50, warm.p99, warm.mean) == (3, 21, 22, 21)
    cold = rows[("T_cold_launcher", "cold_launcher")]
    assert (cold.n, cold.p50, cold.incomplete) == (4, 55, 0)
    assert rows[("T_actuation", COLD_NO_FMA)].n == 1
    # report order follows the model's metrics, then the path order
    assert [k for k in rows][:3] == [
        ("T_actuation", "cold_launcher"),
        ("T_actuation", "warm"),
        ("T_actuation", HOT),
    ]


def test_hit_rates(mixed_file):
    h = report_of(mixed_file).hit_rates
    assert h.requesters == 20
    assert h.hot == pytest.approx(12 / 20)
    assert h.warm == pytest.approx(3 / 20)
    assert h.cold_launcher == pytest.approx(4 / 20)


def test_empty_file_gives_empty_report(tmp_path):
    p = tmp_path / "empty.jsonl"
    p.write_text("")
    rep = report_of(str(p))
    assert rep.rows == [] and rep.hit_rates.requesters == 0 and rep.hit_rates.hot is None


def test_reexport_is_idempotent(tmp_path):
    acts = [hot(f"h{i}", float(i)) for i in range(1, 4)]
    one = report_of(write(str(tmp_path / "a.jsonl"), acts))
    two = report_of(write(str(tmp_path / "b.jsonl"), acts + acts))
    assert one.rows == two.rows and one.hit_rates == two.hit_rates


def test_window_places_actuations_by_their_root(mixed_file):
    # hot h1..h10 start at 10..100 s after BASE; keep 30 s <= start < 70 s -> h3..h6
    w = Window(from_ns(BASE_NS + 30 * S), from_ns(BASE_NS + 70 * S))
    rep = report_of(mixed_file, w)
    (row,) = [r for r in rep.rows if r.metric == "T_actuation"]
    assert (row.path, row.n, row.min, row.max) == (HOT, 4, 3, 6)
    assert rep.hit_rates.requesters == 4


def test_merged_over_all_paths(mixed_file):
    rep = report_of(mixed_file)
    m = merged(rep, "T_actuation", None)
    assert m.n == 10 + 3 + 4 + 1 and m.incomplete == 2 and m.max == 60
