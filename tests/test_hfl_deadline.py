"""fedbound's deadline bounds of Ali & Arafa 2025, Algorithm 1 (derived by fedbound, not
published; bounds/derivations/hfl_deadline.md), against independent computations: the exact
loss at the deadline on quadratics with plain loops (tests/hfl_reference.py, no shared code
with the bound's recursion), the problem of dimension 3 that attains the quadratic bound,
closed forms at S = 0, Monte Carlo of Algorithm 1 written here on a non-convex PL function
and on heterogeneous groups, the simulator through verify.check, and the certified choice of
(S, alpha) on the delay parameters of the paper's Fig. 7a."""

import math

import numpy as np
import pytest
from hfl_reference import exact_final_gap
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from fedbound import bounds, verify
from fedbound.bounds import delays as D
from fedbound.bounds import hfl_deadline as HD
from fedbound.bounds.deadline import certified_sup, worst_start
from fedbound.bounds.hfl_sync import choose_deadline_sync_time, choose_sync_time

verify.load_plugins()
FAST = settings(max_examples=30, deadline=None)
FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
QUAD = bounds.get("hfl.deadline_quadratic")
PL = bounds.get("hfl.deadline_pl")


@st.composite
def schedules(draw, max_t=10, max_rounds=12):
    """Group sizes, a schedule t [U, G] and the constants of both bounds, alpha <= 1/L."""
    groups = draw(st.integers(1, 3))
    sizes = np.array(draw(st.lists(st.integers(1, 20), min_size=groups, max_size=groups)))
    U = draw(st.integers(1, max_rounds))
    t = np.array(draw(st.lists(st.lists(st.integers(1, max_t), min_size=groups, max_size=groups),
                               min_size=U, max_size=U)))
    L = draw(st.floats(0.2, 5))
    mu = L * draw(st.floats(0.01, 1.0))
    alpha = draw(st.floats(0.01, 1.0)) / L
    return dict(alpha=alpha, L=L, mu=mu, sigma=draw(st.floats(0, 5)),
                Delta=draw(st.floats(0, 10)), sizes=sizes), t


@st.composite
def problems(draw, p):
    """A quadratic of the class of ``p``: eigenvalues in [mu, L] (both included when d >= 2),
    a start of gap Delta in a random direction, noise variances summing to sigma^2."""
    d = draw(st.integers(1, 4))
    inner = [draw(st.floats(0, 1)) for _ in range(d)]
    lam = np.array([p["mu"] * (p["L"] / p["mu"]) ** x for x in inner])
    if d >= 2:
        lam[0], lam[-1] = p["mu"], p["L"]
    direction = np.array([draw(st.floats(-1, 1)) for _ in range(d)])
    assume(np.abs(direction).sum() > 1e-3)
    e1 = direction * math.sqrt(2 * p["Delta"] / float((lam * direction**2).sum()))
    spread = np.array([draw(st.floats(0, 1)) for _ in range(d)]) + 1e-9
    return lam, e1, p["sigma"] ** 2 * spread / spread.sum()


# ------------------------------------------------------------------ the quadratic bound


@FAST
@given(schedules(), st.data())
def test_quadratic_bounds_every_member_of_the_class(data, more):
    """bound >= the exact loss at the deadline of any quadratic of the class, with G1 at its
    exact value ||grad f(x^1)||^2 and without it (G1 = 0)."""
    p, t = data
    lam, e1, noise = more.draw(problems(p))
    exact = exact_final_gap(lam, e1, p["sizes"], t, p["alpha"], noise)
    G1 = float((lam**2 * e1**2).sum())
    tight = QUAD.evaluate(**p, G1=min(G1, 2 * p["L"] * p["Delta"]), t=t)
    assert tight >= exact * (1 - 1e-9) - 1e-300
    assert QUAD.evaluate(**p, G1=0.0, t=t) >= tight * (1 - 1e-12)


