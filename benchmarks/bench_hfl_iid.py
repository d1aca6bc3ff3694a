"""Evidence for the iid variant of HFL Theorem 2 (derived by fedbound, not published;
bounds/derivations/hfl_iid.md, section 7): the S it chooses on the delay parameters of
Ali & Arafa 2025, Fig. 7a, against the simulation of every S of the grid.

    python benchmarks/bench_hfl_iid.py [--replicas 32] [--device cpu]

Scenario (issue 28): Fig. 7a's delays, two groups of 15, T = 2000, L = 1, Delta = 0.1,
G = sigma = 30, alpha = 0.05; the grid S in {0, 1.5, 2, 3, 4, 5, 7, 10, 15, 20}. The bound's
choice is ``bounds.choose_sync_time(..., variant=...)`` (plug-in expected bound) for iid and
for the published proof variant and refined; the simulation is the sync-time chooser's
(``verify.papers.hfl.SyncTime.simulate``: a quadratic with these constants, every replica on
its own delay path, the same seeds for every S). Recorded in benchmarks/results.json: the S
each variant picks, and the simulated left-hand side of Theorem 2 and final loss gap at
iid's S and at S = 0, relative to the best S of the grid (goal for iid: its S beats S = 0).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

DELAYS = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]
GRID = [0, 1.5, 2, 3, 4, 5, 7, 10, 15, 20]
CONSTANTS = dict(alpha=0.05, L=1.0, G=30.0, sigma=30.0, Delta=0.1, sizes=[15, 15])
T = 2000
VARIANTS = ("iid", "proof", "refined")
CPU_ONLY = "the sync-time chooser simulates on the CPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, default=32)
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    import torch

    from fedbound import bounds
    from fedbound.bounds import delays
    from fedbound.verify.papers.hfl import SyncTime

    torch.set_num_threads(1)
    model = delays.DelayModel.linear(DELAYS, CONSTANTS["sizes"])
    chosen = {v: bounds.choose_sync_time("hfl.theorem2", model=model, T=T, variant=v, S_grid=GRID,
                                         draws=1000, **CONSTANTS).best_S for v in VARIANTS}
    t0 = time.perf_counter()
    alpha = CONSTANTS["alpha"]
    rest = {k: v for k, v in CONSTANTS.items() if k != "alpha"}
    grid = [{"S": float(S), "alpha": alpha} for S in GRID]
    measured = {}
    for metric in ("lhs", "loss"):  # the same seeds and delay paths for both metrics
        chooser = SyncTime(delays=DELAYS, T=T, metric=metric, alpha=alpha, seed=0, **rest)
        sims = chooser.simulate(grid, args.replicas, paired=False)
        measured[metric] = {S: o.value for S, o in zip(GRID, sims, strict=True)}
    seconds = time.perf_counter() - t0
    lhs, loss = measured["lhs"], measured["loss"]
    print("| S | " + " | ".join(f"{S:g}" for S in GRID) + " |")
    print("|---" * (len(GRID) + 1) + "|")
    print("| simulated LHS | " + " | ".join(f"{lhs[S]:.3f}" for S in GRID) + " |")
    print("| final loss gap | " + " | ".join(f"{loss[S]:.3f}" for S in GRID) + " |")
    print(f"chosen S: {chosen}; simulation {seconds:.0f} s")
    best_lhs, best_loss = min(lhs.values()), min(loss.values())
    S = chosen["iid"]
    entries = [figure(f"hfl_iid.fig7a.chosen_S.{v}", chosen[v], "S") for v in VARIANTS]
    entries += [
        figure("hfl_iid.fig7a.lhs_at_iid_S_over_best", lhs[S] / best_lhs, "ratio"),
        figure("hfl_iid.fig7a.lhs_at_S0_over_best", lhs[0] / best_lhs, "ratio"),
        figure("hfl_iid.fig7a.final_loss_at_iid_S_over_best", loss[S] / best_loss, "ratio"),
        figure("hfl_iid.fig7a.final_loss_at_S0_over_best", loss[0] / best_loss, "ratio"),
        figure("hfl_iid.fig7a.lhs_at_iid_S_over_S0", lhs[S] / lhs[0], "ratio", at_most=1.0),
        figure("hfl_iid.fig7a.simulation_seconds", seconds, "s")]
    record(entries)


if __name__ == "__main__":
    main()
