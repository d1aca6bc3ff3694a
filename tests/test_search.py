"""The counterexample search (verify/search.py): it finds a planted violation (a deliberately
wrong bound registered only here), finds nothing for a true bound and says how much it
tried, is reproducible from its seed, shrinks its witness, and finds Theorem 3's gap."""

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

from fedbound import bounds
from fedbound.bounds.core import Condition, Param, Theorem
from fedbound.verify import check, load_scenario
from fedbound.verify.api import Adapter, Draw, Measurement, Scenario, Tags, require_float, require_int
from fedbound.verify.search import search
from fedbound.verify.testing import registered
from fedbound.verify.text import format_search

a, n = sp.symbols("a n", positive=True)
PARAMS = {"a": Param("a", "size", "nonnegative"), "n": Param("n", "count", "positive_integer")}


@dataclass
class ToyScenario(Scenario):
    """Measured (exactly) a^2 / n; a in [0, 100]."""

    a: float = 0.5
    n: int = 2
    replicas: int = 1
    seed: int = 0

    def validate(self):
        require_float("a", self.a, low=0, high=100)
        require_int("n", self.n)
        require_int("replicas", self.replicas)
        require_int("seed", self.seed, minimum=0)


class Toy(Adapter):
    scenario_type = ToyScenario
    default = ToyScenario()
    tags = Tags(exact=True)

    def _derive(self, s, thm):
        return {"a": s.a, "n": s.n}

    def _measure(self, s, params, exact):
        return Measurement(exact=s.a**2 / s.n)

    def _draw(self, draw: Draw):
        # never violating by itself (a^2 < a + 1/10 for a < 1): the optimiser must move
        return ToyScenario(a=draw.uniform(0.01, 0.99), n=draw.integer(1, 19),
                           seed=draw.integer(0, 999))


class Wrong(Toy):
    key = "toy.wrong"


class TrueBound(Toy):
    key = "toy.true"


def _theorem(key, expr, status="unverified"):
    return lambda variant: Theorem(
        key=key, variant=variant, title=key, citation="test", lhs="a^2/n", params=PARAMS,
        term_exprs={"rhs": expr}, symbols={"a": a, "n": n}, status=status,
        conditions=[Condition("a <= 100", sp.LessThan(a, 100), "test")])


@pytest.fixture
def toy():
    with registered("toy.wrong", "planted: a^2/n <= (a + 1/10)/n",
                    _theorem("toy.wrong", (a + sp.Rational(1, 10)) / n), adapter=Wrong), \
            registered("toy.true", "true: a^2/n <= a^2/n + 1/n",
                       _theorem("toy.true", (a**2 + 1) / n), adapter=TrueBound):
        yield


def test_finds_the_planted_violation_and_shrinks_it(toy):
    r = search("toy.wrong", budget=40, seed=0)
    assert r.found and r.witness is not None
    w = ToyScenario(**r.witness)
    assert w.a**2 > w.a + 0.1  # really violated, by the independent formula
    v = check("toy.wrong", w, exact=True)
    assert v.verdict == "violated" and r.verdict.verdict == "violated"
    # shrunk: a is a round number (at most 2 significant digits) and n small
    assert float(f"{w.a:.2g}") == w.a and w.n <= 2
    d = r.as_dict()
    assert set(d) == {"key", "variant", "status", "found", "new_violation", "witness", "exact",
                      "verdict", "tried", "best_excess", "objective", "params", "ratio",
                      "ratio_ci", "trajectory", "region", "strata", "strongest",
                      "strongest_ratio"}
    assert d["region"] == "" and d["strata"] == []  # no region, no strata: the whole space
    assert d["objective"] == "violate" and len(d["trajectory"]) == d["tried"]
    assert d["ratio"] == pytest.approx(w.a**2 / (w.a + 0.1), rel=1e-12)  # measured/bound
    assert d["verdict"]["verdict"] == "violated" and 1 <= d["tried"] <= 40
    assert d["new_violation"] and d["exact"]  # unverified, not recorded as refuted
    json.dumps(d)
    w = r.as_witness()  # stored and replayed like the shipped witnesses
    assert check(w.key, w).verdict == "violated" and w.scenario == r.witness


class Faint(Toy):
    key = "toy.faint"


@pytest.fixture
def faint():
    """A bound a constant too small, whose violation grows with n: measured/bound =
    1 + n/1000 (every scenario violates it, by a ratio of 1.001 at n = 1)."""
    with registered("toy.faint", "faint: a^2/n <= a^2/(n (1 + n/1000))",
                    _theorem("toy.faint", a**2 / (n * (1 + n / sp.Integer(1000)))),
                    adapter=Faint):
        yield


