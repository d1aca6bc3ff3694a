"""The ``fedbound`` command: argument parsing and output only; the work is in the library.

Exit status, the same for every command:

  0    yes: the bound holds, the parameters are admissible, the command did its job
  1    no: a bound is violated, a stored refutation went stale, a search found a violation
       of a result not recorded as refuted, the parameters given to ``bound`` are
       inadmissible
  2    bad input or usage (one line naming the field)
  3    inconclusive, with --strict
  4    finished, but some rows ended in an error (check --all, sweep)
  70   internal error (one line; the traceback in a log file, or on screen with --debug)
  130  interrupted
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import tempfile
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

EXIT_CODES = __doc__.split("Exit status, the same for every command:")[1].strip("\n")


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


def _json_object(text: str | None, what: str) -> dict:
    from .scenario import parse_json

    if text is None:
        raise UsageError(f"{what} JSON is required")
    data = parse_json(text, what)
    if not isinstance(data, dict):
        raise UsageError(f"{what} must be a JSON object of parameter values")
    return data


def _param_value(name: str, v):
    """A value of ``--params``: a number, or a (nested, rectangular) list of numbers as a
    float array; UsageError naming the entry (``a[3]``) otherwise."""
    import numpy as np

    def check(x, where: str):
        if isinstance(x, bool) or not isinstance(x, (int, float, list)):
            raise UsageError(f"--params: {where}={json.dumps(x)[:40]} must be a number"
                             + (", not a boolean" if isinstance(x, bool) else ""))
        if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**1023:
            raise UsageError(f"--params: {where} is beyond the float64 range")
        if isinstance(x, list):
            if not x:
                raise UsageError(f"--params: {where} is an empty list")
            for i, y in enumerate(x):
                check(y, f"{where}[{i}]")
            shapes = {np.shape(y) for y in x}
            if len(shapes) > 1:
                raise UsageError(f"--params: {where} is ragged (its entries have shapes "
                                 f"{sorted(shapes)}): give a rectangular array")

    check(v, name)
    return np.asarray(v, dtype=float) if isinstance(v, list) else v


def _params(text: str | None) -> dict:
    data = _json_object(text, "--params")
    return {k: _param_value(k, v) for k, v in data.items()}


def _int63(text: str, rule: str) -> int:
    """An integer option in [0, 2^63) (what int64 tensors and numpy seeds take)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{value} must be {rule}")
    return value


def _seed(text: str) -> int:
    """A seed option: an integer in [0, 2^63)."""
    return _int63(text, "an integer in [0, 2^63)")


def _positive(text: str) -> int:
    """A count option (--battery may be 0): an integer >= 0 below 2^63."""
    return _int63(text, "an integer >= 0")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds > 0")
    return value


# ---------------------------------------------------------------- commands
# ---------------------------------------------------------------- commands


def _tightness_cells(t: dict | None) -> tuple[str, str]:
    """The default slack and the tightest ratio of a tightness row, as text."""
    if t is None:
        return "-", "-"
    slack = t["default"]["slack"]
    best = "-" if t["tightest"] is None else f"{t['tightest']['ratio']:.3g}"
    return (f"{slack:.3g}x" if isinstance(slack, float) else str(slack),
            best + (" (unbounded)" if t["unbounded"] else ""))


