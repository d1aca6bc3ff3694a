"""Deciding an experimental claim from paired differences over seeds.

A claim about configurations ("S = 5 reaches a lower loss than S = 0 at time 2000") is
decided by one or more :class:`Test` s, each on the per-seed differences d_r of a metric
between the configurations it compares, run on the same seeds, data split and delay paths
(the differences are paired: what seed r shares between the configurations cancels in
d_r). A test claims that the mean difference mu lies in a region: above a value
(:func:`above`), below it (:func:`below`) or between two values (:func:`between`: a
tolerance, "comparable", "within 10%"). With the two-sided 95% Student-t interval
[low, high] of mu (``verify.verdict.LEVEL``), the test

- **agrees** when the interval lies inside the region, **contradicts** when it lies outside
  it (an interval of one point on the region's boundary is outside an open region: a
  claimed difference that is exactly zero on every seed is contradicted), and is
  **undecided** otherwise;
- reports its *detectable effect*: the smallest distance of mu from the region's boundary
  that a run of this many seeds detects with probability :data:`POWER` at the observed
  spread s, (t_{0.975, n-1} + t_{POWER, n-1}) s / sqrt(n);
- and, when undecided, the *seeds needed*: the smallest n' whose detectable effect is at
  most the observed distance |mean - boundary| (None when the mean sits on the boundary: no
  number of seeds decides it at the observed effect).

A claim with several parts combines their tests (:func:`combine`): ``"all"`` (every part
must hold: 4 groups beat 2 *and* 8) contradicts when one part does and agrees when every
part does; ``"any"`` (some Q > 1 beats Q = 1) agrees when one part does and contradicts
when every part does. The combined effect is the deciding part's (:func:`deciding`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from .verdict import LEVEL, t_multiplier

#: the probability with which a run detects its detectable effect
POWER = 0.8
#: the three verdicts of a claim
VERDICTS = ("agrees", "contradicts", "undecided")
#: the most seeds :func:`seeds_needed` counts to (beyond: None, "no practical number")
MAX_SEEDS = 10**7


def _t_quantile(p: float, dof: int) -> float:
    from scipy.special import stdtrit

    return float(stdtrit(dof, p))


def detection_multiplier(n: int) -> float:
    """(t_{(1+LEVEL)/2, n-1} + t_{POWER, n-1}) / sqrt(n): the detectable effect of n seeds in
    units of their standard deviation."""
    return (t_multiplier(n) + _t_quantile(POWER, n - 1)) / math.sqrt(n)


def seeds_needed(sd: float, distance: float) -> int | None:
    """The smallest number of seeds n >= 2 whose detectable effect ``sd`` x
    :func:`detection_multiplier` (n) is at most ``distance``; None when ``distance`` is 0 or
    more than :data:`MAX_SEEDS` seeds would be needed."""
    distance = abs(distance)
    if sd == 0:
        return 2 if distance > 0 else None
    if distance == 0:
        return None
    z = _t_quantile((1 + LEVEL) / 2, 10**9) + _t_quantile(POWER, 10**9)
    n = max(2, math.floor((z * sd / distance) ** 2))  # the normal approximation: a lower bound
    if n > MAX_SEEDS:
        return None
    while sd * detection_multiplier(n) > distance:
        n += 1
    return n


@dataclass(frozen=True)
class Test:
    """One part of a claim: the mean ``effect`` of the paired differences ``d`` over ``seeds``
    seeds, its 95% interval ``[low, high]``, the region the claim puts it in (``lower`` <
    mu < ``upper``, either end None for an open side), the verdict, the detectable effect
    and, for an undecided test, the seeds needed. ``name`` says what is compared;
    ``compares`` the configurations (the claim's better one first) and ``at`` where (a time,
    a round), when the test compares two configurations' values, so that a bound's order of
    the same two can be read beside it."""

    name: str
    effect: float
    low: float
    high: float
    sd: float
    seeds: int
    lower: float | None
    upper: float | None
    verdict: str
    detectable: float
    needed: int | None
    compares: tuple[str, str] | None = None
    at: float | None = None

    @property
    def margin(self) -> float:
        """The signed distance of the mean from the region's nearer boundary (positive
        inside the region)."""
        sides = [self.effect - self.lower if self.lower is not None else math.inf,
                 self.upper - self.effect if self.upper is not None else math.inf]
        return min(sides)

    @property
    def strength(self) -> float:
        """The margin in standard errors (inf when the spread is zero and the mean inside)."""
        se = self.sd / math.sqrt(self.seeds)
        if se == 0:
            return math.copysign(math.inf, self.margin) if self.margin else 0.0
        return self.margin / se

    def region(self) -> str:
        """The claimed region of the mean difference in words."""
        if self.lower is not None and self.upper is not None:
            return f"between {self.lower:.4g} and {self.upper:.4g}"
        return f"above {self.lower:.4g}" if self.lower is not None else f"below {self.upper:.4g}"

    def as_dict(self) -> dict:
        return {**asdict(self), "region": self.region()}


def in_region(name: str, differences, *, lower: float | None = None, upper: float | None = None,
         compares: tuple[str, str] | None = None, at: float | None = None) -> Test:
    """The :class:`Test` that the mean of the paired ``differences`` (one per seed) lies in
    (``lower``, ``upper``) (module docstring)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size < 2 or not np.isfinite(d).all():
        raise ValueError(f"{name}: need at least two finite paired differences, got {differences!r}")
    if lower is None and upper is None:
        raise ValueError(f"{name}: a test needs a lower or an upper end of its region")
    if lower is not None and upper is not None and not lower < upper:
        raise ValueError(f"{name}: the region ({lower}, {upper}) is empty")
    n, mean, sd = d.size, float(d.mean()), float(d.std(ddof=1))
    half = t_multiplier(n) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    inside = (lower is None or low > lower) and (upper is None or high < upper)
    outside = (lower is not None and high <= lower) or (upper is not None and low >= upper)
    verdict = "agrees" if inside else "contradicts" if outside else "undecided"
    t = Test(name, mean, low, high, sd, n, lower, upper, verdict,
             sd * detection_multiplier(n), None, compares, at)
    if verdict == "undecided":
        t = Test(**{**asdict(t), "needed": seeds_needed(sd, t.margin)})
    return t


