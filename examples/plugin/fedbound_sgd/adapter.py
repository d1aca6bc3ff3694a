"""The adapter of ``sgd.nonconvex`` (Ghadimi & Lan 2013; statement in ``fedbound_sgd.theorem``).

Algorithm: SGD x_{k+1} = x_k - eta g(x_k) from x_0, with a constant step.

Scenario: a quadratic f(x) = 0.5 (x - x*)^T A (x - x*) + f_inf (``sim.Quadratic``) whose
``dim`` eigenvalues lie in [mu, L] with the largest exactly L, stochastic gradients
g(x) = grad f(x) + e with e ~ N(0, (sigma^2/dim) I) (so E||g - grad f||^2 = sigma^2 exactly),
x_0 at ``distance`` from x*, the step ``eta`` (null: the largest admissible, 1/L), ``K``,
the ``replicas`` and the ``seed``. A quadratic is a convex instance of the theorem's class;
it is the one whose expectations are known exactly, and both terms of the bound are tight
on it (``fedbound_sgd.theorem``).

Parameters: L and sigma as built; Delta = f(x_0) - f_inf (f_inf is the exact minimum); eta
and K.

Measurement: per replica, (1/K) sum_{k<K} ||grad f(x_k)||^2; all replicas advance together
as one [replicas, dim] tensor.

Exact mode: in the eigen-coordinates y = U^T (x - x*) (eigenvalue lam, A = U diag(lam) U^T)
the noise stays isotropic, so each coordinate evolves independently as
y_{k+1} = (1 - eta lam) y_k - eta e_k with e_k ~ N(0, sigma^2/dim), and

    E y_{k+1}^2 = (1 - eta lam)^2 E y_k^2 + eta^2 sigma^2 / dim,
    E||grad f(x_k)||^2 = sum_c lam_c^2 E y_{k,c}^2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbound.verify.api import (
    COUNT,
    GRAD2,
    LOOP_OVERHEAD,
    Adapter,
    Draw,
    Footprint,
    Measurement,
    Scenario,
    Tags,
    count_text,
    label,
    register_adapter,
    require_float,
    require_int,
    roundoff,
)

from .theorems import KEY


@dataclass
class SGDScenario(Scenario):
    """One SGD run on a random quadratic (module docstring); JSON keys are the field names."""

    dim: int = 4
    L: float = 1.0
    mu: float = 0.1
    sigma: float = 1.0
    distance: float = 2.0
    eta: float | None = None
    K: int = 100
    replicas: int = 200
    seed: int = 0

    def validate(self) -> None:
        for name in ("dim", "K", "replicas"):
            require_int(name, getattr(self, name))
        require_int("seed", self.seed, minimum=0)
        require_float("L", self.L, low=0, low_open=True)
        require_float("mu", self.mu, low=0, low_open=True)
        if self.mu > self.L:
            raise ValueError(f"mu={self.mu:g} must be <= L={self.L:g}: the eigenvalues of A lie "
                             "in [mu, L]")
        if self.dim == 1 and self.mu != self.L:
            raise ValueError(f"dim=1 needs mu == L (one eigenvalue), got mu={self.mu:g}, "
                             f"L={self.L:g}")
        require_float("sigma", self.sigma, low=0)
        require_float("distance", self.distance, low=0)
        if self.eta is not None:
            require_float("eta", self.eta, low=0, low_open=True)


# ---------------------------------------------------------------------- set-up


def build(s: SGDScenario):
    """The quadratic, x_0 and the generator the run continues, all from the seed."""
    import torch  # imported on first use, so that `fedbound list` stays light

    from fedbound.sim import Quadratic

    gen = torch.Generator().manual_seed(s.seed)
    problem = Quadratic.random(s.dim, s.L, s.mu, s.sigma, gen)
    direction = torch.randn(s.dim, generator=gen, dtype=torch.float64)
    return problem, problem.x_star + s.distance * direction / direction.norm(), gen


def simulate(problem, x0, eta: float, K: int, replicas: int, gen) -> tuple[np.ndarray, np.ndarray]:
    """SGD on every replica at once: [replicas, K] ||grad f(x_k)||^2 for k = 0..K-1, and the
    [replicas] flags of the replicas that diverged (frozen from then on, ``sim.freeze_diverged``)."""
    import torch

    from fedbound.sim import freeze_diverged

    x = x0.expand(replicas, -1).clone()
    diverged = torch.zeros(replicas, dtype=torch.bool)
    grad_sq = torch.empty(replicas, K, dtype=torch.float64)
    for k in range(K):
        grad_sq[:, k] = problem.grad(x).square().sum(dim=-1)
        x, diverged = freeze_diverged(x, x - eta * problem.stochastic_grad(x, gen), diverged)
    return grad_sq.numpy(), diverged.numpy()


def expected_grad_sq_norms(lam, y0, sigma: float, eta: float, K: int) -> np.ndarray:
    """[K] E||grad f(x_k)||^2 for k = 0..K-1, exactly (module docstring): ``lam`` the [dim]
    eigenvalues, ``y0`` the [dim] eigen-coordinates of x_0 - x*."""
    lam, second = np.asarray(lam, dtype=float), np.asarray(y0, dtype=float) ** 2
    shrink, noise = (1 - eta * lam) ** 2, eta**2 * sigma**2 / lam.size
    out = np.empty(K)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(K):
            out[k] = np.sum(lam**2 * second)
            second = shrink * second + noise
    if not np.all(np.isfinite(out)):
        raise ValueError(f"eta={eta:g}: the exact moments overflow (eta L = {eta * lam.max():.6g} "
                         "> 2: SGD diverges)")
    return out


# ---------------------------------------------------------------------- adapter


@register_adapter
class Nonconvex(Adapter):
    """``sgd.nonconvex``: the average squared gradient norm of SGD against the bound."""

    key = KEY
    scenario_type = SGDScenario
    default = SGDScenario()
    tags = Tags(exact=True)
    series_label = label("iterations K", COUNT)
    lhs_label = label(r"$\frac{1}{K}\sum_{k<K}\|\nabla f(x_k)\|^2$", GRAD2)

    def _derive(self, s: SGDScenario, thm) -> dict:
        problem, x0, _ = build(s)
        params = {"L": problem.L, "sigma": problem.sigma,
                  "Delta": max(problem.delta(x0), 0.0), "K": s.K}
        params["eta"] = s.eta if s.eta is not None else thm.max_step(**params)
        return params

    def _measure(self, s: SGDScenario, params, exact: bool) -> Measurement:
        problem, x0, gen = build(s)
        atol = roundoff(problem.L, max(float(x0.norm()), float(problem.x_star.norm())))
        if exact:
            y0 = problem.eigvecs.T @ (x0 - problem.x_star)
            series = expected_grad_sq_norms(problem.eigenvalues.numpy(), y0.numpy(),
                                            problem.sigma, params["eta"], s.K)
            return Measurement(exact=float(series.mean()), series=series, atol=atol)
        grad_sq, diverged = simulate(problem, x0, params["eta"], s.K, s.replicas, gen)
        ok = grad_sq[~diverged]
        return Measurement(values=ok.mean(axis=1), diverged=int(diverged.sum()),
                           series=ok.mean(axis=0) if len(ok) else None, atol=atol)

    def _draw(self, draw: Draw) -> SGDScenario:
        """A small scenario on which eta <= 1/L holds: dim 1-5, L in [0.5, 4], mu a fraction
        of L, sigma in [0, 2], x_0 up to 4 from x*, K from 1 to 200 (short runs are dominated
        by the first term, long ones by the noise term), and eta 5% to 100% of the largest
        step the theorem admits there (``admissible_step``: its ``max_step``, 1/L)."""
        dim = draw.integer(1, 5)
        L = round(draw.uniform(0.5, 4.0), 3)
        mu = L if dim == 1 else round(L * draw.uniform(0.05, 1.0), 4)
        s = SGDScenario(dim=dim, L=L, mu=mu, sigma=round(draw.uniform(0.0, 2.0), 3),
                        distance=round(draw.uniform(0.0, 4.0), 3), K=draw.integer(1, 200),
                        replicas=64, seed=draw.integer(0, 2**16 - 1))
        return s.replace(eta=self.admissible_step(s, draw))

    def _footprint(self, s: SGDScenario, exact: bool) -> Footprint:
        """Memory: the quadratic's dim x dim matrices (A and its eigenvectors), the replicas'
        iterates with the step's temporaries and the [replicas, K] squared gradient norms;
        exact mode: one vector per eigenvalue and the K means. Work: K steps, each a gradient
        (a dim x dim product) per replica. From the sizes alone: nothing is built."""
        d, R, K = count_text(s.dim), count_text(s.replicas), count_text(s.K)
        if exact:
            return Footprint.of(
                {f"K={K} means and dim={d} x 3 moment vectors of 8 B": 8.0 * (s.K + 3 * s.dim),
                 f"dim={d}, squared, x 2 matrices of 8 B": 16.0 * s.dim**2},
                {f"K={K} x dim={d} (the moment recursion)": float(s.K) * (4 * s.dim + LOOP_OVERHEAD)})
        return Footprint.of(
            {f"dim={d}, squared, x 2 matrices of 8 B": 16.0 * s.dim**2,
             f"replicas={R} x dim={d} x 4 buffers of 8 B": 32.0 * s.replicas * s.dim,
             f"replicas={R} x K={K} squared norms of 8 B": 8.0 * s.replicas * s.K},
            {f"K={K} steps x replicas={R} x dim={d}, squared": float(s.K) * (
                2 * s.replicas * s.dim**2 + 6 * s.replicas * s.dim + LOOP_OVERHEAD)})

    def _bound_series(self, s: SGDScenario, thm, params, n: int):
        """The bound for every K' <= K (the running mean of the figure is its left-hand side)."""
        ks = np.arange(1, n + 1)
        return ks, np.broadcast_to(thm.evaluate(**{**params, "K": ks.astype(float)}), ks.shape)
