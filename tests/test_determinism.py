"""A seeded result never depends on the machine: the processor's vector kernels and BLAS,
the number of cores and threads, a process pool or the hash seed.

The stored output of notebook 05 once went stale this way: ``search("mllsgd.theorem1",
budget=60, seed=1, objective="tightest")`` followed differences in the last bits of its
scores, which depend on the BLAS kernels, and found K = 768 on one machine and K = 192 on
another (the ratio equal to 1e-6 along a flat direction). Each run below emulates another
machine in a fresh process: OpenBLAS's kernels for another processor
(``OPENBLAS_CORETYPE``), one BLAS thread on one core, another hash seed; and a process pool
in this one.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from conftest import THREAD_CAPS

from fedbound.verify.search import TIE, better, search

SEARCH = dict(key="mllsgd.theorem1", budget=60, seed=1, objective="tightest")
PROBE = f"""
import json, torch
torch.set_num_threads(1)
from fedbound.verify.search import search
r = search(**{SEARCH!r})
print(json.dumps({{"witness": r.witness, "ratio": r.ratio}}))
"""

MACHINES = {
    "another processor's BLAS kernels": {"OPENBLAS_CORETYPE": "Prescott"},
    "one BLAS thread": {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
    "another hash seed": {"PYTHONHASHSEED": "12345"},
}


def _run(env: dict[str, str], one_core: bool = False) -> dict:
    def pin():  # runs in the child before Python starts
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    default = {k: v for k, v in os.environ.items() if k not in THREAD_CAPS}  # conftest's caps
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         env={**default, **env}, timeout=600,
                         preexec_fn=pin if one_core else None)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def reference() -> dict:
    return _run({})


def _same(a: dict, b: dict) -> None:
    assert a["witness"] == b["witness"]
    assert math.isclose(a["ratio"], b["ratio"], rel_tol=1e-12)


@pytest.mark.parametrize("name", MACHINES)
def test_the_search_does_not_depend_on_the_machine(reference, name):
    _same(_run(MACHINES[name]), reference)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no processor affinity here")
def test_the_search_does_not_depend_on_the_cores(reference):
    _same(_run({"OPENBLAS_NUM_THREADS": "1"}, one_core=True), reference)


def test_the_search_does_not_depend_on_a_process_pool(reference):
    from fedbound.verify.pool import executor

    with executor(jobs=2) as pool:  # the pool of ``fedbound search --jobs 2``
        r = search(**SEARCH, executor=pool, width=2)
    _same({"witness": r.witness, "ratio": r.ratio}, reference)


def test_scores_equal_up_to_round_off_are_a_tie():
    assert not better(0.5 * (1 + TIE / 10), 0.5)
    assert better(0.5 * (1 + 10 * TIE), 0.5)
    assert not better(0.5, 0.5 * (1 + 10 * TIE))
    assert better(-0.1, -math.inf) and not better(-math.inf, -math.inf)
    assert better(1e-300, 0.0) and not better(0.0, 0.0)
