"""Batches in the simulators: large mini-batches, as the papers use them, and a rung of 32
candidate configurations in one batched run against 32 separate runs.

    python benchmarks/bench_batch.py [--quick] [--part samples|candidates] [--device cpu]

**Mini-batches** (``--part samples``). Each simulator runs at a small and at a large
mini-batch per client (the batch of the problem, or TDCD's global batch |zeta|),
interleaved (benchmarks/timing.py, one intra-op thread); the figure is the time per sample
gradient (run time over the sample gradients the run computes) at the large batch over that
at the small one: at most 1 means a large batch costs no more per sample than a small one
(the per-step overheads amortised, the gathers and products linear in the batch). Also
recorded: the large batch's seconds per round (TDCD) or per iteration (MLL-SGD, HFL's local
iterations).

- TDCD (``sim.tdcd.run_tdcd``), the paper's setting in miniature (Das et al. 2022, Section
  5.2: N = 2 silos, K = 50 clients each, |zeta| = 2000): logistic ``BlockLinear`` on 4000
  synthetic samples of 64 features, 8 replicas, Q = 10, |zeta| = 100 against 2000, and
  2000 with a fresh batch per step (``batch="step"``);
- MLL-SGD (``sim.mllsgd.run_mllsgd``): logistic regression on the breast cancer data, 30
  workers, 20 replicas, K = 8, batch 32 against 512;
- HFL (``sim.hfl.run_hfl``): the MLP 64-32-10 on the digits, 2 x 15 clients on
  Dirichlet(0.5) shards, 4 replicas, 2 rounds of t = (2, 3), batch 16 against 256.

Goal: every ratio at most 1.

**Candidates** (``--part candidates``). The first rung of a chooser's successive halving:
32 configurations (4 values of the knob the chooser tunes beside the step, 8 steps) at
4 replicas each, as ``Chooser.simulate`` runs them: one batched call with common random
numbers (``sim.problems.CommonDraws``) against the 32 runs of one configuration each, the
two interleaved. The bench asserts that configuration c of the batch gives the numbers of
its run alone: bit for bit on the quadratics (at least 3 replicas), to 1e-12 on the data
sets (4 replicas: torch's vectorised and scalar kernels may differ in the last bit,
``sim.problems.CommonDraws``); the largest relative difference is recorded. Each run records
what the choosers' default metric reads (HFL and MLL-SGD: the final loss; TDCD:
||grad L||^2 every round).

- HFL: the choosers' synthetic quadratic (dim 10, L = 1, sigma = 10) on 2 x 15 clients, and
  multinomial logistic regression on the digits split Dirichlet(0.3) over 2 x 4 clients
  (batch 1), the delay model of ``fedbound choose hfl``'s example, T = 600; S = 0, 2, 5, 10;
- MLL-SGD: a quadratic (dim 10) and the digits' logistic regression over 4 hubs x 4
  workers (p = 0.8, q = 2), K = 256; tau = 1, 2, 4, 8;
- TDCD: least squares (the choosers' default scenario, squared loss) and logistic
  regression on the breast cancer data split by features over 2 silos, t_comm = 10, the
  choosers' horizon (150 rounds of Q = 1); Q = 1, 2, 5, 10.

Figures: ``batch_over_one_run`` (the batch's time over the mean time of one of the 32 runs:
the simulations a batch costs), ``separate_over_batch`` (the speed-up), the batch's seconds,
the largest difference, and the machine's load average while they ran. Goals:

- HFL and MLL-SGD on their quadratics: at most RUNS_GOAL simulations for the batch of 32,
  one per value of the knob. A run of a small problem is the Python dispatch of its steps
  (a few tensor operations on small tensors): the batch pays the local steps' dispatch once
  for all 32 configurations, but configurations with different S (tau) end their rounds
  (average) at different steps, and those operations are dispatched once per value, as in
  a run of one: about one simulation per value of the knob, with the arithmetic of 32
  small configurations on top;
- TDCD, and every data set: a speed-up of at least SPEEDUP_GOAL. On the data sets a step is
  arithmetic (the gradients of 32 times the models), which no batching removes; TDCD
  records ||grad L||^2 at every round start of every configuration, over the samples and
  configuration by configuration (the product of the scores sums in an order that depends
  on its number of replicas, so only the shape of a run of one gives its numbers), and its
  clock runs as long as its longest configuration (Q = 10: twice the mean run).

Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402
from fedbound.sim.federated import federated_problem  # noqa: E402
from fedbound.sim.hfl import HFLDelays, draw_schedule, run_hfl  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402
from fedbound.sim.problems import Quadratic  # noqa: E402
from fedbound.sim.tdcd import BlockLinear, Layout, run_tdcd, synthetic_data  # noqa: E402

GOAL = 1.0


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def tdcd_runs(device: str) -> dict[str, tuple]:
    """{label: (run, sample gradients per run, rounds per run)} for TDCD."""
    R, Q, rounds, n = 8, 10, 3, 4000
    X, y = synthetic_data(n, 64, loss="logistic", generator=gen(0))
    runs = {}
    for label, batch, mode in (("small", 100, "round"), ("large", 2000, "round"),
                               ("large_step", 2000, "step")):
        model = BlockLinear(X.to(device), y.to(device), Layout((32, 32), (50, 50), n, batch),
                            loss="logistic")
        theta0 = torch.zeros(64, dtype=torch.float64)
        runs[label] = (lambda m=model, th=theta0, mode=mode: run_tdcd(
            m, eta=0.01, Q=Q, rounds=rounds, theta0=th, replicas=R, generator=gen(1), batch=mode),
            R * rounds * Q * 2 * batch, rounds)  # each sample's gradient in both silos
    return runs


def mllsgd_runs(device: str) -> dict[str, tuple]:
    R, N, K = 20, 30, 8
    hub_of, H = torch.arange(N) // 10, torch.full((3, 3), 1 / 3, dtype=torch.float64)
    runs = {}
    for label, batch in (("small", 32), ("large", 512)):
        problem, x1 = federated_problem("breast_cancer", "logistic", "iid", (N,), batch=batch,
                                        device=device)
        runs[label] = (lambda p=problem, x=x1: run_mllsgd(
            p, H=H, hub_of=hub_of, w=torch.ones(N), p=torch.ones(N), eta=0.5, K=K, q=2, tau=2,
            x1=x, replicas=R, generator=gen(1)), R * N * K * batch, K)
    return runs


def hfl_runs(device: str) -> dict[str, tuple]:
    R, sizes, t = 4, (15, 15), [[2, 3]] * 2
    runs = {}
    for label, batch in (("small", 16), ("large", 256)):
        problem, x1 = federated_problem("digits", "mlp", ("dirichlet", 0.5), sizes, seed=1,
                                        batch=batch, device=device)
        steps = sum(max(row) for row in t)  # every client samples at every local iteration
        runs[label] = (lambda p=problem, x=x1: run_hfl(
            p, sizes=sizes, alpha=0.1, x1=x, replicas=R, t=t, generator=gen(1)),
            R * sum(sizes) * steps * batch, steps)
    return runs


# ---------------------------------------------------------------------- candidates

#: a rung's replicas per candidate (``Chooser.screen_replicas``), candidates per knob value
RUNG_REPLICAS, STEPS = 4, 8
#: goals (module docstring): simulations a batch of 32 costs (HFL's and MLL-SGD's
#: quadratics: one per value of S or tau, 4), the speed-up of the batch over the 32 runs
#: (TDCD, the data sets)
RUNS_GOAL, SPEEDUP_GOAL = 4.0, 2.0
#: the choosers' example delay model (``fedbound choose hfl --delays``): d, b, e, f, d_g, b_g, e_g, f_g
HFL_DELAYS = (0.01, 0.85, 0.001, 0.085, 4, 2, 0.4, 0.2)


def _steps(top: float) -> list[float]:
    return [top * 2.0**-k for k in range(STEPS)]


def _padded(values: torch.Tensor, rounds: int) -> torch.Tensor:
    """Per-replica rounds [R, U, ...] padded with zeros to ``rounds`` rounds."""
    pad = [0, 0] * (values.ndim - 2) + [0, rounds - values.shape[1]]
    return torch.nn.functional.pad(values, pad)


def hfl_candidates(problem, x1, sizes, device: str):
    """(batch, separate): one run_hfl of the 32 (S, alpha) and the 32 runs alone."""
    d, b, e, f, dg, bg, eg, fg = HFL_DELAYS
    G = len(sizes)
    delays = HFLDelays(tuple(d * n + b for n in sizes), tuple(e * n + f for n in sizes),
                       dg * G + bg, eg * G + fg)
    paths = {S: draw_schedule(delays, S, 600.0, RUNG_REPLICAS, gen(1)) for S in (0.0, 2.0, 5.0, 10.0)}
    U = max(p.t.shape[1] for p in paths.values())
    rows = [(S, a) for S in paths for a in _steps(0.5)]
    t = torch.stack([_padded(paths[S].t, U) for S, _ in rows])
    ends = torch.stack([_padded(paths[S].end_time, U) for S, _ in rows])
    alpha = torch.tensor([[a] for _, a in rows], dtype=torch.float64)
    kw = dict(sizes=sizes, x1=x1, replicas=RUNG_REPLICAS, record_grad=False, record_loss=False,
              device=device)
    return (lambda: run_hfl(problem, alpha=alpha, t=t, end_time=ends, generator=gen(2), **kw),
            lambda: [run_hfl(problem, alpha=alpha[c].expand(RUNG_REPLICAS), t=t[c], end_time=ends[c],
                             generator=gen(2), **kw) for c in range(len(rows))])


def mllsgd_candidates(problem, x1, device: str):
    N, K = 16, 256
    rows = [(tau, eta) for tau in (1, 2, 4, 8) for eta in _steps(0.5)]
    eta = torch.tensor([[e] for _, e in rows], dtype=torch.float64)
    kw = dict(H=torch.full((4, 4), 0.25, dtype=torch.float64), hub_of=torch.arange(N) // 4,
              w=torch.ones(N), p=torch.full((N,), 0.8), q=2, K=K, x1=x1, replicas=RUNG_REPLICAS,
              record_grad=False, record_every=K, record_first=False, device=device)
    return (lambda: run_mllsgd(problem, eta=eta, tau=[tau for tau, _ in rows], generator=gen(3), **kw),
            lambda: [run_mllsgd(problem, eta=eta[c].expand(RUNG_REPLICAS), tau=rows[c][0],
                                generator=gen(3), **kw) for c in range(len(rows))])


def tdcd_candidates(model, theta0, top: float):
    t_comm = 10.0
    rows = [(Q, eta) for Q in (1, 2, 5, 10) for eta in _steps(top)]
    rounds = [math.ceil(150 * (3 * t_comm + 1) / (3 * t_comm + Q)) for Q, _ in rows]
    eta = torch.tensor([[e] for _, e in rows], dtype=torch.float64)
    kw = dict(theta0=theta0, replicas=RUNG_REPLICAS, t_comm=t_comm, record_variance=False)
    return (lambda: run_tdcd(model, eta=eta, Q=[Q for Q, _ in rows], rounds=rounds, generator=gen(4), **kw),
            lambda: [run_tdcd(model, eta=eta[c].expand(RUNG_REPLICAS), Q=rows[c][0], rounds=rounds[c],
                              generator=gen(4), **kw) for c in range(len(rows))])


def candidate_cases(device: str) -> dict[tuple[str, str], tuple]:
    """{(simulator, problem): (batch, separate, exact)}: ``exact`` where the bench asserts
    bit for bit (the quadratics), else a relative difference of at most 1e-12."""
    from fedbound.verify.papers.tdcd.adapters import Theorem1, build
    from fedbound.verify.papers.tdcd.choose import data_model

    quadratic = Quadratic.random(10, 1.0, 0.1, 10.0, gen(0))
    start = quadratic.x_star + 2.0
    digits = {G: federated_problem("digits", "logistic", ("dirichlet", 0.3), sizes, batch=1,
                                   device=device) for G, sizes in ((2, (4, 4)), (1, (16,)))}
    st = build(Theorem1.default.replace(loss="squared"))
    bc, bc0, _, _ = data_model("breast_cancer", Theorem1.default)

    def on(model):  # a TDCD model on the device
        return BlockLinear(model.X.to(device), model.y.to(device), model.layout, loss=model.loss_kind)

    return {
        ("hfl", "quadratic"): (*hfl_candidates(quadratic, start, (15, 15), device), True),
        ("hfl", "digits"): (*hfl_candidates(digits[2].problem, digits[2].x1, (4, 4), device), False),
        ("mllsgd", "quadratic"): (*mllsgd_candidates(quadratic, start, device), True),
        ("mllsgd", "digits"): (*mllsgd_candidates(digits[1].problem, digits[1].x1, device), False),
        ("tdcd", "least_squares"): (*tdcd_candidates(on(st.model), st.theta0, 0.5 / st.model.L), True),
        ("tdcd", "breast_cancer"): (*tdcd_candidates(on(bc), bc0, 2.0 / bc.L), False),
    }


def largest_difference(batch: list, separate: list) -> float:
    """The largest relative difference between any number of trace c of the batch and of
    run c alone (0: bit for bit; inf where a shape or a None differs)."""
    worst = 0.0
    for a, b in zip(separate, batch, strict=True):
        for name, x in vars(a).items():
            y = getattr(b, name)
            if not isinstance(x, torch.Tensor):
                if (x is None) != (y is None):
                    return math.inf
                continue
            if x.shape != y.shape:
                return math.inf
            if not torch.equal(x, y):
                gap = ((x - y).abs() / x.abs().clamp(min=1e-300)).double().nan_to_num(math.inf)
                worst = max(worst, float(gap.max()))
    return worst


def candidates(device: str, repeats: int) -> list[dict]:
    where = suffix(device)
    entries, loads = [], [os.getloadavg()[0]]
    print(f"\n{'simulator':>9} {'problem':>14} | {'batch s':>8} | {'32 runs s':>9} | "
          f"{'runs per batch':>14} | speed-up | max diff")
    for (name, problem), (batch, separate, exact) in candidate_cases(device).items():
        gap = largest_difference(batch(), separate())
        if gap > (0.0 if exact else 1e-12):
            raise AssertionError(f"{name} on {problem}: a configuration of the batch differs "
                                 f"from its run alone by {gap:.3g}")
        times = interleaved({"batch": batch, "separate": separate}, repeats, warm_up=False)
        t_batch, t_separate = statistics.median(times["batch"]), statistics.median(times["separate"])
        runs = t_batch / (t_separate / 32)
        loads.append(os.getloadavg()[0])
        print(f"{name:>9} {problem:>14} | {t_batch:>8.3f} | {t_separate:>9.3f} | {runs:>14.2f} | "
              f"{t_separate / t_batch:>8.2f} | {gap:.2g}")
        key = f"batch.candidates.{name}{where}.{problem}"
        dispatch = problem == "quadratic"  # HFL's and MLL-SGD's: a step is its dispatch
        entries += [
            figure(f"{key}.batch_over_one_run", runs, "runs",
                   at_most=RUNS_GOAL if dispatch else None),
            figure(f"{key}.separate_over_batch", t_separate / t_batch, "ratio",
                   at_least=None if dispatch else SPEEDUP_GOAL),
            figure(f"{key}.batch_seconds", t_batch, "s"),
            figure(f"{key}.max_relative_difference", gap, "ratio",
                   at_most=0.0 if exact else 1e-12)]
    load = statistics.mean(loads)
    print(f"load average (1 min) while measuring: {min(loads):.1f} to {max(loads):.1f} "
          f"(mean {load:.1f}) on {os.cpu_count()} cores")
    entries.append(figure(f"batch.candidates{where}.load_average", load, "processes"))
    return entries


def samples(device: str, repeats: int) -> list[dict]:
    where = suffix(device)
    entries = []
    print(f"{'run':>7} {'batch':>10} | {'s per run':>9} | {'ns per sample':>13} | ratio")
    for name, make in (("tdcd", tdcd_runs), ("mllsgd", mllsgd_runs), ("hfl", hfl_runs)):
        runs = make(device)
        times = interleaved({label: fn for label, (fn, _, _) in runs.items()}, repeats)
        per_sample = {label: min(times[label]) / work for label, (_, work, _) in runs.items()}
        for label, (_, _, steps) in runs.items():
            ratio = per_sample[label] / per_sample["small"]
            print(f"{name:>7} {label:>10} | {min(times[label]):>9.4f} | "
                  f"{1e9 * per_sample[label]:>13.2f} | {ratio:.2f}")
            if label == "small":
                continue
            entries.append(figure(f"batch.{name}{where}.{label}.per_sample_over_small", ratio,
                                  "ratio", at_most=GOAL))
            per = "round" if name == "tdcd" else "iteration"
            entries.append(figure(f"batch.{name}{where}.{label}.seconds_per_{per}",
                                  min(times[label]) / steps, "s"))
    return entries


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--part", choices=("samples", "candidates"),
                        help="one part only (default: both)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    torch.set_num_threads(1)
    entries = []
    if args.part in (None, "samples"):
        entries += samples(args.device, 3 if args.quick else 7)
    if args.part in (None, "candidates"):
        entries += candidates(args.device, 1 if args.quick else 3)
    record(entries)


if __name__ == "__main__":
    main()