def cmd_list(args):
    from fedbound import bounds

    from .tightness import by_variant, row

    rows = bounds.list()  # statuses of every variant, no result built
    for r in rows:
        t = row(r["key"])
        r["tightness"] = t
        r["default_slack"] = None if t is None else t["default"]["slack"]
        r["tightest_ratio"] = None if t is None or t["tightest"] is None else t["tightest"]["ratio"]
        r["variant_tightness"] = {v: {"default_slack": e["default"]["slack"],
                                      "tightest_ratio": e["tightest"]["ratio"]}
                                  for v, e in by_variant(t).items()}
    if args.json:
        return rows
    body = []
    for r in rows:
        entries = by_variant(r["tightness"])
        body += [(r["key"], v + ("*" if v == r["default"] else ""), r["statuses"][v],
                  *(_tightness_cells(entries[v]) if v in entries else ("", "")), r["title"])
                 for v in r["variants"]]
    head = ("key", "variant", "status", "slack", "tightest", "")
    widths = [max(len(x[i]) for x in body + [head]) for i in range(5)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    print(fmt.format("key", "variant", "status", "slack", "tightest", "title"))
    print("\n".join(fmt.format(*row) for row in body))
    print("(* the default variant; slack: bound/measured on the default scenario; tightest: the "
          "largest ratio measured/bound known, from the stored witnesses)")
    return None


def _numeric_theorem(key: str, variant: str | None):
    """The result to evaluate for ``bound`` and ``step``: its numeric theorem, loaded without
    sympy, where a valid manifest exists (:mod:`bounds.manifest`); else the sympy theorem,
    whose manifest is then written for the next process."""
    from fedbound.bounds import manifest

    thm = manifest.load(key, variant)
    if thm is None:
        from fedbound import bounds

        thm = bounds.get(key, variant)
        manifest.save(thm)
    return thm


def cmd_bound(args):
    import numpy as np

    from .adapter import nonfinite_bound, undefined_named

    thm = _numeric_theorem(args.key, args.variant)
    p = _params(args.params)
    with undefined_named(thm, p):
        out = {
            "key": thm.key, "variant": thm.variant,
            "value": thm.evaluate(**p), "terms": thm.terms(**p),
            "admissible": bool(thm.admissible(**p)),
            "violations": [str(v) for v in thm.violations(**p)],
        }
    if out["admissible"] and not all(np.all(np.isfinite(x)) for x in
                                     (out["value"], *out["terms"].values())):
        raise ValueError(nonfinite_bound(thm, p))  # never a number, never admissible
    status = 0 if out["admissible"] or args.allow_inadmissible else 1
    if args.json:
        return Exit(out, status)
    print(f"{thm.key} [{thm.variant}] = {_values(out['value'])}")
    for name, v in out["terms"].items():
        print(f"  {name:<24} {_values(v)}")
    print("admissible" if out["admissible"] else "NOT admissible: " + "; ".join(out["violations"]))
    return Exit(None, status)


def _values(x) -> str:
    """A bound or a term as text: a number, or every entry of a bound stated per round,
    group or worker (an array), six significant digits each."""
    import numpy as np

    if np.ndim(x) == 0:
        return f"{float(x):.6g}"
    return np.array2string(np.asarray(x, dtype=float), separator=", ",
                           formatter={"float_kind": lambda v: f"{v:.6g}"})


def cmd_step(args):
    from fedbound import bounds

    from .adapter import nonfinite_bound, undefined_named

    thm = _numeric_theorem(args.key, args.variant)
    p = _params(args.params)
    with undefined_named(thm, p):
        c = bounds.choose_step(thm, args.objective, **p)
    if not (math.isfinite(c.step) and math.isfinite(c.bound)):
        raise ValueError(nonfinite_bound(thm, {**p, thm.step: c.step}))
    binding = c.binding + (f" at worker {c.worker}" if c.worker is not None else "")
    out = {"max_step" if args.objective == "max" else "step": c.step, "bound": c.bound,
           "binding": binding}
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}]: {thm.step} = {c.step:.6g} (bound {c.bound:.6g}; "
          f"binding: {binding})")
    return None


def cmd_scenario(args):
    from .adapter import default_scenario

    return default_scenario(args.key).to_dict()


def _read_scenario(key: str, source: str | None, variant: str | None = None):
    """The scenario of ``--scenario`` (a file, or - for standard input) and the variant to
    check: a stored witness file (``verify.Witness``) gives its scenario and, unless
    ``--variant`` says otherwise, its variant."""
    from .adapter import adapter_for
    from .witnesses import as_witness

    ad = adapter_for(key)
    if source is None:
        return ad.default_scenario(), variant
    if source != "-" and not Path(source).is_file():
        raise UsageError(f"--scenario {source}: No such file")
    from .scenario import parse_json

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"--scenario {source}: {getattr(e, 'strerror', None) or e}") from None
    data = parse_json(text, f"--scenario {source}")
    w = as_witness(data)
    if w is not None:
        if w.key != key:
            raise UsageError(f"--scenario {source} is a witness of {w.key}, not of {key}")
        return ad.load(w.scenario), variant or w.variant
    return ad.load(data), variant


def witness_name(w) -> str:
    """The name of a stored witness for ``check --witness``: its file name without the
    result's key and ``.json`` (``afl.theorem3.proof.json`` of afl.theorem3: ``proof``)."""
    return Path(w.source).name.removeprefix(f"{w.key}.").removesuffix(".json")


def _stored_witness(key: str, name: str):
    """The stored witness ``name`` of ``key`` (``verify.witnesses``); UsageError listing the
    stored names otherwise."""
    from .witnesses import witnesses

    found = {witness_name(w): w for w in witnesses(key)}
    if name not in found:
        raise UsageError(f"--witness {name}: {key} has no stored witness of that name; its "
                         f"stored witnesses are: {', '.join(found) or 'none'}")
    return found[name]


