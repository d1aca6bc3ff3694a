"""Searches kept in a region of scenarios (verify/region.py, ``search(where=...)``, ``fedbound
search --where``) and stratified budgets (``stratify``, ``--stratify``): every draw and every
move stays in the region, an empty region is an error naming it, a malformed expression names
the field as written, the same seed gives the same witness with or without a process pool,
and the budget is split over the strata."""

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.bounds.core import Condition, Param, Theorem
from fedbound.verify import check
from fedbound.verify.api import Adapter, Draw, Measurement, Scenario, Tags, require_float, require_int
from fedbound.verify.cli import main
from fedbound.verify.region import Region, parse, parse_strata
from fedbound.verify.search import _OUTSIDE, FROZEN, _Searcher, search
from fedbound.verify.testing import registered

a, n = sp.symbols("a n", positive=True)


@dataclass
class Box(Scenario):
    """Measured exactly a^2 / n, a in [0, 100], n >= 1; a nested object with a number."""

    a: float = 0.5
    n: int = 2
    extra: dict = None
    mode: str = "plain"
    replicas: int = 1
    seed: int = 0

    def __post_init__(self):
        if self.extra is None:
            self.extra = {"w": 1.0}

    def validate(self):
        require_float("a", self.a, low=0, high=100)
        require_int("n", self.n)
        require_float("extra.w", self.extra.get("w"), low=0, high=10)
        require_int("replicas", self.replicas)
        require_int("seed", self.seed, minimum=0)


class BoxAdapter(Adapter):
    key = "box.true"
    scenario_type = Box
    default = Box()
    tags = Tags(exact=True)

    def _derive(self, s, thm):
        return {"a": s.a, "n": s.n}

    def _measure(self, s, params, exact):
        return Measurement(exact=s.a**2 / s.n)

    def _draw(self, draw: Draw):
        return Box(a=draw.uniform(0.01, 5.0), n=draw.integer(1, 19),
                   extra={"w": draw.uniform(0.0, 3.0)}, seed=draw.integer(0, 999))


def _theorem(variant):
    return Theorem(key="box.true", variant=variant, title="box", citation="test", lhs="a^2/n",
                   params={"a": Param("a", "size", "nonnegative"),
                           "n": Param("n", "count", "positive_integer")},
                   term_exprs={"rhs": (a**2 + 1) / n}, symbols={"a": a, "n": n},
                   conditions=[Condition("a <= 100", sp.LessThan(a, 100), "test")])


@pytest.fixture
def box():
    with registered("box.true", "true: a^2/n <= (a^2 + 1)/n", _theorem, adapter=BoxAdapter):
        yield


# ------------------------------------------------------------------ the expression language


def test_parse_checks_every_field_against_the_scenario():
    d = Box()
    r = parse(["a >= 0.5", "n < 4", "extra.w != 2"], d)
    assert str(r) == "a >= 0.5 and n < 4 and extra.w != 2"
    assert r.contains(Box(a=0.5, n=3)) and not r.contains(Box(a=0.4, n=3))
    assert not r.contains(Box(a=1.0, n=4)) and not r.contains(Box(a=1.0, extra={"w": 2.0}))
    for text, match in [
        ("z >= 1", r"where 'z >= 1': Box has no field 'z'; its fields are a, n, extra"),
        ("a >> 1", r"where 'a >> 1': expected FIELD OP NUMBER"),
        ("mode >= 1", r"the field 'mode' is not a number \(it is 'plain'"),
        ("extra.v > 0", r"the field 'extra' has no 'v' \(it holds w\)"),
        ("a.b > 0", r"the field 'a' has no 'b'"),
        ("a >= one", r"'one' is not a number"),
        ("a >= inf", r"'inf' is not a finite number"),
        ("seed >= 1", r"the search does not vary 'seed'"),
        ("__import__('os') >= 1", r"expected FIELD OP NUMBER"),
    ]:
        with pytest.raises(ValueError, match=match):
            parse(text, d, frozen=FROZEN)


def test_projection_moves_a_scenario_onto_the_boundary():
    d = Box()
    assert parse("a >= 2.5", d).projected(Box(a=1.0)).a == 2.5
    assert parse("a > 2.5", d).projected(Box(a=1.0)).a == math.nextafter(2.5, math.inf)
    assert parse("n > 2.5", d).projected(Box(n=1)).n == 3
    assert parse("n < 2", d).projected(Box(n=7)).n == 1
    assert parse("n == 2.5", d).projected(Box(n=7)) is None          # no integer there
    assert parse("a <= -1", d).projected(Box(a=1.0)) is None          # not a valid scenario
    assert parse("extra.w >= 2", d).projected(Box()).extra == {"w": 2.0}
    assert parse("a != 1", d).projected(Box(a=1.0)) is None


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 6.0), st.integers(1, 25), st.sampled_from(["<=", ">=", "<", ">", "=="]),
       st.integers(0, 2**16))
def test_every_draw_and_every_move_stays_in_the_region(threshold, count, op, seed):
    """The search's random draws (after its edge pushes and the projection) and its
    coordinate moves: each one in the region, or marked as outside it (never evaluated)."""
    with registered("box.true", "true", _theorem, adapter=BoxAdapter):
        region = parse([f"a {op} {threshold}", f"n >= {count}"], Box())
        s = _Searcher("box.true", None, "tightest", np.random.default_rng(seed), None, 1, None, region)
        draws = s.draws()
        for _ in range(20):
            d = next(draws)
            if d is _OUTSIDE:
                continue
            assert region.contains(d), (str(region), d)
            for level in (0, 1, 2):
                assert all(region.contains(m) for m in s.neighbours(d, level))


