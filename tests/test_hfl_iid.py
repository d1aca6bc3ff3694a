"""fedbound's iid variant of the HFL Theorem 2 and Corollary 1 (derived by fedbound, not
published; bounds/derivations/hfl_iid.md), against independent computations: a plain-loop
transcription of the formula, the minibatch-SGD special case S = 0, the exact left-hand side
of a quadratic with Gaussian noise (no simulator), a Monte-Carlo run of Algorithm 1 on a
non-convex problem written here with numpy, the simulator through verify.check, and the
choice of S on the delay parameters of Ali & Arafa 2025, Fig. 7a."""

import math

import numpy as np
import pytest
from hfl_reference import exact_quadratic, iid_reference
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedbound import bounds, verify
from fedbound.bounds import delays as D
from fedbound.bounds import hfl as H
from fedbound.bounds.hfl_sync import choose_sync_time

FAST = settings(max_examples=30, deadline=None)
FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
IID = bounds.get("hfl.theorem2", "iid")


@st.composite
def schedules(draw, max_t=12):
    """Group sizes, a schedule t [U, G] and constants, with a step admissible for the iid
    variant (alpha <= 1/L and alpha L tau <= 1/2), at its largest or below it."""
    groups = draw(st.integers(1, 4))
    sizes = np.array(draw(st.lists(st.integers(1, 40), min_size=groups, max_size=groups)))
    U = draw(st.integers(1, 8))
    t = np.array(draw(st.lists(st.lists(st.integers(1, max_t), min_size=groups,
                                        max_size=groups), min_size=U, max_size=U)))
    L = draw(st.floats(0.1, 10))
    tau = int(t.max()) - 1
    top = min(1.0, 0.5 / tau) / L if tau else 1.0 / L
    alpha = top * draw(st.one_of(st.just(1.0), st.floats(1e-3, 1.0)))
    params = dict(alpha=alpha, L=L, sigma=draw(st.floats(0, 5)), Delta=draw(st.floats(0, 50)),
                  sizes=sizes)
    return params, t


# ------------------------------------------------------------------ formula


@FAST
@given(schedules())
def test_iid_matches_transcription(data):
    p, t = data
    assert IID.admissible(**p, t=t)
    assert IID.evaluate(**p, t=t) == pytest.approx(iid_reference(p, t.tolist()), rel=1e-10, abs=1e-12)
    assert sum(IID.terms(**p, t=t).values()) == pytest.approx(IID.evaluate(**p, t=t), rel=1e-12)


@FAST
@given(schedules(), st.integers(1, 4))
def test_padded_batch_equals_paths(data, extra):
    p, t = data
    longer = np.vstack([t, t[:extra]])
    batch = np.zeros((2, len(longer), t.shape[1]), dtype=int)
    batch[0, : len(t)], batch[1] = t, longer
    got = IID.evaluate(**p, t=batch)
    assert got[0] == pytest.approx(iid_reference(p, t.tolist()), rel=1e-10, abs=1e-12)
    assert got[1] == pytest.approx(iid_reference(p, longer.tolist()), rel=1e-10, abs=1e-12)


@FAST
@given(schedules())
def test_s_zero_is_minibatch_sgd_as_refined(data):
    """t = 1 everywhere (S = 0): 2 Delta/(alpha U) + alpha L sigma^2/N, the refined bound's
    value there, every drift term zero."""
    p, t = data
    ones = np.ones_like(t)
    p = {**p, "alpha": p["alpha"] * (t.max() - 1 or 1)}  # any alpha <= 1/L is admissible at t = 1
    assume(p["alpha"] * p["L"] <= 1)
    want = 2 * p["Delta"] / (p["alpha"] * len(t)) + p["alpha"] * p["L"] * p["sigma"] ** 2 / p["sizes"].sum()
    assert IID.evaluate(**p, t=ones) == pytest.approx(want, rel=1e-12, abs=1e-300)
    refined = bounds.get("hfl.theorem2", "refined").evaluate(**p, G=1.0, t=ones)
    assert IID.evaluate(**p, t=ones) == pytest.approx(refined, rel=1e-12, abs=1e-300)
    terms = IID.terms(**p, t=ones)
    assert terms["local drift"] == terms["noise-drift coupling"] == terms["absorbed gradient drift"] == 0


@FAST
@given(schedules(), st.floats(0, 5))
def test_non_decreasing_in_sigma_and_the_noise_free_bound(data, more):
    """Every sigma term is non-negative: the bound grows with sigma; at sigma = 0 only the
    transient (and its absorbed share) is left."""
    p, t = data
    b = IID.evaluate(**p, t=t)
    assert IID.evaluate(**{**p, "sigma": p["sigma"] + more}, t=t) >= b * (1 - 1e-12)
    quiet = IID.terms(**{**p, "sigma": 0.0}, t=t)
    assert quiet["noise"] == quiet["local drift"] == quiet["noise-drift coupling"] == 0


