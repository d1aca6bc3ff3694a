"""The MLL-SGD bounds against the simulator (Monte Carlo) and the exact-expectation mode,
on random admissible scenarios; the Scenario contract."""

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.verify import check, default_scenario, load_scenario
from fedbound.verify.papers.mllsgd import MLLSGDScenario, build
from fedbound.verify.strategies import scenarios
from fedbound.verify.verdict import t_multiplier

KEYS = ("mllsgd.theorem1", "mllsgd.theorem1_limit", "mllsgd.corollary1")


def admissible_draws(key="mllsgd.theorem1", **kw):
    """(variant, scenario): a variant, then a random scenario admissible for it (the adapter's
    own declaration, verify.strategies)."""
    return st.sampled_from(bounds.variants(key)).flatmap(
        lambda v: st.tuples(st.just(v), scenarios(key, variant=v, **kw)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.filter_too_much])
@given(admissible_draws())
def test_theorem1_holds_exactly_on_random_admissible_scenarios(drawn):
    variant, s = drawn
    assume(s.problem["kind"] == "quadratic")
    v = check("mllsgd.theorem1", s, variant=variant, exact=True)
    assert v.verdict == "holds", v.as_dict()
    assert v.measured_mean <= v.bound


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.filter_too_much])
@given(scenarios("mllsgd.theorem1"))
def test_theorem1_holds_in_monte_carlo_and_agrees_with_exact(s):
    assume(s.problem["kind"] == "quadratic")
    mc = check("mllsgd.theorem1", s)
    ex = check("mllsgd.theorem1", s, exact=True)
    assert mc.verdict == "holds", mc.as_dict()
    se = (mc.measured_ci[1] - mc.measured_ci[0]) / (2 * t_multiplier(mc.replicas))
    assert abs(mc.measured_mean - ex.measured_mean) <= 5 * se + 1e-12 * ex.measured_mean + 1e-20


@pytest.mark.parametrize("key", KEYS)
def test_default_scenarios_hold_and_monte_carlo_matches_exact(key):
    mc, ex = check(key), check(key, exact=True)
    assert mc.verdict == ex.verdict == "holds"
    se = (mc.measured_ci[1] - mc.measured_ci[0]) / (2 * t_multiplier(mc.replicas))
    assert mc.measured_ci[0] <= ex.measured_mean <= mc.measured_ci[1] or \
        abs(mc.measured_mean - ex.measured_mean) < 4 * se
    assert mc.bound == ex.bound and mc.slack > 1


def test_logistic_scenario_holds():
    s = default_scenario("mllsgd.theorem1").replace(
        problem={"kind": "logistic", "dim": 4, "n": 100, "R": 1.0, "batch": 2}, replicas=64)
    v = check("mllsgd.theorem1", s)
    assert v.verdict == "holds" and v.params["sigma"] == pytest.approx(math.sqrt(1 / 2))
    with pytest.raises(ValueError, match="exact mode is unavailable here: problem.kind='logistic'"):
        check("mllsgd.theorem1", s, exact=True)


def test_corollary_uses_its_fixed_step():
    v = check("mllsgd.corollary1", exact=True)
    assert v.params["eta"] == pytest.approx(1 / (v.params["L"] * math.sqrt(v.params["K"])))
    with pytest.raises(ValueError, match="fixes eta = 1/\\(L sqrt K\\)"):
        check("mllsgd.corollary1", default_scenario("mllsgd.corollary1").replace(eta=0.01))


def test_same_seed_same_verdict_bit_for_bit():
    s = default_scenario("mllsgd.theorem1").replace(replicas=16)
    a, b = check("mllsgd.theorem1", s).as_dict(), check("mllsgd.theorem1", s).as_dict()
    assert "seconds" not in a  # wall time is not part of the result
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c = check("mllsgd.theorem1", s.replace(seed=1)).as_dict()
    assert c["measured_mean"] != a["measured_mean"]


def test_derived_parameters_come_from_the_scenario():
    """Each derived parameter against an independent computation from the scenario."""
    s = MLLSGDScenario(hubs=5, workers_per_hub=[1, 2, 3, 1, 2], graph="path", p=0.95,
                       weights=[1, 2, 3, 4, 5, 6, 7, 8, 9], K=32, q=2, tau=2)
    st_ = build(s)
    v = check("mllsgd.theorem1", s, exact=True).params
    moduli = np.sort(np.abs(np.linalg.eigvals(st_.H)))[::-1]   # not via the symmetrisation
    assert moduli[0] == pytest.approx(1.0) and v["zeta"] == pytest.approx(moduli[1], rel=1e-10)
    assert v["a"] == pytest.approx(np.arange(1, 10) / 45)
    assert v["p"] == pytest.approx(np.full(9, 0.95))
    A = st_.problem.hessian.numpy()
    r = (st_.x1 - st_.problem.x_star).numpy()
    assert v["Delta"] == pytest.approx(0.5 * r @ A @ r, rel=1e-12)
    assert np.linalg.norm(r) == pytest.approx(s.problem_spec()["distance"], rel=1e-12)
    assert v["L"] == pytest.approx(np.linalg.eigvalsh(A).max(), rel=1e-12)
    assert (v["K"], v["q"], v["tau"], v["sigma"], v["beta"]) == (32, 2, 2, 1.0, 0.0)


# ------------------------------------------------------------------ scenario contract


@settings(max_examples=30, deadline=None)
@given(scenarios("mllsgd.theorem1", admissible=False))
def test_scenario_json_round_trip(s):
    again = MLLSGDScenario.from_dict(json.loads(s.to_json()))
    assert again == s and again.digest() == s.digest()


def test_load_scenario_fills_defaults():
    s = load_scenario("mllsgd.theorem1", '{"K": 128, "graph": "ring"}')
    assert s.K == 128 and s.graph == "ring" and s.hubs == default_scenario("mllsgd.theorem1").hubs


@pytest.mark.parametrize("change, message", [
    ({"hubs": 0}, r"hubs=0 must be an integer >= 1"),
    ({"workers_per_hub": [1, 2]}, r"workers_per_hub has 2 entries, expected hubs=4"),
    ({"graph": "torus"}, r"graph='torus' must be one of"),
    ({"weights": [1.0] * 15 + [-1.0]}, r"weights\[15\]=-1 must lie in"),
    ({"p": 1.5}, r"p=1.5 must lie in \(0, 1\]"),
    ({"eta": -0.1}, r"eta=-0.1 must lie in"),
    ({"K": 63}, r"K=63 must be a multiple of q\*tau=8"),
    ({"problem": {"kind": "mlp"}}, r"problem.kind='mlp' must be one of"),
    ({"problem": {"kind": "quadratic", "mu": 2.0}}, r"problem.mu=2.0 must be <= problem.L"),
    ({"problem": {"kind": "quadratic", "depth": 2}}, r"unknown field\(s\) \['depth'\]"),
    ({"replicas": 0}, r"replicas=0 must be an integer >= 1"),
    ({"colour": "red"}, r"unknown field\(s\) \['colour'\]"),
])
def test_bad_scenarios_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        load_scenario("mllsgd.theorem1", change)


def test_inadmissible_p_is_reported_by_the_check():
    s = default_scenario("mllsgd.theorem1").replace(p=0.5)
    with pytest.raises(ValueError, match=r"p\[0\]=0.5"):
        check("mllsgd.theorem1", s)


def test_divergent_step_is_reported_not_measured():
    s = default_scenario("mllsgd.theorem1").replace(eta=50.0, replicas=8)
    v = check("mllsgd.theorem1", s)
    assert v.diverged == 8 and v.verdict == "diverged"
