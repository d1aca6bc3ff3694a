"""Plugins: packages that register their own results, and everything that goes with them.

A plugin is a module whose import registers theorems (``bounds.register``) and, through
``verify.api``, adapters, witnesses, refutation families, rate sweeps, choosers and
reproduced claims. fedbound's four papers are plugins in exactly this sense: they are
found through the same entry points (those of the ``fedbound`` distribution itself,
:func:`builtin`), as pytest's built-in plugins answer the same hooks as a third party's.
fedbound imports plugin modules named

* by the entry-point group ``fedbound.plugins`` of installed distributions
  (``[project.entry-points."fedbound.plugins"] name = "package.module"``);
* by the environment variable ``FEDBOUND_PLUGINS`` (comma-separated modules);
* on the command line (``fedbound --plugin MODULE ...``) or by :func:`load_plugins`.

A plugin that fails to import is reported in one line naming it; the others and the
built-in results still work. Every registry of ``verify`` loads the plugins on its first
use (:func:`ensure_loaded`), so a module that only reads a registry never imports a plugin
itself.
"""

from __future__ import annotations

import importlib
import os
import traceback
from importlib.metadata import entry_points

GROUP = "fedbound.plugins"
ENV = "FEDBOUND_PLUGINS"
#: the distribution whose entry points are the built-in plugins
DISTRIBUTION = "fedbound"
#: whether :func:`ensure_loaded` has run
_LOADED: list[bool] = []
#: modules named explicitly (--plugin, load_plugins(modules)): worker processes re-import them
_EXPLICIT: list[str] = []
#: modules that failed to import (reported once)
_FAILED: set[str] = set()


def _names(modules) -> list[tuple[str, str]]:
    """(module, where it was named) for every plugin to load, without repeats."""
    named = [(m, "--plugin") for m in modules]
    named += [(m.strip(), ENV) for m in os.environ.get(ENV, "").split(",") if m.strip()]
    named += [(ep.module, f"entry point {ep.name!r}") for ep in entry_points(group=GROUP)]
    seen: dict[str, str] = {}
    for module, where in named:
        seen.setdefault(module, where)
    return list(seen.items())


def load_plugins(modules=()) -> list[str]:
    """Import the plugins (module docstring) and ``modules``; return one message per plugin
    that failed to import (empty when all loaded). Importing a loaded module again is a
    no-op and a failure is reported once, so this can be called more than once."""
    for m in modules:
        if m not in _EXPLICIT:
            _EXPLICIT.append(m)
    errors = []
    for module, where in _names(list(modules)):
        if module in _FAILED:
            continue
        try:
            importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - a broken plugin must not stop the others
            _FAILED.add(module)
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            errors.append(f"plugin {module!r} ({where}) failed to load: {last}")
    return errors


def modules() -> list[str]:
    """Every plugin module that :func:`load_plugins` imports, by name (nothing is imported)."""
    return [module for module, _ in _names(_EXPLICIT)]


def builtin() -> list[str]:
    """The plugin modules that ship with fedbound: the entry points of its own distribution
    (nothing is imported)."""
    return [ep.module for ep in entry_points(group=GROUP)
            if getattr(ep.dist, "name", None) == DISTRIBUTION]


def ensure_loaded() -> None:
    """Load the plugins once, on the first use of a registry (a plugin that fails to import
    is a warning naming it)."""
    if not _LOADED:
        _LOADED.append(True)
        import warnings

        for message in load_plugins():
            warnings.warn(message, stacklevel=3)


def explicit() -> list[str]:
    """The modules named explicitly so far (to load in worker processes)."""
    return list(_EXPLICIT)