@FAST
@given(schedules())
def test_quadratic_is_exact_in_one_dimension(data):
    """mu = L = lam: the class has one member per start sign, and the bound is its loss."""
    p, t = data
    p = {**p, "mu": p["L"]}
    e1 = np.array([math.sqrt(2 * p["Delta"] / p["L"])])
    exact = exact_final_gap([p["L"]], e1, p["sizes"], t, p["alpha"], [p["sigma"] ** 2])
    assert QUAD.evaluate(**p, G1=0.0, t=t) == pytest.approx(exact, rel=1e-9, abs=1e-300)


@FAST
@given(schedules(max_rounds=6), st.floats(0, 1))
@example(({"alpha": 0.29411764705882354, "L": 3.4, "mu": 2.55, "sigma": 0.0, "Delta": 1.0,
           "sizes": np.array([1])}, np.array([[1]])), 1.0)  # bar's round-off past L, once
def test_quadratic_is_attained_in_dimension_three(data, where):
    """The bound is the supremum over the class: the two eigen-directions of the worst start
    (the chord of the concave envelope) and the noise put on the worst lam give a problem
    whose loss is within the grids' precision of the bound."""
    p, t = data
    assume(p["Delta"] > 0 and p["mu"] < p["L"])
    # in [mu, L]: the power's round-off put it past L once (mu 2.55, L 3.4, where 1: no chord)
    bar = float(np.clip(p["mu"] * (p["L"] / p["mu"]) ** where, p["mu"], p["L"]))
    G1 = 2 * bar * p["Delta"]
    v = {**p, "G1": G1, "t": t}
    lam = np.geomspace(p["mu"], p["L"], 801)
    share = HD._recursion(np.full(1, p["alpha"]), lam[None], p["sizes"], t[None].astype(float),
                          t[None, :, 0] > 0)[0][0]
    # the concave envelope at bar by brute force over the grid's chords
    a, b = lam[lam <= bar][:, None], lam[lam >= bar][None, :]
    w = np.where(b > a, (b - bar) / np.where(b > a, b - a, 1.0), 1.0)
    chords = w * share[lam <= bar][:, None] + (1 - w) * share[lam >= bar][None, :]
    i, j = np.unravel_index(int(np.argmax(chords)), chords.shape)
    a, b, w = a[i, 0], b[0, j], w[i, j]
    _, N = HD._recursion(np.full(1, p["alpha"]), lam[None], p["sizes"], t[None].astype(float),
                         t[None, :, 0] > 0)
    k = int(np.argmax(lam * N[0]))
    eig = np.array([a, b, lam[k]])
    e1 = np.sqrt(2 * p["Delta"] * np.array([w, 1 - w, 0.0]) / eig)
    attained = exact_final_gap(eig, e1, p["sizes"], t, p["alpha"], [0, 0, p["sigma"] ** 2])
    bound = QUAD.evaluate(**v)
    assert attained <= bound * (1 + 1e-9)
    assert attained >= bound * (1 - 5e-3) - 1e-12


@FAST
@given(schedules())
def test_s_zero_is_minibatch_sgd_in_closed_form(data):
    """t = 1 (S = 0): a = 1 - alpha lam, v = alpha^2/N, so P(mu) = (1 - alpha mu)^(2U) and
    N = (alpha^2/N) (1 - a^(2U))/(1 - a^2), maximised over lam on a fine grid."""
    p, t = data
    ones = np.ones_like(t)
    U, N = len(t), p["sizes"].sum()
    lam = np.geomspace(p["mu"], p["L"], 20001)
    a2 = (1 - p["alpha"] * lam) ** 2
    noise = np.where(a2 < 1, p["alpha"] ** 2 / N * (1 - a2**U) / np.where(a2 < 1, 1 - a2, 1),
                     p["alpha"] ** 2 / N * U)
    want = p["Delta"] * (1 - p["alpha"] * p["mu"]) ** (2 * U) + p["sigma"] ** 2 / 2 * (lam * noise).max()
    got = QUAD.evaluate(**p, G1=0.0, t=ones)
    assert want * (1 - 1e-9) <= got <= want * (1 + 2e-3) + 1e-300


