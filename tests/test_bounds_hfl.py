"""Lemma 1, Theorems 1-2 and Corollary 1 of Ali & Arafa 2025 (bounds.hfl): a hand-written
numpy transcription of the proof-consistent formulas, symbolic checks of the
variants and errata, kappa, vacuity, scale invariance, batches, expectations, bad input."""

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import delays as D
from fedbound.bounds import hfl as H

FAST = settings(max_examples=30, deadline=None)
FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]


@st.composite
def scenario(draw, max_t=12):
    G = draw(st.integers(1, 4))
    sizes = np.array(draw(st.lists(st.integers(1, 40), min_size=G, max_size=G)))
    U = draw(st.integers(1, 8))
    t = np.array(draw(st.lists(st.lists(st.integers(1, max_t), min_size=G, max_size=G),
                               min_size=U, max_size=U)))
    L = draw(st.floats(0.1, 10))
    params = dict(alpha=draw(st.floats(1e-4, 1.0)) / L, L=L, G=draw(st.floats(0.1, 10)),
                  sigma=draw(st.floats(0, 5)), Delta=draw(st.floats(0, 50)), sizes=sizes)
    return params, t


def reference(p, t, variant):
    """Theorem 2, (20), in each variant of THEOREM2_VARIANTS, transcribed with plain loops."""
    sizes, a, L, G, s, Dl = p["sizes"], p["alpha"], p["L"], p["G"], p["sigma"], p["Delta"]
    Gn, N, Q = len(sizes), sum(sizes), sum(n * n for n in sizes)
    W = Gn / N**2
    kap = W * Q
    U = len(t)
    prev = sum(sizes[i] ** 2 * t[u - 1][i] ** 2 for u in range(1, U) for i in range(Gn))
    avg = sum(sizes[i] ** 2 * (t[u][i] - 1) * (2 * t[u][i] - 1) / 6
              for u in range(U) for i in range(Gn))
    if variant == "tight":
        return 2 * Dl / (a * U) + a * L * kap * s**2 + a**2 * L**2 * G**2 * W / U * avg
    second = Gn**2 / Q**2 if variant == "printed" else kap**2
    g4 = G**2 if variant == "proof" else 1
    return (2 * Dl / (a * U) + 12 * a**2 * L**2 * G**2 * second + a * L * kap * s**2
            + 12 * a**2 * L**2 * g4 * W / U * prev + 4 * a**2 * L**2 * G**2 * W / U * avg)


# ------------------------------------------------------------------ transcription


@FAST
@given(scenario())
def test_theorem2_matches_transcription(data):
    p, t = data
    for v in H.THEOREM2_VARIANTS:
        got = bounds.get("hfl.theorem2", v).evaluate(**p, t=t)
        assert got == pytest.approx(reference(p, t.tolist(), v), rel=1e-10, abs=1e-12)


@FAST
@given(scenario())
def test_theorem1_and_lemma1_match_transcription(data):
    p, t = data
    sizes, a, L, G = p["sizes"], p["alpha"], p["L"], p["G"]
    kap = len(sizes) * (sizes**2).sum() / sizes.sum() ** 2
    Di = np.full(len(sizes), p["Delta"])
    got = bounds.get("hfl.theorem1").evaluate(**{**p, "Delta": Di}, t=t)
    U = len(t)
    for i in range(len(sizes)):
        A = t[:, i].sum()
        ref = (2 * Di[i] / (a * A) + a * L * p["sigma"] ** 2 / sizes[i]
               + (1 / (a * A) + 2 * (L + 1) * kap * a / A) * (U - 1) * G**2
               + 2 * (L + 1) * a / A * (t[: U - 1, i] ** 2).sum() * G**2)
        assert got[i] == pytest.approx(ref, rel=1e-10)
    lem = bounds.get("hfl.lemma1").evaluate(alpha=a, G=G, sizes=sizes, t=t)
    assert np.allclose(lem, 2 * a**2 * (t**2 + kap) * G**2, rtol=1e-12)


