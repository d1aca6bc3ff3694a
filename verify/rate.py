"""Rate checks: does a corollary's left-hand side decay at the published rate?

A corollary states a rate, O(term_1) + O(term_2) + ..., each term a product of powers of
its variables (``bounds.Rate`` on the registered Theorem). :func:`rate` sweeps one variable
x through a few values (the other fields fixed, or moving with x where the rate's regime
needs it, e.g. T = c K^6 so that the leading term of Yang et al. 2022, Corollary 2 leads),
measures the left-hand side at each point (exactly where the adapter can, ``exact``),
fits its exponent in x, and compares it with the published one along the same sweep:

* measured: the slope of log LHS against log x (least squares), with a 95% Student-t
  interval from the residuals and, under Monte Carlo, the sampling error of each point;
* published: the largest exponent of the rate's terms along the sweep, where each
  variable v moves like x^(p_v): p_v is fitted from the parameters derived at each point
  (T, K, m, M, R, the number of rounds U, ...), or declared by the sweep where it follows
  from its construction (the staleness of round-robin arrivals grows like M), and a term
  whose variable is 0 on the sweep (tau without delays, sigma_G = 0) vanishes.

A rate is an upper bound up to constants, so a left-hand side that decays faster
contradicts nothing. The verdict is ``contradicts`` when the whole interval lies above the
published exponent by more than ``TOL`` (the left-hand side decays more slowly than the rate
allows: along the sweep the ratio LHS/rate grows without limit), ``faster`` when it lies
below by more than ``TOL``, else ``agrees``.

Each corollary's plugin declares its sweeps with :func:`register_sweep` (fedbound's papers
as a third party's plugin does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbound import bounds

from . import limits
from .adapter import adapter_for
from .plugins import ensure_loaded, note
from .scenario import INT_MAX

#: a fitted exponent this close to the published one agrees with it
TOL = 0.05
#: the confidence level of the fitted exponent's interval
LEVEL = 0.95


@dataclass(frozen=True)
class Sweep:
    """How to sweep the rate variable ``over`` of a result: the scenario ``field`` takes each
    of ``values``; ``base`` overrides fields of the default scenario (a nested object such as
    ``problem`` is merged); ``couple`` moves other fields with x, field = round(coefficient
    x^power) for {field: (coefficient, power)}; ``powers`` declares the growth x^p of rate
    variables that follow from the construction (the others are fitted)."""

    over: str
    field: str
    values: tuple[float, ...]
    base: Mapping[str, Any] = field(default_factory=dict)
    couple: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    powers: Mapping[str, float] = field(default_factory=dict)
    note: str = ""

    def scenario(self, adapter, x: float, name: str | None = None):
        """The scenario at x (validated). ``name`` says where x comes from in messages
        (default ``<field>=x``): an integer field takes an integer x only, never rounded
        (ValueError naming it), and a coupled field that overflows is refused the same way."""
        name = name or f"{self.field}={x!r}"
        d = adapter.default_scenario().to_dict()
        for k, v in self.base.items():
            d[k] = {**d[k], **v} if isinstance(v, Mapping) and isinstance(d.get(k), dict) else v
        d[self.field] = _as_field(d.get(self.field), x, name, self.field)
        for field_, (coefficient, power) in self.couple.items():
            try:
                value = coefficient * float(x) ** power
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                raise ValueError(f"{name}: {field_} = {coefficient:g} x {x:g}^{power:g}, which the "
                                 "sweep couples to it, overflows float64")
            d[field_] = _as_field(d.get(field_), round(value) if _is_int(d.get(field_)) else value,
                                  name, field_)
        return adapter.load(d)


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _as_field(current, value, name: str, field_: str):
    """``value`` as the type of the field it replaces: an integer field takes an integral
    value up to ``scenario.INT_MAX`` (never rounded, never saturated); ValueError naming
    ``name`` and the field otherwise."""
    if not _is_int(current):
        return float(value)
    if not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())) \
            or not abs(value) <= INT_MAX:
        raise ValueError(f"{name}: {field_} is an integer field: give an integer of at most "
                         f"2^63 - 1 (fedbound never rounds or saturates one), got {value!r}")
    return int(value)


#: the declared sweeps, by key and rate variable (:func:`register_sweep`)
_SWEEPS: dict[str, dict[str, Sweep]] = {}


def register_sweep(key: str, sweep: Sweep) -> None:
    """Declare how ``fedbound rate KEY --over VAR`` sweeps (a plugin's corollary); a
    variable declared twice is an error."""
    if sweep.over in _SWEEPS.get(key, {}):
        raise ValueError(f"{key}: a rate sweep over {sweep.over} is already registered")
    _SWEEPS.setdefault(key, {})[sweep.over] = sweep
    note("sweeps", sweep_name(key, sweep.over))


def sweep_name(key: str, over: str) -> str:
    """How a declared sweep is named (``fedbound plugins``): "mllsgd.corollary1 over K"."""
    return f"{key} over {over}"


def unregister_sweeps(key: str) -> None:
    """Remove the sweeps of ``key`` (for tests)."""
    _SWEEPS.pop(key, None)


def declared() -> dict[str, dict[str, Sweep]]:
    """Every declared sweep, by key and rate variable (the plugins loaded)."""
    ensure_loaded()
    return {k: dict(v) for k, v in sorted(_SWEEPS.items())}


@dataclass
class RateResult:
    """A rate check along one variable: the points (x, the left-hand side and its 95%
    interval), the fitted exponent with its interval, the published exponent along the
    sweep and the powers of the rate's variables there, and the verdict."""

    key: str
    variant: str
    over: str
    mode: str
    x: list[float]
    lhs: list[float]
    lhs_ci: list[tuple[float, float]]
    exponent: float
    interval: tuple[float, float]
    stated: float
    powers: dict[str, float]
    verdict: str
    citation: str
    regime: str
    note: str
    scenarios: list[dict]

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "variant": self.variant, "over": self.over, "mode": self.mode,
                "x": self.x, "lhs": self.lhs, "lhs_ci": [list(c) for c in self.lhs_ci],
                "exponent": self.exponent, "interval": list(self.interval),
                "stated": self.stated, "powers": self.powers, "verdict": self.verdict,
                "citation": self.citation, "regime": self.regime, "note": self.note,
                "scenarios": self.scenarios}


