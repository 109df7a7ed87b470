"""The ``fma-otel`` command: a thin click group whose subcommands load lazily.

Each subcommand lives in ``fma_otel/commands/<name>.py`` and exports ``command`` (a
``click.Command``).  Loading them lazily keeps ``fma-otel show ... | head`` and ``--help``
fast, and lets each command own its imports (the SDK, the kubernetes client, plotting).
"""

from __future__ import annotations

import importlib
import sys

import click

from . import __version__

#: subcommand name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "bridge": (
        "fma_otel.commands.bridge",
        "Build actuation traces from a capture (Pods + DPC/launcher logs).",
    ),
    "show": ("fma_otel.commands.show", "Print a terminal waterfall of the traces in an OTLP JSON file."),
    "capture": (
        "fma_otel.commands.capture",
        "Record Pods and logs of a live namespace into a capture directory.",
    ),
    "watch": ("fma_otel.commands.watch", "Live bridge: watch a namespace and export each actuation once."),
    "slo": ("fma_otel.commands.slo", "Percentiles, hit rates and SLO verdicts from traces."),
    "report": ("fma_otel.commands.report", "Write a self-contained HTML report with plots and waterfalls."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, _help = COMMANDS[name]
        try:
            return importlib.import_module(module).command
        except ModuleNotFoundError as exc:  # a command not shipped in this build
            if exc.name == module:
                return None
            raise


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fma-otel")
def main() -> None:
    """OpenTelemetry traces of llm-d Fast Model Actuation."""


def run() -> None:
    """Console entry point: never a traceback for a closed pipe."""
    try:
        main(standalone_mode=True)
    except BrokenPipeError:  # pragma: no cover - exercised via subprocess tests
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
