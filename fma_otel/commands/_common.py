"""Small pieces every subcommand shares: one-line errors, safe output files, progress.

Why here: every command behaves the same — a clear one-line error and exit 2 for unusable
input, a clear error for a full or read-only disk, no traceback when the reader of a pipe
goes away, and a progress bar only on a terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, NoReturn

import click

EXIT_USAGE = 2


def prog_name(ctx: click.Context | None = None) -> str:
    """``fma-otel CMD`` for the running command (however it was invoked: the console
    script, ``python -m``, click's test runner), ``fma-otel`` outside one."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None or (ctx.parent is None and isinstance(ctx.command, click.Group)):
        return "fma-otel"
    if ctx.parent is not None:
        return f"fma-otel {ctx.info_name}"
    path = ctx.command_path
    return path if path.startswith("fma-otel") else f"fma-otel {ctx.info_name}"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``fma-otel CMD: error: <message>`` (one line) on stderr and exit (2 by
    default: unusable arguments or input; 1 for a failure while working)."""
    click.echo(f"{prog_name()}: error: {message}", err=True)
    sys.exit(code)


def kube_api_client(kubeconfig: str | None, context: str | None) -> Any:
    """The Kubernetes API client for ``--kubeconfig`` and ``--context``
    (:func:`fma_otel.commands.params.kube_options`); an unusable configuration is one line
    and exit 2, in every command that connects."""
    from ..live.kube import KubeConfigError, make_api_client

    try:
        return make_api_client(kubeconfig, context)
    except KubeConfigError as exc:
        fail(str(exc))


def terminal_width(tty: bool, default: int = 120) -> int | None:
    """COLUMNS when set (also through a pipe), else the terminal's width; ``None`` through
    a pipe without COLUMNS."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return shutil.get_terminal_size((default, 24)).columns if tty else None


def _describe_os_error(path: str, exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return f"{path}: no space left on device"
    if exc.errno in (errno.EROFS,):
        return f"{path}: read-only file system"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{path}: permission denied"
    if exc.errno == errno.ENOENT:  # a folder missing, or one that takes no new files (/proc)
        target = exc.filename if isinstance(exc.filename, str) else None
        if target and os.path.isdir(os.path.dirname(os.path.abspath(target))):
            return f"{path}: cannot be created in that folder"
        return f"{path}: directory does not exist"
    if exc.errno == errno.EISDIR:
        return f"{path}: is a directory"
    return f"{path}: {exc.strerror or exc}"


@contextlib.contextmanager
def reading_traces(path: str) -> Iterator[None]:
    """Turn every way an OTLP JSON lines input can be unusable into one line and exit 2."""
    from ..sinks.otlp_json import OtlpJsonError

    try:
        yield
    except FileNotFoundError:
        fail(f"{path}: no such file")
    except IsADirectoryError:
        fail(f"{path}: is a directory, not a trace file (run 'fma-otel bridge' on a capture)")
    except PermissionError:
        fail(f"{path}: permission denied")
    except OtlpJsonError:
        fail(f"{path}: not an OTLP JSON lines file (nor OTLP JSON, nor Jaeger JSON)")
    except OSError as exc:
        fail(f"{path}: cannot read: {exc.strerror or exc}")


@contextlib.contextmanager
def open_out(path: str) -> Iterator[IO[str]]:
    """Open ``path`` for writing text ('-' is stdout); disk errors become one-line failures."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            yield fh
    except OSError as exc:  # opening, writing or the last flush
        fail(f"cannot write {_describe_os_error(path, exc)}", 1)


@contextlib.contextmanager
def byte_progress(label: str, total: int | None, quiet: bool) -> Iterator[Callable[[int], None] | None]:
    """A progress bar over bytes on an interactive stderr, else nothing.

    With a known ``total`` it shows only for inputs over 32 MiB (small ones finish first);
    with ``total=None`` (a download of unknown size) it counts bytes as they come.
    """
    if quiet or (total is not None and total < 32 * 1024 * 1024) or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    # No refresh thread (auto_refresh=False; redrawn from ``advance`` at most 10 times a
    # second): nothing else runs while the bar is up.
    with Progress(
        f"[bold]{label}[/]",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        transient=True,
        auto_refresh=False,
    ) as bar:
        task = bar.add_task(label, total=total)
        pending = 0
        drawn = 0.0

        def advance(n: int) -> None:
            nonlocal pending, drawn
            pending += n
            if pending >= 1 << 20:
                bar.advance(task, pending)
                pending = 0
                now = time.monotonic()
                if now - drawn >= 0.1:
                    bar.refresh()
                    drawn = now

        yield advance
