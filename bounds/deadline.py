"""What fedbound's deadline bounds share (derived by fedbound, not published): bounds on the
expected loss at the deadline, E f(x at T) - f*, the metric the choosers simulate, under the
papers' algorithms plus a curvature assumption (mu-PL, or a quadratic with spectrum in
[mu, L]) that makes the progress of every step visible. Numpy only.

Two shapes of result:

* *PL bounds* (``*.deadline_pl``): a one-step (or one-round) inequality
  gap' <= kappa gap + r, with kappa and r functions of the step's schedule, unrolled to the
  deadline: gap_end <= Delta prod_u kappa_u + sum_u r_u prod_{u' > u} kappa_{u'}
  (:func:`unroll`);
* *quadratic bounds* (``*.deadline_quadratic``): the exact worst case over the quadratics
  with spectrum in [mu, L] and additive noise of covariance trace sigma^2, which per
  eigenvalue lam is a linear second-moment recursion: Delta sup_lam P(lam) + (sigma^2/2)
  sup_lam lam N(lam), with P and N non-increasing in lam (``bounds/derivations/*_deadline.md``);
  the first supremum is P(mu), the second is certified by :func:`certified_sup`.

The derivations are ``bounds/derivations/hfl_deadline.md``, ``mllsgd_deadline.md`` and
``tdcd_deadline.md`` (files of the package). The theorems are built in the papers' modules
(``bounds.hfl.deadline_quadratic``, ``deadline_pl``; ``bounds.mllsgd.deadline_quadratic``;
``bounds.tdcd.deadline_pl``) and registered by the papers' plugins; the choices that
minimise them are :func:`bounds.hfl_sync.choose_deadline_sync_time`,
:func:`bounds.mllsgd_deadline.choose_deadline_period` and
:func:`bounds.tdcd.choose_deadline_local_steps`, with the pieces below. Importing this module
imports numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: the relative gap at which :func:`certified_sup` stops refining: its upper bound is then
#: within this factor of a value lam N(lam) it attained
SUP_RTOL = 1e-3
#: the geometric grid :func:`certified_sup` starts from, and the intervals it splits per pass
SUP_POINTS, SUP_SPLIT, SUP_PASSES = 65, 32, 30
#: the one variant of every deadline result: fedbound's own derivation
VARIANT = "derived"


def certified_sup(noise: Callable[[np.ndarray, np.ndarray], np.ndarray], lo: np.ndarray,
                  hi: np.ndarray, *, rtol: float = SUP_RTOL
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(upper, attained, argmax) of sup_{lam in [lo, hi]} lam N(lam) per batch entry, for a
    function ``noise(lam [B', J], rows [B']) -> N [B', J]`` (N of the batch entries ``rows``)
    that is >= 0 and non-increasing in lam on [lo, hi] (``lo``, ``hi`` [B], 0 < lo <= hi).

    On an interval [l_k, l_{k+1}], lam N(lam) <= l_{k+1} N(l_k) (lam grows, N does not), so the
    largest such value over a partition is a certified upper bound of the supremum, and the
    largest l N(l) evaluated is attained (at ``argmax``). Starting from SUP_POINTS geometric
    points, the SUP_SPLIT intervals of largest upper value of every entry whose upper value
    exceeds attained (1 + rtol) are split at their geometric midpoints (branch and bound), at
    most SUP_PASSES times: ``upper`` is valid whenever it stops. An entry's numbers depend
    on its own data only, not on the rest of the batch."""
    lo, hi = (np.asarray(x, dtype=float) for x in (lo, hi))
    frac = np.linspace(0.0, 1.0, SUP_POINTS)
    lam = lo[:, None] * (hi / lo)[:, None] ** frac
    lam[:, 0], lam[:, -1] = lo, hi
    everyone = np.arange(lam.shape[0])
    N = np.asarray(noise(lam, everyone), dtype=float)
    for _ in range(SUP_PASSES):
        upper, attained = _bracket(lam, N)
        open_ = np.flatnonzero(upper > attained * (1 + rtol))
        if open_.size == 0:
            break
        # closed entries repeat their last point (a zero-width interval changes nothing)
        new_lam = np.repeat(lam[:, -1:], SUP_SPLIT, axis=-1)
        new_N = np.repeat(N[:, -1:], SUP_SPLIT, axis=-1)
        edges = lam[open_, 1:] * N[open_, :-1]
        worst = np.argsort(-edges, axis=-1, kind="stable")[:, :SUP_SPLIT]
        rows = open_[:, None]
        mid = np.sqrt(lam[rows, worst] * lam[rows, worst + 1])
        new_lam[open_, :mid.shape[1]] = mid
        new_N[open_, :mid.shape[1]] = np.asarray(noise(mid, open_), dtype=float)
        lam = np.concatenate([lam, new_lam], axis=-1)
        N = np.concatenate([N, new_N], axis=-1)
        order = np.argsort(lam, axis=-1, kind="stable")
        lam, N = np.take_along_axis(lam, order, -1), np.take_along_axis(N, order, -1)
    upper, attained = _bracket(lam, N)
    best = (lam * N).argmax(axis=-1)
    return upper, attained, lam[everyone, best]


