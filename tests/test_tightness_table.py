"""The shipped tightness table (verify/tightness.json) is current: re-derived here from the
default checks and the stored witnesses, whose recorded ratios a replay must reproduce. When
this fails after a change of a bound, an adapter or a witness, regenerate the table with
``python -c "import verify.tightness as t; t.write()"`` and say why in the commit."""

import math

import pytest

import bounds
from verify import witnesses
from verify.tightness import builtin_keys, derive, table


def test_every_result_of_the_papers_is_in_the_table():
    assert set(table()) == set(builtin_keys()) and len(builtin_keys()) == 17


def test_the_shipped_table_matches_a_fresh_derivation():
    stored, fresh = table(), derive()
    for key, now in fresh.items():
        was = stored[key]
        assert (was["variant"], was["status"], was["unbounded"], was["growth"]) == \
            (now["variant"], now["status"], now["unbounded"], now["growth"]), key
        d0, d1 = was["default"], now["default"]
        assert d0["mode"] == d1["mode"], key
        if d1["mode"] == "exact":
            assert d0["ratio"] == pytest.approx(d1["ratio"], rel=1e-6), key
        else:  # Monte Carlo: the stored ratio within the fresh 95% interval
            lo, hi = d1["ratio_ci"]
            assert lo <= d0["ratio"] <= hi, key
        assert was["tightest"]["witness"] == now["tightest"]["witness"], key
        if now["tightest"]["witness"] is not None:
            assert was["tightest"]["ratio"] == now["tightest"]["ratio"], key


TIGHTEST = [w for w in witnesses() if w.source.endswith(".tightest.json")]


@pytest.mark.parametrize("w", TIGHTEST, ids=lambda w: w.key)
def test_each_tightness_witness_reproduces_its_ratio(w):
    v = w.replay()
    assert v.verdict == w.expect and v.admissible, v.as_dict()
    assert not w.ratio_dropped(v.as_dict()), (v.ratio, w.ratio)
    assert bounds.get(w.key, w.variant).status not in bounds.REFUTED
    assert math.isfinite(v.ratio) and v.ratio <= 1 + 1e-9  # a true bound: not beyond tight


def test_every_result_not_refuted_has_a_tightness_witness():
    keys = {w.key for w in TIGHTEST}
    assert keys == {k for k in builtin_keys() if bounds.get(k).status not in bounds.REFUTED}
