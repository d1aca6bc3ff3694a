"""The generic chooser engine (verify.choose) and the choosers' calibrated predictions,
against independent computations.

The engine, on a chooser whose metric is known in closed form (:class:`Parabola`, each
replica a seeded draw around (x - 3)^2): the paired regret and its interval against
scipy's Student t; successive halving's rungs (half the configurations kept, replicas
doubled), the paired stage's common seeds and the search's start at the calibrated answer;
a fixed knob; a search above the resource limits refused before any simulation. The
predictions: HFL's recursion against the per-coordinate exact expectation on deterministic
delay paths (with and without group offsets), MLL-SGD's against the adapter's exact
moments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t

from fedbound.sim.estimate import QuadraticModel, exact_quadratic_model
from fedbound.verify import limits
from fedbound.verify.api import (
    Chooser,
    Evaluation,
    Knob,
    Proposal,
    ResourceError,
    choose,
    paired_regret,
    passes,
)
from fedbound.verify.choose import around, grid, plan

torch.set_num_threads(1)


class Parabola(Chooser):
    """x on a grid; replica r of any x measures (x - 3)^2 + 1 + noise_r (the same noise for
    every x on the same replica: common random numbers); records every simulate call."""

    name, key, metric = "parabola", "mllsgd.theorem1", "(x - 3)^2 + 1"
    calibration = "a guess"
    replicas, screen_replicas, finalists = 8, 2, 2

    def __init__(self, xs=tuple(range(10)), guess=5.0, cost=1.0):
        self.xs, self.guess, self.cost, self.calls = xs, guess, cost, []

    def inputs(self):
        return {}

    def knobs(self):
        return [Knob("x", tuple(self.xs), "linear", option="--x")]

    def certified(self, variant):
        return Proposal({"x": float(self.xs[0])}, 99.0)

    def calibrated(self):
        return Proposal({"x": self.guess}, 1.0)

    def simulate(self, settings, replicas, *, paired):
        self.calls.append(([s["x"] for s in settings], replicas, paired))
        noise = np.random.default_rng(0).normal(0, 0.1, replicas)
        return [Evaluation(dict(s), (s["x"] - 3.0) ** 2 + 1 + noise) for s in settings]

    def footprint(self, settings, replicas):
        return limits.Footprint.of({"x": 8.0 * replicas}, {"x": self.cost * replicas})


class Noisy(Parabola):
    """Parabola with noise of its own per configuration (sd 5, not paired): neighbours of
    the best, 100% behind it, cannot be told from it on 8 or 32 replicas."""

    resolve = 4

    def simulate(self, settings, replicas, *, paired):
        self.calls.append(([s["x"] for s in settings], replicas, paired))
        rng = np.random.default_rng(0)
        return [Evaluation(dict(s), (s["x"] - 3.0) ** 2 + 1 + rng.normal(0, 5, replicas)) for s in settings]


@pytest.mark.parametrize("chooser, replicas", [
    (Noisy(), [8, 16, 32]),            # unresolved: twice the replicas, up to resolve = 4 times
    (Parabola(), [8]),                 # common noise: every difference decided at once
    (type("Once", (Noisy,), {"resolve": 1})(), [8]),
])
def test_the_paired_stage_grows_while_a_close_configuration_is_unresolved(chooser, replicas):
    report = choose(chooser)
    paired = [r for _, r, is_paired in chooser.calls if is_paired]
    assert paired == replicas and report.search["replicas"] == replicas[-1]
    planned = [r for _, r in plan(chooser, 10, 1).resolving]   # counted in the limits and the bar
    assert planned == ([16, 32] if chooser.resolve == 4 else []) and set(replicas[1:]) <= set(planned)


# ---------------------------------------------------------------------- the regret


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=30), st.floats(-0.5, 0.5),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_paired_regret_is_the_t_interval_of_the_differences(best, shift, maximise, seed):
    b = np.asarray(best)
    v = b + shift + np.random.default_rng(seed).normal(0, 0.05, b.size)
    regret, hw, significant = paired_regret(v, b, maximise=maximise)
    d = (b - v) if maximise else (v - b)
    assert regret == pytest.approx(d.mean() / b.mean(), rel=1e-9, abs=1e-12)
    want = student_t.ppf(0.975, b.size - 1) * d.std(ddof=1) / math.sqrt(b.size) / b.mean()
    assert hw == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert significant == (d.mean() - want * b.mean() > 0)
    assert passes(regret, hw) == (regret <= 0.1 or regret - hw <= 0)


def test_paired_regret_of_infinite_values():
    assert paired_regret([1.0, math.inf], [1.0, 2.0])[0] == math.inf
    assert paired_regret([1.0, math.inf], [1.0, math.inf]) == (0.0, 0.0, False)
    with pytest.raises(ValueError, match="the same replicas"):
        paired_regret([1.0, 2.0], [1.0])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 64), min_size=2, max_size=8, unique=True), st.booleans())
def test_knob_neighbours_lie_strictly_between_grid_values(values, log):
    knob = Knob("k", tuple(values), "log" if log else "linear", integer=True)
    for v in knob.values:
        for n in knob.neighbours(v):
            lower = [u for u in knob.values if u < v]
            upper = [u for u in knob.values if u > v]
            assert isinstance(n, int) and n != v
            assert (lower and lower[-1] < n < v) or (upper and v < n < upper[0])
    assert Knob("k", (4.0,)).neighbours(4.0) == [] and Knob("k", (4.0,)).fixed


# ---------------------------------------------------------------------- the search


def test_successive_halving_and_the_paired_stage():
    chooser = Parabola()
    report = choose(chooser, variants=["proof"])
    start = {"x": 5.0}
    pool = [start, *around(chooser.knobs(), start)]
    pool += [s for s in grid(chooser.knobs()) if s not in pool]
    rungs = [c for c in chooser.calls if not c[2]]
    # rung 0: the calibrated answer first, its neighbours, then the grid; half kept, replicas doubled
    assert rungs[0] == ([s["x"] for s in pool], 2, False)
    for (before, r0, _), (after, r1, _) in zip(rungs, rungs[1:], strict=False):
        assert len(after) == math.ceil(len(before) / 2) and r1 == 2 * r0
    expected = plan(chooser, len(grid(chooser.knobs())) + 2, 0)
    assert [(len(x), r) for x, r, _ in rungs] == expected.rungs
    (paired,) = [c for c in chooser.calls if c[2]]
    assert paired[1] == chooser.replicas and 3.0 in paired[0] and 0.0 in paired[0]
    assert report.simulated.settings == {"x": 3.0} and report.simulated.regret == 0
    certified = report.certified[0]  # x = 0: 9 above the best, on every replica
    assert certified.regret == pytest.approx(9.0 / report.simulated.value, rel=1e-9)
    assert certified.regret_ci == 0 and not certified.passes
    assert report.search["rungs"] == [{"configurations": n, "replicas": r} for n, r in expected.rungs]


def test_a_fixed_knob_is_every_answers_value():
    chooser = Parabola(xs=(4,), guess=4.0)
    report = choose(chooser, variants=[])
    assert report.simulated.settings == report.calibrated.settings == {"x": 4.0}
    assert all(x == [4.0] for x, _, _ in chooser.calls)


def test_a_search_above_the_limits_is_refused_before_it_runs():
    chooser = Parabola(cost=1e9)
    with limits.configured(steps="1e10"), pytest.raises(ResourceError, match="the search over --x"):
        choose(chooser)
    with limits.configured(scenarios="5"), pytest.raises(ResourceError, match="over --x: the grid = "):
        choose(chooser)
    assert chooser.calls == []


def test_bound_method_simulates_nothing():
    chooser = Parabola()
    report = choose(chooser, variants=["proof"], method="bound")
    assert chooser.calls == [] and report.simulated is None
    assert report.certified[0].value is None and "Predictions only" in report.message


# ---------------------------------------------------------------------- HFL's prediction


DETERMINISTIC = [0.0, 1.0, 0.0, 0.0, 0.0, 5.0, 0.0, 0.0]  # c_i = 1, c_g = 5: t_i = ceil(S)


def _hfl_exact(lam, start, offsets, noise, sizes, t, alpha, rounds):
    """E f - f_ref after each round, per eigen-coordinate: deterministic counts t [G] every
    round, so a, beta and the noise variance are numbers: mean' = a mean + sum_i beta_i h_i,
    var' = a^2 var + nu, by plain loops over the coordinates and the local iterations."""
    n = np.asarray(sizes, dtype=float)
    w = n / n.sum()
    gaps = []
    for j, lj in enumerate(lam):
        rho = 1 - alpha * lj
        a, beta, nu = 1.0, np.zeros(len(sizes)), 0.0
        for i, ti in enumerate(t):
            s = sum(rho**l for l in range(ti))
            q = sum(rho ** (2 * l) for l in range(ti))
            a -= alpha * lj * w[i] * s / ti
            beta[i] = -alpha * w[i] * s / ti
            nu += alpha**2 * (w[i] / ti) ** 2 * q * noise[i, j] / n[i]
        mean, var, row = start[j], 0.0, []
        for _ in range(rounds + 1):
            row.append(0.5 * lj * (mean**2 + var))
            mean, var = a * mean + beta @ offsets[:, j], a * a * var + nu
        gaps.append(row)
    return np.sum(gaps, axis=0)


