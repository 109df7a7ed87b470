"""Configure an OpenTelemetry SDK from the standard ``OTEL_*`` variables when nobody has.

Why: ``opentelemetry-instrument`` configures the SDK only through a configurator entry
point (``opentelemetry-distro`` ships one; the launcher image does not have it).  fma-otel
registers its own (``fma_otel.instrument.configurator``), which calls ``ensure_sdk``; so
does ``import fma_otel.auto``.  An SDK that someone else configured is left as it is.

Do-no-harm choices: a ``BatchSpanProcessor`` (export never blocks a request; its queue
is bounded by ``OTEL_BSP_MAX_QUEUE_SIZE``), and nothing at all when
``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``.

The OTLP protocol defaults to ``http/protobuf`` (the OpenTelemetry specification's
default), not to ``grpc`` as the Python SDK's own exporter choice does.  Why: the launcher
forks every vLLM instance, and once a gRPC channel exists ``grpcio``'s fork handlers stop
and restart its threads around each ``fork()``, which makes every create slower
(``benchmarks/bench_fork.py`` measures it).  ``grpc`` stays one variable away; an endpoint on port 4317 (OTLP/gRPC's) with no protocol set gets a warning instead
of silently failing exports.

What the wrappers log shows no credential: the endpoint without its user part and query,
and an ``OTEL_EXPORTER_OTLP_[TRACES_]HEADERS`` list the exporter cannot parse in one line
naming the variable, while the exporter's own warning at set-up, which quotes the entry (a
bearer token), is kept out of the log; the exporter then sends without that entry, as it
would anyway.  The exporter's own lines about a failed export are left as they are (they
may show the endpoint as configured): filtering every SDK log line of the host process is
not the wrappers' business, so the README says to keep credentials out of the URL.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from opentelemetry import trace

from fma_otel import model, otlp_env
from fma_otel.errtext import safe_url
from fma_otel.instrument._common import logger, sdk_disabled
from fma_otel.instrument.ids import DerivedIdGenerator

_lock = threading.Lock()


def sdk_configured() -> bool:
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def grpc_port_warning(env: Mapping[str, str]) -> str | None:
    """A warning when the endpoint is OTLP/gRPC's port but no protocol was chosen.

    The Python SDK defaults to gRPC, so ``OTEL_EXPORTER_OTLP_ENDPOINT=http://c:4317`` is a
    common setting; with our HTTP default every export would fail.  We warn rather than
    switch on the port number: the protocol is chosen by the variables, never guessed.
    """
    endpoint = otlp_env.grpc_port_endpoint(env)
    if endpoint is None:
        return None
    return (
        f"fma-otel: OTLP endpoint {safe_url(endpoint)} is on port {otlp_env.GRPC_PORT} (OTLP/gRPC) but no "
        f"protocol is set, and the wrappers default to {otlp_env.DEFAULT_PROTOCOL}: set "
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc, or use the collector's HTTP port 4318"
    )


def http_endpoint(env: Mapping[str, str]) -> str:
    """The URL the OTLP/HTTP exporter posts to (the rule of :mod:`fma_otel.otlp_env`)."""
    return otlp_env.endpoint_or_default(env, otlp_env.HTTP_PROTOBUF).http_url()


def proxy_applies(url: str) -> bool:
    """True when ``HTTP(S)_PROXY`` (and not ``NO_PROXY``) covers ``url``.

    Off macOS and Windows (whose system settings ``urllib`` also reads), a proxy comes
    only from a ``*_proxy`` variable: with none set, ``urllib.request`` - a quarter MB more
    launcher for every fork to copy - is not imported to say so.
    """
    if sys.platform not in ("darwin", "win32") and not any(k.lower().endswith("_proxy") for k in os.environ):
        return False
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    if not getproxies().get(parts.scheme or "http"):
        return False
    return not (parts.hostname and proxy_bypass(parts.hostname))


def light_transport(env: Mapping[str, str]):  # type: ignore[no-untyped-def]
    """The exporter package's own ``urllib3`` transport, with the exporter's TLS settings.

    Why: the default transport builds a ``requests`` session, whose imports add several
    MB of anonymous memory to the launcher, and every ``fork()`` of a vLLM instance copies
    the page tables of that memory (``benchmarks/bench_fork.py``).  ``urllib3`` (far
    smaller) is what ``requests`` sends with anyway.  The CA file and client certificate are read from
    the same variables, in the same order, as the exporter reads them for ``requests``.
    """
    from opentelemetry.exporter.http.transport._urllib3 import Urllib3HTTPTransport

    def first(*names: str) -> str | None:
        return next((env[n] for n in names if env.get(n)), None)

    verify: bool | str = (
        first("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "OTEL_EXPORTER_OTLP_CERTIFICATE") or True
    )
    key = first("OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY", "OTEL_EXPORTER_OTLP_CLIENT_KEY")
    cert_file = first("OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE")
    cert: str | tuple[str, str] | None = (cert_file, key) if cert_file and key else cert_file
    return Urllib3HTTPTransport(verify=verify, cert=cert)


def _http_exporter(env: Mapping[str, str]):  # type: ignore[no-untyped-def]
    """OTLP/HTTP over ``urllib3``; over the default ``requests`` when a proxy is set.

    ``requests`` honours ``HTTP(S)_PROXY``, ``urllib3`` does not, so a proxied endpoint
    keeps the default.  An exporter too old to take a transport (before 1.45) also does.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    if not proxy_applies(http_endpoint(env)):
        try:
            return HttpExporter(_transport=light_transport(env))
        except Exception:  # noqa: BLE001 - older exporter or transport: the default one
            logger.debug("fma-otel: urllib3 transport unavailable, using the default", exc_info=True)
    return HttpExporter()


