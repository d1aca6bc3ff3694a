"""Delay-sensitive hierarchical FL, Algorithm 1 of Ali & Arafa 2025 (equation numbers are the
paper's), vectorised over replicas, groups, clients.

State: the global model ``x`` [R, d] and the group models ``y`` [R, G, d]; the clients of
group i are a padded axis [R, G, n_max, d] with a mask for unequal sizes. Per round u:

- every group starts at x^u (3)-(4); each local iteration l every client takes one SGD
  step from the group model (5) and the group averages (6), i.e. minibatch SGD on
  f_i with the |N_i| clients' gradients;
- group i performs t_i^u local iterations, t_i^u = min{n >= 1: tau_1 + ... + tau_n >= S}
  (7): the iteration that crosses S is performed and counted, S = 0 gives one;
- uploads are normalised by t_i^u (10) and the global update weights them by
  |N_i| / N (12) (``upload="printed"``; the other readings of (10) and (12):
  :data:`UPLOADS`);
- the system time ACCUMULATES the round duration max_i sum_l tau + tau_g (9), (13)
  (line 21 of Algorithm 1 assigns instead: erratum), and U is the first round at
  which it reaches T (that round is counted).

The schedule (t[u, i], U, wall-clock round ends) is drawn first by :func:`draw_schedule`
(shifted-exponential delays per group and for the server, Section IV) or given by the caller (a
fixed delay path, or paths drawn elsewhere); then the SGD part runs on it. Random draws,
in this order, from the one ``generator``: the schedule (per round: local-iteration times
[R, G] one iteration at a time until every group crossed S_u, then tau_g [R]), then per
round and local iteration ``problem.stochastic_grad`` on [R, G, n_max, d]. Same seed, same
trace, bit for bit. S_u = min(u, S) (Fig. 13, Section IV-D) with ``ramp=True``.

A batch of C configurations (:func:`run_hfl` with schedules or steps per configuration: a
sync time S per configuration is its own schedules) runs every configuration's local
iterations on one clock, configuration c's l-th local iteration at the run's step l, and
gives every configuration the draws of its run alone (``sim.problems.CommonDraws``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedbound.sim.problems import DTYPE, CommonDraws, Problem, rand, replica_steps
from fedbound.sim.trace import Acceptance, Rounds

#: the readings of the upload (10) and the global update (12), Delta_i = x_i^{u,t_i^u} - x^u,
#: w_i = |N_i| / N:
#:
#: - ``"printed"``: x^{u+1} = x^u + sum_i w_i Delta_i / t_i^u, (10) and (12) as printed: a
#:   round moves x by one step alpha along the average of the round's gradients, whatever
#:   the t_i^u;
#: - ``"fednova"``: x^{u+1} = x^u + t_eff sum_i w_i Delta_i / t_i^u with t_eff = sum_i w_i
#:   t_i^u: the normalised averaging of FedNova (Wang, Liu, Liang, Joshi & Poor 2020,
#:   NeurIPS; tau_eff = sum_i p_i tau_i), the work (10) cites for its division ("to avoid
#:   the objective inconsistency"): the groups' directions weigh as in "printed", the
#:   round moves x by about t_eff steps;
#: - ``"sum"``: x^{u+1} = x^u + sum_i w_i Delta_i: (12) without the division of (10), the
#:   weighted average of the group models (FedAvg's).
UPLOADS = ("printed", "fednova", "sum")


@dataclass(frozen=True)
class HFLDelays:
    """Shifted-exponential delay laws tau = shift + Exp(mean) (Section IV): one per group for a
    local iteration and one for the global server. ``mean = 0`` is deterministic."""

    local_shift: tuple[float, ...]
    local_mean: tuple[float, ...]
    global_shift: float
    global_mean: float

    def __post_init__(self):
        if len(self.local_shift) != len(self.local_mean) or not self.local_shift:
            raise ValueError("local_shift and local_mean need one entry per group (>= 1 group)")
        for name in ("local_shift", "local_mean"):
            for i, v in enumerate(getattr(self, name)):
                _nonnegative(f"{name}[{i}]", v)
        _nonnegative("global_shift", self.global_shift)
        _nonnegative("global_mean", self.global_mean)
        for i, (c, m) in enumerate(zip(self.local_shift, self.local_mean, strict=True)):
            if c == 0 and m == 0:
                raise ValueError(f"group {i}: local_shift = local_mean = 0 (zero delay)")

    @property
    def groups(self) -> int:
        return len(self.local_shift)


def _nonnegative(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name}={value!r} must be a finite number")
    if value < 0:
        raise ValueError(f"{name}={value} must be >= 0 (a delay cannot be negative)")
    return float(value)


@dataclass(frozen=True)
class HFLSchedule:
    """``t`` [R, U_max, G] int64 local-iteration counts (0 after round U), ``U`` [R] rounds,
    ``end_time`` [R, U_max] accumulated wall-clock time at the end of each round (0 after U);
    a batch of C configurations' schedules: [C, R, U_max, G], [C, R], [C, R, U_max]."""

    t: torch.Tensor
    U: torch.Tensor
    end_time: torch.Tensor


