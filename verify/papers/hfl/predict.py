"""The calibrated prediction of the HFL chooser: the exact second moments of Algorithm 1 of
Ali & Arafa 2025 on the problem's local quadratic model (``sim.estimate.QuadraticModel``),
rounds drawn from the paper's delay model.

On the model, f(x) = f_ref + 0.5 e^T H e with e = x - x_ref, group i's gradient is
h_i + H e and a client's stochastic gradient adds noise of covariance Sigma_i. In an
eigen-direction of H (eigenvalue lam, rho = 1 - alpha lam), group i's t_i local iterations
of round u ((5)-(6): the mean of its |N_i| clients' gradients) take the group model from e to

    rho^t_i e - alpha s_i h_i - alpha sum_{l < t_i} rho^(t_i - 1 - l) xi_l,
    s_i = sum_{l < t_i} rho^l,   Var(xi_l) = Sigma_i / |N_i|,

and the global update ((10), (12): uploads divided by t_i, weighted w_i = |N_i| / N) gives

    e' = a e + sum_i beta_i h_i + noise,   a = 1 - alpha lam sum_i w_i s_i / t_i,
    beta_i = -alpha w_i s_i / t_i,   Var(noise) = alpha^2 sum_i (w_i / t_i)^2 q_i Sigma_i / |N_i|,
    q_i = sum_{l < t_i} rho^(2l).

So e_u = gamma_u (x_1 - x_ref) + sum_i delta_u,i h_i + (noise), with a coefficient vector
c_u = (gamma_u, delta_u) whose mean m and second moment Psi follow, rounds independent of
the past, m' = E[a] m + E[b], Psi' = E[a^2] Psi + E[a b] m^T + m E[a b]^T + E[b b^T]
(b = (0, beta)), and the noise energy z' = E[a^2] z + E[Var(noise)]: exact on the model,
the expectations over the count law of (7) at S (the counts of the same delay paths
the simulation runs). Then E f(x^u) - f_ref = sum_nodes 0.5 lam (tr(Gamma Psi) + z) and
E||grad f(x^u)||^2 = sum_nodes lam^2 (tr(Gamma Psi) + z), Gamma the node's inner products
of (x_1 - x_ref, h_1, ..., h_G). What is not modelled: the curvature away from x_ref (exact
for a quadratic), noise that grows away from x_ref, and the dependence between a round's
counts and the number of rounds U (each path's U is the simulation's).
"""

from __future__ import annotations

import math

import numpy as np


