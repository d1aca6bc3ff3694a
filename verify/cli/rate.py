"""``fedbound rate``: the exponent of a corollary's left-hand side fitted along a sweep and
compared with its published rate."""

from __future__ import annotations

from ..scenario import comma_separated
from .common import Command, Exit, key_and_variant, one_torch_thread, progress_bar


def run(args):
    from .. import text
    from ..rate import rate, sweeps

    values = comma_separated(args.values, "--values")
    one_torch_thread()
    table = sweeps(args.key)
    n = len(values or ()) or sum(len(table[o].values) for o in ([args.over] if args.over in table
                                                                  else table))
    with progress_bar(total=n, desc=f"rate {args.key}", unit="point") as bar:
        results = rate(args.key, args.over, variant=args.variant, exact=args.exact,
                       values=values, progress=lambda x: bar.update())
    status = 1 if any(r.verdict == "contradicts" for r in results) else 0
    if args.json:
        return Exit([r.as_dict() for r in results], status)
    print(text.format_rate(results))
    return Exit(None, status)


def arguments(p) -> None:
    key_and_variant(p)
    p.add_argument("--over", help="the variable to sweep (default: every declared one)")
    p.add_argument("--exact", action="store_true",
                   help="exact expectations instead of Monte Carlo (where the adapter has them)")
    p.add_argument("--values", help="comma-separated values of the swept field (at least 3; "
                                    "default: the declared sweep)")


COMMANDS = (Command(
    "rate", run, "fit the exponent of a corollary's left-hand side along a sweep", arguments,
    "fedbound rate afl.corollary2 --over K --exact\n  fedbound rate mllsgd.corollary1 --exact --json",
    "Sweep a variable of a corollary's published rate (T, K, m, M, R, U: see --over), "
    "measure the left-hand side at each point, fit its exponent (log LHS against log x, "
    "with a 95% interval) and compare it with the rate's exponent along the same sweep. "
    "Exit 1 when the left-hand side decays more slowly than the rate allows "
    "(contradicts), 0 when it agrees or decays faster.",
    {0: "the left-hand side decays as the rate says, or faster",
     1: "the left-hand side decays more slowly than the rate allows (contradicts)"},
    ("memory", "steps")),)
