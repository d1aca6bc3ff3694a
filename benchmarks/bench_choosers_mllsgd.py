"""Evidence for the MLL-SGD chooser (tau, eta): on hub topologies like the paper's, does each
answer (certified per variant, calibrated, simulated) reach as low a loss after K iterations
as the best configuration of an independent paired reference search?

    python benchmarks/bench_choosers_mllsgd.py [--quick] [--replicas 64] [--device cpu]

Scenarios (Castiglia et al. 2021, Section 6: hubs on a graph, workers stepping with
probability p): 4 hubs of 5 workers on a complete hub graph and 5 hubs of 4 workers on a
path (Metropolis-Hastings mixing), each on the chooser's default quadratic and on logistic
regression, K = 256 iterations, q = 2, p = 0.9: 4 scenarios, metric the loss F(u_K) - F_inf
after K iterations (the chooser's default, the paper's experiments). For each: the
chooser's report with its defaults (timed, one torch thread; wall clock and CPU), then the
reference (``benchmarks/regret.py``); each answer's paired regret against the reference's
best with its 95% interval. Recorded in benchmarks/results.json: per scenario and answer the
regret, its half-width and whether it passes, the seconds (goal <= 10 s), and the pass rates
(goals: calibrated >= 0.9, simulated 1; certified reported).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.regret import evaluate, figures, summary, table  # noqa: E402
from benchmarks.results import record  # noqa: E402
from fedbound.verify.papers.mllsgd import DEFAULT_K, PROBLEM_KINDS, TauEta, Theorem1  # noqa: E402

TOPOLOGIES = {"complete4x5": {"hubs": 4, "workers_per_hub": 5, "graph": "complete"},
              "path5x4": {"hubs": 5, "workers_per_hub": 4, "graph": "path"}}
PROBLEMS = ("quadratic", "logistic")
CPU_ONLY = "the chooser runs its simulations on the CPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=64, help="replicas of the reference")
    ap.add_argument("--quick", action="store_true", help="one scenario only")
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    torch.set_num_threads(1)
    scenarios = [(t, p) for t in TOPOLOGIES for p in PROBLEMS][: 1 if args.quick else None]
    results = []
    for topology, kind in scenarios:
        name = f"{topology}_{kind}"
        scenario = Theorem1.default.replace(K=DEFAULT_K, p=0.9, **TOPOLOGIES[topology],
                                            problem={"kind": kind, **PROBLEM_KINDS[kind]})
        result = evaluate(TauEta(scenario=scenario), name, args.replicas)
        results.append(result)
        record(figures(f"choosers.mllsgd.{name}", result))  # at once: a cut run keeps it
        print(table([result]).split("\n", 2)[2], f"  ({result['seconds']:.1f} s, {result['cpu']:.1f} s CPU, "
              f"reference best {result['best']})", flush=True)
    print(table(results))
    if not args.quick:
        record(summary("choosers.mllsgd", results))


if __name__ == "__main__":
    main()
