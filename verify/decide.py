"""Deciding an experimental claim from paired differences over seeds, against a margin.

A claim about configurations ("S = 5 reaches a lower loss than S = 0 at time 2000") is
decided by one or more :class:`Test` s, each on the per-seed differences d_r of a metric
between the configurations it compares, run on the same seeds, data split and delay paths
(the differences are paired: what seed r shares between the configurations cancels in
d_r). Every test states its ``margin`` m > 0, the smallest effect that counts, in the
metric's units, and where the margin comes from (``source``: read off the paper's figure,
the paper's own word for a tolerance, or a documented default: :data:`RELATIVE_LOSS`,
:data:`ACCURACY`). With the two-sided 95% Student-t interval [low, high] of the mean
difference mu (``verify.verdict.LEVEL``), a test is decided equivalence-test style:

- an ordering claim, mu above a value v (:func:`above`; :func:`below` is its mirror):
  **agrees** when low > v + m (the claimed side, beyond the margin), **contradicts** when
  high < v - m (the other side, beyond the margin), is **negligible** when v - m < low and
  high < v + m (inside plus or minus the margin: the configurations are practically the
  same) and **undecided** otherwise;
- a "similar" claim, mu between ``lower`` and ``upper`` (:func:`between`: a tolerance,
  "comparable", "within 10%"; its tolerance is its margin): **agrees** when the interval lies
  inside, **contradicts** when it lies wholly outside, **undecided** otherwise;
- **fixed-by-setting**: the stated setting determines the outcome whatever training does
  (identical runs, a share of rounds fixed by the delay schedule); no statistical test is
  run, and the test says why in one line (:func:`fixed_by_setting`). The engine applies
  it itself to compared runs that are identical on every seed: every paired difference
  exactly 0 (a configuration whose stated parameters make it the same run as the other).
  Equal values are not always identical runs: a quantised metric (a held-out accuracy, a
  count of rounds) can take the same value on every seed though the runs differ. Where the
  compared configurations' whole curves show that they differ, the engine decides the test
  as a measurement instead (:func:`measured_equal`: the interval [0, 0], negligible for an
  ordering claim).

A test reports its *detectable effect*: the smallest distance of mu from a decision
boundary that a run of this many seeds detects with probability :data:`POWER` at the
observed spread s, (t_{0.975, n-1} + t_{POWER, n-1}) s / sqrt(n); and, when undecided, the
*seeds needed*: the smallest n' whose detectable effect is at most the observed distance of
the mean from the nearest boundary (None when the mean sits on it: no number of seeds
decides it at the observed effect).

A metric that may not be reached within the run (rounds or time to reach a loss) is
*censored* at the horizon: :func:`sooner` compares such hitting times with the horizon as
the censoring point (each time above it counts as the horizon: the difference of the
restricted means, a standard estimand for censored times), so a value never reached is an
observation, not an error; a pair that neither reaches on any seed is undecided, with the
reason (a longer horizon decides it).

A claim with several parts combines their tests (:func:`combine`): ``"all"`` (every part
must hold: 4 groups beat 2 *and* 8) and ``"any"`` (some Q > 1 beats Q = 1), each by a
priority of verdicts (:data:`PRIORITY`); the combined effect is the deciding part's
(:func:`deciding`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from .verdict import LEVEL, t_multiplier

#: the probability with which a run detects its detectable effect
POWER = 0.8
#: the five verdicts of a test and of a claim
VERDICTS = ("agrees", "contradicts", "negligible", "undecided", "fixed-by-setting")
#: the verdict of a claim whose tests disagree: the first of its tests' verdicts in this
#: order. "all": one contradicting part refutes the claim; a part the setting fixes cannot
#: be agreed by training; an undecided part may still go either way; a negligible part is
#: a practical tie. "any": one agreeing part suffices; an undecided part may still agree.
PRIORITY = {"all": ("contradicts", "fixed-by-setting", "undecided", "negligible", "agrees"),
            "any": ("agrees", "undecided", "negligible", "fixed-by-setting", "contradicts")}
#: the most seeds :func:`seeds_needed` counts to (beyond: None, "no practical number")
MAX_SEEDS = 10**7
#: fedbound's default margin of a loss comparison where the paper's figure shows no gap to
#: read: a relative loss difference of 1% of the compared configurations' mean loss at the
#: point compared (:func:`relative_margin`). Differences below it (the 0.04-0.3% of the
#: logistic-regression orderings of Castiglia et al. 2021, Figs. 7 and 8, on the digits) are
#: not an ordering any reader of a loss curve would call.
RELATIVE_LOSS = 0.01
#: fedbound's default margin of an accuracy comparison: one percentage point (0.01), the
#: resolution at which the papers print accuracies and below which Yang et al. 2022, Table
#: 2, calls a difference "no obvious difference"
ACCURACY = 0.01


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


def relative_margin(*values, fraction: float = RELATIVE_LOSS, what: str = "loss") -> dict:
    """``{"margin": m, "source": text}``: the default margin of a comparison of ``what``
    (:data:`RELATIVE_LOSS`): ``fraction`` of the mean magnitude of ``values`` (the compared
    configurations' metric per seed at the point compared), to pass to :func:`above`,
    :func:`below` as ``**relative_margin(a, b)``. ValueError when that mean is 0 or not
    finite (no margin > 0 follows from it)."""
    level = float(np.mean([np.mean(np.abs(np.asarray(v, dtype=float))) for v in values]))
    if not (math.isfinite(level) and level > 0):
        raise ValueError(f"a relative margin needs a finite, non-zero {what} level, got {level!r}")
    return {"margin": fraction * level,
            "source": f"fedbound's default: {fraction:.0%} of the compared configurations' mean "
                      f"{what} there ({level:.4g}; verify.decide.RELATIVE_LOSS)"}


def accuracy_margin() -> dict:
    """``{"margin": ACCURACY, "source": text}``: the default margin of an accuracy comparison
    (:data:`ACCURACY`), to pass as ``**accuracy_margin()``."""
    return {"margin": ACCURACY, "source": f"fedbound's default: an accuracy difference of "
                                          f"{ACCURACY:g} (one percentage point; "
                                          "verify.decide.ACCURACY)"}


@dataclass(frozen=True)
class Test:
    """One part of a claim (module docstring): ``kind`` ("above", "below", "between" or
    "fixed"), the mean ``effect`` of the paired differences over ``seeds`` seeds, its 95%
    interval ``[low, high]`` and spread ``sd``, the claimed comparison (``lower``: the value
    of "above" or the lower end of "between"; ``upper``: the value of "below" or the upper
    end of "between"), the ``margin`` (> 0, in the metric's units) and its ``source``, the
    verdict, the detectable effect and, for an undecided test, the seeds needed;
    ``censored``: the seeds on which a compared value was not reached within the horizon
    (:func:`sooner`); ``reason``: why the setting fixes the outcome, or why no number of
    seeds decides it. ``name`` says what is compared; ``compares`` the configurations (the
    claim's better one first) and ``at`` where (a time, a round), when the test compares two
    configurations' values, so that a bound's order of the same two can be read beside it.
    A test fixed by the setting without a run of its own has no effect, interval, spread or
    seeds (None); the engine's identical runs keep theirs (all 0)."""

    name: str
    kind: str
    effect: float | None
    low: float | None
    high: float | None
    sd: float | None
    seeds: int | None
    lower: float | None
    upper: float | None
    margin: float | None
    source: str
    verdict: str
    detectable: float | None
    needed: int | None
    compares: tuple[str, str] | None = None
    at: float | None = None
    censored: int = 0
    reason: str = ""

    def boundaries(self) -> list[float]:
        """The finite values at which the verdict changes: v - m and v + m for an ordering,
        the tolerance's ends for a "similar" claim."""
        if self.kind in ("above", "below"):
            v = self.lower if self.kind == "above" else self.upper
            return [v - self.margin, v + self.margin]
        if self.kind == "between":
            return [b for b in (self.lower, self.upper) if math.isfinite(b)]
        return []

    @property
    def distance(self) -> float:
        """The signed distance of the mean from the edge of the region where the test agrees
        (positive inside it; 0 for a test fixed by the setting)."""
        if self.effect is None or self.kind == "fixed":
            return 0.0
        if self.kind == "above":
            return self.effect - (self.lower + self.margin)
        if self.kind == "below":
            return (self.upper - self.margin) - self.effect
        return min(self.effect - self.lower, self.upper - self.effect)

    @property
    def strength(self) -> float:
        """:attr:`distance` in standard errors (inf when the spread is zero and the mean
        inside; 0 for a test fixed by the setting)."""
        if self.effect is None or self.kind == "fixed":
            return 0.0
        se = self.sd / math.sqrt(self.seeds)
        if se == 0:
            return math.copysign(math.inf, self.distance) if self.distance else 0.0
        return self.distance / se

    def region(self) -> str:
        """The claim in words: where it puts the mean difference, with the margin."""
        if self.kind == "fixed":
            return "fixed by the setting"
        if self.kind == "between":
            if not math.isfinite(self.lower):
                return f"below {self.upper:.4g} (tolerance)"
            if not math.isfinite(self.upper):
                return f"above {self.lower:.4g} (tolerance)"
            return f"between {self.lower:.4g} and {self.upper:.4g}"
        v = self.lower if self.kind == "above" else self.upper
        return f"{self.kind} {v:.4g} by more than the margin {self.margin:.3g}"

    def as_dict(self) -> dict:
        return {**asdict(self), "region": self.region()}


def _checked_margin(name: str, margin, source) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.floating)) \
            or not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"{name}: margin={margin!r} must be a finite number > 0 (the smallest "
                         "effect that counts, in the metric's units)")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"{name}: source={source!r} must say where the margin comes from")
    return float(margin)


