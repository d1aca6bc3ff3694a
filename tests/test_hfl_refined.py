"""fedbound's refined HFL Theorem 2 and Corollary 1 (derived by fedbound, not published;
bounds/derivations/hfl_refined.md), against independent computations: a plain-loop numpy
transcription of the formula, the minibatch-SGD special case, the exact left-hand side of a
quadratic with Gaussian noise (second moments propagated in closed form, no simulator), the
simulator through verify.check (conditional and expected modes), and the interior optimum in
S on the delay parameters of Ali & Arafa 2025, Fig. 7a."""

import math

import numpy as np
import pytest
from hfl_reference import exact_quadratic
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds, verify
from fedbound.bounds import delays as D
from fedbound.bounds import hfl as H
from fedbound.bounds.hfl_sync import choose_sync_time

FAST = settings(max_examples=30, deadline=None)
FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]


@st.composite
def schedules(draw, max_t=12):
    groups = draw(st.integers(1, 4))
    sizes = np.array(draw(st.lists(st.integers(1, 40), min_size=groups, max_size=groups)))
    U = draw(st.integers(1, 8))
    t = np.array(draw(st.lists(st.lists(st.integers(1, max_t), min_size=groups,
                                        max_size=groups), min_size=U, max_size=U)))
    L = draw(st.floats(0.1, 10))
    params = dict(alpha=draw(st.floats(1e-4, 1.0)) / L, L=L, G=draw(st.floats(0.1, 10)),
                  sigma=draw(st.floats(0, 5)), Delta=draw(st.floats(0, 50)), sizes=sizes)
    return params, t


def reference(p, t):
    """Theorem R of the derivation note, transcribed with plain loops."""
    n, a, L, G, s = p["sizes"], p["alpha"], p["L"], p["G"], p["sigma"]
    N, U = sum(n), len(t)
    noise = drift = coupling = 0.0
    for u in range(U):
        for i in range(len(n)):
            tt = float(t[u][i])
            noise += n[i] / tt
            drift += n[i] * sum(l * l for l in range(int(tt))) / tt
            coupling += n[i] ** 1.5 * 6 * sum(l - k for l in range(int(tt)) for k in range(l)) / tt**2
    return (2 * p["Delta"] / (a * U) + a * L * s**2 * noise / (N**2 * U)
            + a**2 * L**2 * G**2 * drift / (N * U) + a**2 * L**2 * G * s * coupling / (3 * N**2 * U))


# ------------------------------------------------------------------ formula


@FAST
@given(schedules())
def test_refined_matches_transcription(data):
    p, t = data
    thm = bounds.get("hfl.theorem2", "refined")
    assert thm.evaluate(**p, t=t) == pytest.approx(reference(p, t.tolist()), rel=1e-10, abs=1e-12)
    assert sum(thm.terms(**p, t=t).values()) == pytest.approx(thm.evaluate(**p, t=t), rel=1e-12)


@FAST
@given(schedules(), st.integers(1, 4))
def test_padded_batch_equals_paths(data, extra):
    p, t = data
    longer = np.vstack([t, t[:extra]])
    batch = np.zeros((2, len(longer), t.shape[1]), dtype=int)
    batch[0, : len(t)], batch[1] = t, longer
    thm = bounds.get("hfl.theorem2", "refined")
    got = thm.evaluate(**p, t=batch)
    assert got[0] == pytest.approx(reference(p, t.tolist()), rel=1e-10, abs=1e-12)
    assert got[1] == pytest.approx(reference(p, longer.tolist()), rel=1e-10, abs=1e-12)


@FAST
@given(schedules(), st.integers(0, 3))
def test_corollary_is_theorem_at_its_step_with_t_max(data, slack):
    """Corollary R = Theorem R at alpha = min(1/sqrt(U), 1/L) with 1/t <= 1 and t <= t_max."""
    p, t = data
    U, n, L, G, s = len(t), p["sizes"], p["L"], p["G"], p["sigma"]
    t_max = t.max(axis=0) + slack
    a = min(1 / math.sqrt(U), 1 / L)
    N = n.sum()
    ref = (2 * p["Delta"] / (a * U) + a * L * s**2 / N
           + a**2 * L**2 * G**2 * (n * (t_max - 1) * (2 * t_max - 1) / 6).sum() / N
           + a**2 * L**2 * G * s * (n**1.5 * (t_max - 1 / t_max)).sum() / (3 * N**2))
    rest = {k: v for k, v in p.items() if k != "alpha"}
    cor = bounds.get("hfl.corollary1", "refined").evaluate(**rest, t=t, t_max=t_max)
    assert cor == pytest.approx(ref, rel=1e-10)
    at_a = bounds.get("hfl.theorem2", "refined").evaluate(**{**p, "alpha": a}, t=t)
    assert at_a <= cor * (1 + 1e-12)
    if U >= L**2:  # the explicit rate of the note, section 8
        M_r = (n * (t_max - 1) * (2 * t_max - 1) / 6).sum() / N
        C_m = (n**1.5 * (t_max - 1 / t_max)).sum() / N**2
        rate = (2 * p["Delta"] + L * s**2 / N) / math.sqrt(U) + L**2 * G * (G * M_r + s * C_m / 3) / U
        assert cor == pytest.approx(rate, rel=1e-10)


