"""AFA-CD and AFA-CS (Yang et al. 2022, Algorithms 2 and 3, Sections 4.1 and 4.2), vectorised.

State: the global model ``x`` [R, d] of R replicas and a ring buffer of the last tau+1
global models [tau+1, R, d], from which every worker of every replica starts its local
run at x_{t - tau_{t,i}} (gathered in one index). All M workers run their K_{t,i} local
steps as one tensor [R, M, d] with a mask ``k < K_{t,i}``; only the arriving ones are used
(AFA-CD) or stored (AFA-CS). The only Python loops are over rounds and local steps.

Server step: ``server_step="proof"`` (default) is x_{t+1} = x_t - eta eta_L G_t, what every
proof uses (Appendices B.2, B.3 and C); ``"printed"`` is x_{t+1} = x_t - eta G_t
(Algorithm 2, server step 2; Algorithm 3, server step 3), which diverges at the corollaries'
eta = sqrt(mK) once sqrt(mK) L > 2.

Worker update (Algorithm 2, worker steps 2-3): G_i = (1/K) sum_{j<K} g_i(x_j),
x_{j+1} = x_j - eta_L g_i(x_j). AFA-CS keeps every worker's latest G_i (initialised with
G_i(x_0) for all i; the paper does not say) and aggregates all M of them (Algorithm 3, server
step 3). Random draws per round, in this order, from the one generator: the whole schedule
first (:func:`draw_schedule`), then per local step one stochastic-gradient draw for all
[R, M] workers.

The worker's optimiser (``worker``, :data:`WORKERS`; Yang et al. 2022, Appendix E.2,
Table 3, "FedProx and SCAFFOLD as the worker's optimizer"): plain SGD (``"sgd"``, the
above); FedProx (Li et al. 2020, MLSys, eq. (2)): each step descends the proximal local
objective f_i(x) + mu/2 ||x - x_start||^2, x_{j+1} = x_j - eta_L (g_i(x_j) + mu (x_j -
x_start)); SCAFFOLD (Karimireddy et al. 2020, ICML, Algorithm 1 with option II): server and
worker control variates c and c_i (zero at the start), each step x_{j+1} = x_j - eta_L
(g_i(x_j) - c_i + c), and an arriving worker's c_i becomes c_i - c + G_i while the server's
c moves by (1/M) sum over the arrivals of the change of c_i. A worker uses the c of the
model it pulled (x_{t - tau_{t,i}} and c_{t - tau_{t,i}}: one ring buffer for both). In
every case G_i = (x_start - x_K) / (K eta_L), the mean step direction, and the server
step is the algorithm's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedbound.sim.problems import DTYPE, rand, randint, randn, randn_
from fedbound.sim.trace import Acceptance

ARRIVALS = ("uniform", "biased", "round_robin", "single")
DELAYS = ("uniform", "max", "zero")
ALGORITHMS = ("cd", "cs")
SERVER_STEPS = ("proof", "printed")
#: the worker's optimiser: plain SGD (Algorithm 2), FedProx or SCAFFOLD (module docstring)
WORKERS = ("sgd", "fedprox", "scaffold")


# ---------------------------------------------------------------------- problems


class HeterogeneousQuadratic:
    """Clients f_i(x) = 1/2 (x - c_i)^T A (x - c_i) with one diagonal A.

    Exact constants: L = max(A) (Assumption 1); grad f_i - grad f = A (c_bar - c_i) for every
    x, so sigma_G = max_i ||A (c_i - c_bar)|| (Assumption 3) exactly; noise eps ~ N(0, sigma_L^2/d I),
    so E||eps||^2 = sigma_L^2 exactly; f_* = f(c_bar) = mean_i 1/2 d_i^T A d_i."""

    def __init__(self, hessian, centres, *, sigma_L: float = 0.0, device=None):
        self.a = torch.as_tensor(hessian, dtype=DTYPE, device=device)
        self.centres = torch.as_tensor(centres, dtype=DTYPE, device=self.a.device)
        if self.a.ndim != 1 or not (self.a > 0).all() or not torch.isfinite(self.a).all():
            raise ValueError("hessian must be a vector of finite positive eigenvalues (A diagonal)")
        if self.centres.ndim != 2 or self.centres.shape[1] != self.a.numel():
            raise ValueError(f"centres must have shape [M, {self.a.numel()}], got "
                             f"{tuple(self.centres.shape)}")
        if not (math.isfinite(sigma_L) and sigma_L >= 0):
            raise ValueError(f"sigma_L={sigma_L} must be finite and >= 0")
        self.M, self.dim = self.centres.shape
        self.sigma_L = float(sigma_L)
        self.L = float(self.a.max())
        self.c_bar = self.centres.mean(dim=0)
        offsets = self.centres - self.c_bar
        self.sigma_G = float((offsets * self.a).norm(dim=1).max())
        self.f_star = float(0.5 * ((offsets**2) * self.a).sum(dim=1).mean())

    @classmethod
    def random(cls, dim: int, M: int, L: float, mu: float, sigma_L: float, sigma_G: float,
               generator: torch.Generator) -> HeterogeneousQuadratic:
        """Eigenvalues log-uniform in [mu, L] (endpoints included), offsets c_i - c_bar random,
        centred and scaled so that max_i ||A (c_i - c_bar)|| = sigma_G exactly."""
        if dim < 1 or M < 1:
            raise ValueError(f"dim={dim} and M={M} must be >= 1")
        if not (0 < mu <= L < math.inf) or (dim == 1 and mu != L):
            raise ValueError(f"need 0 < mu <= L (mu == L if dim == 1), got mu={mu}, L={L}")
        if sigma_G > 0 and M < 2:
            raise ValueError(f"sigma_G={sigma_G} > 0 needs M >= 2 workers")
        dev = generator.device
        eig = torch.exp(math.log(mu) + (math.log(L) - math.log(mu)) * rand((dim,), generator, dev))
        eig[0], eig[-1] = mu, L
        offsets = randn((M, dim), generator, dev)
        offsets = offsets - offsets.mean(dim=0)
        size = (offsets * eig).norm(dim=1).max()
        offsets = offsets * (sigma_G / size) if sigma_G > 0 else torch.zeros_like(offsets)
        centre = randn((dim,), generator, dev)
        return cls(eig, centre + offsets, sigma_L=sigma_L, device=dev)

    @property
    def x_star(self) -> torch.Tensor:
        return self.c_bar

    @property
    def device(self) -> torch.device:
        return self.a.device

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) = mean_i f_i(x) = 1/2 (x - c_bar)^T A (x - c_bar) + f_*, [...]."""
        r = x - self.c_bar
        return 0.5 * (r * r * self.a).sum(-1) + self.f_star

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.c_bar) * self.a

    def worker_grads(self, x: torch.Tensor) -> torch.Tensor:
        """grad f_i at x [R, M, d] (worker i on row i)."""
        return (x - self.centres) * self.a

    def noise(self, shape, generator: torch.Generator, device) -> torch.Tensor:
        """eps ~ N(0, sigma_L^2/d I) of ``shape`` (one draw, always made: fixed draw order)."""
        return randn(shape, generator, device).mul_(self.sigma_L / math.sqrt(self.dim))

    def stochastic_worker_grads(self, x, generator):
        return self.worker_grads(x) + self.noise(x.shape, generator, x.device)

    def worker_gradient_sampler(self, shape, generator: torch.Generator):
        """``x -> stochastic_worker_grads(x)`` for x of ``shape`` (the same draws and numbers)
        with the noise drawn in place into a buffer reused from call to call (the result is
        valid until the next call)."""
        noise = torch.empty(tuple(shape), dtype=DTYPE, device=self.a.device)
        grads = torch.empty_like(noise)
        scale = self.sigma_L / math.sqrt(self.dim)

        def sample(x: torch.Tensor) -> torch.Tensor:
            torch.sub(x, self.centres, out=grads).mul_(self.a)
            return grads.add_(randn_(noise, generator).mul_(scale))

        return sample

    def to(self, device) -> HeterogeneousQuadratic:
        return HeterogeneousQuadratic(self.a.to(device), self.centres.to(device),
                                      sigma_L=self.sigma_L)


