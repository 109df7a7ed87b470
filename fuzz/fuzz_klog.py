"""Coverage-guided fuzzing of the klog parser (``fma_otel.sources.klog``) with atheris.

    python fuzz/fuzz_klog.py /tmp/fma-fuzz/klog-corpus -max_total_time=300

Why several entry points: ``iter_klog`` with the bridge's prefilter takes a different, inlined
fast path from the full parse, so a line can break one and not the other.  Every physical
line must be counted exactly once and no exception other than ``KlogParseError`` (from
``parse_klog_line``, by contract) may escape.  The one-regex fast path for plain lines is
checked against the full line parser on every line it answers, and reading with the
bridge's ``drop=failed_poll`` must keep the same rows and counts as reading without it.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (puts the repo on sys.path)
import atheris

with atheris.instrument_imports():
    from fma_otel.correlate import dpc_row, failed_poll
    from fma_otel.facts import WANTED_MESSAGES
    from fma_otel.sources import klog
    from fma_otel.sources.klog import KlogParseError, iter_klog, parse_klog_line
    from fma_otel.sources.records import SourceStats

CONTAINS = {"HTTP call done": ['purpose="create_instance"', 'purpose="wake"', 'purpose="query_sleeping"']}


def test_one_input(data: bytes) -> None:
    lines = data.splitlines(keepends=True)
    for kw in ({}, {"messages": WANTED_MESSAGES}, {"messages": WANTED_MESSAGES, "contains": CONTAINS}):
        st = SourceStats("fuzz")
        for rec in iter_klog(iter(lines), st, **kw):
            if not isinstance(rec.msg, str):
                raise _common.InvariantBroken("msg is not a str")
        _common.check_accounting(st, f"iter_klog {sorted(kw)}")
        if st.read != len(lines):
            raise _common.InvariantBroken(f"read {st.read} of {len(lines)} lines")
    kept = []
    for drop in (None, failed_poll):
        st = SourceStats("fuzz")
        rows = [r for r in iter_klog(iter(lines), st, WANTED_MESSAGES, CONTAINS, drop=drop) if dpc_row(r)]
        kept.append((rows, st.read, st.understood, st.skipped, st.skipped_lines))
    if kept[0] != kept[1]:
        raise _common.InvariantBroken("dropping failed polls changed what the bridge keeps")
    for line in lines[:8]:
        try:
            parse_klog_line(line)
        except KlogParseError:
            pass
        _check_fast_path(line.decode("utf-8", "replace").rstrip("\r\n"))


def _check_fast_path(s: str) -> None:
    """The one-regex fast path answers only where it agrees with the full line parser."""
    fast = klog._simple_record(1, None, s)
    if fast is None:
        return
    try:
        full = klog._Parsed(1, None, s)
    except KlogParseError as e:
        raise _common.InvariantBroken(
            f"fast path parsed a line the parser skips ({e.reason}): {s!r}"
        ) from None
    if full.block_key is not None or full.record() != fast:
        raise _common.InvariantBroken(f"fast path differs from the parser on {s!r}")


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
