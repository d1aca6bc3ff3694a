"""verify.hfl: default and random scenarios hold, conditional and expected checks, Lemma 1
pathwise, bound >= measured on random scenarios, choosing S (speed, JSON, agreement),
scenario validation, plots."""

import json
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import bounds  # noqa: E402
import verify.hfl as V  # noqa: E402
from bounds import delays as D  # noqa: E402
from bounds.tuning import choose_sync_time  # noqa: E402
from verify.scenario import adapter_for  # noqa: E402

FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
KEYS = ("hfl.lemma1", "hfl.theorem1", "hfl.theorem2", "hfl.corollary1")


@pytest.mark.parametrize("key", KEYS)
def test_default_scenarios_hold(key):
    v = V.check(key)
    assert v.verdict == "holds" and v.admissible
    assert v.seconds < 6
    thm = bounds.get(key)
    if key in ("hfl.theorem2", "hfl.corollary1"):
        params = V.ADAPTER.parameters(key, V.ADAPTER.defaults[key], thm)
        assert set(params) <= set(thm.params)
        assert v.bound < thm.evaluate(**params) * (1 + 1e-12) + 1e-300


def test_theorem2_default_is_not_vacuous():
    v = V.check("hfl.theorem2")
    assert v.bound < v.params["G"] ** 2


@pytest.mark.parametrize("key", ["hfl.theorem2", "hfl.theorem1"])
def test_expected_mode_holds(key):
    v = V.check(key, V.HFLScenario(mode="expected", alpha=1.0))
    assert v.verdict == "holds"


def test_expected_mode_rejected_where_undefined():
    with pytest.raises(ValueError, match="not defined"):
        V.check("hfl.corollary1", V.HFLScenario(mode="expected"))


def test_check_override_hook():
    ad = adapter_for("hfl.theorem2")
    assert ad.check_override("hfl.theorem2", ad.defaults["hfl.theorem2"]) is None
    s = ad.defaults["hfl.lemma1"]
    a, b = V.check("hfl.lemma1", s), ad.check_override("hfl.lemma1", s)
    assert a.bound == b.bound and a.measured_mean == b.measured_mean
    with pytest.raises(ValueError, match="no exact mode"):
        ad.check_override("hfl.lemma1", s, exact=True)


@pytest.mark.parametrize("key", KEYS)
def test_random_scenarios_reproducible_and_hold(key):
    s1 = V.ADAPTER.random_scenario(key, np.random.default_rng(11))
    s2 = V.ADAPTER.random_scenario(key, np.random.default_rng(11))
    assert s1 == s2
    s1.validate()
    assert V.check(key, s1).verdict == "holds"


@settings(max_examples=6, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), S=st.floats(0, 5),
       T=st.floats(20, 80), seed=st.integers(0, 1000), variant=st.sampled_from(["proof", "tight"]))
def test_bound_at_least_measured_conditional(sizes, S, T, seed, variant):
    s = V.HFLScenario(sizes=sizes, S=S, T=T, seed=seed, replicas=16, alpha=1.0)
    assert V.check("hfl.theorem2", s, variant=variant).verdict == "holds"


def test_lemma1_pathwise_for_any_alpha():
    for alpha in (1.0, 200.0):
        out = V.lemma1_pathwise(V.HFLScenario(mode="expected", alpha=alpha, replicas=16))
        assert out["holds"] and out["cells"] > 0


def test_fixed_path_is_the_bound_schedule():
    s = V.HFLScenario(alpha=1.0, replicas=4)
    params = V.all_parameters("hfl.theorem2", s)
    trace = V.simulate("hfl.theorem2", s, params)
    assert (trace.t.numpy() == params["t"][None]).all()


# ------------------------------------------------------------------ choosing S


def test_choose_sync_time_bound_is_fast_and_picks_zero():
    kw = dict(sizes=[15, 15], delays=FIG7A, T=2000, alpha=0.05, L=1.0, G=2.0, sigma=1.0,
              Delta=3.0)
    t0 = time.perf_counter()
    report = V.choose_sync_time_report(**kw, method="bound")
    assert time.perf_counter() - t0 < 1.0
    json.dumps(report)
    assert report["bound"]["best_S"] == 0.0  # the proof bound is non-decreasing in S (guide 3.4)
    assert np.all(np.diff(report["bound"]["bound"]) >= 0)
    assert "best S = 0" in V.format_choose_sync_time(report)


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


