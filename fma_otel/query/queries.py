"""The TraceQL and PromQL equivalents of ``fma-otel slo``, for dashboards and ad-hoc use.

PromQL reads the collector's spanmetrics connector as configured in
``collector-config/otel-collector.yaml``: namespace ``traces.span.metrics``, histogram unit
seconds, so Prometheus sees ``traces_span_metrics_duration_seconds_bucket`` and
``traces_span_metrics_calls_total`` with the dimensions as labels (dots become
underscores: ``fma_metric``, ``fma_path``, ``k8s_namespace_name``, ``fma_complete``).

Two honest caveats, printed with the queries: spanmetrics buckets are not nearest-rank
percentiles (``histogram_quantile`` interpolates inside a bucket), and spanmetrics counts a
span when it *arrives*, so a backfilled batch lands at the time the bridge sent it.  For
exact historical windows use ``fma-otel slo`` against the trace store.
"""

from __future__ import annotations

from ..model import A_COMPLETE, A_METRIC, A_NAMESPACE, A_PATH, COLD_NO_FMA, METRICS, ROOT
from .slo_spec import HIT_RATES
from .stats import PERCENTILES

DURATION_BUCKET = "traces_span_metrics_duration_seconds_bucket"
CALLS = "traces_span_metrics_calls_total"


def prom_label(attribute: str) -> str:
    """The Prometheus label of a span attribute (the exporter's name translation)."""
    return attribute.replace(".", "_")


L_METRIC = prom_label(A_METRIC)
L_PATH = prom_label(A_PATH)
L_COMPLETE = prom_label(A_COMPLETE)


def promql_quantile(q: float, metric: str, rng: str = "$__rate_interval") -> str:
    """``histogram_quantile`` of one FMA metric per path, complete actuations only."""
    sel = f'{L_METRIC}="{metric}", {L_COMPLETE}!="false"'
    return f"histogram_quantile({q:g}, sum by (le, {L_PATH}) (rate({DURATION_BUCKET}{{{sel}}}[{rng}])))"


def promql_hit_rate(path: str, rng: str = "$__range") -> str:
    """Requesters on ``path`` over all FMA requesters (the baseline left out)."""
    num = f'sum(increase({CALLS}{{span_name="{ROOT}", {L_PATH}="{path}"}}[{rng}]))'
    den = f'sum(increase({CALLS}{{span_name="{ROOT}", {L_PATH}!="{COLD_NO_FMA}"}}[{rng}]))'
    return f"{num} / {den}"


def traceql_metric(metric: str, path: str | None = None) -> str:
    cond = f'span.{A_METRIC} = "{metric}"'
    if path:
        cond += f' && span.{A_PATH} = "{path}"'
    return "{ " + cond + " }"


def traceql_quantiles(metric: str) -> str:
    qs = ", ".join(f"{p / 100:g}" for p in PERCENTILES)
    return f"{traceql_metric(metric)} | quantile_over_time(duration, {qs}) by (span.{A_PATH})"


def render(window: str = "24h") -> str:
    """All queries as text: comments first, one query per line."""
    lines = [
        "# TraceQL (Tempo): the actuation traces, as `fma-otel slo --tempo` searches them",
        f'{{ name = "{ROOT}" }} | select(span.{A_PATH}, span.{A_COMPLETE}, span.{A_NAMESPACE})',
        "# TraceQL: one FMA metric on one path (Grafana Explore, a table of spans)",
        traceql_metric("T_actuation", "hot"),
        "# TraceQL: the slowest actuations (duration threshold; sort the table by duration)",
        "{ " + f'span.{A_METRIC} = "T_actuation" && duration > 30s' + " }",
        "# TraceQL metrics (Tempo's local-blocks; approximate log2 buckets), per FMA metric",
    ]
    lines += [traceql_quantiles(m) for m in METRICS]
    lines.append("# TraceQL metrics: requesters per path (hit-rate numerator and denominator)")
    lines.append(f'{{ name = "{ROOT}" }} | count_over_time() by (span.{A_PATH})')
    lines.append(f"# PromQL over spanmetrics ({DURATION_BUCKET}); time series, per path")
    for m in METRICS:
        for p in (50, 95, 99):
            lines.append(promql_quantile(p / 100, m))
    lines.append(f"# PromQL: the same over the whole window ({window}), a single figure per path")
    for m in METRICS:
        lines.append(promql_quantile(0.95, m, window).replace("rate(", "increase(", 1))
    lines.append("# PromQL: hit rates over FMA requesters in the window")
    for path, name in HIT_RATES.items():
        lines.append(f"# {name}")
        lines.append(promql_hit_rate(path, window))
    lines.append("# Caveats: spanmetrics counts spans on arrival (a backfill lands at once) and")
    lines.append("# histogram_quantile interpolates within buckets; `fma-otel slo` is exact.")
    return "\n".join(lines) + "\n"