def sweeps(key: str) -> dict[str, Sweep]:
    """The declared sweeps of ``key`` (an error when it has no published rate or none)."""
    thm = bounds.get(key)
    if thm.rate is None:
        raise ValueError(f"{key} states no rate (only corollaries do: "
                         f"{', '.join(k for k in bounds.keys() if bounds.get(k).rate)})")
    table = declared()
    if key not in table:
        raise ValueError(f"{key}: no rate sweep is declared (verify.rate.register_sweep)")
    return table[key]


def rate(key: str, over: str | None = None, *, variant: str | None = None, exact: bool = False,
         values: Sequence[float] | None = None,
         progress: Callable[[float], None] | None = None) -> list[RateResult]:
    """Rate checks of ``key`` along ``over`` (default: every declared variable), at the
    declared ``values`` or the given ones (at least 3). ``exact``: exact expectations (an
    error where the adapter cannot compute them), else Monte Carlo. ``progress(x)`` is
    called after each point."""
    table = sweeps(key)
    names = list(table) if over is None else [over]
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"--over {unknown[0]}: {key} is swept over {', '.join(table)}")
    return [_one(key, table[n], variant, exact, values, progress) for n in names]


def _one(key: str, sweep: Sweep, variant: str | None, exact: bool, values, progress) -> RateResult:
    ad = adapter_for(key)
    thm = bounds.get(key, variant)
    xs = tuple(sweep.values if values is None else values)
    label = (lambda i, x: f"--values[{i}]={x!r}") if values is not None else \
        (lambda i, x: f"{sweep.field}={x!r}")
    for i, x in enumerate(xs):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < math.inf:
            raise ValueError(f"{label(i, x)} must be a finite number > 0")
    if len(xs) < 3 or len(set(xs)) < len(xs):
        raise ValueError(f"{'--values' if values is not None else 'values'}={list(xs)}: a rate fit "
                         "needs at least 3 distinct positive values")
    sweep_scenarios = [sweep.scenario(ad, x, label(i, x)) for i, x in enumerate(xs)]
    limits.require_runs(f"rate {key}", {label(i, x): ad.footprint(s, exact=exact)
                                        for i, (x, s) in enumerate(zip(xs, sweep_scenarios, strict=True))})
    names = sorted({v for t in thm.rate.terms for v in t} | {sweep.over})
    points, scenarios = [], []
    for x, s in zip(xs, sweep_scenarios, strict=True):
        v = ad.check(s, variant=thm.variant, exact=exact)
        if not v.admissible:
            raise ValueError(f"{key} at {sweep.field}={x}: the corollary's hypotheses fail "
                             f"({'; '.join(v.violations)}); choose values in its regime")
        if not (math.isfinite(v.measured_mean) and v.measured_mean > 0):
            raise ValueError(f"{key} at {sweep.field}={x}: the left-hand side is "
                             f"{v.measured_mean!r}, no exponent can be fitted")
        points.append((_variables(thm, v.params, names), v))
        scenarios.append(s.to_dict())
        if progress is not None:
            progress(x)
    x = np.array([p[sweep.over] for p, _ in points])
    y = np.array([v.measured_mean for _, v in points])
    ci = [tuple(v.measured_ci) for _, v in points]
    exponent, interval = fit_exponent(x, y, [_log_se(v) for _, v in points])
    powers, zero = {}, []
    for name in names:
        col = np.array([p[name] for p, _ in points])
        if np.all(col == 0):
            zero.append(name)
        elif name in sweep.powers:
            powers[name] = float(sweep.powers[name])
        elif np.all(col > 0):
            powers[name] = round(float(np.polyfit(np.log(x), np.log(col), 1)[0]), 9) + 0.0
        else:
            raise ValueError(f"{key}: the rate variable {name} is 0 at some points of the sweep "
                             f"and not at others ({col.tolist()}); no exponent along it")
    stated = thm.rate.exponent_along(powers, zero)
    lo, hi = interval
    verdict = ("contradicts" if lo > stated + TOL else "faster" if hi < stated - TOL else "agrees")
    return RateResult(key, thm.variant, sweep.over, points[0][1].mode, x.tolist(), y.tolist(), ci,
                      exponent, interval, stated, {**powers, **dict.fromkeys(zero, 0.0)},
                      verdict, thm.rate.citation, thm.rate.regime, sweep.note, scenarios)


