"""Plugin loading (issues 30 and 31): a broken plugin is contained. Whatever its import
raises (``SystemExit`` included; a Ctrl-C is not contained), and whatever its factories
raise on first use: a plugin named explicitly (``--plugin``, ``FEDBOUND_PLUGINS``) is bad
input, exit 2 in one line; an installed one (an entry point) is one warning line, and an
error row of ``check --all`` (exit 4); the built-in results keep working, and no other
result's exit status changes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import pytest
from bounded import ceiling

from fedbound import bounds
from fedbound.verify import plugins, report, suite
from fedbound.verify.cli import main
from fedbound.verify.testing import registered

ROOT = Path(__file__).resolve().parents[1]
PARAMS = {"L": 1, "beta": 0, "sigma": 1, "Delta": 1, "eta": 0.001, "K": 64, "q": 2, "tau": 4,
          "zeta": 0.5, "a": [0.5, 0.5], "p": [1, 0.9]}
#: plugin modules that fail in each way
BROKEN = {
    "plugin_exits": "import sys\nsys.exit(3)\n",
    "plugin_raises": "raise RuntimeError('a bug in the plugin')\n",
    "plugin_base_exception": "class Odd(BaseException):\n    pass\n\nraise Odd('not an Exception')\n",
}
#: a plugin whose theorem's factory raises on first use (registration succeeds)
LAZY = """
from fedbound import bounds


def build(variant):
    raise RuntimeError("the factory of lazy.broken is broken")


