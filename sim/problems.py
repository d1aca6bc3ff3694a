"""Objectives whose constants (Castiglia et al. 2021, Assumption 1) are known exactly.

Every problem exposes ``dim``, ``L``, ``beta``, ``sigma``, ``G``, ``f_inf`` and batched
``loss``, ``grad`` and ``stochastic_grad`` over arbitrary leading dimensions: ``x`` has
shape ``[..., dim]``. The constants are the ones the theorems consume:

- 1a, L-Lipschitz gradient: ``||grad F(x) - grad F(y)|| <= L ||x - y||``.
- 1b, ``F(x) >= f_inf``.
- 1c, ``E[g(x)] = grad F(x)``.
- 1d, ``E||g(x) - grad F(x)||^2 <= beta ||grad F(x)||^2 + sigma^2``.

Everything is float64. Randomness comes only from the ``torch.Generator`` passed in: the
draws are made on the generator's own device and then moved to the device of ``x``, so a
CPU generator gives the same numbers whatever device the problem lives on.
"""

from __future__ import annotations

import copy
import math
import mmap
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch

DTYPE = torch.float64


def checked_device(device) -> torch.device:
    """``device`` as a ``torch.device``, or ValueError naming it: a name torch does not know,
    or CUDA on a machine without it."""
    try:
        checked = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r}: not a device name torch knows (cpu, cuda, "
                         "cuda:1, ...)") from None
    if checked.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r}: this machine has no CUDA device")
    return checked


def replica_steps(name: str, value, replicas: int, device,
                  configurations: int | None = None) -> float | torch.Tensor:
    """A step size as a run takes it: a number, finite and > 0, as a float; or one step per
    replica (a grid of steps in one run), each finite and > 0, as a [replicas, 1, 1] tensor on
    ``device``. ``name``: the argument, named in the error. For a batch of ``configurations``
    = C: a number (a float), or steps that broadcast to [C, replicas] (one per replica [R],
    per configuration [C, 1], per configuration and replica [C, R]) as a [C, R, 1, 1] tensor."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name}={value!r} must be finite and > 0")
        return float(value)
    steps = torch.as_tensor(value, dtype=DTYPE)
    if configurations is None:
        if steps.shape != (replicas,):
            raise ValueError(f"{name} must be a number or one step per replica ({replicas}), got "
                             f"shape {tuple(steps.shape)}")
    else:
        try:
            steps = steps.expand(configurations, replicas).contiguous()
        except RuntimeError:
            raise ValueError(f"{name} must be a number, one step per replica ({replicas}) or per "
                             f"configuration and replica ([{configurations}, {replicas}] or "
                             f"[{configurations}, 1]), got shape {tuple(steps.shape)}") from None
    if not (torch.isfinite(steps) & (steps > 0)).all():
        raise ValueError(f"{name}: every step must be finite and > 0")
    return steps.to(device)[..., None, None]


@contextmanager
def one_thread():
    """torch on one thread inside (restored after): runs of many small tensor operations (a
    chooser's candidates, a reproduction's configurations) only slow down with intra-op
    threads, by a factor 10 on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class CommonDraws:
    """Common random numbers for a batch of C configurations: passed where this module's draw
    helpers (:func:`rand`, :func:`randn`, :func:`randint`, :func:`rand_`, :func:`randn_`,
    :func:`randint_`) take a generator, it makes a draw of shape ``[C, *rest]`` one draw of shape
    ``rest`` from ``generator``, the same numbers for every configuration c: exactly the draw
    a run of one configuration makes with ``generator``.

    A batched run (``sim.hfl.run_hfl``, ``sim.mllsgd.run_mllsgd``, ``sim.tdcd.run_tdcd`` with
    knobs given per configuration) stacks its configurations' states configuration-major,
    [C, R, ...], and every configuration takes the draws of its run alone. Trace c of the
    batch is then the trace of configuration c run alone:

    - bit for bit, on one intra-op thread, when every matrix product of the run alone has at
      least 3 rows (R >= 3 replicas: MKL computes a row of a product of 1 or 2 rows in
      another order than a row of a larger product) and either the problem's arithmetic is
      sums and products only (``Quadratic``) or R is a multiple of 16 (torch's CPU kernels
      take 16 float64 at a time and leave the rest of a tensor to scalar code, whose exp,
      log1p and sigmoid may differ from the vectorised ones in the last bit; with 16 | R a
      configuration's part of every tensor is whole chunks wherever it sits in the batch);
    - otherwise up to round-off, on the same draws (relative differences of an ulp or two
      per step: below 1e-12 over the runs of tests/test_sim_batch.py).

    The choosers' paired stages (32 and 16 replicas) are bit for bit."""

    def __init__(self, generator: torch.Generator, configurations: int):
        self.generator, self.configurations = generator, int(configurations)

    @property
    def device(self) -> torch.device:
        return self.generator.device

    def rest(self, shape: Sequence[int]) -> tuple[int, ...]:
        """``shape`` without its leading configuration axis (which must be C)."""
        shape = tuple(shape)
        if not shape or shape[0] != self.configurations:
            raise ValueError(f"a draw of common random numbers needs the configuration axis "
                             f"({self.configurations}) first, got shape {list(shape)}")
        return shape[1:]

    def repeated(self, draw: torch.Tensor) -> torch.Tensor:
        """``draw`` ``[*rest]`` as a new ``[C, *rest]`` tensor, the same numbers in every c."""
        return draw.expand(self.configurations, *draw.shape).contiguous()

    def fill(self, out: torch.Tensor, draw: Callable[[torch.Tensor, torch.Generator], object]
             ) -> torch.Tensor:
        """``out`` ``[C, *rest]`` with ``draw(out[0], generator)`` copied into every c."""
        self.rest(out.shape)
        draw(out[0], self.generator)
        out[1:].copy_(out[0].expand_as(out[1:]))
        return out