@FAST
@given(st.integers(1, 30), st.integers(1, 12), st.floats(0.01, 1), st.floats(0, 3), st.floats(0, 5))
def test_one_group_one_round_in_closed_form(n, t, frac, sigma, Delta):
    """One group of n clients, one round of t local iterations (S >= T), mu = L = lam: the
    round maps e to e + (rho^t e - e)/t plus the upload's noise, so the loss is
    (lam/2) [(1 - (1 - rho^t)/t)^2 e^2 + alpha^2 sigma^2 sum_{l<t} rho^(2l)/(n t^2)]."""
    lam = 1.3
    alpha = frac / lam
    rho = 1 - alpha * lam
    e2 = 2 * Delta / lam
    want = lam / 2 * ((1 - (1 - rho**t) / t) ** 2 * e2
                      + alpha**2 * sigma**2 * sum(rho ** (2 * k) for k in range(t)) / (n * t * t))
    got = QUAD.evaluate(alpha=alpha, L=lam, mu=lam, sigma=sigma, Delta=Delta, G1=0.0,
                        sizes=np.array([n]), t=np.array([[t]]))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300)


@FAST
@given(schedules(), st.floats(0, 5), st.floats(0, 10))
def test_quadratic_monotone(data, more_sigma, more_delta):
    """Non-decreasing in sigma and Delta, non-increasing in mu (a smaller class) and in G1."""
    p, t = data
    b = QUAD.evaluate(**p, G1=0.0, t=t)
    assert QUAD.evaluate(**{**p, "sigma": p["sigma"] + more_sigma}, G1=0.0, t=t) >= b * (1 - 1e-12)
    assert QUAD.evaluate(**{**p, "Delta": p["Delta"] + more_delta}, G1=0.0, t=t) >= b * (1 - 1e-12)
    assert QUAD.evaluate(**{**p, "mu": (p["mu"] + p["L"]) / 2}, G1=0.0, t=t) <= b * (1 + 2e-3)
    G1 = p["L"] * p["Delta"]
    assert QUAD.evaluate(**p, G1=G1, t=t) <= b * (1 + 1e-12)
    quiet = QUAD.terms(**{**p, "sigma": 0.0}, G1=0.0, t=t)
    assert quiet["noise"] == 0


@FAST
@given(schedules(), st.integers(1, 4))
def test_padded_batch_equals_paths_bit_for_bit(data, extra):
    p, t = data
    longer = np.vstack([t, t[:extra]])
    batch = np.zeros((2, len(longer), t.shape[1]), dtype=int)
    batch[0, : len(t)], batch[1] = t, longer
    for thm, more in ((QUAD, {"G1": 0.0}), (PL, {"zeta": 0.3})):
        got = thm.evaluate(**p, **more, t=batch)
        assert got[0] == thm.evaluate(**p, **more, t=t)
        assert got[1] == thm.evaluate(**p, **more, t=longer)


def test_certified_sup_brackets_the_supremum():
    """On lam N(lam) with N = exp(-c lam) (non-increasing), the reported upper end is above
    the true supremum 1/(c e) (at lam = 1/c) and within the tolerance of it."""
    c = np.array([0.5, 2.0, 10.0])
    upper, attained, at = certified_sup(lambda lam, rows: np.exp(-c[rows, None] * lam),
                                        np.full(3, 0.05), np.full(3, 1.0))
    true = np.where(1 / c <= 1, 1 / (c * math.e), np.exp(-c))
    assert np.all(upper >= true * (1 - 1e-12))
    assert np.all(upper <= true * (1 + 1e-3))
    assert np.all(attained <= true * (1 + 1e-12))


