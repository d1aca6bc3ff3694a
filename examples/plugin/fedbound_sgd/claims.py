"""A reproduced claim for ``sgd.nonconvex``: Ghadimi & Lan 2013, Corollary 2.2 (the step
1/(L sqrt K) gives (1/K) sum ||grad f(x_k)||^2 = O(1/sqrt K)), measured on the plugin's
quadratic over seeds (``fedbound reproduce sgd``).

A plugin adds claims this way: a function ``run(*, quick, seed, device)`` returning
:class:`~verify.api.Finding` s, registered with :func:`~verify.api.register_reproduction`.
"""

from __future__ import annotations

import math

from fedbound import bounds
from fedbound.verify.api import Finding, bound_order, increasing, register_reproduction, row

from .adapter import SGDScenario, build, simulate
from .theorem import KEY

KS = (16, 64, 256)


def run(*, quick: bool, seed: int, device=None) -> tuple[Finding, ...]:
    """The average squared gradient norm at eta = 1/(L sqrt K) for each K of :data:`KS`,
    over seeds (replicas of one run each), beside the bound at the same K."""
    thm = bounds.get(KEY)
    replicas = 16 if quick else 64
    rows = []
    for K in KS:
        s = SGDScenario(K=K, replicas=replicas, seed=seed)
        problem, x0, gen = build(s)
        eta = 1.0 / (problem.L * math.sqrt(K))
        grad_sq, _ = simulate(problem, x0, eta, K, replicas, gen)
        bound = thm.evaluate(L=problem.L, sigma=problem.sigma, Delta=problem.delta(x0), K=K,
                             eta=eta)
        rows.append(row(f"K = {K}", grad_sq.mean(axis=1), bound))
    falls = increasing(rows[::-1])
    return (Finding(
        claim="at eta = 1/(L sqrt K) the average squared gradient norm falls as K grows",
        source="Ghadimi & Lan 2013, Corollary 2.2", metric="(1/K) sum_k ||grad f(x_k)||^2",
        rows=tuple(rows), measured=f"it falls from K = {KS[0]} to K = {KS[-1]}"
        if falls else "the intervals do not order every K", agrees=falls,
        prediction="the bound falls like 1/sqrt K", bound_agrees=bound_order(rows)),)


register_reproduction("sgd", run)
