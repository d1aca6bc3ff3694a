"""The experiments behind Das et al. 2022's claims (Section 5), on the 8x8 digits and the
Wisconsin breast-cancer data.

The paper trains a ResNet-18 per silo on the two halves of every CIFAR-10 image (N = 2,
K = 50 or 100 clients per silo) and an LSTM per silo on the 76 features of MIMIC-III (N = 4,
K = 20 or 50), mini-batches of 2000 sample IDs reused for the Q local iterations of a round,
each Q at the best step of a grid (the lowest training loss), and plots test accuracy (F1
on MIMIC-III) and training loss against the latency t_Q = 3 t_comm + Q t_comp (t_comm = 10
or 100, t_comp = 1) or against iterations (Sections 5.2 and 5.3).

The analogue run here (``sim.tdcd.run_tdcd``) keeps the paper's structure: for CIFAR-10 the
digits (a fifth of each class held out for the test accuracy, ``sim.data.held_out``) split
into N = 2 silos holding the top and bottom halves of each image (``sim.data.vertical_split``)
with K = 50 or 100 clients per silo; for MIMIC-III the breast-cancer data (569 samples, 30
features, 2 classes; a fifth held out) split into N = 4 silos of 7 or 8 features with K = 20
or 50 clients per silo (Fig. 9: N = 4 against 8, K = 50). One MLP per silo
(``sim.neural.mlp``, 16 tanh units, one output per class), the outputs summed and the
cross-entropy of the classes: the paper's Fig. 1(b) with small networks. A batch of
:data:`BATCH` sample IDs, every client holding a copy of the training samples (``sim.tdcd``'s
layout): 10 or 5 per client at K = 50 or 100, 25 or 10 at K = 20 or 50, the paper's ratios
(40 or 20, 100 or 40); a batch of the paper's 2000 would be more than the training digits
(full-batch gradient descent), one of its 4% of the data (57 digits) would give each client
one sample or none, reused for Q steps. Q in {1, 10, 20, 30}, the values of the authors' experiment
scripts (the text does not list them). Every Q runs the same number of local iterations (the
paper: 5000 on CIFAR-10), each step of :data:`STEPS` for every seed in one vectorised run,
and keeps the step with the lowest mean training loss at the end (the paper's grid search per
Q); the seeds of that step form the curve. Quick runs shorten the iterations and the seeds,
never the structure. The seed sets the split and the networks' initial weights; every
configuration of an experiment starts from them (paired).

The metrics: the training loss L(theta) of the hub models over the training samples and
their test accuracy on the held-out ones, after each round, against local iterations or
against time units t_Q.

The readings of the round's mini-batch (:data:`READINGS`, ``sim.tdcd.BATCHES``): as printed,
one batch of sample IDs for all Q local iterations of a round (Section 3, Algorithm 1), or a
fresh batch at every local iteration (the conference version of TDCD); every experiment runs
under both.

The experiments train some configurations alike: Q = 1 is the same run under either reading
(a round of one local iteration draws one batch), and the silos experiment's N = 4, K = 50
network is the breast-cancer network of the latency experiment's larger K. Each (network, Q,
plan) is trained once per process (:func:`trained`, a bounded cache: the runs are
deterministic, so a hit returns the numbers a rerun computes), and Theorem 1's constants are
estimated once for both readings (:func:`bounds_at`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, replace
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
STEPS = (1.6, 3.2, 6.4)
BATCH, HIDDEN = 500, 16
#: the share of each data set held out for the test accuracy
TEST = 0.2


@dataclass(frozen=True)
class Network:
    """A data set split over ``silos`` silos of ``clients`` clients each (the paper's N and
    K), ``tag`` naming its curves ("" for the digits at K = 50, the default network)."""

    data: str
    silos: int
    clients: int

    @property
    def tag(self) -> str:
        if self == DIGITS:
            return ""
        head = "breast cancer, " if self.data == "breast_cancer" else ""
        silos = f", N = {self.silos}" if self.silos != DEFAULT_SILOS[self.data] else ""
        return f"{head}K = {self.clients}{silos}"


#: the paper's N for each data set's stand-in (CIFAR-10: 2, MIMIC-III: 4)
DEFAULT_SILOS = {"digits": 2, "breast_cancer": 4}


#: CIFAR-10's networks (Section 5.3.1: K = 50; 5.3.2: K = 100), on the digits
DIGITS, DIGITS_LARGER = Network("digits", 2, 50), Network("digits", 2, 100)
#: MIMIC-III's networks (K = 20; 50), on the breast-cancer data
MIMIC, MIMIC_LARGER = Network("breast_cancer", 4, 20), Network("breast_cancer", 4, 50)
#: Fig. 9: MIMIC-III with K = 50, Q = 10 and N = 4 against 8 silos
SILO_NETWORKS = (MIMIC_LARGER, Network("breast_cancer", 8, 50))
LATENCY_NETWORKS = (DIGITS, DIGITS_LARGER, MIMIC, MIMIC_LARGER)
#: local iterations of every Q: (quick, full)
ITERATIONS = {True: 90, False: 900}
#: where the iteration claims are decided early: this share of the iterations
EARLY = 0.25
SEEDS = (3, 10)
READINGS = (
    Reading("round", "Das et al. 2022, Section 3 and Algorithm 1 as printed: one mini-batch "
                     "of sample IDs for all Q local iterations of a round"),
    Reading("step", "a fresh mini-batch at every local iteration, the other silos' "
                    "embeddings Phi_{-j} at the round-start hub models"),
)
#: the samples and features of each data set (the footprint's sizes)
SIZES = {"digits": (1797, 64, 10), "breast_cancer": (569, 30, 2)}
#: the runs (and bounds) a process keeps: a reproduction of every claim trains 30 distinct runs
CACHED = 48


def label(Q: int, network: Network = DIGITS, ratio: float | None = None,
          accuracy: bool = False) -> str:
    """The label of Q's curve on ``network`` ("Q = 10", "Q = 10, K = 100", "Q = 10, breast
    cancer, K = 20"), against time at ``ratio`` where given, of its test accuracy with
    ``accuracy``."""
    out = f"Q = {Q}" + (f", {network.tag}" if network.tag else "")
    out += f", t_comm = {ratio:g}" if ratio is not None else ""
    return out + (": test accuracy" if accuracy else "")


@contextmanager
def _seeded(seed: int):
    """torch's global generator seeded for the networks' initialisation, and restored."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@lru_cache(maxsize=8)
