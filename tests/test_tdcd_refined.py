"""The refined variant of tdcd.theorem1 (derived by fedbound, not published; see
bounds/derivations/tdcd_refined.md), checked independently: a numpy transcription of its
formula, its drift lemma against an explicit sum and against the simulator, the variance
of the silo average against the simulator's sampler, its reductions (Q = 1 is mini-batch
SGD; below (15) wherever (14) holds), the section-6 instance on which Q local steps are
one step, the chooser helpers against brute force, and the bound against the simulator
through the public verify API."""

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tdcd_reference import refined_bound

import fedbound.bounds.tdcd as T
from fedbound import bounds
from fedbound.sim.tdcd import BlockLinear, Layout, run_tdcd
from fedbound.verify import check, load_scenario

torch.set_num_threads(1)
REFINED = bounds.get("tdcd.theorem1", "refined")
LABEL = "derived by fedbound, not published"


def reference(v):
    """The refined bound at the parameters ``v`` (tests/tdcd_reference.py, in numpy)."""
    return refined_bound(v["eta"], v["Q"], v["R"], v["L"], v["L_max"], v["sigma"], v["K"],
                         v["Delta"])


def drift_sum(eta, Q, Lm):
    """eta sum_{t<Q} ((1 + eta L_max)^t - 1): the pathwise drift reach, (D2) of the derivation."""
    return eta * sum((1 + eta * Lm) ** t - 1 for t in range(Q))


@st.composite
def refined_params(draw, admissible=True):
    N = draw(st.integers(1, 5))
    sigma = np.array(draw(st.lists(st.floats(0, 3), min_size=N, max_size=N)))
    K = np.array(draw(st.lists(st.integers(1, 40), min_size=N, max_size=N)), dtype=float)
    L, Lm, Q = draw(st.floats(1e-3, 50)), draw(st.floats(1e-3, 50)), draw(st.integers(1, 60))
    cap = REFINED.max_step(L=L, L_max=Lm, Q=Q)
    eta = draw(st.floats(1e-3, 1.0)) * cap if admissible else draw(st.floats(1e-4, 3.0)) * cap
    return dict(L=L, L_max=Lm, sigma=sigma, K=K, Delta=draw(st.floats(0, 50)), eta=eta, Q=Q,
                R=draw(st.integers(1, 10_000)))


# ------------------------------------------------------------------ registry and labels


def test_registered_labelled_as_fedbounds_own_result():
    row = next(r for r in bounds.list() if r["key"] == "tdcd.theorem1")
    assert "refined" in row["variants"] and row["default"] == "proof"
    assert LABEL in REFINED.title and LABEL in REFINED.notes
    assert "bounds/derivations/tdcd_refined.md" in REFINED.title
    assert any(LABEL in e.where for e in REFINED.errata)
    assert all(LABEL in c.citation for c in REFINED.conditions)
    assert REFINED.status == "holds"
    assert REFINED.params["K"].vector and REFINED.params["K"].description
    assert "K" not in bounds.get("tdcd.theorem1", "proof").params


# ------------------------------------------------------------------ the formula


@settings(max_examples=80, deadline=None)
@given(refined_params(admissible=False))
def test_evaluate_matches_the_numpy_transcription_and_terms_sum(v):
    value = REFINED.evaluate(**v)
    assert value == pytest.approx(reference(v), rel=1e-9)
    if math.isfinite(value):
        assert sum(REFINED.terms(**v).values()) == pytest.approx(value, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 10), st.integers(1, 80), st.floats(1e-3, 20))
