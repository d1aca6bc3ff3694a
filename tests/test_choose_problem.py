"""The choosers on the researcher's own problem named on the command line (``--data --model
--split --batch --hidden``, verify/named_problem.py): the CLI's answers against the Python
API called with ``sim.federated.federated_problem`` directly (same seed: bit for bit), the
report's ``problem`` field, the certified answers of a problem without certified constants,
and bad input refused in one line naming the option (exit 2) before anything heavy runs."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import numpy as np
import pytest
import torch

from fedbound.sim.federated import federated_problem, parse_split
from fedbound.verify.api import choose, json_text
from fedbound.verify.cli import main
from fedbound.verify.cli.choose import built, chooser_parser
from fedbound.verify.papers.hfl.choose import SyncTime
from fedbound.verify.papers.mllsgd.adapters import Theorem1
from fedbound.verify.papers.mllsgd.choose import TauEta

torch.set_num_threads(1)
DELAYS = "0.01,0.85,0.001,0.085,4,2,0.4,0.2"
HFL = ["choose", "hfl", "--sizes", "2,2", "--delays", DELAYS, "--T", "20", "--replicas", "4"]
DIGITS = ["--data", "digits", "--model", "logistic", "--split", "dirichlet:0.5", "--batch", "4"]


def run_json(argv: list[str]) -> dict:
    buf = io.StringIO()
    with redirect_stdout(buf):
        code = main([*argv, "--json", "--curves"])
    assert code == 0
    return json.loads(buf.getvalue())


def answers(report: dict) -> dict:
    return {k: report[k] for k in ("knobs", "metric", "certified", "calibrated", "simulated", "search")}


@pytest.fixture(scope="module")
def hfl_report():
    return run_json([*HFL, *DIGITS, "--S", "0,2", "--alpha", "0.25,0.5", "--seed", "3"])


def test_hfl_cli_on_digits_is_the_python_api_bit_for_bit(hfl_report):
    problem, x1 = federated_problem("digits", "logistic", ("dirichlet", 0.5), (2, 2), seed=3, batch=4)
    chooser = SyncTime(sizes=(2, 2), delays=DELAYS.split(","), T=20, problem=problem, x1=x1,
                       S=[0.0, 2.0], alpha=[0.25, 0.5], replicas=4, seed=3)
    direct = json.loads(json_text(choose(chooser).as_dict(curves=True)))
    assert answers(hfl_report) == answers(direct)
    assert hfl_report["simulated"]["value"] > 0 and hfl_report["calibrated"]["regret"] is not None


def test_the_report_names_the_problem(hfl_report):
    assert hfl_report["inputs"]["problem"] == {"data": "digits", "model": "logistic",
                                               "split": "dirichlet:0.5", "batch": 4, "seed": 3}
    assert "L" not in hfl_report["inputs"]["constants"]        # a linear network: no certified L


def test_certified_answers_without_certified_constants_say_so(hfl_report):
    certified = {a["variant"]: a for a in hfl_report["certified"]}
    assert {"proof", "refined", "iid"} <= set(certified)
    assert all(a["settings"] is None and a["value"] is None and a["bound"] is None
               for a in certified.values())
    assert all(a["note"].startswith("no certified L, G, sigma") for v, a in certified.items() if v != "iid")
    assert "assumes every client samples the same data" in certified["iid"]["note"]


def test_a_scenario_file_naming_the_problem_is_the_options_bit_for_bit(tmp_path, monkeypatch):
    """The chooser a file builds (its problem, start, delays, T) simulates as the options' does,
    bit for bit (the options' answers are the Python API's: the test above)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps({
        "sizes": [2, 2], "delays": [float(d) for d in DELAYS.split(",")], "T": 20, "data": "digits",
        "model": "logistic", "split": "dirichlet:0.5", "batch": 4}))

    def chooser(argv):
        parser = chooser_parser(SyncTime, "hfl")
        return built(SyncTime, parser.parse_args([*argv, "--replicas", "2", "--seed", "3"]))

    by_file = chooser(["--scenario", "s.json"])
    by_options = chooser([*HFL[2:8], *DIGITS])
    assert by_file.inputs()["problem"] == by_options.inputs()["problem"]
    assert torch.equal(by_file.x1, by_options.x1) and by_file.sizes == by_options.sizes
    settings = [{"S": 2.0, "alpha": 0.25}]
    assert np.array_equal(by_file.simulate(settings, 2, paired=True)[0].values,
                          by_options.simulate(settings, 2, paired=True)[0].values)


