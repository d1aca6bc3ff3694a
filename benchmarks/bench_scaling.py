"""Cost per worker-step and peak memory of each simulator from N = 1000 to N = 100,000
workers (benchmarks/fused_*.py workloads; MLL-SGD's data set grows with N).

    python benchmarks/bench_scaling.py [--quick] [--device cpu]

Every size runs in its own process (one intra-op thread), so that its peak resident memory
(``resource.getrusage``) is its own: the figure is the growth of the peak over the
process's resident memory before the workload is built, per worker. The run is timed
after one untimed run (median of seven runs, three above N = 10,000). Goals: the cost per
worker-step at the largest size within 1.5x of the cost at N = 1000, and the memory per
worker at the largest size within 1.5x of the memory per worker at the size before it (no
worse than linear in N: the fixed cost of a process makes the ratio fall below 1 where the
state is small).
The cost ratio between the two largest sizes is reported too, without a goal: where the
working set of the smallest size fits in the processor's caches and that of the larger
ones does not, the first ratio measures the caches as much as the code. ``--quick``
stops at N = 10,000. Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.references import SIMULATORS  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

GOAL = 1.5


def child(name: str, N: int, device: str) -> dict:
    """Seconds per worker-step and peak-memory growth in bytes of one size, in this process
    (host memory: on another device the figure says what the run keeps on the host)."""
    import torch

    from benchmarks.references import pair

    torch.set_num_threads(1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    runs = pair(name, N, device=device)
    runs.simulator(1)
    seconds = []
    for _ in range(3 if N > 10_000 else 7):
        start = time.perf_counter()
        runs.simulator(1)
        seconds.append(time.perf_counter() - start)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"step": statistics.median(seconds) / runs.worker_steps, "memory": peak - before}


def in_subprocess(name: str, N: int, device: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--device", device, "--child", name, str(N)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1000 and 10,000 only")
    add_device_argument(parser)
    parser.add_argument("--child", nargs=2, metavar=("SIMULATOR", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    checked_device(parser, args.device)
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.device)))
        return
    sizes = (1000, 10_000) if args.quick else (1000, 10_000, 100_000)
    print(f"{'simulator':>9} {'N':>7} | {'us / worker-step':>16} | {'bytes / worker':>14}")
    entries = []
    for name in SIMULATORS:
        rows = {N: in_subprocess(name, N, args.device) for N in sizes}
        for N, row in rows.items():
            print(f"{name:>9} {N:>7} | {row['step'] * 1e6:>16.4f} | {row['memory'] / N:>14.0f}")
        top, previous = sizes[-1], sizes[-2]
        where = suffix(args.device)
        entries.append(figure(f"{name}{where}.step_cost.N{top}_over_N{sizes[0]}",
                              rows[top]["step"] / rows[sizes[0]]["step"], "ratio", at_most=GOAL))
        entries.append(figure(f"{name}{where}.step_cost.N{top}_over_N{previous}",
                              rows[top]["step"] / rows[previous]["step"], "ratio"))
        entries.append(figure(f"{name}{where}.memory_per_worker.N{top}_over_N{previous}",
                              (rows[top]["memory"] / top) / (rows[previous]["memory"] / previous),
                              "ratio", at_most=GOAL))
        entries.append(figure(f"{name}{where}.memory_per_worker.N{top}", rows[top]["memory"] / top,
                              "bytes"))
    record(entries)


if __name__ == "__main__":
    main()
