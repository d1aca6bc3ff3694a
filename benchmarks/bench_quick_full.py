"""Does ``--quick`` give a verdict that the full run does not overturn? (issue 29, item 5;
issue 37, items 2 and 4)

    python benchmarks/bench_quick_full.py [--papers mllsgd,hfl,tdcd,afl] [--jobs N]
                                          [--device cpu]

For each paper, ``verify.api.reproduce(paper)`` runs quick and then full from the same
seed, and each claim's verdict under every reading of an ambiguous step (the primary one
and the others: HFL's upload, TDCD's mini-batch) is compared. Both runs have the paper's
structure (workers, hubs, groups, clients, silos); quick shortens horizons and seeds only.
Issue 29 asks that ``--quick`` give a verdict "undecided rather than wrong": a (claim,
reading) is

- **wrong** when quick decided it one way and the full run another: agrees, contradicts,
  negligible (inside the margin) and fixed-by-setting are four decisions (goal: none);
- **overconfident** when quick decided it and the full run left it undecided: the quick
  verdict rests on a setting of the short run (a horizon, a few seeds) that the full run
  does not confirm. Counted only where the claim's ``sensitivity`` does not say so (it
  names "quick"; goal: none);
- **power** when quick left it undecided and the full run decided it: the full run's
  more seeds and iterations, which is what a full run is for (no goal).

Records per paper those three counts, the (claim, reading) pairs compared, the claims, and
the full run's wall-clock seconds (what the paper's structure needs), and prints each
verdict that moved with both verdicts.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_reproduce import parsed  # noqa: E402
from benchmarks.device import suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from fedbound.verify.api import reproduce  # noqa: E402

#: the verdicts that decide a claim, one way or another
DECIDED = ("agrees", "contradicts", "negligible", "fixed-by-setting")


def kind(quick: str, full: str, sensitivity: str) -> str | None:
    """How a verdict moved from the quick to the full run: "wrong", "overconfident",
    "stated" (overconfident, said in the claim's sensitivity), "power", or None (the same
    verdict, or a run that ended in an error)."""
    if quick == full or "error" in (quick, full):
        return None
    if quick in DECIDED:
        if full in DECIDED:
            return "wrong"
        return "stated" if "quick" in sensitivity else "overconfident"
    return "power" if full in DECIDED else None


def verdicts(rep) -> dict[tuple[str, str | None], tuple[str, str]]:
    """{(claim, reading): (verdict, the claim's sensitivity)} of a reproduction: every
    reading's decision (a claim that ended in an error: one "error" entry)."""
    out = {}
    for r in rep.results:
        for d in r.decisions or ():
            out[(r.claim.id, d.reading)] = (d.verdict, r.claim.sensitivity)
        if not r.decisions:
            out[(r.claim.id, r.claim.primary)] = ("error", r.claim.sensitivity)
    return out


def main(argv: list[str] | None = None) -> None:
    args, device, papers = parsed(argv, __doc__.splitlines()[0], full=False)
    torch.set_num_threads(1)
    common = {"jobs": args.jobs, "device": None if device == "cpu" else device, "seed": 0}
    for paper in papers:
        quick = verdicts(reproduce(paper, quick=True, **common))
        wall = time.perf_counter()
        full_rep = reproduce(paper, quick=False, **common)
        wall = time.perf_counter() - wall
        full = verdicts(full_rep)
        counts = dict.fromkeys(("wrong", "overconfident", "stated", "power"), 0)
        for key in sorted(quick.keys() | full.keys(), key=str):
            (q, sensitivity), (f, _) = quick.get(key, ("error", "")), full.get(key, ("error", ""))
            moved = kind(q, f, sensitivity)
            claim, reading = key
            where = f"{claim}" + (f" ({reading})" if reading else "")
            if moved:
                counts[moved] += 1
                print(f"{paper} {moved}: {where}: quick {q}, full {f}")
            elif "error" in (q, f):
                print(f"{paper} error: {where}: quick {q}, full {f}")
        print(f"{paper}: full run {wall:.1f} s wall with {args.jobs} job(s); "
              f"{len(full_rep.results)} claims, {len(full)} (claim, reading) pairs")
        name = f"reproduce.{paper}{suffix(device)}.quick_vs_full"
        record([figure(f"{name}.wrong", counts["wrong"], "verdicts", at_most=0),
                figure(f"{name}.overconfident", counts["overconfident"], "verdicts", at_most=0),
                figure(f"{name}.overconfident_stated", counts["stated"], "verdicts"),
                figure(f"{name}.power", counts["power"], "verdicts"),
                figure(f"{name}.claims", len(full_rep.results), "claims"),
                figure(f"{name}.verdicts", len(full), "verdicts"),
                figure(f"{name}.full_wall_s" + (f".jobs{args.jobs}" if args.jobs > 1 else ""),
                       wall, "s")])


if __name__ == "__main__":
    main()
