"""What a Pod object says about an actuation: roles, links and second-precision instants.

Pure accessors over raw Pod JSON (``dict``), so they work the same on ``kubectl get -o
json`` output, watch-stream objects and the live watcher's raw API answers.  The bridge's
reader (:mod:`fma_otel.sources.pod_json`) keeps only the fields read here: an accessor that
reads a new field needs it added to the reader's TypedDicts (``tests/test_pods.py`` compares
every accessor on whole and kept Pods).  Kubernetes
truncates these timestamps to whole seconds, which is why every instant taken here has a
precision of one second.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .timeutil import time_or_none

A_ISC_CONFIG = "dual-pods.llm-d.ai/inference-server-config"
A_SERVER_PATCH = "dual-pods.llm-d.ai/server-patch"
A_NOMINAL = "dual-pods.llm-d.ai/nominal"
A_REQUESTER = "dual-pods.llm-d.ai/requester"
L_DUAL = "dual-pods.llm-d.ai/dual"
L_INSTANCE = "dual-pods.llm-d.ai/instance"
L_LAUNCHER_CONFIG = "dual-pods.llm-d.ai/launcher-config-name"
A_INSTANCE_ID = "dual-pods.llm-d.ai/instance-id"
REQUESTER_CONTAINER = "inference-server"
#: the launcher Pod's container whose log holds the launcher's lines
LAUNCHER_CONTAINER = "inference-server"
#: the labels (``key=value,...``) and container of the dual-pods controller's Pod, as FMA's
#: chart deploys it: the default of ``watch`` and ``capture``
DPC_SELECTOR = "app.kubernetes.io/name=fma-controllers,app.kubernetes.io/component=dual-pods-controller"
DPC_CONTAINER = "controller"

ROLE_REQUESTER = "requester"
ROLE_LAUNCHER = "launcher"
ROLE_BASELINE = "baseline"


def meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    m = pod.get("metadata")
    return m if isinstance(m, dict) else {}


def labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    v = meta(pod).get("labels")
    return v if isinstance(v, dict) else {}


def annotations(pod: Mapping[str, Any]) -> Mapping[str, str]:
    v = meta(pod).get("annotations")
    return v if isinstance(v, dict) else {}


def uid(pod: Mapping[str, Any]) -> str | None:
    v = meta(pod).get("uid")
    return str(v) if v else None


def name(pod: Mapping[str, Any]) -> str | None:
    v = meta(pod).get("name")
    return str(v) if v else None


def namespace(pod: Mapping[str, Any]) -> str | None:
    v = meta(pod).get("namespace")
    return str(v) if v else None


def node_name(pod: Mapping[str, Any]) -> str | None:
    spec = pod.get("spec")
    v = spec.get("nodeName") if isinstance(spec, dict) else None
    return str(v) if v else None


#: a label key (optional DNS prefix and ``/``, then a name) and a label value, as the API
#: server validates them
_LABEL_KEY = re.compile(
    r"(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
)
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def parse_selector(text: str | None) -> dict[str, str] | None:
    """``app=vllm,tier=x`` -> dict (equality selectors only, which is what users pass here).

    Anything else is refused, not read loosely: ``app!=vllm`` read as the key ``app!``
    would silently select no Pod at all.
    """
    if not text:
        return None
    out: dict[str, str] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        k, sep, v = part.partition("==") if "==" in part else part.partition("=")
        k, v = k.strip(), v.strip()
        if not sep or not _LABEL_KEY.fullmatch(k) or not _LABEL_VALUE.fullmatch(v):
            raise ValueError(
                f"selector {text!r}: {part!r} is not a key=value term "
                "(only equality terms of label keys and values are supported)"
            )
        out[k] = v
    if not out:
        raise ValueError(f"selector {text!r}: no key=value term")
    return out


def is_direct_requester(pod: Mapping[str, Any]) -> bool:
    """A requester served by a direct provider (``server-patch``), not by a launcher."""
    ann = annotations(pod)
    return A_SERVER_PATCH in ann and A_ISC_CONFIG not in ann


def labels_match(selector: Mapping[str, str] | None, pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` carries every label of ``selector`` (an empty one matches nothing)."""
    if not selector:
        return False
    lab = labels(pod)
    return all(lab.get(k) == v for k, v in selector.items())


def role(pod: Mapping[str, Any], baseline_selector: Mapping[str, str] | None) -> str | None:
    """Requester (ISC or server-patch annotation), launcher (label), baseline (selector).

    A baseline is a plain vLLM Pod: a Pod the DPC made or bound (it carries the binding
    annotation or a nominal hash) is never one, even when it inherited the selector's labels
    from the requester it was patched from.
    """
    ann = annotations(pod)
    if A_ISC_CONFIG in ann or A_SERVER_PATCH in ann:
        return ROLE_REQUESTER
    lab = labels(pod)
    if L_LAUNCHER_CONFIG in lab:
        return ROLE_LAUNCHER
    if A_REQUESTER in ann or A_NOMINAL in ann:
        return None
    if labels_match(baseline_selector, pod):
        return ROLE_BASELINE
    return None


def created_ns(pod: Mapping[str, Any]) -> int | None:
    return time_or_none(meta(pod).get("creationTimestamp"))


def condition_true_ns(pod: Mapping[str, Any], ctype: str) -> int | None:
    """``lastTransitionTime`` of condition ``ctype`` when its status is True."""
    status = pod.get("status")
    conds = status.get("conditions") if isinstance(status, dict) else None
    for c in conds or ():
        if isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True":
            return time_or_none(c.get("lastTransitionTime"))
    return None


def container_names(pod: Mapping[str, Any]) -> list[Any]:
    """The names in ``spec.containers``, in order (what the log followers pick from)."""
    spec = pod.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    return [c.get("name") for c in containers if isinstance(c, dict)] if isinstance(containers, list) else []


def container_started_ns(pod: Mapping[str, Any], container: str | None) -> int | None:
    """``state.running.startedAt`` of the named container (or the first one if ``None``)."""
    status = pod.get("status")
    statuses = status.get("containerStatuses") if isinstance(status, dict) else None
    if not statuses:
        return None
    if container is None:  # the first container of the spec, else the first status
        spec = pod.get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        container = containers[0].get("name") if containers and isinstance(containers[0], dict) else None
    chosen = next(
        (
            cs
            for cs in statuses
            if isinstance(cs, dict) and (container is None or cs.get("name") == container)
        ),
        None,
    )
    if not chosen:
        return None
    # running while it runs; terminated once the Pod is deleted (the last state a watch
    # stream shows of a requester that benchmarks delete) - the same start either way
    state = chosen.get("state")
    if not isinstance(state, dict):
        return None
    for phase in ("running", "terminated"):
        st = state.get(phase)
        if isinstance(st, dict) and st.get("startedAt"):
            return time_or_none(st.get("startedAt"))
    return None


def resource_version(pod: Mapping[str, Any]) -> str | None:
    v = meta(pod).get("resourceVersion")
    return str(v) if v is not None else None