def test_worst_start_is_the_concave_envelope():
    """For P = exp(-lam) (convex, decreasing) the envelope on [1, 3] at the mean 2 is the chord
    between the ends, exp(-1)/2 + exp(-3)/2; at the ends it is P there."""
    P = lambda lam, rows: np.exp(-lam)  # noqa: E731
    got = worst_start(P, np.ones(3), np.full(3, 3.0), np.array([1.0, 2.0, 3.0]))
    assert got[0] == pytest.approx(math.exp(-1), rel=1e-12)
    assert got[2] == pytest.approx(math.exp(-3), rel=1e-12)
    assert math.exp(-1) / 2 + math.exp(-3) / 2 <= got[1] <= (math.exp(-1) / 2 + math.exp(-3) / 2) * 1.01


# ------------------------------------------------------------------ the PL bound


@FAST
@given(schedules(), st.data())
def test_pl_bounds_quadratics(data, more):
    """Every quadratic of the class is mu-PL and L-smooth (zeta = 0): bound >= exact."""
    p, t = data
    lam, e1, noise = more.draw(problems(p))
    exact = exact_final_gap(lam, e1, p["sizes"], t, p["alpha"], noise)
    assert PL.evaluate(**p, zeta=0.0, t=t) >= exact * (1 - 1e-9) - 1e-300
    assert sum(PL.terms(**p, zeta=0.0, t=t).values()) == pytest.approx(
        PL.evaluate(**p, zeta=0.0, t=t), rel=1e-12)


@FAST
@given(schedules())
def test_pl_at_s_zero_is_the_sgd_recursion(data):
    """t = 1: rho = 0, kappa = 1 - alpha mu, and only the noise part y = 1/N remains:
    Delta kappa^U + (alpha^2 L sigma^2/(2N)) (1 - kappa^U)/(1 - kappa); zeta does not enter."""
    p, t = data
    ones = np.ones_like(t)
    U, N, k = len(t), p["sizes"].sum(), 1 - p["alpha"] * p["mu"]
    want = p["Delta"] * k**U + p["alpha"] ** 2 * p["L"] * p["sigma"] ** 2 / (2 * N) * sum(
        k**j for j in range(U))
    assert PL.evaluate(**p, zeta=0.0, t=ones) == pytest.approx(want, rel=1e-9, abs=1e-300)
    assert PL.evaluate(**p, zeta=3.0, t=ones) == pytest.approx(want, rel=1e-9, abs=1e-300)


@FAST
@given(schedules(), st.floats(0.01, 3))
def test_pl_non_decreasing_in_zeta_and_sigma(data, z):
    p, t = data
    b = PL.evaluate(**p, zeta=0.0, t=t)
    assert PL.evaluate(**p, zeta=z, t=t) >= b * (1 - 1e-12)
    assert PL.evaluate(**p, zeta=2 * z, t=t) >= PL.evaluate(**p, zeta=z, t=t) * (1 - 1e-12)
    assert PL.evaluate(**{**p, "sigma": p["sigma"] + z}, zeta=0.0, t=t) >= b * (1 - 1e-12)


def _heterogeneous_exact(lam, e1, offsets, sizes, t, alpha, noise):
    """E f(x^{U+1}) - f* when group i's gradient is lam (x - x*) + h_i with sum_i w_i h_i = 0
    (f_i = f + <h_i, x>, so ||grad f_i - grad f|| = ||h_i||), per coordinate (mean and
    variance exact; the offsets only move the means)."""
    n = np.asarray(sizes, dtype=float)
    w = n / n.sum()
    mean, var = np.asarray(e1, dtype=float).copy(), np.zeros(lam.size)
    for row in t:
        new_mean, new_var = np.zeros(lam.size), np.zeros(lam.size)
        for i, ti in enumerate(row):
            m, v = mean.copy(), np.zeros(lam.size)
            for _ in range(int(ti)):
                m = m - alpha * (lam * m + offsets[i])
                v = (1 - alpha * lam) ** 2 * v + alpha**2 * noise / n[i]
            new_mean += w[i] * (mean + (m - mean) / ti)
            new_var += (w[i] / ti) ** 2 * v
        factor = sum(w[i] * (1 + ((1 - alpha * lam) ** int(ti) - 1) / ti) for i, ti in enumerate(row))
        mean, var = new_mean, factor**2 * var + new_var
    return 0.5 * float((lam * (mean**2 + var)).sum())


