"""fedbound's deadline bound of MLL-SGD, Castiglia et al. 2021 (derived by fedbound, not
published; bounds/derivations/mllsgd_deadline.md), against independent computations: the
exact loss of the averaged model on quadratics of the class (the workers' second moments
propagated here with plain loops), the closed form when every worker steps, the simulator
through verify.check, and the certified choice of (tau, eta)."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedbound import bounds, verify
from fedbound.bounds import topology
from fedbound.bounds.mllsgd_deadline import choose_deadline_period

verify.load_plugins()
FAST = settings(max_examples=25, deadline=None)
THM = bounds.get("mllsgd.deadline_quadratic")


def exact_gap(lam, e1, noise, eta, K, q, tau, a, p, V, Z):
    """E F(u_K) - F* for F = 1/2 sum_j lam_j (x_j - x*_j)^2: per coordinate, the second moments
    of the workers' values, loop by loop over the iterations 1..K-1 and over the worker pairs
    (the coins: independent Bernoulli(p_i); the noise of coordinate j: variance noise[j])."""
    n = len(p)
    total = 0.0
    for lj, yj, cj in zip(lam, e1, noise, strict=True):
        M = np.full((n, n), yj * yj)
        for k in range(1, K):
            new = np.empty((n, n))
            for i in range(n):
                for m in range(n):
                    if i == m:
                        factor = p[i] * (1 - eta * lj) ** 2 + (1 - p[i])
                        new[i, m] = factor * M[i, m] + eta**2 * p[i] * cj
                    else:
                        new[i, m] = (1 - eta * lj * p[i]) * (1 - eta * lj * p[m]) * M[i, m]
            T = Z if k % (q * tau) == 0 else V if k % tau == 0 else np.eye(n)
            M = T.T @ new @ T
        total += 0.5 * lj * float(a @ M @ a)
    return total


@st.composite
def cases(draw):
    hubs = draw(st.integers(1, 3))
    sizes = [draw(st.integers(1, 3)) for _ in range(hubs)]
    hub_of = np.repeat(np.arange(hubs), sizes)
    w = np.array([draw(st.floats(0.5, 2)) for _ in hub_of])
    adj = topology.hub_graph(draw(st.sampled_from(["path", "complete", "ring"])), hubs, seed=0)
    b = topology.hub_weights(hub_of, w)[2]
    m = topology.worker_matrices(hub_of, w, topology.hub_matrix(adj, b))
    L = draw(st.floats(0.5, 3))
    mu = L * draw(st.floats(0.05, 1))
    p = np.array([draw(st.floats(0.3, 1)) for _ in hub_of])
    params = dict(eta=draw(st.floats(0.02, 1)) / L, L=L, mu=mu, sigma=draw(st.floats(0, 3)),
                  Delta=draw(st.floats(0, 5)), K=draw(st.integers(1, 12)), q=draw(st.integers(1, 3)),
                  tau=draw(st.integers(1, 3)), a=m.a, p=p, V=m.V, Z=m.Z)
    return params


@FAST
@given(cases(), st.data())
def test_bounds_every_member_of_the_class(p, data):
    d = data.draw(st.integers(1, 3))
    lam = np.array([p["mu"] * (p["L"] / p["mu"]) ** data.draw(st.floats(0, 1)) for _ in range(d)])
    if d >= 2:
        lam[0], lam[-1] = p["mu"], p["L"]
    direction = np.array([data.draw(st.floats(-1, 1)) for _ in range(d)])
    assume(np.abs(direction).sum() > 1e-3)
    e1 = direction * math.sqrt(2 * p["Delta"] / float((lam * direction**2).sum()))
    spread = np.array([data.draw(st.floats(0, 1)) for _ in range(d)]) + 1e-9
    noise = p["sigma"] ** 2 * spread / spread.sum()
    exact = exact_gap(lam, e1, noise, p["eta"], p["K"], p["q"], p["tau"], p["a"], p["p"], p["V"], p["Z"])
    G1 = min(float((lam**2 * e1**2).sum()), 2 * p["L"] * p["Delta"])
    assert THM.evaluate(**p, G1=G1) >= exact * (1 - 1e-9) - 1e-300
    assert THM.evaluate(**p, G1=0.0) >= THM.evaluate(**p, G1=G1) * (1 - 1e-12)


@FAST
@given(cases())
def test_exact_in_one_dimension(p):
    p = {**p, "mu": p["L"]}
    e1 = [math.sqrt(2 * p["Delta"] / p["L"])]
    exact = exact_gap([p["L"]], e1, [p["sigma"] ** 2], p["eta"], p["K"], p["q"], p["tau"], p["a"],
                      p["p"], p["V"], p["Z"])
    assert THM.evaluate(**p, G1=0.0) == pytest.approx(exact, rel=1e-9, abs=1e-300)


@FAST
@given(cases())
def test_p_one_is_centralised_sgd(p):
    """Every worker steps: u is SGD with noise variance sigma^2 sum a_i^2, whatever tau, q, H:
    P = (1 - eta mu)^(2(K-1)), N = eta^2 sum a_i^2 sum_{k < K-1} (1 - eta lam)^(2k)."""
    p = {**p, "p": np.ones_like(p["p"])}
    lam = np.geomspace(p["mu"], p["L"], 20001)
    r2 = (1 - p["eta"] * lam) ** 2
    noise = p["eta"] ** 2 * float((p["a"] ** 2).sum()) * sum(r2**k for k in range(p["K"] - 1))
    want = (p["Delta"] * (1 - p["eta"] * p["mu"]) ** (2 * (p["K"] - 1))
            + p["sigma"] ** 2 / 2 * float((lam * noise).max()))
    assert want * (1 - 1e-9) <= THM.evaluate(**p, G1=0.0) <= want * (1 + 2e-3) + 1e-300


@FAST
@given(cases(), st.floats(0, 3))
def test_monotone(p, more):
    b = THM.evaluate(**p, G1=0.0)
    assert THM.evaluate(**{**p, "sigma": p["sigma"] + more}, G1=0.0) >= b * (1 - 1e-12)
    assert THM.evaluate(**{**p, "Delta": p["Delta"] + more}, G1=0.0) >= b * (1 - 1e-12)
    assert THM.evaluate(**{**p, "mu": (p["mu"] + p["L"]) / 2}, G1=0.0) <= b * (1 + 2e-3)


def test_default_scenario_holds_exactly_and_by_monte_carlo():
    ad = verify.adapter_for("mllsgd.deadline_quadratic")
    s = ad.default_scenario()
    exact = ad.check(s, exact=True)
    mc = ad.check(s.replace(replicas=600))
    assert exact.verdict == mc.verdict == "holds"
    assert mc.measured_ci[0] <= exact.measured_mean <= mc.measured_ci[1]


def test_choice_is_the_minimum_of_its_curve():
    ad = verify.adapter_for("mllsgd.deadline_quadratic")
    params = ad.parameters(ad.default_scenario())
    rest = {k: v for k, v in params.items() if k not in ("eta", "K", "tau")}
    c = choose_deadline_period(taus=[1, 4], K={1: 32, 4: 64}, eta=[0.1, 0.5], **rest)
    assert c.best_bound <= min(r["bound"] for r in c.curve) * (1 + 1e-12)
    assert {r["horizon"] for r in c.curve} == {32, 64} and c.best["eta"] in (0.1, 0.5)
    # more iterations for tau = 4 in the same time: the pick takes them
    assert c.best["tau"] == 4
    with pytest.raises(ValueError, match="unknown parameter"):
        choose_deadline_period(taus=[1], K=8, zeta=0.1, **rest)