@FAST
@given(scenario())
def test_tight_below_proof_and_corollary_above_theorem2(data):
    p, t = data
    proof = bounds.get("hfl.theorem2", "proof").evaluate(**p, t=t)
    assert bounds.get("hfl.theorem2", "tight").evaluate(**p, t=t) <= proof * (1 + 1e-12)
    U = len(t)
    a_star = min(1 / np.sqrt(U), 1 / p["L"])
    t_max = t.max(axis=0) + 1
    cor = bounds.get("hfl.corollary1").evaluate(
        **{k: v for k, v in p.items() if k != "alpha"}, t=t, t_max=t_max)
    at_star = bounds.get("hfl.theorem2").evaluate(**{**p, "alpha": a_star}, t=t)
    assert at_star <= cor * (1 + 1e-12)


@FAST
@given(scenario(), st.integers(1, 5))
def test_padded_batch_equals_paths(data, extra):
    p, t = data
    longer = np.vstack([t, t[:extra]])
    batch = np.zeros((2, len(longer), t.shape[1]), dtype=int)
    batch[0, : len(t)] = t
    batch[1] = longer
    for key in ("hfl.theorem2", "hfl.theorem1"):
        q = {**p, "Delta": np.full(t.shape[1], p["Delta"])} if key == "hfl.theorem1" else p
        thm = bounds.get(key)
        got = thm.evaluate(**q, t=batch)
        assert np.allclose(got[0], thm.evaluate(**q, t=t), rtol=1e-12)
        assert np.allclose(got[1], thm.evaluate(**q, t=longer), rtol=1e-12)


# ------------------------------------------------------------------ kappa


@FAST
@given(st.lists(st.integers(1, 100), min_size=1, max_size=10))
def test_kappa_between_one_and_groups(sizes):
    k = H.kappa_of(sizes)
    assert 1 - 1e-12 <= k <= len(sizes) + 1e-12
    assert (abs(k - 1) < 1e-12) == (len(set(sizes)) == 1)


# ------------------------------------------------------------------ symbolic checks


def test_equation_40_term_equals_kappa_squared():
    """(40), Appendix D: 12 a^2 L^2 G^2 |N_g|^2 (sum n^2)(sum n^2) / (sum n)^4 = 12 a^2 L^2 G^2 kappa^2."""
    n = sp.symbols("n1:4", positive=True)
    a, L, G = sp.symbols("alpha L G", positive=True)
    N, Q = sum(n), sum(x**2 for x in n)
    kap = 3 * Q / N**2
    assert sp.simplify(12 * a**2 * L**2 * G**2 * 9 * Q * Q / N**4 - 12 * a**2 * L**2 * G**2
                       * kap**2) == 0


def test_printed_J247_term_differs():
    """The journal version's (20) gives 12 a^2 L^2 G^2 / n^4 for equal groups of size n
    instead of 12 a^2 L^2 G^2."""
    p = dict(alpha=0.1, L=1.0, G=1.0, sigma=0.0, Delta=0.0, sizes=np.array([5, 5]))
    t = np.ones((1, 2))
    printed = bounds.get("hfl.theorem2", "printed").terms(**p, t=t)["kappa^2"]
    arxiv = bounds.get("hfl.theorem2", "arxiv").terms(**p, t=t)["kappa^2"]
    assert arxiv == pytest.approx(12 * 0.01)
    assert printed == pytest.approx(12 * 0.01 / 5**4)


def test_power_sum_identities():
    t, l = sp.symbols("t l", integer=True, positive=True)
    mean_sq = sp.summation(l**2, (l, 0, t - 1)) / t
    assert sp.simplify(mean_sq - (t - 1) * (2 * t - 1) / 6) == 0
    assert sp.simplify(t**2 / 3 - (t - 1) * (2 * t - 1) / 6 - (3 * t - 1) / 6) == 0


