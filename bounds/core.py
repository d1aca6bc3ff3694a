"""The Theorem contract and the registry.

Every published statement (lemma, theorem, corollary) is one :class:`Theorem` with
one interface, the way ``scipy.stats`` gives every distribution the same methods::

    thm = bounds.get("mllsgd.theorem1")            # default variant ("proof")
    thm.evaluate(L=1, sigma=1, Delta=1, eta=1e-3, K=64, q=2, tau=4, zeta=0.5,
                 a=np.full(4, .25), p=np.ones(4))

A theorem is built from sympy expressions over scalar symbols. Vector parameters over
workers (``a``, ``p``) enter in two ways:

* through *aggregates*: scalar symbols such as ``P = sum_i a_i p_i`` whose value is a
  numpy reduction over the last axis and whose display form is a sympy ``Sum``;
* through *per-worker conditions*: a condition written in ``a_i``, ``p_i`` that must
  hold for every worker i; it is evaluated with the worker axis last and reduced.

Numerical evaluation is lambdified once per theorem and cached; numpy arrays
broadcast, so a grid of step sizes evaluates in one call.
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import precedence

from . import compiled

# the registry lives in bounds.registry (importable without sympy); re-exported here
from .registry import (  # noqa: F401
    REFUTED,
    STATUSES,
    get,
    keys,
    list_results,
    register,
    unregister,
    variants,
)

# --------------------------------------------------------------------------- domains

#: domain name -> (predicate on a float array, human description)
_DOMAINS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], str]] = {
    "positive": (lambda x: x > 0, "> 0"),
    "nonnegative": (lambda x: x >= 0, ">= 0"),
    "unit": (lambda x: (x >= 0) & (x < 1), "in [0, 1)"),
    "probability": (lambda x: (x > 0) & (x <= 1), "in (0, 1]"),
    "positive_integer": (lambda x: (x >= 1) & (x == np.floor(x)), "an integer >= 1"),
    "weights": (lambda x: x > 0, "> 0 and summing to 1 over workers"),
}

#: domain name -> whether (smallest, largest) entry of a finite array lie in the domain;
#: with a NaN among the entries both are NaN and the test fails
_RANGES: dict[str, Callable[[float, float], bool]] = {
    "positive": lambda lo, hi: 0 < lo and hi < math.inf,
    "nonnegative": lambda lo, hi: 0 <= lo and hi < math.inf,
    "unit": lambda lo, hi: 0 <= lo and hi < 1,
    "probability": lambda lo, hi: 0 < lo and hi <= 1,
    "positive_integer": lambda lo, hi: 1 <= lo and hi < math.inf,
}


@dataclass(frozen=True)
class Param:
    """A parameter of a theorem: ``domain`` is a key of the domain table, ``vector``
    marks a per-worker array (worker axis last)."""

    name: str
    description: str
    domain: str
    unit: str = ""
    vector: bool = False

    def __post_init__(self):
        if self.domain not in _DOMAINS:
            raise ValueError(f"Param {self.name}: unknown domain {self.domain!r}")

    def check(self, value) -> np.ndarray:
        """Return ``value`` as a float array, or raise ValueError naming the parameter."""
        try:
            x = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"{self.name}={value!r} is not a number") from None
        if self.vector and x.ndim == 0:
            raise ValueError(f"{self.name} must be an array over workers, got the scalar {value!r}")
        if x.size == 0:
            raise ValueError(f"{self.name} is empty")
        if self._fits(x):
            return x
        bad = ~np.isfinite(x)
        if bad.any():
            raise ValueError(f"{self.name}{_index(bad)}={x[bad].flat[0]} is not a finite number")
        ok, desc = _DOMAINS[self.domain]
        bad = ~ok(x)
        if bad.any():
            raise ValueError(
                f"{self.name}{_index(bad)}={x[bad].flat[0]:.6g} is outside its domain: "
                f"{self.name} must be {desc} ({self.description})"
            )
        if self.domain == "weights":
            total = x.sum(axis=-1)
            far = np.abs(total - 1.0) > 1e-9
            if far.any():
                raise ValueError(
                    f"{self.name} sums to {total[far].flat[0]:.12g}, not 1: "
                    f"{self.name} must be {desc} ({self.description})"
                )
        return x

    def _fits(self, x: np.ndarray) -> bool:
        """Whether every entry of ``x`` is finite and in the domain, decided block by block
        (each block read from cache by its few reductions, no temporaries of the input's
        size); the error path, which names the first bad entry, runs only when this fails."""
        if self.domain == "weights":  # rows of workers, positive and summing to 1
            rows = x.reshape(-1, x.shape[-1])
            step = max(1, _BLOCK // rows.shape[1])
            return all(_weights_fit(rows[i:i + step]) for i in range(0, rows.shape[0], step))
        flat = x.reshape(-1)
        return all(self._block_fits(flat[i:i + _BLOCK]) for i in range(0, flat.size, _BLOCK))

    def _block_fits(self, block: np.ndarray) -> bool:
        if not _RANGES[self.domain](float(block.min()), float(block.max())):
            return False
        return self.domain != "positive_integer" or bool((np.floor(block) == block).all())


_BLOCK = 1 << 15  #: entries per block of Param._fits (256 KiB of float64)


def _weights_fit(rows: np.ndarray) -> bool:
    """Every entry > 0 (so no NaN) and every row summing to 1 (so finite), to 1e-9."""
    return bool(rows.min() > 0) and bool(  # einsum sums a short last axis fastest
        (np.abs(np.einsum("ij->i", rows) - 1.0) <= 1e-9).all())


def _index(mask: np.ndarray) -> str:
    """'[i]' / '[i, j]' of the first True entry of ``mask`` ('' for a scalar)."""
    if mask.ndim == 0:
        return ""
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    return "[" + ", ".join(map(str, idx)) + "]"


# --------------------------------------------------------------------------- pieces


@dataclass(frozen=True)
class Condition:
    """A hypothesis of a theorem, ``relation`` a sympy ``>=``/``<=``/``Eq``.

    ``per_worker`` conditions are written in the per-worker symbols (``a_i``, ``p_i``)
    and must hold for every worker. ``hint`` is added to error messages (e.g. the
    equivalent requirement on a parameter)."""

    name: str
    relation: sp.Basic
    citation: str
    per_worker: bool = False
    hint: str = ""

    @property
    def margin(self) -> sp.Expr:
        """lhs - rhs oriented so that the condition holds iff margin >= 0 (or == 0 for Eq)."""
        r = self.relation
        if isinstance(r, sp.Eq):
            return r.lhs - r.rhs
        if isinstance(r, (sp.GreaterThan, sp.StrictGreaterThan)):
            return r.lhs - r.rhs
        if isinstance(r, (sp.LessThan, sp.StrictLessThan)):
            return r.rhs - r.lhs
        raise TypeError(f"condition {self.name}: unsupported relation {type(r).__name__}")

    @property
    def is_equality(self) -> bool:
        return isinstance(self.relation, sp.Eq)


@dataclass(frozen=True)
class Erratum:
    """A difference between what the paper prints and what its proof supports."""

    where: str
    printed: str
    corrected: str
    citation: str


@dataclass(frozen=True)
class Rate:
    """The published convergence rate of a corollary, O(term_1) + O(term_2) + ...: each
    term is ``{variable: exponent}`` (``{"m": -0.5, "K": -0.5, "T": -0.5}`` for
    O(1/sqrt(m K T))), the first the leading one; a variable is a parameter of the theorem
    (or an aggregate such as U, or an expression of them such as "M - m_prime"). ``regime``
    says where the first term leads, ``citation`` where the paper states the rate. Along a
    sweep on which each variable v grows like x^(p_v), the rate decays like x^e with e the
    largest sum_v exponent_v p_v over the terms (:meth:`exponent_along`)."""

    terms: tuple[Mapping[str, float], ...]
    citation: str
    regime: str = ""

    def __post_init__(self):
        if not self.terms or any(not t or not all(math.isfinite(e) for e in t.values())
                                 for t in self.terms):
            raise ValueError(f"Rate needs terms of finite exponents, got {self.terms}")

    @property
    def exponents(self) -> dict[str, float]:
        """The leading term's exponent of each variable."""
        return dict(self.terms[0])

    def exponent_along(self, powers: Mapping[str, float], zero: Sequence[str] = ()) -> float:
        """The exponent of the rate along a sweep on which variable v grows like
        x^powers[v] (a variable not in ``powers`` is held fixed). The terms with a variable
        in ``zero`` (0 on the sweep, e.g. tau without delays) vanish; -inf if all do."""
        present = [t for t in self.terms if not set(t) & set(zero)]
        return max((sum(e * powers.get(v, 0.0) for v, e in t.items()) for t in present),
                   default=-math.inf)