def test_rho_bounds_the_exact_drift_sum(eta_frac, Q, Lm):
    """(D3): the exact drift sum is sandwiched, a y/2 <= eta sum_{t<Q} ((1 + eta L_max)^t - 1)
    <= 3 a y/(6 - 2y) for y < 3 (the lower end is the k = 2 binomial term alone), so rho
    over-estimates it by at most the factor 1/(1 - y/3): at most 1.2 in the drift regime
    y <= 1/2 of (R1), attained at Q = 2 where the sum is exactly a y/2; both 0 at Q = 1."""
    y = min(eta_frac, 2.99) if Q > 1 else 0.0
    eta = y / ((Q - 1) * Lm) if Q > 1 else eta_frac / Lm
    a = eta * Q
    rho = 3 * a * y / (6 - 2 * y)
    exact = drift_sum(eta, Q, Lm)
    assert rho >= exact * (1 - 1e-12)
    assert exact >= a * y / 2 * (1 - 1e-12)
    assert rho <= exact / (1 - y / 3) * (1 + 1e-12) + 1e-300
    if Q == 1:
        assert rho == exact == 0
    elif Q == 2:
        assert exact == pytest.approx(a * y / 2, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(refined_params())
def test_q1_is_the_minibatch_sgd_bound(v):
    v = {**v, "Q": 1, "eta": v["eta"] * v["Q"] if v["Q"] > 1 else v["eta"]}
    v["eta"] = min(v["eta"], 1 / v["L"])
    Sbar = float(np.sum(v["sigma"] ** 2 / v["K"]))
    eta, L = v["eta"], v["L"]
    sgd = (v["Delta"] / v["R"] + L / 2 * eta**2 * Sbar) / (eta * (1 - L * eta / 2))
    assert REFINED.evaluate(**v) == pytest.approx(sgd, rel=1e-10)


@settings(max_examples=60, deadline=None)
@given(refined_params())
def test_for_fixed_eta_q_the_bound_grows_with_q(v):
    a = v["eta"] * v["Q"]
    base = REFINED.evaluate(**{**v, "Q": 1, "eta": a})
    assert REFINED.evaluate(**v) >= base * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_below_proof_and_tight_wherever_14_holds(data):
    N = data.draw(st.integers(1, 5))
    sigma = np.array(data.draw(st.lists(st.floats(0, 3), min_size=N, max_size=N)))
    v = dict(L=data.draw(st.floats(1e-3, 50)), L_max=data.draw(st.floats(1e-3, 50)), sigma=sigma,
             Delta=data.draw(st.floats(0, 50)), Q=data.draw(st.integers(1, 60)),
             R=data.draw(st.integers(1, 10_000)))
    v["eta"] = data.draw(st.floats(1e-3, 1.0)) / (8 * v["Q"] * max(v["L"], v["L_max"]))
    K = np.array(data.draw(st.lists(st.integers(1, 40), min_size=N, max_size=N)), dtype=float)
    assert REFINED.admissible(K=K, **v)          # (14) implies (R1) and (R2)
    refined = REFINED.evaluate(K=K, **v)
    assert refined <= bounds.get("tdcd.theorem1", "proof").evaluate(**v) * (1 + 1e-12)
    assert refined <= bounds.get("tdcd.theorem1", "tight").evaluate(**v) * (1 + 1e-12)


# ------------------------------------------------------------------ conditions


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-3, 50), st.floats(1e-3, 50), st.integers(1, 200))
def test_the_largest_step_keeps_half_the_descent(L, Lm, Q):
    """(R1)-(R2) at the largest admissible step: y <= 1/2 and c >= a/2 (numpy, from the
    definitions); at Q = 1 the largest step is 1/L."""
    eta = REFINED.max_step(L=L, L_max=Lm, Q=Q)
    a, y = eta * Q, (Q - 1) * eta * Lm
    rho = 3 * a * y / (6 - 2 * y)
    c = a - rho - L * (a + rho) ** 2 / 2
    assert y <= 0.5 * (1 + 1e-12) and c >= a / 2 * (1 - 1e-9)
    assert not REFINED.admissible(L=L, L_max=Lm, Q=Q, eta=1.001 * eta)
    if Q == 1:   # 1/L up to the rounding of the root (about 1e-12 relative at L = 1e-3)
        assert eta == pytest.approx(1 / L, rel=1e-10)


