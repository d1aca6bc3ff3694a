"""Hand-fused TDCD: the update of ``sim.tdcd.run_tdcd`` written as directly as eager torch
allows, on the benchmarks' workload.

Workload (:func:`workload`): logistic regression over 5 silos of 2 features each, W / 5
clients per silo, n = 100 base samples, 2 samples per client per round (batch 2 W / 5),
Q = 5, eta = 1 / (8 Q max(L, L_max)) (the setting of benchmarks/bench_tdcd.py), 8 rounds,
one replica, theta^0 = 0.5.

:func:`fused_tdcd` runs Algorithm 1 of Das et al. 2022 (one shared mini-batch per round,
the other silos' embeddings frozen for the round, Q local steps (5) with the client
gradients (4), uniform averaging per silo) with all clients in one [N, K, d] tensor: the
round's batch drawn by the same ``draw_batch`` call as run_tdcd and gathered once, the
margins and each client's sum over its own b slots as two batched products per step; the
recordings of run_tdcd (||grad L||^2, L, the exact per-silo variance, Lemma 2's drift and
its right-hand side's g0). No validation, no divergence check, equal silos.
"""

from __future__ import annotations

import torch

from fedbound.sim.tdcd import BlockLinear, Layout, draw_batch, synthetic_data

F64 = torch.float64
SILOS, FEATURES, BASE, PER_CLIENT, Q, ROUNDS = 5, 2, 100, 2, 5, 8


def workload(W: int, *, rounds: int = ROUNDS, seed: int = 0,
             device: str = "cpu") -> tuple[BlockLinear, dict]:
    """The model (on ``device``) and the keyword arguments of run_tdcd (without the
    generator) for W clients in all (a multiple of 5)."""
    K = W // SILOS
    layout = Layout((FEATURES,) * SILOS, (K,) * SILOS, BASE, PER_CLIENT * K)
    X, y = synthetic_data(BASE, layout.D, loss="logistic",
                          generator=torch.Generator().manual_seed(seed))
    model = BlockLinear(X, y, layout, loss="logistic", device=device)
    return model, dict(eta=1 / (8 * Q * max(model.L, model.L_max)), Q=Q, rounds=rounds,
                       theta0=torch.full((layout.D,), 0.5, dtype=F64), replicas=1)


def fused_tdcd(model: BlockLinear, *, eta: float, Q: int, rounds: int, theta0: torch.Tensor,
               generator: torch.Generator) -> dict[str, torch.Tensor]:
    """``grad_sq_norm`` [rounds], ``loss`` [rounds + 1], ``sigma2`` [rounds, N], ``drift``
    and ``g0`` [rounds] of one replica with equal silos and logistic loss."""
    lay = model.layout
    N, K, B, d = lay.N, lay.clients[0], lay.batch, model.d
    b = B // K
    Xp, y = model.Xp, model.y
    factor = lay.sampling_factor()
    grad_sq, loss = torch.empty(rounds, dtype=F64), torch.empty(rounds + 1, dtype=F64)
    sigma2 = torch.empty(rounds, N, dtype=F64)
    drift, g0 = torch.zeros(rounds, dtype=F64), torch.empty(rounds, dtype=F64)
    hub = model.split(theta0)                                              # [N, d]
    for r in range(rounds + 1):
        scores = torch.einsum("pnd,nd->p", Xp, hub)
        loss[r] = (torch.log1p(torch.exp(-(y * scores).abs())) + (-y * scores).clamp(min=0)).mean()
        if r == rounds:
            break
        slope = -y * torch.sigmoid(-y * scores)
        per_sample = slope[:, None, None] * Xp                             # [n, N, d]
        mean = per_sample.mean(0)
        grad_sq[r] = (mean * mean).sum()
        sigma2[r] = (per_sample.square().sum(-1).mean(0) - mean.square().sum(-1)) * factor
        rows = draw_batch(lay, 1, generator, "cpu")[0]
        xb = Xp[rows].transpose(0, 1).contiguous()                         # [N, B, d]
        yb = y[rows]
        embedded = (xb * hub[:, None, :]).sum(-1)                          # [N, B]
        other = embedded.sum(0, keepdim=True) - embedded
        xv = xb.view(N * K, b, d)
        clients = hub[:, None, :].expand(N, K, d).clone()
        for q in range(Q):
            z = torch.bmm(xv, clients.view(N * K, d, 1)).view(N, B).add_(other)
            s = torch.sigmoid(-yb * z).mul_(yb).div_(-b)
            g = torch.bmm(s.view(N * K, 1, b), xv).view(N, K, d)
            if q == 0:
                first = g
                g0[r] = (g * g).sum() / K
            else:
                drift[r] += (g - first).square().sum() / K
            clients -= eta * g
        hub = clients.mean(1)
    return dict(grad_sq_norm=grad_sq, loss=loss, sigma2=sigma2, drift=drift, g0=g0)
