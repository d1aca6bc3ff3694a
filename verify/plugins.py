"""Plugins: packages that register their own results, and everything that goes with them.

A plugin is a module whose import registers theorems (``bounds.register``) and, through
``verify.api``, adapters, witnesses, tightness tables, refutation families, rate sweeps,
choosers and reproduced claims: the hooks of ``verify.hooks.HOOKS``, the one declaration of
what a plugin may register. fedbound's four papers are plugins in exactly this sense: they
are found through the same entry points (those of the ``fedbound`` distribution itself,
:func:`builtin`), as pytest's built-in plugins answer the same hooks as a third party's, and
the core lists none of their results. fedbound imports plugin modules named

* by the entry-point group ``fedbound.plugins`` of installed distributions
  (``[project.entry-points."fedbound.plugins"] name = "package.module"``);
* by the environment variable ``FEDBOUND_PLUGINS`` (comma-separated modules);
* on the command line (``fedbound --plugin MODULE ...``) or by :func:`load_plugins`.

The built-in plugins load first, so that no other plugin can take their names. A plugin
that fails to import, whatever it raises (``SystemExit`` included; a Ctrl-C is not
contained), is a :class:`Failure`: the others and the built-in results still work. The
command line reports it in one line: a plugin named explicitly (``--plugin``,
``FEDBOUND_PLUGINS``) that fails is bad input (exit 2), an installed one a warning (and an
error row of ``check --all``, exit 4), so that one broken package never changes the exit
status of another result. Every registry loads the plugins on its first use
(:func:`ensure_loaded`; the registry of ``bounds`` through the loader that the package root
gives it), so a module that only reads a registry never imports a plugin itself.

Every register function notes where its call came from (:func:`note`): a registration
belongs to the plugin whose module, or a module inside whose package, made the call
(:func:`owner`), which is how ``fedbound plugins`` shows what each plugin registered.
"""

from __future__ import annotations

import importlib
import os
import traceback
from dataclasses import dataclass
from importlib.metadata import entry_points

from fedbound.bounds.registry import caller, module_of

GROUP = "fedbound.plugins"
ENV = "FEDBOUND_PLUGINS"
#: the distribution whose entry points are the built-in plugins
DISTRIBUTION = "fedbound"
#: whether :func:`ensure_loaded` has run
_LOADED: list[bool] = []
#: modules named explicitly (--plugin, load_plugins(modules)): worker processes re-import them
_EXPLICIT: list[str] = []
ENTRY_POINT = "entry point"


@dataclass(frozen=True)
class Failure:
    """A plugin ``module`` that failed to load: ``where`` it was named (``--plugin``,
    ``FEDBOUND_PLUGINS`` or ``entry point 'name'``) and the one-line ``message``."""

    module: str
    where: str
    message: str

    @property
    def explicit(self) -> bool:
        """Named by the user (--plugin, FEDBOUND_PLUGINS), not found installed."""
        return not self.where.startswith(ENTRY_POINT)


#: plugins that failed to import, by module (reported once)
_FAILED: dict[str, Failure] = {}


def _names(modules) -> list[tuple[str, str]]:
    """(module, where it was named) for every plugin to load, without repeats: the built-in
    plugins first (no other plugin can take their names), then ``modules``,
    ``FEDBOUND_PLUGINS`` and the other entry points."""
    points = list(entry_points(group=GROUP))
    ours = [ep for ep in points if getattr(ep.dist, "name", None) == DISTRIBUTION]
    named = [(ep.module, f"{ENTRY_POINT} {ep.name!r}") for ep in ours]
    named += [(m, "--plugin") for m in modules]
    named += [(m.strip(), ENV) for m in os.environ.get(ENV, "").split(",") if m.strip()]
    named += [(ep.module, f"{ENTRY_POINT} {ep.name!r}") for ep in points if ep not in ours]
    seen: dict[str, str] = {}
    for module, where in named:
        seen.setdefault(module, where)
    return list(seen.items())


