"""In-process wrappers: live spans from the launcher and from DPC-side Python code.

``instrument()`` turns on all three instrumentations (launcher, httpx by DPC purpose,
``kubernetes`` client); ``uninstrument()`` restores every original.  Each one is also a
``BaseInstrumentor`` usable on its own.  See ``docs/wrappers.md``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from fma_otel.instrument.actuation import actuation

__all__ = ["actuation", "instrument", "uninstrument", "instrumentors"]


def instrumentors() -> list[Any]:
    """The singleton instrumentors, launcher first (imported lazily: fastapi is optional)."""
    out: list[Any] = []
    try:
        from fma_otel.instrument.launcher import LauncherInstrumentor

        out.append(LauncherInstrumentor())
    except ImportError:  # pragma: no cover - fastapi missing: DPC-side tools still work
        pass
    from fma_otel.instrument.httpx_dpc import HttpxDpcInstrumentor
    from fma_otel.instrument.k8s_client import KubernetesClientInstrumentor

    out += [HttpxDpcInstrumentor(), KubernetesClientInstrumentor()]
    return out


def instrument(**kwargs: Any) -> None:
    """Instrument everything that is importable; same kwargs as the instrumentors.

    Never raises: a part that cannot be instrumented is skipped (do no harm).
    """
    from fma_otel.instrument._common import logger

    for inst in instrumentors():
        try:
            if not inst.is_instrumented_by_opentelemetry:
                inst.instrument(**kwargs)
        except Exception:  # noqa: BLE001
            logger.warning("fma-otel: %s failed to instrument", type(inst).__name__, exc_info=True)


def uninstrument() -> None:
    """Remove every wrapper that ``instrument()`` installed."""
    from fma_otel.instrument._common import logger

    for inst in instrumentors():
        try:
            if inst.is_instrumented_by_opentelemetry:
                inst.uninstrument()
        except Exception:  # noqa: BLE001
            logger.warning("fma-otel: %s failed to uninstrument", type(inst).__name__, exc_info=True)


class _CallableModule(types.ModuleType):
    """This package, callable as :func:`instrument`.

    Why: ``fma_otel.instrument(...)`` is the documented call, resolved lazily by
    ``fma_otel.__getattr__``; but importing this package binds ``fma_otel.instrument`` to
    the package itself, so a second ``fma_otel.instrument()`` (after ``uninstrument()``,
    or once anything imported a wrapper module) called a module.
    """

    def __call__(self, **kwargs: Any) -> None:
        instrument(**kwargs)


sys.modules[__name__].__class__ = _CallableModule
