"""Theorem 1, its limit (14) and Corollary 1 of Castiglia et al. 2021, checked independently:
symbolic identities, a hand-written numpy transcription of (12)-(13), values computed by hand
from the definitions, reductions to special cases, and monotonicity."""

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import mllsgd as M

zeta_s = M.zeta
VARIANTS = M.VARIANTS


# ------------------------------------------------------------------ strategies


@st.composite
def worker_vectors(draw, p_min=0.6):
    n = draw(st.integers(1, 12))
    w = np.array(draw(st.lists(st.floats(0.1, 10), min_size=n, max_size=n)))
    p = np.array(draw(st.lists(st.floats(p_min, 1.0), min_size=n, max_size=n)))
    return w / w.sum(), p


@st.composite
def theorem_params(draw):
    a, p = draw(worker_vectors())
    q = draw(st.integers(1, 6))
    tau = draw(st.integers(1, 8))
    return dict(
        L=draw(st.floats(0.1, 10)), beta=draw(st.floats(0, 3)), sigma=draw(st.floats(0, 5)),
        Delta=draw(st.floats(0, 100)), eta=draw(st.floats(1e-5, 1e-1)),
        K=q * tau * draw(st.integers(1, 50)), q=q, tau=tau, zeta=draw(st.floats(0, 0.99)),
        a=a, p=p,
    )


def reference_bound(v, variant):
    """(13) of Castiglia et al. 2021, Theorem 1, transcribed by hand."""
    z, q, tau, K, eta, L, s = v["zeta"], v["q"], v["tau"], v["K"], v["eta"], v["L"], v["sigma"]
    P = np.sum(v["a"] * v["p"])
    S2 = np.sum(v["a"] ** 2 * v["p"])
    if variant == "tight":
        lam = z**2 / (1 - z**2) + 2 * z / (1 - z) + z**2 / (1 - z) ** 2
        s4 = tau**2 * (q - 1) * (2 * q - 1) / 6 + (tau - 1) * (2 * tau - 1) / 6
    else:
        lam = z**2 / (1 - z**2) + 2 * z / (1 - z) + 1 / (1 - z) ** 2
        s4 = tau**2 * (q - 1) * (2 * q + 1) / 6 + (tau - 1) * (2 * tau + 1) / 6
    return (2 * v["Delta"] / (eta * K) + s**2 * eta * L * S2
            + 4 * L**2 * eta**2 * s**2 * q**3 * tau**3 * (1 / (q * tau) - 1 / K) * lam * P
            + 4 * L**2 * eta**2 * s**2 * (2 - z) / (1 - z) * s4 * P)


def reference_max_step(v, variant):
    """Largest eta with (12) (Castiglia et al. 2021, Theorem 1): the rationalised root of the
    quadratic in eta, solved by hand."""
    z, q, tau, L, b = v["zeta"], v["q"], v["tau"], v["L"], v["beta"]
    a, p = v["a"], v["p"]
    gamma = (z if variant == "printed" else 1) / (1 - z**2) + 2 / (1 - z) + z / (1 - z) ** 2
    if variant == "printed":
        kap = 8 * q**2 * tau**2 * gamma * np.ones_like(p)
    elif variant == "proof":
        kap = 8 * q**2 * tau**2 * gamma if b <= 1 else 4 * q**2 * tau**2 * gamma * (2 + p * (b - 1))
        kap = kap * np.ones_like(p)
    else:
        kap = 4 * q**2 * tau**2 * gamma * (2 + p * (b - 1))
    d = 4 * p - p**2 - 2
    c = a * p * (b + 1) - a * p**2 + p**2
    return np.min(2 * d / (L * (c + np.sqrt(c**2 + 4 * kap * d))))


# ------------------------------------------------------------------ constants