#: grid points on each side of the mean curvature in :func:`worst_start`, and the coarser
#: precision (relative gap of the supremum, points) a search over many candidates can use
START_POINTS = 257
COARSE = {"rtol": 2e-2, "points": 33}


def worst_start(share: Callable[[np.ndarray, np.ndarray], np.ndarray], lo: np.ndarray,
                hi: np.ndarray, mean: np.ndarray, *, points: int = START_POINTS) -> np.ndarray:
    """A certified upper bound of sup E_nu P(lam) over the probability measures nu on [lo, hi]
    with E_nu lam >= ``mean`` (``lo <= mean <= hi``, [B]), for a function
    ``share(lam [B', J], rows [B']) -> P`` that is non-increasing in lam: the start's worst
    share when its gap is spread over the eigen-directions with weights nu and its squared
    gradient is at least 2 ``mean`` times its gap (bounds/derivations/hfl_deadline.md,
    section 3).

    The supremum is the upper concave envelope of P at ``mean``, attained by a measure on two
    points l1 <= mean <= l2 (P does not increase, so E lam = mean at the optimum). On cells
    [a, a'] of [lo, mean] and [b, b'] of [mean, hi], a chord's weight on l1,
    w = (l2 - mean)/(l2 - l1), grows with l1 and l2, so its value is at most
    w' P(a) + (1 - w') P(b) with w' = (b' - mean)/(b' - a'); the largest over all pairs of
    ``points`` geometric cells per side is returned (exactly P(lo) when mean = lo, and P(hi)
    when mean = hi)."""
    lo, hi, mean = (np.asarray(x, dtype=float) for x in (lo, hi, mean))
    frac = np.linspace(0.0, 1.0, points)
    left = lo[:, None] * (mean / lo)[:, None] ** frac
    right = mean[:, None] * (hi / mean)[:, None] ** frac
    left[:, -1], right[:, 0], right[:, -1] = mean, mean, hi
    P = np.asarray(share(np.concatenate([left, right], axis=-1), np.arange(lo.size)), dtype=float)
    Pl, Pr = P[:, :points], P[:, points:]
    out = np.empty(lo.size)
    step = max(1, (1 << 22) // points**2)
    for s in range(0, lo.size, step):
        b = slice(s, s + step)
        a_end, b_end = left[b, 1:, None], right[b, None, 1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(b_end > a_end, (b_end - mean[b, None, None]) / (b_end - a_end), 0.0)
        out[b] = (w * Pl[b, :-1, None] + (1 - w) * Pr[b, None, :-1]).max(axis=(-1, -2))
    return out


def _bracket(lam: np.ndarray, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(upper, attained) over the partition ``lam`` [B, K] (sorted) with N [B, K]."""
    attained = (lam * N).max(axis=-1)
    return np.maximum((lam[:, 1:] * N[:, :-1]).max(axis=-1, initial=0.0), attained), attained


def unroll(kappa: np.ndarray, parts: dict[str, np.ndarray], real: np.ndarray
           ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The one-step inequality gap' <= kappa_u gap + sum_k parts[k]_u unrolled over the steps
    u (axis -1; ``real`` masks the steps that happen, the others are identities): the product
    prod_u kappa_u [...] and, per part, sum_u part_u prod_{u' > u} kappa_{u'} [...]."""
    k = np.where(real, kappa, 1.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        logk = np.log(k)
        rev = np.cumsum(logk[..., ::-1], axis=-1)[..., ::-1]            # sum_{u' >= u}
        later = np.concatenate([rev[..., 1:], np.zeros(rev.shape[:-1] + (1,))], axis=-1)
        weight = np.exp(later)
        # sequential sums (cumsum), so that padding rounds change no bit of the result
        sums = {name: np.cumsum(np.where(real & (p > 0), p * weight, 0.0), axis=-1)[..., -1]
                for name, p in parts.items()}
        return np.exp(rev[..., 0]), sums


def flat_batch(*arrays: np.ndarray, tail: tuple[int, ...] = ()) -> tuple[tuple, list[np.ndarray]]:
    """The broadcast batch shape of ``arrays`` (the last ``len(tail)`` axes of the last array
    excluded: its per-item axes, e.g. a schedule's [U, G]) and each array broadcast to it and
    flattened to one batch axis ``[B]`` (the last: ``[B, *tail]``)."""
    *scalars, last = (np.asarray(a, dtype=float) for a in arrays)
    items = last.shape[last.ndim - len(tail):] if tail else ()
    shape = np.broadcast_shapes(*(a.shape for a in scalars), last.shape[:last.ndim - len(tail)])
    size = math.prod(shape)
    out = [np.broadcast_to(a, shape).reshape(size) for a in scalars]
    out.append(np.broadcast_to(last, shape + items).reshape((size,) + items))
    return shape, out


# ---------------------------------------------------------------------- choosing from them

#: the steps a joint choice of a deadline bound compares: DEADLINE_PER_OCTAVE per factor of 2
#: over DEADLINE_OCTAVES factors of 2 below 1/L (1/L included)
DEADLINE_PER_OCTAVE, DEADLINE_OCTAVES = 3, 12


def deadline_steps(L: float) -> np.ndarray:
    """The steps of a joint choice of a deadline bound: geometric, up to 1/L
    (:data:`DEADLINE_PER_OCTAVE`, :data:`DEADLINE_OCTAVES`)."""
    k = np.arange(DEADLINE_PER_OCTAVE * DEADLINE_OCTAVES + 1)[::-1]
    return 2.0 ** (-k / DEADLINE_PER_OCTAVE) / float(L)


@dataclass(frozen=True)
class DeadlineChoice:
    """The value of a knob (``knob``: "tau" or "Q") and the step minimising a deadline bound
    (derived by fedbound, not published), ``best`` = {knob: value, step name: value};
    ``best_bound`` bounds the expected loss at the deadline there (a certificate, at the
    full precision), with its ``terms``; ``curve``: per value of the knob, its best step,
    the bound there (at the search's precision: an upper bound too) and the ``horizon``
    (iterations K or rounds R) it has before the deadline."""

    key: str
    variant: str
    knob: str
    best: dict
    best_bound: float
    terms: dict
    dominant_term: str
    curve: list

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def deadline_theorem(key: str, keys, function: str, chosen, params):
    """The theorem of ``key`` (one of ``keys``), with ``params`` checked to be among its
    parameters less those the chooser sets (``chosen``)."""
    from .registry import get

    if key not in keys:
        raise ValueError(f"key={key!r}: {function} minimises {', '.join(keys)}")
    thm = get(key)
    known = sorted(set(thm.params) - set(chosen))
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"{key}: unknown parameter(s) {unknown}; parameters are {known}")
    return thm


def horizons(values, horizon, name: str, knob: str) -> dict:
    """{knob value: horizon}: one horizon for every value, or a mapping / callable of it."""
    out = {}
    for v in values:
        h = horizon(v) if callable(horizon) else horizon.get(v) if isinstance(horizon, dict) \
            else horizon
        if h is None or isinstance(h, bool) or int(h) != h or h < 1:
            raise ValueError(f"{name}={h!r} at {knob}={v}: must be an integer >= 1")
        out[v] = int(h)
    return out


def steps(step, top: float) -> np.ndarray:
    """The steps compared: those given, or :data:`DEADLINE_PER_OCTAVE` per factor of 2 over
    :data:`DEADLINE_OCTAVES` factors below ``top``."""
    if step is not None:
        return np.atleast_1d(np.asarray(step, dtype=float))
    return deadline_steps(1.0 / top)
