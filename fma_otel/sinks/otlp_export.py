"""Export finished spans over OTLP with the official OpenTelemetry exporters.

The bridge builds spans after the fact, with ids derived from the actuation (see the span
model), so they cannot go through a ``Tracer`` (which would mint random ids and take the
time now).  Instead each :class:`~fma_otel.span_records.SpanRecord` becomes a ``ReadableSpan``
with its own ids and times, and is handed straight to the SDK's ``OTLPSpanExporter``: the
wire format, TLS, headers and retries stay the SDK's, so whatever a collector accepts from
an instrumented service it accepts from us.

Configuration, most specific first:

- endpoint: the ``endpoint`` argument, then ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (used
  as-is), then ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL: ``/v1/traces`` is appended
  for HTTP).  An explicit ``endpoint`` for HTTP is treated like the base URL when it has
  no path (``http://collector:4318``) and used as-is when it has one.
- protocol: the ``protocol`` argument, then ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``, then
  ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf`` (the OpenTelemetry
  specification's default; as for the CLI and the wrappers, never guessed from the port).
  ``http/json`` is not offered by the Python exporters and is refused with a clear message.
- headers: ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` or ``OTEL_EXPORTER_OTLP_HEADERS``, read by
  the SDK itself (keys lowercased, as gRPC metadata requires).  The list is checked first
  (:func:`fma_otel.otlp_env.header_list_problem`): the SDK would log an entry it cannot
  parse, token and all, and send without it, so an invalid list is an error naming the
  variable, never showing its value.
- TLS: ``https://`` is secure, ``http://`` is plaintext (also for gRPC); a gRPC endpoint
  without a scheme (``collector:4317``) is secure unless ``OTEL_EXPORTER_OTLP_INSECURE=true``
  (the SDK's rule).  Certificates come from ``OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE`` and
  friends, read by the SDK itself.

Nothing that cannot be encoded is sent: every trace's spans are checked first (ids of
the right width and not zero, times within OTLP's unsigned 64 bits and ending no earlier
than they start, integers within int64, text that is UTF-8).  One such value makes the
protobuf encoder fail the whole request ("Value out of range"), so a single bad trace
would hold back every trace batched with it, and in ``watch`` every later one too.  A
trace with a bad span is dropped whole (a partial trace would be a wrong one), logged,
counted in :attr:`OtlpSink.dropped` and returned by :meth:`OtlpSink.export`; the others
go out.

Failure is loud and bounded: the SDK exporters retry transient errors with exponential
backoff, up to their ``timeout``; we give them ``timeout_s`` per batch and also run each
batch in a worker thread that we stop waiting for shortly after, so a receiver that is
down, refusing or hanging turns into one :class:`ExportError` within about ``timeout_s``,
never a silent drop and never a hang.

No error or log line shows a credential: the endpoint is shown by
:func:`fma_otel.errtext.safe_url` (no user part, no query), and what the SDK says is
cleared of the endpoint's user part and query and of the header variables' entries.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import ParseResult

from .. import __version__, otlp_env
from ..errtext import hide_credentials, one_line, safe_url
from ..model import STATUS_ERROR, STATUS_OK, resource_attributes
from ..otlp_env import GRPC, HTTP_PROTOBUF, env_value
from ..span_records import SpanRecord
from .otlp_json import SCOPE_NAME

PROTOCOLS = (GRPC, HTTP_PROTOBUF)
#: Spans per request: far below the exporters' 64 MiB request cap even with big attributes.
BATCH_SIZE = 512
#: Extra wall time granted to the SDK past ``timeout_s`` before we stop waiting.
_GRACE_S = 2.0

_CREDENTIAL_PROVIDERS = (
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER",
    "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
)


log = logging.getLogger(__name__)


class ExportError(RuntimeError):
    """Spans could not be delivered (or the export is misconfigured); message is one line."""


@dataclass(frozen=True)
class Dropped:
    """A trace not sent because one of its spans cannot be encoded (see the module docstring)."""

    trace_id: str
    n_spans: int
    reason: str


def otlp_configured(endpoint_flag: str | None) -> bool:
    """Whether the CLI should export over OTLP: a flag was given or the standard env is set.

    Only the endpoint variables count: a protocol or headers variable alone (common in
    shells that also run instrumented apps) must not make the bridge start exporting.
    A variable set to blanks is unset (:func:`fma_otel.otlp_env.env_endpoint`), as when
    the endpoint is resolved: counting it here would export to the default localhost.
    """
    if endpoint_flag:
        return True
    return otlp_env.env_endpoint(os.environ) is not None


# --------------------------------------------------------------------------- configuration


def resolve_protocol(protocol: str | None) -> str:
    """The OTLP protocol to use; see the module docstring for the order of precedence."""
    chosen = (protocol or otlp_env.protocol(os.environ)).strip().lower()
    if chosen == "http":  # a common shorthand
        chosen = HTTP_PROTOBUF
    if chosen not in PROTOCOLS:
        raise ExportError(
            f"unsupported OTLP protocol {chosen!r}: use one of {', '.join(PROTOCOLS)}"
            + (" (http/json is not offered by the Python exporters)" if chosen == "http/json" else "")
        )
    return chosen


def _parse(url: str) -> ParseResult:
    """:func:`fma_otel.otlp_env.split_endpoint`, its ``ValueError`` as :class:`ExportError`.

    ``urlparse`` raises a bare ``ValueError`` for ``http://[::1`` (unclosed bracket) and
    ``.port`` for ``host:99999`` or ``host:abc``; the CLI turns ExportError into one line.
    """
    try:
        return otlp_env.split_endpoint(url)
    except ValueError as exc:
        raise ExportError(
            f"OTLP endpoint {safe_url(url)!r} is not a valid URL: {redact(str(exc), url)}"
        ) from None


def resolve_endpoint(endpoint: str | None, protocol: str) -> str:
    """The URL (HTTP) or ``scheme://host:port`` (gRPC) to send to.

    Raises :class:`ExportError` for an endpoint that is not a URL (a bad port, an
    unclosed IPv6 bracket), whichever variable or argument it came from.
    """
    if endpoint:
        url = endpoint.strip()
        parsed = _parse(url)
        chosen = otlp_env.Endpoint(url, base=parsed.path in ("", "/"))  # a bare host: the base URL
    else:
        chosen = otlp_env.endpoint_or_default(os.environ, protocol)  # the variables', else the default
        url = chosen.url
        parsed = _parse(url)
    if protocol == GRPC:
        return url
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ExportError(f"OTLP/HTTP endpoint {safe_url(url)!r} is not an http:// or https:// URL")
    return chosen.http_url()


def redact(text: str, url: str) -> str:
    """:func:`~fma_otel.errtext.hide_credentials`, the header variables' entries and values
    hidden too (the SDK's words may quote them)."""
    return hide_credentials(text, url, otlp_env.header_secrets(os.environ))


# --------------------------------------------------------------------------- screening

_HEX32 = re.compile(r"[0-9a-fA-F]{32}").fullmatch
_HEX16 = re.compile(r"[0-9a-fA-F]{16}").fullmatch
_U64 = 1 << 64
_I64 = 1 << 63


def _id_problem(what: str, value: object, match: Any) -> str | None:
    if isinstance(value, str) and match(value) and value.strip("0"):
        return None
    width = 32 if match is _HEX32 else 16
    return f"{what} {str(value)[:40]!r} is not {width} hex digits, not all zero"


def _text_problem(what: str, text: str) -> str | None:
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} is not UTF-8 text (a lone surrogate)"
    return None


