"""The constants of sim.problems are right: Assumption 1 of Castiglia et al. 2021."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound.sim.problems import LogisticRegression, Quadratic

F64 = torch.float64
SETTINGS = settings(max_examples=25, deadline=None)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def quadratic(seed, dim=6, sigma=1.5, rotate=True):
    return Quadratic.random(dim, L=4.0, mu=0.05, sigma=sigma, generator=gen(seed), rotate=rotate)


def logistic(seed, lam=0.0, batch=3, n=40, dim=5):
    return LogisticRegression.random(n, dim, R=2.5, generator=gen(seed), lam=lam, batch=batch)


def problems(seed):
    return [quadratic(seed), quadratic(seed, rotate=False), logistic(seed), logistic(seed, 0.3)]


def assert_within_standard_errors(samples, expected, n_se=5.0):
    """Monte-Carlo mean of ``samples`` (dim 0) equals ``expected`` within n_se standard errors."""
    mean = samples.mean(dim=0)
    se = samples.std(dim=0) / math.sqrt(samples.shape[0])
    assert ((mean - expected).abs() <= n_se * se + 1e-12).all(), (mean, expected, se)


# ---------------------------------------------------------------- Quadratic


def test_quadratic_noise_has_exact_variance_sigma_squared_and_zero_mean():
    problem = quadratic(0, sigma=1.5)
    x = torch.randn(problem.dim, generator=gen(1), dtype=F64)
    g = problem.stochastic_grad(x.expand(200_000, -1), gen(2))
    eps = g - problem.grad(x)
    assert_within_standard_errors(eps.square().sum(dim=1), problem.sigma**2)
    assert_within_standard_errors(g, problem.grad(x))
    assert problem.beta == 0.0


@SETTINGS
@given(seed=st.integers(0, 10_000))
def test_quadratic_L_and_mu_are_the_extreme_eigenvalues(seed):
    problem = quadratic(seed)
    eig = torch.linalg.eigvalsh(problem.hessian)
    assert problem.L == pytest.approx(float(eig[-1]), rel=1e-12)
    assert problem.mu == pytest.approx(float(eig[0]), rel=1e-12)
    assert torch.all(problem.eigenvalues[1:] >= problem.eigenvalues[:-1])
    rebuilt = (problem.eigvecs * problem.eigenvalues) @ problem.eigvecs.T
    torch.testing.assert_close(rebuilt, problem.hessian, rtol=0, atol=1e-12)


def test_quadratic_random_puts_both_endpoints_in_the_spectrum():
    problem = Quadratic.random(7, L=10.0, mu=0.01, sigma=0.0, generator=gen(3))
    assert problem.L == 10.0 and problem.mu == 0.01
    assert ((problem.eigenvalues >= 0.01) & (problem.eigenvalues <= 10.0)).all()
    assert torch.equal(torch.diag(problem.hessian).sort().values, problem.eigenvalues)


def test_quadratic_minimum_is_f_star_at_x_star():
    problem = Quadratic([1.0, 3.0], x_star=[1.0, -2.0], f_star=-0.5, sigma=1.0)
    assert problem.f_inf == -0.5
    assert float(problem.loss(problem.x_star)) == -0.5
    assert problem.delta(torch.tensor([1.0, -1.0])) == pytest.approx(1.5)
    assert torch.equal(problem.grad(problem.x_star), torch.zeros(2, dtype=F64))


def test_quadratic_accepts_a_full_spd_matrix():
    problem = Quadratic([[2.0, 1.0], [1.0, 2.0]])
    assert problem.L == pytest.approx(3.0) and problem.mu == pytest.approx(1.0)


# ---------------------------------------------------------------- both problems


@SETTINGS
@given(seed=st.integers(0, 10_000))
def test_grad_is_the_autograd_gradient_of_loss(seed):
    x = torch.randn(3, 2, 6, generator=gen(seed + 1), dtype=F64)
    for problem in problems(seed):
        xs = x[..., : problem.dim].clone().requires_grad_(True)
        (auto,) = torch.autograd.grad(problem.loss(xs).sum(), xs)
        torch.testing.assert_close(problem.grad(xs.detach()), auto, rtol=1e-10, atol=1e-12)


@SETTINGS
@given(seed=st.integers(0, 10_000), scale=st.floats(1e-3, 30.0))
def test_gradient_is_L_lipschitz_on_random_pairs(seed, scale):
    for problem in problems(seed):
        x, y = scale * torch.randn(2, 64, problem.dim, generator=gen(seed + 7), dtype=F64)
        lhs = (problem.grad(x) - problem.grad(y)).norm(dim=-1)
        assert (lhs <= problem.L * (x - y).norm(dim=-1) * (1 + 1e-12)).all()


def test_batched_evaluation_matches_row_by_row():
    x = torch.randn(4, 3, 5, generator=gen(4), dtype=F64)
    for problem in problems(5)[2:]:
        rows = torch.stack([problem.loss(row) for row in x.reshape(-1, 5)]).reshape(4, 3)
        torch.testing.assert_close(problem.loss(x), rows, rtol=1e-14, atol=0)
        assert problem.stochastic_grad(x, gen(0)).shape == x.shape


def test_same_generator_seed_gives_identical_stochastic_gradients():
    x = torch.randn(10, 5, generator=gen(6), dtype=F64)
    for problem in [quadratic(7, dim=5), logistic(7)]:
        assert torch.equal(problem.stochastic_grad(x, gen(8)), problem.stochastic_grad(x, gen(8)))
        assert not torch.equal(problem.stochastic_grad(x, gen(8)),
                               problem.stochastic_grad(x, gen(9)))


def test_to_moves_every_tensor():
    problem = logistic(0).to("cpu")
    assert problem.device == torch.device("cpu")
    assert problem.L == logistic(0).L


# ---------------------------------------------------------------- LogisticRegression


def test_logistic_features_have_max_norm_exactly_R():
    problem = logistic(11)
    assert float(problem.features.norm(dim=1).max()) == pytest.approx(2.5, rel=1e-15)
    assert problem.G == problem.R == pytest.approx(2.5, rel=1e-15)
    assert logistic(11, lam=0.1).G is None


@pytest.mark.parametrize("lam", [0.0, 0.2])
def test_logistic_L_is_the_hessian_norm_at_zero(lam):
    """The bound lambda_max(A^T A)/(4n) + lam is attained at x = 0 (sigmoid' = 1/4)."""
    problem = logistic(12, lam=lam)
    hessian = torch.autograd.functional.jacobian(problem.grad, torch.zeros(problem.dim, dtype=F64))
    assert problem.L == pytest.approx(float(torch.linalg.eigvalsh(hessian)[-1]), rel=1e-12)


@SETTINGS
@given(seed=st.integers(0, 10_000), scale=st.floats(0.0, 20.0))
def test_logistic_sample_gradients_bounded_by_G_and_loss_above_f_inf(seed, scale):
    problem = logistic(seed)
    x = scale * torch.randn(8, problem.dim, generator=gen(seed + 3), dtype=F64)
    assert (problem.sample_grads(x).norm(dim=-1) <= problem.G * (1 + 1e-12)).all()
    assert (problem.loss(x) >= problem.f_inf).all()
    torch.testing.assert_close(problem.sample_grads(x).mean(dim=-2), problem.grad(x))


@pytest.mark.parametrize("lam, batch", [(0.0, 1), (0.5, 4)])
def test_logistic_sampled_gradient_is_unbiased_with_variance_at_most_sigma_squared(lam, batch):
    problem = logistic(13, lam=lam, batch=batch)
    x = torch.randn(problem.dim, generator=gen(14), dtype=F64)
    g = problem.stochastic_grad(x.expand(100_000, -1), gen(15))
    assert_within_standard_errors(g, problem.grad(x))
    dev_sq = (g - problem.grad(x)).square().sum(dim=1)
    upper = dev_sq.mean() + 5 * dev_sq.std() / math.sqrt(dev_sq.numel())
    assert upper <= problem.sigma**2
    assert problem.sigma**2 == pytest.approx(problem.R**2 / batch)


def test_logistic_loss_is_finite_far_from_the_origin():
    problem = logistic(16)
    x = 1e6 * torch.randn(5, problem.dim, generator=gen(17), dtype=F64)
    assert torch.isfinite(problem.loss(x)).all() and torch.isfinite(problem.grad(x)).all()


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda: Quadratic([1.0, -1.0]), "hessian"),
        (lambda: Quadratic([[1.0, 2.0], [0.0, 1.0]]), "hessian"),
        (lambda: Quadratic([[1.0, 2.0], [2.0, 1.0]]), "hessian"),
        (lambda: Quadratic([1.0, float("nan")]), "hessian"),
        (lambda: Quadratic([1.0, 2.0], sigma=-1.0), "sigma"),
        (lambda: Quadratic([1.0, 2.0], x_star=[1.0]), "x_star"),
        (lambda: Quadratic.random(0, 1.0, 1.0, 0.0, gen(0)), "dim"),
        (lambda: Quadratic.random(3, 1.0, 2.0, 0.0, gen(0)), "mu"),
        (lambda: LogisticRegression.random(0, 3, 1.0, gen(0)), "n"),
        (lambda: LogisticRegression.random(5, 0, 1.0, gen(0)), "dim"),
        (lambda: LogisticRegression.random(5, 3, 0.0, gen(0)), "R"),
        (lambda: LogisticRegression.random(5, 3, 1.0, gen(0), lam=-1.0), "lam"),
        (lambda: LogisticRegression.random(5, 3, 1.0, gen(0), batch=0), "batch"),
        (lambda: LogisticRegression.random(5, 3, 1.0, gen(0), label_noise=0.7), "label_noise"),
        (lambda: LogisticRegression([[1.0, 0.0]], [0.5]), "labels"),
        (lambda: LogisticRegression([1.0, 0.0], [1.0]), "features"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_parameter(build, name):
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        build()
