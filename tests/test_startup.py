"""Start-up in a blink (issue 15, item 3): the lazy registry, the commands that import
neither torch nor matplotlib (nor sympy, for ``list``), and the cross-process cache of
generated numeric functions (``bounds.compiled``)."""

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import compiled, registry
from fedbound.verify.plugins import builtin

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "matplotlib", "sympy", "scipy")
PARAMS = json.dumps({"L": 1, "beta": 0, "sigma": 1, "Delta": 1, "eta": 0.001, "K": 64, "q": 2,
                     "tau": 4, "zeta": 0.5, "a": [0.5, 0.5], "p": [1, 0.9]})

# ---------------------------------------------------------------------- the papers' registrations

#: the results of fedbound's own papers: those their plugins registered
PAPERS = [k for k in bounds.keys()
          if any(registry.origin(k).startswith(f"{m}.") for m in builtin())]


def test_every_result_of_the_papers_comes_from_its_plugin():
    """The seventeen results of the four papers, each registered by its paper's plugin (none
    by the core) and built by the paper's module of bounds, named by its path."""
    assert len(PAPERS) >= 17 and {k.partition(".")[0] for k in PAPERS} == {
        m.rpartition(".")[2] for m in builtin()}
    for key in PAPERS:
        prefix = key.partition(".")[0]
        assert registry.origin(key).startswith(f"fedbound.verify.papers.{prefix}."), key


@pytest.mark.parametrize("key", PAPERS)
def test_a_registered_row_matches_what_its_module_builds(key):
    """Each variant's registered status is the status of what its build function gives (the
    function of ``bounds.<paper>`` its row names, built here directly, not through get)."""
    module, _, function = registry._REGISTRY[key].build.partition(":")
    build = getattr(importlib.import_module(module), function)
    statuses = registry.registered_statuses(key)
    for variant, status in statuses.items():
        thm = build(variant)
        assert (thm.key, thm.variant, thm.status) == (key, variant, status)
    assert bounds.get(key).variant == registry.default(key) in statuses


def test_a_build_named_by_its_path_is_imported_on_first_use_only():
    registry.register("test.by_path", "planted", "no_such_module_of_fedbound:build", ("proof",),
                      "proof", {"proof": "holds"})
    try:
        assert "test.by_path" in bounds.keys() and registry.module_of("test.by_path") == \
            "no_such_module_of_fedbound"
        assert bounds.registry.result_row("test.by_path")["status"] == "holds"  # nothing built
        with pytest.raises(ModuleNotFoundError, match="no_such_module_of_fedbound"):
            bounds.get("test.by_path")
    finally:
        bounds.unregister("test.by_path")


@pytest.mark.parametrize("key, build, message", [
    ("Test.upper", "m:f", "must be 'prefix.name'"),
    ("test", "m:f", "must be 'prefix.name'"),
    ("test.path", "module.function", "import path 'package.module:function'"),
])
def test_register_refuses_a_bad_key_or_build_path(key, build, message):
    with pytest.raises(ValueError, match=message):
        registry.register(key, "planted", build, {"proof": "holds"}, "proof")
    assert key not in bounds.keys()


def test_a_result_built_with_another_status_than_registered_is_an_error():
    thm = bounds.get("mllsgd.theorem1", "proof")
    registry.register("test.wrong_status", "planted", lambda v: thm, ("proof",), "proof",
                      {"proof": "refuted"})
    try:
        row = next(r for r in bounds.list() if r["key"] == "test.wrong_status")
        assert row["statuses"] == {"proof": "refuted"}  # listed from the registration alone
        with pytest.raises(RuntimeError, match="registered with status 'refuted'"):
            bounds.get("test.wrong_status")
    finally:
        bounds.unregister("test.wrong_status")


def test_register_refuses_statuses_that_miss_a_variant():
    with pytest.raises(ValueError, match="statuses="):
        registry.register("test.partial", "planted", lambda v: None, ("printed", "proof"),
                          "proof", {"proof": "holds"})
    assert "test.partial" not in bounds.keys()


# ---------------------------------------------------------------------- what each command imports


def _modules_after(code: str) -> set[str]:
    """The top-level packages of HEAVY that ``code`` left imported, run in a fresh process."""
    probe = (f"{code}\nimport sys, json\n"
             f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.splitlines()[-1]))


def _command(*argv: str) -> str:
    return ("import contextlib, io\nfrom fedbound.verify.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main({list(argv)!r}) == 0")


def test_import_bounds_loads_no_heavy_package():
    assert _modules_after("from fedbound import bounds; bounds.list(); bounds.keys()") == set()


def test_list_loads_no_heavy_package():
    assert _modules_after(_command("list")) == set()