def cmd_check(args):
    if args.all:
        return _check_all(args)
    if args.key is None:
        raise UsageError("check needs a result KEY, or --all")
    if args.witness is not None:
        if args.scenario is not None:
            raise UsageError("check takes --scenario or --witness, not both")
        args.scenario = _stored_witness(args.key, args.witness).source
    from . import output

    if args.plot is not None:
        output.check_file(args.plot, "--plot", suffixes=output.IMAGE_SUFFIXES)
    from . import report
    from .adapter import adapter_for

    scenario, variant = _read_scenario(args.key, args.scenario, args.variant)
    if args.estimated:
        v = _check_estimated(args, scenario, variant)
    else:
        v = adapter_for(args.key).check(scenario, variant=variant, exact=args.exact)
    if args.plot:
        from .plots import save

        with output.atomic(args.plot) as tmp:
            save(adapter_for(args.key).plot(scenario, variant=variant, exact=args.exact), str(tmp))
    status = {"holds": 0, "violated": 1, "diverged": 1}.get(v.verdict, 3 if args.strict else 0)
    if args.json:
        return Exit(v.as_dict(), status)
    print(report.format_verdict(v))
    if args.plot:
        print(f"  plot      {args.plot}")
    return Exit(None, status)


def _check_estimated(args, scenario, variant):
    """``check KEY --estimated``: the scenario's problem with its constants estimated."""
    from .estimated import KEYS, check_estimated

    if args.exact or args.plot:
        raise UsageError("check --estimated takes no --exact or --plot")
    if args.key not in KEYS:
        raise UsageError(f"check --estimated covers {', '.join(KEYS)}; got {args.key}")
    return check_estimated(args.key, scenario, variant=variant)


#: check --all runs in this process below this many results unless --jobs says otherwise
POOL_MIN_RESULTS = 4
#: the most worker processes check --all starts by default (each imports torch)
POOL_MAX_JOBS = 8


def _pool_ahead(args) -> bool:
    """Whether the command is ``check --all`` with a local pool: ``--jobs`` above 1, or by
    default on a machine of several cores (unless ``--only``, which may select too few
    results for one, POOL_MIN_RESULTS). :func:`main` then starts the pool's fork server
    before it loads plugins and modules, so that the server imports torch and the papers
    meanwhile (a third of a second earlier on two cores)."""
    if getattr(args, "fn", None) is not cmd_check or not args.all:
        return False
    return args.jobs > 1 if args.jobs is not None else args.only is None and _cores() > 1


def _cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _suite_jobs(jobs: int | None, keys) -> int:
    """--jobs of check --all: as given, else one below POOL_MIN_RESULTS results, else every
    core this process may run on, at most POOL_MAX_JOBS."""
    if jobs is not None:
        return jobs
    if len(keys) < POOL_MIN_RESULTS:
        return 1
    return min(_cores(), POOL_MAX_JOBS)


def _check_all(args) -> Exit:
    """Every result on its defaults, a random battery and its witnesses; table, report."""
    if (args.key or args.scenario or args.witness or args.exact or args.plot or args.variant
            or args.estimated):
        raise UsageError("check --all takes no KEY, --variant, --scenario, --witness, --exact, "
                         "--estimated or --plot")
    from . import output

    output.check_dir(args.report, "--report", force=args.force)
    from tqdm import tqdm

    from . import report, suite, sweep

    keys = suite.select(args.only)
    with tqdm(desc="fedbound check --all", unit="check", file=sys.stderr, disable=None) as bar:
        def progress(row):
            bar.set_postfix_str(row.key, refresh=False)
            bar.update()
        jobs = _suite_jobs(args.jobs, keys)
        try:
            # the driver cuts the checks into shares (their work estimated by the workers,
            # which have imported the simulator), and each worker plans its shares itself
            # the workers draw the figures: their fork server imports matplotlib too
            with sweep.executor(jobs=jobs, preload=() if args.no_figures else ("fedbound.verify.plots",)
                                ) as pool:
                report.prepare(keys)  # while the workers start
                todo = suite.shares(keys, battery=args.battery, seed=args.seed,
                                    replay=not args.no_witnesses, figures=not args.no_figures,
                                    jobs=jobs, executor=pool)
                bar.reset(total=sum(map(len, todo)))
                rows = suite.run_shares(todo, executor=pool, progress=progress)
                if pool is not None:  # the workers exit while the report is written
                    pool.shutdown(wait=False)
                out = report.write(rows, args.report, seed=args.seed, battery=args.battery,
                                   force=args.force)
        except suite.Interrupted as stop:
            kept = report.write_summary(stop.rows, args.report, seed=args.seed, battery=args.battery,
                                        interrupted=True, total=stop.total, force=args.force)
            kept.finish(complete=False)
            raise KeyboardInterrupt(f"{stop}; their results are in {kept.path / 'summary.json'} "
                                    '(marked "interrupted": true)') from None
    summ = suite.summary(rows)
    status = 1 if summ["unexpected"] else 4 if summ["errors"] else 0  # an error row is never unexpected
    if args.json:
        return Exit({"summary": summ, "rows": [r.as_dict() for r in rows],
                     "report": str(out / "index.html")}, status)
    print(report.format_suite(rows))
    print(f"Report: {out / 'index.html'}")
    return Exit(None, status)