@FAST
@given(schedules(max_t=6), st.data())
def test_pl_bounds_heterogeneous_groups(data, more):
    """Groups holding f + <h_i, x> with sum_i w_i h_i = 0 (f stays the quadratic, mu-PL) and
    zeta = max_i ||h_i||: bound >= exact."""
    p, t = data
    assume(len(p["sizes"]) >= 2)
    lam, e1, noise = more.draw(problems(p))
    w = p["sizes"] / p["sizes"].sum()
    raw = np.array([[more.draw(st.floats(-2, 2)) for _ in lam] for _ in w])
    offsets = raw - (w[:, None] * raw).sum(axis=0)
    zeta = float(np.linalg.norm(offsets, axis=1).max())
    exact = _heterogeneous_exact(lam, e1, offsets, p["sizes"], t, p["alpha"], noise)
    # the offsets' weighted mean is 0 up to round-off eps |h|: where the bound is 0 (alpha mu
    # = 1, no noise), exact is that round-off squared (hypothesis found 3.9e-34)
    floor = 1e-30 * float(lam.max()) * (1 + zeta**2 + float(np.square(e1).sum()))
    assert PL.evaluate(**p, zeta=zeta, t=t) >= exact * (1 - 1e-9) - floor


def test_pl_holds_on_a_non_convex_pl_function():
    """f(x) = x^2 + 3 sin(x)^2 (Karimi et al. 2016: mu-PL with mu = 1/32, L = 8, not convex),
    Algorithm 1 written with numpy, 20,000 replicas with Gaussian noise, unequal counts: the
    mean loss at the deadline (upper 99.9% limit) is below the bound."""
    rng = np.random.default_rng(7)
    sizes, sigma, alpha = np.array([2, 3]), 1.0, 0.02
    t = np.array([[3, 2], [2, 4], [3, 3], [1, 2], [4, 3]] * 4)
    w = sizes / sizes.sum()
    grad = lambda x: 2 * x + 3 * np.sin(2 * x)  # noqa: E731
    f = lambda x: x**2 + 3 * np.sin(x) ** 2  # noqa: E731
    R = 20000
    x = np.full(R, 2.5)
    for row in t:
        update = np.zeros(R)
        for i, ti in enumerate(row):
            y = x.copy()
            for _ in range(ti):
                y = y - alpha * (grad(y) + sigma / math.sqrt(sizes[i]) * rng.standard_normal(R))
            update += w[i] * (y - x) / ti
        x = x + update
    gap = f(x)
    bound = PL.evaluate(alpha=alpha, L=8.0, mu=1 / 32, sigma=sigma, Delta=float(f(2.5)), zeta=0.0,
                        sizes=sizes, t=t)
    assert gap.mean() + 3.3 * gap.std() / math.sqrt(R) <= bound


# ------------------------------------------------------------------ over delay paths, choices

MODEL = D.DelayModel.linear(FIG7A, [15, 15])
CONSTANTS = dict(L=1.0, mu=0.1, sigma=20.0, Delta=0.1, sizes=[15, 15])


def test_expected_pl_is_the_mean_of_the_paths():
    e = HD.expected("hfl.deadline_pl", MODEL, 3.0, 200, alpha=[0.01, 0.002], paths=8, seed=3,
                    zeta=0.0, **CONSTANTS)
    sched = D.sample_schedules(MODEL, 3.0, 200, 8, np.random.default_rng(3))
    per_path = PL.evaluate(alpha=0.002, zeta=0.0, t=sched.t, **{**CONSTANTS, "sizes": np.array([15, 15])})
    assert e.mean[1] == pytest.approx(per_path.mean(), rel=1e-12)