def rand(shape: Sequence[int], generator: torch.Generator | CommonDraws, device) -> torch.Tensor:
    """Uniform draws on [0, 1) from ``generator`` (on its device), moved to ``device``."""
    if isinstance(generator, CommonDraws):
        return generator.repeated(rand(generator.rest(shape), generator.generator, device))
    draws = torch.rand(tuple(shape), generator=generator, device=generator.device, dtype=DTYPE)
    return draws.to(device)


def randn(shape: Sequence[int], generator: torch.Generator | CommonDraws, device) -> torch.Tensor:
    """Standard normal draws from ``generator`` (on its device), moved to ``device``."""
    if isinstance(generator, CommonDraws):
        return generator.repeated(randn(generator.rest(shape), generator.generator, device))
    draws = torch.randn(tuple(shape), generator=generator, device=generator.device, dtype=DTYPE)
    return draws.to(device)


def randint(high: int, shape: Sequence[int], generator: torch.Generator | CommonDraws,
            device) -> torch.Tensor:
    """Uniform integers in [0, high) from ``generator`` (on its device), moved to ``device``."""
    if isinstance(generator, CommonDraws):
        return generator.repeated(randint(high, generator.rest(shape), generator.generator, device))
    draws = torch.randint(high, tuple(shape), generator=generator, device=generator.device)
    return draws.to(device)


def rand_(out: torch.Tensor, generator: torch.Generator | CommonDraws) -> torch.Tensor:
    """``out`` filled in place with the numbers ``rand(out.shape, generator, ...)`` gives."""
    if isinstance(generator, CommonDraws):
        return generator.fill(out, rand_)
    if out.device == generator.device:
        return out.uniform_(generator=generator)
    return out.copy_(rand(out.shape, generator, generator.device))


def randn_(out: torch.Tensor, generator: torch.Generator | CommonDraws) -> torch.Tensor:
    """``out`` filled in place with the numbers ``randn(out.shape, generator, ...)`` gives."""
    if isinstance(generator, CommonDraws):
        return generator.fill(out, randn_)
    if out.device == generator.device:
        return out.normal_(generator=generator)
    return out.copy_(randn(out.shape, generator, generator.device))


def randint_(out: torch.Tensor, high: int, generator: torch.Generator | CommonDraws) -> torch.Tensor:
    """``out`` (int64) filled in place with the numbers ``randint(high, out.shape, ...)`` gives."""
    if isinstance(generator, CommonDraws):
        return generator.fill(out, lambda part, g: randint_(part, high, g))
    if out.device == generator.device:
        return torch.randint(high, tuple(out.shape), generator=generator, out=out)
    return out.copy_(randint(high, out.shape, generator, generator.device))


HUGE_PAGE_MIN_BYTES = 8 << 20


