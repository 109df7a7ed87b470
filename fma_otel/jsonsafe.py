"""Numbers and JSON that someone else wrote, read without a traceback.

Why a module: the readers of trace files, Jaeger/Tempo answers, the API server's answers
and the watcher's checkpoint each learned the same three surprises of CPython 3.11 the
hard way, and the answer to each belongs in one place:

- ``json.loads`` of nesting deeper than the interpreter recurses (``"[" * 100000``) raises
  :class:`RecursionError`, which is no :class:`ValueError`; an integer literal of more than
  ``sys.get_int_max_str_digits()`` (4300) digits raises a plain :class:`ValueError` that is
  no :class:`json.JSONDecodeError`.  :func:`loads` turns the first into a :class:`JsonError`
  (a :class:`ValueError`), so one ``except ValueError`` covers every way JSON can be bad.
- ``float()`` of an integer beyond float range raises :class:`OverflowError`, and lets
  through ``nan`` and ``inf`` (JSON's ``NaN``/``Infinity`` literals, ``"NaN"`` strings,
  ``"1e999"``), which then poison comparisons, sorting and ``int()``: :func:`finite_float`.
- OTLP times are ``fixed64`` nanoseconds; a bigger integer (valid JSON, under the digit
  limit) overflows the float arithmetic of every duration: :data:`NS_LIMIT`, :func:`ns`.

``NaN``/``Infinity`` literals are not refused while parsing (``json.loads`` accepts them,
and so do the other readers of the same files): where a number matters, the reader checks
it with :func:`finite_float` or :func:`ns`, which also catches the same values spelled as
strings or as huge integers.
"""

from __future__ import annotations

import json
import math
from typing import Any

#: OTLP's ``startTimeUnixNano``/``endTimeUnixNano`` are ``fixed64``: a time is in
#: ``[0, NS_LIMIT)``.  Anything else is malformed, not a time a writer could mean.
NS_LIMIT = 1 << 64
#: the longest a span can last in seconds (``NS_LIMIT`` ns, some 584 years): a duration
#: (``fma.duration.min_s``/``max_s``) past it is no duration a writer could mean, and a
#: finite one as big as ``1e308`` overflows to ``inf`` once scaled for display (``OverflowError``
#: in ``math.floor``), so :func:`seconds_or_none` refuses it as it refuses ``inf``
MAX_SECONDS = NS_LIMIT / 1e9


class JsonError(ValueError):
    """JSON that Python will not build (see the module docstring)."""


def loads(data: str | bytes | bytearray) -> Any:
    """``json.loads`` whose every failure on bad input is a :class:`ValueError`.

    Already a ``ValueError``: :class:`json.JSONDecodeError`, the digit limit, bytes that
    are no UTF-8/16/32 (:class:`UnicodeDecodeError`).  Made one: :class:`RecursionError`.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise JsonError("JSON nested too deeply") from None


def finite_float(v: Any) -> float:
    """``float(v)`` when that is a finite number, else :class:`ValueError` (never
    :class:`OverflowError` or :class:`TypeError`, and never ``nan`` or ``inf``)."""
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"not a number: {brief(v)}") from None
    if not math.isfinite(f):
        raise ValueError(f"not a finite number: {brief(v)}")
    return f


def number_or_none(v: Any) -> float | None:
    """A JSON number (``int`` or ``float``, not ``bool``) as a finite ``float``, else ``None``:
    ``nan``, ``inf`` and ints beyond float range included (their ``float()`` raises
    :class:`OverflowError`)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def float_or_none(v: Any) -> float | None:
    """``float(v)`` when that is a finite number, else ``None`` (``None`` and ``bool`` too):
    for a value that is drawn or shown when it is a number and left out otherwise."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return finite_float(v)
    except ValueError:
        return None


def seconds_or_none(v: Any, strings: bool = True) -> float | None:
    """A duration in seconds (:func:`float_or_none`; with ``strings=False``
    :func:`number_or_none`, JSON numbers only) within ``[-MAX_SECONDS, MAX_SECONDS]``, else
    ``None``: read like ``inf`` and ``nan``, a value no span can mean is left out."""
    f = float_or_none(v) if strings else number_or_none(v)
    return f if f is not None and -MAX_SECONDS <= f <= MAX_SECONDS else None


def ns(v: Any) -> int:
    """An OTLP time field (``"1780000010000000000"``, a JSON number, absent = 0) as ``int``
    nanoseconds; :class:`ValueError` when it is not one, or outside ``[0, NS_LIMIT)``."""
    try:
        t = int(v or 0)
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf)
        raise ValueError(f"not a time in nanoseconds: {brief(v)}") from None
    if not 0 <= t < NS_LIMIT:
        raise ValueError(f"time outside OTLP's fixed64 nanoseconds: {brief(t)}")
    return t


def brief(v: Any) -> str:
    """``repr(v)`` cut short, for an error message: the value may be 5000 digits long (and
    ``repr`` of an int that long raises :class:`ValueError` itself)."""
    if isinstance(v, int) and not isinstance(v, bool) and not -(10**30) < v < 10**30:
        return "an integer of more than 30 digits"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."