def test_lemma1_from_equation_23():
    """(23), Appendix B, with E||sum_l g||^2 <= t^2 G^2 gives (18) exactly, for 3 groups, i = 1."""
    n = sp.symbols("n1:4", positive=True)
    t = sp.symbols("t1:4", positive=True)
    a, G = sp.symbols("alpha G", positive=True)
    N = sum(n)
    eq23 = ((2 * a**2 / n[0] + 2 * a**2 * 3 * n[0] / (N**2 * t[0] ** 2)) * n[0] * t[0] ** 2 * G**2
            + 2 * a**2 * 3 / N**2 * sum(n[j] / t[j] ** 2 * n[j] * t[j] ** 2 * G**2
                                        for j in (1, 2)))
    kap = 3 * sum(x**2 for x in n) / N**2
    assert sp.simplify(eq23 - 2 * a**2 * (t[0] ** 2 + kap) * G**2) == 0


@FAST
@given(scenario(), st.floats(0.1, 10))
def test_scale_invariance_of_proof_variant_only(data, s):
    """F -> sF: L, G, sigma, Delta -> s*, alpha -> alpha/s; the LHS scales by s^2."""
    p, t = data
    scaled = {**p, "L": s * p["L"], "G": s * p["G"], "sigma": s * p["sigma"],
              "Delta": s * p["Delta"], "alpha": p["alpha"] / s}
    for v in ("proof", "tight"):
        thm = bounds.get("hfl.theorem2", v)
        assert thm.evaluate(**scaled, t=t) == pytest.approx(s**2 * thm.evaluate(**p, t=t),
                                                            rel=1e-9, abs=1e-12)
    term = "previous-round drift"
    thm = bounds.get("hfl.theorem2", "arxiv")
    base = thm.terms(**p, t=t)[term]
    assert thm.terms(**scaled, t=t)[term] == pytest.approx(base, rel=1e-9, abs=1e-300)


# ------------------------------------------------------------------ vacuity, conditions


@FAST
@given(scenario(max_t=6), st.integers(2, 6))
def test_theorem1_vacuous_for_balanced_multi_round(data, U):
    p, t = data
    balanced = np.repeat(t[:1], U, axis=0)
    q = {**p, "Delta": np.full(t.shape[1], p["Delta"])}
    assert np.all(H.vacuous("hfl.theorem1", **q, t=balanced))


def test_theorem1_informative_for_isolated_groups():
    p = dict(alpha=0.01, L=1.0, G=1.0, sigma=0.5, Delta=np.array([1.0]), sizes=np.array([10]))
    assert not H.vacuous("hfl.theorem1", **p, t=np.array([[5000]]))


def test_step_condition_and_max_step():
    p = dict(L=4.0, G=1.0, sigma=1.0, Delta=1.0, sizes=np.array([3, 5]), t=np.ones((2, 2)))
    thm = bounds.get("hfl.theorem2")
    assert thm.max_step(**p) == pytest.approx(0.25)
    assert not thm.admissible(**p, alpha=0.3)
    assert bounds.get("hfl.lemma1").conditions == []
    assert bounds.get("hfl.lemma1", "printed").conditions


def test_registry_variants_and_status():
    rows = {r["key"]: r for r in bounds.list()}
    assert rows["hfl.theorem2"]["variants"] == [*H.THEOREM2_VARIANTS, H.REFINED, H.IID]
    assert rows["hfl.theorem2"]["default"] == "proof"
    assert "derived, not published" in bounds.get("hfl.theorem2", "tight").title
    errata = bounds.get("hfl.theorem2", "arxiv").errata
    assert any("eq. (20) (journal version)" in e.citation for e in errata)
    for variant in bounds.variants("hfl.theorem2"):
        thm = bounds.get("hfl.theorem2", variant)
        assert thm.citation.startswith("Ali & Arafa 2025, ")
        for c in (*thm.errata, *thm.conditions):
            assert c.citation.startswith("Ali & Arafa 2025, "), c