def _exp_draws(shape, generator: torch.Generator, device) -> torch.Tensor:
    """Standard exponential draws by inversion of uniforms on [0, 1)."""
    return -torch.log1p(-rand(shape, generator, device))


def draw_schedule(delays: HFLDelays, S: float, T: float, replicas: int,
                  generator: torch.Generator, *, ramp: bool = False,
                  device=None) -> HFLSchedule:
    """Rounds of Algorithm 1 with wall-clock time: per round the local phase of
    every group runs until its elapsed time reaches S_u ((7), one local iteration at a
    time), the round lasts max_i elapsed_i + tau_g (9), the system time accumulates
    it, and replicas stop after the round that reaches T ((13))."""
    S = _nonnegative("S", S)
    T = _nonnegative("T", T)
    if T <= 0:
        raise ValueError(f"T={T} must be > 0")
    R = _positive_int("replicas", replicas)
    device = torch.device("cpu") if device is None else torch.device(device)
    G = delays.groups
    shift = torch.tensor(delays.local_shift, dtype=DTYPE, device=device)
    mean = torch.tensor(delays.local_mean, dtype=DTYPE, device=device)
    clock = torch.zeros(R, dtype=DTYPE, device=device)
    running = torch.ones(R, dtype=torch.bool, device=device)
    rows, ends = [], []
    u = 0
    while running.any():
        u += 1
        level = min(float(u), S) if ramp else S
        t = torch.zeros(R, G, dtype=torch.int64, device=device)
        elapsed = torch.zeros(R, G, dtype=DTYPE, device=device)
        todo = running[:, None].expand(R, G).clone()
        while todo.any():
            tau = shift + mean * _exp_draws((R, G), generator, device)
            elapsed = torch.where(todo, elapsed + tau, elapsed)
            t = t + todo.long()
            todo = todo & (elapsed < level)
        tau_g = delays.global_shift + delays.global_mean * _exp_draws((R,), generator, device)
        clock = torch.where(running, clock + elapsed.amax(dim=1) + tau_g, clock)
        rows.append(t)
        ends.append(torch.where(running, clock, 0.0))
        running = running & (clock < T)
    t = torch.stack(rows, dim=1)
    return HFLSchedule(t=t, U=(t[..., 0] > 0).sum(dim=1), end_time=torch.stack(ends, dim=1))