def test_a_witness_keeps_a_clear_margin_and_the_strongest_is_reported(faint):
    """The first violation (n <= 19: a ratio of at most 1.019) is strengthened to a ratio of
    at least MIN_RATIO, and the shrink keeps that margin: halving n all the way down gave a
    refutation by 1.001. The strongest violation seen is reported beside it."""
    from fedbound.verify.search import KEEP, MIN_RATIO

    r = search("toy.faint", budget=60, seed=0)
    w = ToyScenario(**r.witness)
    ratio = 1 + w.n / 1000   # independently: measured a^2/n over the bound
    assert r.found and r.ratio == pytest.approx(ratio, rel=1e-12) and ratio >= MIN_RATIO
    strongest = ToyScenario(**r.strongest)
    assert r.strongest_ratio == pytest.approx(1 + strongest.n / 1000, rel=1e-12)
    assert r.strongest_ratio >= r.ratio
    # the minimal witness keeps KEEP of the excess of the violation it was shrunk from
    excess = (ratio - 1) / (ratio + 1)
    assert excess >= KEEP * (r.strongest_ratio - 1) / (r.strongest_ratio + 1) - 1e-12
    text = format_search(r)
    assert "minimal" in text and "strongest" in text


def test_a_faint_violation_is_kept_whole_when_no_stronger_one_is_in_reach(faint):
    """With a budget too small to strengthen it, the violation found is not shrunk below its
    own margin (n is not halved)."""
    # the first seed whose one draw violates (an edge draw a = 0 measures 0: no ratio)
    r = next(r for seed in range(20) if (r := search("toy.faint", budget=1, seed=seed)).found)
    assert r.tried == 1 and r.ratio < 1.02
    first = r.trajectory[0]
    assert r.ratio == pytest.approx(first, rel=1e-12) and r.ratio == r.strongest_ratio


@pytest.mark.parametrize("ratio, shown", [(1.00003, "0.99997x"), (1 / 1.00003, "1.00003x"),
                                          (2.0, "0.5x"), (1.0, "1x"), (0.25, "4x")])
def test_a_slack_other_than_one_is_never_shown_as_one(ratio, shown):
    """slack = 1 / (measured/bound): a refutation by 1.00003 reads 0.99997x, not 1x."""
    from fedbound.verify.text import slack_text

    assert slack_text(1.0, ratio) == shown


def test_finds_nothing_for_a_true_bound_and_reports_what_it_tried(toy):
    r = search("toy.true", budget=25, seed=3)
    assert not r.found and r.witness is None
    assert r.tried == 25
    assert r.verdict is not None and r.verdict.verdict == "holds"


def test_same_seed_same_result(toy):
    first = search("toy.wrong", budget=30, seed=5).as_dict()
    assert first == search("toy.wrong", budget=30, seed=5).as_dict()
    assert first["witness"] is not None


def test_bad_budget_or_seed(toy):
    with pytest.raises(ValueError, match="budget=0"):
        search("toy.wrong", budget=0)
    with pytest.raises(ValueError, match="seed=-1"):
        search("toy.wrong", seed=-1)
    with pytest.raises(ValueError, match="unknown result"):
        search("toy.nothing")


def test_search_refutes_theorem3_with_a_witness_fedbound_check_reproduces():
    r = search("afl.theorem3", budget=50, seed=0)
    assert r.found and r.verdict.mode == "exact"
    scenario = load_scenario("afl.theorem3", json.dumps(r.witness))
    v = check("afl.theorem3", scenario, exact=True)
    assert v.verdict == "violated" and v.measured_mean > v.bound
    assert bounds.get("afl.theorem3").admissible(**v.params)
    # the mechanism of the gap: no local noise, start at the optimum, partial participation
    assert scenario.problem["sigma_L"] == 0 and scenario.problem["distance"] == 0
    assert scenario.m < scenario.M and not math.isnan(r.best_excess)


def test_search_finds_nothing_for_theorem2_on_a_small_budget():
    r = search("afl.theorem2", budget=8, seed=1)
    assert not r.found and r.tried == 8
    assert np.isfinite(r.verdict.bound)


def test_search_is_generic_over_other_papers():
    r = search("mllsgd.theorem1", budget=2, seed=0)
    assert not r.found and r.tried == 2 and r.as_dict()["key"] == "mllsgd.theorem1"


@pytest.mark.parametrize("key", ["hfl.lemma1", "hfl.theorem1"])
def test_per_cell_results_are_searchable(key):
    """Lemma 1 [U, G] and Theorem 1 [G] go through the generic per-cell comparison."""
    r = search(key, budget=3, seed=0)
    assert r.tried == 3 and not r.found and r.verdict.cell is not None


def test_an_adapter_without_admissible_scenarios_fails_loudly():
    class Never(Toy):
        key = "toy.never"

    # a scenario has a <= 100, the theorem needs a >= 200: no draw (nor edge) is admissible
    thm = lambda variant: Theorem(  # noqa: E731
        key="toy.never", variant=variant, title="t", citation="test", lhs="a^2/n", params=PARAMS,
        term_exprs={"rhs": a**2 / n}, symbols={"a": a, "n": n},
        conditions=[Condition("a >= 200", sp.GreaterThan(a, 200), "test")])
    with registered("toy.never", "never admissible", thm, adapter=Never):
        with pytest.raises(ValueError, match="no admissible scenario"):
            search("toy.never", budget=2)
    with pytest.raises(ValueError, match="unknown result"):
        search("toy.never")
