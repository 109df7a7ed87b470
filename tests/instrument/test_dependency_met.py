"""``dependency_met``: an instrumentor's version requirement, checked on the imported module."""

from __future__ import annotations

import sys
import types

import pytest

from fma_otel.instrument import _common as c
from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor
from fma_otel.instrument.launcher import LauncherInstrumentor


@pytest.mark.parametrize(
    ("version", "met"), [("0.22.9", False), ("0.23", True), ("1.0.0rc1", True), (None, True)]
)
def test_the_module_s_version_decides(
    monkeypatch: pytest.MonkeyPatch, version: str | None, met: bool
) -> None:
    fake = types.ModuleType("httpx")
    if version is not None:
        fake.__version__ = version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx", fake)
    assert c.dependency_met(HttpxDpcInstrumentor(), "httpx") is met


def test_a_module_not_imported_or_not_required_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "kubernetes", raising=False)
    assert c.dependency_met(HttpxDpcInstrumentor(), "kubernetes")
    assert c.dependency_met(LauncherInstrumentor(), "httpx")  # not one of its requirements


def test_a_launcher_on_a_too_old_fastapi_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import fastapi
    import starlette.applications
    import wrapt

    inst = LauncherInstrumentor()
    if inst.is_instrumented_by_opentelemetry:
        pytest.skip("another test left the launcher instrumented")
    monkeypatch.setattr(fastapi, "__version__", "0.99.0")
    try:
        inst.instrument(skip_dep_check=True)
        assert not getattr(inst, "_on", False)
        for cls in (fastapi.FastAPI, starlette.applications.Starlette):
            assert not isinstance(vars(cls).get("build_middleware_stack"), wrapt.FunctionWrapper)
    finally:
        inst.uninstrument()


@pytest.mark.parametrize(("version", "met"), [("0.23.0.post1", True), ("0.22+local", False), ("dev", True)])
def test_suffixes_count_as_their_release(monkeypatch: pytest.MonkeyPatch, version: str, met: bool) -> None:
    fake = types.ModuleType("httpx")
    fake.__version__ = version  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx", fake)
    assert c.dependency_met(HttpxDpcInstrumentor(), "httpx") is met


def test_every_requirement_is_a_plain_at_least() -> None:
    """``dependency_met`` reads only ``name >= X.Y``: every wrapper must state that form."""
    from fma_otel.instrument import wrappers

    specs = [s for w in wrappers() for s in w.instrumentation_dependencies()]
    assert len(specs) == 3
    assert all(c._AT_LEAST.match(s) for s in specs), specs


def test_another_form_of_requirement_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("httpx")
    fake.__version__ = "0.28.1"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "httpx", fake)

    class Odd:
        def instrumentation_dependencies(self) -> tuple[str, ...]:
            return ("httpx ~= 0.23",)

    with pytest.raises(ValueError, match="not a 'name >= X.Y' requirement"):
        c.dependency_met(Odd(), "httpx")
