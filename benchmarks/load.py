"""What the benchmarks that interrupt commands share: their options (``--runs``, ``--seed``,
``--load``, ``--device``) and the busy processes that load the machine meanwhile."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from benchmarks.device import add_device_argument, checked_device


def arguments(doc: str, runs: int, cpu_only: str, argv: list[str] | None) -> argparse.Namespace:
    """The options of a benchmark described by ``doc`` (its module docstring) that makes
    ``runs`` runs by default, on the CPU only (``cpu_only``: why)."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load", type=int, default=2, help="busy processes kept running meanwhile")
    add_device_argument(parser, cpu_only=cpu_only)
    args = parser.parse_args(argv)
    checked_device(parser, args.device, cpu_only=cpu_only)
    return args


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """``processes`` processes spinning for the duration of the block (the machine loaded as
    CI's may be), ended with it."""
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for p in load:
            p.kill()
            p.wait()
