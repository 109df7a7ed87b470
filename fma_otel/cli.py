"""The ``fma-otel`` command: a thin click group whose subcommands load lazily.

Each subcommand lives in ``fma_otel/commands/<name>.py`` and exports ``command`` (a
``click.Command``).  Loading them lazily keeps ``fma-otel show ... | head`` and ``--help``
fast, and lets each command own its imports (the SDK, the kubernetes client, plotting).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import io
import os
import sys
from collections.abc import Iterator

import click

from . import __version__

#: subcommand name -> its module (the one-line help is the command's own)
COMMANDS: dict[str, str] = {
    name: f"fma_otel.commands.{name}" for name in ("bridge", "show", "capture", "watch", "slo", "report")
}


class _PipeClosed(Exception):
    """The reader of stdout went away: carried past click, which would make it exit 1."""


class _Stdout(io.FileIO):
    """fd 1 under ``sys.stdout``, remembering a failed write so :func:`run` can name it."""

    failed: OSError | None = None

    def write(self, b):  # noqa: ANN001, ANN201 - io's signature
        try:
            return super().write(b)
        except OSError as exc:
            self.failed = exc
            raise


_stdout_raw: _Stdout | None = None


@contextlib.contextmanager
def _pipe_guard() -> Iterator[None]:
    """An EPIPE as :class:`_PipeClosed`: click's standalone mode turns EPIPE into exit 1
    before :func:`run` can see it."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            raise _PipeClosed from exc
        raise


class LazyGroup(click.Group):
    def main(self, *args, standalone_mode: bool = True, **kwargs):  # noqa: ANN002, ANN003, ANN201
        """Click's own handling, but every usage error as the one error format of all
        commands: ``fma-otel CMD: error: ...`` on one line of stderr, exit 2."""
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        from .commands._common import prog_name
        from .errtext import one_line

        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.ClickException as exc:  # a UsageError knows its command's context
            name = prog_name(getattr(exc, "ctx", None))
            click.echo(f"{name}: error: {one_line(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("fma-otel: aborted", err=True)
            sys.exit(1)

    def make_context(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN201
        with _pipe_guard():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context):  # noqa: ANN201
        with _pipe_guard():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module = COMMANDS.get(name)
        return importlib.import_module(module).command if module else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fma-otel")
def main() -> None:
    """OpenTelemetry traces of llm-d Fast Model Actuation."""


def _ensure_fd(fd: int) -> None:
    """A closed fd 0/1/2 (``>&-``) becomes /dev/null, so nothing else is opened on it."""
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def _setup_std_streams() -> None:
    """No ``None`` stdout/stderr (closed: output goes nowhere, as with >/dev/null), and a
    stdout whose failed write :func:`run` can tell from any other ``OSError``."""
    global _stdout_raw
    for fd in (0, 1, 2):
        _ensure_fd(fd)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    old = sys.stdout
    if old is not None:
        try:
            if not isinstance(old, io.TextIOWrapper) or old.fileno() != 1:
                return  # not the process's own stdout (embedded, captured): leave it
            old.flush()
        except (OSError, ValueError):
            return
    raw = _Stdout(1, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw, 1 << 16),
        encoding=getattr(old, "encoding", None) or "utf-8",
        errors=getattr(old, "errors", None) or "strict",
        line_buffering=bool(getattr(old, "line_buffering", False)),
        write_through=bool(getattr(old, "write_through", False)),
    )
    _stdout_raw = raw


def _stdout_to_devnull() -> None:
    """So the interpreter's final flush of stdout cannot fail (or complain) again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:  # pragma: no cover
        pass


def run() -> None:
    """Console entry point: never a traceback for a closed, full or missing stdout."""
    # gRPC's C core logs TLS and connection trouble itself (``I1203 ... ssl_transport_
    # security.cc:...] Handshake failed``), around our one-line error that already says
    # what failed.  Before grpc is imported; an explicit GRPC_VERBOSITY still wins.
    os.environ.setdefault("GRPC_VERBOSITY", "NONE")
    _setup_std_streams()
    try:
        try:
            main(standalone_mode=True)
        finally:
            if sys.stdout is not None and _stdout_raw is not None and _stdout_raw.failed is None:
                sys.stdout.flush()
    except (_PipeClosed, BrokenPipeError):
        _stdout_to_devnull()
        sys.exit(0)
    except OSError:
        failed = _stdout_raw.failed if _stdout_raw is not None else None
        if failed is None:
            raise
        _stdout_to_devnull()
        if failed.errno == errno.EPIPE:
            sys.exit(0)
        reason = failed.strerror or str(failed)
        click.echo(f"fma-otel: cannot write to standard output: {reason}", err=True)
        sys.exit(1)
