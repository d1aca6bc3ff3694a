"""Every example in a docstring of fedbound runs, as a doctest (scipy-doctest's rule: a
documented example that stops working fails the build).

The modules are found by walking the installed package ``fedbound`` (its subpackages
``bounds``, ``sim``, ``verify`` and every module below them), so a module added later is
covered without being listed here; each docstring that holds an example is one test case.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fedbound

PACKAGES = ("fedbound", "fedbound.bounds", "fedbound.sim", "fedbound.verify")
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def modules() -> list[str]:
    """Every module of fedbound, by its import name."""
    names = set(PACKAGES)
    for pkg in PACKAGES[1:]:
        path = importlib.import_module(pkg).__path__
        names.update(m.name for m in pkgutil.walk_packages(path, prefix=f"{pkg}."))
    return sorted(names)


def examples() -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    found = []
    for name in modules():
        module = importlib.import_module(name)
        found += [t for t in finder.find(module, name) if t.examples]
    return sorted(found, key=lambda t: t.name)


EXAMPLES = examples()


def test_the_walk_finds_every_package_and_the_known_examples():
    names = modules()
    assert {"fedbound.bounds.core", "fedbound.sim.mllsgd", "fedbound.verify.cli"} <= set(names)
    assert {"fedbound", "fedbound.bounds", "fedbound.verify.strategies"} <= {t.name for t in EXAMPLES}


@pytest.mark.parametrize("test", EXAMPLES, ids=[t.name for t in EXAMPLES])
def test_docstring_example_runs(test):
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    out: list[str] = []
    result = runner.run(test, out=out.append, clear_globs=True)
    assert result.failed == 0, "".join(out)


def test_a_wrong_example_fails():
    """The runner above reports a wrong expected output (the test can fail)."""
    parser = doctest.DocTestParser()
    wrong = parser.get_doctest(">>> 1 + 1\n3\n", {}, "wrong", None, 0)
    out: list[str] = []
    assert doctest.DocTestRunner(optionflags=FLAGS).run(wrong, out=out.append).failed == 1
    assert "Expected:\n    3\nGot:\n    2" in "".join(out)
    assert fedbound.__version__