def _geometric(rho: np.ndarray, t: np.ndarray) -> np.ndarray:
    """sum_{l < t} rho^l elementwise (t where rho = 1)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        near = np.abs(1.0 - rho) < 1e-9
        direct = (1.0 - rho**t) / np.where(near, 1.0, 1.0 - rho)
        series = t - 0.5 * t * (t - 1) * (1.0 - rho)
    return np.where(near, series, direct)


def round_moments(model, sizes, alphas, counts) -> dict[str, np.ndarray]:
    """E over a round's counts t_i of a, a^2, a b, b b^T, b and the noise variance (module
    docstring), per step of ``alphas`` [A] and node: arrays [A, J], [A, J, V], [A, J, V, V].
    The groups draw their counts independently (Section II), so every moment follows from
    each group's marginal law of t_i, here the empirical one of the column of ``counts``
    [M, G] (rounds x groups): E[s_i/t_i], E[(s_i/t_i)^2] and E[q_i/t_i^2]."""
    lam = np.asarray(model.curvature, dtype=float)[None, :]                    # [1, J]
    alpha = np.asarray(alphas, dtype=float)[:, None]                           # [A, 1]
    counts = np.asarray(counts)
    n = np.asarray(sizes, dtype=float)
    c = alpha[..., None] * (n / n.sum())                                       # [A, 1, G]
    rho = (1.0 - alpha * lam)[..., None]                                       # [A, J, 1]
    mu1, mu2, nu = (np.empty(rho.shape[:2] + (counts.shape[1],)) for _ in range(3))
    for i in range(counts.shape[1]):
        t, k = np.unique(counts[:, i], return_counts=True)
        p, t = k / k.sum(), t.astype(float)
        ratio = _geometric(rho, t) / t                                          # [A, J, distinct]
        mu1[..., i], mu2[..., i] = ratio @ p, (ratio * ratio) @ p
        nu[..., i] = (_geometric(rho * rho, t) / t**2) @ p
    lam3 = lam[..., None]
    mean_a = 1.0 - (lam3 * c * mu1).sum(-1)                                    # [A, J]
    second_a = mean_a**2 + (lam3**2 * c**2 * (mu2 - mu1**2)).sum(-1)
    noise = np.asarray(model.noise, dtype=float).T[None]                        # [1, J, G]
    var = (c**2 * nu * noise / n).sum(-1)
    V = model.gram.shape[1]
    A, J = mean_a.shape
    b, ab, bb = np.zeros((A, J, V)), np.zeros((A, J, V)), np.zeros((A, J, V, V))
    if V > 1:
        beta = -c * mu1                                                        # E[beta_i]
        cross = (c * mu1)[..., :, None] * (c * mu1)[..., None, :]              # E[beta_i beta_k]
        diag = np.arange(counts.shape[1])
        cross[..., diag, diag] = c**2 * mu2                                    # ... for i = k
        b[..., 1:] = beta
        bb[..., 1:, 1:] = cross
        ab[..., 1:] = beta + lam[..., None] * cross.sum(axis=-2)               # E[a beta_k]
    return {"a": mean_a, "a2": second_a, "ab": ab, "bb": bb, "b": b, "var": var}


def curves(model, sizes, alphas, counts, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """(E f(x^u) - f_ref, E||grad f(x^u)||^2) for u = 1 .. rounds + 1 (x^1 the start),
    [A, rounds + 1] each, by the recursion of the module docstring."""
    mom = round_moments(model, sizes, alphas, counts)
    lam = np.asarray(model.curvature, dtype=float)
    gram = np.asarray(model.gram, dtype=float)                                 # [J, V, V]
    A, J, V = len(alphas), lam.size, gram.shape[1]
    m = np.zeros((A, J, V))
    m[..., 0] = 1.0
    psi = np.einsum("ajv,ajw->ajvw", m, m)
    z = np.zeros((A, J))
    gaps, grads = np.empty((A, rounds + 1)), np.empty((A, rounds + 1))
    with np.errstate(over="ignore", invalid="ignore"):
        for u in range(rounds + 1):
            energy = np.einsum("jvw,ajvw->aj", gram, psi) + z
            gaps[:, u] = 0.5 * energy @ lam
            grads[:, u] = energy @ lam**2
            psi = (mom["a2"][..., None, None] * psi + mom["ab"][..., :, None] * m[..., None, :]
                   + m[..., :, None] * mom["ab"][..., None, :] + mom["bb"])
            m = mom["a"][..., None] * m + mom["b"]
            z = mom["a2"] * z + mom["var"]
    bad = ~(np.isfinite(gaps) & np.isfinite(grads))
    gaps[bad], grads[bad] = math.inf, math.inf
    return gaps, grads


def count_rows(t: np.ndarray, U: np.ndarray) -> np.ndarray:
    """The count rows [M, G] of the real rounds of paths ``t`` [P, U_max, G] with rounds
    ``U`` [P]: the empirical law of a round's counts."""
    return t[np.arange(t.shape[1])[None, :] < np.asarray(U)[:, None]]


def metric_values(gaps: np.ndarray, grads: np.ndarray, U: np.ndarray, end_time: np.ndarray,
                  metric: str, epsilon: float | None = None) -> np.ndarray:
    """The predicted metric per step [A], averaged over the paths: "loss" E f(x^(U+1)) -
    f_ref at each path's U, "lhs" the mean of E||grad f(x^u)||^2 over its rounds u <= U,
    "time" the wall-clock end of the first round after which E f - f_ref <= epsilon (inf
    when no round of the path gets there)."""
    U = np.asarray(U, dtype=int)
    if metric == "loss":
        return gaps[:, U].mean(axis=1)
    if metric == "lhs":
        csum = np.cumsum(grads, axis=1)
        return (csum[:, U - 1] / U).mean(axis=1)
    if metric == "time":
        reached = gaps[:, 1:] <= epsilon                                       # after round u
        first = np.where(reached.any(axis=1), reached.argmax(axis=1), -1)      # [A]
        times = []
        for p, u_p in enumerate(U):
            ok = (first >= 0) & (first < u_p)
            times.append(np.where(ok, end_time[p, np.clip(first, 0, None)], math.inf))
        return np.mean(times, axis=0)
    raise ValueError(f"metric={metric!r}: no prediction")
