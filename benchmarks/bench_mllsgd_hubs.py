"""MLL-SGD with tau = 1 on the hub models against the same run on the worker models.

    python benchmarks/bench_mllsgd_hubs.py [--repeats 5] [--device cpu]

Where every iteration averages (tau = 1), ``sim.mllsgd.run_mllsgd`` holds the D hub models
and steps each by its workers' pooled gradient (``NeuralClients.hub_step_sampler``); the
reference is the workers' form the run takes otherwise: every worker's model stepped, then
averaged per hub and broadcast back. Both on the digits split over 16 clients by Dirichlet
(0.3) class proportions, 4 hubs of 4 workers on a path (a doubly stochastic H), the first
hub's workers stepping with probability 0.3, the others 0.9, one sample a step, 64
replicas, K = 64, q = 2, the loss of u_K recorded only (what the chooser runs), the MLP
(64-32-10) and the small CNN.

The reference is the run with ``record_iterates`` off and hubs whose workers are not
consecutive (worker i in hub i mod 4: the same sizes, the same work, the workers' form,
which needs the workers of a hub together to pool them). Before timing, the hub form's loss
is checked against the workers' form with consecutive hubs (``record_iterates=True``, which
keeps the workers' form): to 1e-12, relative. The two run interleaved
(benchmarks/timing.py, one intra-op thread); the ratio is the median over rounds of the
workers' time over the hubs' (goal: at least 2 for the MLP, above 1 for the CNN, whose
convolutions cost the same per sample in both forms). Writes ``mllsgd.hubs.NET.*`` to
benchmarks/results.json (``mllsgd.hubs.cuda.NET.*`` with ``--device cuda``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402
from fedbound.sim.federated import federated_problem  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402

GOALS = {"mlp": 2.0, "cnn": 1.0}
REPLICAS, K = 64, 64


def workload(net: str, device: str):
    """The problem and run_mllsgd's arguments (hub_of: consecutive hubs)."""
    problem, x1 = federated_problem("digits", net, ("dirichlet", 0.3), (16,), batch=1, device=device)
    H = torch.tensor([[2 / 3, 1 / 3, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [0, 1 / 3, 1 / 3, 1 / 3],
                      [0, 0, 1 / 3, 2 / 3]], dtype=torch.float64)
    kwargs = dict(H=H, hub_of=torch.arange(16) // 4, w=torch.ones(16),
                  p=torch.tensor([0.3] * 4 + [0.9] * 12, dtype=torch.float64),
                  eta=torch.full((REPLICAS,), 0.5, dtype=torch.float64), K=K, q=2, tau=1, x1=x1,
                  replicas=REPLICAS, record_every=K, record_first=False, record_grad=False)
    return problem, kwargs


def run(problem, kwargs, **changes):
    return run_mllsgd(problem, generator=torch.Generator().manual_seed(0), **{**kwargs, **changes})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: give at least 1 timed round")
    where = suffix(args.device)
    torch.set_num_threads(1)
    entries = []
    for net, goal in GOALS.items():
        problem, kwargs = workload(net, args.device)
        hubs, workers = run(problem, kwargs), run(problem, kwargs, record_iterates=True)
        gap = float(((hubs.loss - workers.loss).abs() / workers.loss.abs()).max())
        if gap > 1e-12:
            raise SystemExit(f"{net}: the hub form's loss differs from the workers' by {gap:.3g}")
        apart = {**kwargs, "hub_of": torch.arange(16) % 4}
        times = interleaved({"hubs": lambda p=problem, k=kwargs: run(p, k),
                             "workers": lambda p=problem, k=apart: run(p, k)}, args.repeats)
        ratio = median_ratio(times, "workers", "hubs")
        print(f"{net}: hubs {min(times['hubs']):.3f} s, workers {min(times['workers']):.3f} s, "
              f"ratio {ratio:.2f} (goal >= {goal:g}); loss gap {gap:.2g}")
        entries += [figure(f"mllsgd.hubs{where}.{net}.workers_over_hubs", ratio, "ratio", at_least=goal),
                    figure(f"mllsgd.hubs{where}.{net}.hubs_seconds", min(times["hubs"]), "s"),
                    figure(f"mllsgd.hubs{where}.{net}.max_relative_difference", gap, "ratio", at_most=1e-12)]
    record(entries)


if __name__ == "__main__":
    main()
