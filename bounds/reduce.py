"""Reductions of vector parameters to the scalar aggregates of a theorem, numpy only.

Each function maps the checked parameter values (worker axis last) to an aggregate's value
(``Aggregate.reduce``). They are named, module-level functions so that a theorem's manifest
(:mod:`bounds.manifest`) can name them and the numeric theorem can import them without sympy.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Values = Mapping[str, np.ndarray]


def weighted_square_probability(v: Values) -> np.ndarray:
    """sum_i a_i^2 p_i (Castiglia et al. 2021, Theorem 1, eq. (13))."""
    return (v["a"] ** 2 * v["p"]).sum(axis=-1)


def weighted_probability(v: Values) -> np.ndarray:
    """P = sum_i a_i p_i (Castiglia et al. 2021, Theorem 1, eq. (13))."""
    return (v["a"] * v["p"]).sum(axis=-1)


def sum_of_variances(v: Values) -> np.ndarray:
    """sum_j sigma_j^2 over the blocks (Das et al. 2022, Theorem 1, eq. (15))."""
    return (v["sigma"] ** 2).sum(axis=-1)


def sum_of_variances_per_step(v: Values) -> np.ndarray:
    """sum_j sigma_j^2 / K_j over the blocks (the refined variant of Das et al. 2022,
    Theorem 1: derived by fedbound, not published)."""
    return (v["sigma"] ** 2 / v["K"]).sum(axis=-1)
