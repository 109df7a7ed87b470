"""Reader of Kubernetes Pod JSON in every form ``kubectl`` writes (and, through
:class:`Sink`, of Events: :mod:`.k8s_events`).

Forms accepted, in any mix and in one file:

* a v1 ``List``/``PodList`` (``kubectl get pods -o json``): ``{"items": [...], ...}``;
* a single Pod object (``kubectl get pod X -o json``);
* a watch stream (``kubectl get pods -w -o json``): pretty-printed objects one after the
  other, *not* one per line, with or without ``--output-watch-events``
  (``{"type": "ADDED", "object": {...}}``);
* JSON lines of any of these (``jq -c``), or a top-level JSON array of them.

How: ``kubectl`` starts every top-level value at the start of a line, and indents what is
inside one.  So a value runs from a line that begins with ``{`` or ``[`` to the next such
line (values run together on those lines, ``}{``, are each read), and is decoded with ``msgspec`` into TypedDicts that hold only the fields the
bridge reads (:func:`doc_decoder`): everything else of a Pod is skipped by the decoder and never
built, which is what keeps a big List cheap.  A pretty-printed List (what ``kubectl get
pods -o json`` writes) is read item by item, by the same rule at the items' indentation,
so memory holds one item, not the List.  Each Pod comes out as a plain ``dict`` of just
those fields (what :mod:`fma_otel.podfacts` and the correlator read).

Bad input is counted, never fatal: an object that is not a Pod, a watch ``ERROR`` event,
garbage between objects (or after a value, on its lines), or a value that is no JSON is
counted in ``SourceStats.skipped`` with the line where it starts.  A List or array that
does not decode is re-read element by element with a small bracket-counting scanner, so
that its good items around a bad one are still read.  ``stats.read`` counts Pod-level
objects (list items, single objects, watch events) and garbage stretches; each is either
understood or skipped.  Watch ``BOOKMARK`` events are understood but not yielded (they
carry no Pod).  A number Python will not build (more digits than
``sys.get_int_max_str_digits()``) or nesting too deep for the decoder makes its object a
counted skip, wherever in the object it is; so does an instant that cannot be read.
"""

from __future__ import annotations

import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from functools import lru_cache
from sys import intern
from typing import IO, Any, TypedDict

import msgspec

from fma_otel.sources.records import PodEvent, SourceStats
from fma_otel.timeutil import parse_rfc3339_ns

__all__ = ["PodSink", "Sink", "doc_decoder", "iter_pod_events", "read_objects"]

_READ_CHUNK = 1 << 20
_WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})
_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
_SKIP = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")
#: an integer literal Python refuses to build has more digits in a row than this; msgspec
#: skips such a number unseen in a field it does not keep, so it is looked for (digits
#: mapped to "0", then one literal search: a regex over every byte is far slower)
_MAX_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 4300)()  # 0: no limit
_DIGITS = b"0123456789"
_DIGITS_AS_ZERO = bytes.maketrans(_DIGITS, b"0" * 10)
_DIGIT_RUN = b"0" * (_MAX_DIGITS + 1)


def _may_hold_huge(data: bytes) -> bool:
    """Whether ``data`` has more digits in a row than Python builds into an ``int`` (in a
    string or a number: the untyped decoder then tells which).  Such a run covers one of
    every ``_MAX_DIGITS``-th bytes, so unless one of those is a digit there is none, and
    the whole is not looked at."""
    if not _MAX_DIGITS or len(data) <= _MAX_DIGITS:
        return False
    every = data[::_MAX_DIGITS]
    if len(every.translate(None, _DIGITS)) == len(every):
        return False
    return _DIGIT_RUN in data.translate(_DIGITS_AS_ZERO)


#: what the recovery scanner looks at: a whole string on one line, a bracket, a comma, or a
#: quote whose string does not close on its line
_TOKEN = re.compile(rb'"(?:[^"\\\n]|\\.)*"|[{}\[\],"]')
_ITEMS_VALUE = re.compile(rb"\s*:\s*\[")


# --------------------------------------------------------------------------- the kept fields


# msgspec decodes a TypedDict straight into a plain ``dict`` of the fields present (what
# podfacts reads): no objects of its own to convert afterwards.  Every kept field takes
# any JSON value (a Pod whose fields have unexpected types is skipped by :func:`_checked`
# with the field's name, or passed over by podfacts' accessors, never a decode error); an
# object where one is expected is cut down to its kept fields.

