"""Coverage-guided fuzzing of the klog parser (``fma_otel.sources.klog``) with atheris.

    python fuzz/fuzz_klog.py /tmp/fma-fuzz/klog-corpus -max_total_time=300

Why several entry points: ``iter_klog`` with and without the bridge's prefilter, and one
line at a time.  Every physical line must be counted exactly once and no exception other
than ``KlogParseError`` (from ``parse_klog_line``, by contract) may escape.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (puts the repo on sys.path)
import atheris

with atheris.instrument_imports():
    from fma_otel.facts import WANTED_MESSAGES
    from fma_otel.sources.klog import KlogParseError, iter_klog, parse_klog_line
    from fma_otel.sources.records import SourceStats

CONTAINS = {"HTTP call done": ("purpose", ("create_instance", "wake", "query_sleeping"))}


def test_one_input(data: bytes) -> None:
    lines = data.splitlines(keepends=True)
    for kw in ({}, {"messages": WANTED_MESSAGES}, {"messages": WANTED_MESSAGES, "contains": CONTAINS}):
        st = SourceStats("fuzz")
        for rec in iter_klog(iter(lines), st, **kw):
            if not isinstance(rec.msg, str):
                raise _common.InvariantBroken("msg is not a str")
        _common.check_accounting(st, f"iter_klog {sorted(kw)}")
        if st.read != len(lines) + sum(st.notes.values()):
            raise _common.InvariantBroken(f"read {st.read} of {len(lines)} lines")
    for line in lines[:8]:
        try:
            parse_klog_line(line)
        except KlogParseError:
            pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
