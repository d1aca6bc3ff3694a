"""How tight each bound is: the tightest search (its ratio against an independent formula,
its witness through fedbound check, its determinism whatever the number of processes), the
ratio that witnesses record and check --all holds them to, and the tightness that fedbound
list and the report show."""

import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

from fedbound import bounds
from fedbound.bounds.core import Condition, Param, Theorem
from fedbound.verify import check
from fedbound.verify import pool as sweep_pool
from fedbound.verify.api import (
    Adapter,
    Draw,
    Measurement,
    Scenario,
    Tags,
    Witness,
    require_float,
    require_int,
)
from fedbound.verify.cli import main
from fedbound.verify.rows import Row
from fedbound.verify.search import CONFIRM, MAX_CONFIRM, NARROW, search
from fedbound.verify.testing import registered
from fedbound.verify.tightness import table
from fedbound.verify.verdict import ratio_dropped, tightness

a, n = sp.symbols("a n", positive=True)
PARAMS = {"a": Param("a", "size", "nonnegative"), "n": Param("n", "count", "positive_integer")}


@dataclass
class ToyScenario(Scenario):
    """Measured a^2 / n (exactly, or with Gaussian noise of sd 1/n per replica); a in [0, 100]."""

    a: float = 0.5
    n: int = 2
    replicas: int = 8
    seed: int = 0

    def validate(self):
        require_float("a", self.a, low=0, high=100)
        require_int("n", self.n)
        require_int("replicas", self.replicas, minimum=2)
        require_int("seed", self.seed, minimum=0)


class Exact(Adapter):
    scenario_type = ToyScenario
    default = ToyScenario()
    tags = Tags(exact=True)

    def _derive(self, s, thm):
        return {"a": s.a, "n": s.n}

    def _measure(self, s, params, exact):
        return Measurement(exact=s.a**2 / s.n)

    def _draw(self, draw: Draw):
        return ToyScenario(a=draw.uniform(0.01, 0.99), n=draw.integer(1, 19), seed=draw.integer(0, 99))


class Noisy(Exact):
    tags = Tags()

    def _measure(self, s, params, exact):
        noise = np.random.default_rng(s.seed).normal(0, 1 / s.n, s.replicas)
        return Measurement(values=s.a**2 / s.n + noise)


def _true_bound(key):  # a^2/n <= (a^2 + 1)/n: the ratio a^2/(a^2 + 1) tends to 1, never reaches it
    return lambda variant: Theorem(
        key=key, variant=variant, title=key, citation="test", lhs="a^2/n", params=PARAMS,
        term_exprs={"rhs": (a**2 + 1) / n}, symbols={"a": a, "n": n}, status="holds",
        conditions=[Condition("a <= 100", sp.LessThan(a, 100), "test")])


@pytest.fixture
def toys():
    class E(Exact):
        key = "toy.exact"

    class N(Noisy):
        key = "toy.noisy"

    with registered("toy.exact", "a^2/n <= (a^2+1)/n", _true_bound("toy.exact"), adapter=E), \
            registered("toy.noisy", "a^2/n <= (a^2+1)/n", _true_bound("toy.noisy"), adapter=N):
        yield


def test_the_tightest_search_climbs_to_the_supremum_of_the_ratio(toys):
    r = search("toy.exact", budget=60, seed=2, objective="tightest")
    w = ToyScenario(**r.witness)
    assert r.ratio == pytest.approx(w.a**2 / (w.a**2 + 1), rel=1e-12)  # independently
    # a grows up to SPAN times the largest value drawn (under 1): a^2/(a^2 + 1) near 1
    assert r.ratio > 0.99 and w.a <= 16 and not r.found and r.exact and r.tried == 60
    assert r.trajectory == sorted(r.trajectory) and len(r.trajectory) == 60
    assert r.trajectory[-1] == r.ratio
    # the witness records its ratio, and a replay reproduces it
    wit = r.as_witness()
    assert wit.expect == "holds" and wit.ratio == r.ratio
    assert not wit.ratio_dropped(check(wit.key, wit).as_dict())


def test_a_monte_carlo_optimum_is_confirmed_until_its_interval_is_narrow(toys):
    r = search("toy.noisy", budget=30, seed=0, objective="tightest")
    w = ToyScenario(**r.witness)
    lo, hi = r.ratio_ci
    assert r.verdict.mode == "monte-carlo" and not r.exact
    assert w.replicas >= CONFIRM * 8  # re-checked with more replicas
    assert (hi - lo) <= 2 * NARROW * r.ratio or w.replicas == MAX_CONFIRM * 8
    assert check("toy.noisy", w).ratio == r.ratio  # same seed, same numbers


def test_tightness_ratio_and_its_interval():
    assert tightness(2.0, 1.0, (0.5, 1.5)) == (0.5, (0.25, 0.75))
    # a lower bound written as an upper bound on the negative: bound/measured, 1 = tight
    assert tightness(-4.0, -5.0, (-6.0, -4.5)) == (0.8, (4 / 6, 4 / 4.5))
    assert math.isnan(tightness(0.0, 0.0)[0]) and math.isnan(tightness(1.0, math.inf)[0])


