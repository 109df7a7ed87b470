"""In-process wrappers: live spans from the launcher and from DPC-side Python code.

``instrument_all()`` turns on all three instrumentations (launcher, httpx by DPC purpose,
``kubernetes`` client); ``uninstrument_all()`` restores every original.  Each one is also a
``BaseInstrumentor`` usable on its own (``fma_otel.instrument.base_instrumentors``).  The SDK is
configured by the configurator (``fma_otel.instrument.configurator``), not here.  See
``docs/wrappers.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from fma_otel.instrument.actuation import actuation

__all__ = ["actuation", "instrument_all", "uninstrument_all", "instrumentors", "wrappers"]

_INSTRUMENTORS = "fma_otel.instrument.base_instrumentors"


def wrappers() -> list[Any]:
    """The three ``_common.Wrappers`` objects, launcher first (imported lazily: fastapi is
    optional), without importing ``BaseInstrumentor``."""
    out: list[Any] = []
    try:
        from fma_otel.instrument.launcher import LauncherWrappers

        out.append(LauncherWrappers())
    except ImportError:  # pragma: no cover - fastapi missing: DPC-side tools still work
        pass
    from fma_otel.instrument.httpx_dpc import HttpxDpcWrappers
    from fma_otel.instrument.k8s_client import KubernetesClientWrappers

    return out + [HttpxDpcWrappers(), KubernetesClientWrappers()]


def instrumentors() -> list[Any]:
    """The singleton ``BaseInstrumentor`` of each of ``wrappers()``, launcher first."""
    from fma_otel.instrument import base_instrumentors as i

    classes = (i.LauncherInstrumentor, i.HttpxDpcInstrumentor, i.KubernetesClientInstrumentor)
    return [cls() for cls in classes]


def instrument_all(**kwargs: Any) -> None:
    """Instrument everything that is importable; same kwargs as the instrumentors.

    Each wrapper checks the version of what it wraps on the module itself, once it is
    imported (``_common.dependency_met``), so the package-metadata check is skipped unless
    the caller asks for it (``skip_dep_check=False``): it would cache the whole
    site-packages listing in the launcher, which every fork then copies.  For the same
    reason the wrappers are installed directly, without their ``BaseInstrumentor``s, unless
    those are already imported (then through them, so that their state stays theirs) or
    the metadata check is asked for.
    Never raises: a part that cannot be instrumented is skipped (do no harm).
    """
    kwargs.setdefault("skip_dep_check", True)
    if _INSTRUMENTORS in sys.modules or not kwargs["skip_dep_check"]:
        _each(
            "instrument",
            instrumentors(),
            lambda i: None if i.is_instrumented_by_opentelemetry else i.instrument(**kwargs),
        )
        return
    kwargs.pop("skip_dep_check")
    kwargs.pop("raise_exception_on_conflict", None)
    _each("instrument", wrappers(), lambda w: w.install(**kwargs))


def uninstrument_all() -> None:
    """Remove every wrapper that ``instrument_all()`` (or an instrumentor) installed."""
    if _INSTRUMENTORS in sys.modules:
        _each(
            "uninstrument", instrumentors(), lambda i: i.is_instrumented_by_opentelemetry and i.uninstrument()
        )
    else:
        _each("uninstrument", wrappers(), lambda w: w.uninstall())


def _each(verb: str, parts: list[Any], act: Callable[[Any], object]) -> None:
    """``act`` on each part; one that raises is logged and skipped (do no harm)."""
    from fma_otel.instrument._common import logger

    for part in parts:
        try:
            act(part)
        except Exception:  # noqa: BLE001
            logger.warning("fma-otel: %s failed to %s", type(part).__name__, verb, exc_info=True)
