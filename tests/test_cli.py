"""The fedbound command: JSON contracts, exit codes, and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bounds
from verify.cli import main

PARAMS = {"L": 1, "beta": 0, "sigma": 1, "Delta": 1, "eta": 0.001, "K": 64, "q": 2, "tau": 4,
          "zeta": 0.5, "a": [0.25] * 4, "p": [1, 1, 0.9, 0.9]}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json(capsys):
    code, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)
    assert code == 0 and {r["key"] for r in rows} == {r["key"] for r in bounds.list()}
    assert all({"key", "title", "variants", "status"} <= set(r) for r in rows)


def test_bound_json_matches_the_library(capsys):
    code, out, _ = run(capsys, "bound", "mllsgd.theorem1", "--variant", "tight",
                       "--params", json.dumps(PARAMS), "--json")
    d = json.loads(out)
    assert code == 0 and set(d) == {"key", "variant", "value", "terms", "admissible", "violations"}
    lib = {k: np.array(v) if isinstance(v, list) else v for k, v in PARAMS.items()}
    assert d["value"] == bounds.get("mllsgd.theorem1", "tight").evaluate(**lib)
    assert d["admissible"] is True and d["violations"] == []


def test_bound_reports_violations(capsys):
    code, out, _ = run(capsys, "bound", "mllsgd.theorem1", "--params",
                       json.dumps({**PARAMS, "eta": 0.5}), "--json")
    d = json.loads(out)
    assert code == 0 and d["admissible"] is False and "(12)" in d["violations"][0]


def test_step_json(capsys):
    p = {k: v for k, v in PARAMS.items() if k != "eta"}
    code, out, _ = run(capsys, "step", "mllsgd.theorem1", "--params", json.dumps(p), "--json")
    d = json.loads(out)
    lib = {k: np.array(v) if isinstance(v, list) else v for k, v in p.items()}
    assert code == 0 and d["max_step"] == bounds.get("mllsgd.theorem1").max_step(**lib)
    assert d["binding"].startswith("(12) at worker")


def test_scenario_then_check_round_trip(capsys, tmp_path):
    code, out, _ = run(capsys, "scenario", "mllsgd.theorem1", "--json")
    scen = json.loads(out)
    assert code == 0 and {"hubs", "workers_per_hub", "graph", "weights", "p", "eta", "K", "q",
                          "tau", "problem", "replicas", "seed"} <= set(scen)
    scen["replicas"] = 16
    f = tmp_path / "s.json"
    f.write_text(json.dumps(scen))
    code, out, _ = run(capsys, "check", "mllsgd.theorem1", "--scenario", str(f), "--exact", "--json")
    v = json.loads(out)
    assert code == 0 and v["verdict"] == "holds" and v["scenario"] == scen
    assert {"bound", "measured_mean", "measured_ci", "verdict", "slack", "params"} <= set(v)


def test_check_text_and_plot(capsys, tmp_path):
    png = tmp_path / "p.png"
    code, out, _ = run(capsys, "check", "mllsgd.corollary1", "--exact", "--plot", str(png))
    assert code == 0 and "HOLDS" in out and png.stat().st_size > 10_000


@pytest.mark.parametrize("argv, message", [
    (["bound", "nope.x", "--params", "{}"], "unknown result 'nope.x'"),
    (["bound", "mllsgd.theorem1", "--params", "{bad"], "--params is not valid JSON"),
    (["bound", "mllsgd.theorem1", "--params", "[1]"], "--params must be a JSON object"),
    (["bound", "mllsgd.theorem1", "--params", json.dumps({**PARAMS, "L": -1})], "L=-1"),
    (["step", "mllsgd.theorem1", "--params", json.dumps(PARAMS)], "without the step"),
    (["check", "mllsgd.theorem1", "--scenario", "/no/such/file"], "No such file"),
    (["frobnicate"], "invalid choice"),
    (["bound", "mllsgd.theorem1", "--variant", "arxiv", "--params", "{}"], "unknown variant"),
])
def test_errors_exit_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_console_script_reads_scenario_from_stdin():
    exe = Path(sys.executable).with_name("fedbound")
    r = subprocess.run([str(exe), "check", "mllsgd.theorem1", "--scenario", "-", "--json"],
                       input='{"K": 63}', capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "K=63 must be a multiple" in r.stderr
    assert "Traceback" not in r.stderr


def test_choose_q_eta_from_the_bound(capsys):
    from verify.tdcd import choose_q_eta

    code, out, _ = run(capsys, "choose-q-eta", "--epsilon", "0.05", "--t-comm", "100",
                       "--t-comp", "1", "--method", "bound", "--Q", "1,4", "--json")
    d = json.loads(out)
    assert code == 0 and d["simulation"] is None and d["Q_grid"] == [1, 4]
    assert d == json.loads(json.dumps(choose_q_eta(epsilon=0.05, t_comm=100, t_comp=1,
                                                   method="bound", Q_grid=[1, 4])))
    best = d["bound"]["best"]
    assert best["Q"] == 1  # the bound depends on eta*Q only: extra local steps only cost time
    assert best["eta"] == pytest.approx(d["bound"]["eta_Q"])
    code, out, _ = run(capsys, "choose-q-eta", "--epsilon", "0.05", "--t-comm", "100",
                       "--t-comp", "1", "--method", "bound")
    assert code == 0 and "best: Q = 1" in out


@pytest.mark.parametrize("argv, message", [
    (["--epsilon", "0", "--t-comm", "1", "--t-comp", "1"], "epsilon=0 must lie in"),
    (["--epsilon", "0.1", "--t-comm", "1", "--t-comp", "1", "--Q", "1,x"], "--Q must be"),
    (["--epsilon", "0.1", "--t-comm", "-1", "--t-comp", "1"], "t_comm=-1"),
])
def test_choose_q_eta_bad_input(capsys, argv, message):
    code, _, err = run(capsys, "choose-q-eta", *argv)
    assert code == 2 and message in err


FIG7A = "0.01,0.85,0.001,0.085,4.0,2.0,0.4,0.2"


def test_choose_sync_time_from_the_bound(capsys):
    from bounds import delays

    argv = ["choose-sync-time", "--sizes", "15,15", "--delays", FIG7A, "--T", "2000",
            "--alpha", "0.05", "--L", "1", "--G", "10", "--sigma", "1", "--Delta", "10",
            "--method", "bound"]
    code, out, _ = run(capsys, *argv, "--json")
    d = json.loads(out)
    assert code == 0 and "simulation" not in d
    model = delays.DelayModel.linear(FIG7A.split(","), [15, 15])
    lib = bounds.choose_sync_time(model=model, T=2000, alpha=0.05, L=1, G=10, sigma=1,
                                  Delta=10, sizes=[15, 15])
    assert d["bound"]["best_S"] == lib.best_S and d["bound"]["bound"] == list(lib.bound)
    code, out, _ = run(capsys, *argv)
    assert code == 0 and f"best S = {lib.best_S:g}" in out


@pytest.mark.parametrize("change, message", [
    (["--delays", "1,2,3"], "needs the 8 parameters"),
    (["--sizes", "15,x"], "--sizes must be comma-separated numbers"),
    (["--alpha", "-1"], "alpha=-1"),
])
def test_choose_sync_time_bad_input(capsys, change, message):
    argv = {"--sizes": "15,15", "--delays": FIG7A, "--T": "100", "--alpha": "0.05", "--L": "1",
            "--G": "1", "--sigma": "1", "--Delta": "1", "--method": "bound"}
    argv.update(dict(zip(change[::2], change[1::2], strict=True)))
    code, _, err = run(capsys, "choose-sync-time", *[x for kv in argv.items() for x in kv])
    assert code == 2 and message in err, err


def test_search_json_and_its_witness_reproduces_through_check(capsys, tmp_path):
    code, out, _ = run(capsys, "search", "afl.theorem3", "--budget", "50", "--seed", "0", "--json")
    d = json.loads(out)
    assert code == 0 and set(d) == {"key", "variant", "found", "witness", "verdict", "tried"}
    assert d["found"] and d["verdict"]["verdict"] == "violated" and d["tried"] >= 1
    path = tmp_path / "witness.json"
    path.write_text(json.dumps(d["witness"]))
    code, out, _ = run(capsys, "check", "afl.theorem3", "--scenario", str(path), "--exact",
                       "--json")
    again = json.loads(out)
    assert code == 0 and again == d["verdict"]
    code, out, _ = run(capsys, "search", "afl.theorem3", "--budget", "0")
    assert code == 2


@pytest.mark.parametrize("key", ["hfl.theorem2", "tdcd.theorem1", "afl.theorem2"])
def test_check_plot_works_for_every_paper(capsys, tmp_path, key):
    png = tmp_path / "p.png"
    code, out, _ = run(capsys, "check", key, "--plot", str(png))
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and f"plot      {png}" in out
