"""The experiments behind Yang et al. 2022's claims (Section 5 and Appendix E), on the 8x8
digits.

The paper trains a multinomial logistic regression on MNIST and a CNN on CIFAR-10 over M = 10
workers (m = 5 report per round), each worker holding p classes (p = 1, 2, 5, 10), with a
global rate 1.0 and a local rate 0.1, batches of 64 (MNIST) or 500 (CIFAR-10), 150 rounds on
MNIST; asynchrony is a model pulled from the last five global models, dynamic local steps are
uniform on {1..2c} with c = 5, and general arrivals are sampling without replacement with
probabilities (0.19, 0.19, 0.1 x 6, 0.01, 0.01) (Appendix E.1).

The smallest faithful analogue run here (``sim.afl.run_afl`` on ``sim.neural.NeuralClients``):
the 8x8 digits, :data:`TEST` of them held out for the test accuracy (``sim.data.held_out``,
per class, from the seed), the rest over M = 10 workers of p classes each
(``sim.data.label_partition``, the paper's p), m = 5, mini-batches of :data:`BATCH` of the
worker's samples; multinomial logistic
regression (a linear layer 64 -> 10) for the paper's LR, an MLP 64-16-10 for its CNN; delays
uniform on {0..4} (the last five models), K uniform on {1..10} (c = 5), the paper's biased
probabilities. Steps: the paper's eta_L = 0.1, and eta = 5 with the algorithm's server step
x - eta eta_L G_t (Algorithm 2, G_i the rescaled sum): at K = 5 that round is x + mean_i
Delta_i, FedAvg's averaging of the model changes, which the paper's global rate 1.0 denotes.
The configurations that differ only in their schedule (arrivals, delays, K) run as replicas
of one vectorised run per algorithm, worker optimiser and p, so they share the partition and
the start (paired by seed); the seed sets the split, the partition and the network's initial
weights. Table 3's worker optimisers (``sim.afl.WORKERS``): FedProx with the paper's mu =
0.1 and SCAFFOLD (option II), each synchronous with constant steps (the paper's "FedProx"
and "SCAFFOLD" columns) and with asynchrony and dynamic steps ("AFL + FedProx", "AFL +
SCAFFOLD"), uniform sampling.

Appendix E.1's wall-clock remark: every update of a worker takes an Exp(1) time (the
straggler model of Charles et al. 2021 the paper cites, lambda = 1). A synchronous round
(FedAvg) waits for the slowest of its m workers: max of m Exp(1); an AFL round ends at the
m-th update to arrive from the M workers computing without waiting, the m-th arrival of M
independent rate-1 Poisson processes: Gamma(m, M). The durations are drawn per seed from
the seed, independently of training.

The metrics: the training loss f(x_t) = mean_i f_i(x_t) over the training samples, and the
test accuracy of x_t on the held-out digits (the paper's metric) at every round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbound.verify.api import LOOP_OVERHEAD, Curve, Footprint, Outcome, Plan

M, m, BATCH, HIDDEN = 10, 5, 16, 16
#: the share of the digits held out for the test accuracy
TEST = 0.2
#: Appendix E.1: the test accuracy whose first round (and wall-clock time) is compared
TARGET = 0.85
ETA, ETA_L, K_CONST, K_DYNAMIC, MAX_DELAY = 5.0, 0.1, 5, (1, 10), 4
#: FedProx's proximal weight (Appendix E.2: "mu = 0.1 as default")
MU = 0.1
PROBS = (0.19, 0.19, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.01, 0.01)
PS = (1, 2, 5, 10)
ROUNDS = {True: 40, False: 150}
SEEDS = (4, 10)
N_DIGITS, PIXELS = 1797, 64


@dataclass(frozen=True)
class Config:
    """One schedule and worker: the algorithm, arrivals, delays, local steps and the
    worker's optimiser (``sim.afl.WORKERS``)."""

    label: str
    algorithm: str
    arrivals: str
    asynchronous: bool
    dynamic: bool
    worker: str = "sgd"