def _value_problem(what: str, v: Any) -> str | None:
    """Why the encoder would refuse ``v`` as converted by :func:`_attr_value`, or None."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return None if -_I64 <= v < _I64 else f"{what} {v} is outside int64"
    if isinstance(v, str):
        return _text_problem(what, v)
    if isinstance(v, Mapping):
        for k, x in v.items():
            if problem := _text_problem(f"{what} key", str(k)) or _value_problem(f"{what}.{k}", x):
                return problem
        return None
    if isinstance(v, (list, tuple)):
        for x in v:
            if problem := _value_problem(what, x):
                return problem
        return None
    if isinstance(v, (float, bytes)):
        return None
    return _text_problem(what, str(v))


def span_problem(rec: SpanRecord) -> str | None:
    """Why ``rec`` cannot be put on the wire as OTLP, or ``None`` when it can."""
    problem = (
        _id_problem("trace id", rec.trace_id, _HEX32)
        or _id_problem("span id", rec.span_id, _HEX16)
        or (_id_problem("parent span id", rec.parent_span_id, _HEX16) if rec.parent_span_id else None)
    )
    if problem:
        return problem
    name = rec.name if isinstance(rec.name, str) else repr(rec.name)
    for what, ns in (("start", rec.start_ns), ("end", rec.end_ns)):
        if isinstance(ns, bool) or not isinstance(ns, int) or not 0 <= ns < _U64:
            return f"span {name[:80]!r}: {what} time {ns!r} is not within 0 .. 2**64 ns"
    if rec.end_ns < rec.start_ns:
        return f"span {name[:80]!r} ends {rec.start_ns - rec.end_ns} ns before it starts"
    problem = _text_problem("span name", name) or _text_problem(
        "status message", str(rec.status_message or "")
    )
    if problem:
        return f"span {name[:80]!r}: {problem}"
    for group, attrs in (("attribute", rec.attributes), ("resource attribute", rec.resource)):
        for k, v in (attrs or {}).items():
            if problem := _text_problem(f"{group} key", str(k)) or _value_problem(f"{group} {k}", v):
                return f"span {name[:80]!r}: {problem}"
    return None


def screen(spans: Sequence[SpanRecord]) -> tuple[list[SpanRecord], list[Dropped]]:
    """``spans`` without the traces that have a span :func:`span_problem` refuses.

    Order is kept; a trace is dropped whole, with the first problem found as its reason.
    """
    bad: dict[str, str] = {}
    for s in spans:
        tid = str(s.trace_id)
        if tid not in bad and (problem := span_problem(s)):
            bad[tid] = problem
    if not bad:
        return list(spans), []
    good = [s for s in spans if str(s.trace_id) not in bad]
    counts = Counter(str(s.trace_id) for s in spans if str(s.trace_id) in bad)
    return good, [Dropped(tid, counts[tid], why) for tid, why in bad.items()]


# --------------------------------------------------------------------------- conversion


def _attr_value(v: Any) -> Any:
    """A value the OTLP encoder accepts; anything else as its string form (never dropped)."""
    if isinstance(v, (bool, int, float, str, bytes)):
        return v
    if isinstance(v, Mapping):
        return {str(k): _attr_value(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_attr_value(x) for x in v if x is not None]
    return str(v)


def to_readable_spans(spans: Sequence[SpanRecord]) -> list[Any]:
    """SpanRecords as SDK ``ReadableSpan`` objects with their own ids, times and resource.

    Spans of one resource share one ``Resource`` object: the encoder groups spans by
    Resource, and rebuilding it per span would cost on big captures."""
    from opentelemetry import trace as api
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace.status import Status, StatusCode

    scope = InstrumentationScope(SCOPE_NAME, __version__)
    flags = api.TraceFlags(api.TraceFlags.SAMPLED)
    resources: dict[tuple[tuple[str, str], ...], Any] = {}
    out = []
    for rec in spans:
        attrs = dict(rec.resource or resource_attributes(rec.service))
        key = tuple(sorted((k, repr(v)) for k, v in attrs.items()))
        if (resource := resources.get(key)) is None:
            resource = resources[key] = Resource({k: _attr_value(v) for k, v in attrs.items()})
        trace_id = int(rec.trace_id, 16)
        parent = None
        if rec.parent_span_id:
            parent = api.SpanContext(
                trace_id, int(rec.parent_span_id, 16), is_remote=False, trace_flags=flags
            )
        if rec.status_code == STATUS_ERROR:
            status = Status(StatusCode.ERROR, rec.status_message or None)
        else:
            status = Status(StatusCode.OK if rec.status_code == STATUS_OK else StatusCode.UNSET)
        out.append(
            ReadableSpan(
                name=rec.name,
                context=api.SpanContext(trace_id, int(rec.span_id, 16), is_remote=False, trace_flags=flags),
                parent=parent,
                resource=resource,
                attributes={k: _attr_value(v) for k, v in rec.attributes.items() if v is not None},
                kind=getattr(api.SpanKind, rec.kind, api.SpanKind.INTERNAL),
                status=status,
                start_time=rec.start_ns,
                end_time=rec.end_ns,
                instrumentation_scope=scope,
                events=[
                    Event(e.name, {k: _attr_value(v) for k, v in e.attributes.items()}, e.time_ns)
                    for e in rec.events
                ],
            )
        )
    return out


# --------------------------------------------------------------------------- the sink


class _Capture(logging.Filter):
    """Keep the exporter's log lines of one worker thread out of stderr, remember them.

    The SDK logs each retry and the final failure; on a CLI those would interleave with
    our own one-line error, so they are swallowed and the last one becomes its detail.
    Filtering by thread leaves every other exporter in the process untouched.
    """

    def __init__(self, thread_id: int | None = None) -> None:
        super().__init__()
        self.thread_id = thread_id
        self.messages: list[str] = []
        #: the messages at WARNING or above
        self.complaints: list[str] = []
        self._loggers: list[logging.Logger] = []

    def attach(self) -> _Capture:
        """Put this filter on every exporter logger, first in line: ahead of the SDK's
        DuplicateFilter, which would hide a second identical failure (and so its detail)
        from us within 20 s."""
        import opentelemetry.exporter.otlp.proto.common  # noqa: F401  (registers the loggers)

        names = [n for n in list(logging.Logger.manager.loggerDict) if n.startswith("opentelemetry.exporter")]
        self._loggers = [logging.getLogger(n) for n in names]
        for lg in self._loggers:
            lg.filters.insert(0, self)
        return self

    def detach(self) -> None:
        for lg in self._loggers:
            lg.removeFilter(self)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread_id:
            return True
        try:
            message = " ".join(record.getMessage().split())
        except Exception:  # a badly formatted record must not break the export
            message = str(record.msg)
        self.messages.append(message)
        if record.levelno >= logging.WARNING:
            self.complaints.append(message)
        return False


def _name_setting(detail: str) -> str:
    """``detail`` with the ``OTEL_*`` variable whose value it quotes, when it names none
    (not a header variable: its value is a credential, see :func:`redact`)."""
    if "OTEL_" in detail:
        return detail
    for name, value in sorted(os.environ.items()):
        value = value.strip()
        if name.endswith("_HEADERS"):
            continue
        if name.startswith("OTEL_") and len(value) >= 2 and value in detail:
            return f"{name}={value}: {detail}"
    return detail


_GRPC_FAILURE = re.compile(r"error code: StatusCode\.(\w+), error details: (.*)$")
_HTTP_FAILURE = re.compile(r"batch code: (\d+|None), reason: (.*)$")
_TRANSIENT = re.compile(r"Transient error (.*?) encountered while exporting")


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")
_GAVE_UP = "due to timeout, max retries or shutdown"


def _failure_detail(messages: list[str]) -> str | None:
    """The most telling cause in the SDK's log lines (gRPC status, HTTP status, or error).

    The SDK reports the cause only in its log text; if a future SDK words it differently
    the last line is used as it is, which is still a readable one-liner.  ``None`` when
    the only news is that time ran out.
    """
    for m in reversed(messages):
        if g := _GRPC_FAILURE.search(m):
            return f"gRPC {g.group(1)}: {g.group(2)}"
        if h := _HTTP_FAILURE.search(m):
            code = "" if h.group(1) == "None" else f"HTTP {h.group(1)} "
            return _short(f"{code}{h.group(2)}")
    for m in reversed(messages):
        if t := _TRANSIENT.search(m):
            return _short(t.group(1))
    informative = [m for m in messages if _GAVE_UP not in m]
    return _short(informative[-1]) if informative else None


def _short(text: str) -> str:
    """``requests``' connection errors are paragraphs; the errno text says it all."""
    if e := _ERRNO.search(text):
        return f"cannot connect: {e.group(1).strip()}"
    return text


