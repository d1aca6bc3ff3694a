"""fedbound.verify.decide: a claim's verdict from paired differences over seeds, checked
against an independent computation with scipy.stats (the interval, the detectable effect, the
seeds needed), a simulation of the detectable effect's power, and the combination rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fedbound.verify.decide import (
    POWER,
    above,
    below,
    between,
    combine,
    deciding,
    in_region,
    seeds_needed,
)

DIFFS = st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=30)


def _interval(d):
    d = np.asarray(d, dtype=float)
    if d.std(ddof=1) == 0:
        return d.mean(), d.mean()
    return stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d))


def _detectable(sd, n):
    return (stats.t.ppf(0.975, n - 1) + stats.t.ppf(POWER, n - 1)) * sd / math.sqrt(n)


@given(DIFFS, st.floats(-5, 5))
def test_above_agrees_iff_the_interval_lies_above_and_contradicts_iff_below(d, m):
    t = above("a", d, m)
    low, high = _interval(d)
    assert t.low == pytest.approx(low, abs=1e-9) and t.high == pytest.approx(high, abs=1e-9)
    if low > m + 1e-9:
        assert t.verdict == "agrees"
    elif high < m - 1e-9:
        assert t.verdict == "contradicts"
    elif low < m - 1e-9 and high > m + 1e-9:
        assert t.verdict == "undecided"


@given(DIFFS, st.floats(-5, 5))
def test_below_is_above_of_the_negated_differences(d, m):
    a, b = below("b", d, m), above("a", [-x for x in d], -m)
    assert a.verdict == b.verdict and a.detectable == pytest.approx(b.detectable)


@given(DIFFS, st.floats(-5, 0), st.floats(0.01, 5))
def test_between_agrees_iff_the_interval_lies_inside(d, lo, width):
    hi = lo + width
    t = between("c", d, lo, hi)
    low, high = _interval(d)
    if lo < low - 1e-9 and high < hi - 1e-9:
        assert t.verdict == "agrees"
    elif high < lo - 1e-9 or low > hi + 1e-9:
        assert t.verdict == "contradicts"
    elif low < lo - 1e-9 < lo + 1e-9 < high or low < hi - 1e-9 < hi + 1e-9 < high:
        assert t.verdict == "undecided"


@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=2, max_size=40))
def test_detectable_effect_is_the_t_quantiles_times_the_standard_error(d):
    t = above("a", d)
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


def test_an_undecided_test_says_the_seeds_that_would_decide_it():
    d = [0.3, -0.2, 0.5, 0.1]
    t = above("a", d)
    assert t.verdict == "undecided"
    assert t.needed == seeds_needed(float(np.std(d, ddof=1)), float(np.mean(d)))
    assert above("b", [1.0, 1.1, 0.9]).needed is None  # decided: nothing to count


def test_the_detectable_effect_is_detected_with_the_stated_power():
    """Normal differences whose true mean is the detectable effect of n seeds at the true
    spread agree (their interval lies above 0) in about POWER of 2000 simulated runs."""
    rng = np.random.default_rng(0)
    n, sigma = 8, 1.0
    effect = _detectable(sigma, n)
    hits = np.mean([above("x", rng.normal(effect, sigma, n)).verdict == "agrees"
                    for _ in range(2000)])
    assert abs(hits - POWER) < 0.04


def test_exact_zero_differences_contradict_a_strict_claim():
    """Identical runs (the same schedule and seeds): every difference is 0, the claim that
    one configuration is lower is contradicted, not undecided."""
    t = above("identical", [0.0, 0.0, 0.0])
    assert t.verdict == "contradicts" and t.detectable == 0 and t.needed is None


@given(st.lists(st.sampled_from(["agrees", "contradicts", "undecided"]), min_size=1, max_size=6))
@settings(max_examples=60)
def test_combine_all_and_any(verdicts):
    make = {"agrees": [1.0, 1.1], "contradicts": [-1.0, -1.1], "undecided": [-1.0, 1.5]}
    tests = [above(v, make[v]) for v in verdicts]
    assert [t.verdict for t in tests] == verdicts
    every = ("contradicts" if "contradicts" in verdicts else
             "agrees" if set(verdicts) == {"agrees"} else "undecided")
    some = ("agrees" if "agrees" in verdicts else
            "contradicts" if set(verdicts) == {"contradicts"} else "undecided")
    assert combine(tests, "all") == every and combine(tests, "any") == some
    assert deciding(tests, "all").verdict == every
    assert deciding(tests, "any").verdict == some


def test_deciding_part_of_an_all_claim_is_the_weakest():
    strong, weak = above("strong", [5.0, 5.1, 4.9]), above("weak", [0.5, 0.9, 0.7])
    assert deciding([strong, weak], "all").name == "weak"
    assert deciding([strong, weak], "any").name == "strong"


@pytest.mark.parametrize("d, kw, match", [
    ([1.0], {"lower": 0.0}, "at least two finite"), ([1.0, math.nan], {"lower": 0.0}, "finite"),
    ([1.0, 2.0], {}, "lower or an upper"), ([1.0, 2.0], {"lower": 1.0, "upper": 1.0}, "empty")])
def test_bad_tests_are_refused(d, kw, match):
    with pytest.raises(ValueError, match=match):
        in_region("t", d, **kw)
