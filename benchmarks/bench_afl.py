"""Vectorised run_afl (AFA-CD / AFA-CS) against a per-replica, per-worker Python loop on
the same scenario and the same random draws.

    python benchmarks/bench_afl.py [--quick] [--device cpu]

The loop reference keeps one 1-D model per worker and implements Algorithms 2 and 3 of
Yang et al. 2022 literally, with the proofs' server step
x <- x - eta eta_L G (Appendix B.2). It takes the schedule (arrivals, delays, K) drawn by
sim.afl.draw_schedule and consumes the noise exactly as run_afl does (one
``randn((R, M, d))`` per local step; AFA-CS first draws its initial memory), so both must
give the same trace to 1e-10. Prints M | loop s | vectorised s | ratio (best of a few
repeats, one intra-op thread for both).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import best_time  # noqa: E402
from fedbound.sim.afl import HeterogeneousQuadratic, Schedule, draw_schedule, run_afl  # noqa: E402

F64 = torch.float64


def loop_afl(clients: HeterogeneousQuadratic, *, algorithm: str, schedule: Schedule, eta: float,
             eta_L: float, x0: torch.Tensor, generator: torch.Generator, worker: str = "sgd",
             mu: float = 0.1) -> torch.Tensor:
    """[R, T] ||grad f(x_t)||^2, one replica, one worker and one local step at a time. The
    worker steps along g (SGD), g + mu (x - x_start) (FedProx) or g - c_i + c (SCAFFOLD,
    option II: c pulled with the model, an arriving worker's c_i <- c_i - c + G_i and c moved
    by the mean change over the M workers; AFA-CS's initial runs count as every worker's
    first report)."""
    R, T, M = schedule.arrivals.shape
    d = clients.dim
    a, centres = clients.a, clients.centres
    scale = clients.sigma_L / math.sqrt(d)
    s = eta * eta_L
    zero = torch.zeros(d, dtype=F64)

    def local(x, i, K, noise, c_pull, c_i):  # worker i's K local steps from x; noise[j]: step j's
        start, g_sum = x, torch.zeros(d, dtype=F64)
        for j in range(K):
            g = a * (x - centres[i]) + scale * noise[j]
            if worker == "fedprox":
                g = g + mu * (x - start)
            if worker == "scaffold":
                g = g - c_i + c_pull
            g_sum = g_sum + g
            x = x - eta_L * g
        return g_sum / K

    c_i = [[zero] * M for _ in range(R)]
    controls = [[zero] for _ in range(R)]  # controls[r][t] = c_t (SCAFFOLD)
    memory = None
    if algorithm == "cs":
        draws = [torch.randn((R, M, d), generator=generator, dtype=F64)
                 for _ in range(int(schedule.K0.max()))]
        memory = [[local(x0, i, int(schedule.K0[r, i]), [n[r, i] for n in draws], zero, zero)
                   for i in range(M)] for r in range(R)]
        if worker == "scaffold":
            for r in range(R):
                c_i[r], controls[r] = list(memory[r]), [sum(memory[r]) / M]
    models = [[x0.clone()] for _ in range(R)]  # models[r][t] = x_t
    out = torch.empty(R, T, dtype=F64)
    for t in range(T):
        draws = [torch.randn((R, M, d), generator=generator, dtype=F64)
                 for _ in range(int(schedule.K[:, t].max()))]
        for r in range(R):
            x = models[r][t]
            out[r, t] = (a * (x - clients.c_bar)).square().sum()
            updates, change = [], zero
            for i in range(M):
                if schedule.arrivals[r, t, i]:
                    pulled = t - int(schedule.delays[r, t, i])
                    c_pull = controls[r][pulled]
                    G = local(models[r][pulled], i, int(schedule.K[r, t, i]),
                              [n[r, i] for n in draws], c_pull, c_i[r][i])
                    updates.append(G)
                    if memory is not None:
                        memory[r][i] = G
                    if worker == "scaffold":
                        new = c_i[r][i] - c_pull + G
                        change, c_i[r][i] = change + (new - c_i[r][i]), new
            G_t = sum(memory[r]) / M if memory is not None else sum(updates) / len(updates)
            models[r].append(x - s * G_t)
            controls[r].append(controls[r][t] + change / M)
    return out


def compare(M: int, algorithm: str, T: int, replicas: int, repeats: int,
            device: str = "cpu") -> tuple[float, float]:
    """Loop and vectorised seconds on one scenario; asserts equal traces to 1e-10."""
    clients = HeterogeneousQuadratic.random(5, M, 2.0, 0.2, 1.0, 0.5, torch.Generator().manual_seed(0))
    m = max(1, M // 4)
    schedule = draw_schedule(M=M, m=m, T=T, replicas=replicas, generator=torch.Generator().manual_seed(1),
                             K=(1, 4), tau=3, arrivals="uniform")
    common = dict(eta=math.sqrt(m * 2), eta_L=0.02, x0=torch.ones(5, dtype=F64))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loop_s, ref = best_time(lambda: loop_afl(clients, algorithm=algorithm, schedule=schedule,
                                             generator=torch.Generator().manual_seed(2), **common), repeats)
    vec_s, trace = best_time(lambda: run_afl(clients, algorithm=algorithm, m=m, T=T, replicas=replicas,
                                             schedule=schedule, generator=torch.Generator().manual_seed(2),
                                             device=device, **common), 3 * repeats)
    torch.set_num_threads(threads)
    torch.testing.assert_close(trace.grad_sq_norm, ref, rtol=1e-10, atol=1e-10)
    return loop_s, vec_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke-test sizes (< 15 s)")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    sizes, T, replicas, repeats = ((8, 32), 20, 4, 1) if args.quick else ((8, 32, 128), 50, 8, 2)
    print(f"AFL, quadratic d = 5, m = M/4 uniform arrivals, K ~ U{{1..4}}, tau = 3, T = {T}, "
          f"{replicas} replicas, traces equal to 1e-10")
    print(f"{'alg':>4} {'M':>5} | {'loop s':>9} | {'vectorised s':>12} | {'ratio':>7}")
    entries = []
    for algorithm in ("cd", "cs"):
        for M in sizes:
            loop_s, vec_s = compare(M, algorithm, T, replicas, repeats, device)
            print(f"{algorithm:>4} {M:>5} | {loop_s:9.3f} | {vec_s:12.4f} | {loop_s / vec_s:7.1f}x")
            entries.append(figure(f"afl{suffix(device)}.{algorithm}.loop_over_vectorised.M{M}",
                                  loop_s / vec_s, "ratio"))
    record(entries)


if __name__ == "__main__":
    main()