@dataclass(frozen=True)
class Aggregate:
    """A scalar symbol reducing vector parameters, e.g. ``P = sum_i a_i p_i``.

    ``display`` is its sympy form for printing; ``reduce`` maps the parameter values
    (worker axis last) to its numeric value."""

    symbol: sp.Symbol
    display: sp.Expr
    reduce: Callable[[Mapping[str, np.ndarray]], np.ndarray]
    uses: tuple[str, ...]


@dataclass(frozen=True)
class StepChoice:
    """The largest admissible step and the condition that binds there."""

    step: float
    binding: str
    worker: int | None = None


@dataclass(frozen=True)
class Violation:
    condition: str
    citation: str
    shortfall: float
    worker: int | None = None

    def __str__(self) -> str:
        who = f" at worker {self.worker}" if self.worker is not None else ""
        if not math.isfinite(self.shortfall):
            return (f"{self.condition} ({self.citation}) fails{who}: a side of it is not finite "
                    "in float64 at these parameters")
        return f"{self.condition} ({self.citation}) fails{who} by {self.shortfall:.6g}"


# --------------------------------------------------------------------------- theorem

_TOL = 1e-12  # relative tolerance for conditions at their boundary (e.g. at max_step)


@dataclass
class Theorem:
    """One published statement, in one variant.

    ``expr`` is the right-hand side as a sum of named ``term_exprs``; ``lhs`` says in
    words (and LaTeX) what it bounds. ``step`` names the step-size parameter, if any.
    ``worker_symbols`` maps per-worker symbols (``a_i``) to the vector parameter names
    (``a``)."""

    key: str
    variant: str
    title: str
    citation: str
    lhs: str
    params: dict[str, Param]
    term_exprs: dict[str, sp.Expr]
    symbols: dict[str, sp.Symbol]
    conditions: list[Condition] = field(default_factory=list)
    errata: list[Erratum] = field(default_factory=list)
    aggregates: list[Aggregate] = field(default_factory=list)
    worker_symbols: dict[sp.Symbol, str] = field(default_factory=dict)
    step: str | None = None
    status: str = "unverified"
    notes: str = ""
    #: the published rate (corollaries), see :class:`Rate`
    rate: Rate | None = None
    _compiled: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"{self.key}: status {self.status!r} not in {STATUSES}")
        known = set(self.symbols.values()) | {g.symbol for g in self.aggregates}
        known |= set(self.worker_symbols)
        for name, e in self.term_exprs.items():
            unknown = e.free_symbols - known
            if unknown:
                raise ValueError(f"{self.key}: term {name} uses undeclared symbols {unknown}")

    # ---- symbolic ------------------------------------------------------------
    @cached_property
    def expr(self) -> sp.Expr:
        """The right-hand side: the sum of the terms."""
        return sp.Add(*self.term_exprs.values())

    @property
    def expr_display(self) -> sp.Expr:
        """``expr`` with aggregates written out as sums over workers."""
        return self.expr.subs({g.symbol: g.display for g in self.aggregates})

    def latex(self) -> str:
        conds = r" \\ ".join(
            sp.latex(c.relation) + (r"\ \forall i" if c.per_worker else "")
            for c in self.conditions
        )
        body = rf"{self.lhs} \le {sp.latex(self.expr_display)}"
        return body if not conds else rf"{body} \quad\text{{if}}\quad \begin{{cases}} {conds} \end{{cases}}"

    def _repr_latex_(self) -> str:
        return f"$\\displaystyle {self.latex()}$"

    def __repr__(self) -> str:
        return f"<Theorem {self.key} [{self.variant}] {self.status}: {self.title}>"

    # ---- parameter handling -----------------------------------------------------
    def _needed(self, exprs: Sequence[sp.Expr]) -> list[str]:
        """Parameter names that the given expressions depend on (aggregates expanded)."""
        by_symbol = {s: n for n, s in self.symbols.items()}
        names: set[str] = set()
        agg = {g.symbol: g for g in self.aggregates}
        for e in exprs:
            for s in e.free_symbols:
                if s in by_symbol:
                    names.add(by_symbol[s])
                elif s in agg:
                    names.update(agg[s].uses)
                elif s in self.worker_symbols:
                    names.add(self.worker_symbols[s])
        return sorted(names, key=list(self.params).index)

    def required(self) -> list[str]:
        """The parameters that the right-hand side and the conditions depend on (the others
        of ``params`` are accepted and ignored, e.g. a step that a corollary fixes)."""
        return self._needed([self.expr, *(c.margin for c in self.conditions)])

    def _values(self, names: Sequence[str], given: Mapping[str, object]) -> dict[str, np.ndarray]:
        unknown = set(given) - set(self.params)
        if unknown:
            raise ValueError(
                f"{self.key}: unknown parameter(s) {sorted(unknown)}; "
                f"parameters are {sorted(self.params)}"
            )
        missing = [n for n in names if n not in given]
        if missing:
            raise ValueError(f"{self.key}: missing parameter(s) {missing}")
        vals = {n: self.params[n].check(given[n]) for n in names}
        sizes = {vals[n].shape[-1] for n in names if self.params[n].vector}
        if len(sizes) > 1:
            vec = [f"{n}: {vals[n].shape[-1]}" for n in names if self.params[n].vector]
            raise ValueError(f"{self.key}: vector parameters differ in length ({', '.join(vec)})")
        return vals

    def _scalar_args(self, vals: Mapping[str, np.ndarray]) -> dict[sp.Symbol, np.ndarray]:
        args = {self.symbols[n]: v for n, v in vals.items() if not self.params[n].vector}
        for g in self.aggregates:
            if all(u in vals for u in g.uses):
                args[g.symbol] = g.reduce(vals)
        return args

    def _worker_args(self, vals: Mapping[str, np.ndarray]) -> dict[sp.Symbol, np.ndarray]:
        """Arguments for per-worker evaluation: scalars get a trailing worker axis."""
        args = {s: np.asarray(v)[..., None] for s, v in self._scalar_args(vals).items()}
        for sym, name in self.worker_symbols.items():
            if name in vals:
                args[sym] = vals[name]
        return args

    # ---- numeric -----------------------------------------------------------------
    def _fn(self, e: sp.Expr) -> tuple[list[sp.Symbol], Callable]:
        """Numpy function of ``e`` (once per expression and process; its source is generated
        once and cached across processes by :mod:`bounds.compiled`): common subexpressions
        computed once, small integer powers as products (:class:`_Printer`)."""
        if e not in self._compiled:
            syms = sorted(e.free_symbols, key=str)
            fn = compiled.function(_source_key(e, syms), lambda: _numpy_source(e, syms))
            self._compiled[e] = (syms, fn)
        return self._compiled[e]

    def _eval(self, e: sp.Expr, args: Mapping[sp.Symbol, np.ndarray]) -> np.ndarray:
        syms, f = self._fn(e)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = f(*(args[s] for s in syms))
        shape = np.broadcast_shapes(*(np.shape(args[s]) for s in syms)) if syms else ()
        return np.broadcast_to(np.asarray(out, dtype=float), shape)

    def evaluate(self, **values) -> float | np.ndarray:
        """The right-hand side at ``values``; arrays broadcast (vectors over workers
        are reduced inside). Raises ValueError for a missing or out-of-domain
        parameter, or where the expression is undefined; +inf is returned as such."""
        vals = self._values(self._needed([self.expr]), values)
        out = self._eval(self.expr, self._scalar_args(vals))
        return _bound_value(out, f"{self.key} [{self.variant}]")

    def terms(self, **values) -> dict[str, float | np.ndarray]:
        """Each named term of the right-hand side; they sum to :meth:`evaluate`."""
        vals = self._values(self._needed([self.expr]), values)
        args = self._scalar_args(vals)
        return {
            n: _bound_value(self._eval(e, args), f"{self.key} term {n}")
            for n, e in self.term_exprs.items()
        }

    # ---- conditions ------------------------------------------------------------------
    def _margins(self, vals, without: sp.Symbol | None = None
                 ) -> list[tuple[Condition, np.ndarray, np.ndarray]]:
        """(condition, margin, scale) per condition (those free of ``without`` only);
        per-worker ones keep the worker axis."""
        out = []
        for c in self.conditions:
            if without is not None and without in c.margin.free_symbols:
                continue
            args = self._worker_args(vals) if c.per_worker else self._scalar_args(vals)
            m = self._eval(c.margin, args)
            r = c.relation
            # the larger side, not their sum: finite whenever both sides are (no overflow);
            # inf or NaN when a side is not finite, and then the condition fails (_holds)
            scale = np.maximum(np.abs(self._eval(r.lhs, args)), np.abs(self._eval(r.rhs, args)))
            out.append((c, m, scale))
        return out

    def violations(self, **values) -> list[Violation]:
        """Every condition that fails at ``values``, with the amount by which it fails
        (for a grid, the worst point; for a per-worker condition, the worst worker)."""
        vals = self._values(self._needed([c.margin for c in self.conditions]), values)
        found = []
        for c, m, scale in self._margins(vals):
            bad = ~_holds(c, m, scale)
            if not bad.any():
                continue
            short = np.where(bad, np.nan_to_num(np.abs(m), nan=np.inf), -np.inf)
            worst = np.unravel_index(int(np.argmax(short)), short.shape) if short.ndim else ()
            worker = int(worst[-1]) if c.per_worker and worst else None
            found.append(Violation(c.name, c.citation, float(short[worst]), worker))
        return found

    def admissible(self, **values) -> bool | np.ndarray:
        """True where every condition holds. With array inputs, an array of the
        broadcast shape (per-worker conditions are reduced over workers)."""
        vals = self._values(self._needed([c.margin for c in self.conditions]), values)
        ok = np.asarray(True)
        for c, m, scale in self._margins(vals):
            holds = _holds(c, m, scale)
            if c.per_worker:
                holds = holds.all(axis=-1)
            ok = ok & holds
        return bool(ok) if ok.ndim == 0 else ok

    # ---- step size ------------------------------------------------------------------
    def max_step(self, **values) -> float:
        """The largest admissible step size (parameter ``self.step``).

        Every condition is a polynomial of degree <= 2 in the step for the encoded
        papers; the admissible set of each is then ``(0, root]`` with the root in the
        rationalised closed form ``2C / (-B + sqrt(B^2 - 4AC))`` of
        ``A s^2 + B s + C >= 0``. See :meth:`step_choice` for the binding condition."""
        return self.step_choice(**values).step

    def step_limits(self, **values) -> dict[str, float | np.ndarray]:
        """The largest step each step-size condition allows, by condition name: a float,
        or an array over workers for a per-worker condition (e.g. eta_i^max of (12)).
        Raises ValueError if a condition free of the step fails, or if no step > 0
        satisfies one."""
        if self.step is None:
            raise ValueError(f"{self.key} has no step-size parameter")
        if self.step in values:
            raise ValueError(f"{self.key}: give the parameters without the step {self.step!r}")
        s = self.symbols[self.step]
        needed = [n for n in self._needed([c.margin for c in self.conditions]) if n != self.step]
        vals = self._values(needed, values)
        for c, m, scale in self._margins(vals, without=s):
            if not _holds(c, m, scale).all():
                at = ", ".join(f"{n}={_shown(vals[n])}" for n in self._needed([c.margin]))
                raise ValueError(f"{c.name} ({c.citation}) fails whatever the step, at {at}")
        limits = {}
        for c in self.conditions:
            if s in c.margin.free_symbols:
                args = self._worker_args(vals) if c.per_worker else self._scalar_args(vals)
                root = np.asarray(self._condition_root(c, s, args))
                if root.ndim > (1 if c.per_worker else 0):
                    grids = [n for n, v in vals.items() if np.ndim(v) > self.params[n].vector]
                    raise ValueError(f"{self.key}: step limits need scalar parameters, got a "
                                     "grid: " + ", ".join(f"{n}={_shown(vals[n])}" for n in grids))
                limits[c.name] = root if c.per_worker else float(root)
        return limits

    def step_choice(self, **values) -> StepChoice:
        """Largest admissible step and the condition (and worker) that binds."""
        best = StepChoice(math.inf, "none: no condition limits the step")
        for name, limit in self.step_limits(**values).items():
            worker = int(np.argmin(limit)) if np.ndim(limit) else None
            step = float(np.min(limit))
            if step < best.step:
                best = StepChoice(step, name, worker)
        return best

    def _step_coefficients(self, c: Condition, s: sp.Symbol) -> tuple[sp.Expr, sp.Expr, sp.Expr]:
        """(A, B, C) of the margin of ``c`` as A s^2 + B s + C (expanded once and cached)."""
        key = ("step polynomial", c.name, s)
        if key not in self._compiled:
            poly = sp.Poly(sp.expand(c.margin), s)
            if poly.degree() > 2:
                raise NotImplementedError(f"{c.name}: degree {poly.degree()} in {s}")
            coeffs = dict(zip((m[0] for m in poly.monoms()), poly.coeffs(), strict=True))
            self._compiled[key] = tuple(coeffs.get(d, sp.Integer(0)) for d in (2, 1, 0))
        return self._compiled[key]

    def _condition_root(self, c: Condition, s: sp.Symbol, args) -> np.ndarray:
        A, B, C = (self._eval(e, args) for e in self._step_coefficients(c, s))
        if (C <= 0).any():
            bad = C <= 0
            worker = f" at worker {int(np.argwhere(bad)[0][-1])}" if c.per_worker else ""
            vals = ""
            if c.per_worker:
                i = int(np.argwhere(bad)[0][-1])
                vals = ": " + ", ".join(
                    f"{name}[{i}]={float(np.ravel(args[sym])[i]):.6g}"
                    for sym, name in self.worker_symbols.items()
                    if sym in c.margin.free_symbols
                )
            hint = f" ({c.hint})" if c.hint else ""
            raise ValueError(
                f"no {self.step} > 0 satisfies {c.name} ({c.citation}){worker}{vals}{hint}"
            )
        if (A > 0).any():
            raise NotImplementedError(f"{c.name}: admissible set in {s} is not an interval from 0")
        names = ", ".join(sorted(str(x) for x in c.margin.free_symbols if x != s))
        if not all(np.isfinite(x).all() for x in (A, B, C)):
            raise ValueError(f"{c.name} ({c.citation}) cannot be solved for {self.step}: its "
                             f"coefficients overflow, {names} too extreme")
        # the roots do not change when A, B, C are divided by the largest of them (C > 0
        # here), and B * B can no longer overflow (beta = 1e200 made the root 0)
        m = np.maximum(np.maximum(np.abs(A), np.abs(B)), C)
        A, B, C = A / m, B / m, C / m
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            disc = np.sqrt(np.maximum(B * B - 4 * A * C, 0.0))
            quad = 2 * C / (-B + disc)
            lin = np.where(B < 0, -C / np.where(B < 0, B, -1.0), np.inf)
        root = np.where(A < 0, quad, lin)
        if not (root > 0).all():  # below the smallest float: no step is representable
            raise ValueError(f"the largest {self.step} that satisfies {c.name} ({c.citation}) "
                             f"is below the smallest positive float: {names} too extreme")
        return root


