"""The ``fedbound`` command.

fedbound list                                   registered results and their status
fedbound bound KEY [--variant V] --params JSON  value, terms, admissibility of a bound
fedbound step KEY [--variant V] --params JSON   largest admissible step and what binds
fedbound scenario KEY                           the default scenario of KEY as JSON
fedbound check KEY [--scenario FILE|-] [--exact] [--plot PNG]   bound vs simulator
fedbound check --all [--only KEYS] [--battery N] [--seed S] [--report DIR] [--jobs N]
                                                every result: table, report, exit 1 if a
                                                result registered as holding was violated
fedbound sweep SPEC [--db FILE] [--jobs N | --scheduler ADDR | --dask-local N]
                                                resumable sweep into SQLite
fedbound report [--db FILE] [--out DIR]         plots and tables of a sweep
fedbound search KEY [--variant V] [--budget N] [--seed S]
                                                counterexample search, with a witness
fedbound choose-sync-time --sizes 15,15 --delays d,b,e,f,d_g,b_g,e_g,f_g --T T --alpha A
         --L L --G G --sigma S --Delta D [--method bound|simulate|both]
                                                HFL: the sync time S, bound vs simulation
fedbound choose-q-eta --epsilon E --t-comm T --t-comp T [--method bound|simulate|both]
                                                TDCD: fastest (Q, eta) to accuracy E

Every command takes ``--json``. Bad input exits with status 2 and one line naming the
problem, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from tqdm import tqdm

import bounds

from . import hfl, plots, report, search, suite, sweep, tdcd
from .check import Verdict, check
from .scenario import adapter_for, default_scenario, json_text, load_scenario


class UsageError(Exception):
    """Bad input from the command line (exit status 2)."""


@dataclass
class Exit:
    """A command's output (printed as JSON unless None) and its exit status."""

    payload: object
    status: int


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(message)


def _params(text: str | None) -> dict:
    if text is None:
        raise UsageError("--params JSON is required")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--params is not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(data, dict):
        raise UsageError("--params must be a JSON object of parameter values")
    return {k: np.asarray(v, dtype=float) if isinstance(v, list) else v for k, v in data.items()}


# ---------------------------------------------------------------- commands


def cmd_list(args) -> dict | list:
    rows = bounds.list()
    if args.json:
        return rows
    w = max(len(r["key"]) for r in rows)
    lines = [f"{'key':<{w}}  {'status':<19} {'variants':<22} title"]
    lines += [f"{r['key']:<{w}}  {r['status']:<19} {','.join(r['variants']):<22} {r['title']}"
              for r in rows]
    print("\n".join(lines))
    return None


def cmd_bound(args):
    thm = bounds.get(args.key, args.variant)
    p = _params(args.params)
    out = {
        "key": thm.key, "variant": thm.variant,
        "value": thm.evaluate(**p), "terms": thm.terms(**p),
        "admissible": thm.admissible(**p),
        "violations": [str(v) for v in thm.violations(**p)],
    }
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}] = {out['value']:.6g}")
    for name, v in out["terms"].items():
        print(f"  {name:<24} {v:.6g}")
    print("admissible" if out["admissible"] else "NOT admissible: " + "; ".join(out["violations"]))
    return None


def cmd_step(args):
    thm = bounds.get(args.key, args.variant)
    c = bounds.choose_step(thm, args.objective, **_params(args.params))
    binding = c.binding + (f" at worker {c.worker}" if c.worker is not None else "")
    out = {"max_step" if args.objective == "max" else "step": c.step, "bound": c.bound,
           "binding": binding}
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}]: {thm.step} = {c.step:.6g} (bound {c.bound:.6g}; "
          f"binding: {binding})")
    return None


def cmd_scenario(args):
    return default_scenario(args.key).to_dict()


def _read_scenario(key: str, source: str | None):
    if source is None:
        return default_scenario(key)
    try:
        text = sys.stdin.read() if source == "-" else open(source).read()
    except OSError as e:
        raise UsageError(f"--scenario {source}: {e.strerror}") from None
    return load_scenario(key, text)


def _verdict_table(v: Verdict) -> str:
    lo, hi = v.measured_ci
    rows = [
        ("result", f"{v.key} [{v.variant}]"),
        ("bound", f"{v.bound:.6g}"),
        ("measured", f"{v.measured_mean:.6g}" + ("" if v.mode == "exact" else
                                                 f"  (95% CI {lo:.6g} .. {hi:.6g})")),
        ("verdict", v.verdict.upper() + ("" if v.admissible else
                                          "  (hypotheses fail: " + "; ".join(v.violations) + ")")),
        ("slack", f"{v.slack:.3g}x  (bound / measured)"),
        ("mode", f"{v.mode}, {v.replicas} replicas" + (f", {v.diverged} diverged"
                                                        if v.diverged else "")),
        ("time", f"{v.seconds:.2f} s"),
    ]
    step = bounds.get(v.key, v.variant).step
    shown = [step, "zeta"] if step else ["zeta"]
    rows[-1:-1] = [(name, f"{v.params[name]:.6g}") for name in shown
                   if isinstance(v.params.get(name), (int, float))]
    return "\n".join(f"  {k:<9} {val}" for k, val in rows)


