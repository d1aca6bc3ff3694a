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
- :func:`quadratic_model`: the problem's local quadratic model (:class:`QuadraticModel`)
  around a reference minimiser: the Hessian's spectrum, where the start, the groups'
  gradient offsets (their heterogeneity) and the gradient noise lie in it. What the
  choosers' calibrated predictions are built from (exact for a quadratic).

Everything is vectorised over points, start vectors, samples and workers (one batched
call each); only the power iteration and the reference run loop over their steps.
Randomness comes only from the ``torch.Generator`` passed in: the same seed gives the same
numbers, bit for bit.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
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


# ---------------------------------------------------------------------- the local quadratic model

#: up to this dimension the Hessian is formed whole (one batched Hessian-vector product per
#: column) and diagonalised; above it, Lanczos gives LANCZOS_STEPS Ritz pairs
FULL_HESSIAN_MAX = 512
LANCZOS_STEPS = 40


@dataclass(frozen=True)
class QuadraticModel:
    """A problem's local quadratic model around a reference point x_ref (a minimiser, or
    close to one): f(x) ~ f_ref + 0.5 (x - x_ref)^T H (x - x_ref), each group's gradient
    grad f_i(x) ~ h_i + H (x - x_ref), and stochastic gradients with noise of covariance
    Sigma_i around grad f_i. Everything is given per *node*: an eigenvalue of H (exact for
    a full Hessian, a Ritz value of Lanczos otherwise, where one more node per vector holds
    what the Ritz vectors miss, at its Rayleigh quotient).

    - ``curvature`` [J]: the nodes' eigenvalues;
    - ``gram`` [J, V, V]: per node, the inner products of the projections of the V vectors
      (x_1 - x_ref, h_1, ..., h_G): the start and the groups' gradient offsets (V = 1 when
      the groups share the objective);
    - ``noise`` [G, J]: per group and node, the variance of one client's stochastic gradient
      at x_ref (the mean over the group's clients), summing over nodes to sigma_i^2;
    - ``f_ref``: F(x_ref); ``method``: how it was obtained.

    It is a prediction model (calibrated on the instance), not a certificate."""

    curvature: np.ndarray
    gram: np.ndarray
    noise: np.ndarray
    f_ref: float
    method: str

    @property
    def start_energy(self) -> np.ndarray:
        """||x_1 - x_ref||^2 per node, [J]."""
        return self.gram[:, 0, 0]

    @property
    def heterogeneous(self) -> bool:
        """Whether the groups' gradients at x_ref differ (V > 1 and an offset is nonzero)."""
        return self.gram.shape[1] > 1 and bool(np.any(self.gram[:, 1:, 1:] != 0))


def exact_quadratic_model(problem, x1, groups: int = 1) -> QuadraticModel:
    """The model of a ``sim.problems.Quadratic`` (every constant exact): its eigenvalues,
    the start's eigen-coordinates, noise sigma^2 / dim per eigen-direction (isotropic),
    the same objective in every one of ``groups`` groups."""
    lam = problem.eigenvalues.cpu().numpy()
    x = _points(problem, x1)[0]
    start = (problem.eigvecs.T @ (x - problem.x_star)).cpu().numpy()
    noise = np.full((groups, lam.size), problem.sigma**2 / problem.dim)
    return QuadraticModel(lam, start[:, None, None] ** 2, noise, float(problem.f_inf),
                          "exact: the quadratic's eigen-decomposition and isotropic noise")


#: the fast model (:func:`quadratic_model`'s default): with a ``subsample``, its reference run
#: ends with REFINE full-data steps warm-started from the subsample's end; Lanczos takes
#: FAST_LANCZOS steps (STEP_LANCZOS for the step at x_1); the noise node's Rayleigh quotient is
#: estimated from PROBES random sign combinations of the noise vectors (Hutchinson), not one
#: Hessian-vector product per vector
REFINE = 10
FAST_LANCZOS, STEP_LANCZOS, PROBES = 24, 10, 8