class LabelSkewedLogistic:
    """Logistic regression with each worker's labels skewed (the paper's label partition,
    Appendix E.1): worker i holds n samples with features ~ N(0, I) scaled to max ||a_j|| = R and
    labels +1 with probability ``skew_i``. Certified constants: L = max_i lambda_max
    (A_i^T A_i)/(4n) + lam; sigma_L^2 = R^2/batch (per-sample gradients have norm < R);
    sigma_G = max_i sup ||grad f_i - grad f|| <= 2R (bounds, not exact). Workers holding the
    shards of a real data set's partition (Dirichlet(beta), disjoint label sets per group,
    ``sim.data``) are ``sim.clients.LogisticClients`` (``sim.neural.NeuralClients`` for a
    network), which ``run_afl`` takes the same way."""

    def __init__(self, features, labels, *, lam: float = 0.0, batch: int = 1):
        self.features = torch.as_tensor(features, dtype=DTYPE)
        self.labels = torch.as_tensor(labels, dtype=DTYPE, device=self.features.device)
        if self.features.ndim != 3 or self.labels.shape != self.features.shape[:2]:
            raise ValueError("features must be [M, n, d] and labels [M, n]")
        self.M, self.n, self.dim = self.features.shape
        self.lam, self.batch = float(lam), int(batch)
        self.R = float(self.features.norm(dim=-1).max())
        gram = self.features.transpose(1, 2) @ self.features
        self.L = float(torch.linalg.eigvalsh(gram)[:, -1].max()) / (4 * self.n) + self.lam
        self.sigma_L = self.R / math.sqrt(self.batch)
        self.sigma_G = 2 * self.R
        self.f_star = 0.0  # certified lower bound (softplus > 0)

    @classmethod
    def random(cls, M: int, n: int, dim: int, R: float, generator: torch.Generator, *,
               skew: float = 0.9, lam: float = 0.0, batch: int = 1) -> LabelSkewedLogistic:
        """Worker i's positive-label rate is skew (even i) or 1 - skew (odd i)."""
        dev = generator.device
        feats = randn((M, n, dim), generator, dev)
        feats = feats * (R / feats.norm(dim=-1).max())
        rate = torch.where(torch.arange(M, device=dev) % 2 == 0, skew, 1 - skew).to(DTYPE)
        labels = torch.where(rand((M, n), generator, dev) < rate[:, None], 1.0, -1.0)
        return cls(feats, labels, lam=lam, batch=batch)

    @property
    def device(self) -> torch.device:
        return self.features.device

    def _per_worker(self, x: torch.Tensor, feats, labels) -> torch.Tensor:
        margins = labels * torch.einsum("...mnd,...md->...mn", feats, x)
        w = -labels * torch.sigmoid(-margins) / feats.shape[-2]
        return torch.einsum("...mn,...mnd->...md", w, feats) + self.lam * x

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        margins = torch.einsum("mnd,...d->...mn", self.features, x) * self.labels
        soft = margins.neg().clamp(min=0) + torch.log1p(torch.exp(-margins.abs()))
        return soft.mean(dim=(-1, -2)) + 0.5 * self.lam * (x * x).sum(-1)

    def grad(self, x: torch.Tensor) -> torch.Tensor:
        xs = x.unsqueeze(-2).expand(*x.shape[:-1], self.M, self.dim)
        return self.worker_grads(xs).mean(dim=-2)

    def worker_grads(self, x: torch.Tensor) -> torch.Tensor:
        return self._per_worker(x, self.features, self.labels)

    def stochastic_worker_grads(self, x, generator):
        R = x.shape[0]
        idx = randint(self.n, (R, self.M, self.batch), generator, x.device)
        rows = torch.arange(self.M, device=x.device)[None, :, None]
        return self._per_worker(x, self.features[rows, idx], self.labels[rows, idx])

    def worker_gradient_sampler(self, shape, generator: torch.Generator):
        """``x -> stochastic_worker_grads(x)`` (the interface run_afl uses)."""
        return lambda x: self.stochastic_worker_grads(x, generator)

    def to(self, device) -> LabelSkewedLogistic:
        return LabelSkewedLogistic(self.features.to(device), self.labels.to(device),
                                   lam=self.lam, batch=self.batch)