_SCALAR = str | int | float | bool | None
_OTHER = list[Any] | _SCALAR  # what stands where an object is expected


class _Meta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    creationTimestamp: Any
    labels: Any
    annotations: Any


class _Named(TypedDict, total=False):
    name: Any


class _Spec(TypedDict, total=False):
    nodeName: Any
    containers: list[_Named | _OTHER] | dict[str, Any] | _SCALAR


class _Condition(TypedDict, total=False):
    type: Any
    status: Any
    lastTransitionTime: Any


class _Started(TypedDict, total=False):
    startedAt: Any


class _State(TypedDict, total=False):
    running: _Started | _OTHER
    terminated: _Started | _OTHER


class _ContainerStatus(TypedDict, total=False):
    name: Any
    state: _State | _OTHER


class _Status(TypedDict, total=False):
    conditions: list[_Condition | _OTHER] | dict[str, Any] | _SCALAR
    containerStatuses: list[_ContainerStatus | _OTHER] | dict[str, Any] | _SCALAR


def doc_decoder(name: str, fields: dict[str, Any]) -> Callable[[bytes], Any]:
    """The decoder of any top-level value or List item of one kind of object: a ``dict`` of
    ``fields`` (the object's, as TypedDict annotations) and of what tells a watch event (its
    ``type``, and its ``object`` decoded the same way in the same pass, with the ``message``
    of an ``ERROR``'s Status) or a List (the raw ``items``); a scalar stays one."""
    obj = TypedDict(name + "Object", {**fields, "message": Any}, total=False)  # type: ignore[misc]
    items = list[msgspec.Raw] | dict[str, Any] | _SCALAR
    doc = TypedDict(name, {**fields, "type": Any, "object": obj | _OTHER, "items": items}, total=False)  # type: ignore[misc]
    return msgspec.json.Decoder(doc | _SCALAR).decode


_DECODE_DOC = doc_decoder(
    "_Doc", {"kind": Any, "metadata": _Meta | _OTHER, "spec": _Spec | _OTHER, "status": _Status | _OTHER}
)
#: a top-level array (``jq`` output): its elements decoded one by one, as a List's items
_DECODE_ARRAY = msgspec.json.Decoder(list[msgspec.Raw]).decode
_DECODE_ANY = msgspec.json.Decoder().decode
#: msgspec's word for a whole value followed by more text (the byte counted from 1)
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


class _Malformed(ValueError):
    """A value that is no JSON (or none Python will build): its object is a counted skip.
    ``end``: where the value ends when it is whole but text follows it."""

    def __init__(self, why: str, end: int | None = None) -> None:
        super().__init__(why)
        self.end = end


def _why(err: Exception) -> str:
    if isinstance(err, RecursionError):
        return "JSON nested too deeply"
    text = str(err)
    if "out of range" in text:
        return f"a number too long ({text})"[:120]
    return text[:120]


def _decode(data: bytes, untyped: bool = False, doc: Callable[[bytes], Any] = _DECODE_DOC) -> Any:
    """One value, untyped or by ``doc`` (a :func:`doc_decoder`; for an array: a list of raw
    elements); :class:`_Malformed` if it is no JSON, or none Python will build."""
    try:
        if untyped:
            return _DECODE_ANY(data)
        return (_DECODE_ARRAY if data[:1] == b"[" else doc)(data)
    except msgspec.ValidationError as e:  # only a number Python will not build
        raise _Malformed(_why(e) if untyped else _error_of(data)) from None  # said as untyped
    except msgspec.DecodeError as e:
        text = str(e)
        if "UTF-8" not in text:
            m = _TRAILING.search(text)
            raise _Malformed(_why(e), int(m.group(1)) - 1 if m else None) from None
    except RecursionError as e:
        raise _Malformed(_why(e)) from None
    # bytes that are no UTF-8 in a kept field: read as U+FFFD, as a text reader would
    return _decode(str(data, "utf-8", "replace").encode(), untyped, doc)


