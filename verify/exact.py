"""Exact expectations of MLL-SGD on a quadratic with additive Gaussian noise.

Problem: F(x) = 0.5 (x - x*)^T A (x - x*) + f*, A = U diag(lam) U^T (lam >= 0), and
stochastic gradient g(x) = A (x - x*) + eps with eps ~ N(0, (sigma^2 / d) I_d), so
E||g - grad F||^2 = sigma^2 (Assumption 1d with beta = 0, papers/mllsgd.txt L55).
Worker i takes its step with probability p_i (theta_k^i ~ Bernoulli(p_i), (3) L89, (18) L352);
then X_{k+1} = (X_k - eta G_k) T_k ((5), L115) with T_k = Z if k % (q tau) == 0, V if
k % tau == 0, else I ((6), L119). All workers start at x1 (Lemma 4, L710).

Derivation (guide theory/mllsgd.md 7.2, "Exact oracle for the LHS", re-derived here).
Rotating by U keeps eps isotropic, so in eigen-coordinate c (eigenvalue lam) the worker
values form a row vector y = row c of U^T (X - x* 1^T), with y_1 = y1[c] 1^T and
    y_{k+1} = (y_k o (1 - eta lam theta_k) - eta theta_k o e_k) T_k,  e_k ~ N(0, sigma^2/d I_N),
where o is the elementwise product. Workers are columns and T_k multiplies from the
right, so with m_k = E[y_k] and M_k = E[y_k^T y_k] (N x N), theta_k being independent of
y_k and of e_k:
    m_{k+1} = (m_k o (1 - eta lam p)) T_k,
    M_{k+1} = T_k^T (M_k o C + eta^2 (sigma^2 / d) diag(p)) T_k,
    C_ij = (1 - eta lam p_i)(1 - eta lam p_j) (i != j),  C_ii = p_i (1 - eta lam)^2 + 1 - p_i.
(T_k M T_k^T would be the recursion for X_{k+1} = T_k X~, workers as rows.) The coins
theta_k^i are shared by all coordinates of worker i, which couples the coordinates, but
each coordinate's moments above only involve the coin's marginal law, so they are exact.
With u_k = X_k a ((8), L131), grad F(u_k) = A (u_k - x*), whence
    E||grad F(u_k)||^2 = sum_c lam_c^2 a^T M_k^(c) a.
"""

from __future__ import annotations

import numpy as np


def expected_grad_sq_norms(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau) -> np.ndarray:
    """[K] array of E||grad F(u_k)||^2 for k = 1..K, exactly (u_k before the step of k).

    These are the summands of the left-hand side of Theorem 1, (13), papers/mllsgd.txt L155.
    eigenvalues: [d] eigenvalues lam of A; y1: [d] initial eigen-coordinates U^T (x1 - x*);
    sigma: noise level (E||eps||^2 = sigma^2); p: [N] step probabilities in (0, 1];
    a: [N] worker weights (L127); V, Z: [N, N] mixing matrices ((6)-(7), L119-L124, e.g.
    bounds.topology.worker_matrices); eta > 0; K a multiple of q * tau (guide F11).
    Second-moment recursion: see the module docstring.
    """
    lam, y1, p, a, V, Z = _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau)
    sigma = _nonnegative_scalar("sigma", sigma)
    d, N = lam.size, p.size
    shrink = 1.0 - eta * lam[:, None] * p[None, :]
    C = shrink[:, :, None] * shrink[:, None, :]
    C[:, np.arange(N), np.arange(N)] = p * (1.0 - eta * lam[:, None]) ** 2 + 1.0 - p
    noise = eta**2 * sigma**2 / d * np.diag(p)
    M = y1[:, None, None] ** 2 * np.ones((d, N, N))
    out = np.empty(K)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, K + 1):
            out[k - 1] = np.sum(lam**2 * (a @ M @ a))
            T = _mixing_matrix(k, q, tau, V, Z)
            M = T.T @ (M * C + noise) @ T
    return _finite_result(out, eta, lam)


def expected_lhs(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau) -> float:
    """E[(1/K) sum_{k=1}^K ||grad F(u_k)||^2], the left-hand side of Theorem 1, exactly.

    (13), papers/mllsgd.txt L155; the mean of expected_grad_sq_norms (same arguments).
    """
    norms = expected_grad_sq_norms(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau)
    return float(np.mean(norms))


