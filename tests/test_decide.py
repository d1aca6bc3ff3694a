"""fedbound.verify.decide: a claim's verdict from paired differences over seeds against its
margin, checked against an independent computation with scipy.stats (the interval, the
detectable effect, the seeds needed), a simulation of the detectable effect's power, the
five verdicts' regions, identical runs fixed by the setting, censored hitting times and
the combination rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbound.verify.decide import (
    POWER,
    RELATIVE_LOSS,
    VERDICTS,
    above,
    accuracy_margin,
    below,
    between,
    combine,
    deciding,
    fixed_by_setting,
    measured_equal,
    relative_margin,
    seeds_needed,
    sooner,
)

DIFFS = st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=30).filter(
    lambda d: any(x != 0 for x in d))
MARGINS = st.floats(0.01, 3)
SRC = "a test's margin"


def _interval(d):
    d = np.asarray(d, dtype=float)
    if d.std(ddof=1) == 0:
        return d.mean(), d.mean()
    return stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))


def _detectable(sd, n):
    return (stats.t.ppf(0.975, n - 1) + stats.t.ppf(POWER, n - 1)) * sd / math.sqrt(n)


def _expected_above(low, high, v, m, eps=1e-9):
    """The verdict of "mu above v by more than m" from the interval, or None within eps of a
    boundary (round-off decides there)."""
    edges = (v - m, v + m)
    if any(abs(x - e) < eps for x in (low, high) for e in edges):
        return None
    if low > v + m:
        return "agrees"
    if high < v - m:
        return "contradicts"
    if v - m < low and high < v + m:
        return "negligible"
    return "undecided"


@given(DIFFS, st.floats(-5, 5), MARGINS)
def test_above_decides_with_the_interval_against_the_margin(d, v, m):
    t = above("a", d, v, margin=m, source=SRC)
    low, high = _interval(d)
    assert t.low == pytest.approx(low, abs=1e-9) and t.high == pytest.approx(high, abs=1e-9)
    assert (t.margin, t.source, t.kind) == (m, SRC, "above")
    want = _expected_above(low, high, v, m)
    if want is not None:
        assert t.verdict == want
    if t.verdict == "contradicts":  # never on an effect smaller than the margin
        assert t.effect < v - m


@given(DIFFS, st.floats(-5, 5), MARGINS)
def test_below_is_above_of_the_negated_differences(d, v, m):
    a, b = below("b", d, v, margin=m, source=SRC), above("a", [-x for x in d], -v, margin=m, source=SRC)
    assert a.verdict == b.verdict and a.detectable == pytest.approx(b.detectable)
    assert a.needed == b.needed


@given(DIFFS, st.floats(-5, 0), st.floats(0.01, 5))
def test_between_agrees_iff_the_interval_lies_inside_its_tolerance(d, lo, width):
    hi = lo + width
    t = between("c", d, lo, hi, source=SRC)
    assert t.margin == pytest.approx(width / 2) and t.verdict != "negligible"
    low, high = _interval(d)
    if lo < low - 1e-9 and high < hi - 1e-9:
        assert t.verdict == "agrees"
    elif high < lo - 1e-9 or low > hi + 1e-9:
        assert t.verdict == "contradicts"
    elif low < lo - 1e-9 < lo + 1e-9 < high or low < hi - 1e-9 < hi + 1e-9 < high:
        assert t.verdict == "undecided"


def test_a_one_sided_tolerance_has_its_finite_end_as_margin():
    t = between("no worse by more than 10%", [0.02, 0.03, 0.01, 0.02], -math.inf, 0.1, source=SRC)
    assert (t.verdict, t.margin, t.region()) == ("agrees", 0.1, "below 0.1 (tolerance)")
    assert between("x", [0.3, 0.31, 0.29], -math.inf, 0.1, source=SRC).verdict == "contradicts"


def test_an_ordering_inside_the_margin_is_negligible_not_a_contradiction():
    """The logistic-regression reversals of Castiglia et al. 2021 on the digits: a reversed
    loss gap of 0.1%, decided with high confidence, is a practical tie under a 1% margin."""
    rng = np.random.default_rng(1)
    d = -0.001 + 1e-4 * rng.standard_normal(10)  # loss 1.0: 0.1% the other way
    t = above("reversed by 0.1%", d, **relative_margin(np.ones(10), np.ones(10)))
    assert t.high < 0 and t.verdict == "negligible" and t.margin == RELATIVE_LOSS
    assert above("by 5%", d + 0.051, margin=0.01, source=SRC).verdict == "agrees"
    assert above("reversed by 5%", d - 0.049, margin=0.01, source=SRC).verdict == "contradicts"


@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=2, max_size=40).filter(
    lambda d: any(x != 0 for x in d)))
def test_detectable_effect_is_the_t_quantiles_times_the_standard_error(d):
    t = above("a", d, margin=0.5, source=SRC)
    sd = float(np.std(d, ddof=1))
    assert t.detectable == pytest.approx(_detectable(sd, len(d)), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("sd, distance", [(1.0, 0.5), (0.3, 0.05), (2.0, 3.0), (1.0, 0.02)])
def test_seeds_needed_is_the_smallest_n_whose_detectable_effect_fits(sd, distance):
    k = np.arange(2, 100_000)
    fits = (stats.t.ppf(0.975, k - 1) + stats.t.ppf(POWER, k - 1)) * sd / np.sqrt(k) <= distance
    assert seeds_needed(sd, distance) == int(k[np.argmax(fits)])


def test_seeds_needed_without_a_distance_is_none():
    assert seeds_needed(1.0, 0.0) is None
    assert seeds_needed(0.0, 0.0) is None and seeds_needed(0.0, 1.0) == 2


def test_an_undecided_test_counts_the_seeds_to_its_nearest_boundary():
    d = [0.3, -0.2, 0.5, 0.1]  # mean 0.175; margin 0.1: boundaries -0.1 and 0.1
    t = above("a", d, margin=0.1, source=SRC)
    assert t.verdict == "undecided"
    assert t.needed == seeds_needed(float(np.std(d, ddof=1)), 0.175 - 0.1)
    assert above("b", [1.0, 1.1, 0.9], margin=0.1, source=SRC).needed is None  # decided


def test_the_detectable_effect_is_detected_with_the_stated_power():
    """Normal differences whose true mean is the margin plus the detectable effect of n seeds
    at the true spread agree (their interval lies above the margin) in about POWER of 2000
    simulated runs."""
    rng = np.random.default_rng(0)
    n, sigma, m = 8, 1.0, 0.3
    effect = m + _detectable(sigma, n)
    hits = np.mean([above("x", rng.normal(effect, sigma, n), margin=m, source=SRC).verdict == "agrees"
                    for _ in range(2000)])
    assert abs(hits - POWER) < 0.04


@pytest.mark.parametrize("make", [
    lambda d: above("identical", d, margin=0.01, source=SRC),
    lambda d: below("identical", d, 0.5, margin=0.01, source=SRC),
    lambda d: between("identical", d, -0.1, 0.1, source=SRC)])
def test_identical_runs_are_fixed_by_the_setting_and_never_tested(make):
    """Identical runs (the same schedule and seeds): every difference is exactly 0, whatever
    the claim; the engine says the setting decides it, keeps the margin, and reports no
    interval to test (zero width) and no seeds that would decide it."""
    t = make(np.zeros(5))
    assert t.verdict == "fixed-by-setting" and "every paired difference is exactly 0" in t.reason
    assert (t.effect, t.low, t.high, t.seeds, t.needed) == (0.0, 0.0, 0.0, 5, None)
    assert t.margin > 0 and t.source == SRC
    assert make(np.array([0.0, 0.0, 1e-300, 0.0, 0.0])).verdict != "fixed-by-setting"


def test_fixed_by_setting_says_why_in_one_line_and_runs_no_test():
    t = fixed_by_setting("S = 0 against S = 12", "c_i = 86.4 exceeds every S tried",
                         compares=("S = 0", "S = 12"), at=300.0)
    assert (t.verdict, t.kind, t.effect, t.seeds, t.margin) == ("fixed-by-setting", "fixed", None,
                                                                None, None)
    assert t.region() == "fixed by the setting" and t.distance == 0 == t.strength
    with pytest.raises(ValueError, match="one line"):
        fixed_by_setting("x", "two\nlines")
    assert fixed_by_setting("x", "why", margin=0.05, source=SRC).margin == 0.05


def test_censored_hitting_times_are_decided_not_errors():
    """Times never reached within the horizon (inf) count as the horizon: the restricted
    means' difference, recomputed here, decides; neither reaching on any seed is undecided
    with the reason."""
    a = np.array([2.0, 3.0, np.inf, 2.5, 1.0, 2.0])
    b = np.array([np.inf, 8.0, np.inf, np.inf, 7.0, 9.0])
    t = sooner("b - a", a, b, horizon=10.0, margin=1.0, source=SRC)
    d = np.minimum(b, 10) - np.minimum(a, 10)
    assert t.effect == pytest.approx(d.mean()) and t.censored == 3 and t.verdict == "agrees"
    assert t.low == pytest.approx(_interval(d)[0])
    never = sooner("b - a", np.full(4, np.inf), np.full(4, np.inf), horizon=10.0, margin=1.0,
                   source=SRC)
    assert never.verdict == "undecided" and "longer run" in never.reason and never.censored == 4
    backwards = sooner("a - b", b, a, horizon=10.0, margin=1.0, source=SRC)
    assert backwards.verdict == "contradicts"
    with pytest.raises(ValueError, match="hitting times"):
        sooner("x", [1.0, np.nan], [1.0, 2.0], horizon=10.0, margin=1.0, source=SRC)
    with pytest.raises(ValueError, match="sooner"):  # the plain tests point to it
        above("x", np.minimum(b, 1e308) - a, margin=1.0, source=SRC)


@given(st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=6))
@settings(max_examples=80)
def test_combine_all_and_any(verdicts):
    make = {"agrees": lambda: above("a", [1.0, 1.1], margin=0.1, source=SRC),
            "contradicts": lambda: above("c", [-1.0, -1.1], margin=0.1, source=SRC),
            "negligible": lambda: above("n", [0.01, 0.011], margin=0.1, source=SRC),
            "undecided": lambda: above("u", [-1.0, 1.5], margin=0.1, source=SRC),
            "fixed-by-setting": lambda: fixed_by_setting("f", "the setting decides it")}
    tests = [make[v]() for v in verdicts]
    assert [t.verdict for t in tests] == verdicts
    every = ("contradicts" if "contradicts" in verdicts else
             "fixed-by-setting" if "fixed-by-setting" in verdicts else
             "undecided" if "undecided" in verdicts else
             "negligible" if "negligible" in verdicts else "agrees")
    some = ("agrees" if "agrees" in verdicts else
            "undecided" if "undecided" in verdicts else
            "negligible" if "negligible" in verdicts else
            "fixed-by-setting" if "fixed-by-setting" in verdicts else "contradicts")
    assert combine(tests, "all") == every and combine(tests, "any") == some
    assert deciding(tests, "all").verdict == every
    assert deciding(tests, "any").verdict == some


def test_deciding_part_of_an_all_claim_is_the_weakest():
    strong = above("strong", [5.0, 5.1, 4.9], margin=0.1, source=SRC)
    weak = above("weak", [0.5, 0.9, 0.7], margin=0.1, source=SRC)
    assert deciding([strong, weak], "all").name == "weak"
    assert deciding([strong, weak], "any").name == "strong"


def test_the_default_margins_are_stated_with_their_source():
    m = relative_margin([2.0, 2.0], [1.0, 1.0])
    assert m["margin"] == pytest.approx(RELATIVE_LOSS * 1.5) and "1%" in m["source"]
    assert accuracy_margin()["margin"] == 0.01 and "percentage point" in accuracy_margin()["source"]
    with pytest.raises(ValueError, match="non-zero"):
        relative_margin([0.0, 0.0])


@pytest.mark.parametrize("call, match", [
    (lambda: above("t", [1.0], margin=0.1, source=SRC), "at least two finite"),
    (lambda: above("t", [1.0, math.nan], margin=0.1, source=SRC), "finite"),
    (lambda: above("t", [1.0, 2.0], margin=0.0, source=SRC), "margin=0.0 must be"),
    (lambda: above("t", [1.0, 2.0], margin=math.inf, source=SRC), "margin=inf must be"),
    (lambda: above("t", [1.0, 2.0], margin=0.1, source=""), "source=''"),
    (lambda: between("t", [1.0, 2.0], 1.0, 1.0, source=SRC), "empty"),
    (lambda: between("t", [1.0, 2.0], -math.inf, 0.0, source=SRC), "margin=0.0"),
    (lambda: between("t", [1.0, 2.0], -math.inf, math.inf, source=SRC), "finite end")])
def test_bad_tests_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_a_margin_is_required():
    with pytest.raises(TypeError, match="margin"):
        above("t", [1.0, 2.0], source=SRC)


@pytest.mark.parametrize("make, verdict", [
    (lambda d: above("equal", d, margin=0.01, source=SRC), "negligible"),
    (lambda d: below("equal", d, margin=0.01, source=SRC), "negligible"),
    (lambda d: below("equal", d, 0.5, margin=0.01, source=SRC), "agrees"),
    (lambda d: above("equal", d, 0.5, margin=0.01, source=SRC), "contradicts"),
    (lambda d: between("equal", d, -0.1, 0.1, source=SRC), "agrees"),
    (lambda d: between("equal", d, 0.1, 0.3, source=SRC), "contradicts")])
def test_equal_values_of_different_runs_are_a_measurement(make, verdict):
    """Equal values on every seed from runs that differ elsewhere (a quantised accuracy) are
    decided on the interval [0, 0] like any measurement: an ordering about 0 is
    negligible, never fixed by the setting; the seeds and the margin are kept."""
    fixed = make(np.zeros(6))
    t = measured_equal(fixed)
    assert fixed.verdict == "fixed-by-setting" and t.verdict == verdict
    assert (t.effect, t.low, t.high, t.sd, t.seeds) == (0.0, 0.0, 0.0, 0.0, 6)
    assert (t.margin, t.source, t.kind) == (fixed.margin, SRC, fixed.kind)
    assert "differ elsewhere" in t.reason


def test_measured_equal_only_redecides_identical_values():
    with pytest.raises(ValueError, match="only a test of identical values"):
        measured_equal(above("x", [0.1, 0.2, 0.3], margin=0.01, source=SRC))
    with pytest.raises(ValueError, match="only a test of identical values"):
        measured_equal(fixed_by_setting("S = 0 against S = 12", "c_i exceeds every S"))
