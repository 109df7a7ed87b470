"""``import fma_otel.auto``: the one-line way to trace the launcher (or a DPC-side tool).

Put it at the top of ``launcher.py`` (before anything else is imported, so that the SDK
exists before the vLLM children are forked).  It runs fma-otel's configurator (the SDK
from the standard ``OTEL_*`` variables if nobody configured one; service name default
``fma-launcher``), then ``fma_otel.instrument.instrument_all()``.  With
``OTEL_SDK_DISABLED=true`` it does nothing.  It never raises: a tracing problem must not
stop the launcher from starting.
"""

from __future__ import annotations


def _setup() -> None:
    try:
        from fma_otel.instrument import instrument_all
        from fma_otel.instrument._common import sdk_disabled
        from fma_otel.instrument.configurator import FmaConfigurator

        if sdk_disabled():
            return
        FmaConfigurator().configure()
        instrument_all()
    except Exception:  # noqa: BLE001 - do no harm
        import logging

        logging.getLogger("fma_otel.instrument").warning(
            "fma-otel: auto-instrumentation failed", exc_info=True
        )


_setup()
