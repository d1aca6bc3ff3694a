"""What a plugin returns is checked where it crosses the extension API (issue 42, item 2).

A plugin chooser whose calibrated step was NaN made ``fedbound choose`` exit 0 printing
``nan`` settings with ``regret -inf`` and ``passes yes``, and ``--json`` exit 2 ("internal
error: NaN in output", as bad input, with no log). Now every value a chooser, an experiment,
a claim or an adapter's comparison returns is checked (``verify.boundary``): a bad one is one
line naming the plugin, the hook and the field, exit 70 with a log; ``json_text``'s refusal
of a NaN is an internal error (70); and ``verify.testing`` finds the same in the plugin's own
tests (``check_chooser``, ``check_claims``, ``check_adapter``).
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedbound.verify import claims as catalogue
from fedbound.verify.api import (
    Chooser,
    Claim,
    Curve,
    Evaluation,
    Experiment,
    Footprint,
    Knob,
    Outcome,
    Proposal,
    above,
    register_chooser,
    register_claim,
    register_experiment,
    unregister_chooser,
    unregister_paper,
)
from fedbound.verify.boundary import PluginError
from fedbound.verify.cli import main
from fedbound.verify.reproduce import reproduce
from fedbound.verify.scenario import json_text
from fedbound.verify.testing import check_adapter

MODULE = __name__  # the "plugin" of the choosers below: this module


class Step(Chooser):
    """A well-behaved chooser of one knob; ``bad`` names the hook that returns a bad value."""

    name = "probe-step"
    key = "mllsgd.theorem1"
    command = "probestep"
    metric = "loss"
    summary = "a chooser for the tests of verify.boundary"
    replicas = 4
    screen_replicas = 2
    bad: str = ""

    @classmethod
    def from_arguments(cls, args, read_scenario):
        return cls()

    def inputs(self):
        return {"nan": math.nan} if self.bad == "inputs" else {"K": 10}

    def knobs(self):
        return [Knob("eta", (0.01, 0.1), "log", option="--eta")]

    def certified(self, variant):
        return Proposal({"eta": 0.01}, math.nan if self.bad == "certified" else 1.0)

    def calibrated(self):
        if self.bad == "calibrated":
            return Proposal({"eta": math.nan}, 1.0)
        if self.bad == "calibrated-knob":
            return Proposal({"step": 0.01}, 1.0)
        return Proposal({"eta": 0.1}, 2.0)

    def simulate(self, settings, replicas, *, paired):
        out = [Evaluation(dict(s), np.full(replicas, 1.0 + s["eta"])) for s in settings]
        if self.bad == "simulate":
            out[-1] = Evaluation(dict(settings[-1]), np.r_[np.full(replicas - 1, 1.0), np.nan])
        if self.bad == "simulate-count":
            out = out[:-1]
        return out


@pytest.fixture
def chooser():
    register_chooser(Step)
    yield Step
    unregister_chooser(Step.command)
    Step.bad = ""


def _log(err: str) -> str:
    match = re.search(r"traceback in (\S+);", err)
    assert match, err
    return Path(match.group(1)).read_text()


#: (the bad hook, the field the line names: a regular expression)
BAD = [("calibrated", r"Chooser\.calibrated\(\): settings\['eta'\] = NaN: must be a number, "
                      r"finite, > 0 \(the knob's scale is log\)"),
       ("calibrated-knob", r'Chooser\.calibrated\(\): settings = \{"step": 0\.01\}: must be a '
                           r"dict of the knobs eta"),
       ("certified", r"Chooser\.certified\(\): predicted = NaN"),
       ("simulate", r"Chooser\.simulate\(\): \[\d+\]\.values\[\d+\] = NaN"),
       ("simulate-count", r"Chooser\.simulate\(\): the evaluations = .* must be a list of \d+ "
                          r"Evaluation"),
       ("inputs", r"Chooser\.inputs\(\): inputs\['nan'\] = NaN")]


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("bad, field", BAD, ids=[b for b, _ in BAD])
def test_a_bad_value_from_a_plugin_chooser_is_one_line_naming_it_and_70(bad, field, json, chooser,
                                                                       capsys):
    """On main, a NaN step exited 0 with ``nan`` settings and ``passes yes`` (2 with --json,
    as bad input, and no log)."""
    Step.bad = bad
    code = main(["choose", "probestep", *(["--json"] if json else [])])
    out, err = capsys.readouterr()
    assert (code, out) == (70, ""), err
    assert err.count("\n") == 1 and err.startswith(
        f"fedbound: internal error: PluginError: plugin {MODULE!r} returned a bad value: "
        f"chooser 'probe-step' "), err
    assert re.search(field, err), err
    assert "PluginError" in _log(err)


def test_a_well_behaved_plugin_chooser_answers(chooser, capsys):
    assert main(["choose", "probestep", "--json"]) == 0
    assert '"eta": 0.01' in capsys.readouterr().out


@pytest.mark.parametrize("bad, field", BAD, ids=[b for b, _ in BAD])
def test_check_chooser_finds_the_bad_value_in_the_plugins_own_tests(bad, field, chooser):
    from fedbound.verify.testing import check_chooser

    check_chooser(Step())
    Step.bad = bad
    with pytest.raises(AssertionError, match=field):
        check_chooser(Step())


def test_nan_in_output_is_an_internal_error_naming_where(monkeypatch, capsys):
    """``json_text`` refused a NaN with a ValueError, which the command line answered as bad
    input (exit 2) without a log: a NaN in fedbound's output is a bug, never the input's."""
    with pytest.raises(RuntimeError, match=r"NaN in output at rows\[1\]\.value"):
        json_text({"rows": [{"value": 1.0}, {"value": math.nan}]})
    from fedbound.verify import cli

    monkeypatch.setitem(cli.COMMANDS, "list", replace(cli.COMMANDS["list"],
                                                      run=lambda args: {"x": math.nan}))
    code = main(["list", "--json"])
    out, err = capsys.readouterr()
    assert code == 70 and out == "" and err.count("\n") == 1, err
    assert "internal error: RuntimeError: NaN in output at x" in err and "NaN" in _log(err)


# ---------------------------------------------------------------------- claims


def _outcome(plan, y_last=1.0):
    x = np.arange(3.0)
    y = np.tile([3.0, 2.0, 1.0], (plan.seeds, 1)) + np.arange(plan.seeds)[:, None] * 0.01
    y[-1, -1] = y_last
    return Outcome({"A": Curve("A", x, y), "B": Curve("B", x, y + 1)}, "round", "loss")


def _register(run, decide):
    register_experiment(Experiment("probe.fig1", run, (3, 3),
                                   lambda plan: Footprint.of({"x": 8.0}, {"x": 8.0})))
    register_claim(Claim("probe.fig1.a-lower", "Probe 2024, Fig. 1", "A below B", {}, "none",
                         "probe.fig1", decide))


def _lower(o):
    return [above("loss(B) - loss(A)", o.at("B", 2) - o.at("A", 2), margin=0.1,
                  source="the tests' own")]


@pytest.fixture
def probe_paper(monkeypatch, tmp_path):
    """The probe paper, unregistered afterwards; the working directory a fresh one, so that
    ``fedbound reproduce``'s default store (``fedbound-reproduce.sqlite`` there) holds no run
    of another test's probe: every probe's run function lives in this module, so their code
    fingerprints, and their runs' keys in the store, are the same."""
    monkeypatch.chdir(tmp_path)
    yield
    unregister_paper("probe")


