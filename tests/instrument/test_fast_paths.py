"""The wrappers' fast paths give exactly what the general code gives.

Each shortcut taken for per-call cost (the canonical ``traceparent`` parse, the direct
``traceparent`` injection, the DPC purpose tables, the one-read suppression test, the
``fma.vllm.startup`` span ordered on the request path and opened by the poller) is checked
here against the general path it replaces.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.instrumentation.utils import (
    is_http_instrumentation_enabled,
    is_instrumentation_enabled,
    suppress_http_instrumentation,
    suppress_instrumentation,
)
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.span import TraceState

from fma_otel import model
from fma_otel.instrument import _common as c
from fma_otel.instrument import httpx_dpc as H
from fma_otel.instrument import launcher as L
from fma_otel.instrument.launcher import CREATE_SPAN, STARTUP_SPAN, LauncherInstrumentor
from tests.instrument.conftest import Tracing, no_pod, wait_until
from tests.instrument.test_launcher_inprocess import TP_PARENT, TP_TRACE, _config
from tests.support.otlp_receiver import free_port

T = TP_TRACE
S = TP_PARENT

DEFAULT = CompositePropagator([TraceContextTextMapPropagator(), W3CBaggagePropagator()])


@pytest.fixture
def textmap() -> Iterator[Any]:
    """Lets a test choose the global propagator; the original comes back afterwards."""
    saved = propagate.get_global_textmap()

    def use(tm: Any) -> None:
        propagate.set_global_textmap(tm)

    use(DEFAULT)
    yield use
    propagate.set_global_textmap(saved)


# --------------------------------------------------------------------------- extract

HEADER_CASES: list[dict[str, str]] = [
    {"traceparent": f"00-{T}-{S}-01"},
    {"traceparent": f"00-{T}-{S}-00"},
    {"traceparent": f"00-{T}-{S}-ff"},
    {"traceparent": f"00-{T}-{S}-01", "user-agent": "dpc/1"},
    {"traceparent": f"00-{T.upper()}-{S}-01"},
    {"traceparent": f"00-{T}-{S.upper()}-01"},
    {"traceparent": f"00-{T}-{S}-0A"},
    {"traceparent": f"00-{'0' * 32}-{S}-01"},
    {"traceparent": f"00-{T}-{'0' * 16}-01"},
    {"traceparent": f"00-{'0' * 32}-{'0' * 16}-00"},
    {"traceparent": f"ff-{T}-{S}-01"},
    {"traceparent": f"01-{T}-{S}-01"},
    {"traceparent": f"01-{T}-{S}-01-future"},
    {"traceparent": f"00-{T}-{S}-01-extra"},
    {"traceparent": f" 00-{T}-{S}-01"},
    {"traceparent": f"00-{T}-{S}-01 "},
    {"traceparent": f"00-{T}-{S}-01\n"},
    {"traceparent": f"00-{T}-{S}-1"},
    {"traceparent": f"00-{T}-{S}-0g"},
    {"traceparent": f"00-{T[:-1]}-{S}-01"},
    {"traceparent": f"00_{T}_{S}_01"},
    {"traceparent": ""},
    {"traceparent": "garbage"},
    {"traceparent": f"00-{T}-{S}-01", "tracestate": "vendor=abc,other=1"},
    {"traceparent": f"00-{T}-{S}-01", "tracestate": "not a tracestate"},
    {"traceparent": f"00-{T}-{S}-01", "baggage": "k=v,k2=v2"},
    {"traceparent": f"00-{T}-{S}-01", "tracestate": "x=1", "baggage": "k=v"},
    {"traceparent": f"00-{T.upper()}-{S}-01", "baggage": "k=v"},
    {"tracestate": "x=1"},
    {"baggage": "k=v"},
    {"user-agent": "dpc/1"},
    {},
]


def _view(ctx: Any) -> Any:
    """What a context carries: the span context (with trace state), baggage, its keys."""
    if ctx is None:
        return None
    if ctx.__class__ is L._Joined:
        # The extras handed to the create path describe that same context.
        psc = trace.get_current_span(ctx.ctx).get_span_context()
        assert ctx.psc == psc
        assert ctx.trace_hex == f"{psc.trace_id:032x}"
        ctx = ctx.ctx
    sc = trace.get_current_span(ctx).get_span_context()
    return (sc, sc.trace_state.to_header(), dict(baggage.get_all(ctx)), sorted(ctx))


def _reference_extract(headers: dict[str, str]) -> Any:
    """What the launcher did before the fast path: the global propagator, when a
    propagation header came at all."""
    if len(headers) > ("user-agent" in headers):
        return propagate.extract(headers, getter=L._GETTER)
    return None


@pytest.mark.parametrize("headers", HEADER_CASES, ids=repr)
@pytest.mark.parametrize(
    "tm",
    [
        DEFAULT,
        CompositePropagator([TraceContextTextMapPropagator()]),
        CompositePropagator([W3CBaggagePropagator(), TraceContextTextMapPropagator()]),
        TraceContextTextMapPropagator(),
    ],
    ids=["default", "tracecontext-only", "baggage-first", "bare-tracecontext"],
)
def test_extract_gives_the_propagators_context(headers: dict[str, str], tm: Any, textmap: Any) -> None:
    textmap(tm)
    # Something attached upstream must not leak into either answer.
    token = otel_context.attach(baggage.set_baggage("upstream", "1"))
    try:
        got = _view(L._extract(dict(headers)))
        want = _view(_reference_extract(dict(headers)))
    finally:
        otel_context.detach(token)
    assert got == want


def test_extract_takes_the_fast_path_only_for_a_lone_canonical_traceparent(textmap: Any) -> None:
    canonical = {"traceparent": f"00-{T}-{S}-01", "user-agent": "dpc/1"}
    joined = L._extract(canonical)
    assert joined.__class__ is L._Joined and joined.trace_hex == T
    for other in (
        {"traceparent": f"00-{T.upper()}-{S}-01"},
        {"traceparent": f"00-{T}-{S}-01", "tracestate": "x=1"},
        {"traceparent": f"00-{T}-{S}-01", "baggage": "k=v"},
    ):
        assert L._extract(other).__class__ is not L._Joined
    textmap(CompositePropagator([TraceContextTextMapPropagator()]))
    assert L._extract(canonical).__class__ is not L._Joined


# --------------------------------------------------------------------------- inject


def _with_state() -> SpanContext:
    """A remote parent with a ``tracestate`` (what the propagator must carry along)."""
    return SpanContext(
        int(T, 16),
        int(S, 16),
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("v", "1")]),
    )


def _spans() -> list[Any]:
    tracer = TracerProvider().get_tracer("t")
    return [
        tracer.start_span("plain"),
        tracer.start_span("with-state", context=trace.set_span_in_context(NonRecordingSpan(_with_state()))),
        NonRecordingSpan(SpanContext(int(T, 16), int(S, 16), is_remote=False, trace_flags=TraceFlags(0))),
        NonRecordingSpan(_with_state()),
        trace.INVALID_SPAN,
        # the extremes of each field, and values outside them (the propagator decides those)
        NonRecordingSpan(SpanContext(2**128 - 1, 2**64 - 1, is_remote=False, trace_flags=TraceFlags(0xFF))),
        NonRecordingSpan(SpanContext(1, 1, is_remote=False, trace_flags=TraceFlags(0))),
        NonRecordingSpan(SpanContext(0, int(S, 16), is_remote=False)),
        NonRecordingSpan(SpanContext(2**128 + 5, int(S, 16), is_remote=False)),
        NonRecordingSpan(SpanContext(int(T, 16), 2**64, is_remote=False)),
        NonRecordingSpan(SpanContext(-1, int(S, 16), is_remote=False)),
        NonRecordingSpan(SpanContext(int(T, 16), int(S, 16), is_remote=False, trace_flags=TraceFlags(0x1FF))),
        NonRecordingSpan(SpanContext(int(T, 16), int(S, 16), is_remote=False, trace_flags=TraceFlags(-1))),
    ]


@pytest.mark.parametrize(
    "tm",
    [DEFAULT, CompositePropagator([TraceContextTextMapPropagator()]), TraceContextTextMapPropagator()],
    ids=["default", "tracecontext-only", "bare-tracecontext"],
)
@pytest.mark.parametrize("current", ["empty", "baggage", "other value", "empty baggage"])
@pytest.mark.parametrize("pass_ctx", [False, True], ids=["ctx-read-inside", "ctx-passed"])
def test_inject_span_writes_the_propagators_headers(
    tm: Any, current: str, pass_ctx: bool, textmap: Any
) -> None:
    textmap(tm)
    ctx = _context(current)
    token = otel_context.attach(ctx)
    try:
        for span in _spans():
            got: dict[str, str] = {"x": "kept"}
            want: dict[str, str] = {"x": "kept"}
            c.inject_span(got, span, otel_context.get_current() if pass_ctx else None)
            propagate.inject(want, context=trace.set_span_in_context(span))
            assert got == want, span
    finally:
        otel_context.detach(token)


def _context(kind: str) -> otel_context.Context:
    """A current context of each kind the fast paths tell apart."""
    empty = otel_context.Context()
    if kind == "empty":
        return empty
    if kind == "baggage":
        return baggage.set_baggage("k", "v w", empty)
    if kind == "empty baggage":  # a baggage entry that was set and removed: {} under the key
        return baggage.remove_baggage("k", baggage.set_baggage("k", "v", empty))
    assert kind == "other value"
    return otel_context.set_value("fma-test-key", 1, empty)


# --------------------------------------------------------------------------- purposes


def _reference_purpose(method: str, path: str, query: str = "") -> tuple[str, str | None] | None:
    """``dpc_purpose`` as it was before the tables: every rule, in order."""
    method = method.upper()
    if method not in H._METHODS or not path.startswith(H._PREFIXES):
        return None
    for m, rx, purpose in H._RULES:
        if m != method:
            continue
        mt = rx.match(path)
        if mt is None:
            continue
        if purpose == "list_instances" and "detail=false" in query:
            purpose = "list_instance_ids"
        return purpose, mt.groupdict().get("id")
    return None


_PATHS = [
    "",
    "/",
    "/v2/vllm/instances",
    "/v2/vllm/instances/",
    "/v2/vllm/instances//",
    "/v2/vllm/instances/abc",
    "/v2/vllm/instances/abc/",
    "/v2/vllm/instances/a/b",
    "/v2/vllm/instances/watch",
    "/v2/vllm/instances/watch/",
    "/v2/vllm/instances/watchx",
    "/v2/vllm/instances/xwatch",
    "/v2/vllm/instances/abc\n",
    "/v2/vllm/instances/\n",
    "/v2/vllm/instances\n",
    "/v2/vllm/instances/watch\n",
    "/v2/vllm/instancesX",
    "/health",
    "/health\n",
    "/health/",
    "/healthz",
    "/is_sleeping",
    "/wake_up",
    "/sleep",
    "/sleep\n",
    "/v1/become-ready",
    "/v1/become-unready",
    "/v1/dual-pods/accelerators",
    "/v1/dual-pods/accelerator-memory-usage",
    "/v1/other",
    "/v1/models",
]


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE", "PATCH", "get", "Put", "delete"])
def test_dpc_purpose_tables_agree_with_the_rules(method: str) -> None:
    for path in _PATHS:
        for query in ("", "detail=false", "detail=true"):
            assert H.dpc_purpose(method, path, query) == _reference_purpose(method, path, query), (
                method,
                path,
                query,
            )


def test_span_names_table_is_the_models() -> None:
    purposes = {p for _, _, p in H._RULES} | {"list_instance_ids"}
    assert H._SPAN_NAMES == {p: model.dpc_call_span(p) for p in purposes}


# --------------------------------------------------------------------------- httpx wrapper


def _reference_httpx_span(request: httpx.Request) -> tuple[str, dict[str, Any]] | None:
    """The name and start attributes ``_begin`` gave before its shortcuts (every URL
    property read, the query decoded for every call, ``dpc_purpose`` as is)."""
    url = request.url
    query = url.query
    found = H.dpc_purpose(request.method, url.path, query.decode("ascii", "replace") if query else "")
    if found is None:
        return None
    purpose, instance_id = found
    attrs: dict[str, Any] = {
        H.A_PURPOSE: purpose,
        "http.request.method": request.method,
        "url.full": str(url.copy_with(username=None, password=None)) if url.userinfo else str(url),
        "server.address": url.host,
    }
    if url.port:
        attrs["server.port"] = url.port
    if instance_id:
        attrs[model.A_INSTANCE] = instance_id
    return H.span_name_for(purpose), attrs


_HTTPX_URLS = [
    "http://10.0.0.1:8001/v2/vllm/instances/abc",
    "http://u:p@10.0.0.1:8001/v2/vllm/instances/abc",
    "http://u@10.0.0.1:8001/v2/vllm/instances/abc",
    "http://:p@10.0.0.1:8001/v2/vllm/instances/abc",
    "http://10.0.0.1:8001/v2/vllm/instances/a@b",
    "http://u:p@10.0.0.1:8001/v2/vllm/instances/a@b",
    "http://10.0.0.1:8001/v2/vllm/instances/a%40b",
    "http://10.0.0.1:8001/v2/vllm/instances/a%2Fb",
    "http://10.0.0.1:8001/v2/vllm/instances/watch",
    "http://10.0.0.1:8001/v2/vllm/instances",
    "http://10.0.0.1:8001/v2/vllm/instances?detail=false",
    "http://10.0.0.1:8001/v2/vllm/instances/?detail=false",
    "http://10.0.0.1:8001/v2/vllm/instances?detail=true",
    "http://10.0.0.1:8001/v2/vllm/instances?x=%C3%A9&detail=false",
    "http://10.0.0.1:8001/v2/vllm/instances?x=\u00e9&detail=false",
    "http://10.0.0.1:8001/v2/vllm/instances?detail%3Dfalse",
    "http://10.0.0.1:8001/v2/vllm/instances/abc?detail=false",
    "http://10.0.0.1:80/is_sleeping",
    "https://10.0.0.1:443/is_sleeping",
    "https://10.0.0.1:8443/wake_up",
    "http://[::1]:8001/health",
    "http://xn--fiqs8s.icom.museum:8001/health",
    "http://Host.Example:8001/sleep",
    "http://10.0.0.1:8001/v1/become-ready#frag",
    "http://10.0.0.1:8001/v1/models",
]


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "DELETE"])
def test_httpx_spans_are_the_general_computation(tracing: Tracing, method: str) -> None:
    inst = H.HttpxDpcInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, skip_dep_check=True)
    try:
        client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
        want = []
        for url in _HTTPX_URLS:
            request = client.build_request(method, url)
            ref = _reference_httpx_span(request)
            if ref is not None:
                want.append(ref)
            client.send(request)
        got = [
            (s.name, {k: v for k, v in s.attributes.items() if k != "http.response.status_code"})
            for s in tracing.spans()
        ]
        assert got == want
        assert got  # the table is not empty for any of the methods
    finally:
        inst.uninstrument()


@pytest.mark.parametrize(
    "tm",
    [DEFAULT, CompositePropagator([TraceContextTextMapPropagator()]), W3CBaggagePropagator()],
    ids=["default", "tracecontext-only", "baggage-only"],
)
@pytest.mark.parametrize("current", ["empty", "baggage", "other value", "empty baggage", "span"])
@pytest.mark.parametrize("present", [None, "traceparent", "TraceParent", "tracestate"])
def test_httpx_request_headers_are_the_propagators(
    tracing: Tracing, tm: Any, current: str, present: str | None, textmap: Any
) -> None:
    """The headers a named call goes out with: what ``propagate.inject`` writes for its span
    (over whatever the caller had set), and the caller's other headers as they were."""
    textmap(tm)
    if current == "span":
        ctx = trace.set_span_in_context(NonRecordingSpan(_with_state()), otel_context.Context())
    else:
        ctx = _context(current)
    seen: list[httpx.Request] = []
    client = httpx.Client(transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200)))
    headers = {"X-Mine": "1"} if present is None else {"X-Mine": "1", present: "old"}
    inst = H.HttpxDpcInstrumentor()
    inst.instrument(tracer_provider=tracing.provider, skip_dep_check=True)
    token = otel_context.attach(ctx)
    try:
        request = client.build_request("GET", "http://h:8005/is_sleeping", headers=headers)
        before = httpx.Headers(request.headers)
        client.send(request)
        (span,) = tracing.spans()
        # the propagator, on what the request had before the wrapper touched it
        want = httpx.Headers(before)
        propagate.inject(want, context=trace.set_span_in_context(NonRecordingSpan(span.context)))
        assert seen[0].headers.raw == want.raw
    finally:
        otel_context.detach(token)
        inst.uninstrument()


