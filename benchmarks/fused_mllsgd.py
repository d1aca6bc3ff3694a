"""Hand-fused MLL-SGD: the update of ``sim.mllsgd.run_mllsgd`` written as directly as eager
torch allows, on the benchmarks' workload.

Workload (:func:`workload`): binary logistic regression, 50 features, step size 0.2 (the
convex experiments of Castiglia et al. 2021, Appendix B, on synthetic data), n = 32 N
samples (one batch per worker under the official code's equal partition), batch 32,
tau = 4, q = 2, D = min(10, N) equal hubs of contiguous workers on a complete hub graph
(H = b 1^T), every p_i = 1, one replica, x1 = 0.

:func:`fused_mllsgd` keeps the N workers in one [N, d] tensor, draws exactly what
run_mllsgd draws (per iteration the coin uniforms [1, N], then the batch indices
[1, N, 32]), gathers the batch with ``index_select`` into buffers it reuses, a block of
workers at a time (``sim.problems.GATHER_BLOCK_BYTES`` of rows, used while in cache), takes
two ``bmm`` per block (the margins as x^T [a_1 .. a_b], the faster orientation),
averages hubs as a reshape-mean, and records F(u_k) and ||grad F(u_k)||^2 from one
computation of the margins. No validation, no divergence check, no
generality: the practical limit of this update in eager torch, against which
benchmarks/bench_fused.py measures the simulator.
"""

from __future__ import annotations

import torch

from fedbound.sim.problems import GATHER_BLOCK_BYTES, LogisticRegression

F64 = torch.float64
FEATURES, BATCH, TAU, Q, ETA = 50, 32, 4, 2, 0.2


def workload(N: int, K: int, *, seed: int = 0) -> tuple[LogisticRegression, dict]:
    """The problem and the keyword arguments of run_mllsgd (without the generator)."""
    problem = LogisticRegression.random(BATCH * N, FEATURES, 10.0,
                                        torch.Generator().manual_seed(seed), batch=BATCH)
    D = min(10, N)
    b = torch.full((D,), 1.0 / D, dtype=F64)
    return problem, dict(
        H=b[:, None] * torch.ones(1, D, dtype=F64), hub_of=torch.arange(N) // (N // D),
        w=torch.ones(N, dtype=F64), p=torch.ones(N, dtype=F64), eta=ETA, K=K, q=Q, tau=TAU,
        x1=torch.zeros(FEATURES, dtype=F64), replicas=1)


def fused_mllsgd(problem: LogisticRegression, *, hubs: int, workers: int, eta: float, K: int,
                 q: int, tau: int, x1: torch.Tensor, generator: torch.Generator,
                 record_every: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(||grad F(u_k)||^2, F(u_k)) for k = 1..K, [K] each, on the workload above (p = 1).
    With ``record_every=e`` > 1, only F(u_k) at k = 1, 1 + e, ... (what the official code
    records), and no gradient norms (an empty tensor)."""
    A, y, n, B = problem.features, problem.labels, problem.n, problem.batch
    N, d = workers, A.shape[1]
    X = x1.expand(N, d).clone()
    uniforms = torch.empty(1, N, dtype=F64)
    idx = torch.empty(1, N, B, dtype=torch.int64)
    block = max(1, GATHER_BLOCK_BYTES // (B * d * 8))                     # workers at a time
    rows = torch.empty(min(block, N), B, d, dtype=F64)
    labels = torch.empty(N, 1, B, dtype=F64)
    weights = torch.empty(N, 1, B, dtype=F64)
    G = torch.empty(N, 1, d, dtype=F64)
    margins = torch.empty(n, dtype=F64)
    grad_sq = torch.empty(K if record_every == 1 else 0, dtype=F64)
    loss = torch.empty(K // record_every, dtype=F64)
    flat = idx.view(-1)
    blocks = [(flat[s * B:e * B], rows[:e - s], rows[:e - s].view(-1, d), rows[:e - s].transpose(1, 2),
               X[s:e].view(-1, 1, d), labels[s:e], weights[s:e], G[s:e])       # views made once
              for s, e in ((s, min(s + block, N)) for s in range(0, N, block))]
    for k in range(1, K + 1):
        if (k - 1) % record_every == 0:
            u = X.mean(0)
            torch.mv(A, u, out=margins).mul_(y).neg_()                   # -y a^T u
            softplus = margins.clamp(min=0) + torch.log1p(torch.exp(-margins.abs()))
            loss[(k - 1) // record_every] = softplus.mean()
            if record_every == 1:
                grad = torch.mv(A.T, torch.sigmoid(margins).mul_(y)).div_(-n)
                grad_sq[k - 1] = grad.dot(grad)
        uniforms.uniform_(generator=generator)                            # coins: all land
        torch.randint(n, idx.shape, generator=generator, out=idx)
        torch.index_select(y, 0, flat, out=labels.view(N * B))
        for picked, r, r_flat, r_t, x, lab, w, g in blocks:                # gathered in cache
            torch.index_select(A, 0, picked, out=r_flat)
            torch.bmm(x, r_t, out=w)
            torch.sigmoid(w.mul_(lab).neg_(), out=w).mul_(lab).div_(-B)
            torch.bmm(w, r, out=g)
        X.sub_(G.view(N, d), alpha=eta)
        if k % (q * tau) == 0:
            X.copy_(X.mean(0).expand(N, d))
        elif k % tau == 0:
            hub = X.view(hubs, N // hubs, d)
            hub.copy_(hub.mean(1, keepdim=True).expand_as(hub))
    return grad_sq, loss
