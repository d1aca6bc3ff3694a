"""fedbound.bounds: the convergence results of the four papers as symbolic objects.

Pure mathematics (sympy, numpy, scipy); never imports torch or the simulator.

>>> import bounds
>>> thm = bounds.get("mllsgd.theorem1")          # default variant: "proof"
>>> thm.variant, thm.step
('proof', 'eta')
>>> "mllsgd.theorem1" in {row["key"] for row in bounds.list()}
True
"""

from . import afl, hfl, mllsgd, tdcd  # noqa: F401  (register the results of each paper)
from .core import Condition, Erratum, Param, Theorem, get, keys, register, unregister, variants
from .core import list_results as list  # noqa: A001  (bounds.list(), as the design fixes)
from .references import PAPERS, Paper, cite
from .tuning import choose_step, choose_sync_time

__all__ = [
    "PAPERS", "Condition", "Erratum", "Paper", "Param", "Theorem", "choose_step", "choose_sync_time",
    "cite", "get", "keys", "list", "register", "unregister", "variants",
]
