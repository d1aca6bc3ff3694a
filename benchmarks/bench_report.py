"""How long writing the report of ``fedbound check --all`` takes beside its checks, and what
``--jobs 2`` gains.

    python benchmarks/bench_report.py [--only KEYS] [--battery 2] [--device cpu]

Measurements of the whole suite (every result, its battery and its witnesses), in one run:

* ``--jobs 1``: every check in this process
  (``verify.suite.run``), each figure drawn by its check from its own measurement
  (``suite.tasks(..., figures=True)``). What the figures add to a check is timed where it
  happens: importing matplotlib, the adapter's drawing (``Adapter._plot``) and the layout
  and PNG (``suite.png``); the report's cost is that plus writing the pages
  (``report.write``), against the checks' own time (the run less the figures);
* ``--jobs 2``, with figures (what ``check --all`` does by default on two cores: a pool of
  every core, up to 8): the checks in a pool of two processes, then the report;
* the ratio of the ``--jobs 1`` and ``--jobs 2`` wall times of the whole run with figures.

Recorded in benchmarks/results.json: each time, the report's share of the checks' time
(goal: at most 0.1) and the speed-up of two jobs (goal: at least 1.2 on two cores).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from verify import adapter_for, report, suite  # noqa: E402
from verify.sweep import executor  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def serial(keys, battery: int, tmp: Path) -> dict[str, float]:
    spent = {"figures": 0.0}

    def timing(fn):
        def timed_fn(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent["figures"] += time.perf_counter() - t0
        return timed_fn

    todo = suite.tasks(keys, battery=battery, figures=True)
    for key in keys:  # the instance's method: each adapter's own _plot, timed
        ad = adapter_for(key)
        ad._plot = timing(ad._plot)
    suite.png = timing(suite.png)
    timing(importlib.import_module)("matplotlib.figure")
    rows, run = timed(lambda: suite.run(todo))
    _, write = timed(lambda: report.write(rows, tmp / "serial", seed=0, battery=battery))
    return {"checks": run - spent["figures"], "figures": spent["figures"], "write": write,
            "total": run + write}


def pooled(keys, battery: int, tmp: Path, jobs: int) -> dict[str, float]:
    t0 = time.perf_counter()
    with executor(jobs=jobs) as pool:
        rows = suite.run(suite.tasks(keys, battery=battery, figures=True), executor=pool)
    t1 = time.perf_counter()
    report.write(rows, tmp / "pooled", seed=0, battery=battery)
    t2 = time.perf_counter()
    return {"checks": t1 - t0, "write": t2 - t1, "total": t2 - t0}


CPU_ONLY = "the report's checks run on the CPU"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated keys or papers (default: every result)")
    ap.add_argument("--battery", type=int, default=2)
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    keys = suite.select(args.only)
    with tempfile.TemporaryDirectory() as d:
        one = serial(keys, args.battery, Path(d))
        two = pooled(keys, args.battery, Path(d), 2)
    print(f"jobs 1: {one}\njobs 2: {two}")
    record([
        figure("report.jobs1.checks_s", one["checks"], "s"),
        figure("report.jobs1.figures_share", one["figures"] / one["checks"], "x checks"),
        figure("report.jobs1.write_share", one["write"] / one["checks"], "x checks"),
        figure("report.jobs1.report_share", (one["figures"] + one["write"]) / one["checks"],
               "x checks", at_most=0.1),
        figure("report.jobs2.total_s", two["total"], "s"),
        figure("report.jobs2.write_share", two["write"] / two["checks"], "x checks",
               at_most=0.1),
        figure("report.jobs2_speedup", one["total"] / two["total"], "x (jobs 1 / jobs 2)",
               at_least=1.2),
    ])


if __name__ == "__main__":
    main()
