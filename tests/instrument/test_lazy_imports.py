"""``instrument_all()`` wraps ``httpx`` and the ``kubernetes`` client when the host imports
them, and does not import them itself.

Why: a launcher that uses neither grew by ~36 MB from importing them for the wrappers, and
``fork()`` of each vLLM instance takes longer the bigger the process (+3 to +6 ms a create
with ``import fma_otel.auto``).  Run in fresh interpreters: this one has both imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys, wrapt
import fma_otel.instrument
fma_otel.instrument.instrument_all()
def wrapped():
    import httpx, kubernetes.client.rest as rest
    return (isinstance(vars(httpx.Client)["send"], wrapt.FunctionWrapper),
            isinstance(vars(httpx.AsyncClient)["send"], wrapt.FunctionWrapper),
            isinstance(vars(rest.RESTClientObject)["request"], wrapt.FunctionWrapper))
"""


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_TRACES_EXPORTER"] = "none"
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [sys.executable, "-c", PRELUDE + code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_instrument_imports_neither_httpx_nor_the_kubernetes_client():
    assert _run("print('httpx' in sys.modules, 'kubernetes' in sys.modules)") == "False False"


def test_they_are_wrapped_when_the_host_imports_them():
    assert _run("print(wrapped())") == "(True, True, True)"


@pytest.mark.parametrize("again", [False, True], ids=["off", "off-then-on"])
def test_uninstrument_before_the_import_leaves_them_unwrapped_or_wrapped_once(again: bool):
    code = "fma_otel.instrument.uninstrument_all()\n"
    code += ("fma_otel.instrument.instrument_all()\n" if again else "") + "print(wrapped())"
    assert _run(code) == ("(True, True, True)" if again else "(False, False, False)")


def test_uninstrument_after_the_import_unwraps():
    assert (
        _run("wrapped(); fma_otel.instrument.uninstrument_all(); print(wrapped())") == "(False, False, False)"
    )


def test_fma_otel_instrument_is_a_plain_package() -> None:
    """No callable-module trick: ``fma_otel.instrument`` is an ordinary package whose
    ``instrument_all()`` works again after ``uninstrument_all()``."""
    code = (
        "import types\nprint(type(fma_otel.instrument) is types.ModuleType, callable(fma_otel.instrument))\n"
    )
    code += "fma_otel.instrument.uninstrument_all()\nfma_otel.instrument.instrument_all()\nprint(wrapped())"
    assert _run(code) == "True False\n(True, True, True)"


def test_instrument_all_reads_no_package_metadata() -> None:
    """Versions are checked on the modules themselves: the metadata check would cache the
    whole site-packages listing in the launcher (~0.4 MB more for every fork to copy)."""
    code = (
        "import opentelemetry.instrumentation.instrumentor as bi\n"
        "calls = []\n"
        "bi.get_dependency_conflicts = lambda deps: calls.append(deps)\n"
        "fma_otel.instrument.uninstrument_all(); fma_otel.instrument.instrument_all()\n"
        "print(len(calls), wrapped())"
    )
    assert _run(code) == "0 (True, True, True)"
