"""Trace-based SLO queries: read actuation traces back, summarize them, judge them.

The floors, each small and importable on its own:

- :mod:`.window`   time windows and duration strings (``24h``, RFC3339, ``250ms``);
- :mod:`.harvest`  keeps of the decoded spans only what the statistics need;
- :mod:`.sources`  where traces come from: an OTLP JSON file, Jaeger, Tempo;
- :mod:`.stats`    nearest-rank percentiles and hit rates;
- :mod:`.slo_spec` the YAML SLO spec and its verdicts;
- :mod:`.formats`  table, json (a contract), csv, clusterloader2 PerfData;
- :mod:`.queries`  the equivalent TraceQL and PromQL, for dashboards;
- :mod:`.dpc_metrics` the DPC's own ``fma_actuation_seconds`` histogram, as a cross-check.
"""

from __future__ import annotations


class QueryError(Exception):
    """Bad input (arguments, files, a server's answer): the CLI prints one line, exits 2."""
