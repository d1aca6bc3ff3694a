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

Where every iteration averages (tau = 1: T_k is V or Z for every k) and the problem pools a
hub's workers (``sim.neural.NeuralClients.hub_step_sampler``, the workers of each hub
consecutive), the run holds the D hub models instead of the N worker models: the workers of
a hub all start iteration k from its model, so its average of their steps is
z^(d) - eta sum_{i in M(d)} v_i theta_i g_i(z^(d)), one gradient per hub of the loss over its
workers' samples (the same draws; the numbers of the workers' form up to round-off, a pass
over D models where there were several over N). A batch that mixes tau = 1 with other
taus runs as two batches from the same generator state.

Random draws, in this order, from the one ``generator``: per iteration the coins
``rand((R, N)) < p`` (skipped when ``wait_for_all``), then ``problem.stochastic_grad(X)``;
with ``wait_for_all`` the waiting times of a hub period are drawn at its first iteration.
A batch of C configurations (:func:`run_mllsgd` with tau, K or steps per configuration)
takes these draws once for all (``sim.problems.CommonDraws``): every configuration sees the
coins and gradients of its run alone, and T_k of (6) at its own tau.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch

from fedbound.sim.problems import DTYPE, CommonDraws, Problem, rand, rand_, replica_steps
from fedbound.sim.trace import Acceptance, Trace, norm_of


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


