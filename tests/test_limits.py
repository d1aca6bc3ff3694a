"""Resource limits (verify.limits): footprints estimated from a scenario's sizes, refusals
before anything is allocated, and estimates held to the measured peak memory."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from bounded import run

from fedbound.verify import limits
from fedbound.verify.adapter import adapter_for, adapter_keys
from fedbound.verify.cli import main
from fedbound.verify.limits import Footprint, ResourceError
from fedbound.verify.sweep import SweepSpec

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text, expected", [
    ("8G", 8 * 2**30), ("8GB", 8 * 2**30), ("8GiB", 8 * 2**30), ("512m", 512 * 2**20),
    ("1.5T", int(1.5 * 2**40)), ("1000", 1000), ("2k", 2048), ("1e9", 10**9),
])
def test_sizes_parse_in_binary_units(text, expected):
    assert limits.parse_size(text, "--max-memory") == expected


@pytest.mark.parametrize("text", ["", "abc", "-1G", "0", "8X", "nan", "inf", "1e400"])
def test_bad_sizes_name_the_option(text):
    with pytest.raises(ValueError, match="--max-memory="):
        limits.parse_size(text, "--max-memory")


@pytest.mark.parametrize("text", ["0", "-3", "1.5", "x", "1e400"])
def test_bad_counts_name_the_option(text):
    with pytest.raises(ValueError, match="--max-scenarios="):
        limits.parse_count(text, "--max-scenarios")


def test_configured_sets_and_restores_the_environment(monkeypatch):
    monkeypatch.delenv(limits.ENV["memory"], raising=False)
    monkeypatch.setenv(limits.ENV["steps"], "1e9")
    with limits.configured(memory="1G", scenarios="5"):
        assert limits.memory_limit()[0] == 2**30
        assert limits.scenarios_limit()[0] == 5
        assert limits.steps_limit()[0] == 10**9
    assert limits.ENV["memory"] not in os.environ and limits.ENV["scenarios"] not in os.environ
    assert os.environ[limits.ENV["steps"]] == "1e9"


def test_the_default_memory_limit_is_half_the_machines_memory(monkeypatch):
    monkeypatch.delenv(limits.ENV["memory"], raising=False)
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")  # not /proc/meminfo
    limit, source = limits.memory_limit()
    assert limit == limits.MEMORY_FRACTION * limits.physical_memory() <= 0.5 * total
    assert f"50% of the {limits.size_text(limits.physical_memory())} of memory" in source


def test_the_default_memory_limit_does_not_move_with_what_else_runs(monkeypatch):
    """The limit is a setting of the machine, not of its load: the same before and after
    this process takes 256 MiB (the memory available then drops by as much)."""
    import numpy as np

    monkeypatch.delenv(limits.ENV["memory"], raising=False)
    before = limits.memory_limit()
    taken = np.ones(2**25)  # 256 MiB, every page written
    assert limits.memory_limit() == before and taken.sum() == 2**25


@pytest.mark.parametrize("meminfo, cgroups, expected", [
    ("MemTotal:  8388608 kB\nMemAvailable: 1024 kB\n", [None, None], 8 * 2**30),
    ("MemTotal:  8388608 kB\n", ["max", None], 8 * 2**30),
    ("MemTotal:  8388608 kB\n", [str(2 * 2**30), None], 2 * 2**30),
    ("MemTotal:  8388608 kB\n", [None, "9223372036854771712"], 8 * 2**30),
    ("MemTotal:  8388608 kB\n", [None, str(3 * 2**30) + "\n"], 3 * 2**30),
    ("MemTotal:  8388608 kB\n", ["garbage", ""], 8 * 2**30),
], ids=["total", "cgroup2-max", "cgroup2-limit", "cgroup1-none", "cgroup1-limit", "unreadable"])
def test_the_machines_memory_is_its_total_or_its_containers_limit(meminfo, cgroups, expected,
                                                                  tmp_path, monkeypatch):
    monkeypatch.delenv(limits.ENV["memory"], raising=False)
    (tmp_path / "meminfo").write_text(meminfo)
    paths = []
    for i, text in enumerate(cgroups):
        paths.append(str(tmp_path / f"cgroup{i}"))
        if text is not None:
            (tmp_path / f"cgroup{i}").write_text(text)
    monkeypatch.setattr(limits, "MEMINFO", str(tmp_path / "meminfo"))
    monkeypatch.setattr(limits, "CGROUP_LIMITS", tuple(paths))
    assert limits.physical_memory() == expected
    assert limits.memory_limit()[0] == expected / 2


def test_a_footprint_sums_its_terms_and_names_the_largest():
    fp = Footprint.of({"a x b": 10, "huge c": 1000, "d": 1}, {"k x n": 5e9, "setup": 1})
    assert (fp.bytes, fp.steps, fp.what, fp.work) == (1011, 5e9 + 1, "huge c", "k x n")
    inf = Footprint.of({"x": 10**400, "y": 1}, {"z": float("nan")})
    assert inf.bytes == math.inf and inf.steps == math.inf and inf.what == "x"


def test_require_refuses_above_either_limit_and_accepts_no_estimate():
    limits.require("k", None)
    with limits.configured(memory="1M", steps="1000"):
        limits.require("k", Footprint(2**20, 1000, "small"))
        with pytest.raises(ResourceError, match=r"k: .*1 MiB of memory \(mem\).*1 MiB"):
            limits.require("k", Footprint(2**20 + 1, 1, "mem"))
        with pytest.raises(ResourceError, match=r"1001 operations \(loops\).*limit of 1000"):
            limits.require("k", Footprint(1, 1001, "mem", "loops"))


def test_every_builtin_adapter_estimates_its_default_scenario_within_the_defaults():
    for key in adapter_keys():
        ad = adapter_for(key)
        for exact in (False, True):
            fp = ad.footprint(ad.default_scenario(), exact=exact)
            assert isinstance(fp, Footprint) and 0 < fp.bytes < 2**30 and 0 < fp.steps < 1e11, key
            limits.require(key, fp)


# a field made huge -> the word the refusal must contain (the field, named in the estimate)
HUGE = [
    ("mllsgd.theorem1", {"workers_per_hub": 10**9}, "workers_per_hub=1e+09"),
    ("mllsgd.theorem1", {"hubs": 10**6}, "hubs=1e+06"),
    ("mllsgd.theorem1", {"replicas": 10**12}, "replicas=1e+12"),
    ("mllsgd.theorem1", {"K": 2 * 10**12, "q": 1, "tau": 1}, "K=2e+12"),
    ("mllsgd.theorem1", {"problem": {"kind": "quadratic", "dim": 10**9}}, "dim=1e+09"),
    ("hfl.theorem2", {"sizes": [10**9, 2]}, "clients=1e+09"),
    ("hfl.theorem2", {"T": 1e308}, "T=1e+308"),
    ("hfl.theorem2", {"S": 1e308}, "S=1e+308"),
    ("hfl.theorem2", {"replicas": 10**12, "mode": "expected"}, "replicas=1e+12"),
    ("tdcd.theorem1", {"rounds": 10**15}, "rounds=1e+15"),
    ("tdcd.theorem1", {"n": 10**12, "batch": 6}, "n=1e+12"),
    ("tdcd.theorem1", {"blocks": [10**9, 3]}, "features=1e+09 (sum of blocks)"),
    ("afl.theorem2", {"M": 10**9}, "M=1e+09"),
    ("afl.theorem2", {"T": 10**12}, "T=1e+12"),
    ("afl.theorem2", {"K": 10**9}, "K=1e+09"),
]


@pytest.mark.parametrize("key, change, named", HUGE, ids=[f"{k}-{next(iter(c))}" for k, c, _ in HUGE])
def test_huge_scenarios_are_refused_before_allocating_naming_the_field(key, change, named, tmp_path):
    """In a copy of this process whose address space may grow by 1 GiB (tests/bounded.py):
    an allocation instead of the refusal would be an exit 70 there."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps(change))
    r = run(["check", key, "--scenario", str(path), "--json"])
    assert r.code == 2 and r.out == "" and r.err.count("\n") == 1, r.err
    assert named in r.err and ("memory" in r.err or "operations" in r.err), r.err


