"""Configure an OpenTelemetry SDK from the standard ``OTEL_*`` variables when nobody has.

Why: ``opentelemetry-instrument`` only configures the SDK through a *distro*
(``opentelemetry-distro``), which the launcher image does not have; ``import
fma_otel.auto`` has no configurator at all.  Without this the wrappers would produce
non-recording spans.  An SDK that someone else configured is always left as it is.

Do-no-harm choices: a ``BatchSpanProcessor`` (export never blocks a request; its queue
is bounded by ``OTEL_BSP_MAX_QUEUE_SIZE``), and nothing at all when
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.

The OTLP protocol defaults to ``http/protobuf`` (the OpenTelemetry specification's
default), not to ``grpc`` as the Python SDK's own exporter choice does.  Why: the launcher
forks every vLLM instance, and once a gRPC channel exists ``grpcio``'s fork handlers stop
and restart its threads around each ``fork()``.  Measured on the fake launcher that
added about 1 ms to every fork on top of gRPC's memory (``os.fork()`` median over
bare: +2.0 ms with the gRPC exporter, +1.1 ms with ``GRPC_ENABLE_FORK_SUPPORT=false``,
+0.7 ms with the HTTP one; ``benchmarks/bench_fork.py``).  ``grpc`` stays one variable
away; an endpoint on port 4317 (OTLP/gRPC's) with no protocol set gets a warning instead
of silently failing exports.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit

from opentelemetry import trace

from fma_otel import model
from fma_otel.instrument._common import logger, sdk_disabled

_lock = threading.Lock()


def sdk_configured() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


DEFAULT_PROTOCOL = "http/protobuf"
GRPC_PORT = 4317


def otlp_protocol(env: Mapping[str, str]) -> str:
    """The OTLP protocol the wrappers export with: the ``OTEL_*`` setting, else HTTP."""
    return (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip() or DEFAULT_PROTOCOL


def grpc_port_warning(env: Mapping[str, str]) -> str | None:
    """A warning when the endpoint is OTLP/gRPC's port but no protocol was chosen.

    The Python SDK defaults to gRPC, so ``OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4317`` is a
    common setting; with our HTTP default every export would fail.  We warn rather than
    switch on the port number: the protocol is chosen by the variables, never guessed.
    """
    if (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip():
        return None
    endpoint = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
    ).strip()
    try:
        port = urlsplit(endpoint if "//" in endpoint else "//" + endpoint).port
    except ValueError:
        return None
    if port != GRPC_PORT:
        return None
    return (
        f"fma-otel: OTLP endpoint {endpoint} is on port {GRPC_PORT} (OTLP/gRPC) but no protocol is "
        f"set, and the wrappers default to {DEFAULT_PROTOCOL}: set OTEL_EXPORTER_OTLP_PROTOCOL=grpc, "
        "or use the collector's HTTP port 4318"
    )


def _exporter(name: str):  # type: ignore[no-untyped-def]
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    warning = grpc_port_warning(os.environ)
    if warning:
        logger.warning(warning)
    protocol = otlp_protocol(os.environ)
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