# ---------------------------------------------------------------------- schedule


def arrival_masks(process, T: int, R: int, M: int, m: int, generator: torch.Generator, device,
                  probs: torch.Tensor | None = None) -> torch.Tensor:
    """[R, T, M] bool: who reports in each round. "uniform": m workers without replacement
    (Theorem 3); "biased": without replacement with probabilities ``probs`` (Gumbel
    top-m; the paper's biased sampling, Appendix E.1); "round_robin": workers (t m + j) mod M;
    "single": worker 0 only (the process in the proof of Theorem 1, Appendix B.1); a
    sequence of worker-index lists: round t uses entry t mod len; a callable
    (t, R, M, generator) -> [R, M] bool, called once per round (any user-supplied process)."""
    if callable(process):
        masks = []
        for t in range(T):
            mask = torch.as_tensor(process(t, R, M, generator), device=device).bool()
            if mask.shape != (R, M) or not mask.any(dim=1).all():
                raise ValueError(f"arrival generator at round {t} must give an [R={R}, M={M}] bool "
                                 "mask with at least one arrival per replica")
            masks.append(mask)
        return torch.stack(masks, dim=1)
    rounds = torch.arange(T, device=device)
    if not isinstance(process, str):
        table = torch.zeros(len(process), M, dtype=torch.bool, device=device)
        for row, events in enumerate(process):
            table[row, torch.as_tensor(list(events), dtype=torch.long, device=device)] = True
        return table[rounds % len(process)].expand(R, T, M)
    if process == "single":
        return (torch.arange(M, device=device) == 0).expand(R, T, M)
    if process == "round_robin":
        idx = (rounds[:, None] * m + torch.arange(m, device=device)) % M  # [T, m]
        table = torch.zeros(T, M, dtype=torch.bool, device=device).scatter(1, idx, True)
        return table.expand(R, T, M)
    u = rand((R, T, M), generator, device)
    keys = u if process == "uniform" else torch.log(probs) - torch.log(-torch.log(u))
    top = keys.topk(m, dim=-1, largest=process != "uniform").indices
    return torch.zeros(R, T, M, dtype=torch.bool, device=device).scatter(-1, top, True)


