"""Choosing a step size (and, for papers with one, a sync time) from a registered bound."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from .core import Theorem, get

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


def choose_step(key_or_theorem: str | Theorem, objective: str = "max", variant: str | None = None,
                **params) -> Choice:
    """Choose the step size of any registered theorem with a step parameter.

    ``objective="max"``: the largest admissible step (closed form, see
    :meth:`Theorem.max_step`). ``"min-bound"``: the admissible step that minimises the
    bound; every encoded bound is a sum of a term decreasing in the step and terms
    increasing in it, so the minimum over ``(0, max_step]`` is found by a bounded scalar
    search in log-step, then compared with the endpoint ``max_step``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r} must be one of {OBJECTIVES}")
    thm = get(key_or_theorem, variant) if isinstance(key_or_theorem, str) else key_or_theorem
    cap = thm.step_choice(**params)
    if not math.isfinite(cap.step):
        raise ValueError(f"{thm.key}: no condition bounds the step; 'max' is undefined")

    def bound(step: float) -> float:
        return float(thm.evaluate(**params, **{thm.step: step}))

    at_cap = Choice(cap.step, bound(cap.step), cap.binding, cap.worker)
    if objective == "max":
        return at_cap
    lo, hi = math.log(cap.step) - 40.0, math.log(cap.step)
    res = minimize_scalar(lambda t: bound(math.exp(t)), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})
    step = float(np.exp(res.x))
    inner = Choice(step, bound(step), "interior optimum")
    return inner if inner.bound < at_cap.bound else at_cap
