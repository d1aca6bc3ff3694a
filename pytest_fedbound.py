"""The fedbound pytest plugin (registered under ``pytest11``, so it is active wherever
fedbound is installed). It imports nothing of fedbound until a test uses it.

* ``@pytest.mark.fedbound("my.theorem", ...)`` on a test that takes ``fedbound_case``
  parametrizes it over fedbound's contract checks of those results (keyword arguments:
  ``checks=[...]``, ``expected_failures={key: {check: reason}}``)::

      @pytest.mark.fedbound("mllsgd.theorem1", checks=["holds_on_default"])
      def test_contract(fedbound_case):
          fedbound_case()

* the ``fedbound`` fixture is ``verify.testing`` (``fedbound.assert_holds(...)``);
* ``--fedbound-plugin MODULE`` (repeatable) imports a plugin module before collection,
  as ``fedbound --plugin`` does; installed plugins (entry points) and FEDBOUND_PLUGINS are
  loaded with fedbound's registry, on first use.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("fedbound", "fedbound: regression tests of convergence theory")
    group.addoption("--fedbound-plugin", action="append", default=[], metavar="MODULE",
                    help="import MODULE (a fedbound plugin) before collecting tests")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "fedbound(*keys, checks=None, expected_failures=None): run fedbound's contract "
                   "checks on these results (the test takes the fedbound_case argument)")
    modules = config.getoption("--fedbound-plugin")
    if modules:
        from fedbound.verify.plugins import load_plugins

        errors = load_plugins(modules)
        if errors:
            raise pytest.UsageError("; ".join(errors))


def pytest_generate_tests(metafunc):
    marker = metafunc.definition.get_closest_marker("fedbound")
    if marker is None:
        return
    if "fedbound_case" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: a test marked fedbound(...) must "
                                "take the fedbound_case argument")
    from fedbound.verify.testing import cases

    found = cases(marker.args, checks=marker.kwargs.get("checks"),
                  expected_failures=marker.kwargs.get("expected_failures"))
    metafunc.parametrize("fedbound_case", [
        pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.expected_failure)]
                     if c.expected_failure else []) for c in found])


@pytest.fixture
def fedbound():
    """``verify.testing``: assert_holds, assert_violated, check_adapter, registered."""
    import fedbound.verify.testing

    from fedbound import verify
    return verify.testing