@FAST
@given(schedules(), st.integers(2, 4))
def test_splitting_a_group_never_lowers_the_bound(data, parts):
    """One group of N clients against the same clients in ``parts`` groups on the same
    schedule: the noise and the coupling are the same, the local drift is ``parts`` times
    larger (each group's local path averages only its own clients' noise)."""
    p, t = data
    one = {**p, "sizes": np.array([parts * 3])}
    split = {**p, "sizes": np.full(parts, 3)}
    t1 = t[:, :1]
    tp = np.repeat(t1, parts, axis=1)
    a, b = IID.terms(**one, t=t1), IID.terms(**split, t=tp)
    assert b["noise"] == pytest.approx(a["noise"], rel=1e-12)
    assert b["noise-drift coupling"] == pytest.approx(a["noise-drift coupling"], rel=1e-12, abs=1e-300)
    assert b["local drift"] == pytest.approx(parts * a["local drift"], rel=1e-12, abs=1e-300)
    assert IID.evaluate(**split, t=tp) >= IID.evaluate(**one, t=t1) * (1 - 1e-12)


@FAST
@given(schedules(), st.floats(0.1, 10))
def test_scale_invariance(data, s):
    """F -> sF: L, sigma, Delta -> s*, alpha -> alpha/s; the left-hand side scales by s^2."""
    p, t = data
    scaled = {**p, "L": s * p["L"], "sigma": s * p["sigma"], "Delta": s * p["Delta"],
              "alpha": p["alpha"] / s}
    assert IID.evaluate(**scaled, t=t) == pytest.approx(s**2 * IID.evaluate(**p, t=t),
                                                        rel=1e-9, abs=1e-12)


def test_condition_and_largest_step():
    """alpha <= 1/L and alpha L tau <= 1/2 with tau = max t - 1; past the condition the bound
    is +inf where rho >= 1, never a negative number."""
    p = dict(L=2.0, sigma=1.0, Delta=1.0, sizes=np.array([3, 5]))
    t = np.array([[1, 4], [3, 2]])  # tau = 3
    assert IID.max_step(**p, t=t) == pytest.approx(0.5 / (2.0 * 3))
    assert IID.max_step(**p, t=np.ones((2, 2))) == pytest.approx(0.5)
    assert IID.admissible(**p, t=t, alpha=0.5 / 6)
    assert [v.condition for v in IID.violations(**p, t=t, alpha=0.1)] == ["alpha L tau <= 1/2"]
    assert IID.evaluate(**p, t=t, alpha=0.5) == math.inf
    assert "G" not in IID.params


@FAST
@given(schedules(), st.integers(0, 3), st.floats(0.01, 1.0))
def test_corollary_is_theorem_at_its_step_with_t_max(data, slack, frac):
    """Corollary I = the iid Theorem 2 at alpha = min(1/sqrt(U), 1/L) on the all-t^max
    schedule with its noise at t = 1 (1/t <= 1, and the other terms non-decreasing in t), and
    at least the theorem on the realised schedule. L is drawn so that the corollary's
    condition L tau^max <= max(sqrt U, L)/2 holds."""
    p, t = data
    U = len(t)
    t_max = t.max(axis=0) + slack
    tau = int(t_max.max()) - 1
    L = frac * math.sqrt(U) / (2 * max(tau, 1))
    p = {**p, "L": L}
    a = min(1 / math.sqrt(U), 1 / L)
    cor = bounds.get("hfl.corollary1", "iid")
    rest = {k: v for k, v in p.items() if k != "alpha"}
    assert cor.admissible(**rest, t=t, t_max=t_max)
    n, N = p["sizes"], p["sizes"].sum()
    ref = iid_reference({**p, "alpha": a}, np.tile(t_max, (U, 1)).tolist())
    growth = (1 + a * L) ** (2 * (tau - 1))
    rho = growth * a * L * tau * (1 + a * L * tau) / 4
    noise_gap = a * L * p["sigma"] ** 2 * (1 / N - (n / t_max).sum() / N**2)
    got = cor.evaluate(**rest, t=t, t_max=t_max)
    assert got == pytest.approx(ref + noise_gap / (1 - rho), rel=1e-10, abs=1e-300)
    assert IID.evaluate(**{**p, "alpha": a}, t=t) <= got * (1 + 1e-12)


# ------------------------------------------------------------------ exact check on quadratics


