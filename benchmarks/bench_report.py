"""How long writing the report of ``fedbound check --all`` takes beside its checks, and what
``--jobs 2`` gains.

    python benchmarks/bench_report.py [--only KEYS] [--battery 2]

Measurements of the whole suite (every result, its battery and its witnesses), in one run:

* ``--jobs 1``, without figures: the checks (``verify.suite.run`` in this process), then the
  report (``report.write``);
* ``--jobs 1``, with figures (what ``check --all`` does by default): the same checks with
  each figure drawn by its check from its own measurement (``suite.tasks(...,
  figures=True)``), then the report, which writes them. The report's cost is the extra
  time of the checks that draw plus the writing;
* ``--jobs 2``, with figures: the checks in a pool of two processes, then the report;
* the ratio of the ``--jobs 1`` and ``--jobs 2`` wall times of the whole run with figures.

Recorded in benchmarks/results.json: each time, the report's share of the checks' time
(goal: at most 0.1) and the speed-up of two jobs (goal: at least 1.2 on two cores). The
runs with and without figures follow each other, so on a noisy machine the difference
between them carries that noise.
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


def serial(keys, battery: int, tmp: Path) -> dict[str, float]:
    plain, checks = timed(lambda: suite.run(suite.tasks(keys, battery=battery)))
    _, write_plain = timed(lambda: report.write(plain, tmp / "plain", seed=0, battery=battery))
    drawn, checks_drawing = timed(lambda: suite.run(suite.tasks(keys, battery=battery,
                                                                  figures=True)))
    _, write_drawn = timed(lambda: report.write(drawn, tmp / "drawn", seed=0, battery=battery))
    return {"checks": checks, "write_no_figures": write_plain,
            "figures": checks_drawing - checks + write_drawn,
            "total": checks_drawing + write_drawn}


def pooled(keys, battery: int, tmp: Path, jobs: int) -> dict[str, float]:
    t0 = time.perf_counter()
    with executor(jobs=jobs) as pool:
        rows = suite.run(suite.tasks(keys, battery=battery, figures=True), executor=pool)
    t1 = time.perf_counter()
    report.write(rows, tmp / "pooled", seed=0, battery=battery)
    t2 = time.perf_counter()
    return {"checks": t1 - t0, "write": t2 - t1, "total": t2 - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated keys or papers (default: every result)")
    ap.add_argument("--battery", type=int, default=2)
    args = ap.parse_args()
    keys = suite.select(args.only)
    with tempfile.TemporaryDirectory() as d:
        one = serial(keys, args.battery, Path(d))
        two = pooled(keys, args.battery, Path(d), 2)
    print(f"jobs 1: {one}\njobs 2: {two}")
    record([
        figure("report.jobs1.checks_s", one["checks"], "s"),
        figure("report.jobs1.write_no_figures_share", one["write_no_figures"] / one["checks"],
               "x checks", at_most=0.1),
        figure("report.jobs1.write_figures_share", one["figures"] / one["checks"], "x checks",
               at_most=0.1),
        figure("report.jobs2.total_s", two["total"], "s"),
        figure("report.jobs2.write_share", two["write"] / two["checks"], "x checks",
               at_most=0.1),
        figure("report.jobs2_speedup", one["total"] / two["total"], "x (jobs 1 / jobs 2)",
               at_least=1.2),
    ])


if __name__ == "__main__":
    main()
