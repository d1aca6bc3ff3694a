"""Independent computations for the HFL bounds of Ali & Arafa 2025 (bounds.hfl), shared by the
tests of fedbound's refined and iid variants (derived by fedbound, not published): the exact
left-hand side of Algorithm 1 on a quadratic with Gaussian noise (second moments propagated
in closed form, no simulator) and plain-loop transcriptions of the iid variant's formulas."""

import math

import numpy as np


def exact_quadratic(lam, e1, sizes, t, alpha, sigma):
    """E over the SGD noise of (1/U) sum_u ||grad f(x^u)||^2 for f = 1/2 sum_j lam_j (x_j -
    x*_j)^2 with additive N(0, sigma^2/d I) noise per client, on the schedule t [U, G],
    following (3)-(12) of the paper coordinate by coordinate (linear-Gaussian: second moments
    propagate exactly). Also the a-posteriori G (max E||g~||^2 over the visited local points,
    all the derivation uses of Assumption 3) and Delta = f(x^1) - f*."""
    n = np.asarray(sizes, dtype=float)
    d, w = lam.size, n / n.sum()
    b = 1 - alpha * lam
    s = e1**2
    grads, G2 = [], 0.0
    for u in range(t.shape[0]):
        grads.append((lam**2 * s).sum())
        a, v = np.zeros(d), np.zeros(d)
        for i in range(n.size):
            ti = int(t[u, i])
            powers = b[:, None] ** (2 * np.arange(ti))
            var = alpha**2 * sigma**2 / (d * n[i])
            a += w[i] * (1 - 1 / ti + b**ti / ti)
            v += var * (w[i] / ti) ** 2 * powers.sum(1)
            before = np.concatenate([np.zeros((d, 1)), np.cumsum(powers, 1)[:, :-1]], 1)
            G2 = max(G2, (lam[:, None] ** 2 * (powers * s[:, None] + var * before)).sum(0).max()
                     + sigma**2)
        s = a**2 * s + v
    return float(np.mean(grads)), math.sqrt(G2), 0.5 * float((lam * e1**2).sum())


def iid_reference(p, t):
    """Theorem I of bounds/derivations/hfl_iid.md (the iid variant of Theorem 2), transcribed
    with plain loops over rounds and groups; +inf where rho >= 1."""
    n, a, L, s = list(p["sizes"]), p["alpha"], p["L"], p["sigma"]
    N, U = sum(n), len(t)
    tau = max(max(row) for row in t) - 1
    theta = a * L * tau
    growth = (1 + a * L) ** (2 * (tau - 1))
    rho = growth * theta * (1 + theta) / 4
    noise = drift = coupling = 0.0
    for row in t:
        for i, ti in enumerate(row):
            noise += n[i] / ti
            drift += sum(range(int(ti))) / ti          # (1/t) sum_{l<t} l = (t - 1)/2
            coupling += n[i] * 2 * sum(range(int(ti))) / ti**2   # (2/t^2) sum_{l<t} l = 1 - 1/t
    raw = (2 * p["Delta"] / (a * U) + a * L * s**2 * noise / (N**2 * U)
           + (1 + theta) * a**2 * L**2 * s**2 * growth * drift / (N * U)
           + a**2 * L**2 * s**2 * math.sqrt(growth) * coupling / (N**2 * U))
    return raw / (1 - rho) if rho < 1 else math.inf


def exact_final_gap(lam, e1, sizes, t, alpha, noise):
    """E f(x^{U+1}) - f* for f = 1/2 sum_j lam_j (x_j - x*_j)^2, the start's error ``e1`` in
    the eigen-coordinates and ``noise`` [d] the variance of a client's gradient noise per
    coordinate (additive, independent), on the schedule t [U, G] (zero rows pad): Algorithm 1's
    local steps and upload (3)-(12) transcribed with plain loops over rounds, groups and local
    steps, the mean and variance of each coordinate propagated exactly."""
    lam, noise = np.asarray(lam, dtype=float), np.asarray(noise, dtype=float)
    n = np.asarray(sizes, dtype=float)
    w = n / n.sum()
    mean, var = np.asarray(e1, dtype=float).copy(), np.zeros(lam.size)
    for row in np.asarray(t):
        if row[0] == 0:
            break
        factor, added = np.zeros(lam.size), np.zeros(lam.size)
        for i, ti in enumerate(row):
            ti = int(ti)
            local, local_noise = np.ones(lam.size), np.zeros(lam.size)
            for _ in range(ti):             # y <- (1 - alpha lam) y - alpha xi, xi of variance noise/n_i
                local = (1 - alpha * lam) * local
                local_noise = (1 - alpha * lam) ** 2 * local_noise + alpha**2 * noise / n[i]
            factor += w[i] * (1 + (local - 1) / ti)
            added += (w[i] / ti) ** 2 * local_noise
        mean, var = factor * mean, factor**2 * var + added
    return 0.5 * float((lam * (mean**2 + var)).sum())
