"""``fedbound reproduce``: how long deciding every claim of a paper takes (issue 29, item 5).

    python benchmarks/bench_reproduce.py [--full] [--papers mllsgd,hfl,tdcd,afl] [--jobs N]
                                         [--device cpu]

Runs ``verify.api.reproduce(paper, quick=..., jobs=...)`` for each paper, with one intra-op
thread per process, and records per paper its wall-clock seconds and the seconds its runs
took (the sum over its experiments' runs, each timed where it ran: the work, whatever the
number of jobs); with ``--jobs 1`` (the default: everything in this process) also the
seconds of processor time this process used (on a machine shared with other work the
wall clock measures the load too; the processor time is what the run itself costs), with
the number of claims that agree, contradict, or stay undecided. Goals: ``--quick`` at most
60 s a paper, ``--full`` at most 900 s (15 minutes) a paper, on 2 cores (``--jobs 2``
uses both, as ``fedbound reproduce --jobs 2`` does). The figures of ``--jobs N`` > 1 are
named with ``.jobsN``. Writes the figures to benchmarks/results.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402
from fedbound.verify.api import reproduce  # noqa: E402

PAPERS = ("mllsgd", "hfl", "tdcd", "afl")
#: seconds a paper may take: (quick, full)
GOALS = {True: 60.0, False: 900.0}


def parsed(argv: list[str] | None, description: str, known=PAPERS, *, full: bool = True):
    """The command line of a benchmark that reproduces the papers' claims (``--full`` where
    ``full``, ``--papers``, ``--jobs``, ``--device``): (its arguments, the device, the
    papers), or the usage error (exit 2) naming the bad option."""
    parser = argparse.ArgumentParser(description=description)
    if full:
        parser.add_argument("--full", action="store_true", help="the full runs (default: --quick)")
    parser.add_argument("--papers", default=",".join(known), help="comma-separated paper keys")
    parser.add_argument("--jobs", type=int, default=1, help="processes across a paper's runs")
    add_device_argument(parser)
    args = parser.parse_args(argv)
    device = checked_device(parser, args.device)
    papers = [p.strip() for p in args.papers.split(",") if p.strip()]
    unknown = sorted(set(papers) - set(known))
    if unknown or not papers:
        parser.error(f"--papers {args.papers}: each must be one of {', '.join(known)}")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: must be >= 1")
    return args, device, papers


def main(argv: list[str] | None = None) -> None:
    args, device, papers = parsed(argv, __doc__.splitlines()[0])
    torch.set_num_threads(1)
    quick = not args.full
    mode = "quick" if quick else "full"
    entries = []
    for paper in papers:
        wall, cpu = time.perf_counter(), time.process_time()
        rep = reproduce(paper, quick=quick, device=None if device == "cpu" else device,
                        jobs=args.jobs)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        work = sum(r.seconds for r in rep.runs)
        verdicts = rep.counts()
        print(f"{paper:>7} {mode}, {args.jobs} job(s): {wall:8.1f} s wall, {work:8.1f} s of runs"
              + (f", {cpu:8.1f} s processor" if args.jobs == 1 else "") + ", "
              + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items())))
        name = f"reproduce.{paper}{suffix(device)}.{mode}" + (f".jobs{args.jobs}" if args.jobs > 1 else "")
        entries += [figure(f"{name}.wall_s", wall, "s", at_most=GOALS[quick]),
                    figure(f"{name}.runs_s", work, "s")]
        if args.jobs == 1:
            entries.append(figure(f"{name}.processor_s", cpu, "s", at_most=GOALS[quick]))
        entries += [figure(f"{name}.{v}", verdicts.get(v, 0), "claims")
                    for v in ("agrees", "contradicts", "undecided", "error")]
    record(entries)


if __name__ == "__main__":
    main()
