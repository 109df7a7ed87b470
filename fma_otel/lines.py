"""Lines of any length, read without holding a whole one in memory.

Why: every reader of a log or a trace file once held each line whole, so a 300 MB line (or
``/dev/zero`` given as a log) took memory without bound.  A line longer than a reader's
limit is now only measured: the reader counts it as skipped, with its length, and goes on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


class TooLong(int):
    """The length of a line longer than a reader keeps (its line end included).

    Why: a reader that held any line whole would hold a 300 MB line, or ``/dev/zero``,
    in memory.  Such a line is not read into memory at all: the reader counts it as
    skipped, with its length, and goes on after its end.
    """

    __slots__ = ()


#: The longest log line the readers parse: far past any real klog or launcher line (a
#: DPC line with a whole vllm-config is a few KiB), short enough to hold.
MAX_LINE_BYTES = 16 << 20


#: The longest OTLP JSON line the trace readers (``show``, ``report``, ``slo``) decode: one
#: actuation's trace is tens of KiB; a line past this is counted as skipped.
MAX_TRACE_LINE_BYTES = 64 << 20

#: The longest multi-line value (klog ``key=<`` block, launcher continuation lines) a
#: record keeps; past it the value is dropped and the line counted as skipped.
MAX_VALUE_BYTES = 16 << 20


def too_long_reason(n: int) -> str:
    return f"line longer than {MAX_LINE_BYTES >> 20} MiB ({n} bytes): not read"


def too_long(head: bytes, readline: Any) -> TooLong:
    """A line whose first ``head`` bytes were read and found over the limit: read the rest
    in 1 MiB pieces only to measure it (never held whole), up to its line end or EOF."""
    n = len(head)
    line = head
    while not line.endswith(b"\n"):
        line = readline(1 << 20)
        if not line:
            break
        n += len(line)
    return TooLong(n)


def bounded_lines(fh: Any, limit: int) -> Iterator[bytes | TooLong]:
    """The lines of a binary file, each as ``for line in fh`` gives it, except that a line
    longer than ``limit`` bytes comes as :class:`TooLong` (its length) and is never held
    whole."""
    readline = fh.readline
    while True:
        line = readline(limit + 1)
        if len(line) <= limit:
            if not line:
                return
            yield line
            continue
        yield too_long(line, readline)
