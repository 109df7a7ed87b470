"""In-process wrappers: live spans from the launcher and from DPC-side Python code.

``instrument_all()`` turns on all three instrumentations (launcher, httpx by DPC purpose,
``kubernetes`` client); ``uninstrument_all()`` restores every original.  Each one is also a
``BaseInstrumentor`` usable on its own.  The SDK is configured by the configurator
(``fma_otel.instrument.configurator``), not here.  See ``docs/wrappers.md``.
"""

from __future__ import annotations

from typing import Any

from fma_otel.instrument.actuation import actuation

__all__ = ["actuation", "instrument_all", "uninstrument_all", "instrumentors"]


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


def instrument_all(**kwargs: Any) -> None:
    """Instrument everything that is importable; same kwargs as the instrumentors.

    Each instrumentor checks the version of what it wraps on the module itself, once it is
    imported (``_common.dependency_met``), so the package-metadata check is skipped unless
    the caller asks for it (``skip_dep_check=False``): it would cache the whole
    site-packages listing in the launcher, which every fork then copies.
    Never raises: a part that cannot be instrumented is skipped (do no harm).
    """
    from fma_otel.instrument._common import logger

    kwargs.setdefault("skip_dep_check", True)
    for inst in instrumentors():
        try:
            if not inst.is_instrumented_by_opentelemetry:
                inst.instrument(**kwargs)
        except Exception:  # noqa: BLE001
            logger.warning("fma-otel: %s failed to instrument", type(inst).__name__, exc_info=True)


def uninstrument_all() -> None:
    """Remove every wrapper that ``instrument_all()`` installed."""
    from fma_otel.instrument._common import logger

    for inst in instrumentors():
        try:
            if inst.is_instrumented_by_opentelemetry:
                inst.uninstrument()
        except Exception:  # noqa: BLE001
            logger.warning("fma-otel: %s failed to uninstrument", type(inst).__name__, exc_info=True)
