"""fedbound.bounds: the convergence results of the four papers as symbolic objects.

Pure mathematics (sympy, numpy, scipy); never imports torch or the simulator. Importing it
is light. The results are registered by the plugins (fedbound's four papers are plugins,
``fedbound.verify.papers.<paper>``, each registering the results whose mathematics is the
module ``bounds.<paper>``), which the registry loads on its first lookup (``get``, ``list``,
``keys``; :func:`bounds.registry.add_loader`); it lists every result (``bounds.list()``)
without building one, and a paper's module (and sympy) is imported on the first :func:`get`
of one of its results, or on first use of a name below that needs it (``bounds.Theorem``,
``bounds.choose_step``, ``bounds.mllsgd``, ...).

>>> from fedbound import bounds
>>> thm = bounds.get("mllsgd.theorem1")          # default variant: "proof"
>>> thm.variant, thm.step
('proof', 'eta')
>>> "mllsgd.theorem1" in {row["key"] for row in bounds.list()}
True
"""

import importlib

from .references import PAPERS, Paper, cite
from .registry import REFUTED, get, keys, register, statuses, unregister, variants
from .registry import list_results as list  # noqa: A001  (bounds.list(), as the design fixes)

#: names imported on first use: name -> module of bounds that defines it
_LAZY = {
    "Condition": "core", "Erratum": "core", "Param": "core", "Rate": "core", "Theorem": "core",
    "choose_step": "tuning", "choose_sync_time": "hfl_sync",
    "choose_deadline_sync_time": "hfl_sync", "choose_deadline_period": "mllsgd_deadline",
    "choose_deadline_local_steps": "tdcd",
}
_SUBMODULES = ("afl", "core", "deadline", "delays", "hfl", "hfl_deadline", "hfl_sync", "mllsgd",
               "mllsgd_deadline", "tdcd", "topology", "tuning")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


#: the modules of the papers' mathematics, delay models and topologies: public as
#: ``bounds.hfl``, ``bounds.delays``, ... (``core`` is public through its names above)
_PUBLIC_SUBMODULES = ("afl", "deadline", "delays", "hfl", "hfl_deadline", "mllsgd",
                      "mllsgd_deadline", "tdcd", "topology", "tuning")

__all__ = [
    "PAPERS", "REFUTED", "Condition", "Erratum", "Paper", "Param", "Rate", "Theorem",
    "choose_deadline_local_steps", "choose_deadline_period", "choose_deadline_sync_time",
    "choose_step", "choose_sync_time", "cite", "get", "keys", "list", "register", "statuses",
    "unregister", "variants", *_PUBLIC_SUBMODULES,
]
