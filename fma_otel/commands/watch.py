"""``fma-otel watch``: the live bridge (see ``fma_otel/live`` and ``docs/watch.md``).

The flags ``--namespace --kubeconfig --launcher-logs --baseline-selector --checkpoint --out
--otlp-endpoint`` are a contract.  Every flag can also come from the environment as
``FMA_OTEL_<FLAG>`` (``FMA_OTEL_NAMESPACE``...), which is how the Deployment in ``deploy/``
configures it; OTLP also follows the standard ``OTEL_EXPORTER_OTLP_*`` variables.

Exit codes: 0 after SIGTERM/SIGINT (flushed and checkpointed); 2 unusable arguments or
environment (kubeconfig, a checkpoint or ``--out`` that cannot be read or written, a
``--metrics-port`` in use), one line on stderr; 1 a failure at start (API server
unreachable is *not* one: it retries), ``--out`` failing while running (disk full), or a
final checkpoint on SIGTERM/SIGINT that could not be written.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import signal

import click

from .. import podfacts as P
from ..jsonsafe import brief
from . import params
from ._common import _describe_os_error, fail, kube_api_client
from .params import default_namespace

#: The longest duration the watcher takes: its clocks are int64 nanoseconds (about 292
#: years from 1970) and its waits must fit ``threading.TIMEOUT_MAX``; a century is beyond
#: any real setting and well inside both.
MAX_DURATION_S = 100 * 365 * 86400.0


def selector_arg(flag: str, text: str | None) -> dict[str, str] | None:
    """``text`` as :func:`fma_otel.podfacts.parse_selector` reads it; a bad one fails the
    command with ``<flag>: <why>`` (``watch`` and ``capture`` alike)."""
    try:
        return P.parse_selector(text)
    except ValueError as exc:
        fail(f"{flag}: {exc}")


class Duration(click.ParamType):
    """A duration as ``slo`` reads one (``500ms``, ``90s``, ``15m``, ``1h30m``, plain
    seconds: :func:`fma_otel.query.window.parse_duration`) of at least ``min_s`` seconds
    and at most :data:`MAX_DURATION_S` (400 digits are a float's infinity, which would
    stop the watcher at its first tick instead of at start with a usage error)."""

    name = "DURATION"

    def __init__(self, min_s: float = 0.0) -> None:
        self.min_s = min_s

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        from ..query import QueryError
        from ..query.window import parse_duration

        try:
            seconds = parse_duration(value)
        except QueryError as exc:
            self.fail(str(exc), param, ctx)
        if seconds > MAX_DURATION_S:
            self.fail(f"too long a duration: {brief(value)} (at most 100 years)", param, ctx)
        if seconds < self.min_s:
            self.fail(f"{brief(value)} is too short (at least {self.min_s * 1000:g}ms)", param, ctx)
        return seconds


DURATION = Duration()

_SIZE = re.compile(r"^\s*(\d+)\s*(k|ki|m|mi|g|gi|kb|kib|mb|mib|gb|gib|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "ki": 1024, "mi": 1024**2, "gi": 1024**3}
#: The largest ``--out-max-bytes``: a pebibyte, far past any volume (and a plain int).
MAX_SIZE = 1 << 50


def parse_size(text: str) -> int:
    """``100Mi``, ``500M``, ``1Gi``, ``4096`` -> bytes (``k``/``M``/``G`` powers of 1000,
    ``Ki``/``Mi``/``Gi`` of 1024, as in Kubernetes quantities; ``B`` suffixes allowed)."""
    m = _SIZE.match(str(text))
    if not m:
        raise ValueError(f"not a size: {brief(text)} (use e.g. 100Mi, 500M, 1048576)")
    unit = (m.group(2) or "").lower()
    if len(unit) > 1:
        unit = unit.removesuffix("b")  # "MiB" as "Mi"; a lone "b" is bytes
    value = int(m.group(1)) * _SIZE_UNITS[unit]
    if value > MAX_SIZE:
        raise ValueError(f"too large a size: {brief(text)} (at most 1Pi)")
    return value


class Size(click.ParamType):
    """A number of bytes, with an optional unit (see :func:`parse_size`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        try:
            return parse_size(value)  # (an int as its digits: a negative one is no size)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


#: The main loop's shortest tick: below it the loop only burns CPU.
MIN_TICK_S = 0.05


@click.command("watch", context_settings={"auto_envvar_prefix": "FMA_OTEL", "show_default": True})
@click.option(
    "--namespace",
    "-n",
    help="Namespace to watch (default: POD_NAMESPACE, else the kubeconfig context's, else in a cluster "
    "the Pod's own, else default).",
)
@params.kube_options
@click.option("--launcher-logs", is_flag=True, help="Also follow each launcher's inference-server log.")
@click.option(
    "--vllm-logs",
    is_flag=True,
    help="Read each finished actuation's vLLM log (an FMA instance's from its launcher through the API "
    "server's pod proxy, a baseline Pod's from pods/log) for the vllm.* spans.  Off by default: it needs "
    "the pods/proxy RBAC verb, which reaches every port of every Pod in the namespace "
    "(deploy/vllm-logs/ adds it).",
)
@click.option(
    "--vllm-log-max-bytes", type=Size(), default="16Mi", help="Read at most this much of one vLLM log."
)
@click.option(
    "--vllm-log-timeout",
    type=DURATION,
    default="20s",
    help="Ask for a vLLM log's ranges for at most this long; its trace waits no longer (plus a read timeout).",
)
@click.option("--no-events", is_flag=True, help="Do not watch the namespace's Events (startup spans).")
@click.option("--baseline-selector", metavar="SEL", help="Label selector of baseline (no-FMA) vLLM Pods.")
@click.option(
    "--baseline-container", metavar="NAME", help="Main container of baseline Pods (default: first)."
)
@click.option(
    "--checkpoint", type=click.Path(), help="Checkpoint file (put it on a volume; see docs/watch.md)."
)
@click.option("--out", type=click.Path(), help="Append OTLP JSON lines here ('-' = stdout).")
@click.option(
    "--out-max-bytes",
    type=Size(),
    default="100Mi",
    help="Rotate --out before it passes this size (0 = never); lines are never split.",
)
@click.option(
    "--out-keep",
    type=click.IntRange(1, 1000),
    default=4,
    help="Rotated --out files kept (OUT.1 newest .. OUT.N oldest); older ones are deleted.",
)
@params.otlp_options
@click.option(
    "--incomplete-after",
    type=DURATION,
    default="15m",
    help="Emit an unfinished actuation as incomplete after this.",
)
@click.option(
    "--grace", type=DURATION, default="1s", help="Wait this long after an actuation's last fact (late lines)."
)
@click.option(
    "--dpc-selector",
    default=P.DPC_SELECTOR,
    help="Labels of the dual-pods controller Pod.",
)
@click.option("--dpc-container", default=P.DPC_CONTAINER, help="The dual-pods controller's container.")
@click.option(
    "--metrics-port",
    type=click.IntRange(-1, 65535),
    default=9464,
    help="Port of /metrics and /healthz (-1 = off, 0 = any).",
)
@params.clock_tolerance_option
@click.option("--log-level", default="info", type=click.Choice(["debug", "info", "warning", "error"]))
# knobs for tests and unusual clusters
@click.option("--tick", type=Duration(MIN_TICK_S), default="100ms", hidden=True)
@click.option("--checkpoint-interval", type=DURATION, default="5s", hidden=True)
@click.option("--watch-timeout", type=click.IntRange(1, 86400), default=300, hidden=True)
@click.option("--backoff-base", type=DURATION, default="500ms", hidden=True)
@click.option("--backoff-max", type=DURATION, default="30s", hidden=True)
@click.option("--log-read-timeout", type=DURATION, default="60s", hidden=True)
@click.option("--replay-margin", type=DURATION, default="2m", hidden=True)
@click.option("--launcher-port", type=click.IntRange(1, 65535), default=8001, hidden=True)
def command(**kw: object) -> None:
    """Live bridge: watch a namespace and export each actuation's trace once."""
    from ..live.checkpoint import check_writable, load
    from ..live.outfile import OutFileError, check_out
    from ..live.watcher import LiveWatcher, WatchConfig

    logging.basicConfig(
        level=getattr(logging, str(kw["log_level"]).upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    namespace = (
        kw["namespace"]
        or os.environ.get("POD_NAMESPACE")
        or default_namespace(kw["kubeconfig"], kw["context"])  # type: ignore[arg-type]
    )
    selector_arg("--baseline-selector", kw["baseline_selector"])  # type: ignore[arg-type]
    selector_arg("--dpc-selector", kw["dpc_selector"])  # type: ignore[arg-type]
    if kw["checkpoint"]:
        try:
            load(str(kw["checkpoint"]))
        except (OSError, ValueError) as exc:
            fail(f"--checkpoint {kw['checkpoint']}: unusable ({exc}); move it away to start afresh")
        try:
            check_writable(str(kw["checkpoint"]))
        except OSError as exc:
            fail(f"--checkpoint {kw['checkpoint']}: cannot write a checkpoint there ({exc.strerror or exc})")
    from ..sinks import otlp_export

    out = kw["out"]
    if out is None and not otlp_export.otlp_configured(kw["otlp_endpoint"]):  # type: ignore[arg-type]
        out = "-"
    api_client = kube_api_client(kw["kubeconfig"], kw["context"])  # type: ignore[arg-type]
    if out is not None and out != "-":
        try:
            check_out(str(out))
        except OSError as exc:
            fail(f"--out {_describe_os_error(str(out), exc)}")
    # each flag is the field of its name, a duration's with "_s"; the rest are spelled out
    fields = {f.name for f in dataclasses.fields(WatchConfig)}
    given = {k if k in fields else f"{k}_s": v for k, v in kw.items() if k in fields or f"{k}_s" in fields}
    port = int(kw["metrics_port"])  # type: ignore[call-overload]
    given.update(
        namespace=str(namespace),
        out=out,
        events=not kw["no_events"],
        vllm_log_max_bytes=max(1, int(kw["vllm_log_max_bytes"])),  # type: ignore[call-overload]
        out_max_bytes=int(kw["out_max_bytes"]) or None,  # type: ignore[call-overload]
        metrics_port=None if port < 0 else port,
        clock_tolerance_ns=round(float(kw["clock_tolerance_ms"]) * 1e6),  # type: ignore[arg-type]
    )
    cfg = WatchConfig(**given)  # type: ignore[arg-type]
    watcher = LiveWatcher(cfg, api_client=api_client)
    signal.signal(signal.SIGTERM, watcher.request_stop)
    signal.signal(signal.SIGINT, watcher.request_stop)
    try:
        code = watcher.run()
    except (ValueError, otlp_export.ExportError) as exc:
        # an unusable OTLP setting (an endpoint, protocol or OTEL_* variable the exporter
        # refuses) or checkpoint, found as the watcher sets up, before it watches anything
        fail(str(exc))
    except OutFileError as exc:  # disk full while running: the file holds whole lines only
        if exc.path == "standard output":
            fail(f"cannot write to standard output: {exc.error.strerror or exc.error}", 1)
        fail(f"cannot write --out {_describe_os_error(exc.path, exc.error)}", 1)
    raise SystemExit(code)
