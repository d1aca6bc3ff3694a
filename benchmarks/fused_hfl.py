"""Hand-fused HFL: the update of ``sim.hfl.run_hfl`` written as directly as eager torch
allows, on the benchmarks' workload.

Workload (:func:`workload`): a quadratic with d = 10, L = 1, mu = 0.1 and additive noise
sigma = 2 (the setting of benchmarks/bench_hfl.py), G = min(10, N) groups of N/G clients,
a fixed schedule of U = 16 rounds with t_i^u = 4 + (u + i) mod 3 local iterations,
alpha = 0.05, x^1 = x* + 1, one replica.

:func:`fused_hfl` runs Algorithm 1 of Ali & Arafa 2025 (local iterations (5)-(6), the
normalised upload (10) and the weighted global update (12)) with the groups in one [G, d]
tensor: per local iteration one draw of the groups' mean noise [1, G, d] into a reused
buffer (what run_hfl draws: the mean of n clients' N(0, sigma^2/d I) noise is one
N(0, sigma^2/(n d) I) draw), the group gradient computed once per group, the recordings
of run_hfl (||grad f(x^u)||^2, f(x^u), Theorem 1's per-group sums and Lemma 1's
deviations). No validation, no divergence check, equal groups.
"""

from __future__ import annotations

import math

import torch

from fedbound.sim.problems import Quadratic

F64 = torch.float64
DIM, ROUNDS, ALPHA = 10, 16, 0.05


def workload(N: int, *, rounds: int = ROUNDS, seed: int = 0) -> tuple[Quadratic, dict]:
    """The problem and the keyword arguments of run_hfl (without the generator)."""
    problem = Quadratic.random(DIM, 1.0, 0.1, 2.0, torch.Generator().manual_seed(seed))
    G = min(10, N)
    u, i = torch.arange(rounds)[:, None], torch.arange(G)[None, :]
    return problem, dict(sizes=[N // G] * G, t=4 + (u + i) % 3, alpha=ALPHA,
                         x1=problem.x_star + 1.0, replicas=1)


def fused_hfl(problem: Quadratic, *, sizes: list[int], t: torch.Tensor, alpha: float,
              x1: torch.Tensor, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``grad_sq_norm`` [U], ``loss`` [U + 1], ``group_grad_sq_sum`` [G] and ``deviation``
    [U, G] of one replica with equal groups."""
    A, x_star, f_star = problem.hessian, problem.x_star, problem.f_inf
    G, n, d = len(sizes), sizes[0], problem.dim
    U = t.shape[0]
    scale = problem.sigma / math.sqrt(d)
    weight = 1.0 / G
    noise = torch.empty(1, G, d, dtype=F64)
    grad_sq, loss = torch.empty(U, dtype=F64), torch.empty(U + 1, dtype=F64)
    group_sum, deviation = torch.zeros(G, dtype=F64), torch.empty(U, G, dtype=F64)
    x = x1.clone()
    for u in range(U):
        r = x - x_star
        g = r @ A
        grad_sq[u], loss[u] = g.dot(g), 0.5 * g.dot(r) + f_star
        steps = t[u]
        y = x.expand(G, d).clone()
        for step in range(int(steps.max())):
            active = (step < steps)[:, None]
            gy = (y - x_star) @ A
            group_sum += torch.where(active[:, 0], (gy * gy).sum(-1), 0.0)
            noise.normal_(generator=generator)
            direction = noise[0].mul_(scale / math.sqrt(n)).add_(gy)
            y = torch.where(active, y - alpha * direction, y)
        x_next = x + weight * ((y - x) / steps[:, None]).sum(0)
        deviation[u] = (x_next - y).square().sum(-1)
        x = x_next
    r = x - x_star
    loss[U] = 0.5 * (r @ A).dot(r) + f_star
    return dict(grad_sq_norm=grad_sq, loss=loss, group_grad_sq_sum=group_sum, deviation=deviation)