def _checked(pod: dict[str, Any]) -> str | None:
    """Why the Pod is skipped, or ``None``, its strings that many Pods repeat shared.

    One walk over the fields podfacts reads, for two ends.  Every instant must be read
    well: an instant that cannot be read, or lies outside what OTLP can carry (a time in
    year 1 or 2600), is bad input, and a Pod quietly missing its Ready time would make its
    actuation look unfinished with nothing said; so the whole Pod is a counted skip, with
    which field and why.  A list field holding a number, ``true`` or an object is one too
    (a string is kept: the accessors pass over its characters).  And the values many Pods
    repeat (namespace, node, label values, condition types, statuses and times, container
    names and start times) become one string each: the bridge keeps every Pod until the
    end, and the decoder makes a new string for each value."""
    meta = pod.get("metadata")
    if isinstance(meta, dict):
        if why := _shared(meta, ("namespace",), "creationTimestamp"):
            return f"metadata.creationTimestamp: {why}"[:200]
        labels = meta.get("labels")
        if isinstance(labels, dict):
            meta["labels"] = {k: intern(v) if v.__class__ is str else v for k, v in labels.items()}
    spec = pod.get("spec")
    if isinstance(spec, dict):
        _shared(spec, ("nodeName",))
        containers = spec.get("containers")
        if not _is_list(containers):
            return "spec.containers is not a list"
        for c in containers or ():
            _shared(c, ("name",))
    status = pod.get("status")
    if not isinstance(status, dict):
        return None
    conditions, statuses = status.get("conditions"), status.get("containerStatuses")
    if not _is_list(conditions):
        return "status.conditions is not a list"
    if not _is_list(statuses):
        return "status.containerStatuses is not a list"
    for c in conditions or ():
        if why := _shared(c, ("type", "status"), "lastTransitionTime"):
            return f"condition {c.get('type')} lastTransitionTime: {why}"[:200]
    for cs in statuses or ():
        _shared(cs, ("name",))
        state = cs.get("state") if isinstance(cs, dict) else None
        for phase in ("running", "terminated"):
            st = state.get(phase) if isinstance(state, dict) else None
            if why := _shared(st, (), "startedAt"):
                return f"container {cs.get('name')} {phase}.startedAt: {why}"[:200]
    return None


def _is_list(value: Any) -> bool:
    return value is None or isinstance(value, (list, str))


@lru_cache(4096)  # a Pod's conditions, and Pods made together, share many instants
def _instant(text: str) -> str:
    """``text`` as its one shared string, once read well as an instant (else ``ValueError``)."""
    parse_rfc3339_ns(text)
    return intern(text)


def _shared(d: Any, keys: tuple[str, ...], instant: str = "") -> str | None:
    """Why ``d[instant]`` is no instant, else ``None`` (absent and empty ones are fine),
    with ``d``'s strings at ``keys`` and at ``instant`` made shared ones; nothing for a
    ``d`` that is no dict."""
    if d.__class__ is not dict:
        return None
    for k in keys:
        v = d.get(k)
        if v.__class__ is str:
            d[k] = intern(v)
    v = d.get(instant)
    if v.__class__ is not str or not v:
        return None
    try:
        d[instant] = _instant(v)
    except ValueError as exc:
        return str(exc)
    return None


def _pod_reason(pod: Any) -> str | None:
    """``None`` if this is a Pod we can key, else the reason it is not."""
    if not isinstance(pod, dict):
        return "not a JSON object"
    kind = pod.get("kind")
    if kind not in (None, "Pod"):
        return f"not a Pod (kind={kind})"
    meta = pod.get("metadata")
    uid = meta.get("uid") if isinstance(meta, dict) else None
    if not isinstance(uid, str) or not uid:
        return "Pod without metadata.uid"
    if kind is None and pod.get("spec") is None and pod.get("status") is None:  # null: absent
        return "not a Pod (no kind, spec or status)"
    return None


# --------------------------------------------------------------------------- objects


