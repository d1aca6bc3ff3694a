"""Limits before bytes: the peak memory of a command refusing a gzip bomb (issue 42, item 5).

    python benchmarks/bench_inflate.py [--runs N]

The issue's file: an MNIST images file whose IDX header declares 300 images of 28x28
(235 KB), followed by zeros, gzipped: 603 KB that inflate to 620 MB. ``fedbound choose hfl
--data mnist --data-dir DIR ...`` must refuse it (exit 2: more bytes than the header
declares); it peaked at 1.46 GB before its refusal, the file inflated whole. The reference
is the same command on a plain file cut short (refused by its size, nothing inflated): the
command's own cost (the interpreter, torch, the chooser). Each is run ``--runs`` times
(default 3) in a fresh process; the peak resident memory (``ru_maxrss``) is the largest.
Goal: the bomb's refusal peaks under 300 MB.

Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

CPU_ONLY = "it measures the memory of a command that reads files"
#: the issue's file: 300 images of 28x28 declared, 620 MB inflated
SHAPE, INFLATED = (300, 28, 28), 37 << 24
COMMAND = ["choose", "hfl", "--data", "mnist", "--sizes", "2,2", "--delays",
           "0.01,0.85,0.001,0.085,4,2,0.4,0.2", "--T", "100", "--method", "bound", "--data-dir"]


def header(shape) -> bytes:
    return bytes([0, 0, 8, len(shape)]) + b"".join(n.to_bytes(4, "big") for n in shape)


def write_bomb(directory: Path) -> int:
    """The issue's gzip in ``directory`` (and its labels); its size in bytes."""
    path = directory / "train-images-idx3-ubyte.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:
        f.write(header(SHAPE))
        zeros = bytes(1 << 24)
        for _ in range(INFLATED >> 24):
            f.write(zeros)
    (directory / "train-labels-idx1-ubyte").write_bytes(header(SHAPE[:1]) + bytes(SHAPE[0]))
    return path.stat().st_size


def write_cut_short(directory: Path) -> None:
    """A plain images file cut short, and its labels: refused by its size."""
    count = SHAPE[0] * SHAPE[1] * SHAPE[2]
    (directory / "train-images-idx3-ubyte").write_bytes(header(SHAPE) + bytes(count - 5))
    (directory / "train-labels-idx1-ubyte").write_bytes(header(SHAPE[:1]) + bytes(SHAPE[0]))


def peak(directory: Path) -> tuple[int, float, str]:
    """(exit status, peak resident memory in MB, the first line) of the command on
    ``directory``, in a fresh process."""
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", *COMMAND, str(directory)], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss / 1024, err.splitlines()[0] if err else ""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    add_device_argument(parser, cpu_only=CPU_ONLY)
    args = parser.parse_args(argv)
    checked_device(parser, args.device, cpu_only=CPU_ONLY)
    with tempfile.TemporaryDirectory() as tmp:
        bomb, short = Path(tmp) / "bomb", Path(tmp) / "short"
        bomb.mkdir()
        short.mkdir()
        size = write_bomb(bomb)
        write_cut_short(short)
        bombs = [peak(bomb) for _ in range(args.runs)]
        shorts = [peak(short) for _ in range(args.runs)]
    for name, runs in (("gzip bomb", bombs), ("plain file cut short", shorts)):
        for code, mb, line in runs:
            print(f"{name}: exit {code}, peak {mb:.0f} MB: {line[:160]}")
    refused = all(code == 2 for code, _, _ in bombs + shorts)
    top, base = max(mb for _, mb, _ in bombs), max(mb for _, mb, _ in shorts)
    print(f"a {size / 1e3:.0f} KB gzip inflating to {INFLATED / 1e6:.0f} MB: refused at a peak of "
          f"{top:.0f} MB (the same command on a plain file cut short: {base:.0f} MB)")
    record([figure("inflate: peak memory refusing a 603 KB gzip that inflates to 620 MB",
                   top if refused else float("inf"), "MB", at_most=300),
            figure("inflate: peak memory refusing a plain file cut short (the command's own)",
                   base, "MB"),
            figure("inflate: the gzip refusal's peak over the plain one's", top / base, "ratio",
                   at_most=1.25)])


if __name__ == "__main__":
    main()
