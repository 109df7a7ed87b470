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
* A line with a NUL or non-UTF-8 byte is corrupt (:func:`fma_otel.lines.text_of`):
  skipped, never read with U+FFFD (an id so misread matches nothing).
* Line ends as in :mod:`fma_otel.sources.klog` (:func:`fma_otel.lines.read_lines`):
  ``\\n``, ``\\r\\n`` or a carriage return alone.
* Accounting: every physical line counts in ``read`` and in exactly one of ``understood``,
  ``ignored`` (``facts_only``: passed over unread) or ``skipped``.
* **A fact that is no whole one** is skipped, never read as a fact nor passed over, where
  the formats tell it soundly: a ``uvicorn.access`` message with a ``"PUT `` that is not in
  uvicorn's access format (cut inside it); ``Accepted request ... id=`` with no id; a
  message of the launcher's own logger (``__main__``, ``launcher``) that is a proper
  prefix of ``Accepted request to create vLLM instance with id=`` (cut inside it: the
  launcher writes no such message).  The last line of a *file* with no line end after it
  was cut (Python's logging ends each record with one): it is skipped as cut when it may
  have been a fact and is not a whole one (an id that is not a whole DPC instance id, a
  header cut short, an access line cut before its method).  A line the ``facts_only``
  search passes over is still checked for these and for corrupt bytes (a NUL or invalid
  UTF-8 may have hidden a fact's text from the search).  What cannot be told from a good
  line is read as it is: an id cut mid-way on a line that still ends (any id is valid to
  the launcher), and a line cut inside its header or inside the client address of its
  access message (any line may have been cut so; ``facts_only`` reads none of them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from urllib.parse import unquote

from fma_otel.lines import (
    CORRUPT_REASON,
    MAX_VALUE_BYTES,
    also_finding,
    corrupt_line_ends,
    counted_lines,
    text_of,
)
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

#: the loggers that write :data:`ACCEPTED_PREFIX` (``__main__`` when run as a script)
OWN_LOGGERS = ("__main__", "launcher")
#: a DPC instance id: ``"I" + base64.RawURLEncoding(sha256(...)) + "i"`` (45 characters)
_DPC_ID = re.compile(r"I[A-Za-z0-9_-]{43}i", re.ASCII)
#: why the file's last line, with no line end, is skipped
CUT_AT_END = "the file ends inside this line (no line end): cut where it may hold a create or a PUT"
#: why a launcher message cut inside the create receipt's text is skipped
CUT_ACCEPTED = (
    "launcher message cut short of 'Accepted request to create vLLM instance with id=': a create may be lost"
)
#: why a PUT access line not in uvicorn's format is skipped
BAD_PUT = (
    "uvicorn access line with a PUT not in uvicorn's access format (cut?): a create's response may be lost"
)
#: why a create receipt without an id is skipped
NO_ID = "create receipt without an instance id"


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


#: uvicorn's access message up to its method: a method shown whole that is no ``PUT``
#: tells an access line cut after it from a cut ``PUT``
_METHOD = re.compile(r'\S* - "([A-Z]+) ')


def _not_whole(logger: str, message: str, access: object, at_end: bool) -> str | None:
    """Why a record (a parsed header) may have been a fact and is not a whole one, else
    ``None``.  ``at_end``: the file's last line, with no line end (so cut somewhere)."""
    if logger == ACCESS_LOGGER:
        if access is not None:
            return None  # uvicorn wrote it whole: its status is its last field
        if '"PUT ' in message:
            return BAD_PUT
        if at_end:
            m = _METHOD.match(message)
            return CUT_AT_END if m is None or m[1] == "PUT" else None
        return None
    if message.startswith(ACCEPTED_PREFIX):
        ident = message[len(ACCEPTED_PREFIX) :].split(None, 1)
        if not ident:
            return NO_ID
        # cut mid-id or not? Whole when it is a whole DPC id (the bridge reads no other)
        return CUT_AT_END if at_end and _DPC_ID.fullmatch(ident[0]) is None else None
    if logger in OWN_LOGGERS and ACCEPTED_PREFIX.startswith(message):
        return CUT_ACCEPTED  # (a proper prefix: the whole one started the message)
    return None


def _hidden_fact(raw: bytes, at_end: bool) -> str | None:
    """Why a line the ``facts_only`` search passed over (no fact's text in it) is skipped:
    it may have hidden a fact (corrupt bytes, a cut), else ``None`` (ignored)."""
    s = text_of(raw)
    if s is None:
        return CORRUPT_REASON
    s = s.rstrip("\r\n")
    try:
        _, body = _split_prefix(s)
        _, logger, _, message = _split_line(body)
    except LauncherParseError:
        # cut inside its header (it starts with a digit, as a date does): any line, a fact too
        return CUT_AT_END if at_end and s[:1].isascii() and s[:1].isdigit() else None
    return _not_whole(logger, message, None, at_end)


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


#: The line ends of a message that is empty (its trailing space stripped or not), and the
#: start of one that may be a proper prefix of :data:`ACCEPTED_PREFIX` (then tested)
_EMPTY_MESSAGE_ENDS = (b" -\n", b" - \n", b" -\r\n", b" - \r\n")
_ACCEPTED_START = b" - A"
_ACCEPTED_BYTES = ACCEPTED_PREFIX.encode()


def _cut_accepted_ends(block: bytes, pos: int, end: int) -> list[int]:
    """The ends of the lines of ``block[pos:end]`` that :func:`_not_whole` may find cut
    inside the create receipt's text (a superset: the logger is not looked at).  Plain
    searches: a regex over every line of the log cost more than the search for facts."""
    ends = []
    for needle in _EMPTY_MESSAGE_ENDS:
        at = block.find(needle, pos, end)
        while at >= 0:
            ends.append(at + len(needle))
            at = block.find(needle, at + len(needle), end)
    at = block.find(_ACCEPTED_START, pos, end)
    while at >= 0:
        nl = block.find(b"\n", at, end) + 1 or end
        if _ACCEPTED_BYTES.startswith(block[at + 3 : nl].rstrip(b"\r\n")):
            ends.append(nl)
        at = block.find(_ACCEPTED_START, at + 1, end)
    return ends


def _suspect_ends(block: bytes, pos: int, end: int) -> list[int]:
    """The ends of the lines of ``block[pos:end]`` (whole lines) that :func:`_hidden_fact`
    may skip: a message cut inside the create receipt's text, corrupt bytes; in order."""
    return sorted(set(_cut_accepted_ends(block, pos, end) + corrupt_line_ends(block, pos, end)))


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
    find = also_finding(_find_fact, _suspect_ends) if facts_only else None
    lines = counted_lines(fh_or_lines, stats, find, lambda: pending is not None)
    # only a file's last line can lack its line end (the items of an iterable have none)
    is_file = callable(getattr(fh_or_lines, "read", None))
    for line_no, raw in lines:
        if raw is None:
            # Not read (too long): it may have begun a record, so the one before ends
            # here, and continuation lines after it belong to no record.
            if pending is not None and not at_once:
                yield _with_more(pending, more)
            pending, more = None, []
            continue
        at_end = is_file and not raw.endswith(b"\n")
        if facts_only and pending is None and not _may_be_fact(raw):
            why = _hidden_fact(raw, at_end)
            if why is None:
                stats.ignored += 1  # neither a fact nor part of one
            else:
                stats.skip(line_no, why)
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
                _, logger, _, message = _split_line(body)  # it ends a kept record; no fact itself
                access = None
            else:
                pending = parse_launcher_line(body, line_no, prefix_ns)
                logger, message, access = pending.logger, pending.message, pending.access
        except LauncherParseError as e:
            stats.skip(line_no, e.reason)
            continue
        why = _not_whole(logger, message, access, at_end)
        if why is not None:
            pending = None
            stats.skip(line_no, why)
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
