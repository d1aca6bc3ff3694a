"""Measurements, the generic comparison of a bound with them, and the Verdict.

A :class:`Measurement` holds per-replica realisations of a theorem's left-hand side (or
its exact expectation). :func:`compare` turns a bound and a measurement into a verdict
for every shape the encoded results need, so no adapter writes its own comparison:

* one bound, one left-hand side per replica: values ``[R]``, bound a scalar;
* a bound per *cell* (a round and a group, a group, ...): values ``[R, *cells]`` and a
  bound of shape ``cells``; every cell is checked and the worst one reported;
* *paired*: one bound per replica (each replica ran on its own random schedule, so the
  expectation of the bound over schedules is compared with that of the left-hand side):
  ``paired=True``, values ``[R, *cells]`` and a bound ``[R, *cells]``; the interval is
  that of the paired differences bound_r - lhs_r.

Monte-Carlo intervals are two-sided 95% Student-t intervals for the actual number of
replicas (with 2 replicas the multiplier is 12.7, not 1.96).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .scenario import jsonable

#: relative tolerance of an exact-mode comparison (floating-point round-off only)
EXACT_RTOL = 1e-9
#: confidence level of the Monte-Carlo intervals
LEVEL = 0.95
#: below this many replicas a verdict says that its interval is wide
SMALL_SAMPLE = 10
OUTCOMES = ("holds", "violated", "inconclusive", "diverged")


@dataclass
class Measurement:
    """Per-replica realisations of a theorem's left-hand side, or its exact value.

    ``values``: ``[R, *cells]`` finite realisations (replicas that diverged are excluded and
    counted in ``diverged``); ``exact``: the exact expectation (a number, or an array of
    cells) when computed; ``paired``: the bound has a leading replica axis matching
    ``values`` (module docstring); ``series``: the mean of the per-iteration quantity
    along the run, for plots; ``atol``: the round-off level below which a measurement
    cannot exceed a bound (bounds can be exactly 0)."""

    values: np.ndarray | None = None
    exact: float | np.ndarray | None = None
    diverged: int = 0
    series: np.ndarray | None = None
    atol: float = 0.0
    paired: bool = False

    def validate(self, key: str) -> None:
        """Raise ValueError unless the measurement is well formed and finite."""
        if (self.values is None) == (self.exact is None) and not self.diverged:
            raise ValueError(f"{key}: a measurement needs exactly one of values and exact")
        for name in ("values", "exact"):
            x = getattr(self, name)
            if x is not None and not np.all(np.isfinite(np.asarray(x, dtype=float))):
                raise ValueError(f"{key}: measured {name} are not finite (a diverged replica "
                                 "must be counted in `diverged`, not reported as a value)")
        if self.paired and self.exact is not None:
            raise ValueError(f"{key}: an exact measurement cannot be paired")


@dataclass(frozen=True)
class Comparison:
    """A bound against a measurement: the reported (worst) cell's bound, mean and interval,
    the outcome, the mode ("exact" or "monte-carlo"), the cell's index (None for a
    scalar bound), the replicas used and any notes on the reliability of the verdict."""

    bound: float
    mean: float
    ci: tuple[float, float]
    outcome: str
    mode: str
    cell: tuple[int, ...] | None
    replicas: int
    notes: tuple[str, ...] = ()


def t_multiplier(n: int) -> float:
    """Half-width multiplier of the two-sided ``LEVEL`` Student-t interval of a mean of n
    values (inf for n < 2)."""
    if n < 2:
        return math.inf
    from scipy.special import stdtrit  # t's quantile, as scipy.stats.t.ppf (0.4 s to import)

    return float(stdtrit(n - 1, 0.5 + LEVEL / 2))


def _pick(status: np.ndarray, margin: np.ndarray) -> int:
    """The cell to report: a violated one if any, else an inconclusive one, else the one
    with the least relative margin (flat index)."""
    for code in (2, 1):
        if (status == code).any():
            return int(np.flatnonzero(status == code)[np.argmin(margin[status == code])])
    return int(np.argmin(margin))


def _cell(flat: int, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else None


def compare(bound, m: Measurement) -> Comparison:
    """The verdict of ``bound`` against ``m`` (module docstring). Exact mode: holds when the
    exact value is at most the bound up to round-off. Monte Carlo: holds when the upper
    95% limit is at most the bound (+ ``m.atol`` and round-off), violated when the lower limit is above
    it, inconclusive otherwise; paired: the interval of bound - lhs against 0. Any
    diverged replica makes the left-hand side infinite: "diverged"."""
    b = np.asarray(bound, dtype=float)
    if m.exact is not None:
        e = np.asarray(m.exact, dtype=float)
        shape = np.broadcast_shapes(b.shape, e.shape)
        B, E = np.broadcast_to(b, shape).ravel(), np.broadcast_to(e, shape).ravel()
        tol = EXACT_RTOL * np.maximum(np.abs(B), np.abs(E)) + m.atol
        status = np.where(E <= B + tol, 0, 2)
        margin = (B + tol - E) / (np.abs(B) + np.abs(E) + tol + 1e-300)
        c = _pick(status, margin)
        return Comparison(float(B[c]), float(E[c]), (float(E[c]), float(E[c])),
                          "holds" if status[c] == 0 else "violated", "exact", _cell(c, shape), 0)
    cells = b.shape[1:] if m.paired else b.shape
    if m.diverged:
        mean_bound = (b.mean(axis=0) if m.paired and b.ndim else b).ravel()
        c = int(np.argmin(mean_bound))
        return Comparison(float(mean_bound[c]), math.inf, (math.inf, math.inf), "diverged",
                          "monte-carlo", _cell(c, cells), 0 if m.values is None else len(m.values))
    v = np.asarray(m.values, dtype=float)
    n = v.shape[0]
    q = t_multiplier(n)
    with np.errstate(invalid="ignore"):
        sd = v.std(axis=0, ddof=1) if n > 1 else np.full(v.shape[1:], math.inf)
    mean = v.mean(axis=0)
    half = q * sd / math.sqrt(n)
    if m.paired:
        if b.shape[:1] != (n,):
            raise ValueError(f"paired comparison: the bound has shape {b.shape}, expected a "
                             f"leading axis of the {n} replicas")
        d = b - v
        with np.errstate(invalid="ignore"):
            dsd = d.std(axis=0, ddof=1) if n > 1 else np.full(d.shape[1:], math.inf)
        dhalf = q * dsd / math.sqrt(n)
        low, high = d.mean(axis=0) - dhalf, d.mean(axis=0) + dhalf
        B = b.mean(axis=0)
    else:
        B = np.broadcast_to(b, mean.shape)
        low, high = B - (mean + half), B - (mean - half)
    shape = np.shape(mean)
    low, high, B = (np.asarray(x, dtype=float).ravel() for x in (low, high, B))
    meanf, halff = np.ravel(mean), np.ravel(half)
    # a relative round-off tolerance as in exact mode: a bound can be attained (tdcd.theorem1
    # [refined] at Q = 1 on a noise-free one-dimensional quadratic gives every replica the
    # bound up to a few ulps, and an interval of zero width)
    atol = EXACT_RTOL * np.maximum(np.abs(B), np.abs(meanf)) + m.atol
    status = np.where(low >= -atol, 0, np.where(high < -atol, 2, 1))
    with np.errstate(invalid="ignore"):
        margin = np.nan_to_num((low + atol) / (np.abs(B) + np.abs(meanf) + 1e-300), nan=-np.inf)
    c = _pick(status, margin)
    notes = []
    if n < SMALL_SAMPLE:
        notes.append(f"only {n} replica{'s' if n != 1 else ''}: "
                     + ("no interval can be formed" if n < 2 else
                        f"the 95% Student-t multiplier is {q:.3g} (1.96 for many replicas)")
                     + "; add replicas for a sharper verdict")
    if m.paired:
        notes.append("paired: each replica's bound on its own schedule against its own left-hand "
                     "side; the interval of the differences decides")
    outcome = ("holds", "inconclusive", "violated")[int(status[c])]
    return Comparison(float(B[c]), float(meanf[c]), (float(meanf[c] - halff[c]),
                      float(meanf[c] + halff[c])), outcome, "monte-carlo", _cell(c, shape), n,
                      tuple(notes))


@dataclass
class Verdict:
    """The outcome of one check.

    ``verdict``: "holds", "violated", "inconclusive" or "diverged" (see :func:`compare`);
    for a bound per cell, ``bound`` and ``measured_*`` are those of the reported ``cell``
    (a violated one if any, else the one closest to violation). ``slack`` = bound /
    measured mean (inf when the mean is 0). ``admissible``: whether the theorem's
    hypotheses hold at the derived parameters; a violation where they do not contradicts
    nothing (``violations`` says which condition fails and by how much). ``notes`` say
    what limits the verdict (few replicas, pairing); ``atol`` the round-off level below
    which a measurement carries no signal."""

    key: str
    variant: str
    bound: float
    measured_mean: float
    measured_ci: tuple[float, float]
    verdict: str
    slack: float
    admissible: bool
    violations: list[str]
    params: dict[str, Any]
    scenario: dict[str, Any]
    mode: str
    replicas: int
    diverged: int
    cell: list[int] | None = None
    notes: list[str] = field(default_factory=list)
    atol: float = 0.0  # the measurement's round-off level (Measurement.atol)
    seconds: float = 0.0

    @property
    def holds(self) -> bool:
        return self.verdict == "holds"

    @property
    def ratio(self) -> float:
        """measured / bound (see :func:`tightness`): 1 is tight, above 1 violated."""
        return tightness(self.bound, self.measured_mean)[0]

    @property
    def ratio_ci(self) -> tuple[float, float]:
        """The 95% interval of :attr:`ratio` (a point for an exact verdict)."""
        return tightness(self.bound, self.measured_mean, self.measured_ci)[1]

    def as_dict(self) -> dict[str, Any]:
        """The result as JSON values. The wall time ``seconds`` is left out: it is not part
        of the result, and the same scenario and seed must give the same JSON bit for bit."""
        d = asdict(self)
        del d["seconds"]
        d["measured_ci"] = list(self.measured_ci)
        return jsonable(d)

    def to_frame(self):
        """A one-row pandas DataFrame (pandas is optional: ``pip install pandas``)."""
        return _frame([self.as_dict()])


def tightness(bound: float, mean: float, ci: tuple[float, float] | None = None
              ) -> tuple[float, tuple[float, float]]:
    """How much of a bound's room a measurement uses, and its 95% interval: ``mean / bound``
    for a positive bound (1 = tight, above 1 = violated); for a negative bound on a
    negative quantity (a lower bound written as an upper bound on the negative, as Yang et
    al. 2022, Theorem 1), ``bound / mean``, so that again 1 is tight and below 1 holds.
    NaN where no ratio is defined (a zero bound, a diverged run, opposite signs). ``ci`` is
    the interval of the mean (an exact mean is its own interval)."""
    lo, hi = (mean, mean) if ci is None else ci
    if not all(math.isfinite(x) for x in (bound, mean, lo, hi)):
        return math.nan, (math.nan, math.nan)
    if bound > 0:
        return max(mean, 0.0) / bound, (max(lo, 0.0) / bound, max(hi, 0.0) / bound)
    if bound < 0 and mean < 0 and hi < 0:
        return bound / mean, (bound / lo, bound / hi)
    return math.nan, (math.nan, math.nan)


def _frame(rows: list[dict]):
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("to_frame() needs pandas: pip install pandas") from None
    return pd.json_normalize(rows)


#: a recorded exact ratio may drop by this relative amount (round-off across platforms)
RATIO_RTOL = 1e-6


def ratio_dropped(recorded: float | None, verdict: Mapping[str, Any] | None) -> bool:
    """Whether ``verdict`` (``Verdict.as_dict()``) shows a ratio measured/bound below the
    ``recorded`` one by more than round-off (exact mode) or Monte-Carlo noise (the recorded
    ratio lies above the verdict's 95% interval). False when nothing is recorded or the
    check failed."""
    if recorded is None or verdict is None:
        return False
    ratio, (_, hi) = tightness(verdict["bound"], verdict["measured_mean"],
                               tuple(verdict["measured_ci"]))
    if math.isnan(ratio):
        return True
    if verdict["mode"] == "exact":
        return ratio < recorded * (1 - RATIO_RTOL)
    return hi < recorded
