"""Vectorised run_hfl against a plain loop over groups, local iterations and clients, on the
same scenario, schedule and draws; and the throughput of the delay-path sampler.

    python benchmarks/bench_hfl.py [--quick] [--device cpu]

The loop reference implements Algorithm 1 of Ali & Arafa 2025 literally
for one replica: one 1-D tensor per group model, one SGD step per client (5), the group
average (6), the normalised upload (10) and the |N_i|-weighted global update (12). It
consumes the generator exactly as run_hfl does with one replica (per round and local
iteration one draw ``randn((1, G, d))`` of the groups' mean noise, group i's scaled by
sigma / sqrt(|N_i| d): the quadratic's law of the mean of |N_i| clients' noise), so both
traces agree to 1e-10. Prints groups | clients | loop s | vectorised s | ratio (best of a few repeats, one
intra-op thread), then schedules per second of bounds.delays.sample_schedules for 2 to 64
groups, then the time of choosing S from the expected bound (bounds.choose_sync_time, the
plug-in estimate) for the paper's Fig. 7a delays, in this process, and the time of a fresh
``fedbound choose-sync-time --method bound`` command (which includes importing the stack).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import best_time  # noqa: E402
from fedbound import bounds  # noqa: E402
from fedbound.bounds import delays as D  # noqa: E402
from fedbound.sim.hfl import run_hfl  # noqa: E402
from fedbound.sim.problems import Quadratic, randn  # noqa: E402

FIG7A = [0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2]


def scenario(groups: int, clients: int, T: float, seed: int = 0) -> dict:
    """Quadratic d = 10, ``groups`` groups of ``clients`` (the last one smaller), Fig. 7a
    delays, S = 5; one delay path drawn with bounds.delays."""
    sizes = [clients] * (groups - 1) + [max(1, clients // 2)]
    model = D.DelayModel.linear(FIG7A, sizes)
    t = D.sample_schedules(model, 5, T, 1, np.random.default_rng(seed)).path(0)
    problem = Quadratic.random(10, 1.0, 0.1, 2.0, torch.Generator().manual_seed(seed))
    return dict(problem=problem, sizes=sizes, t=t, alpha=0.05, x1=problem.x_star + 1.0)


def loop_reference(problem: Quadratic, *, sizes, t, alpha, x1, generator) -> list[float]:
    """||grad f(x^u)||^2 for each round and f(x^{U+1}), one group and one client at a time."""
    G, d = len(sizes), problem.dim
    N = sum(sizes)
    scale = problem.sigma / math.sqrt(d)
    x = x1.clone()
    out = []
    for u in range(t.shape[0]):
        out.append(float(problem.grad(x).square().sum()))
        ys = [x.clone() for _ in range(G)]
        for step in range(int(t[u].max())):
            noise = randn((1, G, d), generator, x.device)
            for i in range(G):
                if step >= t[u, i]:
                    continue
                total = torch.zeros(d, dtype=torch.float64)
                for _ in range(sizes[i]):
                    total = total + problem.grad(ys[i])
                ys[i] = ys[i] - alpha * (total / sizes[i] + noise[0, i] * scale / math.sqrt(sizes[i]))
        x = x + sum(sizes[i] / N * (ys[i] - x) / int(t[u, i]) for i in range(G))
    out.append(float(problem.loss(x)))
    return out



def compare(groups: int, clients: int, T: float, repeats: int,
            device: str = "cpu") -> tuple[float, float]:
    sc = scenario(groups, clients, T)
    loop_s, ref = best_time(lambda: loop_reference(
        sc["problem"], sizes=sc["sizes"], t=sc["t"], alpha=sc["alpha"], x1=sc["x1"],
        generator=torch.Generator().manual_seed(1)), repeats)
    vec_s, trace = best_time(lambda: run_hfl(
        sc["problem"], sizes=sc["sizes"], t=sc["t"], alpha=sc["alpha"], x1=sc["x1"], replicas=1,
        generator=torch.Generator().manual_seed(1), device=device), repeats)
    got = [*trace.grad_sq_norm[0].tolist(), float(trace.final_loss[0])]
    err = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(got, ref, strict=True))
    assert err < 1e-10, f"traces differ by {err:.3g}"
    return loop_s, vec_s


def sampler_throughput(groups: int, T: float, paths: int) -> float:
    model = D.DelayModel.linear(FIG7A, [max(1, 64 // groups)] * groups)
    t0 = time.perf_counter()
    D.sample_schedules(model, 5, T, paths, np.random.default_rng(0))
    return paths / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    torch.set_num_threads(1)
    repeats = 1 if args.quick else 3
    T = 300.0 if args.quick else 1000.0
    cases = [(2, 5), (4, 10)] if args.quick else [(2, 15), (4, 15), (8, 30)]
    print("groups | clients/group | loop s | vectorised s | ratio")
    entries = []
    for groups, clients in cases:
        loop_s, vec_s = compare(groups, clients, T, repeats, device)
        print(f"{groups:6d} | {clients:13d} | {loop_s:6.3f} | {vec_s:12.4f} | {loop_s / vec_s:5.1f}x")
        entries.append(figure(f"hfl{suffix(device)}.loop_over_vectorised.G{groups}_n{clients}",
                              loop_s / vec_s, "ratio"))
    print(f"\nschedule sampler (bounds.delays.sample_schedules, S = 5, T = {T:g})")
    print("groups | schedules/s")
    for groups in (2, 4, 8, 16, 32, 64):
        rate = sampler_throughput(groups, T, 100 if args.quick else 1000)
        print(f"{groups:6d} | {rate:11.0f}")
        entries.append(figure(f"hfl.schedules_per_second.G{groups}", rate, "schedules/s"))
    inner, outer = sync_time_seconds(repeats)
    print(f"\nchoose S from the expected bound (Fig. 7a delays, 2 x 15 clients, T = 2000): "
          f"{inner:.3f} s in process; {outer:.2f} s for a fresh `fedbound choose-sync-time "
          f"--method bound` (Python, numpy, scipy, sympy and torch imports included)")
    entries += [figure("hfl.choose_sync_time.in_process", inner, "s"),
                figure("hfl.choose_sync_time.command", outer, "s")]
    record(entries)


def sync_time_seconds(repeats: int) -> tuple[float, float]:
    """Best in-process time of bounds.choose_sync_time and of a fresh command process."""
    model = D.DelayModel.linear(FIG7A, [15, 15])
    params = dict(model=model, T=2000, alpha=0.05, L=1.0, G=10.0, sigma=1.0, Delta=10.0,
                  sizes=[15, 15])
    bounds.choose_sync_time(**params)  # compile the bound once, as any first call does
    inner, _ = best_time(lambda: bounds.choose_sync_time(**params), repeats)
    cmd = [str(Path(sys.executable).with_name("fedbound")), "choose-sync-time", "--sizes", "15,15",
           "--delays", ",".join(map(str, FIG7A)), "--T", "2000", "--alpha", "0.05", "--L", "1", "--G", "10",
           "--sigma", "1", "--Delta", "10", "--method", "bound", "--json"]
    outer, _ = best_time(lambda: subprocess.run(cmd, check=True, capture_output=True), repeats)
    return inner, outer


if __name__ == "__main__":
    main()
