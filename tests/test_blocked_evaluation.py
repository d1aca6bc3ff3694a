"""Performance paths that must not change a number: bounds.numeric.call's blocked
evaluation, checked entry for entry against the generated function called on the whole
arrays, for every registered result."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fedbound import bounds
from fedbound.bounds import numeric as nm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is not installed

from benchmarks.bench_bounds import independent_points  # noqa: E402


def _whole(f, args):
    """The generated function on the whole arrays: what call computed before its blocks."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = f(*args)
    shape = np.broadcast_shapes(*(np.shape(a) for a in args)) if args else ()
    return np.broadcast_to(np.asarray(out, dtype=float), shape)


def _drawable(key):
    """Results whose parameters are scalars or vectors over workers (not the schedules
    [U, G] of the hfl results, which the blocked broadcast test below covers in shape, nor
    the mixing matrices [N, N] of mllsgd.deadline_quadratic)."""
    return not {"t", "t_max", "V", "Z"} & set(bounds.get(key).params)


KEYS = [row["key"] for row in bounds.list() if _drawable(row["key"])]


def test_most_results_are_drawn():
    assert len(KEYS) >= 10 and {"mllsgd.theorem1", "tdcd.theorem1", "afl.corollary1"} <= set(KEYS)


@pytest.mark.parametrize("key", sorted(KEYS))
def test_blocked_call_equals_whole_call(key):
    thm = bounds.get(key)
    names = thm._needed([thm.expr])
    n = 4 * nm._CALL_BLOCK + 123  # several blocks and a short last one
    vals = thm._values(names, independent_points(thm, names, n, np.random.default_rng(7), workers=3))
    args = thm._scalar_args(vals)
    exprs = [thm.expr, *thm.term_exprs.values()]
    for e in exprs:
        syms, f = thm._fn(e)
        values = [args[s] for s in syms]
        assert nm._row_blocks(np.broadcast_shapes(*(np.shape(v) for v in values))) is not None
        blocked, whole = nm.call(f, values), _whole(f, values)
        assert blocked.shape == whole.shape
        assert np.array_equal(blocked, whole, equal_nan=True)


def test_blocked_call_broadcasts_rows_columns_and_constants():
    rows = np.linspace(0.5, 2.0, 5 * nm._CALL_BLOCK // 64)[:, None]
    columns = np.linspace(1.0, 3.0, 64)[None, :]
    scalar = np.float64(0.25)

    def f(x, y, z):
        return np.exp(-x * y) / (1 + z) + np.sqrt(y)

    blocked = nm.call(f, [rows, columns, scalar])
    assert np.array_equal(blocked, _whole(f, [rows, columns, scalar]))
    constant = nm.call(lambda x, y: 2.0, [rows, columns])
    assert constant.shape == (rows.shape[0], 64) and (constant == 2.0).all()


@pytest.mark.parametrize("where", [0, nm._BLOCK - 1, nm._BLOCK, 3 * nm._BLOCK + 6])
def test_integral_finds_one_fraction_or_nan_in_any_block(where):
    x = np.arange(3 * nm._BLOCK + 7, dtype=float).reshape(-1, 1)
    assert nm.integral(x)
    for bad in (0.5, np.nan):
        y = x.copy()
        y.flat[where] = bad
        assert not nm.integral(y)


def test_afl_tau_in_the_last_block_must_be_an_integer():
    """An AFL bound refuses a fractional tau wherever it sits in a long array (the check
    runs block by block)."""
    thm = bounds.get("afl.corollary1")
    values = independent_points(thm, thm._needed([thm.expr]), 3 * nm._BLOCK, np.random.default_rng(1))
    thm.evaluate(**values)
    values["tau"][-1] += 0.5
    with pytest.raises(ValueError, match="tau=.* must be an integer"):
        thm.evaluate(**values)
