"""The experiments behind Castiglia et al. 2021's claims (Section 6 and Appendix B), on the
8x8 digits.

The paper trains a CNN on EMNIST (step 0.01) and ResNet-18 on CIFAR-10 (step 0.1 -> 0.01 ->
0.001) with 100 workers (10 hubs of 10, or 5, 10, 20 hubs on a path), q tau = 32, and
measures the training loss and the test accuracy of the averaged model u_k every 32
iterations (Section 6); Appendix B repeats each experiment with a binary logistic regression
on MNIST (step 0.2, 32,000 iterations). Its workers re-sample i.i.d. data (the experiments
are i.i.d.).

The analogue run here (``sim.mllsgd.run_mllsgd``) keeps the paper's structure: 100 workers in
10 hubs of 10 (Fig. 1: five share groups of 20 workers holding 5, 10, 20, 25 and 40% of the
data, two workers of each group per hub, weights by data size; Figs. 4 and 6: the paper's
operating rates within each hub of 10), 100 workers over 5, 10 or 20 hubs on a path (20, 10
or 5 workers per hub; Local SGD: one hub of 100). The digits stand in for the data:
:data:`TEST` of each class held out for the test accuracy (``sim.data.held_out``, from the
seed), every worker drawing mini-batches of :data:`BATCH` from the rest. Models: an MLP
64-32-10 with tanh (``sim.neural.mlp``; it stands for the paper's CNN and ResNet, which
differ only in how strongly the effects show) at step 0.1 (the paper's CNN step 0.01 barely
moves it in this many iterations; 0.1 is the ResNet schedule's first step), and the binary
logistic regression of Appendix B (digits 0-4 against 5-9) at the paper's step 0.2. K = 32
times :data:`PERIODS` iterations (quick runs: fewer periods and seeds, the same structure).
The seed sets the split and the replicas' draws; every configuration of an experiment
starts from the same x_1 (paired).

The metrics: the training loss F(u_k) over the training digits and the test accuracy of u_k
on the held-out digits every 32 iterations, the paper's; in the time-slot comparison (Fig. 6)
against time slots, Local SGD and HL-SGD waiting for every worker's tau steps
(``wait_for_all``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbound.verify.api import LOOP_OVERHEAD, Curve, Footprint, Outcome, Plan

PERIOD = 32
#: hub periods of q tau = 32 iterations: (quick, full)
PERIODS = {True: 5, False: 20}
BATCH = 16
STEP = {"mlp": 0.1, "lr": 0.2}
SEEDS = (4, 10)
#: the share of the digits held out for the test accuracy
TEST = 0.2
#: Fig. 1's data shares of its five groups of 20 workers (Section 6)
SHARES = (0.05, 0.10, 0.20, 0.25, 0.40)
#: Figs. 1, 4 and 6: 10 hubs of 10 workers, complete hub graph (Section 6)
HUBS, PER_HUB = 10, 10
PATH_WORKERS, PATH_HUBS = 100, (5, 10, 20)
#: Fig. 4's operating rates, per hub of PER_HUB workers (mean 0.55 in all four)
RATES = {
    "Fixed": (0.55,) * 10,
    "Uniform": tuple(round(0.1 * (i + 1), 1) for i in range(10)),
    "Skewed 1": (0.5,) * 9 + (1.0,),
    "Skewed 2": (0.6,) * 9 + (0.1,),
    "Prob = 1": (1.0,) * 10,
}
#: Fig. 6's operating rates per hub: 90% at 0.9, 10% at 0.6
SLOW_RATES = (0.9,) * 9 + (0.6,)
N_DIGITS, PIXELS, HIDDEN = 1797, 64, 32


@dataclass(frozen=True)
class Config:
    """One run: hubs and their workers, the hub graph, worker weights and rates, q, tau and
    whether averaging waits for every worker (Local SGD, HL-SGD in time slots)."""

    label: str
    sizes: tuple[int, ...]
    graph: str
    weights: tuple[float, ...]
    p: tuple[float, ...]
    q: int
    tau: int
    wait: bool = False

    @property
    def workers(self) -> int:
        return sum(self.sizes)


def uniform(label: str, hubs: int, per_hub: int, q: int, tau: int, *, graph: str = "complete",
            p=None, wait: bool = False) -> Config:
    n = hubs * per_hub
    return Config(label, (per_hub,) * hubs, graph, (1.0,) * n,
                  tuple(p) if p is not None else (1.0,) * n, q, tau, wait)


def shares(label: str, q: int, tau: int) -> Config:
    """Fig. 1: 10 hubs of 10 workers, workers j and j + 5 of every hub in share group j (20
    workers per group); a worker's weight is its group's share of the data split evenly
    within the group (weights by data size)."""
    per_group = HUBS * PER_HUB // len(SHARES)
    w = tuple(SHARES[j % len(SHARES)] / per_group for _ in range(HUBS) for j in range(PER_HUB))
    return Config(label, (PER_HUB,) * HUBS, "complete", w, (1.0,) * len(w), q, tau)


def fig1_configs() -> list[Config]:
    n = HUBS * PER_HUB
    base = shares("", 1, 1)
    return [
        Config("Distributed SGD", (n,), "complete", base.weights, base.p, 1, 1),
        Config("Local SGD (tau = 32)", (n,), "complete", base.weights, base.p, 1, PERIOD),
        shares("MLL-SGD q = 4, tau = 8", 4, 8),
        shares("MLL-SGD q = 8, tau = 4", 8, 4),
    ]


def fig2_configs() -> list[Config]:
    return [uniform("Local SGD (1 hub, tau = 32)", 1, PATH_WORKERS, 1, PERIOD),
            *(uniform(f"MLL-SGD {D} hubs (path)", D, PATH_WORKERS // D, 4, 8, graph="path")
              for D in PATH_HUBS)]


def fig4_configs() -> list[Config]:
    return [uniform(name, HUBS, PER_HUB, 4, 8, p=rates * HUBS) for name, rates in RATES.items()]


def fig6_configs() -> list[Config]:
    p = SLOW_RATES * HUBS
    return [uniform("MLL-SGD tau = 32, q = 1", HUBS, PER_HUB, 1, PERIOD, p=p),
            uniform("Local SGD (waits)", HUBS, PER_HUB, 1, PERIOD, p=p, wait=True),
            uniform("MLL-SGD tau = 8, q = 4", HUBS, PER_HUB, 4, 8, p=p),
            uniform("HL-SGD (waits)", HUBS, PER_HUB, 4, 8, p=p, wait=True)]


CONFIGS = {"fig1": fig1_configs, "fig2": fig2_configs, "fig4": fig4_configs,
           "fig6": fig6_configs}


def problem(model: str, batch: int, seed: int, device=None):
    """(F, x_1, accuracy): on the training digits (:data:`TEST` of each class held out, from
    ``seed``), the MLP on the ten classes (its start the module built after
    ``torch.manual_seed(0)``, as ``verify.api.digits_mlp``) or Appendix B's binary logistic
    regression (digits 0-4 against 5-9, x_1 = 0), mini-batches of ``batch``; and the test
    accuracy of models [..., d] on the held-out digits."""
    import torch

    from fedbound.sim.data import held_out, load_digits
    from fedbound.sim.neural import NeuralProblem, mlp
    from fedbound.sim.problems import LogisticRegression

    train, test = held_out(load_digits(device=device), TEST, torch.Generator().manual_seed(seed))
    if model == "mlp":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = mlp(PIXELS, (HIDDEN,), 10)
        pr = NeuralProblem(module, train.features, train.labels, batch=batch, device=device)
        return pr, pr.initial(), lambda x: pr.accuracy(x, test.features, test.labels)

    def binary(labels):
        return torch.where(labels < 5, -1.0, 1.0).to(torch.float64)

    pr = LogisticRegression(train.features, binary(train.labels), batch=batch, device=device)
    signs = binary(test.labels)
    return (pr, torch.zeros(pr.dim, dtype=torch.float64, device=pr.device),
            lambda x: ((x @ test.features.T) * signs > 0).to(torch.float64).mean(-1))


def scored(problem, score):
    """(a copy of ``problem``, scores): the copy's recorder also appends ``score(u)`` [R] to
    the list ``scores`` for every model u [R, d] a run records (the test accuracy of u_k
    beside F(u_k)); the run's draws and numbers are unchanged."""
    import copy

    out, scores, base = copy.copy(problem), [], problem.recorder

    def recorder(shape, *, grad=True):
        record = base(shape, grad=grad)

        def both(x):
            scores.append(score(x))
            return record(x)
        return both

    out.recorder = recorder
    return out, scores


