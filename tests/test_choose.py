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
    half_width,
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


class Blocks(Noisy):
    """Noisy on replica blocks: block b of configuration x draws its noise from the seed
    (b, x) (its own per configuration, sd 5: unresolved), every call of block b the same."""

    replica_blocks = True

    def simulate(self, settings, replicas, *, paired, block=0):
        self.calls.append(([s["x"] for s in settings], replicas, paired, block))
        return [Evaluation(dict(s), self.values(s["x"], replicas, block)) for s in settings]

    @staticmethod
    def values(x, replicas, block):
        noise = np.random.default_rng([block, round(1000 * x)]).normal(0, 5, replicas)
        return (x - 3.0) ** 2 + 1 + noise


def test_a_close_race_on_replica_blocks_adds_new_replicas_to_those_it_has():
    """A chooser whose simulate takes a block of replicas: the race grows from 8 replicas
    to 16 and 32 by simulating 8 and then 16 new ones (blocks 1 and 2), never block 0 again
    for a configuration it has; a configuration added after (the leader's new neighbour)
    runs on every block; every answer's values are its blocks' joined in order."""
    chooser = Blocks()
    report = choose(chooser)
    paired = [(x, r, b) for x, r, is_paired, b in chooser.calls if is_paired]
    assert {(r, b) for _, r, b in paired} <= {(8, 0), (8, 1), (16, 2)}
    assert {b for _, _, b in paired} == {0, 1, 2} and report.search["replicas"] == 32
    for x in {x for xs, _, _ in paired for x in xs}:  # each configuration once per block
        runs = [b for xs, _, b in paired for v in xs if v == x]
        assert sorted(runs) == sorted(set(runs))
    best = report.simulated.settings["x"]
    want = np.concatenate([Blocks.values(best, r, b) for b, r in ((0, 8), (1, 8), (2, 16))])
    assert report.simulated.value == pytest.approx(want.mean(), rel=1e-12)
    assert report.simulated.ci == pytest.approx(half_width(want), rel=1e-12)


def test_blocks_join_their_values_in_order_and_weigh_a_float_by_replicas():
    from fedbound.verify.choose import _joined

    a = Evaluation({"x": 1.0}, np.array([1.0, 2.0]), {"mean_U": 2.0, "K": 5})
    b = Evaluation({"x": 1.0}, np.array([3.0, 4.0, 5.0, 6.0, 7.0, 8.0]), {"mean_U": 4.0, "K": 5})
    joined = _joined([a, b])
    assert joined.values.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    assert joined.extra == {"mean_U": (2 * 2.0 + 6 * 4.0) / 8, "K": 5}
    assert _joined([a]) is a


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
    assert report.simulated.settings == {"x": 3.0} and report.simulated.against == "calibrated"
    # the best's own regret: against the best other answer (x = 5, 4 above it on every replica)
    assert report.simulated.regret == pytest.approx(-4.0 / report.calibrated.value, rel=1e-9)
    assert report.simulated.regret_ci < 1e-12 and report.simulated.passes
    certified = report.certified[0]  # x = 0: 9 above the best, on every replica
    assert certified.regret == pytest.approx(9.0 / report.simulated.value, rel=1e-9)
    assert certified.regret_ci == 0 and not certified.passes
    assert report.search["rungs"] == [{"configurations": n, "replicas": r, "shown_behind": 0}
                                      for n, r in expected.rungs]


def test_a_rung_on_common_numbers_drops_what_it_shows_more_than_10_percent_behind():
    """A chooser that declares common random numbers (Parabola's replicas share their noise,
    so every paired difference is exact): each rung keeps, of its better half, only the
    configurations within 10% of its leader ((x - 3)^2 <= 0.1 of the best's 1); without the
    declaration the whole better half goes on (the test above)."""
    xs = (1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0)
    chooser = type("Common", (Parabola,), {"common_numbers": True})(xs=xs, guess=3.0)
    report = choose(chooser, variants=["proof"])
    rungs = [c for c in chooser.calls if not c[2]]
    for k, (before, _, _) in enumerate(rungs):
        half = sorted(before, key=lambda x: (x - 3.0) ** 2)[:math.ceil(len(before) / 2)]
        kept = [x for x in half if (x - 3.0) ** 2 <= 0.1 + 1e-12]
        assert report.search["rungs"][k]["shown_behind"] == len(half) - len(kept) > 0
        if k + 1 < len(rungs):
            assert sorted(rungs[k + 1][0]) == sorted(kept)
    assert report.simulated.settings == {"x": 3.0}
    assert len(rungs) < len(plan(chooser, len(rungs[0][0]), 0).rungs)  # fewer rungs than halving


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


