"""``fma-otel capture --namespace NS``: record once, replay offline with ``fma-otel bridge DIR``.

Exit codes: 0 written (warnings, such as no DPC Pod found, a log that stopped sending
for the read timeout, or a vLLM log that could not be fetched, go to stderr); 1 the API server refused or could not be reached, or a
file of the capture could not be written (disk full); 2 unusable arguments (a kubeconfig
that cannot be used, an ``--out`` where no directory can be written), in one line.
"""

from __future__ import annotations

import time
from typing import Any

import click

from .. import podfacts as P
from ._common import byte_progress, fail, kube_api_client
from .params import default_namespace, kube_options
from .watch import Duration, Size, selector_arg


@click.command("capture")
@click.option(
    "--namespace",
    "-n",
    help="Namespace of the requesters and launchers (default: the kubeconfig context's, else in a "
    "cluster the Pod's own, else default).",
)
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False),
    help="Capture directory (default: capture-<ns>-<time>); its parent folder must exist.",
)
@kube_options
@click.option(
    "--dpc-selector",
    default=P.DPC_SELECTOR,
    show_default=True,
    help="Labels of the dual-pods controller Pod.",
)
@click.option("--dpc-container", default=P.DPC_CONTAINER, show_default=True, help="The DPC's container.")
@click.option("--dpc-namespace", help="Namespace of the DPC Pod (default: --namespace).")
@click.option("--no-launcher-logs", is_flag=True, help="Do not record launcher logs.")
@click.option("--no-events", is_flag=True, help="Do not record the namespace's Events (events.json).")
@click.option(
    "--vllm-logs",
    is_flag=True,
    help="Also record each FMA instance's vLLM log (vllm/<instance-id>.log), read from its launcher "
    "through the API server's pod proxy.  Off by default: it needs the pods/proxy RBAC verb, which "
    "reaches every port of every Pod in the namespace (deploy/vllm-logs/ adds it).",
)
@click.option(
    "--baseline-selector",
    metavar="SEL",
    help="Label selector of baseline (no-FMA) vLLM Pods: their container logs go to vllm/pod-<name>.log "
    "(pods/log only, no extra RBAC).",
)
@click.option(
    "--baseline-container", metavar="NAME", help="Main container of baseline Pods (default: first)."
)
@click.option(
    "--vllm-log-max-bytes",
    type=Size(),
    default="64Mi",
    show_default=True,
    help="Read at most this much of each vLLM instance log.",
)
@click.option("--launcher-port", type=click.IntRange(1, 65535), default=8001, hidden=True)
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr.")
# as watch's: for tests and slow clusters
@click.option("--log-read-timeout", type=Duration(0.1), default="60s", hidden=True)
def command(
    namespace: str | None,
    out: str | None,
    kubeconfig: str | None,
    context: str | None,
    dpc_selector: str,
    no_launcher_logs: bool,
    no_events: bool,
    vllm_logs: bool,
    baseline_selector: str | None,
    vllm_log_max_bytes: int,
    quiet: bool,
    log_read_timeout: float,
    **kw: Any,  # dpc_container, dpc_namespace, baseline_container, launcher_port: as they are
) -> None:
    """Record Pods and logs of a live namespace into a capture directory."""
    from ..capture import CaptureWriteError, capture_namespace, prepare_directory
    from ..live.kube import TRANSIENT_ERRORS, Kube, KubeError

    selector = selector_arg("--dpc-selector", dpc_selector) or {}
    baseline = selector_arg("--baseline-selector", baseline_selector)
    if vllm_log_max_bytes <= 0:
        fail("--vllm-log-max-bytes: must be more than 0")
    namespace = namespace or default_namespace(kubeconfig, context)
    directory = out or f"capture-{namespace}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    kube = Kube(kube_api_client(kubeconfig, context))
    try:
        prepare_directory(directory)
    except OSError as exc:
        fail(f"--out {directory}: cannot write a capture there ({exc.strerror or exc})")
    try:
        with byte_progress("capture", None, quiet) as advance:
            res = capture_namespace(
                kube,
                namespace,
                directory,
                dpc_selector=selector,
                launcher_logs=not no_launcher_logs,
                progress=advance,
                log_read_timeout_s=log_read_timeout,
                events=not no_events,
                vllm_logs=vllm_logs,
                baseline_selector=baseline,
                **kw,
                vllm_max_bytes=vllm_log_max_bytes,
            )
    except CaptureWriteError as exc:
        fail(f"cannot write {exc}", 1)
    except KubeError as exc:
        fail(f"the API server refused: {exc}", 1)
    except TRANSIENT_ERRORS as exc:
        fail(f"cannot reach the API server: {exc}", 1)
    for w in res.warnings:
        click.echo(f"fma-otel capture: warning: {w}", err=True)
    for instance, why in sorted(res.vllm_failed.items()):
        click.echo(f"fma-otel capture: warning: vLLM log of instance {instance}: {why}", err=True)
    if not quiet:
        extra = "" if res.events is None else f", {res.events} Event(s)"
        if baseline:
            extra += f", {len(res.baseline_logs)} baseline vLLM log(s)"
        if vllm_logs:
            failed = sum(1 for i in res.vllm_failed if i not in res.vllm_logs)
            partial = len(res.vllm_failed) - failed
            extra += (
                f", {len(res.vllm_logs)} instance vLLM log(s) ({partial} partial, {failed} not recorded, "
                f"{res.proxy_requests} proxy request(s))"
            )
        click.echo(
            f"fma-otel capture: {res.directory}: {res.pods} Pods, DPC log from {len(res.dpc_pods)} Pod(s), "
            f"{len(res.launcher_logs)} launcher log(s){extra}",
            err=True,
        )
