"""Ctrl-C at random moments: issue 31's command interrupted as a terminal interrupts it.

    python benchmarks/bench_interrupts.py [--runs N] [--seed S] [--load K]

Each run starts ``fedbound check --all --jobs 2 --only mllsgd.theorem1,hfl.theorem2
--battery 2000 --no-figures --report DIR`` (the issue's command with a battery that runs for
minutes, so that no run finishes before its signal) in a process group of its own, with
SIGINT at its default whatever this script inherited, and sends SIGINT to
the group (what a terminal does on Ctrl-C) at a moment drawn uniformly in [0.2, 6] s after
its start, ``--runs`` times (default 60). ``--load K`` keeps K busy processes running
meanwhile (default 2: the machine loaded as CI's may be). A run is clean when it exits 130
with its one line ``fedbound: interrupted...`` and nothing else on standard error (no
traceback from any of its processes). Goal: every run clean.

Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.load import arguments, busy  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

CPU_ONLY = "it interrupts the fedbound command, whose checks run on the CPU"

COMMAND = ["check", "--all", "--jobs", "2", "--only", "mllsgd.theorem1,hfl.theorem2", "--battery",
           "2000", "--no-figures"]
#: the window of moments, seconds after the start
EARLIEST, LATEST = 0.2, 6.0
#: a run that has not ended this long after its signal is hung (and not clean)
CEILING = 600


def clean(code: int, err: str) -> bool:
    """Whether a run ended as it must: its one line and 130."""
    lines = [line for line in err.splitlines() if line.strip()]
    return code == 130 and len(lines) == 1 and lines[0].startswith("fedbound: interrupted")


def interrupted_run(after: float, report: Path) -> tuple[int, str]:
    """(exit status, standard error) of the command interrupted ``after`` seconds in."""
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", *COMMAND, "--report", str(report)],
                            cwd=ROOT, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        time.sleep(after)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=CEILING)
        return proc.returncode, err
    except subprocess.TimeoutExpired:
        return -1, "hung"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__, 60, CPU_ONLY, argv)
    draw = random.Random(args.seed)
    outcomes = []
    with busy(args.load), tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            after = draw.uniform(EARLIEST, LATEST)
            code, err = interrupted_run(after, Path(tmp) / f"r{i}")
            outcomes.append((after, code, clean(code, err)))
            if not clean(code, err):
                print(f"run {i} at {after:.2f} s: exit {code}\n{err[-2000:]}", file=sys.stderr)
    bad = sum(not ok for _, _, ok in outcomes)
    print(f"{len(outcomes)} runs interrupted {EARLIEST}-{LATEST} s after their start under "
          f"{args.load} busy processes: {sum(c == 130 for _, c, _ in outcomes)} ended 130, {bad} not clean")
    record([figure("interrupts: Ctrl-C runs not ending in one line and 130", bad, "runs",
                   at_most=0),
            figure("interrupts: Ctrl-C runs tried", len(outcomes), "runs")])


if __name__ == "__main__":
    main()
