"""fedbound.verify.reproduce and ``fedbound reproduce``: the engine that runs a paper's
experiments and decides its claims, on a synthetic paper (``tests/synth_claims.py``: seeded
numpy draws, no simulator): verdicts and readings, the exit statuses, footprints refused
before anything runs, a failing run kept as an error, the JSON and the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bounded import CEILING

from fedbound.verify import claims as catalogue
from fedbound.verify.claims import Curve, Plan
from fedbound.verify.reproduce import reproduce

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth_claims  # noqa: E402  (registers the synthetic paper)


@pytest.fixture
def synth(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the command's store (fedbound-reproduce.sqlite) goes there
    if "synth.base" not in catalogue._EXPERIMENTS:
        synth_claims.register()
    synth_claims.CALLS.clear()
    yield synth_claims
    synth_claims.unregister()


OK = ["fig1.a-lower", "fig1.b-lower", "fig2.b-like-c"]


def test_claims_are_decided_on_paired_differences_under_each_reading(synth):
    rep = reproduce("synth", claim_ids=OK, quick=True)
    by = {r.claim.id: r for r in rep.results}
    a, b, c = by["synth.fig1.a-lower"], by["synth.fig1.b-lower"], by["synth.fig2.b-like-c"]
    assert (a.verdict, b.verdict, c.verdict) == ("agrees", "contradicts", "undecided")
    # the primary reading decides; the other reading reverses the order of A and B
    assert [(d.reading, d.verdict) for d in a.decisions] == [("as-printed", "agrees"),
                                                             ("flipped", "contradicts")]
    assert a.reproduced_under() == ["as-printed"] and b.reproduced_under() == ["flipped"]
    # one run per reading, shared by the three claims, each with the quick seeds
    assert [(e, p.reading, p.seeds) for e, p in synth.CALLS] == [
        ("synth.base", "as-printed", 3), ("synth.base", "flipped", 3)]
    # the effect is the mean paired difference at the decision point, recomputed here
    out = rep.outcome(a.claim, "as-printed")
    d = out.at("B", 10) - out.at("A", 10)
    assert a.primary.effect.effect == pytest.approx(d.mean(), rel=1e-12)
    assert c.primary.effect.needed is not None and c.primary.effect.detectable > 0
    assert a.primary.bound_agrees is True and b.primary.bound_agrees is False
    assert rep.status() == 1


def test_the_same_seed_gives_the_same_json_and_another_seed_other_numbers(synth):
    one = reproduce("synth", claim_ids=OK, quick=True, seed=3).to_dict()
    two = reproduce("synth", claim_ids=OK, quick=True, seed=3).to_dict()
    other = reproduce("synth", claim_ids=OK, quick=True, seed=4).to_dict()
    for d in (one, two, other):
        d.pop("seconds"), d.pop("paper_seconds")
    assert one == two and one != other


def test_seeds_batch_and_step_reach_the_plan(synth):
    reproduce("synth", claim_ids=OK[:1], seeds=5, batch=7, step=0.3)
    plans = [p for _, p in synth.CALLS]
    assert {(p.seeds, p.batch, p.step, p.quick) for p in plans} == {(5, 7, 0.3, False)}


def test_a_failing_run_is_an_error_row_and_the_others_are_decided(synth):
    rep = reproduce("synth", claim_ids=["fig1.a-lower", "fig3.broken"], quick=True)
    broken = rep.results[1]
    assert broken.verdict == "error" and "the synthetic run broke" in broken.error
    assert rep.results[0].verdict == "agrees" and rep.status() == 4


def test_a_run_above_the_step_limit_is_refused_before_anything_runs(synth):
    from fedbound.verify.api import ResourceError

    with pytest.raises(ResourceError, match="reproduce synth.huge"):
        reproduce("synth", claim_ids=["fig1.a-lower", "fig4.huge"], quick=True)
    assert synth.CALLS == []


@pytest.mark.parametrize("kw, match", [
    ({"seeds": 1}, "seeds=1"), ({"batch": 0}, "batch=0"), ({"step": -1.0}, "step=-1.0"),
    ({"seed": -2}, "seed=-2"), ({"claim_ids": ["fig9.none"]}, "--claim 'fig9.none'"),
    ({"device": "gpu0"}, "device='gpu0'")])
def test_bad_input_is_refused_naming_it(synth, kw, match):
    with pytest.raises(ValueError, match=match):
        reproduce("synth", quick=True, **kw)
    assert synth.CALLS == []


def test_an_unknown_paper_is_refused():
    with pytest.raises(ValueError, match="paper='nope'"):
        reproduce("nope")


def test_a_claim_needs_a_registered_experiment_and_a_known_reading(synth):
    from fedbound.verify.claims import Claim, register_claim

    with pytest.raises(ValueError, match="no experiment 'synth.none'"):
        register_claim(Claim("synth.x.y", "c", "c", {}, "a", "synth.none", lambda o: []))
    with pytest.raises(ValueError, match="primary='nope'"):
        register_claim(Claim("synth.x.z", "c", "c", {}, "a", "synth.base", lambda o: [],
                             primary="nope"))


def test_curve_sampled_on_a_grid_takes_each_seeds_last_record():
    times = [[0.0, 2.0, 5.0, np.inf], [0.0, 1.0, 3.0, 4.0]]
    values = [[9.0, 8.0, 7.0, 7.0], [9.0, 6.0, 5.0, 4.0]]
    c = Curve.sampled("c", times, values, [0.0, 2.5, 4.5])
    assert c.y.tolist() == [[9.0, 8.0, 8.0], [9.0, 6.0, 4.0]]
    assert c.at(3.0).tolist() == [8.0, 6.0] and c.bound_at(3.0) is None
    with pytest.raises(ValueError, match="starts at 0"):
        c.at(-1.0)


def _cli(capsys, *argv):
    from fedbound.verify.cli import main

    code = main(["--plugin", "synth_claims", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_refuses_an_empty_claim_entry(synth, capsys):
    """``--claim a,,b`` or ``--claim ''`` is bad input, not fewer claims or every claim."""
    for given in (f"{OK[0]},,{OK[1]}", ""):
        code, out, err = _cli(capsys, "reproduce", "synth", "--claim", given, "--list")
        assert code == 2 and out == "" and err == (
            f"fedbound: error: --claim must be comma-separated names, got {given!r}\n"), err


def test_cli_json_lists_every_claim_with_its_verdict_and_readings(synth, capsys):
    code, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--claim",
                        ",".join(OK), "--json")
    data = json.loads(out)
    assert code == 1 and data["counts"] == {"agrees": 1, "contradicts": 1, "undecided": 1}
    for c in data["claims"]:
        assert {"id", "cite", "claim", "setting", "verdict", "effect", "detectable_effect",
                "readings", "reproduced_under", "primary"} <= set(c)
        assert set(c["readings"]) == {"as-printed", "flipped"}
    undecided = next(c for c in data["claims"] if c["verdict"] == "undecided")
    assert undecided["seeds_needed"] >= 2 and undecided["detectable_effect"] > 0


NEW = ["fig5.c-below-b", "fig6.b-again", "fig7.stated", "fig8.a-sooner"]


def test_negligible_fixed_and_censored_claims_get_their_verdicts_and_exit_0(synth, capsys):
    """An ordering inside its margin is negligible, identical runs and a stated schedule are
    fixed by the setting (no test run), hitting times never reached are censored, not an
    error; none of them is a contradiction (exit 0), and every test of the JSON carries its
    margin and source."""
    code, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--seeds", "12", "--claim",
                        ",".join(NEW), "--json")
    data = json.loads(out)
    assert {c["id"]: c["verdict"] for c in data["claims"]} == {
        "synth.fig5.c-below-b": "negligible", "synth.fig6.b-again": "fixed-by-setting",
        "synth.fig7.stated": "fixed-by-setting", "synth.fig8.a-sooner": "agrees"}
    assert code == 0 and data["counts"] == {"negligible": 1, "fixed-by-setting": 2, "agrees": 1}
    by = {c["id"]: c for c in data["claims"]}
    assert "exactly 0" in by["synth.fig6.b-again"]["tests"][0]["reason"]
    assert by["synth.fig7.stated"]["effect"]["value"] is None
    sooner_test = by["synth.fig8.a-sooner"]["tests"][0]
    assert sooner_test["censored"] > 0 and sooner_test["low"] > sooner_test["margin"] == 1.0
    code, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--seeds", "12", "--claim",
                        ",".join(NEW))
    assert "fixed by the setting: the schedule runs A for 3 rounds" in out
    assert "seeds censored at the horizon" in out


def test_every_test_in_the_json_carries_its_margin_and_source(synth, capsys):
    _, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--claim", ",".join(OK + NEW),
                     "--json")
    tests = [t for c in json.loads(out)["claims"]
             for d in (c["readings"].values() if "readings" in c else [c]) for t in d["tests"]]
    assert len(tests) == 3 * 2 + 4  # fig1 and fig2 under two readings each
    for t in tests:
        assert t["source"] and (t["kind"] == "fixed" or t["margin"] > 0), t


def test_cli_exit_statuses(synth, capsys):
    assert _cli(capsys, "reproduce", "synth", "--quick", "--claim", "fig1.a-lower")[0] == 0
    assert _cli(capsys, "reproduce", "synth", "--quick", "--claim", "fig2.b-like-c")[0] == 0
    assert _cli(capsys, "reproduce", "synth", "--quick", "--claim", "fig2.b-like-c",
                "--strict")[0] == 3
    assert _cli(capsys, "reproduce", "synth", "--quick", "--claim", "fig3.broken")[0] == 4
    code, _, err = _cli(capsys, "reproduce", "synth", "--quick", "--seeds", "1")
    assert code == 2 and "--seeds" in err and len(err.strip().splitlines()) == 1
    code, _, err = _cli(capsys, "reproduce", "synth", "--claim", "fig4.huge", "--max-steps", "1e6")
    assert code == 2 and "synth.huge" in err and "--max-steps" in err


def test_cli_list_runs_nothing(synth, capsys):
    code, out, _ = _cli(capsys, "reproduce", "synth", "--list")
    assert code == 0 and "synth.fig1.a-lower  (Synth 2024, Fig. 1)" in out and synth.CALLS == []


def test_report_has_a_page_per_paper_with_every_claims_figure(synth, capsys, tmp_path):
    code, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--claim", ",".join(OK),
                        "--report", str(tmp_path / "r"))
    r = tmp_path / "r"
    page = (r / "claims" / "synth.html").read_text()
    summary = json.loads((r / "summary.json").read_text())
    assert [c["id"] for c in summary["claims"]] == [f"synth.{i}" for i in OK]
    for i in OK:
        figure = "synth_" + i.replace(".", "_").replace("-", "_") + ".png"
        assert f"synth.{i}" in page and (r / "figures" / figure).is_file()
    index = (r / "index.html").read_text()
    assert "synth.fig1.b-lower" in index and "contradicts" in index
    for html in (index, page):
        assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "Report:" in out


def test_the_text_and_the_report_say_the_same_seconds_counts_and_tests(synth, capsys, tmp_path):
    """The seconds are labelled the same way in the text and in the report (the wall clock
    of the command, the seconds of each paper's runs: one number each, not one in one place
    and another in the other), a paper's counts read as words, never run into the run's
    description (they once did: "undecided(quick"), and every test's margin and source, and
    each claim's figure caption, are on its page."""
    import re
    from html import unescape

    code, out, _ = _cli(capsys, "reproduce", "synth", "--quick", "--claim", ",".join(ALL),
                        "--report", str(tmp_path / "r"))
    page = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "r" / "claims" / "synth.html").read_text()))
    index = unescape(re.sub(r"<[^>]+>", "", (tmp_path / "r" / "index.html").read_text()))
    timing = re.search(r"^7 claims in (.+ s wall clock, .+ s of runs)$", out, re.M).group(1)
    runs = re.search(r"seed 0, ([\d.]+) s of runs\): ", out).group(1)
    assert timing in " ".join(index.split()) and f"seed 0, {runs} s of runs)" in page
    counts = re.search(r"s of runs\): (.+)$", out, re.M).group(1)
    assert f"{counts} (quick run, seed 0, {runs} s of runs)." in " ".join(page.split())
    assert not re.search(r"(agrees|contradicts|negligible|undecided|setting|error)\(", page)
    assert "the synthetic paper's stated margin" in page and "fixed by the setting" in page
    assert "Right: each test's mean paired difference and 95% interval" in page
    assert "diamonds" not in page.split("synth.fig5.c-below-b")[-1].split("synth.fig6")[0]


