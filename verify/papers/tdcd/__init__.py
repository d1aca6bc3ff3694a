"""Das, Castiglia, Wang and Patterson 2022, Cross-Silo Federated Learning for Multi-Tier
Networks with Vertical and Horizontal Data Partitioning (ACM TIST): fedbound's plugin for
the paper.

Loaded as any plugin is, through the entry point ``tdcd`` of the group ``fedbound.plugins``;
it registers everything it has through ``bounds.register`` and ``verify.api`` only: its
results (``theorems``: Theorem 1, Lemma 2, Remark 5, whose mathematics is ``bounds.tdcd``),
their adapters, the (Q, eta) chooser and Q sweeps, reproduced claims, its stored witnesses
(``witnesses/``), its tightness table (``tightness.json``) and its rate sweeps. Its public
API, the paper's own, is ``__all__``; its modules are internal and may change: ``adapters``
(statement, scenario, parameter derivation, measurement, one adapter per result), ``choose``
(its chooser), ``predict`` (the chooser's calibrated prediction) and ``claims`` (its
experiments reproduced at small scale).
"""

from importlib import resources

from fedbound.verify.api import register_tightness, register_witness_dir

from . import adapters, choose, claims, deadline, theorems  # noqa: F401 - each registers what it holds
from .adapters import (
    PAPER,
    TDCD,
    Lemma2,
    Remark5,
    Setup,
    TDCDScenario,
    Theorem1,
    build,
    delta,
    drift_ratio,
    estimate_tdcd_constants,
    estimated_parts,
    remark5_eta,
    run,
    sigma,
)
from .choose import (
    DEFAULT_Q_GRID,
    EPSILON_FRACTION,
    FLOOR_MARGIN,
    SIM_REPLICAS,
    SIM_ROUNDS_Q1,
    QEta,
    hitting_times,
    loss_vs_time,
    plot_against_q,
    plot_loss_vs_time,
    q_eta_evidence,
    q_sweep,
)

register_witness_dir(resources.files(__name__) / "witnesses")
register_tightness(resources.files(__name__) / "tightness.json")

__all__ = [
    "build", "DEFAULT_Q_GRID", "delta", "drift_ratio", "EPSILON_FRACTION",
    "estimate_tdcd_constants", "estimated_parts", "FLOOR_MARGIN", "hitting_times", "Lemma2",
    "loss_vs_time", "PAPER", "plot_against_q", "plot_loss_vs_time", "q_eta_evidence", "q_sweep",
    "QEta", "Remark5", "remark5_eta", "run", "Setup", "sigma", "SIM_REPLICAS", "SIM_ROUNDS_Q1",
    "TDCD", "TDCDScenario", "Theorem1",
]