def test_outside_the_proof_the_bound_is_infinite_not_nan():
    v = dict(L=1.0, L_max=1.0, sigma=np.array([0.5]), K=np.array([2.0]), Delta=1.0, R=10, Q=4)
    assert REFINED.evaluate(eta=10.0, **v) == math.inf            # y = 30 >= 3
    assert REFINED.evaluate(eta=2.5, Q=1, **{k: x for k, x in v.items() if k != "Q"}) == math.inf
    assert all(t == math.inf for t in REFINED.terms(eta=10.0, **v).values())


# ------------------------------------------------------------------ against the simulator


def _model(loss, blocks, clients, n, batch, seed):
    lay = Layout(blocks, clients, n, batch)
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, sum(blocks), generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=1).max()
    y = torch.sign(torch.randn(n, generator=gen, dtype=torch.float64)) if loss == "logistic" \
        else torch.randn(n, generator=gen, dtype=torch.float64)
    return BlockLinear(X, y, lay, loss=loss), gen


@pytest.mark.parametrize("loss, Q, frac", [("logistic", 6, 1.0), ("squared", 9, 0.7),
                                           ("logistic", 30, 1.0)])
def test_drift_lemma_holds_pathwise_in_the_simulator(loss, Q, frac):
    """(D4): ||eta sum_t (G^t - G^t0)|| <= rho sqrt(Gamma) every round and replica, with
    Gamma = sum_j (1/K_j) sum_k ||g_kj(y^t0)||^2 (the trace's g0) and G^t the recorded
    silo averages."""
    model, gen = _model(loss, (2, 3, 1), (2, 3, 1), 12, 12, 3)
    eta = frac * REFINED.max_step(L=model.L, L_max=model.L_max, Q=Q) * 2.0   # beyond (R1)-(R2)
    y = (Q - 1) * eta * model.L_max
    assert 0.5 < y < 3
    tr = run_tdcd(model, eta=eta, Q=Q, rounds=4, theta0=torch.randn(6, generator=gen,
                  dtype=torch.float64), replicas=8, generator=gen, record_iterates=True)
    G = tr.G.reshape(8, 4, Q, *tr.G.shape[2:])
    V = eta * (G - G[:, :, :1]).sum(dim=2)
    rho = 3 * eta * Q * y / (6 - 2 * y)
    lhs = V.square().sum(dim=(-2, -1)).sqrt()
    assert (lhs <= rho * tr.g0.sqrt() * (1 + 1e-9) + 1e-15).all()
    assert (lhs >= 0.05 * rho * tr.g0.sqrt()).any()           # not vacuous


def test_silo_average_variance_is_sigma2_over_k_in_the_sampler():
    """(A4): the silo average G_(j) of the first step has variance sigma_j^2(theta)/K_j
    (independent client batches) and E||G||^2 = ||grad L||^2 + sum_j sigma_j^2/K_j; Monte
    Carlo over 20000 batch draws against the exact per-client variance of sigma2_at."""
    model, gen = _model("logistic", (2, 2), (2, 3), 9, 12, 7)
    theta = torch.randn(4, generator=gen, dtype=torch.float64)
    reps = 20000
    tr = run_tdcd(model, eta=1e-3, Q=1, rounds=1, theta0=theta, replicas=reps, generator=gen,
                  record_iterates=True)
    G = tr.G[:, 0]                                               # [reps, N, d]
    grad = model.grad(model.split(theta)[None])[0]
    var = (G - grad).square().sum(-1).mean(0)                    # [N]
    expected = tr.sigma2[0, 0] / torch.tensor([2.0, 3.0], dtype=torch.float64)
    assert torch.allclose(var, expected, rtol=0.05)
    assert float(G.square().sum(dim=(-2, -1)).mean()) == pytest.approx(
        float(grad.square().sum() + expected.sum()), rel=0.03)


