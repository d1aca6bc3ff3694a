"""Checks with estimated constants: a bound on a problem whose constants are unknown.

A network (``sim.neural.NeuralProblem``) has no exact L or sigma: :func:`check_estimated`
estimates them with ``sim.estimate`` (each with an interval), evaluates the bound at the
conservative end, measures the left-hand side with the simulator, and returns a
:class:`verify.Verdict` whose ``mode`` says "estimated" and whose notes give every
estimated constant with its interval.

The conservative end. A bound need not be monotone in every constant (a larger L, for
instance, raises some terms of Castiglia et al. 2021, (13) and is multiplied by a step
fixed beforehand in others), so the end that makes it largest is found by evaluation: the
bound at every point of a grid of ``GRID`` values per estimated constant between its
``lower`` and ``upper`` ends, both included, and the maximum taken. For a bound monotone in
each constant separately this is exactly the maximum over the box of intervals (it sits
at a corner); otherwise it is that maximum to the grid's resolution.

The verdict: "holds" only if the measurement is below the bound at the conservative end
(the upper 95% limit, as :func:`verify.verdict.compare` decides); "violated" if its lower
limit is above even that bound; otherwise "inconclusive", in particular when the bound
holds at the estimates but not at the conservative end. The intervals only cover the
points where the constants were estimated (a trajectory of gradient descent from x_1):
the assumptions ask for all x, so a verdict with estimated constants is never a proof.

Results covered: those whose adapter declares ``Tags(estimated=True)`` and supplies its
paper's side with the hook ``Adapter._estimated_parts`` (:class:`Parts`: its constants,
the parameters read from its scenario and the measurement); :func:`estimated_keys` lists
them. The generic part is here (the grid, the step, the verdict).

The problem comes from the caller, or is the scenario's own, whose constants are then
estimated instead of read, to compare with the exact-constant check.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbound import bounds

from .adapter import _slack, adapter_for, adapter_keys, finite_bound
from .scenario import jsonable
from .verdict import Comparison, Measurement, Verdict, compare

#: grid values per estimated constant when looking for the conservative end
GRID = 5


@dataclass(frozen=True)
class EstimationSettings:
    """How the constants are estimated (``sim.estimate``): ``points`` points along
    ``steps`` gradient-descent steps from x_1 (step 1 / the upper end of L at x_1, which
    is also the reference run for f_inf), ``power_steps`` power-iteration steps from
    ``starts`` start vectors per point, ``samples`` stochastic gradients per point."""

    points: int = 4
    steps: int = 50
    power_steps: int = 30
    starts: int = 2
    samples: int = 200


def along_trajectory(problem, x1, generator, settings: EstimationSettings = EstimationSettings()):
    """(L, points, f_ref): L estimated at ``settings.points`` points along ``settings.steps``
    gradient-descent steps from ``x1`` (step 1 / the upper end of L at x_1), the points,
    and the lowest loss among them (attained: an upper bound on inf F). ``problem``: any
    object with the ``sim.estimate`` interface (``loss``, ``grad``, ``dim``, ``device``)."""
    from fedbound.sim import estimate

    first = estimate.lipschitz(problem, x1, generator=generator, steps=settings.power_steps,
                               starts=settings.starts)
    points = estimate.trajectory(problem, x1, eta=1.0 / first.upper, steps=settings.steps,
                                 points=settings.points)
    L = estimate.lipschitz(problem, points, generator=generator, steps=settings.power_steps,
                           starts=settings.starts)
    return L, points, float(problem.loss(points).min())


def estimate_constants(problem, x1, generator, settings: EstimationSettings = EstimationSettings()
                       ) -> dict[str, Any]:
    """{"L", "sigma", "Delta": sim.estimate.Estimate} for the theorems of Castiglia et al.
    2021 (beta = 0: sigma for the additive form of Assumption 1d), at points along a
    gradient-descent trajectory from ``x1`` (:func:`along_trajectory`)."""
    from fedbound.sim import estimate

    L, points, f_ref = along_trajectory(problem, x1, generator, settings)
    return {
        "L": L,
        "sigma": estimate.gradient_variance(problem, points, settings.samples, generator),
        "Delta": estimate.delta(problem, x1, max(f_ref, float(problem.f_inf))),
    }


def estimated_start(problem, x1, own_problem, own_x1):
    """(problem, x1, own) of a check with estimated constants: ``problem``, default the
    scenario's ``own_problem`` (own is then True); ``x1``, default ``own_x1`` for the
    scenario's own problem, else the problem's ``initial()`` where it has one; as a float64
    tensor on the problem's device."""
    import torch

    own = problem is None
    problem = own_problem if own else problem
    if x1 is None:
        x1 = own_x1 if own or not hasattr(problem, "initial") else problem.initial()
    return problem, torch.as_tensor(x1, dtype=torch.float64, device=problem.device), own


