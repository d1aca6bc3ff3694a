"""fedbound.verify: where theory meets measurement.

``check(key, scenario) -> Verdict`` (a scenario object, a mapping, JSON, a path or a
witness), ``check_estimated`` (a bound on a problem whose constants are estimated),
``search(key)`` for counterexamples, stored ``witnesses``, plugins, and the public
extension API (``verify.api``: Adapter, Scenario, Measurement, register_adapter,
...). Depends on ``bounds`` and ``sim``; neither depends on it. Importing ``verify`` is
light: the papers' adapters (and torch) and the installed plugins are loaded on first use.
"""

from .api import (
    Adapter,
    Measurement,
    Scenario,
    Tags,
    Verdict,
    Witness,
    adapter_for,
    check,
    check_estimated,
    default_scenario,
    load_plugins,
    load_scenario,
    register_adapter,
    register_witness_dir,
    unregister_adapter,
    witnesses,
)
from .search import SearchResult, search

__all__ = [
    "Adapter", "Measurement", "Scenario", "SearchResult", "Tags", "Verdict", "Witness",
    "adapter_for", "check", "check_estimated", "default_scenario", "load_plugins",
    "load_scenario", "register_adapter", "register_witness_dir", "search", "unregister_adapter", "witnesses",
]
