"""Parser for the launcher container log (Python ``logging``, uvicorn routed through it).

The launcher configures ``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` for the
root logger and lets uvicorn's loggers propagate, so every line, access lines included,
reads ``2026-06-29 14:36:20,511 - uvicorn.access - INFO - 10.244.0.12:53410 - "PUT
/v2/vllm/instances/<id> HTTP/1.1" 201``.  ``asctime`` has no zone; the container runs in
UTC, so it is taken as UTC.  Millisecond precision is what the span model records for
``X.receipt``/``X.response``.

Decisions (the tests pin them):

* A line that starts with no date (a traceback, the rest of a multi-line message) is a
  **continuation** of the previous record: it is appended to that record's message with
  ``\\n`` and counted as understood, never as skipped.  Hence a record is yielded only when
  the next header line (or the end) is read.  A continuation before any record is skipped.
* A line with the uvicorn CLI layout (``INFO:     10.131.6.2:34340 - "GET ..." 200 OK``,
  the launcher started by ``uvicorn launcher:app``) has no time at all: it is skipped with
  a reason that says so, and it ends the previous record.
* A line that starts with a date but not in the launcher layout (for example the notifier
  sidecar's ``2026-06-29 14:35:47,250 INFO launcher_pod_notifier: ...`` when containers are
  concatenated) is skipped and ends the previous record, rather than glued onto it.
* Non-UTF-8 bytes are replaced (U+FFFD), as in :mod:`fma_otel.sources.klog`.
* Line ends as in :mod:`fma_otel.sources.klog` (:func:`fma_otel.lines.read_lines`):
  ``\\n``, ``\\r\\n`` or a carriage return alone.
* Accounting: every physical line counts in ``read`` and in exactly one of ``understood``
  or ``skipped``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from urllib.parse import unquote

from fma_otel.lines import CORRUPT_REASON, MAX_VALUE_BYTES, counted_lines, text_of
from fma_otel.sources.klog import split_timestamp_prefix
from fma_otel.sources.records import LauncherRecord, SourceStats
from fma_otel.timeutil import check_ns
from fma_otel.timeutil import date_seconds as _epoch_seconds_of_day

__all__ = [
    "LauncherParseError",
    "accepted_create_id",
    "iter_launcher_log",
    "parse_access",
    "parse_launcher_line",
    "parse_launcher_text",
    "put_instance_id",
]

ACCEPTED_PREFIX = "Accepted request to create vLLM instance with id="
INSTANCES_PATH = "/v2/vllm/instances/"
ACCESS_LOGGER = "uvicorn.access"


#: the reason of a line that does not start like a record (no date): a continuation line
NOT_A_LINE = "not a launcher log line"


class LauncherParseError(ValueError):
    """A line that is no launcher record; ``reason`` is meant for ``SourceStats``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: uvicorn's access format ``'%s - "%s %s HTTP/%s" %d'``, plus an optional reason phrase.
_ACCESS = re.compile(r'(\S*) - "([A-Z]+) (\S+) HTTP/([0-9.]+)" (\d{3})(?: .*)?$')
#: uvicorn's own (CLI) formatter: ``LEVEL:`` padded with spaces, no time.
_UVICORN_CLI = re.compile(r"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")


def parse_access(message: str) -> tuple[str, str, str, str, int] | None:
    """``(client, method, path, http_version, status)`` of a uvicorn access message."""
    m = _ACCESS.match(message)
    if m is None:
        return None
    return m.group(1), m.group(2), m.group(3), m.group(4), int(m.group(5))


#: ``YYYY-MM-DD HH:MM:SS,mmm`` in ASCII digits (``str.isdigit`` would take ``'²'``)
_ASCTIME = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", re.ASCII)
_DATE = re.compile(r"\d{4}-\d\d-\d\d", re.ASCII)


@lru_cache(4096)  # a launcher log's lines fall in few minutes: each is read once
def _minute(head: str) -> int | None:
    """``YYYY-MM-DD HH:MM`` -> the epoch seconds of that minute, ``None`` when it is none."""
    h, mi = int(head[11:13]), int(head[14:16])
    if h > 23 or mi > 59:
        return None
    try:
        return _epoch_seconds_of_day(head[:10]) + h * 3600 + mi * 60
    except ValueError:
        return None