def cmd_sweep(args):
    from tqdm import tqdm

    from . import output, sweep

    spec = sweep.SweepSpec.load(args.spec)
    entries = spec.entries()  # every scenario validated before any file is created
    output.check_file(args.db, "--db")
    if Path(args.db).exists():
        sweep.inspect_store(args.db)
    jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
    with sweep.executor(jobs=jobs, scheduler=args.scheduler, dask_local=args.dask_local,
                        connect_timeout=args.connect_timeout) as ex:
        store = sweep.Store(args.db)
        try:
            with tqdm(total=len(entries), desc=f"sweep {spec.key}", unit="scenario",
                      file=sys.stderr, disable=None) as bar:
                def progress(stored, total):
                    bar.update(stored - bar.n)
                res = sweep.run_sweep(spec, store, ex, progress=progress, entries=entries,
                                      window=2 * (args.dask_local or jobs))
        finally:
            store.close()
    out = {**res.as_dict(), "db": args.db}
    status = 4 if res.errors else 0
    if args.json:
        return Exit(out, status)
    others = f", {res.others} by another driver" if res.others else ""
    print(f"{spec.key}: {res.total} scenarios, {res.skipped} already stored, {res.ran} run "
          f"({res.errors} errors){others} -> {args.db}")
    return Exit(None, status)


def cmd_report(args):
    from . import output, report, sweep

    output.check_dir(args.out, "--out", force=args.force)
    store = sweep.Store(args.db, readonly=True)
    try:
        rows = store.rows()
    finally:
        store.close()
    out = report.write_sweep(rows, args.out, force=args.force)
    if args.json:
        return {"rows": len(rows), "report": str(out / "index.html")}
    print(f"{len(rows)} stored results -> {out / 'index.html'}")
    return None


def _one_thread() -> None:
    """One torch thread in this process: the searches and sweeps of small scenarios run
    faster without intra-op threads (and --jobs parallelises across processes)."""
    import torch

    torch.set_num_threads(1)


def cmd_search(args):
    from tqdm import tqdm

    from . import output, report, sweep

    if args.witness is not None:
        output.check_file(args.witness, "--witness")
    from .search import search

    _one_thread()
    with tqdm(total=args.budget, desc=f"search {args.key} ({args.objective})", unit="scenario",
              file=sys.stderr, disable=None) as bar, sweep.executor(jobs=args.jobs) as pool:
        def progress(tried, ratio):
            bar.set_postfix_str(f"best ratio {ratio:.4g}", refresh=False)
            bar.update(tried - bar.n)
        res = search(args.key, variant=args.variant, budget=args.budget, seed=args.seed,
                     objective=args.objective, executor=pool, width=args.jobs, progress=progress)
    if args.witness and res.witness is not None:
        res.as_witness().write(args.witness)
    status = 1 if res.new_violation else 0
    if args.json:
        return Exit(res.as_dict(), status)
    print(report.format_search(res))
    if args.witness and res.witness is not None:
        print(f"witness written to {args.witness}")
    return Exit(None, status)


def cmd_rate(args):
    from tqdm import tqdm

    from . import report
    from .rate import rate, sweeps

    values = _grid(args.values, "--values")
    _one_thread()
    table = sweeps(args.key)
    n = len(values or ()) or sum(len(table[o].values) for o in ([args.over] if args.over in table
                                                                  else table))
    with tqdm(total=n, desc=f"rate {args.key}", unit="point", file=sys.stderr,
              disable=None) as bar:
        results = rate(args.key, args.over, variant=args.variant, exact=args.exact,
                       values=values, progress=lambda x: bar.update())
    status = 1 if any(r.verdict == "contradicts" for r in results) else 0
    if args.json:
        return Exit([r.as_dict() for r in results], status)
    print(report.format_rate(results))
    return Exit(None, status)