CLAIM_BAD = {
    "nan-metric": (lambda plan: _outcome(plan, math.nan), _lower,
                   "experiment 'probe.fig1' Experiment.run(): curves['A'].y["),
    "not-an-outcome": (lambda plan: {"A": [1, 2]}, _lower,
                       "Experiment.run(): the outcome = "),
    "no-test": (_outcome, lambda o: [], "claim 'probe.fig1.a-lower' Claim.decide(): the tests"),
    "forged-test": (_outcome, lambda o: [replace(_lower(o)[0], effect=math.nan)],
                    "Claim.decide(): [0].effect = NaN"),
}


@pytest.mark.parametrize("case", sorted(CLAIM_BAD))
def test_a_bad_outcome_or_test_of_a_plugin_claim_is_70_naming_it(case, probe_paper, capsys):
    from fedbound.verify.testing import check_claims

    run, decide, field = CLAIM_BAD[case]
    _register(run, decide)
    code = main(["reproduce", "probe", "--quick", "--json"])
    out, err = capsys.readouterr()
    assert (code, out) == (70, ""), err
    assert err.count("\n") == 1 and field in err, err
    with pytest.raises(AssertionError, match=re.escape(field)):
        check_claims("probe")


def test_a_well_behaved_plugin_claim_passes_its_checks(probe_paper):
    from fedbound.verify.testing import check_claims

    _register(_outcome, _lower)
    check_claims("probe")
    assert reproduce("probe", quick=True).results[0].verdict == "agrees"


def test_a_run_that_raises_is_still_an_error_row_not_a_bad_value():
    """The engine's synthetic paper (tests/synth_claims.py) passes the checks, and its run
    that raises stays an error row of the reproduction (exit 4), not a bad value (70)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import synth_claims

    if "synth.base" not in catalogue._EXPERIMENTS:
        synth_claims.register()
    try:
        rep = reproduce("synth", claim_ids=["fig1.a-lower", "fig3.broken"], quick=True)
        assert [r.verdict for r in rep.results] == ["agrees", "error"]
    finally:
        synth_claims.unregister()


# ---------------------------------------------------------------------- adapters


def test_an_adapters_comparison_that_is_nan_fails_check_adapter_and_is_70(monkeypatch, capsys):
    """An adapter whose ``_compare`` returns a NaN mean: ``check_adapter`` records it as a
    failed check (the NaN reached the verdict before), and ``check`` exits 70."""
    from fedbound.verify.adapter import adapter_for

    cls = type(adapter_for("mllsgd.theorem1"))
    compare = cls._compare
    monkeypatch.setattr(cls, "_compare", lambda self, bound, m: replace(compare(self, bound, m),
                                                                         mean=math.nan))
    (result,) = check_adapter("mllsgd.theorem1", checks=["holds_on_default"])
    assert result.outcome == "failed"
    assert "adapter mllsgd.theorem1 Adapter._compare(): mean = NaN" in result.message
    code = main(["check", "mllsgd.theorem1", "--json"])
    out, err = capsys.readouterr()
    assert (code, out) == (70, "") and "Adapter._compare(): mean = NaN" in err, err


def test_a_plugin_error_names_the_loaded_plugin_that_holds_the_code():
    from fedbound.verify.boundary import plugin_of

    assert plugin_of(Step) == MODULE
    from fedbound.verify.papers.hfl.choose import SyncTime

    assert plugin_of(SyncTime) == "fedbound.verify.papers.hfl"
    assert isinstance(PluginError("x"), RuntimeError)