@settings(max_examples=60, deadline=None)
@given(schedules(max_t=10), st.integers(1, 6), st.floats(0.01, 30), st.floats(-2, 1),
       st.integers(0, 2**31 - 1))
def test_holds_exactly_on_quadratics(data, dim, sigma, log_scale, seed):
    p, t = data
    rng = np.random.default_rng(seed)
    L = p["L"]
    lam = np.exp(rng.uniform(np.log(L / 100), np.log(L), dim))
    lam[-1] = L
    e1 = rng.standard_normal(dim) * 10**log_scale
    lhs, _, Delta = exact_quadratic(lam, e1, p["sizes"], t, p["alpha"], sigma)
    bound = IID.evaluate(alpha=p["alpha"], L=L, sigma=sigma, Delta=Delta, sizes=p["sizes"], t=t)
    assert lhs <= bound * (1 + 1e-9)


def test_noise_constant_is_attained():
    """f = L/2 ||x||^2, alpha = 1/L, t = 1: the exact left-hand side is the bound minus
    sigma^2/(N U) (as for refined): the noise constant cannot be lowered."""
    L, sigma, sizes, U = 2.0, 3.0, np.array([3, 4]), 7
    lam, e1 = np.full(5, L), np.linspace(-1, 1, 5)
    lhs, _, Delta = exact_quadratic(lam, e1, sizes, np.ones((U, 2), int), 1 / L, sigma)
    bound = IID.evaluate(alpha=1 / L, L=L, sigma=sigma, Delta=Delta, sizes=sizes, t=np.ones((U, 2)))
    assert bound - lhs == pytest.approx(sigma**2 / (7 * U), rel=1e-9)


def cosine_lhs(t, sizes, *, alpha, sigma, x1, replicas, seed):
    """Monte Carlo of Theorem 2's left-hand side for Algorithm 1, (3)-(12), on the non-convex
    f(x) = sum_j (1 - cos x_j) (|f''| <= 1: L = 1, f_inf = 0), every client's stochastic
    gradient sin(x) + N(0, sigma^2/d I) (i.i.d. data): per replica, the mean over rounds of
    ||sin x^u||^2, with numpy, vectorised over replicas (a group's model takes the mean of
    its |N_i| clients' gradients, so its noise is N(0, sigma^2/(d |N_i|) I))."""
    rng = np.random.default_rng(seed)
    d = x1.size
    w = np.asarray(sizes, float) / np.sum(sizes)
    x = np.tile(x1, (replicas, 1))
    seen = []
    for row in t:
        seen.append((np.sin(x) ** 2).sum(1))
        step = np.zeros_like(x)
        for i, ti in enumerate(row):
            y = x.copy()
            for _ in range(int(ti)):
                y -= alpha * (np.sin(y) + rng.normal(0, sigma / math.sqrt(d * sizes[i]), y.shape))
            step += w[i] * (y - x) / ti
        x = x + step
    return np.mean(seen, axis=0)


@pytest.mark.parametrize(("t", "sizes", "sigma"), [
    (np.full((6, 2), 6), [2, 3], 0.5),        # long rounds at the largest admissible step
    (np.array([[1, 11], [11, 1], [6, 6]]), [1, 4], 2.0),
    (np.full((20, 1), 3), [1], 0.0),          # no noise: the absorbed gradient drift alone
])
def test_holds_on_a_non_convex_problem(t, sizes, sigma):
    """Near the maxima of 1 - cos x the curvature is -1: local steps move apart (the growth
    factor Gamma of the derivation); the bound still holds against a direct Monte-Carlo run
    (the upper end of its 95% interval below the bound)."""
    L, d = 1.0, 3
    alpha = IID.max_step(L=L, sigma=sigma, Delta=0.0, sizes=np.array(sizes), t=t)
    x1 = np.full(d, math.pi - 0.3)
    Delta = float((1 - np.cos(x1)).sum())
    lhs = cosine_lhs(t, sizes, alpha=alpha, sigma=sigma, x1=x1, replicas=4000, seed=1)
    upper = lhs.mean() + 1.96 * lhs.std(ddof=1) / math.sqrt(lhs.size)
    bound = IID.evaluate(alpha=alpha, L=L, sigma=sigma, Delta=Delta, sizes=np.array(sizes), t=t)
    assert upper <= bound, (upper, bound)


# ------------------------------------------------------------------ against the simulator


