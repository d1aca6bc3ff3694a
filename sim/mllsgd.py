"""Multi-Level Local SGD (MLL-SGD), Algorithm 1 of Castiglia et al. 2021, in matrix form.

The run follows X_{k+1} = (X_k - eta G_k) T_k, eq. (5) of the paper, with the
worker models stacked as a tensor ``X`` of shape ``[R, N, d]`` (R replicas, N workers):

- Local step: ``g_k^(i) = theta_k^i g(x_k^(i))`` with coins theta ~ Bernoulli(p_i),
  (2)-(3).
- T_k per (6): ``Z`` when k mod q*tau == 0 (sub-network average,
  then hub mixing y^(d) = sum_j H[j, d] z^(j), (4)), ``V`` when
  k mod tau == 0 otherwise (sub-network average z^(d) = sum_{i in M(d)} v_i x~_i, Section 4),
  ``I`` otherwise. Hubs are stateless (Section 5): their models are broadcast back at once.

Special cases, all run through :func:`run_mllsgd` (the paper's Sections 5 and 6):

- Distributed SGD: one hub (``H = [[1.]]``, ``hub_of = 0``), ``q = tau = 1``, ``w = 1``,
  ``p = 1``: all workers are averaged every iteration.
- Local SGD: ``w = 1``, ``p = 1``, ``q = 1`` and one hub, or a complete hub graph with
  ``H = b 1^T``: all workers are averaged every ``tau`` iterations.
- HL-SGD: Local SGD with ``q > 1``, several hubs and ``H = b 1^T``.
- Cooperative SGD (Section 5, after Theorem 1): ``w = 1``, ``p = 1``, ``q = 1``, any H.

Random draws, in this order, from the one ``generator``: per iteration the coins
``rand((R, N)) < p`` (skipped when ``wait_for_all``), then ``problem.stochastic_grad(X)``;
with ``wait_for_all`` the waiting times of a hub period are drawn at its first iteration.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from fedbound.sim.problems import DTYPE, Problem, rand, rand_, replica_steps
from fedbound.sim.trace import Acceptance, Trace


class HubWeights(NamedTuple):
    """Normalised weights: ``v`` [N] within a sub-network (Section 4), ``a`` [N] overall
    (Section 5, before (8)), ``b`` [D] per sub-network (Section 4)."""

    v: torch.Tensor
    a: torch.Tensor
    b: torch.Tensor


def hub_weights(hub_of: torch.Tensor, w: torch.Tensor, num_hubs: int) -> HubWeights:
    """v_i = w_i / sum_{j in M(d(i))} w_j, a_i = w_i / w_tot, b_d (Sections 4-5 of the paper)."""
    hub_total = torch.zeros(num_hubs, dtype=w.dtype, device=w.device).index_add_(0, hub_of, w)
    w_tot = w.sum()
    return HubWeights(v=w / hub_total[hub_of], a=w / w_tot, b=hub_total / w_tot)


def mixing_matrices(H: torch.Tensor, hub_of: torch.Tensor,
                    w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense N x N operators (V, Z): V_ij = v_i [d(i) = d(j)] (Section 5) and
    Z_ij = H[d(i), d(j)] v_i, (7).

    Reference form of T_k for exact-expectation computations and tests; the simulator
    itself never builds them.
    """
    one_hot = torch.nn.functional.one_hot(hub_of, H.shape[0]).to(H.dtype)
    v = hub_weights(hub_of, w, H.shape[0]).v[:, None]
    return v * (one_hot @ one_hot.T), v * (one_hot @ H @ one_hot.T)


def operator_at(k: int, q: int, tau: int) -> str:
    """Which T_k iteration k applies: "Z", "V" or "I", (6)."""
    if k % (q * tau) == 0:
        return "Z"
    if k % tau == 0:
        return "V"
    return "I"


def hub_mix(z: torch.Tensor, H: torch.Tensor) -> torch.Tensor:
    """y^(d) = sum_j H[j, d] z^(j), (4): column d of H, [R, D, d]."""
    return H.T @ z


def apply_operator(X: torch.Tensor, kind: str, hub_of: torch.Tensor, v: torch.Tensor,
                   H: torch.Tensor) -> torch.Tensor:
    """Worker models after T_k in {"I", "V", "Z"}: X T_k of (5)."""
    if kind == "I":
        return X
    out = X.clone()
    _Averaging(hub_of, v, H, X.shape)(out, kind)
    return out


