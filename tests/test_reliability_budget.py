"""Every entry point goes through the budget (issue 31, item 1): each subcommand, given an
oversized value of each knob it has, refuses with exit 2 and one line naming the knob (the
option or the field, as the user wrote it) and the limit that refuses it, before it
allocates: each runs in a forked copy of this process whose address space may grow by at
most 1 GiB (``tests/bounded.py``), so an allocation instead of a refusal fails the test as
an exit 70, and a command that hangs is killed after a generous ceiling.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest
import torch
from bounded import MEMORY, run

from fedbound import bounds
from fedbound.verify import limits, plugins, sweep

torch.set_num_threads(1)
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists() or not hasattr(os, "fork"),
                                reason="forks and reads /proc")

DELAYS = ["--delays", "0.01,0.85,0.001,0.085,4,2,0.4,0.2"]
HFL = ["--alpha", "0.05", "--L", "1", "--G", "10", "--sigma", "10", "--Delta", "10"]
TINY = {"key": "mllsgd.theorem1", "base": {"replicas": 4, "K": 8, "q": 2, "tau": 2},
        "grid": {"tau": [1, 2]}}


@pytest.fixture(scope="module", autouse=True)
def warm():
    """What every copy would otherwise build for itself: the plugins and the theorems of the
    choosers and rates below (sympy), so that a copy costs only its command."""
    plugins.load_plugins()
    for key in ("hfl.theorem2", "tdcd.theorem1", "afl.corollary2", "mllsgd.theorem1"):
        for v in bounds.variants(key):
            bounds.get(key, v)


def files(tmp: Path) -> dict[str, str]:
    """The inputs the cases read: scenarios, sweep specs, a store, a FIFO, big files."""
    out = {}

    def put(name: str, data) -> None:
        (tmp / name).write_text(json.dumps(data))
        out[name] = str(tmp / name)

    put("workers.json", {"workers_per_hub": 10**9})
    put("horizon.json", {"T": 1e300})
    put("rounds.json", {"rounds": 10**15})
    put("afl.json", {"T": 10**15})
    put("grid.json", {**TINY, "grid": {"tau": list(range(1, 1501)), "q": list(range(1, 1501))}})
    put("huge.json", {**TINY, "base": {**TINY["base"], "workers_per_hub": 10**9}})
    put("tiny.json", TINY)
    big = tmp / "big.json"
    with open(big, "w") as f:  # 100 MB, sparse: refused by its size, never read
        f.truncate(100 * 2**20)
    out["big.json"] = str(big)
    (tmp / "stdin.json").write_text(" " * (9 * 2**20) + "{}")
    out["stdin.json"] = str(tmp / "stdin.json")
    os.mkfifo(tmp / "fifo")
    out["fifo"] = str(tmp / "fifo")
    store = sweep.Store(tmp / "s.sqlite")
    sweep.run_sweep(sweep.SweepSpec.from_dict(TINY), store)
    store.close()
    out["store"] = str(tmp / "s.sqlite")
    out["dir"] = str(tmp)
    return out


#: (subcommand and knob, argv, standard input, what the one line must name)
CASES = [
    ("check: a scenario's workers", ["check", "mllsgd.theorem1", "--scenario", "{workers.json}"],
     None, ["workers_per_hub", "--max-memory"]),
    ("check: a scenario's system time", ["check", "hfl.theorem2", "--scenario", "{horizon.json}"],
     None, ["T=1e+300", "--max-"]),
    ("check: a scenario's rounds", ["check", "tdcd.theorem1", "--scenario", "{rounds.json}"],
     None, ["rounds=", "--max-"]),
    ("check: a scenario's rounds (AFL)", ["check", "afl.theorem2", "--scenario", "{afl.json}"],
     None, ["T=", "--max-"]),
    ("check: standard input", ["check", "mllsgd.theorem1", "--scenario", "-"], "{stdin.json}",
     ["standard input", "--max-input"]),
    ("check: standard input from a device", ["check", "mllsgd.theorem1", "--scenario", "-"],
     "/dev/zero", ["standard input", "--max-input"]),
    ("check: a big scenario file", ["check", "mllsgd.theorem1", "--scenario", "{big.json}"], None,
     ["--scenario", "--max-input"]),
    ("check: a device", ["check", "mllsgd.theorem1", "--scenario", "/dev/zero"], None,
     ["--scenario /dev/zero", "character device"]),
    ("check: a FIFO", ["check", "mllsgd.theorem1", "--scenario", "{fifo}"], None,
     ["--scenario", "named pipe"]),
    ("check: a directory", ["check", "mllsgd.theorem1", "--scenario", "{dir}"], None,
     ["--scenario", "directory"]),
    ("check --all: the battery", ["check", "--all", "--battery", str(10**11), "--no-figures",
                                  "--report", "{dir}/report"], None, ["--battery", "--max-scenarios"]),
    ("check --all: the workers", ["check", "--all", "--jobs", str(10**6), "--no-figures",
                                  "--only", "mllsgd.theorem1", "--report", "{dir}/report"], None,
     ["--jobs", "per core"]),
    ("search: the budget", ["search", "mllsgd.theorem1", "--budget", str(10**11)], None,
     ["--budget", "--max-scenarios"]),
    ("search: the workers", ["search", "mllsgd.theorem1", "--jobs", str(10**6)], None,
     ["--jobs", "per core"]),
    ("rate: an integer field", ["rate", "afl.corollary2", "--over", "K", "--exact", "--values",
                                "1e300,1e301,1e302"], None, ["--values[0]", "integer"]),
    ("rate: the points", ["rate", "afl.corollary2", "--over", "K", "--exact", "--values",
                          "100,200,300"], None, ["--values[0]", "--max-memory"]),
    ("choose hfl: the system time", ["choose", "hfl", "--sizes", "15,15", *DELAYS, "--T", "1e300",
                                     *HFL], None, ["--T", "--max-memory"]),
    ("choose hfl: the groups", ["choose", "hfl", "--sizes", "1000000000,1000000000", *DELAYS,
                                "--T", "600", *HFL], None, ["sizes", "--max-memory"]),
    ("choose hfl: the replicas", ["choose", "hfl", "--sizes", "15,15", *DELAYS, "--T", "600", *HFL,
                                  "--replicas", str(10**11)], None, ["--replicas", "--max-memory"]),
    ("choose hfl: the grid", ["choose", "hfl", "--sizes", "15,15", *DELAYS, "--T", "600", *HFL,
                              "--method", "simulate", "--S", ",".join(map(str, range(201))),
                              "--max-scenarios", "100"], None,
     # S = 1 runs S = 0's schedule (every c_i = 1: one local iteration per round): 200 distinct
     ["the grid = 200 runs", "--max-scenarios"]),
    ("choose tdcd: the local steps", ["choose-q-eta", "--Q", str(10**9)], None,
     ["--Q 1000000000", "--max-steps"]),
    ("choose tdcd: the replicas", ["choose", "tdcd", "--replicas", str(10**11)], None,
     ["--replicas", "--max-memory"]),
    *[(f"reproduce {paper}: the limits", ["reproduce", paper, "--quick", "--max-steps", "1"], None,
       [f"reproduce {paper}", "--max-steps"]) for paper in ("afl", "hfl", "mllsgd", "tdcd")],
    ("sweep: the grid", ["sweep", "{grid.json}", "--db", "{dir}/g.sqlite"], None,
     ["grid.tau (1500) x grid.q (1500)", "--max-scenarios"]),
    ("sweep: a scenario", ["sweep", "{huge.json}", "--db", "{dir}/h.sqlite"], None,
     ["workers_per_hub", "--max-memory"]),
    ("sweep: a FIFO", ["sweep", "{fifo}", "--db", "{dir}/f.sqlite"], None, ["sweep spec", "named pipe"]),
    ("sweep: a device", ["sweep", "/dev/zero", "--db", "{dir}/z.sqlite"], None,
     ["sweep spec /dev/zero", "character device"]),
    ("sweep: a big spec", ["sweep", "{big.json}", "--db", "{dir}/b.sqlite"], None,
     ["sweep spec", "--max-input"]),
    ("sweep: the workers", ["sweep", "{tiny.json}", "--db", "{dir}/w.sqlite", "--jobs", str(10**6)],
     None, ["--jobs", "per core"]),
    ("report: the stored results", ["report", "--db", "{store}", "--out", "{dir}/out",
                                    "--max-scenarios", "1"], None, ["--db", "--max-scenarios"]),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    return files(tmp_path_factory.mktemp("inputs"))


def filled(text: str, inputs: dict[str, str]) -> str:
    """``text`` with each ``{name}`` replaced by the path of that input."""
    return re.sub(r"\{([\w.]+)\}", lambda m: inputs[m.group(1)], text)


@pytest.mark.parametrize("argv, stdin, names", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_oversized_knob_is_refused_before_anything_is_allocated(argv, stdin, names, inputs):
    r = run([filled(a, inputs) for a in argv], stdin=None if stdin is None else filled(stdin, inputs))
    assert r.code == 2, (r.code, r.err)
    assert r.out == "" and r.err.startswith("fedbound: error: ") and r.err.count("\n") == 1, r.err
    assert all(name in r.err for name in names), r.err
    assert r.growth < MEMORY, f"{r.growth / 2**20:.0f} MiB"
    assert not Path(inputs["dir"], "report").exists()  # check --all refused before its report
    for db in ("g", "h", "f", "z", "b", "w"):
        assert not Path(inputs["dir"], f"{db}.sqlite").exists()  # a refused sweep creates no store


def test_the_report_case_is_refused_for_its_count_alone(inputs):
    """The store of the report case holds 2 results: 1 is below, 2 is within the limit."""
    with contextlib.closing(sqlite3.connect(inputs["store"])) as conn:
        assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == 2
    store = sweep.Store(inputs["store"], readonly=True)
    try:
        assert store.count() == 2
        with limits.configured(scenarios="2"):
            limits.require_count(store.count(), "the store")
    finally:
        store.close()
