"""Yang, Zhang, Khanduri and Liu 2022, Anarchic Federated Learning (ICML 2022): fedbound's
plugin for the paper.

Loaded as any plugin is, through the entry point ``afl`` of the group ``fedbound.plugins``;
it registers everything it has through ``bounds.register`` and ``verify.api`` only: its
results (``theorems``: Theorems 1 to 4, Corollaries 1 to 3, whose mathematics is
``bounds.afl``), their adapters, refutation families, reproduced claims, its stored
witnesses (``witnesses/``), its tightness table (``tightness.json``) and its rate sweeps.
Its public API, the paper's own, is ``__all__``; its modules are internal and may change:
``adapters`` (statement, scenario, parameter derivation, measurement, one adapter per
result) and ``claims`` (its experiments reproduced at small scale).
"""

from importlib import resources

from fedbound.verify.api import register_tightness, register_witness_dir

from . import adapters, claims, theorems  # noqa: F401 - each registers what it holds
from .adapters import (
    AFL,
    FAMILIES,
    PAPER,
    PROBLEM_KINDS,
    AFLScenario,
    Corollary1,
    Corollary2,
    Corollary3,
    Setup,
    Theorem1,
    Theorem2,
    Theorem3,
    Theorem4,
    build,
    estimate_afl_constants,
    estimated_parts,
    exact_series,
)

register_witness_dir(resources.files(__name__) / "witnesses")
register_tightness(resources.files(__name__) / "tightness.json")

__all__ = [
    "AFL", "AFLScenario", "build", "Corollary1", "Corollary2", "Corollary3",
    "estimate_afl_constants", "estimated_parts", "exact_series", "FAMILIES", "PAPER",
    "PROBLEM_KINDS", "Setup", "Theorem1", "Theorem2", "Theorem3", "Theorem4",
]