def delay_draws(kind: str, T: int, tau: int, R: int, M: int, generator, device) -> torch.Tensor:
    """[R, T, M] delays tau_{t,i} <= min(tau, t): "uniform" on {0..min(tau, t)}, "max"
    (always min(tau, t)) or "zero" (the bounded delay tau of Theorem 2)."""
    cap = torch.arange(T, device=device).clamp(max=tau)[None, :, None]
    if kind == "zero" or tau == 0:
        return torch.zeros(R, T, M, dtype=torch.long, device=device)
    if kind == "max":
        return cap.expand(R, T, M).clone()
    return torch.floor(rand((R, T, M), generator, device) * (cap + 1)).long()


def k_draws(K, shape, generator, device) -> torch.Tensor:
    """Local steps of ``shape``: a constant, or uniform on {low..high} for K = (low, high)."""
    if isinstance(K, (tuple, list)):
        low, high = K
        return low + randint(high - low + 1, shape, generator, device)
    return torch.full(tuple(shape), int(K), dtype=torch.long, device=device)


# ---------------------------------------------------------------------- local update


@dataclass(frozen=True)
class LocalUpdate:
    """One local run of every worker: G [R, M, d] (Algorithm 2, worker step 3); with
    ``diagnostics``, Delta [R, M, d] = (1/K) sum_j grad f_i(x_j) along the realised trajectory
    (Lemma 1, Appendix A) and
    ``drift`` [R, M, Kmax] = ||x_j - x_start||^2 for j = 1..Kmax (constant after K_{t,i})."""

    G: torch.Tensor
    Delta: torch.Tensor | None = None
    drift: torch.Tensor | None = None