class Sink(ABC):
    """Counts the objects of one input and hands each to :meth:`take`: what a reader of one
    kind of object (:class:`PodSink`, the Events') makes its own.

    ``decode_doc`` (a :func:`doc_decoder`) says which fields are kept; ``stats`` needs
    ``read`` and ``skip(position, why)``, which :meth:`skipped` and :meth:`bookmark` use.
    """

    decode_doc: Callable[[bytes], Any]

    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @abstractmethod
    def take(self, etype: str, doc: Any, line: int) -> Any:
        """The record of one object (``etype``: its watch type, or ``LISTED``), or ``None``
        when it is a counted skip."""

    def skipped(self, line: int, why: str) -> None:
        """An object already counted in ``read`` is skipped."""
        self.stats.skip(line, why)

    def bookmark(self) -> None:
        """A watch ``BOOKMARK``: understood, and nothing to yield."""
        self.stats.understood += 1

    def skip(self, line: int, why: str) -> None:
        self.stats.read += 1
        self.skipped(line, why)

    def value(self, data: bytes, line: int) -> Iterator[Any]:
        """One top-level value or element, or raise :class:`_Malformed`; the items of a
        List or array are counted one by one (a bad one a skip of its own)."""
        doc = _decode(data, doc=self.decode_doc)
        is_dict = doc.__class__ is dict
        if doc.__class__ is list or (
            is_dict and doc.get("items").__class__ is list and doc.get("type") is None
        ):
            for item in doc if doc.__class__ is list else doc["items"]:
                try:
                    yield from self.value(bytes(item), line)
                except _Malformed as e:
                    self.skip(line, f"malformed JSON object: {e}")
            return
        if _may_hold_huge(data):
            _decode(data, untyped=True)  # raises for a number (not only text) Python will not build
        self.stats.read += 1
        if is_dict and isinstance(doc.get("type"), str) and "object" in doc:
            rec = self._watch_event(doc["type"], doc["object"], line)
        else:
            rec = self.take("LISTED", doc, line)
        if rec is not None:
            yield rec

    def _watch_event(self, etype: str, obj: Any, line: int) -> Any:
        if etype == "BOOKMARK":
            self.bookmark()
        elif etype == "ERROR":
            msg = obj.get("message", "") if isinstance(obj, dict) else ""
            self.skipped(line, f"watch ERROR event: {msg}"[:200])
        elif etype not in _WATCH_TYPES:
            self.skipped(line, f"unknown watch event type {etype!r}")
        else:
            return self.take(etype, obj, line)
        return None

    def framed(self, data: bytes, line: int) -> Iterator[Any]:
        """A value cut out of the file by lines: a bad one is a counted skip (its List or
        array read element by element).  Whole values one after another on its lines (one
        closed early by a stray bracket, or ``}{``) are each read, as a streaming reader
        would; other text after a whole value is garbage."""
        try:
            yield from self.value(data, line)
            return
        except _Malformed as e:
            end, err = e.end, e
        view, pos = memoryview(data), 0
        while end is not None:
            try:
                _decode(view[pos : pos + end], doc=self.decode_doc)
            except _Malformed:
                break
            yield from self.framed(bytes(view[pos : pos + end]), line)
            line += data.count(b"\n", pos, pos + end)
            pos, end = pos + end, _SKIP.match(data, pos + end).end()
            line += data.count(b"\n", pos, end)
            pos = end
            if pos == len(data):
                return
            if data[pos] not in b"{[":
                self.skip(line, "garbage between JSON objects")
                return
            try:  # where the next value ends, the rest not copied
                _decode(view[pos:], doc=self.decode_doc)
                end = None
            except _Malformed as e:
                end, err = e.end, e
        if pos:  # the last of the values, whole or not
            yield from self.framed(bytes(view[pos:]), line)
            return
        try:
            yield from _recover(self, data, line)
        except _Malformed:
            self.skip(line, f"malformed JSON object: {err}")


class PodSink(Sink):
    """Pods as :class:`PodEvent` s, numbered in the order they are yielded."""

    decode_doc = _DECODE_DOC

    def __init__(self, stats: SourceStats) -> None:
        super().__init__(stats)
        self.index = 0

    def take(self, etype: str, doc: Any, line: int) -> PodEvent | None:
        why = _pod_reason(doc) or _checked(doc)
        if why:
            self.skipped(line, why)
            return None
        self.stats.understood += 1
        self.index += 1
        return PodEvent(etype, doc, self.index - 1, line)


# --------------------------------------------------------------------------- framing


