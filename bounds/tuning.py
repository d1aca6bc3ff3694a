"""Choosing a step size from any registered bound (a paper's own choices, such as the sync
time of Ali & Arafa 2025, live with its mathematics: :mod:`bounds.hfl_sync`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .registry import get

if TYPE_CHECKING:  # pragma: no cover
    from .core import Theorem
    from .manifest import NumericTheorem

OBJECTIVES = ("max", "min-bound")


@dataclass(frozen=True)
class Choice:
    """A chosen step, the bound there, and what limits it: the binding condition
    (with its worker for per-worker conditions), or ``"interior optimum"``."""

    step: float
    bound: float
    binding: str
    worker: int | None = None

    def as_dict(self) -> dict:
        return {"step": self.step, "bound": self.bound, "binding": self.binding,
                "worker": self.worker}


def choose_step(key_or_theorem: str | Theorem | NumericTheorem, objective: str = "max",
                variant: str | None = None, **params) -> Choice:
    """Choose the step size of any registered theorem with a step parameter.

    ``objective="max"``: the largest admissible step (closed form, see
    :meth:`Theorem.max_step`). ``"min-bound"``: the admissible step that minimises the
    bound; every encoded bound is a sum of a term decreasing in the step and terms
    increasing in it, so the minimum over ``(0, max_step]`` is found by a bounded scalar
    search in log-step, then compared with the endpoint ``max_step``. A bound of several
    cells (one per group, as in Ali & Arafa 2025, Theorem 1) counts by its largest cell.
    It needs only ``step``, ``step_choice`` and ``evaluate`` of the theorem: a
    :class:`~bounds.manifest.NumericTheorem` serves as well, without sympy."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} must be one of {OBJECTIVES}")
    thm = get(key_or_theorem, variant) if isinstance(key_or_theorem, str) else key_or_theorem
    cap = thm.step_choice(**params)
    if not math.isfinite(cap.step):
        raise ValueError(f"{thm.key}: no condition bounds the step; 'max' is undefined")

    def bound(step: float) -> float:
        return float(np.max(thm.evaluate(**params, **{thm.step: step})))

    at_cap = Choice(cap.step, bound(cap.step), cap.binding, cap.worker)
    if objective == "max":
        return at_cap
    lo, hi = math.log(cap.step) - 40.0, math.log(cap.step)
    from scipy.optimize import minimize_scalar  # only here: import bounds stays light

    res = minimize_scalar(lambda t: bound(math.exp(t)), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})
    step = float(np.exp(res.x))
    inner = Choice(step, bound(step), "interior optimum")
    return inner if inner.bound < at_cap.bound else at_cap