def topology_of(c: Config):
    """(H, hub_of, w, zeta) of ``c`` (``bounds.topology``: H = b 1^T on a complete graph,
    Metropolis-Hastings weights on a path)."""
    from fedbound.bounds import topology

    hub_of = np.repeat(np.arange(len(c.sizes)), c.sizes)
    w = np.asarray(c.weights, dtype=float)
    _, _, b = topology.hub_weights(hub_of, w)
    H = topology.hub_matrix(topology.hub_graph(c.graph, len(c.sizes)), b)
    return H, hub_of, w, topology.zeta(H, b)


def run_config(pr, x1, c: Config, *, K: int, eta: float, seeds: int, seed: int, score):
    """(x, loss, accuracy) of one configuration: the time slot of each record [seeds, K / 32]
    (its iteration count without waiting), the loss and the test accuracy (``score``)
    [seeds, K / 32] of u_k at k = 1, 33, ..."""
    import torch

    from fedbound.sim.mllsgd import run_mllsgd

    H, hub_of, w, _ = topology_of(c)
    pr, scores = scored(pr, score)
    trace = run_mllsgd(pr, H=torch.as_tensor(H), hub_of=torch.as_tensor(hub_of),
                       w=torch.as_tensor(w), p=torch.as_tensor(c.p, dtype=torch.float64),
                       eta=eta, K=K, q=c.q, tau=c.tau, x1=x1, replicas=seeds,
                       generator=torch.Generator().manual_seed(seed), wait_for_all=c.wait,
                       record_every=PERIOD, record_grad=False)
    if trace.diverged.any():
        raise ValueError(f"{c.label}: {int(trace.diverged.sum())} of {seeds} seeds diverged at "
                         f"step {eta:g}")
    slots = trace.slots.numpy()
    start = np.concatenate([np.zeros((seeds, 1)), slots[:, PERIOD - 1:-1:PERIOD]], axis=1)
    return start, trace.loss.numpy(), torch.stack(scores, dim=1).cpu().numpy()


