"""Parser for klog v2 text lines, as the dual-pods controller (DPC) writes them.

A line is ``Lmmdd hh:mm:ss.uuuuuu PID file.go:line] "<msg>" key=value ...``, optionally
preceded by the ``kubectl logs --timestamps`` RFC3339Nano prefix.  The message is always
``strconv.Quote``-d; each value is a Go-quoted string, a JSON value (klog marshals every
non-string value with ``encoding/json``), a ``%+q`` byte string, or a multi-line block::

    ... tail=<
    <TAB>first line
    <TAB>second line
     > next=1

Why not a regex per pair (as the benchmark harness's ``(\\w+)="([^"]*)"``): it loses every
non-string value and breaks on escaped quotes inside ``err`` and ``annotations``.  Here each
value is read from its first character: a quoted string by scanning for the unescaped closing
quote, anything else with :meth:`json.JSONDecoder.raw_decode` at that position, so JSON with
spaces and escaped quotes inside costs one C call.

Decisions (the tests pin them):

* **Non-UTF-8 bytes** are decoded with ``errors="replace"`` (U+FFFD) and the line is still
  parsed: klog itself escapes invalid bytes inside quoted values, so raw invalid bytes only
  show up in block text or in corrupted lines, and the header instant is still worth having.
* **Truncated lines** (cut mid-value, e.g. by a line-length limit or the end of a file) are
  parsed *partially*: the record keeps the header, the message and every pair that was
  complete; the value that was cut is dropped (a cut number or string would be silently
  wrong).  Such a line counts as understood.  A line cut inside the header or the message is
  skipped.  An unterminated multi-line block is dropped the same way.
* **Unparseable values** (klog's ``%+v`` fallback, corruption) are kept as the raw ``str``
  up to the next `` key=`` where the parser resynchronises.
* **Unstructured klog lines** (``klog.Infof`` from libraries: message not quoted) are
  understood: ``msg`` is the rest of the line and ``kv`` is empty.
* **Accounting**: every physical line is counted in ``stats.read`` and in exactly one of
  ``stats.understood`` (records, continuation lines of a block, lines ignored by the
  ``messages`` prefilter) or ``stats.skipped`` (with a reason).
"""

from __future__ import annotations

import calendar
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from fma_otel.lines import MAX_LINE_BYTES, MAX_VALUE_BYTES, too_long_reason
from fma_otel.lines import TooLong as _TooLong
from fma_otel.sources.blocks import Plain as _Plain
from fma_otel.sources.blocks import bulk_items, finder
from fma_otel.sources.blocks import bulk_readable as _bulk_readable
from fma_otel.sources.records import KlogRecord, SourceStats

__all__ = [
    "KlogParseError",
    "go_quote",
    "go_unquote",
    "iter_klog",
    "parse_klog_line",
    "parse_rfc3339_ns",
    "simple_line_pattern",
    "split_timestamp_prefix",
]