def test_validating_a_billion_workers_allocates_nothing():
    ad = adapter_for("mllsgd.theorem1")
    ad.load({"p": 0.9})  # the modules validation imports on first use (10 MiB), whatever ran before
    tracemalloc.start()
    s = ad.load({"workers_per_hub": 10**9, "p": 0.9})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20, f"validation allocated {peak} bytes"
    with pytest.raises(ResourceError, match="workers_per_hub"):
        ad.check(s)


def test_the_memory_option_raises_and_lowers_the_limit(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"replicas": 2, "K": 8}))
    assert main(["check", "mllsgd.theorem1", "--scenario", str(path), "--max-memory", "1K"]) == 2
    assert "above the limit of 1 KiB (--max-memory" in capsys.readouterr().err
    assert main(["--max-memory", "1G", "check", "mllsgd.theorem1", "--scenario", str(path),
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "holds"
    assert limits.ENV["memory"] not in os.environ  # the option does not outlive the command


def test_a_sweep_is_counted_before_anything_is_drawn():
    spec = {"key": "mllsgd.theorem1", "grid": {"tau": [1, 2, 4]},
            "random": {"n": 10**9, "seed": 0, "fields": {"problem.sigma": {"low": 0, "high": 1}}}}
    tracemalloc.start()
    with pytest.raises(ResourceError, match=r"grid.tau \(3\) x random.n \(1000000000\) = 3e\+09"):
        SweepSpec.from_dict(spec)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2**20, f"counting allocated {peak} bytes"  # nothing drawn
    with limits.configured(scenarios="2"), pytest.raises(ResourceError, match="limit of 2"):
        SweepSpec.from_dict({**spec, "random": None})


def test_a_sweep_point_above_the_memory_limit_refuses_the_spec():
    spec = SweepSpec.from_dict({"key": "mllsgd.theorem1", "grid": {"replicas": [2, 10**12]}})
    with pytest.raises(ResourceError, match="sweep point 1: .*replicas=1e\\+12"):
        spec.entries()


def test_a_search_budget_is_bounded(capsys):
    assert main(["search", "mllsgd.theorem1", "--budget", str(10**9)]) == 2
    assert "search --budget 1000000000 = 1e+09 scenarios, above the limit" in capsys.readouterr().err


# ---------------------------------------------------------------------- honesty of the estimates

#: one scenario per paper large enough (about 100 MB) for its peak memory to stand out
MEASURED = [
    ("mllsgd.theorem1", {"replicas": 100, "hubs": 4, "workers_per_hub": 50, "K": 2, "q": 1,
                         "tau": 2, "problem": {"kind": "quadratic", "dim": 100}}, False),
    ("hfl.theorem2", {"replicas": 200, "sizes": [100, 100], "T": 30,
                      "problem": {"kind": "logistic", "dim": 50, "n": 400}}, False),
    ("tdcd.theorem1", {"replicas": 64, "n": 2000, "clients": [5, 7], "batch": 35,
                       "blocks": [2, 2], "rounds": 3}, False),
    ("afl.theorem2", {"replicas": 32, "T": 20, "M": 5000, "m": 10}, False),
]

PEAK = textwrap.dedent("""
    import json, sys
    from fedbound.verify.adapter import adapter_for

    def status(name):
        for line in open("/proc/self/status"):
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024

    out = []
    for key, scenario, exact in json.loads(sys.argv[1]):
        ad = adapter_for(key)
        warm = {**ad.default_scenario().to_dict(), "replicas": 2}
        ad.check(warm, exact=exact)  # imports and caches first
        open("/proc/self/clear_refs", "w").write("5")  # reset the peak to the current RSS
        base = status("VmRSS")
        s = ad.load(scenario)
        ad.check(s, exact=exact)
        out.append([ad.footprint(s, exact=exact).bytes, status("VmHWM") - base])
    print(json.dumps(out))
""")


def _can_reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _can_reset_peak(), reason="needs Linux's /proc/self/clear_refs")
def test_estimates_are_within_a_small_factor_of_the_measured_peak_memory():
    """In a separate process, the peak resident memory is reset before each check: the
    estimate must be within a factor 2.5 of the increase of the peak."""
    # glibc returns every freed large block to the system at once (no retained heap that
    # would hide a later scenario's allocations from the peak)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": "65536",
           "MALLOC_TRIM_THRESHOLD_": "0"}
    r = subprocess.run([sys.executable, "-c", PEAK, json.dumps(MEASURED)], capture_output=True,
                       text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    for (key, _, _), (estimate, measured) in zip(MEASURED, json.loads(r.stdout), strict=True):
        assert measured > 30 * 2**20, f"{key}: too small a scenario to measure ({measured} B)"
        assert 1 / 2.5 <= estimate / measured <= 2.5, \
            f"{key}: estimate {estimate:.3g} B, measured {measured:.3g} B"


# ---------------------------------------------------------------------- search memory

def test_a_search_under_a_small_memory_limit_skips_what_exceeds_it(monkeypatch, capsys):
    """``fedbound search --max-memory 128K``: the candidates above the limit are refused
    before the simulator runs (never measured) and skipped, and the search spends its
    budget on the others (it used to end at the first one refused)."""
    limit = 128 * 2**10
    ad = adapter_for("mllsgd.theorem1")
    asked, measured = [], []
    require, measure = limits.require, ad._measure

    def spy_require(key, fp):
        asked.append(fp.bytes)
        return require(key, fp)

    def spy_measure(scenario, params, exact):
        measured.append(ad.footprint(scenario, exact=exact).bytes)
        return measure(scenario, params, exact)

    monkeypatch.setattr(limits, "require", spy_require)
    monkeypatch.setattr(ad, "_measure", spy_measure)
    assert main(["search", "mllsgd.theorem1", "--budget", "20", "--jobs", "1",
                 "--max-memory", "128K", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tried"] == 20
    assert len(measured) >= 20 and max(measured) <= limit
    assert sum(b > limit for b in asked) >= 5, sorted(asked)  # a real share was refused


def test_a_search_refuses_when_no_draw_fits_the_limit(capsys):
    assert main(["search", "mllsgd.theorem1", "--budget", "5", "--jobs", "1",
                 "--max-memory", "4K"]) == 2
    assert "above the limit of 4 KiB (--max-memory" in one_line(capsys.readouterr().err)


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


SEARCH_PEAK = textwrap.dedent("""
    import json, sys
    from fedbound.verify import limits
    from fedbound.verify.adapter import adapter_for
    from fedbound.verify.search import search

    def status(name):
        for line in open("/proc/self/status"):
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024

    key, budget, memory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ad = adapter_for(key)
    estimates, measure = [], ad._measure

    def spy(scenario, params, exact):
        estimates.append(ad.footprint(scenario, exact=exact).bytes)
        return measure(scenario, params, exact)

    ad._measure = spy
    search(key, budget=40, seed=1)  # imports, compiles and caches first
    open("/proc/self/clear_refs", "w").write("5")  # reset the peak to the current RSS
    base = status("VmRSS")
    estimates.clear()
    with limits.configured(memory=memory):
        tried = search(key, budget=budget, seed=0).tried
    print(json.dumps([tried, max(estimates), status("VmHWM") - base]))
""")


@pytest.mark.skipif(not _can_reset_peak(), reason="needs Linux's /proc/self/clear_refs")
def test_the_peak_memory_of_a_search_stays_within_its_estimates():
    """A search of 100 checks under a 1 MiB limit, in a separate process after a first
    search has filled the caches: its peak resident memory grows by at most 2.5 times the
    largest estimate of a scenario it checked, plus 16 MiB of Python objects. (A search once
    grew to 24 GB in 100 minutes; here a leak of 200 KiB per check would fail.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": "65536",
           "MALLOC_TRIM_THRESHOLD_": "0"}
    r = subprocess.run([sys.executable, "-c", SEARCH_PEAK, "mllsgd.theorem1", "100", "1M"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    tried, largest, grown = json.loads(r.stdout)
    assert tried == 100 and 0 < largest <= 2**20
    assert grown <= 2.5 * largest + 16 * 2**20, f"peak grew by {grown / 2**20:.1f} MiB"