def empty_large(shape: Sequence[int], dtype: torch.dtype, device) -> torch.Tensor:
    """``torch.empty(shape)``, except that a CPU buffer of at least ``HUGE_PAGE_MIN_BYTES``
    lives in an anonymous mapping advised ``MADV_HUGEPAGE`` (where the system offers it):
    transparent huge pages, so that a gather at random rows of a large data set, or a pass
    over it, misses the TLB far less (torch's allocator does this only when the process
    starts with ``THP_MEM_ALLOC_ENABLE=1``). The numbers stored are the same either way."""
    shape, device = tuple(shape), torch.device(device)
    numel = math.prod(shape)
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if device.type != "cpu" or nbytes < HUGE_PAGE_MIN_BYTES or not hasattr(mmap, "MADV_HUGEPAGE"):
        return torch.empty(shape, dtype=dtype, device=device)
    buffer = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        buffer.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # no transparent huge pages in this kernel: ordinary pages
        pass
    return torch.frombuffer(buffer, dtype=dtype, count=numel).view(shape)


def huge_paged(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a copy of it in :func:`empty_large`'s memory where that is huge pages."""
    if t.device.type != "cpu" or t.nbytes < HUGE_PAGE_MIN_BYTES:
        return t
    return empty_large(t.shape, t.dtype, t.device).copy_(t)


#: bytes of the mini-batch rows :meth:`LogisticRegression.gradient_sampler` gathers at a
#: time on the CPU (a block of models; a few hundred KiB more or less change little)
GATHER_BLOCK_BYTES = 1 << 20
#: float64 elements that torch's CPU element-wise kernels take at a time (two AVX-512
#: vectors, four AVX2 ones); the rest of a tensor goes through their scalar code, whose
#: sigmoid may differ from the vectorised one in the last bit
CHUNK = 16


def _descent_weights(margins: torch.Tensor, labels: torch.Tensor, minus_batch: torch.Tensor) -> None:
    """``margins`` (a^T x, [M, 1, B]) replaced in place by -y sigmoid(-y a^T x) / batch, the
    weights of the rows in the mini-batch gradient of the logistic loss."""
    torch.sigmoid(margins.mul_(labels).neg_(), out=margins).mul_(labels).div_(minus_batch)


def scalar(value: float) -> torch.Tensor:
    """``value`` as a 0-dim float64 CPU tensor: ``t.div_(scalar(c))`` gives the numbers of
    ``t.div_(c)`` (a Python integer is converted to float64 either way) on any device, with
    less dispatch than a Python number (a few microseconds a call on the CPU)."""
    return torch.tensor(float(value), dtype=DTYPE)


def softplus(t: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(t))`` without overflow or the cut-off of ``torch.nn.functional.softplus``."""
    return t.clamp(min=0) + torch.log1p(torch.exp(-t.abs()))


def softplus_(out: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """:func:`softplus` of ``t`` written into ``out``, which holds ``|t|`` on entry (the same
    numbers, fewer temporaries)."""
    return out.neg_().exp_().log1p_().add_(t.clamp(min=0))


class Problem(ABC):
    """Common interface of the simulator's objectives F (Castiglia et al. 2021, eq. (1)).

    Attributes: ``dim`` (n), ``L`` (1a), ``beta`` and ``sigma`` (1d), ``G`` (bound on the
    norm of every per-sample gradient, ``None`` where no such bound exists) and ``f_inf``
    (1b: exact infimum or certified lower bound, each subclass says which).
    """

    dim: int
    L: float
    beta: float
    sigma: float
    G: float | None
    f_inf: float

    @abstractmethod
    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """F(x), shape ``[...]`` for ``x`` of shape ``[..., dim]``."""

    @abstractmethod
    def grad(self, x: torch.Tensor) -> torch.Tensor:
        """True gradient of F, shape ``[..., dim]``."""

    @abstractmethod
    def stochastic_grad(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One unbiased sample g(x) per leading index (1c), shape ``[..., dim]``."""

    def loss_and_grad_sq(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(F(x), ||grad F(x)||^2)``, shape ``[...]`` each: what a trace records per
        iteration. A subclass may share work between the two (the same numbers)."""
        return self.loss(x), self.grad(x).square().sum(-1)

    def recorder(self, shape: Sequence[int], *, grad: bool = True
                 ) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]:
        """``x -> (F(x), ||grad F(x)||^2)`` for ``x`` of ``shape``, the numbers of
        :meth:`loss_and_grad_sq` (``(F(x), None)``, those of :meth:`loss`, with
        ``grad=False``), for a run loop that records every iteration. A subclass may write
        into buffers it reuses, so the result is valid until the next call."""
        if grad:
            return self.loss_and_grad_sq
        return lambda x: (self.loss(x), None)

    def gradient_sampler(self, shape: Sequence[int],
                         generator: torch.Generator) -> Callable[[torch.Tensor], torch.Tensor]:
        """``x -> g(x)`` for ``x`` of ``shape``: the draws and the numbers of
        :meth:`stochastic_grad`, for a run loop that calls it every iteration. A subclass
        may write into buffers it reuses, so the result is valid until the next call."""
        return lambda x: self.stochastic_grad(x, generator)

    def mean_gradient_sampler(self, shape: Sequence[int], counts: torch.Tensor,
                              generator: torch.Generator) -> Callable[[torch.Tensor], torch.Tensor]:
        """``(y, grad_y) -> (1/c) sum_{k < c} g_k(y)``: at each model ``y`` [..., d] the mean
        of ``c = counts`` independent stochastic gradients (``counts`` broadcasts against
        ``y``'s leading dimensions), drawn as :meth:`stochastic_grad` on ``y`` expanded to
        ``shape`` = [..., n, d] with n >= max(counts) (the draws beyond c are unused).
        ``grad_y``, if not None, is :meth:`grad` at ``y``, which a subclass may reuse."""
        shape = tuple(shape)
        sample = self.gradient_sampler(shape, generator)
        counts = torch.as_tensor(counts, device=self.device)
        n = shape[-2]
        mask = (torch.arange(n, device=counts.device) < counts[..., None]).to(DTYPE)[..., None]
        total = counts.to(DTYPE)[..., None]
        every = bool((counts == n).all())

        def mean(y: torch.Tensor, grad_y: torch.Tensor | None = None) -> torch.Tensor:
            g = sample(y[..., None, :].expand(shape))
            return (g if every else g * mask).sum(dim=-2) / total

        return mean

    def group_grads(self, y: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
        """grad f_i at the group models ``y`` [..., G, d], f_i the objective of group i, whose
        clients are ``sizes[i]`` (Ali & Arafa 2025, eq. (1)). Here every client samples the
        same F, so f_i = F: :meth:`grad` (a problem whose clients hold their own data,
        ``sim.clients.ClientProblem``, overrides it)."""
        return self.grad(y)

    def delta(self, x1: torch.Tensor) -> float:
        """``F(x1) - f_inf``, the numerator of the first term of (13) (Castiglia et al. 2021, Theorem 1)."""
        x1 = torch.as_tensor(x1, dtype=DTYPE, device=self.device)
        return float(self.loss(x1)) - self.f_inf

    @property
    def device(self) -> torch.device:
        """Device holding the problem's tensors."""
        return next(v.device for v in vars(self).values() if isinstance(v, torch.Tensor))

    def to(self, device) -> Problem:
        """A copy of the problem with every tensor attribute on ``device``."""
        moved = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor):
                setattr(moved, name, value.to(device))
        return moved


def _spd_eigendecomposition(hessian: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validated ascending eigenvalues and eigenvectors of a diagonal vector or an SPD matrix."""
    if hessian.numel() == 0 or not torch.isfinite(hessian).all():
        raise ValueError("hessian must be non-empty and finite")
    if hessian.ndim == 1:
        eigenvalues, order = torch.sort(hessian)
        eigvecs = torch.eye(hessian.numel(), dtype=DTYPE, device=hessian.device)[:, order]
    elif hessian.ndim == 2 and hessian.shape[0] == hessian.shape[1]:
        scale = hessian.abs().max().clamp(min=1.0)
        if not torch.allclose(hessian, hessian.T, rtol=0.0, atol=1e-12 * float(scale)):
            raise ValueError("hessian must be symmetric: hessian != hessian.T")
        eigenvalues, eigvecs = torch.linalg.eigh(0.5 * (hessian + hessian.T))
    else:
        raise ValueError(
            f"hessian must be a vector of eigenvalues or a square matrix, got shape "
            f"{tuple(hessian.shape)}"
        )
    if eigenvalues[0] <= 0:
        raise ValueError(
            f"hessian must be positive definite: smallest eigenvalue {float(eigenvalues[0])} <= 0"
        )
    return eigenvalues, eigvecs


class Quadratic(Problem):
    """F(x) = 0.5 (x - x_star)^T A (x - x_star) + f_star with A symmetric positive definite.

    Noise: g(x) = grad F(x) + eps with eps ~ N(0, (sigma^2/dim) I), independent of x, so
    E||eps||^2 = sigma^2 exactly and Assumption 1d holds with
    equality for beta = 0. ``L`` and ``mu`` are the extreme eigenvalues of A (1a exact),
    ``f_inf = f_star`` is the exact minimum (1b), ``G = None`` (gradients are unbounded).
    ``eigenvalues`` (ascending) and ``eigvecs`` satisfy A = eigvecs diag(eigenvalues)
    eigvecs^T, for exact-expectation computations in the eigenbasis.

    ``hessian`` is either the vector of A's diagonal or the full matrix A.
    """

    def __init__(self, hessian, x_star=None, *, f_star: float = 0.0, sigma: float = 0.0,
                 device=None):
        hessian = torch.as_tensor(hessian, dtype=DTYPE, device=device)
        self.eigenvalues, self.eigvecs = _spd_eigendecomposition(hessian)
        self.dim = int(self.eigenvalues.numel())
        self.hessian = torch.diag(hessian) if hessian.ndim == 1 else 0.5 * (hessian + hessian.T)
        if x_star is None:
            x_star = torch.zeros(self.dim, dtype=DTYPE)
        self.x_star = torch.as_tensor(x_star, dtype=DTYPE, device=hessian.device)
        if self.x_star.shape != (self.dim,):
            raise ValueError(
                f"x_star must have shape ({self.dim},), got {tuple(self.x_star.shape)}"
            )
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise ValueError(f"sigma={sigma} must be finite and >= 0")
        if not math.isfinite(f_star):
            raise ValueError(f"f_star={f_star} must be finite")
        self.sigma = float(sigma)
        self.beta = 0.0
        self.L = float(self.eigenvalues[-1])
        self.mu = float(self.eigenvalues[0])
        self.G = None
        self.f_inf = float(f_star)
        self._shift = self.x_star @ self.hessian  # x_star A, the constant term of grad

    @classmethod
    def random(cls, dim: int, L: float, mu: float, sigma: float, generator: torch.Generator,
               *, rotate: bool = False, f_star: float = 0.0) -> Quadratic:
        """A quadratic with eigenvalues log-uniform in [mu, L], both endpoints included.

        The smallest eigenvalue is exactly ``mu`` and the largest exactly ``L``; the other
        ``dim - 2`` are ``exp(U(log mu, log L))``. With ``rotate=True`` the Hessian is
        Q diag(eigenvalues) Q^T for a Haar-random orthogonal Q, and ``L``/``mu`` are then
        the extreme eigenvalues of that matrix (equal to the requested ones up to rounding).
        ``x_star`` ~ N(0, I). All draws come from ``generator``.
        """
        if dim < 1:
            raise ValueError(f"dim={dim} must be >= 1")
        if not (0 < mu <= L < math.inf):
            raise ValueError(f"need 0 < mu <= L < inf, got mu={mu}, L={L}")
        if dim == 1 and mu != L:
            raise ValueError(f"dim=1 has one eigenvalue: need mu == L, got mu={mu}, L={L}")
        device = generator.device
        interior = math.log(mu) + (math.log(L) - math.log(mu)) * rand((dim,), generator, device)
        eigenvalues = torch.exp(interior)
        eigenvalues[0], eigenvalues[-1] = mu, L
        hessian = eigenvalues
        if rotate:
            q, r = torch.linalg.qr(randn((dim, dim), generator, device))
            q = q * torch.sign(torch.diagonal(r))
            hessian = (q * eigenvalues) @ q.T
        x_star = randn((dim,), generator, device)
        return cls(hessian, x_star, f_star=f_star, sigma=sigma, device=device)

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        r = x - self.x_star
        return 0.5 * ((r @ self.hessian) * r).sum(-1) + self.f_inf

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        """A (x - x_star), computed as x A - x_star A in one fused ``addmm``."""
        flat = torch.addmm(self._shift, x.reshape(-1, self.dim), self.hessian, beta=-1)
        return flat.reshape(x.shape)

    def stochastic_grad(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """grad F(x) + eps, eps ~ N(0, (sigma^2/dim) I): one ``randn(x.shape)`` draw."""
        noise = randn(x.shape, generator, x.device)
        return noise.mul_(self.sigma / math.sqrt(self.dim)).add_(self.grad(x))

    def gradient_sampler(self, shape, generator):
        """:meth:`stochastic_grad` with the noise drawn in place into one reused buffer and
        the gradient computed in a reused buffer (with :class:`CommonDraws`, the noise of one
        configuration, added to every configuration's gradient: the same numbers)."""
        shape = tuple(shape)
        common = isinstance(generator, CommonDraws)
        noise = torch.empty(generator.rest(shape) if common else shape, dtype=DTYPE,
                            device=self.hessian.device)
        grad = torch.empty(math.prod(shape) // self.dim, self.dim, dtype=DTYPE,
                           device=self.hessian.device)
        scale = self.sigma / math.sqrt(self.dim)

        def sample(x: torch.Tensor) -> torch.Tensor:
            torch.addmm(self._shift, x.reshape(-1, self.dim), self.hessian, beta=-1, out=grad)
            if common:
                return grad.view(shape).add(randn_(noise, generator.generator).mul_(scale))
            return randn_(noise, generator).mul_(scale).add_(grad.view(noise.shape))

        return sample

    def mean_gradient_sampler(self, shape, counts, generator):
        """The mean of c noisy gradients at one model is grad F(y) plus the mean of c
        independent N(0, (sigma^2/dim) I) draws, which is one N(0, (sigma^2/(c dim)) I) draw:
        one [..., d] noise vector per model and step, whatever the group size (``shape``'s
        client axis n is not drawn). Equal in law to the mean of c :meth:`stochastic_grad`
        draws; the cost no longer grows with the clients (Ali & Arafa 2025, Fig. 6 has groups
        of 500). With :class:`CommonDraws`, one configuration's noise is added to every
        configuration's gradient (the same numbers)."""
        shape = tuple(shape)
        common = isinstance(generator, CommonDraws)
        drawn = shape[:-2] + shape[-1:]
        noise = torch.empty(generator.rest(drawn) if common else drawn, dtype=DTYPE,
                            device=self.hessian.device)
        counts = torch.as_tensor(counts, device=noise.device)
        factor = (self.sigma / math.sqrt(self.dim)) / counts.to(DTYPE)[..., None].sqrt()

        def mean(y: torch.Tensor, grad_y: torch.Tensor | None = None) -> torch.Tensor:
            grad = self.grad(y) if grad_y is None else grad_y
            if common:
                return grad.add(randn_(noise, generator.generator).mul_(factor))
            return randn_(noise, generator).mul_(factor).add_(grad)

        return mean


class LogisticRegression(Problem):
    """F(x) = (1/n) sum_j log(1 + exp(-y_j a_j^T x)) + lam/2 ||x||^2, eq. (1).

    Stochastic gradient: the mean of ``batch`` per-sample gradients with indices drawn
    uniformly with replacement (the mini-batch g(x; xi) of Section 3 of the paper).

    Constants (all certified):
    - ``L = lambda_max(A^T A) / (4 n) + lam``: the Hessian is
      A^T diag(s_j (1 - s_j)) A / n + lam I with s_j (1 - s_j) <= 1/4, attained at x = 0.
    - ``beta = 0`` and ``sigma^2 = max_j ||a_j||^2 / batch``: per-sample gradients
      -y_j sigmoid(-y_j a_j^T x) a_j have norm < max_j ||a_j||, the l2 term cancels in
      g - grad F, and the variance of a mean of ``batch`` i.i.d. draws is at most
      E||grad f_J||^2 / batch.
    - ``G = max_j ||a_j||`` when ``lam == 0``: a bound on every per-sample gradient norm.
      With ``lam > 0`` the per-sample gradient contains ``lam x`` and is unbounded: ``G = None``.
    - ``f_inf = 0``: a certified lower bound (softplus > 0, lam/2 ||x||^2 >= 0), not the
      exact infimum.
    """

    def __init__(self, features, labels, *, lam: float = 0.0, batch: int = 1, device=None):
        self.features = torch.as_tensor(features, dtype=DTYPE, device=device)
        self.labels = torch.as_tensor(labels, dtype=DTYPE, device=self.features.device)
        if self.features.ndim != 2 or min(self.features.shape) < 1:
            raise ValueError(
                f"features must be an [n, dim] matrix with n, dim >= 1, got shape "
                f"{tuple(self.features.shape)}"
            )
        n, dim = self.features.shape
        if not torch.isfinite(self.features).all():
            raise ValueError("features must be finite")
        if self.labels.shape != (n,) or not (self.labels.abs() == 1).all():
            raise ValueError(f"labels must be a vector of {n} entries in {{-1, +1}}")
        if not (lam >= 0 and math.isfinite(lam)):
            raise ValueError(f"lam={lam} must be finite and >= 0")
        if int(batch) != batch or batch < 1:
            raise ValueError(f"batch={batch} must be an integer >= 1")
        self.features = huge_paged(self.features)  # gathered at random rows every step
        self.n, self.dim = int(n), int(dim)
        self.lam = float(lam)
        self.batch = int(batch)
        self.R = float(self.features.norm(dim=1).max())
        gram_max = float(torch.linalg.eigvalsh(self.features.T @ self.features)[-1])
        self.L = gram_max / (4 * self.n) + self.lam
        self.beta = 0.0
        self.sigma = self.R / math.sqrt(self.batch)
        self.G = self.R if self.lam == 0 else None
        self.f_inf = 0.0

    @classmethod
    def random(cls, n: int, dim: int, R: float, generator: torch.Generator, *,
               label_noise: float = 0.1, lam: float = 0.0, batch: int = 1) -> LogisticRegression:
        """Gaussian features rescaled so that max_j ||a_j|| = R exactly, planted labels.

        Labels are sign(a_j^T x_true) with x_true ~ N(0, I), each flipped with probability
        ``label_noise`` so that the data are (with high probability) not separable.
        """
        if n < 1:
            raise ValueError(f"n={n} must be >= 1")
        if dim < 1:
            raise ValueError(f"dim={dim} must be >= 1")
        if not (0 < R < math.inf):
            raise ValueError(f"R={R} must be finite and > 0")
        if not (0 <= label_noise <= 0.5):
            raise ValueError(f"label_noise={label_noise} must lie in [0, 0.5]")
        device = generator.device
        features = randn((n, dim), generator, device)
        features = features * (R / features.norm(dim=1).max())
        x_true = randn((dim,), generator, device)
        clean = torch.where(features @ x_true >= 0, 1.0, -1.0).to(DTYPE)
        flips = rand((n,), generator, device) < label_noise
        labels = torch.where(flips, -clean, clean)
        return cls(features, labels, lam=lam, batch=batch, device=device)

    def _margins(self, x: torch.Tensor) -> torch.Tensor:
        """y_j a_j^T x, shape ``[..., n]``."""
        return (x @ self.features.T) * self.labels

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        data = softplus(-self._margins(x)).mean(-1)
        return data + 0.5 * self.lam * (x * x).sum(-1)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        weights = -self.labels * torch.sigmoid(-self._margins(x)) / self.n
        return weights @ self.features + self.lam * x

    def loss_and_grad_sq(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`loss` and the squared norm of :meth:`grad` from one computation of the
        margins: two passes over the features instead of three."""
        product = torch.mm if x.ndim == 2 else torch.matmul  # mm: the same numbers, less dispatch
        neg = product(x, self.features.T).mul_(self.labels).neg_()
        loss = softplus_(neg.abs(), neg).mean(-1)
        grad = product(torch.sigmoid(neg).mul_(self.labels).div_(-self.n), self.features)
        if self.lam:
            loss = loss + 0.5 * self.lam * (x * x).sum(-1)
            grad = grad + self.lam * x
        return loss, grad.square().sum(-1)

    def recorder(self, shape, *, grad=True):
        """:meth:`loss_and_grad_sq` (:meth:`loss` with ``grad=False``) for ``x`` of shape
        [M, dim], the margins and their transforms computed in three [M, n] buffers reused
        from call to call: the same numbers without allocating (and page-faulting) three
        data-sized temporaries per call."""
        shape = tuple(shape)
        if len(shape) != 2:
            return super().recorder(shape, grad=grad)
        neg, work, positive = (empty_large((shape[0], self.n), DTYPE, self.features.device)
                               for _ in range(3))
        minus_n = scalar(-self.n)

        def record(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
            torch.mm(x, self.features.T, out=neg).mul_(self.labels).neg_()  # -y a^T x
            torch.clamp(neg, min=0, out=positive)
            loss = torch.abs(neg, out=work).neg_().exp_().log1p_().add_(positive).mean(-1)
            if self.lam:
                loss = loss + 0.5 * self.lam * (x * x).sum(-1)
            if not grad:
                return loss, None
            torch.sigmoid(neg, out=work).mul_(self.labels).div_(minus_n)
            gradient = torch.mm(work, self.features)
            if self.lam:
                gradient = gradient + self.lam * x
            return loss, gradient.square().sum(-1)

        return record

    def sample_grads(self, x: torch.Tensor) -> torch.Tensor:
        """Per-sample gradients grad f_j(x) (l2 term included), shape ``[..., n, dim]``."""
        weights = -self.labels * torch.sigmoid(-self._margins(x))
        return weights[..., None] * self.features + self.lam * x[..., None, :]

    def stochastic_grad(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Mean gradient over ``batch`` indices drawn with replacement by one ``randint``."""
        idx = randint(self.n, (*x.shape[:-1], self.batch), generator, x.device)
        rows = self.features[idx]
        labels = self.labels[idx]
        margins = labels * torch.einsum("...bd,...d->...b", rows, x)
        weights = -labels * torch.sigmoid(-margins) / self.batch
        return torch.einsum("...b,...bd->...d", weights, rows) + self.lam * x

    def gradient_sampler(self, shape, generator):
        """:meth:`stochastic_grad`: the indices drawn in place by one ``randint`` into the
        buffer of :meth:`batch_gradients`."""
        return self.batch_gradients(shape, lambda idx: randint_(idx, self.n, generator))

    def batch_gradients(self, shape, draw: Callable[[torch.Tensor], object]):
        """``x -> g(x)`` for ``x`` of ``shape``: at each model the mini-batch gradient over the
        ``batch`` rows that ``draw(idx)`` writes into ``idx`` (int64, ``[*shape[:-1], batch]``,
        reused from call to call), called once per call. The mini-batch is
        gathered by ``index_select`` into a buffer reused from call to call (a fresh gather
        per iteration costs an allocation, and page faults, the size of the batch), then
        two batched products, the margins as x^T [a_1 .. a_b] (several times faster than
        [a_1 .. a_b]^T x, and equal to it up to round-off).

        On the CPU, the models are taken in blocks whose mini-batch fits
        :data:`GATHER_BLOCK_BYTES`: each block's rows are gathered into one small buffer
        and used by both products while they are still in cache, where gathering every
        model's rows first would write them all to memory and read them back twice (at
        1000 models of the benchmarks' workload, 12 MiB: the blocked step takes about 0.65
        of the time). A block holds a multiple of ``16 / gcd(batch, 16)`` models, so that its
        weights fill whole chunks of the vectorised element-wise kernels (:data:`CHUNK`) and
        each is computed by the code that computes it in one block holding every model:
        the numbers are those of the unblocked sampler, bit for bit."""
        shape = tuple(shape)
        M, B, d, device = math.prod(shape[:-1]), self.batch, self.dim, self.features.device
        unit = CHUNK // math.gcd(B, CHUNK)  # models whose weights fill whole chunks
        block = (min(M, max(1, GATHER_BLOCK_BYTES // (B * d * 8 * unit)) * unit)
                 if device.type == "cpu" else M)
        idx = torch.empty(*shape[:-1], B, dtype=torch.int64, device=device)
        rows = torch.empty(block, B, d, dtype=DTYPE, device=device)
        labels = torch.empty(M, 1, B, dtype=DTYPE, device=device)
        weights = torch.empty(M, 1, B, dtype=DTYPE, device=device)
        out = torch.empty(M, 1, d, dtype=DTYPE, device=device)
        # views and the divisor made once: at small sizes, each costs as much as a kernel
        flat, labels_flat, g, minus_batch = idx.view(-1), labels.view(M * B), out.view(shape), scalar(-B)
        blocks = [(start, stop, flat[start * B:stop * B], rows[:stop - start],
                   rows[:stop - start].view(-1, d), rows[:stop - start].transpose(1, 2),
                   labels[start:stop], weights[start:stop], out[start:stop])
                  for start, stop in ((s, min(s + block, M)) for s in range(0, M, block))]
        whole: list[torch.Tensor] = []  # every model's rows, for a non-contiguous x only

        def sample(x: torch.Tensor) -> torch.Tensor:
            draw(idx)
            torch.index_select(self.labels, 0, flat, out=labels_flat)
            if not x.is_contiguous():  # e.g. one model expanded over the clients of a group
                if not whole:
                    whole.append(empty_large((M, B, d), DTYPE, device))
                torch.index_select(self.features, 0, flat, out=whole[0].view(M * B, d))
                weights.view(*shape[:-1], B).copy_(
                    torch.einsum("...bd,...d->...b", whole[0].view(*shape[:-1], B, d), x))
                _descent_weights(weights, labels, minus_batch)
                torch.bmm(weights, whole[0], out=out)
            else:
                models = x.view(M, 1, d)
                for start, stop, picked, block_rows, block_flat, block_t, y, w, o in blocks:
                    torch.index_select(self.features, 0, picked, out=block_flat)
                    torch.bmm(models[start:stop], block_t, out=w)
                    _descent_weights(w, y, minus_batch)
                    torch.bmm(w, block_rows, out=o)
            return g.add_(self.lam * x) if self.lam else g

        return sample