def assert_display_has_a_line_per_term(thm):
    """A notebook shows the statement one summand per line (on one line, Jupyter clips a
    bound of several terms), then its conditions: the lines are the one-line statement's
    summands, in its order, each as sympy prints it."""
    import sympy as sp

    shown = thm._repr_latex_()
    assert shown.startswith(r"$\displaystyle \begin{aligned}") and shown.endswith(r"\end{aligned}$")
    terms = thm.expr_display.as_ordered_terms()
    rows = shown[len(r"$\displaystyle \begin{aligned} "):-len(r" \end{aligned}$")].split(
        r" \\ & ", len(terms))  # the conditions' own rows stay in the last
    assert rows[0] == rf"{thm.lhs} \le\ & {sp.latex(terms[0])}"
    for row, term in zip(rows[1:len(terms)], terms[1:], strict=True):
        text = sp.latex(term)
        assert row == (text if text.startswith("-") else f"+ {text}")
    assert len(rows) == len(terms) + bool(thm.conditions)
    if thm.conditions:
        assert rows[-1].startswith(r"\text{if}\quad \begin{cases}") and all(
            sp.latex(c.relation) in rows[-1] for c in thm.conditions)
    assert sp.sympify(sum(terms)) == thm.expr_display


def test_gamma_printed_vs_proof_differs_by_one_over_one_plus_zeta():
    assert sp.simplify(M.GAMMA_PROOF - M.GAMMA_PRINTED - 1 / (1 + zeta_s)) == 0


