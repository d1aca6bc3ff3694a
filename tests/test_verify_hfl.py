"""HFL adapters (verify.papers.hfl): default and random scenarios hold, conditional, per-cell
and paired (expected) checks, Lemma 1 pathwise, bound >= measured on random scenarios,
choosing S (verify/papers/hfl/choose.py SyncTime), scenario validation, plots."""

import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fedbound import bounds  # noqa: E402
from fedbound.bounds import delays as D  # noqa: E402
from fedbound.bounds.hfl_sync import choose_sync_time  # noqa: E402
from fedbound.verify import adapter_for, check  # noqa: E402
from fedbound.verify.api import choose  # noqa: E402
from fedbound.verify.papers.hfl import HFLScenario, lemma1_pathwise  # noqa: E402
from fedbound.verify.papers.hfl.choose import (  # noqa: E402
    SyncTime,
    loss_at_times,
    plot_answers,
    plot_loss_vs_wallclock,
)
from fedbound.verify.verdict import t_multiplier  # noqa: E402

FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
KEYS = ("hfl.lemma1", "hfl.theorem1", "hfl.theorem2", "hfl.corollary1")


@pytest.mark.parametrize("key", KEYS)
def test_default_scenarios_hold(key):
    v = check(key)
    assert v.verdict == "holds" and v.admissible
    thm = bounds.get(key)
    ad = adapter_for(key)
    params = ad.parameters(ad.default_scenario(), thm)
    assert set(params) <= set(thm.params)
    bound = np.asarray(thm.evaluate(**params))
    assert v.bound == (bound.ravel()[np.ravel_multi_index(v.cell, bound.shape)]
                       if v.cell else float(bound))


def test_theorem2_default_is_not_vacuous():
    v = check("hfl.theorem2")
    assert v.bound < v.params["G"] ** 2


@pytest.mark.parametrize("key", ["hfl.theorem2", "hfl.theorem1"])
def test_expected_mode_holds(key):
    v = check(key, HFLScenario(mode="expected", alpha=1.0))
    assert v.verdict == "holds" and any("paired" in n for n in v.notes)


@pytest.mark.parametrize("key", ["hfl.corollary1", "hfl.lemma1"])
def test_expected_mode_rejected_where_undefined(key):
    with pytest.raises(ValueError, match="mode='expected'"):
        check(key, HFLScenario(mode="expected"))


def test_expected_mode_pairs_each_replica_with_its_own_path():
    """One schedule per replica, one bound per replica, and the verdict's interval is that of
    the paired differences (recomputed here from the parts)."""
    ad = adapter_for("hfl.theorem2")
    s = HFLScenario(mode="expected", alpha=1.0, replicas=12)
    thm = ad.theorem()
    params = ad.parameters(s, thm)
    assert params["t"].shape[0] == 12
    bound = thm.evaluate(**params)
    m = ad.measure(s, params)
    assert bound.shape == (12,) and m.paired and m.values.shape == (12,)
    diff = bound - m.values
    low = diff.mean() - t_multiplier(12) * diff.std(ddof=1) / math.sqrt(12)
    v = ad.check(s)
    assert v.bound == pytest.approx(bound.mean()) and (v.verdict == "holds") == (low >= -m.atol)


def test_per_cell_verdict_reports_the_cell_closest_to_violation():
    """Lemma 1 [U, G]: the reported cell is the one with the least relative margin of the upper
    95% limit below the bound (recomputed here from the adapter's parts)."""
    ad = adapter_for("hfl.lemma1")
    s = ad.default_scenario()
    thm = ad.theorem()
    params = ad.parameters(s, thm)
    bound = thm.evaluate(**params)
    values = ad.measure(s, params).values
    n = values.shape[0]
    upper = values.mean(0) + t_multiplier(n) * values.std(0, ddof=1) / math.sqrt(n)
    margin = (bound - upper) / (np.abs(bound) + np.abs(values.mean(0)))
    v = ad.check(s)
    assert tuple(v.cell) == np.unravel_index(np.argmin(margin), margin.shape)
    assert v.bound == bound[tuple(v.cell)] and v.verdict == "holds"
    with pytest.raises(ValueError, match="no exact-expectation mode"):
        ad.check(s, exact=True)


@pytest.mark.parametrize("key", KEYS)
def test_random_scenarios_reproducible_and_hold(key):
    ad = adapter_for(key)
    s1 = ad.random_scenario(np.random.default_rng(11))
    s2 = ad.random_scenario(np.random.default_rng(11))
    assert s1 == s2
    s1.validate()
    assert check(key, s1).verdict == "holds"


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), S=st.floats(0, 5),
       T=st.floats(20, 80), seed=st.integers(0, 1000), variant=st.sampled_from(["proof", "tight"]))
