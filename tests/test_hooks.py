"""The hook specification (``verify.hooks``) and ``fedbound plugins``: one declaration of
everything a plugin may register, each registration attributed to the plugin that made it,
and each broken contract flagged (exit 1)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest

import fedbound.verify.api as api
from fedbound import bounds
from fedbound.verify import hooks, plugins
from fedbound.verify.cli import main
from fedbound.verify.testing import registered

ROOT = Path(__file__).resolve().parents[1]

#: a plugin whose every registration breaks its hook's contract in one way
BROKEN = '''
import dataclasses
from pathlib import Path

import numpy as np
from test_api import XScenario
from test_api import build as square

from fedbound import bounds
from fedbound.verify import api


def build(variant):
    return dataclasses.replace(square(variant), key="bad.square")


bounds.register("bad.square", "x^2 <= 2 x^2", build, ("proof",), "proof")  # no statuses
bounds.register("bad.alone", "x^2 <= 2 x^2", build, {"proof": "holds"}, "proof")  # no adapter


@api.register_adapter
class Square(api.Adapter):  # neither _footprint nor _draw
    key = "bad.square"
    scenario_type = XScenario
    default = XScenario()

    def _derive(self, s, thm):
        return {"x": s.x}

    def _measure(self, s, params, exact):
        return api.Measurement(values=np.full(s.replicas, s.x**2))


here = Path(__file__).parent
api.register_witness_dir(here / "bad_witnesses")
api.register_tightness(here / "bad_tightness.json")
api.register_family(api.Family("bad.alone", "x", (1.0,), "none", lambda v: XScenario(x=v)))
api.register_sweep("bad.square", api.Sweep("x", "nope", (1.0, 2.0, 3.0)))


def run(plan):
    raise NotImplementedError


def footprint(plan):
    return api.Footprint.of({}, {})


api.register_experiment(api.Experiment("bad.lonely", run, (2, 4), footprint))
api.register_experiment(api.Experiment("bad.exp", run, (2, 4), footprint))
api.register_claim(api.Claim("bad.exp.uncited", " ", "a claim", {}, "", "bad.exp", lambda o: []))
'''
WITNESS = {"key": "bad.gone", "variant": "proof", "exact": True, "expect": "holds", "note": "",
           "scenario": {}}
TABLE = {"bad.alone": {"variant": "proof", "status": "refuted", "default": {}, "tightest": None,
                       "unbounded": False, "growth": None, "variants": {}}}


def test_the_hooks_are_the_register_functions_of_the_public_api():
    """One declaration: every register function a plugin may call (bounds.register and the
    register_* of verify.api) is one hook, with a contract, and nothing else is."""
    calls = {f"verify.api.{n}" for n in api.__all__ if n.startswith("register_")}
    assert {h.call for h in api.HOOKS} == calls | {"bounds.register"}
    assert len({h.name for h in api.HOOKS}) == len(api.HOOKS) == 9
    for h in api.HOOKS:
        assert h.contract and h.registers and hooks.hook(h.name) is h
        assert h.call.endswith(h.register.__name__) and callable(h.problems)
    with pytest.raises(ValueError, match="no hook 'nope'; hooks are theorems, adapters"):
        hooks.hook("nope")


def test_every_register_function_notes_the_hook_it_is_declared_as():
    """The name each register function notes its registrations under is its hook's name (a
    register function noting under another name would attribute nothing)."""
    for h in api.HOOKS:
        source = inspect.getsource(h.register)
        if h.name == "theorems":
            assert "caller()" in source
        else:
            assert f'note("{h.name}", ' in source, h.name


def test_a_registration_belongs_to_the_plugin_whose_code_made_it():
    """The papers' registrations belong to their plugins; one made here, outside any plugin,
    is listed apart (``fedbound plugins``: "outside any plugin")."""
    regs = hooks.registrations()
    assert regs["fedbound.verify.papers.hfl"]["theorems"] == [
        "hfl.corollary1", "hfl.deadline_pl", "hfl.deadline_quadratic", "hfl.lemma1", "hfl.theorem1",
        "hfl.theorem2"]
    assert regs["fedbound.verify.papers.afl"]["families"] and not regs[
        "fedbound.verify.papers.hfl"]["families"]
    theorem = bounds.get("afl.theorem1")
    with registered("toy.outside", "a planted result", lambda v: theorem, ("proof",), "proof"):
        assert "toy.outside" in hooks.registrations()[hooks.OUTSIDE]["theorems"]
        assert bounds.registry.origin("toy.outside") == "fedbound.verify.testing"
    assert plugins.owner("fedbound.verify.papers.hfl.adapters", plugins.modules()) == \
        "fedbound.verify.papers.hfl"
    assert plugins.owner("fedbound.verify.papersx", ["fedbound.verify.papers"]) is None


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """``fedbound --plugin bad_plugin plugins`` (text and JSON), in fresh processes."""
    tmp = tmp_path_factory.mktemp("hooks")
    (tmp / "bad_plugin.py").write_text(BROKEN)
    (tmp / "bad_witnesses").mkdir()
    (tmp / "bad_witnesses" / "bad.gone.json").write_text(json.dumps(WITNESS))
    (tmp / "bad_tightness.json").write_text(json.dumps(TABLE))
    env = {**{k: v for k, v in os.environ.items() if k != plugins.ENV},
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp), str(ROOT / "tests")])}
    fedbound = Path(sys.executable).with_name("fedbound")
    return {name: subprocess.run([str(fedbound), "--plugin", "bad_plugin", "plugins", *extra],
                                 env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
            for name, extra in (("json", ["--json"]), ("text", []))}


def test_fedbound_plugins_flags_each_broken_contract(broken_run):
    r = broken_run["json"]
    assert r.returncode == 1, r.stderr
    entries = {e["module"]: e for e in json.loads(r.stdout)}
    assert all(e["problems"] == [] for m, e in entries.items() if m != "bad_plugin")
    bad = entries["bad_plugin"]
    assert bad["where"] == "--plugin" and bad["loaded"] and bad["version"] is None
    assert bad["registered"]["theorems"] == ["bad.alone", "bad.square"]
    found = {(p["hook"], p["name"], p["problem"].split(":")[0]) for p in bad["problems"]}
    witness_dir, table = (bad["registered"][h][0] for h in ("witness_dirs", "tightness_tables"))
    assert found == {
        ("theorems", "bad.square", "no statuses registered"),
        ("theorems", "bad.alone", "no adapter registered"),
        ("adapters", "bad.square", "no _footprint"),
        ("adapters", "bad.square", "no _draw"),
        ("witness_dirs", witness_dir, "witness bad.gone.json"),
        ("tightness_tables", table, "row bad.alone"),
        ("tightness_tables", table, "no row for bad.square (regenerate it"),
        ("families", "bad.alone", "its result is registered as 'holds', not refuted"),
        ("sweeps", "bad.square over x", "field 'nope' is not a field of XScenario"),
        ("experiments", "bad.lonely", "no claim uses it"),
        ("claims", "bad.exp.uncited", "no citation (cite"),
    }, found
    text = broken_run["text"]
    assert text.returncode == 1 and "bad_plugin  (--plugin)" in text.stdout
    assert "  ! adapters bad.square: no _footprint: the resource limits" in text.stdout
    assert text.stdout.rstrip().endswith("11 problem(s), each marked !)")


def test_a_table_that_cannot_be_read_hides_no_other_row(tmp_path, capsys):
    """A plugin's broken tightness table: fedbound list keeps the others' slack (with a
    warning naming the file), fedbound plugins flags it."""
    from fedbound.verify.api import register_tightness, unregister_tightness
    from fedbound.verify.tightness import read, table

    broken = tmp_path / "tightness.json"
    broken.write_text("{not json")
    register_tightness(broken)
    try:
        with pytest.warns(UserWarning, match=f"tightness table {broken} is not valid JSON"):
            rows = table()
        assert "hfl.theorem2" in rows
        assert main(["plugins", "--json"]) == 1
        (entry,) = [e for e in json.loads(capsys.readouterr()[0]) if e["module"] is None]
        assert [(p["hook"], p["problem"].split(":")[0]) for p in entry["problems"]] == [
            ("tightness_tables", f"tightness table {broken} is not valid JSON")]
    finally:
        unregister_tightness(broken)
        read.cache_clear()


@pytest.fixture
def failing(tmp_path, monkeypatch):
    """An installed plugin (an entry point) that fails to import, with a fresh record."""
    (tmp_path / "plugin_fails.py").write_text("raise RuntimeError('a bug in the plugin')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_FAILED", {})
    monkeypatch.setattr(plugins, "_EXPLICIT", [])
    monkeypatch.delenv(plugins.ENV, raising=False)
    extra = [EntryPoint(name="fails", value="plugin_fails", group=plugins.GROUP)]
    real = entry_points
    monkeypatch.setattr(plugins, "entry_points", lambda **kw: [*real(**kw), *extra]
                        if kw.get("group") == plugins.GROUP else real(**kw))
    yield
    sys.modules.pop("plugin_fails", None)


def test_an_installed_plugin_that_fails_is_listed_with_its_failure(failing, capsys):
    code = main(["plugins", "--json"])
    out, err = capsys.readouterr()
    (entry,) = [e for e in json.loads(out) if e["module"] == "plugin_fails"]
    assert code == 1 and not entry["loaded"] and entry["where"] == "entry point 'fails'"
    assert "RuntimeError: a bug in the plugin" in entry["failure"]
    assert "failed to load" in err  # the warning every command gives
    code = main(["plugins"])
    out, _ = capsys.readouterr()
    assert code == 1 and "plugin_fails  (entry point 'fails')\n  ! plugin 'plugin_fails'" in out


def test_hooks_prints_the_specification(capsys):
    assert main(["plugins", "--hooks"]) == 0
    out, _ = capsys.readouterr()
    for h in api.HOOKS:
        assert f"{h.name}: {h.call}\n" in out and all(f"  - {c}" in out for c in h.contract)
    assert main(["plugins", "--hooks", "--json"]) == 0
    spec = json.loads(capsys.readouterr()[0])
    assert [s["name"] for s in spec] == [h.name for h in api.HOOKS]
    assert spec[0] == {"name": "theorems", "register": "bounds.register",
                       "registers": api.HOOKS[0].registers, "contract": list(api.HOOKS[0].contract)}


def test_plugins_takes_the_common_options_and_refuses_bad_ones(capsys):
    assert main(["plugins", "--max-memory", "1G"]) == 0
    capsys.readouterr()
    assert main(["plugins", "--nope"]) == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr()[1]
