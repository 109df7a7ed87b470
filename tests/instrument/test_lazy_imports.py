"""``instrument_all()`` wraps ``httpx`` and the ``kubernetes`` client when the host imports
them, and does not import them itself.

Why: a launcher that uses neither grew by ~36 MB from importing them for the wrappers, and
``fork()`` of each vLLM instance takes longer the bigger the process (+3 to +6 ms a create
with ``import fma_otel.auto``).  Run in fresh interpreters: this one has both imported (one interpreter for the module,
each test in a fork of it just after the prelude: ``forked_sections``).
"""

from __future__ import annotations

import pytest

from .forked_sections import Sections, SectionSet

pytestmark = pytest.mark.slow

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


#: Each test's snippet, run after ``PRELUDE`` in a fork of one fresh interpreter.
SNIPPETS = SectionSet(PRELUDE)
_section = SNIPPETS.add


@pytest.fixture(scope="module")
def ran() -> Sections:
    return SNIPPETS.run()


NEITHER = _section("neither", "print('httpx' in sys.modules, 'kubernetes' in sys.modules)")
WRAPPED = _section("wrapped", "print(wrapped())")
OFF = _section("off", "fma_otel.instrument.uninstrument_all()\nprint(wrapped())")
OFF_ON = _section(
    "off-then-on",
    "fma_otel.instrument.uninstrument_all()\nfma_otel.instrument.instrument_all()\nprint(wrapped())",
)
AFTER = _section("after", "wrapped(); fma_otel.instrument.uninstrument_all(); print(wrapped())")
PLAIN = _section(
    "plain",
    "import types\nprint(type(fma_otel.instrument) is types.ModuleType, callable(fma_otel.instrument))\n"
    "fma_otel.instrument.uninstrument_all()\nfma_otel.instrument.instrument_all()\nprint(wrapped())",
)
METADATA = _section(
    "metadata",
    "import opentelemetry.instrumentation.instrumentor as bi\n"
    "calls = []\n"
    "bi.get_dependency_conflicts = lambda deps: calls.append(deps)\n"
    "fma_otel.instrument.uninstrument_all(); fma_otel.instrument.instrument_all()\n"
    "print(len(calls), wrapped())",
)


def test_instrument_imports_neither_httpx_nor_the_kubernetes_client(ran: Sections) -> None:
    assert ran[NEITHER] == "False False"


def test_they_are_wrapped_when_the_host_imports_them(ran: Sections) -> None:
    assert ran[WRAPPED] == "(True, True, True)"


@pytest.mark.parametrize("again", [False, True], ids=["off", "off-then-on"])
def test_uninstrument_before_the_import_leaves_them_unwrapped_or_wrapped_once(
    ran: Sections, again: bool
) -> None:
    assert ran[OFF_ON if again else OFF] == ("(True, True, True)" if again else "(False, False, False)")


def test_uninstrument_after_the_import_unwraps(ran: Sections) -> None:
    assert ran[AFTER] == "(False, False, False)"


def test_fma_otel_instrument_is_a_plain_package(ran: Sections) -> None:
    """No callable-module trick: ``fma_otel.instrument`` is an ordinary package whose
    ``instrument_all()`` works again after ``uninstrument_all()``."""
    assert ran[PLAIN] == "True False\n(True, True, True)"


def test_instrument_all_reads_no_package_metadata(ran: Sections) -> None:
    """Versions are checked on the modules themselves: the metadata check would cache the
    whole site-packages listing in the launcher (~0.4 MB more for every fork to copy)."""
    assert ran[METADATA] == "0 (True, True, True)"
