"""Refutation families: scenarios of a refuted result, one per value of a parameter, along
which the ratio measured/bound grows without limit.

A single witness shows that a bound fails; a family shows by how much it can fail. Each is
registered with :func:`register_family` next to the result's adapter (the AFL ones in
``verify/papers/afl.py``), and the erratum of the result on the step of its proof that fails
derives the growth analytically; tests check it on the ``members`` in exact mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .plugins import ensure_loaded, note
from .scenario import Scenario


@dataclass(frozen=True)
class Family:
    """Scenarios of the refuted result ``key``: ``build(value)`` for each value of
    ``parameter``; ``members``: a few values, in the order of growing ratio, each checked in
    exact mode in about a second; ``growth``: how the ratio grows (derived in the erratum)."""

    key: str
    parameter: str
    members: tuple[float, ...]
    growth: str
    build: Callable[[float], Scenario]

    def scenario(self, value: float) -> Scenario:
        """The member at ``value`` (validated)."""
        s = self.build(value)
        s.validate()
        return s


_FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Register the refutation family of a result (one per key)."""
    if family.key in _FAMILIES:
        raise ValueError(f"a refutation family of {family.key!r} is already registered")
    _FAMILIES[family.key] = family
    note("families", family.key)
    return family


def families() -> dict[str, Family]:
    """The registered refutation families, by key (the plugins loaded)."""
    ensure_loaded()
    return dict(_FAMILIES)
