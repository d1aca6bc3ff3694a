"""fedbound's deadline bound of TDCD, Das et al. 2022, under the PL condition (derived by
fedbound, not published; bounds/derivations/tdcd_deadline.md): its closed form at Q = 1
(mini-batch SGD under PL, computed here), its terms, the simulator on least squares through
verify.check, and the certified choice of (Q, eta)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds, verify
from fedbound.bounds.tdcd import choose_deadline_local_steps

verify.load_plugins()
THM = bounds.get("tdcd.deadline_pl")


@st.composite
def constants(draw):
    L = draw(st.floats(0.1, 5))
    N = draw(st.integers(1, 3))
    return dict(L=L, L_max=L * draw(st.floats(0.5, 4)), mu=L * draw(st.floats(0.01, 1)),
                sigma=np.array([draw(st.floats(0, 2)) for _ in range(N)]),
                K=np.array([draw(st.integers(1, 4)) for _ in range(N)], dtype=float),
                Delta=draw(st.floats(0, 5)), R=draw(st.integers(1, 50)))


@settings(max_examples=40, deadline=None)
@given(constants(), st.floats(0.01, 1))
def test_q1_is_minibatch_sgd_under_pl(c, frac):
    """Q = 1: kappa = 1 - 2 mu eta (1 - L eta/2), m = (L/2) eta^2 sum sigma_j^2/K_j."""
    eta = frac / c["L"]
    k = 1 - 2 * c["mu"] * eta * (1 - c["L"] * eta / 2)
    m = c["L"] / 2 * eta**2 * float((c["sigma"] ** 2 / c["K"]).sum())
    want = k ** c["R"] * c["Delta"] + m * sum(k**r for r in range(c["R"]))
    got = THM.evaluate(**c, Q=1, eta=eta)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-300)
    assert sum(THM.terms(**c, Q=1, eta=eta).values()) == pytest.approx(got, rel=1e-12, abs=1e-300)


@settings(max_examples=40, deadline=None)
@given(constants(), st.integers(2, 10), st.floats(0.05, 1), st.floats(0, 2))
def test_monotone_and_admissible_below_the_largest_step(c, Q, frac, more):
    eta = frac * THM.max_step(**c, Q=Q)
    assert THM.admissible(**c, Q=Q, eta=eta)
    b = THM.evaluate(**c, Q=Q, eta=eta)
    assert np.isfinite(b)
    assert THM.evaluate(**{**c, "sigma": c["sigma"] + more}, Q=Q, eta=eta) >= b * (1 - 1e-12)
    assert THM.evaluate(**{**c, "Delta": c["Delta"] + more}, Q=Q, eta=eta) >= b * (1 - 1e-12)


def test_default_and_random_scenarios_hold():
    ad = verify.adapter_for("tdcd.deadline_pl")
    assert ad.check(ad.default_scenario()).verdict == "holds"
    rng = np.random.default_rng(3)
    for _ in range(4):
        assert ad.check(ad.random_scenario(rng)).verdict in ("holds", "inconclusive")


def test_choice_is_the_minimum_of_its_curve():
    ad = verify.adapter_for("tdcd.deadline_pl")
    params = ad.parameters(ad.default_scenario())
    rest = {k: v for k, v in params.items() if k not in ("eta", "Q", "R")}
    c = choose_deadline_local_steps(Qs=[1, 2, 5], R=lambda Q: 600 // (30 + Q), **rest)
    assert c.best_bound == min(r["bound"] for r in c.curve)
    assert [r["horizon"] for r in c.curve] == [19, 18, 17]
    assert c.best_bound == pytest.approx(THM.evaluate(**rest, Q=c.best["Q"], R=600 // (30 + c.best["Q"]),
                                                      eta=c.best["eta"]), rel=1e-12)
