"""Theorem 1, Lemma 2 and Remark 5 of Das et al. 2022, checked independently: a numpy
transcription of (15) and of the proof's exact chain, symbolic identities (eta Q invariance,
the 13/16 floor, special cases), values computed by hand, and the tuning helpers."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fedbound.bounds.tdcd as T
from fedbound import bounds

KEYS = ("tdcd.theorem1", "tdcd.lemma2", "tdcd.remark5")


@st.composite
def theorem_params(draw, admissible=True):
    N = draw(st.integers(1, 6))
    sigma = np.array(draw(st.lists(st.floats(0, 3), min_size=N, max_size=N)))
    L, Lm, Q = draw(st.floats(0.05, 5)), draw(st.floats(0.05, 5)), draw(st.integers(1, 40))
    cap = 1 / (8 * Q * max(L, Lm))
    frac = draw(st.floats(0.01, 1.0))
    return dict(L=L, L_max=Lm, sigma=sigma, Delta=draw(st.floats(0, 50)),
                eta=frac * cap if admissible else draw(st.floats(1e-4, 1.0)), Q=Q,
                R=draw(st.integers(1, 10_000)))


def reference_bound(v):
    """(15) of Das et al. 2022, Theorem 1, transcribed by hand."""
    eta, L, Lm, Q, R = v["eta"], v["L"], v["L_max"], v["Q"], v["R"]
    S = np.sum(v["sigma"] ** 2)
    return 4 * v["Delta"] / (eta * Q * R) + 4 * (
        eta * L * Q + 4 * eta**2 * Q**2 * Lm**2 + 8 * eta**3 * Q**3 * L * Lm**2) * S


def reference_tight(v):
    """The proof's own per-round inequality (Das et al. 2022, proof of Theorem 1, (79)), with
    Lemma 2's exact sum and no 1+Q <= 2Q: (Delta/R + c S)/(eta Q/2 - c)."""
    eta, L, Lm, Q, R = v["eta"], v["L"], v["L_max"], v["Q"], v["R"]
    S = np.sum(v["sigma"] ** 2)
    psi_sum = sum(((1 + 2 / Q) ** s - 1) / (2 / Q) for s in range(Q))  # sum of (46)-(48)
    lemma2 = 2 * (1 + Q) * psi_sum                                   # times L_max^2 eta^2 G0
    c = eta**2 * L * Q**2 + eta / 2 * (1 + 2 * eta * L * Q) * lemma2 * Lm**2 * eta**2
    return (v["Delta"] / R + c * S) / (eta * Q / 2 - c)


# ------------------------------------------------------------------ registry


def test_registered_with_variants_status_and_cited_errata():
    rows = {r["key"]: r for r in bounds.list()}
    assert rows["tdcd.theorem1"]["variants"] == ["printed", "proof", "tight", "refined"]
    assert rows["tdcd.lemma2"]["variants"] == ["proof", "tight"]
    assert rows["tdcd.remark5"]["variants"] == ["proof"]
    for key in KEYS:
        for variant in rows[key]["variants"]:
            if variant == "refined":   # fedbound's own result: tests/test_tdcd_refined.py
                continue
            thm = bounds.get(key, variant)
            cites = [thm.citation, *(e.citation for e in thm.errata),
                     *(c.citation for c in thm.conditions)]
            assert thm.errata and all(c.startswith("Das et al. 2022, ") for c in cites), cites
    assert bounds.get("tdcd.theorem1", "printed").status == "unverified"
    assert bounds.get("tdcd.theorem1").status == "holds-with-erratum"


# ------------------------------------------------------------------ evaluation