def local_update(clients, x_start: torch.Tensor, K: torch.Tensor, eta_L: float,
                 generator: torch.Generator, diagnostics: bool = False, *,
                 sample=None, mu: float = 0.0, correction: torch.Tensor | None = None) -> LocalUpdate:
    """K_{t,i} local SGD steps of every worker from x_start [R, M, d] (Yang et al. 2022,
    Algorithm 2, worker side), masked by ``j < K_{t,i}``; one stochastic-gradient draw per
    step. The iterate and the sum of gradients are updated in place, and a step that every
    worker takes needs no mask. ``sample``: a ``clients.worker_gradient_sampler`` of
    x_start's shape on ``generator`` to reuse (a run loop makes one for all its rounds);
    None makes one. ``mu`` > 0 adds FedProx's proximal gradient mu (x_j - x_start) to every
    step, ``correction`` [R, M, d] SCAFFOLD's c - c_i (module docstring); G is then the
    mean of the steps' directions, (x_start - x_K) / (K eta_L)."""
    if sample is None:
        sample = clients.worker_gradient_sampler(x_start.shape, generator)
    x, gsum = x_start.clone(), torch.zeros_like(x_start)
    dsum, drift = (torch.zeros_like(x_start), []) if diagnostics else (None, None)
    steps, everyone = int(K.max()), int(K.min())
    taken = (torch.arange(steps, device=K.device) < K[..., None])[..., None, :]  # [R, M, 1, steps]
    for j in range(steps):
        active = None if j < everyone else taken[..., j]
        if diagnostics:
            dsum = torch.where(taken[..., j], dsum + clients.worker_grads(x), dsum)
        g = sample(x)
        if mu:
            g = g + mu * (x - x_start)
        if correction is not None:
            g = g + correction
        if active is None:
            gsum.add_(g)
            x.sub_(eta_L * g)
        else:
            gsum.add_(torch.where(active, g, 0.0))
            x.sub_(torch.where(active, eta_L * g, 0.0))
        if diagnostics:
            drift.append((x - x_start).square().sum(-1))
    Kf = K.to(DTYPE)[..., None]
    if not diagnostics:
        return LocalUpdate(gsum / Kf)
    return LocalUpdate(gsum / Kf, dsum / Kf, torch.stack(drift, dim=-1))


# ---------------------------------------------------------------------- run


@dataclass(frozen=True)
class Schedule:
    """Who reports, from which model and with how many local steps, drawn before the run
    (it does not depend on the iterates): ``arrivals`` [R, T, M] bool, ``delays`` [R, T, M]
    (tau_{t,i} <= min(tau, t)), ``K`` [R, T, M] (K_{t,i} drawn for every worker, used where
    it arrives) and ``K0`` [R, M] (AFA-CS: K of the initial memory G_i(x_0))."""

    arrivals: torch.Tensor
    delays: torch.Tensor
    K: torch.Tensor
    K0: torch.Tensor

    def K_arrived(self) -> torch.Tensor:
        """[R, T, m] K_{t,i} of the arriving workers (the K statistics of Theorem 2);
        needs the same count m every round."""
        counts = self.arrivals.sum(-1)
        if not (counts == counts.flatten()[0]).all():
            raise ValueError("arrival counts vary between rounds: K_arrived needs a fixed m")
        R, T, _ = self.K.shape
        return self.K[self.arrivals].reshape(R, T, int(counts.flatten()[0]))

    def max_delay(self) -> int:
        """tau of Theorem 2: the largest delay of an update that is used (AFA-CD)."""
        return int(torch.where(self.arrivals, self.delays, 0).max())

    def memory(self) -> tuple[torch.Tensor, torch.Tensor]:
        """AFA-CS memory bookkeeping, [R, T, M] each: the age t - mu of every stored update
        used in round t (mu its pull time; the initial G_i(x_0) has mu = 0) and its K. The
        stored update is the one of the latest arrival (a running max of arrival rounds)."""
        R, T, M = self.arrivals.shape
        rounds = torch.arange(T, device=self.K.device)[None, :, None]
        last = torch.where(self.arrivals, rounds, -1).cummax(dim=1).values  # latest arrival round
        seen = last >= 0
        at = last.clamp(min=0)
        pulled = torch.where(seen, at - self.delays.gather(1, at), 0)
        stored_K = torch.where(seen, self.K.gather(1, at), self.K0[:, None, :])
        return rounds - pulled, stored_K

    def staleness(self) -> tuple[int, int]:
        """(tau, m') of Theorem 4: the largest age of a stored update that is not fresh
        (Theorem 4) and the fewest fresh (age-0) stored updates in a round (Section 4.2)."""
        ages, _ = self.memory()
        return int(ages.max()), int((ages == 0).sum(-1).min())


