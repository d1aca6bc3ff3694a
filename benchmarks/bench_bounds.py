"""Bound evaluation: the lambdified Theorem.evaluate against sympy substitution.

    python benchmarks/bench_bounds.py [--quick]

For every registered result (default variant), a grid of 10^6 parameter points (the
step on a log grid times the next scalar parameter; vectors over 4 workers) is evaluated
in one broadcast call; sympy's ``expr.subs(...).evalf()`` evaluates a sample of the same
points, and both must agree to 1e-9. Prints evaluations per second
of each and their ratio, in one run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import sympy as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bounds  # noqa: E402

#: a representative value per parameter domain
TYPICAL = {"positive": 1.0, "nonnegative": 1.0, "unit": 0.5, "probability": 0.9,
           "positive_integer": 64, "weights": 1.0}


def base_point(thm: bounds.Theorem, workers: int = 4) -> dict:
    """Every parameter at a typical value; vectors over ``workers`` workers."""
    out = {}
    for n, p in thm.params.items():
        v = TYPICAL[p.domain]
        out[n] = np.full(workers, 1 / workers if p.domain == "weights" else v) if p.vector else v
    return out


def grid(thm: bounds.Theorem, base: dict, n: int) -> tuple[dict, list[str]]:
    """n points: the step (or first parameter) on a log grid times the second parameter."""
    scalars = [k for k, p in thm.params.items()
               if not p.vector and thm.symbols[k] in thm.expr.free_symbols]
    names = ([thm.step] if thm.step else []) + [k for k in scalars if k != thm.step]
    names = names[:2]
    side = int(math.isqrt(n))
    values = dict(base)
    first = thm.params[names[0]]
    values[names[0]] = (np.arange(1, side + 1) if first.domain == "positive_integer"
                        else np.geomspace(1e-4, 1e-1, side))[:, None]
    if len(names) > 1:
        second = thm.params[names[1]]
        values[names[1]] = (np.arange(1, side + 1) if second.domain == "positive_integer"
                            else np.linspace(0.01, 0.99, side) if second.domain in
                            ("unit", "probability") else np.geomspace(0.1, 10, side))[None, :]
    return values, names


def bench(key: str, n: int, sample: int) -> tuple[float, float] | None:
    thm = bounds.get(key)
    base = base_point(thm)
    values, names = grid(thm, base, n)
    try:
        thm.evaluate(**values)  # compile once (cached), outside the timing
    except ValueError as e:  # e.g. a schedule-valued parameter that typical values miss
        print(f"{key:<28} not benchmarked: {e}")
        return None
    t0 = time.perf_counter()
    out = np.asarray(thm.evaluate(**values))
    fast = out.size / (time.perf_counter() - t0)
    rng = np.random.default_rng(0)
    idx = [tuple(int(rng.integers(s)) for s in out.shape) for _ in range(sample)]
    expr = thm.expr  # aggregates (sums over workers) enter as their values, as in evaluate
    vals = {k: np.asarray(v, dtype=float) for k, v in base.items()}
    fixed = {g.symbol: float(g.reduce(vals)) for g in thm.aggregates
             if all(u in vals for u in g.uses)}
    t0 = time.perf_counter()
    for ij in idx:
        point = {thm.symbols[k]: float(np.broadcast_to(v, out.shape)[ij])
                 for k, v in values.items() if not thm.params[k].vector}
        subs = {s: sp.Float(x, 17) for s, x in {**point, **fixed}.items()}
        ref = float(expr.subs(subs).evalf())
        assert math.isclose(ref, out[ij], rel_tol=1e-9), (key, ij, ref, out[ij])
    slow = sample / (time.perf_counter() - t0)
    print(f"{key:<28} {out.size:>9,d}  {fast:>12,.0f}  {slow:>10,.0f}  {fast / slow:>10,.0f}x"
          f"   ({' x '.join(names)})")
    return fast, slow


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^4 points, 20 sympy samples")
    args = parser.parse_args(argv)
    n, sample = (10_000, 20) if args.quick else (1_000_000, 200)
    print(f"{'result':<28} {'points':>9}  {'lambdified/s':>12}  {'sympy/s':>10}  {'ratio':>11}")
    rates = [r for key in sorted(row["key"] for row in bounds.list())
             if (r := bench(key, n, sample)) is not None]
    if rates:
        print(f"\nslowest lambdified rate: {min(f for f, _ in rates):,.0f} evaluations/s "
              f"(target >= 1e6)")


if __name__ == "__main__":
    main()
