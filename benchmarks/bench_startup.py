"""Start-up: how long the light commands take in a fresh process, against importing numpy.

    python benchmarks/bench_startup.py [--repeats N] [--device cpu]

Each command runs as a subprocess of the same Python (``sys.executable``), the runs of all
commands interleaved (one round runs each once, in turn; one untimed round first, which also
fills the cache of generated functions, ``bounds.compiled``), ``--repeats`` rounds (default
7, at least 5). A figure is the median over rounds of the command's wall time over that
round's ``python -c "import numpy"``. Goals (issue 15): ``from fedbound import bounds`` within 2x,
``fedbound list`` and ``fedbound bound mllsgd.theorem1 --params ...`` within 3x; ``step``
and ``scenario`` are reported beside them without a goal.

Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402

PARAMS = json.dumps({"L": 1, "beta": 0, "sigma": 1, "Delta": 1, "eta": 0.001, "K": 64, "q": 2,
                     "tau": 4, "zeta": 0.5, "a": [0.5, 0.5], "p": [1, 0.9]})
CLI = ("-m", "fedbound")
#: name -> (python arguments, goal: at most this many times import numpy, or None)
COMMANDS = {
    "import numpy": (("-c", "import numpy"), None),
    "from fedbound import bounds": (("-c", "from fedbound import bounds"), 2.0),
    "fedbound list": ((*CLI, "list"), 3.0),
    "fedbound bound": ((*CLI, "bound", "mllsgd.theorem1", "--params", PARAMS), 3.0),
    "fedbound step": ((*CLI, "step", "mllsgd.theorem1", "--params", json.dumps(
        {k: v for k, v in json.loads(PARAMS).items() if k != "eta"})), None),
    "fedbound scenario": ((*CLI, "scenario", "mllsgd.theorem1"), None),
}


def _runner(args: tuple[str, ...]):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run():
        subprocess.run([sys.executable, *args], check=True, env=env, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return run


CPU_ONLY = "it times imports and commands, not a device"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    if args.repeats < 5:
        ap.error("--repeats must be at least 5")
    times = interleaved({name: _runner(a) for name, (a, _) in COMMANDS.items()}, args.repeats)
    base = sorted(times["import numpy"])[len(times["import numpy"]) // 2]
    entries = [figure("startup: python -c 'import numpy' (s, median)", base, "s")]
    for name, (_, goal) in COMMANDS.items():
        if name != "import numpy":
            entries.append(figure(f"startup: {name} / import numpy", median_ratio(
                times, name, "import numpy"), "x", at_most=goal))
    record(entries)


if __name__ == "__main__":
    main()
