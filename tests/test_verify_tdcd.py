"""The TDCD results against the simulator on default and random admissible scenarios; the
derived parameters against independent computations; the scenario contract; plots; and
the choice of Q and eta (bound and simulation)."""

import json
import math
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import bounds  # noqa: E402
import verify.tdcd as V  # noqa: E402
from verify import default_scenario, load_scenario  # noqa: E402
from verify.check import check  # noqa: E402
from verify.scenario import adapter_for  # noqa: E402

torch.set_num_threads(1)
VARIANTS = {"tdcd.theorem1": ("printed", "proof", "tight"), "tdcd.lemma2": ("proof", "tight"),
            "tdcd.remark5": ("proof",)}


@st.composite
def scenarios(draw):
    """Random N, feature splits, unequal K_j, batch, loss, Q, rounds, start."""
    N = draw(st.integers(1, 3))
    clients = draw(st.lists(st.integers(1, 3), min_size=N, max_size=N))
    n = draw(st.integers(10, 40))
    return V.TDCDScenario(
        blocks=draw(st.lists(st.integers(1, 3), min_size=N, max_size=N)), clients=clients, n=n,
        batch=math.lcm(*clients) * draw(st.integers(1, 3)),
        loss=draw(st.sampled_from(["logistic", "squared"])), Q=draw(st.integers(1, 8)),
        rounds=draw(st.integers(3, 20)), distance=draw(st.floats(0, 3)), replicas=16,
        seed=draw(st.integers(0, 2**16)))


def with_step_fraction(key, s, frac, variant=None):
    thm = bounds.get(key, variant)
    largest = V.ADAPTER.parameters(key, s, thm)[thm.step]
    return s.replace(**{thm.step: frac * largest})


# ------------------------------------------------------------------ checks


@pytest.mark.parametrize("key", V.KEYS)
def test_default_scenarios_hold_in_every_variant_quickly(key):
    for variant in VARIANTS[key]:
        t0 = time.perf_counter()
        v = check(key, variant=variant)
        assert v.verdict == "holds", v.as_dict()
        assert v.slack > 1 and time.perf_counter() - t0 < 3.0
    assert set(V.ADAPTER.defaults) == set(V.KEYS)
    assert default_scenario(key) is V.ADAPTER.defaults[key]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.floats(0.05, 1.0), st.sampled_from(["printed", "proof", "tight"]))
def test_theorem1_bound_exceeds_the_measurement(s, frac, variant):
    s = with_step_fraction("tdcd.theorem1", s, frac, variant)
    v = check("tdcd.theorem1", s, variant=variant)
    assert v.verdict == "holds", v.as_dict()
    assert v.measured_ci[1] <= v.bound


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.floats(0.05, 1.0))
def test_remark5_bound_exceeds_the_measurement(s, frac):
    s = with_step_fraction("tdcd.remark5", s, frac)
    assert check("tdcd.remark5", s).verdict == "holds"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.floats(0.05, 1.0), st.sampled_from(["proof", "tight"]))
def test_lemma2_holds_pathwise_every_round_every_replica(s, frac, variant):
    s = with_step_fraction("tdcd.lemma2", s, frac, variant)
    thm = bounds.get("tdcd.lemma2", variant)
    params = V.ADAPTER.parameters("tdcd.lemma2", s, thm)
    trace = V.run(s, params["eta"])
    rhs = thm.evaluate(**{**params, "G0": trace.g0.numpy()})
    assert (trace.drift.numpy() <= rhs * (1 + 1e-12) + 1e-300).all()
    v = check("tdcd.lemma2", s, variant=variant)
    assert v.mode == "exact" and v.verdict == "holds"
    assert v.measured_mean == pytest.approx(float(V.drift_ratio(trace).max()), rel=1e-15)


def test_exact_mode_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="exact mode is not available for tdcd"):
        check("tdcd.theorem1", exact=True)


# ------------------------------------------------------------------ derived parameters


def test_parameters_match_independent_computations():
    s = V.TDCDScenario(blocks=[2, 3, 1], clients=[1, 2, 4], n=30, batch=8)
    setup = V.build(s)
    X, y = setup.model.X.numpy(), setup.model.y.numpy()
    theta0 = setup.theta0.numpy()
    thm = bounds.get("tdcd.theorem1")
    p = V.ADAPTER.parameters("tdcd.theorem1", s, thm)
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
    p = V.ADAPTER.parameters("tdcd.theorem1", s, thm)
    trace = V.run(s, p["eta"])
    np.testing.assert_allclose(p["sigma"] ** 2, trace.sigma2.numpy().max(axis=(0, 1)), rtol=1e-14)
    lstsq = np.linalg.lstsq(V.build(s).model.X.numpy(), V.build(s).model.y.numpy(), rcond=None)
    assert p["Delta"] > 0 and lstsq[0].shape == (6,)


# ------------------------------------------------------------------ scenario contract


