"""``/healthz`` and ``/metrics`` (Prometheus text exposition format 0.0.4), stdlib only.

A watcher that silently stops watching is the failure that matters, so health is not "the
process is up" but "the main loop ticked recently and the Pod watch is connected"; the
Deployment's liveness probe restarts it otherwise.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Metrics:
    """Counters and gauges; ``render`` writes the text format."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.emitted = {"true": 0, "false": 0}  # by fma.complete
        self.spans = 0
        self.export_errors = 0
        self.export_dropped = 0  # traces refused by the sink's screen (cannot be encoded)
        self.export_isolated = 0  # traces whose export failed alone: retried alone
        self.dpc_skipped = 0  # DPC lines skipped: by the parser, or refused by the correlator
        self.launcher_skipped = 0  # launcher lines skipped (iter_launcher_log's skips)
        self.checkpoints = 0
        self.pod_events = 0
        self.odd_pods = 0
        self.uid_conflicts = 0  # Pod states refused: their uid is another Pod's
        self.dpc_records = 0
        self.launcher_records = 0
        self.log_gaps = 0
        self.open_actuations = 0
        self.export_lag_s = 0.0  # now - R.ready of the last emitted complete actuation
        self.ready_to_export_sum = 0.0
        self.ready_to_export_count = 0
        self.ready_to_export_max = 0.0
        self.last_tick = 0.0
        self.extra: Callable[[], dict[str, float]] | None = None  # stream counters, read live

    def count(self, name: str) -> None:
        """One more of counter ``name``, from any thread."""
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)

    def observe_ready_to_export(self, seconds: float) -> None:
        with self.lock:
            self.ready_to_export_sum += seconds
            self.ready_to_export_count += 1
            self.ready_to_export_max = max(self.ready_to_export_max, seconds)

    def render(self) -> str:
        out: list[str] = []
        with self.lock:
            for name, kind, help_, samples in _METRICS:
                out.append(f"# HELP {name} {help_}")
                out.append(f"# TYPE {name} {kind}")
                for labels, value in samples(self):
                    out.append(
                        f"{name}{labels} {value:g}" if isinstance(value, float) else f"{name}{labels} {value}"
                    )
            extra = self.extra() if self.extra else {}
        for name, value in sorted(extra.items()):
            out.append(f"# TYPE {name.split('{')[0]} counter")
            out.append(f"{name} {value}")
        return "\n".join(out) + "\n"


def _one(attr: str, digits: int | None = None) -> Callable[[Metrics], list[tuple[str, float]]]:
    """The one unlabelled sample of a metric: the attribute ``attr`` (rounded to ``digits``)."""
    return lambda m: [("", getattr(m, attr) if digits is None else round(getattr(m, attr), digits))]


#: name, type, help and samples of each metric, in the order ``/metrics`` lists them
_METRICS: tuple[tuple[str, str, str, Callable[[Metrics], list[tuple[str, float]]]], ...] = (
    (
        "fma_otel_actuations_emitted_total",
        "counter",
        "Actuation traces emitted, by completeness.",
        lambda m: [(f'{{complete="{k}"}}', v) for k, v in sorted(m.emitted.items())],
    ),
    (
        "fma_otel_actuations_incomplete_total",
        "counter",
        "Actuations emitted as incomplete (--incomplete-after reached).",
        lambda m: [("", m.emitted["false"])],
    ),
    ("fma_otel_actuations_open", "gauge", "Actuations seen and not yet emitted.", _one("open_actuations")),
    ("fma_otel_spans_emitted_total", "counter", "Spans emitted.", _one("spans")),
    (
        "fma_otel_export_lag_seconds",
        "gauge",
        "Time from the requester's Ready (1 s precision) to the export of its trace, last actuation.",
        _one("export_lag_s", 6),
    ),
    (
        "fma_otel_ready_to_export_seconds",
        "summary",
        "Time from receiving the requester's Ready event to exporting its trace.",
        lambda m: [("_sum", round(m.ready_to_export_sum, 6)), ("_count", m.ready_to_export_count)],
    ),
    (
        "fma_otel_ready_to_export_seconds_max",
        "gauge",
        "Largest Ready-event-to-export time seen.",
        _one("ready_to_export_max", 6),
    ),
    ("fma_otel_export_errors_total", "counter", "Failed OTLP exports.", _one("export_errors")),
    (
        "fma_otel_export_dropped_traces_total",
        "counter",
        "Traces not exported because a span cannot be encoded as OTLP.",
        _one("export_dropped"),
    ),
    (
        "fma_otel_export_isolated_traces",
        "gauge",
        "Traces whose export failed on its own, retried alone so others go on.",
        _one("export_isolated"),
    ),
    (
        "fma_otel_dpc_lines_skipped_total",
        "counter",
        "DPC log lines skipped: corrupt or cut lines, and records the correlator refused (a bad or out-of-window time, a bad field).",
        _one("dpc_skipped"),
    ),
    (
        "fma_otel_launcher_lines_skipped_total",
        "counter",
        "Launcher log lines skipped as the bridge skips them (a bad or out-of-window time, no time).",
        _one("launcher_skipped"),
    ),
    ("fma_otel_checkpoint_writes_total", "counter", "Checkpoint writes.", _one("checkpoints")),
    ("fma_otel_pod_events_total", "counter", "Pod states received.", _one("pod_events")),
    ("fma_otel_odd_pods_total", "counter", "Pods the correlator could not use.", _one("odd_pods")),
    (
        "fma_otel_pod_uid_conflicts_total",
        "counter",
        "Pod states refused because another Pod (name, namespace) has their uid.",
        _one("uid_conflicts"),
    ),
    (
        "fma_otel_log_records_total",
        "counter",
        "Log records handed to the correlator.",
        lambda m: [('{source="dpc"}', m.dpc_records), ('{source="launcher"}', m.launcher_records)],
    ),
    ("fma_otel_log_gaps_total", "counter", "Log stretches known lost.", _one("log_gaps")),
    ("fma_otel_last_tick_timestamp_seconds", "gauge", "Last main-loop tick.", _one("last_tick", 3)),
)


class MetricsPortError(ValueError):
    """The metrics port cannot be listened on (in use, not allowed): an unusable argument,
    which ``watch`` reports in one line with exit 2, not a traceback."""


class MetricsServer:
    """Serves ``/metrics``, ``/healthz`` (liveness) and ``/readyz`` on a port (0 = ephemeral)."""

    def __init__(
        self, metrics: Metrics, port: int, healthy: Callable[[], tuple[bool, str]], host: str = "0.0.0.0"
    ):
        self.metrics = metrics
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path.startswith("/metrics"):
                    body, code, ctype = outer.metrics.render().encode(), 200, "text/plain; version=0.0.4"
                elif self.path.startswith(("/healthz", "/livez", "/readyz")):
                    ok, why = healthy()
                    body, code, ctype = (why or "ok").encode() + b"\n", 200 if ok else 503, "text/plain"
                else:
                    body, code, ctype = b"not found\n", 404, "text/plain"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise MetricsPortError(
                f"--metrics-port {port}: cannot listen on {host}:{port} ({exc.strerror or exc}); "
                "choose another port, or -1 for none"
            ) from None
        self.server.daemon_threads = True
        # a stop is noticed within 50 ms (serve_forever's default 0.5 s held every watcher
        # shutdown that long)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, name="metrics", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def start(self) -> MetricsServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