class OtlpSink:
    """Send SpanRecords to an OTLP receiver (collector, Jaeger, Tempo) and say if it failed."""

    def __init__(
        self,
        endpoint: str | None = None,
        protocol: str | None = None,
        timeout_s: float = 10,
    ) -> None:
        if timeout_s <= 0:
            raise ExportError(f"OTLP timeout must be positive, got {timeout_s}")
        self.protocol = resolve_protocol(protocol)
        self.endpoint = resolve_endpoint(endpoint, self.protocol)
        #: the endpoint as a message may show it
        self.shown = safe_url(self.endpoint)
        if problem := otlp_env.header_list_problem(os.environ):  # before the SDK logs the value
            raise ExportError(problem)
        self.timeout_s = float(timeout_s)
        self._last_answer: tuple[int, str | None] | None = None  # HTTP: status, Retry-After
        self._exporter = self._build_exporter()
        self._closed = False
        #: every trace this sink refused to send (see the module docstring), oldest first
        self.dropped: list[Dropped] = []

    def _build_exporter(self) -> Any:
        """The SDK exporter, or :class:`ExportError` naming the setting it could not use.

        The SDK raises whatever it likes for a bad ``OTEL_*`` variable (``ValueError``,
        ``InvalidCompressionValueException``, ``RuntimeError`` for an unknown credential
        provider) or only logs it (an unknown HTTP compression, an unreadable gRPC
        certificate, with a traceback) and goes on with something else; either way it is
        an unusable setting, said in one line before anything is sent.
        """

        def fail(detail: str) -> NoReturn:
            detail = redact(_name_setting(detail), self.endpoint)
            raise ExportError(f"cannot set up OTLP export to {self.shown}: {detail}")

        try:
            make = self._exporter_factory()
        except Exception as exc:  # noqa: BLE001 - an exporter package missing or broken
            fail(one_line(exc))
        capture = _Capture(threading.get_ident()).attach()
        try:
            exporter = make()
        except Exception as exc:  # noqa: BLE001 - see the docstring
            fail(one_line(exc))
        finally:
            capture.detach()
        if capture.complaints:
            with contextlib.suppress(Exception):  # the setting is the news
                exporter.shutdown()
            fail(capture.complaints[0])
        return exporter

    def _on_response(self, response: Any, *args: Any, **kwargs: Any) -> None:
        with contextlib.suppress(Exception):  # only ever a detail of an error message
            self._last_answer = (int(response.status_code), response.headers.get("Retry-After"))

    def _exporter_factory(self) -> Any:
        """Import the exporter (so its loggers exist) and return what builds it."""
        if self.protocol == GRPC:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

            scheme = otlp_env.split_endpoint(self.endpoint).scheme  # validated by resolve_endpoint
            insecure = {"http": True, "https": False}.get(scheme)  # no scheme: the SDK's env rules
            return lambda: GrpcExporter(
                endpoint=self.endpoint,
                insecure=insecure,
                timeout=self.timeout_s,
            )
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        # The HTTP exporter gives up at once, logging no status, when a 429/503 asks to
        # retry later than its timeout allows: our own session remembers the last answer,
        # to say what it was.  Not when a credential provider is set: its session is the
        # one to use (the SDK loads it), and that detail is then not said.
        session = None
        if not env_value(os.environ, *_CREDENTIAL_PROVIDERS):
            import requests

            session = requests.Session()
            session.hooks["response"].append(self._on_response)
        return lambda: HttpExporter(endpoint=self.endpoint, timeout=self.timeout_s, session=session)

    def __repr__(self) -> str:
        return f"OtlpSink({self.shown!r}, {self.protocol!r})"

    def export(self, spans: Sequence[SpanRecord]) -> list[Dropped]:
        """Deliver ``spans`` (in batches of :data:`BATCH_SIZE`) or raise :class:`ExportError`.

        Traces with a span that cannot be encoded are left out first and returned (and
        added to :attr:`dropped`); the rest is sent.  Each batch may take up to about
        ``timeout_s`` including the SDK's retries; the first failed batch stops the
        export, since a receiver that refused one batch will most likely refuse the next
        and the caller wants to know now.
        """
        if self._closed:
            raise ExportError(f"OTLP export to {self.shown}: sink already closed")
        if not spans:
            return []
        good, dropped = screen(spans)
        for d in dropped:
            log.warning("trace %s (%d spans) not exported: %s", d.trace_id, d.n_spans, d.reason)
        self.dropped.extend(dropped)
        if not good:
            return dropped
        try:
            readable = to_readable_spans(good)
        except (ValueError, TypeError) as exc:  # screen() should have caught it: say which
            raise ExportError(f"cannot convert spans for OTLP export to {self.shown}: {exc}") from exc
        for i in range(0, len(readable), BATCH_SIZE):
            self._export_batch(readable[i : i + BATCH_SIZE])
        return dropped

    def _export_batch(self, batch: list[Any]) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        capture = _Capture().attach()
        outcome: list[Any] = []

        def work() -> None:
            capture.thread_id = threading.get_ident()
            try:
                outcome.append(self._exporter.export(batch))
            except Exception as exc:  # the exporter should not raise; report it if it does
                outcome.append(exc)

        worker = threading.Thread(target=work, name="fma-otel-otlp-export", daemon=True)
        self._last_answer = None
        started = time.monotonic()
        try:
            worker.start()
            worker.join(self.timeout_s + _GRACE_S)
        finally:
            if not worker.is_alive():
                capture.detach()
        where = f"OTLP export ({self.protocol}) to {self.shown}"
        if worker.is_alive():
            # Leave the filter on so the straggler's late log lines stay quiet, and stop
            # the exporter: shutdown wakes its backoff sleep so the thread ends soon.
            self.close()
            threading.Thread(target=lambda: (worker.join(), capture.detach()), daemon=True).start()
            raise ExportError(f"{where} failed: no answer within {self.timeout_s:g} s")
        result = outcome[0] if outcome else None
        if result is SpanExportResult.SUCCESS:
            return
        if isinstance(result, Exception):
            detail = f"{type(result).__name__}: {result}"
        else:
            detail = _failure_detail(capture.messages) or self._gave_up_detail(time.monotonic() - started)
        retries = sum("retrying in" in m for m in capture.messages)
        if retries:
            detail += f" (gave up after {retries} {'retry' if retries == 1 else 'retries'})"
        raise ExportError(f"{where} failed: {redact(detail, self.endpoint)}")

    def _gave_up_detail(self, elapsed_s: float) -> str:
        """Why the SDK gave up when its log says only that it did (no cause, no status)."""
        answer = self._last_answer
        if answer is not None and answer[0] >= 300:
            code, retry_after = answer
            text = f"HTTP {code}"
            if retry_after:
                value = " ".join(retry_after.split())[:40]
                when = f"after {value} s" if value.replace(".", "", 1).isdigit() else f"at {value}"
                text += f", asked to retry {when}, later than the {self.timeout_s:g} s timeout allows"
            return text
        if elapsed_s < self.timeout_s:
            return f"gave up after {elapsed_s:.1f} s, before the {self.timeout_s:g} s timeout"
        return f"no success within {self.timeout_s:g} s"

    def close(self) -> None:
        """Release the channel / HTTP session; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):  # closing a broken channel must not mask the export error
            if self.protocol == GRPC:
                self._exporter.shutdown(timeout_millis=100)
            else:
                self._exporter.shutdown()

    def __enter__(self) -> OtlpSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