def cmd_check(args):
    if args.all:
        return _check_all(args)
    if args.key is None:
        raise UsageError("check needs a result KEY, or --all")
    scenario = _read_scenario(args.key, args.scenario)
    v = check(args.key, scenario, variant=args.variant, exact=args.exact)
    if args.plot:
        ax = plt.subplots(figsize=(6, 4))[1]
        plots.save(adapter_for(args.key).plot(args.key, scenario, variant=args.variant,
                                              exact=args.exact, ax=ax), args.plot)
    if args.json:
        return v.as_dict()
    print(_verdict_table(v))
    if args.plot:
        print(f"  plot      {args.plot}")
    return None


def _check_all(args) -> Exit:
    """Every result on its defaults and a random battery; table, report, exit status."""
    if args.key or args.scenario or args.exact or args.plot or args.variant:
        raise UsageError("check --all takes no KEY, --variant, --scenario, --exact or --plot")
    todo = suite.tasks(suite.select(args.only), battery=args.battery, seed=args.seed)
    with tqdm(total=len(todo), desc="fedbound check --all", unit="check", file=sys.stderr,
              disable=None) as bar:
        def progress(row):
            bar.set_postfix_str(row.key, refresh=False)
            bar.update()
        with sweep.executor(jobs=args.jobs) as pool:
            rows = suite.run(todo, executor=pool, progress=progress)
    out = report.write(rows, args.report, seed=args.seed, battery=args.battery,
                       figures=not args.no_figures)
    summ = suite.summary(rows)
    status = 1 if summ["unexpected"] else 0
    if args.json:
        return Exit({"summary": summ, "rows": [r.as_dict() for r in rows],
                     "report": str(out / "index.html")}, status)
    print(suite.table(rows))
    print(f"\n{summ['checks']} checks of {summ['results']} results: "
          + ", ".join(f"{n} {k}" for k, n in sorted(summ["outcomes"].items()))
          + f"; {len(summ['unexpected'])} unexpected. Report: {out / 'index.html'}")
    return Exit(None, status)


def cmd_sweep(args):
    spec = sweep.SweepSpec.load(args.spec)
    store = sweep.Store(args.db)
    try:
        total = len(spec.scenarios())
        with tqdm(total=total, desc=f"sweep {spec.key}", unit="scenario", file=sys.stderr,
                  disable=None) as bar, \
                sweep.executor(jobs=args.jobs, scheduler=args.scheduler,
                               dask_local=args.dask_local) as ex:
            res = sweep.run_sweep(spec, store, ex, progress=bar.update)
    finally:
        store.close()
    out = {**res.as_dict(), "db": args.db}
    if args.json:
        return out
    print(f"{spec.key}: {res.total} scenarios, {res.skipped} already stored, {res.ran} run "
          f"({res.errors} errors) -> {args.db}")
    return None


def cmd_report(args):
    if not Path(args.db).exists():
        raise UsageError(f"--db {args.db}: no such file")
    store = sweep.Store(args.db)
    try:
        rows = store.rows()
    finally:
        store.close()
    out = report.write_sweep(rows, args.out)
    if args.json:
        return {"rows": len(rows), "report": str(out / "index.html")}
    print(f"{len(rows)} stored results -> {out / 'index.html'}")
    return None


def cmd_search(args):
    res = search.search(args.key, variant=args.variant, budget=args.budget, seed=args.seed)
    if args.json:
        return res.as_dict()
    print(search.format_search(res))
    return None


def _grid(text: str | None, name: str, kind=float) -> list | None:
    """A comma-separated list of numbers (None when not given)."""
    if text is None:
        return None
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{name} must be comma-separated numbers, got {text!r}") from None


def cmd_choose_sync_time(args):
    delays = [x.strip() for x in args.delays.split(",")]  # strings: decimals stay exact
    if len(delays) != 8:
        raise UsageError(f"--delays needs the 8 parameters d,b,e,f,d_g,b_g,e_g,f_g of the "
                         f"linear delay model, got {len(delays)}")
    rep = hfl.choose_sync_time_report(
        sizes=_grid(args.sizes, "--sizes", int), delays=delays, T=args.T, alpha=args.alpha,
        L=args.L, G=args.G, sigma=args.sigma, Delta=args.Delta, variant=args.variant,
        method=args.method, S_grid=_grid(args.S, "--S"), seed=args.seed)
    if args.json:
        return rep
    print(hfl.format_choose_sync_time(rep))
    return None