def test_on_the_constant_feature_instance_q_local_steps_are_one_step():
    """Section 6: with replicated constant features x_pj = xbar (squared loss, label noise)
    TDCD(Q, eta) and TDCD(1, p) with p = (1 - (1 - eta xbar^2)^Q)/xbar^2 have the same round-
    start models, batch by batch (same generator)."""
    n, xbar = 10, 0.8
    for clients in ((3,), (2, 1, 3)):
        N = len(clients)
        lay = Layout((1,) * N, clients, n, 2 * math.lcm(*clients))
        y = torch.randn(n, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        model = BlockLinear(torch.full((n, N), xbar, dtype=torch.float64), y, lay, loss="squared")
        for Q, eta in ((4, 0.5), (11, 0.2)):
            p = (1 - (1 - eta * xbar**2) ** Q) / xbar**2
            runs = [run_tdcd(model, eta=e, Q=q, rounds=5, theta0=torch.ones(N, dtype=torch.float64),
                             replicas=3, generator=torch.Generator().manual_seed(9),
                             record_iterates=True) for q, e in ((Q, eta), (1, p))]
            assert torch.allclose(runs[0].hub, runs[1].hub, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(refined_params())
def test_no_q_beats_q1_at_the_equivalent_step(v):
    """Section 6, consequence of validity on the N = 1 constant-feature instance with
    curvature L (admissible when L <= L_max): the bound at (Q, eta) is at least the bound at
    (1, p_Q(eta)), p_Q(eta) = (1 - (1 - eta L)^Q)/L."""
    v = {**v, "sigma": v["sigma"][:1], "K": v["K"][:1], "L_max": max(v["L_max"], v["L"])}
    v["eta"] = min(v["eta"], REFINED.max_step(L=v["L"], L_max=v["L_max"], Q=v["Q"]))
    p = (1 - (1 - v["eta"] * v["L"]) ** v["Q"]) / v["L"]
    assert REFINED.evaluate(**v) >= REFINED.evaluate(**{**v, "Q": 1, "eta": p}) * (1 - 1e-9)


def _scenario(**fields) -> str:
    return json.dumps(fields)


@pytest.mark.parametrize("fields", [
    {},
    {"Q": 1, "rounds": 30},
    {"loss": "squared", "Q": 8, "distance": 2.0, "seed": 3},
    {"blocks": [1, 2, 3], "clients": [1, 2, 3], "batch": 6, "Q": 3, "seed": 11},
    {"blocks": [4], "clients": [4], "batch": 4, "Q": 16, "loss": "squared", "seed": 5},
    {"blocks": [2, 2], "clients": [3, 1], "batch": 6, "Q": 2, "eta": 0.3, "seed": 17},
])
def test_the_bound_holds_against_the_simulator(fields):
    s = load_scenario("tdcd.theorem1", _scenario(replicas=24, **fields))
    v = check("tdcd.theorem1", s, variant="refined")
    assert v.admissible and v.verdict == "holds", v.as_dict()
    assert v.measured_ci[1] <= v.bound


def test_attained_at_q1_on_a_noise_free_one_dimensional_quadratic():
    """At Q = 1 the refined bound is the mini-batch SGD bound, which a noise-free 1-D
    quadratic attains: with one sample and eta = 1/L (the largest admissible step) the
    first step lands on the optimum, so the average of ||grad L||^2 is ||grad L(theta^0)||^2/R
    = 2 L Delta / R, the bound exactly. check reports "holds" (up to round-off)."""
    for rounds in (1, 7):
        s = load_scenario("tdcd.theorem1", _scenario(blocks=[1], clients=[1], n=1, batch=1,
                                                     loss="squared", Q=1, rounds=rounds,
                                                     replicas=2, seed=rounds))
        v = check("tdcd.theorem1", s, variant="refined")
        assert v.measured_mean == pytest.approx(v.bound, rel=1e-12) and v.verdict == "holds"


# ------------------------------------------------------------------ choosing eta and Q

CONSTANTS = [dict(L=0.0171, L_max=0.148, sigma=[0.145, 0.181], K=[2, 3], Delta=0.693),
             dict(L=1.0, L_max=4.0, sigma=[0.5], K=[1], Delta=3.0),
             dict(L=2.0, L_max=0.5, sigma=[0.01, 0.02, 0.0], K=[4, 4, 2], Delta=0.1)]


@pytest.mark.parametrize("const", CONSTANTS)
@pytest.mark.parametrize("Q", [1, 3, 20])
def test_rounds_needed_is_the_first_r_at_the_best_eta(const, Q):
    eps = 0.02
    out = T.refined_rounds_needed(eps, Q=Q, **const)
    v = {k: np.asarray(x, dtype=float) for k, x in const.items()}
    assert REFINED.evaluate(eta=out["eta"], Q=Q, R=out["R"], **v) <= eps
    if out["R"] > 1:
        assert REFINED.evaluate(eta=out["eta"], Q=Q, R=out["R"] - 1, **v) > eps
    # no admissible step on a fine grid needs fewer rounds (brute force, numpy transcription)
    grid = np.geomspace(1e-6, 1.0, 3000) * REFINED.max_step(L=const["L"], L_max=const["L_max"], Q=Q)
    need = []
    for eta in grid:
        lo, hi = 1, 2 * out["R"] + 10
        if reference({**v, "eta": eta, "Q": Q, "R": hi}) > eps:
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if reference({**v, "eta": eta, "Q": Q, "R": mid}) <= eps else (mid + 1, hi)
        need.append(lo)
    assert out["R"] <= min(need) <= 1.001 * out["R"] + 1


@pytest.mark.parametrize("const", CONSTANTS)
def test_bound_optimal_q_is_one_at_every_latency_ratio(const):
    """The brief asked for Q* = 1 at t_comm/t_comp = 1, Q* > 1 at 100 and Q* non-decreasing.
    Section 6 of the derivation proves that no valid bound of this shape can prefer Q > 1
    (the test above checks its consequence for this bound), so Q* = 1 at every ratio."""
    chosen = []
    for ratio in (1, 10, 100):
        out = T.refined_choice(0.01, t_comm=ratio, t_comp=1, Q_grid=(1, 2, 5, 10, 20), **const)
        assert [row["Q"] for row in out["table"]] == [1, 2, 5, 10, 20]
        assert [row["time"] for row in out["table"]] == \
            [row["R"] * T.round_time(row["Q"], ratio, 1) for row in out["table"]]
        chosen.append(out["best"]["Q"])
    assert chosen == sorted(chosen) and chosen[0] == 1 and chosen == [1, 1, 1]


@pytest.mark.parametrize("Delta, epsilon", [(5e-324, 1e-3), (1e300, 1e-3), (1.0, 1e-150),
                                            (0.0, 0.5)])
def test_rounds_needed_at_extreme_scales(Delta, epsilon):
    const = dict(L=1.0, L_max=2.0, sigma=[1.0, 0.5], K=[2, 1])
    if Delta == 1e300:
        with pytest.raises(ValueError, match="more rounds than a float"):
            T.refined_rounds_needed(1e-200, Q=3, Delta=Delta, **const)
    out = T.refined_rounds_needed(epsilon, Q=3, Delta=Delta, **const)
    assert out["R"] >= 1 and 0 < out["eta"] <= REFINED.max_step(L=1.0, L_max=2.0, Q=3)
    if Delta == 0:
        assert out["R"] == 1


@pytest.mark.parametrize("change, message", [
    ({"K": [1, 2, 3]}, "K has 3 entries"),
    ({"K": [0, 1]}, r"K\[0\]"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"Q": 0}, "Q=0"),
    ({"Delta": -1.0}, "Delta"),
    ({"sigma": [1e200, 1.0], "epsilon": 1e-200}, "too small"),
])
def test_bad_input_names_the_parameter(change, message):
    args = dict(epsilon=0.1, Q=2, L=1.0, L_max=1.0, sigma=[0.1, 0.2], K=[1, 2], Delta=1.0)
    with pytest.raises(ValueError, match=message):
        T.refined_rounds_needed(**{**args, **change})


# ------------------------------------------------------------------ the step at Q = 1 (section 9.1)


@settings(max_examples=80, deadline=None)
@given(st.floats(1e-3, 50), st.lists(st.tuples(st.floats(0, 3), st.integers(1, 40)), min_size=1,
                                     max_size=4), st.floats(1e-6, 10), st.floats(1e-6, 50))
def test_at_q1_the_chosen_step_is_the_closed_form(L, silos, eps, Delta):
    """Section 9.1: at Q = 1, h(eta) = eps eta (1 - L eta/2) - (L/2) eta^2 Sbar is maximised at
    eta* = min(eps / (L (eps + Sbar)), 1/L), whatever Delta; R = ceil(Delta / h(eta*))."""
    sigma = np.array([s for s, _ in silos])
    K = np.array([k for _, k in silos], dtype=float)
    out = T.refined_rounds_needed(eps, Q=1, L=L, L_max=1.0, sigma=sigma, K=K, Delta=Delta)
    Sbar = float(np.sum(sigma**2 / K))
    eta = min(eps / (L * (eps + Sbar)), 1 / L)
    assert out["eta"] == pytest.approx(eta, rel=1e-9)
    h = eps * eta * (1 - L * eta / 2) - L / 2 * eta**2 * Sbar
    need = Delta / h   # R = ceil(need), up to round-off
    assert max(1.0, need * (1 - 1e-9)) <= out["R"] <= max(1.0, need * (1 + 1e-9) + 1)


def _constant_feature_instance(N, clients, n, batch, xbar):
    """Instance I of section 6.2 (constant features xbar, squared loss, label noise)."""
    lay = Layout((1,) * N, clients, n, batch)
    y = torch.randn(n, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    return BlockLinear(torch.full((n, N), xbar, dtype=torch.float64), y, lay, loss="squared"), y


def test_no_valid_bound_certifies_epsilon_above_the_noise_cap():
    """Section 9.1: on instance I (two silos, K = (2, 3)), started at its stationary level,
    Q = 1 at step p keeps E ||grad L||^2 at floor(p) = p L N V / (2 - p L) in every round
    (Monte Carlo against the closed form), so no valid bound can certify an epsilon below
    floor(p) at p: every step above p_cap = 2 eps / (L (N V + eps)) is out of reach. The
    refined bound's limit as R grows is exactly floor(p) there, and its chosen step for
    epsilon = floor(p)/2 lies below p_cap."""
    N, clients, xbar = 2, (2, 3), 0.5
    model, y = _constant_feature_instance(N, clients, 12, 12, xbar)
    L = model.L
    assert L == pytest.approx(N * xbar**2, rel=1e-12)
    sigma2 = model.sigma2_at(model.split(torch.zeros(N, dtype=torch.float64))[None])[0]
    V = sigma2 / torch.tensor(clients, dtype=torch.float64)
    assert torch.allclose(V, V[0].expand(N), rtol=1e-12)      # equal sigma_j^2 / K_j
    V = float(V[0])
    p = 0.8 / L
    floor = p * L * N * V / (2 - p * L)
    eps = floor / 2
    cap = 2 * eps / (L * (N * V + eps))
    assert cap < p
    # start where ||grad L||^2 = N xbar^2 (xbar sum theta - mean y)^2 equals the floor
    total = (float(y.mean()) + math.sqrt(floor / (N * xbar**2))) / xbar
    reps, rounds = 4000, 30
    tr = run_tdcd(model, eta=p, Q=1, rounds=rounds, theta0=torch.full((N,), total / N, dtype=torch.float64),
                  replicas=reps, generator=torch.Generator().manual_seed(21))
    assert float(tr.grad_sq_norm[:, 0].mean()) == pytest.approx(floor, rel=1e-12)
    per_round = tr.grad_sq_norm.mean(0).numpy()
    assert np.allclose(per_round, floor, rtol=0.1) and per_round.mean() == pytest.approx(floor, rel=0.03)
    assert (tr.running_lhs.mean(0).numpy() > eps).all()
    const = dict(L=L, L_max=model.L_max, sigma=np.sqrt(V * np.array(clients, dtype=float)),
                 K=np.array(clients, dtype=float))
    assert REFINED.evaluate(**const, Delta=1.0, eta=p, Q=1, R=1e300) == pytest.approx(floor, rel=1e-9)
    chosen = T.refined_rounds_needed(eps, Q=1, Delta=1.0, **const)["eta"]
    assert chosen <= cap