def test_bound_at_least_measured_conditional(sizes, S, T, seed, variant):
    s = HFLScenario(sizes=sizes, S=S, T=T, seed=seed, replicas=16, alpha=1.0)
    assert check("hfl.theorem2", s, variant=variant).verdict == "holds"


def test_lemma1_pathwise_for_any_alpha():
    for alpha in (1.0, 200.0):
        out = lemma1_pathwise(HFLScenario(mode="expected", alpha=alpha, replicas=16))
        assert out["holds"] and out["cells"] > 0


def test_conditional_mode_is_one_delay_path_drawn_from_the_seed():
    s = HFLScenario(alpha=1.0, replicas=4, seed=5)
    t = adapter_for("hfl.theorem2").parameters(s)["t"]
    again = D.sample_schedules(s.model(), s.S, s.T, 1, np.random.default_rng(5)).path(0)
    assert (t == again).all() and t.ndim == 2


# ------------------------------------------------------------------ choosing S


def test_choose_sync_time_proof_bound_picks_zero():
    """alpha fixed (as today's choose-sync-time): the proof bound is non-decreasing in S."""
    chooser = SyncTime(sizes=[15, 15], delays=FIG7A, T=2000, alpha=0.05, L=1.0, G=2.0, sigma=1.0,
                       Delta=3.0)
    report = choose(chooser, variants=["proof"], method="bound")
    json.dumps(report.as_dict())
    (proof,) = report.certified
    assert proof.settings == {"S": 0.0, "alpha": 0.05}
    assert np.all(np.diff([p["bound"] for p in proof.curve]) >= 0)
    assert report.calibrated.settings["alpha"] == 0.05  # a fixed knob is fixed for every answer
    assert report.simulated is None and "proof chooses S = 0, alpha = 0.05" in report.text()


def test_choose_sync_time_joint_alpha():
    model = D.DelayModel.linear(FIG7A, [15, 15])
    c = choose_sync_time(model=model, T=2000, joint_alpha=True, L=2.0, G=2.0, sigma=1.0,
                         Delta=3.0, sizes=[15, 15], S_grid=[0, 5, 20])
    assert 0 < c.best_alpha <= 0.5
    fixed = choose_sync_time(model=model, T=2000, alpha=c.best_alpha, L=2.0, G=2.0, sigma=1.0,
                             Delta=3.0, sizes=[15, 15], S_grid=[0, 5, 20])
    assert fixed.best_bound == pytest.approx(c.best_bound, rel=1e-9)
    assert c.dominant_term in c.terms
    with pytest.raises(ValueError, match="alpha=1"):
        choose_sync_time(model=model, T=2000, alpha=1.0, L=2.0, G=2.0, sigma=1.0, Delta=3.0,
                         sizes=[15, 15])


def test_choose_sync_time_simulates_every_answer_on_the_same_paths():
    """Every answer is simulated on the same replicas (paired): its regret is the paired
    regret of its per-replica values against the best answer's (the best's own answers:
    against the best other answer they name), computed here again from a fresh paired
    simulation; the simulated answer is the best and passes."""
    chooser = SyncTime(sizes=[3, 3], delays=FIG7A, T=200, alpha=0.05, L=1.0, G=2.0, sigma=1.0,
                       Delta=3.0, S=[0, 3, 8], replicas=8)
    report = choose(chooser, variants=["proof", "tight"])
    out = report.as_dict()
    json.dumps(out)
    assert set(out) >= {"certified", "calibrated", "simulated"} and "curve" not in out["simulated"]
    assert report.simulated.value == min(a.value for a in report.answers)
    again = chooser.simulate([a.settings for a in report.answers], 8, paired=True)
    by_who = {a.who: e.values for a, e in zip(report.answers, again, strict=True)}
    others = [row for row in report.simulated.curve if (row["S"], row["alpha"]) !=
              (report.simulated.settings["S"], report.simulated.settings["alpha"])]
    runner_up = min(others, key=lambda row: row["value"])  # where every answer is the best
    (e,) = chooser.simulate([{"S": runner_up["S"], "alpha": runner_up["alpha"]}], 8, paired=True)
    by_who[f"the runner-up (S = {runner_up['S']:.4g}, alpha = {runner_up['alpha']:.4g})"] = e.values
    for a, e in zip(report.answers, again, strict=True):
        ref = by_who[a.against] if a.against else again[-1].values
        d = e.values - ref
        assert a.value == pytest.approx(e.values.mean(), rel=1e-12)
        assert a.regret == pytest.approx(d.mean() / ref.mean(), rel=1e-9, abs=1e-15)
        assert a.passes == (a.regret <= 0.1 or a.regret - a.regret_ci <= 0)
    assert report.simulated.regret <= 0 and report.simulated.against and report.simulated.passes
    ax = plot_answers(choose(chooser, variants=["proof"]))
    plot_loss_vs_wallclock(chooser, [report.simulated.settings])
    plt.close("all")
    assert ax.get_xlabel().startswith("sync time S")