def hub_mix(z: torch.Tensor, H: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """y^(d) = sum_j H[j, d] z^(j), (4): column d of H, [R, D, d] (into ``out`` if given).
    H^T made contiguous first: the product of a transposed matrix with a batch takes a path
    several times slower, with the same numbers."""
    return torch.matmul(H.T.contiguous(), z, out=out)


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


def _per_configuration(name: str, value) -> list[int] | int:
    """An integer knob: one (an int) or one per configuration of a batch (a list)."""
    if isinstance(value, (list, tuple)) or (isinstance(value, torch.Tensor) and value.ndim == 1):
        values = [_positive_int(f"{name}[{c}]", v) for c, v in enumerate(list(value))]
        if not values:
            raise ValueError(f"{name}: give at least one value")
        return values
    return _positive_int(name, value)


def _configurations(eta, **knobs) -> int | None:
    """C for a batch (a knob given per configuration, or ``eta`` [C, R] / [C, 1]), None for
    a run of one; ValueError when they disagree."""
    found = {name: len(v) for name, v in knobs.items() if isinstance(v, list)}
    if isinstance(eta, (torch.Tensor, list, tuple)) and torch.as_tensor(eta).ndim == 2:
        found["eta"] = torch.as_tensor(eta).shape[0]
    if len(set(found.values())) > 1:
        raise ValueError(f"configurations: {', '.join(f'{k} has {v}' for k, v in found.items())}"
                         " (one entry per configuration of a batch)")
    return next(iter(found.values()), None)


def _validated(problem: Problem, H, hub_of, w, p, eta, K, q, tau, x1, replicas, device):
    """Inputs of :func:`run_mllsgd` as float64 / int64 tensors on ``device`` (``K`` and
    ``tau`` lists of C for a batch, with C), or ValueError."""
    K, tau, q = _per_configuration("K", K), _per_configuration("tau", tau), _positive_int("q", q)
    replicas = _positive_int("replicas", replicas)
    C = _configurations(eta, K=K, tau=tau)
    if C is not None:
        K, tau = ([v] * C if isinstance(v, int) else v for v in (K, tau))
    for c, (Kc, tc) in enumerate(zip(*(v if C is not None else [v] for v in (K, tau)),
                                     strict=True)):
        if Kc % (q * tc) != 0:
            at = "" if C is None else f" (configuration {c})"
            raise ValueError(
                f"K={Kc} must be a multiple of q*tau={q * tc}{at}: the proof of Theorem 1 sums "
                f"over K/(q*tau) whole hub periods (Castiglia et al. 2021, Appendix C.3, summing "
                f"(182))")
    eta = replica_steps("eta", eta, replicas, device, C)
    if isinstance(eta, torch.Tensor):
        eta = eta.neg().view(-1, 1, 1)  # [R, 1, 1], or [C R, 1, 1] for a batch
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
    return H, hub_of, w, p, eta, K, q, tau, x1, replicas, C


def run_mllsgd(problem: Problem, *, H, hub_of, w, p, eta: float | torch.Tensor,
               K: int | Sequence[int], q: int, tau: int | Sequence[int],
               x1, replicas: int, generator: torch.Generator, wait_for_all: bool = False,
               record_iterates: bool = False, record_every: int = 1, record_first: bool = True,
               record_grad: bool = True, device=None) -> Trace | list[Trace]:
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
    (``Trace.record_every``), or at k = e, 2e, ..., K with ``record_first=False`` (e = K: the
    last iterate's F(u_K) only, without a pass over the problem's data every iteration);
    ``record_grad=False`` records F(u_k) only (``grad_sq_norm`` is None). They only make a
    run cheaper (for speed comparisons with code that records less, or a caller that reads
    the end of the run); the dynamics and the draws are the same.

    A batch of C configurations in one run, with common random numbers: ``tau`` and/or ``K``
    a list of C (configuration c applies T_k of (6) with its tau_c for K_c iterations: a
    mask per iteration, the sub-network and hub averages taken on the configurations whose
    T_k is V or Z) and/or ``eta`` [C, R] or [C, 1] (a step per configuration and replica;
    [R] or a number: the same for every configuration). Every configuration takes the same
    coins and gradient draws at iteration k (those of a run of one). Returns a list of C
    traces, trace c equal to the run of configuration c alone with the same ``generator``
    state and its steps given per replica (a tensor), bit for bit under the conditions of
    ``sim.problems.CommonDraws``. ``wait_for_all`` draws waiting times per hub period, q tau
    iterations: a batch needs one tau.

    ``device=None`` uses the problem's device; otherwise the problem is copied there.
    The generator may live on any device (draws are moved). Returns a CPU :class:`Trace`.
    """
    device = problem.device if device is None else torch.device(device)
    problem = problem.to(device)
    H, hub_of, w, p, eta, K, q, tau, x1, R, C = _validated(
        problem, H, hub_of, w, p, eta, K, q, tau, x1, replicas, device)
    batched = C is not None
    Ks, taus = (K, tau) if batched else ([K], [tau])
    hub_steps = None if wait_for_all or record_iterates else _hub_steps(problem, hub_of)
    if hub_steps is not None and 1 in taus and set(taus) != {1}:
        return _by_form(dict(problem=problem, H=H, hub_of=hub_of, w=w, p=p, q=q, x1=x1, replicas=R,
                             record_every=record_every, record_first=record_first,
                             record_grad=record_grad, device=device), eta, Ks, taus, generator)
    hub_form = hub_steps is not None and set(taus) == {1}
    C, K = len(Ks), max(Ks)
    # configurations in the order of their tau (stable): those that average at iteration k
    # are then one range of rows (for taus that divide one another), averaged in place
    order = sorted(range(C), key=taus.__getitem__)
    Ks, taus = [Ks[c] for c in order], [taus[c] for c in order]
    if isinstance(eta, torch.Tensor) and batched:
        eta = eta.view(C, R, 1, 1)[order].view(C * R, 1, 1)
    record_every = _positive_int("record_every", record_every)
    for Kc in Ks:
        if Kc % record_every:
            raise ValueError(f"record_every={record_every} must divide K={Kc}")
    if wait_for_all and len(set(taus)) > 1:
        raise ValueError(f"tau={taus}: wait_for_all draws the waiting times of each hub period "
                         "(q tau iterations): a batch needs one tau")
    D, N, d = H.shape[0], hub_of.numel(), problem.dim
    v, a, _ = hub_weights(hub_of, w, D)
    lead = (C, R) if batched else (R,)        # what the draws see: a run of one as before
    draws = CommonDraws(generator, C) if batched else generator
    CR = C * R

    X = x1.expand(CR, D if hub_form else N, d).clone()  # the hub models z^(d) in hub form
    moved = torch.empty_like(X)  # X_k - eta G_k, then X_k T_k: becomes X_{k+1}
    if hub_form:  # T_k averages every k: z^(d) - eta sum_{i in M(d)} v_i theta_i g_i(z^(d))
        mixed = torch.empty_like(X)  # H^T of the averages, (4)
        hub_step = hub_steps((*lead, D, d), torch.bincount(hub_of, minlength=D), draws)
        client_weights = v.expand(CR, N).clone()  # v_i theta_i
        hub_scale = (eta if isinstance(eta, torch.Tensor)
                     else torch.full((CR, 1, 1), -eta, dtype=DTYPE, device=device)).expand(CR, D, 1)
        weighted = _WeightedAverage(hub_weights(hub_of, w, D).b, X, moved, mixed)
    else:
        average = _Averaging(hub_of, v, H, X.shape)
        sample = problem.gradient_sampler((*lead, N, d), draws)
        # X_k - eta G_k written at once by a sampler that can (sim.neural's closed form)
        fused = None if record_iterates or isinstance(eta, float) else getattr(sample, "step", None)
        weighted = _WeightedAverage(a, X, moved)
    record = problem.recorder((CR, d), grad=record_grad)
    accept = Acceptance(CR, device)
    losses, grad_sq_norms = [], []
    steps_taken = torch.zeros(CR, N, dtype=torch.int64, device=device)
    slots = torch.arange(1, K + 1, dtype=DTYPE, device=device).expand(CR, K).clone()
    period_start = torch.zeros(CR, dtype=DTYPE, device=device)
    uniforms = torch.empty(CR, N, dtype=DTYPE, device=device)
    drawn = uniforms.view(*lead, N)
    coins = torch.ones(CR, N, dtype=torch.bool, device=device)
    step = torch.empty(CR, N, 1, dtype=DTYPE, device=device)  # -eta theta_k per worker
    every_coin_lands = wait_for_all or bool((p == 1).all())  # U < 1 always: G_k unmasked
    steps_everywhere = 0  # steps every worker of every replica took (coins that all land)
    models, grads = [X.clone()] if record_iterates else [], []
    mixes = None if hub_form else _Operators(taus, q, C, R, average, hub_of, v, H)
    ends = {Kc: [c for c in range(C) if Ks[c] == Kc] for Kc in Ks}
    final: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # c: (steps_taken, diverged) at K_c

    for k in range(1, K + 1):
        if (k - (1 if record_first else 0)) % record_every == 0:
            loss, grad_sq_norm = record(weighted(X))
            losses.append(loss)
            if record_grad:
                grad_sq_norms.append(grad_sq_norm)
        if wait_for_all:
            position = (k - 1) % (q * taus[0]) + 1
            if position == 1:
                period = hub_period_slots(p, hub_of, D, q, taus[0], R, generator).repeat(C)
            slots[:, k - 1] = period_start + period * position / (q * taus[0])
            if position == q * taus[0]:
                period_start = period_start + period
        elif every_coin_lands:
            rand_(drawn, draws)  # drawn all the same: the stream stays the documented one
        else:
            torch.lt(rand_(drawn, draws).view(CR, N), p, out=coins)
        if hub_form:
            if not every_coin_lands:
                torch.mul(v, coins, out=client_weights)
            hub_step(X.view(*lead, D, d), client_weights.view(*lead, N), hub_scale,
                     moved.view(*lead, D, d))
            if operator_at(k, q, 1) == "Z":
                hub_mix(moved, H, out=mixed)
                moved, mixed = mixed, moved
        elif isinstance(eta, float) or record_iterates:  # G_k = theta_k g_k, recorded as applied
            G = sample(X.view(*lead, N, d)).view(CR, N, d)
            if not every_coin_lands:
                G.mul_(coins[..., None])
            if isinstance(eta, float):
                torch.add(X, G, alpha=-eta, out=moved)
            else:
                torch.addcmul(X, G, eta, out=moved)
        else:  # -eta per replica, times the coins [CR, N, 1] (not a pass over G: same bits)
            scale = eta if every_coin_lands else torch.mul(eta, coins[..., None], out=step)
            if fused is None:
                torch.addcmul(X, sample(X.view(*lead, N, d)).view(CR, N, d), scale, out=moved)
            else:
                fused(X.view(*lead, N, d), scale.expand(CR, N, 1).view(*lead, N, 1),
                      moved.view(*lead, N, d))
        bound = None if hub_form else mixes(k, moved, bound=accept.alive is None)
        X, moved = accept(X, moved, bound=bound), X
        if accept.alive is None and every_coin_lands:
            steps_everywhere += 1  # added to every worker at once, below
        else:
            steps_taken.add_(coins if accept.alive is None else coins & accept.alive[:, None])
        if record_iterates:
            models.append(X.clone())
            grads.append(torch.where(accept.diverged[:, None, None], 0.0, G))
        for c in ends.get(k, ()) if batched else ():
            rows = slice(c * R, (c + 1) * R)
            final[c] = (steps_taken[rows] + steps_everywhere, accept.diverged[rows].clone())

    if not batched:
        steps_taken.add_(steps_everywhere)
        final[0] = (steps_taken, accept.diverged)
    traces = [_trace(c, R, Ks[c] // record_every, final[c], losses, grad_sq_norms, slots,
                     models, grads, a, record_grad, record_iterates, Ks[c], record_first)
              for c in range(C)]
    return [traces[c] for c in sorted(range(C), key=order.__getitem__)] if batched else traces[0]


def _hub_steps(problem: Problem, hub_of: torch.Tensor):
    """The problem's ``hub_step_sampler`` (``sim.neural.NeuralClients``) where the workers of
    each hub are consecutive (hub 0's first), else None."""
    maker = getattr(problem, "hub_step_sampler", None)
    if maker is None or not bool((hub_of[1:] >= hub_of[:-1]).all()):
        return None
    return maker


def _by_form(common: dict, eta, Ks: list[int], taus: list[int],
             generator: torch.Generator) -> list[Trace]:
    """A batch that mixes tau = 1 (run in hub form) with other taus as two batches, each
    from the generator's state on entry (the draws of iteration k do not depend on the
    configurations), the generator left where the longer one leaves it; the traces in the
    order of the configurations."""
    start, traces, ends = generator.get_state(), {}, []
    R = common["replicas"]
    for part in ([c for c, t in enumerate(taus) if t == 1], [c for c, t in enumerate(taus) if t != 1]):
        generator.set_state(start)
        steps = eta if isinstance(eta, float) else eta.view(len(taus), R)[part].neg()
        found = run_mllsgd(**common, eta=steps, K=[Ks[c] for c in part], tau=[taus[c] for c in part],
                           generator=generator)
        traces.update(zip(part, found, strict=True))
        ends.append((max(Ks[c] for c in part), generator.get_state()))
    generator.set_state(max(ends, key=lambda end: end[0])[1])
    return [traces[c] for c in range(len(taus))]


def _trace(c: int, R: int, records: int, final, losses, grad_sq_norms, slots, models, grads,
           a, record_grad: bool, record_iterates: bool, K: int, record_first: bool) -> Trace:
    """Configuration c's :class:`Trace` (rows c R .. (c + 1) R - 1 of a batch; the whole run
    for a run of one): its first ``records`` recordings and K iterations."""
    rows = slice(c * R, (c + 1) * R)
    recorded = {}
    if record_iterates:
        X_all = torch.stack([m[rows] for m in models[:K + 1]], dim=1)
        G_all = torch.stack([g[rows] for g in grads[:K]], dim=1)
        recorded = {"X": X_all, "G": G_all, "u": X_all.transpose(2, 3) @ a,
                    "Ga": G_all.transpose(2, 3) @ a}
    steps_taken, diverged = final
    return Trace(
        grad_sq_norm=torch.stack([v[rows] for v in grad_sq_norms[:records]], dim=1).cpu()
        if record_grad else None,
        loss=torch.stack([v[rows] for v in losses[:records]], dim=1).cpu(),
        steps_taken=steps_taken.cpu(), slots=slots[rows, :K].cpu(), diverged=diverged.cpu(),
        recorded=torch.arange(1 if record_first else K // records, K + 1, K // records),
        **{name: value.cpu() for name, value in recorded.items()},
    )


class _Operators:
    """T_k of (6) for a batch of C configurations with their own tau (one: every
    configuration the same T_k, in place on the whole state): per iteration k, the
    sub-network average ("V") and the hub mixing ("Z") applied to the configurations whose
    T_k it is, rows c R .. (c + 1) R - 1 gathered, averaged in a buffer of their size and
    put back, or averaged in place where they are one range of rows (configurations in the
    order of their tau, :func:`run_mllsgd`, and taus that divide one another: the rows that
    average at k are those of the smallest taus). The rows and buffers of each pattern of T_k
    over the values of tau are made once (the patterns repeat every lcm q tau iterations);
    the gathered rows go in one state-sized scratch buffer shared by every pattern (one
    pattern runs at a time), not in buffers of their own.

    A call returns a bound on the largest magnitude of the state's entries after T_k, for
    ``sim.trace.Acceptance`` (a 0-dimensional tensor), or None where it would cost a pass
    over the whole state: the Euclidean norm of the hub models of the rows averaged
    (every entry of theirs is one of the hub models', :class:`_Averaging`) and of the rows
    not averaged, where these are one range."""

    def __init__(self, taus: list[int], q: int, C: int, R: int, average: _Averaging,
                 hub_of: torch.Tensor, v: torch.Tensor, H: torch.Tensor):
        self.taus, self.q, self.average = taus, q, average
        self.distinct = sorted(set(taus))
        self.rows = torch.arange(C * R, device=H.device).view(C, R)
        self.hub_of, self.v, self.H = hub_of, v, H
        self.plans: dict[tuple[str, ...], tuple[list, slice | None]] = {}
        self.parts = None  # the scratch buffer, made when a plan needs it

    def __call__(self, k: int, moved: torch.Tensor, bound: bool = True) -> torch.Tensor | None:
        """T_k applied to ``moved`` in place; the bound (None where not ``bound``)."""
        if len(self.distinct) == 1:
            z = self.average(moved, operator_at(k, self.q, self.taus[0]))
            return None if z is None or not bound else norm_of(z)
        kinds = tuple(operator_at(k, self.q, tau) for tau in self.distinct)
        if kinds not in self.plans:
            self.plans[kinds] = self._plan(dict(zip(self.distinct, kinds, strict=True)), moved)
        plan, rest = self.plans[kinds]
        hubs = []
        for kind, rows, averaging in plan:
            if rows is None:
                hubs.append(averaging(moved, kind))
            elif isinstance(rows, slice):
                hubs.append(averaging(moved[rows], kind))
            else:
                part = torch.index_select(moved, 0, rows, out=self.parts[:rows.numel()])
                hubs.append(averaging(part, kind))
                moved.index_copy_(0, rows, part)
        if rest is None or not bound:
            return None
        norms = [norm_of(z) for z in hubs]
        if rest.stop > rest.start:
            norms.append(norm_of(moved[rest]))
        return torch.linalg.vector_norm(torch.stack(norms))

    def _plan(self, kind_of: dict[int, str], moved: torch.Tensor) -> tuple[list, slice | None]:
        """[(kind, rows or None for every row, its averaging)] for "V" and "Z", and the rows
        averaged by neither as one range (None where they are not one)."""
        plan, averaged = [], set()
        for kind in ("V", "Z"):
            picked = [c for c, tau in enumerate(self.taus) if kind_of[tau] == kind]
            averaged.update(picked)
            if len(picked) == len(self.taus):
                plan.append((kind, None, self.average))
            elif picked:
                rows = self.rows[picked].view(-1)
                shape = (rows.numel(), *moved.shape[1:])
                if picked == list(range(picked[0], picked[-1] + 1)):  # one range: in place
                    rows = slice(int(rows[0]), int(rows[-1]) + 1)
                elif self.parts is None:
                    self.parts = torch.empty_like(moved)
                plan.append((kind, rows, _Averaging(self.hub_of, self.v, self.H, shape)))
        others = [c for c in range(len(self.taus)) if c not in averaged]
        R = self.rows.shape[1]
        if not others:
            return plan, slice(0, 0)
        if others == list(range(others[0], others[-1] + 1)):
            return plan, slice(others[0] * R, (others[-1] + 1) * R)
        return plan, None


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
    z^(d) = sum_{i in M(d)} v_i x^(i) (Algorithm 1, line 10) as one batched product of the
    [D, N] matrix of the weights v_i (row d(i)) with X (a pass over X, not three: the
    products v_i x^(i), their sum by hub and its buffer), mixed across hubs by
    :func:`hub_mix` for "Z", broadcast back to the workers of each hub. Returns the hub
    models broadcast ([R, D, d]: every entry of X after the call is one of theirs), None
    for "I"."""

    def __init__(self, hub_of: torch.Tensor, v: torch.Tensor, H: torch.Tensor, shape):
        R, N, d = shape
        D = H.shape[0]
        weights = torch.zeros(D, N, dtype=DTYPE, device=H.device)
        weights[hub_of, torch.arange(N, device=H.device)] = v
        self.weights = weights.expand(R, D, N)
        self.hub_of, self.H = hub_of, H
        self.z = torch.empty(R, D, d, dtype=DTYPE, device=H.device)

    def __call__(self, X: torch.Tensor, kind: str) -> torch.Tensor | None:
        if kind == "I":
            return None
        z = torch.bmm(self.weights, X, out=self.z)
        if kind == "Z":
            z = hub_mix(z, self.H)
        torch.index_select(z, 1, self.hub_of, out=X)
        return z
