"""Evidence for the TDCD chooser (Q, eta): on the paper's latency model, t_Q = 3 t_comm + Q t_comp
(Das et al. 2022, Section 5.2), does each answer (certified per variant, calibrated,
simulated) reach epsilon as fast as the best configuration of an independent paired
reference search?

    python benchmarks/bench_choosers_tdcd.py [--quick] [--replicas 32] [--device cpu]

Scenarios: t_comm / t_comp in {1, 10, 100, 1000} (t_comp = 1) on tdcd.theorem1's default
scenario (logistic regression, 6 features in 2 silos of K = (2, 3) clients) and on the same
layout with the squared loss (least squares): 8 scenarios, metric the wall-clock time until
the running left side of (15) is at most epsilon (the chooser's default; epsilon a quarter of
||grad L(theta^0)||^2). For each: the chooser's report with its defaults (timed, one torch
thread; wall clock and CPU), then the reference (``benchmarks/regret.py``: the chooser's grid
and the midpoints, every answer, ``--replicas`` common seeds); each answer's paired regret
against the reference's best with its 95% interval. Recorded in benchmarks/results.json: per
scenario and answer the regret, its half-width and whether it passes, the seconds (goal
<= 10 s), and the pass rates (goals: calibrated >= 0.9, simulated 1; certified reported).
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
from fedbound.verify.papers.tdcd import QEta, Theorem1  # noqa: E402

RATIOS = (1.0, 10.0, 100.0, 1000.0)
LOSSES = ("logistic", "squared")
QUICK = [("logistic", 10.0), ("squared", 100.0)]
CPU_ONLY = "the chooser runs its simulations on the CPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=32, help="replicas of the reference")
    ap.add_argument("--quick", action="store_true", help="two scenarios only")
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    torch.set_num_threads(1)
    scenarios = QUICK if args.quick else [(loss, r) for r in RATIOS for loss in LOSSES]
    results = []
    for loss, ratio in scenarios:
        name = f"{loss}_ratio{ratio:g}"
        scenario = Theorem1.default.replace(loss=loss)
        result = evaluate(QEta(t_comm=ratio, t_comp=1.0, scenario=scenario), name, args.replicas)
        results.append(result)
        record(figures(f"choosers.tdcd.{name}", result))  # at once: a cut run keeps it
        print(table([result]).split("\n", 2)[2], f"  ({result['seconds']:.1f} s, {result['cpu']:.1f} s CPU, "
              f"reference best {result['best']})", flush=True)
    print(table(results))
    if not args.quick:
        record(summary("choosers.tdcd", results))


if __name__ == "__main__":
    main()
