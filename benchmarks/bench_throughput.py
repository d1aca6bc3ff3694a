"""Search and check throughput (issue 18, item 4): the whole commands, as a user runs them.

    python benchmarks/bench_throughput.py [--repeats 3] [--device cpu]

Each command runs as a subprocess of the same Python (``sys.executable -m fedbound``),
the commands interleaved (``benchmarks.timing.interleaved``: one untimed round first, which
also fills the cache of generated functions), ``--repeats`` rounds; a figure is the median:

* ``fedbound check --all --no-figures`` (the report's pages written, its figures not: the
  report is measured by ``bench_report.py``) with ``--jobs 1`` and ``--jobs 2``: goal at
  most 15 s with one job, and two jobs at least 1.6x faster (the median ratio of the
  rounds);
* ``fedbound search mllsgd.theorem1 --budget 400 --seed 1``: goal at most 30 s.

With one job a check still uses torch's intra-op threads (both cores of a 2-core machine
on its larger tensors: they save about 6% of its wall time, for a quarter more CPU); with
two jobs each worker runs one thread, forked from a fork server that has imported torch
and the papers (``verify.pool.worker_context``), and the driver builds the report's
formulas while the server imports. Beside the wall times (each command's own, up to its
exit), the CPU seconds of each command and of every process it started, its fork server
and workers included (this process adopts their orphans, Linux's
``PR_SET_CHILD_SUBREAPER``, and reaps them: the cores' work, which depends far less on
what else the machine runs), and the load average before and after (on a shared machine,
read the wall times with it). Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402

#: prctl's option that makes a process the reaper of its descendants' orphans (Linux)
PR_SET_CHILD_SUBREAPER = 36


def _adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans (Linux), so that a command's
    fork server (and the workers it forked, which it reaps), and its resource tracker,
    which exit a moment after the command, are reaped here and their CPU time counts in
    this process's ``RUSAGE_CHILDREN``. False where the system has no such call (the CPU
    seconds are then the command's and its direct children's)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap() -> None:
    """Wait for every child this process still has (the orphans it adopted)."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def _runner(argv: tuple[str, ...], cwd: Path, wall: list[float], cpu: list[float]):
    """A call of the command; each call appends to ``wall`` the command's wall time (not
    the exit of what it leaves behind) and to ``cpu`` the CPU seconds (user and system) of
    the command and every process it started (its workers, and those of its fork server)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "fedbound", *argv], check=True, env=env,
                       cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall.append(time.perf_counter() - start)
        _reap()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return run


CPU_ONLY = "it times whole fedbound commands, which run on the CPU"
NAMES = ("check --all, 1 job", "check --all, 2 jobs", "search")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    wall: dict[str, list[float]] = {name: [] for name in NAMES}
    cpu: dict[str, list[float]] = {name: [] for name in NAMES}
    every_process = _adopt_orphans()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        commands = {
            NAMES[jobs - 1]: _runner(("check", "--all", "--no-figures", "--jobs", str(jobs),
                                      "--force", "--report", f"report{jobs}"), Path(d),
                                     wall[NAMES[jobs - 1]], cpu[NAMES[jobs - 1]])
            for jobs in (1, 2)}
        commands["search"] = _runner(("search", "mllsgd.theorem1", "--budget", "400", "--seed", "1"),
                                     Path(d), wall["search"], cpu["search"])
        interleaved(commands, args.repeats)
    # not the warm-up round
    times, cpu = ({name: ts[1:] for name, ts in got.items()} for got in (wall, cpu))
    one, two = NAMES[:2]
    print("wall s", {name: [round(t, 2) for t in ts] for name, ts in times.items()})
    print("CPU s ", {name: [round(t, 2) for t in ts] for name, ts in cpu.items()},
          "" if every_process else "(the commands' and their children's only)")
    print("load average (1, 5, 15 min) before:", load, "after:", os.getloadavg(),
          f"on {os.cpu_count()} cores")
    record([
        figure("throughput.check_all_no_figures.jobs1_s", statistics.median(times[one]), "s",
               at_most=15),
        figure("throughput.check_all_no_figures.jobs2_s", statistics.median(times[two]), "s"),
        figure("throughput.check_all_no_figures.jobs1_cpu_s", statistics.median(cpu[one]), "s"),
        figure("throughput.check_all_no_figures.jobs2_cpu_s", statistics.median(cpu[two]), "s"),
        figure("throughput.check_all_no_figures.jobs1_over_jobs2", median_ratio(times, one, two),
               "x", at_least=1.6),
        figure("throughput.search_mllsgd_theorem1_budget400_s", statistics.median(times["search"]),
               "s", at_most=30),
    ])


if __name__ == "__main__":
    main()
