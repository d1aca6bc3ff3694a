"""The hardened interface: random and malformed input through the Python API and the CLI.

Every call either returns finite numbers (or a bound that is +inf, reported as such) or
raises a ValueError / exits with status 2 and one line naming the problem: never another
exception, never a traceback, never NaN. The same seed gives the same JSON.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds.core import Param
from fedbound.sim.trace import DIVERGENCE_THRESHOLD
from fedbound.verify import adapter_for, check, default_scenario, load_scenario
from fedbound.verify.cli import main

RESULTS = [(row["key"], v) for row in bounds.list() for v in row["variants"]]
KEYS = sorted({k for k, _ in RESULTS})
FUZZ = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

MALFORMED = st.one_of(
    st.none(), st.booleans(), st.text(max_size=4),
    st.sampled_from([math.nan, math.inf, -math.inf, -1.0, 0.0, 1e308, -1e-308, 10**30]),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


def in_domain(p: Param, n: int) -> st.SearchStrategy:
    """A value in the parameter's domain (a vector of n entries for per-worker ones)."""
    scalar = {
        "positive": st.floats(1e-6, 1e6), "nonnegative": st.floats(0, 1e6),
        "unit": st.floats(0, 0.999), "probability": st.floats(1e-3, 1),
        "positive_integer": st.integers(1, 4096), "weights": st.floats(0.1, 1),
    }[p.domain]
    if not p.vector:
        return scalar
    vec = st.lists(scalar, min_size=n, max_size=n).map(np.array)
    return vec.map(lambda a: a / a.sum()) if p.domain == "weights" else vec


@st.composite
def parameter_values(draw, thm: bounds.Theorem) -> dict:
    """Mostly admissible-looking values; some malformed, missing or unknown."""
    n = draw(st.integers(1, 5))
    values = {}
    for name, p in thm.params.items():
        roll = draw(st.integers(0, 19))  # (hypothesis shrinks towards 0: the usual case)
        if roll == 19:
            continue  # missing
        values[name] = draw(MALFORMED) if roll == 18 else draw(in_domain(p, n))
    if draw(st.integers(0, 19)) == 19:
        values["no_such_parameter"] = 1.0
    return values


def assert_bound_like(x):
    x = np.asarray(x, dtype=float)
    assert not np.isnan(x).any() and not (x == -np.inf).any()


@pytest.mark.parametrize("key, variant", RESULTS)
@FUZZ
@given(data=st.data())
def test_api_returns_numbers_or_a_clear_error(key, variant, data):
    thm = bounds.get(key, variant)
    values = data.draw(parameter_values(thm))
    calls = {"evaluate": thm.evaluate, "terms": thm.terms, "admissible": thm.admissible,
             "violations": thm.violations}
    if thm.step is not None:
        calls["max_step"] = lambda **v: thm.max_step(**{k: x for k, x in v.items() if k != thm.step})
    for name, call in calls.items():
        try:
            out = call(**values)
        except ValueError as e:
            assert str(e).strip(), f"{name}: empty error message"
            continue
        if name == "evaluate":
            assert_bound_like(out)
        elif name == "terms":
            for v in out.values():
                assert_bound_like(v)
        elif name == "max_step":
            assert np.isfinite(out) and out > 0


def _params_json(draw_values: dict) -> str:
    return json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v
                       for k, v in draw_values.items()}, allow_nan=True)


