"""Evidence for the choosers on named, real problems (issue 38): does the recommended answer
train within 10% of the best configuration of an independent, denser paired reference, and
how long does ``fedbound choose`` take with its defaults?

    python benchmarks/bench_choosers_named.py [--only NAME,...] [--replicas 32] [--skip-recorded]
    python benchmarks/bench_choosers_named.py --summary
    python benchmarks/bench_choosers_named.py --calibration
    python benchmarks/bench_choosers_named.py --time-only [--only NAME,...]

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
cores), CPU seconds and peak memory (goal below 1 GB; its own high-water mark, read from
``/proc``) are its own, the machine's 1-minute
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
on a GPU (figures named ``choosers.named.cuda.*``). ``--calibration``: the calibrated model's
fast estimate against the slow reference it replaced (:func:`calibration`). ``--time-only``:
the chooser's run only, no reference: re-records each scenario's ``seconds``, ``cpu_seconds``,
``peak_memory`` and ``load`` (the regrets recorded before stay), to re-time on an idle machine,
and ``recommended.same_settings``: whether the recommended settings are still those the
recorded regret was measured at (``recommended.setting.KNOB``, recorded by a full run; goal 1).
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
from benchmarks.regret import (  # noqa: E402
    evaluate,
    figures,
    same_settings,
    stored,
    summary,
    table,
    timing_figures,
)
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
    seconds, CPU seconds (from ``os.wait4``) and peak resident memory in MB (:func:`_peak`)."""
    import threading

    argv = [sys.executable, "-m", "fedbound", "choose", command, *options, "--json", "--curves"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).resolve().parents[1])
    peak = [0.0]
    watcher = threading.Thread(target=_peak, args=(proc, argv, peak), daemon=True)
    watcher.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - t0
    watcher.join()
    if proc.returncode:
        raise RuntimeError(f"choose {command} {' '.join(options)} exited {proc.returncode}")
    return json.loads(out), seconds, usage.ru_utime + usage.ru_stime, peak[0]


def _peak(proc, argv: list[str], peak: list[float]) -> None:
    """The child's own peak resident memory in MB, into ``peak[0]``: its ``VmHWM`` read every
    20 ms once it runs ``argv`` (the high-water mark of its own address space, reset at exec).
    Not ``ru_maxrss``: Linux counts in it the memory of the process that forked the child
    before its exec, here this benchmark's, gigabytes after a reference search."""
    status, cmdline = Path(f"/proc/{proc.pid}/status"), Path(f"/proc/{proc.pid}/cmdline")
    want = "\0".join(argv).encode()
    while proc.returncode is None:
        try:
            if cmdline.read_bytes().rstrip(b"\0") == want:
                for line in status.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            pass
        if not _alive(proc.pid):
            return
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for ``os.wait4`` does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def chooser(command: str, options: list[str]):
    """The chooser the command line builds (the same as the subprocess's, bit for bit)."""
    from fedbound.verify.api import choosers
    from fedbound.verify.cli.choose import built, chooser_parser

    cls = choosers()[command]
    return built(cls, chooser_parser(cls, command).parse_args(options))


#: the calibrated model's fast estimate against the slow reference: the HFL chooser of these
#: scenarios (its problem, x^1, groups), the model estimated both ways
CALIBRATION = ("hfl_digits_logistic_fig7a", "hfl_digits_mlp_fig7a")


def calibration(name: str) -> list[dict]:
    """The fast local quadratic model (``sim.estimate.quadratic_model``'s default) against the
    slow reference (``fast=False``) on the chooser of scenario ``name``: each one's seconds
    (wall and this process's CPU: the machine may be shared), and the fast one's error, the
    median and largest relative difference of the calibrated prediction over its grid, and
    the slow model's regret of the fast model's pick (goal: under a second, regret <= 1%)."""
    import numpy as np

    from benchmarks.results import figure
    from fedbound.sim.estimate import quadratic_model

    command, options, *_ = SCENARIOS[name]
    made = chooser(command, options)
    made.curvature()  # both models start from the chooser's curvature at x^1
    out, props = [], {}
    for fast in (True, False):
        t0, c0 = time.perf_counter(), time.process_time()
        made._model = quadratic_model(made.problem, made.x1, torch.Generator().manual_seed(made.seed),
                                      sizes=made.sizes, fast=fast, subsample=made.subsample,
                                      curvature=made.curvature())
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        props[fast] = made.calibrated()
        tag = "fast" if fast else "slow"
        out += [figure(f"{PREFIX}.calibration.{name}.{tag}_seconds", wall, "s",
                       **({"at_most": 1} if fast else {})),
                figure(f"{PREFIX}.calibration.{name}.{tag}_cpu_seconds", cpu, "s")]
    key = ("S", "alpha")
    slow = {tuple(round(r[k], 12) for k in key): r["predicted"] for r in props[False].curve}
    fast = {tuple(round(r[k], 12) for k in key): r["predicted"] for r in props[True].curve}
    both = [k for k in slow if k in fast and np.isfinite(slow[k]) and np.isfinite(fast[k])]
    rel = np.array([abs(fast[k] - slow[k]) / abs(slow[k]) for k in both])
    pick = tuple(round(props[True].settings[k], 12) for k in key)
    regret = (slow[pick] - props[False].predicted) / abs(props[False].predicted) if pick in slow else np.inf
    out += [figure(f"{PREFIX}.calibration.{name}.median_relative_error", float(np.median(rel)), "ratio"),
            figure(f"{PREFIX}.calibration.{name}.largest_relative_error", float(rel.max()), "ratio"),
            figure(f"{PREFIX}.calibration.{name}.slow_regret_of_fast_pick", float(regret), "x best - 1",
                   at_most=0.01)]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated scenario names")
    ap.add_argument("--replicas", type=int, help="replicas of the reference (default: the scenario's)")
    ap.add_argument("--summary", action="store_true", help="the rates of the recorded scenarios only")
    ap.add_argument("--calibration", action="store_true",
                    help="the fast calibrated model against the slow one only (CALIBRATION)")
    ap.add_argument("--time-only", action="store_true",
                    help="time the chooser runs only (no reference): seconds, CPU, memory, load")
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
    if args.calibration:
        for name in CALIBRATION:
            record(calibration(name))
        return
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
        if args.time_only:
            record([*timing_figures(f"{prefix}.{name}", seconds, cpu, rss, load, goal),
                    *same_settings(f"{prefix}.{name}", report["recommended"]["settings"])])
            continue
        t0 = time.perf_counter()
        result = evaluate(chooser(command, options), name, args.replicas or replicas, report,
                          midpoints=midpoints)
        result.update(seconds=seconds, cpu=cpu, rss_mb=rss, load=load)
        results.append(result)
        record(figures(f"{prefix}.{name}", result, seconds_goal=goal))  # at once: a cut run keeps it
        print(table([result]).split("\n", 2)[2], f"  (choose: {seconds:.1f} s wall, {cpu:.1f} s CPU, "
              f"{rss:.0f} MB, load {load:.1f}; reference {time.perf_counter() - t0:.0f} s over "
              f"{result['configurations']} configurations, best {result['best']})", flush=True)
    if results:
        print(table(results))


if __name__ == "__main__":
    main()
