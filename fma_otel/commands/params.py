"""Options every command spells the same way, so one convention holds everywhere.

Why a module: ``fma-otel`` grew one command at a time, and each said its inputs, outputs
and namespace a little differently.  Here, once:

- a trace file is a positional argument (``slo traces.jsonl``), ``--traces`` an alias;
- ``-`` is standard input where a file is read and standard output where one is written;
- ``-o/--output`` names the output *format*, beside ``--format``, as kubectl users expect;
- ``--out PATH`` in a folder that does not exist is an unusable argument: exit 2 at once,
  not after minutes of work;
- the namespace, when ``-n`` is not given, is the kubeconfig's current context's (in a
  cluster: the service account's), else ``default``, as kubectl takes it;
- comma lists and repeats are the same thing (``--metric a,b`` = ``--metric a --metric b``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from .. import otlp_env

F = TypeVar("F", bound=Callable[..., Any])

#: where a Pod finds its own namespace (the service account's token volume)
SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def traces_input(func: F) -> F:
    """``[FILE]`` and its alias ``--traces FILE``: the command gets ``traces_file`` and
    ``traces_alias``, and calls :func:`one_trace_file` on them."""
    func = click.option(
        "--traces", "traces_alias", metavar="FILE", help="The trace file (the same as FILE; '-': stdin)."
    )(func)
    return click.argument("traces_file", required=False, metavar="[FILE]")(func)


def empty_option(given: Iterable[tuple[str, str | None]]) -> str | None:
    """The name of the first option (or argument) given an empty or blank value, else
    ``None``.  Why: such a value is an unset variable (``--slo "$SPEC"``), and taken as "not
    given" it silently changed what ran (the embedded sample, no SLO gate, exit 0)."""
    return next((name for name, value in given if value is not None and not value.strip()), None)


def one_trace_file(file: str | None, alias: str | None) -> str | None:
    """The trace file given either way; both, and different, is a usage error (exit 2)."""
    if file and alias and file != alias:
        raise click.UsageError(f"give the trace file once (FILE {file} and --traces {alias})")
    if empty_option([("FILE", file), ("--traces", alias)]):
        raise click.UsageError("the trace file is empty: give a path, or - for stdin (an unset variable?)")
    return file or alias


def format_option(choices: Sequence[str], default: str) -> Callable[[F], F]:
    """``--format``/``-o``/``--output`` (kubectl's spelling of an output format)."""
    return click.option(
        "--format",
        "-o",
        "--output",
        "fmt",
        type=click.Choice(list(choices)),
        default=default,
        show_default=True,
        help="Output format.",
    )