def schedule_from_counts(t, replicas: int, device=None, end_time=None) -> HFLSchedule:
    """A given schedule t [U, G] (one fixed delay path for all replicas), [R, U_max, G]
    (zero-padded) or [C, R, U_max, G] (those of a batch of C configurations), validated:
    integers, rows all >= 1 or all 0 (padding at the end). ``end_time`` ([U], [R, U_max] or
    [C, R, U_max], the wall-clock round ends of the same path(s)) defaults to the round index
    when no wall clock is known."""
    t = torch.as_tensor(t, device=device)
    if t.dtype.is_floating_point:
        if not torch.equal(t, torch.floor(t)):
            raise ValueError("t must hold integer local-iteration counts")
        t = t.long()
    if t.ndim == 2:
        t = t.expand(_positive_int("replicas", replicas), *t.shape)
    if t.ndim not in (3, 4) or 0 in t.shape[-2:]:
        raise ValueError(f"t must have shape [U, G], [R, U, G] or [C, R, U, G], got "
                         f"{tuple(t.shape)}")
    real = t > 0
    rows = real.all(dim=-1)
    if (t < 0).any() or (real.any(dim=-1) & ~rows).any():
        raise ValueError("t: every real round needs t_i^u >= 1 in every group "
                         "(Ali & Arafa 2025, eq. (7))")
    if not rows[..., 0].all() or (rows[..., 1:] & ~rows[..., :-1]).any():
        raise ValueError("t: zero rows may only pad the end of a schedule (U >= 1)")
    U = rows.sum(dim=-1)
    if end_time is None:
        end_time = torch.arange(1, t.shape[-2] + 1, dtype=DTYPE, device=t.device)
    end_time = torch.as_tensor(end_time, dtype=DTYPE, device=t.device).expand(t.shape[:-1])
    if not torch.isfinite(end_time).all() or (torch.diff(end_time, dim=-1)[rows[..., 1:]] < 0).any():
        raise ValueError("end_time must be finite and non-decreasing over the rounds")
    return HFLSchedule(t=t, U=U, end_time=torch.where(rows, end_time, 0.0))


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name}={value} must be an integer >= 1")
    return int(value)


@dataclass(frozen=True)
class HFLTrace:
    """Record of R replicas (CPU tensors, float64).

    - ``grad_sq_norm`` [R, U_max]: ||grad f(x^u)||^2 at the global model of round u (0 after
      U): the summand of the left-hand side of Theorem 2, (20).
    - ``loss`` [R, U_max + 1]: f(x^u), u = 1..U_max + 1 (frozen after U: the last is
      f(x^{U+1}), the analysis' final model); [R, 1], f(x^{U+1}) only, with
      ``record_loss=False``.
    - ``group_grad_sq_sum`` [R, G]: sum_u sum_{l=1}^{t_i^u} ||grad f_i(x_i^{u,l-1})||^2, the
      numerator of Theorem 1's left-hand side (19), f_i group i's objective
      (``problem.group_grads``; clients i.i.d.: f_i = f).
      Both None with ``record_grad=False``.
    - ``deviation`` [R, U_max, G]: ||x^{u+1} - x_i^{u,t_i^u}||^2, Lemma 1 (18); None with
      ``record_loss=False``.
    - ``t`` [R, U_max, G], ``U`` [R], ``end_time`` [R, U_max]: the realised schedule.
    - ``diverged`` [R] (see sim.trace). ``x_final`` [R, d]: x^{U+1}, the final global model.
    """

    grad_sq_norm: torch.Tensor | None
    loss: torch.Tensor
    group_grad_sq_sum: torch.Tensor | None
    deviation: torch.Tensor | None
    t: torch.Tensor
    U: torch.Tensor
    end_time: torch.Tensor
    diverged: torch.Tensor
    x_final: torch.Tensor

    @property
    def real(self) -> torch.Tensor:
        """[R, U_max] mask of rounds that happened."""
        return self.t[..., 0] > 0

    @property
    def lhs(self) -> torch.Tensor:
        """(1/U) sum_{u=1}^U ||grad f(x^u)||^2 per replica, [R]: Theorem 2's left-hand side."""
        return (self.grad_sq_norm * self.real).sum(dim=1) / self.U

    @property
    def group_lhs(self) -> torch.Tensor:
        """Theorem 1's left-hand side per replica and group, [R, G]."""
        return self.group_grad_sq_sum / self.t.sum(dim=1)

    @property
    def final_loss(self) -> torch.Tensor:
        """f(x^{U+1}) per replica, [R]."""
        return self.loss[:, -1]


def _validated(problem: Problem, sizes, alpha, x1, replicas, device, configurations):
    sizes = torch.as_tensor(sizes, device=device)
    if sizes.ndim != 1 or sizes.numel() == 0 or sizes.dtype.is_floating_point:
        raise ValueError("sizes must be a non-empty 1-D integer tensor of group sizes")
    if (sizes < 1).any():
        i = int(torch.nonzero(sizes < 1)[0])
        raise ValueError(f"sizes[{i}]={int(sizes[i])} must be >= 1 (a group cannot be empty)")
    alpha = replica_steps("alpha", alpha, replicas, device, configurations)
    x1 = torch.as_tensor(x1, dtype=DTYPE, device=device)
    if x1.shape != (problem.dim,) or not torch.isfinite(x1).all():
        raise ValueError(f"x1 must be finite with shape ({problem.dim},), got {tuple(x1.shape)}")
    return sizes.long(), alpha, x1


