"""The experiments behind Yang et al. 2022's claims (Section 5 and Appendix E), on the 8x8
digits.

The paper trains a multinomial logistic regression on MNIST and a CNN on CIFAR-10 over M = 10
workers (m = 5 report per round), each worker holding p classes (p = 1, 2, 5, 10), with a
global rate 1.0 and a local rate 0.1, batches of 64 (MNIST) or 500 (CIFAR-10), 150 rounds on
MNIST; asynchrony is a model pulled from the last five global models, dynamic local steps are
uniform on {1..2c} with c = 5, and general arrivals are sampling without replacement with
probabilities (0.19, 0.19, 0.1 x 6, 0.01, 0.01) (Appendix E.1).

The smallest faithful analogue run here (``sim.afl.run_afl`` on ``sim.neural.NeuralClients``):
the 1797 8x8 digits over M = 10 workers of p classes each (``sim.data.label_partition``, the
paper's p), m = 5, mini-batches of :data:`BATCH` of the worker's samples; multinomial logistic
regression (a linear layer 64 -> 10) for the paper's LR, an MLP 64-16-10 for its CNN; delays
uniform on {0..4} (the last five models), K uniform on {1..10} (c = 5), the paper's biased
probabilities. Steps: the paper's eta_L = 0.1, and eta = 5 with the algorithm's server step
x - eta eta_L G_t (Algorithm 2, G_i the rescaled sum): at K = 5 that round is x + mean_i
Delta_i, FedAvg's averaging of the model changes, which the paper's global rate 1.0 denotes.
The configurations that differ only in their schedule (arrivals, delays, K) run as replicas
of one vectorised run per algorithm and p, so they share the partition and the start
(paired by seed); the seed sets the partition and the network's initial weights.

The metric: the training loss f(x_t) = mean_i f_i(x_t) over the rounds (the paper plots test
accuracy; the digits are too few to hold a test set per worker).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbound.verify.api import LOOP_OVERHEAD, Curve, Footprint, Outcome, Plan

M, m, BATCH, HIDDEN = 10, 5, 16, 16
ETA, ETA_L, K_CONST, K_DYNAMIC, MAX_DELAY = 5.0, 0.1, 5, (1, 10), 4
PROBS = (0.19, 0.19, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.01, 0.01)
PS = (1, 2, 5, 10)
ROUNDS = {True: 40, False: 150}
SEEDS = (4, 10)
N_DIGITS, PIXELS = 1797, 64


@dataclass(frozen=True)
class Config:
    """One schedule: the algorithm, arrivals, delays and local steps."""

    label: str
    algorithm: str
    arrivals: str
    asynchronous: bool
    dynamic: bool


FEDAVG = Config("FedAvg", "cd", "uniform", False, False)
SYNC_DYNAMIC = Config("sync, dynamic K", "cd", "uniform", False, True)
ASYNC_CONSTANT = Config("async, constant K", "cd", "uniform", True, False)
CD_UNIFORM = Config("AFA-CD uniform", "cd", "uniform", True, True)
CD_BIASED = Config("AFA-CD biased", "cd", "biased", True, True)
CS_BIASED = Config("AFA-CS biased", "cs", "biased", True, True)
#: the configurations of each model: Table 2's four (FedAvg is synchronous with constant
#: steps), and Figs. 5 and 6's three
CONFIGS = {"lr": (FEDAVG, SYNC_DYNAMIC, ASYNC_CONSTANT, CD_UNIFORM, CD_BIASED, CS_BIASED),
           "mlp": (FEDAVG, SYNC_DYNAMIC, ASYNC_CONSTANT, CD_UNIFORM, CD_BIASED, CS_BIASED)}


def label(c: Config, p: int) -> str:
    return f"{c.label}, p = {p}"


def clients_for(model: str, p: int, batch: int, seed: int, device=None):
    """The digits over M workers of ``p`` classes each and the network, both from ``seed``."""
    import torch

    from fedbound.sim.data import label_partition, load_digits
    from fedbound.sim.neural import NeuralClients, mlp

    digits = load_digits(device=device)
    partition = label_partition(digits.labels.cpu(), M, p, torch.Generator().manual_seed(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = mlp(PIXELS, () if model == "lr" else (HIDDEN,), 10)
    clients = NeuralClients(net, digits.features, digits.labels, partition, batch=batch,
                            device=device)
    return clients, clients.initial()


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


def runs(model: str, p: int, plan: Plan, T: int) -> dict[str, np.ndarray]:
    """The loss [seeds, T + 1] of every configuration of ``model`` at ``p``: one run per
    algorithm, the schedules of its configurations stacked."""
    import torch

    from fedbound.sim.afl import run_afl

    clients, x0 = clients_for(model, p, plan.batch or BATCH, plan.seed, plan.device)
    out = {}
    for algorithm in ("cd", "cs"):
        configs = [c for c in CONFIGS[model] if c.algorithm == algorithm]
        generator = torch.Generator().manual_seed(plan.seed + 1)
        sched = schedule(configs, T, plan.seeds, generator)
        trace = run_afl(clients, algorithm=algorithm, m=m, T=T, eta=ETA,
                        eta_L=plan.step or ETA_L, x0=x0, replicas=len(configs) * plan.seeds,
                        generator=generator, schedule=sched, record_grad=False)
        if trace.diverged.any():
            raise ValueError(f"p = {p}, {algorithm}: {int(trace.diverged.sum())} replicas diverged")
        final = clients.loss(trace.x_final.to(clients.device)).cpu().numpy()[:, None]
        loss = np.concatenate([trace.loss.numpy(), final], axis=1)
        for i, c in enumerate(configs):
            out[label(c, p)] = loss[i * plan.seeds:(i + 1) * plan.seeds]
    return out


def experiment(model: str):
    def run(plan: Plan) -> Outcome:
        T = ROUNDS[plan.quick]
        curves = {}
        for p in PS:
            for name, loss in runs(model, p, plan, T).items():
                curves[name] = Curve(name, np.arange(T + 1), loss)
        notes = (f"eta = {ETA:g} (server step x - eta eta_L G_t), eta_L = {plan.step or ETA_L:g}, "
                 f"batch {plan.batch or BATCH}, {T} rounds, M = {M}, m = {m}",)
        return Outcome(curves, "rounds t", "training loss f(x_t)", notes=notes)
    return run


def footprint(model: str):
    def estimate(plan: Plan) -> Footprint:
        d = PIXELS * 10 + 10 if model == "lr" else PIXELS * HIDDEN + HIDDEN + HIDDEN * 10 + 10
        R = len(CONFIGS[model]) * plan.seeds
        T, batch = ROUNDS[plan.quick], plan.batch or BATCH
        memory = {f"replicas={R} x workers={M} x parameters={d} x (history {MAX_DELAY + 1} + 6) "
                  f"buffers of 8 B": 8.0 * R * M * d * (MAX_DELAY + 7),
                  f"replicas={R} x workers={M} x batch={batch} x activations":
                      8.0 * R * M * batch * 4 * (HIDDEN + 10)}
        steps = {f"p in {PS} x T={T} x local steps {K_DYNAMIC[1]} x replicas={R} x workers={M} "
                 f"x batch={batch} x parameters={d}":
                 len(PS) * T * (K_DYNAMIC[1] * (6.0 * R * M * batch * d + 2 * LOOP_OVERHEAD)
                                + 2.0 * R * N_DIGITS * d)}
        return Footprint.of(memory, steps)
    return estimate