def cmd_reproduce(args):
    try:  # the reproductions train on scikit-learn's bundled digits (the data extra)
        import sklearn.datasets  # noqa: F401
    except ImportError:
        from fedbound.sim.data import INSTALL_HINT

        raise UsageError(f"fedbound reproduce trains on scikit-learn's digits; {INSTALL_HINT}") from None
    from .reproduce import reproduce

    _one_thread()
    runs = [reproduce(paper, quick=args.quick, seed=args.seed, device=args.device)
            for paper in args.paper]
    findings = [f for r in runs for f in r.findings]
    if any(f.agrees is False for f in findings):
        status = 1
    elif args.strict and any(f.agrees is None for f in findings):
        status = 3
    else:
        status = 0
    if args.json:
        return Exit([r.to_dict() for r in runs], status)
    print("\n\n".join(r.text() for r in runs))
    return Exit(None, status)


def _grid(text: str | None, name: str, kind=float) -> list | None:
    """A comma-separated list of numbers (None when not given)."""
    if text is None:
        return None
    try:
        return [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{name} must be comma-separated numbers, got {text!r}") from None


def _variants(text: str | None) -> list[str] | None:
    return None if text is None else [v.strip() for v in text.split(",") if v.strip()]


def _choice(args, chooser):
    from . import choose, report

    rep = choose.choose(chooser, variants=_variants(args.variant), method=args.method)
    if args.json:
        return rep.as_dict()
    print(report.format_choice(rep))
    return None


def cmd_choose_sync_time(args):
    from . import choose

    delays = [x.strip() for x in args.delays.split(",")]  # strings: decimals stay exact
    if len(delays) != 8:
        raise UsageError(f"--delays needs the 8 parameters d,b,e,f,d_g,b_g,e_g,f_g of the "
                         f"linear delay model, got {len(delays)}")
    return _choice(args, choose.SyncTime(
        sizes=_grid(args.sizes, "--sizes", int), delays=delays, T=args.T, alpha=args.alpha,
        L=args.L, G=args.G, sigma=args.sigma, Delta=args.Delta, S_grid=_grid(args.S, "--S"),
        replicas=args.replicas, seed=args.seed, metric=args.metric))


def cmd_choose_q_eta(args):
    from . import choose

    scenario = None if args.scenario is None else _read_scenario("tdcd.theorem1", args.scenario)[0]
    return _choice(args, choose.QEta(epsilon=args.epsilon, t_comm=args.t_comm, t_comp=args.t_comp,
                                     scenario=scenario, Q_grid=_grid(args.Q, "--Q", int),
                                     **({} if args.replicas is None else {"replicas": args.replicas})))


# ---------------------------------------------------------------- parser

EXAMPLES = {
    "list": "fedbound list --json",
    "bound": "fedbound bound mllsgd.theorem1 --params '{\"L\": 1, \"beta\": 0, \"sigma\": 1, "
             "\"Delta\": 1, \"eta\": 0.001, \"K\": 64, \"q\": 2, \"tau\": 4, \"zeta\": 0.5, "
             "\"a\": [0.5, 0.5], \"p\": [1, 0.9]}'",
    "step": "fedbound step hfl.theorem2 --params '{\"L\": 2, \"G\": 1, \"sigma\": 1, \"Delta\": 1, "
            "\"sizes\": [2, 2], \"t\": [[1, 2]]}'",
    "scenario": "fedbound scenario mllsgd.theorem1 > s.json",
    "check": "fedbound check mllsgd.theorem1 --scenario s.json --exact --strict\n"
             "  fedbound check afl.theorem3 --witness proof --exact   # exits 1: violated\n"
             "  fedbound check --all --report report --jobs 2",
    "search": "fedbound search afl.theorem3 --budget 50 --seed 0 --witness w.json\n"
              "  fedbound search mllsgd.theorem1 --objective tightest --budget 400 --jobs 2 --json",
    "rate": "fedbound rate afl.corollary2 --over K --exact\n  fedbound rate mllsgd.corollary1 --exact --json",
    "choose-sync-time": "fedbound choose-sync-time --sizes 15,15 --delays "
                        "0.01,0.85,0.001,0.085,4,2,0.4,0.2 --T 600 --alpha 0.05 --L 1 --G 10 "
                        "--sigma 10 --Delta 10",
    "choose-q-eta": "fedbound choose-q-eta --t-comm 100 --t-comp 1",
    "reproduce": "fedbound reproduce mllsgd --quick\n  fedbound reproduce hfl tdcd --json",
    "sweep": "fedbound sweep spec.json --db sweep.sqlite --jobs 2",
    "report": "fedbound report --db sweep.sqlite --out sweep-report",
}


def _version() -> str:
    try:
        return version("fedbound")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="fedbound", formatter_class=argparse.RawDescriptionHelpFormatter,
                 description="Executable convergence theory for hierarchical, multi-level and "
                             "anarchic federated learning.",
                 epilog="exit status:\n" + EXIT_CODES)
    ap.add_argument("--version", action="version", version=f"fedbound {_version()}")
    ap.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                    help="import MODULE to register its results (repeatable; also "
                         "FEDBOUND_PLUGINS and the entry-point group fedbound.plugins)")
    ap.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    _limit_options(ap, argparse.SUPPRESS)
    limits = _Parser(add_help=False)
    _limit_options(limits, argparse.SUPPRESS)
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name, fn, help_, description=""):
        p = sub.add_parser(name, help=help_, description=description or help_, parents=[limits],
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=f"example:\n  {EXAMPLES[name]}\n\nexit status:\n{EXIT_CODES}")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(fn=fn)
        return p

    def key_and_variant(p, variant_help="variant (default: the result's default)"):
        p.add_argument("key", help="registered result, e.g. mllsgd.theorem1 (see fedbound list)")
        p.add_argument("--variant", help=variant_help)

    add("list", cmd_list, "registered results: every variant with its status")
    p = add("bound", cmd_bound, "evaluate a bound: value, terms, admissibility",
            "Evaluate a bound at the given parameters. Exits 1 when the parameters are "
            "inadmissible (a condition of the theorem fails), unless --allow-inadmissible.")
    key_and_variant(p)
    p.add_argument("--params", help="the theorem's parameters as a JSON object")
    p.add_argument("--allow-inadmissible", action="store_true",
                   help="exit 0 even when a condition of the theorem fails")
    p = add("step", cmd_step, "largest admissible (or bound-minimising) step size")
    key_and_variant(p)
    p.add_argument("--params", help="the theorem's parameters except the step, as a JSON object")
    p.add_argument("--objective", choices=("max", "min-bound"), default="max",
                   help="max: the largest admissible step; min-bound: the admissible step "
                        "that minimises the bound")
    p = add("scenario", cmd_scenario, "the default scenario of a result, as JSON")
    p.add_argument("key", help="registered result")
    p = add("check", cmd_check, "check a bound against the simulator (or --all of them)",
            "Check a bound against the simulator on a scenario: exit 0 when it holds, 1 when it "
            "is violated (or the run diverges), 3 when inconclusive with --strict, 2 when "
            "--witness names no stored witness. A stored refutation (--witness) still exits 1: "
            "its bound is violated. With --all: "
            "every result on its default scenario and a random battery, and every stored "
            "witness replayed; exit 0 when every result behaves as recorded.")
    p.add_argument("key", nargs="?", help="registered result (omit with --all)")
    p.add_argument("--variant", help="variant (default: the result's default)")
    p.add_argument("--scenario", help="scenario JSON file (fields not given take the default's "
                                      "values), or - for standard input")
    p.add_argument("--witness", metavar="NAME",
                   help="a stored witness of KEY instead of --scenario: its file name without "
                        "KEY and .json (afl.theorem3.proof.json: proof); a wrong NAME lists them")
    p.add_argument("--exact", action="store_true",
                   help="exact expectation instead of Monte Carlo (where the adapter has it)")
    p.add_argument("--estimated", action="store_true",
                   help="estimate the constants (L, sigma, ...) on the scenario's problem instead "
                        "of reading them: the verdict holds only at the conservative end of "
                        "every estimate's interval (verify.check_estimated)")
    p.add_argument("--strict", action="store_true", help="exit 3 when the verdict is inconclusive")
    p.add_argument("--plot", help="also write the bound-vs-measurement figure to this PNG file")
    p.add_argument("--all", action="store_true",
                   help="every registered result: defaults, random battery, witnesses")
    p.add_argument("--battery", type=_positive, default=2,
                   help="random admissible scenarios per result (--all; default 2)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the battery (--all)")
    p.add_argument("--report", default="report", help="report directory (--all; default report): "
                   "new, empty, or a previous fedbound report")
    p.add_argument("--force", action="store_true",
                   help="write the report into a directory that holds other files (--all)")
    p.add_argument("--no-figures", action="store_true", help="report without figures (--all)")
    p.add_argument("--no-witnesses", action="store_true", help="skip the witness replays (--all)")
    p.add_argument("--jobs", type=_positive,
                   help=f"worker processes (--all; default: every core, at most {POOL_MAX_JOBS}, "
                        f"or one when fewer than {POOL_MIN_RESULTS} results are selected, where "
                        f"starting workers costs more than they save)")
    p.add_argument("--only", help="comma-separated keys or papers, e.g. mllsgd,hfl.theorem2 (--all)")
    p = add("search", cmd_search, "search admissible scenarios for a violation of a bound",
            "Search admissible scenarios for a violation (--objective violate) or for the "
            "scenario where the bound is tightest (--objective tightest: the largest ratio "
            "measured/bound, exact where the result has an exact mode): exit 1 when a "
            "violation is found for a result not recorded as refuted, 0 otherwise.")
    key_and_variant(p)
    p.add_argument("--budget", type=_positive, default=50,
                   help="admissible scenarios to try (default 50)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the search")
    p.add_argument("--objective", choices=("violate", "tightest"), default="violate",
                   help="violate (default): stop at the first violation; tightest: the "
                        "scenario with the largest ratio measured/bound")
    p.add_argument("--jobs", type=_positive, default=1,
                   help="worker processes evaluating candidates ahead (same result; default 1)")
    p.add_argument("--witness", help="write the witness found to this JSON file (a stored "
                                     "witness, replayable with verify.Witness.read)")
    p = add("rate", cmd_rate, "fit the exponent of a corollary's left-hand side along a sweep",
            "Sweep a variable of a corollary's published rate (T, K, m, M, R, U: see --over), "
            "measure the left-hand side at each point, fit its exponent (log LHS against log x, "
            "with a 95% interval) and compare it with the rate's exponent along the same sweep. "
            "Exit 1 when the left-hand side decays more slowly than the rate allows "
            "(contradicts), 0 when it agrees or decays faster.")
    key_and_variant(p)
    p.add_argument("--over", help="the variable to sweep (default: every declared one)")
    p.add_argument("--exact", action="store_true",
                   help="exact expectations instead of Monte Carlo (where the adapter has them)")
    p.add_argument("--values", help="comma-separated values of the swept field (at least 3; "
                                    "default: the declared sweep)")
    p = add("choose-sync-time", cmd_choose_sync_time,
            "HFL: the sync time S from the expected bound of each variant and from simulation")
    p.add_argument("--sizes", required=True, help="clients per group, e.g. 15,15")
    p.add_argument("--delays", required=True,
                   help="d,b,e,f,d_g,b_g,e_g,f_g of the paper's linear delay model")
    for name, help_ in (("T", "system time"), ("alpha", "step size"), ("L", "smoothness"),
                        ("G", "gradient bound"), ("sigma", "gradient noise"),
                        ("Delta", "initial gap f(x1) - f_inf")):
        p.add_argument(f"--{name}", type=float, required=True, help=help_)
    p.add_argument("--variant", help="comma-separated variants of hfl.theorem2 (default: all)")
    p.add_argument("--method", choices=("bound", "simulate", "both"), default="both")
    p.add_argument("--S", help="comma-separated sync times to compare (default: a grid)")
    p.add_argument("--metric", choices=("lhs", "final_loss"), default="lhs",
                   help="what the simulation ranks S by: lhs, Theorem 2's left-hand side (the "
                        "mean of ||grad f(x^u)||^2 over rounds, what every variant bounds; "
                        "default), or final_loss, f(x^(U+1)) - f*")
    p.add_argument("--replicas", type=int, default=32,
                   help="simulated delay paths per S (default 32)")
    p.add_argument("--seed", type=_seed, default=0, help="seed of the simulation")
    p = add("choose-q-eta", cmd_choose_q_eta,
            "TDCD: which Q and eta reach accuracy epsilon fastest in wall-clock time")
    p.add_argument("--epsilon", type=float,
                   help="target of the left side of Theorem 1, eq. (15) (default: 0.25 "
                        "||grad L(theta^0)||^2, at least twice the simulated noise floor)")
    p.add_argument("--t-comm", type=float, help="time of one communication (default: the scenario's)")
    p.add_argument("--t-comp", type=float, help="time of one local step (default: the scenario's)")
    p.add_argument("--replicas", type=int,
                   help="simulated replicas per configuration (default 16)")
    p.add_argument("--scenario", help="TDCD scenario JSON file (default: tdcd.theorem1's)")
    p.add_argument("--variant", help="comma-separated variants of tdcd.theorem1 (default: all)")
    p.add_argument("--method", choices=("bound", "simulate", "both"), default="both")
    p.add_argument("--Q", help="comma-separated local-step counts to compare")
    p = add("reproduce", cmd_reproduce,
            "each paper's experimental claims at small scale, beside its bound",
            "Run the small-scale analogue of each paper's headline experiments (networks on the "
            "8x8 digits), print every claim with what was measured over seeds and what the "
            "bound with estimated constants predicts. Exit 1 when a measurement contradicts "
            "the paper's claim, 3 with --strict when one cannot tell, 0 otherwise.")
    from .reproduce import PAPERS

    p.add_argument("paper", nargs="+", choices=tuple(PAPERS), help="paper(s) to reproduce")
    p.add_argument("--quick", action="store_true", help="fewer seeds and shorter runs (seconds)")
    p.add_argument("--seed", type=_seed, default=0, help="first seed")
    p.add_argument("--device", default=None, help="torch device, e.g. cuda (default: cpu)")
    p.add_argument("--strict", action="store_true", help="exit 3 when a claim is undecided")
    p = add("sweep", cmd_sweep, "run a sweep spec into an SQLite store (resumable)")
    p.add_argument("spec", help="sweep spec JSON file")
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store (default fedbound.sqlite)")
    p.add_argument("--jobs", type=_positive, help="local worker processes (default: every core)")
    p.add_argument("--scheduler", help="address of a running Dask distributed scheduler "
                   "(tcp://host:port; tls://host:port with the TLS settings of Dask's "
                   "configuration, distributed.comm.tls)")
    p.add_argument("--connect-timeout", type=_seconds, default=10.0, metavar="SECONDS",
                   help="give up on an unreachable --scheduler after this long (default 10)")
    p.add_argument("--dask-local", type=_positive, metavar="N",
                   help="start a Dask LocalCluster of N workers for this sweep")
    p = add("report", cmd_report, "plots and tables of a sweep's store")
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store of a sweep")
    p.add_argument("--out", default="sweep-report", help="report directory: new, empty, or a "
                   "previous fedbound report")
    p.add_argument("--force", action="store_true",
                   help="write the report into a directory that holds other files")
    return ap


