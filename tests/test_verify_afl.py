"""The AFL bounds against the simulator: Theorem 2 under every arrival process, the
Theorem 1 floor, linear speedup where it holds and where it does not, printed vs proof
server step, exact mode against Monte Carlo, the stored witnesses, scenario errors."""

import math

import matplotlib
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import afl as AFL_BOUNDS
from fedbound.verify import adapter_for, check, default_scenario, load_scenario, witnesses
from fedbound.verify.papers import afl as V

matplotlib.use("Agg")
KEYS = ("afl.theorem1", "afl.theorem2", "afl.theorem3", "afl.theorem4",
        "afl.corollary1", "afl.corollary2", "afl.corollary3")


def quad(**over):
    return {"kind": "quadratic", "dim": 2, "L": 1.0, "mu": 0.5, "sigma_L": 1.0, "sigma_G": 0.5,
            "distance": 2.0, **over}


def test_every_key_has_a_default_whose_check_holds():
    for key in KEYS:
        for v in (("proof",) if key == "afl.theorem1" else AFL_BOUNDS.VARIANTS):
            verdict = check(key, variant=v)
            assert verdict.verdict == "holds", (key, v, verdict.as_dict())
            if key != "afl.theorem1":
                assert bounds.get(key, v).admissible(**verdict.params)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrivals=st.sampled_from(["uniform", "biased", "round_robin", "single", "events"]),
       M=st.integers(2, 6), tau=st.integers(0, 3), K=st.integers(1, 3), spread=st.integers(0, 2),
       delays=st.sampled_from(["uniform", "max", "zero"]), local=st.floats(0.05, 1),
       step=st.floats(0.05, 1), sigma_L=st.floats(0, 2), sigma_G=st.floats(0, 1.5),
       distance=st.floats(0, 3), seed=st.integers(0, 999))