def check_out(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> str | None:
    """An ``--out`` callback: ``-`` and None pass; a path whose folder does not exist, or
    that is a folder, is a usage error (exit 2) before any work is done."""
    if value is None or value == "-":
        return value
    name = param.opts[0] if param is not None and param.opts else "--out"
    if not value:  # an unset variable (``--out "$OUT"``): no file to write, said as usage
        raise click.BadParameter("is empty: give a file path, or '-' for stdout", ctx, param, name)
    folder = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(folder):
        why = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise click.BadParameter(f"{value}: folder {folder} {why}", ctx, param, name)
    if os.path.isdir(value):
        raise click.BadParameter(f"{value}: is a folder, not a file", ctx, param, name)
    return value


def split_list(values: Iterable[str] | None) -> list[str]:
    """Repeated options with comma lists, flattened: ``("a,b", "c")`` -> ``["a", "b", "c"]``."""
    return [p.strip() for v in values or () for p in v.split(",") if p.strip()]


def pick(kind: str, given: Iterable[str], valid: Sequence[str]) -> list[str]:
    """``given`` names matched (case-insensitively) against ``valid``; an unknown name is a
    usage error that lists the valid ones."""
    by_lower = {v.lower(): v for v in valid}
    out: list[str] = []
    for name in given:
        hit = by_lower.get(name.lower())
        if hit is None:
            raise click.UsageError(f"--{kind} {name}: unknown; valid: {', '.join(valid)}")
        if hit not in out:
            out.append(hit)
    return out


def kube_options(func: F) -> F:
    """``--kubeconfig`` and ``--context``: one definition for capture and watch, which
    connect alike (:func:`fma_otel.commands._common.kube_api_client`)."""
    func = click.option("--context", help="Kubeconfig context.")(func)
    return click.option(
        "--kubeconfig", type=click.Path(), help="Kubeconfig file (default: in-cluster, then ~/.kube/config)."
    )(func)


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    """The namespace kubectl would use without ``-n``: the kubeconfig's (current or named)
    context's, else in a cluster the service account's, else ``default``.

    A kubeconfig that cannot be read gives ``default`` here: connecting later says why.
    """
    try:
        from kubernetes import config

        contexts, current = config.list_kube_config_contexts(config_file=kubeconfig)
        chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
        ns = ((chosen or {}).get("context") or {}).get("namespace")
        if ns:
            return str(ns)
        if contexts:
            return "default"
    except Exception:  # noqa: BLE001 - no kubeconfig, a broken one: fall through
        pass
    try:
        with open(SA_NAMESPACE_FILE, encoding="utf-8") as fh:
            ns = fh.read().strip()
        if ns:
            return ns
    except OSError:
        pass
    return "default"


def _otlp_protocol(ctx: click.Context, param: click.Parameter, value: str | None) -> str:
    """``--otlp-protocol``, else ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, else
    ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf`` (:mod:`fma_otel.otlp_env`, the
    rule the wrappers follow too): never guessed from the endpoint's port.  An endpoint on 4317 (the OTLP/gRPC port) that gets the default
    is warned about once, naming the two fixes; an unknown value from the environment is
    passed on for the exporter set-up to refuse in one line."""
    if value:
        return value
    endpoint = otlp_env.grpc_port_endpoint(os.environ, ctx.params.get("otlp_endpoint"))
    if endpoint:
        from ..errtext import safe_url
        from ._common import prog_name

        click.echo(
            f"{prog_name(ctx)}: warning: OTLP endpoint {safe_url(endpoint)} is on the OTLP/gRPC port but the "
            f"protocol is {otlp_env.DEFAULT_PROTOCOL} (the default): give --otlp-protocol grpc "
            "(or OTEL_EXPORTER_OTLP_PROTOCOL=grpc), or use port 4318",
            err=True,
        )
    return otlp_env.protocol(os.environ)


def _otlp_endpoint(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--otlp-endpoint`` as given, refused when blank: a blank endpoint names no collector,
    and taking it as "export on" would send to whatever default the protocol's exporter picks
    (gRPC's is localhost) while ``--out`` would be skipped."""
    if value is not None and not value.strip():
        raise click.BadParameter("is blank: give the collector's URL, or leave the option out", ctx, param)
    return value


def otlp_options(func: F) -> F:
    """``--otlp-endpoint`` and ``--otlp-protocol`` (the one rule of :func:`_otlp_protocol`),
    for bridge and watch."""
    func = click.option(
        "--otlp-protocol",
        type=click.Choice([otlp_env.GRPC, otlp_env.HTTP_PROTOBUF]),
        callback=_otlp_protocol,
        help="OTLP protocol (default: OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, else http/protobuf; "
        "never guessed from the port).",
    )(func)
    return click.option(
        "--otlp-endpoint",
        metavar="URL",
        callback=_otlp_endpoint,
        help="Export over OTLP (else OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT).",
    )(func)


def _finite_ms(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """``nan`` passes ``FloatRange`` (float() reads it, and no comparison holds for it): the
    tolerance is used in ns, as an int."""
    if not math.isfinite(value * 1e6):
        raise click.BadParameter(f"{value}: must be a finite number", ctx, param)
    return value


#: an hour: clocks further apart make every cross-clock duration meaningless, and a value
#: such as 1e300 made durations and precisions of 1e297 s that the trace readers refuse
MAX_CLOCK_TOLERANCE_MS = 3_600_000.0


def clock_tolerance_option(func: F) -> F:
    """``--clock-tolerance-ms``: one definition for bridge and watch, which fuse instants alike."""
    return click.option(
        "--clock-tolerance-ms",
        type=click.FloatRange(min=0, max=MAX_CLOCK_TOLERANCE_MS),
        callback=_finite_ms,
        default=1.0,
        show_default=True,
        help="How far two hosts' clocks may differ: bounds from different clocks are widened by it.",
    )(func)