def _data(data: str, seed: int, device=None):
    """(train, test) of ``data`` ("digits" or "breast_cancer"), a fifth of each class held
    out, from ``seed``: loaded once per process for each argument (read-only: every model
    takes its own columns)."""
    import torch

    from fedbound.sim.data import held_out, load_breast_cancer, load_digits

    load = load_digits if data == "digits" else load_breast_cancer
    return held_out(load(device=device), TEST, torch.Generator().manual_seed(seed))


def _models(data, silos: int, clients: int, batch: int, seed: int, device):
    """The training and the test ModuleModel of ``data`` (a (train, test) pair) split over
    ``silos`` (rows of the image, top to bottom; features in their order), ``clients`` per
    silo, batches of ``batch``, one MLP per silo initialised from ``seed``."""
    import torch

    from fedbound.sim.data import vertical_split
    from fedbound.sim.neural import mlp
    from fedbound.sim.tdcd import Layout, ModuleModel

    train, test = data
    columns, blocks = vertical_split(train.features.shape[1], silos)
    with _seeded(seed):
        nets = [mlp(width, (HIDDEN,), train.classes) for width in blocks]
    out = []
    for part, K, b in ((train, clients, batch), (test, 1, 1)):
        layout = Layout(blocks, (K,) * silos, part.n, b)
        out.append(ModuleModel(nets, part.features[:, columns.to(part.features.device)],
                               part.labels.to(torch.float64), layout, loss="cross_entropy",
                               device=device))
    return out


def build_model(*, silos: int, clients: int, batch: int, seed: int, device=None,
                data: str = "digits"):
    """The training samples of ``data`` (the digits: rows of the image, top to bottom)
    split over ``silos`` silos, ``clients`` per silo, batches of ``batch``, one MLP per silo
    initialised from ``seed``: (ModuleModel, theta0)."""
    model, _ = _models(_data(data, seed, device), silos, clients, batch, seed, device)
    return model, model.initial()


def test_accuracy(test_model, hub) -> np.ndarray:
    """The test accuracy [S, points] of the hub models ``hub`` [S, points, N, d] on the
    held-out samples of ``test_model`` (a ModuleModel on them): the share whose largest
    summed output is the label."""
    import torch

    S, points, N, d = hub.shape
    flat = hub.reshape(S * points, N, d).to(test_model.device)
    n = test_model.layout.n
    rows = torch.arange(n, device=test_model.device).expand(S * points, n)
    hits = [(test_model.embed(chunk, rows[:chunk.shape[0]]).sum(1).argmax(-1)
             == test_model.y.long()).to(torch.float64).mean(-1)
            for chunk in flat.split(LOSS_CHUNK)]
    return torch.cat(hits).cpu().numpy().reshape(S, points)


