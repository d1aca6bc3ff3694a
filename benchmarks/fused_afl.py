"""Hand-fused AFA-CD: the update of ``sim.afl.run_afl`` (``algorithm="cd"``) written as
directly as eager torch allows, on the benchmarks' workload.

Workload (:func:`workload`): heterogeneous quadratic clients (d = 10, L = 2, mu = 0.2,
sigma_L = 1, sigma_G = 0.5), M workers of which m = M/4 arrive per round uniformly,
K_{t,i} ~ U{1..4} local steps, delays uniform up to tau = 3, eta = sqrt(2 m),
eta_L = 0.02 (the setting of benchmarks/bench_afl.py), T = 16 rounds, one replica, x0 = 1.

:func:`fused_afl` runs Algorithm 2 of Yang et al. 2022 with the server step of its proofs
(x <- x - eta eta_L G) on the schedule drawn by the same ``draw_schedule`` call as run_afl,
with all M workers in one [M, d] tensor: per local step one noise draw [1, M, d] into a
reused buffer (what run_afl draws), updates in place, masks only where some worker has
finished; the recordings of run_afl (||grad f(x_t)||^2, f(x_t)). No validation, no
divergence check.
"""

from __future__ import annotations

import math

import torch

from fedbound.sim.afl import HeterogeneousQuadratic, draw_schedule

F64 = torch.float64
DIM, ROUNDS, TAU, ETA_L = 10, 16, 3, 0.02


def workload(M: int, *, rounds: int = ROUNDS, seed: int = 0) -> tuple[HeterogeneousQuadratic, dict]:
    """The clients and the keyword arguments of run_afl (without the generator)."""
    clients = HeterogeneousQuadratic.random(DIM, M, 2.0, 0.2, 1.0, 0.5,
                                            torch.Generator().manual_seed(seed))
    m = max(1, M // 4)
    return clients, dict(algorithm="cd", m=m, T=rounds, eta=math.sqrt(2 * m), eta_L=ETA_L,
                         x0=torch.ones(DIM, dtype=F64), replicas=1, K=(1, 4), tau=TAU)


def fused_afl(clients: HeterogeneousQuadratic, *, m: int, T: int, eta: float, eta_L: float,
              x0: torch.Tensor, K, tau: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``grad_sq_norm`` [T] and ``loss`` [T] of one replica of AFA-CD with uniform arrivals
    and uniform delays."""
    M, d = clients.M, clients.dim
    schedule = draw_schedule(M=M, m=m, T=T, replicas=1, generator=generator, K=K, tau=tau)
    arrivals, delays, steps = schedule.arrivals[0], schedule.delays[0], schedule.K[0]
    a, centres, c_bar, f_star = clients.a, clients.centres, clients.c_bar, clients.f_star
    scale = clients.sigma_L / math.sqrt(d)
    ring = int(delays.max()) + 1
    history = x0.expand(ring, d).clone()
    noise, g = torch.empty(1, M, d, dtype=F64), torch.empty(M, d, dtype=F64)
    grad_sq, loss = torch.empty(T, dtype=F64), torch.empty(T, dtype=F64)
    x = x0.clone()
    for t in range(T):
        r = x - c_bar
        grad_sq[t], loss[t] = (r * a).square().sum(), 0.5 * (r * r * a).sum() + f_star
        local = history[(t - delays[t]) % ring]                          # [M, d]
        gsum = torch.zeros(M, d, dtype=F64)
        Kt = steps[t]
        for j in range(int(Kt.max())):
            torch.sub(local, centres, out=g).mul_(a)
            g.add_(noise.normal_(generator=generator)[0].mul_(scale))
            if j < int(Kt.min()):
                gsum.add_(g)
                local.sub_(eta_L * g)
            else:
                active = (j < Kt)[:, None]
                gsum.add_(torch.where(active, g, 0.0))
                local.sub_(torch.where(active, eta_L * g, 0.0))
        arrived = arrivals[t][:, None]
        x = x - eta * eta_L * ((gsum / Kt[:, None]) * arrived).sum(0) / arrived.sum()
        history[(t + 1) % ring] = x
    return dict(grad_sq_norm=grad_sq, loss=loss)