class _Window:
    """A window of bytes over the file, with line numbers; what was consumed is dropped.
    A ``bytearray``, so that growing it does not copy it."""

    def __init__(self, fh: IO[bytes] | IO[str], chunk: int) -> None:
        self._fh = fh
        self.chunk = self._chunk = max(chunk, 1)
        self.buf = bytearray()
        self.eof = False
        self._line_pos = 0  # a position in buf and its line number, counted on from there
        self._line = 1

    def more(self, want: int = 0) -> bool:
        """Read at least ``max(want, chunk)`` more bytes; ``False`` at the end of the input."""
        if self.eof:
            return False
        data = self._fh.read(max(want, self._chunk))
        if not data:
            self.eof = True
            return False
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        self.buf += data
        return True

    def drop(self, pos: int) -> int:
        """Forget ``buf[:pos]``; returns the new position of ``pos`` (0)."""
        if pos:
            self.line(pos)
            del self.buf[:pos]
            self._line_pos = 0
        return 0

    def line(self, pos: int) -> int:
        """Line number of ``buf[pos]``."""
        if pos >= self._line_pos:
            self._line += self.buf.count(b"\n", self._line_pos, pos)
        else:
            self._line -= self.buf.count(b"\n", pos, self._line_pos)
        self._line_pos = pos
        return self._line

    def find(self, sub: bytes, start: int) -> int:
        """``buf.find(sub, start)``, reading on until found (-1 at the end of the input);
        reads grow with the window, so a long search costs linear time."""
        while True:
            i = self.buf.find(sub, start)
            searched = len(self.buf)
            if i >= 0 or not self.more(searched):
                return i
            start = max(start, searched - len(sub) + 1)

    def skip_garbage(self, pos: int) -> int:
        """Where the next line beginning with ``{`` or ``[`` after ``pos`` begins, or the
        end; what is passed over is dropped, so long garbage costs no memory."""
        while True:
            ends = [k + 1 for k in (self.buf.find(b"\n{", pos), self.buf.find(b"\n[", pos)) if k >= 0]
            if ends:
                return min(ends)
            pos = self.drop(max(pos, len(self.buf) - 1))
            if not self.more():
                return len(self.buf)

    def next_start(self, start: int) -> int:
        """Where the next line beginning with ``{`` or ``[`` after ``start`` begins, or the end.
        A ``[`` line is looked for only before the ``{`` one: in a watch stream there is
        none, and searching the rest of the window for it after every value made reading
        the stream quadratic in the window."""
        i = self.find(b"\n{", start)
        j = self.buf.find(b"\n[", start, i if i >= 0 else len(self.buf))
        ends = [k + 1 for k in (i, j) if k >= 0]
        return min(ends) if ends else len(self.buf)


def iter_pod_events(
    fh: IO[bytes] | IO[str], stats: SourceStats, chunk_size: int = _READ_CHUNK
) -> Iterator[PodEvent]:
    """Stream :class:`PodEvent` s from an open file (binary or text) of Pod JSON.

    List items and single objects come out as ``LISTED``; watch events keep their type.
    ``PodEvent.index`` is the position among the yielded events.  Reasons for skipped
    objects go to ``stats.skip`` with the line where the object starts.  ``chunk_size`` is
    the read size (the tests make it tiny to cross every boundary).
    """
    return read_objects(fh, PodSink(stats), chunk_size)


def read_objects(fh: IO[bytes] | IO[str], sink: Sink, chunk_size: int = _READ_CHUNK) -> Iterator[Any]:
    """The records ``sink`` makes of the objects of an open file (binary or text), in order."""
    w = _Window(fh, chunk_size)
    pos = 0
    while True:
        # skip whitespace (and a byte order mark), reading on while what is left may be a cut BOM
        pos = _SKIP.match(w.buf, pos).end()
        while len(w.buf) - pos < len(_BOM) and not w.eof:
            pos = w.drop(pos) if pos == len(w.buf) else pos  # long whitespace costs no memory
            w.more()
            pos = _SKIP.match(w.buf, pos).end()
        if pos >= len(w.buf):
            return
        pos = w.drop(pos) if pos > chunk_size else pos
        line = w.line(pos)
        if w.buf[pos] not in b"{[":
            sink.skip(line, "garbage between JSON objects")
            pos = w.skip_garbage(pos)
            continue
        end = yield from _pretty_list(w, sink, pos, line)
        if end is None:
            end = w.next_start(pos)
            yield from sink.framed(bytes(w.buf[pos:end]), line)
        pos = end


#: the head of a pretty-printed List (``kubectl get pods -o json``): one-line members, then
#: ``"items": [`` with the first item on the next line
_LIST_HEAD = re.compile(rb'\{\n(?: +"(?!items")[^\n]*\n)*?( +)"items": \[\n( +)\{\n')


