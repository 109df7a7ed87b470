"""``import fma_otel.auto`` installs the wrappers without ``BaseInstrumentor``, ``BaseDistro``
or ``packaging``, and the instrumentors still drive the very same wrappers.

Why: those modules (``packaging`` and the semantic-convention modules
``opentelemetry.instrumentation.instrumentor`` imports) are about 1 MiB of the launcher,
and ``fork()`` of every vLLM instance copies the page tables of all of it.  Run in fresh
interpreters, as a launcher starts: this one has them all imported (one interpreter for
the module, each test in a fork of it just after the prelude: ``forked_sections``).
"""

from __future__ import annotations

import sys

import pytest

from fma_otel.instrument import _common as c

from .forked_sections import Sections, SectionSet

#: What a launcher imports, then the wrappers; ``wrapped()``: are the launcher's app and
#: the DPC-side libraries wrapped (each once)?
PRELUDE = """
import sys, fastapi, wrapt
import fma_otel.auto
def wrapped():
    import httpx, kubernetes.client.rest as rest
    return (isinstance(vars(fastapi.FastAPI)["build_middleware_stack"], wrapt.FunctionWrapper),
            isinstance(vars(httpx.Client)["send"], wrapt.FunctionWrapper),
            isinstance(vars(rest.RESTClientObject)["request"], wrapt.FunctionWrapper))
def twice():
    import httpx
    inner = vars(httpx.Client)["send"].__wrapped__
    return isinstance(inner, wrapt.FunctionWrapper)
"""

HEAVY = (
    "opentelemetry.instrumentation.instrumentor",
    "opentelemetry.instrumentation.distro",
    "opentelemetry.instrumentation._semconv",
    "packaging",
)


#: Each test's snippet, run after ``PRELUDE`` in a fork of one fresh interpreter.
SNIPPETS = SectionSet(PRELUDE)
_section = SNIPPETS.add


@pytest.fixture(scope="module")
def ran() -> Sections:
    return SNIPPETS.run()


AUTO = _section(
    "auto",
    (
        "from fma_otel.instrument.launcher import LauncherWrappers\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules], LauncherWrappers().installed,"
        " isinstance(vars(fastapi.FastAPI)['build_middleware_stack'], wrapt.FunctionWrapper))"
    ),
)


@pytest.mark.slow
def test_auto_wraps_the_launcher_without_base_instrumentor_or_packaging(ran: Sections) -> None:
    assert ran[AUTO] == "[] True True"


TOGGLE = _section(
    "toggle",
    (
        "import fma_otel.instrument as fi\n"
        "fi.uninstrument_all(); print(wrapped())\n"
        "fi.instrument_all(); print(wrapped(), twice())\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    ),
)


@pytest.mark.slow
def test_instrument_all_and_uninstrument_all_stay_without_base_instrumentor(ran: Sections) -> None:
    assert ran[TOGGLE].splitlines() == ["(False, False, False)", "(True, True, True) False", "[]"]


INSTRUMENTORS = _section(
    "instrumentors",
    (
        "from fma_otel.instrument.launcher import LauncherInstrumentor\n"
        "from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor\n"
        "from opentelemetry.instrumentation.instrumentor import BaseInstrumentor\n"
        "import fma_otel.instrument as fi\n"
        "insts = fi.instrumentors()\n"
        "print(all(isinstance(i, BaseInstrumentor) for i in insts), [i.is_instrumented_by_opentelemetry for i in insts])\n"
        "print(wrapped())\n"
        "LauncherInstrumentor().uninstrument(); HttpxDpcInstrumentor().uninstrument()\n"
        "print(wrapped(), [i.is_instrumented_by_opentelemetry for i in insts])\n"
        "fi.instrument_all(); print(wrapped(), twice())\n"
        "fi.uninstrument_all(); print(wrapped())\n"
        "HttpxDpcInstrumentor().instrument(skip_dep_check=True); fi.instrument_all(); print(wrapped(), twice())\n"
    ),
)


@pytest.mark.slow
def test_the_instrumentors_see_and_remove_what_auto_installed(ran: Sections) -> None:
    """An instrumentor imported after ``fma_otel.auto`` reports the wrappers on, removes
    them, and puts them back once; ``instrument_all`` then goes through it."""
    assert ran[INSTRUMENTORS].splitlines() == [
        "True [True, True, True]",
        "(True, True, True)",
        "(False, False, True) [False, False, True]",
        "(True, True, True) False",
        "(False, False, False)",
        "(True, True, True) False",
    ]


ENTRY_POINTS = _section(
    "entry_points",
    (
        "import importlib\n"
        "from opentelemetry.instrumentation.instrumentor import BaseInstrumentor\n"
        "from opentelemetry.instrumentation.distro import BaseDistro\n"
        "names = ['launcher:LauncherInstrumentor', 'httpx_dpc:HttpxDpcInstrumentor',"
        " 'k8s_client:KubernetesClientInstrumentor']\n"
        "got = [getattr(importlib.import_module('fma_otel.instrument.' + n.split(':')[0]), n.split(':')[1])"
        " for n in names]\n"
        "conf = importlib.import_module('fma_otel.instrument.configurator')\n"
        "print(all(issubclass(g, BaseInstrumentor) for g in got), issubclass(conf.FmaDistro, BaseDistro),"
        " hasattr(conf, 'FmaConfigurator'))\n"
        "try:\n    conf.Nothing\nexcept AttributeError as e:\n    print('AttributeError', e)\n"
    ),
)


@pytest.mark.slow
def test_the_entry_point_names_resolve(ran: Sections) -> None:
    """``pyproject.toml``'s entry points name the classes on the wrapper modules and the
    configurator: they load (only then importing ``BaseInstrumentor``/``BaseDistro``)."""
    assert ran[ENTRY_POINTS].splitlines() == [
        "True True True",
        "AttributeError module 'fma_otel.instrument.configurator' has no attribute 'Nothing'",
    ]


class _Needs:
    def __init__(self, *specs: str) -> None:
        self.specs = specs

    def instrumentation_dependencies(self) -> tuple[str, ...]:
        return self.specs


@pytest.mark.parametrize(
    ("spec", "version", "met"),
    [
        ("fastapi >= 0.100", "0.99.1", False),
        ("fastapi >= 0.100", "0.100", True),
        ("fastapi >= 0.100", "0.100.0", True),
        ("fastapi >= 0.100", "0.115.6", True),
        ("fastapi >= 0.100", "1", True),
        ("fastapi>=0.100.1", "0.100", False),
        ("fastapi >= 0.100", "0.100.0rc1", True),  # a pre-release counts as its release
        ("fastapi >= 0.100", "0.101.dev0", True),
        ("fastapi >= 0.100", "0.99.dev0", False),
        ("other >= 5", "0.1", True),  # not a requirement on this module
    ],
)
def test_dependency_met_compares_the_release(
    monkeypatch: pytest.MonkeyPatch, spec: str, version: str, met: bool
) -> None:
    """``name >= X.Y`` against the release the module's ``__version__`` starts with."""
    import types

    fake = types.ModuleType("fastapi")
    fake.__version__ = version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fastapi", fake)
    assert c.dependency_met(_Needs(spec), "fastapi") is met