def test_jobs_give_the_numbers_of_one_process(tmp_path):
    """--jobs 2 runs the experiments in worker processes that load the plugin themselves;
    the JSON is the same as in one process, bit for bit, but for the seconds."""
    outs = []
    for jobs in ("1", "2"):
        p = subprocess.run([sys.executable, "-m", "fedbound", "reproduce", "synth", "--quick",
                            "--claim", ",".join(OK), "--json", "--jobs", jobs,
                            "--db", str(tmp_path / f"jobs{jobs}.sqlite")],
                           capture_output=True, text=True, env=_env(), timeout=300)
        assert p.returncode == 1, p.stderr
        data = json.loads(p.stdout)
        data.pop("seconds"), data.pop("paper_seconds")
        outs.append(data)
    assert outs[0] == outs[1]


def _env(**extra) -> dict:
    """The environment of a ``fedbound`` process that loads the synthetic paper."""
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "FEDBOUND_PLUGINS": "synth_claims", **extra}


def _without_seconds(text: str) -> dict:
    data = json.loads(text)
    data.pop("seconds"), data.pop("paper_seconds")
    for run in data.get("runs", ()):
        run.pop("seconds")
    return data


ALL = [*OK, *NEW]


def test_dask_local_gives_the_verdicts_and_numbers_of_a_local_run(synth, monkeypatch, capsys):
    """``--dask-local 2``: the runs go to a Dask LocalCluster's worker processes (which load
    the plugin themselves) and come back with the numbers of one process, bit for bit."""
    pytest.importorskip("distributed")
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])  # the cluster's workers import synth_claims
    outs = [_cli(capsys, "reproduce", "synth", "--quick", "--claim", ",".join(ALL), "--json",
                 "--curves", "--db", db, *extra)
            for db, extra in (("local.sqlite", ()), ("dask.sqlite", ("--dask-local", "2")))]
    assert outs[0][0] == outs[1][0] == 1  # fig1.b-lower contradicts
    assert _without_seconds(outs[0][1]) == _without_seconds(outs[1][1])
    assert len(json.loads(outs[1][1])["claims"]) == len(ALL)