def hub_period_slots(p: torch.Tensor, hub_of: torch.Tensor, num_hubs: int, q: int, tau: int,
                     replicas: int, generator: torch.Generator) -> torch.Tensor:
    """Time slots one hub period (q*tau iterations) lasts when workers wait for stragglers.

    Time-slot comparison of Castiglia et al. 2021, Section 6: in each slot worker i succeeds in a
    gradient step with probability p_i, and Local SGD / HL-SGD wait until every worker has
    taken tau steps. Worker i needs NB_i = tau + (tau geometric(p_i) failure counts) slots,
    a negative binomial; sub-network d finishes a round after max_{i in M(d)} NB_i slots,
    runs q rounds on its own, and the hub averaging waits for the slowest sub-network:
    max_d sum_rounds max_{i in M(d)} NB_i, shape [R]. (For q = 1 this is max_i NB_i.)
    Failure counts are floor(log(1 - U) / log(1 - p_i)), U ~ U[0, 1) from ``generator``.
    """
    N = p.numel()
    uniforms = rand((replicas, q, N, tau), generator, p.device)
    failures = torch.floor(torch.log1p(-uniforms) / torch.log1p(-p)[:, None])
    worker_slots = tau + failures.sum(dim=-1)
    round_slots = torch.zeros(replicas, q, num_hubs, dtype=DTYPE, device=p.device)
    round_slots.scatter_reduce_(2, hub_of.expand(replicas, q, N), worker_slots, "amax")
    return round_slots.sum(dim=1).amax(dim=1)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name}={value} must be an integer >= 1")
    return int(value)


def _validated(problem: Problem, H, hub_of, w, p, eta, K, q, tau, x1, replicas, device):
    """Inputs of :func:`run_mllsgd` as float64 / int64 tensors on ``device``, or ValueError."""
    K, q, tau = _positive_int("K", K), _positive_int("q", q), _positive_int("tau", tau)
    replicas = _positive_int("replicas", replicas)
    if K % (q * tau) != 0:
        raise ValueError(
            f"K={K} must be a multiple of q*tau={q * tau}: the proof of Theorem 1 sums over "
            f"K/(q*tau) whole hub periods (Castiglia et al. 2021, Appendix C.3, summing (182))"
        )
    eta = replica_steps("eta", eta, replicas, device)
    eta = eta.neg() if isinstance(eta, torch.Tensor) else eta
    H = torch.as_tensor(H, dtype=DTYPE, device=device)
    if H.ndim != 2 or H.shape[0] != H.shape[1] or H.shape[0] < 1:
        raise ValueError(f"H must be a square D x D matrix, got shape {tuple(H.shape)}")
    if not torch.isfinite(H).all():
        raise ValueError("H must be finite")
    D = H.shape[0]
    hub_of = torch.as_tensor(hub_of, device=device)
    if hub_of.dtype.is_floating_point or hub_of.dtype == torch.bool or hub_of.ndim != 1:
        raise ValueError("hub_of must be a 1-D integer tensor of hub indices")
    if hub_of.numel() < 1 or hub_of.min() < 0 or hub_of.max() >= D:
        raise ValueError(f"hub_of values must lie in [0, D={D}) with at least one worker")
    hub_of = hub_of.long()
    sizes = torch.bincount(hub_of, minlength=D)
    if (sizes == 0).any():
        raise ValueError(f"hub_of leaves hubs {torch.nonzero(sizes == 0).flatten().tolist()} "
                         f"without workers: every hub must be non-empty")
    N = hub_of.numel()
    w = torch.as_tensor(w, dtype=DTYPE, device=device)
    if w.shape != (N,) or not (torch.isfinite(w) & (w > 0)).all():
        raise ValueError(f"w must have shape ({N},) with finite entries > 0")
    p = torch.as_tensor(p, dtype=DTYPE, device=device)
    if p.shape != (N,) or not ((p > 0) & (p <= 1)).all():
        raise ValueError(f"p must have shape ({N},) with entries in (0, 1]")
    x1 = torch.as_tensor(x1, dtype=DTYPE, device=device)
    if x1.shape != (problem.dim,) or not torch.isfinite(x1).all():
        raise ValueError(f"x1 must be finite with shape ({problem.dim},), got {tuple(x1.shape)}")
    return H, hub_of, w, p, eta, K, q, tau, x1, replicas