@pytest.mark.parametrize("kw, match", [
    (dict(T=-1), "T=-1"), (dict(alpha=0), "alpha=0"),
    (dict(delays=FIG7A[:5]), "delays has 5 entries, needs 8"), (dict(sizes=[3, 0]), r"sizes\[1\]=0"),
])
def test_choose_sync_time_bad_input(kw, match):
    base = dict(sizes=[3, 3], delays=FIG7A, T=200, alpha=0.05, L=1.0, G=2.0, sigma=1.0, Delta=3.0)
    with pytest.raises(ValueError, match=match):
        SyncTime(**{**base, **kw})


def test_choose_rejects_an_unknown_method_or_variant():
    chooser = SyncTime(sizes=[3, 3], delays=FIG7A, T=200, alpha=0.05, L=1.0, G=2.0, sigma=1.0,
                       Delta=3.0)
    with pytest.raises(ValueError, match="method="):
        choose(chooser, method="guess")
    with pytest.raises(ValueError, match="unknown variant"):
        choose(chooser, variants=["folk"], method="bound")


# ------------------------------------------------------------------ scenarios and plots


def test_scenario_json_round_trip():
    s = HFLScenario(sizes=[2, 5], S=1.5, mode="expected")
    assert HFLScenario.from_dict(json.loads(s.to_json())) == s


@pytest.mark.parametrize("changes, match", [
    (dict(sizes=[0]), r"sizes\[0\]"), (dict(delays=[1, 2]), "8 parameters"),
    (dict(S=-1.0), "S=-1"), (dict(mode="sometimes"), "mode="),
    (dict(delays=[-1] + FIG7A[1:]), "d_shift"), (dict(problem={"kind": "mlp"}), "kind"),
])
def test_scenario_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        HFLScenario().replace(**changes)


def test_quadratic_scenario_has_no_G():
    with pytest.raises(ValueError, match="logistic"):
        check("hfl.theorem2", HFLScenario(problem={"kind": "quadratic"}))


@pytest.mark.parametrize("key", KEYS)
def test_adapter_plot(key):
    ad = adapter_for(key)
    ax = ad.plot(ad.default_scenario().replace(replicas=8))
    assert ax.get_title().startswith(key)
    plt.close("all")


@settings(max_examples=4, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), S=st.floats(0, 5),
       T=st.floats(20, 80), seed=st.integers(0, 1000))
def test_bound_at_least_measured_expected(sizes, S, T, seed):
    s = HFLScenario(sizes=sizes, S=S, T=T, seed=seed, replicas=16, alpha=1.0, mode="expected")
    assert check("hfl.theorem2", s).verdict == "holds"


def test_step_above_one_over_L_is_reported_inadmissible():
    v = check("hfl.theorem2", HFLScenario(alpha=100.0, replicas=8))
    assert not v.admissible and "alpha <= 1/L" in v.violations[0]


def test_loss_at_times_takes_the_model_available_then():
    loss = np.array([[5.0, 4.0, 3.0, 2.0]])
    got = loss_at_times(loss, np.array([[10.0, 20.0, 30.0]]), np.array([3]), [0, 10, 15, 30, 99])
    assert got.tolist() == [[5.0, 4.0, 4.0, 2.0, 2.0]]


def test_loss_at_times_per_replica_with_unequal_round_counts():
    """Replicas ran different numbers of rounds; padding after U[r] (here 0, earlier than any
    real end) must be ignored: the reference is np.searchsorted on each replica's own ends."""
    rng = np.random.default_rng(3)
    U = np.array([4, 1, 6])
    ends = np.cumsum(rng.uniform(1, 5, size=(3, 6)), axis=1)
    padded = np.where(np.arange(6) < U[:, None], ends, 0.0)
    loss = rng.uniform(size=(3, 7))
    times = [0.0, 2.5, 7.0, 11.0, 40.0]
    want = [loss[r, np.searchsorted(ends[r, : U[r]], times, side="right")] for r in range(3)]
    np.testing.assert_array_equal(loss_at_times(loss, padded, U, times), np.array(want))
