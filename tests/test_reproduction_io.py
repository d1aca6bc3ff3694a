"""A reproduction stored as JSON (``Reproduction.to_dict(curves=True)``, ``fedbound
reproduce ... --json --curves``) and loaded back (``verify.reproduction_io``): every number
bit for bit, the same figures, and a malformed or oversized file refused with one line. On
the synthetic paper of ``tests/synth_claims.py`` (seeded numpy draws, no simulator)."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fedbound.verify import claims as catalogue
from fedbound.verify.api import claim_figure, load_reproduction, reproduction_from_dict
from fedbound.verify.limits import ResourceError
from fedbound.verify.reproduce import reproduce
from fedbound.verify.scenario import json_text

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import synth_claims  # noqa: E402  (registers the synthetic paper)

OK = ["fig1.a-lower", "fig1.b-lower", "fig2.b-like-c"]


@pytest.fixture(scope="module")
def live():
    """A reproduction of the synthetic paper: three decided claims under two readings and
    one failed run, with a NaN and an infinity in a bound (inadmissible, infinite) and a
    NaN in a curve, which JSON writes as null and "inf"."""
    if "synth.base" not in catalogue._EXPERIMENTS:
        synth_claims.register()
    rep = reproduce("synth", claim_ids=[*OK, "fig3.broken"], quick=True, seed=5)
    run = rep.runs[0]
    a = run.outcome.curves["A"]
    bound, y = a.bound.copy(), a.y.copy()
    bound[:2], y[0, -1] = (np.nan, np.inf), np.nan
    curves = {**run.outcome.curves, "A": replace(a, bound=bound, y=y)}
    runs = (replace(run, outcome=replace(run.outcome, curves=curves)), *rep.runs[1:])
    yield replace(rep, runs=runs)
    synth_claims.unregister()


def _stored(rep, tmp_path: Path) -> Path:
    path = tmp_path / "claims.json"
    path.write_text(json_text(rep.to_dict(curves=True)))
    return path


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=40, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def test_a_stored_reproduction_loads_bit_for_bit_and_draws_the_same_figures(live, tmp_path):
    loaded = load_reproduction(_stored(live, tmp_path))
    assert json_text(loaded.to_dict(curves=True)) == json_text(live.to_dict(curves=True))
    assert loaded.plan == live.plan and loaded.papers == live.papers
    # the decisions and their tests are equal as objects (every float compared exactly)
    assert [(r.claim, r.decisions, r.error) for r in loaded.results] == \
        [(r.claim, r.decisions, r.error) for r in live.results]
    assert [r.verdict for r in loaded.results] == ["agrees", "contradicts", "undecided", "error"]
    for one, two in zip(live.runs, loaded.runs, strict=True):
        assert (one.experiment, one.plan, one.error, one.seconds) == \
            (two.experiment, two.plan, two.error, two.seconds)
        if one.outcome is None:
            assert two.outcome is None
            continue
        assert list(one.outcome.curves) == list(two.outcome.curves)  # the order drawn
        for c, d in zip(one.outcome.curves.values(), two.outcome.curves.values(), strict=True):
            assert c.x.tobytes() == d.x.tobytes() and c.y.tobytes() == d.y.tobytes()
            assert (c.bound is None and d.bound is None) or c.bound.tobytes() == d.bound.tobytes()
        assert {k: v.tolist() for k, v in one.outcome.scalars.items()} == \
            {k: v.tolist() for k, v in two.outcome.scalars.items()}
        assert (one.outcome.notes, one.outcome.prediction) == (two.outcome.notes, two.outcome.prediction)
    assert np.isnan(loaded.runs[0].outcome.curves["A"].y[0, -1])
    assert _png(claim_figure(live.results[0], live)) == _png(claim_figure(loaded.results[0], loaded))


def _refused(data, tmp_path) -> str:
    path = tmp_path / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    with pytest.raises(ValueError) as e:
        load_reproduction(path)
    message = str(e.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_malformed_file_is_refused_with_one_line_naming_the_field(live, tmp_path):
    good = live.to_dict(curves=True)
    assert "not valid JSON" in _refused("{", tmp_path)
    assert "must be a JSON object" in _refused("[1]", tmp_path)
    bad = json.loads(json_text(good))
    bad["claims"][0]["readings"]["as-printed"]["tests"][0]["effect"] = "big"
    assert 'claims[0].readings.as-printed.tests[0].effect = "big" must be a number' in \
        _refused(bad, tmp_path)
    bad = json.loads(json_text(good))
    bad["claims"][2]["readings"]["flipped"]["verdict"] = "maybe"
    assert 'claims[2].readings.flipped.verdict = "maybe" must be one of agrees' in _refused(bad, tmp_path)
    bad = json.loads(json_text(good))
    bad["runs"][0]["outcome"]["curves"][1]["y"][1] = [1.0]
    assert "runs[0].outcome.curves[1].y is not a rectangular list" in _refused(bad, tmp_path)
    bad = json.loads(json_text(good))
    bad["claims"][1]["id"] = "synth.fig9.gone"
    assert "'synth.fig9.gone' is not a registered claim" in _refused(bad, tmp_path)
    bad = json.loads(json_text(good))
    del bad["runs"]
    assert "--curves" in _refused(bad, tmp_path)
    bad = json.loads(json_text(good))
    del bad["runs"][0]
    assert ("claims[0].readings holds as-printed, flipped; runs holds synth.base under flipped"
            in _refused(bad, tmp_path))
    bad = json.loads(json_text(good))
    bad["runs"][1]["outcome"] = None
    assert "claims[0]: runs lacks an outcome of its experiment synth.base" in _refused(bad, tmp_path)


def test_a_file_above_the_input_limit_is_refused_before_it_is_read(live, tmp_path, monkeypatch):
    path = _stored(live, tmp_path)
    monkeypatch.setenv("FEDBOUND_MAX_INPUT", "1KiB")
    with pytest.raises(ResourceError, match="above the input limit of 1 KiB"):
        load_reproduction(path)


def test_cli_json_curves_is_the_loadable_file(live, capsys, tmp_path, monkeypatch):
    """``--json --curves`` writes what load_reproduction loads; ``--json`` alone, no runs."""
    from fedbound.verify.cli import main

    monkeypatch.chdir(tmp_path)  # the command's store of runs
    outs = {}
    for extra in ((), ("--curves",)):
        assert main(["--plugin", "synth_claims", "reproduce", "synth", "--quick", "--claim",
                     "fig1.a-lower", "--json", *extra]) == 0
        outs[extra] = capsys.readouterr().out
    assert "runs" not in json.loads(outs[()])
    path = tmp_path / "cli.json"
    path.write_text(outs[("--curves",)])
    rep = load_reproduction(path)
    assert json_text(rep.to_dict(curves=True)) == outs[("--curves",)].strip()
    assert reproduction_from_dict(json.loads(outs[("--curves",)])).counts() == {"agrees": 1}
    assert main(["--plugin", "synth_claims", "reproduce", "synth", "--curves"]) == 2
    assert "--curves" in capsys.readouterr().err


def test_a_rerun_finds_a_stored_number_changed_in_its_last_bit(live):  # the fixture registers
    """reproduction_differences, the guard of a stored file: a rerun of one claim with the
    stored plan gives no difference; one curve value moved by one ulp, or a test's effect,
    is named; another seed differs everywhere."""
    from fedbound.verify.api import reproduction_differences

    stored = reproduce("synth", claim_ids=OK, quick=True, seed=5)
    rerun = reproduce("synth", claim_ids=["fig2.b-like-c"], quick=True, seed=5)
    assert reproduction_differences(stored, rerun) == []
    data = json.loads(json_text(stored.to_dict(curves=True)))
    y = data["runs"][1]["outcome"]["curves"][2]["y"]
    y[0][3] = float(np.nextafter(y[0][3], np.inf))
    stale = reproduction_from_dict(data)
    assert reproduction_differences(stale, rerun) == [
        f"synth.base (flipped).outcome.curves[2].y[0][3]: stored {y[0][3]!r}, "
        f"live {float(np.nextafter(y[0][3], -np.inf))!r}"]
    other = reproduce("synth", claim_ids=["fig2.b-like-c"], quick=True, seed=6)
    found = reproduction_differences(stored, other)
    assert found[0] == "plan.seed: stored 5, live 6" and len(found) > 10


def test_claims_grid_draws_a_panel_per_decided_claim(live):
    """One visible panel per decided claim (the failed one has none), titled with its id
    and verdict, its primary reading's curves drawn (B and C only where the claim says so)."""
    import matplotlib.pyplot as plt

    from fedbound.verify.api import claims_grid

    fig = claims_grid(live.results, live, columns=2)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "fig1.a-lower: agrees", "fig1.b-lower: contradicts", "fig2.b-like-c: undecided"]
    # the curves, and the mark where a test is decided (fig2 is decided at no one point)
    assert [len(ax.get_lines()) for ax in panels] == [3 + 1, 3 + 1, 2]
    assert claims_grid(live.results[3:], live) is None
    plt.close(fig)