def _shown(x: np.ndarray) -> str:
    """A parameter's value in a message: the number, or the extremes of an array."""
    return f"{float(x):.6g}" if np.ndim(x) == 0 else f"[{np.min(x):.6g} .. {np.max(x):.6g}]"


class _Printer(NumPyPrinter):
    """NumPy code with x**k written as x*x*...*x (and 1/(x*...*x)) for integers
    2 <= |k| <= 4 and x**-1 as 1/x: numpy's ``power`` costs several multiplications per
    element, and sympy prints negative integer powers as float powers."""

    def _print_Pow(self, expr, rational=False):
        base, exponent = expr.as_base_exp()
        if exponent.is_Integer and 1 <= abs(int(exponent)) <= 4 and exponent != 1:
            factor = self.parenthesize(base, precedence(expr), strict=False)
            product = "*".join([factor] * abs(int(exponent)))
            return f"({product})" if exponent > 0 else f"(1/({product}))"
        return super()._print_Pow(expr, rational=rational)


#: lambdify's own printer settings
_PRINTER_SETTINGS = {"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True}


@cache
def _printer_fingerprint() -> str:
    """What the generated source depends on besides the expression: sympy's version, the
    printer's code and settings."""
    return "\n".join([sp.__version__, inspect.getsource(_Printer), repr(_PRINTER_SETTINGS)])


def _source_key(e: sp.Expr, syms: Sequence[sp.Symbol]) -> str:
    """The cache key of the source of ``e`` with arguments ``syms`` (SHA-256): the
    expression in full (``srepr`` names each symbol's assumptions), the argument order and
    :func:`_printer_fingerprint`."""
    text = "\n".join([_printer_fingerprint(), sp.srepr(e), ",".join(map(str, syms))])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _numpy_source(e: sp.Expr, syms: Sequence[sp.Symbol]) -> str:
    """Self-contained Python source of ``lambdify(syms, e)`` (the function
    ``bounds.compiled.FUNCTION``): the lambdified code preceded by an import of each global
    name it uses, from numpy or the module the printer took it from."""
    printer = _Printer(dict(_PRINTER_SETTINGS))
    f = sp.lambdify(syms, e, "numpy", cse=True, printer=printer)
    modules = ["numpy", *printer.module_imports]
    lines = []
    for name in sorted(_global_names(f.__code__)):
        obj = f.__globals__.get(name, getattr(builtins, name, None))
        if obj is getattr(builtins, name, None):
            continue
        source = next((m for m in modules if getattr(importlib.import_module(m), name, None) is obj),
                      None)
        if source is None:
            raise NotImplementedError(f"generated code of {e} uses {name!r}, found in none of "
                                      f"{modules}")
        lines.append(f"from {source} import {name}\n")
    return "".join(lines) + "\n\n" + inspect.getsource(f)


def _global_names(code) -> set[str]:
    """The global names a code object (and the code nested in it) refers to."""
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _global_names(c)
    return names


def _holds(c: Condition, margin: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Whether ``c`` holds, up to a relative tolerance for round-off at its boundary. A
    condition holds only where both of its sides are finite (``scale``, the larger of their
    magnitudes, is finite): an overflowing side never makes a condition hold."""
    finite = np.isfinite(scale) & ~np.isnan(margin)
    with np.errstate(invalid="ignore"):
        tol = _TOL * np.maximum(np.where(finite, scale, 1.0), 1.0)
        ok = (np.abs(margin) <= tol) if c.is_equality else (margin >= -tol)
    return finite & ok


def _bound_value(x: np.ndarray, what: str) -> float | np.ndarray:
    """An upper bound's value: finite, or +inf (a genuinely infinite right-hand side, or
    one beyond the float range, which is still a valid upper bound). NaN and -inf are
    not values of a bound and raise."""
    if not np.min(x) > -np.inf:  # the smallest entry is NaN (any NaN) or -inf
        raise ValueError(f"{what} is undefined (NaN or -inf) at the given parameters")
    return float(x) if np.ndim(x) == 0 else np.asarray(x)
