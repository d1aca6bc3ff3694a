"""The registry of results: which results exist, their variants and statuses, and how to
build each one on first use.

Importing it imports neither sympy nor any paper module: ``bounds.list()`` and
``fedbound list`` read a result's key, title, variants and statuses from its registration,
and only :func:`get` builds the sympy objects of a result (once per variant).

Every result is registered by a plugin with :func:`register`, fedbound's four papers
included (each paper's plugin, ``fedbound.verify.papers.<paper>``, registers its results,
whose mathematics is the module ``bounds.<paper>``); the registry lists none itself. The
plugins are loaded by the *loaders* added with :func:`add_loader`, each called once, on the
first lookup (:func:`get`, :func:`keys`, :func:`list_results`, ...): the package root,
``fedbound/__init__.py``, adds the plugin loader of ``verify`` (which imports the entry points
of the group ``fedbound.plugins``), so that ``from fedbound import bounds;
bounds.get("mllsgd.theorem1")`` finds the result although ``bounds`` imports nothing above
itself.
"""

from __future__ import annotations

import difflib
import importlib
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: what a registered ``build(variant)`` returns: a :class:`bounds.core.Theorem` (the registry
#: sits below the module that defines it, and names it only in words)
Result = Any

STATUSES = ("holds", "holds-with-erratum", "refuted", "rate-refuted", "unverified")
#: statuses of a result known to fail: "refuted", the statement (with its explicit
#: constants) fails on a stored witness; "rate-refuted", even its published O(.) rate fails
#: (the left-hand side decays more slowly than the rate says, along a sweep in its regime)
REFUTED = ("refuted", "rate-refuted")
#: a result's key: its paper's prefix, a dot and the result's name ("mllsgd.theorem1")
KEY = re.compile(r"[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\Z")
#: a build given by name: "package.module:function", imported on the first :func:`get`
BUILD_PATH = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*\Z")


@dataclass
class _Entry:
    key: str
    title: str
    build: Callable[[str], Result] | str
    variants: tuple[str, ...]
    default: str
    #: the status of each variant as registered (None: read from the built results)
    statuses: Mapping[str, str] | None = None
    #: the module whose code registered the result (a plugin's, :func:`origin`)
    origin: str = ""
    cache: dict[str, Result] = field(default_factory=dict)


_REGISTRY: dict[str, _Entry] = {}
#: loaders not yet called (:func:`add_loader`); each is popped before it runs
_PENDING: list[Callable[[], None]] = []


def add_loader(loader: Callable[[], None]) -> None:
    """Call ``loader()`` once, before the next lookup, to register results (the plugins'):
    how a package above ``bounds`` fills the registry without ``bounds`` importing it. A
    lookup made while a loader runs (a plugin reading the registry as it registers) sees what
    is registered so far."""
    _PENDING.append(loader)


def _load() -> None:
    while _PENDING:
        _PENDING.pop(0)()


def caller(depth: int = 1) -> str:
    """The name of the module whose code called the function that calls this one (``depth``
    frames further out): where a registration comes from (:func:`origin`)."""
    frame = sys._getframe(depth + 1)
    return str(frame.f_globals.get("__name__", ""))


def register(key: str, title: str, build: Callable[[str], Result] | str, variants,
             default: str, statuses: Mapping[str, str] | None = None) -> None:
    """Register a result; ``build(variant)`` constructs it on first use.

    ``build`` is a function of the variant or, so that registering imports nothing, its
    import path ``"package.module:function"`` (``"fedbound.bounds.hfl:theorem2"``), imported on
    the first :func:`get`. ``variants`` names the variants, or maps each to its status
    (``{"printed": "refuted", "proof": "holds"}``, which is ``statuses`` given with them);
    the statuses let ``bounds.list()`` answer without building anything, and a built result
    whose status differs from its registered one is an error (:func:`get`). One line
    registers a result::

        bounds.register("sgd.nonconvex", "SGD, constant step", "fedbound_sgd.theorem:theorem",
                        {"printed": "refuted", "proof": "holds"}, "proof")

    A key is ``prefix.name`` (lower case), and registering it twice is an error."""
    origin = caller()
    if not isinstance(key, str) or not KEY.match(key):
        raise ValueError(f"result key {key!r} must be 'prefix.name' in lower case letters, digits "
                         "and _, e.g. 'mypaper.theorem1'")
    if key in _REGISTRY:
        raise ValueError(f"result {key!r} is already registered (by {_REGISTRY[key].origin or '?'})")
    if isinstance(build, str):
        if not BUILD_PATH.match(build):
            raise ValueError(f"{key}: build={build!r} must be a function or its import path "
                             "'package.module:function'")
    elif not callable(build):
        raise TypeError(f"{key}: build must be a function of the variant or its import path, "
                        f"got {type(build).__name__}")
    if isinstance(variants, Mapping):
        if statuses is not None:
            raise ValueError(f"{key}: variants map each variant to its status; do not give "
                             "statuses as well")
        statuses = variants
    variants = tuple(variants)
    if default not in variants:
        raise ValueError(f"{key}: default variant {default!r} not in {variants}")
    if statuses is not None:
        if set(statuses) != set(variants):
            raise ValueError(f"{key}: statuses={dict(statuses)} must give the status of each "
                             f"variant {variants}")
        bad = sorted(s for s in statuses.values() if s not in STATUSES)
        if bad:
            raise ValueError(f"{key}: status {bad[0]!r} not in {STATUSES}")
        statuses = dict(statuses)
    _REGISTRY[key] = _Entry(key, title, build, variants, default, statuses, origin)


def unregister(key: str) -> None:
    """Remove a registered result (for tests that plant deliberately wrong bounds)."""
    _REGISTRY.pop(key, None)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` naming the entry of ``known`` nearest to ``word`` (difflib's
    closest match: a typo, a swapped or missing character), or '' when none is near."""
    match = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _entry(key: str) -> _Entry:
    _load()
    if key not in _REGISTRY:
        raise ValueError(f"unknown result {key!r}{did_you_mean(key, _REGISTRY)}; registered: "
                         f"{', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[key]


def _built(e: _Entry, variant: str) -> Result:
    """``e.build(variant)``, the build imported first when it is given by its path."""
    build = e.build
    if isinstance(build, str):
        module, _, name = build.partition(":")
        build = getattr(importlib.import_module(module), name)
    return build(variant)


def get(key: str, variant: str | None = None) -> Result:
    """The registered result ``key`` in ``variant`` (default: the entry's default)."""
    e = _entry(key)
    v = e.default if variant is None else variant
    if v not in e.variants:
        raise ValueError(f"{key}: unknown variant {v!r}{did_you_mean(v, e.variants)}; variants are "
                         f"{', '.join(e.variants)}")
    if v not in e.cache:
        thm = _built(e, v)
        if e.statuses is not None and thm.status != e.statuses[v]:
            raise RuntimeError(f"{key} [{v}] is registered with status {e.statuses[v]!r} "
                               f"but builds with status {thm.status!r}")
        e.cache[v] = thm
    return e.cache[v]


def default(key: str) -> str:
    """The default variant of the registered result ``key`` (builds nothing)."""
    return _entry(key).default


def module_of(key: str) -> str | None:
    """The module that defines the function building ``key`` (``fedbound.bounds.hfl`` for a
    paper's result, a plugin's module for a plugin's own), without importing it."""
    build = _entry(key).build
    if isinstance(build, str):
        return build.partition(":")[0]
    return getattr(build, "__module__", None)


def origin(key: str) -> str:
    """The module whose code registered ``key`` (a plugin's module, or one inside it)."""
    return _entry(key).origin


def registered_statuses(key: str) -> dict[str, str] | None:
    """The statuses ``key`` was registered with (None: not registered; builds nothing)."""
    e = _entry(key)
    return None if e.statuses is None else dict(e.statuses)


def keys() -> list[str]:
    """The registered result keys, sorted (builds nothing)."""
    _load()
    return sorted(_REGISTRY)


def variants(key: str) -> tuple[str, ...]:
    """The variants of the registered result ``key`` (builds nothing)."""
    return _entry(key).variants


def statuses(key: str) -> dict[str, str]:
    """The status of each variant of ``key`` (builds nothing when they were registered)."""
    e = _entry(key)
    return dict(e.statuses) if e.statuses is not None else {
        v: get(key, v).status for v in e.variants}


def result_row(key: str) -> dict:
    """The row of ``key`` in :func:`list_results` (builds the result when its statuses were
    not registered)."""
    e = _entry(key)
    st = statuses(key)
    return {"key": e.key, "title": e.title, "variants": [*e.variants],
            "default": e.default, "status": st[e.default], "statuses": st}


def list_results() -> list[dict]:
    """One row per registered result: key, title, variants, default, status (of the
    default variant) and statuses (of each variant), exposed as ``bounds.list()``."""
    return [result_row(key) for key in keys()]