@pytest.mark.parametrize("heterogeneous", [False, True])
def test_hfl_prediction_is_exact_on_deterministic_paths(heterogeneous):
    from fedbound.verify.papers.hfl import predict

    rng = np.random.default_rng(1)
    lam, sizes = np.array([0.1, 0.5, 1.0]), [3, 5]
    start = rng.normal(size=3)
    offsets = rng.normal(size=(2, 3)) if heterogeneous else np.zeros((2, 3))
    vectors = np.vstack([start, offsets]) if heterogeneous else start[None]
    gram = np.einsum("aj,bj->jab", vectors, vectors)
    noise = rng.uniform(0.5, 2.0, size=(2, 3))
    model = QuadraticModel(lam, gram, noise, 0.0, "by hand")
    t = np.array([[3, 3]] * 7)
    gaps, _ = predict.curves(model, sizes, [0.2, 0.7], t, 6)
    for k, alpha in enumerate((0.2, 0.7)):
        want = _hfl_exact(lam, start, offsets, noise, sizes, [3, 3], alpha, 6)
        assert gaps[k] == pytest.approx(want, rel=1e-10)


def test_hfl_calibrated_answer_on_a_quadratic_is_the_exact_model():
    """For the synthetic quadratic the local quadratic model is the problem itself; the
    calibrated answer minimises the prediction over the calibration grid."""
    from fedbound.verify.papers.hfl import SyncTime

    chooser = SyncTime(sizes=[3, 3], delays=DETERMINISTIC, T=60, L=1.0, G=2.0, sigma=2.0,
                       Delta=1.0, S=[0, 2, 4], replicas=4)
    qm, ex = chooser.quadratic_model(), exact_quadratic_model(chooser.problem, chooser.x1, 2)
    assert np.array_equal(qm.curvature, ex.curvature) and np.array_equal(qm.gram, ex.gram)
    prop = chooser.calibrated()
    assert prop.predicted == min(row["predicted"] for row in prop.curve)
    assert {(row["S"], row["alpha"]) for row in prop.curve} == {
        (S, a) for S in (0, 2, 4) for a in chooser.calibration_grid()[1]}