def _pretty_list(w: _Window, sink: Sink, pos: int, line: int) -> Iterator[Any]:
    """Read a pretty-printed List item by item, so that memory holds one item, not the
    List; the new position, or ``None`` (nothing read) when the value is no such List.

    Each item starts with a ``{`` line at the items' indentation and ends with the ``}``
    line at the same indentation; an item that does not decode there is one counted skip
    and the next item is read.  Anything else out of shape ends the List with a skip, and
    reading goes on at the next line that begins a value.
    """
    while len(w.buf) - pos < 4096 and w.more():
        pass
    m = _LIST_HEAD.match(w.buf, pos)
    if m is None:
        return None
    items_close, ind = b"\n" + m.group(1) + b"]", m.group(2)
    close = b"\n" + ind + b"}"
    p = m.start(2) + len(ind)  # at the first item's "{"
    while True:
        p = w.drop(p) if p > w.chunk else p
        at = w.line(p)
        e = w.find(close, p)
        if e < 0:
            sink.skip(at, "malformed JSON object: the List ends inside an item")
            return len(w.buf)
        e += len(close)
        bad = False
        try:
            yield from sink.value(bytes(w.buf[p:e]), at)
        except _Malformed as err:
            sink.skip(at, f"malformed JSON object: {err}")
            bad = True
        while len(w.buf) - e < len(items_close) + len(ind) + 3 and w.more():
            pass
        if w.buf.startswith(b",\n" + ind + b"{", e):
            p = e + 2 + len(ind)
            continue
        if not w.buf.startswith(items_close, e):
            # stray text after an item (most likely the rest of a bad one): on to the next
            # item, or to the end of the items, whichever comes first
            nxt, last = w.find(b"\n" + ind + b"{", e), w.find(items_close, e)
            if not bad:
                sink.skip(w.line(e), "malformed JSON object: a List item is followed by neither , nor ]")
            if 0 <= nxt and (last < 0 or nxt < last):
                p = nxt + 1 + len(ind)
                continue
            if last < 0:
                return w.skip_garbage(e)
            e = last
        end = w.find(b"\n}", e)
        return len(w.buf) if end < 0 else end + 2


# --------------------------------------------------------------------------- recovery


def _recover(sink: Sink, text: bytes, line: int) -> Iterator[Any]:
    """A top-level value that does not decode: read the elements of its ``items`` (or of
    the array it is) one by one, so that one bad element costs only itself."""
    start = _elements_start(text)
    if start is None:
        raise _Malformed(_error_of(text))
    spans, closed = _elements(text, start)
    for s, e in spans:
        item = text[s:e].strip(_WS)
        s += text[s:e].index(item[:1]) if item else 0  # where the element itself starts
        at = line + text.count(b"\n", 0, s)
        try:
            yield from sink.value(item, at)
        except _Malformed as err:
            sink.skip(at, f"malformed JSON object: {err}")
    if not closed:  # cut after a whole item: what followed it is lost, so say so
        sink.skip(line + text.count(b"\n"), "cut: the List or array ends without its closing ]")


def _error_of(text: bytes) -> str:
    try:
        _DECODE_ANY(text)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as e:
        return _why(e)
    return "not one JSON value"


def _elements_start(text: bytes) -> int | None:
    """Just after the ``[`` of the array to recover from: the value's own, or that of its
    ``items`` member (at depth 1 only: a Pod's volumes have ``items`` too)."""
    if text[:1] == b"[":
        return 1
    depth = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and tok == b'"items"':
            v = _ITEMS_VALUE.match(text, m.end())
            if v:
                return v.end()
    return None


def _elements(text: bytes, pos: int) -> tuple[list[tuple[int, int]], bool]:
    """The spans of the elements of the array whose ``[`` ends before ``pos``, and whether
    the text closes the array (with ``]``, or a ``}`` that closes nothing).

    Brackets are counted outside strings; a string is taken to end at its line's end if
    its closing quote is missing.  Ends at the ``]`` that closes the array, at a ``}`` that
    closes nothing (the array was never closed), or at the end of the text (cut).
    """
    spans: list[tuple[int, int]] = []
    depth = 0
    start = pos
    n = len(text)
    while True:
        m = _TOKEN.search(text, pos)
        if m is None:
            if text[start:].strip():
                spans.append((start, n))
            return spans, False
        tok = m.group()
        if tok == b'"':  # a quote whose string does not close on its line
            nl = text.find(b"\n", m.end())
            pos = nl if nl >= 0 else n
            continue
        if tok in (b"{", b"["):
            depth += 1
        elif tok in (b"}", b"]"):
            if depth == 0:
                if text[start : m.start()].strip():
                    spans.append((start, m.start()))
                return spans, True
            depth -= 1
        elif tok == b"," and depth == 0:
            spans.append((start, m.start()))
            start = m.end()
        pos = m.end()