def load_plugins(modules=()) -> list[str]:
    """Import the plugins (module docstring) and ``modules``; return one message per plugin
    that failed to import (empty when all loaded). Importing a loaded module again is a
    no-op and a failure is reported once (:func:`failures` keeps them), so this can be
    called more than once. Whatever a plugin's import raises is contained (``SystemExit``,
    any ``BaseException``), except a Ctrl-C. After it, :func:`ensure_loaded` has nothing left
    to do (a registry read while the plugins import sees what is registered so far)."""
    if not _LOADED:
        _LOADED.append(True)
    for m in modules:
        if m not in _EXPLICIT:
            _EXPLICIT.append(m)
    errors = []
    for module, where in _names(list(modules)):
        if module in _FAILED:
            continue
        try:
            importlib.import_module(module)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - a broken plugin must not stop the others
            last = traceback.format_exception_only(type(e), e)[-1].strip()
            if isinstance(e, SystemExit):
                last = f"it called sys.exit({e.code!r})"
            _FAILED[module] = Failure(module, where, f"plugin {module!r} ({where}) failed to "
                                                     f"load: {last}")
            errors.append(_FAILED[module].message)
    return errors


def failures(modules=()) -> list[Failure]:
    """The plugins that failed to load so far, those named by ``modules`` or
    ``FEDBOUND_PLUGINS`` marked explicit whatever named them first."""
    named = {*modules, *(m.strip() for m in os.environ.get(ENV, "").split(","))}
    return [Failure(f.module, "--plugin" if f.module in modules else ENV, f.message)
            if f.module in named and not f.explicit else f for f in _FAILED.values()]


def modules() -> list[str]:
    """Every plugin module that :func:`load_plugins` imports, by name (nothing is imported),
    but those that failed to load."""
    return [module for module, _ in _names(_EXPLICIT) if module not in _FAILED]


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


def needed_for(key: str) -> list[str]:
    """The plugins named explicitly (``--plugin``, ``FEDBOUND_PLUGINS``) that a command
    about ``key`` needs again: the one whose module (or a module inside it) registered it.
    Empty for a built-in result or an installed plugin's, which every command finds."""
    module = module_of(key) or ""
    named = [*_EXPLICIT, *(m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip())]
    return [m for m in dict.fromkeys(named) if module == m or module.startswith(m + ".")][:1]


def explicit() -> list[str]:
    """The modules named explicitly so far (to load in worker processes)."""
    return list(_EXPLICIT)


# ---------------------------------------------------------------------- who registered what

#: where each registration came from: hook -> registered name -> module whose code called
_ORIGINS: dict[str, dict[str, str]] = {}


def note(hook: str, name: str) -> None:
    """Record that ``name`` was registered under ``hook`` (a name of ``verify.hooks.HOOKS``)
    by the code that called the register function calling this (its module is the
    registration's :func:`origin`)."""
    _ORIGINS.setdefault(hook, {})[name] = caller(2)


def origin(hook: str, name: str) -> str:
    """The module whose code registered ``name`` under ``hook`` ('' when not noted)."""
    return _ORIGINS.get(hook, {}).get(name, "")


def owner(module: str, plugins) -> str | None:
    """The plugin of ``plugins`` (module names) that ``module`` belongs to: the plugin
    module itself or a package above it (the innermost one), or None."""
    mine = [p for p in plugins if module == p or module.startswith(f"{p}.")]
    return max(mine, key=len, default=None)


def sources() -> list[tuple[str, str]]:
    """(module, where it was named) of every plugin, loaded or not, in load order."""
    return _names(_EXPLICIT)


def version_of(module: str) -> tuple[str | None, str | None]:
    """(distribution, version) that ships the plugin ``module``: its entry point's
    distribution, else the installed distribution holding its top-level package, else its
    ``__version__`` (no distribution); (None, None) when nothing says."""
    import sys
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    for ep in entry_points(group=GROUP):
        if ep.module == module and ep.dist is not None:
            return ep.dist.name, ep.dist.version
    for dist in packages_distributions().get(module.partition(".")[0], []):
        try:
            return dist, version(dist)
        except PackageNotFoundError:  # pragma: no cover - a stale record of the environment
            continue
    found = getattr(sys.modules.get(module), "__version__", None)
    return None, None if found is None else str(found)
