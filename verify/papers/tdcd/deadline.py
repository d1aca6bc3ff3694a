"""Das et al. 2022, TDCD judged at its deadline: fedbound's own bound on E L(theta^{RQ}) - L*,
the loss of the hub models after R rounds (derived by fedbound, not published;
``bounds.tdcd.deadline_pl``, bounds/derivations/tdcd_deadline.md).

Statement: ``tdcd.deadline_pl``, a mu-PL loss, under the assumptions of fedbound's refined
Theorem 1 (independent client batches, the own-block L_max).

Scenario: ``TDCDScenario`` with the squared loss (least squares is mu-PL with mu the
smallest eigenvalue of X^T X / n; logistic regression without a regulariser is not PL and
is refused). Parameters: those of the refined variant of ``tdcd.theorem1`` (L, L_max, the
trajectory's sigma_j, K_j, Q, R, eta: null = the largest that (R1)-(R2) allow), mu, and
Delta = L(theta^0) - L*.

Measurement: L(theta^{RQ}) - L* per replica (``sim.tdcd.run_tdcd``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.bounds.deadline import VARIANT
from fedbound.verify.api import Draw, Measurement, register_adapter

from .adapters import TDCD, TDCDScenario, _roundoff, build, delta, run, sigma

KEY = "tdcd.deadline_pl"
bounds.register(KEY, "TDCD loss after R rounds, PL", "fedbound.bounds.tdcd:deadline_pl",
                {VARIANT: "holds"}, VARIANT)


def curvature_floor(st) -> float:
    """mu of least squares: the smallest eigenvalue of X^T X / n (exact)."""
    import torch

    X = st.model.X
    return float(torch.linalg.eigvalsh(X.T @ X)[0]) / X.shape[0]


@register_adapter
class DeadlinePL(TDCD):
    """``tdcd.deadline_pl`` on least squares."""

    key = KEY
    default = TDCDScenario(loss="squared", label_noise=0.3)
    lhs_label = r"$\mathcal{L}(\theta^{RQ}) - \mathcal{L}^*$ [loss]"

    def _derive(self, s: TDCDScenario, thm) -> dict[str, Any]:
        if s.loss != "squared":
            raise ValueError(f"loss={s.loss!r}: {self.key} needs a PL loss; use loss='squared' "
                             "(least squares, mu = the smallest eigenvalue of X^T X / n)")
        if s.c is not None:
            raise ValueError(f"c={s.c}: only tdcd.remark5 uses c; leave it null")
        st = build(s)
        m = st.model
        params = {"L": m.L, "L_max": m.L_max, "mu": curvature_floor(st), "Delta": delta(st),
                  "R": s.rounds, "Q": s.Q, "K": np.asarray(s.clients, dtype=float)}
        params["eta"] = float(s.eta) if s.eta is not None else thm.max_step(**params)
        params["sigma"] = sigma(s, st, params["eta"])
        return params

    def _measure(self, s: TDCDScenario, params, exact: bool) -> Measurement:
        st = build(s)
        trace = run(s, params["eta"])
        ok = ~trace.diverged.numpy()
        values = trace.loss.numpy()[ok, -1] - st.model.f_inf
        return Measurement(values=values, diverged=int((~ok).sum()),
                           atol=_roundoff(st) / st.model.L)

    def _bound_series(self, s, thm, params, n):
        return None

    def _draw(self, draw: Draw) -> TDCDScenario:
        """N in 1..3 silos, feature splits, unequal K_j, a batch, least squares with label noise
        0 to 1, Q in 1..8, 3 to 30 rounds, the step 5% to 100% of the largest admissible."""
        N = draw.integer(1, 3)
        clients = [draw.integer(1, 3) for _ in range(N)]
        s = TDCDScenario(
            blocks=[draw.integer(1, 3) for _ in range(N)], clients=clients,
            n=draw.integer(10, 60), batch=math.lcm(*clients) * draw.integer(1, 3), loss="squared",
            label_noise=draw.uniform(0.0, 1.0), Q=draw.integer(1, 8), rounds=draw.integer(3, 30),
            distance=draw.uniform(0, 3), replicas=draw.integer(16, 32),
            seed=draw.integer(0, 2**16 - 1))
        s.validate()
        return s.replace(eta=draw.uniform(0.05, 1.0) * self.parameters(s, self.theorem())["eta"])
