"""check(key, scenario) -> Verdict: a bound against the simulator's measurement."""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import bounds

from .scenario import Measurement, adapter_for, default_scenario, jsonable

#: z-value of the two-sided 95% normal interval for the replica mean
Z95 = 1.959963984540054
#: relative tolerance of an exact-mode comparison (floating-point round-off only)
EXACT_RTOL = 1e-9


@dataclass
class Verdict:
    """The outcome of one check.

    ``verdict``: "holds" when the upper 95% limit of the measured mean is at most the
    bound, "violated" when the lower limit is above it, "inconclusive" otherwise
    (exact mode: the exact value against the bound, up to round-off); "diverged" when
    any replica diverged (its left-hand side is infinite: the measured mean is inf,
    never a huge finite number). ``slack`` = bound / measured mean (inf when it is 0).
    ``admissible``: whether the theorem's hypotheses (its conditions) hold at the derived
    parameters; a violation where they do not contradicts nothing (``violations`` says
    which condition fails and by how much)."""

    key: str
    variant: str
    bound: float
    measured_mean: float
    measured_ci: tuple[float, float]
    verdict: str
    slack: float
    admissible: bool
    violations: list[str]
    params: dict[str, Any]
    scenario: dict[str, Any]
    mode: str
    replicas: int
    diverged: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON values. The wall time ``seconds`` is left out: it is not part
        of the result, and the same scenario and seed must give the same JSON bit for bit."""
        d = asdict(self)
        del d["seconds"]
        d["measured_ci"] = list(self.measured_ci)
        return jsonable(d)


def _interval(m: Measurement) -> tuple[float, tuple[float, float], str]:
    """Mean and 95% interval; a diverged replica makes the measurement infinite."""
    if m.exact is not None:
        return m.exact, (m.exact, m.exact), "exact"
    if m.diverged:
        return math.inf, (math.inf, math.inf), "monte-carlo"
    v = np.asarray(m.values, dtype=float)
    mean = float(v.mean())
    half = Z95 * float(v.std(ddof=1)) / math.sqrt(v.size) if v.size > 1 else math.inf
    return mean, (mean - half, mean + half), "monte-carlo"


def classify(bound: float, mean: float, ci: tuple[float, float], mode: str,
             atol: float = 0.0) -> str:
    """holds / violated / inconclusive (see :class:`Verdict`). ``atol`` is absolute, for
    bounds that can be zero; both modes add a relative round-off tolerance, for a bound that
    is attained (tdcd.theorem1 [refined] at Q = 1 on a noise-free one-dimensional quadratic:
    every replica equals the bound up to a few ulps, and the interval has zero width)."""
    if math.isinf(mean):
        return "diverged"
    tol = EXACT_RTOL * max(abs(bound), abs(mean)) + atol
    if mode == "exact":
        return "holds" if mean <= bound + tol else "violated"
    if ci[1] <= bound + tol:
        return "holds"
    if ci[0] > bound + tol:
        return "violated"
    return "inconclusive"


def check(key: str, scenario=None, *, variant: str | None = None, exact: bool = False) -> Verdict:
    """Check the registered result ``key`` on ``scenario`` (default: its default scenario).

    The theorem's parameters are derived from the scenario (L from the problem, zeta
    from H, Delta from x_1, the step from the bound when the scenario leaves it open);
    the left-hand side is measured by the simulator over the scenario's replicas, or
    computed exactly (``exact=True``, linear-Gaussian problems only)."""
    t0 = time.perf_counter()
    scenario = default_scenario(key) if scenario is None else scenario
    thm = bounds.get(key, variant)
    ad = adapter_for(key)
    override = getattr(ad, "check_override", None)
    if override is not None:
        verdict = override(key, scenario, variant=variant, exact=exact)
        if verdict is not None:
            return verdict
    params = ad.parameters(key, scenario, thm)
    bound = float(thm.evaluate(**params))
    violations = [str(v) for v in thm.violations(**params)]
    m = ad.measure(key, scenario, params, exact)
    mean, ci, mode = _interval(m)
    verdict = classify(bound, mean, ci, mode, m.atol)
    slack = bound / mean if mean > 0 else math.inf
    return Verdict(
        key=key, variant=thm.variant, bound=bound, measured_mean=mean, measured_ci=ci,
        verdict=verdict, slack=slack, admissible=not violations, violations=violations,
        params=jsonable(params), scenario=scenario.to_dict(),
        mode=mode, replicas=0 if m.values is None else int(np.size(m.values)),
        diverged=m.diverged, seconds=time.perf_counter() - t0,
    )
