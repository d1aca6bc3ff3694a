"""Each simulator against its hand-fused reference (benchmarks/fused_*.py) at N = 10, 100,
1000 and 10,000 workers: the same workload, the same draws, recordings equal to 1e-10.

    python benchmarks/bench_fused.py [--quick] [--device cpu]

One intra-op thread on both sides; the two runs alternate (benchmarks.timing.interleaved)
and the figure is the median over the rounds of fedbound's time over the reference's, so
that a noisy machine loads both alike. Goal: at most 1.2 at every size. Writes the
figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.references import SIMULATORS, pair  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402

GOAL = 1.2
CPU_ONLY = "the hand-fused references are written for the CPU"
TOLERANCE = 1e-10
REPEATS = {10: 101, 100: 51, 1000: 15, 10_000: 5}


def measure(name: str, N: int, repeats: int) -> tuple[float, float, float]:
    """(median ratio, fedbound's median seconds, the reference's) after checking that the
    two agree to 1e-10."""
    runs = pair(name, N)
    gap = runs.difference()
    if gap > TOLERANCE:
        raise AssertionError(f"{name} at N = {N}: simulator and reference differ by {gap:.3g}")
    times = interleaved({"fedbound": lambda: runs.simulator(1),
                         "fused": lambda: runs.reference(1)}, repeats)
    return (median_ratio(times, "fedbound", "fused"), statistics.median(times["fedbound"]),
            statistics.median(times["fused"]))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 10 and 100, few repeats")
    add_device_argument(parser, cpu_only=CPU_ONLY)
    args = parser.parse_args(argv)
    checked_device(parser, args.device, cpu_only=CPU_ONLY)
    torch.set_num_threads(1)
    sizes = (10, 100) if args.quick else tuple(REPEATS)
    print(f"{'simulator':>9} {'N':>6} | {'fedbound ms':>11} | {'fused ms':>9} | ratio (goal <= {GOAL})")
    entries = []
    for name in SIMULATORS:
        for N in sizes:
            repeats = max(3, REPEATS[N] // (3 if args.quick else 1))
            ratio, ours, fused = measure(name, N, repeats)
            print(f"{name:>9} {N:>6} | {ours * 1e3:>11.2f} | {fused * 1e3:>9.2f} | {ratio:.3f}")
            entries.append(figure(f"{name}.fedbound_over_fused.N{N}", ratio, "ratio", at_most=GOAL))
    record(entries)


if __name__ == "__main__":
    main()
