"""The OTLP protocol and endpoint rules, one copy for the bridge's commands, its sink and
the wrappers.

The protocol is the traces-specific ``OTEL_*`` variable, else the generic one, else
``http/protobuf`` (the OpenTelemetry specification's default): never guessed from the
endpoint's port.  Because the Python SDK's own default is gRPC, an endpoint on 4317 with
no protocol chosen is a common mistake, so callers warn about it (each in its own words:
the CLI names its flag, the wrappers only the variable).

The endpoint is the traces-specific variable, used as is (a full URL), else the generic
one, always a base URL to which OTLP/HTTP appends ``/v1/traces``, else the default for
the protocol (``localhost`` on 4317 for gRPC, 4318 for HTTP).  A variable set to blanks
counts as unset, here as for the protocol.  Validating the URL is each caller's business
(the sink raises its own error; the wrappers leave it to the SDK's exporter).

Why a module of its own: the wrappers run inside the launcher, where every import is
copied into each forked vLLM instance, so this rule must not pull in the bridge's sinks
or ``click``.  Standard library only.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import ParseResult, urlparse

GRPC = "grpc"
HTTP_PROTOBUF = "http/protobuf"
DEFAULT_PROTOCOL = HTTP_PROTOBUF
GRPC_PORT = 4317

ENV_ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
ENV_TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
ENV_PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"
ENV_TRACES_PROTOCOL = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
ENV_HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"
ENV_TRACES_HEADERS = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"

TRACES_PATH = "/v1/traces"
DEFAULT_GRPC_ENDPOINT = "http://localhost:4317"
DEFAULT_HTTP_ENDPOINT = "http://localhost:4318"


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


class Endpoint(NamedTuple):
    """An endpoint as chosen, and whether it is a base URL (OTLP/HTTP appends the path)."""

    url: str
    base: bool

    def http_url(self) -> str:
        """The URL OTLP/HTTP posts to: ``/v1/traces`` appended to a base URL, else as is."""
        return traces_url(self.url) if self.base else self.url


def traces_url(base: str) -> str:
    """A base URL with the traces path appended (its trailing slashes dropped first)."""
    return base.rstrip("/") + TRACES_PATH


def env_endpoint(env: Mapping[str, str]) -> Endpoint | None:
    """The endpoint the variables set, or ``None`` when they set none (blank is unset).

    The traces variable is the full URL (the specification's rule for a signal-specific
    endpoint); the generic one is always a base URL, even when it has a path.
    """
    if traces := env_value(env, ENV_TRACES_ENDPOINT):
        return Endpoint(traces, base=False)
    if generic := env_value(env, ENV_ENDPOINT):
        return Endpoint(generic, base=True)
    return None


def endpoint_or_default(env: Mapping[str, str], protocol: str) -> Endpoint:
    """The endpoint when no flag or argument chose one: the variables', else the default
    for ``protocol`` (HTTP's for anything but gRPC; not validated)."""
    default = DEFAULT_GRPC_ENDPOINT if protocol == GRPC else DEFAULT_HTTP_ENDPOINT
    return env_endpoint(env) or Endpoint(default, base=True)


def split_endpoint(endpoint: str) -> ParseResult:
    """An endpoint URL in parts, a ``host:port`` without a scheme read as the host and port
    (``urlparse`` alone would make ``collector`` the scheme and ``4317`` the path).

    Raises ``ValueError`` for a port that is not a number from 0 to 65535 or an unclosed
    IPv6 bracket, which ``urlparse`` leaves for ``.port`` to find.
    """
    parts = urlparse(endpoint if "://" in endpoint else f"//{endpoint}")
    parts.port  # noqa: B018  (raises for a bad port)
    return parts


def endpoint_port(endpoint: str) -> int | None:
    """The port of an endpoint URL or ``host:port``; ``None`` when it has none or a bad one."""
    try:
        return split_endpoint(endpoint).port
    except ValueError:
        return None


def grpc_port_endpoint(env: Mapping[str, str], endpoint: str | None = None) -> str | None:
    """The endpoint (``endpoint``, else the variables') when it is on OTLP/gRPC's port and
    no protocol is chosen, so the default HTTP would fail: the one case worth a warning."""
    if env_protocol(env):
        return None
    if not endpoint:
        chosen = env_endpoint(env)
        endpoint = chosen.url if chosen else None
    return endpoint if endpoint and endpoint_port(endpoint) == GRPC_PORT else None


# --------------------------------------------------------------------------- headers
#
# The exporters read the header list themselves and, for an entry they cannot parse, log a
# warning that quotes the entry (an ``authorization=Bearer ...`` token) and send without
# it.  So the list is checked here first, by the rule the Python exporters apply (the
# OTLP exporter specification's ``name=value`` list, values URL-encoded, read liberally:
# a space is allowed inside a value), and a problem is said naming the variable only.

#: an RFC 7230 token: what a header name may be made of
_NAME_CHARS = frozenset("!#$%&'*+-.^_`|~" + string.digits + string.ascii_letters)
#: printable US-ASCII and the space, but not the list's delimiters or a quote or backslash
_VALUE_CHARS = frozenset(map(chr, range(0x20, 0x7F))) - frozenset('",;\\')
_OWS = " \t"
_ENTRY_SPLIT = re.compile(r"[ \t]*,[ \t]*").split


def headers_variable(env: Mapping[str, str]) -> str | None:
    """The variable the exporters take the header list from: the traces one when it is
    set and not empty, else the generic one when that is (the SDK's rule: blanks count)."""
    for name in (ENV_TRACES_HEADERS, ENV_HEADERS):
        if env.get(name):
            return name
    return None


def _header_entry_ok(entry: str) -> bool:
    name, eq, value = entry.strip().partition("=")
    name, value = name.rstrip(_OWS), value.strip(_OWS)
    return bool(eq and name) and set(name) <= _NAME_CHARS and set(value) <= _VALUE_CHARS


def _header_entries(value: str) -> list[str]:
    return [e for e in _ENTRY_SPLIT(value) if e]


def invalid_header_entries(env: Mapping[str, str]) -> list[str]:
    """The entries of the header list in use that the exporters would drop, stripped
    (what their warning quotes); empty when there is none."""
    name = headers_variable(env)
    if name is None:
        return []
    return [e.strip() for e in _header_entries(env[name]) if not _header_entry_ok(e)]


def header_list_problem(env: Mapping[str, str]) -> str | None:
    """One line naming the header variable, never its value, when an entry of it would be
    dropped by the exporters; ``None`` when every entry is sent."""
    name = headers_variable(env)
    if name is None:
        return None
    entries = _header_entries(env[name])
    bad = [i for i, e in enumerate(entries, 1) if not _header_entry_ok(e)]
    if not bad:
        return None
    which = f"entry {bad[0]}" if len(bad) == 1 else f"entries {', '.join(map(str, bad))}"
    return (
        f"{name} is not a valid header list: {which} of {len(entries)} not name=value "
        "with a URL-encoded value (the value is not shown)"
    )


def header_secrets(env: Mapping[str, str]) -> list[str]:
    """The texts of the header variables an error message must not show: each entry and
    each value, longest first (so an entry is replaced whole before its value)."""
    out: set[str] = set()
    for name in (ENV_TRACES_HEADERS, ENV_HEADERS):
        for entry in _header_entries(env.get(name) or ""):
            entry = entry.strip()
            value = entry.partition("=")[2].strip()
            out.update(t for t in (entry, value) if len(t) >= 3)
    return sorted(out, key=len, reverse=True)
