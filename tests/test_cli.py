"""The fedbound command: JSON contracts, exit codes, and one-line errors."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedbound import bounds
from fedbound.verify.cli import main

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
    assert all({"key", "title", "variants", "status", "statuses"} <= set(r) for r in rows)
    for r in rows:  # every variant with its own status
        assert r["statuses"] == {v: bounds.get(r["key"], v).status for v in r["variants"]}


def test_list_text_shows_every_variant_in_aligned_columns(capsys):
    code, out, _ = run(capsys, "list")
    lines = out.splitlines()
    assert code == 0
    n = sum(len(bounds.variants(k)) for k in bounds.keys())
    assert len(lines) == n + 2  # header, one per variant, footnote
    status_col = lines[0].index("status")
    assert all(line[status_col - 2: status_col] == "  " for line in lines[1:-1])
    assert any(line.startswith("afl.theorem3") and "printed" in line and "refuted" in line
               for line in lines)


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("fedbound ")


def test_bound_json_matches_the_library(capsys):
    code, out, _ = run(capsys, "bound", "mllsgd.theorem1", "--variant", "tight",
                       "--params", json.dumps(PARAMS), "--json")
    d = json.loads(out)
    assert code == 0 and set(d) == {"key", "variant", "value", "terms", "admissible", "violations"}
    lib = {k: np.array(v) if isinstance(v, list) else v for k, v in PARAMS.items()}
    assert d["value"] == bounds.get("mllsgd.theorem1", "tight").evaluate(**lib)
    assert d["admissible"] is True and d["violations"] == []


def test_bound_reports_violations_and_exits_1(capsys):
    argv = ["bound", "mllsgd.theorem1", "--params", json.dumps({**PARAMS, "eta": 0.5}), "--json"]
    code, out, _ = run(capsys, *argv)
    d = json.loads(out)
    assert code == 1 and d["admissible"] is False and "(12)" in d["violations"][0]
    code, out, _ = run(capsys, *argv, "--allow-inadmissible")
    assert code == 0 and json.loads(out) == d


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
    (["bound", "mllsgd.theorem1", "--params", json.dumps({**PARAMS, "L": True})],
     "L=true must be a number"),
    (["check", "mllsgd.theorem1", "--plot", "/tmp"], "is a directory"),
    (["check", "mllsgd.theorem1", "--plot", "/no/such/dir/p.png"], "does not exist"),
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
    from fedbound.verify.api import choose
    from fedbound.verify.papers.tdcd import QEta

    code, out, _ = run(capsys, "choose-q-eta", "--epsilon", "0.05", "--t-comm", "100",
                       "--t-comp", "1", "--method", "bound", "--Q", "1,4", "--variant", "proof",
                       "--json")
    d = json.loads(out)
    assert code == 0 and d["simulated"] is None and d["knobs"] == ["Q", "eta"]
    lib = choose(QEta(epsilon=0.05, t_comm=100, t_comp=1, Q=[1, 4]), variants=["proof"],
                 method="bound")
    assert {k: v for k, v in d.items() if k != "seconds"} == \
        {k: v for k, v in json.loads(json.dumps(lib.as_dict())).items() if k != "seconds"}
    (proof,) = d["certified"]
    assert proof["settings"]["Q"] == 1  # the proof bound depends on eta*Q only
    assert "curve" not in proof  # per-configuration curves only with --curves
    code, out, _ = run(capsys, "choose-q-eta", "--epsilon", "0.05", "--t-comm", "100",
                       "--t-comp", "1", "--method", "bound", "--variant", "proof")
    assert code == 0 and "proof chooses Q = 1" in out


def test_choose_runs_a_registered_chooser_by_name_and_by_alias(capsys):
    """``fedbound choose tdcd`` and its alias ``choose-q-eta`` are the same run; options
    after the name (``--json`` among them) are the chooser's; ``choose`` alone lists the
    registered choosers and an unknown name exits 2 listing them."""
    argv = ["--epsilon", "0.05", "--t-comm", "100", "--t-comp", "1", "--method", "bound",
            "--Q", "1,4", "--variant", "proof", "--json", "--curves"]
    by_name = run(capsys, "choose", "tdcd", *argv)
    by_alias = run(capsys, "choose-q-eta", *argv)
    one, two = (json.loads(r[1]) for r in (by_name, by_alias))
    one.pop("seconds"), two.pop("seconds")
    assert by_name[0] == 0 and one == two and one["chooser"] == "q-eta"
    assert [row["Q"] for row in one["certified"][0]["curve"]] == [1, 4]  # --curves
    code, out, _ = run(capsys, "choose")
    assert code == 0 and "hfl" in out and "tdcd" in out and "mllsgd" in out and "choose-sync-time" in out
    code, _, err = run(capsys, "choose", "nope")
    listed = err.split("registered: ")[1].strip().split(", ")  # a plugin's too, once loaded
    assert code == 2 and "no chooser 'nope'" in err and {"hfl", "mllsgd", "tdcd"} <= set(listed)
    assert listed == sorted(listed)
    code, _, err = run(capsys, "choose-nope")
    assert code == 2 and "invalid choice: 'choose-nope'" in err


@pytest.mark.parametrize("argv, message", [
    (["--epsilon", "0", "--t-comm", "1", "--t-comp", "1"], "--epsilon=0 must lie in"),
    (["--epsilon", "0.1", "--t-comm", "1", "--t-comp", "1", "--Q", "1,x"], "--Q must be"),
    (["--epsilon", "0.1", "--t-comm", "-1", "--t-comp", "1"], "--t-comm=-1 must lie in"),
    (["--epsilon", "0.1", "--max-scenarios", "10"], "over --Q x --eta: the grid = "),
    (["--epsilon", "0.1", "--max-steps", "1e9"], "choose tdcd (the search over --Q x --eta"),
])
def test_choose_q_eta_bad_input(capsys, argv, message):
    """Bad values, and a search above the resource limits, refused before anything runs
    (exit 2, one line naming the options)."""
    code, _, err = run(capsys, "choose-q-eta", *argv)
    assert code == 2 and message in err and "\n" not in err.strip()


FIG7A = "0.01,0.85,0.001,0.085,4.0,2.0,0.4,0.2"


def test_choose_sync_time_from_the_bound(capsys):
    from fedbound.bounds import delays

    argv = ["choose-sync-time", "--sizes", "15,15", "--delays", FIG7A, "--T", "2000",
            "--alpha", "0.05", "--L", "1", "--G", "10", "--sigma", "1", "--Delta", "10",
            "--method", "bound"]
    code, out, _ = run(capsys, *argv, "--json", "--curves")
    d = json.loads(out)
    assert code == 0 and d["simulated"] is None
    model = delays.DelayModel.linear(FIG7A.split(","), [15, 15])
    assert [c["variant"] for c in d["certified"]] == list(bounds.variants("hfl.theorem2"))
    for c in d["certified"]:
        grid = [p["S"] for p in c["curve"]]
        lib = bounds.choose_sync_time(model=model, T=2000, alpha=0.05, L=1, G=10, sigma=1,
                                      Delta=10, sizes=[15, 15], variant=c["variant"], S_grid=grid)
        assert c["settings"] == {"S": lib.best_S, "alpha": 0.05} and c["bound"] == lib.best_bound
        assert [p["bound"] for p in c["curve"]] == list(lib.bound)
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "proof chooses S = 0" in out and "not a certificate" in out


def test_choose_sync_time_refined_picks_an_interior_S_that_simulation_confirms(capsys):
    """The paper's Fig. 7a delays with large noise: the refined bound picks S > 0 (the
    published proof variant S = 0), and on Theorem 2's left-hand side the refined answer
    passes (regret <= 10%, or indistinguishable from the best); --metric final_loss is the
    loss at the deadline."""
    argv = ["choose-sync-time", "--sizes", "15,15", "--delays", FIG7A, "--T", "2000",
            "--alpha", "0.01", "--L", "1", "--G", str(math.sqrt(400.2)), "--sigma", "20",
            "--Delta", "0.1", "--variant", "refined,proof", "--S", "0,1.5,2,3,5,10",
            "--replicas", "16", "--metric", "lhs", "--json"]
    code, out, _ = run(capsys, *argv)
    d = json.loads(out)
    by = {c["variant"]: c for c in d["certified"]}
    assert code == 0 and d["inputs"]["replicas"] == 16 and d["inputs"]["metric"] == "lhs"
    assert by["refined"]["settings"]["S"] > 0 and by["proof"]["settings"]["S"] == 0
    assert by["refined"]["passes"] and d["simulated"]["regret"] <= 0  # against the best other
    assert d["simulated"]["regret_against"] and d["recommended"]["answer"] == "simulated"
    code, out, _ = run(capsys, *argv[:-3], "--metric", "final_loss", "--json", "--method", "bound")
    assert code == 0 and json.loads(out)["inputs"]["metric"] == "loss"


@pytest.mark.parametrize("change, message", [
    (["--delays", "1,2,3"], "--delays has 3 entries, needs 8: d,b,e,f,d_g,b_g,e_g,f_g"),
    (["--sizes", "15,x"], "--sizes must be comma-separated numbers"),
    (["--alpha", "-1"], "--alpha=-1"),
    (["--S", "0,-2"], "--S[1]=-2"),
    (["--L", None], "--L: required without --scenario"),
])
def test_choose_sync_time_bad_input(capsys, change, message):
    argv = {"--sizes": "15,15", "--delays": FIG7A, "--T": "100", "--alpha": "0.05", "--L": "1",
            "--G": "1", "--sigma": "1", "--Delta": "1", "--method": "bound"}
    argv.update(dict(zip(change[::2], change[1::2], strict=True)))
    code, _, err = run(capsys, "choose-sync-time", *[x for kv in argv.items() if kv[1] is not None
                                                     for x in kv])
    assert code == 2 and message in err, err


@pytest.mark.parametrize("argv, option, given", [
    (["choose", "tdcd", "--Q="], "--Q", ""), (["choose", "mllsgd", "--tau="], "--tau", ""),
    (["choose", "hfl", "--S", " , "], "--S", " , "),
    (["choose", "hfl", "--data", "digits", "--model", "mlp", "--hidden="], "--hidden", ""),
    (["rate", "hfl.theorem2", "--over", "S", "--values="], "--values", ""),
    (["choose", "hfl", "--alpha=1,,2"], "--alpha", "1,,2"), (["choose", "tdcd", "--Q=1,"], "--Q", "1,"),
])
def test_an_empty_list_entry_is_refused_not_skipped(capsys, argv, option, given):
    """A list option with an empty entry, or no number at all, is bad input naming the
    option: not fewer numbers, not its default."""
    code, _, err = run(capsys, *argv)
    assert code == 2 and err == (f"fedbound: error: {option} must be comma-separated numbers, "
                                 f"got {given!r}\n"), err


@pytest.mark.parametrize("extra, message", [
    (["--variant="], "--variant must be comma-separated names, got ''"),
    (["--variant=proof,,tight"], "--variant must be comma-separated names, got 'proof,,tight'"),
    (["--curves"], "--curves adds the per-time curves to the JSON: give it with --json"),
])
def test_choose_refuses_an_empty_variant_and_curves_without_json(capsys, extra, message):
    """Not silently no certified answer, fewer variants, or curves that are never shown."""
    code, out, err = run(capsys, "choose", "hfl", "--sizes", "15,15", "--delays", FIG7A, "--T", "100",
                         "--L", "1", "--G", "1", "--sigma", "1", "--Delta", "1", "--method", "bound",
                         *extra)
    assert code == 2 and out == "" and err == f"fedbound: error: {message}\n", err


def test_choose_help_says_what_each_delay_parameter_means(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["choose", "hfl", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    for words in ("d |N_i| + b", "e |N_i| + f", "d_g G + b_g", "e_g G + f_g", "time unit of T"):
        assert words in " ".join(out.split())


def test_search_json_and_its_witness_reproduces_through_check(capsys, tmp_path):
    stored = tmp_path / "w.json"
    code, out, _ = run(capsys, "search", "afl.theorem3", "--budget", "50", "--seed", "0", "--json",
                       "--witness", str(stored))
    d = json.loads(out)
    # a violation of a result recorded as refuted is known: exit 0
    assert code == 0 and d["found"] and not d["new_violation"] and d["status"] == "refuted"
    assert d["verdict"]["verdict"] == "violated" and d["tried"] >= 1 and d["exact"]
    path = tmp_path / "witness.json"
    path.write_text(json.dumps(d["witness"]))
    for scenario in (path, stored):  # the scenario itself, or the stored witness file
        code, out, _ = run(capsys, "check", "afl.theorem3", "--scenario", str(scenario), "--exact",
                           "--json")
        assert code == 1 and json.loads(out) == d["verdict"]  # violated: exit 1
    code, out, _ = run(capsys, "search", "afl.theorem3", "--budget", "0")
    assert code == 2


def test_check_a_shipped_witness_exits_1_and_the_default_exits_0(capsys):
    from fedbound.verify import witnesses

    (w,) = [w for w in witnesses("afl.theorem3") if w.source.endswith("afl.theorem3.proof.json")]
    code, out, _ = run(capsys, "check", "afl.theorem3", "--scenario", w.source, "--exact")
    assert code == 1 and "VIOLATED" in out
    code, out, _ = run(capsys, "check", "afl.theorem3", "--exact", "--scenario", w.source,
                       "--json")
    assert json.loads(out)["variant"] == "proof"
    assert run(capsys, "check", "afl.theorem3")[0] == 0


def test_check_witness_names_a_stored_witness_from_any_directory(capsys, monkeypatch, tmp_path):
    """``check KEY --witness NAME`` gives the same verdict as ``--scenario`` of that file."""
    from fedbound.verify import witnesses

    monkeypatch.chdir(tmp_path)
    (w,) = [w for w in witnesses("afl.theorem3") if w.source.endswith("afl.theorem3.proof.json")]
    by_file = run(capsys, "check", "afl.theorem3", "--scenario", w.source, "--exact", "--json")
    by_name = run(capsys, "check", "afl.theorem3", "--witness", "proof", "--exact", "--json")
    assert by_name[0] == by_file[0] == 1 and by_name[1] == by_file[1]  # seconds not in JSON
    assert json.loads(by_name[1])["verdict"] == "violated"


@pytest.mark.parametrize("argv, message", [
    (["check", "afl.theorem3", "--witness", "nope"], "stored witnesses are: printed, "),
    (["check", "afl.theorem3", "--witness", "proof", "--scenario", "s.json"], "not both"),
    (["check", "--all", "--witness", "proof"], "--witness"),
])
def test_check_witness_bad_input_exits_2_naming_the_rule(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1


def test_strict_makes_an_inconclusive_verdict_exit_3(capsys, tmp_path):
    """A bound equal to the true mean, measured with 5 replicas: inconclusive."""
    from dataclasses import dataclass

    import sympy as sp

    from fedbound.bounds.core import Param, Theorem
    from fedbound.verify.api import Adapter, Measurement, Scenario, require_int
    from fedbound.verify.testing import registered

    @dataclass
    class Coin(Scenario):
        replicas: int = 5
        seed: int = 0

        def validate(self):
            require_int("replicas", self.replicas)
            require_int("seed", self.seed, minimum=0)

    class Mean(Adapter):
        key = "toy.mean"
        scenario_type = Coin
        default = Coin()

        def _derive(self, s, thm):
            return {"mu": 1.0}

        def _measure(self, s, params, exact):
            return Measurement(values=np.random.default_rng(s.seed).normal(1.0, 0.1, s.replicas))

    mu = sp.Symbol("mu", positive=True)
    build = lambda v: Theorem(key="toy.mean", variant=v, title="E X <= mu", citation="test",  # noqa: E731
                              lhs="E X", params={"mu": Param("mu", "mean", "positive")},
                              term_exprs={"mu": mu}, symbols={"mu": mu})
    with registered("toy.mean", "E X <= mu", build, adapter=Mean):
        code, out, _ = run(capsys, "check", "toy.mean", "--json")
        v = json.loads(out)
        assert v["verdict"] == "inconclusive" and code == 0 and "only 5 replicas" in v["notes"][0]
        assert run(capsys, "check", "toy.mean", "--strict")[0] == 3


def test_an_internal_error_exits_70_with_one_line_and_a_log(capsys, monkeypatch):
    from fedbound.verify import adapter
    def boom(*a, **k):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(adapter.Adapter, "check", boom)
    code, out, err = run(capsys, "check", "mllsgd.theorem1")
    assert code == 70 and err.count("\n") == 1 and "internal error: RuntimeError: kaboom" in err
    log = err.split("traceback in ")[1].split(";")[0]
    assert "Traceback" in open(log).read()


def test_a_closed_pipe_is_the_environments_failure_in_one_line():
    """The reader went away before fedbound wrote (| head -0 reads nothing): exit 74 and one
    line naming standard output, no traceback and no log."""
    exe = Path(sys.executable).with_name("fedbound")
    r = subprocess.run(f"'{exe}' list --json | head -0; exit ${{PIPESTATUS[0]}}", shell=True,
                       executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert r.returncode == 74 and r.stdout == "", r.stderr
    assert r.stderr.count("\n") == 1 and "I/O error: standard output: Broken pipe" in r.stderr


def test_subcommand_help_lists_an_example_and_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert "example:" in out and "exit status:" in out and "130  interrupted" in out


@pytest.mark.parametrize("key", ["hfl.theorem2", "tdcd.theorem1", "afl.theorem2"])
def test_check_plot_works_for_every_paper(capsys, tmp_path, key):
    png = tmp_path / "p.png"
    code, out, _ = run(capsys, "check", key, "--plot", str(png))
    assert code == 0 and png.read_bytes()[:4] == b"\x89PNG" and f"plot      {png}" in out


@pytest.mark.parametrize("key", ["hfl.lemma1", "hfl.theorem1"])
def test_bound_as_text_prints_every_entry_of_a_bound_stated_per_group(key, capsys):
    """A bound stated per round and group (Lemma 1) or per group (Theorem 1) is an array:
    the text output shows each entry, the same numbers as --json (it crashed, exit 70)."""
    from fedbound.verify.adapter import adapter_for
    from fedbound.verify.scenario import jsonable

    ad = adapter_for(key)
    params = json.dumps(jsonable(ad.parameters(ad.default_scenario(), ad.theorem())))
    code, out, _ = run(capsys, "bound", key, "--params", params, "--json")
    values = np.asarray(json.loads(out)["value"], dtype=float)
    code_text, text, _ = run(capsys, "bound", key, "--params", params)
    assert code == code_text == 0 and values.size > 1
    shown = text.split("=", 1)[1].split("\n  ")[0]
    assert [float(x) for x in shown.replace("[", " ").replace("]", " ").replace(",", " ").split()] \
        == pytest.approx(values.ravel().tolist(), rel=1e-5)


def test_check_estimated_gives_the_library_verdict_and_refuses_what_it_cannot(capsys, tmp_path):
    """--estimated is verify.check_estimated on the scenario's problem: same numbers, same
    status; it refuses a result it does not cover and flags it cannot honour, exit 2."""
    from fedbound.verify.estimated import check_estimated

    scenario = tmp_path / "s.json"
    scenario.write_text(json.dumps({"K": 16, "replicas": 16}))
    code, out, _ = run(capsys, "check", "mllsgd.theorem1", "--estimated", "--scenario",
                       str(scenario), "--json")
    got = json.loads(out)
    want = check_estimated("mllsgd.theorem1", {"K": 16, "replicas": 16})
    assert got["mode"] == want.mode and got["mode"].startswith("estimated")
    assert (got["bound"], got["measured_mean"]) == (want.bound, want.measured_mean)
    assert code == {"holds": 0, "violated": 1}.get(want.verdict, 0)
    for argv, match in ((["hfl.lemma1"], "tdcd.theorem1; got hfl.lemma1"),
                        (["mllsgd.theorem1", "--exact"], "no --exact or --plot"),
                        (["--all"], "--estimated")):
        code, _, err = run(capsys, "check", *argv, "--estimated")
        assert code == 2 and match in err and len(err.strip().splitlines()) == 1


def test_reproduce_without_scikit_learn_is_one_line_naming_the_extra(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # its store of runs
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    code, _, err = run(capsys, "reproduce", "afl", "--quick")
    assert code == 2 and "fedbound[data]" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("argv", "ahead"), [
    (["check", "--all", "--jobs", "2"], True),
    (["check", "--all", "--jobs", "2", "--only", "mllsgd"], True),
    (["check", "--all", "--jobs", "1"], False),
    (["check", "--all", "--only", "mllsgd"], False),  # may be too few results for a pool
    (["check", "mllsgd.theorem1"], False),
    (["sweep", "spec.json", "--jobs", "2"], False),
])
def test_the_fork_server_starts_ahead_only_for_check_all_with_a_pool(argv, ahead):
    from fedbound.verify import cli

    assert cli.check.pool_ahead(cli.parser().parse_args(argv)) is ahead
    default = cli.parser().parse_args(["check", "--all"])
    assert cli.check.pool_ahead(default) is (cli.check.cores() > 1)
