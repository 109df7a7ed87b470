"""``fma-otel capture --namespace NS``: record once, replay offline with ``fma-otel bridge DIR``.

Exit codes: 0 written (warnings, such as no DPC Pod found or a log that stopped sending
for the read timeout, go to stderr); 1 the API server refused or could not be reached, or a
file of the capture could not be written (disk full); 2 unusable arguments (a kubeconfig
that cannot be used, an ``--out`` where no directory can be written), in one line.
"""

from __future__ import annotations

import time

import click

from ._common import byte_progress, fail
from .params import default_namespace
from .watch import Duration


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
@click.option(
    "--kubeconfig", type=click.Path(), help="Kubeconfig file (default: in-cluster, then ~/.kube/config)."
)
@click.option("--context", help="Kubeconfig context.")
@click.option(
    "--dpc-selector",
    default="app.kubernetes.io/name=fma-controllers,app.kubernetes.io/component=dual-pods-controller",
    show_default=True,
    help="Labels of the dual-pods controller Pod.",
)
@click.option("--dpc-container", default="controller", show_default=True, help="The DPC's container.")
@click.option("--dpc-namespace", help="Namespace of the DPC Pod (default: --namespace).")
@click.option("--no-launcher-logs", is_flag=True, help="Do not record launcher logs.")
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr.")
# as watch's: for tests and slow clusters
@click.option("--log-read-timeout", type=Duration(0.1), default="60s", hidden=True)
def command(
    namespace: str | None,
    out: str | None,
    kubeconfig: str | None,
    context: str | None,
    dpc_selector: str,
    dpc_container: str,
    dpc_namespace: str | None,
    no_launcher_logs: bool,
    quiet: bool,
    log_read_timeout: float,
) -> None:
    """Record Pods and logs of a live namespace into a capture directory."""
    from ..capture import CaptureWriteError, capture_namespace, prepare_directory
    from ..live.kube import TRANSIENT_ERRORS, Kube, KubeConfigError, KubeError, make_api_client
    from ..podfacts import parse_selector

    try:
        selector = parse_selector(dpc_selector) or {}
    except ValueError as exc:
        fail(f"--dpc-selector: {exc}")
    namespace = namespace or default_namespace(kubeconfig, context)
    directory = out or f"capture-{namespace}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
    try:
        kube = Kube(make_api_client(kubeconfig, context))
    except KubeConfigError as exc:
        fail(str(exc))
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
                dpc_container=dpc_container,
                dpc_namespace=dpc_namespace,
                launcher_logs=not no_launcher_logs,
                progress=advance,
                log_read_timeout_s=log_read_timeout,
            )
    except CaptureWriteError as exc:
        fail(f"cannot write {exc}", 1)
    except KubeError as exc:
        fail(f"the API server refused: {exc}", 1)
    except TRANSIENT_ERRORS as exc:
        fail(f"cannot reach the API server: {exc}", 1)
    for w in res.warnings:
        click.echo(f"fma-otel capture: warning: {w}", err=True)
    if not quiet:
        click.echo(
            f"fma-otel capture: {res.directory}: {res.pods} Pods, DPC log from {len(res.dpc_pods)} Pod(s), "
            f"{len(res.launcher_logs)} launcher log(s)",
            err=True,
        )
