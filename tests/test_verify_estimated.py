"""fedbound.verify.check_estimated: a bound checked with estimated constants.

On the scenario's own quadratic the estimated-constant verdict must agree with the
exact-constant one (verify.check); the conservative bound is the largest over the grid of
the estimates' intervals (every corner evaluated independently here); on the digits MLP
the check runs and says "estimated"."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedbound import bounds, verify
from fedbound.verify import estimated
from fedbound.verify.estimated import check_estimated
from fedbound.verify.verdict import Comparison

SMALL = {"K": 32, "q": 2, "tau": 4, "replicas": 32}


@pytest.mark.parametrize("fields", [
    SMALL,
    {**SMALL, "graph": "complete", "p": 1.0, "seed": 3},
    {**SMALL, "problem": {"kind": "logistic"}, "seed": 1},
])
def test_estimated_verdict_agrees_with_the_exact_constant_verdict(fields):
    exact = verify.check("mllsgd.theorem1", fields)
    est = check_estimated("mllsgd.theorem1", fields)
    assert est.verdict == exact.verdict == "holds"
    assert est.mode.startswith("estimated")
    # the constants at the conservative end are within 1.5x of the exact ones (the logistic
    # problem's L and sigma are certified upper bounds, so only <= holds there); on a
    # quadratic the upper end of L covers the exact L, and Delta's upper end is exact
    for name in ("L", "sigma", "Delta"):
        assert est.params[name] <= 1.5 * exact.params[name]
    if "problem" not in fields:
        assert est.params["L"] >= exact.params["L"] * (1 - 1e-9)
        assert est.params["Delta"] == pytest.approx(exact.params["Delta"], rel=1e-12)
    assert any(n.startswith("estimated: L =") for n in est.notes)


def test_the_conservative_bound_is_the_largest_corner():
    from fedbound.sim.estimate import Estimate

    thm = bounds.get("mllsgd.theorem1")
    base = dict(beta=0.0, K=64, q=2, tau=4, zeta=0.5, a=np.full(4, 0.25), p=np.full(4, 0.9),
                eta=0.01)
    est = {"L": Estimate("L", 1.0, 0.8, 1.3, "m", 1),
           "sigma": Estimate("sigma", 1.0, 0.9, 1.2, "m", 1),
           "Delta": Estimate("Delta", 2.0, 1.5, 2.0, "m", 1)}
    bound, where, violations = estimated.conservative_bound(thm, base, est)
    corners = [thm.evaluate(**base, L=L, sigma=s, Delta=D)
               for L, s, D in itertools.product((0.8, 1.3), (0.9, 1.2), (1.5, 2.0))]
    assert bound >= max(corners) * (1 - 1e-12)
    assert bound >= thm.evaluate(**base, L=1.0, sigma=1.0, Delta=2.0)
    assert set(where) == {"L", "sigma", "Delta"} and violations == []


@pytest.mark.parametrize("conservative, at_estimate, expected", [
    ("holds", "holds", "holds"),
    ("inconclusive", "holds", "inconclusive"),
    ("inconclusive", "violated", "inconclusive"),
    ("violated", "violated", "violated"),
])
def test_holds_only_at_the_conservative_end(conservative, at_estimate, expected):
    def comparison(outcome):
        return Comparison(1.0, 1.0, (0.9, 1.1), outcome, "monte-carlo", None, 10)

    assert estimated._outcome(comparison(conservative), comparison(at_estimate)) == expected


def test_unknown_key_is_refused():
    with pytest.raises(ValueError, match="key='hfl.lemma1'"):
        check_estimated("hfl.lemma1")


def test_on_the_digits_mlp_the_check_says_estimated():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    import torch

    from fedbound.sim.data import load_digits
    from fedbound.sim.neural import NeuralProblem, mlp

    digits = load_digits()
    torch.manual_seed(0)
    problem = NeuralProblem(mlp(hidden=(16,)), digits.features, digits.labels, batch=8)
    fields = {"hubs": 2, "workers_per_hub": 2, "K": 8, "q": 2, "tau": 2, "replicas": 4}
    settings = estimated.EstimationSettings(points=2, steps=5, power_steps=10, samples=32)
    v = check_estimated("mllsgd.theorem1", fields, problem=problem, settings=settings)
    again = check_estimated("mllsgd.theorem1", fields, problem=problem, settings=settings)
    assert v.as_dict() == again.as_dict()  # the same seed, the same numbers
    assert v.verdict in ("holds", "inconclusive") and v.mode.startswith("estimated")
    assert 0 < v.measured_mean < v.bound < float("inf")
    assert any("NeuralProblem" in n for n in v.notes)
    assert sum(n.startswith("estimated:") for n in v.notes) == 3


# ---------------------------------------------------------------- hfl.theorem2

HFL_SMALL = {"sizes": [3, 3], "T": 60.0, "replicas": 16}
HFL_SETTINGS = estimated.EstimationSettings(points=2, steps=10, power_steps=10, samples=64)


@pytest.mark.parametrize("fields", [HFL_SMALL, {**HFL_SMALL, "S": 0.0, "seed": 2}])
def test_hfl_estimated_verdict_agrees_with_the_exact_constant_verdict(fields):
    exact = verify.check("hfl.theorem2", fields)
    est = check_estimated("hfl.theorem2", fields, settings=HFL_SETTINGS)
    assert est.verdict == exact.verdict == "holds"
    assert est.mode.startswith("estimated")
    assert est.params["t"] == exact.params["t"]  # the same delay path
    # logistic regression's L, sigma and G = R are certified upper bounds: the estimates
    # lie below them; Delta's upper end is F(x_1) - 0, at least the exact F(x_1) - f_inf
    for name in ("L", "sigma", "G"):
        assert 0 < est.params[name] <= exact.params[name] * (1 + 1e-9)
    assert est.params["Delta"] >= exact.params["Delta"] * (1 - 1e-9)
    assert sum(n.startswith("estimated:") for n in est.notes) == 4


def test_hfl_estimated_needs_one_delay_path():
    with pytest.raises(ValueError, match="mode='expected'"):
        check_estimated("hfl.theorem2", {**HFL_SMALL, "mode": "expected"}, settings=HFL_SETTINGS)


def test_hfl_on_the_digits_mlp_the_check_says_estimated():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    import torch

    from fedbound.sim.data import load_digits
    from fedbound.sim.neural import NeuralProblem, mlp

    digits = load_digits()
    torch.manual_seed(0)
    problem = NeuralProblem(mlp(hidden=(16,)), digits.features, digits.labels, batch=8)
    fields = {"sizes": [2, 2], "T": 30.0, "replicas": 4, "alpha": None}
    v = check_estimated("hfl.theorem2", fields, problem=problem, settings=HFL_SETTINGS)
    again = check_estimated("hfl.theorem2", fields, problem=problem, settings=HFL_SETTINGS)
    assert v.as_dict() == again.as_dict()  # the same seed, the same numbers
    assert v.verdict in ("holds", "inconclusive") and v.mode.startswith("estimated")
    assert 0 < v.measured_mean < v.bound < float("inf")
    assert v.params["alpha"] == pytest.approx(1 / v.params["L"], rel=1e-12)  # 1/L, L's upper end
    assert any("NeuralProblem" in n for n in v.notes)


# ---------------------------------------------------------------------- tdcd.theorem1, afl.theorem2


TDCD_SMALL = {"rounds": 20, "replicas": 16}
QUICK = estimated.EstimationSettings(points=2, steps=10, power_steps=15, samples=64)


@pytest.mark.parametrize("variant", ["proof", "refined"])
def test_tdcd_estimated_verdict_agrees_with_the_exact_constant_verdict(variant):
    fields = {**TDCD_SMALL, "eta": 0.5}
    exact = verify.check("tdcd.theorem1", fields, variant=variant)
    est = check_estimated("tdcd.theorem1", fields, variant=variant, settings=QUICK)
    assert est.verdict == exact.verdict == "holds" and est.mode.startswith("estimated")
    # the same step and scenario, other draws (the estimation uses the seed's stream
    # first): two Monte-Carlo estimates of one expectation, their intervals overlap
    assert est.measured_ci[0] <= exact.measured_ci[1] and exact.measured_ci[0] <= est.measured_ci[1]
    # the exact L (at theta = 0), L_max and sigma_j are certified sups over all theta and
    # batches; the estimates see only the points, so they are below, and not far; Delta's
    # upper end uses the exact f_inf = 0, where the bound is largest
    assert 0.5 * exact.params["L"] <= est.params["L"] <= exact.params["L"] * (1 + 1e-6)
    assert est.params["Delta"] == pytest.approx(exact.params["Delta"], rel=1e-12)
    assert est.params["L_max"] <= exact.params["L_max"] * (1 + 1e-9)
    assert (np.asarray(est.params["sigma"]) <= np.asarray(exact.params["sigma"]) * 1.5).all()
    assert sum(n.startswith("estimated: sigma_") for n in est.notes) == 2


def test_tdcd_on_per_silo_networks_the_check_says_estimated():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    from fedbound.verify.papers.tdcd.experiments import build_model

    model, _ = build_model(silos=2, clients=2, batch=80, seed=0)
    fields = {"blocks": list(model.layout.blocks), "clients": list(model.layout.clients),
              "n": model.layout.n, "batch": model.layout.batch, "Q": 2, "rounds": 4,
              "replicas": 4}
    settings = estimated.EstimationSettings(points=2, steps=3, power_steps=5, samples=16)
    v = check_estimated("tdcd.theorem1", fields, problem=model, settings=settings)
    again = check_estimated("tdcd.theorem1", fields, problem=model, settings=settings)
    assert v.as_dict() | {"seconds": 0} == again.as_dict() | {"seconds": 0}
    assert v.mode.startswith("estimated") and v.verdict in ("holds", "inconclusive")
    assert 0 < v.measured_mean < v.bound < float("inf")
    assert any("ModuleModel" in n for n in v.notes)


def test_tdcd_own_block_constant_is_the_block_hessian_of_a_client_batch():
    """The own-block L_max of a block-linear logistic model, estimated, against the exact
    largest eigenvalue of X_zj^T diag(s(1-s)) X_zj / b_j over the same batches and points,
    computed here with numpy."""
    import torch

    from fedbound.sim import estimate
    from fedbound.sim.tdcd import draw_batch
    from fedbound.verify.papers.tdcd.adapters import TDCDScenario, _OwnBlock, build

    st = build(TDCDScenario())
    model = st.model
    anchors = model.split(torch.randn(3, model.dim, generator=st.generator,
                                      dtype=torch.float64))
    rows = draw_batch(model.layout, 3, st.generator, "cpu")
    for j in range(model.layout.N):
        own = _OwnBlock(model, j, anchors, rows)
        est = estimate.lipschitz(own, own.points(), generator=st.generator, steps=200, starts=2)
        X, y = model.X.numpy(), model.y.numpy()
        start, width, b = sum(model.layout.blocks[:j]), model.layout.blocks[j], \
            model.layout.client_batch[j]
        exact = 0.0
        for p in range(3):
            r = rows[p, :b].numpy()
            theta = model.join(anchors[p]).numpy()
            s = 1 / (1 + np.exp(-(y[r] * (X[r] @ theta))))
            Xj = X[r, start:start + width]
            exact = max(exact, np.linalg.eigvalsh(Xj.T @ (Xj * (s * (1 - s))[:, None]) / b)[-1])
        assert est.value == pytest.approx(exact, rel=1e-6)


def test_afl_estimated_verdict_agrees_with_the_exact_constant_verdict():
    fields = {"T": 40, "replicas": 16, "arrivals": "biased"}
    exact = verify.check("afl.theorem2", fields)
    est = check_estimated("afl.theorem2", fields, settings=QUICK)
    assert est.verdict == exact.verdict == "holds" and est.mode.startswith("estimated")
    # quadratic clients: L and sigma_G exact at every point, Delta exact; sigma_L sampled
    assert exact.params["L"] * (1 - 1e-6) <= est.params["L"] <= exact.params["L"] * 1.01
    assert est.params["sigma_G"] == pytest.approx(exact.params["sigma_G"], rel=1e-9)
    assert est.params["Delta"] == pytest.approx(exact.params["Delta"], rel=1e-12)
    assert 0.5 * exact.params["sigma_L"] < est.params["sigma_L"] < 1.5 * exact.params["sigma_L"]


def test_afl_on_the_digits_mlp_the_check_says_estimated():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    from fedbound.verify.papers.afl.experiments import M, clients_for

    clients, _, _ = clients_for("mlp", 2, 16, 0)
    fields = {"M": M, "m": 5, "T": 6, "K": 2, "tau": 1, "replicas": 4, "arrivals": "biased"}
    settings = estimated.EstimationSettings(points=2, steps=3, power_steps=5, samples=16)
    v = check_estimated("afl.theorem2", fields, problem=clients, settings=settings)
    again = check_estimated("afl.theorem2", fields, problem=clients, settings=settings)
    assert v.as_dict() | {"seconds": 0} == again.as_dict() | {"seconds": 0}
    assert v.mode.startswith("estimated") and v.verdict in ("holds", "inconclusive")
    assert 0 < v.measured_mean < v.bound < float("inf")
    assert any("NeuralClients" in n for n in v.notes)
    with pytest.raises(ValueError, match="M=8"):
        check_estimated("afl.theorem2", {**fields, "M": 8}, problem=clients, settings=settings)