def _stored_runs(db: Path) -> int:
    from fedbound.verify.store import Store

    try:
        store = Store(db, readonly=True)
    except ValueError:  # not there yet, or being created by the driver
        return 0
    try:
        return store.count()
    finally:
        store.close()


@pytest.mark.parametrize("signal_name, jobs", [("SIGKILL", "1"), ("SIGINT", "1"), ("SIGINT", "2")])
def test_a_killed_reproduction_resumes_from_its_stored_runs_bit_for_bit(tmp_path, signal_name, jobs):
    """The driver is killed (SIGKILL: nothing in it runs; SIGINT: Ctrl-C) while the third of
    its three experiment runs hangs, after the first two are stored (in this process, or in
    worker processes with ``--jobs 2``). The same command again runs only the third and gives
    the JSON of an unbroken run, every number bit for bit."""
    import signal
    import time

    db, log = tmp_path / "runs.sqlite", tmp_path / "runs.log"
    argv = [sys.executable, "-m", "fedbound", "reproduce", "synth", "--quick", "--claim",
            ",".join(ALL), "--json", "--curves", "--jobs", jobs, "--db", str(db)]
    p = subprocess.Popen(argv, env=_env(SYNTH_HANG="synth.extra", SYNTH_LOG=str(log)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.monotonic() + CEILING
    while _stored_runs(db) < 2 or "synth.extra" not in (log.read_text() if log.exists() else ""):
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()
        time.sleep(0.2)
    p.send_signal(getattr(signal, signal_name))
    _, err = p.communicate(timeout=CEILING)
    if signal_name == "SIGINT":  # one line saying what is kept
        assert p.returncode == 130, err
        assert "2 experiment runs run by this driver are stored in" in err, err
    assert _stored_runs(db) == 2
    log.write_text("")
    again = subprocess.run(argv, env=_env(SYNTH_LOG=str(log)), capture_output=True, text=True,
                           cwd=tmp_path, timeout=CEILING)
    assert again.returncode == 1, again.stderr  # fig1.b-lower contradicts
    assert log.read_text() == "synth.extra None\n"  # the stored runs are read back, not run
    fresh = subprocess.run([*argv[:-1], str(tmp_path / "fresh.sqlite")], env=_env(),
                           capture_output=True, text=True, cwd=tmp_path, timeout=CEILING)
    assert _without_seconds(again.stdout) == _without_seconds(fresh.stdout)
    assert _stored_runs(db) == 3


def test_a_failed_run_is_not_stored_and_another_code_runs_again(synth, tmp_path):
    """A run that fails is an error row, not a stored run: a rerun tries it again. A store
    holds runs by the code that made them: another fingerprint reads nothing back."""
    from fedbound.verify import reproduce as engine

    db = tmp_path / "s.sqlite"
    reproduce("synth", claim_ids=["fig1.a-lower", "fig3.broken"], quick=True, store=db)
    assert _stored_runs(db) == 2 and [e for e, _ in synth.CALLS].count("synth.fails") == 1
    synth.CALLS.clear()
    rep = reproduce("synth", claim_ids=["fig1.a-lower", "fig3.broken"], quick=True, store=db)
    assert [e for e, _ in synth.CALLS] == ["synth.fails"] and rep.results[1].verdict == "error"
    assert [r.stored for r in rep.runs] == [True, True, False]
    synth.CALLS.clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(engine, "code_fingerprint", lambda experiments: "other code")
        reproduce("synth", claim_ids=["fig1.a-lower"], quick=True, store=db)
    assert [e for e, _ in synth.CALLS] == ["synth.base", "synth.base"]


def test_report_refuses_a_reproductions_store_naming_it(synth, capsys, tmp_path):
    """``fedbound report --db`` on the store of a reproduction is bad input (one line naming
    --db, exit 2), written nowhere; the store is left as it was."""
    db = tmp_path / "r.sqlite"
    assert _cli(capsys, "reproduce", "synth", "--quick", "--claim", "fig1.a-lower", "--db",
                str(db))[0] == 0
    before = db.read_bytes()
    code, out, err = _cli(capsys, "report", "--db", str(db), "--out", str(tmp_path / "rep"))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"--db {db} holds the runs of fedbound reproduce" in err
    assert not (tmp_path / "rep").exists() and db.read_bytes() == before


def test_the_code_fingerprint_follows_the_source(tmp_path, monkeypatch):
    """The fingerprint of a plugin's experiments changes with one byte of its source, and not
    with the directory it lies in."""
    from fedbound.verify.claims import Experiment
    from fedbound.verify.reproduce import code_fingerprint

    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        (tmp_path / where / "fingerprinted.py").write_text("def run(plan):\n    return 1\n")
    prints = []
    for where, text in (("a", None), ("b", None), ("b", "def run(plan):\n    return 2\n")):
        if text:
            (tmp_path / where / "fingerprinted.py").write_text(text)
        monkeypatch.syspath_prepend(str(tmp_path / where))
        sys.modules.pop("fingerprinted", None)
        import fingerprinted

        prints.append(code_fingerprint([Experiment("x.y", fingerprinted.run, (2, 2), lambda p: None)]))
        monkeypatch.undo()
    sys.modules.pop("fingerprinted", None)
    assert prints[0] == prints[1] != prints[2]


def test_plan_counts_its_experiments_seeds():
    from fedbound.verify.claims import Experiment

    exp = Experiment("x.y", lambda p: None, (3, 8), lambda p: None)
    assert Plan(quick=True).count(exp) == 3 and Plan().count(exp) == 8
    assert Plan(seeds=5).count(exp) == 5


@pytest.mark.parametrize("second, verdict", [("same", "fixed-by-setting"), ("differs", "negligible")])
def test_equal_values_are_fixed_by_the_setting_only_for_identical_curves(second, verdict):
    """The engine's identical-runs rule reads the whole curves: values equal on every seed
    at the decision point are fixed by the setting when the two configurations' curves are
    the same everywhere, and a measurement (negligible, within the margin) when the curves
    differ before it, as a quantised accuracy does."""
    from fedbound.verify.claims import Claim, Outcome
    from fedbound.verify.decide import above
    from fedbound.verify.reproduce import decision

    rng = np.random.default_rng(0)
    y = np.round(rng.uniform(0, 1, (5, X_EQUAL.size)), 1)
    z = y.copy()
    if second == "differs":
        z[:, 0] += 0.1  # an earlier point differs; the last (the decision point) is equal
    outcome = Outcome({"a": Curve("a", X_EQUAL, y), "b": Curve("b", X_EQUAL, z)}, "t", "accuracy")

    def decide(o):
        return [above("a - b", o.at("a", 3.0) - o.at("b", 3.0), margin=0.01, source="default",
                      compares=("a", "b"), at=3.0)]

    claim = Claim("t.fig1.equal", "a figure", "a beats b", {}, "", "t.fig1", decide)
    d = decision(claim, outcome, None)
    assert d.verdict == verdict and d.tests[0].seeds == 5 and d.tests[0].effect == 0.0


X_EQUAL = np.arange(4.0)