FEDAVG = Config("FedAvg", "cd", "uniform", False, False)
SYNC_DYNAMIC = Config("sync, dynamic K", "cd", "uniform", False, True)
ASYNC_CONSTANT = Config("async, constant K", "cd", "uniform", True, False)
CD_UNIFORM = Config("AFA-CD uniform", "cd", "uniform", True, True)
CD_BIASED = Config("AFA-CD biased", "cd", "biased", True, True)
CS_BIASED = Config("AFA-CS biased", "cs", "biased", True, True)
FEDPROX = Config("FedProx", "cd", "uniform", False, False, "fedprox")
AFL_FEDPROX = Config("AFL + FedProx", "cd", "uniform", True, True, "fedprox")
SCAFFOLD = Config("SCAFFOLD", "cd", "uniform", False, False, "scaffold")
AFL_SCAFFOLD = Config("AFL + SCAFFOLD", "cd", "uniform", True, True, "scaffold")
#: the configurations of each model: Table 2's four (FedAvg is synchronous with constant
#: steps), Figs. 5 and 6's three, Table 3's four
CONFIGS = {model: (FEDAVG, SYNC_DYNAMIC, ASYNC_CONSTANT, CD_UNIFORM, CD_BIASED, CS_BIASED,
                   FEDPROX, AFL_FEDPROX, SCAFFOLD, AFL_SCAFFOLD) for model in ("lr", "mlp")}
#: Appendix E.1: AFL (asynchrony, dynamic steps; uniform arrivals, as Exp(1) update times
#: give) against FedAvg, LR at p = 1
WALL_CLOCK = {"AFL": CD_UNIFORM, "FedAvg": FEDAVG}


def label(c: Config, p: int) -> str:
    return f"{c.label}, p = {p}"


def accuracy_label(c: Config, p: int) -> str:
    return f"{label(c, p)}: test accuracy"


def digits_split(seed: int, device=None):
    """(train, test): the digits with :data:`TEST` of each class held out, from ``seed``."""
    import torch

    from fedbound.sim.data import held_out, load_digits

    return held_out(load_digits(device=device), TEST, torch.Generator().manual_seed(seed))


