"""The shipped tightness tables (each paper's verify/papers/<paper>/tightness.json, registered
by its plugin) are current: re-derived here from the default checks and the stored witnesses,
whose recorded ratios a replay must reproduce. When this fails after a change of a bound, an
adapter or a witness, regenerate the tables with
``python -c "from fedbound.verify import tightness; tightness.write()"`` and say why in the
commit."""

import math

import pytest

from fedbound import bounds
from fedbound.verify import check, witnesses
from fedbound.verify.plugins import builtin, modules, origin, owner
from fedbound.verify.tightness import by_variant, derive, read, table, tracked

#: the tables of fedbound's papers and the results each holds, by table
PAPERS = {path: keys for path, keys in tracked().items()
          if owner(origin("tightness_tables", str(path)), modules()) in builtin()}
KEYS = sorted(k for keys in PAPERS.values() for k in keys)


def test_each_paper_ships_the_table_of_its_results_beside_its_witnesses():
    """One table per paper, in its plugin's package beside witnesses/, holding exactly the
    results the paper's plugin registered (the seventeen of the four papers at least)."""
    assert len(PAPERS) == len(builtin()) == 4 and len(KEYS) >= 17
    for path, keys in PAPERS.items():
        assert path.name == "tightness.json" and (path.parent / "witnesses").is_dir()
        prefix = path.parent.name
        assert keys and all(k.startswith(f"{prefix}.") for k in keys), (path, keys)
        assert set(read(path)) == set(keys), path
    assert set(table()) >= set(KEYS)


@pytest.mark.parametrize("path", list(PAPERS), ids=lambda p: p.parent.name)
def test_the_shipped_table_matches_a_fresh_derivation(path):
    stored, fresh = read(path), derive(PAPERS[path])
    for key in fresh:
        assert set(by_variant(stored[key])) == set(by_variant(fresh[key])), key
        for variant, now in by_variant(fresh[key]).items():
            was, at = by_variant(stored[key])[variant], (key, variant)
            assert (was["variant"], was["status"], was["unbounded"], was["growth"]) == \
                (now["variant"], now["status"], now["unbounded"], now["growth"]), at
            d0, d1 = was["default"], now["default"]
            assert d0["mode"] == d1["mode"], at
            if d1["mode"] == "exact":
                assert d0["ratio"] == pytest.approx(d1["ratio"], rel=1e-6), at
            else:  # Monte Carlo: the stored ratio within the fresh 95% interval
                lo, hi = d1["ratio_ci"]
                assert lo <= d0["ratio"] <= hi, at
            assert was["tightest"]["witness"] == now["tightest"]["witness"], at
            if now["tightest"]["witness"] is not None:
                assert was["tightest"]["ratio"] == now["tightest"]["ratio"], at


def test_the_refined_variants_are_tracked_beside_the_defaults():
    """fedbound's refined variants (derived by fedbound, not published: HFL Theorem 2 and
    Corollary 1, TDCD Theorem 1) have tightness witnesses of their own; they bound the same
    left-hand side more tightly than the default variant does, so their ratios are larger."""
    refined = [k for k in KEYS if "refined" in bounds.variants(k)]
    assert {"hfl.theorem2", "hfl.corollary1", "tdcd.theorem1"} <= set(refined)
    for key in refined:
        t = table()[key]
        assert set(t["variants"]) == ({"refined", "iid"} if key.startswith("hfl.") else {"refined"}), key
        refined = t["variants"]["refined"]
        assert refined["tightest"]["witness"] == f"{key}.refined.tightest.json"
        assert refined["default"]["ratio"] > t["default"]["ratio"], key


@pytest.mark.parametrize("key", ["hfl.theorem2", "hfl.corollary1"])
def test_the_iid_variants_have_a_witness_inside_the_drift_region(key):
    """fedbound's iid variants (derived by fedbound, not published) are tracked by their
    tightest scenario, found at S = 0 (no local iterations: the minibatch-SGD part of the
    bound), and have a second witness, the tightest scenario that a search found in a region
    with S >= 2, where their drift terms are non-zero (benchmarks/bench_region_search.py):
    it lies in that region, its schedule has local iterations (t >= 2), and it is less tight."""
    iid = table()[key]["variants"]["iid"]
    assert iid["status"] == "holds"
    assert iid["tightest"]["witness"] == f"{key}.iid.tightest.json"
    (w,) = [w for w in TIGHTEST if w.source.endswith(f"{key}.iid.region.tightest.json")]
    assert w.scenario["S"] >= 2 and "in the region S >= " in w.note
    assert max(map(max, check(w.key, w).params["t"])) >= 2
    assert w.ratio < iid["tightest"]["ratio"]


TIGHTEST = [w for w in witnesses() if w.source.endswith(".tightest.json")]


@pytest.mark.parametrize("w", TIGHTEST, ids=lambda w: f"{w.key}.{w.variant}")
def test_each_tightness_witness_reproduces_its_ratio(w):
    v = check(w.key, w)
    assert v.verdict == w.expect and v.admissible, v.as_dict()
    assert not w.ratio_dropped(v.as_dict()), (v.ratio, w.ratio)
    assert bounds.get(w.key, w.variant).status not in bounds.REFUTED
    assert math.isfinite(v.ratio) and v.ratio <= 1 + 1e-9  # a true bound: not beyond tight


def test_every_result_not_refuted_has_a_tightness_witness():
    keys = {w.key for w in TIGHTEST if w.key in KEYS}
    assert keys == {k for k in KEYS if bounds.get(k).status not in bounds.REFUTED}