def rounds_of(Q: int, iterations: int) -> int:
    return max(1, iterations // Q)


def best_run(model, theta0, *, Q: int, rounds: int, steps, seeds: int, seed: int,
             batch: str = "round"):
    """One vectorised run of every step x ``seeds`` replicas (step-major), the round's
    mini-batch read as ``batch`` (:data:`READINGS`): (the step with the lowest mean final
    loss among those where no replica diverged, the hub models of its replicas [seeds,
    rounds + 1, N, d]). The run records the hub models (``record_loss=False``) and the loss
    of the last round only for every replica."""
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
    return float(steps[k]), hub[k * seeds:(k + 1) * seeds]


def best_step(model, theta0, **kw):
    """(the best step, its losses [seeds, rounds + 1]) of :func:`best_run`: the loss of every
    round evaluated for the best step's replicas only (:func:`losses_of`), the numbers of a
    run that records the loss of every replica, at a fraction of its evaluations."""
    eta, hub = best_run(model, theta0, **kw)
    return eta, losses_of(model, hub)


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


def footprint(plan: Plan, networks, qs=QS) -> Footprint:
    """Memory and work of every Q of ``qs`` on each of ``networks`` (:func:`best_run`)."""
    R = len(grid(plan)) * plan.seeds
    batch = plan.batch or BATCH
    iterations = ITERATIONS[plan.quick]
    rounds = sum(rounds_of(Q, iterations) for Q in qs)
    memory, steps = {}, {}
    for net in networks:
        n, p, classes = SIZES[net.data]
        d = math.ceil(p / net.silos) * HIDDEN + HIDDEN + HIDDEN * classes + classes
        clients = net.silos * net.clients
        name = f"{net.data}, N = {net.silos}, K = {net.clients}"
        memory[f"{name}: replicas={R} x clients={clients} x parameters={d} x 6 buffers of 8 B "
               f"and the hub models of {rounds_of(min(qs), iterations) + 1} rounds"] = (
            48.0 * R * clients * d + 8.0 * R * (rounds_of(min(qs), iterations) + 1) * net.silos * d)
        memory[f"{name}: replicas={R} x batch={batch} x activations"] = (
            8.0 * R * batch * 4 * (HIDDEN + classes))
        per_step = 6.0 * R * batch * d + LOOP_OVERHEAD * net.silos * (1 + net.clients / 10)
        per_round = 4.0 * plan.seeds * n * d + LOOP_OVERHEAD * 4
        steps[f"{name}: Q in {qs} x {iterations} iterations x replicas={R} x batch={batch} x "
              f"parameters={d}"] = len(qs) * iterations * per_step + rounds * per_round
    memory[f"the loss of {LOSS_CHUNK} hub models x the digits x activations"] = (
        8.0 * LOSS_CHUNK * 1797 * 2 * (HIDDEN + 10))
    return Footprint.of(memory, steps)


def _run_plan(plan: Plan, Q: int) -> Plan:
    """``plan`` with the reading its run of Q trains under: the printed one where it names
    none, and for Q = 1 (one batch a round under either reading: the same run)."""
    return replace(plan, reading="round" if Q == 1 else plan.reading or "round")


@lru_cache(maxsize=CACHED)
def trained(plan: Plan, network: Network, Q: int) -> tuple[float, np.ndarray, np.ndarray]:
    """:func:`best_run` of Q on ``network`` as ``plan`` builds it (its batch, seed and
    device), for ``ITERATIONS[plan.quick]`` iterations, the grid :func:`grid`,
    ``plan.seeds`` seeds, under ``plan.reading``: (step, training losses, test accuracies,
    [seeds, rounds + 1] each, read-only). Once per process for each argument."""
    model, test = _models(_data(network.data, plan.seed, plan.device), network.silos,
                          network.clients, plan.batch or BATCH, plan.seed, plan.device)
    eta, hub = best_run(model, model.initial(), Q=Q, rounds=rounds_of(Q, ITERATIONS[plan.quick]),
                        steps=grid(plan), seeds=plan.seeds, seed=plan.seed + 1,
                        batch=plan.reading)
    loss, accuracy = losses_of(model, hub), test_accuracy(test, hub)
    loss.setflags(write=False)
    accuracy.setflags(write=False)
    return eta, loss, accuracy


def iteration_curves(plan: Plan, network: Network = DIGITS, qs=QS) -> tuple[dict, list[str]]:
    """Per Q: its loss and its test accuracy against local iterations at its best step on
    ``network`` (:func:`trained`), and a note of the step."""
    curves, notes = {}, []
    for Q in qs:
        eta, loss, accuracy = trained(_run_plan(plan, Q), network, Q)
        x = Q * np.arange(loss.shape[1])
        for name, y in ((label(Q, network), loss), (label(Q, network, accuracy=True), accuracy)):
            curves[name] = Curve(name, x, y, xlabel="local iterations")
        notes.append(f"{label(Q, network)}: step {eta:g} of {grid(plan)}")
    return curves, notes


def decision_time(ratio: float, iterations: int) -> float:
    """The time at which every Q has its curve at ``ratio``: that of the run that ends first
    (the largest Q)."""
    from fedbound.bounds.tdcd import round_time

    return min(rounds_of(Q, iterations) * round_time(Q, ratio, 1.0) for Q in QS)


def latency(plan: Plan) -> Outcome:
    """Figs. 3-8 (Sections 5.3.1 and 5.3.2): every Q of :data:`QS` on the digits at K = 50 and
    100 (N = 2) and on the breast-cancer data at K = 20 and 50 (N = 4); each curve against
    iterations ("Q = 10", "Q = 10, K = 100", its test accuracy "Q = 10: test accuracy") and
    against time units at each t_comm ("Q = 10, t_comm = 100", "Q = 10, t_comm = 100: test
    accuracy"), with Theorem 1's bound on the loss (constants estimated on the K = 50 digits
    network) at the decision points."""
    from fedbound.bounds.tdcd import round_time

    iterations = ITERATIONS[plan.quick]
    bound_of, prediction = bounds_at(replace(plan, reading=None), tuple(dict.fromkeys(
        (Q, rounds) for Q in QS for ratio in RATIOS
        for rounds in (rounds_of(Q, iterations),
                       int(decision_time(ratio, iterations) // round_time(Q, ratio, 1.0))))))
    curves, notes = {}, []
    for net in LATENCY_NETWORKS:
        by_iteration, n = iteration_curves(plan, net)
        notes += n
        for Q in QS:
            c = by_iteration[label(Q, net)]
            rounds = np.arange(c.x.size)
            bound = np.full(c.x.size, np.nan)
            if net == DIGITS:
                bound[-1] = bound_of[(Q, rounds[-1])]
            curves[c.label] = replace(c, bound=bound)
            curves[label(Q, net, accuracy=True)] = by_iteration[label(Q, net, accuracy=True)]
            for ratio in RATIOS:
                t = rounds * round_time(Q, ratio, 1.0)
                at = int(decision_time(ratio, iterations) // round_time(Q, ratio, 1.0))
                bound = np.full(c.x.size, np.nan)
                if net == DIGITS:
                    bound[at] = bound_of[(Q, at)]
                name = label(Q, net, ratio)
                curves[name] = Curve(name, t, c.y, bound, "time units (t_Q = 3 t_comm + Q t_comp)")
                name = label(Q, net, ratio, accuracy=True)
                curves[name] = Curve(name, t, by_iteration[label(Q, net, accuracy=True)].y,
                                     xlabel="time units (t_Q = 3 t_comm + Q t_comp)")
    return Outcome(curves, "time units", "training loss L(theta); test accuracy (labelled)",
                   notes=tuple(notes), prediction=prediction)


@lru_cache(maxsize=CACHED)
def bounds_at(plan: Plan, points: tuple[tuple[int, int], ...]) -> tuple[MappingProxyType, str]:
    """Theorem 1, (15) (published, ``proof`` variant) at each (Q, rounds) of ``points``, at its
    own best admissible step, with L, L_max, sigma_j and Delta estimated at the conservative
    end on the digits network at K = 50 (N = 2) that ``plan`` builds; and the prediction in
    words. Once per process for each argument (the readings share it)."""
    import torch

    from fedbound import bounds

    from .adapters import estimate_tdcd_constants

    model, theta0 = build_model(silos=DIGITS.silos, clients=DIGITS.clients,
                                batch=plan.batch or BATCH, seed=plan.seed, device=plan.device)
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


def silos_experiment(plan: Plan) -> Outcome:
    """Section 5.3.3 (Fig. 9): the breast-cancer data (MIMIC-III's stand-in) over N = 4
    against N = 8 silos, K = 50, Q = 10, against iterations."""
    curves, notes = {}, []
    for net in SILO_NETWORKS:
        c, n = iteration_curves(plan, net, qs=(10,))
        curves.update(c)
        notes += n
    return Outcome(curves, "local iterations", "training loss L(theta); test accuracy (labelled)",
                   notes=tuple(notes))
