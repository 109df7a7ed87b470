"""vLLM phases and Pod startup from Events, live and offline, in several orders.

One synthetic capture, with vLLM logs and Events that fit it (``phase_scenario``), is played
into the test API server three ways: everything there before the watcher starts (listed),
Events and logs added once it watches (watched, Events in reverse order), and each Event
and each vLLM log line added at its moment in the timeline (interleaved).  Each time:

* ``fma-otel watch --vllm-logs`` builds traces with ``vllm.*`` and ``k8s.*`` spans, the
  vLLM logs read from the fake launchers through the pod proxy;
* ``fma-otel capture --vllm-logs`` records the same cluster; its ``events.json`` and
  ``vllm/`` files, beside the capture's Pod history, give ``fma-otel bridge`` the same span
  trees, span for span (ids, parents, times, attributes).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from fma_otel.bridge import inputs_from_capture, run_bridge
from fma_otel.cli import main
from tests.live import phase_scenario
from tests.live.replay import (
    BASELINE,
    NS,
    InProcessWatcher,
    apply,
    dpc_pod,
    offline_traces,
    recent_capture,
    timeline,
    traces_in,
    tree,
    wait_for,
)
from tests.support import synth
from tests.support.k8s_server import FakeCluster

pytestmark = pytest.mark.slow


def _complete(traces: dict) -> dict:
    return {tid: t for tid, t in traces.items() if t[0].attributes.get("fma.complete", True) is not False}


def _add_all(k8s: FakeCluster, sc: phase_scenario.Scenario, reverse_events: bool = False) -> None:
    for (launcher, inst), lines in sc.instance_logs.items():
        backend = k8s.backends.get((NS, launcher, 8001)) or k8s.add_launcher(launcher, NS)
        backend.append(inst, phase_scenario.log_bytes(lines))
    for (pod, container), lines in sc.baseline_logs.items():
        for t, text in lines:
            k8s.append_log(pod, container, text, namespace=NS, ts_ns=t)
    for _t, ev in reversed(sc.events) if reverse_events else sc.events:
        k8s.add_event(ev)


def _interleaved(k8s: FakeCluster, cap: Any, sc: phase_scenario.Scenario) -> None:
    """The timeline with each Event and vLLM log line at its moment."""
    for launcher, _inst in sc.instance_logs:
        if (NS, launcher, 8001) not in k8s.backends:
            k8s.add_launcher(launcher, NS)
    steps: list[tuple[int, int, Any]] = [(s.t_ns, 1, s) for s in timeline(cap)]
    for (launcher, inst), lines in sc.instance_logs.items():
        for t, text in lines:
            steps.append((t, 0, ("vllm", launcher, inst, text)))
    for (pod, container), lines in sc.baseline_logs.items():
        for t, text in lines:
            steps.append((t, 0, ("pod-log", pod, container, text, t)))
    for t, ev in sc.events:
        steps.append((t, 0, ("event", ev)))
    for _t, _o, item in sorted(steps, key=lambda x: (x[0], x[1])):
        if not isinstance(item, tuple):
            apply(k8s, item)
        elif item[0] == "vllm":
            k8s.backends[(NS, item[1], 8001)].append(item[2], item[3] + "\n")
        elif item[0] == "pod-log":
            k8s.append_log(item[1], item[2], item[3], namespace=NS, ts_ns=item[4])
        else:
            k8s.add_event(item[1])


def _offline_from_capture(k8s: FakeCluster, cap: Any, sc: phase_scenario.Scenario, tmp: Path) -> dict:
    """``capture --vllm-logs`` of the cluster; its events.json and vllm/ beside the capture's
    Pod history (watch form: a list of final states loses earlier rounds' Ready), bridged."""
    kubeconfig = k8s.write_kubeconfig(str(tmp / "kubeconfig"), NS)
    rec = tmp / "recorded"
    r = CliRunner().invoke(
        main,
        [
            "capture",
            "-n",
            NS,
            "--kubeconfig",
            kubeconfig,
            "--out",
            str(rec),
            "--vllm-logs",
            "--baseline-selector",
            "app=vllm",
        ],
        prog_name="fma-otel",
    )
    assert r.exit_code == 0, r.output
    # every instance the scenario runs is recorded (the launcher logs also name instances
    # the DPC deleted to make room: those are 404s, reported)
    for _launcher, inst in sc.instance_logs:
        assert (rec / "vllm" / f"{inst}.log").is_file(), r.stderr
    ref = tmp / "reference"
    synth.write_capture(cap, ref, timestamps=True, pods_form="watch")
    shutil.copy(rec / "events.json", ref / "events.json")
    shutil.copytree(rec / "vllm", ref / "vllm")
    got = run_bridge(inputs_from_capture(ref), baseline_selector=BASELINE)
    return {t[0].trace_id: t for t in got.traces if t}


@pytest.mark.parametrize(
    ("order", "seed"), [("listed", 1), ("watched", 1), ("interleaved", 1), ("interleaved", 2), ("listed", 3)]
)
def test_phase_spans_live_equal_offline_in_every_order(
    k8s: FakeCluster, tmp_path: Path, order: str, seed: int
) -> None:
    cap = recent_capture(seed=seed)
    sc = phase_scenario.build(cap, offline_traces(cap, tmp_path / "plain"))
    k8s.add_pod(dpc_pod())
    if order == "listed":
        _add_all(k8s, sc)
    out = tmp_path / "out.jsonl"
    with InProcessWatcher(k8s, tmp_path, vllm_logs=True, vllm_log_timeout_s=10) as w:
        if order == "watched":
            _add_all(k8s, sc, reverse_events=True)
            assert wait_for(lambda: len(w.watcher.events) == len(sc.events), 10)
        if order == "interleaved":
            _interleaved(k8s, cap, sc)
        else:
            for step in timeline(cap):
                apply(k8s, step)
        offline = _complete(_offline_from_capture(k8s, cap, sc, tmp_path))
        assert wait_for(lambda: len(traces_in(out)) >= len(offline), 60), (len(traces_in(out)), len(offline))
    live = traces_in(out)
    assert sorted(live) == sorted(offline)
    for tid in offline:
        a, b = tree(live[tid]), tree(offline[tid])
        assert a == b, (
            f"{order}: trace {tid}\nlive only: {sorted(set(a) - set(b))}\noffline only: {sorted(set(b) - set(a))}"
        )
    # and the span events (FMA's own Events on fma.actuation), which tree() leaves out
    for tid in offline:
        ev_live = {s.span_id: s.events for s in live[tid] if s.events}
        ev_off = {s.span_id: s.events for s in offline[tid] if s.events}
        assert ev_live == ev_off, f"{order}: trace {tid} span events differ"
    span_events = {e.name for t in live.values() for s in t for e in s.events}
    assert {"k8s.event.LauncherStuck", "k8s.event.OutdatedRoutingMetadata"} <= span_events, span_events
    names = {s.name for t in live.values() for s in t}
    # the phases made it in: vLLM's own, the wake, and the Pods' startup from Events
    assert {"vllm.weights.load", "vllm.torch_compile", "vllm.cuda_graphs.capture", "vllm.wake"} <= names, (
        names
    )
    assert {"k8s.image.pull", "k8s.container.start"} <= names, names
    assert all(
        r.range and int(r.range.split("-")[1]) - int(r.range[6:].split("-")[0]) < 1 << 20
        for r in k8s.proxied()
    )
