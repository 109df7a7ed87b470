"""Coverage-guided fuzzing of the launcher-log parser (``fma_otel.sources.launcher_log``).

    python fuzz/fuzz_launcher.py /tmp/fma-fuzz/launcher-corpus -max_total_time=300

Why: the launcher log mixes Python logging, uvicorn access lines, tracebacks and (when
containers are concatenated) other formats; none of that may raise, and every physical line
must land in exactly one of understood/skipped.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (puts the repo on sys.path)
import atheris

with atheris.instrument_imports():
    from fma_otel.facts import launcher_fact
    from fma_otel.sources.launcher_log import (
        LauncherParseError,
        accepted_create_id,
        iter_launcher_log,
        parse_launcher_line,
        put_instance_id,
    )
    from fma_otel.sources.records import SourceStats


def test_one_input(data: bytes) -> None:
    lines = data.splitlines(keepends=True)
    st = SourceStats("fuzz")
    for rec in iter_launcher_log(iter(lines), st):
        accepted_create_id(rec)
        put_instance_id(rec)
        launcher_fact("l", rec)
    _common.check_accounting(st, "iter_launcher_log")
    if st.read != len(lines):
        raise _common.InvariantBroken(f"read {st.read} of {len(lines)} lines")
    for line in lines[:8]:
        try:
            parse_launcher_line(line.decode("utf-8", "replace").rstrip("\r\n"))
        except LauncherParseError:
            pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