bounds.register("lazy.broken", "a result whose factory raises", build, ("proof",), "proof")
"""


@pytest.fixture
def broken(tmp_path, monkeypatch):
    """The broken plugins importable, and the record of failures fresh for the test."""
    for name, text in {**BROKEN, "plugin_lazy": LAZY}.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(plugins, "_FAILED", {})
    monkeypatch.setattr(plugins, "_EXPLICIT", [])
    monkeypatch.delenv(plugins.ENV, raising=False)
    yield tmp_path
    bounds.unregister("lazy.broken")
    for name in [*BROKEN, "plugin_lazy"]:
        sys.modules.pop(name, None)


def installed(monkeypatch, *modules: str) -> None:
    """``modules`` as entry points of an installed distribution (beside the real ones)."""
    extra = [EntryPoint(name=m, value=m, group=plugins.GROUP) for m in modules]
    real = entry_points

    def points(**kw):
        return [*real(**kw), *extra] if kw.get("group") == plugins.GROUP else real(**kw)

    monkeypatch.setattr(plugins, "entry_points", points)


def bound(capsys, *extra: str) -> tuple[int, str, str]:
    code = main([*extra, "bound", "mllsgd.theorem1", "--json", "--params", json.dumps(PARAMS)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_a_plugin_named_explicitly_that_fails_is_exit_2_in_one_line(module, broken, capsys):
    code, out, err = bound(capsys, "--plugin", module)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert err.startswith(f"fedbound: error: plugin {module!r} (--plugin) failed to load: ")
    if module == "plugin_exits":
        assert "it called sys.exit(3)" in err


def test_a_plugin_named_by_the_environment_that_fails_is_exit_2(broken, capsys, monkeypatch):
    monkeypatch.setenv(plugins.ENV, "plugin_exits")
    code, out, err = bound(capsys)
    assert code == 2 and f"plugin 'plugin_exits' ({plugins.ENV}) failed to load" in err


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_an_installed_plugin_that_fails_is_a_warning_and_changes_no_exit_status(module, broken,
                                                                                  capsys, monkeypatch):
    installed(monkeypatch, module)
    code, out, err = bound(capsys)
    assert code == 0 and json.loads(out)["admissible"] is True  # the built-in result answers
    assert err.count("\n") == 1 and err.startswith(f"fedbound: warning: plugin {module!r} (entry "
                                                   f"point {module!r}) failed to load")
    code, out, err = bound(capsys)  # reported once a process
    assert code == 0 and err == ""


def test_a_ctrl_c_in_a_plugins_import_is_not_contained(broken, monkeypatch):
    (broken / "plugin_interrupted.py").write_text("raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        plugins.load_plugins(["plugin_interrupted"])
    sys.modules.pop("plugin_interrupted", None)


def test_the_builtin_plugins_load_first_so_that_no_plugin_takes_their_names(broken, monkeypatch):
    (broken / "plugin_squatter.py").write_text(
        "from fedbound import bounds\n"
        "bounds.register('mllsgd.theorem1', 'not Castiglia', lambda v: None, ('proof',), 'proof')\n")
    installed(monkeypatch, "plugin_squatter")
    order = [m for m, _ in plugins._names([])]
    assert order[:len(plugins.builtin())] == plugins.builtin()
    messages = plugins.load_plugins()
    assert any("plugin_squatter" in m and "already registered" in m for m in messages)
    assert bounds.get("mllsgd.theorem1").citation.startswith("Castiglia")
    sys.modules.pop("plugin_squatter", None)


def test_a_factory_that_raises_on_first_use_leaves_the_others_listed(broken, capsys):
    with ceiling():
        code = main(["--plugin", "plugin_lazy", "list", "--json"])
    out, err = capsys.readouterr()
    keys = [r["key"] for r in json.loads(out)]
    assert code == 0 and "mllsgd.theorem1" in keys and "lazy.broken" not in keys
    assert err.count("\n") == 1 and "fedbound: warning: result 'lazy.broken' cannot be listed" in err
    assert "the factory of lazy.broken is broken" in err


def test_a_result_that_cannot_be_built_is_an_error_row_and_no_page(tmp_path, monkeypatch):
    """suite.unloadable: a plugin that failed to load and a result whose factory raises are
    error rows of kind "plugin" (check --all exits 4 on them, never 1), the report lists
    them on its index and writes no page for them."""
    from fedbound.verify.papers.hfl.adapters import Theorem1

    def build(variant):
        raise RuntimeError("no theorem here")

    class Adapter(Theorem1):
        key = "lazy.adapted"

    monkeypatch.setattr(plugins, "_FAILED", {"gone": plugins.Failure(
        "gone", "entry point 'gone'", "plugin 'gone' (entry point 'gone') failed to load: boom")})
    with registered("lazy.adapted", "a broken result with an adapter", build, adapter=Adapter):
        good, rows = suite.unloadable(["hfl.theorem1", "lazy.adapted"])
    assert good == ["hfl.theorem1"]
    assert [(r.key, r.kind, r.outcome, r.unexpected) for r in rows] == [
        ("gone", "plugin", "error", False), ("lazy.adapted", "plugin", "error", False)]
    assert "lazy.adapted cannot be built: RuntimeError: no theorem here" in rows[1].error
    checked = suite.run(suite.tasks(good, battery=0, replay=False))
    out = report.write(rows + checked, tmp_path / "r", seed=0, battery=0)
    index = (out / "index.html").read_text()
    assert "failed to load: boom" in index and "no theorem here" in index
    assert not list((out / "results").glob("lazy*")) and (out / report.page_name("hfl.theorem1")).exists()
    summary = json.loads((out / "summary.json").read_text())["summary"]
    assert summary["errors"] == 2 and summary["results"] == 1 and not summary["unexpected"]


def test_check_all_with_a_broken_installed_plugin_exits_4_and_its_pool_works(tmp_path):
    """A fresh process, the broken plugin installed as an entry point of a distribution on
    the path: the fork server of the pool imports the plugins too (it survived only an
    ImportError there), and the built-in results are checked."""
    dist = tmp_path / "site" / "brokenplugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{plugins.GROUP}]\nbroken = plugin_exits\n")
    (tmp_path / "site" / "plugin_exits.py").write_text(BROKEN["plugin_exits"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])}
    out = subprocess.run([sys.executable, "-m", "fedbound", "check", "--all", "--only", "hfl.theorem1",
                          "--battery", "0", "--no-witnesses", "--no-figures", "--jobs", "2",
                          "--report", str(tmp_path / "r"), "--json"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert out.returncode == 4, out.stderr
    assert out.stderr.count("\n") == 1 and "warning: plugin 'plugin_exits'" in out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [(r["kind"], r["outcome"]) for r in rows] == [("plugin", "error"), ("default", "holds")]


# ---------------------------------------------------------------------- os._exit (issue 42)

#: a plugin whose chooser ends the process with os._exit(3) when it is asked for its answer
EXITS_IN_A_HOOK = """
import os
from fedbound.verify.api import Chooser, Knob, Proposal, register_chooser


