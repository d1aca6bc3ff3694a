"""Reductions of vector parameters to the scalar aggregates of a theorem, numpy only.

Each reducer maps the checked parameter values (worker axis last) to an aggregate's value
(``Aggregate.reduce``). They are named, module-level functions so that a theorem's manifest
(:mod:`bounds.manifest`) can name them and the numeric theorem can import them without sympy;
a reducer with keyword arguments (:func:`k_statistic`) is given as a ``functools.partial``
whose keywords the manifest stores. A result whose parameters are also checked against each
other names its check here too (:func:`afl_counts`, a theorem's ``cross_check``). The
helpers the paper modules share with them (:func:`schedule`, :func:`kappa_of`,
:func:`k_statistics`, ...) live here, and those modules import them back. Importing this
module imports numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from . import hfl_deadline, mllsgd_deadline
from .numeric import integral
from .references import cite

Values = Mapping[str, np.ndarray]


def weighted_square_probability(v: Values) -> np.ndarray:
    """sum_i a_i^2 p_i (Castiglia et al. 2021, Theorem 1, eq. (13))."""
    return (v["a"] ** 2 * v["p"]).sum(axis=-1)


def weighted_probability(v: Values) -> np.ndarray:
    """P = sum_i a_i p_i (Castiglia et al. 2021, Theorem 1, eq. (13))."""
    return (v["a"] * v["p"]).sum(axis=-1)


def sum_of_variances(v: Values) -> np.ndarray:
    """sum_j sigma_j^2 over the blocks (Das et al. 2022, Theorem 1, eq. (15))."""
    return (v["sigma"] ** 2).sum(axis=-1)


def sum_of_variances_per_step(v: Values) -> np.ndarray:
    """sum_j sigma_j^2 / K_j over the blocks (the refined variant of Das et al. 2022,
    Theorem 1: derived by fedbound, not published)."""
    return (v["sigma"] ** 2 / v["K"]).sum(axis=-1)


# ---------------------------------------------------------------------------- hfl
# Ali & Arafa 2025 (bounds.hfl): the schedule t [..., U, G] (zero rows pad rounds after U),
# the group sizes [G] and t_max [G]; every reduction keeps the batch axes [...].

HFL = cite("hfl")


def schedule(t) -> tuple[np.ndarray, np.ndarray]:
    """Validated schedule ``t`` [..., U, G] (float64 holding whole numbers: a count of 1e100
    is evaluated as that number, never saturated at the int64 maximum) and the mask of real
    rounds [..., U].

    Raises ValueError naming the entry if t is not an integer array, has a row mixing zero
    and non-zero counts (t_i^u >= 1 by (7)), a zero row before a non-zero one, or no
    real round at all."""
    arr = np.asarray(t, dtype=float)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim < 2 or arr.shape[-2] == 0:
        raise ValueError(f"t must have shape [..., U, G] with U >= 1, got {arr.shape}")
    bad = (arr != np.floor(arr)) | (arr < 0)
    if bad.any():
        idx = tuple(int(k) for k in np.argwhere(bad)[0])
        raise ValueError(f"t{list(idx)}={arr[idx]:g} must be an integer >= 0")
    real = arr > 0
    rows = real.all(axis=-1)
    mixed = real.any(axis=-1) & ~rows
    if mixed.any():
        idx = tuple(int(k) for k in np.argwhere(mixed)[0])
        raise ValueError(f"t row {list(idx)} mixes zero and non-zero counts: every group does "
                         f"t_i^u >= 1 local iterations in a real round ({HFL}, eq. (7))")
    later = np.flip(np.logical_or.accumulate(np.flip(rows, -1), -1), -1)
    if (later & ~rows).any():
        idx = tuple(int(k) for k in np.argwhere(later & ~rows)[0])
        raise ValueError(f"t row {list(idx)} is zero before a real round: zero rows may only "
                         "pad the end of a schedule")
    if not rows[..., 0].all():
        raise ValueError(f"t has a schedule without any round (U >= 1 by {HFL}, eq. (13))")
    return arr, rows


def kappa_of(sizes) -> np.ndarray:
    """kappa = |N_g| sum_j |N_j|^2 / (sum_i |N_i|)^2 of Theorem 1 (Ali & Arafa 2025,
    Theorem 1, eq. (19)); 1 <= kappa <= |N_g|, and kappa = 1 iff all groups have equal size
    (Cauchy-Schwarz)."""
    n = np.asarray(sizes, dtype=float)
    return n.shape[-1] * (n * n).sum(-1) / n.sum(-1) ** 2


def group_weight(n: np.ndarray) -> np.ndarray:
    """W = |N_g| / N^2 (fedbound's shorthand: kappa = W sum_i |N_i|^2)."""
    return n.shape[-1] / n.sum(-1) ** 2


def avg_l2(t: np.ndarray) -> np.ndarray:
    """(1/t) sum_{l=0}^{t-1} l^2 = (t-1)(2t-1)/6, used in (40) and the "direct
    simplifications" after it (Ali & Arafa 2025, proof of Theorem 2, Appendix D)."""
    return (t - 1) * (2 * t - 1) / 6


def coupling_count(t: np.ndarray) -> np.ndarray:
    """t - 1/t = (6/t^2) sum_{0 <= l' < l < t} (l - l'): the pairs (later gradient, earlier
    noise) of one round in the noise-drift coupling of the refined variant (derived by
    fedbound, not published)."""
    return t - 1.0 / t


def _sizes(v: Values) -> np.ndarray:
    return np.asarray(v["sizes"], dtype=float)


def checked_t_max(v: Values) -> np.ndarray:
    """``t_max`` [G], checked against the realised schedule: (22) needs t_i^u <= t_i^max
    (Ali & Arafa 2025, eq. (22))."""
    t, _ = schedule(v["t"])
    tm = np.asarray(v["t_max"], dtype=float)
    short = tm < t.max(axis=-2)
    if short.any():
        i = int(np.argwhere(short)[0][-1])
        raise ValueError(f"t_max[{i}]={tm[..., i].flat[0]:g} is below the realised "
                         f"max_u t[u, {i}]={t.max(axis=-2)[..., i].flat[0]}: {HFL}, eq. (22) needs "
                         "t_i^u <= t_i^max")
    return tm


def _over_rounds(v: Values, per_count, power: float, norm: int) -> np.ndarray:
    """(1/N^norm) sum_u sum_i |N_i|^power per_count(t_i^u) over the real rounds, [...]."""
    t, real = schedule(v["t"])
    n = _sizes(v)
    tf = np.where(real[..., None], t, 1).astype(float)
    cells = np.where(real[..., None], n**power * per_count(tf), 0.0)
    return cells.sum((-1, -2)) / n.sum(-1) ** norm


def _at_t_max(v: Values, per_count, power: float, norm: int) -> np.ndarray:
    """(1/N^norm) sum_i |N_i|^power per_count(t_i^max), [...]."""
    n = _sizes(v)
    return (n**power * per_count(checked_t_max(v))).sum(-1) / n.sum(-1) ** norm


def rounds(v: Values) -> np.ndarray:
    """U, the number of real rounds of the schedule (Ali & Arafa 2025, Section II)."""
    return schedule(v["t"])[1].sum(-1).astype(float)


def rounds_per_group(v: Values) -> np.ndarray:
    """U [..., 1], broadcasting over groups (Ali & Arafa 2025, Theorem 1, eq. (19))."""
    return rounds(v)[..., None]


def kappa(v: Values) -> np.ndarray:
    """kappa of the group sizes (:func:`kappa_of`)."""
    return kappa_of(v["sizes"])


def kappa_per_group(v: Values) -> np.ndarray:
    """kappa [..., 1], broadcasting over groups (Ali & Arafa 2025, Theorem 1, eq. (19))."""
    return kappa_of(v["sizes"])[..., None]


def kappa_per_cell(v: Values) -> np.ndarray:
    """kappa [..., 1, 1], broadcasting over rounds and groups (Ali & Arafa 2025, Lemma 1,
    eq. (18))."""
    return kappa_of(v["sizes"])[..., None, None]


def kappa_journal(v: Values) -> np.ndarray:
    """|N_g|^2 / (sum_i |N_i|^2)^2, the second term of (20) as the journal version prints it
    (Ali & Arafa 2025, Theorem 2, eq. (20))."""
    n = _sizes(v)
    return n.shape[-1] ** 2 / ((n * n).sum(-1)) ** 2


def previous_round_sum(v: Values) -> np.ndarray:
    """Z4 = W sum_{u=1}^U sum_i |N_i|^2 (t_i^{u-1})^2 with t_i^0 = 0 (Ali & Arafa 2025,
    Theorem 2, eq. (20), fourth term): the previous round's counts, over real rounds u >= 2."""
    t, real = schedule(v["t"])
    n = _sizes(v)
    prev = np.zeros(t.shape)
    prev[..., 1:, :] = t[..., :-1, :] * real[..., 1:, None]
    return group_weight(n) * (n**2 * prev**2).sum((-1, -2))


def within_round_sum(v: Values) -> np.ndarray:
    """Z5 = W sum_u sum_i |N_i|^2 (t-1)(2t-1)/6 (Ali & Arafa 2025, proof of Theorem 2,
    (40))."""
    t, real = schedule(v["t"])
    n = _sizes(v)
    return group_weight(n) * (n**2 * np.where(real[..., None], avg_l2(t.astype(float)), 0.0)
                              ).sum((-1, -2))


def t_max_sum(v: Values) -> np.ndarray:
    """M = W sum_i (|N_i| t_i^max)^2 (Ali & Arafa 2025, proof of Corollary 1, Appendix E)."""
    n = _sizes(v)
    return group_weight(n) * ((n * checked_t_max(v)) ** 2).sum(-1)


def refined_noise(v: Values) -> np.ndarray:
    """Y = (1/N^2) sum_u sum_i |N_i| / t_i^u (refined variant of Ali & Arafa 2025,
    Theorem 2: derived by fedbound, not published)."""
    return _over_rounds(v, np.reciprocal, 1, 2)


def refined_drift(v: Values) -> np.ndarray:
    """Z_r = (1/N) sum_u sum_i |N_i| (t-1)(2t-1)/6 (refined variant of Ali & Arafa 2025,
    Theorem 2: derived by fedbound, not published)."""
    return _over_rounds(v, avg_l2, 1, 1)


def refined_coupling(v: Values) -> np.ndarray:
    """C_r = (1/N^2) sum_u sum_i |N_i|^{3/2} (t - 1/t) (refined variant of Ali & Arafa 2025,
    Theorem 2: derived by fedbound, not published)."""
    return _over_rounds(v, coupling_count, 1.5, 2)


def refined_drift_at_t_max(v: Values) -> np.ndarray:
    """M_r = (1/N) sum_i |N_i| (t^max-1)(2t^max-1)/6 (refined variant of Ali & Arafa 2025,
    Corollary 1: derived by fedbound, not published)."""
    return _at_t_max(v, avg_l2, 1, 1)


def refined_coupling_at_t_max(v: Values) -> np.ndarray:
    """C_m = (1/N^2) sum_i |N_i|^{3/2} (t^max - 1/t^max) (refined variant of Ali & Arafa 2025,
    Corollary 1: derived by fedbound, not published)."""
    return _at_t_max(v, coupling_count, 1.5, 2)


def _half_local_steps(t: np.ndarray) -> np.ndarray:
    """(t-1)/2 = (1/t) sum_{l=0}^{t-1} l: the mean number of noisy local steps behind a local
    gradient of one round (the i.i.d. variant, derived by fedbound, not published)."""
    return (t - 1) / 2


def _later_fraction(t: np.ndarray) -> np.ndarray:
    """1 - 1/t = (2/t^2) sum_{l<t} l: the pairs (local gradient, earlier noise) of one round in
    the coupling of the i.i.d. variant (derived by fedbound, not published)."""
    return 1 - 1.0 / t


def iid_longest(v: Values) -> np.ndarray:
    """tau = max_u max_i t_i^u - 1 over the real rounds, [...]: the most noisy local steps
    behind any local gradient (i.i.d. variant of Ali & Arafa 2025, Theorem 2: derived by
    fedbound, not published)."""
    t, real = schedule(v["t"])
    return np.where(real[..., None], t, 1).max((-1, -2)).astype(float) - 1


def iid_drift(v: Values) -> np.ndarray:
    """Z_iid = (1/N) sum_u sum_i (t_i^u - 1)/2 (i.i.d. variant of Ali & Arafa 2025,
    Theorem 2: derived by fedbound, not published)."""
    return _over_rounds(v, _half_local_steps, 0, 1)


def iid_coupling(v: Values) -> np.ndarray:
    """C_iid = (1/N^2) sum_u sum_i |N_i| (1 - 1/t_i^u) (i.i.d. variant of Ali & Arafa 2025,
    Theorem 2: derived by fedbound, not published)."""
    return _over_rounds(v, _later_fraction, 1, 2)


def iid_longest_at_t_max(v: Values) -> np.ndarray:
    """tau_m = max_i t_i^max - 1 (i.i.d. variant of Ali & Arafa 2025, Corollary 1: derived
    by fedbound, not published)."""
    return checked_t_max(v).max(-1) - 1


def iid_drift_at_t_max(v: Values) -> np.ndarray:
    """Z_m = (1/N) sum_i (t_i^max - 1)/2 (i.i.d. variant of Ali & Arafa 2025, Corollary 1:
    derived by fedbound, not published)."""
    return _at_t_max(v, _half_local_steps, 0, 1)


def iid_coupling_at_t_max(v: Values) -> np.ndarray:
    """C_m = (1/N^2) sum_i |N_i| (1 - 1/t_i^max) (i.i.d. variant of Ali & Arafa 2025,
    Corollary 1: derived by fedbound, not published)."""
    return _at_t_max(v, _later_fraction, 1, 2)


def total_size(v: Values) -> np.ndarray:
    """N = sum_i |N_i| (Ali & Arafa 2025, Section II)."""
    return _sizes(v).sum(-1)


def group_sizes(v: Values) -> np.ndarray:
    """|N_i| [..., G] (Ali & Arafa 2025, Theorem 1, eq. (19))."""
    return _sizes(v)


def group_gaps(v: Values) -> np.ndarray:
    """Delta_i [..., G] (Ali & Arafa 2025, Theorem 1, eq. (19))."""
    return np.asarray(v["Delta"], dtype=float)


def iterations_per_group(v: Values) -> np.ndarray:
    """A_i = sum_u t_i^u [..., G] (Ali & Arafa 2025, Theorem 1, eq. (19))."""
    return schedule(v["t"])[0].sum(-2).astype(float)


def squares_before_last_round(v: Values) -> np.ndarray:
    """Q_i = sum_{u=1}^{U-1} (t_i^u)^2 per group, the last term of (19) (Ali & Arafa 2025,
    Theorem 1, eq. (19))."""
    t, real = schedule(v["t"])
    last = real & ~np.concatenate([real[..., 1:], np.zeros_like(real[..., :1])], axis=-1)
    keep = real & ~last
    return (np.where(keep[..., None], t, 0).astype(float) ** 2).sum(-2)


def squared_counts(v: Values) -> np.ndarray:
    """(t_i^u)^2 [..., U, G] (Ali & Arafa 2025, Lemma 1, eq. (18))."""
    return schedule(v["t"])[0].astype(float) ** 2


# ---------------------------------------------------------------------------- afl
# Yang et al. 2022 (bounds.afl): K, a constant or per-round local-step counts [..., workers].

AFL = cite("afl")


def k_statistics(K_values) -> dict[str, float]:
    """The K statistics of Theorem 2 (Yang et al. 2022, Theorem 2) from a constant or an
    array [..., workers]: ``harmonic`` = mean_t (1/K_t), ``mean`` = mean_t Kbar_t,
    ``quadratic`` = mean_t Khat_t^2, ``max`` = max K_{t,i}, ``quadratic_max`` =
    max_t Khat_t^2 (leading axes averaged)."""
    k = np.asarray(K_values, dtype=float)
    if k.ndim == 0:
        k = k[None]
    return {
        "harmonic": float(np.mean(np.mean(1.0 / k, axis=-1))),
        "mean": float(np.mean(np.mean(k, axis=-1))),
        "quadratic": float(np.mean(np.mean(k * k, axis=-1))),
        "max": float(np.max(k)),
        "quadratic_max": float(np.max(np.mean(k * k, axis=-1))),
    }


def k_statistic(v: Values, *, name: str, axis: str | None) -> np.ndarray:
    """The K statistic ``name`` of :func:`k_statistics`; with ``axis`` ("m" or "M") the last
    axis of an array K must have that many workers (the workers of a round)."""
    k = np.asarray(v["K"])
    if axis is not None and k.ndim >= 1 and np.ndim(v[axis]) == 0 and k.shape[-1] != v[axis]:
        raise ValueError(f"K has {k.shape[-1]} entries per round, expected {axis}={v[axis]:g} "
                         f"(the last axis of K is the workers of a round)")
    return np.asarray(k_statistics(k)[name])


def afl_counts(params: Mapping, given: Mapping[str, object], vals: Values) -> Values:
    """``vals`` once the AFL parameters are checked against each other: m <= M and m' <= M
    (among all given values) and tau an integer (Yang et al. 2022, Algorithm 1, Section 4.2
    and Theorem 2); ValueError otherwise."""
    counts = {n: vals[n] if n in vals else params[n].check(v)  # vals: checked already
              for n, v in given.items() if n in ("m", "m_prime", "M")}
    for small in ("m", "m_prime"):
        if small in counts and "M" in counts and np.any(counts[small] > counts["M"]):
            raise ValueError(f"{small}={np.max(counts[small]):g} exceeds "
                             f"M={np.min(counts['M']):g}: at most M workers can report "
                             f"({AFL}, Algorithm 1 and Section 4.2)")
    if "tau" in vals and not integral(vals["tau"]):
        raise ValueError(f"tau={vals['tau']} must be an integer number of rounds >= 0 "
                         f"({AFL}, Theorem 2)")
    return vals


# ---------------------------------------------------------------------------- deadline bounds
# fedbound's bounds on the loss at the deadline (derived by fedbound, not published;
# bounds/derivations/*_deadline.md): the recursions live in bounds.hfl_deadline and
# bounds.mllsgd_deadline; these name them for the theorems (and their manifests).


def hfl_deadline_start(v: Values) -> np.ndarray:
    """The worst share of the start's gap at the deadline of hfl.deadline_quadratic, [...]
    (:func:`bounds.hfl_deadline.start_share`), on the validated schedule."""
    return hfl_deadline.start_share({**v, "t": schedule(v["t"])[0]})


def hfl_deadline_noise(v: Values) -> np.ndarray:
    """sup_lam lam N(lam) of hfl.deadline_quadratic, certified, [...]
    (:func:`bounds.hfl_deadline.noise_share`), on the validated schedule."""
    return hfl_deadline.noise_share({**v, "t": schedule(v["t"])[0]})


def hfl_deadline_pl(v: Values, *, part: str) -> np.ndarray:
    """One aggregate of hfl.deadline_pl (``part``: "contraction" or a part of the per-round
    remainder, :data:`bounds.hfl_deadline.PL_PARTS`), [...] (:func:`bounds.hfl_deadline.pl_rounds`)."""
    return hfl_deadline.pl_rounds({**v, "t": schedule(v["t"])[0]})[1][part]


def mllsgd_deadline_start(v: Values) -> np.ndarray:
    """The worst share of the start's gap at u_K of mllsgd.deadline_quadratic, [...]
    (:func:`bounds.mllsgd_deadline.start_share`)."""
    return mllsgd_deadline.start_share(v)


def mllsgd_deadline_noise(v: Values) -> np.ndarray:
    """sup_lam lam N(lam) of mllsgd.deadline_quadratic, certified, [...]
    (:func:`bounds.mllsgd_deadline.noise_share`)."""
    return mllsgd_deadline.noise_share(v)
