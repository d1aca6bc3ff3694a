"""A deadline bound for MLL-SGD (Castiglia et al. 2021, Algorithm 1, (3)-(8)): fedbound's own
result on E F(u_K) - F*, the loss of the averaged model u_K = X_K a after the K - 1 iterations
before the last one of (13), which is the chooser's loss at the end (derived by fedbound, not
published; bounds/derivations/mllsgd_deadline.md).

``mllsgd.deadline_quadratic``  the exact worst case over the quadratics with spectrum in
                               [mu, L] and additive noise of covariance trace sigma^2 per
                               worker (Assumption 1d with beta = 0; data i.i.d. among
                               workers, Section 3): Delta P^(lam_bar) + (sigma^2/2) sup lam
                               N(lam), P and N the worker second moments of one
                               eigen-direction.

In one eigen-direction of eigenvalue lam the workers' values y (a row over workers) evolve
as y' = (y o (1 - eta lam theta) - eta theta o e) T_k ((5), (18)), theta_i ~ Bernoulli(p_i)
((3)), T_k in {I, V, Z} by (6); their second moment M = E[y^T y] follows exactly
M' = T_k^T (M o C + eta^2 c diag(p)) T_k with C_ij = (1 - eta lam p_i)(1 - eta lam p_j)
(i != j), C_ii = p_i (1 - eta lam)^2 + 1 - p_i and c the noise variance there; the loss of
u = X a is (lam/2) a^T M a. Every entry of C is >= 0 and non-increasing in lam for
eta <= 1/L, and T_k >= 0 entrywise, so P = a^T M_K a (from M_1 = 1 1^T, no noise) and
N = a^T M_K a (from 0, unit noise) are non-increasing in lam: the sup machinery of
:mod:`bounds.deadline` applies. There is no PL bound for MLL-SGD here: section 6 of the
derivation says what its proof would need.

The theorem is built in :mod:`bounds.mllsgd` (``deadline_quadratic``) and registered by the
paper's plugin; its aggregates reduce through :mod:`bounds.reduce` (``mllsgd_deadline_start``,
``mllsgd_deadline_noise``), which call the recursion here. Importing this module imports
numpy only.
"""

from __future__ import annotations

import numpy as np

from .deadline import (
    COARSE,
    START_POINTS,
    SUP_RTOL,
    DeadlineChoice,
    certified_sup,
    deadline_theorem,
    flat_batch,
    horizons,
    steps,
    worst_start,
)

KEY = "mllsgd.deadline_quadratic"
VARIANT = "derived"
DERIVATION = "bounds/derivations/mllsgd_deadline.md"
#: the largest number of floats one block of the recursion holds (~64 MB)
BLOCK = 1 << 23


def operator(k: int, q: int, tau: int) -> str:
    """T_k of (6): "Z" every q tau iterations, "V" every tau, else "I"."""
    return "Z" if k % (q * tau) == 0 else "V" if k % tau == 0 else "I"


