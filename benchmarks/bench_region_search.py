"""Searches that stress what decides the choice of S and Q: fedbound's own variants
(derived by fedbound, not published), searched inside the regions of scenarios where their
drift terms are non-zero.

    python benchmarks/bench_region_search.py [--budget 500] [--only NAME,...] [--jobs 1]
                                             [--witnesses DIR]

An unrestricted ``fedbound search --variant refined`` settles where the drift terms vanish
(S = 0 for HFL, Q = 1 or no gradient noise for TDCD), where the bounds are tight by
construction. Here each search is kept in the region where those terms are at work
(``verify.search.search(..., where=...)``, ``fedbound search --where``):

* HFL Corollary 1, variants ``refined`` and ``iid``: S >= 2 (with the shifts of the
  adapter's delays, c_i <= 1.9, typically one local iteration more than at S = 0: the
  within-round drift, the noise-drift coupling and, for iid, the absorbed gradient drift
  are non-zero); HFL Theorem 2, the same variants: S >= 4 and T >= 40 (in S >= 2 alone its
  tightest search settles on T ~ 5, one round with t = 1, where every drift term is zero);
* TDCD Theorem 1, variant ``refined``: Q >= 2 (the drift reach rho > 0) with gradient
  noise: n >= 20 base samples and batch <= 12, so that every client samples fewer than all
  of them (sigma_j > 0: the drift's noise term rho S is non-zero);
* the deadline bounds (bounds/derivations/*_deadline.md): ``hfl.deadline_quadratic`` and
  ``hfl.deadline_pl`` in S >= 2, T >= 150 with gradient noise (sigma >= 0.5), where local
  iterations change both the contraction per round and the noise, at alpha >= 0.05 and
  L >= 0.5; ``mllsgd.deadline_quadratic`` in tau >= 2, K >= 16 with noise, eta >= 0.05 and
  L >= 0.5; ``tdcd.deadline_pl`` in TDCD's region above.

Each runs both objectives, "violate" (no violation expected: every variant here is
recorded as holding) and "tightest" (the largest ratio measured/bound in the region), at
the budget given (500 admissible scenarios by default, seed 1). Recorded in
benchmarks/results.json: per search, the closest ratio measured/bound (tightest: the
witness's confirmed ratio; violate: the closest scenario's), and whether a violation was
found (goal: none). ``--witnesses DIR`` writes each tightest witness there, to be stored
with its paper's witnesses (``verify/papers/<paper>/witnesses/``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

HFL_REGION = ("S >= 2",)
#: Theorem 2's adapter draws T in [40, 150]; without "T >= 40" its tightest search in S >= 2
#: settles on T ~ 5 (one round, t = 1: every drift term zero again)
HFL_THEOREM2_REGION = ("S >= 4", "T >= 40")
TDCD_REGION = ("Q >= 2", "n >= 20", "batch <= 12")
#: the deadline bounds (derived by fedbound, not published), where their new terms work:
#: several local iterations per round, a long deadline, gradient noise on, and a step and a
#: curvature of at least 0.05 and 0.5 (as alpha L goes to 0 nothing moves, and every bound is
#: trivially tight: the searches without them settle there)
HFL_DEADLINE_REGION = ("S >= 2", "T >= 150", "problem.sigma >= 0.5", "alpha >= 0.05",
                       "problem.L >= 0.5")
MLLSGD_DEADLINE_REGION = ("tau >= 2", "K >= 16", "problem.sigma >= 0.5", "eta >= 0.05",
                          "problem.L >= 0.5")
#: name: (key, variant, region)
SEARCHES = {
    "hfl.theorem2.refined": ("hfl.theorem2", "refined", HFL_THEOREM2_REGION),
    "hfl.theorem2.iid": ("hfl.theorem2", "iid", HFL_THEOREM2_REGION),
    "hfl.corollary1.refined": ("hfl.corollary1", "refined", HFL_REGION),
    "hfl.corollary1.iid": ("hfl.corollary1", "iid", HFL_REGION),
    "tdcd.theorem1.refined": ("tdcd.theorem1", "refined", TDCD_REGION),
    "hfl.deadline_quadratic": ("hfl.deadline_quadratic", "derived", HFL_DEADLINE_REGION),
    "hfl.deadline_pl": ("hfl.deadline_pl", "derived", HFL_DEADLINE_REGION),
    "mllsgd.deadline_quadratic": ("mllsgd.deadline_quadratic", "derived", MLLSGD_DEADLINE_REGION),
    "tdcd.deadline_pl": ("tdcd.deadline_pl", "derived", TDCD_REGION),
}
OBJECTIVES = ("tightest", "violate")
CPU_ONLY = "the searches run the simulators on the CPU, one scenario at a time"


def run_one(name: str, objective: str, budget: int, seed: int, jobs: int, witnesses: Path | None):
    from fedbound.verify import pool
    from fedbound.verify.search import search

    key, variant, region = SEARCHES[name]
    t0 = time.perf_counter()
    with pool.executor(jobs=jobs) as ex:
        res = search(key, variant=variant, budget=budget, seed=seed, objective=objective,
                     where=list(region), executor=ex, width=jobs)
    seconds = time.perf_counter() - t0
    if witnesses is not None and objective == "tightest":
        note = (f"tightest scenario in the region {res.region} found by fedbound search "
                f"--objective tightest --budget {budget} --seed {seed} "
                + " ".join(f"--where '{r}'" for r in region) + f" ({res.tried} admissible scenarios)")
        res.as_witness(note).write(witnesses / f"{key}.{variant}.region.tightest.json")
    return res, seconds


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", help="comma-separated names of SEARCHES (default: all)")
    ap.add_argument("--objective", choices=OBJECTIVES, help="one objective only (default: both)")
    ap.add_argument("--witnesses", type=Path, help="write each tightest witness to this folder")
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    import torch

    torch.set_num_threads(1)
    names = list(SEARCHES) if args.only is None else args.only.split(",")
    unknown = sorted(set(names) - set(SEARCHES))
    if unknown:
        ap.error(f"--only {args.only}: unknown search(es) {unknown}; known: {', '.join(SEARCHES)}")
    if args.witnesses is not None:
        args.witnesses.mkdir(parents=True, exist_ok=True)
    entries, rows = [], []
    for name in names:
        for objective in (OBJECTIVES if args.objective is None else (args.objective,)):
            res, seconds = run_one(name, objective, args.budget, args.seed, args.jobs, args.witnesses)
            tag = f"search.region.{name}.{objective}"
            entries.append(figure(f"{tag}.ratio", res.ratio, "measured/bound"))
            entries.append(figure(f"{tag}.violations", float(res.found), "found", at_most=0))
            v = res.verdict
            rows.append(f"| `{SEARCHES[name][0]}` {SEARCHES[name][1]} | {res.region} | {objective} | "
                        f"{res.tried} | {res.ratio:.3g} ({res.ratio_ci[0]:.3g} .. {res.ratio_ci[1]:.3g}) | "
                        f"{v.measured_mean:.4g} / {v.bound:.4g} | {'yes' if res.found else 'no'} | "
                        f"{seconds:.0f} s |")
            print(rows[-1], flush=True)
    print("| result | region | objective | admissible scenarios | closest ratio (95% CI) "
          "| measured / bound | violation | time |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    record(entries)


if __name__ == "__main__":
    main()