@register_chooser
class Exits(Chooser):
    name = "exits"
    key = "mllsgd.theorem1"
    command = "exits"
    metric = "loss"
    summary = "a chooser that calls os._exit"

    @classmethod
    def from_arguments(cls, args, read_scenario):
        return cls()

    def inputs(self):
        return {}

    def knobs(self):
        return [Knob("eta", (0.01, 0.1), "log")]

    def certified(self, variant):
        os._exit(3)

    def calibrated(self):
        os._exit(3)

    def simulate(self, settings, replicas, *, paired):
        os._exit(3)
"""
#: a plugin that makes the pool's workers end with os._exit(3) when they check mllsgd.theorem1
EXITS_IN_A_WORKER = """
import multiprocessing, os
from fedbound.verify.adapter import adapter_for

_cls = type(adapter_for("mllsgd.theorem1"))
_measure = _cls._measure


def measure(self, scenario, params, exact):
    if multiprocessing.parent_process() is not None:
        os._exit(3)
    return _measure(self, scenario, params, exact)


_cls._measure = measure
"""


def _fedbound(tmp_path, argv, **plugins) -> subprocess.CompletedProcess:
    """``fedbound argv`` in a process of its own, with the plugin modules ``plugins`` (name:
    text) on its path: a plugin's os._exit must never end this test process."""
    for name, text in plugins.items():
        (tmp_path / f"{name}.py").write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "fedbound", *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)


def test_a_plugin_that_calls_os_exit_while_it_imports_is_its_failure_to_load(tmp_path):
    """``os._exit(3)`` ended the process at once with status 3, which fedbound's table reads
    "inconclusive", and no line: now, during a command, it unwinds to the command's own exit
    path, and at a plugin's import it is that plugin's failure to load, as sys.exit is."""
    out = _fedbound(tmp_path, ["--plugin", "plugin_os_exit", "list"],
                    plugin_os_exit="import os\nos._exit(3)\n")
    assert (out.returncode, out.stdout) == (2, "") and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("fedbound: error: plugin 'plugin_os_exit' (--plugin) failed to load")
    assert "it called os._exit(3)" in out.stderr


def test_a_plugin_that_calls_os_exit_in_a_hook_is_one_line_and_70(tmp_path):
    out = _fedbound(tmp_path, ["--plugin", "plugin_os_exit_hook", "choose", "exits"],
                    plugin_os_exit_hook=EXITS_IN_A_HOOK)
    assert (out.returncode, out.stdout) == (70, "") and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("fedbound: internal error: plugin 'plugin_os_exit_hook' called "
                                 "os._exit(3) while the command ran")


def test_a_worker_that_a_plugin_ends_is_named_by_its_driver_with_its_status(tmp_path):
    """Where fedbound runs a plugin's code in a worker process, the worker's end cannot be
    caught in it: the driver's one line names the status the worker ended with (it said
    only "A process in the process pool was terminated abruptly")."""
    out = _fedbound(tmp_path, ["--plugin", "plugin_os_exit_worker", "check", "--all", "--only",
                               "mllsgd.theorem1", "--jobs", "2", "--battery", "2", "--no-figures",
                               "--no-witnesses", "--report", str(tmp_path / "r")],
                    plugin_os_exit_worker=EXITS_IN_A_WORKER)
    assert out.returncode == 70 and out.stderr.count("\n") == 1, out.stderr
    assert "BrokenProcessPool" in out.stderr
    assert "a worker process ended with status 3 (os._exit or exit() from C" in out.stderr
