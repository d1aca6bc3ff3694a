"""A reproduced claim for ``sgd.nonconvex``: Ghadimi & Lan 2013, Corollary 2.2 (the step
1/(L sqrt K) gives (1/K) sum ||grad f(x_k)||^2 = O(1/sqrt K)), measured on the plugin's
quadratic over seeds and decided on paired differences (``fedbound reproduce sgd``).

A plugin adds claims this way: an :class:`~verify.api.Experiment` (``run(plan) ->
Outcome``: per-seed curves of each configuration, with the bound beside them where it has
one, and the run's footprint) and one :class:`~verify.api.Claim` per claim, whose
``decide(outcome)`` returns the paired tests (:func:`~verify.api.above`, ``below``,
``between``) that decide it.
"""

from __future__ import annotations

import math

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    Claim,
    Curve,
    Experiment,
    Footprint,
    Outcome,
    above,
    register_claim,
    register_experiment,
    relative_margin,
)

from .adapter import SGDScenario, build, simulate
from .theorems import KEY

KS = (16, 64, 256)


def run(plan) -> Outcome:
    """The average squared gradient norm at eta = 1/(L sqrt K) for each K of :data:`KS` over
    ``plan.seeds`` seeds (replicas of one run each, the same start), beside the bound."""
    thm = bounds.get(KEY)
    values, bound = [], []
    for K in KS:
        s = SGDScenario(K=K, replicas=plan.seeds, seed=plan.seed)
        problem, x0, gen = build(s)
        eta = plan.step or 1.0 / (problem.L * math.sqrt(K))
        grad_sq, _ = simulate(problem, x0, eta, K, plan.seeds, gen)
        values.append(grad_sq.mean(axis=1))
        bound.append(thm.evaluate(L=problem.L, sigma=problem.sigma, Delta=problem.delta(x0), K=K,
                                  eta=eta))
    curve = Curve("SGD at eta = 1/(L sqrt K)", np.array(KS), np.stack(values, axis=1),
                  np.array(bound))
    return Outcome({curve.label: curve}, "iterations K", "(1/K) sum_k ||grad f(x_k)||^2",
                   prediction="the bound falls like 1/sqrt K")


def falls(outcome):
    """Each larger K gives a smaller average, paired over seeds."""
    c = outcome.curve("SGD at eta = 1/(L sqrt K)")
    return [above(f"average at K = {a} minus at K = {b}", c.at(a) - c.at(b),
                  **relative_margin(c.at(a), c.at(b), what="average squared gradient norm"))
            for a, b in zip(KS[:-1], KS[1:], strict=True)]


register_experiment(Experiment(
    "sgd.rate", run, seeds=(16, 64),
    footprint=lambda plan: Footprint.of({"replicas x dim": 8.0 * plan.seeds * 10},
                                        {"replicas x K x dim": 10.0 * plan.seeds * sum(KS)})))
register_claim(Claim(
    "sgd.cor22.falls", "Ghadimi & Lan 2013, Corollary 2.2",
    "at eta = 1/(L sqrt K) the average squared gradient norm falls as K grows",
    {"model": "a smooth nonconvex objective", "step": "1/(L sqrt K)", "horizon": "K iterations"},
    "the plugin's quadratic with exact constants, K in {16, 64, 256}", "sgd.rate", falls,
    metric="average squared gradient norm"))
