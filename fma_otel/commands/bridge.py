"""``fma-otel bridge``: capture files in, one OTLP trace per actuation out.

The flags ``--pods --dpc-log --launcher-log NAME=FILE --baseline-selector --out`` are a
contract.  Exit codes: 0 done; 1 ``--strict`` found skipped lines, or the OTLP export
failed (the ``--out`` file is complete either way); 2 unusable arguments or files.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from .. import bridge as B
from ..podfacts import parse_selector
from ..sinks.otlp_json import write_trace_line
from ..workers import MAX_JOBS, no_cyclic_gc
from ._common import fail, finish, open_out

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
    "--baseline-selector", metavar="SEL", help="Label selector of baseline (no-FMA) vLLM Pods, e.g. app=vllm."
)
@click.option(
    "--baseline-container", metavar="NAME", help="Main container of baseline Pods (default: the first)."
)
@click.option("--out", "out", type=click.Path(), help="Write OTLP JSON lines here ('-' for stdout).")
@click.option(
    "--otlp-endpoint", metavar="URL", help="Export over OTLP (else OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT)."
)
@click.option("--otlp-protocol", type=click.Choice(["grpc", "http/protobuf"]), help="OTLP protocol.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) naming file and line if any line was skipped.")
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1, max=MAX_JOBS),
    help="Processes reading a DPC log of 16 MiB or more, and building the traces of 256 or more "
    f"actuations written to --out (default: the CPUs available, at most 4; 1: all in one process; "
    f"at most {MAX_JOBS}, and never more than the input gives work for). "
    "The output is the same either way.",
)
@click.option("--quiet", "-q", is_flag=True, help="No summary or progress on stderr.")
def command(
    capture: str | None,
    pods: tuple[str, ...],
    dpc_log: str | None,
    launcher_logs: tuple[str, ...],
    baseline_selector: str | None,
    baseline_container: str | None,
    out: str | None,
    otlp_endpoint: str | None,
    otlp_protocol: str | None,
    strict: bool,
    jobs: int | None,
    quiet: bool,
) -> None:
    try:
        selector = parse_selector(baseline_selector)
    except ValueError as exc:
        fail(f"--baseline-selector: {exc}")
    try:
        inputs = _inputs(capture, pods, dpc_log, launcher_logs, quiet)
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
    # The cyclic collector stays off from the first source read to the end (run_bridge and
    # trace_lines switch it off for their own parts; turned back on in between, its first
    # full collection walked the millions of objects the run holds, ~80 ms of a 2 s run),
    # and the command ends inside, the run's objects still held (see finish).
    with no_cyclic_gc():
        failed = False
        written: tuple[int, int] | None = None
        paths: Counter[tuple[str, bool]] | None = None
        try:
            # Only writing a file: the actuations are correlated, built and encoded by workers
            # (trace_lines.py), which count them by path for the summary.
            by_lines = out is not None and sink is None
            try:
                result = _run(inputs, selector, baseline_container, quiet, jobs, not by_lines)
            except B.InputError as exc:
                fail(str(exc))

            if by_lines:
                from ..trace_lines import trace_lines
                from ..workers import default_jobs

                n_traces = n_spans = 0
                paths = Counter()
                with open_out(out) as fh:
                    for text, traces, spans, counted in trace_lines(
                        result.requesters, jobs or default_jobs(), expand=result.actuations_of
                    ):
                        fh.write(text)
                        n_traces += traces
                        n_spans += spans
                        paths.update(counted)
                written = (n_traces, n_spans)
            elif out is not None:
                with open_out(out) as fh:
                    for trace in result.traces:
                        write_trace_line(fh, trace)
            if sink is not None:
                try:
                    for trace in result.traces:
                        sink.export(trace)
                except otlp_export.ExportError as exc:
                    click.echo(f"fma-otel bridge: export failed: {exc}", err=True)
                    failed = True
                if sink.dropped:  # traces that cannot be encoded: never sent, always said
                    d = sink.dropped[0]
                    click.echo(
                        f"fma-otel bridge: export: {len(sink.dropped)} trace(s) not sent, cannot be "
                        f"encoded (first: {d.trace_id}: {d.reason})",
                        err=True,
                    )
                    failed = True
        finally:
            if sink is not None:
                sink.close()
        if not quiet:
            click.echo(B.summary(result, written, paths), err=True)
        skipped = [(st.name, ln, why) for st in result.stats for ln, why in st.skipped_lines]
        if strict and skipped:
            for name, ln, why in skipped[:20]:
                click.echo(f"{name}:{ln}: skipped: {why}", err=True)
            total = sum(st.skipped for st in result.stats)
            click.echo(f"fma-otel bridge: --strict: {total} line(s) skipped", err=True)
            finish(1)
        finish(1 if failed else 0)


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
    if not inputs.pods:
        raise B.InputError("--pods is required (or give a capture directory)")
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


def _run(
    inputs: B.BridgeInputs, selector, container, quiet: bool, jobs: int | None, build: bool
) -> B.BridgeResult:  # noqa: ANN001
    from ._common import byte_progress

    total = 0
    if inputs.dpc_log:
        import os

        try:
            total = os.path.getsize(inputs.dpc_log)
        except OSError:
            total = 0
    with byte_progress("bridge", total, quiet) as advance:
        return B.run_bridge(
            inputs,
            baseline_selector=selector,
            baseline_container=container,
            progress=advance,
            jobs=jobs,
            build=build,
        )
