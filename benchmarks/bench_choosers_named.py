"""Evidence for the choosers on named, real problems (issue 38): does the recommended answer
train within 10% of the best configuration of an independent, denser paired reference, and
how long does ``fedbound choose`` take with its defaults?

    python benchmarks/bench_choosers_named.py [--only NAME,...] [--replicas 32] [--skip-recorded]
    python benchmarks/bench_choosers_named.py --summary

Scenarios (``SCENARIOS``): HFL on the digits with logistic regression, the 64-32-10 MLP and
the small CNN, samples spread over 4 + 4 clients by Dirichlet class proportions, at the delays
of Ali & Arafa 2025, Fig. 7a (and 7b, where the global link is slow); MLL-SGD on the digits
with slow workers (the first hub's 4 workers step with probability 0.3, the others 0.9: no
eta satisfies Theorem 1's condition (12), so its certified entries say why and the other
answers run), logistic regression, the MLP and the CNN; TDCD on breast_cancer split by
features (logistic regression at t_comm / t_comp 10 and 100, least squares at 10). Each with
every default (the step, and S, tau or Q, chosen jointly).

For each: ``fedbound choose ... --json --curves`` runs in a subprocess of its own, as a user
runs it: its wall-clock seconds (goal: logistic and TDCD 10 s, MLP 20 s, CNN 60 s, on 2 idle
cores), CPU seconds and peak memory (goal below 1 GB) are its own, the machine's 1-minute
load is recorded beside them (the goals hold on an idle machine: rerun there). Then the same
chooser, built in this process from the same options (``verify.cli.choose.built``), runs the
reference (``benchmarks/regret.py``): every knob's grid, the midpoints, two factors of 2 past
each end of the range the chooser searched (steps beyond every theorem's range), every
answer's and the recommended settings, on ``--replicas`` common seeds; each answer's paired
regret against the reference's best with its 95% interval. Recorded in
benchmarks/results.json as ``choosers.named.NAME.*``: the recommended answer within 10%
(regret <= 10%, or not distinguishable from 10% at 95%) and on no unflagged edge, each
answer's regret, the seconds and memory; ``--summary`` records the rates (goal: within 10% in
at least 90% of the scenarios, no unflagged edge). ``--device cuda``: the choosers' simulations
on a GPU (figures named ``choosers.named.cuda.*``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from benchmarks.device import add_device_argument, checked_device, suffix  # noqa: E402
from benchmarks.regret import evaluate, figures, stored, summary, table  # noqa: E402
from benchmarks.results import RESULTS, record  # noqa: E402

FIG7A = "0.01,0.85,0.001,0.085,4,2,0.4,0.2"
FIG7B = "0.01,0.85,0.001,0.085,4,22,0.4,0.2"
SLOW = ",".join(["0.3"] * 4 + ["0.9"] * 12)
#: name: (chooser, its options, wall-clock goal in seconds, reference replicas, midpoints)
SCENARIOS = {
    "hfl_digits_logistic_fig7a": ("hfl", ["--sizes", "4,4", "--delays", FIG7A, "--T", "500", "--data",
                                          "digits", "--model", "logistic", "--split", "dirichlet:0.3"],
                                  10, 16, True),
    "hfl_digits_logistic_fig7b": ("hfl", ["--sizes", "4,4", "--delays", FIG7B, "--T", "1000", "--data",
                                          "digits", "--model", "logistic", "--split", "dirichlet:0.1"],
                                  10, 16, True),
    "hfl_digits_mlp_fig7a": ("hfl", ["--sizes", "4,4", "--delays", FIG7A, "--T", "500", "--data",
                                     "digits", "--model", "mlp", "--split", "dirichlet:0.3"], 20, 8, False),
    "hfl_digits_mlp_fig7b": ("hfl", ["--sizes", "4,4", "--delays", FIG7B, "--T", "1000", "--data",
                                     "digits", "--model", "mlp", "--split", "dirichlet:0.1"], 20, 8, False),
    "hfl_digits_cnn_fig7a": ("hfl", ["--sizes", "4,4", "--delays", FIG7A, "--T", "250", "--data",
                                     "digits", "--model", "cnn", "--split", "dirichlet:0.3"], 60, 4, False),
    "mllsgd_digits_logistic_slow": ("mllsgd", ["--hubs", "4", "--workers-per-hub", "4", "--graph",
                                               "complete", "--p", SLOW, "--data", "digits", "--model",
                                               "logistic", "--split", "dirichlet:0.3"], 10, 16, True),
    "mllsgd_digits_mlp_slow": ("mllsgd", ["--hubs", "4", "--workers-per-hub", "4", "--graph", "path",
                                          "--p", SLOW, "--data", "digits", "--model", "mlp", "--split",
                                          "dirichlet:0.3"], 20, 8, False),
    "mllsgd_digits_cnn_slow": ("mllsgd", ["--hubs", "4", "--workers-per-hub", "4", "--graph", "complete",
                                          "--p", SLOW, "--K", "128", "--data", "digits", "--model", "cnn",
                                          "--split", "dirichlet:0.3"], 60, 4, False),
    "tdcd_breast_cancer_logistic_ratio10": ("tdcd", ["--data", "breast_cancer", "--t-comm", "10",
                                                     "--t-comp", "1"], 10, 16, True),
    "tdcd_breast_cancer_logistic_ratio100": ("tdcd", ["--data", "breast_cancer", "--t-comm", "100",
                                                      "--t-comp", "1"], 10, 16, True),
    "tdcd_breast_cancer_squared_ratio10": ("tdcd", ["--data", "breast_cancer", "--loss", "squared",
                                                    "--t-comm", "10", "--t-comp", "1"], 10, 16, True),
}
PREFIX = "choosers.named"


def run_cli_measured(command: str, options: list[str]) -> tuple[dict, float, float, float]:
    """``fedbound choose COMMAND OPTIONS --json --curves`` in a subprocess: its report, wall
    seconds, CPU seconds and peak resident memory in MB (its own, from ``os.wait4``)."""
    argv = [sys.executable, "-m", "fedbound", "choose", command, *options, "--json", "--curves"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parents[1])
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"choose {command} {' '.join(options)} exited {proc.returncode}")
    return json.loads(out), seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def chooser(command: str, options: list[str]):
    """The chooser the command line builds (the same as the subprocess's, bit for bit)."""
    from fedbound.verify.api import choosers
    from fedbound.verify.cli.choose import built, chooser_parser

    cls = choosers()[command]
    return built(cls, chooser_parser(cls, command).parse_args(options))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--replicas", type=int, help="replicas of the reference (default: the scenario's)")
    ap.add_argument("--summary", action="store_true", help="the rates of the recorded scenarios only")
    ap.add_argument("--skip-recorded", action="store_true",
                    help="skip the scenarios benchmarks/results.json already holds")
    add_device_argument(ap)
    args = ap.parse_args(argv)
    checked_device(ap, args.device)
    prefix = PREFIX + suffix(args.device)
    if args.summary:
        results = stored(prefix)
        held = {e["name"]: e["value"] for e in json.loads(RESULTS.read_text())}
        for r in results:
            r["unflagged_edge"] = bool(held.get(f"{prefix}.{r['name']}.unflagged_edge", 0))
        print(f"{len(results)} scenarios recorded")
        record(summary(prefix, results))
        return
    torch.set_num_threads(1)
    names = args.only.split(",") if args.only else list(SCENARIOS)
    if args.skip_recorded:
        held = {e["name"] for e in json.loads(RESULTS.read_text())}
        names = [n for n in names if f"{prefix}.{n}.seconds" not in held]
    results = []
    for name in names:
        command, options, goal, replicas, midpoints = SCENARIOS[name]
        options = [*options, "--device", args.device]
        load = os.getloadavg()[0]
        report, seconds, cpu, rss = run_cli_measured(command, options)
        t0 = time.perf_counter()
        result = evaluate(chooser(command, options), name, args.replicas or replicas, report,
                          midpoints=midpoints)
        result.update(seconds=seconds, cpu=cpu, rss_mb=rss, load=load)
        results.append(result)
        record(figures(f"{prefix}.{name}", result, seconds_goal=goal))  # at once: a cut run keeps it
        print(table([result]).split("\n", 2)[2], f"  (choose: {seconds:.1f} s wall, {cpu:.1f} s CPU, "
              f"{rss:.0f} MB, load {load:.1f}; reference {time.perf_counter() - t0:.0f} s over "
              f"{result['configurations']} configurations, best {result['best']})", flush=True)
    print(table(results))


if __name__ == "__main__":
    main()
