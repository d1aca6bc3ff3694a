"""Plugins: packages that register their own results (theorems and adapters).

A plugin is a module whose import registers theorems (``bounds.register``), adapters
(``verify.api.register_adapter``) and, optionally, a directory of witnesses. fedbound
imports plugin modules named

* by the entry-point group ``fedbound.plugins`` of installed distributions
  (``[project.entry-points."fedbound.plugins"] name = "package.module"``);
* by the environment variable ``FEDBOUND_PLUGINS`` (comma-separated modules);
* on the command line (``fedbound --plugin MODULE ...``) or by :func:`load_plugins`.

A plugin that fails to import is reported in one line naming it; the others and the
built-in results still work.
"""

from __future__ import annotations

import importlib
import os
import traceback
from importlib.metadata import entry_points

GROUP = "fedbound.plugins"
ENV = "FEDBOUND_PLUGINS"
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


def explicit() -> list[str]:
    """The modules named explicitly so far (to load in worker processes)."""
    return list(_EXPLICIT)
