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
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property

import numpy as np
import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import precedence

from . import compiled
from . import numeric as nm
from .numeric import Param, StepChoice, Violation  # noqa: F401  (part of core's interface)

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
    """A difference between what the paper prints and what its proof supports: where it is,
    what is printed, what the proof supports (and why), and the citation. ``where``,
    ``printed`` and ``corrected`` are prose whose formulas are LaTeX in ``$...$`` spans
    (``"$\\zeta/(1-\\zeta^2)$ (printed)"``), the notation of the paper: the report shows
    them as math, a terminal as their LaTeX."""

    where: str
    printed: str
    corrected: str
    citation: str

    def __post_init__(self):
        for name in ("where", "printed", "corrected", "citation"):
            text = getattr(self, name)
            dollars = len(re.findall(r"(?<!\\)\$", text))
            if dollars % 2:
                raise ValueError(f"Erratum {name}={text!r} has {dollars} unescaped '$': "
                                 "each formula must open and close with one")


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


# --------------------------------------------------------------------------- theorem

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
        body = rf"{self.lhs} \le {sp.latex(self.expr_display)}"
        conds = self._conditions_latex()
        return body if not conds else rf"{body} \quad\text{{if}}\quad \begin{{cases}} {conds} \end{{cases}}"

    def _conditions_latex(self) -> str:
        """The conditions, one row each, for a ``cases`` environment ('' without any)."""
        return r" \\ ".join(sp.latex(c.relation) + (r"\ \forall i" if c.per_worker else "")
                            for c in self.conditions)

    def _repr_latex_(self) -> str:
        """The statement as a notebook shows it: one summand of the right-hand side per line
        (as :meth:`latex` on one line, a bound of several terms is wider than the page and
        Jupyter clips it), then its conditions."""
        rows = []
        for i, term in enumerate(self.expr_display.as_ordered_terms()):  # latex()'s order
            text = sp.latex(term)
            sign = "" if i == 0 else ("" if text.startswith("-") else "+ ")
            rows.append(f"& {sign}{text}")
        conds = self._conditions_latex()
        if conds:
            rows.append(rf"& \text{{if}}\quad \begin{{cases}} {conds} \end{{cases}}")
        body = r" \\ ".join(rows)
        return rf"$\displaystyle \begin{{aligned}} {self.lhs} \le\ {body} \end{{aligned}}$"

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

    def term_params(self, name: str) -> list[str]:
        """The parameters that the term ``name`` depends on."""
        return self._needed([self.term_exprs[name]])

    def required(self) -> list[str]:
        """The parameters that the right-hand side and the conditions depend on (the others
        of ``params`` are accepted and ignored, e.g. a step that a corollary fixes)."""
        return self._needed([self.expr, *(c.margin for c in self.conditions)])

    def _values(self, names: Sequence[str], given: Mapping[str, object]) -> dict[str, np.ndarray]:
        return nm.checked_values(self.key, self.params, names, given)

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
        return nm.call(f, [args[s] for s in syms])

    def evaluate(self, **values) -> float | np.ndarray:
        """The right-hand side at ``values``; arrays broadcast (vectors over workers
        are reduced inside). Raises ValueError for a missing or out-of-domain
        parameter, or where the expression is undefined; +inf is returned as such."""
        vals = self._values(self._needed([self.expr]), values)
        out = self._eval(self.expr, self._scalar_args(vals))
        return nm.bound_value(out, f"{self.key} [{self.variant}]")

    def terms(self, **values) -> dict[str, float | np.ndarray]:
        """Each named term of the right-hand side; they sum to :meth:`evaluate`."""
        vals = self._values(self._needed([self.expr]), values)
        args = self._scalar_args(vals)
        return {
            n: nm.bound_value(self._eval(e, args), f"{self.key} term {n}")
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
        return nm.violations(self._margins(vals))

    def admissible(self, **values) -> bool | np.ndarray:
        """True where every condition holds. With array inputs, an array of the
        broadcast shape (per-worker conditions are reduced over workers)."""
        vals = self._values(self._needed([c.margin for c in self.conditions]), values)
        return nm.admissible(self._margins(vals))

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
            if not nm.holds(c.is_equality, m, scale).all():
                at = ", ".join(f"{n}={nm.shown(vals[n])}" for n in self._needed([c.margin]))
                raise ValueError(f"{c.name} ({c.citation}) fails whatever the step, at {at}")
        limits = {}
        for c in self.conditions:
            if s in c.margin.free_symbols:
                args = self._worker_args(vals) if c.per_worker else self._scalar_args(vals)
                limits[c.name] = nm.step_limit(self.key, self._condition_root(c, s, args),
                                               c.per_worker, vals, self.params)
        return limits

    def step_choice(self, **values) -> StepChoice:
        """Largest admissible step and the condition (and worker) that binds."""
        return nm.step_choice(self.step_limits(**values))

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
        names = ", ".join(sorted(str(x) for x in c.margin.free_symbols if x != s))
        workers = [(name, args[sym]) for sym, name in self.worker_symbols.items()
                   if c.per_worker and sym in c.margin.free_symbols]
        return nm.condition_root(A, B, C, condition=c, step=self.step, symbol=str(s),
                                 names=names, worker_values=workers)


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


_bound_value = nm.bound_value  # the name tests and callers know