_HEADER_ITEMS: list[list[tuple[str, str]]] = [
    [],
    [("Accept", "*/*")],
    [("Host", "h"), ("Accept", "*/*"), ("User-Agent", "dpc/1"), ("Content-Length", "2")],
    [("traceparent", "old")],
    [("TraceParent", "old")],
    [("traceparent", "old"), ("x", "1"), ("Traceparent", "old2")],
    [("x-dup", "1"), ("X-Dup", "2")],
    [("x", "caf\u00e9")],
]


@pytest.mark.parametrize("items", _HEADER_ITEMS)
@pytest.mark.parametrize("encoding", [None, "ascii", "utf-8", "iso-8859-1"])
def test_set_traceparent_is_setitem(items: list[tuple[str, str]], encoding: str | None) -> None:
    assert H._fast_headers() is httpx.Headers  # the fast path is the one under test
    value = f"00-{T}-{S}-01"
    try:
        fast, slow = httpx.Headers(items, encoding=encoding), httpx.Headers(items, encoding=encoding)
    except UnicodeEncodeError:
        pytest.skip("httpx refuses these headers in this encoding")
    H.set_traceparent(fast, value)
    slow["traceparent"] = value
    assert fast._list == slow._list
    assert fast._encoding == slow._encoding
    assert fast.raw == slow.raw
    assert list(fast.multi_items()) == list(slow.multi_items())


