"""The registry of results: which results exist, their variants and statuses, and how to
build each one on first use.

Importing it imports neither sympy nor any paper module: ``bounds.list()`` and
``fedbound list`` read a result's key, title, variants and statuses from its registration,
and only :func:`get` builds the sympy objects of a result (once per variant). The results
of the four papers are registered by :mod:`bounds.catalog`; a plugin registers its own with
:func:`register`.
"""

from __future__ import annotations

import difflib
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


@dataclass
class _Entry:
    key: str
    title: str
    build: Callable[[str], Result]
    variants: tuple[str, ...]
    default: str
    #: the status of each variant as registered (None: read from the built results)
    statuses: Mapping[str, str] | None = None
    cache: dict[str, Result] = field(default_factory=dict)


_REGISTRY: dict[str, _Entry] = {}


def register(key: str, title: str, build: Callable[[str], Result], variants, default: str,
             statuses: Mapping[str, str] | None = None):
    """Register a result; ``build(variant)`` constructs it on first use. ``statuses`` (the
    status of every variant) lets ``bounds.list()`` answer without building anything; a
    built result whose status differs from it is an error (:func:`get`)."""
    if key in _REGISTRY:
        raise ValueError(f"result {key!r} is already registered")
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
    _REGISTRY[key] = _Entry(key, title, build, variants, default, statuses)


def unregister(key: str) -> None:
    """Remove a registered result (for tests that plant deliberately wrong bounds)."""
    _REGISTRY.pop(key, None)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'X'?)`` naming the entry of ``known`` nearest to ``word`` (difflib's
    closest match: a typo, a swapped or missing character), or '' when none is near."""
    match = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _entry(key: str) -> _Entry:
    if key not in _REGISTRY:
        raise ValueError(f"unknown result {key!r}{did_you_mean(key, _REGISTRY)}; registered: "
                         f"{', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[key]


def get(key: str, variant: str | None = None) -> Result:
    """The registered result ``key`` in ``variant`` (default: the entry's default)."""
    e = _entry(key)
    v = e.default if variant is None else variant
    if v not in e.variants:
        raise ValueError(f"{key}: unknown variant {v!r}{did_you_mean(v, e.variants)}; variants are "
                         f"{', '.join(e.variants)}")
    if v not in e.cache:
        thm = e.build(v)
        if e.statuses is not None and thm.status != e.statuses[v]:
            raise RuntimeError(f"{key} [{v}] is registered with status {e.statuses[v]!r} "
                               f"but builds with status {thm.status!r}")
        e.cache[v] = thm
    return e.cache[v]


def default(key: str) -> str:
    """The default variant of the registered result ``key`` (builds nothing)."""
    return _entry(key).default


def builtin(key: str) -> bool:
    """Whether ``key`` is registered by :mod:`bounds.catalog` (a result of the four papers,
    not a plugin's)."""
    return getattr(_entry(key).build, "__module__", None) == "fedbound.bounds.catalog"


def module_of(key: str) -> str | None:
    """The module that defines the function building ``key`` (a plugin's, for a plugin's
    result)."""
    return getattr(_entry(key).build, "__module__", None)


def keys() -> list[str]:
    """The registered result keys, sorted (builds nothing)."""
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