def test_scenario_round_trips_through_json():
    s = V.TDCDScenario(blocks=[1, 4], clients=[3, 1], batch=6, Q=2, eta=0.01)
    assert V.TDCDScenario.from_dict(json.loads(s.to_json())) == s
    assert load_scenario("tdcd.theorem1", '{"Q": 3}').Q == 3
    assert adapter_for("tdcd.lemma2") is V.ADAPTER


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


@pytest.mark.parametrize("key", V.KEYS)
def test_random_scenarios_are_reproducible_admissible_and_plot(key):
    a = V.ADAPTER.random_scenario(key, np.random.default_rng(3))
    b = V.ADAPTER.random_scenario(key, np.random.default_rng(3))
    assert a == b
    thm = bounds.get(key)
    assert thm.admissible(**V.ADAPTER.parameters(key, a, thm))
    ax = V.ADAPTER.plot(key, a, variant=None, exact=False, ax=None)
    assert ax.get_lines()
    plt.close(ax.figure)


# ------------------------------------------------------------------ Q sweeps


def test_q_sweep_bound_is_flat_at_fixed_eta_q_and_grows_at_fixed_eta():
    s = V.TDCDScenario(rounds=15, replicas=16)
    flat = V.q_sweep(s, Qs=(1, 3, 6), fixed="etaQ")
    assert all(r["verdict"] == "holds" for r in flat)
    assert flat[0]["bound"] == pytest.approx(flat[-1]["bound"], rel=1e-12)
    grow = V.q_sweep(s, Qs=(1, 3, 6), fixed="eta")
    assert grow[0]["bound"] < grow[1]["bound"] < grow[2]["bound"]
    ax = V.plot_against_q(s, Qs=(1, 2), fixed="eta")
    assert len(ax.get_lines()) >= 2
    plt.close(ax.figure)


def test_loss_against_time_follows_the_latency_model():
    s = V.TDCDScenario(rounds=6, replicas=4)
    curves = V.loss_vs_time(s, Qs=(1, 4), t_comms=(10.0, 100.0))
    time_q4, loss_q4 = curves[100.0][4]
    assert np.allclose(np.diff(time_q4), 3 * 100 + 4)
    assert time_q4[-1] >= 6 * 301 and loss_q4.shape == time_q4.shape
    axes = V.plot_loss_vs_time(curves)
    assert len(axes) == 2
    plt.close(axes[0].figure)


# ------------------------------------------------------------------ choosing Q and eta


def test_choose_q_eta_bound_prefers_q1_and_report_is_json():
    t0 = time.perf_counter()
    report = V.choose_q_eta(epsilon=0.005, t_comm=100.0, t_comp=1.0)
    assert time.perf_counter() - t0 < 20
    json.dumps(report)
    b, m = report["bound"], report["simulation"]
    assert b["best"]["Q"] == 1
    assert len({row["rounds"] for row in b["table"]}) == 1          # R does not depend on Q
    assert all(row["eta"] * row["Q"] == pytest.approx(b["eta_Q"]) for row in b["table"])
    reached = [r for r in m["table"] if r["time"] is not None]
    assert m["best"]["time"] == min(r["time"] for r in reached)
    for row in reached:   # time = rounds x t_Q
        assert row["time"] == pytest.approx(row["rounds"] * (300 + row["Q"]))
    text = V.format_choose_q_eta(report)
    assert "From the bound" in text and "From simulation" in text and report["agreement"] in text


def test_choose_q_eta_slow_communication_favours_more_local_steps_in_simulation():
    """The paper's Figs 3-5 (L310-L324): with t_comm = 100 the simulation prefers Q > 1 (at
    a step beyond (14)); the bound, which depends on eta Q only, keeps Q = 1."""
    report = V.choose_q_eta(epsilon=0.005, t_comm=100.0, t_comp=1.0, method="simulate",
                            Q_grid=(1, 10))
    assert report["bound"] is None and report["simulation"]["best"]["Q"] == 10
    assert "Only one method" in report["agreement"]


def test_choose_q_eta_bound_rounds_grow_like_one_over_epsilon_squared_and_bad_input():
    """Small epsilon: R ~ 64 Delta L S / epsilon^2 (theory/tdcd.md section 5.1)."""
    r1, r2 = (V.choose_q_eta(epsilon=e, t_comm=10.0, t_comp=1.0, method="bound")["bound"]
              for e in (1e-6, 1e-7))
    assert r2["best"]["rounds"] / r1["best"]["rounds"] == pytest.approx(100, rel=0.01)
    with pytest.raises(ValueError, match="method='fast'"):
        V.choose_q_eta(epsilon=0.1, t_comm=1.0, t_comp=1.0, method="fast")
    with pytest.raises(ValueError, match="epsilon=0 must lie in"):
        V.choose_q_eta(epsilon=0.0, t_comm=1.0, t_comp=1.0)
    with pytest.raises(ValueError, match=r"Q_grid\[1\]=0"):
        V.choose_q_eta(epsilon=0.1, t_comm=1.0, t_comp=1.0, Q_grid=(1, 0))