def _identical(name: str, d: np.ndarray, kind: str, lower, upper, margin: float, source: str,
               compares, at) -> Test:
    return Test(name, kind, 0.0, 0.0, 0.0, 0.0, int(d.size), lower, upper, margin, source,
                "fixed-by-setting", 0.0, None, compares, at,
                reason=f"the compared runs give the same value on every one of the {d.size} "
                       "seeds (every paired difference is exactly 0): the stated setting, not "
                       "training, decides this comparison")


def _decided(name: str, differences, kind: str, lower: float | None, upper: float | None,
             margin: float, source: str, compares, at, censored: int = 0,
             identical: bool = True) -> Test:
    """The :class:`Test` of ``differences`` (module docstring); all of them 0 make it
    fixed-by-setting unless ``identical`` is False (the runs are known to differ)."""
    d = np.asarray(differences, dtype=float)
    if d.ndim != 1 or d.size < 2 or not np.isfinite(d).all():
        raise ValueError(f"{name}: need at least two finite paired differences, got {differences!r}"
                         " (a value not reached within the horizon: compare it with sooner)")
    if identical and not (d != 0).any():
        return _identical(name, d, kind, lower, upper, margin, source, compares, at)
    n, mean, sd = d.size, float(d.mean()), float(d.std(ddof=1))
    half = t_multiplier(n) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if kind == "between":
        verdict = ("agrees" if lower < low and high < upper
                   else "contradicts" if high < lower or low > upper else "undecided")
    else:
        sign = 1.0 if kind == "above" else -1.0
        v = lower if kind == "above" else upper
        near, far = sorted((sign * (low - v), sign * (high - v)))  # the claimed side positive
        verdict = ("agrees" if near > margin else "contradicts" if far < -margin
                   else "negligible" if -margin < near and far < margin else "undecided")
    t = Test(name, kind, mean, low, high, sd, n, lower, upper, margin, source, verdict,
             sd * detection_multiplier(n), None, compares, at, censored)
    if verdict == "undecided":
        nearest = min(abs(mean - b) for b in t.boundaries())
        t = replace(t, needed=seeds_needed(sd, nearest))
    return t


