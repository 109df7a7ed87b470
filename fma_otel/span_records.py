"""The span records every source builds and every sink consumes (``SpanRecord``, ``SpanEvent``).

They are apart from ``fma_otel.model``'s names and ids so that the in-process wrappers,
which use those and never a record, do not load ``msgspec`` into the launcher (whose every
page each fork of a vLLM instance copies the page tables of).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from fma_otel.model import STATUS_UNSET, S

__all__ = ["SpanEvent", "SpanRecord"]


class SpanEvent(msgspec.Struct, frozen=True):
    """A span event: an instant with attributes on a span (FMA's own Kubernetes Events)."""

    name: str
    time_ns: int
    attributes: Mapping[str, Any] = {}


class SpanRecord(msgspec.Struct, frozen=True):
    """A finished span, immutable: what the builder makes and every sink consumes.

    A frozen ``msgspec.Struct`` rather than a frozen dataclass: the bridge makes one per
    span, and a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``; a Struct is built by its own C constructor.  Edit a copy with
    ``msgspec.structs.replace``.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    service: str
    attributes: Mapping[str, Any] = {}
    status_code: str = STATUS_UNSET
    status_message: str = ""
    resource: Mapping[str, Any] = {}
    events: tuple[SpanEvent, ...] = ()

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / S