# ---------------------------------------------------------------------- the whole range


class Far(Parabola):
    """The best x (12) lies beyond the grid 0 .. 9; x above ``diverge`` diverges (inf on every
    replica); ``extend``: whether the search may go beyond the grid."""

    def __init__(self, extend=True, diverge=math.inf, best=12.0, **kw):
        super().__init__(**kw)
        self.extend, self.diverge, self.best = extend, diverge, best

    def knobs(self):
        return [Knob("x", tuple(self.xs), "linear", option="--x", lower=0, extend=self.extend)]

    def simulate(self, settings, replicas, *, paired):
        self.calls.append(([s["x"] for s in settings], replicas, paired))
        noise = np.random.default_rng(0).normal(0, 0.1, replicas)
        return [Evaluation(dict(s), np.full(replicas, math.inf) if s["x"] > self.diverge
                           else (s["x"] - self.best) ** 2 + 1 + noise) for s in settings]


def test_a_pick_at_the_edge_of_the_grid_extends_the_search_beyond_it():
    report = choose(Far(), variants=[])
    assert report.simulated.settings == {"x": 12.0} and not report.simulated.edge
    assert report.search["searched"]["x"][1] > 12.0  # simulated beyond the best, then stopped
    assert report.recommended["answer"] == "simulated" and "flagged" not in report.recommended["why"]


def test_a_pick_at_the_edge_of_a_grid_given_is_flagged_in_the_text_and_the_json():
    report = choose(Far(extend=False), variants=[])
    assert report.simulated.settings == {"x": 9.0}
    (edge,) = report.simulated.edge
    assert "x = 9 is the largest x searched (the grid given)" in edge
    assert report.as_dict()["simulated"]["edge"] == [edge] and "flagged: " + edge in report.text()
    assert "flagged" in report.recommended["why"]


def test_the_search_extends_until_the_simulation_diverges():
    """Past x = 10 every run diverges: the search stops there, and the pick next to
    divergence is at no edge (the range was searched until divergence showed)."""
    report = choose(Far(diverge=10.0), variants=[])
    assert report.simulated.settings == {"x": 10.0} and report.simulated.edge == []
    simulated = {row["x"] for row in report.simulated.curve}
    assert 11.0 in simulated
    assert all(not math.isfinite(row["value"]) for row in report.simulated.curve if row["x"] > 10)


def test_a_knob_at_its_own_limit_is_at_no_edge():
    report = choose(Far(best=-3.0), variants=[])  # lower = 0: x = 0 is the knob's own limit
    assert report.simulated.settings == {"x": 0.0} and report.simulated.edge == []


def test_a_prediction_over_steps_extends_until_it_diverges_or_flags_its_edge():
    from fedbound.verify.api import predicted_over_steps

    def predict(steps):  # two rows (say, two S); the best at step 8; above 20 it diverges
        s = np.log2(steps)
        return np.array([np.where(np.asarray(steps) > 20, np.inf, (s - 3) ** 2),
                         (s - 2) ** 2 + 1])

    steps, values, edge = predicted_over_steps(predict, [0.25, 0.5, 1.0])
    assert steps == [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0] and edge == []
    assert values.shape == (2, 7) and values[0, steps.index(8.0)] == 0
    steps, _, edge = predicted_over_steps(predict, [0.25, 0.5, 1.0], extend=False)
    assert steps == [0.25, 0.5, 1.0] and edge == [
        "step = 1 is the largest step predicted (the grid given): the best may lie beyond it"]
    steps, values, edge = predicted_over_steps(predict, [0.25, 0.5, 1.0], limit=2)
    assert steps[-1] == 4.0 and "extended as far as the prediction goes" in edge[0]
    assert predicted_over_steps(predict, [1.0], extend=False)[2] == []  # a fixed step: no edge
    # a step above ``upper`` is not predicted (inf); a pick there is flagged with the note
    steps, values, edge = predicted_over_steps(predict, [0.25, 0.5, 1.0], upper=2.0, upper_note="why")
    assert steps == [0.25, 0.5, 1.0, 2.0, 4.0] and np.all(np.isinf(values[:, -1]))
    assert edge == ["step = 2 is the largest step predicted: why"]


