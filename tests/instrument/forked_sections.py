"""Run several snippets in one fresh interpreter, each in a forked copy of it.

Why: the import tests need a fresh interpreter (this one has everything imported), and
starting one per test cost about a second each.  One subprocess runs the shared prelude
once, then forks a child per snippet: every snippet sees the state just after the prelude,
as if it had an interpreter of its own, and none sees another's imports or patches.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_DRIVER = """
import os as _os, sys as _sys, traceback as _tb
for _name, _code in {sections!r}.items():
    _sys.stdout.flush(); _sys.stderr.flush()
    print("@@begin " + _name, flush=True)
    _pid = _os.fork()
    if _pid == 0:
        _rc = 0
        try:
            exec(compile(_code, _name, "exec"), dict(globals()))
        except BaseException:
            _tb.print_exc(); _rc = 1
        _sys.stdout.flush(); _sys.stderr.flush()
        _os._exit(_rc)
    _, _status = _os.waitpid(_pid, 0)
    print("@@end " + _name + " " + str(_os.waitstatus_to_exitcode(_status)), flush=True)
"""


class Sections:
    """The output of each snippet (``out[name]``), or an assertion naming its failure."""

    def __init__(self, stdout: str, stderr: str) -> None:
        self.stderr = stderr
        self._out: dict[str, str] = {}
        self._rc: dict[str, int] = {}
        name: str | None = None
        lines: list[str] = []
        for line in stdout.splitlines():
            if line.startswith("@@begin "):
                name, lines = line[len("@@begin ") :], []
            elif line.startswith("@@end ") and name is not None:
                self._rc[name] = int(line.rsplit(" ", 1)[1])
                self._out[name] = "\n".join(lines).strip()
                name = None
            else:
                lines.append(line)

    def __getitem__(self, name: str) -> str:
        assert self._rc.get(name) == 0, f"section {name!r} failed: {self.stderr}"
        return self._out[name]


def run_sections(prelude: str, sections: dict[str, str], timeout: float = 120) -> Sections:
    """Run ``prelude`` once in a fresh interpreter, then each section in a fork of it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TRACES_EXPORTER"] = "none"
    env["PYTHONPATH"] = str(ROOT)
    code = prelude + _DRIVER.format(sections=sections)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert out.returncode == 0, out.stderr
    return Sections(out.stdout, out.stderr)


class SectionSet:
    """A test module's snippets, registered by name as the module is read (``add``) and
    run together once (``run``, from a module-scoped fixture)."""

    def __init__(self, prelude: str) -> None:
        self.prelude = prelude
        self.sections: dict[str, str] = {}

    def add(self, name: str, code: str) -> str:
        self.sections[name] = code
        return name

    def run(self) -> Sections:
        return run_sections(self.prelude, self.sections)
