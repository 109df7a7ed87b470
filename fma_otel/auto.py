"""``import fma_otel.auto``: the one-line way to trace the launcher (or a DPC-side tool).

Put it at the top of ``launcher.py`` (before anything else is imported, so that the SDK
exists before the vLLM children are forked).  It configures the OpenTelemetry SDK from the
standard ``OTEL_*`` variables if nobody has (service name default ``fma-launcher``), then
calls ``fma_otel.instrument()``.  With ``OTEL_SDK_DISABLED=true`` it does nothing.  It never
raises: a tracing problem must not stop the launcher from starting.
"""

from __future__ import annotations


def _setup() -> None:
    try:
        from fma_otel.instrument import instrument
        from fma_otel.instrument._common import sdk_disabled

        if sdk_disabled():
            return
        instrument()
    except Exception:  # noqa: BLE001 - do no harm
        import logging

        logging.getLogger("fma_otel.instrument").warning(
            "fma-otel: auto-instrumentation failed", exc_info=True
        )


_setup()
