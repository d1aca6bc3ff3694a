"""The experiments behind Das et al. 2022's claims (Section 5), on the 8x8 digits.

The paper trains a ResNet-18 per silo on the two halves of every CIFAR-10 image (N = 2),
K = 50 or 100 clients per silo, mini-batches of 2000 sample IDs reused for the Q local
iterations of a round, each Q at the best step of a grid (the lowest training loss), and
plots test accuracy and training loss against the latency t_Q = 3 t_comm + Q t_comp
(t_comm = 10 or 100, t_comp = 1) or against iterations (Sections 5.2 and 5.3).

The smallest faithful analogue run here (``sim.tdcd.run_tdcd``): the 1797 digits of 64
standardised pixels, split into N = 2 silos holding the top and bottom halves of each image
(N = 4: quarters) (``sim.data.vertical_split``), one MLP per silo (``sim.neural.mlp``, 16
tanh units, 10 outputs), the outputs summed and the cross-entropy of the ten classes: the
paper's Fig. 1(b) with small networks. K = 2 clients per silo and batches of 80 sample IDs:
40 per client, the paper's 2000 / 50 (K = 4: 20 per client, the paper's 2000 / 100).
Q in {1, 10, 20, 30}, the values of the authors' experiment scripts (the text does not list
them). Every Q runs the same number of local iterations (the paper: 5000 on CIFAR-10), each
step of :data:`STEPS` for every seed in one vectorised run, and keeps the step with the
lowest mean training loss at the end (the paper's grid search per Q); the seeds of that
step form the curve. The seed sets the networks' initial weights; every configuration of
an experiment starts from them (paired).

The metric: the training loss L(theta) of the hub models over all samples, after each
round, against local iterations or against time units t_Q (the paper's Figs. 3-8 plot test
accuracy against time and training loss against iterations).

The readings of the round's mini-batch (:data:`READINGS`, ``sim.tdcd.BATCHES``): as printed,
one batch of sample IDs for all Q local iterations of a round (Section 3, Algorithm 1), or a
fresh batch at every local iteration (the conference version of TDCD); the Q claims run
under both (the other experiments under the printed one).

The experiments train some configurations alike: K = 2 (clients) and N = 2 (silos) are the
latency experiment's networks, and Q = 1 is the same run under either reading (a round of
one local iteration draws one batch). Each (network, Q, plan) is trained once per process
(:func:`trained`, a bounded cache: the runs are deterministic, so a hit returns the numbers a
rerun computes), and Theorem 1's constants are estimated once for both readings
(:func:`bounds_at`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace
from functools import lru_cache
from types import MappingProxyType

import numpy as np

from fedbound.verify.api import (
    LOOP_OVERHEAD,
    Curve,
    EstimationSettings,
    Footprint,
    Outcome,
    Plan,
    Reading,
    conservative_bound,
    conservative_step,
)

QS = (1, 10, 20, 30)
#: t_comm / t_comp of Section 5.3.1 (t_comp = 1)
RATIOS = (10.0, 100.0)
#: the step grid every configuration searches
STEPS = (0.05, 0.1, 0.2, 0.4)
BATCH, CLIENTS, SILOS, HIDDEN, CLASSES = 80, 2, 2, 16, 10
#: local iterations of every Q: (quick, full)
ITERATIONS = {True: 240, False: 900}
#: where the iteration claims are decided early: this share of the iterations
EARLY = 0.25
SEEDS = (4, 10)
READINGS = (
    Reading("round", "Das et al. 2022, Section 3 and Algorithm 1 as printed: one mini-batch "
                     "of sample IDs for all Q local iterations of a round"),
    Reading("step", "a fresh mini-batch at every local iteration, the other silos' "
                    "embeddings Phi_{-j} at the round-start hub models"),
)
N_DIGITS, PIXELS = 1797, 64
#: the runs (and bounds) a process keeps: a reproduction of every claim trains 12 distinct runs
CACHED = 32


@contextmanager
def _seeded(seed: int):
    """torch's global generator seeded for the networks' initialisation, and restored."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def ce_loss(z, y):
    """The cross-entropy of the summed embeddings z [..., 10] at the labels y [...] (float
    labels, as ``sim.tdcd.ModuleModel`` holds them)."""
    from fedbound.sim.neural import cross_entropy

    return cross_entropy(z, y.long())