def draw_schedule(*, M: int, m: int, T: int, replicas: int, generator: torch.Generator, K=1,
                  tau: int = 0, delays: str = "uniform", arrivals="uniform",
                  probs: Sequence[float] | None = None, device=None) -> Schedule:
    """The schedule of a run drawn from ``generator`` for all rounds at once, in this order:
    K0, arrivals, delays, K. Inputs as for :func:`run_afl`."""
    _checked_schedule(M, m, T, tau, K, delays, arrivals, probs, replicas)
    device = torch.device("cpu") if device is None else torch.device(device)
    R = int(replicas)
    p = None if probs is None else torch.as_tensor(probs, dtype=DTYPE, device=device)
    K0 = k_draws(K, (R, M), generator, device)
    arr = arrival_masks(arrivals, T, R, M, m, generator, device, p)
    dl = delay_draws(delays, T, int(tau), R, M, generator, device)
    return Schedule(arr, dl, k_draws(K, (R, T, M), generator, device), K0)


@dataclass(frozen=True)
class AFLTrace:
    """Record of R replicas of T rounds (CPU tensors).

    - ``grad_sq_norm`` [R, T]: ||grad f(x_t)||^2, t = 0..T-1 (before the step of round t):
      the summands of the left-hand side of Theorems 2-4 of Yang et al. 2022 (None with
      ``record_grad=False``).
    - ``loss`` [R, T]: f(x_t). ``x_final`` [R, d]: x_T. ``diverged`` [R].
    - ``schedule``: the realised arrivals, delays and K (:class:`Schedule`).
    - ``score`` [R, T + 1]: the ``score`` of ``run_afl`` at x_0 .. x_T (None without one)."""

    grad_sq_norm: torch.Tensor | None
    loss: torch.Tensor
    x_final: torch.Tensor
    diverged: torch.Tensor
    schedule: Schedule
    score: torch.Tensor | None = None

    @property
    def lhs(self) -> torch.Tensor:
        """(1/T) sum_t ||grad f(x_t)||^2 per replica, [R]."""
        return self.grad_sq_norm.mean(dim=1)


def _checked_schedule(M, m, T, tau, K, delays, arrivals, probs, replicas):
    for name, v in (("M", M), ("m", m), ("T", T), ("replicas", replicas)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name}={v} must be an integer >= 1")
    if m > M:
        raise ValueError(f"m={m} exceeds M={M}: the server collects at most M updates "
                         "(Yang et al. 2022, Algorithm 1)")
    if isinstance(tau, bool) or int(tau) != tau or tau < 0:
        raise ValueError(f"tau={tau} must be an integer >= 0 (maximum delay, Yang et al. 2022, "
                         "Theorem 2)")
    ks = K if isinstance(K, (tuple, list)) else (K, K)
    if len(ks) != 2 or any(int(k) != k or k < 1 for k in ks) or ks[0] > ks[1]:
        raise ValueError(f"K={K} must be an integer >= 1 or a pair (low, high) with "
                         "1 <= low <= high: every worker takes at least one local step "
                         "(Yang et al. 2022, Algorithm 2, worker step 2)")
    if delays not in DELAYS:
        raise ValueError(f"delays={delays!r} must be one of {DELAYS}")
    if isinstance(arrivals, str):
        if arrivals not in ARRIVALS:
            raise ValueError(f"arrivals={arrivals!r} must be one of {ARRIVALS}, an event list or "
                             "a callable")
        if arrivals == "single" and m != 1:
            raise ValueError(f"arrivals='single' reports one worker per round: m={m} must be 1")
        if arrivals == "biased":
            p = torch.as_tensor(probs, dtype=DTYPE) if probs is not None else None
            if p is None or p.shape != (M,) or not (p > 0).all():
                raise ValueError(f"probs must be {M} positive sampling weights for arrivals='biased'")
    elif not callable(arrivals):
        bad = [e for e in arrivals if not len(e) or any(not 0 <= int(i) < M for i in e)]
        if not len(arrivals) or bad:
            raise ValueError(f"arrival events must be non-empty lists of worker indices in [0, {M})")


