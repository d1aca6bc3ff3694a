"""The public extension API: what the papers may import, registry hygiene, the adapter
contract's validation, and verify.testing's assertions and registration."""

import dataclasses

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings

import fedbound.verify.api as api
from fedbound import bounds, verify
from fedbound.bounds.core import Param, Theorem
from fedbound.verify.api import adapter_for
from fedbound.verify.strategies import scenarios
from fedbound.verify.testing import (
    CHECKS,
    assert_holds,
    assert_violated,
    check_adapter,
    expected_failures_of,
    registered,
)


def test_api_exports_resolve():
    for name in api.__all__:
        assert getattr(api, name) is not None
    # beyond the extension API, verify offers what a notebook or a script uses
    assert set(verify.__all__) - set(api.__all__) == {
        "SearchResult", "against", "field_label", "format_search", "rate", "search", "tightness_table"}
    assert all(getattr(verify, name) is not None for name in verify.__all__)


# ---------------------------------------------------------------------- a toy result

x = sp.Symbol("x", positive=True)


def build(variant):
    return Theorem(key="toy.square", variant=variant, title="x^2 <= 2x^2", citation="test",
                   lhs="x^2", params={"x": Param("x", "a size", "positive")},
                   term_exprs={"rhs": 2 * x**2}, symbols={"x": x})


@dataclasses.dataclass
class XScenario(api.Scenario):
    x: float = 1.0
    replicas: int = 4
    seed: int = 0

    def validate(self):
        api.require_float("x", self.x, low=0, low_open=True)
        api.require_int("replicas", self.replicas)
        api.require_int("seed", self.seed, minimum=0)


class Square(api.Adapter):
    key = "toy.square"
    scenario_type = XScenario
    default = XScenario()
    tags = api.Tags(exact=True)

    def _derive(self, s, thm):
        return {"x": s.x}

    def _measure(self, s, params, exact):
        if exact:
            return api.Measurement(exact=s.x**2)
        rng = np.random.default_rng(s.seed)
        return api.Measurement(values=s.x**2 + 1e-3 * rng.standard_normal(s.replicas))

    def _draw(self, draw):
        return XScenario(x=draw.uniform(0.1, 3), seed=draw.integer(0, 99))

    def _footprint(self, s, exact):
        return api.Footprint.of({"replicas": 8.0 * s.replicas}, {"replicas": float(s.replicas)})


def test_register_twice_is_an_error_and_registered_cleans_up():
    with registered("toy.square", "x^2", build, adapter=Square):
        assert "toy.square" in api.adapter_keys()
        with pytest.raises(ValueError, match="already registered"):
            api.register_adapter(Square)
    assert "toy.square" not in api.adapter_keys() and "toy.square" not in bounds.keys()
    with pytest.raises(RuntimeError), registered("toy.square", "x^2", build, adapter=Square):
        raise RuntimeError("a failing test")
    assert "toy.square" not in api.adapter_keys() and "toy.square" not in bounds.keys()


def test_an_adapter_needs_its_theorem_first():
    with pytest.raises(ValueError, match="register its theorem first"):
        api.register_adapter(Square)


@pytest.mark.parametrize("hook, result, error, match", [
    ("_derive", {"x": 1.0, "y": 2.0}, TypeError, r"unknown \['y'\]"),
    ("_derive", {}, TypeError, r"missing \['x'\]"),
    ("_derive", {"x": float("nan")}, ValueError, "derived parameter x is not finite"),
    ("_measure", api.Measurement(values=np.array([1.0, np.inf])), ValueError, "not finite"),
    ("_measure", api.Measurement(), ValueError, "exactly one of values and exact"),
])
def test_the_public_methods_validate_what_the_hooks_return(hook, result, error, match):
    class Broken(Square):
        pass

    setattr(Broken, hook, lambda self, *a: result)
    with registered("toy.square", "x^2", build, adapter=Broken):
        with pytest.raises(error, match=match):
            verify.check("toy.square")


def test_assertions_and_contract_checks_on_a_user_result():
    with registered("toy.square", "x^2", build, adapter=Square):
        v = assert_holds("toy.square", {"x": 2.0}, exact=True)
        assert v.bound == 8.0 and v.measured_mean == 4.0
        with pytest.raises(AssertionError, match=r"expected VIOLATED, got HOLDS") as e:
            assert_violated("toy.square", {"x": 2.0}, exact=True)
        assert '"x": 2.0' in str(e.value)  # the scenario JSON is in the message
        results = {r.check: r.outcome for r in check_adapter("toy.square")}
        assert set(results) == set(CHECKS)
        assert results["witnesses"] == "skipped" and results["exact_agrees"] == "passed"
        assert all(o in ("passed", "skipped") for o in results.values()), results