def test_set_traceparent_on_other_carriers_is_setitem() -> None:
    got: dict[str, str] = {"traceparent": "old", "x": "1"}
    H.set_traceparent(got, "new")
    assert got == {"traceparent": "new", "x": "1"}


def test_set_traceparent_falls_back_when_httpx_headers_differ(monkeypatch: pytest.MonkeyPatch) -> None:
    """An httpx whose ``__setitem__`` does something else: the direct append is never used."""

    def setitem_first(self: httpx.Headers, key: str, value: str) -> None:
        k = key.encode()
        self._list.insert(0, (k, k.lower(), value.encode()))

    monkeypatch.setattr(httpx.Headers, "__setitem__", setitem_first)
    monkeypatch.setattr(H, "_FAST_HEADERS", None)
    assert H._fast_headers() is H._NoFastPath
    h = httpx.Headers([("Accept", "*/*")])
    H.set_traceparent(h, "v")
    assert h.raw == [(b"traceparent", b"v"), (b"Accept", b"*/*")]


# --------------------------------------------------------------------------- guards


def test_active_reads_the_same_suppression_as_the_instrumentation_utils() -> None:
    def both() -> tuple[bool, bool]:
        assert c.active() == is_instrumentation_enabled()
        assert c.active_http() == is_http_instrumentation_enabled()
        return c.active(), c.active_http()

    assert both() == (True, True)
    with suppress_instrumentation():
        assert both() == (False, False)
    with suppress_http_instrumentation():
        assert both() == (True, False)
    token = c.suppress_http()
    try:
        assert both() == (True, False)
    finally:
        c.detach_safe(token)
    assert both() == (True, True)


