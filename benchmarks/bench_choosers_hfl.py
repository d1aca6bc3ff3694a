"""Evidence for the HFL chooser (S, alpha): on the paper's own delay settings, does each
answer (certified per variant, calibrated, simulated) do as well as the best configuration
of an independent paired reference search?

    python benchmarks/bench_choosers_hfl.py [--quick] [--only 7a] [--replicas 64] [--skip-recorded]

Scenarios: the delay parameters of Ali & Arafa 2025, Figs. 6, 7a, 7b, 8 and 9 (Fig. 7b with
b_g = 22, the paper's c_g = 30; Fig. 8 with 4 groups of 20 clients, where the paper's 850
make every local iteration longer than any S it tests; Fig. 9 with 4 groups of 16), each at
gradient noise sigma = 1 and 20, with the step fixed at alpha = 0.01 and at 0.05 (the
chooser then chooses S, today's behaviour) and with alpha chosen jointly: 30 scenarios on
the synthetic quadratic (L = 1, Delta = 0.1, G = sqrt(sigma^2 + 2 L Delta)), metric the loss
at the deadline T (the chooser's default). For each: the chooser's report with its defaults
(timed, one torch thread), then the reference (``benchmarks/regret.py``: the chooser's grid
and the midpoints, every answer, ``--replicas`` common seeds); each answer's paired regret
against the reference's best with its 95% interval. Recorded in benchmarks/results.json:
per scenario and answer the regret, its half-width and whether it passes (goal: calibrated
and simulated), and the pass rates (goals: calibrated >= 0.9, simulated 1).

    python benchmarks/bench_choosers_hfl.py --mlp [--only 7a] [--replicas 16]

The MLP with non-i.i.d. groups (the paper's Figs. 4, 5, 7 and 8 setting): the 64-32-10 tanh
MLP on the 8x8 digits (``--data digits --model mlp``), its samples spread over the clients
by Dirichlet(0.1) class proportions, mini-batches of 8, at the delays of Figs. 6, 7a, 7b, 8
and 9 with 4 clients per group instead of the paper's 500, 15, 20 or 16 (the delay parameters
b and f raised so that every group's local iterations take the paper's law: the same c_i and
lambda_i), over a deadline T of 250 to 1000 (``MLP``: at least about 15 rounds at S = 0 under
each figure's global delay), the step fixed at alpha = 0.05 and 0.2 (S chosen), metric
the chooser's default (the loss at T). Recorded as ``choosers.hfl.mlp_fig*``.

    python benchmarks/bench_choosers_hfl.py --summary

The pass rates over every scenario recorded in benchmarks/results.json (the quadratic's and
the MLP's), without running any.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.device import add_device_argument, checked_device  # noqa: E402
from benchmarks.regret import evaluate, figures, stored, summary, table  # noqa: E402
from benchmarks.results import RESULTS, record  # noqa: E402
from fedbound.verify.api import NamedProblem  # noqa: E402
from fedbound.verify.papers.hfl import SyncTime  # noqa: E402

FIGS = {  # figure: (the 8 parameters of the linear delay model, sizes, T)
    "6": ([1e-3, 0.5, 1e-3, 0.05, 5, 10, 1e-3, 0.05], [500, 500], 1000),
    "7a": ([0.01, 0.85, 1e-3, 0.085, 4, 2, 0.4, 0.2], [15, 15], 2000),
    "7b": ([0.01, 0.85, 1e-3, 0.085, 4, 22, 0.4, 0.2], [15, 15], 2000),
    "8": ([0.1, 1.4, 0.01, 0.14, 4, 2, 0.5, 1], [20] * 4, 1000),
    "9": ([0.1, 1.4, 0.01, 0.14, 0.5, 5, 0.05, 0.5], [16] * 4, 1000),
}
SIGMAS = (1.0, 20.0)
ALPHAS = (0.01, 0.05, None)  # None: chosen jointly
L, DELTA = 1.0, 0.1
QUICK = [("7a", 20.0, 0.05), ("7a", 20.0, None), ("9", 1.0, None)]
CPU_ONLY = "the chooser runs its simulations on the CPU"
#: the MLP on the digits: figure -> (clients per group, T)
MLP = {"6": (4, 1000.0), "7a": (4, 500.0), "7b": (4, 1000.0), "8": (4, 500.0), "9": (4, 250.0)}
MLP_ALPHAS = (0.2, 0.05)
MLP_PROBLEM = NamedProblem("digits", "mlp", "dirichlet:0.1", batch=8, hidden=(32,))


def fewer_clients(delays: list[float], paper: int, clients: int) -> list[float]:
    """The 8 delay parameters for groups of ``clients`` whose local iterations take the law
    of the paper's groups of ``paper``: c_i = d n + b and 1/lambda_i = e n + f kept by
    raising b by d (paper - clients) and f by e (paper - clients)."""
    d, b, e, f, *glob = delays
    return [d, b + d * (paper - clients), e, f + e * (paper - clients), *glob]


def chooser(fig: str, sigma: float, alpha: float | None) -> SyncTime:
    delays, sizes, T = FIGS[fig]
    return SyncTime(sizes=sizes, delays=delays, T=T, alpha=alpha, L=L,
                    G=math.sqrt(sigma**2 + 2 * L * DELTA), sigma=sigma, Delta=DELTA)


def mlp_chooser(fig: str, alpha: float, seed: int = 0) -> SyncTime:
    """The chooser on the MLP with Dirichlet(0.1) groups at the figure's delays (``MLP``)."""
    delays, paper_sizes, _ = FIGS[fig]
    clients, T = MLP[fig]
    sizes = [clients] * len(paper_sizes)
    fed = MLP_PROBLEM.build(sizes, seed, "bench")
    return SyncTime(sizes=sizes, delays=fewer_clients(delays, paper_sizes[0], clients), T=T,
                    alpha=alpha, problem=fed.problem, x1=fed.x1, source=MLP_PROBLEM.as_dict(seed),
                    seed=seed)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicas", type=int, help="replicas of the reference (default 64, with "
                                                 "--mlp 16)")
    ap.add_argument("--quick", action="store_true", help="three scenarios only")
    ap.add_argument("--only", help="the figures to run, e.g. 7a,9")
    ap.add_argument("--mlp", action="store_true", help="the MLP on the digits instead of the quadratic")
    ap.add_argument("--summary", action="store_true", help="the pass rates of the recorded scenarios only")
    ap.add_argument("--skip-recorded", action="store_true",
                    help="skip the scenarios benchmarks/results.json already holds (a cut run resumed)")
    add_device_argument(ap, cpu_only=CPU_ONLY)
    args = ap.parse_args(argv)
    checked_device(ap, args.device, cpu_only=CPU_ONLY)
    if args.summary:
        results = stored("choosers.hfl")
        print(f"{len(results)} scenarios recorded")
        record(summary("choosers.hfl", results))
        return
    torch.set_num_threads(1)
    figs = args.only.split(",") if args.only else list(MLP if args.mlp else FIGS)
    if args.mlp:
        scenarios = [(f"mlp_fig{f}_alpha{a:g}", lambda f=f, a=a: mlp_chooser(f, a))
                     for f in figs for a in MLP_ALPHAS]
    else:
        scenarios = [(f"fig{f}_sigma{s:g}_" + ("joint" if a is None else f"alpha{a:g}"),
                      lambda f=f, s=s, a=a: chooser(f, s, a))
                     for f, s, a in (QUICK if args.quick else  # the joint choices, the longest, last
                                     [(f, s, a) for joint in (False, True) for f in figs for s in SIGMAS
                                      for a in ALPHAS if (a is None) == joint])]
    if args.skip_recorded:
        held = {e["name"] for e in json.loads(RESULTS.read_text())}
        scenarios = [(name, make) for name, make in scenarios if f"choosers.hfl.{name}.seconds" not in held]
    replicas = args.replicas or (16 if args.mlp else 64)
    results = []
    for name, make in scenarios:
        result = evaluate(make(), name, replicas)
        results.append(result)
        record(figures(f"choosers.hfl.{name}", result))  # at once: a cut run keeps it
        print(table([result]).split("\n", 2)[2], f"  ({result['seconds']:.1f} s, {result['cpu']:.1f} s CPU, "
              f"reference best {result['best']})", flush=True)
    print(table(results))
    if not (args.quick or args.only or args.mlp):
        record(summary("choosers.hfl", results))


if __name__ == "__main__":
    main()