@FAST
@given(schedules())
def test_s_zero_is_minibatch_sgd(data):
    """t = 1 everywhere: 2 Delta/(alpha U) + alpha L sigma^2/N, no drift, no coupling."""
    p, t = data
    ones = np.ones_like(t)
    U, N = len(t), p["sizes"].sum()
    thm = bounds.get("hfl.theorem2", "refined")
    want = 2 * p["Delta"] / (p["alpha"] * U) + p["alpha"] * p["L"] * p["sigma"] ** 2 / N
    assert thm.evaluate(**p, t=ones) == pytest.approx(want, rel=1e-12, abs=1e-300)
    terms = thm.terms(**p, t=ones)
    assert terms["within-round drift"] == 0 and terms["noise-drift coupling"] == 0


def test_s_zero_from_the_delay_model():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    sched = D.sample_schedules(model, 0, 300, 3, np.random.default_rng(0))
    p = dict(alpha=0.02, L=1.0, G=3.0, sigma=2.0, Delta=1.5, sizes=[15, 15])
    got = bounds.get("hfl.theorem2", "refined").evaluate(**p, t=sched.t)
    assert np.allclose(got, 2 * 1.5 / (0.02 * sched.U) + 0.02 * 4.0 / 30, rtol=1e-12)


@FAST
@given(schedules())
def test_noise_term_below_published_and_decreasing_in_t(data):
    p, t = data
    refined = bounds.get("hfl.theorem2", "refined").terms(**p, t=t)["noise"]
    published = bounds.get("hfl.theorem2", "proof").terms(**p, t=t)["noise"]
    assert refined <= published * (1 + 1e-12) / p["sizes"].sum() + 1e-300
    more = bounds.get("hfl.theorem2", "refined").terms(**p, t=t + 1)["noise"]
    assert more <= refined


@FAST
@given(schedules(), st.floats(0.1, 10))
def test_scale_invariance(data, s):
    """F -> sF: L, G, sigma, Delta -> s*, alpha -> alpha/s; the left-hand side scales by s^2."""
    p, t = data
    scaled = {**p, "L": s * p["L"], "G": s * p["G"], "sigma": s * p["sigma"],
              "Delta": s * p["Delta"], "alpha": p["alpha"] / s}
    thm = bounds.get("hfl.theorem2", "refined")
    assert thm.evaluate(**scaled, t=t) == pytest.approx(s**2 * thm.evaluate(**p, t=t),
                                                        rel=1e-9, abs=1e-12)


# ------------------------------------------------------------------ exact check on quadratics


@settings(max_examples=60, deadline=None)
@given(schedules(max_t=10), st.integers(1, 6), st.floats(0.01, 30), st.floats(-2, 1),
       st.booleans(), st.integers(0, 2**31 - 1))
def test_holds_exactly_on_quadratics(data, dim, sigma, log_scale, at_max, seed):
    p, t = data
    rng = np.random.default_rng(seed)
    L = p["L"]
    lam = np.exp(rng.uniform(np.log(L / 100), np.log(L), dim))
    lam[-1] = L
    alpha = 1 / L if at_max else p["alpha"]
    e1 = rng.standard_normal(dim) * 10**log_scale
    lhs, G, Delta = exact_quadratic(lam, e1, p["sizes"], t, alpha, sigma)
    bound = bounds.get("hfl.theorem2", "refined").evaluate(
        alpha=alpha, L=L, G=G, sigma=sigma, Delta=Delta, sizes=p["sizes"], t=t)
    assert lhs <= bound * (1 + 1e-9)


def test_noise_constant_is_attained():
    """f = L/2 ||x||^2, alpha = 1/L, t = 1: the exact left-hand side is
    (2 L Delta + (U - 1) sigma^2/N)/U, the bound minus sigma^2/(N U) exactly."""
    L, sigma, sizes, U = 2.0, 3.0, np.array([3, 4]), 7
    lam, e1 = np.full(5, L), np.linspace(-1, 1, 5)
    lhs, G, Delta = exact_quadratic(lam, e1, sizes, np.ones((U, 2), int), 1 / L, sigma)
    assert lhs == pytest.approx((2 * L * Delta + (U - 1) * sigma**2 / 7) / U, rel=1e-12)
    bound = bounds.get("hfl.theorem2", "refined").evaluate(
        alpha=1 / L, L=L, G=G, sigma=sigma, Delta=Delta, sizes=sizes, t=np.ones((U, 2)))
    assert bound - lhs == pytest.approx(sigma**2 / (7 * U), rel=1e-9)


