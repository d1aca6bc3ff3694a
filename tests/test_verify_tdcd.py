"""The TDCD results against the simulator on default and random admissible scenarios; the
derived parameters against independent computations; the scenario contract; plots; and
the choice of Q and eta (bound and simulation)."""

import json
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import fedbound.bounds.tdcd as btdcd  # noqa: E402
from fedbound import bounds  # noqa: E402
from fedbound.verify import adapter_for, check, default_scenario, load_scenario  # noqa: E402
from fedbound.verify.api import choose  # noqa: E402
from fedbound.verify.papers import tdcd as V  # noqa: E402
from fedbound.verify.papers.tdcd.choose import (  # noqa: E402
    QEta,
    loss_vs_time,
    plot_against_q,
    plot_loss_vs_time,
    q_sweep,
)
from fedbound.verify.strategies import scenarios  # noqa: E402

KEYS = ("tdcd.theorem1", "tdcd.lemma2", "tdcd.remark5")

torch.set_num_threads(1)
HEALTH = [HealthCheck.too_slow, HealthCheck.filter_too_much]


def drawn(key):
    """(variant, scenario admissible for it), from the adapter's own declaration."""
    return st.sampled_from(bounds.variants(key)).flatmap(
        lambda v: st.tuples(st.just(v), scenarios(key, variant=v)))


# ------------------------------------------------------------------ checks


@pytest.mark.parametrize("key", KEYS)
def test_default_scenarios_hold_in_every_variant(key):
    for variant in bounds.variants(key):
        v = check(key, variant=variant)
        assert v.verdict == "holds", v.as_dict()
        assert v.slack > 1


@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(drawn("tdcd.theorem1"))
def test_theorem1_bound_exceeds_the_measurement(drawn):
    variant, s = drawn
    v = check("tdcd.theorem1", s, variant=variant)
    assert v.verdict == "holds", v.as_dict()
    assert v.measured_ci[1] <= v.bound


@settings(max_examples=10, deadline=None, suppress_health_check=HEALTH)
@given(scenarios("tdcd.remark5"))
def test_remark5_bound_exceeds_the_measurement(s):
    assert check("tdcd.remark5", s).verdict == "holds"


@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(drawn("tdcd.lemma2"))
def test_lemma2_holds_pathwise_every_round_every_replica(drawn):
    variant, s = drawn
    thm = bounds.get("tdcd.lemma2", variant)
    params = adapter_for("tdcd.lemma2").parameters(s, thm)
    trace = V.run(s, params["eta"])
    rhs = thm.evaluate(**{**params, "G0": trace.g0.numpy()})
    assert (trace.drift.numpy() <= rhs * (1 + 1e-12) + 1e-300).all()
    v = check("tdcd.lemma2", s, variant=variant)
    assert v.mode == "exact" and v.verdict == "holds"
    assert v.measured_mean == pytest.approx(float(V.drift_ratio(trace).max()), rel=1e-15)


def test_exact_mode_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="tdcd.theorem1 has no exact-expectation mode"):
        check("tdcd.theorem1", exact=True)


# ------------------------------------------------------------------ derived parameters


def test_parameters_match_independent_computations():
    s = V.TDCDScenario(blocks=[2, 3, 1], clients=[1, 2, 4], n=30, batch=8)
    setup = V.build(s)
    X, y = setup.model.X.numpy(), setup.model.y.numpy()
    theta0 = setup.theta0.numpy()
    thm = bounds.get("tdcd.theorem1")
    p = adapter_for("tdcd.theorem1").parameters(s, thm)
    assert set(p) <= set(thm.params)
    assert p["L"] == pytest.approx(np.linalg.eigvalsh(X.T @ X)[-1] / (4 * 30), rel=1e-12)
    cols = [slice(0, 2), slice(2, 5), slice(5, 6)]
    assert p["L_max"] == pytest.approx(max((X[:, c] ** 2).sum(1).max() for c in cols) / 4, rel=1e-12)
    assert p["Delta"] == pytest.approx(np.mean(np.log1p(np.exp(-y * (X @ theta0)))), rel=1e-12)
    # 8 samples per round; C = 4 cells of 2, so b_j = 8, 4, 2 and fpc = (30 - 2)/(30 - 1)
    fpc = 28 / 29
    expected = [np.sqrt(fpc / b * (X[:, c] ** 2).sum(1).mean()) for c, b in zip(cols, (8, 4, 2),
                                                                                    strict=True)]
    np.testing.assert_allclose(p["sigma"], expected, rtol=1e-12)
    assert p["eta"] == pytest.approx(1 / (8 * s.Q * max(p["L"], p["L_max"])), rel=1e-12)


