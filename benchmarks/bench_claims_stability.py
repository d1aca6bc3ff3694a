"""Do the claims' verdicts depend on the batch, the step or the number of seeds? (issue 29)

    python benchmarks/bench_claims_stability.py [--papers mllsgd,hfl,tdcd,afl] [--full]
                                                [--jobs N] [--device cpu]

For each paper, ``verify.api.reproduce(paper, quick=...)`` runs at the experiments' own
settings and then with one setting moved at a time within a factor of two of the paper's
own: the mini-batch halved and doubled, the step halved and doubled (``batch=``, ``step=``
of ``reproduce``: one value for every experiment of the paper; MLL-SGD's two models have
steps 0.1 and 0.2, so its moves are 0.1 and 0.2, each within a factor of two of both; TDCD's
step is the best of a grid, so it is not moved), and the seeds doubled (twice the most any
of the paper's experiments runs). Same first seed everywhere, so the data splits and the
draws are shared.

A claim **flips** when it agrees under one setting and contradicts under another: that is
a verdict set by a modelling choice, which issue 29 asks to be either gone or said in the
claim's entry (its ``sensitivity``, which must name each kind of setting, "batch", "step"
or "seeds", whose move changed the verdict: otherwise the flip is *unstated*). A claim that
is decided under one setting and undecided under another only changed in power, and is
counted apart. Records per paper the claims that flip, those whose flip is unstated (goal:
none), and the claims that change between decided and undecided, and prints each with its
verdicts per setting (written paper by paper).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_reproduce import parsed  # noqa: E402
from benchmarks.device import suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from fedbound.verify.api import reproduce  # noqa: E402
from fedbound.verify.claims import experiment  # noqa: E402

#: per paper, the settings moved: (label, keyword arguments of reproduce)
MOVES = {
    "mllsgd": [("batch 8", {"batch": 8}), ("batch 32", {"batch": 32}),
               ("step 0.1", {"step": 0.1}), ("step 0.2", {"step": 0.2})],
    "hfl": [("batch 4", {"batch": 4}), ("batch 16", {"batch": 16}),
            ("step 0.1", {"step": 0.1}), ("step 0.4", {"step": 0.4})],
    "tdcd": [("batch 40", {"batch": 40}), ("batch 160", {"batch": 160})],
    "afl": [("batch 8", {"batch": 8}), ("batch 32", {"batch": 32}),
            ("step 0.05", {"step": 0.05}), ("step 0.2", {"step": 0.2})],
}


def most_seeds(rep, quick: bool) -> int:
    """The most seeds any experiment of the reproduction ran with (its own count)."""
    return max(experiment(r.experiment).seeds[0 if quick else 1] for r in rep.runs)


def verdicts(rep) -> dict[str, str]:
    return {r.claim.id: r.verdict for r in rep.results}


def main(argv: list[str] | None = None) -> None:
    args, device, papers = parsed(argv, __doc__.splitlines()[0], known=tuple(MOVES))
    torch.set_num_threads(1)
    quick = not args.full
    common = {"quick": quick, "jobs": args.jobs, "device": None if device == "cpu" else device}
    for paper in papers:
        own = reproduce(paper, **common)
        table = {"own": verdicts(own)}
        sensitivity = {r.claim.id: r.claim.sensitivity for r in own.results}
        for label, kw in MOVES[paper]:
            table[label] = verdicts(reproduce(paper, **common, **kw))
        seeds = 2 * most_seeds(own, quick)
        table[f"seeds {seeds}"] = verdicts(reproduce(paper, **common, seeds=seeds))
        flips, power, unstated = [], [], []
        for claim in table["own"]:
            seen = {t[claim] for t in table.values()}
            if {"agrees", "contradicts"} <= seen:
                flips.append(claim)
                moved = {label.split()[0] for label, t in table.items()
                         if label != "own" and t[claim] != table["own"][claim]}
                if not all(kind in sensitivity[claim] for kind in moved):
                    unstated.append(claim)
            elif len(seen & {"agrees", "contradicts", "undecided"}) > 1:
                power.append(claim)
        for claim in flips + power:
            kind = "UNSTATED FLIP" if claim in unstated else "flip" if claim in flips else "power"
            print(f"{paper} {kind} {claim}: "
                  + ", ".join(f"{label} {t[claim]}" for label, t in table.items()))
        name = f"claims_stability.{paper}{suffix(device)}.{'quick' if quick else 'full'}"
        record([figure(f"{name}.flips", len(flips), "claims"),  # paper by paper
                figure(f"{name}.unstated_flips", len(unstated), "claims", at_most=0),
                figure(f"{name}.power_changes", len(power), "claims"),
                figure(f"{name}.claims", len(table["own"]), "claims"),
                figure(f"{name}.settings", len(table), "settings")])


if __name__ == "__main__":
    main()
