"""Where each refuted AFL proof breaks, and how far its bound fails: the proof-step errata of
Yang et al. 2022, Theorems 3 and 4 and Corollaries 2 and 3, and their refutation families,
checked in exact mode on three members against closed forms transcribed here independently
of fedbound's exact-moment code and of the theorem encoding."""

import math
import re

import numpy as np
import pytest

import fedbound.bounds.afl as A
from fedbound import bounds
from fedbound.verify import check
from fedbound.verify.api import families

REFUTED = ("afl.theorem3", "afl.theorem4", "afl.corollary2", "afl.corollary3")
STEP = {"afl.theorem3": "proof of Theorem 3 (Appendix B.3)",
        "afl.theorem4": "proof of Theorem 4 (Appendix C)",
        "afl.corollary2": "proof of Corollary 2 (Appendix B.3)",
        "afl.corollary3": "proof of Corollary 3 (Appendix C)"}


@pytest.mark.parametrize("key", REFUTED)
def test_each_refuted_result_names_the_failing_step_of_its_proof(key):
    for variant in bounds.variants(key):
        thm = bounds.get(key, variant)
        assert thm.status in bounds.REFUTED
        (e,) = [e for e in thm.errata if e.where.startswith(STEP[key])]
        # the paper's own numbering, never our text copy's lines
        assert e.citation.startswith("Yang et al. 2022, ") and ".txt" not in e.citation
        assert not re.search(r"\bL\d{2,}", e.citation + e.where + e.corrected)
        assert "derived by fedbound, not published" in e.corrected
        assert "Family" in e.corrected  # the growth of the family, derived analytically


def test_corollaries_2_and_3_are_rate_refuted_and_theorems_3_and_4_refuted():
    assert {bounds.get(k, v).status for k in ("afl.theorem3", "afl.theorem4")
            for v in bounds.variants(k)} == {"refuted"}
    assert {bounds.get(k, v).status for k in ("afl.corollary2", "afl.corollary3")
            for v in bounds.variants(k)} == {"rate-refuted"}
    assert bounds.get("afl.corollary1").status == "holds-with-erratum"


def sampling_lhs(s: float, L: float, sigma_G: float, T: int) -> float:
    """(1/T) sum_t E||grad f(x_t)||^2 of y' = (1 - sL) y + sL xi, y_0 = 0, Var(xi) =
    sigma_G^2/L^2 (M = 2 clients, one arriving uniformly per round, one dimension)."""
    rho2 = (1 - s * L) ** 2
    stationary = s * L * sigma_G**2 / (2 - s * L)
    return stationary * (1 - (1 - rho2**T) / (T * (1 - rho2)))


def stale_floor(L: float, s: float, sigma_L: float, T: int) -> float:
    """The fresh-sample noise floor L s sigma_L^2 / 2 of AFA-CS with one fresh arrival per
    round (leading order in s L M), averaged over T rounds from the optimum."""
    return L * s * sigma_L**2 / 2 * (1 - 1 / (2 * T * s * L))


def expected_ratio(key: str, value: float) -> tuple[float, float]:
    """(ratio measured/bound, relative tolerance) of the family member, independently: exact
    closed forms for the sampling families, leading order for the stale ones."""
    if key == "afl.theorem3":  # eta = 4, L = 1, sigma_G = 1/2, T = ceil(20/s)
        T = math.ceil(20 / value)
        bound = 120 * (value / 4) ** 2 * 0.25  # 120 L^2 eta_L^2 Khat^2 sigma_G^2
        return sampling_lhs(value, 1.0, 0.5, T) / bound, 1e-9
    if key == "afl.corollary2":  # L = 0.1, sigma_G = 1/2, s = 1/sqrt(T)
        T = int(value)
        bound = 120 * 0.1**2 * 0.25 / T  # 120 L^2 K^2 sigma_G^2 / T
        return sampling_lhs(1 / math.sqrt(T), 0.1, 0.5, T) / bound, 1e-9
    M = int(value)
    if key == "afl.theorem4":  # L = 1, sigma_L = 1, s = eta_L = 1/(4 M^2), tau = M - 1, m' = 1
        s, T = 0.25 / M**2, 80 * M**2
        bound = (4 * s / M + 8 * s**2 * (M - 1) ** 4 / M**3 + 20 * s**2)
        return stale_floor(1.0, s, 1.0, T) / bound, 0.05
    L, T = M**-1.5, 100 * M**2  # afl.corollary3: s = sqrt(M/T)
    bound = 4 * L / math.sqrt(M * T) + 8 * L**2 * (M - 1) ** 4 / (M**2 * T) + 20 * L**2 / T
    return stale_floor(L, math.sqrt(M / T), 1.0, T) / bound, 0.05


@pytest.mark.parametrize("key", REFUTED)
def test_the_ratio_grows_along_each_family_as_its_erratum_derives(key):
    fam = families()[key]
    ratios = []
    for value in fam.members:
        v = check(key, fam.scenario(value), exact=True)
        assert v.mode == "exact" and v.admissible, v.violations
        want, rtol = expected_ratio(key, value)
        assert v.ratio == pytest.approx(want, rel=rtol), (value, v.ratio, want)
        ratios.append(v.ratio)
    assert all(b > 1.5 * a for a, b in zip(ratios, ratios[1:], strict=False)), ratios
    assert v.verdict == "violated" and ratios[-1] > 1  # the last member refutes


@pytest.mark.parametrize("key", REFUTED)
def test_the_printed_variants_fail_along_the_same_family(key):
    fam = families()[key]
    ratios = [check(key, fam.scenario(x), variant="printed", exact=True).ratio for x in fam.members]
    assert ratios == sorted(ratios) and ratios[-1] > 1


def test_the_theorem_3_family_is_unbounded_in_closed_form():
    """The erratum's lower bound (1 - 1/c) eta^2/(120 L s (2 - s L)) -> infinity as s -> 0,
    and the exact left-hand side never falls below it (c = 20)."""
    s = np.geomspace(0.2, 1e-5, 30)
    exact = np.array([expected_ratio("afl.theorem3", x)[0] for x in s])
    lower = (1 - 1 / 20) * 16 / (120 * s * (2 - s))
    assert np.all(exact >= lower) and exact[-1] > 5e3 and np.all(np.diff(exact) > 0)


def test_corollary_rates_are_registered_with_their_citations():
    for key in ("afl.corollary1", "afl.corollary2", "afl.corollary3"):
        rate = bounds.get(key).rate
        assert rate.citation.startswith(f"Yang et al. 2022, Corollary {key[-1]}")
        lead = rate.exponents
        assert lead["K"] == lead["T"] == -0.5 and lead.get("m", lead.get("M")) == -0.5
    # the exponent along a sweep is the largest over the terms; a term with a zero variable
    # vanishes: along T = K^6 at tau = 0 the first term leads (-0.5 - 3)
    assert A.RATES["corollary2"].exponent_along({"K": 1, "T": 6}, zero=["tau"]) == -3.5
    assert A.RATES["corollary2"].exponent_along({"K": 1}, zero=["tau"]) == 2  # K^2/T, T fixed