def _moments(eta, lam, K: int, q: int, tau: int, a, p, V, Z) -> tuple[np.ndarray, np.ndarray]:
    """(P, N) [B, J]: a^T M a after the iterations 1..K-1 for the start M_1 = 1 1^T (no noise)
    and for M_1 = 0 with unit noise (module docstring); ``eta`` [B], ``lam`` [B, J]; in
    blocks of eigenvalues that keep the moments [B, J', 2, N, N] within BLOCK floats."""
    B, J = lam.shape
    step = max(1, BLOCK // (2 * B * p.size**2))
    parts = [_moments_block(eta, lam[:, j:j + step], K, q, tau, a, p, V, Z)
             for j in range(0, J, step)]
    return tuple(np.concatenate([part[k] for part in parts], axis=-1) for k in range(2))


def _moments_block(eta, lam, K, q, tau, a, p, V, Z) -> tuple[np.ndarray, np.ndarray]:
    B, J = lam.shape
    n = p.size
    x = np.minimum(eta[:, None] * lam, 1.0)[..., None]                  # eta lam [B, J, 1]
    shrink = 1.0 - x * p                                                # [B, J, N]
    C = shrink[..., :, None] * shrink[..., None, :]
    diag = np.arange(n)
    C[..., diag, diag] = p * (1.0 - x) ** 2 + 1.0 - p
    noise = (eta**2)[:, None, None] * p                                 # [B, 1, N]
    M = np.zeros((B, J, 2, n, n))
    M[:, :, 0] = 1.0
    for k in range(1, K):
        M *= C[:, :, None]
        M[:, :, 1, diag, diag] += noise
        T = {"Z": Z, "V": V, "I": None}[operator(k, q, tau)]
        if T is not None:
            M = T.T @ M @ T
    out = np.einsum("i,bjsik,k->bjs", a, M, a)
    return out[..., 0], out[..., 1]


def _batch(v):
    """The flattened batch of the scalar parameters (eta, L, mu, G1, Delta, K, q, tau) [B]."""
    names = ("eta", "L", "mu", "G1", "Delta", "K", "q", "tau")
    shape, flat = flat_batch(*(v.get(n, 0.0) for n in names))
    return shape, dict(zip(names, flat, strict=True))


def _grouped(v, compute) -> np.ndarray:
    """``compute(rows, eta, L, mu, G1, Delta, K, q, tau)`` [B'] for each group of batch
    entries sharing (K, q, tau) (their iteration schedule), assembled to the batch's shape."""
    shape, b = _batch(v)
    a, p = (np.asarray(v[k], dtype=float) for k in ("a", "p"))
    V, Z = (np.asarray(v[k], dtype=float) for k in ("V", "Z"))
    out = np.empty(b["eta"].size)
    keys = np.stack([b["K"], b["q"], b["tau"]], axis=-1)
    for K, q, tau in np.unique(keys, axis=0):
        rows = np.flatnonzero((keys == (K, q, tau)).all(axis=-1))
        step = max(1, BLOCK // (64 * 2 * p.size**2))  # rows of 64 eigenvalues per block
        for s in range(0, rows.size, step):
            r = rows[s:s + step]

            def moments(lam, sub, r=r, K=int(K), q=int(q), tau=int(tau)):
                return _moments(b["eta"][r][sub], lam, K, q, tau, a, p, V, Z)

            out[r] = compute(moments, {k: x[r] for k, x in b.items()})
    return out.reshape(shape)


def start_share(v, *, points: int = START_POINTS) -> np.ndarray:
    """The worst share of the start's gap left at u_K, [...]: the concave envelope of
    P(lam) = a^T M_K a (from M_1 = 1 1^T) at lam_bar = max(mu, G1/(2 Delta))
    (:func:`bounds.deadline.worst_start` on ``points`` per side), P(mu) without G1."""
    def compute(moments, b):
        with np.errstate(invalid="ignore", divide="ignore"):
            bar = np.clip(np.where(b["Delta"] > 0, b["G1"] / (2 * b["Delta"]), 0.0), b["mu"], b["L"])
        return worst_start(lambda lam, sub: moments(lam, sub)[0], b["mu"], b["L"], bar,
                           points=points)

    return _grouped(v, compute)


def noise_share(v, *, rtol: float = SUP_RTOL) -> np.ndarray:
    """sup_{lam in [mu, L]} lam N(lam), N = a^T M_K a from M_1 = 0 with unit noise per
    coordinate, certified to ``rtol`` (:func:`bounds.deadline.certified_sup`), [...]."""
    def compute(moments, b):
        return certified_sup(lambda lam, sub: moments(lam, sub)[1], b["mu"], b["L"], rtol=rtol)[0]

    return _grouped(v, compute)


def bound(*, coarse: bool = False, **params) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The bound of ``mllsgd.deadline_quadratic`` and its terms at ``params`` (the theorem's,
    broadcasting over the scalars), at the full precision or, ``coarse``, at
    ``bounds.deadline.COARSE`` (an upper bound within about 2% of it, for a search over many
    candidates). Parameters are not validated here: :meth:`Theorem.evaluate` does."""
    v = {k: np.asarray(x, dtype=float) for k, x in params.items()}
    precision = COARSE if coarse else {"rtol": SUP_RTOL, "points": START_POINTS}
    transient = v["Delta"] * start_share(v, points=precision["points"])
    noise = v["sigma"] ** 2 / 2 * noise_share(v, rtol=precision["rtol"])
    return transient + noise, {"transient": transient, "noise": noise}


def choose_deadline_period(key: str = "mllsgd.deadline_quadratic", *, taus, K, eta=None,
                           **params) -> DeadlineChoice:
    """The (tau, eta) minimising ``mllsgd.deadline_quadratic`` (derived by fedbound, not
    published; bounds/derivations/mllsgd_deadline.md), a bound on E F(u_K) - F* for MLL-SGD:
    for every tau of ``taus`` its horizon ``K`` (one number, a {tau: K_tau} mapping or a
    callable, e.g. the iterations that fit in a time budget with communication costs) and
    every step of ``eta`` (a number or a list; default :func:`deadline_steps` below 1/L).
    ``params``: L, mu, sigma, Delta, G1, q, a, p, V, Z of the theorem. Compared at the coarse
    precision (``bounds.deadline.COARSE``), the pick's bound at the full one."""
    thm = deadline_theorem(key, (KEY,), "choose_deadline_period", ("eta", "K", "tau"), params)
    horizon = horizons(list(taus), K, "K", "tau")
    etas = steps(eta, 1.0 / float(params["L"]))
    curve = []
    for tau, K_tau in horizon.items():
        given = {**params, "tau": tau, "K": K_tau, "eta": etas}
        broken = thm.violations(**{**given, "eta": float(etas.max())})
        if broken:
            raise ValueError(f"{key} at tau={tau}: " + "; ".join(map(str, broken)))
        values, _ = bound(coarse=True, **given)
        j = int(np.argmin(values))
        curve.append({"tau": tau, "eta": float(etas[j]), "bound": float(values[j]), "horizon": K_tau})
    best = min(curve, key=lambda r: (r["bound"], r["tau"]))
    value, terms = bound(**{**params, "tau": best["tau"], "K": best["horizon"], "eta": best["eta"]})
    terms = {k: float(v) for k, v in terms.items()}
    return DeadlineChoice(key, thm.variant, "tau", {"tau": best["tau"], "eta": best["eta"]},
                          float(value), terms, max(terms, key=terms.get), curve)