def _split_line(line: str) -> tuple[int, str, str, str]:
    """``(t_ns, logger, level, message)`` of a header line (no ``--timestamps`` prefix);
    raise :class:`LauncherParseError`."""
    if len(line) < 26 or _ASCTIME.match(line) is None:
        if len(line) < 26 or _DATE.match(line) is None:
            raise LauncherParseError(NOT_A_LINE)
        raise LauncherParseError("line starts with a date but not with a launcher asctime")
    minute = _minute(line[:16])
    sec = int(line[17:19])
    try:
        if minute is None or sec > 60:
            raise ValueError("not an asctime")
        t_ns = check_ns((minute + sec) * 1_000_000_000 + int(line[20:23]) * 1_000_000)
    except ValueError:
        raise LauncherParseError("line starts with a date but not with a launcher asctime") from None
    if line[23:26] != " - ":
        raise LauncherParseError("timestamped line not in the launcher format")
    a = line.find(" - ", 26)
    b = line.find(" - ", a + 3) if a >= 0 else -1
    if b < 0:
        if a >= 0 and line.endswith(" -"):  # empty message whose trailing space was stripped
            b = len(line)
        else:
            raise LauncherParseError("timestamped line not in the launcher format")
    logger = line[26:a]
    level = line[a + 3 : b]
    if not logger or not level or " " in logger:
        raise LauncherParseError("timestamped line not in the launcher format")
    return t_ns, logger, level, line[b + 3 :]


def parse_launcher_line(line: str, line_no: int = 0, prefix_ns: int | None = None) -> LauncherRecord:
    """Parse one header line (no ``--timestamps`` prefix); raise :class:`LauncherParseError`."""
    t_ns, logger, level, message = _split_line(line)
    access = parse_access(message) if logger == ACCESS_LOGGER else None
    return LauncherRecord(line_no, t_ns, logger, level, message, access, prefix_ns)


def _split_prefix(text: str) -> tuple[int | None, str]:
    """``(prefix_ns, body)`` of a line that may carry the kubelet's ``--timestamps`` prefix
    (``"2026-...T...Z <line>"``); raise :class:`LauncherParseError` for a bad one."""
    if text[10:11] not in ("T", "t"):
        return None, text
    try:
        return split_timestamp_prefix(text)
    except ValueError:
        raise LauncherParseError("bad timestamp prefix") from None


def parse_launcher_text(text: str, line_no: int = 0) -> LauncherRecord:
    """Parse one line as a log holds it, with or without a ``--timestamps`` prefix: the
    step every reader of single launcher lines shares (the live watcher, the boot line);
    raise :class:`LauncherParseError`."""
    prefix_ns, body = _split_prefix(text)
    return parse_launcher_line(body, line_no, prefix_ns)


def _with_more(rec: LauncherRecord, more: list[str]) -> LauncherRecord:
    if not more:
        return rec
    return rec._replace(message="\n".join([rec.message, *more]))


def _is_fact(rec: LauncherRecord) -> bool:
    """A record :func:`fma_otel.facts.launcher_fact` may use (a superset of its facts)."""
    acc = rec.access
    if acc is not None and acc[1] == "PUT" and acc[2].startswith(INSTANCES_PATH):
        return True
    return rec.message.startswith(ACCEPTED_PREFIX)


_FACT_BYTES = (ACCEPTED_PREFIX.encode(), b'"PUT ')


def _may_be_fact(raw: bytes) -> bool:
    """Whether a line may hold a fact the bridge reads: a literal search, nothing checked
    (a record without either text is no fact, :func:`_is_fact`)."""
    return _FACT_BYTES[0] in raw or _FACT_BYTES[1] in raw


