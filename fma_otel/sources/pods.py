"""Reader of Kubernetes Pod JSON in every form ``kubectl`` writes, and a newest-state store.

Forms accepted, in any mix and in one file:

* a v1 ``List``/``PodList`` (``kubectl get pods -o json``): ``{"items": [...], ...}``;
* a single Pod object (``kubectl get pod X -o json``);
* a watch stream (``kubectl get pods -w -o json``): pretty-printed objects one after the
  other, *not* one per line, with or without ``--output-watch-events``
  (``{"type": "ADDED", "object": {...}}``);
* JSON lines of any of these (``jq -c``), or a top-level JSON array of them.

Why streaming: a ``List`` of a busy namespace or a day-long watch can be hundreds of MB.
The reader keeps a window of text, decodes one value at a time with
:meth:`json.JSONDecoder.raw_decode`, and reads the members of a top-level object key by
key so that the items of a ``List`` come out one by one instead of after the whole List.

Bad input is counted, never fatal: an object that is not a Pod, a watch ``ERROR`` event,
or garbage between objects is counted in ``SourceStats.skipped``.  A malformed element of
a ``List`` or array is stepped over to the ``,`` or ``]`` that ends it, so the items after
it are still read; anywhere else the reader resynchronises at the next ``{`` at the start
of a line (where kubectl starts every top-level object, pretty-printed or not).  ``stats.read`` counts Pod-level objects (list
items, single objects, watch events) and garbage stretches; each is either understood or
skipped.  Watch ``BOOKMARK`` events are understood but not yielded (they carry no Pod).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from fma_otel.sources.records import PodEvent, SourceStats

__all__ = ["PodStore", "detect_kind", "iter_pod_events", "resource_version"]

_CHUNK = 1 << 16  # what detect_kind sniffs
#: read size of the reader: a value that straddles the end of the window is decoded again
#: after the next read, so reads of several hundred (pretty-printed) Pods make that rare
_READ_CHUNK = 1 << 20
_WS = re.compile(r"[ \t\r\n\ufeff]*")
_DECODER = json.JSONDecoder()
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
#: what :meth:`_Reader.skip_element` looks at: a whole string on one line, a bracket, a
#: comma, or a quote whose string does not close on its line
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[{}\[\],"]')


class _Bad(ValueError):
    """Malformed structure at the current position (as opposed to a JSON syntax error)."""


class _Reader:
    """A sliding window over a text or binary stream, for value-at-a-time JSON decoding."""

    def __init__(self, fh: IO[bytes] | IO[str], chunk: int = _READ_CHUNK) -> None:
        self._fh = fh
        self._chunk = max(chunk, 1)
        self._ahead = self._chunk // 4
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._base_line = 1  # line number of buf[0]
        self._base_off = 0  # absolute offset of buf[0]
        self._keep = 0  # absolute offset that must stay in the window (see mark())
        # the last line number asked for, so that the next one counts on from there
        # instead of from the start of the window: (absolute offset, its line number)
        self._at_off = 0
        self._at_line = 1

    def fill(self, want: int = 0) -> bool:
        """Read ``max(want, chunk)`` more; ``want`` grows with the value being decoded, so
        that retrying a long value costs amortised linear time, not quadratic."""
        if self.eof:
            return False
        data = self._fh.read(max(want, self._chunk))
        if isinstance(data, bytes):
            text = self._dec.decode(data, final=not data)
        else:
            text = data
        if not data:
            self.eof = True
        cut = min(self.pos, self._keep - self._base_off)
        if cut > self._chunk and cut * 2 > len(self.buf):
            # Drop what was consumed, so memory follows the current value, not the file.
            self._base_line = self._line_of(cut)
            self._base_off += cut
            self.buf = self.buf[cut:]
            self.pos -= cut
        self.buf += text
        return bool(text) or not self.eof

    def mark(self) -> int:
        """Absolute offset of the current position, kept in the window until the next mark
        (so that an error there can report its line and resynchronise from it)."""
        self._keep = self._base_off + self.pos
        return self._keep

    @property
    def last_mark(self) -> int:
        return self._keep

    def line_at(self, mark: int) -> int:
        return self._line_of(min(max(mark - self._base_off, 0), len(self.buf)))

    def _line_of(self, off: int) -> int:
        """Line number of ``buf[off]``, counted on from the last answer when that lies
        before it in the window (marks only move forward), else from the window's start:
        counting from the start for every object was half the reader's time."""
        start = self._at_off - self._base_off
        if 0 <= start <= off:
            line = self._at_line + self.buf.count("\n", start, off)
        else:
            line = self._base_line + self.buf.count("\n", 0, off)
        self._at_off = self._base_off + off
        self._at_line = line
        return line

    def peek(self) -> str:
        """Skip whitespace; the next character, or ``""`` at the end of the input."""
        while True:
            m = _WS.match(self.buf, self.pos)
            self.pos = m.end() if m else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.fill():
                return ""

    def expect(self, chars: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            raise _Bad(
                f"expected {chars!r}, found {c!r}" if c else f"input ends where {chars!r} was expected"
            )
        self.pos += 1
        return c

    def value(self) -> Any:
        """Decode one JSON value at the current position, reading more input as needed."""
        if len(self.buf) - self.pos < self._ahead and not self.eof:
            # read ahead: a value that runs past the window is decoded again after a
            # read, and its error (JSONDecodeError) counts the lines of the whole window
            self.fill()
        while True:
            try:
                val, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as e:
                near_end = e.pos >= len(self.buf) - 8 or e.msg.startswith("Unterminated string")
                if near_end and self.fill(len(self.buf) - self.pos):
                    continue
                raise
            except ValueError as e:  # valid JSON Python will not build: an int too long
                raise _Bad(f"a number too long ({e})"[:120]) from None
            except RecursionError:
                raise _Bad("JSON nested too deeply") from None
            if end >= len(self.buf) and not isinstance(val, (dict, list, str)) and self.fill():
                continue  # a number or literal may go on in the next chunk
            self.pos = end
            return val

    def skip_element(self) -> bool:
        """Move past a malformed element of an array, to the ``,`` or ``]`` that ends it.

        Why: the items of a pretty-printed ``List`` (or of a ``jq`` array) are indented, so
        :meth:`resync`, which waits for a ``{`` at the start of a line, would skip every
        item after a bad one - all unread and uncounted.  Brackets are counted outside
        strings; a string is taken to end at its line's end if its closing quote is
        missing.  ``False`` at the end of the input or at a ``}`` that closes nothing (the
        array was never closed): the caller then falls back to :meth:`resync`.  The window
        is allowed to move on while scanning, so a long bad stretch costs no memory.
        """
        depth = 0
        pos = self.pos
        while True:
            m = _TOKEN.search(self.buf, pos)
            tok = m.group() if m else ""
            if tok == '"':  # a quote whose string does not close on its line
                nl = self.buf.find("\n", m.end())  # type: ignore[union-attr]
                if nl >= 0 or self.eof:
                    pos = nl if nl >= 0 else len(self.buf)
                    continue
            if not tok or tok == '"':  # read on, letting the window drop what was scanned
                at = m.start() if m else len(self.buf)
                self.pos = at
                self._keep = self._base_off + at
                if not self.fill() and not tok:
                    self.pos = len(self.buf)
                    return False
                pos = self.pos
                continue
            if tok in "{[":
                depth += 1
            elif tok in "}]":
                if depth == 0:
                    self.pos = m.start()  # type: ignore[union-attr]
                    return tok == "]"
                depth -= 1
            elif tok == "," and depth == 0:
                self.pos = m.start()  # type: ignore[union-attr]
                return True
            pos = m.end()  # type: ignore[union-attr]

    def resync(self, mark: int) -> None:
        """Move to the next ``{`` at the start of a line after ``mark`` (or the end)."""
        self.pos = max(mark - self._base_off, 0) + 1
        while True:
            i = self.buf.find("\n{", self.pos)
            if i >= 0:
                self.pos = i + 1
                return
            self.pos = max(self.pos, len(self.buf) - 1)
            self._keep = self._base_off + self.pos  # the skip is counted: let the window move
            if not self.fill():
                self.pos = len(self.buf)
                return


def _members(r: _Reader) -> Iterator[tuple[int, Any]]:
    """Read a top-level object member by member; stream the elements of an ``items`` array.

    Yields ``(position, element)`` for each ``items`` element; returns the object (with the
    ``items`` array replaced by ``None`` when it was streamed) via ``StopIteration.value``.
    """
    r.expect("{")
    obj: dict[str, Any] = {}
    if r.peek() == "}":
        r.pos += 1
        return obj
    while True:
        if r.peek() != '"':
            raise _Bad("expected a member name")
        key = r.value()
        r.expect(":")
        if key == "items" and r.peek() == "[":
            r.pos += 1
            obj[key] = None
            if r.peek() == "]":
                r.pos += 1
            else:
                while True:
                    r.peek()
                    at = r.mark()
                    try:
                        item = r.value()
                    except (json.JSONDecodeError, _Bad) as e:
                        yield at, _BadItem(e)  # counted where ``at`` is still in the window
                        if not r.skip_element():
                            return obj  # never closed: the caller resynchronises
                    else:
                        yield at, item
                    if r.expect(",]") == "]":
                        break
        else:
            r.peek()
            obj[key] = r.value()
        if r.expect(",}") == "}":
            return obj


class _BadItem:
    """A malformed element of an array, stepped over (:meth:`_Reader.skip_element`)."""

    __slots__ = ("reason",)

    def __init__(self, err: json.JSONDecodeError | _Bad) -> None:
        self.reason = _malformed(err)


def _malformed(err: json.JSONDecodeError | _Bad) -> str:
    return f"malformed JSON object: {err.msg if isinstance(err, json.JSONDecodeError) else err}"


def _is_pod(obj: Any) -> str | None:
    """``None`` if ``obj`` is a Pod we can key, else the reason it is not."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    kind = obj.get("kind")
    if kind not in (None, "Pod"):
        return f"not a Pod (kind={kind})"
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("uid"), str) or not meta.get("uid"):
        return "Pod without metadata.uid"
    if kind is None and "spec" not in obj and "status" not in obj:
        return "not a Pod (no kind, spec or status)"
    return None


def _classify(obj: Any, default_type: str = "LISTED") -> tuple[str, dict[str, Any]] | str | None:
    """One Pod-level object: ``(event_type, pod)``, a skip reason, or ``None`` (ignore)."""
    if isinstance(obj, dict) and "type" in obj and "object" in obj and isinstance(obj["type"], str):
        etype = obj["type"]
        if etype == "BOOKMARK":
            return None
        if etype == "ERROR":
            inner = obj["object"]
            msg = inner.get("message", "") if isinstance(inner, dict) else ""
            return f"watch ERROR event: {msg}"[:200]
        if etype not in _WATCH_TYPES:
            return f"unknown watch event type {etype!r}"
        why = _is_pod(obj["object"])
        return why if why else (etype, obj["object"])
    why = _is_pod(obj)
    return why if why else (default_type, obj)


class _Counter:
    def __init__(self, stats: SourceStats) -> None:
        self.stats = stats
        self.index = 0

    def leaf(self, obj: Any, line: int) -> Iterator[PodEvent]:
        """Count and convert one Pod-level object (or a nested List of them)."""
        if isinstance(obj, dict) and isinstance(obj.get("items"), list) and "type" not in obj:
            for item in obj["items"]:
                yield from self.leaf(item, line)
            return
        self.stats.read += 1
        if isinstance(obj, _BadItem):
            self.stats.skip(line, obj.reason)
            return
        got = _classify(obj)
        if isinstance(got, str):
            self.stats.skip(line, got)
            return
        self.stats.understood += 1
        if got is not None:
            yield PodEvent(got[0], got[1], self.index)
            self.index += 1


def iter_pod_events(
    fh: IO[bytes] | IO[str], stats: SourceStats, chunk_size: int = _READ_CHUNK
) -> Iterator[PodEvent]:
    """Stream :class:`PodEvent` s from an open file (binary or text) of Pod JSON.

    List items and single objects come out as ``LISTED``; watch events keep their type.
    ``PodEvent.index`` is the position among the yielded events.  Reasons for skipped
    objects go to ``stats.skip`` with the line where the object starts.  ``chunk_size`` is
    the read size (the tests make it tiny to cross every boundary).
    """
    r = _Reader(fh, chunk_size)
    cnt = _Counter(stats)
    while True:
        c = r.peek()
        if not c:
            return
        start = r.mark()
        line = r.line_at(start)
        try:
            if c == "{":
                gen = _members(r)
                while True:
                    try:
                        at, item = next(gen)
                    except StopIteration as stop:
                        obj = stop.value
                        break
                    yield from cnt.leaf(item, r.line_at(at))
                if obj.get("items", 0) is not None:  # not a streamed List: one object
                    yield from cnt.leaf(obj, line)
            elif c == "[":
                r.pos += 1
                if r.peek() == "]":
                    r.pos += 1
                    continue
                while True:
                    r.peek()
                    at = r.mark()
                    try:
                        item = r.value()
                    except (json.JSONDecodeError, _Bad) as e:
                        yield from cnt.leaf(_BadItem(e), r.line_at(at))
                        if not r.skip_element():
                            break  # never closed: resynchronise out here
                    else:
                        yield from cnt.leaf(item, r.line_at(at))
                    if r.expect(",]") == "]":
                        break
            else:
                stats.read += 1
                stats.skip(line, "garbage between JSON objects")
                r.resync(start)
        except (json.JSONDecodeError, _Bad) as e:
            # Report and resynchronise from the innermost object that was being read (a
            # List item, else the top-level object): the last mark.
            stats.read += 1
            stats.skip(r.line_at(r.last_mark), _malformed(e))
            r.resync(r.last_mark)


# --------------------------------------------------------------------------- store


def resource_version(pod: dict[str, Any]) -> str | None:
    meta = pod.get("metadata")
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return rv if isinstance(rv, str) else None


def _rv_key(rv: str | None) -> tuple[int, str] | None:
    """An order key of a decimal ``resourceVersion``: ``(digits, digits)`` without leading
    zeros orders as the integers do, with no ``int()`` (which refuses more than
    ``sys.get_int_max_str_digits()`` digits: a hostile file must not stop the bridge).
    Any length orders here, as files may hold anything; the live watcher, which hands a
    version back to the API server, takes only etcd's int64 ones (``live.pods.rv_number``)."""
    if rv is None or not rv.isascii() or not rv.isdigit():
        return None
    d = rv.lstrip("0")
    return (len(d), d)


@dataclass
class _Entry:
    pod: dict[str, Any]
    rv: tuple[int, str] | None
    deleted: bool


class PodStore:
    """The newest known state of every Pod, by UID, whatever the order events arrive in.

    "Newest" is decided by ``metadata.resourceVersion`` compared as integers when both
    parse as integers (etcd revisions, which is what every real API server writes), so an
    older event never overwrites a newer one (merged files, re-listed snapshots).  When
    either does not parse, Kubernetes gives no order, so the later arrival wins.  A
    ``DELETED`` event marks the Pod deleted but keeps its last state, because the bridge
    still needs its timestamps.
    """

    def __init__(self) -> None:
        self._by_uid: dict[str, _Entry] = {}

    def add(self, ev: PodEvent) -> bool:
        """Take one event; ``True`` if the stored state (or deletion mark) changed."""
        if ev.event_type == "BOOKMARK":
            return False
        meta = ev.pod.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid:
            return False
        rv = _rv_key(resource_version(ev.pod))
        deleted = ev.event_type == "DELETED"
        cur = self._by_uid.get(uid)
        if cur is None:
            self._by_uid[uid] = _Entry(ev.pod, rv, deleted)
            return True
        changed = False
        if cur.rv is not None and rv is not None:
            newer = rv > cur.rv
        else:
            newer = ev.pod != cur.pod
        if newer:
            cur.pod, cur.rv = ev.pod, rv
            changed = True
        if deleted and not cur.deleted:
            cur.deleted = True
            changed = True
        return changed

    def get(self, uid: str) -> dict[str, Any] | None:
        e = self._by_uid.get(uid)
        return e.pod if e else None

    def is_deleted(self, uid: str) -> bool:
        e = self._by_uid.get(uid)
        return bool(e and e.deleted)

    def remove(self, uid: str) -> None:
        """Forget a Pod entirely (the live watcher, once a deleted Pod's actuations are out)."""
        self._by_uid.pop(uid, None)

    def pods(self) -> list[dict[str, Any]]:
        """Every Pod's newest state, deleted ones included, in order of first arrival."""
        return [e.pod for e in self._by_uid.values()]

    def __len__(self) -> int:
        return len(self._by_uid)

    def __contains__(self, uid: object) -> bool:
        return uid in self._by_uid


# --------------------------------------------------------------------------- sniffing

_KLOG_HEAD = re.compile(rb"[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ :\]]+:\d+\] ")
_LAUNCHER_HEAD = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - \S+ - \S+ - ")
_UVICORN_CLI = re.compile(rb"(?:TRACE|DEBUG|INFO|WARNING|ERROR|CRITICAL):\s")
_TS_PREFIX = re.compile(rb"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d(?:\.\d+)?(?:[Zz]|[+-]\d\d:\d\d) ")


def detect_kind(path: str) -> str:
    """Sniff a file: ``"pods"``, ``"klog"``, ``"launcher"``, ``"otlp-json"`` or ``"unknown"``.

    Looks at the first 64 KiB only, so the CLI can say "file of the wrong kind" before it
    parses anything.  For text logs the first recognisable line of up to 50 decides.
    """
    with open(path, "rb") as fh:
        head = fh.read(_CHUNK)
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text:
        return "unknown"
    if text[:1] in (b"{", b"["):
        window = head[:_CHUNK]
        if b'"resourceSpans"' in window:
            return "otlp-json"
        if re.search(rb'"kind"\s*:\s*"(?:Pod|PodList|List)"', window) or re.search(
            rb'"type"\s*:\s*"(?:ADDED|MODIFIED|DELETED|BOOKMARK)"', window
        ):
            return "pods"
        return "unknown"
    for line in text.splitlines()[:50]:
        m = _TS_PREFIX.match(line)
        body = line[m.end() :] if m else line
        if _KLOG_HEAD.match(body):
            return "klog"
        if _LAUNCHER_HEAD.match(body) or _UVICORN_CLI.match(body):
            return "launcher"
    return "unknown"