# ------------------------------------------------------------------ against the simulator


def _random_scenarios(count: int, seed: int) -> list[dict]:
    """Admissible HFL scenarios as plain dicts: 1-3 groups of 1-8 clients, Fig. 7a delays
    scaled by a factor in [0.5, 2], S in [0, 6], T in [40, 150], logistic regression."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        scale = float(rng.uniform(0.5, 2.0))
        out.append({"sizes": [int(n) for n in rng.integers(1, 9, int(rng.integers(1, 4)))],
                    "delays": [round(v * scale, 6) for v in FIG7A],
                    "S": float(rng.uniform(0, 6)), "T": float(rng.uniform(40, 150)),
                    "alpha": None, "replicas": 16, "seed": int(rng.integers(0, 2**31 - 1))})
    return out


@pytest.mark.parametrize("mode", ["conditional", "expected"])
def test_holds_against_the_simulator(mode):
    cases = [verify.default_scenario("hfl.theorem2").to_dict(), *_random_scenarios(3, 2024)]
    for case in cases:
        s = verify.load_scenario("hfl.theorem2", {**case, "mode": mode})
        v = verify.check("hfl.theorem2", s, variant="refined")
        assert v.admissible and v.verdict == "holds", (case, v.bound, v.measured_mean)
        assert v.variant == "refined"


def test_corollary_holds_against_the_simulator():
    v = verify.check("hfl.corollary1", verify.default_scenario("hfl.corollary1"),
                     variant="refined")
    assert v.verdict == "holds"


# ------------------------------------------------------------------ expectation and S


def test_mean_inverse_count_is_exact_and_not_one_over_mean():
    law = D.ShiftedExponential(1, 0.55)
    inv = D.count_mean_inverse(law, 5)
    t = D.sample_counts(law, 5, 200_000, np.random.default_rng(3)).astype(float)
    assert abs((1 / t).mean() - inv) < 5 * (1 / t).std() / math.sqrt(t.size)
    assert inv > 1 / D.count_moments(law, 5)[0] + 1e-3  # Jensen, strictly here
    assert D.count_mean_inverse(D.deterministic(2), 5) == pytest.approx(1 / 3)
    assert D.count_mean_inverse(law, 0) == 1.0


def _fig7a(sigma: float):
    """Fig. 7a delays, T = 2000, a quadratic-like problem with gap Delta and noise sigma:
    G^2 = sigma^2 + 2 L Delta is E||g~||^2 at x^1 (note, section 6)."""
    Delta, L = 0.1, 1.0
    return D.DelayModel.linear(FIG7A, [15, 15]), dict(
        alpha=0.01, L=L, G=math.sqrt(sigma**2 + 2 * L * Delta), sigma=sigma, Delta=Delta,
        sizes=[15, 15])


def test_interior_minimum_in_S_with_large_noise():
    """sigma = 20: noise saving alpha L sigma^2/(2N) beats the transient and drift costs of
    about two local iterations per round (note, section 6); the Monte-Carlo expectation over
    delay paths is lower at S = 2 than at S = 0 and at S = 10, beyond its 95% intervals."""
    model, p = _fig7a(20.0)
    e = {S: H.expected("hfl.theorem2", model, S, 2000, variant="refined", paths=60, seed=1, **p)
         for S in (0, 2, 10)}
    assert e[2].ci[1] < e[0].ci[0] and e[2].ci[1] < e[10].ci[0]
    assert e[2].plug_in == pytest.approx(e[2].mean, rel=0.02)
    choice = choose_sync_time("hfl.theorem2", model=model, T=2000, variant="refined",
                              S_grid=[0, 1, 2, 3, 5, 10, 20], draws=1000, **p)
    assert 0 < choice.best_S < 20
    assert choice.bound[0] > min(choice.bound) < choice.bound[-1]


def test_small_noise_prefers_no_local_iterations():
    model, p = _fig7a(1.0)
    choice = choose_sync_time("hfl.theorem2", model=model, T=2000, variant="refined",
                              S_grid=[0, 1, 2, 3, 5, 10, 20], draws=1000, **p)
    assert choice.best_S == 0.0
    assert np.all(np.diff(choice.bound) >= -1e-12)


# ----------------------------------------------------------- Fig. 7a at alpha = 0.05 (note, section 7.1)


def test_simulated_left_side_at_alpha_005_is_the_exact_expectation():
    """The chooser's simulated left-hand side at S = 0 and S = 10 (Fig. 7a, sigma = 20, alpha
    = 0.05) is the exact expectation over the SGD noise on the same delay paths, computed
    without the simulator (exact_quadratic): S = 0 is noisy minibatch SGD, not a divergence,
    and S = 10 is several times lower."""
    from fedbound.sim.problems import one_thread
    from fedbound.verify.papers.hfl import SyncTime, synthetic_quadratic

    model, p = _fig7a(20.0)
    p["alpha"] = 0.05
    with one_thread():
        simulated = SyncTime(delays=FIG7A, T=2000, replicas=16, metric="lhs", **p).simulate(
            [{"S": 0.0, "alpha": 0.05}, {"S": 10.0, "alpha": 0.05}], 16, paired=True)
    pr, x1 = synthetic_quadratic(p["L"], p["sigma"], p["Delta"])
    lam = pr.eigenvalues.numpy()
    e1 = pr.eigvecs.numpy().T @ (x1 - pr.x_star).numpy()
    exact = []
    for S, o in zip((0.0, 10.0), simulated, strict=True):
        sched = D.sample_schedules(model, S, 2000, 16, np.random.default_rng(0))
        exact.append(np.mean([exact_quadratic(lam, e1, p["sizes"], sched.t[r, : sched.U[r]],
                                              0.05, 20.0)[0] for r in range(16)]))
        assert abs(o.value - exact[-1]) < 2 * o.ci, (S, o.value, exact[-1])
    assert exact[0] > 3 * exact[1]


def witness_lhs(t, *, alpha, L, b, A, Delta):
    """Theorem 2's left-hand side for Algorithm 1, (3)-(12), on the witness of the note's
    section 7.1, on one path t [U, 2], by plain loops: two groups of equal size, every client of
    group 1 with F(x) = b x + h(x), h the Huber function (L/2) x^2 for |x| <= A, linear
    beyond; every client of group 2 with F(x) = -b x; no gradient noise. Then f = h/2,
    inf f = 0, and x^1 = sqrt(4 Delta/L) has f(x^1) = Delta."""
    grads = (lambda y: b + L * min(max(y, -A), A), lambda y: -b)
    x, seen = math.sqrt(4 * Delta / L), []
    for row in t:
        seen.append((L / 2 * min(max(x, -A), A)) ** 2)
        step = 0.0
        for i in range(2):
            y = x
            for _ in range(int(row[i])):
                y -= alpha * grads[i](y)
            step += 0.5 * (y - x) / row[i]
        x += step
    return float(np.mean(seen))


@pytest.mark.parametrize(("S", "b"), [(7.0, 17.0), (10.0, 16.0)])
def test_no_bound_as_tight_as_refined_at_s0_prefers_the_simulated_best_s(S, b):
    """Fig. 7a, sigma = 20, alpha = 0.05: the simulated best S are 7 and 10 (the only grid
    points within 10% of the best). A problem that satisfies Assumptions 1-4 with the same
    L, G, sigma and Delta (heterogeneous groups, which the assumptions allow) has a left-hand
    side at that S, on every delay path, above the refined bound at S = 0, which bounds every
    such problem at S = 0. So a valid bound can prefer S to S = 0 only by being looser than
    refined at S = 0. The refined bound itself holds on the witness."""
    model, p = _fig7a(20.0)
    p["alpha"] = 0.05
    A = p["G"] - b  # sup |F'| = b + L A = G
    xs = np.linspace(-3 * A, 3 * A, 2001)
    slopes = np.diff(b + p["L"] * np.clip(xs, -A, A)) / np.diff(xs)
    assert np.all(np.abs(b + p["L"] * np.clip(xs, -A, A)) <= p["G"]) and b <= p["G"]
    assert np.all(slopes <= p["L"] * (1 + 1e-9))
    at_0 = H.expected("hfl.theorem2", model, 0.0, 2000, variant="refined", paths=64, **p)
    sched = D.sample_schedules(model, S, 2000, 6, np.random.default_rng(0))
    thm = bounds.get("hfl.theorem2", "refined")
    for r in range(6):
        t = sched.t[r, : sched.U[r]]
        lhs = witness_lhs(t, alpha=0.05, L=p["L"], b=b, A=A, Delta=p["Delta"])
        assert lhs > 1.2 * at_0.ci[1]
        assert lhs <= thm.evaluate(**p, t=t)


# ------------------------------------------------------------------ metadata


@pytest.mark.parametrize("key", ["hfl.theorem2", "hfl.corollary1"])
def test_labelled_as_fedbounds_own_result(key):
    thm = bounds.get(key, "refined")
    assert "derived by fedbound, not published" in thm.title
    assert "derived by fedbound, not published" in thm.notes.lower()
    assert "bounds/derivations/hfl_refined.md" in thm.notes
    assert thm.errata and all("derived by fedbound" in e.where for e in thm.errata
                              if "refined" in e.where)
    assert thm.status == "holds"
    assert thm.conditions == bounds.get(key, "proof").conditions