@pytest.mark.parametrize("key", KEYS)
@FUZZ
@given(data=st.data())
def test_cli_bound_and_step_never_crash(key, data, capsys):
    thm = bounds.get(key)
    text = data.draw(st.one_of(parameter_values(thm).map(_params_json),
                               st.text(max_size=20), st.just("[1, 2]"), st.just("{\"L\": NaN}")))
    command = data.draw(st.sampled_from(["bound", "step"]))
    code = main([command, key, "--params", text, "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2)
    if code in (0, 1):  # 1: `bound` at inadmissible parameters
        assert "NaN" not in out and json.loads(out)
        assert (code == 1) == (command == "bound" and json.loads(out)["admissible"] is False)
    else:
        assert err.startswith("fedbound: error: ") and err.count("\n") == 1, err


@st.composite
def mutated_scenario(draw, key: str) -> dict:
    """The default scenario with one to three fields replaced by arbitrary JSON values."""
    base = default_scenario(key).to_dict()
    names = draw(st.lists(st.sampled_from(sorted(base)), min_size=1, max_size=3, unique=True))
    for name in names:
        base[name] = draw(st.one_of(MALFORMED, st.integers(-3, 3), st.floats(-2, 2)))
    if draw(st.integers(0, 9)) == 9:
        base["no_such_field"] = 1
    return base


@pytest.mark.parametrize("key", KEYS)
@FUZZ
@given(data=st.data())
def test_malformed_scenarios_are_rejected_naming_the_field(key, data, tmp_path_factory, capsys):
    scen = data.draw(mutated_scenario(key))
    text = json.dumps(scen, allow_nan=True)
    try:
        load_scenario(key, text)
    except ValueError as e:
        assert str(e).strip()
        path = tmp_path_factory.mktemp("s") / "scenario.json"
        path.write_text(text)
        assert main(["check", key, "--scenario", str(path), "--json"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fedbound: error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("argv", [
    ["nope"], ["bound"], ["bound", "mllsgd.nope", "--params", "{}"],
    ["bound", "mllsgd.theorem1", "--params", "{"], ["step", "mllsgd.theorem1"],
    ["check", "mllsgd.theorem1", "--scenario", "/no/such/file"], ["check", "--battery", "x"],
    ["sweep"], ["report", "--db"], ["scenario", "mllsgd.nope"],
])
def test_bad_command_lines_exit_2_with_one_line(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedbound: error: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("key", KEYS)
def test_same_seed_same_json(key, capsys, tmp_path):
    small = default_scenario(key).to_dict()
    small["replicas"] = min(small.get("replicas", 4), 4)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(small))
    outs = []
    for _ in range(2):
        assert main(["check", key, "--scenario", str(path), "--json"]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert "NaN" not in outs[0]
    verdict = json.loads(outs[0])
    assert verdict["scenario"] == load_scenario(key, small).to_dict()


def test_an_infinite_bound_is_never_admissible_nor_a_number(capsys):
    """A bound beyond the float range is +inf (a valid upper bound, never NaN); the command
    never calls such parameters admissible: with L = 1e200 condition (12) overflows and fails
    (exit 1, the value written "inf"); with sigma = 1e308 alone the conditions hold and the
    command refuses, naming sigma (exit 2)."""
    thm = bounds.get("mllsgd.theorem1")
    v = {"L": 1e200, "beta": 0, "sigma": 1e200, "Delta": 1, "eta": 1e-3, "K": 64, "q": 2,
         "tau": 4, "zeta": 0.5, "a": np.full(2, 0.5), "p": np.ones(2)}
    assert thm.evaluate(**v) == math.inf and not thm.admissible(**v)
    code = main(["bound", "mllsgd.theorem1", "--params",
                 json.dumps({**v, "a": [0.5, 0.5], "p": [1, 1]}), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["value"] == "inf" and out["admissible"] is False
    big_sigma = {**v, "L": 1, "sigma": 1e308, "a": [0.5, 0.5], "p": [1, 1]}
    code = main(["bound", "mllsgd.theorem1", "--params", json.dumps(big_sigma), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "not finite" in err and "sigma=1e+308" in err


@pytest.mark.parametrize("key", KEYS)
def test_a_step_far_above_the_admissible_range_is_reported_as_diverged(key):
    """Replicas that blow up make the verdict "diverged" with measured = inf, never a huge
    finite number passed off as a measurement (problems with bounded gradients, such as
    logistic regression, cannot blow up: their measurement stays finite)."""
    thm = bounds.get(key)
    base = default_scenario(key)
    if thm.step is None or thm.step not in base.to_dict():
        pytest.skip(f"{key}: no free step in its scenario")
    step = check(key, base.replace(replicas=2)).params[thm.step]
    s = load_scenario(key, {**base.to_dict(), thm.step: 1e4 * step,
                            "replicas": min(base.to_dict().get("replicas", 4), 4)})
    params = adapter_for(key).parameters(s)
    if not np.all(np.isfinite(thm.evaluate(**params))):
        # a bound that is +inf where its proof does not reach (tdcd.deadline_pl outside
        # (R1)-(R2)) is no number to compare with: the check refuses, naming why
        assert not thm.admissible(**params)
        with pytest.raises(ValueError, match="not finite.*its conditions fail too"):
            check(key, s)
        return
    v = check(key, s)
    assert not v.admissible
    if v.verdict == "diverged":
        assert v.measured_mean == math.inf and v.diverged > 0
    else:
        assert v.diverged == 0 and math.isfinite(v.measured_mean)
        assert v.measured_ci[1] < DIVERGENCE_THRESHOLD


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.floats(-2, 2), st.text(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


@FUZZ
@given(spec=st.fixed_dictionaries(
    {"key": st.sampled_from(KEYS)},
    optional={"variant": JSON_VALUES, "exact": JSON_VALUES, "base": JSON_VALUES,
              "grid": st.one_of(JSON_VALUES, st.dictionaries(st.sampled_from(["K", "p", "eta", "seed"]),
                                                             st.lists(JSON_VALUES, max_size=2), max_size=2)),
              "random": JSON_VALUES}))
def test_malformed_sweep_specs_are_rejected_with_a_clear_error(spec):
    from fedbound.verify.sweep import SweepSpec

    try:
        SweepSpec.from_dict(spec).scenarios()
    except ValueError as e:
        assert str(e).strip()
