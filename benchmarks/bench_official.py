"""fedbound's MLL-SGD beside the official code's logistic-regression loop
(benchmarks/official_mllsgd.py) on the same workload at N = 10, 100 and 1000 workers.

    python benchmarks/bench_official.py [--quick] [--device cpu]

Workload (benchmarks/fused_mllsgd.py): 50 features, n = 32 N samples (one batch per worker
under the official partition), batch 32, step size 0.2, tau = 4, q = 2, 10 hubs on a
complete graph, 64, 32 and 16 hub rounds at N = 10, 100 and 1000 (K = 8 per hub round;
longer where a run is short, so that its final loss is near the plateau). Like for like: fedbound records only
what the official loop computes, the loss of the average model once per hub round
(``record_every=q*tau``, ``record_grad=False``). The final recorded losses must agree
within 2% (the two loops draw differently: the official one samples each worker's rows
without replacement from a fresh shuffle, fedbound with replacement from all rows).
The hand-fused reference (benchmarks/fused_mllsgd.py, recording as little) runs in the
same rounds: official / hand-fused is the ceiling of official / fedbound on the machine
and load of the run.
One intra-op thread; the runs alternate and the figure is the median ratio over the
rounds. Goal: the official loop at least 25x slower at N = 1000. Also recorded, without a
goal: each side's median cost per worker-step (microseconds; N times the iterations), which
says which side a change in the ratio from one N to the next comes from. The machine's load
average is printed before and after. Writes the figures to benchmarks/results.json.

Why the ratio depends on the machine's load at N = 1000 and hardly at N = 100: the data set
grows with N (32 N rows of 50 float64 features: 1.2 MiB at N = 100, 12.2 MiB at N = 1000),
and fedbound's (and the hand-fused reference's) cost per worker-step is mostly the gather of
32 random rows per worker and step. From a table that fits a core's L2 cache a row costs a
few nanoseconds; from one that lives in the L3 cache shared with every other process of the
host it costs several times that, and more when those processes evict it. The official
loop's cost per worker-step grows too (it shuffles all 32 N rows once per worker and round)
but it is interpreter-bound and suffers less from a crowded cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.fused_mllsgd import TAU, Q, fused_mllsgd, workload  # noqa: E402
from benchmarks.official_mllsgd import official_mllsgd  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402

GOAL, LOSS_GAP = 25.0, 0.02


def compare(N: int, hub_rounds: int, repeats: int, device: str = "cpu") -> dict[str, float]:
    """Median time ratios official / fedbound and official / hand-fused (the hand-fused
    reference recording as little as fedbound), the relative gap of the final losses, the
    best times and each side's median microseconds per worker-step."""
    problem, kw = workload(N, hub_rounds * Q * TAU)
    x, y = problem.features.numpy(), problem.labels.numpy()
    hubs = kw["H"].shape[0]
    results = {}

    def official():
        results["official"] = official_mllsgd(x, y, hubs=hubs, workers=N // hubs, tau=TAU, q=Q,
                                              hub_rounds=hub_rounds, batch=problem.batch,
                                              alpha=kw["eta"])

    def fedbound():
        results["fedbound"] = run_mllsgd(problem, generator=torch.Generator().manual_seed(1), device=device,
                                         record_every=Q * TAU, record_grad=False, **kw)

    def fused():
        fused_mllsgd(problem, hubs=hubs, workers=N, eta=kw["eta"], K=kw["K"], q=Q, tau=TAU,
                     x1=kw["x1"], generator=torch.Generator().manual_seed(1),
                     record_every=Q * TAU)

    times = interleaved({"official": official, "fedbound": fedbound, "fused": fused}, repeats,
                        warm_up=N < 1000)
    ours = float(results["fedbound"].loss[0, -1])
    worker_steps = N * kw["K"]
    return {"ratio": median_ratio(times, "official", "fedbound"),
            "fused_ratio": median_ratio(times, "official", "fused"),
            "gap": abs(results["official"][-1] - ours) / ours,
            "official": min(times["official"]), "fedbound": min(times["fedbound"]),
            **{f"{side}_us": statistics.median(times[side]) / worker_steps * 1e6
               for side in ("official", "fedbound")}}


def load() -> str:
    """The 1-, 5- and 15-minute load averages (how crowded the machine was)."""
    return ", ".join(f"{v:.1f}" for v in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100 only")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    torch.set_num_threads(1)
    plan = {10: (64, 3), 100: (16, 3)} if args.quick else {10: (64, 7), 100: (32, 5),
                                                           1000: (16, 5)}
    print("MLL-SGD logistic regression: official loop vs fedbound (and vs the hand-fused "
          f"reference, recording as little); load average {load()} on {os.cpu_count()} cores")
    print(f"{'N':>5} | {'official s':>10} | {'fedbound s':>10} | {'us/worker-step':>16} | "
          f"{'ratio':>7} | {'vs fused':>8} | final-loss gap")
    entries = []
    for N, (hub_rounds, repeats) in plan.items():
        row = compare(N, hub_rounds, repeats, device)
        print(f"{N:>5} | {row['official']:>10.3f} | {row['fedbound']:>10.4f} | "
              f"{row['official_us']:>7.2f} {row['fedbound_us']:>8.3f} | "
              f"{row['ratio']:>6.1f}x | {row['fused_ratio']:>7.1f}x | {row['gap']:.2%}")
        name = f"mllsgd{suffix(device)}"
        entries.append(figure(f"{name}.official_over_fedbound.N{N}", row["ratio"], "ratio",
                              at_least=GOAL if N == 1000 else None))
        entries.append(figure(f"{name}.official_over_fused.N{N}", row["fused_ratio"], "ratio"))
        entries.append(figure(f"{name}.official_final_loss_gap.N{N}", row["gap"], "relative",
                              at_most=LOSS_GAP))
        for side in ("official", "fedbound"):
            entries.append(figure(f"{name}.{side}_us_per_worker_step.N{N}",
                                  row[f"{side}_us"], "microseconds"))
    print(f"load average after: {load()}")
    record(entries)


if __name__ == "__main__":
    main()
