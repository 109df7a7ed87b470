"""``fma-otel bridge``: capture files in, one OTLP trace per actuation out.

The flags ``--pods --dpc-log --launcher-log NAME=FILE --baseline-selector --out`` are a
contract; ``--vllm-log KEY=FILE`` and ``--events FILE`` add the phase spans
(``docs/span-model.md``).  Exit codes: 0 done; 1 ``--strict`` found skipped lines, or the OTLP export
failed (the ``--out`` file is complete either way); 2 unusable arguments or files.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import IO

import click

from .. import bridge as B
from ..podfacts import parse_selector
from ..sinks.otlp_json import write_trace_line
from . import params
from ._common import fail, open_out
from .params import check_out, empty_option

SAMPLE_BASELINE_SELECTOR = "app=vllm"


@click.command(
    "bridge",
    help="Build actuation traces from a capture. With no inputs, uses the embedded sample capture "
    "(and, for it, --baseline-selector app=vllm unless given).",
)
@click.argument("capture", required=False, type=click.Path())
@click.option(
    "--pods", "pods", multiple=True, type=click.Path(), help="Pod JSON: List, object or watch stream."
)
@click.option("--dpc-log", type=click.Path(), help="Dual-pods controller log (klog text).")
@click.option(
    "--launcher-log",
    "launcher_logs",
    multiple=True,
    metavar="POD=FILE",
    help="A launcher Pod's inference-server log (repeatable).",
)
@click.option(
    "--vllm-log",
    "vllm_logs",
    multiple=True,
    metavar="KEY=FILE",
    help="A vLLM log: KEY is the FMA instance id, or the baseline Pod's name (repeatable).",
)
@click.option(
    "--events",
    "events",
    multiple=True,
    type=click.Path(),
    help="Kubernetes Events: kubectl get events -o json, an events.k8s.io/v1 List or a watch stream (repeatable).",
)
@click.option(
    "--baseline-selector", metavar="SEL", help="Label selector of baseline (no-FMA) vLLM Pods, e.g. app=vllm."
)
@click.option(
    "--baseline-container", metavar="NAME", help="Main container of baseline Pods (default: the first)."
)
@click.option(
    "--out", "out", type=click.Path(), callback=check_out, help="Write OTLP JSON lines here ('-' for stdout)."
)
@params.otlp_options
@params.clock_tolerance_option
@click.option("--strict", is_flag=True, help="Fail (exit 1) naming file and line if any line was skipped.")
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr.")
def command(
    capture: str | None,
    pods: tuple[str, ...],
    dpc_log: str | None,
    launcher_logs: tuple[str, ...],
    vllm_logs: tuple[str, ...],
    events: tuple[str, ...],
    baseline_selector: str | None,
    baseline_container: str | None,
    out: str | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None,
    clock_tolerance_ms: float,
    strict: bool,
    quiet: bool,
) -> None:
    empty = empty_option(
        [
            ("CAPTURE", capture),
            ("--dpc-log", dpc_log),
            *(("--pods", p) for p in pods),
            *(("--events", e) for e in events),
        ]
    )
    if empty:
        fail(f"{empty} is empty: give a path (an unset variable?)")
    try:
        selector = parse_selector(baseline_selector)
    except ValueError as exc:
        fail(f"--baseline-selector: {exc}")
    try:
        inputs = _inputs(capture, pods, dpc_log, launcher_logs, quiet)
        _phase_inputs(inputs, vllm_logs, events)
    except B.InputError as exc:
        fail(str(exc))
    if selector is None and inputs.pods and Path(inputs.pods[0]).parent == B.sample_dir():
        selector = parse_selector(SAMPLE_BASELINE_SELECTOR)  # the sample's baseline Pod

    from ..sinks import otlp_export

    exporting = otlp_export.otlp_configured(otlp_endpoint)
    if out is None and not exporting:
        out = "-"
    sink = None
    if exporting:
        # Before the (possibly long) run: a bad endpoint or protocol is a usage error (2),
        # said in one line, not an export failure found at the end.
        try:
            sink = otlp_export.OtlpSink(endpoint=otlp_endpoint, protocol=otlp_protocol)
        except otlp_export.ExportError as exc:
            fail(str(exc))
    tally = B.Tally()
    try:
        try:
            result = _run(inputs, selector, baseline_container, quiet, round(clock_tolerance_ms * 1e6))
        except B.InputError as exc:
            fail(str(exc))
        with open_out(out) if out is not None else contextlib.nullcontext(None) as fh:
            failed = _write(result, tally, fh, sink)
        result.lose_unpaired_logs()
    finally:
        if sink is not None:
            sink.close()
    if not quiet:
        click.echo(B.summary(result, tally), err=True)
    skipped = [(st.name, ln, why) for st in result.stats for ln, why in st.skipped_lines]
    if strict and (skipped or result.lost):
        for name, ln, why in skipped[:20]:
            click.echo(f"{name}:{ln}: skipped: {why}", err=True)
        for loss in result.lost[:20]:
            at = f"{loss.source}:{loss.where}" if loss.where else loss.source  # 0: the whole file
            click.echo(f"{at}: not traced: {loss.why}", err=True)
        total = sum(st.skipped for st in result.stats)
        lost = sum(result.lost_counts.values())
        said = [f"{total} line(s) skipped"] if total else []
        said += [f"{lost} read but not traced"] if lost else []
        click.echo(f"fma-otel bridge: --strict: {', '.join(said)}", err=True)
        sys.exit(1)
    sys.exit(1 if failed else 0)


def _write(result: B.BridgeResult, tally: B.Tally, fh: IO[str] | None, sink) -> bool:  # noqa: ANN001
    """Build, write and export each trace as it comes (none is held after it is written);
    ``True`` when the export failed (then the rest is only written to ``fh``)."""
    from ..sinks import otlp_export

    failed = False
    for act, trace in result.iter_traces():
        tally.add(act, trace)
        if fh is not None:
            write_trace_line(fh, trace)
        if sink is not None and not failed:
            try:
                sink.export(trace)
            except otlp_export.ExportError as exc:
                click.echo(f"fma-otel bridge: error: export failed: {exc}", err=True)
                failed = True
    if sink is not None and sink.dropped:  # traces that cannot be encoded: never sent, always said
        d = sink.dropped[0]
        click.echo(
            f"fma-otel bridge: error: export: {len(sink.dropped)} trace(s) not sent, cannot be "
            f"encoded (first: {d.trace_id}: {d.reason})",
            err=True,
        )
        failed = True
    return failed


def _inputs(
    capture: str | None,
    pods: tuple[str, ...],
    dpc_log: str | None,
    launcher_logs: tuple[str, ...],
    quiet: bool,
) -> B.BridgeInputs:
    if capture:
        if pods or dpc_log:
            raise B.InputError("give a capture directory or --pods/--dpc-log, not both")
        inputs = B.inputs_from_capture(capture)
        if inputs.dpc_log is None and not quiet:
            click.echo(
                f"fma-otel bridge: warning: {capture} has no {B.CAPTURE_DPC}: only the spans Pod "
                "status gives (every FMA actuation's path is unknown)",
                err=True,
            )
    elif pods or dpc_log:
        inputs = B.BridgeInputs(list(pods), dpc_log)
    else:
        if not launcher_logs:
            if not quiet:
                click.echo(
                    f"fma-otel bridge: no inputs given; using the embedded sample capture {B.sample_dir()}",
                    err=True,
                )
            return B.inputs_from_capture(B.sample_dir())
        raise B.InputError("--launcher-log needs --pods and --dpc-log (or a capture directory)")
    if not inputs.pods and not inputs.dpc_log:
        raise B.InputError("--pods or --dpc-log is required (or give a capture directory)")
    if not inputs.pods and launcher_logs:
        raise B.InputError("--launcher-log needs --pods (the launcher's log is paired through its Pod)")
    for spec in launcher_logs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise B.InputError(f"--launcher-log {spec!r}: expected POD_NAME=PATH")
        if name in inputs.launcher_logs:
            raise B.InputError(
                f"--launcher-log {spec!r}: {name} already has a log ({inputs.launcher_logs[name]})"
            )
        inputs.launcher_logs[name] = path
    return inputs


def _run(inputs: B.BridgeInputs, selector, container, quiet: bool, tolerance_ns: int) -> B.BridgeResult:  # noqa: ANN001
    from ._common import byte_progress

    total = 0
    if inputs.dpc_log:
        with contextlib.suppress(OSError):
            total = Path(inputs.dpc_log).stat().st_size
    with byte_progress("bridge", total, quiet) as advance:
        return B.run_bridge(
            inputs,
            baseline_selector=selector,
            baseline_container=container,
            progress=advance,
            clock_tolerance_ns=tolerance_ns,
        )


def _phase_inputs(inputs: B.BridgeInputs, vllm_logs: tuple[str, ...], events: tuple[str, ...]) -> None:
    """``--vllm-log KEY=FILE`` and ``--events FILE``, beside (and over) a capture's own."""
    for spec in vllm_logs:
        key, sep, path = spec.partition("=")
        if not sep or not key or not path:
            raise B.InputError(f"--vllm-log {spec!r}: expected INSTANCE_ID_OR_POD=PATH")
        inputs.vllm_logs[key] = path
        inputs.vllm_named.add(key)
    inputs.events.extend(e for e in events if e not in inputs.events)