def _limit_options(p: argparse.ArgumentParser, default) -> None:
    """The resource limits (verify.limits), accepted before or after the command."""
    p.add_argument("--max-memory", metavar="SIZE", default=default,
                   help="memory one scenario may use, e.g. 8G (default: half the machine's "
                        "memory, or of its container's limit; also FEDBOUND_MAX_MEMORY)")
    p.add_argument("--max-steps", metavar="N", default=default,
                   help="operations one scenario may take, e.g. 1e14 (default 1e13; also "
                        "FEDBOUND_MAX_STEPS)")
    p.add_argument("--max-scenarios", metavar="N", default=default,
                   help="scenarios of one sweep or search budget (default 1e6; also "
                        "FEDBOUND_MAX_SCENARIOS)")


def _terminate(signum, frame):
    """SIGTERM: stop like Ctrl-C (finished results are kept, exit status 130)."""
    raise KeyboardInterrupt("terminated (SIGTERM)")


def main(argv: Sequence[str] | None = None) -> int:
    debug = "--debug" in (sys.argv[1:] if argv is None else argv)
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        args = parser().parse_args(argv)
        if _pool_ahead(args):
            from .sweep import start_fork_server

            start_fork_server(() if args.no_figures else ("fedbound.verify.plots",))
        from . import limits
        from .interrupts import uninterrupted_imports
        from .plugins import load_plugins

        with limits.configured(memory=getattr(args, "max_memory", None),
                               steps=getattr(args, "max_steps", None),
                               scenarios=getattr(args, "max_scenarios", None)):
            with uninterrupted_imports("torch", "fedbound.verify.papers"):  # plugins' imports too
                for message in load_plugins(args.plugin):
                    print(f"fedbound: warning: {message}", file=sys.stderr)
                import numpy as np

                with np.errstate(all="ignore"):  # every result is checked for finiteness
                    out = args.fn(args)
            status = 0
            if isinstance(out, Exit):
                out, status = out.payload, out.status
            if out is not None:
                from .scenario import json_text

                print(json_text(out))
        sys.stdout.flush()
        return status
    except (UsageError, ValueError, NotImplementedError) as e:
        print(f"fedbound: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print("fedbound: interrupted" + (f": {e}" if str(e) else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (| head): end quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as e:  # noqa: BLE001 - one line and a log, never a bare traceback
        if debug:
            traceback.print_exc()
        else:
            fd, log = tempfile.mkstemp(prefix="fedbound-error-", suffix=".log")
            with os.fdopen(fd, "w") as f:
                traceback.print_exc(file=f)
            print(f"fedbound: internal error: {type(e).__name__}: {e} (traceback in {log}; "
                  "run with --debug to show it)", file=sys.stderr)
        return 70
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
