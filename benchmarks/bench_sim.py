"""Vectorised run_mllsgd against a per-worker Python loop on the same scenario and draws.

    python benchmarks/bench_sim.py [--quick] [--device cpu]

The loop reference keeps one 1-D tensor per worker and loops over workers and hubs,
implementing (5)-(6) of Castiglia et al. 2021 literally. It consumes the generator
exactly as run_mllsgd does with one replica (coins ``rand((1, N))``, then the quadratic's
noise ``randn((1, N, d))`` per iteration), so both must give the same trace to 1e-10.
Prints N | loop s | vectorised s | ratio (best of a few repeats, time.perf_counter, one
intra-op thread for both), then the time and memory of a large multi-replica run.
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import best_time  # noqa: E402
from fedbound.sim.mllsgd import run_mllsgd  # noqa: E402
from fedbound.sim.problems import Quadratic  # noqa: E402

F64 = torch.float64


def path_hub_matrix(D: int) -> np.ndarray:
    """Metropolis-Hastings weights on a path of D hubs with uniform b: H = I - Lap / 3."""
    adjacency = np.diag(np.ones(D - 1), 1)
    adjacency = adjacency + adjacency.T
    laplacian = np.diag(adjacency.sum(axis=1)) - adjacency
    return np.eye(D) - laplacian / 3 if D > 2 else np.full((D, D), 1.0 / D)


def scenario(N: int, D: int, K: int, q: int, tau: int, seed: int = 0) -> dict:
    """Quadratic d = 10, D equal hubs on a path, p = 0.6 for every tenth worker else 0.9."""
    p = torch.full((N,), 0.9, dtype=F64)
    p[::10] = 0.6
    return dict(
        problem=Quadratic.random(10, 4.0, 0.1, 1.0, torch.Generator().manual_seed(seed),
                                 rotate=True),
        H=torch.as_tensor(path_hub_matrix(D)), hub_of=torch.arange(N) % D,
        w=torch.ones(N, dtype=F64), p=p, eta=0.02, K=K, q=q, tau=tau,
        x1=torch.ones(10, dtype=F64),
    )


def loop_reference(problem: Quadratic, *, H, hub_of, w, p, eta, K, q, tau, x1,
                   generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(||grad F(u_k)||^2, F(u_k)) for k = 1..K, one worker and one hub at a time."""
    N, D, d = hub_of.numel(), H.shape[0], problem.dim
    hubs = [int(h) for h in hub_of]
    members = [[i for i in range(N) if hubs[i] == h] for h in range(D)]
    hub_total = [sum(float(w[i]) for i in members[h]) for h in range(D)]
    v = [float(w[i]) / hub_total[hubs[i]] for i in range(N)]
    a = [float(w[i]) / float(w.sum()) for i in range(N)]
    scale = problem.sigma / math.sqrt(d)
    models = [x1.clone() for _ in range(N)]
    grad_sq, losses = [], []
    for k in range(1, K + 1):
        u = sum(a[i] * models[i] for i in range(N))
        grad_sq.append(problem.grad(u).square().sum())
        losses.append(problem.loss(u))
        coins = torch.rand((1, N), generator=generator, dtype=F64)[0]
        noise = torch.randn((1, N, d), generator=generator, dtype=F64)[0]
        stepped = []
        for i in range(N):
            if coins[i] < p[i]:
                gradient = problem.hessian @ (models[i] - problem.x_star) + scale * noise[i]
                stepped.append(models[i] - eta * gradient)
            else:
                stepped.append(models[i])
        if k % tau != 0:
            models = stepped
            continue
        z = [sum(v[i] * stepped[i] for i in members[h]) for h in range(D)]
        if k % (q * tau) == 0:
            z = [sum(float(H[j, h]) * z[j] for j in range(D)) for h in range(D)]
        models = [z[hubs[i]].clone() for i in range(N)]
    return torch.stack(grad_sq), torch.stack(losses)



def compare(N: int, D: int, K: int, q: int, tau: int, repeats: int,
            device: str = "cpu") -> tuple[float, float]:
    """Loop and vectorised seconds on the same scenario; asserts equal traces to 1e-10."""
    sc = scenario(N, D, K, q, tau)
    problem = sc.pop("problem")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # both sides single-threaded: small ops, no thread-pool noise
    loop_s, (loop_grad, loop_loss) = best_time(
        lambda: loop_reference(problem, generator=torch.Generator().manual_seed(1), **sc),
        repeats)
    vec_s, trace = best_time(
        lambda: run_mllsgd(problem, replicas=1, generator=torch.Generator().manual_seed(1),
                           device=device, **sc),
        3 * repeats)
    torch.set_num_threads(threads)
    torch.testing.assert_close(trace.grad_sq_norm[0], loop_grad, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(trace.loss[0], loop_loss, rtol=1e-10, atol=1e-10)
    return loop_s, vec_s


def large_run(N: int, replicas: int, D: int, K: int, q: int, tau: int,
              device: str = "cpu") -> list[dict]:
    """Time, state size and peak RSS of one many-worker, many-replica run, as figures."""
    sc = scenario(N, D, K, q, tau)
    problem = sc.pop("problem")
    seconds, trace = best_time(
        lambda: run_mllsgd(problem, replicas=replicas,
                           generator=torch.Generator().manual_seed(2), device=device, **sc), 1)
    state_mb = replicas * N * problem.dim * 8 / 2**20
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n{N} workers x {replicas} replicas, d = {problem.dim}, K = {K}: {seconds:.2f} s, "
          f"state X {state_mb:.0f} MiB, peak RSS of this process {peak_mb:.0f} MiB, "
          f"mean LHS {float(trace.lhs.mean()):.4f}")
    name = f"mllsgd{suffix(device)}.large_run.N{N}_R{replicas}"
    return [figure(f"{name}.seconds", seconds, "s"),
            figure(f"{name}.peak_rss", peak_mb, "MiB", at_most=2048)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke-test sizes (< 10 s)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    sizes, K, repeats, large = ((10, 100, 1000), 8, 1, (1000, 10)) if args.quick else \
        ((10, 100, 1000), 32, 3, (10_000, 100))
    q, tau, D = 2, 4, 10
    print(f"MLL-SGD, quadratic d = 10, D = {D} hubs on a path, K = {K}, q = {q}, tau = {tau}, "
          f"1 replica, traces equal to 1e-10")
    print(f"{'N':>6} | {'loop s':>9} | {'vectorised s':>12} | {'ratio':>7}")
    ratios = {}
    for N in sizes:
        loop_s, vec_s = compare(N, D, K, q, tau, repeats, device)
        ratios[N] = loop_s / vec_s
        print(f"{N:>6} | {loop_s:>9.4f} | {vec_s:>12.4f} | {ratios[N]:>6.1f}x")
    entries = [figure(f"mllsgd{suffix(device)}.loop_over_vectorised.N{N}", ratio, "ratio",
                      at_least=20 if N == 1000 else None) for N, ratio in ratios.items()]
    record(entries + large_run(*large, D=D, K=K, q=q, tau=tau, device=device))


if __name__ == "__main__":
    main()
