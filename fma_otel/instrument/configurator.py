"""The ``opentelemetry_configurator`` and ``opentelemetry_distro`` entry points of fma-otel.

Why: the SDK must be configured exactly once, before any span is made, and with the
``DerivedIdGenerator`` installed when the ``TracerProvider`` is built (the only public way
to give spans chosen ids).  ``opentelemetry-instrument`` does that through these entry
points - it loads a distro, then a configurator, then the instrumentors - as
opentelemetry-python-contrib's ``opentelemetry-distro`` does; ``import fma_otel.auto`` calls
the same configurator.  If another configurator is installed too, ``OTEL_PYTHON_CONFIGURATOR
=fma_otel`` and ``OTEL_PYTHON_DISTRO=fma_otel`` choose these.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.instrumentation.distro import BaseDistro

from fma_otel import model


class FmaConfigurator:
    """Configure the SDK from the standard ``OTEL_*`` variables, unless already done."""

    def configure(self, **kwargs: Any) -> None:
        from fma_otel.instrument._sdk import ensure_sdk

        ensure_sdk(default_service=kwargs.get("default_service") or model.SERVICE_LAUNCHER)


class FmaDistro(BaseDistro):  # type: ignore[misc]
    """The distro ``opentelemetry-instrument`` loads: it sets no defaults of its own (the
    exporter protocol rule lives in ``_sdk.otlp_protocol``) and loads instrumentors the
    standard way."""

    def _configure(self, **kwargs: Any) -> None:
        return None