@settings(max_examples=60, deadline=None)
@given(theorem_params(admissible=False))
def test_printed_and_proof_match_the_transcription_and_terms_sum(v):
    for variant in ("printed", "proof"):
        thm = bounds.get("tdcd.theorem1", variant)
        value = thm.evaluate(**v)
        assert value == pytest.approx(reference_bound(v), rel=1e-10)
        assert sum(thm.terms(**v).values()) == pytest.approx(value, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(theorem_params())
def test_tight_matches_the_proof_chain_and_is_below_proof(v):
    tight = bounds.get("tdcd.theorem1", "tight").evaluate(**v)
    assert tight == pytest.approx(reference_tight(v), rel=1e-9)
    assert tight <= bounds.get("tdcd.theorem1").evaluate(**v) * (1 + 1e-12)


def test_evaluate_broadcasts_over_an_eta_grid():
    thm = bounds.get("tdcd.theorem1")
    v = dict(L=1.0, L_max=2.0, sigma=np.array([0.3, 0.4]), Delta=2.0, Q=4, R=100)
    etas = np.geomspace(1e-4, 1e-2, 5)
    grid = thm.evaluate(eta=etas, **v)
    assert grid.shape == (5,)
    assert all(grid[i] == thm.evaluate(eta=float(e), **v) for i, e in enumerate(etas))


# ------------------------------------------------------------------ symbolic identities


def test_bound_depends_on_eta_and_q_only_through_their_product():
    expr = bounds.get("tdcd.theorem1").expr
    in_a = sp.simplify(expr.subs(T.eta, T.a / T.Q))
    assert T.Q not in in_a.free_symbols and T.eta not in in_a.free_symbols
    assert sp.simplify(in_a - T.bound_in_a()) == 0
    # (14) too: eta <= 1/(8 Q M) is a <= 1/(8 M)
    margin = T.CONDITION14.margin.subs(T.eta, T.a / T.Q) * T.Q
    assert T.Q not in sp.simplify(margin).free_symbols


def test_tight_variant_is_not_q_invariant():
    expr = bounds.get("tdcd.theorem1", "tight").expr.subs(T.eta, T.a / T.Q)
    vals = {T.L: 1, T.L_max: 2, T.S: 1, T.Delta: 1, T.R: 10, T.a: sp.Rational(1, 32)}
    assert expr.subs({**vals, T.Q: 1}) != expr.subs({**vals, T.Q: 5})


def test_noise_floor_at_the_largest_step_is_at_most_13_16_S():
    """Computed by hand from (15): at eta = 1/(8 Q M), the noise term is
    S (L/(2M) + L_max^2/(4 M^2) + L L_max^2/(16 M^3)) <= 13/16 S, equal when L = L_max."""
    noise = sum(e for n, e in T.theorem1_terms("proof").items() if n.startswith("noise"))
    r = sp.Symbol("r", positive=True)   # the smaller constant is r M, 0 < r <= 1
    L_, Lm, S_ = T.L, T.L_max, T.S
    cases = {   # M = L_max (L = r L_max) and M = L (L_max = r L)
        Lm: (noise.subs(T.eta, 1 / (8 * T.Q * Lm)), S_ * (L_ / (2 * Lm) + sp.Rational(1, 4)
                                                        + L_ / (16 * Lm)), {L_: r * Lm}),
        L_: (noise.subs(T.eta, 1 / (8 * T.Q * L_)), S_ * (sp.Rational(1, 2) + Lm**2 / (4 * L_**2)
                                                        + Lm**2 / (16 * L_**2)), {Lm: r * L_}),
    }
    for at_max, expected, smaller in cases.values():
        assert sp.simplify(at_max - expected) == 0
        ratio = sp.simplify((at_max / S_).subs(smaller))
        assert sp.simplify(ratio.subs(r, 1) - sp.Rational(13, 16)) == 0
        assert sp.diff(ratio, r).subs(r, sp.Rational(1, 2)) > 0   # increasing: max at r = 1
    equal = noise.subs({T.L_max: T.L, T.eta: 1 / (8 * T.Q * T.L)})
    assert sp.simplify(equal - sp.Rational(13, 16) * T.S) == 0


def test_special_case_q1_is_the_printed_formula_with_q_removed():
    expr = bounds.get("tdcd.theorem1").expr.subs(T.Q, 1)
    e, L_, Lm = T.eta, T.L, T.L_max
    assert sp.simplify(expr - (4 * T.Delta / (e * T.R)
                               + 4 * T.S * (e * L_ + 4 * e**2 * Lm**2 + 8 * e**3 * L_ * Lm**2))) == 0


@pytest.mark.parametrize("variant", ("printed", "proof", "tight"))   # refined: K_j enters
def test_special_cases_n1_and_kj1(variant):
    """Remark 3 (N = 1): S = sigma_1^2. Remark 4 (K_j = 1): K_j is no parameter of (15)
    (T20), so splitting the sigma_j over more or fewer clients changes nothing."""
    thm = bounds.get("tdcd.theorem1", variant)
    assert "K" not in thm.params and not any(p.startswith("K") for p in thm.params)
    base = dict(L=1.0, L_max=1.5, Delta=3.0, eta=0.01, Q=3, R=50)
    one = thm.evaluate(sigma=np.array([0.5]), **base)
    split = thm.evaluate(sigma=np.array([0.3, 0.4]), **base)   # 0.09 + 0.16 = 0.25
    assert one == pytest.approx(split, rel=1e-14)
    assert one == pytest.approx(float(thm.expr.subs({T.S: 0.25, T.L: 1.0, T.L_max: 1.5,
                                                     T.Delta: 3.0, T.eta: 0.01, T.Q: 3,
                                                     T.R: 50})), rel=1e-12)


def test_sigma_zero_leaves_4_delta_over_eta_t():
    thm = bounds.get("tdcd.theorem1")
    v = dict(L=1.0, L_max=1.0, sigma=np.zeros(3), Delta=2.0, eta=0.01, Q=5, R=20)
    assert thm.evaluate(**v) == pytest.approx(4 * 2.0 / (0.01 * 100), rel=1e-14)


# ------------------------------------------------------------------ Lemma 2


def test_lemma2_tight_constant_known_values():
    """Lemma 2's exact sum, by hand: (Q^2/2)(((1+2/Q)^Q - 1)/2 - 1) / Q^2 = 0.25, 0.59, 0.80,
    0.98, 1.06 at Q = 2, 5, 10, 30, 100, -> (e^2 - 3)/4 ~ 1.097; 0 at Q = 1."""
    ratio = T.LEMMA2_TIGHT / (2 * (1 + T.Q) * T.Q**2)
    for Q, expected in ((2, 0.25), (5, 0.59), (10, 0.80), (30, 0.98), (100, 1.06)):
        assert float(ratio.subs(T.Q, Q)) == pytest.approx(expected, abs=0.006)
    assert T.LEMMA2_TIGHT.subs(T.Q, 1) == 0
    assert float(sp.limit(ratio, T.Q, sp.oo)) == pytest.approx((math.e**2 - 3) / 4, rel=1e-12)
    for Q in range(1, 60):   # the paper's 4 Q^2 (1+Q) dominates
        assert T.LEMMA2_TIGHT.subs(T.Q, Q) <= T.LEMMA2_PAPER.subs(T.Q, Q)


def test_lemma2_evaluates_and_its_step_limit():
    for variant in ("proof", "tight"):
        thm = bounds.get("tdcd.lemma2", variant)
        assert thm.max_step(Q=4, L_max=2.0) == pytest.approx(1 / 16, rel=1e-14)
        assert not thm.admissible(Q=4, L_max=2.0, eta=1 / 15)
    assert bounds.get("tdcd.lemma2").evaluate(Q=3, L_max=2.0, eta=0.05, G0=7.0) == \
        pytest.approx(4 * 9 * 4 * 4 * 0.0025 * 7.0, rel=1e-14)


# ------------------------------------------------------------------ step sizes


@settings(max_examples=40, deadline=None)
@given(theorem_params())
def test_max_step_is_the_boundary_of_14(v):
    free = {k: x for k, x in v.items() if k != "eta"}
    thm = bounds.get("tdcd.theorem1")
    cap = 1 / (8 * v["Q"] * max(v["L"], v["L_max"]))
    assert thm.max_step(**free) == pytest.approx(cap, rel=1e-12)
    assert T.max_eta(L=v["L"], L_max=v["L_max"], Q=v["Q"]) == pytest.approx(cap, rel=1e-12)
    assert thm.admissible(eta=cap, **free) and not thm.admissible(eta=1.001 * cap, **free)


def test_remark5_is_theorem1_at_eta_c_over_q_sqrt_r_for_every_q():
    r5, t1 = bounds.get("tdcd.remark5"), bounds.get("tdcd.theorem1")
    v = dict(L=0.7, L_max=1.3, sigma=np.array([0.4, 0.2, 0.1]), Delta=2.0, R=400)
    for Q in (1, 3, 17):
        eta = 0.05 / (Q * math.sqrt(v["R"]))
        assert r5.evaluate(c=0.05, **v) == pytest.approx(t1.evaluate(eta=eta, Q=Q, **v), rel=1e-12)
    free = {k: x for k, x in v.items() if k != "sigma"}
    assert r5.max_step(**free) == pytest.approx(math.sqrt(400) / (8 * 1.3), rel=1e-12)
    assert not r5.admissible(c=1.01 * math.sqrt(400) / (8 * 1.3), **free)


# ------------------------------------------------------------------ tuning helpers


def test_quartic_has_exactly_one_positive_root():
    """Descartes: the coefficients (+, +, +, 0, -) change sign once; sympy agrees."""
    x = sp.Symbol("x")
    Lv, Lmv, Sv, Dv, Rv = sp.symbols("L_v L_m S_v D_v R_v", positive=True)
    poly = 24 * Lv * Lmv**2 * Sv * x**4 + 8 * Lmv**2 * Sv * x**3 + Lv * Sv * x**2 - Dv / Rv
    coeffs = sp.Poly(poly, x).all_coeffs()
    signs = [sp.sign(cf) for cf in coeffs if cf != 0]
    assert sum(s1 != s2 for s1, s2 in zip(signs, signs[1:], strict=False)) == 1
    numeric = poly.subs({Lv: 1, Lmv: 2, Sv: sp.Rational(1, 2), Dv: 3, Rv: 100})
    assert len([r for r in sp.real_roots(sp.Poly(numeric, x)) if r > 0]) == 1


@settings(max_examples=40, deadline=None)
@given(theorem_params())
def test_optimal_eta_q_minimises_the_bound(v):
    if v["Delta"] < 1e-8 or np.sum(v["sigma"] ** 2) == 0:  # (the residual check needs normal floats)
        return
    opt = T.optimal_eta_q(L=v["L"], L_max=v["L_max"], sigma=v["sigma"], Delta=v["Delta"], R=v["R"])
    S = np.sum(v["sigma"] ** 2)
    q = np.polyval(T.quartic_coefficients(L=v["L"], L_max=v["L_max"], S=S, Delta=v["Delta"],
                                          R=v["R"]), opt["a_star"])
    assert abs(q) <= 1e-8 * v["Delta"] / v["R"]
    grid = np.linspace(opt["a_max"] * 1e-3, opt["a_max"], 400)
    thm = bounds.get("tdcd.theorem1")
    free = {k: x for k, x in v.items() if k not in ("eta", "Q")}
    values = thm.evaluate(eta=grid, Q=1, **free)
    assert opt["bound"] <= values.min() * (1 + 1e-9)
    for Q in (1, 7):   # the same bound for every Q at eta = a_opt / Q
        assert thm.evaluate(eta=opt["a_opt"] / Q, Q=Q, **free) == pytest.approx(opt["bound"], rel=1e-9)


def test_optimal_a_approaches_sqrt_delta_over_r_l_s_for_large_r():
    opt = T.optimal_eta_q(L=1.0, L_max=1.0, sigma=[1.0], Delta=1.0, R=10**10)
    assert opt["a_star"] == pytest.approx(math.sqrt(1 / 1e10), rel=1e-3)
    assert opt["binding"] == "interior optimum"


@pytest.mark.parametrize("a", [None, 0.01])
def test_rounds_needed_is_the_first_r_with_bound_below_epsilon(a):
    v = dict(L=1.0, L_max=2.0, sigma=np.array([0.5, 0.5]), Delta=1.0)
    out = T.rounds_needed(0.3, a=a, **v)
    thm = bounds.get("tdcd.theorem1")
    for Q in (1, 4):
        at = thm.evaluate(eta=out["a"] / Q, Q=Q, R=out["R"], **v)
        before = thm.evaluate(eta=out["a"] / Q, Q=Q, R=out["R"] - 1, **v)
        assert at <= 0.3 < before


def test_rounds_needed_rejects_epsilon_below_the_floor_and_a_beyond_14():
    v = dict(L=1.0, L_max=2.0, sigma=np.array([0.5, 0.5]), Delta=1.0)
    with pytest.raises(ValueError, match="noise floor"):
        T.rounds_needed(1e-6, a=1 / 16, **v)
    with pytest.raises(ValueError, match=r"\(14\)"):
        T.rounds_needed(0.3, a=0.1, **v)


def test_round_time_is_the_latency_model():
    assert T.round_time(1, 10, 1) == 31 and T.round_time(20, 100, 1) == 320
    with pytest.raises(ValueError, match="Q=0"):
        T.round_time(0, 10, 1)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("change, message", [
    ({"sigma": np.array([])}, "sigma is empty"),
    ({"Q": 0}, "Q"),
    ({"Q": 2.5}, "Q"),
    ({"L": -1.0}, "L"),
    ({"sigma": np.array([0.1, np.nan])}, r"sigma\[1\]"),
])
def test_bad_input_names_the_parameter(change, message):
    v = dict(L=1.0, L_max=1.0, sigma=np.array([0.1, 0.2]), Delta=1.0, eta=0.01, Q=2, R=10)
    with pytest.raises(ValueError, match=message):
        bounds.get("tdcd.theorem1").evaluate(**{**v, **change})


@pytest.mark.parametrize("Delta, R", [(5e-324, 2), (5e-324, 10_000), (1e-300, 1), (1e300, 10_000)])
def test_optimal_eta_q_at_extreme_scales(Delta, R):
    """The root of the quartic at a subnormal or huge Delta/R: found without underflow, and
    it solves the quartic in log space: log p(a*) = log(Delta / R)."""
    L, Lm, sigma = 1.0, 2.0, np.array([1.0, 0.5])
    opt = T.optimal_eta_q(L=L, L_max=Lm, sigma=sigma, Delta=Delta, R=R)
    a, S = opt["a_star"], float(np.sum(sigma**2))
    assert 0 < a < math.inf
    log_p = math.log(S) + 2 * math.log(a) + math.log(24 * L * Lm**2 * a**2 + 8 * Lm**2 * a + L)
    assert log_p == pytest.approx(math.log(Delta) - math.log(R), rel=1e-12, abs=1e-12)