def quadratic_model(problem: Problem, x1, generator: torch.Generator, *, sizes=None,
                    steps: int = 300, samples: int = 64, fast: bool = True,
                    subsample: int | None = None, curvature: float | None = None) -> QuadraticModel:
    """The local quadratic model of any ``sim`` problem (:class:`QuadraticModel`), estimated:

    - x_ref: ``steps`` gradient descent steps from x_1 with step 1 / (the largest curvature
      at x_1), each step halved while it raises F;
    - H at x_ref: whole (dimension up to FULL_HESSIAN_MAX) and diagonalised, else Lanczos
      from x_1 - x_ref with full re-orthogonalisation (Gauss quadrature of the start's
      spectral measure), each other vector's remainder outside the Ritz vectors a node of
      its own at its Rayleigh quotient;
    - the offsets h_i = grad f_i(x_ref) - grad F(x_ref) of the groups of ``sizes``
      (``problem.group_grads``; none without ``sizes`` or where every group has F);
    - the noise: ``samples`` stochastic gradients per client at x_ref (each client around
      its own gradient when the problem holds clients), projected on the nodes.

    ``fast`` (the default): Hessian-vector products by reverse mode (no forward-mode
    transform to load), the descent's value and gradient in one pass, the step at x_1 from
    STEP_LANCZOS Lanczos steps, the noise node's quotient from PROBES combinations (module
    constants); with ``subsample``, on a problem that holds more samples than that
    (``features``, ``labels``, ``weighted_loss``: ``sim.neural``), the descent and the
    Hessian on that many samples drawn without replacement (weighted: an unbiased loss),
    the descent finished by REFINE full-data steps warm-started from the subsample's end
    (for a network whose gradient is costly, a CNN); ``curvature``: the largest curvature at
    x_1 where the caller has it already (:func:`top_curvature`; the reference run's step is
    its inverse). ``fast=False``: every step on the whole data,
    the step by :func:`lipschitz` and every noise vector's Rayleigh quotient exactly (the
    reference the fast model's error is measured against: ``benchmarks/bench_choosers_hfl.py``).

    Exact (:func:`exact_quadratic_model`) for a ``sim.problems.Quadratic`` with one
    objective for every group."""
    from fedbound.sim.problems import Quadratic

    groups = 1 if sizes is None else len(sizes)
    x = _points(problem, x1)[0]
    if isinstance(problem, Quadratic) and not hasattr(problem, "M"):
        return exact_quadratic_model(problem, x, groups)
    samples, steps = _count("samples", samples, 2), _count("steps", steps)
    if fast:
        objective = _Objective(problem, generator, subsample)
        eta = 1.0 / (curvature or objective.top_curvature(x, generator))
        ref = objective.descend(x, eta, steps)
        if objective.subsample is not None:
            ref = _Objective(problem, generator, None).descend(ref, eta, REFINE)
            objective.at(ref)
        how = (f"x_ref after {steps} gradient steps on {objective.subsample} samples and "
               f"{REFINE} on all" if objective.subsample is not None else
               f"x_ref after {steps} gradient steps")
        hvp = objective.hvp
    else:
        ref = _descend(problem, x, generator, steps)
        how = f"x_ref after {steps} gradient steps"

        def hvp(v):
            return hessian_vector_product(problem, ref.expand_as(v).contiguous(), v)
    offsets = _offsets(problem, ref, sizes)
    noise_vectors, noise_groups = _noise_vectors(problem, ref, sizes, samples, generator)
    vectors = torch.cat([(x - ref)[None], offsets]) if offsets is not None else (x - ref)[None]
    if problem.dim <= FULL_HESSIAN_MAX:
        hess = hvp(torch.eye(problem.dim, dtype=DTYPE, device=x.device))
        lam, vecs = torch.linalg.eigh(0.5 * (hess + hess.T))
        proj, noise_proj = vectors @ vecs, noise_vectors @ vecs
        method = "estimated: Hessian at x_ref diagonalised"
    else:
        lam, vecs, proj, noise_proj = _lanczos_nodes(
            hvp, vectors, noise_vectors, FAST_LANCZOS if fast else LANCZOS_STEPS,
            (PROBES, generator) if fast else None)
        method = f"estimated: Lanczos ({vecs.shape[1]} Ritz pairs) at x_ref"
    gram = torch.einsum("aj,bj->jab", proj, proj)
    noise = torch.stack([noise_proj[noise_groups == g].square().mean(0) for g in range(groups)])
    return QuadraticModel(lam.cpu().numpy(), gram.cpu().numpy(), noise.cpu().numpy(),
                          float(problem.loss(ref)),
                          f"{method}{' (fast)' if fast else ''}, {how} from x_1, noise from "
                          f"{samples} stochastic gradients per client")


def top_curvature(problem: Problem, x, generator: torch.Generator, *,
                  subsample: int | None = None) -> float:
    """The largest curvature of F at ``x`` (the largest Hessian eigenvalue): the top Ritz
    value of STEP_LANCZOS Lanczos steps from a Gaussian start, by reverse-mode Hessian-vector
    products, plus its residual (an upper end, as :func:`lipschitz`'s ``upper``); with
    ``subsample``, on that many samples of a problem that holds more (see
    :func:`quadratic_model`). What the choosers' step grids start from, and the fast
    model's reference run takes as its step's inverse."""
    x = _points(problem, x)[0]
    return _Objective(problem, generator, subsample).top_curvature(x, generator)