@contextmanager
def _header_values_unlogged(env: Mapping[str, str]) -> Iterator[None]:
    """While the exporter is built on this thread, drop the OpenTelemetry log records that
    quote an invalid entry of the header list (the exporter parses the variable itself
    and logs what it drops).  Only this thread's records, only those quoting such an
    entry; the exporter's module must be imported first, so that its loggers exist."""
    bad = otlp_env.invalid_header_entries(env)
    if not bad:
        yield
        return
    me = threading.get_ident()

    def keep(record: logging.LogRecord) -> bool:
        if record.thread != me:
            return True
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted quotes nothing
            return True
        return not any(entry in text for entry in bad)

    names = [n for n in list(logging.Logger.manager.loggerDict) if n.startswith("opentelemetry")]
    loggers = [logging.getLogger(n) for n in names]
    for lg in loggers:
        lg.addFilter(keep)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(keep)


def _exporter(name: str):  # type: ignore[no-untyped-def]
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    warning = grpc_port_warning(os.environ)
    if warning:
        logger.warning(warning)
    problem = otlp_env.header_list_problem(os.environ)
    if problem:
        logger.warning("fma-otel: %s; exporting without the invalid entries", problem)
    if otlp_env.protocol(os.environ).startswith("http"):
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401  (its loggers)

        with _header_values_unlogged(os.environ):
            return _http_exporter(os.environ)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    with _header_values_unlogged(os.environ):
        return GrpcExporter()


def ensure_sdk(default_service: str = model.SERVICE_LAUNCHER) -> bool:
    """Install a global ``TracerProvider`` from ``OTEL_*`` if none is set; True if we did.

    The provider is built with ``DerivedIdGenerator``: the one place the wrappers' derived
    span ids come from.  Called by ``FmaConfigurator`` (and so by ``import fma_otel.auto``)."""
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
            provider = TracerProvider(resource=Resource.create(attrs), id_generator=DerivedIdGenerator())
            for name in names:
                if name == "none":
                    continue
                provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
            trace.set_tracer_provider(provider)
            return True
        except Exception:  # noqa: BLE001 - do no harm: run untraced
            logger.warning("fma-otel: could not configure the OpenTelemetry SDK", exc_info=True)
            return False
