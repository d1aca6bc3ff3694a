"""fedbound.sim.estimate against problems whose constants are known exactly, and on the digits MLP.

Every truth here is computed independently of the estimators: the quadratic's L and sigma
by construction, logistic regression's Hessian, gradient variance and gradient norms by a
numpy transcription of its formulas, sigma_G of a heterogeneous quadratic by
construction and of a network's clients worker by worker."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.sim import estimate
from fedbound.sim.afl import HeterogeneousQuadratic
from fedbound.sim.clients import LogisticClients
from fedbound.sim.data import label_partition
from fedbound.sim.problems import LogisticRegression, Quadratic

FAST = settings(max_examples=8, deadline=None, derandomize=True)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _logistic_numpy(problem: LogisticRegression, x: np.ndarray):
    """Per-sample gradients [P, n, d] and Hessians [P, d, d] of logistic regression (lam = 0)
    at points x [P, d], by the textbook formulas."""
    A, y = problem.features.numpy(), problem.labels.numpy()
    margins = y * (x @ A.T)
    s = 1.0 / (1.0 + np.exp(margins))                         # sigmoid(-margin)
    per_sample = (-y * s)[..., None] * A
    curvature = s * (1.0 - s)
    hessians = np.einsum("pj,jd,je->pde", curvature, A, A) / problem.n
    return per_sample, hessians


@FAST
@given(seed=st.integers(0, 2**20), dim=st.integers(2, 12), L=st.floats(0.5, 20.0),
       rotate=st.booleans())
def test_lipschitz_of_a_quadratic_brackets_its_largest_eigenvalue(seed, dim, L, rotate):
    g = _gen(seed)
    q = Quadratic.random(dim, L, L / 50, 1.0, g, rotate=rotate)
    points = torch.randn(3, dim, generator=g, dtype=torch.float64)
    e = estimate.lipschitz(q, points, generator=g, steps=200)
    assert e.lower <= L * (1 + 1e-9) and e.upper >= L * (1 - 1e-9)
    assert e.upper <= 1.5 * L
    assert e.n == 3 and e.param == "L"


@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**20))
def test_lipschitz_of_logistic_regression_matches_its_hessian(seed):
    g = _gen(seed)
    lr = LogisticRegression.random(120, 5, 2.0, g)
    points = torch.cat([torch.zeros(1, 5, dtype=torch.float64),
                        torch.randn(2, 5, generator=g, dtype=torch.float64)])
    _, hessians = _logistic_numpy(lr, points.numpy())
    truth = np.linalg.eigvalsh(hessians)[:, -1].max()
    e = estimate.lipschitz(lr, points, generator=g, steps=40)
    assert e.lower <= truth * (1 + 1e-9) <= e.upper * (1 + 2e-9)
    # at x = 0 the Hessian reaches the certified constant L = lambda_max(A^T A) / (4 n)
    assert truth == pytest.approx(lr.L, rel=1e-12)
    assert e.upper <= 1.5 * lr.L


@pytest.mark.parametrize("seed", range(6))
def test_gradient_variance_of_a_quadratic_covers_sigma(seed):
    g = _gen(seed)
    sigma = 0.3 + seed
    q = Quadratic.random(6, 2.0, 0.1, sigma, g)
    points = torch.randn(3, 6, generator=g, dtype=torch.float64)
    e = estimate.gradient_variance(q, points, 4000, g, level=0.999)
    assert e.lower <= sigma <= e.upper <= 1.5 * sigma


@pytest.mark.parametrize("seed", range(4))
def test_gradient_variance_of_logistic_regression_covers_the_exact_variance(seed):
    g = _gen(seed)
    lr = LogisticRegression.random(80, 4, 1.5, g, batch=3)
    points = torch.randn(2, 4, generator=g, dtype=torch.float64)
    per_sample, _ = _logistic_numpy(lr, points.numpy())
    # the variance of a mean of `batch` i.i.d. uniform draws of the per-sample gradients
    variance = ((per_sample**2).sum(-1).mean(-1)
                - (per_sample.mean(axis=1) ** 2).sum(-1)) / lr.batch
    truth = math.sqrt(variance.max())
    e = estimate.gradient_variance(lr, points, 4000, g, level=0.999)
    assert e.lower <= truth <= e.upper <= 1.5 * truth
    assert e.upper <= lr.sigma  # the certified bound R / sqrt(batch)


@pytest.mark.parametrize("seed", range(3))
def test_gradient_variance_of_clients_with_their_own_data_is_each_clients_own_noise(seed):
    """On logistic clients with label-skewed shards, sigma is the largest of every client's
    exact mini-batch variance around its own f_k (computed here shard by shard), not the
    spread between the clients (their dissimilarity)."""
    g = _gen(seed)
    lr = LogisticRegression.random(60, 3, 1.5, g, batch=2)
    shards = label_partition(lr.labels.gt(0).long(), 4, 1, generator=g)
    clients = LogisticClients(lr.features, lr.labels, shards, batch=2)
    points = torch.randn(2, 3, generator=g, dtype=torch.float64)
    per_sample, _ = _logistic_numpy(lr, points.numpy())      # [P, n, d]
    owner = shards.owner.numpy()
    variance = max(((per_sample[:, owner == k] ** 2).sum(-1).mean(-1)
                    - (per_sample[:, owner == k].mean(axis=1) ** 2).sum(-1)).max() / 2
                   for k in range(4))
    e = estimate.gradient_variance(clients, points, 4000, g, level=0.999)
    assert e.lower <= math.sqrt(variance) <= e.upper <= clients.sigma


def test_gradient_variance_with_beta_subtracts_the_multiplicative_part():
    g = _gen(3)
    q = Quadratic.random(4, 1.0, 0.5, 0.0, g)  # no noise: the deviation is round-off only
    points = 5.0 * torch.randn(2, 4, generator=g, dtype=torch.float64)
    # the samples' and the reference's gradients come from matrix products of different
    # shapes, which BLAS may sum in different orders: a few ulps of the gradient, no more
    ulps = 4 * torch.finfo(torch.float64).eps * float(q.grad(points).abs().max())
    assert 0.0 <= estimate.gradient_variance(q, points, 50, g).upper <= ulps
    assert estimate.gradient_variance(q, points, 50, g, beta=0.5).upper == 0.0


@pytest.mark.parametrize("seed", range(4))
def test_max_gradient_norm_of_logistic_regression(seed):
    g = _gen(seed)
    lr = LogisticRegression.random(60, 4, 1.0, g, batch=1)
    points = torch.randn(3, 4, generator=g, dtype=torch.float64)
    per_sample, _ = _logistic_numpy(lr, points.numpy())
    norms = np.linalg.norm(per_sample, axis=-1)               # [P, n]
    largest, rms = norms.max(), math.sqrt((norms**2).mean(axis=1).max())
    e = estimate.max_gradient_norm(lr, points, 3000, g, level=0.999)
    assert e.value <= largest * (1 + 1e-12) and e.value >= 0.9 * largest
    assert e.lower <= rms <= e.upper <= lr.G


@FAST
@given(seed=st.integers(0, 2**20), M=st.integers(2, 6), sigma_G=st.floats(0.1, 5.0))
def test_dissimilarity_of_a_heterogeneous_quadratic_is_exact(seed, M, sigma_G):
    g = _gen(seed)
    clients = HeterogeneousQuadratic.random(5, M, 2.0, 0.2, 0.0, sigma_G, g)
    points = torch.randn(3, 5, generator=g, dtype=torch.float64)
    e = estimate.dissimilarity(clients, points)
    assert e.lower == e.value == e.upper == pytest.approx(sigma_G, rel=1e-9)


@pytest.mark.parametrize("f_star", [0.0, -2.5, 7.0])
def test_delta_of_a_quadratic(f_star):
    g = _gen(1)
    q = Quadratic.random(5, 2.0, 0.5, 0.0, g, f_star=f_star)
    x1 = torch.randn(5, generator=g, dtype=torch.float64)
    h, xs = q.hessian.numpy(), q.x_star.numpy()
    r = x1.numpy() - xs
    truth = 0.5 * r @ h @ r  # F(x1) - f_star
    exact = estimate.delta(q, x1)
    assert exact.value == exact.upper == pytest.approx(truth, rel=1e-12)
    f_ref = estimate.reference_minimum(q, x1, eta=1 / q.L, steps=400)
    assert f_star <= f_ref <= f_star + 1e-8 * max(1.0, truth)
    e = estimate.delta(q, x1, f_ref)
    assert e.lower == e.value <= truth * (1 + 1e-12) and e.upper == pytest.approx(truth, rel=1e-12)


def test_trajectory_descends_and_keeps_its_ends():
    g = _gen(2)
    q = Quadratic.random(4, 1.0, 0.2, 0.0, g)
    x1 = torch.full((4,), 3.0, dtype=torch.float64)
    pts = estimate.trajectory(q, x1, eta=0.5, steps=20, points=5)
    assert pts.shape == (5, 4) and torch.equal(pts[0], x1)
    losses = q.loss(pts).numpy()
    assert (np.diff(losses) < 0).all()


@pytest.mark.parametrize("call, name", [
    (lambda q, g: estimate.lipschitz(q, torch.zeros(2, 3, dtype=torch.float64), generator=g), "points"),
    (lambda q, g: estimate.lipschitz(q, torch.zeros(1, 4), generator=g, steps=0), "steps"),
    (lambda q, g: estimate.gradient_variance(q, torch.zeros(1, 4), 1, g), "samples"),
    (lambda q, g: estimate.gradient_variance(q, torch.zeros(1, 4), 10, g, beta=-1.0), "beta"),
    (lambda q, g: estimate.gradient_variance(q, torch.zeros(1, 4), 10, g, level=1.5), "level"),
    (lambda q, g: estimate.delta(q, torch.zeros(4), -1.0), "f_inf_estimate"),
    (lambda q, g: estimate.trajectory(q, torch.zeros(4), eta=0.1, steps=3, points=9), "points"),
    (lambda q, g: estimate.reference_minimum(q, torch.zeros(4), eta=float("nan"), steps=3), "eta"),
])
def test_bad_input_names_the_parameter(call, name):
    g = _gen(0)
    q = Quadratic.random(4, 1.0, 0.5, 1.0, g)
    with pytest.raises(ValueError, match=name):
        call(q, g)


def test_an_estimate_is_ordered_and_finite():
    with pytest.raises(ValueError, match="lower <= value <= upper"):
        estimate.Estimate("L", 1.0, 2.0, 3.0, "m", 1)
    with pytest.raises(ValueError, match="not finite"):
        estimate.Estimate("L", math.nan, 0.0, 1.0, "m", 1)


# ---------------------------------------------------------------------- the digits MLP


@pytest.fixture(scope="module")
def digits():
    pytest.importorskip("sklearn", reason="scikit-learn (fedbound[data]) provides the digits")
    from fedbound.sim.data import load_digits

    return load_digits()


def _mlp_estimates(digits, seed: int):
    from fedbound.sim.data import iid_partition
    from fedbound.sim.neural import NeuralClients, NeuralProblem, mlp

    torch.manual_seed(0)
    module = mlp(hidden=(16,))
    problem = NeuralProblem(module, digits.features, digits.labels, batch=8)
    g = _gen(seed)
    x1 = problem.initial()
    points = estimate.trajectory(problem, x1, eta=0.5, steps=10, points=3)
    clients = NeuralClients(module, digits.features, digits.labels,
                            iid_partition(digits.n, 4, _gen(seed)), batch=8)
    return (estimate.lipschitz(problem, points, generator=g, steps=15, starts=2),
            estimate.gradient_variance(problem, points, 64, g),
            estimate.max_gradient_norm(problem, points, 64, g),
            estimate.dissimilarity(clients, points),
            estimate.delta(problem, x1, float(problem.loss(points).min())))


def test_estimates_on_the_digits_mlp_are_finite_positive_and_reproducible(digits):
    first, again = _mlp_estimates(digits, 5), _mlp_estimates(digits, 5)
    assert first == again  # dataclass equality: every float bit for bit
    for e in first:
        assert 0 < e.lower <= e.value <= e.upper < math.inf, e


def test_dissimilarity_on_network_clients_matches_worker_by_worker(digits):
    from fedbound.sim.data import label_partition
    from fedbound.sim.neural import NeuralClients, NeuralProblem, mlp

    torch.manual_seed(1)
    module = mlp(hidden=(8,))
    part = label_partition(digits.labels, 3, 4, _gen(0))
    clients = NeuralClients(module, digits.features, digits.labels, part)
    points = clients.initial()[None] + 0.1 * torch.randn(2, clients.dim, generator=_gen(1),
                                                         dtype=torch.float64)
    # independently: one NeuralProblem per worker on its own samples (a test may loop)
    owner = part.owner
    per_worker = torch.stack([
        NeuralProblem(module, digits.features[owner == i], digits.labels[owner == i]).grad(points)
        for i in range(3)])
    full = per_worker.mean(dim=0)
    truth = float((per_worker - full).norm(dim=-1).max())
    assert estimate.dissimilarity(clients, points).value == pytest.approx(truth, rel=1e-9)


#: a fresh interpreter (torch warns on the first forward-mode derivative of a process only)
#: computes a Hessian-vector product with every warning an error; with FUTURE, torch.jit.script
#: warns as torch 2.14 does (a FutureWarning; torch 2.13 warns with a DeprecationWarning)
HVP_SCRIPT = """
import sys, warnings
import torch
from fedbound.sim import estimate
from fedbound.sim.problems import LogisticRegression
if sys.argv[1] == "future":
    script = torch.jit.script
    def warning_script(*args, **kwargs):
        warnings.warn("`torch.jit.script` is deprecated. Please switch to `torch.compile` or "
                      "`torch.export`.", FutureWarning, stacklevel=2)
        return script(*args, **kwargs)
    torch.jit.script = warning_script
warnings.simplefilter("error")
g = torch.Generator().manual_seed(0)
p = LogisticRegression.random(16, 3, 1.0, g)
x = torch.zeros(2, 3, dtype=torch.float64)
print(estimate.hessian_vector_product(p, x, torch.ones_like(x)).shape)
"""


@pytest.mark.parametrize("torch_warns_as", ["installed", "future"])
def test_hessian_vector_product_lets_no_warning_of_torch_through(torch_warns_as):
    """The first forward-mode derivative makes torch script helpers, which warns under torch
    2.13 (DeprecationWarning) and 2.14 (FutureWarning): neither reaches the user."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", HVP_SCRIPT, torch_warns_as], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
    assert out.stdout.strip() == "torch.Size([2, 3])"