def run_mllsgd(problem: Problem, *, H, hub_of, w, p, eta: float | torch.Tensor, K: int, q: int, tau: int,
               x1, replicas: int, generator: torch.Generator, wait_for_all: bool = False,
               record_iterates: bool = False, record_every: int = 1, record_grad: bool = True,
               device=None) -> Trace:
    """Run ``replicas`` independent realisations of MLL-SGD, Castiglia et al. 2021, (5)-(6).

    ``H`` [D, D] hub mixing matrix (Assumption 2; not validated beyond its shape: u_k
    follows (10) only when H b = b), ``hub_of`` [N] hub d(i) of each worker,
    ``w`` [N] positive worker weights (v, a and b are derived by :func:`hub_weights`),
    ``p`` [N] step probabilities in (0, 1], ``eta`` one step or one per replica (a grid of
    steps in one run), ``x1`` [d] common start (X_1 = x1 1^T, as in
    Lemma 4, Appendix C.2). ``K`` must be a multiple of ``q * tau``. Every worker samples
    ``problem``'s F (i.i.d. workers, as the paper's analysis assumes), or, for a
    ``sim.clients.ClientProblem`` of N clients, worker i draws its mini-batches from client
    i's shard (non-i.i.d. workers; with ``w`` the shard sizes, u_k weighs the workers as
    F = the loss over all their data, eq. (1)).

    Records ||grad F(u_k)||^2 and F(u_k) at u_k = X_k a before the step of iteration k
    ((8), (13)), the steps each worker took and the slot at which each iteration
    ends. Plain MLL-SGD averages every tau slots whatever the steps taken, so slot = k.
    ``wait_for_all=True`` simulates Local SGD / HL-SGD waiting for stragglers (the
    time-slot comparison of Section 6):
    every worker takes every step (no coins) and each hub period lasts
    :func:`hub_period_slots`; its slots are spread linearly over its q*tau iterations,
    so iteration j of a period of length S ends at slot S_prev + S j / (q tau) (>= k, and
    = k when p = 1).

    ``record_every=e`` (a divisor of K) records only at k = 1, 1 + e, 1 + 2e, ...
    (``Trace.record_every``); ``record_grad=False`` records F(u_k) only (``grad_sq_norm``
    is None). Both only make a run cheaper, for speed comparisons with code that records
    less; the dynamics and the draws are the same.

    ``device=None`` uses the problem's device; otherwise the problem is copied there.
    The generator may live on any device (draws are moved). Returns a CPU :class:`Trace`.
    """
    device = problem.device if device is None else torch.device(device)
    problem = problem.to(device)
    H, hub_of, w, p, eta, K, q, tau, x1, R = _validated(
        problem, H, hub_of, w, p, eta, K, q, tau, x1, replicas, device)
    record_every = _positive_int("record_every", record_every)
    if K % record_every:
        raise ValueError(f"record_every={record_every} must divide K={K}")
    D, N, d = H.shape[0], hub_of.numel(), problem.dim
    v, a, _ = hub_weights(hub_of, w, D)

    X = x1.expand(R, N, d).clone()
    moved = torch.empty_like(X)  # X_k - eta G_k, then X_k T_k: becomes X_{k+1}
    average = _Averaging(hub_of, v, H, X.shape)
    sample = problem.gradient_sampler(X.shape, generator)
    weighted = _WeightedAverage(a, X, moved)
    record = problem.recorder((R, d), grad=record_grad)
    accept = Acceptance(R, device)
    losses, grad_sq_norms = [], []
    steps_taken = torch.zeros(R, N, dtype=torch.int64, device=device)
    slots = torch.arange(1, K + 1, dtype=DTYPE, device=device).expand(R, K).clone()
    period_start = torch.zeros(R, dtype=DTYPE, device=device)
    uniforms = torch.empty(R, N, dtype=DTYPE, device=device)
    coins = torch.ones(R, N, dtype=torch.bool, device=device)
    every_coin_lands = wait_for_all or bool((p == 1).all())  # U < 1 always: G_k unmasked
    steps_everywhere = 0  # steps every worker of every replica took (coins that all land)
    models, grads = [X.clone()] if record_iterates else [], []

    for k in range(1, K + 1):
        if (k - 1) % record_every == 0:
            loss, grad_sq_norm = record(weighted(X))
            losses.append(loss)
            if record_grad:
                grad_sq_norms.append(grad_sq_norm)
        if wait_for_all:
            position = (k - 1) % (q * tau) + 1
            if position == 1:
                period = hub_period_slots(p, hub_of, D, q, tau, R, generator)
            slots[:, k - 1] = period_start + period * position / (q * tau)
            if position == q * tau:
                period_start = period_start + period
        elif every_coin_lands:
            rand_(uniforms, generator)  # drawn all the same: the stream stays the documented one
        else:
            torch.lt(rand_(uniforms, generator), p, out=coins)
        G = sample(X)
        if not every_coin_lands:
            G.mul_(coins[..., None])
        if isinstance(eta, float):
            torch.add(X, G, alpha=-eta, out=moved)
        else:  # -eta per replica
            torch.addcmul(X, G, eta, out=moved)
        average(moved, operator_at(k, q, tau))
        X, moved = accept(X, moved), X
        if accept.alive is None and every_coin_lands:
            steps_everywhere += 1  # added to every worker at once, below
        else:
            steps_taken.add_(coins if accept.alive is None else coins & accept.alive[:, None])
        if record_iterates:
            models.append(X.clone())
            grads.append(torch.where(accept.diverged[:, None, None], 0.0, G))

    steps_taken.add_(steps_everywhere)
    recorded = {}
    if record_iterates:
        X_all, G_all = torch.stack(models, dim=1), torch.stack(grads, dim=1)
        recorded = {"X": X_all, "G": G_all, "u": X_all.transpose(2, 3) @ a,
                    "Ga": G_all.transpose(2, 3) @ a}
    return Trace(
        grad_sq_norm=torch.stack(grad_sq_norms, dim=1).cpu() if record_grad else None,
        loss=torch.stack(losses, dim=1).cpu(), steps_taken=steps_taken.cpu(),
        slots=slots.cpu(), diverged=accept.diverged.cpu(),
        **{name: value.cpu() for name, value in recorded.items()},
    )