# ---------------------------------------------------------------------- one recommendation


class Same(Parabola):
    """x = 0, 1, 2 run the same configuration (as S below every c_i runs S = 0's schedule)."""

    def canonical(self, settings):
        if 0 < settings["x"] <= 2:
            return {**settings, "x": 0.0}, "x <= 2 runs as x = 0"
        return settings, ""

    def certified(self, variant):  # picks x = 2: the same run as x = 0
        return Proposal({"x": 2.0}, 99.0, [{"x": float(x), "bound": float(x)} for x in self.xs])


def test_settings_that_run_the_same_configuration_run_once_and_share_a_row():
    chooser = Same(guess=0.0)
    report = choose(chooser, variants=["proof"])
    assert not any(x in (1.0, 2.0) for xs, _, _ in chooser.calls for x in xs)
    (same,) = report.same
    assert same["answers"] == ["certified proof", "calibrated"] and same["reason"] == "x <= 2 runs as x = 0"
    assert same["settings"] == [{"x": 2.0}, {"x": 0.0}]
    text = report.text()
    assert "certified proof = calibrated" in text  # one row per distinct run
    assert "x = 2 and x = 0 run the same configuration (x <= 2 runs as x = 0): shown once" in text
    # a bound non-decreasing in x: said, with the end it picks
    assert "non-decreasing in x over the values compared, so it picks the smallest" in \
        report.certified[0].note


def test_the_recommendation_leads_the_text_and_is_in_the_json():
    report = choose(Parabola(), variants=["proof"])
    rec = report.as_dict()["recommended"]
    assert rec["settings"] == {"x": 3.0} and rec["answer"] == "simulated"
    assert "ahead of calibrated" in rec["why"] and "behind" in rec["why"]
    assert report.text().startswith("Recommended: x = 3 (the simulated answer): the best of ")
    bound_only = choose(Parabola(), variants=["proof"], method="bound")
    assert bound_only.recommended["answer"] == "calibrated" and "--method both" in \
        bound_only.recommended["why"]


def test_no_answer_reports_zero_regret_against_itself():
    """The best configuration's answers (here the simulated and the calibrated, the same x)
    are judged against the best of the others, never 0 +- 0 against themselves."""
    report = choose(Parabola(guess=3.0), variants=["proof"])
    assert report.simulated.settings == report.calibrated.settings == {"x": 3.0}
    for a in (report.simulated, report.calibrated):
        assert a.against == "certified proof" and a.regret < 0 and not (a.regret == 0 == a.regret_ci)


@pytest.mark.parametrize("regret, hw, open_", [
    (0.05, 0.2, True),     # within 10% by its estimate, but the interval reaches below -10%
    (0.078, 0.23, True),   # issue 38's close race: 7.8% +- 23%
    (0.15, 0.1, True),     # its interval reaches within 10%
    (0.05, 0.04, False),   # within 10% on both sides
    (0.5, 0.1, False),     # clearly behind
])
def test_a_race_is_open_while_a_runner_up_interval_reaches_within_ten_percent(regret, hw, open_):
    from fedbound.verify.choose import _unresolved

    r = 64
    best = np.full(r, 1.0)
    sd = hw / (student_t.ppf(0.975, r - 1) / math.sqrt(r))
    z = np.random.default_rng(1).normal(size=r)
    d = regret + sd * (z - z.mean()) / z.std(ddof=1)   # exactly this mean and half-width
    evaluations = [Evaluation({"x": 0.0}, best), Evaluation({"x": 1.0}, best + d)]
    got, got_hw, _ = paired_regret(evaluations[1].values, best)
    assert got == pytest.approx(regret) and got_hw == pytest.approx(hw)
    assert _unresolved(evaluations, maximise=False) == open_


