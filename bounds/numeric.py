"""The numeric half of the Theorem contract: numpy only, no sympy.

Parameter domains and their checks, the test of a condition at its boundary, the value of a
bound, the violations and admissibility of a set of evaluated conditions, and the largest step
a condition polynomial in the step allows. Both :class:`bounds.core.Theorem` (built with
sympy) and :class:`bounds.manifest.NumericTheorem` (loaded from a manifest of generated
functions, without sympy) compute through these functions, which is what makes their numbers
and messages identical bit for bit. Importing this module imports numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

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
        """Return ``value`` as a float array, or raise ValueError naming the parameter (an
        integer beyond 2^53, which float64 would round, included)."""
        try:
            x = np.asarray(value, dtype=float)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{self.name}={_short(value)} is not a number") from None
        _exactly_float(self.name, value)
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
#: the largest integer float64 holds exactly (and every one below it)
EXACT_INTEGER = 2**53


def _exactly_float(name: str, value) -> None:
    """ValueError naming ``name`` when ``value`` holds integers (a Python int, an integer
    array or a list of them) that float64 cannot hold exactly: rounding them silently
    would evaluate the theorem at another point."""
    if isinstance(value, (bool, float, np.floating)):
        return
    if isinstance(value, (int, np.integer)):
        bad = np.asarray(_rounded(value))
    else:
        raw = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=object) \
            if _holds_int(value) else None
        if raw is None or raw.dtype.kind not in "iuO" or raw.size == 0:
            return
        if raw.dtype.kind in "iu" and np.abs(raw).max() <= EXACT_INTEGER:
            return
        bad = np.vectorize(_rounded, otypes=[bool])(raw)
    if bad.any():
        idx = tuple(int(k) for k in np.argwhere(bad)[0]) if bad.ndim else ()
        v = int(np.asarray(value, dtype=object)[idx] if idx else value)
        raise ValueError(f"{name}{_index(bad)}={v} is an integer that float64 cannot hold exactly "
                         f"(it would be evaluated as {int(float(v))}): give it as a float "
                         "(e.g. 1e20) if an approximation is meant")


def _rounded(v) -> bool:
    """Whether ``v`` is an integer (not a boolean) that float64 would round."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        return False
    return abs(int(v)) > EXACT_INTEGER and int(float(v)) != int(v)


def _holds_int(value) -> bool:
    """Whether a (nested) list or tuple ``value`` holds a Python int beyond 2^53 (the only
    case that needs the slow check)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > EXACT_INTEGER:
            return True
    return False


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def integral(x: np.ndarray) -> bool:
    """Whether every entry of ``x`` is a whole number (NaN is not), decided block by block
    as :meth:`Param._fits` decides, without temporaries of the input's size."""
    flat = np.asarray(x, dtype=float).reshape(-1)
    return all(bool((np.floor(b) == b).all())
               for b in (flat[i:i + _BLOCK] for i in range(0, flat.size, _BLOCK)))


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



def checked_values(key: str, params: Mapping[str, Param], names: Sequence[str],
                   given: Mapping[str, object]) -> dict[str, np.ndarray]:
    """The values of ``names`` in ``given``, each checked against its domain; ValueError for
    an unknown or missing parameter, or vectors over workers of different lengths."""
    unknown = set(given) - set(params)
    if unknown:
        raise ValueError(
            f"{key}: unknown parameter(s) {sorted(unknown)}; "
            f"parameters are {sorted(params)}"
        )
    missing = [n for n in names if n not in given]
    if missing:
        raise ValueError(f"{key}: missing parameter(s) {missing}")
    vals = {n: params[n].check(given[n]) for n in names}
    sizes = {vals[n].shape[-1] for n in names if params[n].vector}
    if len(sizes) > 1:
        vec = [f"{n}: {vals[n].shape[-1]}" for n in names if params[n].vector]
        raise ValueError(f"{key}: vector parameters differ in length ({', '.join(vec)})")
    return vals


# --------------------------------------------------------------------------- conditions


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


TOL = 1e-12  #: relative tolerance for conditions at their boundary (e.g. at max_step)