class _WeightedAverage:
    """u_k = X_k a, (8), for X_k either of a run's two state buffers: one ``bmm`` into a
    reused buffer, the transposed views made once (the numbers of
    ``X.transpose(1, 2) @ a``, which ``matmul`` computes by the same ``bmm``)."""

    def __init__(self, a: torch.Tensor, *states: torch.Tensor):
        R, N, d = states[0].shape
        self.a = a[:, None].expand(R, N, 1)
        self.transposed = {state.data_ptr(): state.transpose(1, 2) for state in states}
        self.out = torch.empty(R, d, 1, dtype=DTYPE, device=a.device)

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        """X a, [R, d]: valid until the next call."""
        return torch.bmm(self.transposed[X.data_ptr()], self.a, out=self.out).view(self.out.shape[:2])


class _Averaging:
    """X T_k in place for T_k in {"I", "V", "Z"} (Castiglia et al. 2021, (5)-(7)), with its
    intermediate tensors allocated once per run: the sub-network averages
    z^(d) = sum_{i in M(d)} v_i x^(i) (Algorithm 1, line 10), mixed across hubs by
    :func:`hub_mix` for "Z", broadcast back to the workers of each hub."""

    def __init__(self, hub_of: torch.Tensor, v: torch.Tensor, H: torch.Tensor, shape):
        R, N, d = shape
        self.hub_of, self.v, self.H = hub_of, v[:, None], H
        self.scaled = torch.empty(R, N, d, dtype=DTYPE, device=H.device)
        self.z = torch.empty(R, H.shape[0], d, dtype=DTYPE, device=H.device)

    def __call__(self, X: torch.Tensor, kind: str) -> None:
        if kind == "I":
            return
        torch.mul(self.v, X, out=self.scaled)
        z = self.z.zero_().index_add_(1, self.hub_of, self.scaled)
        if kind == "Z":
            z = hub_mix(z, self.H)
        torch.index_select(z, 1, self.hub_of, out=X)
