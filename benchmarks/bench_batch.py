"""Large mini-batches, as the papers use them: the cost of a sample's gradient at the
paper's batch against a small batch.

    python benchmarks/bench_batch.py [--quick] [--device cpu]

Each simulator runs at a small and at a large mini-batch per client (the batch of the
problem, or TDCD's global batch |zeta|), interleaved (benchmarks/timing.py, one intra-op
thread); the figure is the time per sample gradient (run time over the sample gradients
the run computes) at the large batch over that at the small one: at most 1 means a large
batch costs no more per sample than a small one (the per-step overheads amortised, the
gathers and products linear in the batch). Also recorded: the large batch's seconds per
round (TDCD) or per iteration (MLL-SGD, HFL's local iterations).

- TDCD (``sim.tdcd.run_tdcd``), the paper's setting in miniature (Das et al. 2022, Section
  5.2: N = 2 silos, K = 50 clients each, |zeta| = 2000): logistic ``BlockLinear`` on 4000
  synthetic samples of 64 features, 8 replicas, Q = 10, |zeta| = 100 against 2000, and
  2000 with a fresh batch per step (``batch="step"``);
- MLL-SGD (``sim.mllsgd.run_mllsgd``): logistic regression on the breast cancer data, 30
  workers, 20 replicas, K = 8, batch 32 against 512;
- HFL (``sim.hfl.run_hfl``): the MLP 64-32-10 on the digits, 2 x 15 clients on
  Dirichlet(0.5) shards, 4 replicas, 2 rounds of t = (2, 3), batch 16 against 256.

Goal: every ratio at most 1. Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved  # noqa: E402
from fedbound.sim.federated import federated_problem  # noqa: E402
from fedbound.sim.hfl import run_hfl  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    torch.set_num_threads(1)
    repeats = 3 if args.quick else 7
    where = suffix(args.device)
    entries = []
    print(f"{'run':>7} {'batch':>10} | {'s per run':>9} | {'ns per sample':>13} | ratio")
    for name, make in (("tdcd", tdcd_runs), ("mllsgd", mllsgd_runs), ("hfl", hfl_runs)):
        runs = make(args.device)
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
    record(entries)


if __name__ == "__main__":
    main()
