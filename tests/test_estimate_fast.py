"""The fast local quadratic model (sim.estimate.quadratic_model, the default) against the slow
reference it replaces (fast=False: the step by power iteration, forward-mode Hessian-vector
products, every noise vector's Rayleigh quotient, 40 Lanczos steps): on networks of the
bundled data their predicted descent curves agree within a few per cent, and the fast model's
pieces (reverse-mode Hessian-vector products, the top curvature, the Hutchinson quotient,
the unbiased subsample) against direct computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbound.sim import estimate
from fedbound.verify.api import NamedProblem

torch.set_num_threads(1)


def descent_curve(model, alpha: float, steps: int) -> np.ndarray:
    """E F(x_k) - F_ref of gradient descent at ``alpha`` on the model: sum over nodes of
    0.5 lam (1 - alpha lam)^(2k) ||x_1 - x_ref||^2_node, k = 0 .. steps - 1."""
    lam, start = model.curvature, model.start_energy
    k = np.arange(steps)[:, None]
    return (0.5 * lam * (1 - alpha * lam) ** (2 * k) * start).sum(axis=1)


@pytest.fixture(scope="module", params=[("digits", "logistic"), ("breast_cancer", "mlp")],
                ids=["digits-logistic-lanczos", "breast_cancer-mlp-full-hessian"])
def both(request):
    """The fast and the slow model of one network (Dirichlet(0.3), 2 x 2 clients), both from
    the same seed: logistic regression on the digits (650 weights: Lanczos) and a 30-8-2 MLP
    on breast_cancer (266 weights: the whole Hessian)."""
    data, model = request.param
    fed = NamedProblem(data, model, "dirichlet:0.3", hidden=(8,)).build([2, 2], 0, "test")
    models = {fast: estimate.quadratic_model(fed.problem, fed.x1, torch.Generator().manual_seed(0),
                                             sizes=[2, 2], fast=fast) for fast in (True, False)}
    return fed, models


def test_the_fast_model_predicts_what_the_slow_one_does(both):
    """The reference minimum within 3% (the two runs take slightly different steps: the top
    curvature by Lanczos, not by power iteration) and the descent curve at steps up to 1 / the
    curvature at x_1 within 5% of its start at every step of the first 50 (a network's model
    has negative curvatures, along which the curve falls below 0)."""
    fed, models = both
    fast, slow = models[True], models[False]
    assert fast.f_ref == pytest.approx(slow.f_ref, rel=3e-2)
    top = estimate.top_curvature(fed.problem, fed.x1, torch.Generator().manual_seed(0))
    for alpha in (0.25 / top, 1.0 / top):
        a, b = descent_curve(fast, alpha, 50), descent_curve(slow, alpha, 50)
        assert np.max(np.abs(a - b)) < 0.05 * b[0], (alpha, np.max(np.abs(a - b)) / b[0])
    assert "(fast)" in fast.method and "(fast)" not in slow.method


@pytest.mark.parametrize("model", ["mlp", "logistic"])  # a network; sim.clients' logistic regression
def test_reverse_mode_products_and_the_top_curvature_match_the_forward_mode_ones(model):
    """On a network (its loss differentiated by torch) and on a problem with an analytic
    gradient (its loss written for its value only: the products differentiate its gradient)."""
    fed = NamedProblem("breast_cancer", model, "dirichlet:0.5", hidden=(4,)).build([2, 2], 0, "test")
    pr, x = fed.problem, fed.x1
    obj = estimate._Objective(pr, torch.Generator().manual_seed(0), None)
    obj.at(x)
    g, f = obj.value_and_grad(x)
    assert torch.allclose(g, pr.grad(x), rtol=1e-12) and float(f) == pytest.approx(float(pr.loss(x)))
    v = torch.randn(3, pr.dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    forward = estimate.hessian_vector_product(pr, x.expand(3, pr.dim).contiguous(), v)
    assert torch.allclose(obj.hvp(v), forward, rtol=1e-9, atol=1e-12)
    assert torch.allclose(obj.hvp(v[0]), forward[0], rtol=1e-9, atol=1e-12)
    hess = obj.hvp(torch.eye(pr.dim, dtype=torch.float64))
    largest = float(torch.linalg.eigvalsh(0.5 * (hess + hess.T)).abs().max())
    top = estimate.top_curvature(pr, x, torch.Generator().manual_seed(0))
    assert largest * (1 - 1e-6) <= top <= 1.5 * largest


def test_the_noise_quotient_of_random_sign_probes_is_unbiased():
    """sum_i r_i^T H r_i / sum_i ||r_i||^2 from random sign combinations: the mean over many
    probe sets is the exact quotient (a symmetric H of known spectrum)."""
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(20, 20)))
    H = torch.tensor(q @ np.diag(np.linspace(0.1, 3.0, 20)) @ q.T)
    rest = torch.tensor(rng.normal(size=(30, 20)))
    vectors = torch.tensor(rng.normal(size=(1, 20)))

    def hvp(v):
        return v @ H

    quotients = [float(estimate._lanczos_nodes(hvp, vectors, rest, 3,
                                               (8, torch.Generator().manual_seed(s)))[0][-1])
                 for s in range(400)]
    # the last node holds the noise's remainder outside the 3 Ritz vectors, not rest itself:
    # compare with the exact quotient of that remainder
    _, ritz, _, _ = estimate._lanczos_nodes(hvp, vectors, rest, 3, None)
    outside = rest - (rest @ ritz) @ ritz.T
    exact = float((outside * (outside @ H)).sum() / outside.square().sum())
    assert np.mean(quotients) == pytest.approx(exact, rel=0.03)


def test_a_subsample_is_an_unbiased_estimate_of_the_loss():
    fed = NamedProblem("digits", "logistic", "dirichlet:0.3").build([2, 2], 0, "test")
    pr, x = fed.problem, fed.x1
    values = [float(estimate._Objective(pr, torch.Generator().manual_seed(s), 256).loss(x))
              for s in range(200)]
    assert np.mean(values) == pytest.approx(float(pr.loss(x)), rel=0.01)
    assert estimate._Objective(pr, torch.Generator().manual_seed(0), 256).subsample == 256
    assert estimate._Objective(pr, torch.Generator().manual_seed(0), 10**6).subsample is None