@dataclass(frozen=True)
class Parts:
    """A paper's side of a check with estimated constants (``Adapter._estimated_parts``).

    ``params``: the bound's parameters read from the scenario, none estimated and without
    the step; ``estimates``: name -> ``sim.estimate.Estimate``; ``step``: the scenario's
    step, or None for the largest admissible everywhere on the grid of the estimates;
    ``measure(params)``: the measured left-hand side at the bound's parameters (the step
    included), a :class:`verify.verdict.Measurement`; ``notes``: lines for the verdict."""

    params: dict[str, Any]
    estimates: dict[str, Any]
    step: float | None
    measure: Callable[[dict[str, Any]], Measurement]
    notes: tuple[str, ...] = ()


def estimate_grid(estimates: dict[str, Any]) -> list[dict[str, float]]:
    """Every combination of ``GRID`` values per constant between its ends (one value where
    the ends coincide)."""
    axes = {name: np.unique(np.linspace(e.lower, e.upper, GRID)) for name, e in estimates.items()}
    return [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]


def conservative_bound(thm: bounds.Theorem, params: dict[str, Any], estimates: dict[str, Any]
                       ) -> tuple[float, dict[str, float], list[str]]:
    """The largest bound over the grid of the estimates' intervals (module docstring), the
    constants where it is reached, and the conditions violated anywhere on the grid."""
    best, where, violations = -math.inf, {}, []
    for point in estimate_grid(estimates):
        values = {**params, **point}
        violations += [str(v) for v in thm.violations(**values) if str(v) not in violations]
        value = float(finite_bound(thm, values, violations))
        if value > best:
            best, where = value, point
    return best, where, violations


def conservative_step(thm, params: dict[str, Any], estimates: dict[str, Any], eta: float | None) -> float:
    """The scenario's step, else the largest that the conditions allow everywhere on the
    grid of the estimates (the smallest of the largest admissible steps)."""
    if eta is not None:
        return float(eta)
    return min(float(thm.max_step(**{**params, **point})) for point in estimate_grid(estimates))


def _outcome(at_conservative: Comparison, at_estimate: Comparison) -> str:
    """"holds" only at the conservative end; "violated" when even that bound is exceeded;
    else "inconclusive" (module docstring)."""
    if at_conservative.outcome in ("holds", "violated", "diverged"):
        return at_conservative.outcome
    return "inconclusive" if at_estimate.outcome != "diverged" else "diverged"


def estimated_keys() -> list[str]:
    """The results :func:`check_estimated` checks: those whose adapter declares
    ``Tags(estimated=True)``."""
    return [k for k in adapter_keys() if adapter_for(k).tags.estimated]


def check_estimated(key: str, scenario=None, *, problem=None, x1=None, variant: str | None = None,
                    settings: EstimationSettings = EstimationSettings()) -> Verdict:
    """The bound ``key`` (one of :func:`estimated_keys`) against the simulator with estimated
    constants (module docstring). ``scenario``: as :func:`verify.check` takes it (for
    ``mllsgd.theorem1``: topology, K, q, tau, p, eta or null, replicas, seed); ``problem``:
    a ``sim`` problem (e.g. a ``sim.neural.NeuralProblem``), default the scenario's own;
    ``x1``: the start, default the problem's own initial parameters (``initial()``) or the
    scenario's. The returned Verdict has ``mode`` "estimated", ``bound`` the bound at the
    conservative end, ``params`` the constants there, and notes with every estimate, its
    interval and the bound at the estimates."""
    adapter = adapter_for(key)
    if not adapter.tags.estimated:
        raise ValueError(f"key={key!r}: checks with estimated constants cover "
                         f"{', '.join(estimated_keys())}")
    t0 = time.perf_counter()
    s = adapter.load(scenario)
    thm = adapter.theorem(variant)
    parts: Parts = adapter.estimated_parts(s, thm, problem=problem, x1=x1, settings=settings)
    estimates, params = parts.estimates, dict(parts.params)
    params[thm.step] = conservative_step(thm, params, estimates, parts.step)
    at_values = {**params, **{name: e.value for name, e in estimates.items()}}
    bound_values = float(finite_bound(thm, at_values))
    bound, where, violations = conservative_bound(thm, params, estimates)
    m = parts.measure(params)
    m.validate(key)
    c, c_values = compare(bound, m), compare(bound_values, m)
    notes = [f"estimated: {e}" for e in estimates.values()]
    notes += [f"bound at the conservative end {bound:.6g} (max over a grid of {GRID} values per "
              f"constant between its ends, reached at "
              + ", ".join(f"{k} = {v:.4g}" for k, v in where.items()) + ")",
              f"bound at the estimates {bound_values:.6g}: {c_values.outcome} there",
              "constants estimated at points along a gradient-descent trajectory from x_1; "
              "the assumptions ask for all x, so the true constants may be larger"]
    notes += list(parts.notes) + list(c.notes)
    return Verdict(
        key=key, variant=thm.variant, bound=c.bound, measured_mean=c.mean, measured_ci=c.ci,
        verdict=_outcome(c, c_values), slack=_slack(c.bound, c.mean), admissible=not violations,
        violations=violations, params=jsonable({**params, **where}), scenario=s.to_dict(),
        mode=f"estimated ({c.mode})", replicas=c.replicas, diverged=m.diverged, notes=notes,
        atol=m.atol, seconds=time.perf_counter() - t0)
