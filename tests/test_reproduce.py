"""fedbound.verify.reproduce: the intervals over seeds and the agreement rules every paper's
reproduction uses (the reproductions themselves are tested in test_reproduce_<paper>.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from fedbound.verify.reproduce import Row, bound_order, order, reproduce, row


def test_row_is_the_mean_with_scipys_t_interval():
    values = [1.0, 1.5, 0.75, 1.25]
    r = row("a", values, bound=2)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))
    assert (r.measured, r.seeds, r.bound) == (np.mean(values), 4, 2.0)
    assert r.low == pytest.approx(low, rel=1e-12) and r.high == pytest.approx(high, rel=1e-12)


@pytest.mark.parametrize("values", [[1.0], [1.0, float("nan")], [1.0, float("inf")], [[1.0, 2.0]]])
def test_row_refuses_what_gives_no_interval(values):
    with pytest.raises(ValueError, match="a: need at least two finite values"):
        row("a", values)


def _r(low, high, bound=None):
    return Row("c", (low + high) / 2, low, high, 3, bound)


@pytest.mark.parametrize("a, b, expected", [
    ((0, 1), (2, 3), True), ((2, 3), (0, 1), False), ((0, 2), (1, 3), None), ((0, 1), (1, 2), None)])
def test_order_needs_disjoint_intervals(a, b, expected):
    assert order(_r(*a), _r(*b)) is expected


@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(0.01, 1), st.floats(-5, 5)),
                min_size=2, max_size=6))
def test_bound_order_agrees_iff_every_separated_pair_is_ordered_alike(data):
    rows = [_r(centre - half, centre + half, bound) for centre, half, bound in data]
    pairs = [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:]
             if a.high < b.low or b.high < a.low]
    expected = None if not pairs else all(
        np.sign(b.bound - a.bound) == np.sign(b.measured - a.measured) for a, b in pairs)
    assert bound_order(rows) is expected


def test_bound_order_is_undecided_without_a_bound():
    assert bound_order([_r(0, 1, 1.0), _r(2, 3, None)]) is None


@pytest.mark.parametrize("paper, seed, device, match", [
    ("fedavg", 0, None, "paper='fedavg'"), ("hfl", -1, None, "seed=-1"),
    ("hfl", True, None, "seed=True"), ("afl", 0, "foo", "device='foo': not a device name"),
    ("afl", 0, 3.5, "device=3.5: not a device name")])
def test_reproduce_refuses_bad_input(paper, seed, device, match):
    with pytest.raises(ValueError, match=match):
        reproduce(paper, seed=seed, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the machine has CUDA")
def test_reproduce_on_cuda_without_cuda_is_one_line_exit_2(capsys):
    from fedbound.verify.cli import main

    assert main(["reproduce", "afl", "--quick", "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "device='cuda': this machine has no CUDA device" in err and len(err.strip().splitlines()) == 1


@given(st.lists(st.tuples(st.floats(-5, 5), st.floats(0.01, 1)), min_size=2, max_size=6))
def test_increasing_reads_every_neighbouring_pair(data):
    from fedbound.verify.reproduce import increasing

    rows = [_r(centre - half, centre + half) for centre, half in data]
    steps = [("up" if a.high < b.low else "down" if b.high < a.low else "?")
             for a, b in zip(rows[:-1], rows[1:], strict=True)]
    expected = False if "down" in steps else True if set(steps) == {"up"} else None
    assert increasing(rows) is expected