def _start_rows(delays: torch.Tensor, ring: int) -> torch.Tensor:
    """[T, R M]: for every round t, the row of x_{t - tau_{t,i}} of every worker of every
    replica in a ring buffer of the last ``ring`` global models [ring, R, d] flattened to
    [ring R, d] (x_s lives at s mod ring), from the delays [R, T, M]."""
    R, T, M = delays.shape
    rounds = torch.arange(T, device=delays.device)[:, None, None]
    replica = torch.arange(R, device=delays.device)[:, None]
    return (((rounds - delays.transpose(0, 1)) % ring) * R + replica).reshape(T, R * M)


def run_afl(clients, *, algorithm: str = "cd", m: int, T: int, eta: float, eta_L: float,
            x0, replicas: int, generator: torch.Generator, K=1, tau: int = 0,
            delays: str = "uniform", arrivals="uniform", probs: Sequence[float] | None = None,
            schedule: Schedule | None = None, server_step: str = "proof", record_grad: bool = True,
            worker: str = "sgd", mu: float = 0.1, score=None, device=None) -> AFLTrace:
    """Run ``replicas`` realisations of AFA-CD (``algorithm="cd"``, Algorithm 2) or AFA-CS
    (``"cs"``, Algorithm 3) for T rounds on ``clients`` (HeterogeneousQuadratic,
    LabelSkewedLogistic, or a ``sim.clients.ClientProblem`` whose workers hold their own
    shards: ``sim.neural.NeuralClients``, ``sim.clients.LogisticClients``, any split of
    ``sim.federated.federated_problem`` but "iid"), from x0 [d]. The schedule is
    ``schedule`` or, if None, drawn first from ``generator`` by :func:`draw_schedule` (K,
    tau, delays, arrivals, probs); then each local step draws its noise. Diverged replicas are frozen
    (sim.trace.freeze_diverged). ``device=None`` uses the clients' device.
    ``record_grad=False`` records f(x_t) only (``grad_sq_norm`` None): no full gradient per
    round for a run whose training curve is all that is read; the same dynamics and draws.
    ``worker``: the worker's optimiser, :data:`WORKERS` (module docstring), ``mu`` FedProx's
    proximal weight (Yang et al. 2022, Appendix E.2: 0.1). ``score``: None, or a function
    of the global models x_t [R, d] giving [R] (a held-out accuracy), recorded every round
    beside f(x_t) (``AFLTrace.score``); it draws nothing."""
    for name, v, ok in (("algorithm", algorithm, ALGORITHMS), ("server_step", server_step, SERVER_STEPS),
                        ("worker", worker, WORKERS)):
        if v not in ok:
            raise ValueError(f"{name}={v!r} must be one of {ok}")
    for name, v in (("eta", eta), ("eta_L", eta_L)):
        if not (math.isfinite(v) and v > 0):
            raise ValueError(f"{name}={v} must be finite and > 0")
    if worker == "fedprox" and not (math.isfinite(mu) and mu > 0):
        raise ValueError(f"mu={mu} must be finite and > 0 (FedProx's proximal weight)")
    device = clients.device if device is None else torch.device(device)
    clients = clients.to(device)
    M, d = clients.M, clients.dim
    if schedule is None:
        schedule = draw_schedule(M=M, m=m, T=T, replicas=replicas, generator=generator, K=K,
                                 tau=tau, delays=delays, arrivals=arrivals, probs=probs)
    if schedule.arrivals.shape != (replicas, T, M):
        raise ValueError(f"schedule has shape {tuple(schedule.arrivals.shape)}, expected "
                         f"[replicas={replicas}, T={T}, M={M}]")
    R, ring = int(replicas), int(schedule.delays.max()) + 1
    arrivals_all, delays_all, K_all = (v.to(device) for v in
                                       (schedule.arrivals, schedule.delays, schedule.K))
    x = torch.as_tensor(x0, dtype=DTYPE, device=device).expand(R, d).clone()
    history = x.expand(ring, R, d).clone()
    step = eta * eta_L if server_step == "proof" else eta
    accept = Acceptance(R, device)
    sample = clients.worker_gradient_sampler((R, M, d), generator)
    starts_of = _start_rows(delays_all, ring)
    grad_sq, losses, scores = [], [], []
    prox = mu if worker == "fedprox" else 0.0
    controls = _Controls(R, M, d, ring, device) if worker == "scaffold" else None
    if algorithm == "cs":
        start = x[:, None].expand(R, M, d)
        K0 = schedule.K0.to(device)
        memory = local_update(clients, start, K0, eta_L, generator, sample=sample, mu=prox,
                              correction=None if controls is None else controls.correction(None)).G
        if controls is not None:  # the initial runs are every worker's first report
            controls.arrive(memory, torch.ones(R, M, dtype=torch.bool, device=device), None)
            controls.store(0)
    for t in range(T):
        if record_grad:
            grad_sq.append(clients.grad(x).square().sum(-1))
        losses.append(clients.loss(x))
        if score is not None:
            scores.append(score(x))
        arr = arrivals_all[:, t]
        starts = history.view(ring * R, d).index_select(0, starts_of[t]).view(R, M, d)
        G = local_update(clients, starts, K_all[:, t], eta_L, generator, sample=sample, mu=prox,
                         correction=None if controls is None else controls.correction(starts_of[t])).G
        if controls is not None:
            controls.arrive(G, arr, starts_of[t])
        if algorithm == "cd":
            Gt = (G * arr[..., None]).sum(1) / arr.sum(1, keepdim=True)
        else:
            memory = torch.where(arr[..., None], G, memory)
            Gt = memory.mean(1)
        x = accept(x, x - step * Gt)
        history[(t + 1) % ring] = x
        if controls is not None:
            controls.store(t + 1)
    if score is not None:
        scores.append(score(x))
    return AFLTrace(grad_sq_norm=torch.stack(grad_sq, 1).cpu() if record_grad else None,
                    loss=torch.stack(losses, 1).cpu(), x_final=x.cpu(),
                    diverged=accept.diverged.cpu(), schedule=schedule,
                    score=torch.stack(scores, 1).cpu() if score is not None else None)