# ------------------------------------------------------------------ searches in a region


@pytest.mark.parametrize("objective", ["tightest", "violate"])
def test_the_witness_lies_in_the_region_and_replays(box, objective):
    r = search("box.true", budget=30, seed=2, where=["a >= 3", "n <= 2"], objective=objective)
    assert r.region == "a >= 3 and n <= 2" and r.as_dict()["region"] == r.region
    assert not r.found and r.tried == 30
    if objective == "tightest":
        w = Box(**r.witness)
        assert w.a >= 3 and w.n <= 2
        v = check("box.true", r.as_witness())
        assert v.ratio == pytest.approx(r.ratio, rel=1e-12)
        assert v.ratio == pytest.approx(w.a**2 / (w.a**2 + 1), rel=1e-12)   # independent formula
        assert "in the region a >= 3 and n <= 2" in r.as_witness().note
        # the tightest ratio of the region grows with a: the search went to the top of a
        assert w.a > 10


def test_an_empty_region_is_an_error_naming_it(box, capsys):
    with pytest.raises(ValueError, match=r"no admissible scenario in the region a >= 200 in "
                                         r"\d+ random draws \(\d+ outside it"):
        search("box.true", budget=5, where="a >= 200")
    code = main(["search", "box.true", "--budget", "5", "--where", "a >= 50", "--where", "a < 40"])
    err = capsys.readouterr().err
    assert code == 2 and "region a >= 50 and a < 40" in err and "random draws" in err
    assert len(err.strip().splitlines()) == 1


def test_a_malformed_expression_names_the_field_as_written(box, capsys):
    for bad, words in [("b >= 1", "--where 'b >= 1': Box has no field 'b'"),
                       ("a => 1", "--where 'a => 1': expected FIELD OP NUMBER"),
                       ("mode > 0", "--where 'mode > 0': the field 'mode' is not a number")]:
        assert main(["search", "box.true", "--where", bad]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err
    assert main(["search", "box.true", "--stratify", "n=1,2.5"]) == 2
    assert "--stratify 'n=1,2.5': n holds integers, not 2.5" in capsys.readouterr().err


def test_same_seed_same_witness(box):
    kw = dict(budget=25, seed=7, where="n >= 5", objective="tightest")
    first = search("box.true", **kw).as_dict()
    assert first == search("box.true", **kw).as_dict()
    other = search("box.true", **{**kw, "seed": 8}).as_dict()
    assert other["witness"] != first["witness"]


def test_same_witness_with_or_without_a_process_pool():
    """``--jobs 2`` evaluates ahead in worker processes; the region's filter runs in the
    driver, in the serial order, so the witness is the same."""
    from fedbound.verify.pool import executor

    kw = dict(budget=6, seed=3, where=["tau >= 2", "q >= 2"], objective="tightest")
    alone = search("mllsgd.theorem1", **kw)
    with executor(jobs=2) as pool:
        pooled = search("mllsgd.theorem1", **kw, executor=pool, width=2)
    assert pooled.witness == alone.witness and pooled.ratio == alone.ratio
    assert alone.witness["tau"] >= 2 and alone.witness["q"] >= 2


def test_no_region_leaves_the_search_as_it_was(box):
    """An empty region changes nothing: same draws, same witness."""
    kw = dict(budget=20, seed=4, objective="tightest")
    assert search("box.true", **kw).as_dict() == search("box.true", **kw, where=[]).as_dict()


# ------------------------------------------------------------------ stratified budgets


def test_the_budget_is_split_over_the_strata(box):
    r = search("box.true", budget=31, seed=1, stratify="n=1,2,5", where="a <= 4",
               objective="tightest")
    assert [(s["field"], s["value"], s["budget"], s["tried"]) for s in r.strata] == [
        ("n", 1.0, 11, 11), ("n", 2.0, 10, 10), ("n", 5.0, 10, 10)]
    assert r.tried == 31 and r.region == "a <= 4"
    best = max(r.strata, key=lambda s: s["ratio"])
    assert r.ratio == best["ratio"] and r.witness["n"] == best["value"] and r.witness["a"] <= 4
    d = r.as_dict()
    json.dumps(d)
    assert d["strata"] == r.strata
    same = search("box.true", budget=31, seed=1, stratify={"n": [1, 2, 5]}, where="a <= 4",
                  objective="tightest")
    assert same.as_dict() == d


def test_stratify_errors(box):
    with pytest.raises(ValueError, match="below the 3 strata"):
        search("box.true", budget=2, stratify="n=1,2,3")
    with pytest.raises(ValueError, match="given twice"):
        parse_strata("n=1,1", Box())
    with pytest.raises(ValueError, match="expected FIELD=v1,v2"):
        parse_strata("n", Box())
    with pytest.raises(ValueError, match="holds integers, not 1.5"):
        parse_strata({"n": [1.5]}, Box())
    assert [c.text for c in parse_strata("a=0,2.5", Box())] == ["a == 0", "a == 2.5"]


def test_the_cli_shows_the_region_and_the_strata(box, capsys):
    assert main(["search", "box.true", "--budget", "8", "--objective", "tightest",
                 "--where", "a >= 1", "--stratify", "n=1,3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["region"] == "a >= 1" and [s["value"] for s in out["strata"]] == [1.0, 3.0]
    assert out["witness"]["a"] >= 1
    assert main(["search", "box.true", "--budget", "8", "--where", "a >= 1",
                 "--stratify", "n=1,3"]) == 0
    text = capsys.readouterr().out
    assert "in the region a >= 1" in text and "stratum n = 3: 4 admissible scenarios" in text
    assert Region().contains(Box()) and str(Region()) == "every scenario"
