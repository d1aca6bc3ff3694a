"""Delay models of Ali & Arafa 2025 (bounds.delays): exact rationals, the count
distribution of (7) against independent closed forms and a plain loop over the same draws,
schedule identities of (7), (9), (13), envelopes, renewal approximation, bad input."""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds import delays as D

FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
FIG9 = [0.1, 1.4, 0.01, 0.14, 0.5, 5, 0.05, 0.5]
FAST = settings(max_examples=25, deadline=None)


# ------------------------------------------------------------------ exact rationals


def test_linear_model_shift_is_exact_and_t_max_is_five():
    model = D.DelayModel.linear([0.09, 0.1, 0.009, 0.01, 1, 3, 0.05, 0.1], [10, 10])
    assert model.local[0].shift == Fraction(1)
    assert D.count_max(model.local[0], 5) == 5
    # the float computation the exact rationals avoid gives 6
    assert math.ceil(5 / (0.09 * 10 + 0.1)) == 6


def test_linear_model_in_paper_order():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    assert model.local[0] == D.ShiftedExponential("1", "0.1")
    assert model.global_ == D.ShiftedExponential("10", "1")  # c_g = 4*2+2, 1/lambda_g = 0.4*2+0.2


def test_rational_accepts_strings_and_floats():
    assert D.rational("x", "0.09") == Fraction(9, 100)
    assert D.rational("x", 0.1) == Fraction(1, 10)
    with pytest.raises(ValueError, match="x="):
        D.rational("x", "abc")
    with pytest.raises(ValueError, match="finite"):
        D.rational("x", math.inf)


# ------------------------------------------------------------------ counts t of (7)


@pytest.mark.parametrize("S, c, m, mean_t, mean_t2", [
    (5, 1, 0.1, 4.9897, 24.907), (5, 1, 0.55, 3.7870, None), (12, 4.6, 0.46, 2.9839, None)])
def test_count_moments_pinned_from_guide(S, c, m, mean_t, mean_t2):
    """Values tabulated independently of this code (exact Poisson-tail sums)."""
    Et, Et2 = D.count_moments(D.ShiftedExponential(c, m), S)
    assert Et == pytest.approx(mean_t, abs=1e-4)
    if mean_t2 is not None:
        assert Et2 == pytest.approx(mean_t2, abs=1e-3)


@FAST
@given(S=st.floats(0.1, 30), mean=st.floats(0.05, 5))
def test_exponential_counts_are_one_plus_poisson(S, mean):
    """Zero shift: t - 1 is the number of Poisson-process arrivals in [0, S)."""
    lam = S / mean
    Et, Et2 = D.count_moments(D.exponential(mean), S)
    assert Et == pytest.approx(1 + lam, rel=1e-9)
    assert Et2 == pytest.approx((1 + lam) ** 2 + lam, rel=1e-9)


@FAST
@given(S=st.integers(0, 40), c=st.sampled_from(["0.5", "1", "2.5", "3"]))
def test_deterministic_counts(S, c):
    law = D.deterministic(c)
    expect = max(1, math.ceil(Fraction(S) / Fraction(c)))
    assert D.count_moments(law, S) == (expect, expect**2)
    assert (D.sample_counts(law, S, 5, np.random.default_rng(0)) == expect).all()


@FAST
@given(S=st.floats(0, 20), c=st.floats(0.2, 3), m=st.floats(0.01, 3), seed=st.integers(0, 99))
def test_closed_form_moments_against_sampler(S, c, m, seed):
    law = D.ShiftedExponential(c, m)
    t = D.sample_counts(law, S, 20_000, np.random.default_rng(seed)).astype(float)
    Et, Et2 = D.count_moments(law, S)
    # floor: a count of probability p < 2.5e-4 is unseen in 2e4 draws with probability
    # > e^-5 (then the sample std can be 0), and it moves E t^2 by up to p (2 t_max + 1) t_max
    floor = 2.5e-4 * (2 * D.count_max(law, S) + 1) * D.count_max(law, S)
    assert abs(t.mean() - Et) <= 5 * t.std() / math.sqrt(t.size) + floor
    assert abs((t**2).mean() - Et2) <= 5 * (t**2).std() / math.sqrt(t.size) + floor
    assert t.min() >= 1 and t.max() <= D.count_max(law, S)


@FAST
@given(S=st.floats(0, 15), c=st.floats(0.3, 2), m=st.floats(0.01, 2), seed=st.integers(0, 99))
def test_crossing_rule_against_plain_loop_on_same_draws(S, c, m, seed):
    """(7): t = min{n >= 1: tau_1 + ... + tau_n >= S}; the crossing iteration counts."""
    law = D.ShiftedExponential(c, m)
    got = D.sample_counts(law, S, 50, np.random.default_rng(seed))
    width = max(1, D.count_max(law, S)) if S > 0 else 1
    tau = law.sample(np.random.default_rng(seed), (50, width))
    for r in range(50):
        total, n = 0.0, 0
        while True:
            n += 1
            total += tau[r, n - 1]
            if total >= S:
                break
        assert got[r] == n


def test_pmf_sums_to_one_and_tail_is_monotone():
    law = D.ShiftedExponential(1, 0.55)
    pmf = D.count_pmf(law, 5)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    tail = D.count_tail(law, 5, np.arange(8))
    assert tail[0] == 1 and (np.diff(tail) <= 0).all() and tail[-1] == 0


def test_renewal_count_approaches_exact_for_large_S():
    law = D.ShiftedExponential(1, 0.5)
    assert D.renewal_count(law, 200) == pytest.approx(D.count_moments(law, 200)[0], rel=2e-3)