def test_theorem2_holds_under_every_arrival_process(arrivals, M, tau, K, spread, delays, local, step,
                                                    sigma_L, sigma_G, distance, seed):
    m = 1 if arrivals == "single" else max(1, M // 2)
    arr = [[(t + j) % M for j in range(m)] for t in range(3)] if arrivals == "events" else arrivals
    s = V.AFLScenario(M=M, m=m, arrivals=arr, tau=tau, delays=delays, K=K, K_high=K + spread or None,
                      local_fraction=local, step_fraction=step, T=80, replicas=24, seed=seed,
                      problem=quad(sigma_L=sigma_L, sigma_G=sigma_G, distance=distance))
    for v in AFL_BOUNDS.VARIANTS:
        verdict = check("afl.theorem2", s, variant=v)
        assert bounds.get("afl.theorem2", v).admissible(**verdict.params)
        assert verdict.verdict == "holds", verdict.as_dict()


@settings(max_examples=8, deadline=None)
@given(G=st.floats(0.2, 3), distance=st.floats(0, 2), K=st.integers(1, 4), eta_L=st.floats(0.01, 0.4),
       s=st.floats(0.02, 0.5))
def test_theorem1_floor_sigma_G_squared_is_not_removed_by_any_step(G, distance, K, eta_L, s):
    scen = default_scenario("afl.theorem1").replace(
        K=K, eta_L=eta_L, eta=s / eta_L, T=int(60 / s), problem={"kind": "lower_bound", "G": G,
                                                                "distance": distance})
    v = check("afl.theorem1", scen)
    assert v.verdict == "holds"
    assert -v.measured_mean == pytest.approx(4 * G**2, rel=1e-6)  # the limit is exactly sigma_G^2
    assert v.bound == pytest.approx(-4 * G**2)


def test_theorem1_needs_a_run_that_reaches_its_limit():
    """Theorem 1 is about the limit of a convergent algorithm (Yang et al. 2022, Theorem 1):
    with K = 1 only worker 1 arrives and x_t + G = r^t (x_0 + G), r = 1 - 2 eta eta_L. A run
    with |r| >= 1 is refused; one with r < 0 oscillates around the limit and must have
    settled (to 1e-10 G) by round T/2, the first round of the measured mean."""
    G, distance, eta_L = 1.0, 0.5, 0.2
    base = default_scenario("afl.theorem1").replace(
        K=1, eta_L=eta_L, problem={"kind": "lower_bound", "G": G, "distance": distance})
    with pytest.raises(ValueError, match=r"eta=5\.25.*does not converge"):
        check("afl.theorem1", base.replace(eta=1.05 / eta_L, T=400))  # r = -1.1
    r = 1 - 2 * 0.95  # eta eta_L = 0.95: r = -0.9
    settled = 2 * math.ceil(math.log(1e-10 * G / distance) / math.log(abs(r)))  # smallest even T
    with pytest.raises(ValueError, match=rf"T={settled - 2}: .* oscillate"):
        check("afl.theorem1", base.replace(eta=0.95 / eta_L, T=settled - 2))
    v = check("afl.theorem1", base.replace(eta=0.95 / eta_L, T=settled))
    assert v.verdict == "holds" and -v.measured_mean == pytest.approx(4 * G**2, rel=1e-6)
    # r >= 0: the iterates approach the limit from outside, any T measures above it
    assert check("afl.theorem1", base.replace(eta=0.3 / eta_L, T=20)).verdict == "holds"


def _speedup(key, m, K, M=16, **problem):
    s = V.AFLScenario(M=M, m=m, K=K, tau=0, delays="zero", T=4000, replicas=2,
                      arrivals="round_robin" if key == "afl.corollary1" else "uniform",
                      problem=quad(dim=1, L=0.5, mu=0.5, distance=0.0, **problem))
    return check(key, s, exact=True)


def test_linear_speedup_in_m_and_K_where_it_holds():
    """sigma_G = 0 (found by fedbound): at Corollary 1's steps sqrt(mK) x measured is about constant."""
    prods = [math.sqrt(m * K) * _speedup("afl.corollary1", m, K, sigma_G=0.0).measured_mean
             for m, K in ((1, 1), (4, 1), (16, 1), (1, 4), (4, 4))]
    assert max(prods) / min(prods) < 1.3
    assert _speedup("afl.corollary1", 16, 4, sigma_G=0.0).verdict == "holds"


def test_no_speedup_in_K_under_uniform_partial_participation():
    """sigma_L = 0, sigma_G > 0, m < M (found by fedbound): the error grows with K at Corollary 2's
    steps, contradicting its O(1/sqrt(mKT)); with m = M it vanishes."""
    err = [_speedup("afl.corollary2", 4, K, M=8, sigma_L=0.0).measured_mean for K in (1, 2, 4)]
    assert err[0] < err[1] < err[2]
    assert _speedup("afl.corollary2", 8, 4, M=8, sigma_L=0.0).measured_mean < 1e-20


def test_printed_server_step_diverges_proof_step_converges():
    s = default_scenario("afl.corollary1").replace(K=4, m=8, M=8, T=1500)
    assert check("afl.corollary1", s.replace(server_step="printed")).verdict == "diverged"
    assert check("afl.corollary1", s).verdict == "holds"


@pytest.mark.parametrize("algorithm, arrivals", [("cd", "uniform"), ("cd", "round_robin"),
                                                 ("cs", "round_robin"), ("cs", [[0, 1], [2, 3]])])
def test_exact_mode_agrees_with_monte_carlo(algorithm, arrivals):
    s = V.AFLScenario(algorithm=algorithm, M=4, m=2, K=2, tau=0, delays="zero", arrivals=arrivals,
                      T=60, replicas=3000, problem=quad())
    key = "afl.theorem2" if algorithm == "cd" else "afl.theorem4"
    ex, mc = check(key, s, exact=True), check(key, s)
    lo, hi = mc.measured_ci
    half = (hi - lo) / 2
    assert lo - half <= ex.measured_mean <= hi + half  # within ~2 standard errors x 2


def test_exact_mode_refuses_what_it_cannot_compute():
    for s in (default_scenario("afl.theorem2"),
              default_scenario("afl.theorem4").replace(arrivals="uniform"),
              default_scenario("afl.theorem3").replace(K_high=3)):
        key = "afl.theorem4" if s.algorithm == "cs" else "afl.theorem2"
        with pytest.raises(ValueError, match="exact mode is unavailable"):
            check(key, s, exact=True)


REFUTATIONS = [w for w in witnesses() if w.key.startswith("afl.") and w.expect == "violated"]


@pytest.mark.parametrize("w", REFUTATIONS, ids=lambda w: f"{w.key}.{w.variant}.{w.label}")
def test_stored_witnesses_still_violate(w):
    """The shipped refutations (found by fedbound search, or members of a refutation
    family): admissible, violated, and their variant registered as refuted."""
    verdict = check(w.key, w)
    assert verdict.verdict == w.expect == "violated", verdict.as_dict()
    assert bounds.get(w.key, w.variant).admissible(**verdict.params)
    assert bounds.get(w.key, w.variant).status in bounds.REFUTED


def test_the_four_refuted_results_have_witnesses():
    refuted = {(k, v) for k in KEYS for v in bounds.variants(k)
               if bounds.get(k, v).status in bounds.REFUTED}
    assert refuted == {(w.key, w.variant) for w in REFUTATIONS}
    assert {k for k, _ in refuted} == {"afl.theorem3", "afl.theorem4", "afl.corollary2",
                                       "afl.corollary3"}


@pytest.mark.parametrize("key", KEYS)
def test_random_scenarios_are_admissible_and_reproducible(key):
    ad = adapter_for(key)
    for seed in range(3):
        a = ad.random_scenario(np.random.default_rng(seed))
        assert a == ad.random_scenario(np.random.default_rng(seed))
        a.validate()
        thm = bounds.get(key)
        assert thm.admissible(**ad.parameters(a, thm))


@pytest.mark.parametrize("bad, match", [
    (dict(m=9), "m=9 exceeds M=8"),
    (dict(tau=-1), "tau=-1 must be an integer >= 0"),
    (dict(K=0), "K=0 must be an integer >= 1"),
    (dict(K=3, eta_L=0.5), "eta_L=0.5 violates the local condition"),
    (dict(arrivals="single"), "arrivals='single' needs m=1"),
    (dict(arrivals=[[0, 9, 1, 2]]), "arrivals must be a process name or a list"),
    (dict(problem=quad(mu=2.0)), "problem.mu=2.0 must be <= problem.L"),
    (dict(step_fraction=0.0), "step_fraction=0 must lie in"),
])
def test_bad_scenarios_name_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        V.AFLScenario(**bad).validate()


def test_key_and_algorithm_must_agree():
    with pytest.raises(ValueError, match="afl.theorem4 is about AFA-CS"):
        check("afl.theorem4", V.AFLScenario())
    with pytest.raises(ValueError, match="assumes uniform arrivals"):
        check("afl.theorem3", V.AFLScenario(arrivals="biased"))
    with pytest.raises(ValueError, match="fixes eta_L"):
        check("afl.corollary1", default_scenario("afl.corollary1").replace(eta=1.0))


def test_json_round_trip_and_plot():
    s = default_scenario("afl.theorem4")
    assert load_scenario("afl.theorem4", s.to_json()) == s
    ax = adapter_for("afl.theorem2").plot(default_scenario("afl.theorem2").replace(T=50))
    assert ax.get_lines() and "afl.theorem2" in ax.get_title()