def test_least_squares_sigma_is_the_largest_visited_variance():
    s = V.TDCDScenario(loss="squared", label_noise=0.3, rounds=10, replicas=8)
    thm = bounds.get("tdcd.theorem1")
    p = adapter_for("tdcd.theorem1").parameters(s, thm)
    trace = V.run(s, p["eta"])
    np.testing.assert_allclose(p["sigma"] ** 2, trace.sigma2.numpy().max(axis=(0, 1)), rtol=1e-14)
    lstsq = np.linalg.lstsq(V.build(s).model.X.numpy(), V.build(s).model.y.numpy(), rcond=None)
    assert p["Delta"] > 0 and lstsq[0].shape == (6,)


# ------------------------------------------------------------------ scenario contract


def test_scenario_round_trips_through_json():
    s = V.TDCDScenario(blocks=[1, 4], clients=[3, 1], batch=6, Q=2, eta=0.01)
    assert V.TDCDScenario.from_dict(json.loads(s.to_json())) == s
    assert load_scenario("tdcd.theorem1", '{"Q": 3}').Q == 3
    assert isinstance(adapter_for("tdcd.lemma2"), V.Lemma2)
    assert default_scenario("tdcd.lemma2") == V.Lemma2.default


@pytest.mark.parametrize("change, message", [
    ({"blocks": [2, 0]}, r"blocks\[1\]=0 .*empty feature block"),
    ({"clients": [0, 2]}, r"clients\[0\]=0 .*K_j >= 1"),
    ({"Q": 0}, r"Q=0 must be an integer >= 1"),
    ({"batch": 366}, r"batch=366 is larger than the data: M = lcm\(K_j\) n = 6 \* 60 = 360"),
    ({"batch": 10}, r"batch=10 must be a multiple of lcm"),
    ({"loss": "hinge"}, r"loss='hinge'"),
    ({"blocks": []}, r"blocks=\[\] must be a non-empty list"),
    ({"eta": -1.0}, r"eta=-1 must lie in"),
])
def test_bad_scenarios_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        load_scenario("tdcd.theorem1", change)


def test_remark5_refuses_a_fixed_eta_and_theorem1_a_c():
    with pytest.raises(ValueError, match="tdcd.remark5 fixes eta"):
        check("tdcd.remark5", V.TDCDScenario(eta=0.01))
    with pytest.raises(ValueError, match="only tdcd.remark5 uses c"):
        check("tdcd.theorem1", V.TDCDScenario(c=0.5))


@pytest.mark.parametrize("key", KEYS)
def test_random_scenarios_are_reproducible_admissible_and_plot(key):
    ad = adapter_for(key)
    a = ad.random_scenario(np.random.default_rng(3))
    b = ad.random_scenario(np.random.default_rng(3))
    assert a == b
    thm = bounds.get(key)
    assert thm.admissible(**ad.parameters(a, thm))
    ax = ad.plot(a)
    assert ax.get_lines()
    plt.close(ax.figure)


# ------------------------------------------------------------------ Q sweeps


def test_q_sweep_bound_is_flat_at_fixed_eta_q_and_grows_at_fixed_eta():
    s = V.TDCDScenario(rounds=15, replicas=16)
    flat = q_sweep(s, Qs=(1, 3, 6), fixed="etaQ")
    assert all(r["verdict"] == "holds" for r in flat)
    assert flat[0]["bound"] == pytest.approx(flat[-1]["bound"], rel=1e-12)
    grow = q_sweep(s, Qs=(1, 3, 6), fixed="eta")
    assert grow[0]["bound"] < grow[1]["bound"] < grow[2]["bound"]
    ax = plot_against_q(s, Qs=(1, 2), fixed="eta")
    assert len(ax.get_lines()) >= 2
    plt.close(ax.figure)