def cmd_choose_q_eta(args):
    scenario = None if args.scenario is None else _read_scenario("tdcd.theorem1", args.scenario)
    rep = tdcd.choose_q_eta(epsilon=args.epsilon, t_comm=args.t_comm, t_comp=args.t_comp,
                            scenario=scenario, method=args.method, Q_grid=_grid(args.Q, "--Q", int))
    if args.json:
        return rep
    print(tdcd.format_choose_q_eta(rep))
    return None


# ---------------------------------------------------------------- parser


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="fedbound", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name, fn, help_):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(fn=fn)
        return p

    add("list", cmd_list, "registered results, variants and status")
    p = add("bound", cmd_bound, "evaluate a bound")
    p.add_argument("key"), p.add_argument("--variant"), p.add_argument("--params")
    p = add("step", cmd_step, "largest admissible (or bound-minimising) step size")
    p.add_argument("key"), p.add_argument("--variant"), p.add_argument("--params")
    p.add_argument("--objective", choices=bounds.tuning.OBJECTIVES, default="max")
    p = add("scenario", cmd_scenario, "the default scenario of a result as JSON")
    p.add_argument("key")
    p = add("check", cmd_check, "check a bound against the simulator (or --all of them)")
    p.add_argument("key", nargs="?"), p.add_argument("--variant")
    p.add_argument("--scenario", help="scenario JSON file, or - for standard input")
    p.add_argument("--exact", action="store_true",
                   help="exact expectation instead of Monte Carlo (quadratic problems)")
    p.add_argument("--plot", help="also write the bound-vs-measurement plot to this PNG")
    p.add_argument("--all", action="store_true",
                   help="every registered result on its defaults and a random battery")
    p.add_argument("--battery", type=int, default=2,
                   help="random admissible scenarios per result (--all; default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the battery (--all)")
    p.add_argument("--report", default="report", help="report directory (--all)")
    p.add_argument("--no-figures", action="store_true", help="report without figures (--all)")
    p.add_argument("--jobs", type=int, default=1, help="worker processes (--all; default 1)")
    p.add_argument("--only", help="comma-separated keys or papers, e.g. mllsgd,hfl.theorem2 (--all)")
    p = add("search", cmd_search, "search admissible scenarios for a violation of a bound")
    p.add_argument("key"), p.add_argument("--variant")
    p.add_argument("--budget", type=int, default=50, help="admissible scenarios to try (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the search")
    p = add("choose-sync-time", cmd_choose_sync_time,
            "HFL: the sync time S from the expected bound and/or from simulation")
    p.add_argument("--sizes", required=True, help="clients per group, e.g. 15,15")
    p.add_argument("--delays", required=True,
                   help="d,b,e,f,d_g,b_g,e_g,f_g of the paper's linear delay model")
    for name, help_ in (("T", "system time"), ("alpha", "step size"), ("L", "smoothness"),
                        ("G", "gradient bound"), ("sigma", "gradient noise"),
                        ("Delta", "initial gap F(x1) - F_inf")):
        p.add_argument(f"--{name}", type=float, required=True, help=help_)
    p.add_argument("--variant", help="variant of hfl.theorem2 (default: proof)")
    p.add_argument("--method", choices=("bound", "simulate", "both"), default="both")
    p.add_argument("--S", help="comma-separated sync times to compare (default: a grid)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    p = add("choose-q-eta", cmd_choose_q_eta,
            "TDCD: which Q and eta reach accuracy epsilon fastest in wall-clock time")
    p.add_argument("--epsilon", type=float, required=True, help="target of the left side of (15)")
    p.add_argument("--t-comm", type=float, required=True, help="time of one communication")
    p.add_argument("--t-comp", type=float, required=True, help="time of one local step")
    p.add_argument("--scenario", help="TDCD scenario JSON file (default: tdcd.theorem1's)")
    p.add_argument("--method", choices=("bound", "simulate", "both"), default="both")
    p.add_argument("--Q", help="comma-separated local-step counts to compare")
    p = add("sweep", cmd_sweep, "run a sweep spec into an SQLite store (resumable)")
    p.add_argument("spec", help="sweep spec JSON file")
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store (default fedbound.sqlite)")
    p.add_argument("--jobs", type=int, help="local worker processes (default: every core)")
    p.add_argument("--scheduler", help="address of a running Dask distributed scheduler")
    p.add_argument("--dask-local", type=int, metavar="N",
                   help="start a Dask LocalCluster of N workers for this sweep")
    p = add("report", cmd_report, "plots and tables of a sweep's store")
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store of a sweep")
    p.add_argument("--out", default="sweep-report", help="report directory")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        out = args.fn(args)
        status = 0
        if isinstance(out, Exit):
            out, status = out.payload, out.status
        if out is not None:
            print(json_text(out))
        return status
    except (UsageError, ValueError, NotImplementedError) as e:
        print(f"fedbound: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