def _configurations(alpha, t, schedule) -> int | None:
    """C for a batch of configurations (``t`` or ``schedule.t`` [C, R, U, G], ``alpha``
    [C, R] or [C, 1]), None for a run of one; ValueError when they disagree."""
    found = {}
    if isinstance(alpha, torch.Tensor | list | tuple) and torch.as_tensor(alpha).ndim == 2:
        found["alpha"] = torch.as_tensor(alpha).shape[0]
    counts = schedule.t if schedule is not None else t
    if counts is not None and torch.as_tensor(counts).ndim == 4:
        found["t" if schedule is None else "schedule.t"] = torch.as_tensor(counts).shape[0]
    if len(set(found.values())) > 1:
        raise ValueError(f"configurations: {', '.join(f'{k} has {v}' for k, v in found.items())}"
                         " (the leading axis of a batch)")
    return next(iter(found.values()), None)


def run_hfl(problem: Problem, *, sizes: Sequence[int], alpha: float | torch.Tensor, x1, replicas: int,
            generator: torch.Generator, schedule: HFLSchedule | None = None, t=None,
            end_time=None, delays: HFLDelays | None = None, S: float | None = None, T: float | None = None,
            ramp: bool = False, upload: str = "printed", record_grad: bool = True,
            record_loss: bool = True, device=None) -> HFLTrace | list[HFLTrace]:
    """Run ``replicas`` realisations of Algorithm 1 on ``problem``: every client i.i.d. on
    it, or, for a ``sim.clients.ClientProblem`` of sum(sizes) clients, client k of group g
    (k counted group after group) drawing its mini-batches from its own shard (the
    non-i.i.d. clients of Section IV); the trace records the problem's global f.

    The schedule is ``schedule``, or the counts ``t`` ([U, G]: one fixed delay path;
    [R, U_max, G]: zero-padded paths; ``end_time`` their wall-clock round ends, if known),
    or drawn from ``delays`` at ``S``, ``T`` (and ``ramp``) by :func:`draw_schedule` with
    ``generator``. ``alpha``: one step, or one per replica (a grid of steps in one run).
    ``upload``: the reading of eqs. (10) and (12), :data:`UPLOADS` ("printed",
    the default, divides each group's update by t_i^u; "fednova" rescales that by the
    groups' mean t; "sum" does not divide). Returns a CPU :class:`HFLTrace`.
    ``record_grad=False`` records the loss only (``grad_sq_norm`` and ``group_grad_sq_sum``
    None): no full gradient per round and local iteration, for a run whose training curve
    is all that is read; the dynamics and the draws are the same. ``record_loss=False`` (with
    ``record_grad=False``) records f at the final model x^{U+1} only (``loss`` [R, 1]) and no
    deviation: no pass over the problem's data per round, for a run whose final loss is all
    that is read.

    A batch of C configurations in one run, with common random numbers: ``t`` (or
    ``schedule.t``) [C, R, U_max, G] with ``end_time`` [C, R, U_max] (configuration c's
    schedules: a sync time S per configuration is its own schedules, zero-padded to a common
    U_max), and/or ``alpha`` [C, R] or [C, 1] (a step per configuration and replica; [R] or a
    number: the same for every configuration); with ``delays``, one schedule drawn at ``S``
    for every configuration. Returns a list of C traces: trace c is, the run of configuration c
    alone (its ``t[c]``, ``end_time[c]``, ``alpha[c]``) with the same ``generator`` state: the
    same draws (the gradient noise or mini-batches of the l-th local iteration of the run),
    on the schedules' own delay paths; bit for bit under the conditions of
    ``sim.problems.CommonDraws``."""
    if upload not in UPLOADS:
        raise ValueError(f"upload={upload!r} must be one of {UPLOADS} (the readings of "
                         "Ali & Arafa 2025, eqs. (10) and (12))")
    device = problem.device if device is None else torch.device(device)
    problem = problem.to(device)
    replicas = _positive_int("replicas", replicas)
    C = _configurations(alpha, t, schedule)
    sizes, alpha, x1 = _validated(problem, sizes, alpha, x1, replicas, device, C)
    given = [schedule is not None, t is not None, delays is not None]
    if sum(given) != 1:
        raise ValueError("give exactly one of schedule, t, or delays (with S and T)")
    if delays is not None:
        if S is None or T is None:
            raise ValueError("delays need S and T")
        if delays.groups != sizes.numel():
            raise ValueError(f"delays have {delays.groups} groups, sizes {sizes.numel()}")
        schedule = draw_schedule(delays, S, T, replicas, generator, ramp=ramp, device=device)
    elif t is not None:
        schedule = schedule_from_counts(t, replicas, device, end_time)
    if schedule.t.shape[-3] != replicas or schedule.t.shape[-1] != sizes.numel():
        raise ValueError(f"schedule has shape {tuple(schedule.t.shape)}; need "
                         f"[replicas={replicas}, U, groups={sizes.numel()}]"
                         + (" after the configurations" if C is not None else ""))
    if C is not None and schedule.t.ndim == 3:  # one schedule for every configuration
        schedule = HFLSchedule(*(v.expand(C, *v.shape) for v in
                                 (schedule.t, schedule.U, schedule.end_time)))
    if record_grad and not record_loss:
        raise ValueError("record_loss=False records the final loss only: it needs "
                         "record_grad=False")
    traces = _run(problem, sizes, alpha, x1, schedule, generator, device, upload, record_grad,
                  record_loss, batched=C is not None)
    return traces if C is not None else traces[0]