def holds(is_equality: bool, margin: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Whether a condition of ``margin`` (>= 0, or == 0 for an equality, where it holds) holds,
    up to a relative tolerance for round-off at its boundary. A condition holds only where
    both of its sides are finite (``scale``, the larger of their magnitudes, is finite): an
    overflowing side never makes a condition hold."""
    finite = np.isfinite(scale) & ~np.isnan(margin)
    with np.errstate(invalid="ignore"):
        tol = TOL * np.maximum(np.where(finite, scale, 1.0), 1.0)
        ok = (np.abs(margin) <= tol) if is_equality else (margin >= -tol)
    return finite & ok


def violations(margins: Iterable[tuple]) -> list[Violation]:
    """The :class:`Violation` of each failing condition of ``margins`` ((condition, margin,
    scale) triples; a condition has ``name``, ``citation``, ``per_worker``, ``is_equality``):
    for a grid the worst point, for a per-worker condition the worst worker."""
    found = []
    for c, m, scale in margins:
        bad = ~holds(c.is_equality, m, scale)
        if not bad.any():
            continue
        short = np.where(bad, np.nan_to_num(np.abs(m), nan=np.inf), -np.inf)
        worst = np.unravel_index(int(np.argmax(short)), short.shape) if short.ndim else ()
        worker = int(worst[-1]) if c.per_worker and worst else None
        found.append(Violation(c.name, c.citation, float(short[worst]), worker))
    return found


def admissible(margins: Iterable[tuple]) -> bool | np.ndarray:
    """True where every condition of ``margins`` (as in :func:`violations`) holds, reduced
    over workers for a per-worker condition; an array for a grid."""
    ok = np.asarray(True)
    for c, m, scale in margins:
        ok_c = holds(c.is_equality, m, scale)
        if c.per_worker:
            ok_c = ok_c.all(axis=-1)
        ok = ok & ok_c
    return bool(ok) if ok.ndim == 0 else ok


def step_choice(limits: Mapping[str, float | np.ndarray]) -> StepChoice:
    """The smallest of the step limits (by condition name; an array over workers for a
    per-worker condition) and the condition (and worker) that sets it."""
    best = StepChoice(math.inf, "none: no condition limits the step")
    for name, limit in limits.items():
        worker = int(np.argmin(limit)) if np.ndim(limit) else None
        step = float(np.min(limit))
        if step < best.step:
            best = StepChoice(step, name, worker)
    return best


def condition_root(A: np.ndarray, B: np.ndarray, C: np.ndarray, *, condition, step: str,
                   symbol: str, names: str, worker_values: Sequence[tuple[str, np.ndarray]]
                   ) -> np.ndarray:
    """The largest step s with A s^2 + B s + C >= 0, in the rationalised closed form
    ``2C / (-B + sqrt(B^2 - 4AC))`` (``-C / B`` where A = 0). ``condition`` (name, citation,
    per_worker, hint) and ``names`` (the other symbols of its margin) word the errors;
    ``worker_values`` are the per-worker parameters of the margin, by name. ValueError where
    no step > 0 satisfies it or the root is not representable."""
    c = condition
    if (C <= 0).any():
        bad = C <= 0
        worker = f" at worker {int(np.argwhere(bad)[0][-1])}" if c.per_worker else ""
        vals = ""
        if c.per_worker:
            i = int(np.argwhere(bad)[0][-1])
            vals = ": " + ", ".join(f"{name}[{i}]={float(np.ravel(v)[i]):.6g}"
                                    for name, v in worker_values)
        hint = f" ({c.hint})" if c.hint else ""
        raise ValueError(f"no {step} > 0 satisfies {c.name} ({c.citation}){worker}{vals}{hint}")
    if (A > 0).any():
        raise NotImplementedError(f"{c.name}: admissible set in {symbol} is not an interval from 0")
    if not all(np.isfinite(x).all() for x in (A, B, C)):
        raise ValueError(f"{c.name} ({c.citation}) cannot be solved for {step}: its "
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
        raise ValueError(f"the largest {step} that satisfies {c.name} ({c.citation}) "
                         f"is below the smallest positive float: {names} too extreme")
    return root


def call(f: Callable, args: Sequence[np.ndarray]) -> np.ndarray:
    """``f(*args)`` of a generated function, as a float array of the arguments' broadcast
    shape (a constant expression broadcasts too); numpy's warnings silenced, since the
    callers test for NaN and infinity themselves.

    A large result is computed in blocks of rows along its first axis (:func:`_row_blocks`),
    so that the temporaries of the expression stay in the processor's cache and are reused
    instead of being allocated, and page-faulted, at the full size for every operation.
    The generated functions are elementwise, so each entry is the same number either way."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args)) if args else ()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        blocks = _row_blocks(shape)
        if blocks is None:
            return np.broadcast_to(np.asarray(f(*args), dtype=float), shape)
        args = [np.asarray(a) for a in args]
        sliced = [a.ndim == len(shape) and a.shape[0] == shape[0] for a in args]
        out = np.empty(shape)
        for block in blocks:
            out[block] = f(*(a[block] if cut else a for a, cut in zip(args, sliced, strict=True)))
    return out


_CALL_BLOCK = 1 << 16  #: entries per block of :func:`call` (512 KiB of float64 a temporary)


def _row_blocks(shape: tuple[int, ...]) -> list[slice] | None:
    """Slices of the first axis holding about ``_CALL_BLOCK`` entries each, or None where
    the result is too small (or has a single row) to gain from blocks."""
    size = math.prod(shape)
    if size < 4 * _CALL_BLOCK or shape[0] < 2:
        return None
    rows = max(1, _CALL_BLOCK // (size // shape[0]))
    return [slice(i, i + rows) for i in range(0, shape[0], rows)]


def step_limit(key: str, root, per_worker: bool, vals: Mapping[str, np.ndarray],
               params: Mapping[str, Param]) -> float | np.ndarray:
    """A condition's limit on the step: one per worker (``per_worker``) or one number. A root
    with more axes than that came from a grid of parameters, which has no single step:
    refused, naming each gridded field with its value."""
    root = np.asarray(root)
    if root.ndim > (1 if per_worker else 0):
        grids = [n for n, v in vals.items() if np.ndim(v) > params[n].vector]
        raise ValueError(f"{key}: step limits need scalar parameters, got a grid: "
                         + ", ".join(f"{n}={shown(vals[n])}" for n in grids))
    return root if per_worker else float(root)


def shown(x: np.ndarray) -> str:
    """A parameter's value in a message: the number, or the extremes of an array."""
    return f"{float(x):.6g}" if np.ndim(x) == 0 else f"[{np.min(x):.6g} .. {np.max(x):.6g}]"


def bound_value(x: np.ndarray, what: str) -> float | np.ndarray:
    """An upper bound's value: finite, or +inf (a genuinely infinite right-hand side, or
    one beyond the float range, which is still a valid upper bound). NaN and -inf are
    not values of a bound and raise."""
    if not np.min(x) > -np.inf:  # the smallest entry is NaN (any NaN) or -inf
        raise ValueError(f"{what} is undefined (NaN or -inf) at the given parameters")
    return float(x) if np.ndim(x) == 0 else np.asarray(x)
