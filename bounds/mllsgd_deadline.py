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
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from .core import Aggregate, Condition, Param, Theorem
from .deadline import (
    COARSE,
    LABEL,
    START_POINTS,
    SUP_RTOL,
    certified_sup,
    flat_batch,
    worst_start,
)
from .references import cite

PAPER = cite("mllsgd")
VARIANT = "derived"
KEY = "mllsgd.deadline_quadratic"
TITLE = "MLL-SGD loss at the end, quadratics in [mu, L]"
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


# ---------------------------------------------------------------------- the theorem

eta, L, mu, sigma, Delta, G1, K, q, tau = sp.symbols("eta L mu sigma Delta G_1 K q tau",
                                                      nonnegative=True)
SYMBOLS = {"eta": eta, "L": L, "mu": mu, "sigma": sigma, "Delta": Delta, "G1": G1, "K": K,
           "q": q, "tau": tau}
P_hat, N_sup = sp.symbols("P_hat N_sup", nonnegative=True)
PARAMS = {
    "eta": Param("eta", "step size, (2)", "positive"),
    "L": Param("L", "smoothness, Assumption 1a (the quadratic's largest eigenvalue)", "positive"),
    "mu": Param("mu", "the quadratic's smallest eigenvalue", "positive"),
    "sigma": Param("sigma", "E||g(x) - grad F(x)||^2 <= sigma^2, Assumption 1d with beta = 0",
                   "nonnegative"),
    "Delta": Param("Delta", "initial gap F(x_1) - F*", "nonnegative"),
    "G1": Param("G1", "a lower bound on ||grad F(x_1)||^2 (0: none; at most 2 L Delta)",
                "nonnegative"),
    "K": Param("K", "iterations: the bound is on u_K, after iterations 1..K-1 ((13))",
               "positive_integer"),
    "q": Param("q", "sub-network averagings per hub averaging, (6)", "positive_integer"),
    "tau": Param("tau", "local iterations per sub-network averaging, (6)", "positive_integer"),
    "a": Param("a", "worker weights a_i = w_i / w_tot (Section 5)", "weights", vector=True),
    "p": Param("p", "probability that worker i takes a gradient step, (3)", "probability",
               vector=True),
    "V": Param("V", "[N, N] sub-network averaging V = diag(v) E E^T, (6)", "nonnegative",
               vector=True),
    "Z": Param("Z", "[N, N] sub-network and hub averaging Z = diag(v) E H E^T, (7)",
               "nonnegative", vector=True),
}
_USES = ("eta", "L", "mu", "G1", "Delta", "K", "q", "tau", "a", "p", "V", "Z")
AGGREGATES = [
    Aggregate(P_hat, sp.Symbol(r"\hat{P}_K(\bar\lambda)"), start_share, _USES),
    Aggregate(N_sup, sp.Symbol(r"\sup_{\lambda \in [\mu, L]} \lambda N_K(\lambda)"), noise_share,
              _USES),
]
OWN = f"derived by fedbound, not published ({DERIVATION})"
CONDITIONS = [
    Condition("eta <= 1/L", sp.LessThan(eta, 1 / L),
              f"{OWN}: every entry of C is >= 0 and non-increasing in the eigenvalue (the "
              f"maximisations over [mu, L]); {PAPER}, Theorem 1's (12) implies it"),
    Condition("mu <= L", sp.LessThan(mu, L), f"{OWN}: the spectrum lies in [mu, L]"),
    Condition("G1 <= 2 L Delta", sp.LessThan(G1, 2 * L * Delta),
              f"{OWN}: ||grad F(x_1)||^2 <= 2 L (F(x_1) - F*) on the class"),
]
NOTE = (
    f"Derived by fedbound, not published; see {DERIVATION}. MLL-SGD ({PAPER}, Algorithm 1, "
    r"(3)-(8), all workers starting at $x_1$) on $F(x) = \frac12 (x - x^*)^\top A (x - x^*) + "
    r"F^*$ with the spectrum of $A$ in $[\mu, L]$, every worker's stochastic gradient "
    r"$\nabla F(x) + \xi$ with $\xi$ independent across workers and iterations, zero-mean, of a "
    r"covariance of trace at most $\sigma^2$ that does not depend on $x$ (Assumption 1d with "
    r"$\beta = 0$, data i.i.d. among workers). The left-hand side is $\mathbb{E} F(u_K) - F^*$, "
    r"$u_K = X_K a$ after iterations $1..K-1$ (the last iterate of (13)). Per eigenvalue the "
    r"worker second moments follow $M' = T_k^\top (M \circ C + \eta^2 c\, \mathrm{diag}(p)) T_k$ "
    r"exactly; $\hat{P}$ is the upper concave envelope of $P = a^\top M_K a$ (from "
    r"$M_1 = 1 1^\top$) at $\bar\lambda = \max(\mu, G_1/(2\Delta))$, $N$ the same from $0$ with "
    r"unit noise; both are bounded above on grids, the supremum of $\lambda N$ to 0.1%.")


def deadline_quadratic(variant: str = VARIANT) -> Theorem:
    """``mllsgd.deadline_quadratic``: Delta P^(lam_bar) + (sigma^2/2) sup lam N(lam) (module
    docstring; bounds/derivations/mllsgd_deadline.md)."""
    if variant != VARIANT:
        raise ValueError(f"variant {variant!r}: {KEY} has one variant, {VARIANT!r}")
    return Theorem(
        key=KEY, variant=VARIANT, title=TITLE + LABEL,
        citation=f"{PAPER}, Algorithm 1, (3)-(8), Assumption 1; the bound derived by fedbound, "
                 "not published",
        lhs=r"\mathbb{E}\, F(u_K) - F^*", params=PARAMS,
        term_exprs={"transient": Delta * P_hat, "noise": sigma**2 / 2 * N_sup},
        symbols=SYMBOLS, conditions=CONDITIONS, aggregates=AGGREGATES, step="eta",
        status="holds", notes=NOTE)
