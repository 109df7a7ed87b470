"""Configure an OpenTelemetry SDK from the standard ``OTEL_*`` variables when nobody has.

Why: ``opentelemetry-instrument`` only configures the SDK through a *distro*
(``opentelemetry-distro``), which the launcher image does not have; ``import
fma_otel.auto`` has no configurator at all.  Without this the wrappers would produce
non-recording spans.  An SDK that someone else configured is always left as it is.

Do-no-harm choices: a ``BatchSpanProcessor`` (export never blocks a request; its queue
is bounded by ``OTEL_BSP_MAX_QUEUE_SIZE``), and nothing at all when
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.
"""

from __future__ import annotations

import os
import threading

from opentelemetry import trace

from fma_otel import model
from fma_otel.instrument._common import logger, sdk_disabled

_lock = threading.Lock()


def sdk_configured() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _exporter(name: str):  # type: ignore[no-untyped-def]
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    ).strip()
    if protocol.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    return GrpcExporter()


def ensure_sdk(default_service: str = model.SERVICE_LAUNCHER) -> bool:
    """Install a global ``TracerProvider`` from ``OTEL_*`` if none is set; True if we did."""
    if sdk_disabled():
        return False
    with _lock:
        if sdk_configured():
            return False
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            names = [
                n.strip().lower()
                for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
                if n.strip()
            ]
            attrs = {"service.namespace": model.SERVICE_NAMESPACE}
            if not os.environ.get("OTEL_SERVICE_NAME") and "service.name=" not in os.environ.get(
                "OTEL_RESOURCE_ATTRIBUTES", ""
            ):
                attrs["service.name"] = default_service
            provider = TracerProvider(resource=Resource.create(attrs))
            for name in names:
                if name == "none":
                    continue
                provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
            trace.set_tracer_provider(provider)
            return True
        except Exception:  # noqa: BLE001 - do no harm: run untraced
            logger.warning("fma-otel: could not configure the OpenTelemetry SDK", exc_info=True)
            return False