def expected_averaged_model(eigenvalues, y1, p, a, V, Z, eta, K, q, tau) -> np.ndarray:
    """[K, d] array of U^T (E[u_k] - x*) for k = 1..K: the first moment of u_k = X_k a.

    (8), papers/mllsgd.txt L131, with the mean recursion m_{k+1} = (m_k o (1 - eta lam p)) T_k
    per eigen-coordinate (module docstring; E[g_k^(i)] = p_i grad F(x_k^(i)), (20) L361).
    It does not depend on sigma. Arguments as in expected_grad_sq_norms.
    """
    lam, y1, p, a, V, Z = _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau)
    shrink = 1.0 - eta * lam[:, None] * p[None, :]
    m = y1[:, None] * np.ones((lam.size, p.size))
    out = np.empty((K, lam.size))
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, K + 1):
            out[k - 1] = m @ a
            m = (m * shrink) @ _mixing_matrix(k, q, tau, V, Z)
    return _finite_result(out, eta, lam)


def _mixing_matrix(k, q, tau, V, Z) -> np.ndarray:
    """T_k of (6), papers/mllsgd.txt L119: Z if k % (q tau) == 0, V if k % tau == 0, else I."""
    if k % (q * tau) == 0:
        return Z
    if k % tau == 0:
        return V
    return np.eye(V.shape[0])


def _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau):
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"eigenvalues has shape {lam.shape}: it must be a nonempty vector [d]")
    bad = np.flatnonzero(~(np.isfinite(lam) & (lam >= 0)))
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"eigenvalues[{i}] = {lam[i]:.12g} must be finite and >= 0: A positive semidefinite "
            f"keeps F bounded below (Assumption 1b, papers/mllsgd.txt L53)"
        )
    y1 = _finite_array("y1", y1, lam.shape, "one initial eigen-coordinate per eigenvalue")
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p has shape {p.shape}: it must be a nonempty vector [N]")
    outside = np.flatnonzero(~((p > 0) & (p <= 1)))
    if outside.size:
        i = outside[0]
        raise ValueError(f"p[{i}] = {p[i]:.12g} is outside (0, 1]: a step probability (L82)")
    N = p.size
    a = _finite_array("a", a, (N,), "one weight per worker (L127)")
    if (a <= 0).any():
        i = np.flatnonzero(a <= 0)[0]
        raise ValueError(f"a[{i}] = {a[i]:.12g} <= 0: worker weights a_i = w_i / w_tot > 0 (L127)")
    if abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"a sums to {a.sum():.12g}, not 1: a_i = w_i / w_tot (L127)")
    V = _finite_array("V", V, (N, N), "N x N sub-network averaging matrix ((6), L119)")
    Z = _finite_array("Z", Z, (N, N), "N x N hub averaging matrix ((7), L124)")
    eta = _positive_scalar("eta", eta)
    q, tau, K = (_positive_int(name, value) for name, value in (("q", q), ("tau", tau), ("K", K)))
    if K % (q * tau):
        raise ValueError(
            f"K={K} is not a multiple of q * tau = {q * tau}: the proof of Theorem 1 sums over "
            f"whole hub periods (guide F11)"
        )
    return lam, y1, p, a, V, Z


def _finite_result(out, eta, lam) -> np.ndarray:
    bad = np.flatnonzero(~np.isfinite(out.reshape(out.shape[0], -1)).all(axis=1))
    if bad.size:
        raise ValueError(
            f"eta={eta!r}: the moments overflow float64 at k = {bad[0] + 1} "
            f"(eta * max(eigenvalues) = {eta * lam.max():.12g}; the iteration diverges)"
        )
    return out


def _finite_array(name, value, shape, what) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} has shape {arr.shape}, expected {tuple(shape)}: {what}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains a non-finite entry")
    return arr


def _positive_scalar(name, value) -> float:
    if not (np.isscalar(value) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be a finite number > 0")
    return float(value)


def _nonnegative_scalar(name, value) -> float:
    if not (np.isscalar(value) and np.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")
    return float(value)


def _positive_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)
