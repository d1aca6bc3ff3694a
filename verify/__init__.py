"""fedbound.verify: where theory meets measurement.

``check(key, scenario) -> Verdict`` (a scenario object, a mapping, JSON, a path or a
witness), ``check_estimated`` (a bound on a problem whose constants are estimated),
``search(key)`` for counterexamples (``format_search`` writes one as text), ``rate(key,
variable)`` for a corollary's rate, stored ``witnesses``, the ``tightness_table`` the plugins ship,
the figures ``against`` (a check's bound and measurement along a swept field) and the axis
label of a field, ``field_label``, plugins, and the public extension API (``verify.api``:
Adapter, Scenario, Measurement, register_adapter, ...). These names (``__all__``) are the
public API of this package with ``verify.api``, ``verify.testing``, ``verify.strategies``,
``verify.cli.main`` and each paper's package (its ``__all__``); the other modules are
internal and may change. Depends on ``bounds`` and ``sim``; neither depends on it.
Importing ``verify`` is light: the papers' adapters (and torch), the installed plugins and
matplotlib are loaded on first use.
"""

import importlib

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
from .rate import rate
from .search import SearchResult, search

#: names imported on first use (matplotlib, the tables): name -> (module of verify, its name there)
_LAZY = {
    "against": ("plots", "against"), "field_label": ("plots", "field_label"),
    "format_search": ("text", "format_search"), "tightness_table": ("tightness", "table"),
}


def __getattr__(name: str):
    if name in _LAZY:
        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Adapter", "Measurement", "Scenario", "SearchResult", "Tags", "Verdict", "Witness",
    "adapter_for", "against", "check", "check_estimated", "default_scenario", "field_label",
    "format_search", "load_plugins", "load_scenario", "rate", "register_adapter",
    "register_witness_dir", "search", "tightness_table", "unregister_adapter", "witnesses",
]
