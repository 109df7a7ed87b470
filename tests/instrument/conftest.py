"""Fixtures of the wrapper tests: an in-memory SDK, the fake launcher, a pod lookup."""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from fma_otel.instrument.ids import DerivedIdGenerator
from fma_otel.instrument.launcher import LauncherInstrumentor
from fma_otel.instrument.podinfo import PodInfo

FAKE_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "fake_launcher"


class Tracing:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(id_generator=DerivedIdGenerator())
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self, name: str | None = None) -> list[Any]:
        out = list(self.exporter.get_finished_spans())
        return [s for s in out if name is None or s.name == name]


@pytest.fixture
def tracing() -> Tracing:
    return Tracing()


def load_fake_launcher() -> ModuleType:
    """A fresh copy of the fake launcher imported as ``launcher`` (like FMA's own tests)."""
    sys.modules.pop("launcher", None)
    if str(FAKE_DIR) not in sys.path:
        sys.path.insert(0, str(FAKE_DIR))
    return importlib.import_module("launcher")


@pytest.fixture
def fake_launcher() -> Iterator[ModuleType]:
    mod = load_fake_launcher()
    yield mod
    try:
        mod.vllm_manager.stop_all_instances(timeout=2)
    finally:
        sys.modules.pop("launcher", None)


def wait_until(pred: Any, timeout: float = 5.0) -> bool:
    """Poll ``pred`` every 20 ms until it is true or ``timeout`` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())


def no_pod() -> PodInfo:
    return PodInfo(env={})


@pytest.fixture
def instrumented(tracing: Tracing, fake_launcher: ModuleType) -> Iterator[tuple[Tracing, ModuleType]]:
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    yield tracing, fake_launcher
    inst.uninstrument()
