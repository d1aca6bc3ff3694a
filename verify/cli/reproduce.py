"""``fedbound reproduce``: each paper's experimental claims, decided on paired differences
over seeds (``verify.reproduce``), with a report of every claim's figure."""

from __future__ import annotations

from .cluster import checked_store, cluster_arguments
from .common import Command, Exit, UsageError, count, names, progress_bar, seed

#: the store ``fedbound reproduce`` keeps its runs in (``--db``)
DEFAULT_STORE = "fedbound-reproduce.sqlite"


def _positive(text: str) -> float:
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def _at_least(minimum: int):
    def parse(text: str) -> int:
        import argparse

        value = count(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} must be an integer >= {minimum}")
        return value
    parse.__name__ = f"integer >= {minimum}"
    return parse


def _listing(selected) -> list[dict]:
    return [{"id": c.id, "cite": c.cite, "claim": c.claim, "setting": dict(c.setting),
             "analogue": c.analogue, "experiment": c.experiment, "stated_model": c.stated_model}
            for c in selected]


def run(args):
    from ..claims import claims, papers
    from ..reproduce import reproduce

    if args.curves and not args.json:
        raise UsageError("--curves adds the runs' curves to the JSON: give it with --json")
    known = papers()
    unknown = [p for p in args.paper if p not in known]
    if unknown:
        raise UsageError(f"argument paper: invalid choice: {unknown[0]!r} (choose from "
                         f"{', '.join(map(repr, known))})")
    wanted = names(",".join(args.claim), "--claim") if args.claim else None
    selected = claims(args.paper, wanted)
    if args.list:
        if args.json:
            return _listing(selected)
        for c in selected:
            print(f"{c.id}  ({c.cite})\n  {c.claim}")
        return None
    if args.report is not None:
        from .. import output

        output.check_dir(args.report, "--report", force=args.force)
    checked_store(args.db)
    from ..claims import Plan
    from ..reproduce import planned_runs

    todo = len(planned_runs(selected, Plan()))
    with progress_bar(desc="fedbound reproduce", unit="run", total=todo) as bar:
        def progress(r):
            bar.set_postfix_str(r.experiment + (f" ({r.plan.reading})" if r.plan.reading else "")
                                + (" (stored)" if r.stored else ""), refresh=False)
            bar.update()
        try:
            rep = reproduce(args.paper, claim_ids=wanted, quick=args.quick, seed=args.seed,
                            seeds=args.seeds, device=args.device, batch=args.batch,
                            step=args.step, jobs=args.jobs, scheduler=args.scheduler,
                            dask_local=args.dask_local, connect_timeout=args.connect_timeout,
                            store=args.db, progress=progress)
        except ImportError as e:  # a package the experiments need (the data extra: digits)
            raise UsageError(f"fedbound reproduce: {e}") from None
    status = rep.status(args.strict)
    where = None
    if args.report is not None:
        from ..claims_report import write

        where = write(rep, args.report, force=args.force)
    if args.json:
        out = rep.to_dict(curves=args.curves)
        if where is not None:
            out["report"] = str(where / "index.html")
        return Exit(out, status)
    print(rep.text())
    if where is not None:
        print(f"\nReport: {where / 'index.html'}")
    return Exit(None, status)


def arguments(p) -> None:
    p.add_argument("paper", nargs="+", help="paper(s) whose claims to decide: the key prefix of "
                                            "their results, e.g. hfl (see fedbound list)")
    p.add_argument("--claim", action="append", metavar="ID",
                   help="only these claims (repeatable or comma-separated; the full id, "
                        "hfl.fig7a.s5-gap, or the id without the paper, fig7a.s5-gap)")
    p.add_argument("--list", action="store_true", help="list the claims with their citations "
                                                        "and settings; run nothing")
    p.add_argument("--quick", action="store_true",
                   help="fewer seeds and shorter runs (at most a minute per paper): a verdict "
                        "that is undecided rather than wrong")
    p.add_argument("--seed", type=seed, default=0, help="first seed (data split, start, draws)")
    p.add_argument("--seeds", type=_at_least(2), metavar="N",
                   help="seeds per configuration (default: each experiment's own)")
    p.add_argument("--batch", type=_at_least(1), metavar="B",
                   help="mini-batch size of every experiment (default: each one's own, within "
                        "the paper's setting)")
    p.add_argument("--step", type=_positive, metavar="ETA",
                   help="step size of every experiment (default: each one's own: the paper's, "
                        "or the best of a small grid)")
    p.add_argument("--device", default=None, help="torch device, e.g. cuda (default: cpu)")
    p.add_argument("--jobs", type=_at_least(1), default=1,
                   help="worker processes running experiments in parallel (default 1)")
    cluster_arguments(p, "the experiments' runs")
    p.add_argument("--db", default=DEFAULT_STORE,
                   help=f"SQLite store of the runs (default {DEFAULT_STORE}): each experiment "
                        "run is kept as soon as it finishes (a failed run is not kept), and a "
                        "run it holds already (the same experiment, plan and code) is read back, "
                        "not run: a reproduction interrupted (Ctrl-C) or killed resumes from "
                        "the runs that finished, with the same numbers")
    p.add_argument("--curves", action="store_true",
                   help="with --json, also every run's curves (what each claim's figure draws): "
                        "a file that fedbound.verify.api.load_reproduction loads without loss")
    p.add_argument("--strict", action="store_true", help="exit 3 when a claim is undecided")
    p.add_argument("--report", metavar="DIR",
                   help="also write a report: a page per paper with every claim's figure and table")
    p.add_argument("--force", action="store_true",
                   help="write the report into a directory that holds other files")


COMMANDS = (Command(
    "reproduce", run, "decide each paper's experimental claims on paired differences over seeds",
    arguments, "fedbound reproduce mllsgd --quick\n  fedbound reproduce hfl --claim fig7a.s5-gap "
               "--json\n  fedbound reproduce mllsgd hfl tdcd afl --jobs 2 --report claims",
    "Run the experiments behind each paper's qualitative claims (networks on the 8x8 digits, "
    "the paper's delays, partitions and steps, or their smallest faithful analogue) and decide "
    "every claim on paired differences over seeds against its margin, the smallest effect "
    "that counts: agrees, contradicts (beyond the margin either way), negligible (inside it), "
    "undecided (with the effect the run could have detected and the seeds that would decide "
    "it) or fixed-by-setting (the stated setting decides it; no test is run). A claim about an "
    "ambiguous step of the algorithm is run under each reading. Exit 1 when a claim is "
    "contradicted, 4 when a run failed, 3 with --strict when one is undecided, 0 otherwise.",
    {0: "no claim is contradicted", 1: "a claim is contradicted",
     3: "a claim is undecided, with --strict", 4: "an experiment's run failed (its claims are errors)"},
    ("memory", "steps")),)