def measured_equal(test: Test) -> Test:
    """``test``, found fixed-by-setting because every paired difference is exactly 0,
    decided as a measurement instead, for compared runs that differ elsewhere (their curves
    differ at some point or seed): equal values are then an outcome of training on a
    quantised metric, not of the setting. The differences are ``test.seeds`` zeros, so the
    interval is [0, 0]: **negligible** for an ordering claim about 0, **agrees** for a
    "similar" claim whose tolerance holds 0; the reason says so.

    >>> t = above("accuracy(a) - accuracy(b)", [0.0, 0.0, 0.0], margin=0.01, source="default")
    >>> t.verdict
    'fixed-by-setting'
    >>> measured_equal(t).verdict
    'negligible'
    """
    if test.verdict != "fixed-by-setting" or test.kind == "fixed" or test.effect != 0:
        raise ValueError(f"{test.name}: only a test of identical values is re-decided, got "
                         f"verdict {test.verdict!r} with effect {test.effect!r}")
    redecided = _decided(test.name, np.zeros(test.seeds), test.kind, test.lower, test.upper,
                         test.margin, test.source, test.compares, test.at, test.censored,
                         identical=False)
    return replace(redecided, reason=f"equal on every one of the {test.seeds} seeds here, though "
                                     "the compared runs differ elsewhere on their curves (a "
                                     "quantised metric): decided on the interval [0, 0]")


def above(name: str, differences, value: float = 0.0, *, margin: float, source: str,
          compares: tuple[str, str] | None = None, at: float | None = None) -> Test:
    """The claim that the mean of the paired ``differences`` (one per seed) exceeds
    ``value`` (0: "the first is larger") by more than ``margin`` (> 0, in the metric's
    units; ``source``: where it comes from): module docstring."""
    return _decided(name, differences, "above", float(value), None,
                    _checked_margin(name, margin, source), source, compares, at)


def below(name: str, differences, value: float = 0.0, *, margin: float, source: str,
          compares: tuple[str, str] | None = None, at: float | None = None) -> Test:
    """The claim that the mean difference is below ``value`` by more than ``margin``."""
    return _decided(name, differences, "below", None, float(value),
                    _checked_margin(name, margin, source), source, compares, at)


