"""``deploy/``: the manifests say what the issue asks (one replica, least-privilege Role)."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from fma_otel.cli import main

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text())


def test_kustomization_lists_every_manifest() -> None:
    k = _load("kustomization.yaml")
    for res in k["resources"]:
        assert (DEPLOY / res).is_file(), res
    kinds = {_load(r)["kind"] for r in k["resources"]}
    assert {"Deployment", "ServiceAccount", "Role", "RoleBinding"} <= kinds
    assert (DEPLOY / "Dockerfile").is_file()


def test_role_is_read_only_on_pods_logs_and_events() -> None:
    rules = _load("role.yaml")["rules"]
    got = {(tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for r in rules}
    assert got == {
        (("",), ("pods",), ("get", "list", "watch")),
        (("",), ("pods/log",), ("get",)),
        (("",), ("events",), ("list", "watch")),
        (("events.k8s.io",), ("events",), ("list", "watch")),
    }
    assert not any("pods/proxy" in r["resources"] for r in rules)  # only in the opt-in component


def test_vllm_logs_component_adds_only_pods_proxy_and_turns_the_flag_on() -> None:
    comp = _load("vllm-logs/kustomization.yaml")
    assert comp["kind"] == "Component"
    docs = {r: _load(f"vllm-logs/{r}") for r in comp["resources"]}
    role = next(d for d in docs.values() if d["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]}]
    binding = next(d for d in docs.values() if d["kind"] == "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == _load("serviceaccount.yaml")["metadata"]["name"]
    (patch,) = comp["patches"]
    assert patch["target"]["name"] == _load("deployment.yaml")["metadata"]["name"]
    ops = yaml.safe_load(patch["patch"])
    assert ops[0]["value"] == {"name": "FMA_OTEL_VLLM_LOGS", "value": "true"}
    assert "every port of every Pod" in (DEPLOY / "vllm-logs" / "README.md").read_text()


def test_deployment_one_replica_runs_watch_with_checkpoint_on_volume() -> None:
    d = _load("deployment.yaml")
    assert d["spec"]["replicas"] == 1
    assert d["spec"]["strategy"]["type"] == "Recreate"
    c = d["spec"]["template"]["spec"]["containers"][0]
    assert c["args"][0] == "watch"
    cp = next(a for a in c["args"] if a.startswith("--checkpoint="))
    mounts = [m["mountPath"] for m in c["volumeMounts"]]
    assert any(cp.split("=", 1)[1].startswith(m) for m in mounts)
    assert (
        d["spec"]["template"]["spec"]["serviceAccountName"]
        == _load("serviceaccount.yaml")["metadata"]["name"]
    )


def test_flags_come_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    """The Deployment configures by FMA_OTEL_* variables: a bad value must be refused by name."""
    monkeypatch.setenv("FMA_OTEL_NAMESPACE", "x")
    monkeypatch.setenv("FMA_OTEL_INCOMPLETE_AFTER", "soon")
    r = CliRunner().invoke(main, ["watch"])
    assert r.exit_code == 2
    assert "not a duration" in r.output + r.stderr


def test_unusable_checkpoint_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "cp.json"
    bad.write_text("{not json")
    r = CliRunner().invoke(main, ["watch", "-n", "x", "--checkpoint", str(bad)])
    assert r.exit_code == 2
    assert "--checkpoint" in r.stderr


def _arg(args: list[str], flag: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(flag + "="))


def test_rotated_out_files_fit_the_volume() -> None:
    """Issue 23: --out grew until the 1Gi volume was full; the manifests must bound it."""
    from fma_otel.commands.watch import parse_size

    c = _load("deployment.yaml")["spec"]["template"]["spec"]["containers"][0]
    claim = parse_size(_load("pvc.yaml")["spec"]["resources"]["requests"]["storage"])
    max_bytes = parse_size(_arg(c["args"], "--out-max-bytes"))
    keep = int(_arg(c["args"], "--out-keep"))
    assert 0 < max_bytes and keep >= 1
    assert (keep + 1) * (max_bytes + 64 * 1024) <= 0.8 * claim  # files (+ a line each), with room


def test_the_components_variable_turns_vllm_logs_on(tmp_path: Path, monkeypatch) -> None:
    """deploy/vllm-logs/ sets FMA_OTEL_VLLM_LOGS=true: the watcher must get vllm_logs on
    (and Events stay on unless --no-events)."""
    from fma_otel.live import watcher as W
    from tests.support.k8s_server import write_kubeconfig

    seen = []

    class Fake:
        def __init__(self, cfg, api_client=None) -> None:  # noqa: ANN001
            seen.append(cfg)

        def request_stop(self, *_) -> None:  # noqa: ANN002
            pass

        def run(self) -> int:
            return 0

    monkeypatch.setattr(W, "LiveWatcher", Fake)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1")
    monkeypatch.setenv("FMA_OTEL_VLLM_LOGS", "true")
    r = CliRunner().invoke(main, ["watch", "-n", "x", "--kubeconfig", kubeconfig, "--metrics-port", "-1"])
    assert r.exit_code == 0, r.output
    assert seen[-1].vllm_logs is True and seen[-1].events is True
    monkeypatch.delenv("FMA_OTEL_VLLM_LOGS")
    r = CliRunner().invoke(main, ["watch", "-n", "x", "--kubeconfig", kubeconfig, "--no-events"])
    assert r.exit_code == 0, r.output
    assert seen[-1].vllm_logs is False and seen[-1].events is False