# ---------------------------------------------------------------------- MLL-SGD's prediction


def test_mllsgd_prediction_is_the_adapters_exact_moments():
    from fedbound.verify.papers.mllsgd import adapters as A
    from fedbound.verify.papers.mllsgd import predict

    s = A.MLLSGDScenario(K=32, tau=2, q=2)
    setup = A.build(s)
    qm = exact_quadratic_model(setup.problem, setup.x1)
    m = setup.matrices
    _, grads = predict.curves(qm, setup.p, m.a, m.V, m.Z, [0.1, 0.4], s.K, s.q, s.tau)
    for k, eta in enumerate((0.1, 0.4)):
        assert grads[k, : s.K] == pytest.approx(A.exact_series(setup, eta, s.K, s.q, s.tau), rel=1e-12)



def test_quadratic_model_of_a_logistic_problem():
    """Off the quadratic (the full-Hessian path): the curvature is the spectrum of a
    logistic Hessian, (1/n) A^T diag(s (1 - s)) A, so it lies in [0, R^2 / 4]; x_ref lies
    below the start; the start's projections add up to ||x_1 - x_ref||^2 > 0."""
    from fedbound.sim.estimate import quadratic_model
    from fedbound.sim.problems import LogisticRegression

    problem = LogisticRegression.random(60, 5, 1.0, torch.Generator().manual_seed(0), batch=4)
    x1 = torch.full((5,), 0.5, dtype=torch.float64)
    model = quadratic_model(problem, x1, torch.Generator().manual_seed(1))
    assert model.curvature.shape == (5,)
    assert np.all(model.curvature >= -1e-12) and np.all(model.curvature <= 0.25 + 1e-12)
    assert model.f_ref < float(problem.loss(x1)) and model.gram[:, 0, 0].sum() > 0