def test_gamma_proof_is_the_series_the_proof_sums():
    """(186): sum_{m>=0} (z^2m + 2 z^m + z^(m+1)/(1-z)), checked numerically."""
    m = np.arange(4000)
    for z in (0.0, 0.3, 0.5, 0.9):
        series = np.sum(z ** (2 * m) + 2 * z**m + z ** (m + 1) / (1 - z))
        assert math.isclose(float(M.GAMMA_PROOF.subs(zeta_s, z)), series, rel_tol=1e-12)
        tight = series - (1 + 2 + z / (1 - z))  # drop m = 0: the sum of (188) from m = 1
        assert math.isclose(float(M.LAMBDA_TIGHT.subs(zeta_s, z)), tight, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("z, printed, proof", [(0, 2, 3), (sp.Rational(1, 2), sp.Rational(20, 3),
                                                             sp.Rational(22, 3))])
def test_gamma_known_values(z, printed, proof):
    """Gamma as printed in Theorem 1 and as defined after (186) in its proof, by hand:
    Gamma_printed(0)=2, Gamma_proof(0)=3, 20/3 and 22/3 at 1/2."""
    assert M.GAMMA_PRINTED.subs(zeta_s, z) == printed
    assert M.GAMMA_PROOF.subs(zeta_s, z) == proof


def test_lambda_paper_exceeds_tight_by_ratio():
    assert sp.simplify(M.LAMBDA_PAPER - M.LAMBDA_TIGHT - (1 + zeta_s) / (1 - zeta_s)) == 0


@pytest.mark.parametrize("q", range(1, 7))
@pytest.mark.parametrize("tau", range(1, 7))
def test_s4_tight_is_the_exact_power_sum(q, tau):
    """(180): the per-period consensus sum over l, f of (l tau)^2 + (f-1)^2, divided by q tau."""
    exact = sum((l * tau) ** 2 + (f - 1) ** 2 for l in range(q) for f in range(1, tau + 1))
    assert M.S4_TIGHT.subs({M.q: q, M.tau: tau}) == sp.Rational(exact, q * tau)
    assert M.S4_PAPER.subs({M.q: q, M.tau: tau}) >= M.S4_TIGHT.subs({M.q: q, M.tau: tau})
    # the corollary's explicit constant uses S4 <= q^2 tau^2 / 3
    assert M.S4_PAPER.subs({M.q: q, M.tau: tau}) <= sp.Rational(q**2 * tau**2, 3)


def test_s4_non_monotone_at_fixed_q_tau():
    """F9 / M4: at q tau = 32 the fourth-term factor is smallest near tau = (c+1)/2, against
    the discussion after Theorem 1 (Castiglia et al. 2021, Section 5), which says the fourth
    term grows with tau. Values computed by hand."""
    expected = {1: 335.8, 2: 330.8, 4: 321.8, 8: 307.8, 16: 295.8, 32: 335.8}
    got = {t: float(M.S4_PAPER.subs({M.q: 32 // t, M.tau: t})) for t in expected}
    for t, val in expected.items():
        assert got[t] == pytest.approx(val, abs=0.05)
    assert min(got, key=got.get) == 16


# ------------------------------------------------------------------ evaluation


@settings(max_examples=60, deadline=None)
@given(theorem_params(), st.sampled_from(VARIANTS))
def test_evaluate_matches_hand_transcription_and_terms_sum(v, variant):
    thm = bounds.get("mllsgd.theorem1", variant)
    value = thm.evaluate(**v)
    assert value == pytest.approx(reference_bound(v, variant), rel=1e-10)
    assert sum(thm.terms(**v).values()) == pytest.approx(value, rel=1e-12)


def test_evaluate_broadcasts_over_a_grid():
    thm = bounds.get("mllsgd.theorem1")
    v = dict(L=1.0, sigma=1.0, Delta=2.0, K=64, q=2, tau=4, a=np.full(4, 0.25), p=np.ones(4))
    etas = np.geomspace(1e-4, 1e-2, 7)[:, None]
    zetas = np.array([0.0, 0.5, 0.9])[None, :]
    grid = thm.evaluate(eta=etas, zeta=zetas, **v)
    assert grid.shape == (7, 3)
    for i, j in np.ndindex(grid.shape):
        assert grid[i, j] == thm.evaluate(eta=float(etas[i, 0]), zeta=float(zetas[0, j]), **v)


def test_printed_and_proof_share_the_right_hand_side():
    v = dict(L=2.0, sigma=0.7, Delta=3.0, eta=1e-3, K=96, q=3, tau=4, zeta=0.6,
             a=np.array([0.5, 0.3, 0.2]), p=np.array([1.0, 0.8, 0.7]))
    assert bounds.get("mllsgd.theorem1", "printed").evaluate(**v) == \
        bounds.get("mllsgd.theorem1", "proof").evaluate(**v)
    assert bounds.get("mllsgd.theorem1", "tight").evaluate(**v) < \
        bounds.get("mllsgd.theorem1", "proof").evaluate(**v)


# ------------------------------------------------------------------ step size


@settings(max_examples=60, deadline=None)
@given(theorem_params(), st.sampled_from(VARIANTS))
def test_max_step_is_the_boundary_of_condition_12(v, variant):
    thm = bounds.get("mllsgd.theorem1", variant)
    free = {k: x for k, x in v.items() if k != "eta"}
    choice = thm.step_choice(**free)
    assert choice.step == pytest.approx(reference_max_step(v, variant), rel=1e-10)
    per_worker = thm.step_limits(**free)["(12)"]
    assert per_worker.shape == v["p"].shape and per_worker.min() == choice.step
    for i in range(per_worker.size):   # each worker's limit is its own root of (12)
        ref = reference_max_step({**v, "a": v["a"][[i]], "p": v["p"][[i]]}, variant)
        assert per_worker[i] == pytest.approx(ref, rel=1e-10)
    assert choice.binding == "(12)"
    assert thm.admissible(eta=choice.step, **free)
    assert thm.admissible(eta=0.999 * choice.step, **free)
    assert not thm.admissible(eta=1.001 * choice.step, **free)
    viol = thm.violations(eta=1.001 * choice.step, **free)
    assert [x.condition for x in viol] == ["(12)"]
    # the reported worker binds: its own limit is the smallest (workers may tie)
    assert per_worker[viol[0].worker] == pytest.approx(choice.step, rel=1e-12)


@pytest.mark.parametrize("variant, p, expected", [
    ("printed", 0.6, 1.55e-3), ("printed", 0.9, 6.92e-3), ("printed", 1.0, 7.78e-3),
    ("proof", 0.6, 1.27e-3), ("proof", 0.9, 5.65e-3), ("proof", 1.0, 6.36e-3),
])
def test_max_step_known_values(variant, p, expected):
    """The root of (12) computed by hand at L=1, beta=0, a_i=0.01, zeta=0, q tau=32."""
    thm = bounds.get("mllsgd.theorem1", variant)
    got = thm.max_step(L=1.0, beta=0.0, K=64, q=4, tau=8, zeta=0.0, a=np.full(100, 0.01),
                       p=np.full(100, p))
    assert got == pytest.approx(expected, rel=5e-3)


def test_kappa_correction_only_matters_for_beta_above_one():
    v = dict(L=1.0, K=64, q=2, tau=4, zeta=0.3, a=np.full(4, 0.25), p=np.array([1, .9, .8, .7]))
    printed, proof = (bounds.get("mllsgd.theorem1", x) for x in ("printed", "proof"))
    tight = bounds.get("mllsgd.theorem1", "tight")
    for beta in (0.0, 0.5, 1.0):   # Gamma alone makes the proof variant stricter
        assert proof.max_step(beta=beta, **v) < printed.max_step(beta=beta, **v)
        assert tight.max_step(beta=beta, **v) >= proof.max_step(beta=beta, **v)
    # beta > 1: the printed constant 8 is insufficient (F3); proof and tight agree
    assert proof.max_step(beta=3.0, **v) == pytest.approx(tight.max_step(beta=3.0, **v), rel=1e-12)
    assert proof.max_step(beta=3.0, **v) < proof.max_step(beta=1.0, **v)


def test_infeasible_p_names_the_worker():
    thm = bounds.get("mllsgd.theorem1")
    with pytest.raises(ValueError, match=r"p\[3\]=0.5.*2 - sqrt\(2\)"):
        thm.max_step(L=1.0, beta=0.0, K=64, q=4, tau=8, zeta=0.0, a=np.full(4, 0.25),
                     p=np.array([1, 1, 1, 0.5]))


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 2 - math.sqrt(2) - 1e-6))
def test_no_step_is_admissible_below_two_minus_sqrt2(p):
    thm = bounds.get("mllsgd.theorem1", "printed")
    v = dict(L=1.0, beta=0.0, K=8, q=1, tau=1, zeta=0.0, a=np.array([1.0]), p=np.array([p]))
    for eta in (1e-12, 1e-6, 1e-2):
        assert not thm.admissible(eta=eta, **v)


# ------------------------------------------------------------------ limit and corollary


def test_limit_is_equation_14():
    z, q, tau, L, eta, s = M.zeta, M.q, M.tau, M.L, M.eta, M.sigma
    printed14 = (s**2 * eta * L * M.S2 + 4 * L**2 * eta**2 * s**2 * q**2 * tau**2 * M.LAMBDA_PAPER * M.P
                 + 4 * L**2 * eta**2 * s**2 * (2 - z) / (1 - z) * M.S4_PAPER * M.P)
    assert sp.simplify(bounds.get("mllsgd.theorem1_limit").expr - printed14) == 0


@settings(max_examples=30, deadline=None)
@given(theorem_params())
def test_limit_is_approached_as_K_grows(v):
    thm, lim = bounds.get("mllsgd.theorem1"), bounds.get("mllsgd.theorem1_limit")
    v = {**v, "K": v["q"] * v["tau"] * 10**9}
    vanishing = 2 * v["Delta"] / (v["eta"] * v["K"])   # the optimisation term, -> 0
    assert thm.evaluate(**v) == pytest.approx(lim.evaluate(**v), rel=1e-6, abs=vanishing + 1e-12)


@settings(max_examples=60, deadline=None)
@given(theorem_params(), st.sampled_from(("proof", "tight")))
def test_corollary_constants_dominate_theorem1_at_its_step(v, variant):
    """Where Corollary 1's hypotheses on K hold, its explicit bound >= (13) at 1/(L sqrt K)."""
    cor = bounds.get("mllsgd.corollary1", variant)
    K = max(v["K"], (v["q"] * v["tau"]) ** 4)
    K += (-K) % (v["q"] * v["tau"])
    v = {**v, "K": K, "eta": 1 / (v["L"] * math.sqrt(K))}
    thm = bounds.get("mllsgd.theorem1", variant)
    assert cor.evaluate(**v) >= thm.evaluate(**v) * (1 - 1e-12)


def test_corollary_requires_condition_12_at_its_step():
    cor = bounds.get("mllsgd.corollary1")
    assert any("(12)" in e.corrected for e in cor.errata)
    v = dict(L=1.0, beta=0.0, sigma=1.0, Delta=1.0, q=1, tau=2, zeta=0.9,
             a=np.full(2, 0.5), p=np.ones(2))
    assert not cor.admissible(K=16, **v)           # q^2 tau^2 <= sqrt K holds, (12) fails
    assert [x.condition for x in cor.violations(K=16, **v)] == ["(12)"]
    assert cor.admissible(K=2 * 10**8, **v)


# ------------------------------------------------------------------ special cases


def test_special_case_distributed_sgd():
    N, L, eta, s, K, D = M.N, M.L, M.eta, M.sigma, M.K, M.Delta
    r = M.special_case("distributed_sgd")
    expected = 2 * D / (eta * K) + s**2 * eta * L / N + 4 * L**2 * eta**2 * s**2 * (1 - 1 / K)
    assert sp.simplify(r["bound"] - expected) == 0
    # printed: Gamma(0) = 2; proof: Gamma(0) = 3 (Theorem 1 vs after (186)), beta <= 1
    printed = M.special_case("distributed_sgd", "printed")["condition"]
    assert sp.simplify(printed - (1 - eta * L * (1 + M.beta / N) - 8 * 2 * L**2 * eta**2)) == 0
    half = r["condition"].subs(M.beta, sp.Rational(1, 2))
    assert sp.simplify(half - (1 - eta * L * (1 + sp.Rational(1, 2) / N) - 8 * 3 * L**2 * eta**2)) == 0
    assert M.special_case("distributed_sgd", "tight")["bound"] == sp.simplify(
        2 * D / (eta * K) + s**2 * eta * L / N)


def test_special_case_local_sgd():
    N, L, eta, s, K, D, tau = M.N, M.L, M.eta, M.sigma, M.K, M.Delta, M.tau
    expected = (2 * D / (eta * K) + s**2 * eta * L / N + 4 * L**2 * eta**2 * s**2 * tau**2 * (1 - tau / K)
                + sp.Rational(4, 3) * L**2 * eta**2 * s**2 * (tau - 1) * (2 * tau + 1))
    assert sp.simplify(M.special_case("local_sgd")["bound"] - expected) == 0


def test_special_case_hl_sgd():
    N, L, eta, s, K, D, tau, q = M.N, M.L, M.eta, M.sigma, M.K, M.Delta, M.tau, M.q
    expected = (2 * D / (eta * K) + s**2 * eta * L / N
                + 4 * L**2 * eta**2 * s**2 * q**2 * tau**2 * (1 - q * tau / K)
                + 8 * L**2 * eta**2 * s**2 * (tau**2 * (q - 1) * (2 * q + 1) / 6
                                              + (tau - 1) * (2 * tau + 1) / 6))
    r = M.special_case("hl_sgd")
    assert sp.simplify(r["bound"] - expected) == 0
    printed = M.special_case("hl_sgd", "printed")["condition"]
    assert sp.simplify(printed - (1 - eta * L * (1 + M.beta / N)
                                  - 8 * 2 * L**2 * eta**2 * q**2 * tau**2)) == 0


def test_special_case_cooperative_sgd():
    N, L, eta, s, K, D, tau, z = M.N, M.L, M.eta, M.sigma, M.K, M.Delta, M.tau, M.zeta
    lam = z**2 / (1 - z**2) + 2 * z / (1 - z) + 1 / (1 - z) ** 2
    expected = (2 * D / (eta * K) + s**2 * eta * L / N
                + 4 * L**2 * eta**2 * s**2 * tau**2 * (1 - tau / K) * lam
                + 4 * L**2 * eta**2 * s**2 * (2 - z) / (1 - z) * (tau - 1) * (2 * tau + 1) / 6)
    assert sp.simplify(M.special_case("cooperative_sgd")["bound"] - expected) == 0


def test_unknown_special_case():
    with pytest.raises(ValueError, match="unknown special case"):
        M.special_case("fedavg")


# ------------------------------------------------------------------ monotonicity


@settings(max_examples=60, deadline=None)
@given(theorem_params(), st.floats(0, 0.98), st.floats(0.001, 0.5), st.sampled_from(VARIANTS))
def test_bound_increases_and_max_step_decreases_in_zeta(v, z, dz, variant):
    thm = bounds.get("mllsgd.theorem1", variant)
    z2 = min(z + dz, 0.99)
    assert thm.evaluate(**{**v, "zeta": z2}) >= thm.evaluate(**{**v, "zeta": z})
    free = {k: x for k, x in v.items() if k != "eta"}
    assert thm.max_step(**{**free, "zeta": z2}) <= thm.max_step(**{**free, "zeta": z})


@settings(max_examples=60, deadline=None)
@given(theorem_params(), st.sampled_from(VARIANTS))
def test_bound_increases_in_q_and_tau_while_q_tau_below_two_thirds_K(v, variant):
    """M2: while q tau < 2K/3 the bound grows with q (fixed tau) and tau (fixed q)."""
    thm = bounds.get("mllsgd.theorem1", variant)
    q, tau = v["q"], v["tau"]
    v = {**v, "K": 60 * (q + 1) * (tau + 1) * q * tau}
    base = thm.evaluate(**v)
    assert thm.evaluate(**{**v, "q": q + 1}) >= base
    assert thm.evaluate(**{**v, "tau": tau + 1}) >= base


# ------------------------------------------------------------------ interface


def test_registry_and_metadata():
    keys = {r["key"] for r in bounds.list()}
    assert {"mllsgd.theorem1", "mllsgd.theorem1_limit", "mllsgd.corollary1"} <= keys
    for row in bounds.list():
        for variant in row["variants"]:
            thm = bounds.get(row["key"], variant)
            assert thm.status in bounds.core.STATUSES
            # each citation names its paper by its short cite (bounds.references); a
            # condition of fedbound's own derivation (tdcd.theorem1 [refined]) is labelled as such
            short = bounds.references.paper(row["key"]).short
            named = (short,)
            own = "derived by fedbound, not published"
            assert thm.errata and all(any(n in e.citation for n in named) for e in thm.errata)
            assert thm.citation.startswith(short), thm.citation
            assert all(any(n in c.citation for n in (*named, own)) for c in thm.conditions)
            assert r"\le" in thm.latex() and thm._repr_latex_().startswith("$")
            assert_display_has_a_line_per_term(thm)
    assert bounds.get("mllsgd.theorem1").variant == "proof"
    with pytest.raises(ValueError, match="unknown variant"):
        bounds.get("mllsgd.theorem1", "arxiv")
    with pytest.raises(ValueError, match="unknown result"):
        bounds.get("nope.theorem")


GOOD = dict(L=1.0, beta=0.0, sigma=1.0, Delta=1.0, eta=1e-3, K=64, q=2, tau=4, zeta=0.5,
            a=np.full(4, 0.25), p=np.ones(4))


@pytest.mark.parametrize("change, message", [
    ({"L": -1.0}, r"L=-1 is outside its domain"),
    ({"zeta": 1.0}, r"zeta=1 is outside its domain.*\[0, 1\)"),
    ({"eta": float("nan")}, r"eta=nan is not a finite number"),
    ({"K": 6.5}, r"K=6.5 is outside its domain.*integer"),
    ({"p": np.array([1, 1, 1.2, 1])}, r"p\[2\]=1.2 is outside its domain"),
    ({"a": np.array([0.5, 0.5, 0.5, 0.5])}, r"a sums to 2"),
    ({"a": np.full(3, 1 / 3)}, r"differ in length"),
    ({"a": 0.25}, r"a must be an array over workers"),
    ({"gamma": 1.0}, r"unknown parameter"),
    ({"sigma": "x"}, r"sigma='x' is not a number"),
])
def test_bad_input_names_the_parameter(change, message):
    with pytest.raises(ValueError, match=message):
        bounds.get("mllsgd.theorem1").evaluate(**{**GOOD, **change})


def test_missing_parameter():
    v = dict(GOOD)
    del v["Delta"]
    with pytest.raises(ValueError, match=r"missing parameter.*Delta"):
        bounds.get("mllsgd.theorem1").evaluate(**v)


def test_condition_on_K_multiple_of_q_tau():
    thm = bounds.get("mllsgd.theorem1")
    assert not thm.admissible(**{**GOOD, "K": 66})
    assert [x.condition for x in thm.violations(**{**GOOD, "K": 66})] == ["K multiple of q*tau"]
    with pytest.raises(ValueError, match="fails whatever the step"):
        thm.max_step(**{k: x for k, x in {**GOOD, "K": 66}.items() if k != "eta"})


def test_max_step_at_extreme_beta_is_the_boundary_or_a_clear_error():
    """beta = 1e200 squared overflows: the root of (12) is still the boundary (admissible
    there, not 1% above); at beta = 1e308 the coefficients themselves overflow and the error
    names the parameters (it used to return a step of 0)."""
    thm = bounds.get("mllsgd.theorem1_limit", "tight")
    v = dict(L=1.0, beta=1e200, sigma=0.0, Delta=0.0, q=1, tau=1, zeta=0.0,
             a=np.array([1.0]), p=np.array([1.0]))
    eta = thm.max_step(**v)
    assert 0 < eta < 1e-190
    assert thm.admissible(**v, eta=eta) and not thm.admissible(**v, eta=1.01 * eta)
    with pytest.raises(ValueError, match="overflow.*beta"):
        thm.max_step(**{**v, "beta": 1e308})
