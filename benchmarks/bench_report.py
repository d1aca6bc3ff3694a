"""How long writing the report of ``fedbound check --all`` takes beside its checks, what its
figures cost, and what ``--jobs 2`` gains.

    python benchmarks/bench_report.py [--only KEYS] [--battery 2] [--device cpu]

Measurements of the whole suite (every result, its battery and its witnesses). Issue 16 asks
two things of the report: writing it takes under 10% of the checks' time, and its figures
render in parallel with ``--jobs`` or are skipped with ``--no-figures``. So:

* ``--jobs 1``: every check in this process (``verify.suite.run``), each figure drawn by its
  check from its own measurement (``suite.tasks(..., figures=True)``). What the figures add
  to a check is timed where it happens: importing matplotlib, the adapter's drawing
  (``Adapter._plot``) and the layout and PNG (``suite.png``); the checks' own time is the
  run less the figures; writing the pages is ``report.write``;
* the default ``--jobs`` of ``check --all`` (``verify.cli``: every core, up to 8), with
  figures and with ``--no-figures``: the checks in a pool as the command runs them (the
  driver builds the report's formulas, ``report.prepare``, while the pool's fork server
  starts: that time counts with the checks'), then the report;
* ``--jobs 2`` with figures (the same run where the default is 2 jobs).

Recorded in benchmarks/results.json: the share of the checks' time that writing the pages
takes, at one job and at the default jobs (goal: at most 0.1 each); the figures' share of
the checks' time at one job, and their overhead at the default jobs (the wall time with
figures over the wall time with ``--no-figures``, less 1), as measured, without a goal; and
the speed-up of two jobs over one, with figures (goal: at least 1.2 on two cores).
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
from fedbound.verify import adapter_for, report, suite  # noqa: E402
from fedbound.verify.cli.check import suite_jobs as _suite_jobs  # noqa: E402
from fedbound.verify.pool import executor  # noqa: E402


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


def pooled(keys, battery: int, tmp: Path, jobs: int, *, figures: bool) -> dict[str, float]:
    """As ``check --all`` runs a pool (``verify.cli``): the fork server imports matplotlib
    too where the workers draw figures, the driver builds the report's formulas while it
    starts, the workers plan shares of the checks; then the report is written."""
    t0 = time.perf_counter()
    with executor(jobs=jobs, preload=("fedbound.verify.plots",) if figures else ()) as pool:
        report.prepare(keys)
        todo = suite.shares(keys, battery=battery, figures=figures, jobs=jobs, executor=pool)
        rows = suite.run_shares(todo, executor=pool)
    t1 = time.perf_counter()
    report.write(rows, tmp / f"pooled{jobs}{'' if figures else '_no_figures'}", seed=0,
                 battery=battery)
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
    jobs = _suite_jobs(None, keys)
    with tempfile.TemporaryDirectory() as d:
        one = serial(keys, args.battery, Path(d))
        default = pooled(keys, args.battery, Path(d), jobs, figures=True)
        bare = pooled(keys, args.battery, Path(d), jobs, figures=False)
        two = default if jobs == 2 else pooled(keys, args.battery, Path(d), 2, figures=True)
    print(f"jobs 1: {one}\njobs {jobs} (default): {default}\njobs {jobs}, --no-figures: {bare}"
          f"\njobs 2: {two}")
    record([
        figure("report.jobs1.checks_s", one["checks"], "s"),
        figure("report.jobs1.write_share", one["write"] / one["checks"], "x checks",
               at_most=0.1),
        figure("report.jobs1.figures_share", one["figures"] / one["checks"], "x checks"),
        figure("report.default_jobs.write_share", default["write"] / default["checks"],
               "x checks", at_most=0.1),
        figure("report.default_jobs.figures_overhead", default["total"] / bare["total"] - 1,
               "x (with / without figures - 1)"),
        figure("report.jobs2.total_s", two["total"], "s"),
        figure("report.jobs2_speedup", one["total"] / two["total"], "x (jobs 1 / jobs 2)",
               at_least=1.2),
    ])


if __name__ == "__main__":
    main()