def test_a_close_race_runs_again_on_the_configurations_in_contention():
    """A race run again keeps the leader, every configuration not shown more than 10% behind
    it, the answers and the leader's nearest neighbours; one shown further behind, or
    diverged, is left out."""
    from fedbound.verify.choose import _contenders

    r, t = 64, student_t.ppf(0.975, 63) / math.sqrt(64)
    z = np.random.default_rng(2).normal(size=r)
    z = (z - z.mean()) / z.std(ddof=1)

    def at(regret, hw):  # values with exactly this paired regret and half-width against 1
        return 1.0 + regret + hw / t * z

    values = {3: np.full(r, 1.0), 2: at(0.3, 0.01), 4: at(0.3, 0.01), 1: at(0.5, 0.01),
              0: at(9.0, 0.01), 5: np.full(r, math.inf), 6: at(0.5, 0.6), 7: at(0.05, 0.01),
              8: at(0.12, 0.01)}
    evaluations = [Evaluation({"x": float(x)}, v) for x, v in values.items()]
    kept = _contenders([Knob("x", tuple(range(9)), option="--x")], evaluations, False,
                       answers={(("x", 1.0),)})
    # 3 leads; 2 and 4 its neighbours; 1 an answer; 6 and 7 not shown 10% behind
    assert [s["x"] for s in kept] == [3.0, 2.0, 4.0, 1.0, 6.0, 7.0]


def test_mllsgd_answers_with_slow_workers_and_says_why_no_variant_certifies():
    """Workers at p = 0.3 (below 2 - sqrt(2)): no eta meets Theorem 1's condition (12), so
    each certified entry names the condition and its variant; the calibrated and simulated
    answers need no theorem and run (issue 38's hub topology refused with exit 2 before)."""
    from fedbound.verify.papers.mllsgd import TauEta

    chooser = TauEta(hubs=2, workers_per_hub=2, p=[0.3, 0.3, 0.9, 0.9], K=32, tau=[1, 2], replicas=4)
    report = choose(chooser)
    for a in report.certified:
        assert a.settings is None and f"the {a.variant} variant's conditions cannot hold" in a.note
        assert "(12)" in a.note and "p[0]=0.3" in a.note
    assert report.calibrated.settings is not None and report.simulated.value > 0
    assert report.recommended["answer"] == "simulated"
    etas = chooser.knobs()[1].values
    assert etas[-1] == pytest.approx(2.0 / chooser.curvature())  # steps from the curvature, no theorem


def test_hfl_runs_an_s_below_every_shift_as_s_0_and_shows_it_once():
    """Issue 41, item 8: with every c_i = 1, S = 0.5 runs S = 0's schedule (one local
    iteration per round): the simulation gives the same values, bit for bit, and the chooser
    runs it once and says so."""
    from fedbound.verify.papers.hfl import SyncTime

    chooser = SyncTime(sizes=[3, 3], delays=DETERMINISTIC, T=60, L=1.0, G=2.0, sigma=2.0, Delta=1.0,
                       S=[0, 0.5, 2], alpha=0.1, replicas=4)
    a, b = chooser.simulate([{"S": 0.0, "alpha": 0.1}, {"S": 0.5, "alpha": 0.1}], 4, paired=True)
    assert np.array_equal(a.values, b.values)
    settings, reason = chooser.canonical({"S": 0.5, "alpha": 0.1})
    assert settings == {"S": 0.0, "alpha": 0.1} and "every c_i is at least 1" in reason
    assert chooser.canonical({"S": 2.0, "alpha": 0.1}) == ({"S": 2.0, "alpha": 0.1}, "")
    report = choose(chooser, variants=["proof"])
    assert all(row["S"] != 0.5 for row in report.simulated.curve)
