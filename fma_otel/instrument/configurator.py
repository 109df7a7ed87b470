"""The ``opentelemetry_configurator`` and ``opentelemetry_distro`` entry points of fma-otel.

Why: the SDK must be configured exactly once, before any span is made, and with the
``DerivedIdGenerator`` installed when the ``TracerProvider`` is built (the only public way
to give spans chosen ids).  ``opentelemetry-instrument`` does that through these entry
points - it loads a distro, then a configurator, then the instrumentors - as
opentelemetry-python-contrib's ``opentelemetry-distro`` does; ``import fma_otel.auto`` calls
the same configurator.  If another configurator is installed too, ``OTEL_PYTHON_CONFIGURATOR
=fma_otel`` and ``OTEL_PYTHON_DISTRO=fma_otel`` choose these.

``FmaDistro`` lives in ``fma_otel.instrument.distro`` and is imported only when asked for:
``BaseDistro``'s module imports ``BaseInstrumentor``, which ``import fma_otel.auto`` keeps out
of the launcher (``fma_otel.instrument.base_instrumentors`` says why).
"""

from __future__ import annotations

from typing import Any

from fma_otel import model
from fma_otel.instrument._common import lazy_attribute


class FmaConfigurator:
    """Configure the SDK from the standard ``OTEL_*`` variables, unless already done."""

    def configure(self, **kwargs: Any) -> None:
        from fma_otel.instrument._sdk import ensure_sdk

        ensure_sdk(default_service=kwargs.get("default_service") or model.SERVICE_LAUNCHER)


#: ``FmaDistro``, the distro entry point's name, imported from its module on first use.
__getattr__ = lazy_attribute(__name__, "FmaDistro", "fma_otel.instrument.distro")
