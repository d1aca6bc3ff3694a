"""The calibrated prediction of the MLL-SGD chooser: the exact second moments of MLL-SGD
(Castiglia et al. 2021, (5)-(7)) on the problem's local quadratic model
(``sim.estimate.QuadraticModel``), for many (tau, eta) at once.

In an eigen-direction of the model (eigenvalue lam) the workers' errors form a row vector y,
y_1 = (x_1 - x_ref) component times 1^T, and with coins theta_k ~ Bernoulli(p) ((3)) and
noise of variance s^2 per step in that direction,

    y_{k+1} = (y_k o (1 - eta lam theta_k) - eta theta_k o e_k) T_k,

so that M_k = E[y_k^T y_k] follows M_{k+1} = T_k^T (M_k o C + eta^2 s^2 diag(p)) T_k with
C_ij = (1 - eta lam p_i)(1 - eta lam p_j) (i != j) and C_ii = p_i (1 - eta lam)^2 + 1 - p_i,
T_k of (6) (Z every q tau iterations, V every tau, I otherwise): the recursion of
``adapters.expected_grad_sq_norms``, there per coordinate of an exact quadratic, here per node
of the model with its start energy and noise. With u_k = X_k a ((8)),
E F(u_k) - F_ref = sum_nodes 0.5 lam a^T M_k a and E||grad F(u_k)||^2 = sum_nodes lam^2 a^T M_k a.
Exact for a quadratic with isotropic noise; otherwise the curvature away from x_ref and noise
that grows away from it are not modelled.
"""

from __future__ import annotations

import math

import numpy as np


def curves(model, p, a, V, Z, etas, K: int, q: int, tau: int) -> tuple[np.ndarray, np.ndarray]:
    """(E F(u_k) - F_ref, E||grad F(u_k)||^2) for k = 1 .. K + 1 (u_{K+1} after the last step),
    [C, K + 1] each, for every step of ``etas`` [C] at one ``tau``; ``p``, ``a`` [N] the
    workers' step probabilities and weights, ``V``, ``Z`` [N, N] the mixing matrices of (6)
    (``bounds.topology.worker_matrices``)."""
    lam = np.asarray(model.curvature, dtype=float)
    start = np.asarray(model.start_energy, dtype=float)
    noise = np.asarray(model.noise, dtype=float).mean(axis=0)                   # [J]
    eta = np.asarray(etas, dtype=float)[:, None, None]                         # [C, 1, 1]
    p, a = np.asarray(p, dtype=float), np.asarray(a, dtype=float)
    N = p.size
    shrink = 1.0 - eta * lam[None, :, None] * p                               # [C, J, N]
    C = shrink[..., :, None] * shrink[..., None, :]
    diag = np.arange(N)
    C[..., diag, diag] = p * (1.0 - eta * lam[None, :, None]) ** 2 + 1.0 - p
    inject = eta[..., None] ** 2 * noise[None, :, None, None] * np.diag(p)     # [C, J, N, N]
    M = np.broadcast_to(start[None, :, None, None], C.shape).copy()
    gaps, grads = np.empty((eta.shape[0], K + 1)), np.empty((eta.shape[0], K + 1))
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, K + 2):
            energy = np.einsum("i,cjik,k->cj", a, M, a)
            gaps[:, k - 1], grads[:, k - 1] = 0.5 * energy @ lam, energy @ lam**2
            if k == K + 1:
                break
            M = M * C + inject
            T = Z if k % (q * tau) == 0 else V if k % tau == 0 else None
            if T is not None:
                M = T.T @ M @ T
    bad = ~(np.isfinite(gaps) & np.isfinite(grads))
    gaps[bad], grads[bad] = math.inf, math.inf
    return gaps, grads