class KlogParseError(ValueError):
    """A line that is not klog text; ``reason`` is short and meant for ``SourceStats``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- RFC3339

_DIGITS = frozenset("0123456789")


@lru_cache(maxsize=4096)
def _epoch_seconds_of_day(ymd: str) -> int:
    """``YYYY-MM-DD`` -> seconds since the epoch at 00:00 UTC; cached (lines share dates)."""
    if len(ymd) != 10 or ymd[4] != "-" or ymd[7] != "-":
        raise ValueError(f"bad date {ymd!r}")
    y, mo, d = ymd[0:4], ymd[5:7], ymd[8:10]
    if not (_all_digits(y) and _all_digits(mo) and _all_digits(d)):
        raise ValueError(f"bad date {ymd!r}")
    year, month, day = int(y), int(mo), int(d)
    if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        raise ValueError(f"bad date {ymd!r}")
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))


def _all_digits(s: str) -> bool:
    # str.isdigit() accepts non-ASCII digits such as '²' that int() then rejects or misreads.
    return bool(s) and s.isascii() and s.isdigit()


def parse_rfc3339_ns(text: str) -> int:
    """``2026-09-03T19:49:03.7972878Z`` -> UTC nanoseconds since the epoch.

    Accepts what Go's ``time.RFC3339Nano`` and Kubernetes write: 0-9 fractional digits
    (more are truncated to ns), ``Z``/``z`` or a ``±HH:MM`` offset.  Written by hand because
    Python 3.10's ``datetime.fromisoformat`` rejects ``Z`` and 9 digits, and every datetime
    API rounds to microseconds.  Raises ``ValueError`` on anything else.
    """
    s = text
    n = len(s)
    if n < 20 or s[10] not in "Tt" or s[13] != ":" or s[16] != ":":
        raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
    day_s = _epoch_seconds_of_day(s[:10])
    hh, mm, ss = s[11:13], s[14:16], s[17:19]
    if not (_all_digits(hh) and _all_digits(mm) and _all_digits(ss)):
        raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
    h, m, sec = int(hh), int(mm), int(ss)
    if h > 23 or m > 59 or sec > 60:
        raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
    i = 19
    frac_ns = 0
    if i < n and s[i] == ".":
        j = i + 1
        while j < n and s[j] in _DIGITS:
            j += 1
        digits = s[i + 1 : j]
        if not digits:
            raise ValueError(f"not an RFC3339 time: {text[:40]!r}")
        frac_ns = int(digits[:9].ljust(9, "0"))
        i = j
    zone = s[i:]
    if zone in ("Z", "z"):
        offset = 0
    elif len(zone) == 6 and zone[0] in "+-" and zone[3] == ":" and _all_digits(zone[1:3] + zone[4:6]):
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        if zone[0] == "-":
            offset = -offset
    else:
        raise ValueError(f"not an RFC3339 time (zone): {text[:40]!r}")
    return (day_s + h * 3600 + m * 60 + sec - offset) * 1_000_000_000 + frac_ns


def split_timestamp_prefix(line: str) -> tuple[int | None, str]:
    """Split a ``kubectl logs --timestamps`` prefix off a decoded line.

    Returns ``(prefix_ns, rest)``; ``(None, line)`` when the line does not start with a
    digit (klog and launcher lines start with a letter or with the prefix's year).  Raises
    ``ValueError`` when it starts like a prefix but is not one.
    """
    if not line or line[0] not in _DIGITS:
        return None, line
    sp = line.find(" ")
    if sp < 0:
        raise ValueError("line is only a timestamp")
    return parse_rfc3339_ns(line[:sp]), line[sp + 1 :]


# --------------------------------------------------------------------------- Go quoting

_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_HEX = frozenset("0123456789abcdefABCDEF")
_OCT = frozenset("01234567")


def _hex(s: str, width: int) -> int:
    if len(s) != width or not all(c in _HEX for c in s):
        raise ValueError(f"bad hex escape {s!r}")
    return int(s, 16)


def go_unquote(quoted: str) -> str:
    """Decode a Go ``strconv.Quote`` / ``%+q`` literal, quotes included.

    ``\\xNN`` and octal ``\\NNN`` are *bytes* in Go; consecutive ones are collected and
    decoded as UTF-8 (``errors="replace"``), so ``\\xe2\\x82\\xac`` gives ``€`` and a lone
    invalid byte gives U+FFFD.  ``\\u``/``\\U`` are code points (surrogates and values past
    U+10FFFF, which Go never writes, raise).  Raises ``ValueError`` on a malformed literal.
    """
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise ValueError("not a quoted string")
    body = quoted[1:-1]
    if "\\" not in body:
        return body
    out: list[str] = []
    raw = bytearray()
    i = 0
    n = len(body)
    while i < n:
        bs = body.find("\\", i)
        if bs < 0:
            bs = n
        if bs > i:
            if raw:
                out.append(raw.decode("utf-8", "replace"))
                raw.clear()
            out.append(body[i:bs])
        if bs >= n:
            break
        if bs + 1 >= n:
            raise ValueError("backslash at end of string")
        c = body[bs + 1]
        if c == "x":
            raw.append(_hex(body[bs + 2 : bs + 4], 2))
            i = bs + 4
            continue
        if c in _OCT:
            o = body[bs + 1 : bs + 4]
            if len(o) != 3 or not all(d in _OCT for d in o) or int(o, 8) > 255:
                raise ValueError(f"bad octal escape {o!r}")
            raw.append(int(o, 8))
            i = bs + 4
            continue
        if raw:
            out.append(raw.decode("utf-8", "replace"))
            raw.clear()
        simple = _SIMPLE_ESCAPES.get(c)
        if simple is not None:
            out.append(simple)
            i = bs + 2
        elif c in "uU":
            width = 4 if c == "u" else 8
            cp = _hex(body[bs + 2 : bs + 2 + width], width)
            if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
                raise ValueError(f"bad code point {cp:#x}")
            out.append(chr(cp))
            i = bs + 2 + width
        else:
            raise ValueError(f"unknown escape \\{c}")
    if raw:
        out.append(raw.decode("utf-8", "replace"))
    return "".join(out)


_QUOTE_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(s: str) -> str:
    """``strconv.Quote`` in Python (close enough for log messages): the prefilter compares
    quoted message text byte for byte, so it must quote a message the way klog did."""
    out = ['"']
    for ch in s:
        esc = _QUOTE_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _quoted_end(s: str, start: int) -> int:
    """Index just past the closing quote of the literal opening at ``s[start]``; -1 if cut.

    A quote is closing when an even number of backslashes precedes it (Go escapes every
    backslash, so an odd run means the quote itself is escaped).
    """
    j = start + 1
    while True:
        q = s.find('"', j)
        if q < 0:
            return -1
        k = q - 1
        while s[k] == "\\":
            k -= 1
        if (q - 1 - k) % 2 == 0:
            return q + 1
        j = q + 1


def _quoted_end_b(b: bytes, start: int) -> int:
    """:func:`_quoted_end` on bytes, for the prefilter (no decode of ignored lines)."""
    j = start + 1
    while True:
        q = b.find(b'"', j)
        if q < 0:
            return -1
        k = q - 1
        while b[k] == 0x5C:
            k -= 1
        if (q - 1 - k) % 2 == 0:
            return q + 1
        j = q + 1


# --------------------------------------------------------------------------- one line

_HEADER_SRC = r"([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) +(\d+) ([^ :\]]+):(\d+)\] "
_HEADER = re.compile(_HEADER_SRC, re.ASCII)

#: ``+`` after a repeat makes it possessive (Python >= 3.11): ``re`` then keeps no state to
#: backtrack into it.  Only used where backtracking cannot find another match anyway.
_POSS = "+" if sys.version_info >= (3, 11) else ""
#: Any character but ``"`` and ``\``; any character but space, ``=`` and ``"``.  Negated
#: classes, not ranges up to U+10FFFF: ``re`` spends ~10 ms compiling each such range (the
#: three patterns below cost 55 ms at every import), and matching real lines with them was
#: no faster.
_NOT_QUOTE_OR_BS = r'[^"\\]'
_NOT_KEY_END = r'[^ ="]'


def _pair_src(group: str) -> str:
    """The pattern of one pair; ``group`` is ``"("`` to capture (key, quoted body, token)
    or ``"(?:"`` not to."""
    p = _POSS
    q = _NOT_QUOTE_OR_BS
    return (
        rf" {group}{_NOT_KEY_END}+{p})="
        rf'(?:"{group}{q}*{p}(?:\\.{q}*{p})*{p})"'
        rf"|{group}-?\d+{p}(?:\.\d+{p})?{p}(?:[eE][-+]?\d+{p})?{p}|true|false|null))(?= |$)"
    )


#: One pair whose value is a Go-quoted string or a JSON scalar, followed by a space or the end.
_PAIR = re.compile(_pair_src("("), re.ASCII)
_SIMPLE_HEAD = re.compile(_HEADER_SRC + '"(' + _NOT_QUOTE_OR_BS + "*" + _POSS + ')"', re.ASCII)
_PAIR_OR_REST = re.compile(_pair_src("(") + r"|((?s:.+))", re.ASCII)
_RESYNC = re.compile(r" [A-Za-z_][A-Za-z0-9_.\-/]*=")
_DECODER = json.JSONDecoder()
_JSON_CONST: dict[str, Any] = {"true": True, "false": False, "null": None}


def simple_line_pattern(message: str) -> re.Pattern[bytes]:
    r"""A bytes regex whose ``fullmatch`` takes a klog line (no ``--timestamps`` prefix, no
    line end), or the start of one up to a space between two pairs, with this ``message``
    and pairs only in the one-regex grammar of the fast path; groups: month, day, hour,
    minute, second.

    Why: a caller that drops a kind of line's record anyway (the bridge, failed
    ``/is_sleeping`` polls) can recognise such lines in C instead of parsing them; it
    matches the pairs it needs to see with a regex of its own on the rest of the line.  A
    line taken whole (given the header's ranges, which the caller checks on the groups) is
    exactly one the per-line parser turns into a record: the same header and pair grammar,
    the thread id and source line bounded to 18 digits so that ``int()`` takes them.
    """
    header = rb"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.\d{6} +\d{1,18} [^ :\]]+:\d{1,18}\] "
    quoted = go_quote(message).encode("utf-8")
    if b"\\" in quoted[1:-1]:
        raise ValueError("a message with an escape is not in the fast grammar")
    pairs = rb"(?:" + _pair_src("(?:").encode("ascii") + rb")*" + _POSS.encode("ascii")
    return re.compile(header + re.escape(quoted) + pairs, re.ASCII)


def _parse_header(s: str) -> tuple[str, int, int, int, int, str, int, int]:
    """Match the header: (level, month, day, tod_us, pid, file, src_line, end) or raise."""
    m = _HEADER.match(s)
    if m is None:
        raise KlogParseError("not a klog line")
    lv, mo, dd, hh, mi, ss, us, pid, file, src = m.groups()
    month, day, h, mn, sec = int(mo), int(dd), int(hh), int(mi), int(ss)
    if not (1 <= month <= 12 and 1 <= day <= 31 and h <= 23 and mn <= 59 and sec <= 60):
        raise KlogParseError("klog header with an impossible date or time")
    tod_us = ((h * 60 + mn) * 60 + sec) * 1_000_000 + int(us)
    try:
        return lv, month, day, tod_us, int(pid), file, int(src), m.end()
    except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits)
        raise KlogParseError("klog header with a number too long") from None


def _raw_value(s: str, j: int) -> tuple[str, int]:
    """An unparseable value: raw text up to the next `` key=`` (resync point) or the end."""
    r = _RESYNC.search(s, j)
    end = r.start() if r else len(s)
    return s[j:end], end


def _parse_pairs(s: str, i: int, kv: list[tuple[str, Any]]) -> tuple[str | None, bool]:
    """Append the `` key=value`` pairs of ``s[i:]`` to ``kv``.

    Returns ``(block_key, truncated)``: ``block_key`` names a multi-line block opened at the
    end of the line (its lines follow); ``truncated`` says the line was cut inside a pair,
    which was then dropped.
    """
    n = len(s)
    pair = _PAIR.match
    while i < n:
        m = pair(s, i)
        if m is not None:
            # Fast path: a quoted string or a JSON scalar, one C-level match per pair.
            key, q, tok = m.group(1, 2, 3)
            if q is not None:
                if "\\" in q:
                    try:
                        q = go_unquote(f'"{q}"')
                    except ValueError:
                        q = f'"{q}"'
                kv.append((key, q))
            elif tok in _JSON_CONST:
                kv.append((key, _JSON_CONST[tok]))
            else:
                kv.append((key, _number(tok)))
            i = m.end()
            continue
        if s[i] != " ":
            # Only reachable after a raw value that ran to the end; nothing to resync to.
            return None, False
        eq = s.find("=", i + 1)
        if eq < 0:
            return None, True  # cut inside a key
        key = s[i + 1 : eq]
        if not key or " " in key or '"' in key:
            # Junk between pairs (not a key): drop it and resynchronise at the next key.
            _, i = _raw_value(s, i + 1)
            continue
        j = eq + 1
        if j >= n:
            return None, True  # cut right after '='
        c = s[j]
        if c == '"':
            end = _quoted_end(s, j)
            if end < 0:
                return None, True  # cut inside a quoted value
            if end < n and s[end] != " ":
                val, i = _raw_value(s, j)
                kv.append((key, val))
                continue
            try:
                kv.append((key, go_unquote(s[j:end])))
            except ValueError:
                kv.append((key, s[j:end]))
            i = end
            continue
        if c == "<" and j + 1 == n:
            return key, False
        sp = s.find(" ", j)
        tok = s[j:] if sp < 0 else s[j:sp]
        if tok in _JSON_CONST:
            kv.append((key, _JSON_CONST[tok]))
            i = j + len(tok)
            continue
        try:
            val, end = _DECODER.raw_decode(s, j)
        except json.JSONDecodeError as e:
            r = _RESYNC.search(s, j)
            if r is None and (e.pos >= n - 5 or e.msg.startswith("Unterminated string")):
                return None, True  # JSON cut by the end of the line
            val, i = _raw_value(s, j)
            kv.append((key, val))
            continue
        except (ValueError, RecursionError):
            # Valid JSON that Python will not build: an integer of more digits than int()
            # converts, or nesting deeper than the decoder recurses.  Kept as written.
            val, i = _raw_value(s, j)
            kv.append((key, val))
            continue
        if end < n and s[end] != " ":
            val, i = _raw_value(s, j)
            kv.append((key, val))
            continue
        kv.append((key, val))
        i = end
    return None, False


def _quoted_body_value(q: str) -> str:
    """A quoted value's body that holds a backslash, decoded as :func:`_parse_pairs` does."""
    if q.count("\\") == q.count('\\"'):
        # Every backslash is followed by a quote, so every escape is ``\"`` (klog's usual
        # ``err="... \"url\" ..."``): dropping the backslashes is exactly go_unquote.
        return q.replace('\\"', '"')
    try:
        return go_unquote(f'"{q}"')
    except ValueError:
        return f'"{q}"'


def _number(t: str) -> Any:
    """A JSON number token as ``int`` or ``float``; the token itself when Python will not
    convert it (an integer of more digits than ``sys.get_int_max_str_digits()`` raises
    ``ValueError``): such a value is kept as written, and the line is not lost."""
    try:
        return float(t) if "." in t or "e" in t or "E" in t else int(t)
    except ValueError:
        return t


def _token_value(t: str) -> Any:
    """A JSON scalar token as :func:`_parse_pairs` converts it."""
    return _JSON_CONST[t] if t in _JSON_CONST else _number(t)


def _simple_record(line_no: int, prefix_ns: int | None, s: str) -> KlogRecord | None:
    m = _SIMPLE_HEAD.match(s)
    if m is None:
        return None
    found = _PAIR_OR_REST.findall(s, m.end())
    if found and found[-1][3]:
        return None
    lv, mo, dd, hh, mi, ss, us, pid, file, src, msg = m.groups()
    month, day, h, mn, sec = int(mo), int(dd), int(hh), int(mi), int(ss)
    if not (1 <= month <= 12 and 1 <= day <= 31 and h <= 23 and mn <= 59 and sec <= 60):
        return None
    try:
        kv = [
            (
                k,
                (q if "\\" not in q else _quoted_body_value(q))
                if not t
                else int(t)
                if t.isdigit()
                else _token_value(t),
            )
            for k, q, t, _ in found
        ]
        pid_, src_ = int(pid), int(src)
    except ValueError:
        return None  # a number too long for int(): the general parser decides
    tod_us = ((h * 60 + mn) * 60 + sec) * 1_000_000 + int(us)
    return KlogRecord(line_no, lv, month, day, tod_us, pid_, file, src_, msg, tuple(kv), prefix_ns)


class _Parsed:
    """A line parsed as far as its pairs go; finished into a record by the caller."""

    __slots__ = (
        "line_no",
        "level",
        "month",
        "day",
        "tod_us",
        "pid",
        "file",
        "src_line",
        "msg",
        "kv",
        "prefix_ns",
        "block_key",
        "block",
        "block_bytes",
        "truncated",
    )

    def __init__(self, line_no: int, prefix_ns: int | None, s: str) -> None:
        (self.level, self.month, self.day, self.tod_us, self.pid, self.file, self.src_line, i) = (
            _parse_header(s)
        )
        self.line_no = line_no
        self.prefix_ns = prefix_ns
        self.kv: list[tuple[str, Any]] = []
        self.block_key: str | None = None
        self.block: list[str] = []
        self.block_bytes = 0
        self.truncated = False
        if i < len(s) and s[i] == '"':
            end = _quoted_end(s, i)
            if end < 0:
                raise KlogParseError("line cut inside the message")
            try:
                self.msg = go_unquote(s[i:end])
            except ValueError:
                self.msg = s[i + 1 : end - 1]
            self.more(s, end)
        else:
            self.msg = s[i:]  # unstructured klog.Infof line

    def more(self, s: str, i: int) -> None:
        self.block_key, cut = _parse_pairs(s, i, self.kv)
        self.truncated = self.truncated or cut

    def record(self) -> KlogRecord:
        return KlogRecord(
            line_no=self.line_no,
            level=self.level,
            month=self.month,
            day=self.day,
            tod_us=self.tod_us,
            pid=self.pid,
            file=self.file,
            src_line=self.src_line,
            msg=self.msg,
            kv=tuple(self.kv),
            prefix_ns=self.prefix_ns,
        )


def _decode(line: str | bytes) -> str:
    s = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    return s.rstrip("\r\n")


def parse_klog_line(line: str | bytes, line_no: int = 0) -> KlogRecord | None:
    """Parse one physical klog line (with or without a ``--timestamps`` prefix).

    Returns ``None`` for a blank line, raises :class:`KlogParseError` (with ``.reason``)
    for a line that is not klog.  A ``key=<`` block cannot be completed from one line, so
    its pair is left out; :func:`iter_klog` joins blocks.  Truncation as in the module doc.
    """
    s = _decode(line)
    if not s.strip():
        return None
    try:
        prefix_ns, s = split_timestamp_prefix(s)
    except ValueError as e:
        raise KlogParseError(f"bad timestamp prefix: {e}") from None
    return _Parsed(line_no, prefix_ns, s).record()


# --------------------------------------------------------------------------- stream

_LEVELS_B = frozenset(b"IWEF")
_DIGITS_B = frozenset(b"0123456789")


def _header_offset_b(b: bytes) -> int:
    """Where the klog header starts in a raw line: 0, or after a ``--timestamps`` prefix."""
    if b and b[0] in _DIGITS_B:
        return b.find(b" ") + 1
    return 0


def _cheap_message_b(b: bytes, h: int) -> bytes | None:
    """The quoted message of a well-shaped header line, as raw bytes; ``None`` if the line
    does not look like klog.  Checks the fixed header punctuation instead of a regex, so
    that a line the prefilter ignores costs a few C-level calls."""
    if (
        len(b) < h + 30
        or b[h] not in _LEVELS_B
        or b[h + 5] != 0x20
        or b[h + 8] != 0x3A
        or b[h + 14] != 0x2E
        or b[h + 21] != 0x20
    ):
        return None
    j = b.find(b"] ", h + 22)
    if j < 0:
        return None
    if b[j + 2 : j + 3] != b'"':
        return b""  # unstructured: never a wanted message
    end = _quoted_end_b(b, j + 2)
    if end < 0:
        return None
    return b[j + 2 : end]


def _lacks(b: bytes, subs: tuple[bytes, ...] | None) -> bool:
    """True when ``subs`` is given and none of them occurs in ``b`` (the line is not wanted)."""
    if subs is None:
        return False
    return not any(x in b for x in subs)


# --------------------------------------------------------------------------- bulk scan


#: The ``--timestamps`` prefix as the prefilter finds it: a digit, then up to the first space.
_P = rb"(?:[0-9][\x00-\x09\x0b-\x1f!-\xff]* )?"
#: Fixed header punctuation at the prefilter's offsets, and at least 30 bytes from the header
#: start (the prefilter's ``len(b) > h + 30`` with the line's ``\n`` counted).  ``.`` never
#: matches ``\n`` (no DOTALL), and it is the fastest repeat ``re`` has.
_H = rb"[IWEF].{4} .{2}:.{5}\..{6} (?=.{8})"
#: Bytes up to the first ``]`` (no ``\n``), and the bytes of a message with no escape (no
#: ``"``, ``\\``, ``\n``).  Spelt as ranges: ``re`` tests a negated class such as ``[^\]\n]``
#: about 40% slower per byte, and these run over ~60 bytes of every line.
_TO_BRACKET = rb"[\x00-\x09\x0b-\\\x5e-\xff]*"
_MSG_BYTES = rb"[\x00-\x09\x0b-!#-\[\]-\xff]*"
#: Line ends: an ignored line that opens a block ends with ``=<`` (the prefilter's own test).
_EOL_PLAIN = rb"(?<!=<)(?<!=<\r)\n"
_EOL_OPEN = rb"(?<==<)\r?\n"
#: A block's lines as the per-line loop consumes them after an ignored opener: ``\t`` lines,
#: then a `` >`` line, which may open the next block.
_CONT = _P + rb"\t.*\n"
_BLOCK = (
    rb"(?:(?:" + _CONT + rb")*" + _P + rb" >.*" + _EOL_OPEN + rb")*"
    rb"(?:" + _CONT + rb")*" + _P + rb" >.*" + _EOL_PLAIN
)


#: Nothing follows the run, so a possessive repeat (Python >= 3.11) matches the same and
#: skips ``re``'s bookkeeping for backtracking into it: ~8% faster.
_POSSESSIVE = b"+" if sys.version_info >= (3, 11) else b""


class _BulkPlan:
    """The compiled scanner for one prefilter.

    ``run(buf, pos, endpos)`` matches, from a line start, the longest run of lines that the
    per-line prefilter would ignore *in the state it is in between records* (no block open):
    well-shaped headers whose message is not wanted (with the blocks they open).  It is
    deliberately stricter than the prefilter (a message with an escape, a first ``]`` not
    followed by a space, a 30-byte header line, ...): a line it does not take is handed to
    the per-line code, which decides exactly, so being strict only costs time.

    ``subs`` finds the ``contains`` substrings; a line holding one is never taken into a
    run, so the regex need not look for them itself (a lookahead per character is slow).
    """

    __slots__ = ("run", "subs")

    def __init__(self, wanted: frozenset[bytes], need: dict[bytes, tuple[bytes, ...]] | None) -> None:
        stop: list[bytes] = []
        narrow: set[bytes] = set()
        for q in wanted:
            subs = need.get(q) if need is not None else None
            if subs is None or any(not x or b"\n" in x for x in subs):
                # Wanted outright (an empty substring is in every line; a newline in one
                # is left to the per-line code): the line must stop the run.
                stop.append(q)
            else:
                narrow.update(subs)  # wanted only with a substring: stop on those
        # Longest first, so that no alternative is a prefix that hides a longer one.
        not_wanted = (
            rb"(?!" + rb"|".join(re.escape(q) for q in sorted(stop, key=len, reverse=True)) + rb")"
            if stop
            else b""
        )
        msg = _TO_BRACKET + rb"\] (?:" + not_wanted + rb'"' + _MSG_BYTES + rb'"|(?!"))'
        unit = _P + _H + msg + rb".*(?:" + _EOL_PLAIN + rb"|" + _EOL_OPEN + _BLOCK + rb")"
        self.run = re.compile(rb"(?:" + unit + rb")*" + _POSSESSIVE).match
        self.subs = finder(sorted(narrow)) if narrow else None


@lru_cache(maxsize=16)
def _bulk_plan_cached(
    wanted: frozenset[bytes], need: tuple[tuple[bytes, tuple[bytes, ...]], ...]
) -> _BulkPlan:
    return _BulkPlan(wanted, dict(need) if need else None)


def _bulk_plan(wanted: frozenset[bytes], need: dict[bytes, tuple[bytes, ...]] | None) -> _BulkPlan:
    """The plan for this prefilter, compiled once per process (the regex is large)."""
    return _bulk_plan_cached(wanted, tuple(sorted(need.items())) if need else ())


def _may_block(line: bytes, before: bool) -> bool:
    r"""Whether a block may be open after the per-line code has taken ``line``.

    A superset of the per-line state (only runs started with no block open are correct):
    a block is opened or re-opened only by a line ending with ``=<`` (after any ``\r``),
    and is kept open otherwise only by a ``\t`` continuation line.
    """
    if line.rstrip(b"\r\n").endswith(b"=<"):
        return True
    if not before:
        return False
    h = line.find(b" ") + 1 if line[:1].isdigit() else 0
    return line[h : h + 1] == b"\t"


def _prefilter(
    messages: frozenset[str] | None, contains: Mapping[str, Iterable[str]] | None
) -> tuple[frozenset[bytes] | None, dict[bytes, tuple[bytes, ...]] | None]:
    """The prefilter as raw quoted bytes: the ``wanted`` messages and ``need`` substrings."""
    wanted: frozenset[bytes] | None = None
    if messages is not None:
        wanted = frozenset(go_quote(m).encode("utf-8") for m in messages)
    need: dict[bytes, tuple[bytes, ...]] | None = None
    if contains:
        need = {
            go_quote(m).encode("utf-8"): tuple(x.encode("utf-8") for x in subs)
            for m, subs in contains.items()
        }
    return wanted, need


#: Bytes read per block by the bulk scanner: large enough that the per-block Python work
#: vanishes, small enough to keep memory flat and to stay in the CPU's L2 cache between the
#: block's passes (read, ``contains`` search, regex, line count): 1 MiB measured faster
#: than 4 MiB on a 200 MB log.
BLOCK_SIZE = 1 << 20


def iter_klog(
    fh_or_lines: Iterable[bytes] | Iterable[str],
    stats: SourceStats,
    messages: frozenset[str] | None = None,
    contains: Mapping[str, Iterable[str]] | None = None,
    *,
    block_size: int = BLOCK_SIZE,
    drop: Callable[[bytes], bool] | None = None,
) -> Iterator[KlogRecord]:
    """Stream :class:`KlogRecord` s from a binary file (or any iterable of lines).

    ``messages``, when given, is a prefilter: only lines whose (decoded) message is in the
    set are decoded and fully parsed.  Other well-formed lines are counted as understood
    and not yielded (with their multi-line blocks, if any).  Records are yielded in line
    order; a record with a block is yielded when its closing `` >`` line (or the next
    header) is read.

    ``contains`` narrows the prefilter further (it only acts together with ``messages``):
    for a message listed there, a line is parsed only if its raw text contains at least one
    of the given substrings, e.g. ``{"HTTP call done": ['purpose="wake"']}``, because the
    DPC's most frequent line is "HTTP call done" and the bridge wants only a few purposes.

    Two ways through, with the same results (records, line numbers, every count and skip
    reason; ``tests/test_klog_fastpath.py`` holds them equal):

    * **Bulk**, for a binary file object (its *class* has ``read``) with ``messages``: the
      file is read ``block_size`` bytes at a time and the lines the prefilter would ignore
      are recognised by one compiled regex per run of lines, in C, and only counted; the
      other lines (wanted, malformed, or where a block may be open) go one by one through
      the per-line parser, which stays the only judge of what a line means.  Why: the per-line prefilter
      alone cost ~3 us of bytecode per line, ~10x a bare ``for line in fh`` loop.  An
      object that only forwards ``read`` through ``__getattr__`` (a wrapper counting what
      it iterates) is read per line, so its own ``__iter__`` still sees every line.
    * **Per line**, for an iterable of ``bytes``/``str`` lines (the live watcher), or
      without ``messages``: a fixed-offset header check and one set lookup per ignored line.

    ``drop``, with ``messages``, is the caller's promise about lines it would throw away:
    a line the prefilter wants and for which ``drop(raw_line)`` is true (its bytes, line
    end included) is counted as understood and not parsed, exactly as if its record had
    been yielded and ignored.  ``drop`` must take only lines the parser turns into a
    record (see :func:`simple_line_pattern`).  Why: most wanted lines of a DPC log are
    failed ``/is_sleeping`` polls, which the bridge drops (``correlate.failed_poll``).

    ``stats.read``/``understood`` are kept in local counters on the hot path and written
    back before every yield and when the iterator ends or is closed, so they are exact
    whenever the caller looks at them between records.
    """
    wanted, need = _prefilter(messages, contains)
    items: Iterable[Any] = fh_or_lines
    if wanted is not None and _bulk_readable(fh_or_lines):
        # read1 where there is one: a pipe then hands over what it has instead of blocking
        # until a whole block arrives (same bytes, same results, records sooner).
        src: Any = fh_or_lines
        read = src.read1 if callable(getattr(type(src), "read1", None)) else src.read
        plan = _bulk_plan(wanted, need)
        items = bulk_items(read, max(1, block_size), plan.run, plan.subs, _may_block)
    yield from _iter_lines(items, stats, wanted, need, drop if wanted is not None else None)


def _iter_lines(
    items: Iterable[Any],
    stats: SourceStats,
    wanted: frozenset[bytes] | None,
    need: dict[bytes, tuple[bytes, ...]] | None,
    drop: Callable[[bytes], bool] | None = None,
) -> Iterator[KlogRecord]:
    """The per-line parser behind :func:`iter_klog`: ``items`` are lines (``bytes`` or
    ``str``, with their line ends) or :class:`_Plain` counts of lines already proven to be
    ignored by the prefilter, which arrive only when no block is open."""
    pending: _Parsed | None = None  # a record whose multi-line block is still open
    ignoring_block = False  # consuming the block of a line the prefilter ignored
    read = understood = 0  # not yet written back to stats
    levels, digits = _LEVELS_B, _DIGITS_B
    line_no = 0
    try:
        for raw in items:
            if raw.__class__ is _Plain:
                # A run of lines the bulk scanner proved plain (see _bulk_items).
                line_no += raw
                read += raw
                understood += raw
                continue
            line_no += 1
            read += 1
            if raw.__class__ is _TooLong or len(raw) > MAX_LINE_BYTES:
                # Not read (see blocks.TooLong); an open block cannot be judged past it.
                stats.skip(line_no, too_long_reason(raw if raw.__class__ is _TooLong else len(raw)))
                if pending is not None:
                    stats.read += read
                    stats.understood += understood
                    read = understood = 0
                    yield pending.record()  # without the block's value, as for a cut block
                    pending = None
                continue
            b = raw.encode("utf-8", "surrogateescape") if isinstance(raw, str) else raw
            if wanted is not None and pending is None and not ignoring_block:
                # Prefilter fast path, inlined: fixed header punctuation, then the message.
                h = b.find(b" ") + 1 if b[:1] and b[0] in digits else 0
                if (
                    len(b) > h + 30
                    and b[h] in levels
                    and b[h + 5] == 0x20
                    and b[h + 8] == 0x3A
                    and b[h + 14] == 0x2E
                    and b[h + 21] == 0x20
                ):
                    j = b.find(b"] ", h + 22)
                    if j > 0:
                        if b[j + 2 : j + 3] == b'"':
                            end = b.find(b'"', j + 3)
                            if end > 0 and b[end - 1] == 0x5C:
                                end = _quoted_end_b(b, j + 2) - 1
                            msg = b[j + 2 : end + 1] if end > 0 else None
                        else:
                            msg = b""  # unstructured line: never a wanted message
                        if msg is not None and (
                            msg not in wanted or (need is not None and _lacks(b, need.get(msg)))
                        ):
                            understood += 1
                            ignoring_block = b.endswith((b"=<\n", b"=<", b"=<\r\n"))
                            continue
                if drop is not None and drop(b):
                    understood += 1  # a record the caller would drop: see iter_klog
                    continue
            if b.endswith(b"\n"):
                b = b[:-2] if b.endswith(b"\r\n") else b[:-1]
            h = _header_offset_b(b)
            if pending is not None or ignoring_block:
                if b[h : h + 1] == b"\t":
                    if pending is not None:
                        pending.block_bytes += len(b)
                        if pending.block_bytes > MAX_VALUE_BYTES:
                            stats.skip(
                                line_no, f"multi-line value longer than {MAX_VALUE_BYTES >> 20} MiB: dropped"
                            )
                            stats.read += read
                            stats.understood += understood
                            read = understood = 0
                            yield pending.record()  # without that value, as for a cut block
                            pending = None
                            ignoring_block = True  # the rest of the block is only counted
                            continue
                        pending.block.append(_decode(b[h + 1 :]))
                    understood += 1
                    continue
                if b.startswith(b" >", h):
                    understood += 1
                    if pending is not None:
                        assert pending.block_key is not None
                        pending.kv.append((pending.block_key, "\n".join(pending.block)))
                        pending.block = []
                        pending.more(_decode(b[h + 2 :]), 0)
                        if pending.block_key is None:
                            stats.read += read
                            stats.understood += understood
                            read = understood = 0
                            yield pending.record()
                            pending = None
                    else:
                        ignoring_block = b.endswith(b"=<")
                    continue
                # The block was never closed (cut): its value is dropped, the record kept.
                if pending is not None:
                    pending.truncated = True
                    stats.read += read
                    stats.understood += understood
                    read = understood = 0
                    yield pending.record()
                    pending = None
                ignoring_block = False
                if wanted is not None:
                    msg = _cheap_message_b(b, h)
                    if msg is not None and (
                        msg not in wanted or (need is not None and _lacks(b, need.get(msg)))
                    ):
                        understood += 1
                        ignoring_block = b.endswith(b"=<")
                        continue
            s = _decode(b)
            if not s.strip():
                stats.skip(line_no, "blank line")
                continue
            try:
                prefix_ns, s = split_timestamp_prefix(s)
            except ValueError as e:
                stats.skip(line_no, f"bad timestamp prefix: {e}")
                continue
            if s[:1] == "\t" or s.startswith(" >"):
                stats.skip(line_no, "continuation line outside a multi-line value")
                continue
            rec = _simple_record(line_no, prefix_ns, s)
            if rec is None:
                try:
                    p = _Parsed(line_no, prefix_ns, s)
                except KlogParseError as e:
                    stats.skip(line_no, e.reason)
                    continue
                if p.block_key is not None:
                    understood += 1
                    pending = p
                    continue
                rec = p.record()
            understood += 1
            stats.read += read
            stats.understood += understood
            read = understood = 0
            yield rec
        if pending is not None:
            stats.read += read
            stats.understood += understood
            read = understood = 0
            yield pending.record()
    finally:
        stats.read += read
        stats.understood += understood
