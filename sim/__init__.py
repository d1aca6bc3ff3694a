"""Compact, vectorised torch simulator: problems with exact constants, algorithms, traces.

Never imports sympy, ``bounds`` or ``verify`` (see DESIGN.md, section "sim").
"""

from fedbound.sim.afl import AFLTrace, run_afl
from fedbound.sim.clients import ClientProblem, LogisticClients
from fedbound.sim.federated import Federation, federated_problem
from fedbound.sim.hfl import HFLTrace, run_hfl
from fedbound.sim.mllsgd import (
    HubWeights,
    apply_operator,
    hub_period_slots,
    hub_weights,
    mixing_matrices,
    operator_at,
    run_mllsgd,
)
from fedbound.sim.problems import LogisticRegression, Problem, Quadratic
from fedbound.sim.tdcd import TDCDTrace, run_tdcd
from fedbound.sim.trace import DIVERGENCE_THRESHOLD, Trace, freeze_diverged

__all__ = [
    "AFLTrace",
    "ClientProblem",
    "DIVERGENCE_THRESHOLD",
    "Federation",
    "HFLTrace",
    "HubWeights",
    "LogisticClients",
    "LogisticRegression",
    "Problem",
    "Quadratic",
    "TDCDTrace",
    "Trace",
    "apply_operator",
    "federated_problem",
    "freeze_diverged",
    "hub_period_slots",
    "hub_weights",
    "mixing_matrices",
    "operator_at",
    "run_afl",
    "run_hfl",
    "run_mllsgd",
    "run_tdcd",
]
