"""Castiglia, Das and Patterson 2021, Multi-Level Local SGD: Distributed SGD for Heterogeneous
Hierarchical Networks (ICLR 2021): fedbound's plugin for the paper.

Loaded as any plugin is, through the entry point ``mllsgd`` of the group
``fedbound.plugins``; it registers everything it has through ``bounds.register`` and
``verify.api`` only: its results (``theorems``: Theorem 1, its limit (14), Corollary 1,
whose mathematics is ``bounds.mllsgd``), their adapters, the (tau, eta) chooser, reproduced
claims, its stored witnesses (``witnesses/``), its tightness table (``tightness.json``) and
its rate sweeps. Its public API, the paper's own, is ``__all__``; its modules are internal
and may change: ``adapters`` (statement, scenario, parameter derivation, measurement, one
adapter per result), ``choose`` (its chooser), ``predict`` (the chooser's calibrated
prediction) and ``claims`` (its experiments reproduced at small scale).
"""

from importlib import resources

from fedbound.verify.api import register_tightness, register_witness_dir

from . import adapters, choose, claims, deadline, theorems  # noqa: F401 - each registers what it holds
from .adapters import (
    MAX_WORKERS,
    MLLSGD,
    PAPER,
    PROBLEM_KINDS,
    Corollary1,
    MLLSGDScenario,
    Setup,
    Theorem1,
    Theorem1Limit,
    build,
    estimated_parts,
    exact_series,
    expected_averaged_model,
    expected_grad_sq_norms,
    expected_lhs,
)
from .choose import DEFAULT_K, TauEta

register_witness_dir(resources.files(__name__) / "witnesses")
register_tightness(resources.files(__name__) / "tightness.json")

__all__ = [
    "build", "Corollary1", "DEFAULT_K", "estimated_parts", "exact_series",
    "expected_averaged_model", "expected_grad_sq_norms", "expected_lhs", "MAX_WORKERS", "MLLSGD",
    "MLLSGDScenario", "PAPER", "PROBLEM_KINDS", "Setup", "TauEta", "Theorem1", "Theorem1Limit",
]
