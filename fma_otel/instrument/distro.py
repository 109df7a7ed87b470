"""``FmaDistro``: the ``opentelemetry_distro`` entry point of fma-otel (named
``fma_otel.instrument.configurator:FmaDistro``; see that module for why both exist).

A module of its own because ``opentelemetry.instrumentation.distro`` imports
``BaseInstrumentor`` and with it ``packaging``: ``import fma_otel.auto`` uses the
configurator without loading this.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro


class FmaDistro(BaseDistro):  # type: ignore[misc]
    """The distro ``opentelemetry-instrument`` loads: it sets no defaults of its own (the
    exporter protocol rule lives in ``fma_otel.otlp_env``) and loads instrumentors the
    standard way."""

    def _configure(self, **kwargs: Any) -> None:
        return None
