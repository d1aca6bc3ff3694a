"""``fedbound search``: admissible scenarios searched for a violation of a bound, or for
the scenario where it is tightest."""

from __future__ import annotations

from .common import Command, Exit, count, key_and_variant, one_torch_thread, progress_bar, seed


def run(args):
    from .. import output, pool, text

    if args.witness is not None:
        output.check_file(args.witness, "--witness")
    from ..adapter import adapter_for
    from ..region import parse, parse_strata
    from ..search import FROZEN, search

    default = adapter_for(args.key).default
    region = parse(args.where, default, name="--where", frozen=FROZEN)
    parse_strata(args.stratify, default, name="--stratify", frozen=FROZEN)  # its errors, named
    one_torch_thread()
    with progress_bar(total=args.budget, desc=f"search {args.key} ({args.objective})",
                      unit="scenario") as bar, pool.executor(jobs=args.jobs) as pool:
        def progress(tried, ratio):
            bar.set_postfix_str(f"best ratio {ratio:.4g}", refresh=False)
            bar.update(tried - bar.n)
        res = search(args.key, variant=args.variant, budget=args.budget, seed=args.seed,
                     objective=args.objective, executor=pool, width=args.jobs, progress=progress,
                     where=region, stratify=args.stratify)
    if args.witness and res.witness is not None:
        res.as_witness().write(args.witness)
    status = 1 if res.new_violation else 0
    if args.json:
        return Exit(res.as_dict(), status)
    print(text.format_search(res))
    if args.witness and res.witness is not None:
        print(f"witness written to {args.witness}")
    return Exit(None, status)


def arguments(p) -> None:
    key_and_variant(p)
    p.add_argument("--budget", type=count, default=50,
                   help="admissible scenarios to try (default 50)")
    p.add_argument("--seed", type=seed, default=0, help="seed of the search")
    p.add_argument("--objective", choices=("violate", "tightest"), default="violate",
                   help="violate (default): stop at the first violation; tightest: the "
                        "scenario with the largest ratio measured/bound")
    p.add_argument("--jobs", type=count, default=1,
                   help="worker processes evaluating candidates ahead (same result; default 1)")
    p.add_argument("--witness", help="write the witness found to this JSON file (a stored "
                                     "witness, replayable with verify.Witness.read)")
    p.add_argument("--where", action="append", metavar="EXPR",
                   help="stay in a region of scenarios: FIELD OP NUMBER, e.g. 'S >= 2' or "
                        "'problem.sigma > 0' (OP: <=, >=, <, >, ==, !=; a dotted FIELD is a "
                        "field of a nested object); repeatable, combined with and. Random draws "
                        "outside it are moved onto its boundary or skipped, and every move of "
                        "the search stays inside; no admissible scenario in it is an error "
                        "(exit 2)")
    p.add_argument("--stratify", metavar="FIELD=V1,V2,...",
                   help="split the budget evenly over these values of one field (e.g. "
                        "S=0,2,5,10), one search per value, within --where")


COMMANDS = (Command(
    "search", run, "search admissible scenarios for a violation of a bound", arguments,
    "fedbound search afl.theorem3 --budget 50 --seed 0 --witness w.json\n"
    "  fedbound search mllsgd.theorem1 --objective tightest --budget 400 --jobs 2 --json\n"
    "  fedbound search hfl.theorem2 --variant iid --where 'S >= 2' --objective tightest",
    "Search admissible scenarios for a violation (--objective violate) or for the "
    "scenario where the bound is tightest (--objective tightest: the largest ratio "
    "measured/bound, exact where the result has an exact mode), optionally within a "
    "region of scenarios (--where) or with the budget split over values of a field "
    "(--stratify): exit 1 when a violation is found for a result not recorded as refuted, "
    "0 otherwise.",
    {0: "no violation found, or only of a result recorded as refuted (or the tightest "
        "scenario found)",
     1: "a violation of a result not recorded as refuted was found"},
    ("memory", "steps", "scenarios")),)