class _Objective:
    """F, or its unbiased estimate on ``subsample`` samples (drawn without replacement from
    ``generator``, each weighted n / m) of a problem that holds more (``features``,
    ``labels``, ``weighted_loss`` and per-sample weights, as ``sim.neural``'s problems do):
    its value and gradient in one pass, Hessian-vector products by reverse mode, the step of
    a descent and its largest curvature."""

    def __init__(self, problem: Problem, generator: torch.Generator, subsample: int | None):
        self.problem, self.subsample = problem, None
        weights = getattr(problem, "sample_weights", getattr(problem, "uniform", None))
        data = hasattr(problem, "weighted_loss") and weights is not None
        if data and subsample is not None and problem.n > subsample:
            idx = torch.randperm(problem.n, generator=generator, device=generator.device)[:subsample]
            idx = idx.to(problem.device)
            inputs, targets = problem.features[idx], problem.labels[idx]
            w = weights[idx] * (problem.n / subsample)
            self.subsample = subsample
        elif data:
            inputs, targets, w = problem.features, problem.labels, weights
        if data:  # a network's loss: its gradient is torch's (sim.neural differentiates it too)
            def loss(z):
                return problem.weighted_loss(z, inputs, targets, w)

            def value_and_grad(z, graph=False):
                with torch.enable_grad():
                    z = z if z.requires_grad else z.detach().requires_grad_(True)
                    f = loss(z)
                    return torch.autograd.grad(f, z, create_graph=graph)[0], f.detach()
        else:  # any other problem: its own gradient (its loss may be written for its value only)
            def loss(z):
                return problem.loss(z)

            def value_and_grad(z, graph=False):
                return problem.grad(z), loss(z.detach())
        self.loss, self._value_and_grad = loss, value_and_grad

    def value_and_grad(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(grad F(x), F(x)): one forward and backward pass for a network."""
        g, f = self._value_and_grad(x)
        return g.detach(), f

    def at(self, x: torch.Tensor) -> None:
        """Where :meth:`hvp` takes the Hessian from now on (the gradient's graph kept)."""
        with torch.enable_grad():
            self._z = x.detach().requires_grad_(True)
            self._g = self._value_and_grad(self._z, graph=True)[0]

    def hvp(self, v: torch.Tensor) -> torch.Tensor:
        """H v for v [d] or [k, d]: the reverse-mode derivative of the gradient (H symmetric;
        no forward-mode transform)."""
        with torch.enable_grad():
            (hv,) = torch.autograd.grad(self._g, self._z, v, retain_graph=True,
                                        is_grads_batched=v.ndim == 2)
        return hv.detach()

    def top_curvature(self, x: torch.Tensor, generator: torch.Generator) -> float:
        """The largest curvature at x: the top Ritz value of STEP_LANCZOS Lanczos steps from a
        Gaussian start plus its residual (an upper end, as :func:`lipschitz`'s)."""
        self.at(x)
        start = randn((x.numel(),), generator, x.device)
        theta, s, beta, _ = _lanczos(self.hvp, start, STEP_LANCZOS)
        residual = abs(beta * float(s[-1, -1])) if beta is not None else 0.0
        return float(theta[-1]) + residual

    def descend(self, x: torch.Tensor, eta: float, steps: int) -> torch.Tensor:
        """``steps`` gradient steps from x at ``eta``, each halved while it raises F (the value
        and the gradient of the point reached in one pass); leaves the Hessian at the end."""
        g, f = self.value_and_grad(x)
        for _ in range(steps):
            while True:
                y = x - eta * g
                gy, fy = self.value_and_grad(y)
                if fy <= f or eta < 1e-12:
                    break
                eta /= 2
            x, f, g = y, fy, gy
        self.at(x)
        return x


def _descend(problem: Problem, x: torch.Tensor, generator: torch.Generator, steps: int) -> torch.Tensor:
    """x_ref: gradient descent from x at 1 / (the curvature at x), halving a step that
    raises F (a non-convex problem's curvature grows away from x_1)."""
    eta = 1.0 / lipschitz(problem, x, generator=generator, steps=30, starts=2).upper
    f = problem.loss(x)
    for _ in range(steps):
        while True:
            y = x - eta * problem.grad(x)
            fy = problem.loss(y)
            if fy <= f or eta < 1e-12:
                break
            eta /= 2
        x, f = y, fy
    return x


def _offsets(problem: Problem, ref: torch.Tensor, sizes) -> torch.Tensor | None:
    """h_i = grad f_i(x_ref) - grad F(x_ref) per group [G, d], or None when the problem
    gives no group objectives or every group has F."""
    if sizes is None or not hasattr(problem, "group_grads"):
        return None
    counts = torch.as_tensor(list(sizes), device=ref.device)
    per_group = problem.group_grads(ref.expand(len(sizes), ref.numel()), counts)
    h = per_group - problem.grad(ref)
    return None if bool((h == 0).all()) else h


def _noise_vectors(problem: Problem, ref: torch.Tensor, sizes, samples: int,
                   generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise samples at x_ref [n, d] and the group of each [n]: every client's stochastic
    gradient around its own gradient when the problem holds clients (``M``,
    ``worker_grads``), else the problem's around grad F (every group the same)."""
    d = ref.numel()
    groups = 1 if sizes is None else len(sizes)
    if hasattr(problem, "M") and hasattr(problem, "worker_grads"):
        M = problem.M
        draws = problem.gradient_sampler((samples, M, d), generator)(ref.expand(samples, M, d).contiguous())
        own = problem.worker_grads(ref.expand(M, d).contiguous())
        vectors = (draws - own).reshape(-1, d)
        counts = [M] if sizes is None else list(sizes)
        if sum(counts) != M:
            raise ValueError(f"sizes={list(sizes)} must sum to the problem's {M} clients")
        group_of = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
        return vectors, group_of.repeat(samples)
    draws = problem.stochastic_grad(ref.expand(samples * groups, d).contiguous(), generator)
    return draws - problem.grad(ref), torch.arange(groups).repeat_interleave(samples)


def _lanczos(hvp, start: torch.Tensor, steps: int):
    """Lanczos from ``start`` with full re-orthogonalisation, at most ``steps`` steps (fewer
    where the Krylov space closes): the Ritz values (ascending), their eigenvectors ``s`` in
    the Lanczos basis, the last beta (None when the space closed) and the basis [k, d]."""
    q = start / start.norm().clamp(min=torch.finfo(DTYPE).tiny)
    basis, alpha, beta = [q], [], []
    last = None
    for k in range(min(steps, start.numel())):
        w = hvp(basis[-1])
        alpha.append(float(w @ basis[-1]))
        Q = torch.stack(basis)
        w = w - Q.T @ (Q @ w)
        w = w - Q.T @ (Q @ w)
        b = float(w.norm())
        if b < 1e-10 * max(1.0, abs(alpha[0])):
            break
        if k == min(steps, start.numel()) - 1:
            last = b
            break
        beta.append(b)
        basis.append(w / b)
    T = torch.diag(torch.tensor(alpha, dtype=DTYPE)) + torch.diag(torch.tensor(beta, dtype=DTYPE), 1) \
        + torch.diag(torch.tensor(beta, dtype=DTYPE), -1)
    theta, s = torch.linalg.eigh(T)
    return theta, s, last, torch.stack(basis)


def _lanczos_nodes(hvp, vectors: torch.Tensor, noise_vectors: torch.Tensor, steps: int,
                   probes=None):
    """Ritz pairs of H(x_ref) (``hvp``: v -> H v, for [d] or [k, d]) by ``steps`` Lanczos steps
    from vectors[0], and the projections of ``vectors`` and ``noise_vectors`` on them, with one
    node more per vector (and one for the noise) holding its remainder at its Rayleigh
    quotient: exactly, or, with ``probes`` = (count, generator), the noise's from that many
    random sign combinations of the remainders (Hutchinson: unbiased for the sum of their
    quadratic forms)."""
    theta, s, _, Q = _lanczos(hvp, vectors[0], steps)
    ritz = Q.T @ s.to(Q.device)                                      # [d, k]
    proj, noise_proj = vectors @ ritz, noise_vectors @ ritz
    rests = vectors - proj @ ritz.T
    noise_rest = noise_vectors - noise_proj @ ritz.T
    quotients = [float(r @ hvp(r)) / max(float(r @ r), 1e-300) for r in rests]
    if probes is None:
        hv = hvp(noise_rest)
        quotients.append(float((noise_rest * hv).sum() / (noise_rest.square().sum()).clamp(min=1e-300)))
    else:
        count, generator = probes
        signs = torch.randint(0, 2, (count, noise_rest.shape[0]), generator=generator,
                              device=generator.device).to(noise_rest.device, DTYPE) * 2 - 1
        z = signs @ noise_rest                                        # [count, d]
        quotients.append(float((z * hvp(z)).sum() / count / noise_rest.square().sum().clamp(min=1e-300)))
    extra = len(quotients)
    ref_device = vectors.device
    lam = torch.cat([theta.to(ref_device), torch.tensor(quotients, dtype=DTYPE, device=ref_device)])
    V = vectors.shape[0]
    proj_full = torch.zeros(V, theta.numel() + extra, dtype=DTYPE, device=ref_device)
    proj_full[:, : theta.numel()] = proj
    for i in range(V):
        proj_full[i, theta.numel() + i] = rests[i].norm()
    noise_full = torch.zeros(noise_vectors.shape[0], theta.numel() + extra, dtype=DTYPE,
                             device=ref_device)
    noise_full[:, : theta.numel()] = noise_proj
    noise_full[:, -1] = noise_rest.norm(dim=-1)
    return lam, ritz, proj_full, noise_full