@pytest.mark.parametrize("command, fields, argv, message", [
    ("hfl", {"data": "digits", "batch": 0}, [], "--scenario s.json: batch=0 must be an integer >= 1"),
    ("hfl", {"data": "digits", "batch": 2.5}, [], "--scenario s.json: batch=2.5 must be an integer >= 1"),
    ("hfl", {"data": "tiny"}, [], "--scenario s.json: data='tiny' must be one of digits, breast_cancer"),
    ("hfl", {"data": 3}, [], "--scenario s.json: data=3 must be a string"),
    ("hfl", {"data": "digits", "split": "dirichlet:0"}, [],
     "--scenario s.json: split='dirichlet:0': the Dirichlet concentration"),
    ("hfl", {"model": "mlp"}, [], "--scenario s.json: model: needs --data"),
    ("hfl", {"data": "digits", "model": "mlp", "hidden": [8, 0]}, [],
     "--scenario s.json: hidden[1]=0 must be an integer >= 1"),
    ("hfl", {"data": "digits", "hidden": 8}, [], "--scenario s.json: hidden: only with --model mlp"),
    ("hfl", {"data": "digits", "problem": {"kind": "logistic"}}, [],
     "--scenario s.json: data and --scenario s.json: problem both name the problem: give one"),
    ("hfl", {"data": "digits", "model": "cnn"}, ["--data", "breast_cancer"],  # the option overrides
     "--scenario s.json: model=cnn needs image data: --data=breast_cancer"),
    ("hfl", {"T": -1}, [], "--scenario s.json: T=-1 must lie in (0, inf)"),
    ("mllsgd", {"data": "digits", "split": "group_labels", "hubs": 11, "workers_per_hub": 1}, [],
     "--scenario s.json: split=group_labels needs a class per group"),
    ("tdcd", {"data": "digits"}, [], "--scenario s.json: data='digits' must be one of breast_cancer"),
    ("tdcd", {"model": "mlp"}, [], "unknown field(s) ['model']"),
])
def test_a_bad_problem_field_of_a_scenario_file_is_named_as_written(tmp_path, monkeypatch, capsys,
                                                                    command, fields, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps(fields))
    code = main(["choose", command, "--scenario", "s.json", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err


def test_mllsgd_cli_on_breast_cancer_is_the_python_api():
    argv = ["choose", "mllsgd", "--hubs", "2", "--workers-per-hub", "2", "--K", "32", "--tau", "1,4",
            "--replicas", "4", "--method", "bound", "--data", "breast_cancer", "--split", "shards",
            "--batch", "2"]
    report = run_json(argv)
    scenario = Theorem1.default.replace(hubs=2, workers_per_hub=2, K=32)
    problem, x1 = federated_problem("breast_cancer", "logistic", "shards", (2, 2), seed=scenario.seed,
                                    batch=2)
    direct = choose(TauEta(scenario=scenario, problem=problem, x1=x1, tau=[1, 4], replicas=4),
                    method="bound").as_dict(curves=True)
    assert answers(report) == answers(json.loads(json_text(direct)))
    assert report["inputs"]["problem"]["split"] == "shards"
    assert report["inputs"]["constants"]["L"] == pytest.approx(problem.L, rel=1e-15)


def test_mllsgd_on_a_network_has_no_certificate_and_steps_from_its_curvature():
    report = run_json(["choose", "mllsgd", "--hubs", "2", "--workers-per-hub", "2", "--K", "16",
                       "--tau", "1,2", "--replicas", "4", "--method", "bound", "--data", "breast_cancer",
                       "--model", "mlp", "--hidden", "4", "--split", "dirichlet:1", "--seed", "2"])
    assert report["inputs"]["problem"] == {"data": "breast_cancer", "model": "mlp", "split": "dirichlet:1",
                                           "batch": 1, "hidden": [4], "seed": 2}
    assert report["certified"] and all(a["settings"] is None and "no certified L, beta, sigma" in a["note"]
                                       for a in report["certified"])
    etas = {row["eta"] for row in report["calibrated"]["curve"]}
    assert len(etas) > 1 and report["calibrated"]["settings"]["eta"] in etas


def test_tdcd_on_breast_cancer_split_by_features():
    """``choose tdcd --data breast_cancer``: the model holds the data set's features in a
    permuted column order, split over the scenario's silos, labels -1/+1, and its Delta is the
    logistic loss at theta^0 computed here with numpy; the CLI's answers are those of the
    Python API on that model; least squares has no certified sigma and says so."""
    import numpy as np

    from fedbound.sim.data import load_breast_cancer
    from fedbound.verify.papers.tdcd.adapters import Theorem1 as TDCD1
    from fedbound.verify.papers.tdcd.choose import QEta, data_model

    argv = ["choose", "tdcd", "--data", "breast_cancer", "--Q", "1,2", "--eta", "0.1,0.2", "--replicas", "4"]
    report = run_json(argv)
    model, theta0, constants, source = data_model("breast_cancer", TDCD1.default)
    assert report["inputs"]["problem"] == source == {"data": "breast_cancer", "loss": "logistic",
                                                     "blocks": [15, 15], "clients": [2, 3], "batch": 12,
                                                     "seed": 0}
    data = load_breast_cancer()
    X, y = model.X.numpy(), model.y.numpy()
    assert sorted(map(tuple, X.T.round(12))) == sorted(map(tuple, data.features.numpy().T.round(12)))
    assert set(y) == {-1.0, 1.0} and np.array_equal(y, data.labels.numpy() * 2.0 - 1)
    margins = y * (X @ theta0.numpy())
    assert constants["Delta"] == pytest.approx(np.mean(np.log1p(np.exp(-margins))), rel=1e-12)
    direct = choose(QEta(scenario=TDCD1.default, model=model, theta0=theta0, constants=constants,
                         source=source, Q=[1, 2], eta=[0.1, 0.2], replicas=4)).as_dict(curves=True)
    assert answers(report) == answers(json.loads(json_text(direct)))
    assert all(a["settings"] is not None for a in report["certified"])
    squared = run_json([*argv, "--loss", "squared", "--method", "bound"])
    assert squared["certified"] and all(a["settings"] is None and "no certified sigma" in a["note"]
                                        and "least squares" in a["note"] for a in squared["certified"])


def test_parse_split_reads_back_the_split_it_wrote():
    for text in ("iid", "shards", "group_labels", "dirichlet:0.5", "fedml:0.1", "labels:3"):
        split = parse_split(text)
        assert parse_split(split if isinstance(split, str) else f"{split[0]}:{split[1]}") == split


def test_the_options_offer_the_simulators_data_sets_and_models():
    """The choices of --data and --model are written out in verify.named_problem (its --help
    imports no torch): they are sim.federated's."""
    from fedbound.sim import federated
    from fedbound.verify import named_problem

    assert set(named_problem.DATASETS) == set(federated.DATASETS)
    assert set(named_problem.MODELS) == set(federated.MODELS)


@pytest.mark.parametrize("argv, message", [
    (["--data", "tiny"], "--data='tiny' must be one of digits, breast_cancer, mnist, cifar10"),
    (["--data", "breast_cancer", "--model", "cnn"], "--model=cnn needs image data: --data=breast_cancer"),
    (["--data", "digits", "--split", "dirichlet:0"], "--split='dirichlet:0': the Dirichlet concentration"),
    (["--data", "digits", "--split", "dirichlet:-1"], "must be a finite number > 0"),
    (["--data", "digits", "--split", "labels:11"], "--split=labels:11: 11 classes per client, but "
                                                   "--data=digits has 10 classes"),
    (["--data", "digits", "--split", "group_labels", "--sizes", ",".join(["1"] * 11)],
     "--split=group_labels needs a class per group: --sizes gives 11 groups"),
    (["--data", "digits", "--split", "shards", "--sizes", "1000,1000"], "--split=shards over --sizes"),
    (["--data", "digits", "--split", "halves"], "--split='halves' must be one of"),
    (["--model", "mlp"], "--model: needs --data"),
    (["--data", "digits", "--batch", "0"], "--batch=0 must be an integer >= 1"),
    (["--data", "digits", "--hidden", "8"], "--hidden: only with --model mlp"),
    (["--data", "mnist"], "--data=mnist is read from files: give --data-dir"),
    (["--data", "digits", "--model", "mlp", "--hidden", "100000,100000"],
     "(the problem (--model mlp --hidden 100000,100000 on --data digits)): this run needs about"),
    (["--data", "digits", "--batch", "100000000", "--alpha", "0.1"], "--batch=1e+08"),
])
def test_bad_input_names_the_option(capsys, argv, message):
    base = [a for a in HFL if a not in ("--sizes", "2,2")] if "--sizes" in argv else HFL
    code = main([*base, *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err, err


def test_bad_input_of_mllsgd_names_its_options(capsys):
    code = main(["choose", "mllsgd", "--hubs", "11", "--workers-per-hub", "1", "--K", "16",
                 "--data", "digits", "--split", "group_labels"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--hubs x --workers-per-hub gives 11 groups" in err and "\n" not in err, err
