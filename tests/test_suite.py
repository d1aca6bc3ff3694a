"""``fedbound check --all``: the suite, its exit status, and the report directory."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markupsafe import escape

from fedbound import bounds
from fedbound.verify import adapter_for, report, suite, witnesses
from fedbound.verify import rows as rows_module
from fedbound.verify.cli import main
from fedbound.verify.papers.mllsgd import Theorem1
from fedbound.verify.testing import registered
from fedbound.verify.witnesses import Witness

VARIANTS = bounds.variants("mllsgd.theorem1")


@pytest.fixture
def planted():
    """A deliberately wrong result registered as ``holds``: theorem 1 divided by 1000."""
    key = "mllsgd.planted"
    base = bounds.get("mllsgd.theorem1")

    def build(variant):
        return dataclasses.replace(
            base, key=key, variant=variant, status="holds", title="theorem 1 / 1000",
            term_exprs={k: v / 1000 for k, v in base.term_exprs.items()}, _compiled={})

    class Planted(Theorem1):
        key = "mllsgd.planted"
        default = Theorem1.default.replace(replicas=32)

    with registered(key, "theorem 1 / 1000", build, adapter=Planted):
        yield key


def test_tasks_cover_every_variant_and_a_seeded_battery():
    todo = suite.tasks(["mllsgd.theorem1", "mllsgd.corollary1"], battery=3, seed=7)
    variants = {row["key"]: row["variants"] for row in bounds.list()}
    defaults = [(t.key, t.variant) for t in todo if t.kind == "default"]
    assert defaults == [("mllsgd.theorem1", v) for v in variants["mllsgd.theorem1"]] + \
        [("mllsgd.corollary1", v) for v in variants["mllsgd.corollary1"]]
    randoms = [t for t in todo if t.kind == "battery"]
    assert len(randoms) == 6 and {t.variant for t in randoms} == {"proof"}
    again = suite.tasks(["mllsgd.theorem1", "mllsgd.corollary1"], battery=3, seed=7)
    assert [t.scenario for t in again] == [t.scenario for t in todo]
    other = suite.tasks(["mllsgd.theorem1", "mllsgd.corollary1"], battery=3, seed=8)
    assert [t.scenario for t in other if t.kind == "battery"] != [t.scenario for t in randoms]
    alone = suite.tasks(["mllsgd.corollary1"], battery=3, seed=7)  # independent of the selection
    assert [t.scenario for t in alone if t.kind == "battery"] == \
        [t.scenario for t in randoms if t.key == "mllsgd.corollary1"]


@pytest.mark.parametrize("key", ["mllsgd.theorem1", "mllsgd.theorem1_limit", "mllsgd.corollary1"])
def test_random_scenarios_satisfy_the_hypotheses(key):
    ad = adapter_for(key)
    for i in range(4):
        s = ad.random_scenario(np.random.default_rng(i))
        thm = bounds.get(key)
        params = ad.parameters(s, thm)
        assert thm.admissible(**params), thm.violations(**params)


def test_select_keys_and_papers():
    assert suite.select("mllsgd.theorem1") == ["mllsgd.theorem1"]
    assert set(suite.select("mllsgd")) >= {"mllsgd.theorem1", "mllsgd.corollary1"}
    with pytest.raises(ValueError, match="no registered result matches \\['nope'\\]"):
        suite.select("mllsgd,nope")
    with pytest.raises(ValueError, match="battery=-1"):
        suite.tasks(["mllsgd.theorem1"], battery=-1)


def test_a_violated_holds_result_is_unexpected_and_exits_1(planted, tmp_path, capsys):
    code = main(["check", "--all", "--only", planted, "--battery", "1", "--report",
                 str(tmp_path), "--no-figures"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATED (!)" in out and "unexpected" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["summary"]["unexpected"]
    assert all(r["outcome"] == "violated" for r in summary["rows"])


def test_a_clean_run_exits_0_and_writes_the_report(tmp_path, capsys):
    code = main(["check", "--all", "--only", "mllsgd.theorem1", "--battery", "1",
                 "--report", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    index = (tmp_path / "index.html").read_text()
    assert 'href="results/mllsgd_theorem1.html#variant-proof"' in index
    page = (tmp_path / "results" / "mllsgd_theorem1.html").read_text()
    assert "mllsgd.theorem1" in page and "No figure" not in page
    assert "<img" not in page.replace('<img src="../figures/mllsgd_theorem1.png"', "")
    assert page.count('<math display="block">') >= sum(
        1 + len(bounds.get("mllsgd.theorem1", v).term_exprs) for v in VARIANTS)
    for variant in VARIANTS:
        for e in bounds.get("mllsgd.theorem1", variant).errata:
            assert str(escape(e.citation.split(", ", 1)[1])) in page
    assert "fedbound check mllsgd.theorem1 --variant proof" in page
    assert "--scenario mllsgd.theorem1.proof.tightest.json" in page
    assert "Castiglia et al. 2021" in (tmp_path / "references.html").read_text()
    pngs = sorted(p.name for p in (tmp_path / "figures").glob("*.png"))
    assert pngs == ["mllsgd_theorem1.png"]
    for p in (tmp_path / "figures").glob("*.png"):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads((tmp_path / "summary.json").read_text())["rows"]
    assert {r["outcome"] for r in rows} == {"holds"}
    # the defaults, the battery, and the replay of the stored tightest scenario
    assert [r["scenario_label"] for r in rows] == ["default"] * len(VARIANTS) + [
        "random 1", "witness mllsgd.theorem1.proof.tightest.json"]
    assert rows[-1]["recorded_ratio"] > 0.5 and not rows[-1]["unexpected"]


def test_same_seed_same_summary_bit_for_bit(tmp_path):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for d, seed in ((a, 0), (b, 0), (c, 1)):
        assert main(["check", "--all", "--only", "mllsgd.theorem1", "--battery", "2", "--seed",
                     str(seed), "--report", str(d), "--no-figures", "--json"]) == 0
    assert (a / "summary.json").read_bytes() == (b / "summary.json").read_bytes()
    assert (a / "summary.json").read_bytes() != (c / "summary.json").read_bytes()


def test_parallel_jobs_give_the_same_rows(tmp_path):
    todo = suite.tasks(["mllsgd.theorem1"], battery=1, seed=3)
    serial = [r.as_dict() for r in suite.run(todo)]
    from fedbound.verify.pool import executor
    with executor(jobs=2) as pool:
        parallel = [r.as_dict() for r in suite.run(todo, executor=pool)]
    assert json.dumps(serial, sort_keys=True) == json.dumps(parallel, sort_keys=True)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_pool_workers_are_forked_by_a_server_that_imported_torch_and_the_papers():
    """The local pool's workers start with torch and the papers imported (a worker of its
    own imports them in about two seconds): their parent is a fork server, started by this
    process, whose preload names them."""
    from fedbound.verify.pool import PRELOAD, executor, worker_context

    if worker_context().get_start_method() != "forkserver":
        pytest.skip("no fork server on this platform")
    with executor(jobs=2) as pool:
        parent = pool.submit(os.getppid).result()
        # a plugin, loaded by the server's verify.preload (contained there: a broken plugin
        # must not end the server)
        paper = pool.submit(eval, "'fedbound.verify.papers.mllsgd' in __import__('sys').modules")
        assert paper.result()
    assert parent != os.getpid()
    server = Path(f"/proc/{parent}/cmdline").read_bytes().decode().replace("\0", " ")
    assert "multiprocessing.forkserver" in server
    assert all(repr(module) in server for module in PRELOAD)
    assert "torch" in PRELOAD and "fedbound.verify.preload" in PRELOAD


def test_pool_workers_have_the_environment_of_their_driver_not_of_their_fork_server():
    """The fork server may start before the command sets its limits in the environment
    (``check --all`` starts it first thing) and serves every pool of the process; a
    worker still has the environment, and so the limits, in force where its pool was
    made, as a spawned worker would."""
    from fedbound.verify import limits
    from fedbound.verify.pool import executor, start_fork_server

    start_fork_server()
    for steps in ("12345", "678"):
        with limits.configured(steps=steps), executor(jobs=2) as pool:
            seen = {pool.submit(os.getenv, limits.ENV["steps"]).result() for _ in range(4)}
        assert seen == {steps}
    with executor(jobs=2) as pool:
        assert pool.submit(os.getenv, limits.ENV["steps"]).result() is None


SHARED = ["afl.theorem3", "hfl.theorem2", "mllsgd.theorem1"]


def test_shares_hold_the_tasks_in_task_order():
    """The shares of any number of jobs, each planned by itself, are the suite's tasks in
    order; with more jobs than one a result is cut into several shares."""
    todo = suite.tasks(SHARED, battery=2, seed=5)
    for jobs in (1, 2, 8):
        cut = suite.shares(SHARED, battery=2, seed=5, jobs=jobs)
        assert [t for s in cut for t in s.tasks()] == todo
        assert sum(map(len, cut)) == len(todo)
        assert [s.key for s in cut] == sorted(s.key for s in cut)
        assert len(cut) == len(SHARED) if jobs == 1 else len(cut) > len(SHARED)
    with pytest.raises(ValueError, match="jobs=0 must be an integer >= 1"):
        suite.shares(SHARED, jobs=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=30), st.floats(1.0, 1e7))
def test_a_split_is_contiguous_and_its_pieces_about_the_size_asked(costs, piece):
    cuts = suite._split(costs, piece)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(costs)
    assert all(a < b for a, b in cuts)
    assert [b for _, b in cuts[:-1]] == [a for a, _ in cuts[1:]]  # contiguous
    assert all(sum(costs[a:b]) <= piece or b == a + 1 for a, b in cuts)
    assert all(sum(costs[a:b + 1]) > piece for a, b in cuts[:-1])  # none could take the next


def test_two_jobs_write_the_report_of_one_job(tmp_path):
    """check --all through a pool (shares planned by the workers, submitted longest first)
    writes the summary and the figures of the same run in one process, byte for byte."""
    argv = ["check", "--all", "--only", ",".join(SHARED), "--battery", "2", "--seed", "3",
            "--json", "--report"]
    for jobs in ("1", "2"):
        assert main([*argv, str(tmp_path / jobs), "--jobs", jobs]) == 0
    one, two = (sorted(p for p in (tmp_path / j).rglob("*") if p.is_file()) for j in "12")
    assert [p.relative_to(tmp_path / "1") for p in one] == \
        [p.relative_to(tmp_path / "2") for p in two]
    for a, b in zip(one, two, strict=True):
        if a.suffix in (".json", ".png"):
            assert a.read_bytes() == b.read_bytes(), a.name
    assert len([p for p in one if p.suffix == ".png"]) > len(SHARED)  # a refutation drawn too


def test_check_all_usage_errors(capsys):
    assert main(["check", "mllsgd.theorem1", "--all"]) == 2
    assert "takes no KEY" in capsys.readouterr().err
    assert main(["check"]) == 2
    assert "needs a result KEY, or --all" in capsys.readouterr().err
    assert main(["check", "--all", "--only", "nope"]) == 2


def test_a_figure_is_drawn_from_the_check_it_belongs_to():
    """The figure a task draws comes from the check's own measurement: the verdict is the
    one a plain check gives (bit for bit, the wall time aside), the PNG is real, and a
    refuted result draws its stored refutation beside its default scenario."""
    todo = suite.tasks(["afl.theorem3"], battery=0, figures=True)
    drawn = [t for t in todo if t.figure is not None]
    assert [(t.kind, t.variant) for t in drawn] == [("default", "proof")] + [
        ("witness", "proof")] * len(suite.refutations(bounds.get("afl.theorem3"),
                                                     suite.witnesses("afl.theorem3")))
    assert "refuted" in drawn[0].figure.note and len(drawn) >= 2
    for task in drawn[:2]:
        with_figure = suite.run_task(task)
        plain = suite.run_task(dataclasses.replace(task, figure=None))
        assert with_figure.figure[:8] == b"\x89PNG\r\n\x1a\n" and plain.figure is None
        assert ({**with_figure.verdict, "seconds": 0} == {**plain.verdict, "seconds": 0})
    assert not any(t.figure for t in suite.tasks(["afl.theorem3"], battery=0))


def test_a_figure_that_cannot_be_drawn_keeps_its_check(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("no ink")
    monkeypatch.setattr(adapter_for("mllsgd.theorem1").__class__, "_plot", broken)
    task = next(t for t in suite.tasks(["mllsgd.theorem1"], battery=0, figures=True) if t.figure)
    row = suite.run_task(task)
    assert row.outcome == "holds" and row.figure == "RuntimeError: no ink"


def test_an_error_in_a_check_becomes_an_error_row(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("simulator exploded")
    monkeypatch.setattr(suite, "check", boom)
    rows = [suite.run_task(t) for t in suite.tasks(["mllsgd.theorem1"], battery=0)]
    assert all(r.outcome == "error" and "simulator exploded" in r.error for r in rows)
    # a check that could not run contradicts nothing: an error (exit 4), not a violation
    assert not any(r.unexpected for r in rows)
    assert rows_module.summary(rows)["errors"] and not rows_module.summary(rows)["unexpected"]


def test_a_witness_replay_that_cannot_run_is_an_error_not_a_stale_refutation(monkeypatch, tmp_path):
    """A replay refused for resources (or crashing) says nothing about the refutation: the
    run exits 4 (finished with error rows), not 1 (a refutation went stale)."""
    def refused(*a, **k):
        raise ValueError("afl.theorem3: this scenario needs about 1 TiB of memory")
    monkeypatch.setattr(suite, "check", refused)
    rows = [suite.run_task(t) for t in suite.tasks(["afl.theorem3"], battery=0)
            if t.kind == "witness"]
    assert rows and all(r.outcome == "error" and not r.unexpected for r in rows)
    assert rows_module.summary(rows)["witnesses"] == {"replayed": len(rows), "reproduced": 0, "stale": 0}
    assert main(["check", "--all", "--only", "afl.theorem3", "--battery", "0", "--no-figures",
                 "--report", str(tmp_path / "report")]) == 4


def test_every_statement_is_mathml_with_its_latex():
    """Every registered statement: the left-hand side translated to MathML (never the
    fallback <mtext> of its LaTeX source), one formula per term, each condition a formula."""
    for row in bounds.list():
        for v in row["variants"]:
            thm = bounds.get(row["key"], v)
            st = report.statement(thm)
            assert "<mtext>" not in st["lhs"].mathml and st["lhs"].latex.startswith(thm.lhs)
            assert len(st["terms"]) == len(thm.term_exprs)
            for f in [st["lhs"], *(t["formula"] for t in st["terms"])]:
                assert f.mathml.startswith('<math display="block">') and "\\" not in f.mathml

def test_a_violation_where_the_hypotheses_fail_is_not_unexpected():
    verdict = {"verdict": "violated", "admissible": False}
    row = rows_module.Row("mllsgd.theorem1", "proof", "default", "default", "holds", None, verdict, None,
                    0.0)
    assert row.outcome == "violated" and not row.unexpected
    assert rows_module.Row("mllsgd.theorem1", "proof", "default", "default", "holds", None,
                     {**verdict, "admissible": True}, None, 0.0).unexpected


# ------------------------------------------------------------------ witness replays


def test_check_all_replays_the_four_afl_refutations_and_exits_0(tmp_path, capsys):
    code = main(["check", "--all", "--only", "afl.theorem3,afl.theorem4,afl.corollary2,"
                 "afl.corollary3", "--battery", "0", "--report", str(tmp_path), "--no-figures"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = json.loads((tmp_path / "summary.json").read_text())["rows"]
    replays = [r for r in rows if r["kind"] == "witness"]
    refutations = [w for w in witnesses() if w.expect == "violated"]
    # the eight found by the search and a far member of each refutation family
    assert len(replays) == len(refutations) == 12
    assert all(r["outcome"] == "violated" and not r["unexpected"] for r in replays)
    assert all(r["recorded_ratio"] > 1 for r in replays)  # each records how far it fails
    assert "12 witnesses replayed: 12 reproduced, 0 stale" in out
    # the default scenarios hold, the results do not: the table says so, not HOLDS
    table = [line.split() for line in out.splitlines() if line.startswith("afl.")]
    defaults = [line for line in table if line[2] == "default"]
    assert len(defaults) == 8 and "HOLDS" not in {w for line in table for w in line}
    assert all(" ".join(line[4:9]) in ("- refuted (by its witnesses)",
                                       "- rate-refuted (by its witnesses)") for line in defaults)


def test_a_stale_witness_fails_the_run(tmp_path, capsys):
    """A witness on which the bound now holds (the refutation went stale) exits 1."""
    d = tmp_path / "witnesses"
    d.mkdir()
    stale = witnesses("afl.theorem3")[0]
    holding = {**stale.scenario, "problem": {**stale.scenario["problem"], "sigma_G": 0.0}}
    Witness(stale.key, stale.variant, stale.exact, "violated", "no longer violated",
            holding).write(d / "stale.json")
    from fedbound.verify.witnesses import register_witness_dir, unregister_witness_dir

    register_witness_dir(d)
    try:
        code = main(["check", "--all", "--only", "afl.theorem3", "--battery", "0", "--report",
                     str(tmp_path / "r"), "--no-figures"])
    finally:
        unregister_witness_dir(d)
    out = capsys.readouterr().out
    assert code == 1 and "1 stale" in out and "HOLDS (!)" in out


def test_check_all_pools_every_core_by_default_but_not_for_a_few_results():
    import os

    from fedbound.verify.cli.check import POOL_MAX_JOBS, POOL_MIN_RESULTS
    from fedbound.verify.cli.check import suite_jobs as _suite_jobs

    few, many = ["k"] * (POOL_MIN_RESULTS - 1), ["k"] * POOL_MIN_RESULTS
    assert _suite_jobs(None, few) == 1
    assert _suite_jobs(None, many) == min(len(os.sched_getaffinity(0)), POOL_MAX_JOBS)
    assert _suite_jobs(3, few) == 3 and _suite_jobs(1, many) == 1
