"""Castiglia et al. 2021, MLL-SGD judged at the end of its run: fedbound's own deadline bound
on E F(u_K) - F*, the loss of the averaged model u_K = X_K a ((8)), the chooser's loss at the
end (derived by fedbound, not published; ``bounds.mllsgd_deadline``,
bounds/derivations/mllsgd_deadline.md).

Statement: ``mllsgd.deadline_quadratic``, the exact worst case over the quadratics with
spectrum in [mu, L] and additive noise of covariance trace sigma^2 (Assumption 1d with
beta = 0), data i.i.d. among workers (Section 3).

Scenario: ``MLLSGDScenario`` with a quadratic problem (mu its smallest eigenvalue).
Parameters: eta (null: 1/L), L, mu, sigma, Delta = F(x_1) - F*, G1 = ||grad F(x_1)||^2
(exact), K, q, tau, the worker weights a, the probabilities p and the mixing matrices V and
Z of (6)-(7).

Measurement: F(u_K) - F* per replica (``sim.mllsgd.run_mllsgd``), or exactly: the worker
second moments of every eigen-coordinate propagated by M' = T_k^T (M o C + eta^2 (sigma^2/d)
diag(p)) T_k (the module docstring of ``adapters``), E F(u_K) - F* = sum_c (lam_c/2) a^T M_K a.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.bounds import mllsgd_deadline as bd
from fedbound.bounds.deadline import VARIANT
from fedbound.verify.api import Draw, Measurement, Tags, register_adapter

from .adapters import MLLSGD, MLLSGDScenario, _roundoff, build

bounds.register(bd.KEY, "MLL-SGD loss at the end, quadratics",
                "fedbound.bounds.mllsgd:deadline_quadratic", {VARIANT: "holds"}, VARIANT)


def exact_final_loss(st, eta: float, K: int, q: int, tau: int) -> float:
    """E F(u_K) - F* on the scenario's quadratic, exactly (module docstring)."""
    pr, m = st.problem, st.matrices
    lam = pr.eigenvalues.numpy()
    y1 = (pr.eigvecs.T @ (st.x1 - pr.x_star)).numpy()
    d, n, p = lam.size, st.p.size, st.p
    loss = 0.0
    for c in range(d):
        shrink = 1.0 - eta * lam[c] * p
        C = np.outer(shrink, shrink)
        C[np.arange(n), np.arange(n)] = p * (1.0 - eta * lam[c]) ** 2 + 1.0 - p
        M = y1[c] ** 2 * np.ones((n, n))
        for k in range(1, K):
            T = {"Z": m.Z, "V": m.V, "I": np.eye(n)}[bd.operator(k, q, tau)]
            M = T.T @ (M * C + eta**2 * pr.sigma**2 / d * np.diag(p)) @ T
        loss += 0.5 * lam[c] * float(m.a @ M @ m.a)
    return loss


@register_adapter
class DeadlineQuadratic(MLLSGD):
    """``mllsgd.deadline_quadratic``: exact in one dimension; exact mode on every quadratic."""

    key = bd.KEY
    default = MLLSGDScenario()
    tags = Tags(exact=True)
    lhs_label = r"$F(u_K) - F^*$ [loss]"

    def _derive(self, s: MLLSGDScenario, thm) -> dict[str, Any]:
        if s.problem_spec()["kind"] != "quadratic":
            raise ValueError(f"{self.key} needs the quadratic's spectrum [mu, L]: use "
                             "problem.kind='quadratic'")
        st = build(s)
        pr, m = st.problem, st.matrices
        return {"eta": float(s.eta) if s.eta is not None else 1.0 / pr.L, "L": pr.L, "mu": pr.mu,
                "sigma": pr.sigma, "Delta": max(pr.delta(st.x1), 0.0),
                "G1": float(pr.grad(st.x1).square().sum()), "K": s.K, "q": s.q, "tau": s.tau,
                "a": m.a, "p": st.p, "V": m.V, "Z": m.Z}

    def _measure(self, s: MLLSGDScenario, params, exact: bool) -> Measurement:
        import torch

        from fedbound.sim.mllsgd import run_mllsgd

        st = build(s)
        atol = _roundoff(st) / st.problem.L
        if exact:
            return Measurement(exact=exact_final_loss(st, params["eta"], s.K, s.q, s.tau), atol=atol)
        trace = run_mllsgd(st.problem, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
                           w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=params["eta"],
                           K=s.K, q=s.q, tau=s.tau, x1=st.x1, replicas=s.replicas,
                           generator=st.generator, record_grad=False)
        ok = ~trace.diverged.numpy()
        values = trace.loss.numpy()[ok, -1] - st.problem.f_inf
        return Measurement(values=values, diverged=int((~ok).sum()), atol=atol)

    def _bound_series(self, s, thm, params, n):
        return None

    def _draw(self, draw: Draw) -> MLLSGDScenario:
        """The MLL-SGD adapters' random set-up (hub graph, H rule, weights, p in [0.6, 1], q,
        tau, K) on a quadratic of dimension 1-4 (one eigenvalue: mu = L) with mu a fraction of
        L, eta 5% to 100% of 1/L."""
        s = self._draw_base(draw)
        dim = draw.integer(1, 4)
        L = round(draw.uniform(0.5, 4.0), 3)
        problem = {"kind": "quadratic", "dim": dim, "L": L,
                   "mu": L if dim == 1 else round(L * draw.uniform(0.02, 1.0), 4),
                   "rotate": draw.boolean(), "sigma": round(draw.uniform(0.0, 3.0), 3),
                   "distance": round(draw.uniform(0.0, 4.0), 3)}
        return s.replace(problem=problem, eta=draw.uniform(0.05, 1.0) / L, replicas=64)
