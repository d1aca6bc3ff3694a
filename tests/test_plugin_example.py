"""The example plugin (``examples/plugin``, package ``fedbound_sgd``, result ``sgd.nonconvex``).

Through the real ``fedbound`` console script in subprocesses: every command with the plugin
loaded by ``FEDBOUND_PLUGINS`` or ``--plugin``; the entry point of the installed package; a
broken plugin; a user's test file under plain pytest; the plugin's chooser and reproduced
claim (``tests/test_docs.py`` runs the code blocks of ``docs/extending.md``). The
subprocesses start together (``runs``) so that their start-up overlaps. In this process:
the exact mode against an independent closed form, the two tight corners of the bound, and
the contract checks.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.verify.api import unregister_adapter

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "plugin"
FEDBOUND = Path(sys.executable).with_name("fedbound")
KEY = "sgd.nonconvex"
WITNESS = PLUGIN / "fedbound_sgd" / "witnesses" / f"{KEY}.printed.json"
TIMEOUT = 300

#: a plugin module (written to a temp dir) registering the planted constant as "unverified":
#: a violation of it is new, so `fedbound search` must exit 1
UNRECORDED = '''
import dataclasses

from fedbound import bounds
from fedbound_sgd.adapter import Nonconvex
from fedbound_sgd.theorem import theorem
from fedbound.verify.api import register_adapter


def build(variant):
    return dataclasses.replace(theorem("printed"), key="sgdx.unrecorded", variant=variant,
                               status="unverified")


bounds.register("sgdx.unrecorded", "the planted constant, not recorded as refuted", build,
                ("proof",), "proof")


@register_adapter
class Unrecorded(Nonconvex):
    key = "sgdx.unrecorded"
'''

#: a user's test file, run by plain pytest (the pytest plugin comes from fedbound's pytest11
#: entry point)
USER_TESTS = '''
import pytest
from hypothesis import given, settings

from fedbound.verify.strategies import scenarios
from fedbound.verify.testing import assert_holds, assert_violated, parametrize_with_checks

KEY = "sgd.nonconvex"


def test_default_holds():
    assert_holds(KEY)


def test_planted_constant_is_violated():
    assert_violated(KEY, {"dim": 1, "mu": 1.0, "sigma": 0.0, "K": 1}, variant="printed", exact=True)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(scenarios(KEY))
def test_holds_on_random_scenarios(s):
    assert_holds(KEY, s, exact=True)


@pytest.mark.fedbound(KEY, checks=["default_round_trip", "random_admissible", "witnesses"])
def test_contract(fedbound_case):
    fedbound_case()


@parametrize_with_checks([KEY], checks=["exact_agrees"])
def test_exact_agrees(fedbound_case):
    fedbound_case()


def test_fixture(fedbound):
    assert fedbound.assert_holds(KEY, exact=True).holds
'''

def _env(*paths, plugins: str | None = None) -> dict:
    """This tree's sources first (as the suite runs), then ``paths``; FEDBOUND_PLUGINS only
    when given."""
    env = {k: v for k, v in os.environ.items() if k not in ("FEDBOUND_PLUGINS", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (ROOT, *paths))
    env["MPLBACKEND"] = "Agg"
    if plugins is not None:
        env["FEDBOUND_PLUGINS"] = plugins
    return env


def _run(argv, env, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT)


def _install_then_list(target: Path, tmp: Path) -> dict[str, subprocess.CompletedProcess]:
    """pip install (offline, from a copy of the source) into ``target``; then ``fedbound
    list`` and ``fedbound plugins`` with ``target`` on the path and no FEDBOUND_PLUGINS: only
    the entry point (a failed install: its process under both names)."""
    source = tmp / "plugin-source"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    pip = _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                "--no-build-isolation", "--target", target, source], _env(), tmp)
    if pip.returncode:
        return {"list": pip, "plugins": pip}
    return {name: _run([FEDBOUND, name, "--json"], _env(target), tmp) for name in ("list", "plugins")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every subprocess of this file, started together; name -> completed process."""
    tmp = tmp_path_factory.mktemp("plugin")
    (tmp / "extra").mkdir()
    (tmp / "extra" / "sgd_unrecorded.py").write_text(UNRECORDED)
    (tmp / "user").mkdir()
    (tmp / "user" / "test_user_sgd.py").write_text(USER_TESTS)
    (tmp / "sweep.json").write_text(json.dumps({
        "key": KEY, "exact": True, "grid": {"sigma": [0.5, 2.0]},
        "base": {"dim": 1, "L": 1.0, "mu": 1.0, "distance": 0.0, "K": 10}}))
    with_plugin = _env(PLUGIN, plugins="fedbound_sgd")
    commands = {
        "list": [FEDBOUND, "list", "--json"],
        "bound": [FEDBOUND, "bound", KEY, "--json", "--params",
                  json.dumps({"L": 2.0, "sigma": 0.5, "Delta": 3.0, "eta": 0.25, "K": 40})],
        "scenario": [FEDBOUND, "scenario", KEY],
        "check": [FEDBOUND, "check", KEY, "--json"],
        "check-witness": [FEDBOUND, "check", KEY, "--scenario", WITNESS, "--exact", "--json"],
        "check-all": [FEDBOUND, "check", "--all", "--only", "sgd", "--no-figures", "--json",
                      "--report", tmp / "report"],
        "search": [FEDBOUND, "search", KEY, "--variant", "printed", "--json",
                   "--witness", tmp / "found.json"],
        "sweep": [FEDBOUND, "sweep", tmp / "sweep.json", "--db", tmp / "sweep.sqlite",
                  "--jobs", "1", "--json"],
        "choose": [FEDBOUND, "choose", "sgd", "--json"],
        "choose-list": [FEDBOUND, "choose"],
        "plugins": [FEDBOUND, "plugins", "--json"],
        "plugins-text": [FEDBOUND, "plugins"],
        "light": [sys.executable, "-c", "import sys\nfrom fedbound.verify.plugins import "
                  "load_plugins\nassert load_plugins() == []\nprint(sorted({m.split('.')[0] for m "
                  "in sys.modules} & {'sympy', 'torch', 'scipy', 'matplotlib'}))"],
        "reproduce": [FEDBOUND, "reproduce", "sgd", "--quick", "--json"],
    }
    jobs = {name: (_run, argv, with_plugin, tmp) for name, argv in commands.items()}
    jobs["step"] = (_run, [FEDBOUND, "--plugin", "fedbound_sgd", "step", KEY, "--json", "--params",
                           json.dumps({"L": 4.0, "sigma": 1.0, "Delta": 1.0, "K": 10})],
                    _env(PLUGIN), tmp)
    jobs["search-unrecorded"] = (_run, [FEDBOUND, "--plugin", "sgd_unrecorded", "search",
                                        "sgdx.unrecorded", "--json"],
                                 _env(PLUGIN, tmp / "extra"), tmp)
    jobs["search-unrecorded-text"] = (_run, [FEDBOUND, "--plugin", "sgd_unrecorded", "search",
                                             "sgdx.unrecorded"], _env(PLUGIN, tmp / "extra"), tmp)
    jobs["broken"] = (_run, [FEDBOUND, "list"], _env(plugins="no_such_module"), tmp)
    jobs["entry-point"] = (_install_then_list, tmp / "site", tmp)
    jobs["user-tests"] = (_run, [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                                 "--fedbound-plugin", "fedbound_sgd", "test_user_sgd.py"],
                          _env(PLUGIN), tmp / "user")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(fn, *args) for name, (fn, *args) in jobs.items()}
        done = {name: f.result() for name, f in futures.items()}
    done.update({f"entry-point-{name}": r for name, r in done.pop("entry-point").items()})
    done["tmp"] = tmp
    return done


