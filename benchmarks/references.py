"""The four simulators beside their hand-fused references (benchmarks/fused_*.py), on the
same workload and the same draws: what benchmarks/bench_fused.py times and
benchmarks/bench_scaling.py scales, and what tests/test_bench_references.py checks.

:func:`pair` gives, for a simulator and a size (workers N), the simulator run and the
reference run as functions of a fresh generator seed, the relative difference of their
recordings, and the number of worker-steps in a run (N times the local iterations the
run loop executes) for costs per worker-step.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fused_afl, fused_hfl, fused_mllsgd, fused_tdcd  # noqa: E402
from fedbound.sim.afl import run_afl  # noqa: E402
from fedbound.sim.hfl import run_hfl  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402
from fedbound.sim.tdcd import run_tdcd  # noqa: E402

SIMULATORS = ("mllsgd", "hfl", "tdcd", "afl")


@dataclass(frozen=True)
class Pair:
    """A simulator run and its reference on one workload; ``seed`` -> result."""

    simulator: Callable[[int], object]
    reference: Callable[[int], dict[str, torch.Tensor]]
    worker_steps: int

    def difference(self, seed: int = 1) -> float:
        """Largest relative difference between the simulator's recordings (replica 0) and
        the reference's on the same seed."""
        trace, ref = self.simulator(seed), self.reference(seed)
        return max(relative_difference(_series(trace, name), value) for name, value in ref.items())


def _series(trace, name: str) -> torch.Tensor:
    value = getattr(trace, name)
    return value[0]


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| / max(|a|, |b|) over the entries (0 where both are 0)."""
    a, b = a.to(torch.float64), b.to(torch.float64)
    scale = torch.maximum(a.abs(), b.abs())
    gap = (a - b).abs()
    return float(torch.where(scale > 0, gap / torch.where(scale > 0, scale, 1.0), 0.0).max())


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def iterations(name: str, N: int) -> int:
    """The run length at N workers: long enough that a run's fixed cost is amortised as it
    is in a real run, short enough for the largest sizes. HFL's runs keep their length: on
    the quadratic a round's cost does not grow with N (each group's mean noise is one draw)."""
    small, large = {"mllsgd": (256, 8), "hfl": (64, 64), "tdcd": (64, 4), "afl": (64, 4)}[name]
    length = max(large, min(small, small * (100 if name == "mllsgd" else 1000) // N))
    return length - length % 8 if name == "mllsgd" else length


def pair(name: str, N: int, length: int | None = None, device: str = "cpu") -> Pair:
    """Simulator ``name`` and its reference at N workers (N a multiple of 10), ``length``
    iterations (MLL-SGD, a multiple of 8), rounds (HFL, TDCD, AFL); default
    :func:`iterations`. The simulator runs on ``device`` (its draws still come from a CPU
    generator), the reference on the CPU."""
    length = iterations(name, N) if length is None else length
    if name == "mllsgd":
        problem, kw = fused_mllsgd.workload(N, length)
        args = dict(hubs=kw["H"].shape[0], workers=N, eta=kw["eta"], K=length, q=kw["q"],
                    tau=kw["tau"], x1=kw["x1"])
        return Pair(lambda s: run_mllsgd(problem, generator=_gen(s), device=device, **kw),
                    lambda s: dict(zip(("grad_sq_norm", "loss"),
                                       fused_mllsgd.fused_mllsgd(problem, generator=_gen(s), **args),
                                       strict=True)),
                    N * length)
    if name == "hfl":
        problem, kw = fused_hfl.workload(N, rounds=length)
        args = {k: kw[k] for k in ("sizes", "t", "alpha", "x1")}
        return Pair(lambda s: run_hfl(problem, generator=_gen(s), device=device, **kw),
                    lambda s: fused_hfl.fused_hfl(problem, generator=_gen(s), **args),
                    N * int(kw["t"].max(dim=1).values.sum()))
    if name == "tdcd":
        model, kw = fused_tdcd.workload(N, rounds=length)
        args = {k: kw[k] for k in ("eta", "Q", "rounds", "theta0")}
        simulated = model if device == "cpu" else fused_tdcd.workload(N, rounds=length,
                                                                       device=device)[0]
        return Pair(lambda s: run_tdcd(simulated, generator=_gen(s), **kw),
                    lambda s: fused_tdcd.fused_tdcd(model, generator=_gen(s), **args),
                    N * kw["Q"] * length)
    if name == "afl":
        clients, kw = fused_afl.workload(N, rounds=length)
        args = {k: kw[k] for k in ("m", "T", "eta", "eta_L", "x0", "K", "tau")}
        return Pair(lambda s: run_afl(clients, generator=_gen(s), device=device, **kw),
                    lambda s: fused_afl.fused_afl(clients, generator=_gen(s), **args),
                    N * 4 * length)  # K_{t,i} <= 4: the run loop takes max_i K_{t,i} steps
    raise ValueError(f"name={name!r} must be one of {SIMULATORS}")