def test_expected_quadratic_is_below_the_mean_of_the_paths():
    """The supremum over lam after the average over paths is at most the average of the
    per-path bounds (and at least their smallest)."""
    e = HD.expected("hfl.deadline_quadratic", MODEL, 3.0, 200, alpha=0.05, paths=8, seed=3,
                    G1=0.0, **CONSTANTS)
    sched = D.sample_schedules(MODEL, 3.0, 200, 8, np.random.default_rng(3))
    per_path = QUAD.evaluate(alpha=0.05, G1=0.0, t=sched.t,
                             **{**CONSTANTS, "sizes": np.array([15, 15])})
    assert per_path.min() * (1 - 1e-3) <= e.mean[0] <= per_path.mean() * (1 + 1e-9)


def test_choice_on_fig7a_picks_local_iterations():
    """Fig. 7a's delays, sigma = 20, alpha = 0.05, the start on the top eigen-direction
    (G1 = 2 L Delta): the certified deadline choice is S > 0, its bound the minimum of its
    curve; the PL bound picks the S the curve says, and both go through choose_sync_time."""
    S_grid = [0.0, 2.0, 6.0, 12.0]
    quad = choose_sync_time("hfl.deadline_quadratic", model=MODEL, T=600, S_grid=S_grid,
                            alpha=0.05, paths=16, G1=0.2, **CONSTANTS)
    assert quad.best_S > 0
    assert quad.best_bound <= min(quad.bound) * 1.03 and quad.best_S == quad.S[int(np.argmin(quad.bound))]
    pl = choose_deadline_sync_time("hfl.deadline_pl", model=MODEL, T=600, S_grid=S_grid,
                                   joint_alpha=True, paths=8, **CONSTANTS)
    assert pl.best_S == pl.S[int(np.argmin(pl.bound))] and pl.best_alpha <= 1.0
    with pytest.raises(ValueError, match="unknown parameter"):
        choose_deadline_sync_time("hfl.deadline_pl", model=MODEL, T=600, alpha=0.1, G=1.0,
                                  **CONSTANTS)


# ------------------------------------------------------------------ the simulator


@pytest.mark.parametrize("key", ["hfl.deadline_quadratic", "hfl.deadline_pl"])
def test_default_scenarios_hold(key):
    ad = verify.adapter_for(key)
    s = ad.default_scenario()
    for v in (ad.check(s, exact=True), ad.check(s.replace(mode="expected", replicas=32))):
        assert v.verdict == "holds", v


def test_exact_mode_is_the_simulator_mean():
    """The adapter's exact value (matrix form) against the simulator's Monte-Carlo mean."""
    ad = verify.adapter_for("hfl.deadline_quadratic")
    s = ad.default_scenario().replace(replicas=4000)
    exact = ad.check(s, exact=True).measured_mean
    mc = ad.check(s)
    lo, hi = mc.measured_ci
    half = (hi - lo) / 2
    assert abs(mc.measured_mean - exact) <= 2 * half


def test_pl_bound_beyond_float64_is_infinite_without_a_warning():
    """A schedule whose drift factor Gamma_u = (1 + alpha L)^(2 (tau_u - 1)) exceeds float64
    (here 2^3998) gives an infinite bound, silently: the callers refuse it by name
    (``verify.adapter.finite_bound``), not a RuntimeWarning from numpy's power."""
    import warnings

    t = np.array([[2000, 1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = PL.evaluate(alpha=1.0, L=1.0, mu=0.5, sigma=1.0, Delta=1.0, sizes=np.array([1, 1]),
                            zeta=0.0, t=t)
    assert np.isinf(value)
    from fedbound.verify.adapter import finite_bound

    with pytest.raises(ValueError, match="not finite.*t=2000"):
        finite_bound(PL, dict(alpha=1.0, L=1.0, mu=0.5, sigma=1.0, Delta=1.0,
                              sizes=np.array([1, 1]), zeta=0.0, t=t))
