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
  complete, and says ``truncated``; the value that was cut is dropped (a cut number or
  string would be silently wrong).  A reader that needs the lost pairs (the bridge's
  facts) counts the line as skipped.  A line cut inside the header or the message is
  skipped.  An unterminated multi-line block is dropped the same way.
* **Unparseable values** (klog's ``%+v`` fallback, corruption) are kept as the raw ``str``
  up to the next `` key=`` where the parser resynchronises.
* **Unstructured klog lines** (``klog.Infof`` from libraries: message not quoted) are
  understood: ``msg`` is the rest of the line and ``kv`` is empty.
* **Accounting**: every physical line is counted in ``stats.read`` and in exactly one of
  ``stats.understood`` (records, continuation lines of a block), ``stats.ignored`` (lines
  a prefilter passed over unread) or ``stats.skipped`` (with a reason).
* **Line ends**: ``\\n``, ``\\r\\n`` or a carriage return alone, anywhere (noted in
  ``stats.notes``; :func:`fma_otel.lines.read_lines`, the one rule of every log reader): a
  log written with CR-only line ends is read line by line, and line numbers count the
  lines so ended.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fma_otel.lines import (
    CORRUPT_REASON,
    MAX_LINE_BYTES,
    MAX_VALUE_BYTES,
    also_finding,
    corrupt_line_ends,
    counted_lines,
    text_of,
)
from fma_otel.sources.records import KlogRecord, SourceStats
from fma_otel.timeutil import parse_rfc3339_ns

__all__ = [
    "KlogParseError",
    "go_quote",
    "go_unquote",
    "iter_klog",
    "parse_klog_line",
    "split_timestamp_prefix",
]


class KlogParseError(ValueError):
    """A line that is not klog text; ``reason`` is short and meant for ``SourceStats``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- prefix

_DIGITS = frozenset("0123456789")


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


# --------------------------------------------------------------------------- one line

#: ``Lmmdd hh:mm:ss.uuuuuu`` at fixed places, then (the one part not at a fixed place)
#: ``pid file:line] ``
_HEADER = re.compile(r"[IWEF]\d\d\d\d \d\d:\d\d:\d\d\.\d\d\d\d\d\d +(\d+ [^ :\]]+:\d+\] )", re.ASCII)

#: ``+`` after a repeat makes it possessive (Python >= 3.11): ``re`` then keeps no state to
#: backtrack into it.  Only used where backtracking cannot find another match anyway.
_POSS = "+" if sys.version_info >= (3, 11) else ""
#: Any character but ``"`` and ``\``; any character but space, ``=`` and ``"``.  Negated
#: classes, not ranges up to U+10FFFF: ``re`` is slow to compile such a range (paid at every
#: import), and matching real lines with them was no faster.
_NOT_QUOTE_OR_BS = r'[^"\\]'
_NOT_KEY_END = r'[^ ="]'


#: Each pair whose value is a Go-quoted string or a JSON scalar, followed by a space or the
#: end, from a position on: (key, quoted body, token, "") each; else, from where the next
#: pair is not one, the rest of the text once, in the fourth group (so its length says where
#: it begins).  ``findall`` cuts out a line's pairs in one C call.  A quoted body is first
#: taken up to the next ``"`` when no ``\`` is just before it (``re`` scans for one
#: character far faster than for a class, and most values have no escape), else with each
#: escape taken whole (a quote after an odd run of backslashes is escaped): both ways end at
#: the same quote wherever the first applies.
_PAIRS = re.compile(
    rf" ({_NOT_KEY_END}+{_POSS})="
    rf'(?:"([^"]*{_POSS}(?<!\\)|{_NOT_QUOTE_OR_BS}*{_POSS}(?:\\.{_NOT_QUOTE_OR_BS}*{_POSS})*{_POSS})"'
    rf"|(-?\d+{_POSS}(?:\.\d+{_POSS})?{_POSS}(?:[eE][-+]?\d+{_POSS})?{_POSS}|true|false|null))(?= |$)"
    r"|((?s:.+))",
    re.ASCII,
).findall
_RESYNC = re.compile(r" [A-Za-z_][A-Za-z0-9_.\-/]*=")
_DECODER = json.JSONDecoder()
_JSON_CONST: dict[str, Any] = {"true": True, "false": False, "null": None}


def _parse_header(s: str) -> tuple[str, int, int, int, int, str, int, int]:
    """Match the header: (level, month, day, tod_us, pid, file, src_line, end) or raise.

    Its two parts that repeat from line to line (``Lmmdd hh:mm:``, and the pid and source
    location) are converted once each and remembered: only the seconds are new in each
    line (``ss.uuuuuu`` read as one number of microseconds)."""
    m = _HEADER.match(s)
    if m is None:
        raise KlogParseError("not a klog line")
    us = int(s[12:14] + s[15:21])
    if us > 60_999_999:
        raise KlogParseError(_IMPOSSIBLE)
    lv, month, day, minute_us = _when(s[:12])
    return lv, month, day, minute_us + us, *_where(m.group(1)), m.end()


_IMPOSSIBLE = "klog header with an impossible date or time"


@functools.lru_cache(maxsize=4096)
def _when(key: str) -> tuple[str, int, int, int]:
    """``Lmmdd hh:mm:`` (as the header matched) -> (level, month, day, the minute's first
    microsecond in the day)."""
    month, day, h, mn = int(key[1:3]), int(key[3:5]), int(key[6:8]), int(key[9:11])
    if not (1 <= month <= 12 and 1 <= day <= 31 and h <= 23 and mn <= 59):
        raise KlogParseError(_IMPOSSIBLE)
    return key[0], month, day, (h * 60 + mn) * 60_000_000


@functools.lru_cache(maxsize=4096)
def _where(key: str) -> tuple[int, str, int]:
    """``pid file:line] `` (as the header matched) -> (pid, file, line)."""
    pid, loc = key.split(" ", 1)
    file, src = loc[:-2].rsplit(":", 1)
    try:
        return int(pid), file, int(src)
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
    while i < n:
        found = _PAIRS(s, i)
        rest = found[-1][3]  # the text from where the next pair is not one
        if rest:
            found.pop()
        for key, q, tok, _ in found:
            if tok:  # findall gives "" for a group that did not take part
                kv.append((key, _JSON_CONST[tok] if tok in _JSON_CONST else _number(tok)))
            elif "\\" in q:
                try:
                    kv.append((key, go_unquote(f'"{q}"')))
                except ValueError:
                    kv.append((key, f'"{q}"'))  # kept as written
            else:
                kv.append((key, q))
        if not rest:
            return None, False
        i = n - len(rest)
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
        # _PAIRS took every value here that is a quoted string or a JSON scalar followed by
        # a space or the end: what is left is cut, not followed by a space, or JSON text
        if c == '"':
            if _quoted_end(s, j) < 0:
                return None, True  # cut inside a quoted value
            val, i = _raw_value(s, j)  # closed, and text right after it
            kv.append((key, val))
            continue
        if c == "<" and j + 1 == n:
            return key, False
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


def _number(t: str) -> Any:
    """A JSON number token as ``int`` or ``float``; the token itself when Python will not
    convert it (an integer of more digits than ``sys.get_int_max_str_digits()`` raises
    ``ValueError``): such a value is kept as written, and the line is not lost."""
    try:
        return float(t) if "." in t or "e" in t or "E" in t else int(t)
    except ValueError:
        return t


def _parse(
    line_no: int, prefix_ns: int | None, s: str
) -> tuple[KlogRecord, list[tuple[str, Any]], str | None]:
    """The record of one line (``s`` without its line end or prefix), its pairs as a list
    (for a multi-line block's value and the pairs after it to be added to), and the key of
    the block it opens at its end, if any.  Raises :class:`KlogParseError`."""
    level, month, day, tod_us, pid, file, src_line, i = _parse_header(s)
    kv: list[tuple[str, Any]] = []
    block_key, cut = None, False
    if i < len(s) and s[i] == '"':
        end = _quoted_end(s, i)
        if end < 0:
            raise KlogParseError("line cut inside the message")
        msg = s[i + 1 : end - 1]
        if "\\" in msg:
            try:
                msg = go_unquote(s[i:end])
            except ValueError:
                pass  # kept as written
        block_key, cut = _parse_pairs(s, end, kv)
    else:
        msg = s[i:]  # unstructured klog.Infof line
    # positional: a NamedTuple takes them for less than keywords
    rec = KlogRecord(line_no, level, month, day, tod_us, pid, file, src_line, msg, tuple(kv), prefix_ns, cut)
    return rec, kv, block_key


class _Open:
    """A record whose multi-line ``key=<`` block is still being read."""

    __slots__ = ("block", "block_bytes", "key", "kv", "rec", "truncated")

    def __init__(self, rec: KlogRecord, kv: list[tuple[str, Any]], key: str) -> None:
        self.rec, self.kv, self.key = rec, kv, key
        self.block: list[str] = []
        self.block_bytes = 0
        self.truncated = rec.truncated

    def close(self, rest: str) -> bool:
        """The block's closing `` >`` line, with ``rest`` after it: the value is added,
        then the pairs of ``rest``; whether the record is whole (no further block)."""
        self.kv.append((self.key, "\n".join(self.block)))
        self.block = []
        key, cut = _parse_pairs(rest, 0, self.kv)
        self.truncated = self.truncated or cut
        if key is None:
            return True
        self.key = key
        return False

    def record(self) -> KlogRecord:
        return self.rec._replace(kv=tuple(self.kv), truncated=self.truncated)


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
    return _parse(line_no, prefix_ns, s)[0]


# --------------------------------------------------------------------------- stream

_DIGITS_B = frozenset(b"0123456789")


Contains = Mapping[str, tuple]  # message -> (field, values[, first_by])


class Prefilter:
    """Which lines *may* be wanted, by literal search only: nothing is validated here.

    One regular expression says it, over a block of lines (:meth:`find`) or one line
    (:meth:`wanted`): a line may be wanted when it holds one of ``messages`` (Go-quoted as
    klog writes them) right after a klog header's ``] "``.  ``contains`` narrows a message
    further: ``{message: (field, values)}`` says that a line whose `` field="..."`` (or,
    for a ``field`` ending in ``"``, the value after that literal text) holds whole values
    only other than ``values`` is not wanted (the DPC's most frequent line, "HTTP call
    done", is wanted for a few of its purposes only).  A line that lacks the field, or is
    cut inside its value, stays wanted: every real one has it whole, so such a line was cut
    short and must be reported.  An optional third element ``{value: other_field}`` keeps,
    of the lines with that value, only the first for each value of ``other_field`` (the
    DPC polls each launcher's ``list_instances`` for ever; only its first call bounds an
    instant), so the prefilter remembers what it passed; a reader that tests a line the
    search found (:attr:`passed`) must not test it again.
    """

    __slots__ = ("_first_by", "_search", "_seen", "passed")

    def __init__(self, messages: Iterable[str], contains: Contains | None = None) -> None:
        contains = contains or {}
        #: name of the search's group around a message -> ((`` field="value"``,
        #: `` other_field="``), ...): only the messages with a ``first_by`` have a group
        self._first_by: dict[str, tuple[tuple[bytes, bytes], ...]] = {}
        self._seen: set[bytes] = set()  # value + other field's value, of each line passed
        #: the line :meth:`find` found last
        self.passed: bytes | None = None
        alternatives = []
        for m in sorted(messages, key=lambda m: len(_quoted_body(m)), reverse=True):
            alternative = re.escape(_quoted_body(m))
            if m in contains:
                field, values, *rest = contains[m]
                k = b" " + field.encode("utf-8") + (b"" if field.endswith('"') else b'="')
                guard = _guard(k, sorted(_quoted_body(v) for v in values))
                if rest and rest[0]:
                    group = f"f{len(self._first_by)}"
                    self._first_by[group] = tuple(
                        (k + _quoted_body(v) + b'"', b" " + f.encode("utf-8") + b'="')
                        for v, f in rest[0].items()
                    )
                    alternative = b"(?P<" + group.encode() + b">" + alternative + b")"
                alternative += b'"' + guard
            else:
                alternative += b'"'
            alternatives.append(alternative)
        self._search = re.compile(b'\\] "(?:' + b"|".join(alternatives) + b")").search

    def find(self, block: bytes, pos: int, end: int) -> tuple[int, int] | None:
        """The bounds ``(start, stop)`` of the first line of ``block[pos:end]`` (whole
        lines) that may be wanted, or ``None``; that line is put in :attr:`passed`."""
        hit = self._hit(block, pos, end)
        if hit is not None:
            self.passed = block[hit[0] : hit[1]]
        return hit

    def wanted(self, line: bytes) -> bool:
        """Whether ``line`` (one line, its end included or not) may be wanted."""
        return self._hit(line, 0, len(line)) is not None

    def _hit(self, block: bytes, pos: int, end: int) -> tuple[int, int] | None:
        search, first_by = self._search, self._first_by
        while True:
            m = search(block, pos, end)
            if m is None:
                return None
            stop = block.find(b"\n", m.end(), end) + 1 or end
            group = m.lastgroup
            if group is None or self._first(block, m.end(), stop, first_by[group]):
                return block.rfind(b"\n", pos, m.start()) + 1 or pos, stop
            pos = stop

    def _first(self, line: bytes, i: int, stop: int, rules: tuple[tuple[bytes, bytes], ...]) -> bool:
        """Whether ``line[i:stop]`` is not a line with a ``first_by`` value whose other
        field's value an earlier line passed already (and remember it if so)."""
        for value, field in rules:
            if line.find(value, i, stop) < 0:
                continue
            f = line.find(field, i, stop)
            fe = line.find(b'"', f + len(field), stop) if f >= 0 else -1
            if fe < 0:
                return True  # no such field, or cut inside it: a line to report
            seen = value + line[f + len(field) : fe]
            if seen in self._seen:
                return False
            self._seen.add(seen)
            return True
        return True


def _byte_but(excluded: str) -> str:
    """A class of every byte but those of ``excluded``, written as ranges of ``\\xNN``.

    Why not ``[^...]``: ``re`` compiles a negated class of a few bytes to a list it walks
    at each byte tested, a class of ranges to a table it looks each byte up in once; the
    block searches below run such a class over most bytes of a log (the headers and
    messages of the lines not wanted)."""
    ranges, lo = [], 0
    for c in [*sorted(map(ord, excluded)), 256]:
        if c > lo:
            ranges.append(f"\\x{lo:02x}-\\x{c - 1:02x}")
        lo = c + 1
    return f"[{''.join(ranges)}]"


#: Any byte but ``"`` and ``\n``; any byte but ``]`` and ``\n``
_BYTE_BUT_QUOTE_NL = _byte_but('"\n')
_BYTE_BUT_BRACKET_NL = _byte_but("]\n")


def _guard(key: bytes, values: list[bytes]) -> bytes:
    """The search's condition on a message's field: the lines whose field holds a whole
    value none of the wanted ones are not found at all (most of the DPC's chatter is such
    lines: the search passes over them for a fraction of what cutting each out and testing
    it costs).  Found are the lines whose field holds a wanted value somewhere, or never a
    whole value.  ``[^\\n]*`` is greedy on purpose: the field is looked for back from the
    line's end, and the narrowing fields are near it."""
    k = re.escape(key)
    alternatives = b"|".join(re.escape(v) for v in values)
    not_whole = k + _BYTE_BUT_QUOTE_NL.encode() + b'*"'
    return b"(?=[^\\n]*" + k + b"(?:" + alternatives + b')"|(?![^\\n]*' + not_whole + b"))"


def _quoted_body(s: str) -> bytes:
    """``s`` as klog quotes it, without the quotes: what the prefilter searches for."""
    return go_quote(s).encode("utf-8")[1:-1]


#: A line that may be cut inside its header or its quoted message, in a block of lines: a
#: klog severity and date at its start (after the line end before it), then no ``]``
#: before the line end, or the first ``]`` followed by the line end, a space, or an
#: unclosed ``"`` (that ``]`` may be in a value, not after a header: :func:`cut_line`
#: decides).  One search finds what the two kinds of cut need.  The prefix is a second
#: branch, not an optional group, and each way to end is tried only where it can (``re``
#: then enters no group and backtracks into no scan at each line).
_CUT_IN_BLOCK = re.compile(
    rf"\n(?:[IWEF]|[0-9][0-9T:.Zz+-]*{_POSS} [IWEF])[0-9]{{4}} {_BYTE_BUT_BRACKET_NL}*{_POSS}"
    rf'(?:(?=\n)|\](?: "{_BYTE_BUT_QUOTE_NL}*{_POSS}(?=\n)| ?(?=\n)))'.encode()
)
_CUT_LINE = re.compile(
    rb'(?:[0-9][0-9T:.Zz+-]* )?[IWEF][0-9]{4} (?:[^\]\n]*|[0-9:.]+ +[0-9]+ [^ \]\n]*\](?: "[^"\n]*| ?))'
)


def cut_line(line: bytes) -> bool:
    """Whether ``line`` (its end stripped) is a klog line cut inside its header or message.

    Why: the prefilter looks for a wanted message whole, so a wanted line cut before its
    message ended was passed over with the unwanted ones ("ignored", ``--strict`` exit 0)
    and its instant lost without a word.  Such a line is parsed instead, and counted as
    skipped (a cut line of an unwanted message too: it is malformed either way)."""
    return _CUT_LINE.fullmatch(line) is not None


def corrupt_bytes(line: bytes) -> bool:
    """Whether :func:`fma_otel.lines.text_of` refuses ``line``: such bytes may have hidden
    a wanted message from the prefilter (a line it passes over is still counted, as
    skipped)."""
    return text_of(line) is None


def _cut_ends(block: bytes, pos: int, end: int) -> list[int]:
    """The ends of the lines of ``block[pos:end]`` that :func:`cut_line` or
    :func:`corrupt_bytes` may accept, in order (the prefilter is asked only up to such a
    line, through :func:`fma_otel.lines.also_finding`: a false candidate, a value ending
    in ``]``, costs a line, not a new search)."""
    ends = [m.end() + 1 for m in _CUT_IN_BLOCK.finditer(block, pos - 1 if pos else pos, end)]
    if not pos:  # the block's first line has no line end before it in the block
        nl = block.find(b"\n", 0, end) + 1 or end
        if _CUT_IN_BLOCK.match(b"\n" + block[:nl]):
            ends.append(nl)
    ends += corrupt_line_ends(block, pos, end)
    return sorted(set(ends))


def _header_offset_b(b: bytes) -> int:
    """Where the klog header starts in a raw line: 0, or after a ``--timestamps`` prefix."""
    if b and b[0] in _DIGITS_B:
        return b.find(b" ") + 1
    return 0


def iter_klog(
    source: Iterable[bytes] | Iterable[str],
    stats: SourceStats,
    messages: Iterable[str] | None = None,
    contains: Contains | None = None,
) -> Iterator[KlogRecord]:
    """Stream :class:`KlogRecord` s from a binary file (or any iterable of lines).

    With ``messages``, only the lines a :class:`Prefilter` of them (and ``contains``) may
    want are parsed; the others are counted in ``stats.ignored``, unread (with the
    continuation lines of their multi-line blocks).  A malformed line that is parsed is
    counted in ``stats.skipped`` with its line number and why.  Records are yielded in line
    order; a record with a block is yielded when its closing `` >`` line (or the next
    header) is read.
    """
    # the prefilter only says "maybe": a line it passes whose parsed message is not wanted
    # (an unquoted message that quotes a wanted one further on) is ignored, as without it
    wanted_msgs = frozenset(messages) if messages is not None else None
    prefilter = Prefilter(wanted_msgs, contains) if wanted_msgs is not None else None
    find = also_finding(prefilter.find, _cut_ends) if prefilter is not None else None
    pending: _Open | None = None  # a record whose multi-line block is still open

    def held() -> bool:  # lines are read one by one while a multi-line value is open
        return pending is not None

    for line_no, b in counted_lines(source, stats, find, held, MAX_LINE_BYTES):
        if b is None:  # too long: skipped
            if pending is not None:
                yield pending.record()  # without the block's value, as for a cut block
                pending = None
            continue
        if prefilter is not None:
            found = b == prefilter.passed  # so tested already, by the search
            prefilter.passed = None
            if pending is None and not found and not prefilter.wanted(b):
                body = b.rstrip(b"\r\n")
                if corrupt_bytes(body):
                    stats.skip(line_no, CORRUPT_REASON)
                    continue
                if cut_line(body):
                    stats.skip(line_no, "line cut inside its header or message")
                    continue
                stats.ignored += 1
                continue
        b = b.rstrip(b"\r\n")
        h = _header_offset_b(b)
        if pending is not None:
            if b[h : h + 1] == b"\t":
                pending.block_bytes += len(b)
                if pending.block_bytes > MAX_VALUE_BYTES:
                    stats.skip(line_no, f"multi-line value longer than {MAX_VALUE_BYTES >> 20} MiB: dropped")
                    pending.truncated = True
                    yield pending.record()
                    pending = None
                    continue
                stats.understood += 1
                pending.block.append(b[h + 1 :].decode("utf-8", "replace"))
                continue
            if b.startswith(b" >", h):
                stats.understood += 1
                if pending.close(b[h + 2 :].decode("utf-8", "replace")):
                    yield pending.record()
                    pending = None
                continue
            # The block was never closed (cut): its value is dropped, the record kept.
            pending.truncated = True
            yield pending.record()
            pending = None
            if prefilter is not None and not prefilter.wanted(b):
                stats.ignored += 1
                continue
        if prefilter is not None and b[h : h + 1] in (b"\t", b" "):
            stats.ignored += 1  # a line of an ignored record's block: never a record
            continue
        s = text_of(b)
        if s is None:
            stats.skip(line_no, CORRUPT_REASON)
            continue
        if not s or s.isspace():
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
        try:
            rec, kv, block_key = _parse(line_no, prefix_ns, s)
        except KlogParseError as e:
            stats.skip(line_no, e.reason)
            continue
        if wanted_msgs is not None and rec.msg not in wanted_msgs:
            stats.ignored += 1
            continue
        stats.understood += 1
        if block_key is not None:
            pending = _Open(rec, kv, block_key)
            continue
        yield rec
    if pending is not None:
        pending.truncated = True
        yield pending.record()