def test_active_http_context_is_active_http(monkeypatch: pytest.MonkeyPatch) -> None:
    def check() -> bool:
        ctx = c.active_http_context()
        assert (ctx is not None) == c.active_http()
        assert ctx is None or ctx is otel_context.get_current()
        return ctx is not None

    assert check()  # the empty context: falsy, but not None
    for kind in ("baggage", "other value"):
        token = otel_context.attach(_context(kind))
        try:
            assert check()
        finally:
            otel_context.detach(token)
    with suppress_instrumentation():
        assert not check()
    with suppress_http_instrumentation():
        assert not check()
    monkeypatch.setattr(c, "_FORKED", True)
    assert not check()


@pytest.mark.parametrize("current", ["empty", "baggage", "other value", "empty baggage"])
@pytest.mark.parametrize("pass_ctx", [False, True], ids=["ctx-read-inside", "ctx-passed"])
def test_suppress_http_attaches_the_current_context_plus_the_key(current: str, pass_ctx: bool) -> None:
    outer = otel_context.attach(_context(current))
    try:
        before = otel_context.get_current()
        want = otel_context.set_value(c._SUPPRESS_HTTP_KEY, True)
        token = c.suppress_http(before if pass_ctx else None)
        try:
            got = otel_context.get_current()
            assert type(got) is type(want) and dict(got) == dict(want)
            assert not is_http_instrumentation_enabled()
        finally:
            c.detach_safe(token)
        assert otel_context.get_current() is before
        assert dict(before) == dict(_context(current))  # the shared suppressed context is untouched
    finally:
        otel_context.detach(outer)


