"""A chooser's inputs declared once (verify/declare.py): the options, the scenario file's fields
and their validation come from the declaration, for every registered chooser.

Values are drawn from each declaration itself (as scipy's newer infrastructure draws test
inputs from the parameter declaration that validates them): a value outside an input's range
is refused in one line naming the option as typed (``--alpha=-1``) and, given as a field of a
scenario file, the file's field (``--scenario s.json: alpha=-1``), exit 2, before anything
runs; from Python, the keyword. No chooser defines argument parsing of its own."""

from __future__ import annotations

import ast
import inspect
import json
import math
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedbound.verify.api import Chooser, FieldError, Group, Input, choosers
from fedbound.verify.cli import main
from fedbound.verify.cli.choose import scenario_fields
from fedbound.verify.declare import checked_declaration, file_fields, inputs_of

#: the options a chooser needs besides the one under test to get as far as checking it
BASE = {"hfl": ["--sizes", "2,2", "--delays", "0.01,0.85,0.001,0.085,4,2,0.4,0.2", "--T", "20",
                "--L", "1", "--sigma", "1", "--Delta", "1"]}


def numeric_inputs():
    """(command, input) for every bounded number input of every registered chooser."""
    return [(name, inp) for name, cls in choosers().items() for inp in inputs_of(cls.declared)
            if inp.kind in (int, float) and (inp.low > -math.inf or inp.high < math.inf)]


@st.composite
def outside(draw, inp: Input):
    """A number the input's range refuses: below low (at low when open) or above high."""
    sides = []
    if inp.low > -math.inf:
        sides.append(st.just(inp.low) if inp.low_open else
                     st.floats(inp.low - 1e6, inp.low, exclude_max=True).filter(lambda x: x < inp.low))
    if inp.high < math.inf:
        sides.append(st.just(inp.high) if inp.high_open else
                     st.floats(inp.high, inp.high + 1e6, exclude_min=True).filter(lambda x: x > inp.high))
    value = draw(st.one_of(*sides))
    if inp.kind is int:
        value = math.floor(value) if value < inp.low + inp.low_open else math.ceil(value)
        if inp.low <= value <= inp.high and not (inp.low_open and value == inp.low):
            value = int(inp.low) - 1
    return value


def _text(value) -> str:
    return str(int(value)) if isinstance(value, int) else repr(float(value))


