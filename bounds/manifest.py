"""A theorem's numeric half, saved once and loaded without sympy.

Building a :class:`~bounds.core.Theorem` costs sympy's import and its symbolic work in every
process. What evaluating it needs is numeric: the generated numpy functions of its expression,
terms and conditions (cached across processes by :mod:`bounds.compiled`), the parameters with
their domains, and how each function takes its arguments. :func:`save` writes that description,
the *manifest*, next to the generated functions::

    <bounds.compiled.cache_dir()>/theorems/<key>.<variant>.json

and :func:`load` gives a :class:`NumericTheorem` from it, which answers ``evaluate``,
``terms``, ``admissible``, ``violations``, ``step_limits``, ``step_choice`` and ``max_step``
exactly as the Theorem does: both compute through :mod:`bounds.numeric` and the same generated
functions, so numbers and messages agree bit for bit.

A manifest is keyed by fedbound's version, sympy's version (read from the installed package's
metadata, without importing sympy) and a SHA-256 of the sources of :mod:`bounds`; it is used
only when its key matches and it is complete (the integrity rules of :mod:`bounds.compiled`:
a header naming the key and the SHA-256 of the body, written to a temporary name and
renamed). Only the results built by a module of :mod:`bounds` (the four papers', whose
plugins register them by the path of their build, ``"fedbound.bounds.hfl:theorem2"``) get a
manifest, since its key covers the sources of :mod:`bounds` alone, and only those whose
aggregates reduce through named functions of :mod:`bounds.reduce` (or a ``functools.partial``
of one, whose keywords the manifest stores) and whose cross-parameter check, if any (a
theorem's ``cross_check``), is one too; any other result, and any miss, is built with sympy as
before.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Mapping
from functools import cache, partial
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from . import compiled, registry
from . import numeric as nm

FORMAT = 2  #: the manifest's layout; a change of it makes every stored manifest stale
REDUCERS = "fedbound.bounds.reduce"  #: the only module a manifest's aggregates may name


@cache
def _sources_digest() -> str:
    """SHA-256 of the sources of :mod:`bounds` (each file's name and bytes, sorted by name)."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _sympy_version() -> str:
    try:
        return version("sympy")
    except PackageNotFoundError:  # pragma: no cover  (sympy is a dependency)
        return "none"


def stamp(key: str, variant: str) -> str:
    """The key of the manifest of ``key`` [``variant``]: a SHA-256 of the format, fedbound's
    and sympy's versions, the sources of :mod:`bounds`, the key and the variant."""
    text = json.dumps([FORMAT, compiled._version(), _sympy_version(), _sources_digest(), key,
                       variant])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def path(key: str, variant: str) -> Path:
    return compiled.cache_dir() / "theorems" / f"{key}.{variant}.json"


# ---------------------------------------------------------------------------- writing


def save(thm) -> bool:
    """Write the manifest of the built result ``thm`` (a :class:`~bounds.core.Theorem`);
    False where it has none (a plugin's result, an aggregate that is not a named function of
    :mod:`bounds.reduce`) or the cache cannot be written."""
    if not _in_bounds(thm.key):
        return False
    described = describe(thm)
    if described is None:
        return False
    return compiled.write(path(thm.key, thm.variant), stamp(thm.key, thm.variant),
                          json.dumps(described))


def _in_bounds(key: str) -> bool:
    """Whether ``key`` is registered and built by a module of :mod:`bounds` (what the
    manifest's key covers), whoever registered it."""
    return key in registry.keys() and (registry.module_of(key) or "").startswith(f"{__package__}.")


def describe(thm) -> dict | None:
    """The manifest of ``thm`` as a JSON-ready dict (generating and caching each of its
    functions), or None where it cannot be described without sympy."""
    from . import core  # sympy: only here, on the path that has built the theorem anyway

    names = ([str(s) for s in thm.symbols.values()] + [str(g.symbol) for g in thm.aggregates]
             + [str(s) for s in thm.worker_symbols])
    if len(set(names)) != len(names):  # arguments are passed by symbol name
        return None
    aggregates = []
    for g in thm.aggregates:
        bound = isinstance(g.reduce, partial)
        f, keywords = (g.reduce.func, g.reduce.keywords) if bound else (g.reduce, {})
        if not _named(f) or bound and g.reduce.args or not all(
                isinstance(x, str | None) for x in keywords.values()):  # plain JSON only
            return None
        aggregates.append({"symbol": str(g.symbol), "reduce": f.__name__,
                           "keywords": dict(keywords), "uses": list(g.uses)})
    check = getattr(thm, "cross_check", None)
    if check is not None and not _named(check):
        return None

    def function(e) -> dict:
        syms = sorted(e.free_symbols, key=str)  # the argument order of Theorem._fn
        key = core._source_key(e, syms)
        where = compiled.cache_dir() / f"{key}.py"
        if compiled.read(where, key) is None and not compiled.write(
                where, key, core._numpy_source(e, syms)):
            raise _Missing(key)
        return {"key": key, "args": [str(s) for s in syms]}

    try:
        return _description(thm, aggregates, None if check is None else check.__name__, function)
    except _Missing:  # the cache cannot be written
        return None


def _named(f) -> bool:
    """Whether ``f`` is a module-level function of :mod:`bounds.reduce` (by its name)."""
    return (getattr(f, "__module__", None) == REDUCERS
            and getattr(f, "__qualname__", None) == getattr(f, "__name__", ""))


def _description(thm, aggregates: list, cross_check: str | None, function) -> dict | None:
    """The body of :func:`describe` (None: a step condition of degree above 2 in the step)."""
    s = thm.symbols[thm.step] if thm.step is not None else None
    conditions = []
    for c in thm.conditions:
        free = c.margin.free_symbols
        row = {"name": c.name, "citation": c.citation, "per_worker": c.per_worker,
               "hint": c.hint, "is_equality": c.is_equality, "needed": thm._needed([c.margin]),
               "margin": function(c.margin), "lhs": function(c.relation.lhs),
               "rhs": function(c.relation.rhs), "has_step": s is not None and s in free}
        if row["has_step"]:
            try:
                row["coefficients"] = [function(e) for e in thm._step_coefficients(c, s)]
            except NotImplementedError:
                return None
            row["others"] = ", ".join(sorted(str(x) for x in free if x != s))
            row["worker_params"] = [n for w, n in thm.worker_symbols.items() if w in free]
        conditions.append(row)
    return {
        "key": thm.key, "variant": thm.variant, "status": thm.status, "step": thm.step,
        "step_symbol": None if s is None else str(s),
        "params": {n: [p.description, p.domain, p.unit, p.vector] for n, p in thm.params.items()},
        "symbols": {n: str(sym) for n, sym in thm.symbols.items()},
        "aggregates": aggregates, "cross_check": cross_check,
        "worker_symbols": {str(w): n for w, n in thm.worker_symbols.items()},
        "expr": function(thm.expr), "expr_needed": thm._needed([thm.expr]),
        "terms": {n: function(e) for n, e in thm.term_exprs.items()},
        "term_needed": {n: thm._needed([e]) for n, e in thm.term_exprs.items()},
        "conditions": conditions,
        "conditions_needed": thm._needed([c.margin for c in thm.conditions]),
        "required": thm.required(),
    }


# ---------------------------------------------------------------------------- reading


def load(key: str, variant: str | None = None) -> NumericTheorem | None:
    """The numeric theorem of ``key`` [``variant``] from a valid manifest, or None (an
    unknown or plugin result, no manifest, a stale or damaged one, a missing function)."""
    if not _in_bounds(key):
        return None
    variant = registry.default(key) if variant is None else variant
    if variant not in registry.variants(key):
        return None
    body = compiled.read(path(key, variant), stamp(key, variant))
    if body is None:
        return None
    try:
        return NumericTheorem(json.loads(body))
    except (LookupError, ValueError, TypeError, AttributeError, ImportError):
        return None


class _Missing(LookupError):
    """A generated function of the manifest is not in the cache."""


def _reducer(reducers, name: str, keywords: Mapping):
    """The reducer ``name`` of :mod:`bounds.reduce`, with its stored ``keywords``."""
    f = getattr(reducers, name)
    return partial(f, **keywords) if keywords else f


def _function(spec: Mapping) -> tuple[list[str], object]:
    key = spec["key"]
    source = compiled.read(compiled.cache_dir() / f"{key}.py", key)
    if source is None:
        raise _Missing(key)
    return list(spec["args"]), compiled.define(source)


class NumericTheorem:
    """A registered result evaluated from its manifest, without sympy: the numeric methods of
    :class:`~bounds.core.Theorem`, with the same numbers and messages."""

    def __init__(self, m: Mapping):
        from .numeric import Param

        self.key, self.variant, self.status = m["key"], m["variant"], m["status"]
        self.step, self._step_symbol = m["step"], m["step_symbol"]
        self.params = {n: Param(n, d, dom, unit, bool(vec))
                       for n, (d, dom, unit, vec) in m["params"].items()}
        self._symbols = dict(m["symbols"])
        reducers = importlib.import_module(REDUCERS)
        self._aggregates = [(g["symbol"], _reducer(reducers, g["reduce"], g["keywords"]),
                             tuple(g["uses"])) for g in m["aggregates"]]
        check = m["cross_check"]
        self._cross_check = None if check is None else getattr(reducers, check)
        self._worker_symbols = dict(m["worker_symbols"])
        self._expr, self._expr_needed = _function(m["expr"]), list(m["expr_needed"])
        self._terms = {n: _function(f) for n, f in m["terms"].items()}
        self._term_needed = {n: list(v) for n, v in m["term_needed"].items()}
        self.conditions = [self._condition(c) for c in m["conditions"]]
        self._conditions_needed = list(m["conditions_needed"])
        self._required = list(m["required"])

    @staticmethod
    def _condition(c: Mapping) -> SimpleNamespace:
        fns = {k: _function(c[k]) for k in ("margin", "lhs", "rhs")}
        coefficients = [_function(f) for f in c["coefficients"]] if c["has_step"] else None
        return SimpleNamespace(**{**c, **fns, "coefficients": coefficients})

    def __repr__(self) -> str:
        return f"<NumericTheorem {self.key} [{self.variant}] {self.status}>"

    # ---- arguments ---------------------------------------------------------------
    def required(self) -> list[str]:
        return list(self._required)

    def term_params(self, name: str) -> list[str]:
        return list(self._term_needed[name])

    def _values(self, names, given) -> dict[str, np.ndarray]:
        vals = nm.checked_values(self.key, self.params, names, given)
        return vals if self._cross_check is None else self._cross_check(self.params, given, vals)

    def _scalar_args(self, vals) -> dict[str, np.ndarray]:
        args = {self._symbols[n]: v for n, v in vals.items() if not self.params[n].vector}
        for symbol, reduce, uses in self._aggregates:
            if all(u in vals for u in uses):
                args[symbol] = reduce(vals)
        return args

    def _worker_args(self, vals) -> dict[str, np.ndarray]:
        args = {s: np.asarray(v)[..., None] for s, v in self._scalar_args(vals).items()}
        for symbol, name in self._worker_symbols.items():
            if name in vals:
                args[symbol] = vals[name]
        return args

    @staticmethod
    def _eval(fn, args) -> np.ndarray:
        names, f = fn
        return nm.call(f, [args[n] for n in names])

    # ---- the numeric interface of Theorem ---------------------------------------------
    def evaluate(self, **values):
        vals = self._values(self._expr_needed, values)
        return nm.bound_value(self._eval(self._expr, self._scalar_args(vals)),
                              f"{self.key} [{self.variant}]")

    def terms(self, **values) -> dict:
        vals = self._values(self._expr_needed, values)
        args = self._scalar_args(vals)
        return {n: nm.bound_value(self._eval(f, args), f"{self.key} term {n}")
                for n, f in self._terms.items()}

    def _margins(self, vals, without_step: bool = False) -> list[tuple]:
        out = []
        for c in self.conditions:
            if without_step and c.has_step:
                continue
            args = self._worker_args(vals) if c.per_worker else self._scalar_args(vals)
            scale = np.maximum(np.abs(self._eval(c.lhs, args)), np.abs(self._eval(c.rhs, args)))
            out.append((c, self._eval(c.margin, args), scale))
        return out

    def violations(self, **values) -> list[nm.Violation]:
        return nm.violations(self._margins(self._values(self._conditions_needed, values)))

    def admissible(self, **values):
        return nm.admissible(self._margins(self._values(self._conditions_needed, values)))

    def step_limits(self, **values) -> dict:
        if self.step is None:
            raise ValueError(f"{self.key} has no step-size parameter")
        if self.step in values:
            raise ValueError(f"{self.key}: give the parameters without the step {self.step!r}")
        vals = self._values([n for n in self._conditions_needed if n != self.step], values)
        for c, m, scale in self._margins(vals, without_step=True):
            if not nm.holds(c.is_equality, m, scale).all():
                at = ", ".join(f"{n}={nm.shown(vals[n])}" for n in c.needed)
                raise ValueError(f"{c.name} ({c.citation}) fails whatever the step, at {at}")
        limits = {}
        for c in self.conditions:
            if not c.has_step:
                continue
            args = self._worker_args(vals) if c.per_worker else self._scalar_args(vals)
            A, B, C = (self._eval(f, args) for f in c.coefficients)
            workers = [(n, vals[n]) for n in c.worker_params] if c.per_worker else []
            root = nm.condition_root(A, B, C, condition=c, step=self.step,
                                     symbol=self._step_symbol, names=c.others,
                                     worker_values=workers)
            limits[c.name] = nm.step_limit(self.key, root, c.per_worker, vals, self.params)
        return limits

    def step_choice(self, **values) -> nm.StepChoice:
        return nm.step_choice(self.step_limits(**values))

    def max_step(self, **values) -> float:
        return self.step_choice(**values).step
