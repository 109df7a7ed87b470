"""The SLO spec: a small YAML list that turns a report into verdicts, for CI gates.

```yaml
- {metric: T_actuation, path: hot, p95: 5s}          # upper bounds on p50/p90/p95/p99/min/max/mean
- {metric: T_actuation, p99: 2m, min_n: 20}            # no path: over all paths; need 20 actuations
- {metric: T_wake, path: hot, max_incomplete: 0}       # no unfinished wake
- {hit_rate: hot, min: 0.5}                            # hit rates: min and/or max, 0..1 or "50%"
```

Why so strict about input: a typo in a gate (``p59``, ``T_actuatoin``) must not pass
silently, so every problem is reported with the item's index and the accepted spellings.
A metric with no data is ``no_data``, not a violation, unless the item asks for ``min_n``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..jsonsafe import brief, finite_float
from ..model import ALL_PATHS, COLD_LAUNCHER, HOT, METRICS, WARM
from . import QueryError
from .stats import Report, merged
from .window import parse_duration

DURATION_STATS: tuple[str, ...] = ("p50", "p90", "p95", "p99", "min", "max", "mean")
HIT_RATES: Mapping[str, str] = {
    HOT: "Hot_hit_rate",
    WARM: "Warm_hit_rate",
    COLD_LAUNCHER: "Cold_launcher_share",
}
_ALL_PATH_WORDS = frozenset({"*", "all", "any"})

PASS, FAIL, NO_DATA = "pass", "fail", "no_data"


@dataclass(frozen=True)
class Check:
    """One threshold of one spec item."""

    item: int  # 1-based index in the spec
    kind: str  # "metric" or "hit_rate"
    subject: str  # T_actuation / Hot_hit_rate
    path: str | None  # None: over all paths
    stat: str  # p95, n, incomplete, rate
    op: str  # "<=" or ">="
    threshold: float


@dataclass(frozen=True)
class Verdict(Check):
    """A check and what the report says to it."""

    value: float | None
    status: str
    #: for a percentile: the interval the true value can be in (:mod:`.stats`), else the
    #: value on both ends; ``certain`` is false when the threshold lies inside it, so that
    #: the verdict could go the other way within the data's precision
    value_lo: float | None = None
    value_hi: float | None = None
    certain: bool | None = None


def load_spec(path: str) -> list[Check]:
    """Read and validate a spec file; :class:`QueryError` (one line) on any problem."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise QueryError(f"--slo {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise QueryError(f"--slo {path}: not valid YAML{where}") from None
    except UnicodeDecodeError:
        raise QueryError(f"--slo {path}: not UTF-8 text") from None
    except ValueError:  # not a YAMLError: an int of more digits than int() converts
        raise QueryError(f"--slo {path}: not valid YAML (a number too long)") from None
    except RecursionError:
        raise QueryError(f"--slo {path}: not valid YAML (nested too deeply)") from None
    try:
        return parse_spec(doc)
    except QueryError as exc:
        raise QueryError(f"--slo {path}: {exc}") from None


def parse_spec(doc: Any) -> list[Check]:
    """A parsed YAML document (a list of items, or ``{slo: [...]}``) -> checks."""
    if isinstance(doc, Mapping) and set(doc) <= {"slo", "slos"}:
        doc = doc.get("slo", doc.get("slos"))
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise QueryError("the spec must be a YAML list of items")
    checks: list[Check] = []
    for i, item in enumerate(doc, start=1):
        if not isinstance(item, Mapping):
            raise QueryError(
                f"item {i}: must be a mapping such as {{metric: T_actuation, path: hot, p95: 5s}}"
            )
        try:
            if "metric" in item and "hit_rate" in item:
                raise QueryError("has both 'metric' and 'hit_rate'")
            if "metric" in item:
                checks.extend(_metric_item(i, item))
            elif "hit_rate" in item:
                checks.extend(_hit_item(i, item))
            else:
                raise QueryError("needs 'metric' or 'hit_rate'")
        except QueryError as exc:
            raise QueryError(f"item {i}: {exc}") from None
    return checks


def _metric_item(i: int, item: Mapping[str, Any]) -> list[Check]:
    allowed = {"metric", "path", "min_n", "max_incomplete", *DURATION_STATS}
    _no_unknown(item, allowed)
    metric = item["metric"]
    if metric not in METRICS:
        raise QueryError(f"unknown metric {metric!r} (known: {', '.join(METRICS)})")
    path = item.get("path")
    if path is not None:
        path = str(path)
        if path in _ALL_PATH_WORDS:
            path = None
        elif path not in ALL_PATHS:
            raise QueryError(
                f"unknown path {path!r} (known: {', '.join(sorted(ALL_PATHS))}, or omit for all)"
            )
    out: list[Check] = []
    for stat in DURATION_STATS:
        if stat in item:
            try:
                limit = parse_duration(item[stat])
            except QueryError as exc:
                raise QueryError(f"{stat}: {exc}") from None
            out.append(Check(i, "metric", metric, path, stat, "<=", limit))
    if "min_n" in item:
        out.append(Check(i, "metric", metric, path, "n", ">=", _count(item, "min_n")))
    if "max_incomplete" in item:
        out.append(Check(i, "metric", metric, path, "incomplete", "<=", _count(item, "max_incomplete")))
    if not out:
        raise QueryError(f"no threshold (give one of {', '.join(DURATION_STATS)}, min_n, max_incomplete)")
    return out


def _hit_item(i: int, item: Mapping[str, Any]) -> list[Check]:
    _no_unknown(item, {"hit_rate", "min", "max"})
    which = str(item["hit_rate"])
    if which not in HIT_RATES:
        raise QueryError(f"unknown hit_rate {which!r} (known: {', '.join(HIT_RATES)})")
    out = [
        Check(i, "hit_rate", HIT_RATES[which], which, "rate", op, _ratio(item, key))
        for key, op in (("min", ">="), ("max", "<="))
        if key in item
    ]
    if not out:
        raise QueryError("hit_rate needs 'min' and/or 'max'")
    return out


def _no_unknown(item: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(str(k) for k in item if k not in allowed)
    if extra:
        raise QueryError(f"unknown key {extra[0]!r} (allowed: {', '.join(sorted(allowed))})")


def _count(item: Mapping[str, Any], key: str) -> float:
    v = item[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise QueryError(f"{key}: must be a whole number >= 0, not {brief(v)}")
    try:
        return finite_float(v)
    except ValueError:  # beyond float range
        raise QueryError(f"{key}: {brief(v)} is too large") from None


def _ratio(item: Mapping[str, Any], key: str) -> float:
    v = item[key]
    try:
        if isinstance(v, str) and v.strip().endswith("%"):
            r = float(v.strip()[:-1]) / 100
        elif isinstance(v, bool):
            raise ValueError
        else:
            r = float(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: float() of a huge int
        raise QueryError(f"{key}: not a ratio: {brief(v)} (use 0.5 or '50%')") from None
    if not 0 <= r <= 1:
        raise QueryError(f"{key}: ratio {brief(v)} is outside 0..1")
    return r


def evaluate(checks: list[Check], report: Report) -> list[Verdict]:
    """Each check against the report."""
    out: list[Verdict] = []
    for c in checks:
        value: float | None
        lo = hi = None
        if c.kind == "hit_rate":
            value = getattr(report.hit_rates, c.path or "")
        else:
            row = merged(report, c.subject, c.path)
            value = float(getattr(row, c.stat)) if getattr(row, c.stat) is not None else None
            if value is not None and c.stat in ("p50", "p90", "p95", "p99"):
                lo, hi = row.interval(int(c.stat[1:]))
        if value is None:
            status = NO_DATA
        else:
            status = PASS if _holds(c.op, value, c.threshold) else FAIL
        certain = None
        if value is not None and lo is not None and hi is not None:
            sides = {_holds(c.op, x, c.threshold) for x in (lo, hi, value)}
            certain = len(sides) == 1
        out.append(Verdict(**vars(c), value=value, status=status, value_lo=lo, value_hi=hi, certain=certain))
    return out


def _holds(op: str, value: float, threshold: float) -> bool:
    return value <= threshold if op == "<=" else value >= threshold
