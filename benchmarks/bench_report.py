"""How long writing the report of ``fedbound check --all`` takes beside its checks, and what
``--jobs 2`` gains.

    python benchmarks/bench_report.py [--only KEYS] [--battery 2]

Three measurements of the whole suite (every result, its battery and its witnesses):

* ``--jobs 1``: the checks (``verify.suite.run`` in this process), then the report without
  figures (``report.write(..., figures=False)``), then with its figures drawn in this
  process after the checks (what ``check --all`` does with one job);
* ``--jobs 2``: the checks in a pool of two processes with the figures drawn in the same
  pool beside them (``report.start_figures``, as ``check --all --jobs 2`` does), then the
  report, which only waits for figures still being drawn and writes the pages;
* the ratio of the ``--jobs 1`` and ``--jobs 2`` wall times of the whole run with figures.

Recorded in benchmarks/results.json: each time, the report's share of the checks' time
(goal: at most 0.1 without figures and with figures drawn in the pool) and the speed-up of
two jobs (goal: at least 1.2 on two cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.results import figure, record  # noqa: E402
from verify import report, suite  # noqa: E402
from verify.sweep import executor  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def serial(todo, keys, tmp: Path) -> dict[str, float]:
    rows, checks = timed(lambda: suite.run(todo))
    _, plain = timed(lambda: report.write(rows, tmp / "plain", seed=0, battery=0, figures=False))
    _, drawn = timed(lambda: report.write(rows, tmp / "drawn", seed=0, battery=0))
    return {"checks": checks, "write_no_figures": plain, "write_figures": drawn}


def pooled(todo, keys, tmp: Path, jobs: int) -> dict[str, float]:
    t0 = time.perf_counter()
    with executor(jobs=jobs) as pool:
        started = report.start_figures(keys, pool)
        rows = suite.run(todo, executor=pool)
        t1 = time.perf_counter()
        report.write(rows, tmp / "pooled", seed=0, battery=0, started=started)
    t2 = time.perf_counter()
    return {"checks": t1 - t0, "write_figures": t2 - t1, "total": t2 - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated keys or papers (default: every result)")
    ap.add_argument("--battery", type=int, default=2)
    args = ap.parse_args()
    keys = suite.select(args.only)
    todo = suite.tasks(keys, battery=args.battery)
    with tempfile.TemporaryDirectory() as d:
        one = serial(todo, keys, Path(d))
        two = pooled(todo, keys, Path(d), 2)
    total_one = one["checks"] + one["write_figures"]
    print(f"jobs 1: {one}\njobs 2: {two}")
    record([
        figure("report.jobs1.checks_s", one["checks"], "s"),
        figure("report.jobs1.write_no_figures_share", one["write_no_figures"] / one["checks"],
               "x checks", at_most=0.1),
        figure("report.jobs1.write_figures_share", one["write_figures"] / one["checks"], "x checks"),
        figure("report.jobs2.total_s", two["total"], "s"),
        figure("report.jobs2.write_share", two["write_figures"] / two["checks"], "x checks",
               at_most=0.1),
        figure("report.jobs2_speedup", total_one / two["total"], "x (jobs 1 / jobs 2)",
               at_least=1.2),
    ])


if __name__ == "__main__":
    main()
