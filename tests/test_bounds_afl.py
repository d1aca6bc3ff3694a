"""The results of Yang et al. 2022 against independent numpy transcriptions of the printed
formulas (Theorems 2-4 and Corollaries 1-3), their reductions, closed-form step limits and errors."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbound.bounds.afl as A
from fedbound import bounds

KEYS = ("afl.theorem1", "afl.theorem2", "afl.theorem3", "afl.theorem4",
        "afl.corollary1", "afl.corollary2", "afl.corollary3")


def base(**over):
    p = dict(L=1.3, sigma_L=0.7, sigma_G=0.4, Delta=2.5, eta=3.0, eta_L=0.002, T=500, m=3, M=8,
             tau=2, K=4, m_prime=2)
    p.update(over)
    return p


def without_eta(p):
    return {k: v for k, v in p.items() if k != "eta"}


def rhs2(L, sigma_L, sigma_G, Delta, eta, eta_L, T, m, tau, K, **_):
    """Yang et al. 2022, Theorem 2 (its bound and the constants alpha_L, alpha_G) with constant
    K, transcribed by hand."""
    s = eta * eta_L
    return 4 * Delta / (s * T) + 4 * ((L * s / (m * K) + 3 * tau**2 * L**2 * s**2 / (m * K)
                                       + 7.5 * eta_L**2 * L**2 * K) * sigma_L**2
                                      + (1.5 + 45 * L**2 * eta_L**2 * K**2) * sigma_G**2)


def rhs3(L, sigma_L, sigma_G, Delta, eta, eta_L, T, m, tau, K, **_):
    s = eta * eta_L
    return 4 * Delta / (s * T) + 4 * ((L * s / (m * K) + 2 * tau**2 * L**2 * s**2 / (m * K)
                                       + 5 * eta_L**2 * L**2 * K) * sigma_L**2
                                      + 30 * L**2 * eta_L**2 * K**2 * sigma_G**2)


def rhs4(L, sigma_L, sigma_G, Delta, eta, eta_L, T, M, tau, K, m_prime, reading="avg", **_):
    s = eta * eta_L
    k1, k2 = (K, K**2) if reading == "avg" else (M * K, M * K**2)
    return (4 * Delta / (s * T)
            + 4 / M * (5 * L**2 * eta_L**2 * k1 + (2 * s**2 * (M - m_prime) ** 2 * L**2 * tau**2 / M**2
                                                  + L * s) / K) * sigma_L**2
            + 120 * L**2 * eta_L**2 / M * k2 * sigma_G**2)


positive = st.floats(0.05, 5)
params = st.fixed_dictionaries(dict(
    L=positive, sigma_L=st.floats(0, 3), sigma_G=st.floats(0, 3), Delta=st.floats(0, 10),
    eta=positive, eta_L=st.floats(1e-4, 0.5), T=st.integers(1, 10**5), m=st.integers(1, 4),
    M=st.integers(4, 20), tau=st.integers(0, 6), K=st.integers(1, 9), m_prime=st.integers(0, 4)))


def test_every_key_is_registered_with_variants_errata_and_a_status():
    rows = {r["key"]: r for r in bounds.list()}
    for key in KEYS:
        assert key in rows
        for v in rows[key]["variants"]:
            thm = bounds.get(key, v)
            assert thm.status in bounds.core.STATUSES
            # the result, its errata and its conditions cite the paper by its own numbering
            cites = [thm.citation, *(e.citation for e in thm.errata),
                     *(c.citation for c in thm.conditions)]
            assert thm.errata and all(c.startswith("Yang et al. 2022, ") for c in cites), cites
    assert bounds.get("afl.theorem2").status == "holds-with-erratum"
    for key in ("afl.theorem3", "afl.theorem4"):
        assert all(bounds.get(key, v).status == "refuted" for v in A.VARIANTS)
        assert f"verify.witnesses('{key}')" in bounds.get(key).notes


@settings(max_examples=60, deadline=None)
@given(params)
def test_theorems_match_the_printed_formulas_with_constant_K(p):
    assert bounds.get("afl.theorem2", "printed").evaluate(**p) == pytest.approx(rhs2(**p), rel=1e-10)
    assert bounds.get("afl.theorem2", "proof").evaluate(**p) == pytest.approx(rhs2(**p), rel=1e-10)
    for v in A.VARIANTS:
        assert bounds.get("afl.theorem3", v).evaluate(**p) == pytest.approx(rhs3(**p), rel=1e-10)
    assert bounds.get("afl.theorem4", "printed").evaluate(**p) == pytest.approx(rhs4(**p), rel=1e-10)
    assert bounds.get("afl.theorem4", "proof").evaluate(**p) == pytest.approx(
        rhs4(**p, reading="sum"), rel=1e-10)


@settings(max_examples=40, deadline=None)
@given(params, st.integers(0, 2**31))
def test_k_statistics_are_harmonic_arithmetic_and_quadratic_means(p, seed):
    rng = np.random.default_rng(seed)
    K = rng.integers(1, 7, size=(rng.integers(1, 30), p["m"]))
    stats = A.k_statistics(K)
    assert stats["harmonic"] == pytest.approx(np.mean([np.mean(1 / row) for row in K]))
    assert stats["mean"] == pytest.approx(K.mean())
    assert stats["quadratic"] == pytest.approx(np.mean([np.mean(row**2) for row in K]))
    assert stats["max"] == K.max()
    assert stats["quadratic_max"] == pytest.approx(max(np.mean(row**2) for row in K))
    # the bound is linear in the statistics: a constant array gives the scalar-K value
    const = np.full_like(K, 3)
    thm = bounds.get("afl.theorem2")
    assert thm.evaluate(**{**p, "K": const}) == pytest.approx(thm.evaluate(**{**p, "K": 3}), rel=1e-12)
    # harmonic <= arithmetic <= quadratic-mean (power means)
    assert 1 / stats["harmonic"] <= stats["mean"] + 1e-12
    assert stats["mean"] <= math.sqrt(stats["quadratic"]) + 1e-12


def test_K_array_must_have_one_entry_per_worker_of_a_round():
    with pytest.raises(ValueError, match="expected m=3"):
        bounds.get("afl.theorem2").evaluate(**base(K=np.ones((5, 4), dtype=int)))
    with pytest.raises(ValueError, match="expected M=8"):
        bounds.get("afl.theorem4").evaluate(**base(K=np.ones((5, 3), dtype=int)))


def test_theorem4_proof_reading_adds_M_times_the_drift_terms():
    p = base()
    printed = bounds.get("afl.theorem4", "printed").terms(**p)
    proof = bounds.get("afl.theorem4", "proof").terms(**p)
    for name in ("sigma_L drift", "sigma_G drift"):
        assert proof[name] == pytest.approx(p["M"] * printed[name])
    for name in ("optimisation", "sigma_L variance", "sigma_L staleness"):
        assert proof[name] == pytest.approx(printed[name])


@pytest.mark.parametrize("tau", [0, 1, 3, 10])
def test_server_step_limits_are_the_exact_roots(tau):
    """s_max closes the quadratic conditions with equality (solved by hand) and equals max_step
    * eta_L when the eta_L conditions are slack."""
    L, M, mp, eta_L = 1.7, 8, 3, 1e-5
    for key, cond in (("afl.theorem2", lambda s: 2 * L * s + 6 * tau**2 * L**2 * s**2 - 1),
                      ("afl.theorem4",
                       lambda s: (s * (M - mp) ** 2 * L**2 * tau**2 / M**2 + L / 2) * s - .25)):
        s = A.s_limit(key, L=L, tau=tau, M=M, m_prime=mp)
        assert cond(s) == pytest.approx(0, abs=1e-12)
        eta = bounds.get(key).max_step(**without_eta(base(L=L, tau=tau, M=M, m_prime=mp, eta_L=eta_L, K=1)))
        assert eta * eta_L == pytest.approx(s, rel=1e-10)
    for v, c in (("printed", 1), ("proof", 2)):
        s = A.s_limit("afl.theorem3", L=L, tau=tau, M=M, variant=v)
        assert L * s + c * L**2 * s**2 * tau**2 == pytest.approx(1 / (2 * M), rel=1e-12)
        eta = bounds.get("afl.theorem3", v).max_step(**without_eta(base(L=L, tau=tau, M=M, eta_L=eta_L, K=1)))
        assert eta * eta_L == pytest.approx(s, rel=1e-10)
    assert A.s_limit("afl.theorem2", L=2.0, tau=0) == pytest.approx(1 / 4)  # 1/(2L) at tau = 0


@given(st.floats(0.1, 5), st.integers(1, 12), st.integers(0, 6), st.sampled_from(A.VARIANTS))
@settings(max_examples=40, deadline=None)
def test_eta_L_cap_is_admissible_and_tight(L, K, tau, variant):
    for key in ("afl.theorem2", "afl.theorem3", "afl.theorem4"):
        cap = A.eta_L_cap(key, L=L, K=K, tau=tau, variant=variant)
        if not math.isfinite(cap):
            assert K == 1 and (tau == 0 and variant == "printed")
            continue
        thm = bounds.get(key, variant)
        p = base(L=L, K=K, tau=tau, eta=1e-9, m_prime=1)
        assert thm.admissible(**{**p, "eta_L": cap})
        assert not thm.admissible(**{**p, "eta_L": cap * 1.001})


def test_local_condition_closed_form():
    for K in range(2, 20):
        e = A.eta_L_limit(1.5, K)
        assert 6 * e**2 * (2 * K**2 - 3 * K + 1) * 1.5**2 == pytest.approx(1)
    assert A.eta_L_limit(1.0, 1) == math.inf


def test_tau_plus_one_reading_bites_at_tau_zero():
    """Printed C2b is vacuous at tau = 0; the proof's (tau+1) reading is not (Yang et al.
    2022, proof of Theorem 2, (a12))."""
    p = base(tau=0, K=5, eta_L=A.eta_L_limit(1.3, 5), eta=1e-6)
    assert bounds.get("afl.theorem2", "printed").admissible(**p)
    assert not bounds.get("afl.theorem2", "proof").admissible(**p)


@settings(max_examples=40, deadline=None)
@given(params)
def test_corollaries_are_their_theorems_at_the_corollary_steps(p):
    eta, eta_L = A.corollary_steps("afl.corollary1", T=p["T"], K=p["K"], m=p["m"])
    for cor, thm in (("afl.corollary1", "afl.theorem2"), ("afl.corollary2", "afl.theorem3")):
        q = {k: v for k, v in p.items() if k not in ("eta", "eta_L")}
        assert bounds.get(cor).evaluate(**q) == pytest.approx(
            bounds.get(thm).evaluate(**{**q, "eta": eta, "eta_L": eta_L}), rel=1e-9)
    eta3, _ = A.corollary_steps("afl.corollary3", T=p["T"], K=p["K"], M=p["M"])
    for v in A.VARIANTS:
        q = {k: v_ for k, v_ in p.items() if k not in ("eta", "eta_L")}
        assert bounds.get("afl.corollary3", v).evaluate(**q) == pytest.approx(
            bounds.get("afl.theorem4", v).evaluate(**{**q, "eta": eta3, "eta_L": eta_L}), rel=1e-9)
    # the explicit form of Corollary 1 (Theorem 2 at Corollary 1's steps, by hand)
    L, sL, sG, D, T, m, K, tau = (p[k] for k in ("L", "sigma_L", "sigma_G", "Delta", "T", "m", "K", "tau"))
    explicit = ((4 * D + 4 * L * sL**2) / math.sqrt(m * K * T) + 12 * tau**2 * L**2 * sL**2 / T
                + 30 * L**2 * K * sL**2 / T + 180 * L**2 * K**2 * sG**2 / T + 6 * sG**2)
    assert bounds.get("afl.corollary1").evaluate(**{k: p[k] for k in p if k not in ("eta", "eta_L")}) \
        == pytest.approx(explicit, rel=1e-9)


@pytest.mark.parametrize("key", ["afl.corollary1", "afl.corollary2", "afl.corollary3"])
@pytest.mark.parametrize("variant", A.VARIANTS)
def test_minimum_T_is_where_the_corollary_conditions_start_to_hold(key, variant):
    vals = dict(L=0.7, K=3, tau=2, m=2, M=6, m_prime=1)
    need = float(A.minimum_T(key, variant).subs({A.L: .7, A.K: 3, A.tau: 2, A.m: 2, A.M: 6, A.m_prime: 1}))
    thm = bounds.get(key, variant)
    assert thm.admissible(**vals, T=math.ceil(need * 1.0001))
    assert not thm.admissible(**vals, T=math.floor(need * 0.97))


def test_bounds_grow_with_delay_and_noise():
    for key in ("afl.theorem2", "afl.theorem3", "afl.theorem4"):
        thm = bounds.get(key)
        taus = thm.evaluate(**{**base(), "tau": np.arange(6)})
        assert np.all(np.diff(taus) > 0)
        sig = thm.evaluate(**{**base(), "sigma_L": np.linspace(0, 3, 5)})
        assert np.all(np.diff(sig) > 0)


def test_theorem2_floor_is_six_sigma_G_squared():
    """alpha_G = 3/2 + ..., outer factor 4: at s = 1/sqrt(T), the limit T -> inf then eta_L -> 0
    is 6 sigma_G^2 (Yang et al. 2022, Remark 3)."""
    thm = bounds.get("afl.theorem2")
    limit = sp.limit(sp.limit(thm.expr.subs({A.eta: 1 / (A.eta_L * sp.sqrt(A.T))}), A.T, sp.oo), A.eta_L, 0)
    assert sp.simplify(limit - 6 * A.sigma_G**2) == 0
    assert bounds.get("afl.theorem3").terms(**base()).keys() >= {"sigma_G drift"}
    assert "sigma_G floor" not in bounds.get("afl.theorem3").term_exprs


def test_lower_bound_instance():
    inst = A.lower_bound_instance(1.5)
    assert inst.sigma_G == 3.0 and inst.floor == pytest.approx(inst.sigma_G**2)
    assert bounds.get("afl.theorem1").evaluate(sigma_G=3.0) == -9.0
    with pytest.raises(ValueError, match="G=0"):
        A.lower_bound_instance(0)


@pytest.mark.parametrize("bad, match", [
    (dict(m=9, M=8), "m=9 exceeds M=8"),
    (dict(m_prime=9, M=8), "m_prime=9 exceeds M=8"),
    (dict(tau=-1), "tau=-1 is outside its domain"),
    (dict(tau=1.5), "tau=.* must be an integer"),
    (dict(K=0), "K=0 is outside its domain"),
    (dict(K=np.array([[2, 0, 1]])), r"K\[0, 1\]=0 is outside its domain"),
])
def test_bad_input_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        bounds.get("afl.theorem4").evaluate(**base(**bad))


def test_eta_L_violating_the_local_condition_has_no_admissible_step():
    p = without_eta(base(eta_L=0.5, K=4))
    with pytest.raises(ValueError, match=r"local \(a11\).*fails whatever the step"):
        bounds.get("afl.theorem2").max_step(**p)
