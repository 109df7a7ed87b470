"""The ``BaseInstrumentor`` of each of fma-otel's three wrappers (the
``opentelemetry_instrumentor`` entry points, ``opentelemetry-instrument``, manual use).

Why in a module of their own: ``opentelemetry.instrumentation.instrumentor`` imports
``packaging`` and the semantic-convention modules, about 1 MiB of objects in the launcher,
and ``fork()`` of every vLLM instance copies the page tables of all of it.  The wrappers
themselves are plain objects (``_common.Wrappers``) that ``import fma_otel.auto`` installs
without this module; each class here only drives one of them, so either way the same
wrappers are installed, once.  Each wrapper module still answers for its instrumentor's
name (``fma_otel.instrument.launcher.LauncherInstrumentor`` ...), importing this module
when that name is asked for.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from fma_otel.instrument._common import Wrappers
from fma_otel.instrument.httpx_dpc import HttpxDpcWrappers
from fma_otel.instrument.k8s_client import KubernetesClientWrappers
from fma_otel.instrument.launcher import LauncherWrappers

__all__ = ["HttpxDpcInstrumentor", "KubernetesClientInstrumentor", "LauncherInstrumentor"]


class _WrappersInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """A ``BaseInstrumentor`` whose ``_instrument``/``_uninstrument`` install and remove
    one ``Wrappers`` object; reading any other attribute reads that object's."""

    _wrappers: type[Wrappers]

    @property
    def wrappers(self) -> Wrappers:
        return self._wrappers()

    def instrumentation_dependencies(self) -> Collection[str]:
        return self.wrappers.instrumentation_dependencies()

    def _instrument(self, **kwargs: Any) -> None:
        self.wrappers.install(**kwargs)

    def _uninstrument(self, **kwargs: Any) -> None:
        self.wrappers.uninstall()

    @property
    def is_instrumented_by_opentelemetry(self) -> bool:
        """On when this instrumentor or ``instrument_all()`` (``import fma_otel.auto``)
        installed the wrappers."""
        return bool(super().is_instrumented_by_opentelemetry or self.wrappers.installed)

    def uninstrument(self, **kwargs: Any) -> Any:
        """Remove the wrappers, also when ``instrument_all()`` installed them before this
        class was imported (this instrumentor was then never asked to instrument)."""
        if not super().is_instrumented_by_opentelemetry and self.wrappers.installed:
            self.wrappers.uninstall()
            return None
        return super().uninstrument(**kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.wrappers, name)


class LauncherInstrumentor(_WrappersInstrumentor):
    """Instrument the FMA launcher (``fma_otel.instrument.launcher``).

    ``instrument(tracer_provider=None, pod_info=None, modules=None)``: ``pod_info``
    replaces the Kubernetes lookup (tests); ``modules`` names launcher modules to patch now
    instead of waiting for the app's first ASGI call.
    """

    _wrappers = LauncherWrappers


class HttpxDpcInstrumentor(_WrappersInstrumentor):
    """Wrap ``httpx.Client.send`` and ``httpx.AsyncClient.send`` by DPC purpose
    (``fma_otel.instrument.httpx_dpc``)."""

    _wrappers = HttpxDpcWrappers


class KubernetesClientInstrumentor(_WrappersInstrumentor):
    """Wrap ``kubernetes.client.rest.RESTClientObject.request``
    (``fma_otel.instrument.k8s_client``)."""

    _wrappers = KubernetesClientWrappers
