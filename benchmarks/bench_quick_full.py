"""Does ``--quick`` give a verdict that the full run does not overturn? (issue 29, item 5)

    python benchmarks/bench_quick_full.py [--papers mllsgd,hfl,tdcd,afl] [--jobs N]
                                          [--device cpu]

For each paper, ``verify.api.reproduce(paper)`` runs quick and then full from the same
seed, and each claim's primary verdict is compared. Issue 29 asks that ``--quick`` give a
verdict "undecided rather than wrong": a claim is

- **wrong** when quick decided it one way and the full run the other (goal: none);
- **overconfident** when quick decided it and the full run left it undecided: the quick
  verdict rests on a setting of the short run (a horizon, a few seeds) that the full run
  does not confirm. Counted only where the claim's ``sensitivity`` does not say so (it
  names "quick"; goal: none);
- **power** when quick left it undecided and the full run decided it: the full run's
  more seeds and iterations, which is what a full run is for (no goal).

Records per paper those three counts and the full run's wall-clock seconds (goal: the
issue's 15 minutes), and prints each claim whose verdict moved with both verdicts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_reproduce import GOALS, parsed  # noqa: E402
from benchmarks.device import suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from fedbound.verify.api import reproduce  # noqa: E402

DECIDED = ("agrees", "contradicts")


def kind(quick: str, full: str, sensitivity: str) -> str | None:
    """How a claim's verdict moved from the quick to the full run: "wrong",
    "overconfident", "stated" (overconfident, said in the claim's sensitivity), "power",
    or None (the same verdict, or a run that ended in an error)."""
    if quick == full or "error" in (quick, full):
        return None
    if quick in DECIDED:
        if full in DECIDED:
            return "wrong"
        return "stated" if "quick" in sensitivity else "overconfident"
    return "power" if full in DECIDED else None


def main(argv: list[str] | None = None) -> None:
    args, device, papers = parsed(argv, __doc__.splitlines()[0], full=False)
    torch.set_num_threads(1)
    common = {"jobs": args.jobs, "device": None if device == "cpu" else device, "seed": 0}
    for paper in papers:
        quick = reproduce(paper, quick=True, **common)
        wall = time.perf_counter()
        full = reproduce(paper, quick=False, **common)
        wall = time.perf_counter() - wall
        verdicts = {r.claim.id: [r.verdict, None, r.claim.sensitivity] for r in quick.results}
        for r in full.results:
            verdicts[r.claim.id][1] = r.verdict
        counts = dict.fromkeys(("wrong", "overconfident", "stated", "power"), 0)
        for claim, (q, f, sensitivity) in verdicts.items():
            moved = kind(q, f, sensitivity)
            if moved:
                counts[moved] += 1
                print(f"{paper} {moved}: {claim}: quick {q}, full {f}")
            elif "error" in (q, f):
                print(f"{paper} error: {claim}: quick {q}, full {f}")
        print(f"{paper}: full run {wall:.1f} s wall with {args.jobs} job(s)")
        name = f"reproduce.{paper}{suffix(device)}.quick_vs_full"
        record([figure(f"{name}.wrong", counts["wrong"], "claims", at_most=0),
                figure(f"{name}.overconfident", counts["overconfident"], "claims", at_most=0),
                figure(f"{name}.overconfident_stated", counts["stated"], "claims"),
                figure(f"{name}.power", counts["power"], "claims"),
                figure(f"{name}.claims", len(verdicts), "claims"),
                figure(f"{name}.full_wall_s" + (f".jobs{args.jobs}" if args.jobs > 1 else ""),
                       wall, "s", at_most=GOALS[False])])


if __name__ == "__main__":
    main()