def _find_fact(block: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """``find`` for :func:`~fma_otel.lines.read_lines`: the bounds of the first line of
    ``block[pos:end]`` that may hold a fact (the test of :func:`_may_be_fact`)."""
    i, j = block.find(_FACT_BYTES[0], pos, end), block.find(_FACT_BYTES[1], pos, end)
    at = i if j < 0 or 0 <= i < j else j
    if at < 0:
        return None
    return block.rfind(b"\n", pos, at) + 1 or pos, block.find(b"\n", at, end) + 1


def iter_launcher_log(
    fh_or_lines: Iterable[bytes] | Iterable[str],
    stats: SourceStats,
    *,
    facts_only: bool = False,
    at_once: bool = False,
) -> Iterator[LauncherRecord]:
    """Stream :class:`LauncherRecord` s from a binary file or any iterable of lines.

    ``facts_only=True`` yields only the records the bridge uses (a message starting with
    :data:`ACCEPTED_PREFIX`, or an access line ``PUT`` under :data:`INSTANCES_PATH`): the
    subset of the records yielded without it.  Lines that hold neither text, outside such
    a record, are then counted in ``stats.ignored`` unread (most lines of a launcher log);
    a header line that ends such a record is only checked (counted, not built).

    ``at_once=True`` yields each record as soon as its header line is read, its
    continuation lines then counted but not joined: a live stream's next header line may
    be minutes away, and the facts are single-line.
    """
    pending: LauncherRecord | None = None
    more: list[str] = []
    more_bytes = 0
    # lines come one by one while a record may take more of them
    find = _find_fact if facts_only else None
    lines = counted_lines(fh_or_lines, stats, find, lambda: pending is not None)
    for line_no, raw in lines:
        if raw is None:
            # Not read (too long): it may have begun a record, so the one before ends
            # here, and continuation lines after it belong to no record.
            if pending is not None and not at_once:
                yield _with_more(pending, more)
            pending, more = None, []
            continue
        if facts_only and pending is None and not _may_be_fact(raw):
            stats.ignored += 1  # neither a fact nor part of one
            continue
        s = text_of(raw)
        if s is None:  # it may have begun a record: as a line too long to read
            if pending is not None and not at_once:
                yield _with_more(pending, more)
            pending, more = None, []
            stats.skip(line_no, CORRUPT_REASON)
            continue
        s = s.rstrip("\r\n")
        try:
            prefix_ns, body = _split_prefix(s)
        except LauncherParseError as e:
            stats.skip(line_no, e.reason)
            continue
        if _DATE.match(body) is None:
            if _UVICORN_CLI.match(body):
                if pending is not None and not at_once:
                    yield _with_more(pending, more)
                pending, more = None, []
                stats.skip(line_no, "uvicorn CLI line without a time (no asctime)")
            elif at_once and pending is not None:
                stats.understood += 1  # its record is out: the line is read, not joined
            elif pending is not None:
                more_bytes = (more_bytes if more else 0) + len(body) + 1  # joined with "\n"
                if more_bytes > MAX_VALUE_BYTES:
                    stats.skip(line_no, f"continuation lines past {MAX_VALUE_BYTES >> 20} MiB: not kept")
                    continue
                stats.understood += 1
                more.append(body)
            elif not body.strip():
                stats.skip(line_no, "blank line")
            else:
                stats.skip(line_no, "continuation line before any launcher record")
            continue
        if pending is not None and not at_once:
            yield _with_more(pending, more)
        pending, more = None, []
        try:
            if facts_only and not _may_be_fact(raw):
                _split_line(body)  # it ends a kept record; no fact itself
            else:
                pending = parse_launcher_line(body, line_no, prefix_ns)
        except LauncherParseError as e:
            stats.skip(line_no, e.reason)
            continue
        stats.understood += 1
        if facts_only and pending is not None and not _is_fact(pending):
            pending = None  # its continuation lines are passed over with the other lines
        if at_once and pending is not None:
            yield pending  # (and stays ``pending``: the lines after it may continue it)
    if pending is not None and not at_once:
        yield _with_more(pending, more)


def accepted_create_id(rec: LauncherRecord) -> str | None:
    """The instance id of ``"Accepted request to create vLLM instance with id=<id>"``
    (the ``X.receipt`` instant), else ``None``."""
    msg = rec.message
    if not msg.startswith(ACCEPTED_PREFIX):
        return None
    rest = msg[len(ACCEPTED_PREFIX) :].split(None, 1)
    return rest[0] if rest else None


def put_instance_id(rec: LauncherRecord) -> str | None:
    """The instance id of an access line ``PUT /v2/vllm/instances/<id>`` (the
    ``X.response`` instant; the status is ``rec.access[4]``), else ``None``.  Sub-resources
    such as ``.../<id>/log`` are not a create and give ``None``."""
    acc = rec.access
    if acc is None or acc[1] != "PUT":
        return None
    path = acc[2].split("?", 1)[0]
    if not path.startswith(INSTANCES_PATH):
        return None
    ident = path[len(INSTANCES_PATH) :]
    if not ident or "/" in ident:
        return None
    return unquote(ident)
