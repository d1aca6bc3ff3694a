"""``fedbound reproduce``: each paper's experimental claims at small scale, beside its bound
(the reproductions the plugins register, ``verify.reproduce``)."""

from __future__ import annotations

from .common import Command, Exit, UsageError, one_torch_thread, seed


def run(args):
    from ..reproduce import reproduce, reproductions

    known = reproductions()
    unknown = [p for p in args.paper if p not in known]
    if unknown:
        raise UsageError(f"argument paper: invalid choice: {unknown[0]!r} (choose from "
                         f"{', '.join(map(repr, known))})")
    one_torch_thread()
    runs = []
    for paper in args.paper:
        try:
            runs.append(reproduce(paper, quick=args.quick, seed=args.seed, device=args.device))
        except ImportError as e:  # a package the reproduction needs (the data extra: digits)
            raise UsageError(f"fedbound reproduce {paper}: {e}") from None
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


def arguments(p) -> None:
    p.add_argument("paper", nargs="+", help="paper(s) to reproduce: the key prefix of their "
                                            "results, e.g. hfl (see fedbound list)")
    p.add_argument("--quick", action="store_true", help="fewer seeds and shorter runs (seconds)")
    p.add_argument("--seed", type=seed, default=0, help="first seed")
    p.add_argument("--device", default=None, help="torch device, e.g. cuda (default: cpu)")
    p.add_argument("--strict", action="store_true", help="exit 3 when a claim is undecided")


COMMANDS = (Command(
    "reproduce", run, "each paper's experimental claims at small scale, beside its bound",
    arguments, "fedbound reproduce mllsgd --quick\n  fedbound reproduce hfl tdcd --json",
    "Run the small-scale analogue of each paper's headline experiments (networks on the "
    "8x8 digits), print every claim with what was measured over seeds and what the "
    "bound with estimated constants predicts. Exit 1 when a measurement contradicts "
    "the paper's claim, 3 with --strict when one cannot tell, 0 otherwise.",
    {0: "no measurement contradicts a claim", 1: "a measurement contradicts a claim",
     3: "a claim is undecided, with --strict"}),)
