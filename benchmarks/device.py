"""``--device`` for every benchmark script (issue 18, item 5).

A script that times the simulators runs them on the device given (the per-worker loops,
the hand-fused references and the official loop stay on the CPU, as written); its figures
for a device other than the CPU are named with the device (``afl.cuda.loop_over_...``), so
that a GPU run never overwrites a CPU figure. A script that measures something without a
device (numpy bound evaluation, imports, whole commands, the report) takes ``--device cpu``
only, and says why for any other. Importing this module does not import torch: the startup
benchmark times imports.
"""

from __future__ import annotations

import argparse


def add_device_argument(parser: argparse.ArgumentParser, *, cpu_only: str | None = None) -> None:
    """``--device`` (default cpu); ``cpu_only``: why this script measures on the CPU only."""
    where = f"cpu only: {cpu_only}" if cpu_only else "where the simulators run: cpu, cuda, cuda:1, ..."
    parser.add_argument("--device", default="cpu", help=where)


def checked_device(parser: argparse.ArgumentParser, device: str, *, cpu_only: str | None = None) -> str:
    """``device`` if this script can measure there, else the parser's usage error (exit 2)
    naming the device and the reason: a device this script does not measure on, a name
    torch does not know, or CUDA on a machine without it."""
    if device == "cpu":
        return device
    if cpu_only:
        parser.error(f"--device {device}: this benchmark measures on the CPU only ({cpu_only})")
    from fedbound.sim.problems import checked_device as torch_device

    try:
        kind = torch_device(device).type
    except ValueError as e:
        parser.error(f"--device {device}: {str(e).split(': ', 1)[1]}")
    if kind not in ("cpu", "cuda"):
        parser.error(f"--device {device}: the simulators are measured on cpu or cuda only")
    return device


def suffix(device: str) -> str:
    """The part of a figure's name that says where it was measured: '' on the CPU."""
    return "" if device == "cpu" else f".{device.replace(':', '')}"
