"""Where actuation traces come from: an OTLP JSON lines file, Jaeger, or Tempo.

Every source feeds one :class:`~.harvest.Harvest`; none of them assumes which service a span
was filed under (the bridge files spans under ``kubernetes``, ``dual-pods-controller`` or
``fma-launcher`` by who observed their end), so remote stores are searched by span *name*:
the root ``fma.request`` that every actuation trace has.

Result limits are met by splitting the time window in halves until each part is under the
limit (neither Jaeger nor Tempo pages its search), and traces seen twice are idempotent.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import httpx

from .. import jsonsafe
from ..errtext import hide_credentials, one_line, safe_url
from ..model import ROOT
from ..sinks.otlp_json import MALFORMED, OtlpJsonError
from . import QueryError
from .harvest import METRIC_OF_SPAN, Harvest
from .readers import read_spans, skipped_note
from .window import Window, rfc3339, to_ns

#: remote stores need explicit bounds; without --since, look back this far
DEFAULT_LOOKBACK_S = 24 * 3600.0
#: the most one HTTP request may take, first byte sent to last byte read (monotonic)
DEFAULT_DEADLINE_S = 60.0
#: the largest answer body one HTTP request may return
DEFAULT_MAX_BODY = 256 * 2**20
Warn = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(f"fma-otel slo: warning: {msg}", file=sys.stderr)


# --------------------------------------------------------------------------- file


class FileSource:
    """A trace file (``-``: stdin): OTLP JSON lines, as the bridge and the collector's
    ``file`` exporter write them, or any other form :mod:`.readers` accepts."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lines = 0
        self.skipped = 0
        #: called with the size of each line read, for a progress bar (``slo --traces``)
        self.advance: Callable[[int], None] | None = None

    @property
    def description(self) -> str:
        return f"file:{self.path}"

    def fill(self, harvest: Harvest, window: Window, warn: Warn = _stderr) -> None:
        """Stream the file through the one reader (:mod:`.readers`: OTLP JSON lines,
        pretty-printed OTLP JSON, Jaeger JSON; ``-`` is stdin) into the harvest."""
        stats: dict[str, int] = {}
        try:
            for s in read_spans(self.path, stats, self.advance):
                harvest.add(s)
        except OtlpJsonError:
            raise QueryError(
                f"{self.path}: not OTLP JSON lines, OTLP JSON or Jaeger JSON (no trace in it)"
            ) from None
        except OSError as exc:
            raise QueryError(f"{self.path}: {exc.strerror or exc}") from None
        self.lines = stats.get("lines", 0)
        self.skipped = stats.get("skipped", 0)
        note = skipped_note(self.path, stats)
        if note:
            warn(note)


# --------------------------------------------------------------------------- http