def above(name: str, differences, value: float = 0.0, **where) -> Test:
    """The claim that the mean difference exceeds ``value`` (0: "the first is larger")."""
    return in_region(name, differences, lower=value, **where)


def below(name: str, differences, value: float = 0.0, **where) -> Test:
    """The claim that the mean difference is below ``value``."""
    return in_region(name, differences, upper=value, **where)


def between(name: str, differences, lower: float, upper: float, **where) -> Test:
    """The claim that the mean difference lies between ``lower`` and ``upper`` (a tolerance)."""
    return in_region(name, differences, lower=lower, upper=upper, **where)


def combine(tests: Sequence[Test], rule: str = "all") -> str:
    """The verdict of a claim made of ``tests`` under ``rule`` ("all" or "any"; module
    docstring)."""
    if rule not in ("all", "any"):
        raise ValueError(f"rule={rule!r} must be 'all' or 'any'")
    if not tests:
        raise ValueError("a claim needs at least one test")
    verdicts = [t.verdict for t in tests]
    decided, opposite = ("agrees", "contradicts") if rule == "any" else ("contradicts", "agrees")
    if decided in verdicts:
        return decided
    return opposite if all(v == opposite for v in verdicts) else "undecided"


def deciding(tests: Sequence[Test], rule: str = "all") -> Test:
    """The part that decides a claim: under "all" the one with the weakest evidence for the
    claim (the least :attr:`Test.strength`), under "any" the strongest; among parts with
    the claim's verdict first (for an "all" claim that is contradicted, a contradicting
    part)."""
    verdict = combine(tests, rule)
    pool = [t for t in tests if t.verdict == verdict] or list(tests)
    pick = min if rule == "all" else max
    return pick(pool, key=lambda t: t.strength)