def test_choose_sync_time_both_reports_agreement():
    report = V.choose_sync_time_report(sizes=[3, 3], delays=FIG7A, T=200, alpha=0.05, L=1.0,
                                       G=2.0, sigma=1.0, Delta=3.0, S_grid=[0, 3, 8])
    json.dumps(report)
    assert report["agreement"]["verdict"] in ("agree", "agree within noise", "disagree")
    assert report["simulation"]["S"] == [0.0, 3.0, 8.0]
    assert "verdict:" in V.format_choose_sync_time(report)
    ax = V.plot_sync_time(report)
    V.plot_loss_vs_wallclock(report)
    plt.close("all")
    assert ax.get_xlabel() == "sync time S"


@pytest.mark.parametrize("kw, match", [
    (dict(method="guess"), "method="), (dict(T=-1), "T=-1"), (dict(alpha=0), "alpha=0"),
    (dict(delays=FIG7A[:5]), "8 parameters"), (dict(sizes=[3, 0]), r"sizes\[1\]=0"),
])
def test_choose_sync_time_bad_input(kw, match):
    base = dict(sizes=[3, 3], delays=FIG7A, T=200, alpha=0.05, L=1.0, G=2.0, sigma=1.0,
                Delta=3.0, method="bound")
    with pytest.raises(ValueError, match=match):
        V.choose_sync_time_report(**{**base, **kw})


# ------------------------------------------------------------------ scenarios and plots


def test_scenario_json_round_trip():
    s = V.HFLScenario(sizes=[2, 5], S=1.5, mode="expected")
    assert V.HFLScenario.from_dict(json.loads(s.to_json())) == s


@pytest.mark.parametrize("changes, match", [
    (dict(sizes=[0]), r"sizes\[0\]"), (dict(delays=[1, 2]), "8 parameters"),
    (dict(S=-1.0), "S=-1"), (dict(mode="sometimes"), "mode="),
    (dict(delays=[-1] + FIG7A[1:]), "d_shift"), (dict(problem={"kind": "mlp"}), "kind"),
])
def test_scenario_validation(changes, match):
    with pytest.raises(ValueError, match=match):
        V.HFLScenario().replace(**changes)


def test_quadratic_scenario_has_no_G():
    with pytest.raises(ValueError, match="logistic"):
        V.check("hfl.theorem2", V.HFLScenario(problem={"kind": "quadratic"}))


@pytest.mark.parametrize("key", KEYS)
def test_adapter_plot(key):
    ax = V.ADAPTER.plot(key, V.ADAPTER.defaults[key].replace(replicas=8))
    assert ax.get_title().startswith(key)
    plt.close("all")


@settings(max_examples=4, deadline=None)
@given(sizes=st.lists(st.integers(1, 6), min_size=1, max_size=3), S=st.floats(0, 5),
       T=st.floats(20, 80), seed=st.integers(0, 1000))
def test_bound_at_least_measured_expected(sizes, S, T, seed):
    s = V.HFLScenario(sizes=sizes, S=S, T=T, seed=seed, replicas=16, alpha=1.0, mode="expected")
    assert V.check("hfl.theorem2", s).verdict == "holds"


def test_step_above_one_over_L_is_reported_inadmissible():
    v = V.check("hfl.theorem2", V.HFLScenario(alpha=100.0, replicas=8))
    assert not v.admissible and "alpha <= 1/L" in v.violations[0]


def test_loss_at_times_takes_the_model_available_then():
    loss = np.array([[5.0, 4.0, 3.0, 2.0]])
    got = V.loss_at_times(loss, np.array([[10.0, 20.0, 30.0]]), np.array([3]), [0, 10, 15, 30, 99])
    assert got.tolist() == [[5.0, 4.0, 4.0, 2.0, 2.0]]