def test_witnesses_record_a_ratio_that_a_replay_must_not_drop_below():
    exact = {"bound": 2.0, "measured_mean": 1.0, "measured_ci": [1.0, 1.0], "mode": "exact"}
    assert not ratio_dropped(0.5, exact) and not ratio_dropped(0.5 * (1 + 1e-8), exact)
    assert ratio_dropped(0.51, exact) and not ratio_dropped(None, exact)
    mc = {"bound": 2.0, "measured_mean": 1.0, "measured_ci": [0.8, 1.2], "mode": "monte-carlo"}
    assert not ratio_dropped(0.59, mc) and ratio_dropped(0.61, mc)  # above the interval
    row = Row("k", "proof", "witness", "witness w.json", "holds", "holds",
              {**exact, "verdict": "holds"}, None, 0.0, ratio=0.6)
    assert row.unexpected and row.as_dict()["recorded_ratio"] == 0.6
    base = {"key": "k", "variant": "v", "exact": True, "expect": "holds", "note": "", "scenario": {}}
    assert Witness.from_dict({**base, "ratio": 0.5}).as_dict()["ratio"] == 0.5
    assert "ratio" not in Witness.from_dict(base).as_dict()  # the old format, unchanged
    for bad in (-1, "0.5", True, math.inf):
        with pytest.raises(ValueError, match="ratio="):
            Witness.from_dict({**base, "ratio": bad})


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_done_means_tightest_search_of_mllsgd_theorem1_and_its_witness(capsys, tmp_path):
    code, out, _ = run(capsys, "search", "mllsgd.theorem1", "--objective", "tightest",
                       "--budget", "400", "--seed", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["objective"] == "tightest" and d["tried"] == 400 and d["exact"]
    assert len(d["trajectory"]) == 400 and d["trajectory"][-1] == d["ratio"]
    assert 0 < d["ratio"] < 1 and d["params"] == d["verdict"]["params"]
    path = tmp_path / "tightest.json"
    path.write_text(json.dumps(d["witness"]))
    code, out, _ = run(capsys, "check", "mllsgd.theorem1", "--scenario", str(path), "--exact", "--json")
    v = json.loads(out)
    assert code == 0 and v == d["verdict"]
    assert v["measured_mean"] / v["bound"] == d["ratio"]


@pytest.mark.parametrize("objective", ["tightest", "violate"])
def test_look_ahead_evaluation_gives_the_serial_result(objective):
    """Candidates evaluated ahead (here by threads, width 3) and draws undone: the result is
    the serial one, for both objectives (afl.theorem3: a violation is found and shrunk)."""
    from concurrent.futures import ThreadPoolExecutor

    key = "mllsgd.theorem1" if objective == "tightest" else "afl.theorem3"
    serial = search(key, budget=20, seed=3, objective=objective).as_dict()
    with ThreadPoolExecutor(3) as pool:
        ahead = search(key, budget=20, seed=3, objective=objective, executor=pool, width=3)
    assert ahead.as_dict() == serial


def test_same_seed_same_result_with_worker_processes():
    serial = search("mllsgd.theorem1", budget=8, seed=3, objective="tightest").as_dict()
    with sweep_pool.executor(jobs=2) as pool:
        parallel = search("mllsgd.theorem1", budget=8, seed=3, objective="tightest",
                          executor=pool, width=2).as_dict()
    assert parallel == serial


def test_list_json_gives_every_result_its_default_slack_and_tightest_ratio(capsys):
    code, out, _ = run(capsys, "list", "--json")
    rows = {r["key"]: r for r in json.loads(out)}
    assert code == 0 and set(rows) == set(bounds.keys()) >= set(table())
    for key in table():  # every result in a registered table (the papers' and a plugin's)
        r = rows[key]
        t = r["tightness"]
        assert r["default_slack"] == t["default"]["slack"] and r["tightest_ratio"] > 0, key
        assert t["default"]["slack"] * t["default"]["ratio"] == pytest.approx(1)
        assert r["tightest_ratio"] >= t["default"]["ratio"]
        refuted = bounds.get(key).status in bounds.REFUTED
        assert t["unbounded"] == refuted and (r["tightest_ratio"] > 1 + 1e-9) == refuted, key
        assert r["variant_tightness"][r["default"]] == {"default_slack": r["default_slack"],
                                                         "tightest_ratio": r["tightest_ratio"]}
    for key in [k for k in table() if "refined" in bounds.variants(k)]:  # fedbound's own
        refined = rows[key]["variant_tightness"]["refined"]
        assert refined["default_slack"] > 1 and 0 < refined["tightest_ratio"] <= 1 + 1e-9
    code, out, _ = run(capsys, "list")
    assert "slack" in out.splitlines()[0] and "(unbounded)" in out


def test_the_report_shows_the_tightness_of_each_result(tmp_path):
    from fedbound.verify import report, suite

    rows = suite.run(suite.tasks(["afl.theorem1"], battery=0, replay=False))
    out = report.write(rows, tmp_path, seed=0, battery=0)
    index = (out / "index.html").read_text()
    assert "tightest ratio" in index and 'href="results/afl_theorem1.html#variant-proof"' in index
    page = (out / "results" / "afl_theorem1.html").read_text()
    assert "Tightness (proof): slack" in page and "tightest ratio known" in page
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tightness"]["afl.theorem1"]["default"]["ratio"] == pytest.approx(1.0)