def test_forcing_id_generator_delegates_as_the_plain_methods() -> None:
    from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator

    class Fixed(IdGenerator):
        def generate_trace_id(self) -> int:
            return 5

        def generate_span_id(self) -> int:
            return 7

    class Falsy(RandomIdGenerator):
        def is_trace_id_random(self) -> bool:
            return 0  # type: ignore[return-value]

    class Bare:
        def generate_trace_id(self) -> int:
            return 9

        def generate_span_id(self) -> int:
            return 11

    random = c.ForcingIdGenerator(RandomIdGenerator())
    assert random.is_trace_id_random() is True
    assert 0 < random.generate_trace_id() < 2**128 and 0 < random.generate_span_id() < 2**64
    fixed = c.ForcingIdGenerator(Fixed())
    assert (fixed.generate_trace_id(), fixed.generate_span_id(), fixed.is_trace_id_random()) == (5, 7, False)
    assert c.ForcingIdGenerator(Falsy()).is_trace_id_random() is False
    bare = c.ForcingIdGenerator(Bare())
    assert (bare.generate_trace_id(), bare.generate_span_id(), bare.is_trace_id_random()) == (9, 11, False)
    token = c._FORCED_SPAN_ID.set(0xABC)
    try:
        assert fixed.generate_span_id() == 0xABC  # forced once
        assert fixed.generate_span_id() == 7
    finally:
        c._FORCED_SPAN_ID.reset(token)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_is_silent_without_asking_getpid() -> None:
    c.set_owner_pid()
    assert c.active() and not c.in_forked_child()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave at once
        try:
            os.write(w, f"{int(c.active())}{int(c.active_http())}{int(c.in_forked_child())}".encode())
        finally:
            os._exit(0)
    os.close(w)
    answer = os.read(r, 16)
    os.close(r)
    os.waitpid(pid, 0)
    assert answer == b"001"
    assert c.active()  # the parent is unaffected


