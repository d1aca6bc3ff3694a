"""The experiments behind Ali & Arafa 2025's claims (Section IV), on the 8x8 digits.

The paper trains a CNN on CIFAR-10 and FEMNIST, an MLP or a logistic regression on MNIST and
an RNN on Shakespeare, over groups of clients whose local iterations and global rounds take
shifted-exponential times: c_i = d |N_i| + b and 1/lambda_i = e |N_i| + f within group i,
c_g = d_g |N_g| + b_g and 1/lambda_g = e_g |N_g| + f_g to the global server, its eight
parameters {d, b, e, f, d_g, b_g, e_g, f_g} given per figure (Section IV). Its non-i.i.d. runs
use Dirichlet(0.1) or label-disjoint groups. It gives no step, batch or number of seeds.

The analogue run here (``sim.hfl.run_hfl``, its schedule drawn from the figure's delays for
every seed, ``sim.federated.federated_problem`` for the clients): an MLP 64-32-10 with tanh
(for the CNN, MLP and RNN) or a linear layer (for the logistic regression of Fig. 13) on the
1797 digits, the figure's split (i.i.d. where the paper states none), mini-batches of
:data:`BATCH` per client, the step :data:`STEP` (the best of {0.05, 0.1, 0.2, 0.4} for Fig.
7a's baseline S = 0 at T = 2000, i.i.d.; the paper gives none), at the paper's structure:
its groups and clients per group where it states them (Fig. 3: 2 of 10; Fig. 6: 2 of 500,
every client drawing from all the digits; Fig. 7: 15 + 15; Fig. 9: 64 in 2, 4 or 8 groups).
Where a non-i.i.d. split over the paper's clients would leave clients without a digit (Fig.
8: 3400 clients, Fig. 13: 500 per group, Dirichlet(0.1) over 1797 digits), fewer clients run
with the delays of the paper's group sizes (the same c_i, lambda_i, c_g, lambda_g: the
schedule is the paper's). Quick runs shorten the horizon and the seeds, never the
structure. The seed sets the split and the network's start; every configuration of an
experiment shares them, and its seeds draw the delays and the mini-batches.

The readings of the upload (eqs. (10) and (12)): as printed (each group's change divided by
t_i^u), FedNova-style (rescaled by the groups' mean t) and as a plain sum
(``sim.hfl.UPLOADS``); every experiment runs under each. A group trained alone (Figs. 4 and
5, the paper's S = T: one round) is scored on its own model x_i^{u,t}, as the paper plots
the isolated groups' accuracy: under every reading the sum's x^2 (with one group the printed
upload would divide a whole horizon's training by t).

The metric: the training loss f(x^u) over all 1797 digits of the global model at each
wall-clock time (the model of the last round finished by then); for Fig. 3, also the groups'
spread about the global model, Lemma 1's ||x^{u+1} - x_i^{u,t_i^u}||^2 (eq. (18)), the mean
over groups at the end of each round.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbound.verify.api import LOOP_OVERHEAD, Curve, Footprint, Outcome, Plan, Reading

BATCH, HIDDEN, STEP = 8, 32, 0.2
SEEDS = (4, 10)
#: the delay parameters {d, b, e, f, d_g, b_g, e_g, f_g} of each figure (Section IV)
PARAMS = {
    "fig3": (0.09, 0.1, 0.009, 0.01, 1.0, 3.0, 0.05, 0.1),
    "fig6": (1e-3, 0.5, 1e-3, 0.05, 5.0, 10.0, 1e-3, 0.05),
    "fig7a": (0.01, 0.85, 1e-3, 0.085, 4.0, 2.0, 0.4, 0.2),
    # Fig. 7b: c_g = 30 (the text does not say which parameter moved: b_g here)
    "fig7b": (0.01, 0.85, 1e-3, 0.085, 4.0, 22.0, 0.4, 0.2),
    "fig8": (0.1, 1.4, 0.01, 0.14, 4.0, 2.0, 0.5, 1.0),
    "fig9": (0.1, 1.4, 0.01, 0.14, 0.5, 5.0, 0.05, 0.5),
    "fig11": (0.1, 0.7, 0.001, 0.13, 3.0, 3.0, 0.01, 0.2),
}
READINGS = (
    Reading("printed", "Ali & Arafa 2025, eqs. (10) and (12) as printed: each group uploads "
                       "(x_i^{u,t} - x_i^{u,0}) / t_i^u"),
    Reading("fednova", "FedNova-style: the printed upload rescaled by the groups' mean t, "
                       "sum_i |N_i|/N t_i^u"),
    Reading("sum", "the plain change x_i^{u,t} - x_i^{u,0}, not divided by t_i^u"),
)


@dataclass(frozen=True)
class Config:
    """One run: simulated group sizes, the delays' law (from ``params`` at ``delay_sizes``,
    or given shifts), S, the ramp, and the time horizon of each run mode."""

    label: str
    sizes: tuple[int, ...]
    S: float
    params: tuple[float, ...] | None = None
    delay_sizes: tuple[int, ...] | None = None
    shifts: tuple[tuple[float, ...], tuple[float, ...], float, float] | None = None
    ramp: bool = False

    def delays(self):
        """``sim.hfl.HFLDelays`` of the figure: the linear model at ``delay_sizes`` (the
        paper's group sizes), or the given shifts and means."""
        from fedbound.sim.hfl import HFLDelays

        if self.shifts is not None:
            return HFLDelays(*self.shifts)
        d, b, e, f, dg, bg, eg, fg = self.params
        sizes = self.delay_sizes or self.sizes
        G = len(sizes)
        return HFLDelays(tuple(d * n + b for n in sizes), tuple(e * n + f for n in sizes),
                         dg * G + bg, eg * G + fg)


def problem(split, sizes, plan: Plan, model: str = "mlp"):
    """(problem, x_1) on the digits with ``split`` over groups of ``sizes``, from the seed."""
    from fedbound.sim.federated import federated_problem

    return federated_problem("digits", "logistic" if model == "logistic" else "mlp", split,
                             sizes, seed=plan.seed, batch=plan.batch or BATCH,
                             hidden=(HIDDEN,), device=plan.device)


def run_config(pr, x1, c: Config, *, T: float, plan: Plan, upload: str | None = None):
    """The trace of one configuration under the plan's reading of the upload (``upload``
    where given): f(x^1) and f(x^{u+1}) at the end of round u, the schedule, the final model."""
    import torch

    from fedbound.sim.hfl import run_hfl

    trace = run_hfl(pr, sizes=c.sizes, alpha=plan.step or STEP, x1=x1, replicas=plan.seeds,
                    generator=torch.Generator().manual_seed(plan.seed + 1), delays=c.delays(),
                    S=c.S, T=T, ramp=c.ramp, upload=upload or plan.reading or "printed",
                    record_grad=False)
    if trace.diverged.any():
        raise ValueError(f"{c.label}: {int(trace.diverged.sum())} of {plan.seeds} seeds diverged "
                         f"at step {plan.step or STEP:g}")
    return trace


def record_times(trace) -> np.ndarray:
    """[seeds, U_max + 1]: time 0, then the end of each round (inf after round U)."""
    end, real = trace.end_time.numpy(), trace.real.numpy()
    return np.concatenate([np.zeros((end.shape[0], 1)), np.where(real, end, np.inf)], axis=1)


def schedule_scalars(label: str, trace) -> dict[str, np.ndarray]:
    """Per seed: the rounds U and the mean local iterations per group and round."""
    real = trace.real.numpy()
    t = trace.t.numpy().astype(float).mean(axis=2)
    return {f"rounds {label}": trace.U.numpy().astype(float),
            f"local iterations {label}": (t * real).sum(axis=1) / real.sum(axis=1)}


def curves_of(configs, pr, x1, *, T: float, plan: Plan, points: int = 81) -> tuple[dict, dict]:
    """Each configuration's loss on a grid of ``points`` times in [0, T], and its schedule's
    scalars (:func:`schedule_scalars`)."""
    grid = np.linspace(0.0, T, points)
    curves, scalars = {}, {}
    for c in configs:
        trace = run_config(pr, x1, c, T=T, plan=plan)
        curves[c.label] = Curve.sampled(c.label, record_times(trace), trace.loss.numpy(), grid)
        scalars.update(schedule_scalars(c.label, trace))
    return curves, scalars


def isolated_loss(full, x1, sizes, group: int, c: Config, *, T: float,
                  plan: Plan) -> tuple[np.ndarray, np.ndarray]:
    """Group ``group`` trained alone for ``T`` (the paper's S = T): its clients' shards as
    their own problem, one group, its own model at T (the one round's x_i^{u,t}: the upload
    summed, whatever the plan's reading; module docstring). Returns its loss on all the
    digits, f [seeds], and on its own shards at the start and at T [seeds, 2]."""
    import torch

    from fedbound.sim.data import Partition
    from fedbound.sim.neural import NeuralClients

    first = sum(sizes[:group])
    owner = full.partition.owner.cpu()
    mine = (owner >= first) & (owner < first + sizes[group])
    sub = NeuralClients(full.module, full.features[mine.to(full.device)],
                        full.labels[mine.to(full.device)],
                        Partition(owner[mine] - first, sizes[group]), batch=full.batch,
                        weights=full.weights, device=full.device)
    alone = Config(c.label, (sizes[group],), T, params=c.params,
                   delay_sizes=((c.delay_sizes or c.sizes)[group],), shifts=None)
    trace = run_config(sub, x1, alone, T=T, plan=plan, upload="sum")
    own = trace.loss.numpy()[:, [0, -1]]
    return full.loss(torch.as_tensor(trace.x_final).to(full.device)).cpu().numpy(), own


def notes(plan: Plan) -> tuple[str, ...]:
    """What every outcome notes: the step, the batch and the reading of the upload."""
    return (f"step {plan.step or STEP:g}, batch {plan.batch or BATCH}, upload "
            f"{plan.reading or 'printed'}",)


#: Fig. 3's spread of the groups is compared between the first and the last SPREAD_SHARE of
#: the horizon
SPREAD_SHARE = 0.25
SPREAD = "groups' spread ||x^{u+1} - x_i^{u,t}||^2"


def fig3(plan: Plan) -> Outcome:
    """Fig. 3: 2 groups of 10 clients, S = 5, the figure's delays, i.i.d.; the global loss
    and the groups' spread about the global model (Lemma 1, (18)) after each round."""
    T = 150.0 if plan.quick else 600.0
    pr, x1 = problem("iid", (10, 10), plan)
    c = Config("S = 5", (10, 10), 5.0, PARAMS["fig3"])
    trace = run_config(pr, x1, c, T=T, plan=plan)
    times = record_times(trace)
    grid = np.linspace(0.0, T, 121)
    spread = trace.deviation.numpy().mean(axis=2)                     # [seeds, U_max]
    ends = times[:, 1:]
    early, late = ends <= SPREAD_SHARE * T, (ends > (1 - SPREAD_SHARE) * T) & np.isfinite(ends)
    if not (early.any(axis=1).all() and late.any(axis=1).all()):
        raise ValueError(f"a seed has no round ending in the first or the last {SPREAD_SHARE:.0%} "
                         f"of T = {T:g}")
    curves = {c.label: Curve.sampled(c.label, times, trace.loss.numpy(), grid),
              SPREAD: Curve.sampled(SPREAD, ends, spread, grid[grid >= ends[:, 0].max()],
                                    xlabel="time (end of round)")}
    scalars = {**schedule_scalars(c.label, trace),
               "spread, first quarter": (spread * early).sum(axis=1) / early.sum(axis=1),
               "spread, last quarter": (spread * late).sum(axis=1) / late.sum(axis=1)}
    return Outcome(curves, "time", "training loss f(x^u); spread (labelled)", scalars,
                   notes=notes(plan))


def _s_experiment(figure: str, S_values, sizes, delay_sizes, split, T: tuple[float, float],
                  model: str = "mlp", ramp_pairs: bool = False):
    def run(plan: Plan) -> Outcome:
        horizon = T[0] if plan.quick else T[1]
        pr, x1 = problem(split, sizes, plan, model)
        configs = [Config(f"S = {S:g}", sizes, S, PARAMS.get(figure, PARAMS["fig6"]), delay_sizes)
                   for S in S_values]
        if ramp_pairs:
            configs += [Config(f"S = {S:g}, ramped", sizes, S, PARAMS["fig6"], delay_sizes,
                               ramp=True) for S in S_values]
        curves, rounds = curves_of(configs, pr, x1, T=horizon, plan=plan)
        return Outcome(curves, "time", "training loss f(x^u)", rounds, notes=notes(plan))
    return run


fig6 = _s_experiment("fig6", (0.0, 5.0), (500, 500), None, "iid", (300.0, 1000.0))
fig7a = _s_experiment("fig7a", (0.0, 5.0, 20.0), (15, 15), None, ("dirichlet", 0.1),
                      (500.0, 2000.0))
fig7b = _s_experiment("fig7b", (0.0, 5.0, 20.0), (15, 15), None, ("dirichlet", 0.1),
                      (1000.0, 2000.0))
fig8 = _s_experiment("fig8", (0.0, 12.0, 24.0), (2, 2, 2, 2), (850, 850, 850, 850),
                     ("dirichlet", 0.1), (600.0, 1500.0))
fig13 = _s_experiment("fig13", (5.0, 10.0, 20.0), (10, 10), (500, 500), ("dirichlet", 0.1),
                      (300.0, 1000.0), model="logistic", ramp_pairs=True)


def fig9(plan: Plan) -> Outcome:
    """Fig. 9: 64 clients in 2, 4 or 8 equal groups, S = 6, i.i.d."""
    T = 300.0 if plan.quick else 1000.0
    configs = [Config(f"{G} groups of {64 // G}", (64 // G,) * G, 6.0, PARAMS["fig9"])
               for G in (2, 4, 8)]
    curves, rounds = {}, {}
    for c in configs:
        pr, x1 = problem("iid", c.sizes, plan)
        got, r = curves_of([c], pr, x1, T=T, plan=plan)
        curves.update(got)
        rounds.update(r)
    return Outcome(curves, "time", "training loss f(x^u)", rounds, notes=notes(plan))


def _association(shifts: tuple[float, float]):
    """Fig. 10: 20 clients over 2 groups with the given shifts c_1, c_2 (c_g = 10; the means
    of Fig. 7a: 1/lambda_i = 0.1, 1/lambda_g = 1), S = 8, i.i.d."""
    def run(plan: Plan) -> Outcome:
        T = 300.0 if plan.quick else 1000.0
        curves, rounds = {}, {}
        for sizes in ((10, 10), (15, 5), (5, 15)):
            c = Config(f"{sizes[0]} + {sizes[1]} clients", sizes, 8.0,
                       shifts=(shifts, (0.1, 0.1), 10.0, 1.0))
            pr, x1 = problem("iid", sizes, plan)
            got, r = curves_of([c], pr, x1, T=T, plan=plan)
            curves.update(got)
            rounds.update(r)
        return Outcome(curves, "time", "training loss f(x^u)", rounds,
                       notes=(*notes(plan), f"shifts c_1 = {shifts[0]:g}, c_2 = {shifts[1]:g}"))
    return run


fig10a = _association((1.0, 7.0))
fig10b = _association((7.0, 1.0))


def fig11(plan: Plan) -> Outcome:
    """Fig. 11: 20 clients, symmetric (10 + 10) against asymmetric (15 + 5), S = 12, the
    figure's linear delays at these sizes, Dirichlet(0.1)."""
    T = 300.0 if plan.quick else 1000.0
    curves, rounds = {}, {}
    for sizes in ((10, 10), (15, 5)):
        c = Config(f"{sizes[0]} + {sizes[1]} clients", sizes, 12.0, PARAMS["fig11"])
        pr, x1 = problem(("dirichlet", 0.1), sizes, plan)
        got, r = curves_of([c], pr, x1, T=T, plan=plan)
        curves.update(got)
        rounds.update(r)
    return Outcome(curves, "time", "training loss f(x^u)", rounds, notes=notes(plan))


def fig12(plan: Plan) -> Outcome:
    """Fig. 12: c_g of 10, 20 and 40 (b_g moved; Fig. 7a's other parameters), S = 10, 2
    groups of 15, i.i.d."""
    T = 500.0 if plan.quick else 2000.0
    pr, x1 = problem("iid", (15, 15), plan)
    base = PARAMS["fig7a"]
    configs = [Config(f"c_g = {cg:g}", (15, 15), 10.0, (*base[:5], cg - 2 * base[4], *base[6:]))
               for cg in (10.0, 20.0, 40.0)]
    curves, rounds = curves_of(configs, pr, x1, T=T, plan=plan)
    return Outcome(curves, "time", "training loss f(x^u)", rounds, notes=notes(plan))


def cooperation(split):
    """Figs. 4 and 5: 2 groups (5 and 15 clients), S = 5 against each group alone for T (the
    paper's S = T), Fig. 3's delays, the given split."""
    def run(plan: Plan) -> Outcome:
        T = 150.0 if plan.quick else 600.0
        sizes = (5, 15)
        pr, x1 = problem(split, sizes, plan)
        c = Config("HFL, S = 5", sizes, 5.0, PARAMS["fig3"])
        curves, rounds = curves_of([c], pr, x1, T=T, plan=plan)
        for g in (0, 1):
            loss, own = isolated_loss(pr, x1, sizes, g, c, T=T, plan=plan)
            label = f"group {g + 1} ({sizes[g]} clients) alone"
            curves[label] = Curve(label, np.array([T]), loss[:, None])
            rounds[f"own loss at the start: {label}"] = own[:, 0]
            rounds[f"own loss at the horizon: {label}"] = own[:, 1]
        return Outcome(curves, "time", "training loss f(x^u)", rounds, notes=notes(plan))
    return run


def footprint(clients: int, configs: int, T: float, local: int = 20, groups: int = 8):
    """Memory and work of ``configs`` runs of ``clients`` clients in at most ``groups`` groups
    over ``T`` time units, at most ``local`` local iterations per unit of time."""
    d = 64 * HIDDEN + HIDDEN + HIDDEN * 10 + 10

    def estimate(plan: Plan) -> Footprint:
        R, batch = plan.seeds, plan.batch or BATCH
        iterations = local * T
        memory = {f"seeds={R} x groups={groups} x parameters={d} x 6 buffers of 8 B":
                  48.0 * R * groups * d,
                  f"seeds={R} x clients={clients} x batch={batch} x (inputs and activations)":
                  8.0 * R * clients * batch * (64 + 4 * (HIDDEN + 10))}
        steps = {f"{configs} configurations x {iterations:g} local iterations x seeds={R} x "
                 f"clients={clients} x batch={batch} x parameters={d}":
                 configs * iterations * (6.0 * R * clients * batch * d + LOOP_OVERHEAD)}
        return Footprint.of(memory, steps)
    return estimate