def accuracy_label(label: str) -> str:
    """The label of a configuration's test-accuracy curve."""
    return f"{label}: test accuracy"


def experiment(figure: str, model: str):
    """The experiment of ``figure`` (fig1, fig2, fig4, fig6) with ``model`` (mlp, lr)."""
    def run(plan: Plan) -> Outcome:
        pr, x1, score = problem(model, plan.batch or BATCH, plan.seed, plan.device)
        K = PERIOD * PERIODS[plan.quick]
        eta = plan.step or STEP[model]
        curves = {}
        for c in CONFIGS[figure]():
            times, loss, accuracy = run_config(pr, x1, c, K=K, eta=eta, seeds=plan.seeds,
                                               seed=plan.seed, score=score)
            for label, y in ((c.label, loss), (accuracy_label(c.label), accuracy)):
                if figure == "fig6":
                    curves[label] = Curve.sampled(label, times, y, np.arange(0, K + 1, PERIOD))
                else:
                    curves[label] = Curve(label, times[0], y)
        zetas = {c.label: topology_of(c)[3] for c in CONFIGS[figure]() if len(c.sizes) > 1}
        notes = (f"step {eta:g}, batch {plan.batch or BATCH}, K = {K}, {TEST:.0%} of the digits "
                 "held out", *(f"{label}: zeta = {z:.4f}" for label, z in zetas.items()))
        xlabel = "time slots" if figure == "fig6" else "iterations k"
        return Outcome(curves, xlabel, "training loss F(u_k); test accuracy (labelled)",
                       notes=notes)
    return run


def footprint(figure: str, model: str):
    def estimate(plan: Plan) -> Footprint:
        d = PIXELS * HIDDEN + HIDDEN + HIDDEN * 10 + 10 if model == "mlp" else PIXELS
        configs = CONFIGS[figure]()
        N = max(c.workers for c in configs)
        K = PERIOD * PERIODS[plan.quick]
        batch = plan.batch or BATCH
        R = plan.seeds
        memory = {f"seeds={R} x workers={N} x parameters={d} x 6 buffers of 8 B": 48.0 * R * N * d,
                  f"seeds={R} x workers={N} x batch={batch} x activations":
                      8.0 * R * N * batch * 4 * (HIDDEN + 10)}
        steps = {f"{len(configs)} configurations x K={K} x seeds={R} x workers={N} x "
                 f"batch={batch} x parameters={d}":
                 len(configs) * K * (6.0 * R * N * batch * d + LOOP_OVERHEAD)
                 + len(configs) * (K // PERIOD) * 3.0 * R * N_DIGITS * d}  # loss and accuracy
        return Footprint.of(memory, steps)
    return estimate