# --------------------------------------------------------------------------- fma.vllm.startup

_VOLATILE = {model.A_VLLM_PID, model.A_VLLM_POLLS, model.A_VLLM_HEALTHY_AT, model.A_END_PRECISION}


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every create's ``start`` through ``_plan_startup`` (the path used before)."""
    monkeypatch.setattr(
        LauncherInstrumentor, "_order_startup", lambda self, instance, st: self._plan_startup(instance)
    )


def _two_creates(launcher: Any, headers: dict[str, str] | None) -> tuple[Tracing, dict[str, dict[str, Any]]]:
    """Two creates (same trace when ``headers`` carry a traceparent); per instance: its
    create span, its startup span, and the TRACEPARENT its child was given."""
    tracing = Tracing()
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    ports: dict[str, int] = {}
    envs: dict[str, str] = {}
    try:
        with TestClient(launcher.app) as client:
            for iid in ("s1", "s2"):
                ports[iid] = port = free_port()
                r = client.put(f"/v2/vllm/instances/{iid}", json=_config(port), headers=headers or {})
                assert r.status_code == 201
            assert wait_until(lambda: len(tracing.spans(STARTUP_SPAN)) == 2, 10)
            for iid, port in ports.items():
                envs[iid] = httpx.get(f"http://127.0.0.1:{port}/debug/env", timeout=2).json()["TRACEPARENT"]
            for iid in ports:
                client.delete(f"/v2/vllm/instances/{iid}")
    finally:
        inst.uninstrument()
    out: dict[str, dict[str, Any]] = {}
    for iid, port in ports.items():
        (create,) = [s for s in tracing.spans(CREATE_SPAN) if s.attributes["fma.instance.id"] == iid]
        (startup,) = [s for s in tracing.spans(STARTUP_SPAN) if s.attributes["fma.instance.id"] == iid]
        out[iid] = {"create": create, "startup": startup, "env": envs[iid], "port": port}
    return tracing, out


