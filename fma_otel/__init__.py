"""fma-otel: OpenTelemetry traces of llm-d Fast Model Actuation.

The in-process wrappers live in the package ``fma_otel.instrument``
(``fma_otel.instrument.instrument_all()``); ``fma_otel.actuation`` is re-exported lazily
here so that ``import fma_otel`` stays cheap for the command-line tool.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "actuation": ("fma_otel.instrument.actuation", "actuation"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(name)