def between(name: str, differences, lower: float, upper: float, *, source: str,
            compares: tuple[str, str] | None = None, at: float | None = None) -> Test:
    """The "similar" claim that the mean difference lies between ``lower`` and ``upper``
    (a tolerance; one end may be infinite: "no worse by more than 10%" is
    ``between(..., -inf, 0.1)``). Its tolerance is its margin: half the width of a finite
    range, the finite end's distance from 0 for a one-sided one; ``source`` says where the
    tolerance comes from."""
    lower, upper = float(lower), float(upper)
    if math.isnan(lower) or math.isnan(upper) or not lower < upper:
        raise ValueError(f"{name}: the tolerance ({lower}, {upper}) is empty")
    if math.isfinite(lower) and math.isfinite(upper):
        margin = (upper - lower) / 2
    elif math.isfinite(lower) or math.isfinite(upper):
        margin = abs(lower if math.isfinite(lower) else upper)
    else:
        raise ValueError(f"{name}: a tolerance needs a finite end, got ({lower}, {upper})")
    return _decided(name, differences, "between", lower, upper,
                    _checked_margin(name, margin, source), source, compares, at)


def fixed_by_setting(name: str, reason: str, *, compares: tuple[str, str] | None = None,
                     at: float | None = None, margin: float | None = None,
                     source: str = "no margin: no statistical test is run") -> Test:
    """A part of a claim whose outcome the stated setting determines whatever training does
    (``reason``, one line: identical schedules, a share of rounds fixed by the delays); no
    statistical test is run. ``margin`` and ``source``: the margin the comparison would have
    had, where the claim states one."""
    if not isinstance(reason, str) or not reason.strip() or "\n" in reason:
        raise ValueError(f"{name}: reason={reason!r} must say in one line why the setting "
                         "fixes the outcome")
    if margin is not None:
        margin = _checked_margin(name, margin, source)
    return Test(name, "fixed", None, None, None, None, None, None, None, margin, source,
                "fixed-by-setting", None, None, compares, at, reason=reason)


def sooner(name: str, first, second, *, horizon: float, margin: float, source: str,
           compares: tuple[str, str] | None = None, at: float | None = None) -> Test:
    """The claim that ``first`` reaches its target sooner than ``second`` by more than
    ``margin``: hitting times per seed (rounds, time), each ``inf`` (or above ``horizon``)
    where it was not reached within the horizon. Each time is censored at ``horizon``
    (min(t, horizon): the difference of the restricted means, second - first, is tested as
    :func:`above` 0), so a target never reached is an observation, never an error. When
    neither reaches the target on any seed the test is undecided, with the reason (the run
    is too short to tell)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or np.isnan(a).any() or np.isnan(b).any() \
            or (a < 0).any() or (b < 0).any():
        raise ValueError(f"{name}: need two equal-length lists of hitting times >= 0 (inf: not "
                         f"reached), got {first!r} and {second!r}")
    if not (math.isfinite(horizon) and horizon > 0):
        raise ValueError(f"{name}: horizon={horizon!r} must be a finite number > 0")
    margin = _checked_margin(name, margin, source)
    late_a, late_b = a >= horizon, b >= horizon
    censored = int((late_a | late_b).sum())
    if (late_a & late_b).all():
        return Test(name, "above", 0.0, 0.0, 0.0, 0.0, int(a.size), 0.0, None, margin, source,
                    "undecided", 0.0, None, compares, at, censored,
                    reason=f"neither reaches its target within the horizon {horizon:g} on any "
                           "seed: a longer run decides it")
    d = np.minimum(b, horizon) - np.minimum(a, horizon)
    return _decided(name, d, "above", 0.0, None, margin, source, compares, at, censored)


def combine(tests: Sequence[Test], rule: str = "all") -> str:
    """The verdict of a claim made of ``tests`` under ``rule`` ("all" or "any"): the first
    of their verdicts in :data:`PRIORITY` [rule]."""
    if rule not in PRIORITY:
        raise ValueError(f"rule={rule!r} must be 'all' or 'any'")
    if not tests:
        raise ValueError("a claim needs at least one test")
    verdicts = {t.verdict for t in tests}
    return next(v for v in PRIORITY[rule] if v in verdicts)


def deciding(tests: Sequence[Test], rule: str = "all") -> Test:
    """The part that decides a claim: among the parts with the claim's verdict, under "all"
    the one with the weakest evidence for the claim (the least :attr:`Test.strength`), under
    "any" the strongest."""
    verdict = combine(tests, rule)
    pool = [t for t in tests if t.verdict == verdict]
    pick = min if rule == "all" else max
    return pick(pool, key=lambda t: t.strength)