def _shape(found: dict[str, dict[str, Any]], joined: bool) -> list[Any]:
    """Everything about the startup spans that must not depend on which path made them."""
    shape = []
    for iid, f in sorted(found.items()):
        create, startup, port = f["create"], f["startup"], f["port"]
        sc = startup.context
        trace_hex = f"{sc.trace_id:032x}"
        # Start: the fork instant, taken on the create request while it was open.
        assert create.start_time <= startup.start_time <= create.end_time
        assert sc.trace_id == create.context.trace_id
        # The child's TRACEPARENT names exactly this span.
        assert f["env"] == f"00-{trace_hex}-{sc.span_id:016x}-{int(sc.trace_flags):02x}"
        attrs = {
            k: (v.replace(str(port), "PORT") if isinstance(v, str) else v)
            for k, v in startup.attributes.items()
            if k not in _VOLATILE
        }
        assert attrs.pop("server.port") == port
        if joined:
            parent = f"{startup.parent.span_id:016x}"
            ids = (trace_hex, f"{sc.span_id:016x}", parent)
        else:  # own trace per create: ids hang from its random trace, under the create span
            assert startup.parent.span_id == create.context.span_id
            assert f"{sc.span_id:016x}" == model.span_id_for(trace_hex, STARTUP_SPAN, 0)
            ids = ()
        shape.append(
            (iid, startup.name, startup.kind, ids, startup.status.status_code, sorted(attrs.items()))
        )
    return shape