class _Controls:
    """SCAFFOLD's control variates inside AFL (module docstring): the workers' c_i [R, M, d],
    the server's c [R, d] and a ring buffer of the server's c beside the global models', so
    that a worker pulling x_{t - tau} pulls c_{t - tau} with it."""

    def __init__(self, R: int, M: int, d: int, ring: int, device):
        self.ring = ring
        self.c_i = torch.zeros(R, M, d, dtype=DTYPE, device=device)
        self.c = torch.zeros(R, d, dtype=DTYPE, device=device)
        self.history = torch.zeros(ring, R, d, dtype=DTYPE, device=device)
        self.pulled = self.c_i  # the c each worker used in its last local run

    def correction(self, rows: torch.Tensor | None) -> torch.Tensor:
        """c - c_i [R, M, d] of every worker's run: c pulled at ``rows`` of the ring (None:
        the current c, for AFA-CS's initial memory)."""
        R, M, d = self.c_i.shape
        self.pulled = (self.c[:, None].expand(R, M, d) if rows is None else
                       self.history.view(self.ring * R, d).index_select(0, rows).view(R, M, d))
        return self.pulled - self.c_i

    def arrive(self, G: torch.Tensor, arrived: torch.Tensor, rows) -> None:
        """Option II of SCAFFOLD for the workers that ``arrived`` [R, M]: c_i <- c_i - c + G_i
        with the c they pulled, and c moves by (1/M) times the sum of their changes."""
        new = self.c_i - self.pulled + G
        change = torch.where(arrived[..., None], new - self.c_i, 0.0)
        self.c_i = self.c_i + change
        self.c = self.c + change.sum(1) / self.c_i.shape[1]

    def store(self, t: int) -> None:
        """c_t goes to the ring beside x_t."""
        self.history[t % self.ring] = self.c
