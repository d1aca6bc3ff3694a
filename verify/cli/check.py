"""``fedbound check``: one bound against the simulator, or ``--all`` of them: every result on
its default scenario and a random battery, and every stored witness replayed."""

from __future__ import annotations

import os
from pathlib import Path

from .common import Command, Exit, UsageError, count, progress_bar, read_scenario, seed, stages


def witness_name(w) -> str:
    """The name of a stored witness for ``check --witness``: its file name without the
    result's key and ``.json`` (``afl.theorem3.proof.json`` of afl.theorem3: ``proof``)."""
    return Path(w.source).name.removeprefix(f"{w.key}.").removesuffix(".json")


def _stored_witness(key: str, name: str):
    """The stored witness ``name`` of ``key`` (``verify.witnesses``); UsageError listing the
    stored names otherwise."""
    from fedbound.bounds.registry import did_you_mean

    from ..witnesses import witnesses

    found = {witness_name(w): w for w in witnesses(key)}
    if name not in found:
        raise UsageError(f"--witness {name}: {key} has no stored witness of that name"
                         f"{did_you_mean(name, found)}; its stored witnesses are: "
                         f"{', '.join(found) or 'none'}")
    return found[name]


def run(args):
    if args.all:
        return _check_all(args)
    if args.key is None:
        raise UsageError("check needs a result KEY, or --all")
    if args.witness is not None:
        if args.scenario is not None:
            raise UsageError("check takes --scenario or --witness, not both")
        args.scenario = _stored_witness(args.key, args.witness).source
    from .. import output

    if args.plot is not None:
        output.check_file(args.plot, "--plot", suffixes=output.IMAGE_SUFFIXES)
    from .. import text
    from ..adapter import adapter_for

    scenario, variant = read_scenario(args.key, args.scenario, args.variant)
    ad = adapter_for(args.key)
    if args.estimated:
        _estimated_usage(args)
    else:  # a scenario too large is refused before torch is even imported
        ad.require_resources(scenario, exact=args.exact and ad.supports_exact(scenario))
    steps = ("loading the simulator", "estimating the constants and simulating" if args.estimated
             else "simulating", *(("drawing the figure",) if args.plot else ()))
    with stages(f"check {args.key}", steps) as begin:
        begin(steps[0])
        import torch  # noqa: F401 - what the check imports first, most of its start-up

        ax = _axes() if args.plot else None
        begin(steps[1])
        if args.estimated:  # the scenario's problem, its constants estimated
            from ..estimated import check_estimated

            v = check_estimated(args.key, scenario, variant=variant)
        else:  # the figure is drawn from this very measurement
            v = ad.check(scenario, variant=variant, exact=args.exact, ax=ax)
        if args.plot:
            begin(steps[2])
            from ..figures import save

            with output.atomic(args.plot) as tmp:
                save(ax, str(tmp))
    status = {"holds": 0, "violated": 1, "diverged": 1}.get(v.verdict, 3 if args.strict else 0)
    if args.json:
        return Exit(v.as_dict(), status)
    print(text.format_verdict(v))
    if args.plot:
        print(f"  plot      {args.plot}")
    return Exit(None, status)


def _axes():
    """The axes of the figure of ``check --plot`` (:meth:`verify.adapter.Adapter.plot`'s)."""
    import matplotlib.pyplot as plt

    from ..figures import SIZE

    return plt.subplots(figsize=SIZE)[1]


def _estimated_usage(args) -> None:
    """UsageError unless ``check KEY --estimated`` is used as it can be."""
    from ..estimated import estimated_keys

    if args.exact or args.plot:
        raise UsageError("check --estimated takes no --exact or --plot")
    if args.key not in estimated_keys():
        raise UsageError(f"check --estimated covers {', '.join(estimated_keys())}; got {args.key}")


#: check --all runs in this process below this many results unless --jobs says otherwise
POOL_MIN_RESULTS = 4
#: the most worker processes check --all starts by default (each imports torch)
POOL_MAX_JOBS = 8


def pool_ahead(args) -> bool:
    """Whether the command is ``check --all`` with a local pool: ``--jobs`` above 1, or by
    default on a machine of several cores (unless ``--only``, which may select too few
    results for one, POOL_MIN_RESULTS). :func:`main` then starts the pool's fork server
    before it loads plugins and modules, so that the server imports torch and the plugins
    meanwhile (a third of a second earlier on two cores)."""
    if getattr(args, "command", None) != "check" or not args.all:
        return False
    return args.jobs > 1 if args.jobs is not None else args.only is None and cores() > 1


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def suite_jobs(jobs: int | None, keys) -> int:
    """--jobs of check --all: as given, else one below POOL_MIN_RESULTS results, else every
    core this process may run on, at most POOL_MAX_JOBS."""
    if jobs is not None:
        return jobs
    if len(keys) < POOL_MIN_RESULTS:
        return 1
    return min(cores(), POOL_MAX_JOBS)