def test_loss_against_time_follows_the_latency_model():
    s = V.TDCDScenario(rounds=6, replicas=4)
    curves = loss_vs_time(s, Qs=(1, 4), t_comms=(10.0, 100.0))
    time_q4, loss_q4 = curves[100.0][4]
    assert np.allclose(np.diff(time_q4), 3 * 100 + 4)
    assert time_q4[-1] >= 6 * 301 and loss_q4.shape == time_q4.shape
    axes = plot_loss_vs_time(curves)
    assert len(axes) == 2
    plt.close(axes[0].figure)


# ------------------------------------------------------------------ choosing Q and eta


def test_choose_q_eta_proof_bound_prefers_q1_and_simulates_its_choice():
    report = choose(QEta(epsilon=0.005, t_comm=100.0, t_comp=1.0), variants=["proof"])
    json.dumps(report.as_dict())
    (proof,) = report.certified
    assert proof.settings["Q"] == 1
    rows = proof.curve  # eta Q and R do not depend on Q: extra local steps only cost time
    assert len({row["rounds"] for row in rows}) == 1
    assert all(row["eta"] * row["Q"] == pytest.approx(rows[0]["eta"], rel=1e-6) for row in rows)
    assert report.simulated.value == min(a.value for a in report.answers)
    for a in report.answers:  # time = rounds x t_Q: a multiple of t_Q on average
        (e,) = report_chooser_evaluation(report, a.settings)
        assert a.value == pytest.approx(e.extra["rounds"] * (300 + a.settings["Q"]))
    text = report.text()
    assert "certified proof" in text and "calibrated" in text and report.message in text


def report_chooser_evaluation(report, settings):
    """The paired simulation of ``settings`` again, as the report ran it."""
    chooser = QEta(epsilon=0.005, t_comm=100.0, t_comp=1.0)
    return chooser.simulate([settings], report.search["replicas"], paired=True)


def test_choose_q_eta_slow_communication_favours_more_local_steps_at_one_step():
    """The paper's practice (Section 5.2: one step size for every Q): at eta = eta_max(1) of
    (14) and t_comm = 100, Q = 10 reaches epsilon sooner in wall-clock time than Q = 1."""
    chooser = QEta(epsilon=0.005, t_comm=100.0, t_comp=1.0, Q=(1, 10))
    eta = chooser.max_step("proof", 1)
    q1, q10 = chooser.simulate([{"Q": 1, "eta": eta}, {"Q": 10, "eta": eta}], 16, paired=True)
    assert math.isfinite(q10.value) and q10.value + q10.ci < q1.value - q1.ci


def test_choose_q_eta_bound_matches_the_closed_form_and_bad_input():
    """The proof variant's rounds against bounds.tdcd.rounds_needed (the closed-form optimum
    of eta Q), and R ~ 1/epsilon^2 for small epsilon."""
    chooser = QEta(epsilon=1e-6, t_comm=10.0, t_comp=1.0)
    m = chooser.model
    need = btdcd.rounds_needed(1e-6, L=m.L, L_max=m.L_max, sigma=np.asarray(m.sigma),
                               Delta=V.delta(V.build(chooser.scenario)))
    got = chooser.certified("proof").curve[0]
    assert got["rounds"] == pytest.approx(need["R"], rel=1e-6)
    assert got["eta"] == pytest.approx(need["a"], rel=1e-4)
    r1, r2 = (QEta(epsilon=e, t_comm=10.0, t_comp=1.0).certified("proof").curve[0]["rounds"]
              for e in (1e-6, 1e-7))
    assert r2 / r1 == pytest.approx(100, rel=0.01)
    with pytest.raises(ValueError, match="method='fast'"):
        choose(chooser, method="fast")
    with pytest.raises(ValueError, match="epsilon=0 must lie in"):
        QEta(epsilon=0.0, t_comm=1.0, t_comp=1.0)
    with pytest.raises(ValueError, match=r"Q\[1\]=0"):
        QEta(epsilon=0.1, t_comm=1.0, t_comp=1.0, Q=(1, 0))
