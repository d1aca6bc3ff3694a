"""Estimated constants, with their uncertainty, for problems whose constants are unknown.

A network (``sim.neural.NeuralProblem``) has no exact L, sigma, G: the theorems' constants
must be estimated from the problem itself. Each estimator here returns an
:class:`Estimate`: the value, a ``lower`` and an ``upper`` end (``upper`` the
conservative end, at which a bound is evaluated), the method and the number of points or
samples, in the units of the bound's parameter (``sigma``, not sigma^2).

The constants of the assumptions hold "for all x"; an estimate only sees the points it is
given (points along a trajectory: :func:`trajectory`). So every interval is a statement
about those points: the supremum over all x can only be larger. Where samples are drawn,
the interval is a simultaneous one-sided-per-end confidence interval over the points.

- :func:`lipschitz`: L (Castiglia et al. 2021, Assumption 1a) as the largest Hessian
  eigenvalue magnitude, by power iteration with Hessian-vector products (``torch.func.jvp``
  of the problem's gradient) at all points and several start vectors at once.
- :func:`gradient_variance`: sigma (Castiglia et al. 2021, Assumption 1d; Yang et al. 2022,
  Assumption 3, sigma_L) from the squared deviations of stochastic gradients from the full
  gradient, with a Student-t interval.
- :func:`dissimilarity`: sigma_G (Yang et al. 2022, Assumption 3) over the workers of a
  client set.
- :func:`max_gradient_norm`: G (Ali & Arafa 2025, Assumption 3, (16)) as the largest
  observed stochastic-gradient norm.
- :func:`delta`: Delta = F(x_1) - f_inf, with f_inf from a reference run
  (:func:`reference_minimum`) and the problem's certified lower bound.

Everything is vectorised over points, start vectors, samples and workers (one batched
call each); only the power iteration and the reference run loop over their steps.
Randomness comes only from the ``torch.Generator`` passed in: the same seed gives the same
numbers, bit for bit.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import torch

from fedbound.sim.problems import DTYPE, Problem, randn

#: two-sided confidence level of the sampled intervals
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """An estimated constant ``param`` (the name of the bound's parameter): its ``value``,
    a ``lower`` and an ``upper`` (conservative) end, the ``method`` that produced it and
    ``n``, the number of points (and samples) behind it."""

    param: str
    value: float
    lower: float
    upper: float
    method: str
    n: int

    def __post_init__(self):
        ends = (self.lower, self.value, self.upper)
        if not all(math.isfinite(e) for e in ends):
            raise ValueError(f"{self.param}: estimate {ends} is not finite ({self.method})")
        if not self.lower <= self.value <= self.upper:
            raise ValueError(f"{self.param}: need lower <= value <= upper, got {ends}")

    @property
    def interval(self) -> tuple[float, float]:
        return self.lower, self.upper

    def __str__(self) -> str:
        return (f"{self.param} = {self.value:.4g} in [{self.lower:.4g}, {self.upper:.4g}] "
                f"({self.method}; n = {self.n})")


def _points(problem, points) -> torch.Tensor:
    """``points`` as a float64 [P, dim] tensor on the problem's device, validated."""
    x = torch.as_tensor(points, dtype=DTYPE, device=problem.device)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] != problem.dim:
        raise ValueError(f"points must have shape [P >= 1, dim={problem.dim}], got "
                         f"{tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError("points must be finite")
    return x


def _count(name: str, value, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return value


def _t_quantile(level: float, dof: int) -> float:
    """The upper ``level`` quantile of Student's t with ``dof`` degrees of freedom."""
    from scipy.special import stdtrit  # only where an interval is formed

    return float(stdtrit(dof, level))


def _level(level) -> float:
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"level={level!r} must be a float in (0, 1)")
    return level


# ---------------------------------------------------------------------- L


def hessian_vector_product(problem: Problem, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """H(x) v for every leading index of ``x`` and ``v`` [..., dim]: the forward-mode
    derivative of the problem's (batched) gradient at x in the direction v. (The first
    forward-mode derivative imports torch's ``_decomp.decompositions_for_jvp``, which scripts
    its helpers with ``torch.jit.script``, and that warns that it is deprecated: torch's own
    call, a DeprecationWarning in torch 2.13 and a FutureWarning from 2.14, silenced here
    whatever its category.)"""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", Warning)
        return torch.func.jvp(problem.grad, (x,), (v,))[1]


def lipschitz(problem: Problem, points, *, generator: torch.Generator, steps: int = 100,
              starts: int = 4) -> Estimate:
    """L, the Lipschitz constant of grad F (Castiglia et al. 2021, Assumption 1a), as the
    largest Hessian eigenvalue magnitude max_x ||H(x)|| over ``points`` [P, dim].

    Power iteration v <- H v / ||H v||, ``steps`` times, from ``starts`` Gaussian start
    vectors per point (all P * starts vectors as one batch of Hessian-vector products).
    Per vector, the Rayleigh quotient rho = v^T H v and the residual r = ||H v - rho v||
    (||v|| = 1): for a symmetric H some eigenvalue lies within r of rho, and |rho| <= ||H||.
    Hence ``lower`` = ``value`` = max |rho| is a certified lower bound on the largest
    eigenvalue magnitude at the points, and ``upper`` = max (|rho| + r) the conservative end
    (the eigenvalue nearest rho, which is the dominant one once the iteration has
    converged). Both are about the points: the supremum over all x may be larger."""
    x = _points(problem, points)
    steps, starts = _count("steps", steps), _count("starts", starts)
    P = x.shape[0]
    xs = x[:, None, :].expand(P, starts, problem.dim).contiguous()
    v = randn(xs.shape, generator, x.device)
    v = v / v.norm(dim=-1, keepdim=True)
    for _ in range(steps):
        hv = hessian_vector_product(problem, xs, v)
        norm = hv.norm(dim=-1, keepdim=True)
        v = torch.where(norm > 0, hv / norm.clamp(min=torch.finfo(DTYPE).tiny), v)
    hv = hessian_vector_product(problem, xs, v)
    rho = (v * hv).sum(-1)
    residual = (hv - rho[..., None] * v).norm(dim=-1)
    value = float(rho.abs().max())
    upper = float((rho.abs() + residual).max())
    spread = rho.abs().amax(dim=1)
    return Estimate("L", value, value, upper,
                    f"Hessian power iteration, {steps} steps x {starts} starts per point; "
                    f"max |Rayleigh quotient| over points (spread {float(spread.min()):.3g} to "
                    f"{float(spread.max()):.3g}), upper = + residual norm", P)


# ---------------------------------------------------------------------- sampled constants


def _mean_interval(values: torch.Tensor, level: float) -> tuple[torch.Tensor, torch.Tensor,
                                                                  torch.Tensor]:
    """Per row of ``values`` [P, S]: the mean and the ends of a two-sided Student-t interval
    at ``level``, Bonferroni-corrected over the P rows (simultaneous for all of them)."""
    P, S = values.shape
    if S < 2:
        raise ValueError(f"samples={S} must be >= 2 to form an interval")
    mean = values.mean(dim=1)
    half = _t_quantile(1 - (1 - level) / (2 * P), S - 1) * values.std(dim=1) / math.sqrt(S)
    return mean, mean - half, mean + half


def _max_of_means(values: torch.Tensor, level: float) -> tuple[float, float, float]:
    """max_p mean_p with a simultaneous interval: if every row's interval holds, the max of
    the means lies between the max of the lower ends and the max of the upper ends."""
    mean, low, high = _mean_interval(values, level)
    return float(mean.max()), float(low.max()), float(high.max())


def _root(param: str, value: float, lower: float, upper: float, method: str, n: int) -> Estimate:
    """An estimate of a squared constant reported as its square root (clamped at 0)."""
    return Estimate(param, math.sqrt(max(value, 0.0)), math.sqrt(max(lower, 0.0)),
                    math.sqrt(max(upper, 0.0)), method, n)


def _clients(problem) -> int | None:
    """The number of clients of a problem whose clients hold their own data
    (``sim.clients.ClientProblem``: its samplers take a client axis), else None."""
    from fedbound.sim.clients import ClientProblem

    return problem.M if isinstance(problem, ClientProblem) else None


def _stochastic_at(problem: Problem, x: torch.Tensor, samples: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples`` independent stochastic gradients at every point and the gradient they
    estimate, one batched call: [P, samples, dim] and [P, 1, dim]; for a problem whose
    clients hold their own data, one per client, [P, samples, M, dim] and grad f_k,
    [P, 1, M, dim] (each client's noise is about its own objective f_k)."""
    M = _clients(problem)
    if M is None:
        return (problem.stochastic_grad(x[:, None, :].expand(x.shape[0], samples, problem.dim),
                                        generator), problem.grad(x)[:, None, :])
    at = x[:, None, None, :].expand(x.shape[0], samples, M, problem.dim)
    return problem.stochastic_grad(at, generator), problem.worker_grads(at[:, :1])


def gradient_variance(problem: Problem, points, samples: int, generator: torch.Generator, *,
                      beta: float = 0.0, level: float = LEVEL) -> Estimate:
    """sigma of Castiglia et al. 2021, Assumption 1d, E||g(x) - grad F(x)||^2 <= beta
    ||grad F(x)||^2 + sigma^2, for a given ``beta`` (0: the additive form), at ``points``.

    At each point, ``samples`` stochastic gradients give D_j = ||g_j - grad F(x)||^2 -
    beta ||grad F(x)||^2, i.i.d. with mean v(x); sigma^2 = max_x v(x) over the points. The
    interval is a two-sided Student-t interval of each mean, Bonferroni-corrected over the
    points, so the ends bound max_x v(x) simultaneously at ``level``. Why Student-t rather
    than chi-square: the chi-square interval of a variance assumes Gaussian scalar samples,
    and D_j is a squared vector norm of a mini-batch deviation whose law is unknown (heavy
    tailed for per-sample gradients); the t interval of a mean needs only a finite variance
    of D_j (central limit theorem), and the number of samples is large. The ends are
    reported as square roots (sigma, not sigma^2).

    For a problem whose clients hold their own data (``sim.clients.ClientProblem``) each
    client's mini-batch gradient deviates from its own f_k (the assumption bounds every
    worker's noise), so the maximum runs over points and clients (the interval corrected
    over both); the clients' differences from f are their dissimilarity
    (:func:`dissimilarity`), not noise."""
    x = _points(problem, points)
    samples, level = _count("samples", samples, 2), _level(level)
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta={beta!r} must be finite and >= 0 (Assumption 1d)")
    g, full = _stochastic_at(problem, x, samples, generator)
    dev = (g - full).square().sum(-1) - beta * full.square().sum(-1)
    if dev.ndim == 3:  # [P, samples, M]: every (point, client) is a point
        dev = dev.transpose(1, 2).reshape(-1, samples)
    value, lower, upper = _max_of_means(dev, level)
    return _root("sigma", value, lower, upper,
                 f"max over points of the mean squared deviation of {samples} stochastic "
                 f"gradients (beta = {beta:g}); {level:.0%} Student-t interval, Bonferroni over "
                 "points", dev.numel())


def max_gradient_norm(problem: Problem, points, samples: int, generator: torch.Generator, *,
                      level: float = LEVEL) -> Estimate:
    """G of Ali & Arafa 2025, Assumption 3, (16), E||g(x)||^2 <= G^2, at ``points``:
    ``value`` = ``upper`` = the largest observed norm of a stochastic gradient (every draw
    obeys ||g|| <= that, so the second moment does at the points seen), and ``lower`` the
    lower end of the simultaneous Student-t interval (as in :func:`gradient_variance`) of
    sqrt(max_x E||g(x)||^2), the smallest G that (16) allows at these points."""
    x = _points(problem, points)
    samples, level = _count("samples", samples, 2), _level(level)
    sq = _stochastic_at(problem, x, samples, generator)[0].square().sum(-1)
    if sq.ndim == 3:  # a client problem: every client's gradient, (point, client) pairs
        sq = sq.transpose(1, 2).reshape(-1, samples)
    _, lower, _ = _max_of_means(sq, level)
    largest = float(sq.max())
    return _root("G", largest, min(lower, largest), largest,
                 f"largest norm of {samples} stochastic gradients per point; lower = the "
                 f"{level:.0%} lower end of the root of the largest second moment",
                 sq.numel())


def dissimilarity(clients, points) -> Estimate:
    """sigma_G of Yang et al. 2022, Assumption 3, ||grad f_i(x) - grad f(x)||^2 <= sigma_G^2
    for every worker i, as max over ``points`` [P, dim] and workers of ||grad f_i - grad
    f||, from the full gradients of a client set (``sim.neural.NeuralClients``, or any
    object with ``M``, ``dim``, ``grad`` and ``worker_grads``): one batched call for all
    points and workers. No sampling, so ``lower`` = ``value`` = ``upper`` (up to the
    supremum over x outside the points)."""
    x = _points(clients, points)
    per_worker = clients.worker_grads(x[:, None, :].expand(x.shape[0], clients.M, clients.dim))
    gap = (per_worker - clients.grad(x)[:, None, :]).norm(dim=-1)
    value = float(gap.max())
    return Estimate("sigma_G", value, value, value,
                    f"max over points and {clients.M} workers of ||grad f_i - grad f|| (exact "
                    "at the points)", x.shape[0])


# ---------------------------------------------------------------------- Delta


def reference_minimum(problem: Problem, x1, *, eta: float, steps: int) -> float:
    """The smallest F seen along ``steps`` full-gradient descent steps of size ``eta`` from
    ``x1`` (:func:`trajectory`): an upper bound on inf F (every value seen is attained),
    the "long reference run" estimate of f_inf."""
    return float(problem.loss(trajectory(problem, x1, eta=eta, steps=steps,
                                         points=_count("steps", steps) + 1)).min())


def delta(problem: Problem, x1, f_inf_estimate: float | None = None) -> Estimate:
    """Delta = F(x_1) - f_inf (Castiglia et al. 2021, Theorem 1, (13)). ``upper`` uses the
    problem's ``f_inf`` (exact, or a certified lower bound such as 0 for cross-entropy):
    conservative. ``f_inf_estimate`` (e.g. :func:`reference_minimum`), a value of F some
    point attains and so an upper bound on inf F, gives ``value`` = ``lower`` = F(x_1) -
    f_inf_estimate; without it all three are F(x_1) - f_inf."""
    x = _points(problem, x1)[0]
    loss = float(problem.loss(x))
    upper = loss - float(problem.f_inf)
    if f_inf_estimate is None:
        return Estimate("Delta", upper, upper, upper,
                        f"F(x_1) - f_inf with the problem's f_inf = {problem.f_inf:g}", 1)
    if not (math.isfinite(f_inf_estimate) and problem.f_inf <= f_inf_estimate <= loss):
        raise ValueError(f"f_inf_estimate={f_inf_estimate!r} must lie in [f_inf, F(x_1)] = "
                         f"[{problem.f_inf:g}, {loss:g}]")
    value = loss - f_inf_estimate
    return Estimate("Delta", value, value, upper,
                    f"F(x_1) - f_inf with f_inf estimated by a reference run "
                    f"({f_inf_estimate:.6g}); upper: the problem's f_inf = {problem.f_inf:g}", 1)


# ---------------------------------------------------------------------- points


def trajectory(problem: Problem, x1, *, eta: float, steps: int, points: int) -> torch.Tensor:
    """``points`` points [points, dim] evenly spaced (x_1 included) along ``steps``
    full-gradient descent steps of size ``eta`` from ``x1``: where to estimate."""
    x = _points(problem, x1)[0]
    steps, points = _count("steps", steps), _count("points", points)
    if points > steps + 1:
        raise ValueError(f"points={points} must be at most steps + 1 = {steps + 1}")
    if not (math.isfinite(eta) and eta > 0):
        raise ValueError(f"eta={eta!r} must be finite and > 0")
    keep = set(torch.linspace(0, steps, points).round().long().tolist())
    out = [x] if 0 in keep else []
    for k in range(1, steps + 1):
        x = x - eta * problem.grad(x)
        if k in keep:
            out.append(x)
    result = torch.stack(out)
    if not torch.isfinite(result).all():
        raise ValueError(f"eta={eta!r}: the trajectory diverged")
    return result