def fit_exponent(x, y, log_se: Sequence[float] | None = None) -> tuple[float, tuple[float, float]]:
    """The least-squares slope of log y against log x and its two-sided ``LEVEL`` interval:
    Student-t with n - 2 degrees of freedom on the residual standard error, combined with
    the propagated standard errors ``log_se`` of each log y (Monte-Carlo points; 0 for exact
    ones)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    n = lx.size
    if n < 3:
        raise ValueError(f"an exponent with an interval needs at least 3 points, got {n}")
    dx = lx - lx.mean()
    sxx = float(dx @ dx)
    w = dx / sxx
    slope = float(w @ ly)
    resid = ly - (ly.mean() + slope * dx)
    var = float(resid @ resid) / (n - 2) / sxx
    if log_se is not None:
        var += float(np.sum((w * np.asarray(log_se, dtype=float)) ** 2))
    from scipy.special import stdtrit  # t's quantile, as scipy.stats.t.ppf (0.4 s to import)

    half = float(stdtrit(n - 2, 0.5 + LEVEL / 2)) * math.sqrt(var)
    return slope, (slope - half, slope + half)


def _log_se(v) -> float:
    """The standard error of log(mean) of a Monte-Carlo verdict (0 when exact)."""
    if v.mode == "exact" or v.replicas < 2:
        return 0.0
    from .verdict import t_multiplier

    lo, hi = v.measured_ci
    return (hi - lo) / 2 / t_multiplier(v.replicas) / v.measured_mean


def _variables(thm: bounds.Theorem, params: Mapping[str, Any], names: Sequence[str]) -> dict:
    """The value of each rate variable at the derived parameters: a scalar parameter, an
    aggregate of the theorem (e.g. the number of rounds U of a schedule t), or an
    expression of them ("M - m_prime")."""
    values: dict[str, float] = {}
    for name, v in params.items():
        if np.ndim(v) == 0:
            values[name] = float(v)
    vals = {n: thm.params[n].check(v) for n, v in params.items() if n in thm.params}
    for g in thm.aggregates:
        if all(u in vals for u in g.uses) and g.symbol.name not in values:
            r = np.asarray(g.reduce(vals), dtype=float)
            if r.size == 1:
                values[g.symbol.name] = float(r)
    out = {}
    for name in names:
        if name in values:
            out[name] = values[name]
            continue
        import sympy as sp  # a composite rate variable ("M - m_prime"): only here

        expr = sp.sympify(name, locals={k: sp.Symbol(k) for k in values})
        missing = sorted(str(s) for s in expr.free_symbols if str(s) not in values)
        if missing:
            raise ValueError(f"{thm.key}: the rate variable {name!r} needs {missing}, which the "
                             "adapter does not derive")
        out[name] = float(expr.subs({sp.Symbol(k): v for k, v in values.items()}))
    return out
