"""``fedbound search``: admissible scenarios searched for a violation of a bound, or for
the scenario where it is tightest."""

from __future__ import annotations

from .common import Command, Exit, count, key_and_variant, one_torch_thread, progress_bar, seed


def run(args):
    from .. import output, pool, text

    if args.witness is not None:
        output.check_file(args.witness, "--witness")
    from ..search import search

    one_torch_thread()
    with progress_bar(total=args.budget, desc=f"search {args.key} ({args.objective})",
                      unit="scenario") as bar, pool.executor(jobs=args.jobs) as pool:
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


COMMANDS = (Command(
    "search", run, "search admissible scenarios for a violation of a bound", arguments,
    "fedbound search afl.theorem3 --budget 50 --seed 0 --witness w.json\n"
    "  fedbound search mllsgd.theorem1 --objective tightest --budget 400 --jobs 2 --json",
    "Search admissible scenarios for a violation (--objective violate) or for the "
    "scenario where the bound is tightest (--objective tightest: the largest ratio "
    "measured/bound, exact where the result has an exact mode): exit 1 when a "
    "violation is found for a result not recorded as refuted, 0 otherwise.",
    {0: "no violation found, or only of a result recorded as refuted (or the tightest "
        "scenario found)",
     1: "a violation of a result not recorded as refuted was found"},
    ("memory", "steps", "scenarios")),)
