"""A chooser for ``sgd.nonconvex``: the constant step eta for K iterations of SGD, chosen by
every variant of the bound, by a calibrated prediction and by simulation (``fedbound choose
sgd``).

Certified: the bound minimised over the admissible steps (a log grid up to 1/L).
Calibrated: the exact second moments of SGD on the scenario's quadratic
(:func:`~fedbound_sgd.adapter.expected_grad_sq_norms`), minimised over a finer grid.
Simulated: ``verify.choose`` searches the knob's grid with SGD on the scenario's quadratic,
every step on the same seeds (common random numbers), measuring the average squared
gradient norm. A plugin adds a chooser this way: a :class:`~verify.api.Chooser` subclass
registered with :func:`~verify.api.register_chooser`, its inputs declared once
(:class:`~verify.api.Input`): ``fedbound choose sgd`` generates its options (``--K``,
``--sigma``, ``--eta``) and the fields a ``--scenario`` file may give from them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    Chooser,
    Evaluation,
    Input,
    Knob,
    Proposal,
    register_chooser,
    require_int,
)

from .adapter import SGDScenario, build, expected_grad_sq_norms, simulate
from .theorems import KEY


@register_chooser
class Step(Chooser):
    """The step eta of SGD for the scenario's K iterations (module docstring)."""

    name = "sgd-step"
    metric = "mean ||grad f(x_k)||^2 over the K iterations"
    common_numbers = True  # simulate: the same seeds for every configuration, paired or not
    calibration = "the exact second moments of SGD on the scenario's quadratic"
    key = KEY
    summary = "SGD: the step eta for K iterations, certified, calibrated and simulated"
    example = "fedbound --plugin fedbound_sgd choose sgd --K 100 --sigma 1"

    declared = (
        Input("K", int, "iterations (default: the scenario's, 100)", low=1),
        Input("sigma", float, "gradient noise (default: the scenario's, 1)", low=0),
        Input("eta", float, "the steps to compare (default: a log grid up to 1/L)", low=0,
              low_open=True, knob=True),
    )

    def __init__(self, scenario: SGDScenario | None = None, *, K=None, sigma=None, eta=None,
                 points: int = 9):
        changes = {"K": self.value("K", K), "sigma": self.value("sigma", sigma)}
        self.scenario = self.replaced(scenario or SGDScenario(), changes)
        self.scenario.validate()
        self.points = require_int("points", points, minimum=2)
        self.etas = self.value("eta", eta)
        self.replicas = self.scenario.replicas

    def _params(self) -> dict[str, Any]:
        problem, x0, _ = build(self.scenario)
        return {"L": problem.L, "sigma": problem.sigma, "Delta": max(problem.delta(x0), 0.0),
                "K": self.scenario.K}

    def inputs(self) -> dict[str, Any]:
        return self.scenario.to_dict()

    def knobs(self) -> list[Knob]:
        """The steps given, else a log grid from 1/(100 L) to 1/L."""
        top = 1.0 / self.scenario.L
        etas = self.etas or np.geomspace(top / 100, top, self.points).tolist()
        return [Knob("eta", tuple(etas), "log", option=self.named("eta"))]

    def certified(self, variant: str) -> Proposal:
        thm, params = bounds.get(self.key, variant), self._params()
        etas = np.geomspace(thm.max_step(**params) / 1e4, thm.max_step(**params), 400)
        values = np.asarray(thm.evaluate(**params, eta=etas), dtype=float)
        best = int(np.argmin(values))
        curve = [{"eta": float(e), "bound": float(v)} for e, v in zip(etas[::40], values[::40],
                                                                       strict=True)]
        return Proposal({"eta": float(etas[best])}, float(values[best]), curve)

    def calibrated(self) -> Proposal:
        problem, x0, _ = build(self.scenario)
        lam = problem.eigenvalues.numpy()
        y0 = (problem.eigvecs.T @ (x0 - problem.x_star)).numpy()
        (knob,) = self.knobs()
        etas = np.geomspace(min(knob.values), max(knob.values), 4 * len(knob.values))
        values = [float(np.mean(expected_grad_sq_norms(lam, y0, problem.sigma, e, self.scenario.K)))
                  for e in etas]
        best = int(np.argmin(values))
        return Proposal({"eta": float(etas[best])}, values[best],
                        [{"eta": float(e), "predicted": v} for e, v in zip(etas, values, strict=True)])

    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool) -> list[Evaluation]:
        """Each step on the same seeds (common random numbers): the average over the K
        iterations of ||grad f(x_k)||^2 per replica (inf where a replica diverged)."""
        out = []
        for row in settings:
            problem, x0, gen = build(self.scenario)  # the same draws for every step
            grad_sq, diverged = simulate(problem, x0, row["eta"], self.scenario.K, replicas, gen)
            out.append(Evaluation(dict(row), np.where(diverged, np.inf, grad_sq.mean(axis=1))))
        return out