def _ok(r: subprocess.CompletedProcess, status: int = 0):
    """The JSON output of a run that exited with ``status``."""
    assert r.returncode == status, f"exit {r.returncode} (expected {status})\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout) if r.stdout.lstrip().startswith(("{", "[")) else r.stdout


def _bound(L, sigma, Delta, eta, K, first=2.0) -> float:
    """The bound of the module docstring of fedbound_sgd.theorem (``first``: the constant of
    the first term, 1 for the planted variant)."""
    return first * Delta / (eta * K) + L * eta * sigma**2


# ---------------------------------------------------------------------- (a) every command


def test_list_shows_the_plugin_next_to_the_builtin_results(runs, plugin):
    """With its slack and tightest ratio, from the tightness table it ships, as for the
    papers' results: the slack of its default scenario against the closed form of its exact
    expectation, the tightest ratio that of its stored tightness witness."""
    rows = {r["key"]: r for r in _ok(runs["list"])}
    assert rows[KEY]["statuses"] == {"printed": "refuted", "proof": "holds"}
    assert rows[KEY]["default"] == "proof" and "mllsgd.theorem1" in rows
    s = plugin.adapter.SGDScenario()
    lam, y0 = _eigen(plugin, s)
    problem, x0, _ = plugin.adapter.build(s)
    ratio = _closed_form_mean(lam, y0, s.sigma, 1 / s.L, s.K) / _bound(
        s.L, s.sigma, float(problem.delta(x0)), 1 / s.L, s.K)
    assert rows[KEY]["default_slack"] == pytest.approx(1 / ratio, rel=1e-9)
    tightest = json.loads((WITNESS.parent / f"{KEY}.proof.tightest.json").read_text())
    assert rows[KEY]["tightest_ratio"] == tightest["ratio"] and 0.99 < tightest["ratio"] <= 1
    assert rows[KEY]["variant_tightness"] == {"proof": {"default_slack": pytest.approx(1 / ratio),
                                                        "tightest_ratio": tightest["ratio"]}}


def test_fedbound_plugins_lists_the_example_like_the_papers(runs):
    """``fedbound plugins``: the four papers and the example, each with what it registered
    through the hooks, none breaking a contract (exit 0); the example named by
    FEDBOUND_PLUGINS, not installed, so without a version."""
    entries = {e["module"]: e for e in _ok(runs["plugins"])}
    papers = [m for m in entries if m.startswith("fedbound.verify.papers.")]
    assert len(papers) == 4 and set(entries) == {*papers, "fedbound_sgd"}
    mine = entries["fedbound_sgd"]
    assert (mine["where"], mine["loaded"], mine["problems"]) == ("FEDBOUND_PLUGINS", True, [])
    got = {h: v for h, v in mine["registered"].items() if v}
    assert {h: v for h, v in got.items() if h not in ("witness_dirs", "tightness_tables")} == {
        "theorems": [KEY], "adapters": [KEY], "choosers": ["sgd"], "experiments": ["sgd.rate"],
        "claims": ["sgd.cor22.falls"]}
    assert [Path(p).name for p in got["witness_dirs"]] == ["witnesses"]
    assert [Path(p).name for p in got["tightness_tables"]] == ["tightness.json"]
    for m in papers:
        e = entries[m]
        prefix = m.rpartition(".")[2]
        assert e["where"] == f"entry point {prefix!r}" and e["distribution"] == "fedbound"
        assert e["problems"] == [] and e["registered"]["theorems"]
        assert all(k.startswith(f"{prefix}.") for k in e["registered"]["theorems"])
        assert len(e["registered"]["tightness_tables"]) == len(e["registered"]["witness_dirs"]) == 1
    text = _ok(runs["plugins-text"])
    assert "fedbound_sgd  (FEDBOUND_PLUGINS)" in text and "every registration keeps its contract" in text


def test_importing_the_plugin_loads_neither_sympy_nor_torch(runs):
    """Every command imports every plugin: the example imports sympy and torch where it uses
    them (its theorem is registered by path), as the papers do."""
    assert _ok(runs["light"]) == []  # the heavy packages imported: none


def test_bound_evaluates_the_plugin_theorem(runs):
    out = _ok(runs["bound"])
    assert out["admissible"] and out["violations"] == []
    assert out["value"] == pytest.approx(_bound(2.0, 0.5, 3.0, 0.25, 40), rel=1e-12)
    assert out["terms"]["noise"] == pytest.approx(2.0 * 0.25 * 0.5**2, rel=1e-12)


def test_the_plugin_chooser_runs_under_fedbound_choose(runs):
    """The plugin's chooser (``fedbound_sgd.chooser``) is listed and runs like the papers':
    the proof variant's step minimises 2 Delta/(eta K) + L eta sigma^2 over eta <= 1/L, i.e.
    eta* = min(sqrt(2 Delta/(K L sigma^2)), 1/L) to the resolution of its grid; every answer
    is simulated on the same replicas, and the simulated answer has the smallest metric of
    them: every other regret is >= 0, and its own, against the best other answer, is <= 0
    (never 0 +- 0 against itself); it is the recommended one."""
    assert "sgd " in _ok(runs["choose-list"]) and "step eta for K iterations" in runs["choose-list"].stdout
    out = _ok(runs["choose"])
    p = _ok(runs["check"])["params"]  # the default scenario's, as the chooser's
    best = min(math.sqrt(2 * p["Delta"] / (p["K"] * p["L"] * p["sigma"] ** 2)), 1 / p["L"])
    proof = next(c for c in out["certified"] if c["variant"] == "proof")
    assert proof["settings"]["eta"] == pytest.approx(best, rel=0.03)
    assert proof["bound"] == pytest.approx(_bound(p["L"], p["sigma"], p["Delta"], best, p["K"]),
                                           rel=1e-3)
    answers = [*out["certified"], out["calibrated"], out["simulated"]]
    assert out["simulated"]["value"] == min(a["value"] for a in answers)
    assert out["simulated"]["regret"] <= 0 and out["simulated"]["regret_against"]
    assert all(a["regret"] >= 0 for a in answers if "regret_against" not in a)
    assert out["recommended"]["settings"] == out["simulated"]["settings"]


def test_the_plugin_claim_runs_under_fedbound_reproduce(runs):
    """The plugin's reproduced claim (``fedbound_sgd.claims``): decided on paired differences
    over seeds, its effect the mean difference of the averages of two values of K."""
    rep = _ok(runs["reproduce"])
    (claim,) = rep["claims"]
    assert rep["papers"] == ["sgd"] and claim["cite"] == "Ghadimi & Lan 2013, Corollary 2.2"
    assert claim["verdict"] == "agrees" and claim["effect"]["seeds"] == 16
    assert claim["effect"]["low"] > 0 and {t["verdict"] for t in claim["tests"]} == {"agrees"}


def test_step_loaded_by_the_plugin_option(runs):
    out = _ok(runs["step"])
    assert out["max_step"] == pytest.approx(1 / 4.0, rel=1e-12) and out["binding"] == "eta <= 1/L"


def test_scenario_is_the_default_as_json(runs):
    s = _ok(runs["scenario"])
    assert set(s) == {"dim", "L", "mu", "sigma", "distance", "eta", "K", "replicas", "seed"}
    assert s["eta"] is None  # the step the bound allows


def test_check_default_holds_and_agrees_with_the_closed_form(runs, plugin):
    v = _ok(runs["check"])
    p = v["params"]
    assert v["verdict"] == "holds" and v["mode"] == "monte-carlo" and v["admissible"]
    assert p["eta"] == pytest.approx(1 / p["L"], rel=1e-12)
    assert v["bound"] == pytest.approx(_bound(p["L"], p["sigma"], p["Delta"], p["eta"], p["K"]), rel=1e-12)
    s = plugin.adapter.SGDScenario(**v["scenario"])
    exact = _closed_form_mean(*_eigen(plugin, s), s.sigma, p["eta"], s.K)
    half = (v["measured_ci"][1] - v["measured_ci"][0]) / 2
    assert abs(v["measured_mean"] - exact) <= 3 * half  # a 95% half-width is ~2 standard errors


def test_check_of_the_stored_witness_exits_1(runs, plugin):
    v = _ok(runs["check-witness"], 1)
    p = v["params"]
    assert v["verdict"] == "violated" and v["variant"] == "printed" and v["mode"] == "exact"
    planted = _bound(p["L"], p["sigma"], p["Delta"], p["eta"], p["K"], first=1.0)
    assert v["bound"] == pytest.approx(planted, rel=1e-12)
    s = plugin.adapter.SGDScenario(**v["scenario"])
    assert s.K == 1 and s.sigma == 0  # so the left-hand side is ||grad f(x_0)||^2
    problem, x0, _ = plugin.adapter.build(s)
    assert v["measured_mean"] == pytest.approx(float(problem.grad(x0).square().sum()), rel=1e-12)
    assert v["measured_mean"] <= _bound(p["L"], p["sigma"], p["Delta"], p["eta"], p["K"])  # proof holds


def test_check_all_replays_the_witnesses_the_refutation_and_the_tightest(runs):
    """Both stored witnesses reproduce: the planted constant's violation, and the proof
    variant's tightest scenario, which holds at its recorded ratio."""
    out = _ok(runs["check-all"])
    summary = out["summary"]
    assert summary["witnesses"] == {"replayed": 2, "reproduced": 2, "stale": 0}
    assert summary["unexpected"] == [] and summary["errors"] == 0 and summary["results"] == 1
    rows = {r["variant"]: r for r in out["rows"] if r["kind"] == "witness"}
    assert set(rows) == {"printed", "proof"} and {r["key"] for r in rows.values()} == {KEY}
    assert rows["printed"]["expect"] == rows["printed"]["outcome"] == "violated"
    assert rows["proof"]["expect"] == rows["proof"]["outcome"] == "holds"
    assert not any(r["unexpected"] for r in rows.values())
    assert (runs["tmp"] / "report" / "index.html").exists()


def test_search_finds_the_planted_constant_and_exits_0_as_it_is_recorded(runs, plugin):
    from fedbound.verify.testing import assert_holds, assert_violated

    out = _ok(runs["search"])
    assert out["found"] and out["status"] == "refuted" and not out["new_violation"]
    found = json.loads((runs["tmp"] / "found.json").read_text())
    assert found["variant"] == "printed" and found["expect"] == "violated"
    assert_violated(KEY, found["scenario"], variant="printed", exact=found["exact"])
    assert_holds(KEY, found["scenario"], exact=True)  # the correct constant holds there


def test_search_exits_1_on_a_violation_not_recorded_as_refuted(runs):
    out = _ok(runs["search-unrecorded"], 1)
    assert out["found"] and out["new_violation"] and out["status"] == "unverified"


def test_the_replay_command_of_a_search_names_the_plugin_it_needs(runs):
    r = runs["search-unrecorded-text"]
    assert r.returncode == 1, r.stderr
    assert "(fedbound --plugin sgd_unrecorded check sgdx.unrecorded --variant" in r.stdout, r.stdout


def test_sweep_runs_a_plugin_spec(runs):
    """Exact sweep at Delta = 0, eta = 1/L = 1 on one coordinate: E||grad f(x_k)||^2 is 0 at
    k = 0 and sigma^2 after, so the mean over K = 10 is 0.9 sigma^2; the bound is sigma^2."""
    out = _ok(runs["sweep"])
    assert (out["total"], out["ran"], out["errors"]) == (2, 2, 0)
    with sqlite3.connect(runs["tmp"] / "sweep.sqlite") as db:
        rows = [json.loads(v) for (v,) in db.execute("SELECT verdict FROM results")]
    for v in rows:
        sigma = v["scenario"]["sigma"]
        assert v["verdict"] == "holds" and v["bound"] == pytest.approx(sigma**2, rel=1e-12)
        assert v["measured_mean"] == pytest.approx(0.9 * sigma**2, rel=1e-12)
    assert sorted(v["scenario"]["sigma"] for v in rows) == [0.5, 2.0]


# ---------------------------------------------------------------------- (b), (c) loading


def test_the_installed_package_is_found_by_its_entry_point(runs):
    rows = {r["key"]: r for r in _ok(runs["entry-point-list"])}
    assert KEY in rows and "afl.theorem3" in rows
    assert rows[KEY]["tightest_ratio"] > 0.99  # its tightness table, installed with it
    (mine,) = [e for e in _ok(runs["entry-point-plugins"]) if e["module"] == "fedbound_sgd"]
    assert (mine["where"], mine["distribution"], mine["version"]) == (
        "entry point 'sgd'", "fedbound-sgd", "0.1.0")
    site = runs["tmp"] / "site"
    assert (site / "fedbound_sgd" / "witnesses" / WITNESS.name).exists()  # shipped as package data
    assert (site / "fedbound_sgd" / "tightness.json").exists()
    entry_points = next(site.glob("fedbound_sgd-*.dist-info")) / "entry_points.txt"
    assert "[fedbound.plugins]" in entry_points.read_text()


def test_a_plugin_named_explicitly_that_fails_is_bad_input_in_one_line(runs):
    """FEDBOUND_PLUGINS names it: exit 2, one line (an installed plugin that fails is a
    warning instead: tests/test_reliability_plugins.py)."""
    r = runs["broken"]
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "plugin 'no_such_module' (FEDBOUND_PLUGINS)" in r.stderr, r.stderr


# ---------------------------------------------------------------------- (d), (e) users


def test_a_user_test_file_passes_under_plain_pytest(runs):
    r = runs["user-tests"]
    assert r.returncode == 0, r.stdout + r.stderr
    for case in ("sgd.nonconvex-default_round_trip", "sgd.nonconvex-random_admissible",
                 "sgd.nonconvex-witnesses", "sgd.nonconvex-exact_agrees"):
        assert f"[{case}] PASSED" in r.stdout, r.stdout
    assert "8 passed" in r.stdout, r.stdout


def _eigen(plugin, s):
    problem, x0, _ = plugin.adapter.build(s)
    return problem.eigenvalues.numpy(), (problem.eigvecs.T @ (x0 - problem.x_star)).numpy()


def _closed_form(lam, y0, sigma, eta, K) -> np.ndarray:
    """[K] E||grad f(x_k)||^2 from E y_k^2 = r^k y0^2 + s (1 - r^k)/(1 - r), r = (1 - eta lam)^2,
    s = eta^2 sigma^2/dim (the geometric sum, not the recursion the plugin runs)."""
    r = (1 - eta * lam) ** 2
    k = np.arange(K)[:, None]
    geometric = (1 - r**k) / (eta * lam * (2 - eta * lam))
    return (lam**2 * (r**k * y0**2 + eta**2 * sigma**2 / lam.size * geometric)).sum(axis=1)


def _closed_form_mean(lam, y0, sigma, eta, K) -> float:
    return float(_closed_form(lam, y0, sigma, eta, K).mean())


# ---------------------------------------------------------------------- in this process


@pytest.fixture(scope="module")
def plugin():
    """The plugin imported here (registered for this module's tests, removed after)."""
    from fedbound.verify.api import unregister_tightness, unregister_witness_dir

    sys.path.insert(0, str(PLUGIN))
    try:
        import fedbound_sgd

        yield fedbound_sgd
    finally:
        unregister_witness_dir(WITNESS.parent)
        unregister_tightness(PLUGIN / "fedbound_sgd" / "tightness.json")
        unregister_adapter(KEY)
        bounds.unregister(KEY)
        for name in [m for m in sys.modules if m.split(".")[0] == "fedbound_sgd"]:
            del sys.modules[name]
        sys.path.remove(str(PLUGIN))


@settings(max_examples=40, deadline=None)
@given(lam=st.lists(st.floats(0.05, 4.0), min_size=1, max_size=5),
       fraction=st.floats(0.01, 1.0), sigma=st.floats(0.0, 3.0), K=st.integers(1, 60),
       seed=st.integers(0, 2**16))
def test_exact_mode_is_the_closed_form(plugin, lam, fraction, sigma, K, seed):
    lam = np.array(lam)
    y0 = np.random.default_rng(seed).normal(size=lam.size)
    eta = fraction / lam.max()
    got = plugin.adapter.expected_grad_sq_norms(lam, y0, sigma, eta, K)
    np.testing.assert_allclose(got, _closed_form(lam, y0, sigma, eta, K), rtol=1e-9, atol=1e-300)


def test_the_first_term_is_tight(plugin):
    """f = (L/2) x^2, sigma = 0, eta = 1/L, K = 1: both sides are L^2 distance^2."""
    from fedbound.verify.api import check

    v = check(KEY, {"dim": 1, "L": 2.5, "mu": 2.5, "sigma": 0.0, "distance": 1.5, "K": 1}, exact=True)
    assert v.verdict == "holds"
    assert v.measured_mean == pytest.approx(2.5**2 * 1.5**2, rel=1e-12)
    assert v.bound == pytest.approx(v.measured_mean, rel=1e-12)


def test_the_noise_term_is_tight(plugin):
    """x_0 = x*, one coordinate, eta = 1/L: E||grad f(x_k)||^2 = sigma^2 for k >= 1, so the
    mean over K is sigma^2 (K-1)/K against the bound L eta sigma^2 = sigma^2."""
    from fedbound.verify.api import check

    v = check(KEY, {"dim": 1, "L": 3.0, "mu": 3.0, "sigma": 0.7, "distance": 0.0, "K": 1000},
              exact=True)
    assert v.verdict == "holds" and v.bound == pytest.approx(0.49, rel=1e-12)
    assert v.measured_mean == pytest.approx(0.49 * 999 / 1000, rel=1e-12)


def test_the_contract_checks_pass(plugin):
    from fedbound.verify.testing import check_adapter

    results = check_adapter(KEY)
    assert [r for r in results if r.outcome != "passed"] == []


def test_a_bad_scenario_names_the_field(plugin):
    from fedbound.verify.api import load_scenario

    with pytest.raises(ValueError, match=r"mu=2 must be <= L=1"):
        load_scenario(KEY, {"mu": 2.0})
    with pytest.raises(ValueError, match=r"eta=-1 must lie in \(0, inf\)"):
        load_scenario(KEY, {"eta": -1.0})
