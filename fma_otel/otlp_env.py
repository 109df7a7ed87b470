"""The OTLP protocol rule, one copy for the bridge's commands, its sink and the wrappers.

The protocol is the traces-specific ``OTEL_*`` variable, else the generic one, else
``http/protobuf`` (the OpenTelemetry specification's default): never guessed from the
endpoint's port.  Because the Python SDK's own default is gRPC, an endpoint on 4317 with
no protocol chosen is a common mistake, so callers warn about it (each in its own words:
the CLI names its flag, the wrappers only the variable).

Why a module of its own: the wrappers run inside the launcher, where every import is
copied into each forked vLLM instance, so this rule must not pull in the bridge's sinks
or ``click``.  Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
DEFAULT_PROTOCOL = HTTP_PROTOBUF
GRPC_PORT = 4317

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"


def env_value(env: Mapping[str, str], *names: str) -> str | None:
    """The first of these variables that is set to more than blanks, stripped."""
    for name in names:
        value = (env.get(name) or "").strip()
        if value:
            return value
    return None


def env_protocol(env: Mapping[str, str]) -> str | None:
    """The protocol the variables choose, or ``None`` when they choose none."""
    return env_value(env, ENV_TRACES_PROTOCOL, ENV_PROTOCOL)


def protocol(env: Mapping[str, str]) -> str:
    """The protocol to use when no flag or argument chose one (not yet validated)."""
    return env_protocol(env) or DEFAULT_PROTOCOL


def endpoint_port(endpoint: str) -> int | None:
    """The port of an endpoint URL or ``host:port``; ``None`` when it has none or a bad one."""
    try:
        return urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").port
    except ValueError:
        return None


def grpc_port_endpoint(env: Mapping[str, str], endpoint: str | None = None) -> str | None:
    """The endpoint (``endpoint``, else the variables') when it is on OTLP/gRPC's port and
    no protocol is chosen, so the default HTTP would fail: the one case worth a warning."""
    if env_protocol(env):
        return None
    endpoint = endpoint or env_value(env, ENV_TRACES_ENDPOINT, ENV_ENDPOINT)
    return endpoint if endpoint and endpoint_port(endpoint) == GRPC_PORT else None
