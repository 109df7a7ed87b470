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
