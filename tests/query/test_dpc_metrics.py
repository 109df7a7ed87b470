"""The DPC's fma_actuation_seconds histogram beside the traces."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from fma_otel.cli import main
from fma_otel.query import QueryError
from fma_otel.query.dpc_metrics import parse_exposition

from .gen import hot, write

SCRAPE = """\
# HELP fma_actuation_seconds [ALPHA] Time from requester container start to completion of readiness relay
# TYPE fma_actuation_seconds histogram
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot",le="0"} 0
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot",le="1"} 0
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot",le="3"} 1
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot",le="5"} 2
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot",le="+Inf"} 2
fma_actuation_seconds_sum{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot"} 6.5
fma_actuation_seconds_count{exported_namespace="a",instancesDeleted="false",isc_name="x",path="hot"} 2
fma_actuation_seconds_bucket{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot",le="0"} 0
fma_actuation_seconds_bucket{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot",le="1"} 0
fma_actuation_seconds_bucket{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot",le="3"} 0
fma_actuation_seconds_bucket{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot",le="5"} 1
fma_actuation_seconds_bucket{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot",le="+Inf"} 1
fma_actuation_seconds_count{exported_namespace="b",instancesDeleted="false",isc_name="y",path="hot"} 1
fma_actuation_seconds_bucket{exported_namespace="a",instancesDeleted="true",isc_name="x",path="cold",le="+Inf"} 1
fma_actuation_seconds_count{exported_namespace="a",instancesDeleted="true",isc_name="x",path="cold"} 1
fma_http_latency_seconds_count{purpose="wake"} 9
"""


def test_parse_sums_over_labels_and_maps_paths():
    h = parse_exposition(SCRAPE)
    assert h.count == {"hot": 3, "cold_launcher": 1}
    assert h.buckets["hot"] == {0.0: 0, 1.0: 0, 3.0: 1, 5.0: 3, float("inf"): 3}


def test_bad_exposition_line():
    with pytest.raises(QueryError, match="line 1"):
        parse_exposition('fma_actuation_seconds_bucket{path="hot",le=5} 1\n')


def test_cli_shows_agreement(tmp_path):
    # traces: hot T_actuation 2.5 s, 4 s, 4.5 s -> buckets 3:1, 5:3 like the DPC
    f = write(str(tmp_path / "t.jsonl"), [hot("a", 2.5, dpc_secs=2.4), hot("b", 4.0), hot("c", 4.5)])
    m = tmp_path / "metrics.txt"
    m.write_text(SCRAPE)
    r = CliRunner().invoke(main, ["slo", "--traces", f, "--dpc-metrics", str(m), "--format", "json"])
    assert r.exit_code == 0, r.output
    dpc = {d["path"]: d for d in json.loads(r.stdout)["dpc_metrics"]}
    assert dpc["hot"]["dpc_count"] == 3 and dpc["hot"]["trace_count"] == 3
    assert dpc["hot"]["agreement"] == 1.0
    assert dpc["hot"]["logged_count"] == 1
    assert [b["traces"] for b in dpc["hot"]["buckets"]] == [0, 0, 1, 3, 3]
    assert dpc["cold_launcher"]["trace_count"] == 0 and dpc["cold_launcher"]["agreement"] == 0.0
    table = CliRunner().invoke(main, ["slo", "--traces", f, "--dpc-metrics", str(m)])
    assert "fma_actuation_seconds" in table.stdout and "100%" in table.stdout
