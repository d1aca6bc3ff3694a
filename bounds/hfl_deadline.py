"""Deadline bounds for delay-sensitive hierarchical FL (Ali & Arafa 2025, Algorithm 1):
fedbound's own results on E f(x^{U+1}) - f*, the loss at the deadline T (derived by fedbound,
not published; bounds/derivations/hfl_deadline.md).

``hfl.deadline_quadratic``  the exact worst case over the quadratics with spectrum in [mu, L]
                            and additive noise of covariance trace sigma^2, data i.i.d. among
                            clients (Section II): Delta P(mu) + (sigma^2/2) sup lam N(lam), P
                            and N the second-moment recursion of one eigen-direction.
``hfl.deadline_pl``         mu-PL f (and L-smooth f_i with ||grad f_i - grad f|| <= zeta): the
                            per-round inequality of the iid variant of Theorem 2
                            (bounds/derivations/hfl_iid.md) turned into a contraction.

The theorems are built in :mod:`bounds.hfl` (``deadline_quadratic``, ``deadline_pl``) and
registered by the paper's plugin; their aggregates reduce through :mod:`bounds.reduce`
(``hfl_deadline_start``, ``hfl_deadline_noise``, ``hfl_deadline_pl``), which call the
recursions here. Importing this module imports numpy only.

Both are conditional on the delay path (the schedule t [..., U, G], zero rows padding rounds
after U, as every HFL result of :mod:`bounds.hfl`); their expectation over the delay law,
which bounds the unconditional loss at T by the tower property, is :func:`expected`
(Monte Carlo over sampled paths, the supremum taken after the average for the quadratic).
Scalar parameters broadcast against the schedule's batch axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .deadline import START_POINTS, SUP_RTOL, certified_sup, flat_batch, unroll, worst_start

if TYPE_CHECKING:  # annotations only: bounds.delays (scipy) is imported where it is used
    from . import delays as dl

#: the largest number of floats one block of the vectorised recursion holds (~64 MB)
BLOCK = 1 << 23


def _weights(sizes) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(sizes, dtype=float)
    return n / n.sum(), n


def _clipped(alpha: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """alpha lam, at most 1 (alpha <= 1/L up to the tolerance of the condition: a product
    1 + 1e-16 is 1, where rho = 1 - alpha lam = 0)."""
    return np.minimum(alpha * lam, 1.0)


def _count_factors(alpha, lam, sizes, rows):
    """log a^2 and v of one round (the recursion s' = a^2 s + v c of one eigen-coordinate,
    bounds/derivations/hfl_deadline.md, section 2) for every count row of ``rows`` [M, G]:
    with rho = 1 - alpha lam, a = 1 - sum_i w_i (1 - rho^t_i)/t_i and
    v = alpha^2 sum_i w_i^2 q_i/(|N_i| t_i^2), q_i = sum_{l < t_i} rho^(2l); ``alpha`` [B],
    ``lam`` [B, J]; returns [B, J, M] each."""
    w, n = _weights(sizes)
    with np.errstate(divide="ignore"):
        l1 = np.log1p(-_clipped(alpha[:, None], lam))[..., None, None]  # log rho [B, J, 1, 1]
    x = rows * l1                                                       # t log rho [B, J, M, G]
    with np.errstate(invalid="ignore", divide="ignore"):
        drop = (w * -np.expm1(x) / rows).sum(-1)                        # 1 - a
        q = np.expm1(2 * x) / np.expm1(2 * l1)                           # sum rho^(2l)
        log_a2 = 2 * np.log1p(-drop)
    q = np.where(np.isnan(q), rows, q)                                  # rho = 1: q = t
    v = alpha[:, None, None] ** 2 * (w * w / (n * rows * rows) * q).sum(-1)
    return log_a2, v


def _recursion(alpha, lam, sizes, t, real) -> tuple[np.ndarray, np.ndarray]:
    """(P, N) [B, J] after the schedules ``t`` [B, U, G] (``real`` [B, U] its real rounds):
    P = prod_u a_u^2 (the start's share) and N = sum_u v_u prod_{u' > u} a_{u'}^2 (the
    noise's), by the forward recursion N <- a_u^2 N + v_u. The factors are computed once per
    distinct count row of the batch (rounds after U: a = 1, v = 0), in blocks of the batch."""
    B, U, G = t.shape
    J = lam.shape[-1]
    rows, index = np.unique(np.where(real[..., None], t, 1.0).reshape(-1, G), axis=0,
                            return_inverse=True)
    M = rows.shape[0]
    index = np.where(real, index.reshape(B, U), M)                      # padding: the last id
    step = max(1, BLOCK // max(1, J * (M + 1) * G))
    P, N = np.ones((B, J)), np.zeros((B, J))
    for s in range(0, B, step):
        b = slice(s, s + step)
        log_a2, v = _count_factors(alpha[b], lam[b], sizes, rows)
        a2 = np.concatenate([np.exp(log_a2), np.ones(log_a2.shape[:-1] + (1,))], axis=-1)
        v = np.concatenate([v, np.zeros(v.shape[:-1] + (1,))], axis=-1)
        Pb, Nb, ids = P[b], N[b], index[b]
        for u in range(U):
            k = ids[:, u]
            if (k == k[0]).all():                                       # one row for the block
                a2u, vu = a2[:, :, k[0]], v[:, :, k[0]]
            else:
                a2u = np.take_along_axis(a2, k[:, None, None], -1)[..., 0]
                vu = np.take_along_axis(v, k[:, None, None], -1)[..., 0]
            Nb *= a2u
            Nb += vu
            Pb *= a2u
    return P, N


def _schedule_batch(v) -> tuple[tuple, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The batch shape and the flattened alpha, L, mu [B], t [B, U, G] and real [B, U]."""
    t = np.asarray(v["t"], dtype=float)
    shape, (alpha, L, mu, tb) = flat_batch(v["alpha"], v["L"], v["mu"], t, tail=t.shape[-2:])
    return shape, alpha, L, mu, tb, tb[..., 0] > 0


def start_share(v) -> np.ndarray:
    """The worst share of the start's gap left at the deadline, [...]: with
    lam_bar = max(mu, G1/(2 Delta)), sup E_nu P(lam) over the spreads nu of the gap over
    eigenvalues in [mu, L] with mean curvature >= lam_bar (:func:`bounds.deadline.worst_start`;
    ||grad f(x^1)||^2 = 2 E_nu lam times the gap), P(lam) = prod_u a_u(lam)^2. Without G1
    (G1 <= 2 mu Delta) it is P(mu): P is non-increasing in lam for alpha <= 1/L. ``v``: the
    theorem's values, the schedule ``t`` [..., U, G] validated (``bounds.reduce.schedule``)."""
    t = np.asarray(v["t"], dtype=float)
    shape, (alpha, L, mu, G1, Delta, tb) = flat_batch(
        v["alpha"], v["L"], v["mu"], v.get("G1", 0.0), v["Delta"], t, tail=t.shape[-2:])
    real = tb[..., 0] > 0
    sizes = v["sizes"]
    with np.errstate(invalid="ignore", divide="ignore"):
        bar = np.clip(np.where(Delta > 0, G1 / (2 * Delta), 0.0), mu, L)

    def share(lam, rows):
        return _recursion(alpha[rows], lam, sizes, tb[rows], real[rows])[0]

    return worst_start(share, mu, L, bar).reshape(shape)


def noise_share(v) -> np.ndarray:
    """sup_{lam in [mu, L]} lam N(lam), certified (:func:`bounds.deadline.certified_sup`):
    the noise's share of the loss at the deadline per unit noise variance, in the worst
    eigen-direction, [...]."""
    shape, alpha, L, mu, t, real = _schedule_batch(v)
    sizes = v["sizes"]

    def noise(lam, rows):
        return _recursion(alpha[rows], lam, sizes, t[rows], real[rows])[1]

    return certified_sup(noise, mu, L)[0].reshape(shape)


# ---------------------------------------------------------------------- the PL bound

#: the parts of the PL bound's per-round remainder, in the order of its terms
PL_PARTS = ("noise", "local drift", "noise-drift coupling", "heterogeneity")


def pl_rounds(v) -> tuple[tuple, dict[str, np.ndarray]]:
    """The unrolled PL recursion (bounds/derivations/hfl_deadline.md, section 5) of a batch of
    schedules: the contraction product K = prod_u kappa_u and, per part, the discounted sums
    D_k = sum_u x_{k,u} prod_{u' > u} kappa_{u'} of
    x_noise = y_u, x_drift = (1 + theta_u) Gamma_u z_u, x_coupling = Gamma_u^{1/2} c_u,
    x_heterogeneity = Gamma_u ((alpha L s_u)^2 + alpha L s_u^2/tau_u) (zeta > 0 only), with
    tau_u = max_i t_i^u - 1, theta_u = alpha L tau_u, Gamma_u = (1 + alpha L)^(2 (tau_u - 1)),
    s_u = sum_i w_i (t_i^u - 1)/2, rho_u = (1 + [zeta > 0]) x_heterogeneity-part,
    kappa_u = 1 - alpha mu (1 - rho_u) (rho_u <= 1), 1 + alpha L (rho_u - 1) (rho_u > 1).
    ``v``: the theorem's values, the schedule ``t`` validated (``bounds.reduce.schedule``)."""
    t = np.asarray(v["t"], dtype=float)
    shape, (alpha, L, mu, zeta, tb) = flat_batch(v["alpha"], v["L"], v["mu"], v["zeta"], t,
                                                 tail=t.shape[-2:])
    real = tb[..., 0] > 0
    w, n = _weights(v["sizes"])
    N = n.sum()
    tt = np.where(real[..., None], tb, 1.0)                             # [B, U, G]
    aL = (alpha * L)[:, None]
    tau = tt.max(axis=-1) - 1.0                                         # [B, U]
    theta = aL * tau
    with np.errstate(over="ignore"):  # beyond float64: Gamma_u = inf, the bound inf (verify
        gamma = (1.0 + aL) ** (2.0 * (tau - 1.0))  # refuses it by name: adapter.finite_bound)
    s = (w * (tt - 1.0) / 2.0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        spread = np.where(tau > 0, gamma * (aL * aL * s * s + aL * s * s / tau), 0.0)
    rho = np.where(zeta[:, None] > 0, 2.0, 1.0) * spread
    am = (alpha * mu)[:, None]
    kappa = np.where(rho <= 1.0, 1.0 - am * (1.0 - rho), 1.0 + aL * (rho - 1.0))
    parts = {"noise": (n / tt).sum(-1) / N**2,
             "local drift": (1.0 + theta) * gamma * ((tt - 1.0) / 2.0).sum(-1) / N,
             "noise-drift coupling": np.sqrt(gamma) * (n * (1.0 - 1.0 / tt)).sum(-1) / N**2,
             "heterogeneity": np.where(zeta[:, None] > 0, spread, 0.0)}
    K, sums = unroll(kappa, parts, real)
    return shape, {"contraction": K.reshape(shape),
                   **{k: s_.reshape(shape) for k, s_ in sums.items()}}


# ---------------------------------------------------------------------- over delay paths


@dataclass(frozen=True)
class ExpectedDeadline:
    """E over the delay law of a deadline bound at (S, T), per step of ``alpha`` [A]: the
    Monte-Carlo estimate ``mean`` over ``paths`` sampled delay paths and its 95% half-width
    ``half`` (the paths' spread of the per-path bound; for the quadratic bound, whose
    supremum is taken after the average, the spread of its value at the maximiser), the
    terms at each step, the mean number of rounds and each group's mean count per round."""

    key: str
    mean: np.ndarray
    half: np.ndarray
    terms: dict[str, np.ndarray]
    paths: int
    mean_U: float
    mean_t: list


Z95 = 1.959963984540054


def expected(key: str, model: dl.DelayModel, S, T, *, alpha, paths: int = 256, seed: int = 0,
             ramp: bool = False, rtol: float = SUP_RTOL, points: int = START_POINTS,
             **params) -> ExpectedDeadline:
    """E_delays of the deadline bound ``key`` ("hfl.deadline_quadratic" or "hfl.deadline_pl")
    at sync time S and deadline T for each step of ``alpha`` (a number or an array [A]),
    over ``paths`` delay paths drawn by :func:`bounds.delays.sample_schedules` from ``seed``
    (the same paths for every step). ``params``: L, mu, sigma, Delta, sizes (and zeta for
    the PL bound). By the tower property E_delays[bound(path)] bounds E f(x^{U+1}) - f*;
    for the quadratic bound the supremum over lam is taken after the average over paths
    (the problem is fixed before the delays are drawn), which is smaller and still valid;
    ``rtol`` and ``points``: the precision of that supremum and of the start's worst share
    (:func:`bounds.deadline.certified_sup`, :func:`bounds.deadline.worst_start`: the value is
    an upper bound whatever they are; ``bounds.deadline.COARSE`` for a search)."""
    from . import delays as dl
    from .registry import get

    thm = get(key)
    alphas = np.atleast_1d(np.asarray(alpha, dtype=float))
    sizes = dl.validate_sizes(params["sizes"])
    if len(sizes) != model.groups:
        raise ValueError(f"sizes has {len(sizes)} groups, the delay model {model.groups}")
    sched = dl.sample_schedules(model, S, T, paths, np.random.default_rng(seed), ramp=ramp)
    t = sched.t.astype(float)
    given = {**params, "sizes": np.asarray(sizes), "alpha": alphas[:, None]}
    broken = thm.violations(**{**given, "t": t[:1]})
    if broken:
        raise ValueError(f"{key}: " + "; ".join(map(str, broken)))
    if key == "hfl.deadline_pl":
        values = np.asarray(thm.evaluate(**given, t=t))                # [A, R]
        terms = {k: np.asarray(x).mean(axis=-1) for k, x in thm.terms(**given, t=t).items()}
        with np.errstate(over="ignore", invalid="ignore"):
            half = Z95 * values.std(axis=-1, ddof=1) / math.sqrt(paths) if paths > 1 else \
                np.full(len(alphas), math.inf)
        half = np.where(np.isfinite(values).all(axis=-1), half, math.inf)
        return ExpectedDeadline(key, values.mean(axis=-1), half, terms, paths,
                                float(sched.U.mean()), _mean_counts(t))
    return _expected_quadratic(key, alphas, t, sched, paths, params, rtol, points)


def _mean_counts(t: np.ndarray) -> list:
    """Each group's mean count t_i^u over the real rounds of the paths ``t`` [R, U, G]."""
    real = t[..., 0] > 0
    return (t[real].mean(axis=0)).tolist()


def _expected_quadratic(key, alphas, t, sched, paths, params, rtol, points) -> ExpectedDeadline:
    """Delta E P(mu) + (sigma^2/2) sup_lam lam E N(lam): E N is non-increasing in lam as
    every path's N is, so :func:`certified_sup` applies to the average."""
    L, mu = float(params["L"]), float(params["mu"])
    sizes = params["sizes"]
    real = t[..., 0] > 0
    A, R = len(alphas), t.shape[0]
    rep_alpha = np.repeat(alphas, R)
    rep_t, rep_real = np.tile(t, (A, 1, 1)), np.tile(real, (A, 1))

    def mean_noise(lam, rows):                                          # lam [A', J]
        pick = (rows[:, None] * R + np.arange(R)).ravel()
        _, N = _recursion(rep_alpha[pick], np.repeat(lam, R, axis=0), sizes, rep_t[pick],
                          rep_real[pick])
        return N.reshape(len(rows), R, -1).mean(axis=1)

    def mean_share(lam, rows):
        pick = (rows[:, None] * R + np.arange(R)).ravel()
        P, _ = _recursion(rep_alpha[pick], np.repeat(lam, R, axis=0), sizes, rep_t[pick],
                          rep_real[pick])
        return P.reshape(len(rows), R, -1).mean(axis=1)

    Delta, sigma, G1 = float(params["Delta"]), float(params["sigma"]), float(params.get("G1", 0.0))
    bar = min(max(G1 / (2 * Delta) if Delta > 0 else mu, mu), L)
    lo, hi = np.full(A, mu), np.full(A, L)
    start = worst_start(mean_share, lo, hi, np.full(A, bar), points=points)
    upper, _, at = certified_sup(mean_noise, lo, hi, rtol=rtol)
    transient, noise = Delta * start, sigma**2 / 2 * upper
    P_at, N_at = _recursion(rep_alpha, np.stack([np.full(A * R, bar), np.repeat(at, R)], -1),
                            sizes, rep_t, rep_real)
    per_path = (Delta * P_at[:, 0] + sigma**2 / 2 * np.repeat(at, R) * N_at[:, 1]).reshape(A, R)
    half = Z95 * per_path.std(axis=1, ddof=1) / math.sqrt(R) if R > 1 else np.full(A, math.inf)
    return ExpectedDeadline(key, transient + noise, half, {"transient": transient, "noise": noise},
                            paths, float(sched.U.mean()), _mean_counts(t))


#: the results of this module, their one variant and their derivation
KEYS = ("hfl.deadline_quadratic", "hfl.deadline_pl")
VARIANT = "derived"
DERIVATION = "bounds/derivations/hfl_deadline.md"
