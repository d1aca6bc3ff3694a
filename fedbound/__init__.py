"""fedbound: executable convergence theory for hierarchical, multi-level and anarchic
federated learning.

Three subpackages, imported on first use so that ``import fedbound`` stays light:

- :mod:`fedbound.bounds`: the published results as symbolic objects (sympy, numpy);
- :mod:`fedbound.sim`: the vectorised torch simulator of every algorithm;
- :mod:`fedbound.verify`: checks, searches, choosers, reproductions, reports and the
  public extension API (:mod:`fedbound.verify.api`).

>>> from fedbound import bounds
>>> bounds.get("mllsgd.theorem1").variant
'proof'

Every result, fedbound's own papers' included, is registered by a plugin. This root, above
both subpackages, connects them: it gives the registry of ``bounds`` the plugin loader of
``verify`` (:func:`_load_plugins`), which the registry calls on its first lookup, so that
``bounds`` finds the papers' results without importing ``verify``.
"""

import importlib

from .bounds import registry as _registry

_SUBPACKAGES = ("bounds", "sim", "verify")


def _load_plugins() -> None:
    """Load the plugins (the entry points of ``fedbound.plugins``, ``FEDBOUND_PLUGINS``):
    :func:`fedbound.verify.plugins.ensure_loaded`."""
    from .verify import plugins

    plugins.ensure_loaded()


_registry.add_loader(_load_plugins)


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    if name == "__version__":  # read on first use: importlib.metadata takes a while to import
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("fedbound")
        except PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
            return "0+unknown"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_SUBPACKAGES})


__all__ = ["__version__", "bounds", "sim", "verify"]
