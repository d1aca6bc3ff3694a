"""fedbound.bounds.tuning.choose_step against independent computations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds.tuning import choose_step


@st.composite
def params(draw):
    n = draw(st.integers(1, 6))
    w = np.array(draw(st.lists(st.floats(0.1, 5), min_size=n, max_size=n)))
    q, tau = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    return dict(L=draw(st.floats(0.1, 5)), beta=draw(st.floats(0, 2)), sigma=draw(st.floats(0.01, 5)),
                Delta=draw(st.floats(0.01, 50)), K=q * tau * draw(st.integers(1, 200)), q=q,
                tau=tau, zeta=draw(st.floats(0, 0.95)), a=w / w.sum(),
                p=np.array(draw(st.lists(st.floats(0.6, 1), min_size=n, max_size=n))))


@settings(max_examples=40, deadline=None)
@given(params(), st.sampled_from(("printed", "proof", "tight")))
def test_max_objective_is_max_step(v, variant):
    thm = bounds.get("mllsgd.theorem1", variant)
    c = choose_step("mllsgd.theorem1", "max", variant=variant, **v)
    assert c.step == thm.max_step(**v) and c.binding == "(12)"
    assert c.bound == thm.evaluate(eta=c.step, **v)


@settings(max_examples=40, deadline=None)
@given(params())
def test_min_bound_beats_a_dense_grid(v):
    thm = bounds.get("mllsgd.theorem1")
    c = choose_step(thm, "min-bound", **v)
    grid = np.linspace(1e-6, 1.0, 4001) * thm.max_step(**v)
    assert c.step <= thm.max_step(**v) * (1 + 1e-12)
    assert thm.admissible(eta=c.step, **v)
    assert c.bound <= thm.evaluate(eta=grid, **v).min() * (1 + 1e-9)


def test_interior_optimum_is_stationary():
    """With a small Delta the optimum lies inside (0, max_step): the derivative vanishes."""
    thm = bounds.get("mllsgd.theorem1")
    v = dict(L=1.0, beta=0.0, sigma=3.0, Delta=1e-4, K=4096, q=2, tau=4, zeta=0.5,
             a=np.full(4, 0.25), p=np.ones(4))
    c = choose_step(thm, "min-bound", **v)
    assert c.binding == "interior optimum" and c.step < thm.max_step(**v)
    h = 1e-4 * c.step
    slope = (thm.evaluate(eta=c.step + h, **v) - thm.evaluate(eta=c.step - h, **v)) / (2 * h)
    assert abs(slope) * c.step < 1e-6 * c.bound


def test_bad_objective_and_no_step():
    with pytest.raises(ValueError, match="objective='fast' must be one of"):
        choose_step("mllsgd.theorem1", "fast")
    with pytest.raises(ValueError, match="has no step-size parameter"):
        choose_step("mllsgd.corollary1", L=1.0)