@pytest.mark.parametrize("t, match", [
    (np.array([[1.5, 2]]), r"t\[0, 0\]=1.5"),
    (np.array([[1, 0], [1, 1]]), "mixes zero"),
    (np.array([[0, 0], [1, 1]]), "zero before a real round"),
    (np.array([[-1, 2]]), r"t\[0, 0\]=-1"),
])
def test_bad_schedules(t, match):
    p = dict(alpha=0.1, L=1.0, G=1.0, sigma=1.0, Delta=1.0, sizes=np.array([2, 2]))
    with pytest.raises(ValueError, match=match):
        bounds.get("hfl.theorem2").evaluate(**p, t=t)


def test_bad_parameters():
    p = dict(alpha=0.1, L=1.0, G=1.0, sigma=1.0, Delta=1.0, sizes=np.array([2, 2]),
             t=np.ones((2, 2)))
    with pytest.raises(ValueError, match="sizes"):
        bounds.get("hfl.theorem2").evaluate(**{**p, "sizes": np.array([2, 0])})
    with pytest.raises(ValueError, match="Delta"):
        bounds.get("hfl.theorem2").evaluate(**{**p, "Delta": -1.0})
    with pytest.raises(ValueError, match="t_max"):
        bounds.get("hfl.corollary1").evaluate(
            **{k: v for k, v in p.items() if k not in ("alpha", "t")}, t=np.full((2, 2), 3),
            t_max=np.array([2, 3]))
    with pytest.raises(ValueError, match="differ in length"):
        bounds.get("hfl.theorem2").evaluate(**{**p, "sizes": np.array([2, 2, 2])})


# ------------------------------------------------------------------ expectations


def test_expected_theorem2_monte_carlo_and_plug_in_agree():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    p = dict(alpha=0.05, L=1.0, G=2.0, sigma=1.0, Delta=3.0, sizes=np.array([15, 15]))
    e = H.expected("hfl.theorem2", model, 5, 2000, paths=200, **p)
    assert e.ci[0] <= e.mean <= e.ci[1]
    assert e.plug_in == pytest.approx(e.mean, rel=0.01)
    assert "approximation" in e.plug_in_label


def test_expected_lemma1_plug_in_is_exact():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    e = H.expected("hfl.lemma1", model, 5, 2000, paths=200, alpha=0.05, G=2.0,
                   sizes=np.array([15, 15]))
    Et2 = D.count_moments(model.local[0], 5)[1]
    assert np.allclose(e.plug_in, 2 * 0.05**2 * (Et2 + 1) * 4.0)
    assert np.all(np.abs(e.mean - e.plug_in) < 4 * (e.ci[1] - e.ci[0]))


def test_expected_bound_non_decreasing_in_S():
    """Guide 3.4 observation: the canonical bound never favours S > 0."""
    model = D.DelayModel.linear(FIG7A, [15, 15])
    p = dict(alpha=0.05, L=1.0, G=2.0, sigma=1.0, Delta=3.0, sizes=np.array([15, 15]))
    vals = [H.plug_in("hfl.theorem2", D.round_statistics(model, S, 2000), **p)
            for S in (0, 2, 5, 10, 20)]
    assert np.all(np.diff(vals) >= 0)


@FAST
@given(scenario())
def test_printed_forms_are_implied_by_tight(data):
    """Why printed/arxiv (and the printed corollary) are registered as holding: each is >= the
    tight (derived) bound, term by term, despite the missing G^2 in their proof."""
    p, t = data
    tight = bounds.get("hfl.theorem2", "tight").evaluate(**p, t=t)
    for v in ("printed", "arxiv"):
        assert bounds.get("hfl.theorem2", v).evaluate(**p, t=t) >= tight * (1 - 1e-12)
    a_star = min(1 / np.sqrt(len(t)), 1 / p["L"])
    cor = bounds.get("hfl.corollary1", "printed").evaluate(
        **{k: v for k, v in p.items() if k != "alpha"}, t=t, t_max=t.max(axis=0))
    at_star = bounds.get("hfl.theorem2", "tight").evaluate(**{**p, "alpha": a_star}, t=t)
    assert cor >= at_star * (1 - 1e-12)
