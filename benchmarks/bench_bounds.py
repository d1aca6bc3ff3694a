"""Bound evaluation: Theorem.evaluate on independent points against a hand-written numpy
expression of the same formula, and on broadcast grids against sympy substitution.

    python benchmarks/bench_bounds.py [--quick] [--device cpu]

Independent points: 10^6 points (10^5 with ``--quick``) at which every parameter has its
own random value (vectors over 4 workers), for three results whose formulas are written
out by hand below from the papers (Castiglia et al. 2021, Theorem 1, (13); Das et al.
2022, Theorem 1, (15); Yang et al. 2022, Corollary 1). evaluate validates every input
(domain, finiteness, weights summing to 1), reduces the vectors and evaluates the
lambdified expression; the hand-written expression does the same arithmetic with no
validation. The two must agree to 1e-10; the runs alternate and the figure is the median
ratio (goal: at most 1.2). One thread (numpy's element-wise code is single-threaded).

Broadcast grids: for every registered result (default variant), a grid of 10^6 points
(the step on a log grid times the next scalar parameter; vectors over 4 workers) in one
call, checked against ``expr.subs(...).evalf()`` on a sample of points to 1e-9: a grid
evaluates each parameter's array once and broadcasts, so it runs far faster per point.

Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import sympy as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from benchmarks.timing import interleaved, median_ratio  # noqa: E402
from fedbound import bounds  # noqa: E402

GOAL = 1.2
CPU_ONLY = "bounds evaluate with numpy"

#: a representative value per parameter domain
TYPICAL = {"positive": 1.0, "nonnegative": 1.0, "unit": 0.5, "probability": 0.9,
           "positive_integer": 64, "weights": 1.0}


# ------------------------------------------------------------------ independent points


def mllsgd_theorem1(L, sigma, Delta, eta, K, q, tau, zeta, a, p):
    """Castiglia et al. 2021, Theorem 1, right-hand side of (13) (proof variant)."""
    S2, P = (a**2 * p).sum(axis=-1), (a * p).sum(axis=-1)
    spectral = zeta**2 / (1 - zeta**2) + 2 * zeta / (1 - zeta) + 1 / (1 - zeta) ** 2
    local = tau**2 * (q - 1) * (2 * q + 1) / 6 + (tau - 1) * (2 * tau + 1) / 6
    noise = 4 * L**2 * P * eta**2 * sigma**2
    return (2 * Delta / (K * eta) + noise * q**3 * tau**3 * (1 / (q * tau) - 1 / K) * spectral
            + noise * (2 - zeta) * local / (1 - zeta) + L * S2 * eta * sigma**2)


def tdcd_theorem1(L, L_max, sigma, Delta, eta, Q, R):
    """Das et al. 2022, Theorem 1, right-hand side of (15)."""
    S = (sigma**2).sum(axis=-1)
    return (4 * Delta / (Q * R * eta) + 32 * L * L_max**2 * Q**3 * S * eta**3
            + 4 * L * Q * S * eta + 16 * L_max**2 * Q**2 * S * eta**2)


def afl_corollary1(L, sigma_L, sigma_G, Delta, T, m, tau, K):
    """Yang et al. 2022, Corollary 1 (AFA-CD with eta = sqrt(mK), eta_L = 1/(sqrt(T) K L))."""
    root = np.sqrt(K) * np.sqrt(T) * np.sqrt(m)
    return (4 * Delta / root + 180 * K**2 * L**2 * sigma_G**2 / T
            + 30 * K * L**2 * sigma_L**2 / T + 12 * L**2 * sigma_L**2 * tau**2 / T
            + 6 * sigma_G**2 + 4 * L * sigma_L**2 / root)


HAND_WRITTEN = {"mllsgd.theorem1": mllsgd_theorem1, "tdcd.theorem1": tdcd_theorem1,
                "afl.corollary1": afl_corollary1}


def independent_points(thm: bounds.Theorem, names: list[str], n: int,
                       rng: np.random.Generator, workers: int = 4) -> dict[str, np.ndarray]:
    """``n`` points, every parameter of ``names`` drawn independently in its domain."""
    out = {}
    for name in names:
        param = thm.params[name]
        shape = (n, workers) if param.vector else (n,)
        if param.domain == "weights":
            w = rng.uniform(0.5, 1.5, shape)
            out[name] = w / w.sum(axis=-1, keepdims=True)
        elif name == "M":  # at least every m and m' (Yang et al. 2022, Section 4.2)
            out[name] = rng.integers(9, 17, shape).astype(float)
        elif param.domain == "positive_integer":
            out[name] = rng.integers(1, 9, shape).astype(float) * (8 if name == "K" else 1)
        elif name == "tau":  # a delay in rounds (AFL) is a whole number
            out[name] = rng.integers(0, 9, shape).astype(float)
        elif param.domain == "unit":
            out[name] = rng.uniform(0.0, 0.9, shape)
        elif param.domain == "probability":
            out[name] = rng.uniform(0.6, 1.0, shape)
        else:
            out[name] = rng.uniform(0.01, 2.0, shape) * (1e-2 if name.startswith("eta") else 1)
    return out


def bench_independent(key: str, n: int, repeats: int) -> tuple[float, float]:
    """(evaluations per second of evaluate, median ratio evaluate / hand-written)."""
    thm, hand = bounds.get(key), HAND_WRITTEN[key]
    names = thm._needed([thm.expr])
    values = independent_points(thm, names, n, np.random.default_rng(0))
    ours, theirs = thm.evaluate(**values), hand(**values)
    gap = float(np.max(np.abs(ours - theirs) / np.abs(theirs)))
    if gap > 1e-10:
        raise AssertionError(f"{key}: evaluate and the hand-written formula differ by {gap:.3g}")
    times = interleaved({"evaluate": lambda: thm.evaluate(**values),
                         "hand": lambda: hand(**values)}, repeats)
    return n / statistics.median(times["evaluate"]), median_ratio(times, "evaluate", "hand")


# ------------------------------------------------------------------ broadcast grids


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


def bench_grid(key: str, n: int, sample: int) -> tuple[float, float] | None:
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
    parser.add_argument("--quick", action="store_true", help="10^5 independent points, a 10^4 "
                        "grid, 20 sympy samples")
    add_device_argument(parser, cpu_only=CPU_ONLY)
    args = parser.parse_args(argv)
    checked_device(parser, args.device, cpu_only=CPU_ONLY)
    n_points, repeats = (100_000, 5) if args.quick else (1_000_000, 21)
    n_grid, sample = (10_000, 20) if args.quick else (1_000_000, 200)
    entries = []
    print(f"independent points ({n_points:,d}): evaluate against the hand-written formula")
    print(f"{'result':<28} {'evaluate/s':>12}  ratio (goal <= {GOAL})")
    for key in HAND_WRITTEN:
        rate, ratio = bench_independent(key, n_points, repeats)
        print(f"{key:<28} {rate:>12.3g}  {ratio:.3f}")
        entries.append(figure(f"bounds.{key}.independent_per_second", rate, "evaluations/s"))
        entries.append(figure(f"bounds.{key}.independent_over_hand_written", ratio, "ratio",
                              at_most=GOAL))
    print(f"\nbroadcast grids ({n_grid:,d} points)")
    print(f"{'result':<28} {'points':>9}  {'lambdified/s':>12}  {'sympy/s':>10}  {'ratio':>11}")
    rates = {}
    for key in sorted(row["key"] for row in bounds.list()):
        if (r := bench_grid(key, n_grid, sample)) is not None:
            rates[key] = r[0]
    if rates:
        slowest = min(rates, key=rates.get)
        entries.append(figure("bounds.grid.slowest_per_second", rates[slowest], "evaluations/s",
                              at_least=1e6))
        entries.append(figure("bounds.grid.fastest_per_second", max(rates.values()),
                              "evaluations/s"))
        print(f"\nslowest grid rate: {rates[slowest]:,.0f} evaluations/s ({slowest})")
    record(entries)


if __name__ == "__main__":
    main()