def _check_all(args) -> Exit:
    """Every result on its defaults, a random battery and its witnesses; table, report."""
    if (args.key or args.scenario or args.witness or args.exact or args.plot or args.variant
            or args.estimated):
        raise UsageError("check --all takes no KEY, --variant, --scenario, --witness, --exact, "
                         "--estimated or --plot")
    from .. import output

    output.check_dir(args.report, "--report", force=args.force)
    from .. import pool, report, suite, text
    from ..rows import summary

    keys = suite.checked_keys(suite.select(args.only), args.battery)  # the battery counted
    broken: list = []
    with progress_bar(desc="fedbound check --all", unit="check") as bar:
        def progress(row):
            bar.set_postfix_str(row.key, refresh=False)
            bar.update()
        jobs = suite_jobs(args.jobs, keys)
        try:
            # the driver cuts the checks into shares (their work estimated by the workers,
            # which have imported the simulator), and each worker plans its shares itself
            # the workers draw the figures: their fork server imports matplotlib too
            with pool.executor(jobs=jobs, preload=() if args.no_figures else ("fedbound.verify.plots",)
                                ) as pool:
                keys, broken = suite.unloadable(keys)  # while the workers start
                report.prepare(keys)
                todo = suite.shares(keys, battery=args.battery, seed=args.seed,
                                    replay=not args.no_witnesses, figures=not args.no_figures,
                                    jobs=jobs, executor=pool)
                bar.reset(total=sum(map(len, todo)))
                rows = broken + suite.run_shares(todo, executor=pool, progress=progress)
                if pool is not None:  # the workers exit while the report is written
                    pool.shutdown(wait=False)
                out = report.write(rows, args.report, seed=args.seed, battery=args.battery,
                                   force=args.force)
        except suite.Interrupted as stop:
            kept = report.write_summary(broken + stop.rows, args.report, seed=args.seed, battery=args.battery,
                                        interrupted=True, total=stop.total, force=args.force)
            kept.finish(complete=False)
            raise KeyboardInterrupt(f"{stop}; their results are in {kept.path / 'summary.json'} "
                                    '(marked "interrupted": true)') from None
    summ = summary(rows)
    status = 1 if summ["unexpected"] else 4 if summ["errors"] else 0  # an error row is never unexpected
    if args.json:
        return Exit({"summary": summ, "rows": [r.as_dict() for r in rows],
                     "report": str(out / "index.html")}, status)
    print(text.format_suite(rows))
    print(f"Report: {out / 'index.html'}")
    return Exit(None, status)


def arguments(p) -> None:
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
    p.add_argument("--battery", type=count, default=2,
                   help="random admissible scenarios per result (--all; default 2)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the battery (--all)")
    p.add_argument("--report", default="report", help="report directory (--all; default report): "
                   "new, empty, or a previous fedbound report")
    p.add_argument("--force", action="store_true",
                   help="write the report into a directory that holds other files (--all)")
    p.add_argument("--no-figures", action="store_true", help="report without figures (--all)")
    p.add_argument("--no-witnesses", action="store_true", help="skip the witness replays (--all)")
    p.add_argument("--jobs", type=count,
                   help=f"worker processes (--all; default: every core, at most {POOL_MAX_JOBS}, "
                        f"or one when fewer than {POOL_MIN_RESULTS} results are selected, where "
                        f"starting workers costs more than they save)")
    p.add_argument("--only", help="comma-separated keys or papers, e.g. mllsgd,hfl.theorem2 (--all)")


COMMANDS = (Command(
    "check", run, "check a bound against the simulator (or --all of them)", arguments,
    "fedbound check mllsgd.theorem1 --scenario s.json --exact --strict\n"
    "  fedbound check afl.theorem3 --witness proof --exact   # exits 1: violated\n"
    "  fedbound check --all --report report --jobs 2",
    "Check a bound against the simulator on a scenario: exit 0 when it holds, 1 when it "
    "is violated (or the run diverges), 3 when inconclusive with --strict, 2 when "
    "--witness names no stored witness. A stored refutation (--witness) still exits 1: "
    "its bound is violated. With --all: "
    "every result on its default scenario and a random battery, and every stored "
    "witness replayed; exit 0 when every result behaves as recorded.",
    {0: "the bound holds (--all: every result behaves as recorded)",
     1: "the bound is violated or the run diverged (--all: a holding result failed, or a "
        "stored witness went stale)",
     3: "inconclusive, with --strict",
     4: "--all finished, but some rows ended in an error"},
    ("memory", "steps")),)