@pytest.mark.parametrize("S", [1, 5, 20])
def test_count_mean_monotone_in_S_and_delays(S):
    base = D.count_moments(D.ShiftedExponential(1, 0.3), S)[0]
    assert D.count_moments(D.ShiftedExponential(1, 0.3), S + 1)[0] >= base
    assert D.count_moments(D.ShiftedExponential(1.2, 0.3), S)[0] <= base
    assert D.count_moments(D.ShiftedExponential(1, 0.6), S)[0] <= base


# ------------------------------------------------------------------ schedules and U of (13)


@FAST
@given(S=st.floats(0, 12), T=st.floats(5, 300), seed=st.integers(0, 99),
       sizes=st.lists(st.integers(1, 30), min_size=1, max_size=4))
def test_schedule_identities(S, T, seed, sizes):
    model = D.DelayModel.linear(FIG7A, sizes)
    sc = D.sample_schedules(model, S, T, 30, np.random.default_rng(seed))
    ends = sc.end_time
    for r in range(30):
        U = sc.U[r]
        assert ends[r, U - 1] >= T
        assert U == 1 or ends[r, U - 2] < T
        assert (sc.t[r, :U] >= 1).all() and (sc.t[r, U:] == 0).all()
    assert (sc.local_time[sc.t > 0] >= S).all()
    t_max = np.array([D.count_max(law, S) for law in model.local])
    assert (sc.t <= t_max).all()
    assert sc.U.max() <= D.rounds_envelope(model, S, T)
    assert np.allclose(sc.duration, np.where(sc.t[..., 0] > 0,
                                             sc.local_time.max(-1) + sc.global_delay, 0))


def test_S_zero_gives_one_iteration_and_S_at_least_T_one_round():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    sc = D.sample_schedules(model, 0, 100, 20, np.random.default_rng(0))
    assert (sc.t[sc.t > 0] == 1).all()
    sc = D.sample_schedules(model, 100, 100, 20, np.random.default_rng(0))
    assert (sc.U == 1).all()


def test_ramp_schedule_of_fig13():
    model = D.DelayModel((D.deterministic(1), D.deterministic(1)), D.deterministic(1))
    sc = D.sample_schedules(model, 5, 60, 2, np.random.default_rng(0), ramp=True)
    U = sc.U[0]
    assert sc.t[0, :U, 0].tolist() == [min(u, 5) for u in range(1, U + 1)]


def test_renewal_rounds_match_guide_and_monte_carlo():
    """Fig. 7a, S = 0, T = 2000: renewal 165.0 vs MC 165.06 (tabulated independently)."""
    model = D.DelayModel.linear(FIG7A, [15, 15])
    stats = D.round_statistics(model, 0, 2000, draws=20_000)
    assert stats.mean_U == pytest.approx(165.0, abs=0.5)
    sc = D.sample_schedules(model, 5, 2000, 400, np.random.default_rng(1))
    assert D.round_statistics(model, 5, 2000).mean_U == pytest.approx(sc.U.mean(), abs=1.0)


def test_fig9_four_groups_maximise_rounds():
    """Guide 7.3 item 9: 59.6 / 68.2 / 56.8 rounds for 2 / 4 / 8 groups of 64 clients, S=6."""
    rounds = {g: D.round_statistics(D.DelayModel.linear(FIG9, [64 // g] * g), 6, 1000,
                                    draws=20_000).mean_U for g in (2, 4, 8)}
    assert rounds[2] == pytest.approx(59.6, abs=1.5)
    assert rounds[4] == pytest.approx(68.2, abs=1.5)
    assert rounds[8] == pytest.approx(56.8, abs=1.5)


def test_lognormal_through_the_same_interface():
    law = D.LogNormal(0.5, 0.0, 0.5)
    model = D.DelayModel((law, D.ShiftedExponential(1, 0.1)), D.deterministic(2))
    sc = D.sample_schedules(model, 3, 50, 10, np.random.default_rng(0))
    assert (sc.t[..., 0][sc.t[..., 0] > 0] <= D.count_max(law, 3)).all()
    Et, _ = D.count_moments(law, 3, draws=50_000)
    ref = D.sample_counts(law, 3, 50_000, np.random.default_rng(7)).mean()
    assert Et == pytest.approx(ref, rel=0.02)
    with pytest.raises(ValueError, match="closed-form"):
        D.count_tail(law, 3, 2)


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("call, match", [
    (lambda: D.ShiftedExponential(-1, 1), "shift=-1"),
    (lambda: D.ShiftedExponential(1, -0.5), "mean=-0.5"),
    (lambda: D.ShiftedExponential(0, 0), "positive mean"),
    (lambda: D.DelayModel.linear(FIG7A[:7], [1, 2]), "8 parameters"),
    (lambda: D.DelayModel.linear(FIG7A, [3, 0]), r"sizes\[1\]=0"),
    (lambda: D.DelayModel.linear(FIG7A, []), "non-empty"),
    (lambda: D.count_max(D.ShiftedExponential(1, 1), -1), "S=-1"),
    (lambda: D.count_max(D.exponential(1), 2), "no a.s. maximum"),
    (lambda: D.sample_schedules(D.DelayModel.linear(FIG7A, [2]), 1, 0, 3,
                                np.random.default_rng(0)), "T=0"),
    (lambda: D.sample_schedules(D.DelayModel.linear(FIG7A, [2]), 1, 5, 0,
                                np.random.default_rng(0)), "paths=0"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
