"""``instrument_all``/``uninstrument_all``: which objects they drive, and that a part that
raises is logged and skipped while the others are still driven (do no harm)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import fma_otel.instrument as fi


class _Part:
    def __init__(self, fail: bool, on: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.is_instrumented_by_opentelemetry = on

    def _call(self, what: str, **kwargs: Any) -> None:
        self.calls.append((what, kwargs))
        if self.fail:
            raise RuntimeError(what)

    def install(self, **kwargs: Any) -> None:
        self._call("install", **kwargs)

    def uninstall(self) -> None:
        self._call("uninstall")

    def instrument(self, **kwargs: Any) -> None:
        self._call("instrument", **kwargs)

    def uninstrument(self) -> None:
        self._call("uninstrument")


class Broken(_Part):
    pass


def test_wrappers_are_installed_directly_without_instrumentor_only_kwargs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad, good = Broken(fail=True), _Part(fail=False)
    monkeypatch.setattr(fi, "_INSTRUMENTORS", "no.such.module")
    monkeypatch.setattr(fi, "wrappers", lambda: [bad, good])
    with caplog.at_level(logging.WARNING):
        fi.instrument_all(raise_exception_on_conflict=True, tracer_provider="tp")
        fi.uninstrument_all()
    assert bad.calls == [("install", {"tracer_provider": "tp"}), ("uninstall", {})]
    assert good.calls == bad.calls
    assert [r.getMessage() for r in caplog.records] == [
        "fma-otel: Broken failed to instrument",
        "fma-otel: Broken failed to uninstrument",
    ]


def test_instrumentors_are_driven_when_the_metadata_check_is_asked_for(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad, off, on = Broken(fail=True), _Part(fail=False), _Part(fail=False, on=True)
    monkeypatch.setattr(fi, "_INSTRUMENTORS", "no.such.module")
    monkeypatch.setattr(fi, "instrumentors", lambda: [bad, off, on])
    with caplog.at_level(logging.WARNING):
        fi.instrument_all(skip_dep_check=False)
    assert bad.calls == off.calls == [("instrument", {"skip_dep_check": False})]
    assert on.calls == []  # already on: not instrumented twice
    assert [r.getMessage() for r in caplog.records] == ["fma-otel: Broken failed to instrument"]


def test_instrumentors_are_uninstrumented_once_imported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bad, off, on = Broken(fail=True, on=True), _Part(fail=False), _Part(fail=False, on=True)
    monkeypatch.setattr(fi, "_INSTRUMENTORS", "sys")  # "already imported"
    monkeypatch.setattr(fi, "instrumentors", lambda: [bad, off, on])
    with caplog.at_level(logging.WARNING):
        fi.uninstrument_all()
    assert bad.calls == on.calls == [("uninstrument", {})]
    assert off.calls == []  # not on: nothing to remove
    assert [r.getMessage() for r in caplog.records] == ["fma-otel: Broken failed to uninstrument"]