@pytest.mark.parametrize("command, inp", numeric_inputs(), ids=lambda x: getattr(x, "name", x))
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_value_outside_the_declared_range_is_refused_naming_the_option(command, inp, data, capsys):
    value = data.draw(outside(inp))
    code = main(["choose", command, *BASE.get(command, []), "--method", "bound",
                 f"{inp.flag}={_text(value)}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"fedbound: error: {inp.flag}") and "\n" not in err, err


@pytest.mark.parametrize("command, inp", [
    (c, i) for c, i in numeric_inputs() if i.name in file_fields(choosers()[c].declared,
                                                                 scenario_fields(choosers()[c]))],
    ids=lambda x: getattr(x, "name", x))
def test_a_file_field_outside_its_range_is_named_as_the_file_writes_it(command, inp, tmp_path,
                                                                       monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = inp.low - 1 if inp.low > -math.inf else inp.high + 1
    bad = int(bad) if inp.kind is int else bad
    (tmp_path / "s.json").write_text(json.dumps({inp.name: [bad] if inp.many else bad}))
    code = main(["choose", command, "--scenario", "s.json", "--method", "bound"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and f"--scenario s.json: {inp.name}=" in err and "\n" not in err, err


@pytest.mark.parametrize("name", sorted(choosers()))
def test_the_help_lists_every_declared_input_with_its_rule(name, capsys):
    cls = choosers()[name]
    with pytest.raises(SystemExit):
        main(["choose", name, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for inp in inputs_of(cls.declared):
        assert inp.flag in out and inp.rule() in out, inp.name


@pytest.mark.parametrize("name", sorted(choosers()))
def test_no_chooser_parses_arguments(name):
    """Neither an argparse import nor an add_argument/parse_args call in a chooser's module,
    and no method of the old per-chooser parsing."""
    cls = choosers()[name]
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.getmodule(cls))))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names} | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    called = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute)}
    assert "argparse" not in imported and not {"add_argument", "parse_args"} & called
    assert not any(hasattr(cls, m) for m in ("add_arguments", "from_arguments"))
    checked_declaration(cls.declared)


def test_the_python_api_names_the_keyword_and_the_command_line_the_option(capsys):
    from fedbound.verify.papers.mllsgd import TauEta

    with pytest.raises(FieldError, match=r"^p\[1\]=1.5 must lie in \(0, 1\]$"):
        TauEta(p=[0.5, 1.5])
    code = main(["choose", "mllsgd", "--p", "0.5,1.5"])
    assert code == 2 and capsys.readouterr().err == "fedbound: error: --p[1]=1.5 must lie in (0, 1]\n"


def test_a_file_field_is_overridden_by_its_option(tmp_path, monkeypatch, capsys):
    """A chooser input given both ways: the option wins; given in the file only, the file's
    value is taken (the report's inputs say which)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps({"t_comm": 3.0, "t_hub": 2.0, "K": 32}))
    argv = ["choose", "mllsgd", "--scenario", "s.json", "--method", "bound", "--tau", "1",
            "--eta", "0.1", "--json"]
    assert main([*argv, "--t-hub", "5"]) == 0
    inputs = json.loads(capsys.readouterr().out)["inputs"]
    assert (inputs["t_comm"], inputs["t_hub"], inputs["scenario"]["K"]) == (3.0, 5.0, 32)


def test_the_parse_of_a_list_names_the_option_and_keeps_exact_decimals():
    delays = Input("delays", float, low=0, many=True, length=2, exact=True)
    assert delays.parse("0.1,2", "--delays") == ["0.1", "2"]
    for text, message in (("0.1,,2", "--delays must be comma-separated numbers, got '0.1,,2'"),
                          ("0.1", "--delays has 1 entries, needs 2"),
                          ("0.1,-2", "--delays[1]=-2 must lie in [0, inf)"),
                          ("0.1,nan", "--delays[1]=NaN must be finite")):
        with pytest.raises(FieldError) as e:
            delays.parse(text, "--delays")
        assert str(e.value).startswith(message), str(e.value)
    count = Input("replicas", int, default=32, low=2)
    assert count.check(None, "x") == 32 and count.parse("8", "--replicas") == 8
    with pytest.raises(FieldError, match=r"^--replicas=1000000000.0 must be an integer >= 2, written"):
        count.parse("1e9", "--replicas")
    with pytest.raises(FieldError, match=r"^--replicas='x' must be an integer$"):
        count.parse("x", "--replicas")


def test_a_declaration_that_clashes_is_refused_at_registration():
    from fedbound.verify.api import register_chooser

    for declared in ((Input("json", int),), (Input("a", int), Input("a", float)),
                     (Input("a", int, option="--b"), Input("b", int))):
        cls = type("Clash", (Chooser,), {"key": "mllsgd.theorem1", "declared": declared,
                                         "command": "clash"})
        with pytest.raises(ValueError, match="declared twice or reserved"):
            register_chooser(cls)
    assert isinstance(choosers()["hfl"].declared[-1], Group)


@pytest.mark.parametrize("name", ["hfl", "mllsgd", "tdcd"])
def test_device_cpu_given_is_the_default_bit_for_bit_and_a_missing_device_is_refused(name, capsys):
    """--device cpu runs the same search, the same numbers; a device torch does not know, or
    CUDA where there is none, is refused naming --device (exit 2) before anything runs."""
    argv = {"hfl": [*BASE["hfl"], "--S", "0,2", "--alpha", "0.25,0.5", "--replicas", "4"],
            "mllsgd": ["--K", "32", "--tau", "1,2", "--eta", "0.1,0.2", "--replicas", "4"],
            "tdcd": ["--Q", "1,2", "--eta", "0.1,0.2", "--replicas", "4"]}[name]
    runs = []
    for extra in ([], ["--device", "cpu"]):
        assert main(["choose", name, *argv, *extra, "--json", "--curves"]) == 0
        report = json.loads(capsys.readouterr().out)
        report.pop("seconds")
        runs.append(report)
    assert runs[0] == runs[1] and runs[0]["inputs"]["device"] == "cpu"
    for bad in ("gpu", *([] if __import__("torch").cuda.is_available() else ["cuda"])):
        assert main(["choose", name, *argv, "--device", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"fedbound: error: --device='{bad}': ") and err.count("\n") == 1, err


def test_the_graphs_mllsgd_offers_are_the_topologys():
    """--graph's choices are written out in the chooser (loading the plugin imports no scipy):
    they are bounds.topology's."""
    from fedbound.bounds import topology
    from fedbound.verify.papers.mllsgd import choose as mllsgd_choose

    assert mllsgd_choose.GRAPH_KINDS == topology.GRAPH_KINDS
