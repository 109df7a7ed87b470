"""What the source parsers produce: plain records, no knowledge of spans.

These types are the boundary between the *sources* floor (pure parsers of klog text,
launcher Python-logging text, and Kubernetes Pod JSON) and the *correlate* floor.  They keep
what the text says and nothing more: a klog header has no year, so a ``KlogRecord`` keeps
month/day/time and lets the correlator resolve the year against Pod timestamps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class KlogRecord(NamedTuple):
    """One klog text line (header + Go-quoted message + key/value pairs).

    ``kv`` keeps every pair in order, repeats included (klog can print ``node`` twice).
    Values are decoded: Go-quoted strings become ``str``, JSON values become Python values,
    ``%+q`` byte strings become ``str``, multi-line ``key=<`` blocks become one ``str`` with
    ``\\n`` separators.  ``prefix_ns`` is the ``kubectl logs --timestamps`` prefix (UTC ns
    since the epoch) if the line had one: used only to learn the year, never as the instant.
    ``tod_us`` is the time of day in microseconds (klog's own clock, UTC assumed).
    """

    line_no: int
    level: str  # I W E F
    month: int
    day: int
    tod_us: int
    pid: int
    file: str
    src_line: int
    msg: str
    kv: tuple[tuple[str, Any], ...]
    prefix_ns: int | None = None
    #: the line was cut inside a value, or its multi-line block never closed: the pairs
    #: that were whole are kept, the cut one dropped (a reader needing it must say so)
    truncated: bool = False

    def get(self, key: str, default: Any = None) -> Any:
        """The last value of ``key`` (call-site keys come after context keys)."""
        for k, v in reversed(self.kv):
            if k == key:
                return v
        return default

    def get_all(self, key: str) -> list[Any]:
        return [v for k, v in self.kv if k == key]


class LauncherRecord(NamedTuple):
    """One launcher log line: ``%(asctime)s - %(name)s - %(levelname)s - %(message)s``.

    ``t_ns`` is the asctime (millisecond precision) as UTC ns since the epoch.  For uvicorn
    access lines ``access`` holds ``(client, method, path, http_version, status)``.
    ``prefix_ns`` as in :class:`KlogRecord`.
    """

    line_no: int
    t_ns: int
    logger: str
    level: str
    message: str
    access: tuple[str, str, str, str, int] | None = None
    prefix_ns: int | None = None


@dataclass(frozen=True, slots=True)
class PodEvent:
    """One Pod state as read from a List, a single object or a watch stream.

    ``event_type`` is ``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK`` for watch events,
    ``LISTED`` for list items and single objects.  ``pod`` is the raw JSON dict.
    """

    event_type: str
    pod: dict[str, Any]
    index: int = 0  # position among the events read (0 for the first)
    #: the input line where its object starts (1-based; 0 when not read from a file): what
    #: a message naming file:line names, as for a skipped object
    line: int = 0


@dataclass
class SourceStats:
    """Lines read/understood/skipped per source, for the summary and ``--strict``.

    ``read`` is ``understood + ignored + skipped``: ``ignored`` counts the lines a parser
    passed over without validating them (lines the bridge has no use for), said apart so
    that the summary does not claim to have checked them.
    """

    name: str
    read: int = 0
    understood: int = 0
    skipped: int = 0
    ignored: int = 0
    notes: dict[str, int] = field(default_factory=dict)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)  # (line_no, reason), first 100

    def note(self, what: str, n: int = 1) -> None:
        """Count something read that the summary must mention (not a skip)."""
        self.notes[what] = self.notes.get(what, 0) + n

    def skip(self, line_no: int, reason: str) -> None:
        self.skipped += 1
        if len(self.skipped_lines) < 100:
            self.skipped_lines.append((line_no, reason))
