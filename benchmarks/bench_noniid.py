"""Non-i.i.d. clients (sim.clients) against the shared i.i.d. problem: what a run costs.

    python benchmarks/bench_noniid.py [--quick] [--device cpu]

The same runs twice, once on the shared problem (every client samples the whole data set,
split ``"iid"`` of ``sim.federated.federated_problem``) and once with every client on its
own shard of its group's labels (``"group_labels"``, weights "data"), one process,
interleaved (benchmarks/timing.py, one intra-op thread), the ratio the median of the
paired non-i.i.d. over i.i.d. times:

- HFL (``sim.hfl.run_hfl``): 2 groups of 15 clients, 20 replicas, 3 rounds of t = (2, 3)
  local iterations (a fixed path: no schedule draws);
- MLL-SGD (``sim.mllsgd.run_mllsgd``): 30 workers in 3 hubs, 20 replicas, K = 8, q = 2,
  tau = 2;

on logistic regression (breast cancer, batch 32: ``LogisticRegression`` against
``LogisticClients``) and the MLP 64-32-10 on the digits (batch 16: ``NeuralProblem``
against ``NeuralClients``). Goal: every ratio at most 1.5 (the per-client gather costs
about what the shared one does). Writes the figures to benchmarks/results.json.
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
from fedbound.sim.hfl import run_hfl  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402

GOAL = 1.5
SIZES = (15, 15)
REPLICAS = 20
SETTINGS = {"logistic": ("breast_cancer", 32, 0.5), "mlp": ("digits", 16, 0.1)}


def runs(model: str, device: str) -> dict[str, dict]:
    """{algorithm: {split: a function running it}} for ``model``."""
    data, batch, step = SETTINGS[model]
    made = {split: federated_problem(data, model, split, SIZES, seed=0, batch=batch, device=device)
            for split in ("iid", "group_labels")}
    M = sum(SIZES)
    hub_of = torch.arange(M) // 10
    H = torch.full((3, 3), 1 / 3, dtype=torch.float64)

    def hfl(problem, x1):
        return lambda: run_hfl(problem, sizes=SIZES, alpha=step, x1=x1, replicas=REPLICAS,
                               t=[[2, 3]] * 3, generator=torch.Generator().manual_seed(1))

    def mllsgd(problem, x1):
        return lambda: run_mllsgd(problem, H=H, hub_of=hub_of, w=torch.ones(M), p=torch.ones(M),
                                  eta=step, K=8, q=2, tau=2, x1=x1, replicas=REPLICAS,
                                  generator=torch.Generator().manual_seed(1))

    return {name: {"iid" if split == "iid" else "noniid": make(*made[split]) for split in made}
            for name, make in (("hfl", hfl), ("mllsgd", mllsgd))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    torch.set_num_threads(1)
    repeats = 3 if args.quick else 9
    where = suffix(args.device)
    entries = []
    print(f"{'model':>8} {'run':>7} | {'iid s':>8} | {'non-iid s':>9} | ratio")
    for model in SETTINGS:
        for algorithm, fns in runs(model, args.device).items():
            times = interleaved(fns, repeats)
            ratio = median_ratio(times, "noniid", "iid")
            print(f"{model:>8} {algorithm:>7} | {min(times['iid']):>8.4f} | "
                  f"{min(times['noniid']):>9.4f} | {ratio:.2f}")
            entries.append(figure(f"noniid.{model}{where}.{algorithm}.noniid_over_iid", ratio,
                                  "ratio", at_most=GOAL))
    record(entries)


if __name__ == "__main__":
    main()