def test_an_adapter_without_footprint_gets_a_warning_not_a_failure():
    """The resource limits cannot protect a user from an adapter that estimates nothing:
    check_adapter says so (outcome "warning", a ContractWarning naming the hook), the
    pytest case warns and passes, and fedbound plugins flags the registration."""
    from fedbound.verify.hooks import hook
    from fedbound.verify.testing import ContractWarning, cases

    class NoFootprint(Square):
        _footprint = api.Adapter._footprint

    with registered("toy.square", "x^2", build, adapter=NoFootprint):
        with pytest.warns(ContractWarning, match="has no _footprint"):
            (r,) = check_adapter("toy.square", checks=["footprint"])
        assert (r.outcome, "resource limits" in r.message) == ("warning", True)
        (case,) = cases(["toy.square"], checks=["footprint"])
        with pytest.warns(ContractWarning, match="has no _footprint"):
            case()
        assert any("no _footprint" in p for p in hook("adapters").problems(
            "toy.square", adapter_for("toy.square")))
    with registered("toy.square", "x^2", build, adapter=Square):
        assert [r.outcome for r in check_adapter("toy.square", checks=["footprint"])] == ["passed"]
        assert hook("adapters").problems("toy.square", adapter_for("toy.square")) == []


def test_admissible_step_draws_a_fraction_of_the_largest_step():
    """Adapter.admissible_step: the largest step of the theorem at the scenario's other
    parameters (here eta <= 1/(2 L), L = 4: 0.125), times a uniform fraction in [low, high]."""
    L, eta = sp.symbols("L eta", positive=True)

    def stepped(variant):
        return Theorem(key="toy.step", variant=variant, title="a step bound", citation="test",
                       lhs="x", params={"L": Param("L", "smoothness", "positive"),
                                        "eta": Param("eta", "step", "positive")},
                       term_exprs={"rhs": 1 / eta}, symbols={"L": L, "eta": eta}, step="eta",
                       conditions=[bounds.Condition("eta <= 1/(2L)", sp.LessThan(2 * L * eta, 1),
                                                    "test")])

    class Stepped(Square):
        key = "toy.step"

        def _derive(self, s, thm):
            return {"L": 4.0 * s.x, "eta": 0.01}

    with registered("toy.step", "a step bound", stepped, adapter=Stepped):
        ad = adapter_for("toy.step")
        draws = [ad.admissible_step(XScenario(x=1.0), api.RngDraw(np.random.default_rng(i)), 0.5)
                 for i in range(20)]
        assert all(0.0625 <= d <= 0.125 for d in draws) and len(set(draws)) == 20
        assert ad.admissible_step(XScenario(x=2.0), api.RngDraw(np.random.default_rng(0)), 1.0) \
            == pytest.approx(1 / 16, rel=1e-12)
        with pytest.raises(ValueError, match="0 < low <= high <= 1"):
            ad.admissible_step(XScenario(), api.RngDraw(np.random.default_rng(0)), 0.0)
    with registered("toy.square", "x^2", build, adapter=Square):
        with pytest.raises(ValueError, match="names no step parameter"):
            adapter_for("toy.square").admissible_step(XScenario(), api.RngDraw(np.random.default_rng(0)))


def test_a_failing_bound_fails_assert_holds_and_the_contract():
    def half(variant):
        return dataclasses.replace(build(variant), term_exprs={"rhs": x**2 / 2}, _compiled={})

    with registered("toy.square", "x^2 <= x^2/2 (wrong)", half, adapter=Square):
        with pytest.raises(AssertionError, match=r"toy.square \[proof\]: bound VIOLATED") as e:
            assert_holds("toy.square", exact=True)
        assert "slack" in str(e.value) and "scenario:" in str(e.value)
        failed = {r.check for r in check_adapter("toy.square") if r.outcome == "failed"}
        assert {"holds_on_default", "holds_on_random"} <= failed
        outcomes = {r.check: r.outcome for r in check_adapter(
            "toy.square", checks=["holds_on_default"],
            expected_failures={"holds_on_default": "known: the constant is wrong"})}
        assert outcomes == {"holds_on_default": "xfail"}
        with pytest.raises(ValueError, match="unknown check"):
            check_adapter("toy.square", checks=["nope"])


def test_inconclusive_asks_for_more_replicas():
    def tight(variant):  # the bound is the true mean: 4 replicas cannot decide
        return dataclasses.replace(build(variant), term_exprs={"rhs": x**2}, _compiled={})

    with registered("toy.square", "x^2 <= x^2", tight, adapter=Square):
        with pytest.raises(AssertionError, match="INCONCLUSIVE with 4 replicas"):
            assert_holds("toy.square")


def test_refuted_results_expect_their_random_checks_to_fail():
    assert "holds_on_random" in expected_failures_of("afl.theorem3")
    assert expected_failures_of("mllsgd.theorem1") == {}


@settings(max_examples=10, deadline=None)
@given(scenarios("mllsgd.theorem1", exact=True))
def test_exact_scenarios_are_those_exact_mode_supports(s):
    """``scenarios(key, exact=True)`` draws only scenarios the exact mode takes (the
    adapter draws logistic problems too, which it does not)."""
    assert adapter_for("mllsgd.theorem1").supports_exact(s)


def test_exact_scenarios_of_a_result_without_exact_mode_is_an_error_at_once():
    with pytest.raises(ValueError, match="no exact-expectation mode"):
        scenarios("hfl.theorem2", exact=True)
    assert not adapter_for("mllsgd.theorem1").supports_exact(
        adapter_for("mllsgd.theorem1").load({"problem": {"kind": "logistic"}}))