@pytest.mark.parametrize("case", [
    {}, {"mode": "expected"},
    {"alpha": None, "S": 5.0, "T": 150.0, "problem": {"kind": "quadratic", "sigma": 3.0}},
    {"alpha": None, "mode": "expected", "problem": {"kind": "quadratic", "sigma": 3.0}},
])
def test_holds_against_the_simulator(case):
    """The default scenario (logistic regression), each delay path's own schedule, and a
    quadratic (no G: the iid variant needs none); with alpha null the step is the largest the
    variant admits on every path, alpha L tau <= 1/2."""
    v = verify.check("hfl.theorem2", case, variant="iid")
    assert v.admissible and v.verdict == "holds", (case, v.bound, v.measured_mean)
    if case.get("alpha", 1.0) is None:
        assert v.params["alpha"] * v.params["L"] * (np.max(v.params["t"]) - 1) <= 0.5 + 1e-12


def test_corollary_holds_against_the_simulator():
    v = verify.check("hfl.corollary1", verify.default_scenario("hfl.corollary1"), variant="iid")
    assert v.admissible and v.verdict == "holds"


def test_g_is_required_only_by_the_variants_that_use_it():
    quadratic = {"problem": {"kind": "quadratic"}, "alpha": None}
    with pytest.raises(ValueError, match=r"\[refined\] needs a.s.-bounded gradients"):
        verify.check("hfl.theorem2", quadratic, variant="refined")
    assert verify.check("hfl.theorem2", quadratic, variant="iid").admissible


# ------------------------------------------------------------------ choosing S


def _fig7a(sigma, alpha):
    return D.DelayModel.linear(FIG7A, [15, 15]), dict(
        alpha=alpha, L=1.0, G=sigma, sigma=sigma, Delta=0.1, sizes=[15, 15])


def test_iid_chooses_local_iterations_on_fig7a_at_alpha_005():
    """Fig. 7a's delays, G = sigma = 30, alpha = 0.05 (T = 2000, L = 1, Delta = 0.1): every
    other variant picks S = 0; iid picks S = 3 (about 3 local iterations per round, 0.52 of
    its bound at S = 0), and leaves out the S where alpha L tau <= 1/2 fails on the a.s.
    envelope t <= t^max (t^max = 17 at S = 15)."""
    model, p = _fig7a(30.0, 0.05)
    grid = [0, 1.5, 2, 3, 4, 5, 7, 10, 15, 20]
    choice = choose_sync_time("hfl.theorem2", model=model, T=2000, variant="iid", S_grid=grid,
                              draws=1000, **p)
    assert choice.best_S == 3.0
    assert choice.inadmissible == [15.0, 20.0]
    assert choice.bound[choice.S.index(3.0)] < 0.6 * choice.bound[0]
    for variant in ("proof", "tight", "refined"):
        other = choose_sync_time("hfl.theorem2", model=model, T=2000, variant=variant,
                                 S_grid=grid, draws=1000, **p)
        assert other.best_S == 0.0 and other.inadmissible == []


def test_iid_choice_lowers_the_simulated_left_side():
    """The simulation (the chooser's quadratic, 16 delay paths, the same paths and seeds for
    both S: paired) confirms that S = 3 beats S = 0 on the left-hand side at Fig. 7a, G =
    sigma = 30, alpha = 0.05, by more than the interval of the paired difference."""
    from fedbound.sim.problems import one_thread
    from fedbound.verify.papers.hfl import SyncTime

    _, p = _fig7a(30.0, 0.05)
    alpha = p.pop("alpha")
    chooser = SyncTime(delays=FIG7A, T=2000, metric="lhs", alpha=alpha, **p)
    with one_thread():
        at0, at3 = chooser.simulate([{"S": 0.0, "alpha": alpha}, {"S": 3.0, "alpha": alpha}], 16,
                                    paired=True)
    assert at3.value + at3.ci < at0.value - at0.ci


def test_plug_in_and_monte_carlo_agree():
    model, p = _fig7a(30.0, 0.05)
    p = {k: v for k, v in p.items() if k != "G"}
    e = H.expected("hfl.theorem2", model, 3.0, 2000, variant="iid", paths=60, seed=1, **p)
    assert e.plug_in == pytest.approx(e.mean, rel=0.05)


# ------------------------------------------------------------------ metadata


@pytest.mark.parametrize("key", ["hfl.theorem2", "hfl.corollary1"])
def test_labelled_as_fedbounds_own_result(key):
    thm = bounds.get(key, "iid")
    assert "derived by fedbound, not published" in thm.title
    assert "derived by fedbound, not published" in thm.notes.lower()
    assert "bounds/derivations/hfl_iid.md" in thm.notes
    assert "Section II" in thm.notes
    assert thm.errata and all("derived by fedbound" in e.where for e in thm.errata if "iid" in e.where)
    assert thm.status == "holds"
    assert "G" not in thm.params