def upload_divisors(t: torch.Tensor, sizes: torch.Tensor, upload: str) -> torch.Tensor:
    """[..., U, G, 1]: what each group's update Delta_i is divided by under the reading
    ``upload`` of (10) and (12) (:data:`UPLOADS`): t_i^u, t_i^u / t_eff, or 1, for counts
    ``t`` [..., U, G]."""
    counts = t.clamp(min=1).to(DTYPE)
    if upload == "sum":
        return torch.ones_like(counts)[..., None]
    if upload == "fednova":
        t_eff = (counts * (sizes.to(DTYPE) / sizes.sum())).sum(dim=-1, keepdim=True)
        return (counts / t_eff)[..., None]
    return counts[..., None]


class _Event:
    """Configurations whose round starts (or ends) at a step of a batched run: ``configs``
    and their ``rounds`` (lists of n, and ``index``, the same as int64 tensors), and their
    state rows in the batch's [C R] (``rows``, made when first needed; None: every
    configuration's) from ``table`` [C, R], the rows of every configuration."""

    __slots__ = ("configs", "rounds", "index", "table", "_rows")

    def __init__(self, configs: list[int], rounds: list[int],
                 index: tuple[torch.Tensor, torch.Tensor], table: torch.Tensor):
        self.configs, self.rounds, self.index, self.table = configs, rounds, index, table
        self._rows = None

    @property
    def whole(self) -> bool:
        return len(self.configs) == self.table.shape[0]

    @property
    def rows(self) -> torch.Tensor | None:
        if self._rows is None and not self.whole:
            self._rows = self.table[self.index[0]].view(-1)
        return self._rows

    def state(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` [C, R, ...]'s rows of the configurations (a view for one, or all)."""
        if self.whole:
            return tensor
        c = self.configs[0]
        return tensor[c:c + 1] if len(self.configs) == 1 else tensor[self.index[0]]

    def at(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` [C, R, U, ...] at each configuration's round, [n, R, ...]."""
        if len(self.configs) == 1:
            return tensor[self.configs[0], :, self.rounds[0]][None]
        return tensor[self.index[0], :, self.index[1]]


class _Timeline:
    """The local iterations of a batch of C configurations, run one after the other on one
    clock: configuration c's round u lasts longest_c[u] = max_{r, i} t[c, r, u, i] steps (as in
    a run of c alone, its replicas and groups wait for the longest), so its l-th local
    iteration of the run is the run's step l, and every configuration takes step k's draws.

    ``starts[k]`` and ``ends[k]``: the :class:`_Event` of the configurations whose round
    starts or ends at step k, if any; ``steps``: the run's length, max_c sum_u longest_c[u];
    ``active`` [steps, C, R, G]: whether group i of replica r of c takes a local iteration at
    step k (l < t[c, r, u, i], within c's rounds)."""

    def __init__(self, t: torch.Tensor):
        C, R, U, G = t.shape
        device = t.device
        longest = t.amax(dim=(1, 3)).cpu()                                      # [C, U]
        ends = longest.cumsum(dim=1)
        begins = ends - longest
        self.steps = int(ends[:, -1].max())
        self.starts, self.ends = {}, {}
        c, u = torch.nonzero(longest > 0, as_tuple=True)
        table = torch.arange(C * R, device=device).view(C, R)
        for events, at in ((self.starts, begins[c, u]), (self.ends, ends[c, u] - 1)):
            order = torch.argsort(at, stable=True)
            steps, counts = torch.unique_consecutive(at[order], return_counts=True)
            counts = counts.tolist()
            cs, us = c[order].to(device), u[order].to(device)
            for step, configs, rounds, index in zip(
                    steps.tolist(), _split(cs.tolist(), counts), _split(us.tolist(), counts),
                    zip(cs.split(counts), us.split(counts), strict=True), strict=True):
                events[step] = _Event(configs, rounds, index, table)
        k = torch.arange(self.steps).repeat(C, 1)
        rounds = torch.searchsorted(ends, k, right=True).clamp_(max=U - 1)      # [C, K]: u of step k
        local = (k - begins.gather(1, rounds)).to(device)                       # l of step k
        counts = t.to(torch.int32).permute(0, 2, 1, 3)[torch.arange(C)[:, None], rounds.to(device)]
        self.active = (local[..., None, None] < counts).transpose(0, 1).contiguous()  # [K, C, R, G]


def _split(values: list[int], counts: list[int]) -> list[list[int]]:
    """``values`` cut into consecutive lists of ``counts``."""
    out, start = [], 0
    for n in counts:
        out.append(values[start:start + n])
        start += n
    return out


def _run(problem: Problem, sizes: torch.Tensor, alpha: float | torch.Tensor, x1: torch.Tensor,
         schedule: HFLSchedule, generator: torch.Generator, device, upload: str,
         record_grad: bool = True, record_loss: bool = True,
         batched: bool = False) -> list[HFLTrace]:
    t = schedule.t.to(device)
    t = t if batched else t[None]
    C, R, U_max, G = t.shape
    d, n_max = problem.dim, int(sizes.max())
    lead = (C, R) if batched else (R,)        # what the problem sees: a run of one as before
    weights = (sizes.to(DTYPE) / sizes.sum())[None, :, None]
    real = t[..., 0] > 0                                   # [C, R, U_max]: rounds that happen
    divisor = upload_divisors(t, sizes, upload)             # t_i^u of the upload (10)
    draws = CommonDraws(generator, C) if batched else generator
    group_gradient = problem.mean_gradient_sampler((*lead, G, n_max, d), sizes, draws)
    # a sampler that computes the stepping groups' steps only (sim.neural's): y's rows
    # [C R G] that step, updated in place; otherwise every group's gradient, and torch.where
    by_rows = getattr(group_gradient, "rows", False) and not record_grad
    descent = -torch.as_tensor(alpha, dtype=DTYPE, device=device).expand(C, R, G, 1).reshape(
        C * R * G, 1) if by_rows else None                            # -alpha of each row of y
    x = x1.expand(C, R, d).clone()
    y = torch.empty(C, R, G, d, dtype=DTYPE, device=device)
    accept = Acceptance(C * R, device)
    losses, grad_sqs, deviations = Rounds(), Rounds(), Rounds()
    group_sum = torch.zeros(C, R, G, dtype=DTYPE, device=device)
    zero = torch.zeros((), dtype=DTYPE, device=device)  # torch.where(m, v, zero): less dispatch than 0.0
    line = _Timeline(t)

    def start(event: _Event) -> None:
        """Round u of each configuration begins at x^u: record f (and ||grad f||^2) there,
        and every group starts from it, (3)-(4)."""
        xs = event.state(x)
        if record_grad:
            value, norm = problem.loss_and_grad_sq(xs.view(-1, d))
            grad_sqs.put(event.configs, event.rounds, norm)
            losses.put(event.configs, event.rounds, value)
        elif record_loss:
            losses.put(event.configs, event.rounds, problem.loss(xs.view(-1, d)))
        if event.whole or len(event.configs) == 1:
            event.state(y)[:] = xs[:, :, None, :]
        else:
            y[event.index[0]] = xs[:, :, None, :]

    def end(event: _Event) -> None:
        """Round u of each configuration ends: the uploads (10) and the global update (12),
        Lemma 1's deviation (18)."""
        nonlocal x
        xs, ys = event.state(x), event.state(y)
        n = xs.shape[0]
        update = (ys - xs[:, :, None, :]) / event.at(divisor)
        candidate = xs + (weights * update.view(n * R, G, d)).sum(dim=1).view(n, R, d)
        active_round = event.at(real)
        candidate = torch.where(active_round[..., None], candidate, xs)
        x_next = accept(xs.view(n * R, d), candidate.view(n * R, d), event.rows).view(n, R, d)
        if record_loss:
            kept = active_round if accept.alive is None else \
                active_round & event.state(accept.alive.view(C, R))
            deviations.put(event.configs, event.rounds, torch.where(
                kept[..., None], (x_next[:, :, None, :] - ys).square().sum(-1), zero))
        if event.whole:
            x = x_next
        elif n == 1:
            event.state(x)[:] = x_next
        else:
            x[event.index[0]] = x_next

    for k in range(line.steps):
        if k in line.starts:
            start(line.starts[k])
        now = line.active[k]
        now_d = now[..., None]
        if accept.alive is not None:
            alive = accept.alive.view(C, R, 1)
            now, now_d = now & alive, now_d & alive[..., None]
        here = y.view(*lead, G, d)
        grad = problem.group_grads(here, sizes) if record_grad else None
        if record_grad:
            group_sum += torch.where(now, grad.view(C, R, G, d).square().sum(-1), zero)
        if by_rows:  # y - alpha g on the rows that step (every step: every group's draws)
            rows = now.view(-1).nonzero().view(-1)
            moved = group_gradient(here, None, rows, descent[rows])
            if rows.numel():
                y.view(-1, d).index_copy_(0, rows, moved)
        else:
            y = torch.where(now_d, y - alpha * group_gradient(here, grad).view(C, R, G, d), y)
        if k in line.ends:
            end(line.ends[k])
    zeros = torch.zeros
    loss = losses.into(zeros(C, R, U_max + 1 if record_loss else 1, dtype=DTYPE, device=device))
    deviation = deviations.into(zeros(C, R, U_max, G, dtype=DTYPE, device=device)).cpu() \
        if record_loss else None
    flat = x.view(-1, d)
    done = ~real.any(dim=1)                                 # [C, U_max]: rounds after every U
    if record_loss and done.any():  # rounds no replica runs: f at the final model, as recorded
        value = problem.loss_and_grad_sq(flat)[0] if record_grad else problem.loss(flat)
        loss[:, :, :U_max] = torch.where(done[:, None, :], value.view(C, R, 1),
                                         loss[:, :, :U_max])
    loss[:, :, -1] = problem.loss(flat).view(C, R)
    loss, x = loss.cpu(), x.cpu()
    diverged = accept.diverged.cpu().view(C, R)
    grad_sq = None
    if record_grad:
        grad_sq = grad_sqs.into(zeros(C, R, U_max, dtype=DTYPE, device=device))
        grad_sq, group_sum = torch.where(real, grad_sq, 0.0).cpu(), group_sum.cpu()
    U, end_time = (v if batched else v[None] for v in (schedule.U, schedule.end_time))
    return [HFLTrace(
        grad_sq_norm=grad_sq[c] if record_grad else None, loss=loss[c],
        group_grad_sq_sum=group_sum[c] if record_grad else None,
        deviation=None if deviation is None else deviation[c], t=t[c].cpu(), U=U[c].cpu(),
        end_time=end_time[c].cpu(),
        diverged=diverged[c], x_final=x[c]) for c in range(C)]