@pytest.mark.parametrize("joined", [True, False], ids=["traceparent", "own-trace"])
def test_startup_ordered_on_the_request_equals_the_general_path(
    joined: bool, fake_launcher: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    headers = {"traceparent": f"00-{T}-{S}-01"} if joined else None
    _, fast = _two_creates(fake_launcher, headers)
    with monkeypatch.context() as m:
        _general_path(m)
        _, general = _two_creates(fake_launcher, headers)
    assert _shape(fast, joined) == _shape(general, joined)
    if joined:  # and both are the span model's ids: n counts the startups of the trace
        ready = model.span_id_for(T, "fma.vllm.ready", 0)
        assert [s[3] for s in _shape(fast, joined)] == [
            (T, model.span_id_for(T, STARTUP_SPAN, n), ready) for n in (0, 1)
        ]


class _Instance:
    instance_id = "i1"
    config = None


def test_order_startup_counts_per_request_and_falls_back(tracing: Tracing) -> None:
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        tracer = tracing.provider.get_tracer("t")
        span = tracer.start_span(CREATE_SPAN)
        trace_hex = f"{span.get_span_context().trace_id:032x}"
        st = L._RequestState(span, True, L.JOIN_NONE, "i1", "")
        first, second = inst._order_startup(_Instance(), st), inst._order_startup(_Instance(), st)
        assert isinstance(first, L._StartupOrder) and (first.n, second.n) == (0, 1)
        assert first.ids() == (trace_hex, model.span_id_for(trace_hex, STARTUP_SPAN, 0))
        assert second.ids() == (trace_hex, model.span_id_for(trace_hex, STARTUP_SPAN, 1))
        # No valid create span to hang from: the general path decides (and opens at once).
        bad = L._RequestState(trace.INVALID_SPAN, True, L.JOIN_NONE, "i1", "")
        assert isinstance(inst._order_startup(_Instance(), bad), L._StartupPlan)
        span.end()
    finally:
        inst.uninstrument()


def test_order_startup_needs_a_sampler_that_follows_the_parent() -> None:
    class Tracer:
        sampler = TraceIdRatioBased(0.5)

    class Parented:
        sampler = ALWAYS_ON

    assert not L._parent_based(Tracer())
    assert L._parent_based(Parented())


def _reference_startup_attrs(cfg: Any, iid: str) -> dict[str, Any]:
    """The startup span's attributes computed the plain way (options redacted on their own)."""
    import json

    from fma_otel.instrument.vllm_watch import instance_port

    options, annotations = getattr(cfg, "options", None), getattr(cfg, "annotations", None)
    attrs: dict[str, Any] = {
        model.A_INSTANCE: iid,
        model.A_START_SRC: "wrapper:fork",
        model.A_END_SRC: "wrapper:GET /health",
        model.A_LAG_RULE: "fma.vllm.ready end - fma.vllm.startup end",
    }
    port = instance_port(options, annotations)
    if port is not None:
        attrs["server.port"] = port
    if isinstance(options, str):
        attrs[model.A_VLLM_OPTIONS] = model.redact_options(options)
    if callable(getattr(cfg, "model_dump", None)):
        dumped = model.redact_structure(cfg.model_dump(exclude_none=True))
        attrs[model.A_VLLM_CONFIG] = json.dumps(dumped, separators=(",", ":"))
    if annotations and annotations.get("isc-name"):
        attrs[model.A_ISC] = annotations["isc-name"]
    return attrs


def test_startup_attributes_are_the_plain_computation(tracing: Tracing, fake_launcher: Any) -> None:
    class Plain:  # no model_dump: options and annotations only
        options = "--model m --hf-token=hf_SECRET --port 9001"
        annotations = {"isc-name": "isc"}

    configs = [
        fake_launcher.VllmConfig(**_config(8123)),
        fake_launcher.VllmConfig(options="--model m --api-key 'a b' --port=8200", env_vars={"K": "v"}),
        fake_launcher.VllmConfig(options="--model m", gpu_uuids=["GPU-1"]),
        Plain(),
        None,
    ]
    inst = LauncherInstrumentor()
    inst.instrument(
        tracer_provider=tracing.provider, pod_info=no_pod(), configure_sdk=False, skip_dep_check=True
    )
    try:
        tracer = tracing.provider.get_tracer("t")
        for cfg in configs:
            span, port = inst._open_startup(tracer, cfg, "i1", None, None, 1)
            span.end()
            want = _reference_startup_attrs(cfg, "i1")
            assert list(span.attributes.items()) == list(want.items())  # same values, same order
            assert port == want.get("server.port")
            text = repr(dict(span.attributes))
            assert not any(secret in text for secret in ("hunter2", "sk-TOPSECRET", "hf_SECRET", "a b"))
    finally:
        inst.uninstrument()
