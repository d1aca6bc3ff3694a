"""Ali and Arafa 2025, Delay Sensitive Hierarchical Federated Learning with Stochastic Local
Updates: fedbound's plugin for the paper.

Loaded as any plugin is, through the entry point ``hfl`` of the group ``fedbound.plugins``;
it registers everything it has through ``bounds.register`` and ``verify.api`` only: its
results (``theorems``: Lemma 1, Theorems 1 and 2, Corollary 1, whose mathematics is
``bounds.hfl``), their adapters, the (S, alpha) chooser, reproduced claims, its stored
witnesses (``witnesses/``), its tightness table (``tightness.json``) and its rate sweeps.
Its public API, the paper's own, is ``__all__``; its modules are internal and may change:
``adapters`` (statement, scenario, parameter derivation, measurement, one adapter per
result), ``choose`` (its chooser), ``predict`` (the chooser's calibrated prediction) and
``claims`` (its experiments reproduced at small scale).
"""

from importlib import resources

from fedbound.verify.api import register_tightness, register_witness_dir

from . import adapters, choose, claims, deadline, theorems  # noqa: F401 - each registers what it holds
from .adapters import (
    FIG7A,
    HFL,
    MAX_DELAY,
    MODES,
    PAPER,
    PROBLEM_KINDS,
    Corollary1,
    HFLScenario,
    Lemma1,
    Setup,
    Theorem1,
    Theorem2,
    build,
    estimated_parts,
    lemma1_pathwise,
    paths,
)
from .choose import (
    METRICS,
    SyncTime,
    loss_at_times,
    plot_answers,
    plot_loss_vs_wallclock,
    synthetic_quadratic,
)

register_witness_dir(resources.files(__name__) / "witnesses")
register_tightness(resources.files(__name__) / "tightness.json")

__all__ = [
    "build", "Corollary1", "estimated_parts", "FIG7A", "HFL", "HFLScenario", "Lemma1",
    "lemma1_pathwise", "loss_at_times", "MAX_DELAY", "METRICS", "MODES", "PAPER", "paths",
    "plot_answers", "plot_loss_vs_wallclock", "PROBLEM_KINDS", "Setup", "SyncTime",
    "synthetic_quadratic", "Theorem1", "Theorem2",
]