def clients_for(model: str, p: int, batch: int, seed: int, device=None):
    """(clients, x_0, test): the training digits over M workers of ``p`` classes each, the
    network, and the held-out digits, all from ``seed``."""
    import torch

    from fedbound.sim.data import label_partition
    from fedbound.sim.neural import NeuralClients, mlp

    train, test = digits_split(seed, device)
    partition = label_partition(train.labels.cpu(), M, p, torch.Generator().manual_seed(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = mlp(PIXELS, () if model == "lr" else (HIDDEN,), 10)
    clients = NeuralClients(net, train.features, train.labels, partition, batch=batch,
                            device=device)
    return clients, clients.initial(), test


def schedule(configs, T: int, seeds: int, generator):
    """The schedules of ``configs``, ``seeds`` replicas each, stacked along the replicas."""
    import torch

    from fedbound.sim.afl import Schedule, draw_schedule

    parts = [draw_schedule(M=M, m=m, T=T, replicas=seeds, generator=generator,
                           K=K_DYNAMIC if c.dynamic else K_CONST,
                           tau=MAX_DELAY if c.asynchronous else 0,
                           delays="uniform" if c.asynchronous else "zero", arrivals=c.arrivals,
                           probs=list(PROBS) if c.arrivals == "biased" else None)
             for c in configs]
    return Schedule(*(torch.cat([getattr(s, f) for s in parts]) for f in
                      ("arrivals", "delays", "K", "K0")))


def runs(model: str, p: int, plan: Plan, T: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(loss, test accuracy), [seeds, T + 1] each, of every configuration of ``model`` at
    ``p``: one run per algorithm and worker optimiser, the schedules of its configurations
    stacked."""
    import torch

    from fedbound.sim.afl import run_afl

    clients, x0, test = clients_for(model, p, plan.batch or BATCH, plan.seed, plan.device)
    out = {}
    for algorithm, worker in dict.fromkeys((c.algorithm, c.worker) for c in CONFIGS[model]):
        configs = [c for c in CONFIGS[model] if (c.algorithm, c.worker) == (algorithm, worker)]
        generator = torch.Generator().manual_seed(plan.seed + 1)
        sched = schedule(configs, T, plan.seeds, generator)
        trace = run_afl(clients, algorithm=algorithm, worker=worker, mu=MU, m=m, T=T, eta=ETA,
                        eta_L=plan.step or ETA_L, x0=x0, replicas=len(configs) * plan.seeds,
                        generator=generator, schedule=sched, record_grad=False,
                        score=lambda x: clients.accuracy(x, test.features, test.labels))
        if trace.diverged.any():
            raise ValueError(f"p = {p}, {algorithm}, {worker}: {int(trace.diverged.sum())} "
                             "replicas diverged")
        final = clients.loss(trace.x_final.to(clients.device)).cpu().numpy()[:, None]
        loss = np.concatenate([trace.loss.numpy(), final], axis=1)
        accuracy = trace.score.numpy()
        for i, c in enumerate(configs):
            mine = slice(i * plan.seeds, (i + 1) * plan.seeds)
            out[label(c, p)] = loss[mine], accuracy[mine]
    return out


def first_reached(accuracy: np.ndarray, target: float) -> np.ndarray:
    """Per seed, the first round t whose accuracy [seeds, rounds] is at least ``target``
    (inf where the run never reaches it: a censored time, ``verify.api.sooner``)."""
    reached = accuracy >= target
    return np.where(reached.any(axis=1), reached.argmax(axis=1), np.inf)


def round_durations(plan: Plan, T: int) -> dict[str, np.ndarray]:
    """[seeds, T] wall-clock durations of the rounds of each schedule of :data:`WALL_CLOCK`
    (module docstring: FedAvg the slowest of m Exp(1) updates, AFL the m-th of M rate-1
    arrivals, Gamma(m, M)), from ``plan.seed``."""
    rng = np.random.default_rng([plan.seed, 1])
    return {"FedAvg": rng.exponential(1.0, (plan.seeds, T, m)).max(axis=2),
            "AFL": rng.gamma(m, 1.0 / M, (plan.seeds, T))}


def wall_clock(accuracy: dict[str, np.ndarray], plan: Plan, T: int) -> dict[str, np.ndarray]:
    """Per seed, the rounds and the wall-clock time each of :data:`WALL_CLOCK` takes to reach
    :data:`TARGET` (the time at which its first round reaching it ends; inf where never
    reached), and the wall-clock time its T rounds take (the horizon of its times)."""
    out = {}
    durations = round_durations(plan, T)
    for name in WALL_CLOCK:
        rounds = first_reached(accuracy[name], TARGET)
        ends = np.concatenate([np.zeros((plan.seeds, 1)), durations[name].cumsum(axis=1)], axis=1)
        at = np.where(np.isfinite(rounds), rounds, 0).astype(int)
        out[f"rounds to {TARGET:g}: {name}"] = rounds.astype(float)
        out[f"time to {TARGET:g}: {name}"] = np.where(np.isfinite(rounds),
                                                      ends[np.arange(plan.seeds), at], np.inf)
        out[f"wall-clock horizon: {name}"] = ends[:, -1]
    return out


def experiment(model: str):
    def run(plan: Plan) -> Outcome:
        T = ROUNDS[plan.quick]
        curves, scalars = {}, {}
        for p in PS:
            measured = runs(model, p, plan, T)
            for c in CONFIGS[model]:
                loss, accuracy = measured[label(c, p)]
                curves[label(c, p)] = Curve(label(c, p), np.arange(T + 1), loss)
                name = accuracy_label(c, p)
                curves[name] = Curve(name, np.arange(T + 1), accuracy)
            if model == "lr" and p == 1:
                scalars = wall_clock({name: measured[label(c, p)][1]
                                      for name, c in WALL_CLOCK.items()}, plan, T)
        notes = (f"eta = {ETA:g} (server step x - eta eta_L G_t), eta_L = {plan.step or ETA_L:g}, "
                 f"batch {plan.batch or BATCH}, {T} rounds, M = {M}, m = {m}, FedProx mu = "
                 f"{MU:g}, {TEST:.0%} of the digits held out",)
        return Outcome(curves, "rounds t", "training loss f(x_t); test accuracy (labelled)",
                       scalars, notes=notes)
    return run


def footprint(model: str):
    def estimate(plan: Plan) -> Footprint:
        d = PIXELS * 10 + 10 if model == "lr" else PIXELS * HIDDEN + HIDDEN + HIDDEN * 10 + 10
        R = len(CONFIGS[model]) * plan.seeds
        T, batch = ROUNDS[plan.quick], plan.batch or BATCH
        memory = {f"replicas={R} x workers={M} x parameters={d} x (history {MAX_DELAY + 1} + 8) "
                  f"buffers of 8 B (SCAFFOLD's controls included)": 8.0 * R * M * d * (MAX_DELAY + 9),
                  f"replicas={R} x workers={M} x batch={batch} x activations":
                      8.0 * R * M * batch * 4 * (HIDDEN + 10)}
        steps = {f"p in {PS} x T={T} x local steps {K_DYNAMIC[1]} x replicas={R} x workers={M} "
                 f"x batch={batch} x parameters={d}":
                 len(PS) * T * (K_DYNAMIC[1] * (6.0 * R * M * batch * d + 2 * LOOP_OVERHEAD)
                                + 4.0 * R * N_DIGITS * d)}  # the loss and the accuracy
        return Footprint.of(memory, steps)
    return estimate