def build_model(*, silos: int, clients: int, batch: int, seed: int, device=None):
    """The digits split over ``silos`` (rows of the image, top to bottom), ``clients`` per
    silo, batches of ``batch``, one MLP per silo initialised from ``seed``: (ModuleModel,
    theta0)."""
    import torch

    from fedbound.sim.data import load_digits, vertical_split
    from fedbound.sim.neural import mlp
    from fedbound.sim.tdcd import Layout, ModuleModel

    digits = load_digits(device=device)
    columns, blocks = vertical_split(digits.features.shape[1], silos)
    layout = Layout(blocks, (clients,) * silos, digits.features.shape[0], batch)
    with _seeded(seed):
        nets = [mlp(width, (HIDDEN,), CLASSES) for width in blocks]
    model = ModuleModel(nets, digits.features[:, columns.to(digits.features.device)],
                        digits.labels.to(torch.float64), layout, loss=ce_loss, device=device)
    return model, model.initial()


def rounds_of(Q: int, iterations: int) -> int:
    return max(1, iterations // Q)


def best_step(model, theta0, *, Q: int, rounds: int, steps, seeds: int, seed: int,
              batch: str = "round"):
    """One vectorised run of every step x ``seeds`` replicas (step-major), the round's
    mini-batch read as ``batch`` (:data:`READINGS`): (the step with the lowest mean final
    loss among those where no replica diverged, its losses [seeds, rounds + 1]). The run
    records the hub models (``record_loss=False``) and the loss of every round is evaluated
    for the best step's replicas only (:func:`losses_of`): the numbers of a run that
    records the loss of every replica, at a fraction of its evaluations."""
    import torch

    from fedbound.sim.tdcd import run_tdcd

    eta = torch.tensor(steps, dtype=torch.float64).repeat_interleave(seeds)
    trace = run_tdcd(model, eta=eta, Q=Q, rounds=rounds, theta0=theta0, replicas=eta.numel(),
                     generator=torch.Generator().manual_seed(seed), batch=batch, record_grad=False,
                     record_loss=False)
    hub = trace.hub.to(model.device)                                 # [R, rounds + 1, N, d]
    last = model.loss(hub[:, -1].contiguous()).cpu().numpy().reshape(len(steps), seeds)
    diverged = trace.diverged.numpy().reshape(len(steps), seeds).any(axis=1)
    final = np.where(diverged, np.inf, last.mean(axis=1))
    k = int(np.argmin(final))
    if not np.isfinite(final[k]):
        raise ValueError(f"Q = {Q}: every step of {tuple(steps)} diverged")
    return float(steps[k]), losses_of(model, hub[k * seeds:(k + 1) * seeds])


#: hub models per evaluation of the loss in :func:`losses_of` (its activations: this many
#: x the digits x (hidden + classes) x 8 B, 24 MB)
LOSS_CHUNK = 64


def losses_of(model, hub) -> np.ndarray:
    """L(theta) at each of the hub models ``hub`` [S, points, N, d]: [S, points], evaluated
    :data:`LOSS_CHUNK` models at a time."""
    import torch

    S, points, N, d = hub.shape
    flat = hub.reshape(S * points, N, d)
    loss = torch.cat([model.loss(chunk.contiguous()) for chunk in flat.split(LOSS_CHUNK)])
    return loss.cpu().numpy().reshape(S, points)


def grid(plan: Plan) -> tuple[float, ...]:
    return (plan.step,) if plan.step is not None else STEPS


def footprint(plan: Plan, configurations: int, silos: int = SILOS, clients: int = CLIENTS) -> Footprint:
    """Memory and work of ``configurations`` runs of every Q (:func:`best_step`)."""
    R = len(grid(plan)) * plan.seeds
    batch = plan.batch or BATCH
    d = (PIXELS // silos) * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES
    iterations = ITERATIONS[plan.quick]
    rounds = sum(rounds_of(Q, iterations) for Q in QS)
    memory = {f"replicas={R} x silos={silos} x clients={clients} x parameters={d} x 6 buffers "
              f"of 8 B": 48.0 * R * silos * clients * d,
              f"replicas={R} x batch={batch} x activations": 8.0 * R * batch * 4 * (HIDDEN + CLASSES),
              f"the hub models of replicas={R} x {rounds_of(1, iterations) + 1} rounds x silos="
              f"{silos} x parameters={d}": 8.0 * R * (rounds_of(1, iterations) + 1) * silos * d,
              f"the loss of {LOSS_CHUNK} hub models x the digits x activations":
                  8.0 * LOSS_CHUNK * N_DIGITS * 2 * (HIDDEN + CLASSES),
              "the digits": 8.0 * N_DIGITS * PIXELS}
    per_step = 6.0 * R * batch * d + LOOP_OVERHEAD * silos
    per_round = 2.0 * plan.seeds * N_DIGITS * d + LOOP_OVERHEAD * 4
    steps = {f"{configurations} configurations x Q in {QS} x {iterations} iterations x replicas="
             f"{R} x batch={batch} x parameters={d}":
             configurations * (len(QS) * iterations * per_step + rounds * per_round)}
    return Footprint.of(memory, steps)


def iteration_curves(plan: Plan, *, silos: int = SILOS, clients: int = CLIENTS, qs=QS,
                     tag: str = "") -> tuple[dict, list[str]]:
    """Per Q: its curve against local iterations at its best step on the network of
    ``silos`` x ``clients`` (:func:`trained`), and a note of the step."""
    curves, notes = {}, []
    for Q in qs:
        eta, loss = trained(_run_plan(plan, Q), silos, clients, Q)
        label = f"Q = {Q}{tag}"
        curves[label] = Curve(label, Q * np.arange(loss.shape[1]), loss)
        notes.append(f"{label}: step {eta:g} of {grid(plan)}")
    return curves, notes


def _run_plan(plan: Plan, Q: int) -> Plan:
    """``plan`` with the reading its run of Q trains under: the printed one where it names
    none, and for Q = 1 (one batch a round under either reading: the same run)."""
    return replace(plan, reading="round" if Q == 1 else plan.reading or "round")


@lru_cache(maxsize=CACHED)
def trained(plan: Plan, silos: int, clients: int, Q: int) -> tuple[float, np.ndarray]:
    """:func:`best_step` of Q on the network of ``silos`` x ``clients`` that ``plan`` builds
    (:func:`build_model` at its batch, seed and device), for ``ITERATIONS[plan.quick]``
    iterations, the grid :func:`grid`, ``plan.seeds`` seeds, under ``plan.reading``:
    (step, losses [seeds, rounds + 1], read-only). Once per process for each argument."""
    model, theta0 = build_model(silos=silos, clients=clients, batch=plan.batch or BATCH,
                                seed=plan.seed, device=plan.device)
    eta, loss = best_step(model, theta0, Q=Q, rounds=rounds_of(Q, ITERATIONS[plan.quick]),
                          steps=grid(plan), seeds=plan.seeds, seed=plan.seed + 1,
                          batch=plan.reading)
    loss.setflags(write=False)
    return eta, loss


def decision_time(ratio: float, iterations: int) -> float:
    """The time at which every Q has its curve at ``ratio``: that of the run that ends first
    (the largest Q)."""
    from fedbound.bounds.tdcd import round_time

    return min(rounds_of(Q, iterations) * round_time(Q, ratio, 1.0) for Q in QS)


def latency(plan: Plan) -> Outcome:
    """Figs. 3-8 (Section 5.3.1): every Q of :data:`QS` at K = 2, N = 2; its curve against
    iterations ("Q = 10") and against time units at each t_comm ("Q = 10, t_comm = 100"),
    with Theorem 1's bound (constants estimated on the same networks) at the decision
    points."""
    from fedbound.bounds.tdcd import round_time

    by_iteration, notes = iteration_curves(plan)
    iterations = ITERATIONS[plan.quick]
    bound_of, prediction = bounds_at(replace(plan, reading=None), tuple(dict.fromkeys(
        (Q, rounds) for Q in QS for ratio in RATIOS
        for rounds in (rounds_of(Q, iterations),
                       int(decision_time(ratio, iterations) // round_time(Q, ratio, 1.0))))))
    curves = {}
    for label, c in by_iteration.items():
        Q = int(label.split("= ")[1])
        rounds = np.arange(c.x.size)
        bound = np.full(c.x.size, np.nan)
        bound[-1] = bound_of[(Q, rounds[-1])]
        curves[label] = Curve(label, c.x, c.y, bound, "local iterations")
        for ratio in RATIOS:
            t = rounds * round_time(Q, ratio, 1.0)
            at = int(decision_time(ratio, iterations) // round_time(Q, ratio, 1.0))
            bound = np.full(c.x.size, np.nan)
            bound[at] = bound_of[(Q, at)]
            name = f"{label}, t_comm = {ratio:g}"
            curves[name] = Curve(name, t, c.y, bound, "time units (t_Q = 3 t_comm + Q t_comp)")
    return Outcome(curves, "time units", "training loss L(theta)", notes=tuple(notes),
                   prediction=prediction)


@lru_cache(maxsize=CACHED)
def bounds_at(plan: Plan, points: tuple[tuple[int, int], ...]) -> tuple[MappingProxyType, str]:
    """Theorem 1, (15) (published, ``proof`` variant) at each (Q, rounds) of ``points``, at its
    own best admissible step, with L, L_max, sigma_j and Delta estimated at the conservative
    end on the networks of the latency experiment (K = 2, N = 2) that ``plan`` builds; and
    the prediction in words. Once per process for each argument (the readings share it)."""
    import torch

    from fedbound import bounds

    from .adapters import estimate_tdcd_constants

    model, theta0 = build_model(silos=SILOS, clients=CLIENTS, batch=plan.batch or BATCH,
                                seed=plan.seed, device=plan.device)
    settings = (EstimationSettings(points=2, steps=10, power_steps=10, starts=2, samples=32)
                if plan.quick else EstimationSettings(points=3, steps=30, power_steps=20, samples=100))
    estimates, sigma_est = estimate_tdcd_constants(model, theta0,
                                                   torch.Generator().manual_seed(plan.seed), settings)
    sigma = np.array([e.upper for e in sigma_est])
    thm = bounds.get("tdcd.theorem1")
    out = {}
    for Q, R in points:
        out[(Q, R)] = _bound(thm, estimates, sigma, Q, max(R, 1), model.layout.clients)
    finite = {k: v for k, v in out.items() if np.isfinite(v)}
    constants = "; ".join(str(e) for e in [*estimates.values(), *sigma_est])
    best = min(finite, key=finite.get) if finite else None
    text = ("Das et al. 2022, Theorem 1, (15) (proof variant) at each Q's own best admissible step "
            f"and the rounds it runs; constants estimated on the same networks: {constants}. "
            + (f"Its smallest value is at Q = {best[0]} ({best[1]} rounds); it depends on eta and "
               "Q only through eta Q, so it certifies no Q > 1 faster than Q = 1"
               if best else "Inadmissible at every point"))
    return MappingProxyType(out), text


def _bound(thm, estimates, sigma, Q: int, R: int, clients) -> float:
    params = {"Q": Q, "R": R, "sigma": sigma}
    if "K" in thm.params:
        params["K"] = np.asarray(clients, dtype=float)
    top = conservative_step(thm, params, estimates, None)
    upper = {name: e.upper for name, e in estimates.items()}
    etas = np.geomspace(top * 1e-3, top, 61)
    values = np.asarray(thm.evaluate(**params, **upper, eta=etas), dtype=float)
    if not np.isfinite(values).any():
        return math.nan
    eta = float(etas[int(np.nanargmin(np.where(np.isfinite(values), values, np.nan)))])
    value, _, violations = conservative_bound(thm, {**params, "eta": eta}, estimates)
    return math.nan if violations else float(value)


def clients_experiment(plan: Plan) -> Outcome:
    """Section 5.3.2 (Figs. 3(c, d), 6(c, d)): K = 2 against K = 4 clients per silo at the
    same batch (40 and 20 samples per client: the paper's 2000 / 50 and 2000 / 100), every
    Q of :data:`QS`, against iterations."""
    curves, notes = {}, []
    for K in (CLIENTS, 2 * CLIENTS):
        c, n = iteration_curves(plan, clients=K, tag=f", K = {K}")
        curves.update(c)
        notes += n
    return Outcome(curves, "local iterations", "training loss L(theta)", notes=tuple(notes))


def silos_experiment(plan: Plan) -> Outcome:
    """Section 5.3.3 (Fig. 9): N = 2 against N = 4 silos (halves and quarters of each image),
    Q = 10, K = 2, against iterations."""
    curves, notes = {}, []
    for N in (SILOS, 2 * SILOS):
        c, n = iteration_curves(plan, silos=N, qs=(10,), tag=f", N = {N}")
        curves.update(c)
        notes += n
    return Outcome(curves, "local iterations", "training loss L(theta)", notes=tuple(notes))
