"""Structural checks of the local stack (no container engine here, so nothing is run).

Every collector pipeline component is defined and wired, the spanmetrics connector joins
the traces and metrics pipelines, ports agree between docker-compose.yaml and the configs,
images are pinned, mounted files exist, and the dashboard's datasource uids match the
provisioning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fma_otel.model import A_COMPLETE, A_METRIC, A_NAMESPACE, A_PATH, METRICS
from fma_otel.query.queries import CALLS, DURATION_BUCKET

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("receivers", "processors", "exporters", "connectors", "extensions")


def load(rel: str) -> Any:
    return yaml.safe_load((ROOT / rel).read_text())


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return load("collector-config/otel-collector.yaml")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load("docker-compose.yaml")


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads((ROOT / "deploy/stack/grafana/dashboards/fma-actuation.json").read_text())


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def published(svc: dict[str, Any]) -> dict[int, int]:
    """container port -> host port."""
    out = {}
    for p in svc.get("ports", []):
        host, container = str(p).split(":")[-2:]
        out[int(container)] = int(host)
    return out


def test_every_pipeline_component_defined_and_every_defined_used(collector):
    pipes = collector["service"]["pipelines"]
    used: dict[str, set[str]] = {k: set() for k in KINDS}
    for name, p in pipes.items():
        assert p.get("receivers") and p.get("exporters"), name
        for role in ("receivers", "processors", "exporters"):
            for comp in p.get(role, []):
                kind = "connectors" if comp in (collector.get("connectors") or {}) else role
                assert comp in (collector.get(kind) or {}), f"{name}: {comp} is not defined"
                used[kind].add(comp)
    used["extensions"] = set(collector["service"].get("extensions", []))
    for kind in KINDS:
        assert set(collector.get(kind) or {}) == used[kind], kind


def test_processors_order_and_connector_wiring(collector):
    pipes = collector["service"]["pipelines"]
    for p in pipes.values():
        assert p["processors"][0] == "memory_limiter" and p["processors"][-1] == "batch"
    assert "spanmetrics" in pipes["traces"]["exporters"]
    assert "spanmetrics" in pipes["metrics"]["receivers"]
    assert "prometheus" in pipes["metrics"]["exporters"]


def test_current_exporter_names(collector):
    names = {n.split("/")[0] for n in collector["exporters"]}
    assert names == {"otlp_grpc", "prometheus", "debug"}
    assert not names & {"jaeger", "logging"}  # removed exporters


def test_spanmetrics_dimensions_and_buckets(collector):
    sm = collector["connectors"]["spanmetrics"]
    dims = [d["name"] for d in sm["dimensions"]]
    assert dims == [A_PATH, A_METRIC, A_NAMESPACE, A_COMPLETE]
    assert sm["histogram"]["unit"] == "s" and sm["namespace"] == "traces.span.metrics"
    units = {"ms": 1e-3, "s": 1, "m": 60}
    secs = [
        float(re.fullmatch(r"([\d.]+)(ms|s|m)", b)[1]) * units[re.fullmatch(r"([\d.]+)(ms|s|m)", b)[2]]
        for b in sm["histogram"]["explicit"]["buckets"]
    ]
    assert secs == sorted(secs) and secs[0] <= 1 and secs[-1] >= 600
    dpc = [1, 3, 5, 7.5, 10, 15, 30, 60, 120, 240, 480, 960, 1920]
    assert set(dpc) <= set(secs), "the DPC histogram's boundaries are all present"


def test_images_pinned_and_mounts_exist(compose):
    for name, svc in compose["services"].items():
        image = svc["image"]
        tag = image.rsplit(":", 1)[-1] if ":" in image else ""
        assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag), f"{name}: {image} is not pinned"
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if src.startswith("./"):
                assert (ROOT / src).exists(), f"{name}: {src} missing"
            else:
                assert src in compose.get("volumes", {}), f"{name}: volume {src} undeclared"
    assert compose["services"]["jaeger"]["image"].startswith("jaegertracing/jaeger:2.")
    assert compose["services"]["otel-collector"]["image"].startswith("otel/opentelemetry-collector-contrib:")


def test_collector_ports_and_targets_agree(collector, compose):
    svc = compose["services"]
    pub = published(svc["otel-collector"])
    otlp = collector["receivers"]["otlp"]["protocols"]
    assert pub[port(otlp["grpc"]["endpoint"])] == 4317 and pub[port(otlp["http"]["endpoint"])] == 4318
    assert port(collector["exporters"]["prometheus"]["endpoint"]) in pub
    tempo = load("deploy/stack/tempo.yaml")
    for exp, service in (("otlp_grpc/jaeger", "jaeger"), ("otlp_grpc/tempo", "tempo")):
        host, p = collector["exporters"][exp]["endpoint"].rsplit(":", 1)
        assert host == service and service in svc
        if service == "tempo":
            assert int(p) == port(tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])
        else:
            assert int(p) == 4317  # Jaeger v2 all-in-one's OTLP gRPC receiver
    # the collector's own config file is the one compose mounts
    mount = svc["otel-collector"]["volumes"][0].split(":")
    assert mount[0] == "./collector-config/otel-collector.yaml"
    assert any(mount[1] in c for c in svc["otel-collector"]["command"])


def test_tempo_accepts_backfilled_spans_and_ports(compose):
    tempo = load("deploy/stack/tempo.yaml")
    assert published(compose["services"]["tempo"])[tempo["server"]["http_listen_port"]] == 3200
    slack = tempo["storage"]["trace"]["wal"]["ingestion_time_range_slack"]
    assert slack.endswith("h") and int(slack[:-1]) >= 24
    search = tempo["query_frontend"]["search"]
    assert int(search["query_ingesters_until"][:-1]) >= 24
    mount = [v for v in compose["services"]["tempo"]["volumes"] if v.startswith("./")][0].split(":")
    assert f"-config.file={mount[1]}" in compose["services"]["tempo"]["command"]


def test_prometheus_scrapes_the_collector(collector, compose):
    prom = load("deploy/stack/prometheus.yml")
    targets = [t for job in prom["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert f"otel-collector:{port(collector['exporters']['prometheus']['endpoint'])}" in targets
    assert published(compose["services"]["prometheus"])[9090] == 9090


def test_grafana_datasources_match_services(compose):
    ds = load("deploy/stack/grafana/provisioning/datasources/datasources.yaml")["datasources"]
    urls = {d["type"]: d["url"] for d in ds}
    assert urls == {
        "prometheus": "http://prometheus:9090",
        "tempo": "http://tempo:3200",
        "jaeger": "http://jaeger:16686",
    }
    for d in ds:
        host, p = d["url"].split("//")[1].split(":")
        assert int(p) in published(compose["services"][host])
    prov = load("deploy/stack/grafana/provisioning/dashboards/dashboards.yaml")
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"])
    assert mounts["./deploy/stack/grafana/dashboards"] == prov["providers"][0]["options"]["path"]
    assert mounts["./deploy/stack/grafana/provisioning"] == "/etc/grafana/provisioning"


def _uids(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("datasource"), dict) and "uid" in node["datasource"]:
            found.add(node["datasource"]["uid"])
        for v in node.values():
            found |= _uids(v)
    elif isinstance(node, list):
        for v in node:
            found |= _uids(v)
    return found


def test_dashboard_valid_and_uids_provisioned(dashboard):
    ds = load("deploy/stack/grafana/provisioning/datasources/datasources.yaml")["datasources"]
    uids = _uids(dashboard)
    assert uids and uids <= {d["uid"] for d in ds}
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    exprs = [t.get("expr", "") for p in dashboard["panels"] for t in p.get("targets", [])]
    for m in METRICS:
        for q in ("0.5", "0.95", "0.99"):
            assert any(f"histogram_quantile({q}," in e and f'fma_metric="{m}"' in e for e in exprs), (m, q)
    assert all(DURATION_BUCKET in e or CALLS in e for e in exprs if e)
    assert (
        sum(
            "Hot_hit_rate" == t.get("legendFormat") for p in dashboard["panels"] for t in p.get("targets", [])
        )
        == 1
    )
    table = next(p for p in dashboard["panels"] if p["type"] == "table")
    assert table["datasource"]["uid"] == "fma-tempo" and table["targets"][0]["queryType"] == "traceql"