@pytest.mark.parametrize("argv", [
    ("bound", "mllsgd.theorem1", "--params", PARAMS),
    ("step", "hfl.theorem2", "--params", '{"L": 2, "G": 1, "sigma": 1, "Delta": 1, '
                                         '"sizes": [2, 2], "t": [[1, 2]]}'),
    ("scenario", "afl.theorem3"),
    ("scenario", "tdcd.theorem1"),
], ids=["bound", "step", "scenario-afl", "scenario-tdcd"])
def test_bound_step_and_scenario_load_neither_torch_nor_matplotlib(argv):
    assert _modules_after(_command(*argv)) & {"torch", "matplotlib"} == set()


def test_a_scenario_too_large_is_refused_before_torch_loads(tmp_path):
    """The resource estimate refuses before the simulator (torch) is imported: a cold
    refusal takes about a second, not the several that importing torch costs."""
    scenario = tmp_path / "big.json"
    scenario.write_text('{"workers_per_hub": 1000000000}')
    code = ("import contextlib, io\nfrom fedbound.verify.cli import main\n"
            "with contextlib.redirect_stderr(io.StringIO()) as err:\n"
            f"    assert main(['check', 'mllsgd.theorem1', '--scenario', {str(scenario)!r}]) == 2\n"
            "assert 'workers_per_hub' in err.getvalue()")
    assert "torch" not in _modules_after(code)


# ---------------------------------------------------------------------- generated functions

X, Y = sp.symbols("x y", positive=True)
EXPR = (X**2 + sp.sqrt(Y)) / (1 - Y) + sp.Max(X - 1, 0) * X**3


@settings(max_examples=30, deadline=None)
@given(st.floats(0.01, 100), st.floats(0.01, 0.99))
def test_the_generated_function_equals_sympys_own_lambdify(x, y):
    thm = bounds.get("mllsgd.theorem1")
    syms, fn = thm._fn(EXPR)
    plain = sp.lambdify(syms, EXPR, "numpy")  # sympy's default printer, no cse
    assert fn(x, y) == pytest.approx(plain(x, y), rel=1e-13)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    compiled.cache_dir.cache_clear()
    yield tmp_path / "cache"
    compiled.cache_dir.cache_clear()


SOURCE = "def _lambdifygenerated(x):\n    return 2 * x + 1\n"


def _never():
    raise AssertionError("generated although a valid cached copy exists")


def test_a_cached_function_is_written_once_and_read_back(cache_home):
    assert compiled.function("k1", lambda: SOURCE)(3) == 7
    (path,) = compiled.cache_dir().glob("*.py")
    assert path.name == "k1.py" and path.parent.parent == cache_home / "fedbound"
    assert compiled.function("k1", _never)(3) == 7
    assert [p.name for p in compiled.cache_dir().iterdir()] == ["k1.py"]  # no temporary left


@pytest.mark.parametrize("damage", ["truncated", "edited", "foreign", "binary"])
def test_a_damaged_or_foreign_cache_file_is_regenerated_never_executed(cache_home, damage):
    compiled.function("k2", lambda: SOURCE)
    path = compiled.cache_dir() / "k2.py"
    good = path.read_text()
    if damage == "truncated":
        path.write_text(good[:-10])
    elif damage == "edited":
        path.write_text(good.replace("2 * x", "3 * x"))
    elif damage == "foreign":  # a valid file of another key, planted under this name
        path.write_text(good.replace("k2", "k3"))
    else:
        path.write_bytes(b"\xff\xfe\x00garbage")
    assert compiled.function("k2", lambda: SOURCE)(3) == 7
    assert path.read_text() == good  # rewritten


def test_an_unwritable_cache_falls_back_to_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    compiled.cache_dir.cache_clear()
    try:
        assert compiled.function("k4", lambda: SOURCE)(3) == 7
    finally:
        compiled.cache_dir.cache_clear()


def test_cached_and_fresh_bounds_agree_bit_for_bit(cache_home):
    """The same evaluation in a process that generates every function and in one that reads
    them all from the cache."""
    code = (f"import json, numpy as np\nfrom fedbound import bounds\nv = json.loads({PARAMS!r})\n"
            "v = {k: np.array(x) if isinstance(x, list) else x for k, x in v.items()}\n"
            "thm = bounds.get('mllsgd.theorem1', 'tight')\n"
            "print(repr(thm.evaluate(**v)), repr(thm.max_step(**{k: x for k, x in v.items() "
            "if k != 'eta'})))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(cache_home)}

    def run():
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120, check=True).stdout

    fresh = run()
    files = sorted(cache_home.rglob("*.py"))
    assert files and run() == fresh and sorted(cache_home.rglob("*.py")) == files