class _Remote:
    """A trace store over HTTP: its URL, the search page size (``limit``, else the store's
    ``LIMIT``), and JSON requests whose errors are one line each.

    Each request has an overall deadline (``deadline_s``, monotonic): the per-read timeout
    alone never ends a server that trickles its answer a byte at a time.  The answer is
    streamed, the deadline checked after every chunk and each phase's timeout capped at the
    time left when the request starts; a body bigger than ``max_body`` bytes is refused.
    """

    what = ""
    LIMIT = 0
    TIMEOUT_S = 30.0  # of each phase (connect, read, write, pool); never past the deadline

    def __init__(
        self,
        base: str,
        limit: int | None = None,
        deadline_s: float | None = None,
        max_body: int | None = None,
    ) -> None:
        #: the URL as errors and the report's ``source`` show it (errtext.safe_url): a
        #: Jaeger's or Tempo's URL may carry credentials, and the one-line errors go to
        #: logs and CI output
        self.shown = safe_url(base.rstrip("/"))
        if not base.startswith(("http://", "https://")):
            raise QueryError(f"--{self.what} {self.shown}: not an http(s) URL")
        try:  # httpx.InvalidURL (``http://[::1``) is no httpx.HTTPError: checked up front
            httpx.URL(base)
        except (httpx.InvalidURL, ValueError) as exc:
            raise QueryError(
                f"--{self.what} {self.shown}: not a valid URL: {hide_credentials(one_line(exc), base)}"
            ) from None
        self.base = base.rstrip("/")
        self.client = httpx.Client(headers={"Accept": "application/json"})
        # read at construction, not import: a test may set the module's defaults
        self.deadline_s = DEFAULT_DEADLINE_S if deadline_s is None else deadline_s
        self.max_body = DEFAULT_MAX_BODY if max_body is None else max_body
        self.limit = limit or self.LIMIT

    def _late(self, url: str) -> QueryError:
        return QueryError(
            f"--{self.what} {safe_url(url)}: no complete answer within the {self.deadline_s:g} s deadline"
        )

    def _fetch(self, url: str, params: dict[str, Any] | None) -> tuple[int, bytes]:
        """The status and the whole body, within the deadline and the size cap."""
        deadline = time.monotonic() + self.deadline_s
        cap = self.max_body
        try:
            with self.client.stream(
                "GET", url, params=params, timeout=min(self.TIMEOUT_S, max(self.deadline_s, 0.001))
            ) as resp:
                declared = resp.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > cap:
                    raise _too_big(self.what, url, cap)
                chunks: list[bytes] = []
                size = 0
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > cap:
                        raise _too_big(self.what, url, cap)
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise self._late(url)
                return resp.status_code, b"".join(chunks)
        except httpx.TimeoutException as exc:
            if time.monotonic() >= deadline - 0.01:  # a phase's timeout was the time left
                raise self._late(url) from None
            raise QueryError(
                f"--{self.what} {self.shown}: {type(exc).__name__}: {hide_credentials(str(exc), url)}"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # InvalidURL: a path a server named
            raise QueryError(
                f"--{self.what} {self.shown}: {type(exc).__name__}: {hide_credentials(str(exc), url)}"
            ) from None

    def get(self, path: str, params: dict[str, Any] | None = None) -> tuple[int, Any]:
        """``(404, None)``, or ``(200, the answer)``: always a JSON object, as every endpoint
        we call answers one, so callers may ``.get`` it (anything else is a QueryError)."""
        url = self.base + path
        status, raw = self._fetch(url, params)
        if status == 404:
            return 404, None
        try:
            # not json.loads alone: the RecursionError of deep nesting is no ValueError
            body = jsonsafe.loads(raw)
        except ValueError:
            body = None
        if status != 200:
            text = raw.decode("utf-8", "replace")
            msg = _error_message(body) or next(iter(text.strip().splitlines()), "")[:200]
            raise QueryError(f"--{self.what} {safe_url(url)}: HTTP {status}: {msg}")
        if body is None:
            raise QueryError(f"--{self.what} {safe_url(url)}: the answer is not JSON")
        if not isinstance(body, dict):
            raise QueryError(f"--{self.what} {safe_url(url)}: the answer is not a JSON object")
        return 200, body

    def _split_search(
        self,
        find: Callable[[Any, Any, int], tuple[int, list[Any]]],
        start: Any,
        end: Any,
        halves: Callable[[Any, Any], tuple[tuple[Any, Any], tuple[Any, Any]] | None],
        where: Callable[[Any, Any], str],
        warn: Warn,
    ) -> Iterator[Any]:
        """The results of ``find`` over ``[start, end]``; a window that fills the limit is
        split in ``halves`` (``None``: too small to split).

        Neither store pages its search, and many requesters can share one creation second,
        so a window too small to split that still fills the limit is asked again with a
        doubled limit (up to 64 times it).
        """
        stack = [(start, end, self.limit)]
        while stack:
            a, b, limit = stack.pop()
            n, results = find(a, b, limit)
            if n >= limit:
                parts = halves(a, b)
                if parts is not None:
                    stack.extend((x, y, limit) for x, y in parts)
                    continue
                if limit < 64 * self.limit:
                    stack.append((a, b, limit * 2))
                    continue
                warn(f"{self.shown}: {n} traces in {where(a, b)}; some may be missing")
            yield from results


def _too_big(what: str, url: str, cap: int) -> QueryError:
    size = f"{cap // 2**20} MiB" if cap >= 2**20 and cap % 2**20 == 0 else f"{cap} bytes"
    return QueryError(f"--{what} {safe_url(url)}: the answer is larger than {size}")


def _items(body: Any, key: str, kind: type) -> list[Any]:
    """The elements of type ``kind`` of the list ``body[key]`` (none when it is no list).

    A server's odd element (a number where a service name belongs) is left out, rather than
    stopping the query with a traceback a few calls later.
    """
    v = body.get(key) if isinstance(body, dict) else None
    return [x for x in v if isinstance(x, kind)] if isinstance(v, list) else []


def _error_message(body: Any) -> str:
    if isinstance(body, dict):
        err = body.get("error") or body.get("errors")
        if isinstance(err, dict):
            return str(err.get("message", err))
        if isinstance(err, list) and err:
            return str(err[0].get("msg", err[0]) if isinstance(err[0], dict) else err[0])
        if err:
            return str(err)
    return ""


# --------------------------------------------------------------------------- Jaeger


class JaegerSource(_Remote):
    """Jaeger's query service: api/v3 (OTLP JSON), falling back to the v1 ``/api/traces``.

    api/v3's FindTraces needs a service name, so every service is asked which operations
    it has, and each service that has ``fma.request`` is searched for it (or, where no
    service has a root, for the spans that carry FMA metrics).
    """

    what = "jaeger"
    LIMIT = 1000
    MIN_WINDOW = timedelta(milliseconds=1)  # the shortest stretch a search is split down to
    api = "v3"  # until /api/v3 answers 404: then "v1"

    @property
    def description(self) -> str:
        return f"jaeger:{self.shown} (api/{self.api})"

    def fill(self, harvest: Harvest, window: Window, warn: Warn = _stderr) -> None:
        start, end = window.closed(DEFAULT_LOOKBACK_S)
        status, body = self.get("/api/v3/services")
        if status == 404:
            self.api = "v1"
            status, body = self.get("/api/services")
            if status == 404:
                raise QueryError(f"--jaeger {self.shown}: neither /api/v3/services nor /api/services answers")
        v3 = self.api == "v3"
        services = [s for s in _items(body, "services" if v3 else "data", str) if s]
        find = self._find_v3 if v3 else self._find_v1
        for svc, op in self._targets(services, self._v3_operations if v3 else self._v1_operations):
            for r in self._split_search(
                functools.partial(find, svc, op), start, end, self._halves, _span_text, warn
            ):
                harvest.add_otlp(r)  # OTLP JSON (v3) or a Jaeger trace (v1); malformed: counted

    def _targets(self, services: list[str], operations: Callable[[str], list[str]]) -> list[tuple[str, str]]:
        ops = {svc: set(operations(svc)) for svc in services}
        roots = [(svc, ROOT) for svc in services if ROOT in ops[svc]]
        if roots:
            return roots
        return [(svc, name) for svc in services for name in sorted(ops[svc] & set(METRIC_OF_SPAN))]

    def _v3_operations(self, service: str) -> list[str]:
        status, body = self.get("/api/v3/operations", {"service": service})
        if status == 404 or not body:
            return []
        return [o["name"] for o in _items(body, "operations", dict) if isinstance(o.get("name"), str)]

    def _find_v3(
        self, service: str, op: str, start: datetime, end: datetime, limit: int
    ) -> tuple[int, list[dict[str, Any]]]:
        params = {
            "query.service_name": service,
            "query.operation_name": op,
            "query.start_time_min": rfc3339(start),
            "query.start_time_max": rfc3339(end),
            "query.search_depth": limit,
            "query.num_traces": limit,
        }
        status, body = self.get("/api/v3/traces", params)
        if status == 404 or not body:  # Jaeger answers 404 "No traces found"
            return 0, []
        result = body.get("result", body)
        results = result if isinstance(result, list) else [result]
        return len(_trace_ids(results)), results

    def _v1_operations(self, service: str) -> list[str]:
        status, body = self.get(f"/api/services/{service}/operations")
        return [] if status == 404 or not body else _items(body, "data", str)

    def _find_v1(
        self, service: str, op: str, start: datetime, end: datetime, limit: int
    ) -> tuple[int, list[dict[str, Any]]]:
        params = {
            "service": service,
            "operation": op,
            "start": to_ns(start) // 1000,
            "end": to_ns(end) // 1000,
            "limit": limit,
        }
        status, body = self.get("/api/traces", params)
        if status == 404 or not body:
            return 0, []
        traces = body.get("data")
        if not isinstance(traces, list):
            return 0, []
        return len(traces), traces

    def _halves(self, a: datetime, b: datetime) -> tuple[tuple[datetime, datetime], ...] | None:
        mid = a + (b - a) / 2
        return ((a, mid), (mid, b)) if b - a > self.MIN_WINDOW else None


def _span_text(a: datetime, b: datetime) -> str:
    return f"{rfc3339(a)}..{rfc3339(b)}"


def _trace_ids(results: list[Any]) -> set[Any]:
    """The trace ids in OTLP JSON results, only to tell whether a search filled its limit.

    A result malformed where this looks adds none (:meth:`Harvest.add_otlp` counts it).
    """
    ids: set[Any] = set()
    for r in results:
        try:
            for rs in r.get("resourceSpans") or ():
                for ss in rs.get("scopeSpans") or ():
                    for sp in ss.get("spans") or ():
                        ids.add(sp.get("traceId"))
        except MALFORMED:
            continue
    return ids


# --------------------------------------------------------------------------- Tempo


class TempoSource(_Remote):
    """Grafana Tempo: TraceQL ``/api/search`` for the roots, then each trace by id.

    Search times are whole seconds; trace bodies come back in Tempo's OTLP JSON with
    base64 ids, which :func:`~fma_otel.sinks.otlp_json.normalize_id` turns into hex.
    """

    QUERY = "{ " + f'name = "{ROOT}"' + " }"

    what = "tempo"
    LIMIT = 500
    WORKERS = 8  # traces fetched by id at once
    _by_id_path: str | None = None  # the by-id endpoint this Tempo has, once the first fetch says

    @property
    def description(self) -> str:
        return f"tempo:{self.shown}"

    def fill(self, harvest: Harvest, window: Window, warn: Warn = _stderr) -> None:
        start, end = window.closed(DEFAULT_LOOKBACK_S)
        ids = list(
            self._search_ids(int(to_ns(start) // 1_000_000_000), -(-to_ns(end) // 1_000_000_000), warn)
        )
        if not ids:
            return
        first = self._trace(ids[0])  # settles which by-id endpoint this Tempo has
        with ThreadPoolExecutor(max_workers=self.WORKERS) as pool:
            for answer in itertools.chain([first], pool.map(self._trace, ids[1:])):
                if answer is not None:
                    harvest.add_otlp(answer)

    def _search_ids(self, start: int, end: int, warn: Warn) -> Iterator[str]:
        def find(a: int, b: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
            params = {"q": self.QUERY, "start": a, "end": b, "limit": limit, "spss": 1}
            traces = _items(self.get("/api/search", params)[1], "traces", dict)
            return len(traces), traces

        def halves(a: int, b: int) -> tuple[tuple[int, int], tuple[int, int]] | None:
            return ((a, (a + b) // 2), ((a + b) // 2, b)) if b - a > 1 else None

        seen: set[str] = set()
        for t in self._split_search(find, start, end, halves, lambda a, b: f"one second at {a}", warn):
            tid = str(t.get("traceID", ""))
            key = tid.lower().zfill(32)
            if tid and key not in seen:
                seen.add(key)
                yield tid

    def _trace(self, trace_id: str) -> dict[str, Any] | None:
        """A trace by id: ``/api/v2/traces`` (Tempo >= 2.5), else ``/api/traces``; the
        answer as it came (``{"trace": ...}``, or ``{"batches": ...}`` before 2.5)."""
        paths = [self._by_id_path] if self._by_id_path else ["/api/v2/traces/", "/api/traces/"]
        for p in paths:
            status, body = self.get(p + trace_id)
            if status == 404:
                continue
            if self._by_id_path is None:
                self._by_id_path = p
            return body
        return None


Source = FileSource | JaegerSource | TempoSource
