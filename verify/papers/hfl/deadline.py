"""Ali & Arafa 2025, Algorithm 1, judged at its deadline: fedbound's own deadline bounds on
E f(x^{U+1}) - f*, the loss of the final global model after the system time T (derived by
fedbound, not published; ``bounds.hfl_deadline``, bounds/derivations/hfl_deadline.md).

Statement: ``hfl.deadline_quadratic``, the exact worst case over the quadratics with spectrum
in [mu, L] and additive noise of covariance trace sigma^2; ``hfl.deadline_pl``, a mu-PL f.
Both conditional on the delay path (t, U), data i.i.d. among clients (Section II), as the
simulator's clients are (zeta = 0).

Scenario: ``HFLScenario`` with a quadratic problem (its smallest eigenvalue is mu; a logistic
problem has no PL constant and is refused). Parameters: alpha (null: 1/L for the quadratic
bound, min(1/L, 1/(2 L tau)) for the PL bound, tau = max t - 1), L, mu and sigma of the
quadratic, Delta = f(x^1) - f*, G1 = ||grad f(x^1)||^2 (exact), the sizes and the schedule t
(one path, or one per replica in ``mode="expected"``, paired).

Measurement: f(x^{U+1}) - f* per replica (``sim.hfl.run_hfl``), or exactly (conditional mode):
in the error e = x - x*, one round of Algorithm 1 is affine-Gaussian,
e' = B_u e + noise with B_u = I + sum_i w_i (M^{t_i} - I)/t_i, M = I - alpha A, and noise
covariance alpha^2 sum_i (w_i/t_i)^2 sum_{l < t_i} M^l (C/|N_i|) M^l, C = (sigma^2/d) I
((3)-(12)); the mean and covariance of e are propagated with d x d matrices (not through the
bound's eigenvalue recursion), and E f - f* = tr(A (Sigma + m m^T))/2.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.bounds.deadline import VARIANT
from fedbound.verify.api import (
    Draw,
    Footprint,
    Measurement,
    Tags,
    register_adapter,
    roundoff,
)

from .adapters import FIG7A, HFL, HFLScenario, _schedule_size, build, paths, schedule_terms

#: key: (the function of bounds.hfl that builds it, its title)
RESULTS = {"hfl.deadline_quadratic": ("deadline_quadratic", "HFL loss at the deadline, quadratics"),
           "hfl.deadline_pl": ("deadline_pl", "HFL loss at the deadline, PL")}
for _key, (_function, _title) in RESULTS.items():
    bounds.register(_key, _title, f"fedbound.bounds.hfl:{_function}", {VARIANT: "holds"}, VARIANT)

#: the default problem of the deadline adapters: the quadratic (mu is its smallest eigenvalue)
QUADRATIC = {"kind": "quadratic", "dim": 4, "L": 1.0, "mu": 0.1, "sigma": 1.0, "distance": 3.0}


def exact_final_loss(problem, x1, sizes, t, alpha: float) -> float:
    """E f(x^{U+1}) - f* on one delay path ``t`` [U, G] (zero rows pad), exactly: the mean
    and covariance of the error propagated round by round in matrix form (module
    docstring)."""
    A = problem.hessian.numpy()
    d = A.shape[0]
    n = np.asarray(sizes, dtype=float)
    w = n / n.sum()
    M = np.eye(d) - alpha * A
    C = problem.sigma**2 / d * np.eye(d)
    m = (x1 - problem.x_star).numpy().astype(float)
    S = np.zeros((d, d))
    for row in np.asarray(t):
        if row[0] == 0:
            break
        B, Q = np.eye(d), np.zeros((d, d))
        for i, ti in enumerate(row.astype(int)):
            power, noise = np.eye(d), np.zeros((d, d))
            for _ in range(ti):
                noise += power @ C @ power.T
                power = M @ power
            B += w[i] * (power - np.eye(d)) / ti
            Q += alpha**2 * (w[i] / ti) ** 2 * noise / n[i]
        m, S = B @ m, B @ S @ B.T + Q
    return 0.5 * float(np.trace(A @ (S + np.outer(m, m))))


class Deadline(HFL):
    """What both deadline results share: a quadratic problem, its mu, the final loss."""

    lhs_label = r"$f(x^{\mathcal{U}+1}) - f^*$ [loss]"
    tags = Tags(exact=True, paired=True)
    default = HFLScenario(problem=dict(QUADRATIC))

    def _derive(self, s: HFLScenario, thm) -> dict[str, Any]:
        if s.problem_spec()["kind"] != "quadratic":
            raise ValueError(f"{self.key} needs a PL constant mu: use problem.kind='quadratic' "
                             "(its smallest eigenvalue is mu)")
        st = build(s)
        pr = st.problem
        sched = paths(s)
        params = {"L": pr.L, "mu": pr.mu, "sigma": pr.sigma, "Delta": max(pr.delta(st.x1), 0.0),
                  "G1": float(pr.grad(st.x1).square().sum()), "zeta": 0.0,
                  "sizes": np.array(s.sizes),
                  "t": sched.path(0) if s.mode == "conditional" else sched.t}
        params = {k: v for k, v in params.items() if k in thm.params}
        params["alpha"] = self._step(s, pr.L, sched.t)
        return params

    def _step(self, s: HFLScenario, L: float, t: np.ndarray) -> float:
        """The scenario's alpha, else 1/L (the largest the condition alpha <= 1/L allows)."""
        return self._alpha(s, L)

    def _exact_unsupported(self, s: HFLScenario) -> str:
        if s.mode != "conditional":
            return "mode='expected' draws a delay path per replica; exact mode needs one path"
        return ""

    def _measure(self, s: HFLScenario, params, exact: bool) -> Measurement:
        import torch

        from fedbound.sim.hfl import run_hfl

        st = build(s)
        atol = roundoff(math.sqrt(st.problem.L), float((st.x1 - st.problem.x_star).norm()))
        if exact:
            value = exact_final_loss(st.problem, st.x1, s.sizes, params["t"], params["alpha"])
            return Measurement(exact=value, atol=atol)
        trace = run_hfl(st.problem, sizes=s.sizes, alpha=params["alpha"], x1=st.x1,
                        replicas=s.replicas, t=params["t"], record_grad=False,
                        generator=torch.Generator().manual_seed(s.seed + 1))
        ok = ~trace.diverged.numpy()
        values = trace.final_loss.numpy()[ok] - st.problem.f_inf
        return Measurement(values=values, diverged=int((~ok).sum()), atol=atol,
                           paired=s.mode == "expected")

    def _bound_series(self, s, thm, params, n):
        return None

    def _footprint(self, s: HFLScenario, exact: bool) -> Footprint:
        """The simulator's (:class:`HFL`); in exact mode the delay path and the d x d
        matrices of every local iteration of it."""
        if not exact:
            return super()._footprint(s, exact)
        memory, steps = schedule_terms(s, 1)
        rounds, rounds_text, width, _ = _schedule_size(s)
        dim, G = s.problem_spec()["dim"], len(s.sizes)
        memory[f"problem.dim={dim}, squared, x 8 matrices of 8 B (exact moments)"] = 64 * dim * dim
        steps[f"{rounds_text} x groups={G} x local iterations={width:g} x problem.dim={dim}^3 "
              "(exact moments)"] = 4.0 * rounds * G * width * dim**3
        return Footprint.of(memory, steps)

    def _draw(self, draw: Draw) -> HFLScenario:
        """1-3 groups of 1-8 clients, Fig. 7a's delays scaled by a factor in [0.5, 2], S in
        [0, 8], T in [40, 300], a quadratic of dimension 1-5 (one eigenvalue: mu = L) with
        L in [0.5, 4], mu a fraction of L, sigma in [0, 4], x^1 up to 4 from x*, alpha 5% to
        100% of 1/L; one delay path (conditional mode), so that the battery and the search
        check it exactly: the bound is attained on the class, where a Monte-Carlo interval
        cannot decide (the expected mode is checked by the tests, paired, with margin)."""
        scale = draw.uniform(0.5, 2.0)
        dim = draw.integer(1, 5)
        L = round(draw.uniform(0.5, 4.0), 3)
        mu = L if dim == 1 else round(L * draw.uniform(0.02, 1.0), 4)
        problem = {"kind": "quadratic", "dim": dim, "L": L, "mu": mu,
                   "sigma": round(draw.uniform(0.0, 4.0), 3),
                   "distance": round(draw.uniform(0.0, 4.0), 3)}
        return HFLScenario(sizes=[draw.integer(1, 8) for _ in range(draw.integer(1, 3))],
                           delays=[round(v * scale, 6) for v in FIG7A], S=draw.uniform(0, 8),
                           T=draw.uniform(40, 300), alpha=draw.uniform(0.05, 1.0) / L,
                           problem=problem, replicas=32, seed=draw.integer(0, 2**31 - 2))


@register_adapter
class DeadlineQuadratic(Deadline):
    """``hfl.deadline_quadratic``: tight on the class (equality with one eigenvalue)."""

    key = "hfl.deadline_quadratic"


@register_adapter
class DeadlinePL(Deadline):
    """``hfl.deadline_pl`` on quadratics (mu-PL with mu their smallest eigenvalue)."""

    key = "hfl.deadline_pl"

    def _step(self, s: HFLScenario, L: float, t: np.ndarray) -> float:
        """The scenario's alpha, else min(1/L, 1/(2 L tau)), tau = max t - 1 over the paths:
        where the iid drift keeps rho_u < 0.51 (bounds/derivations/hfl_iid.md, section 4),
        the step the iid variant of Theorem 2 takes by default too."""
        if s.alpha is not None:
            return float(s.alpha)
        tau = float(np.max(t)) - 1
        return min(1.0, 0.5 / tau) / L if tau > 0 else 1.0 / L

    def _draw(self, draw: Draw) -> HFLScenario:
        """As :class:`Deadline`, with alpha left to :meth:`_step` half the time, else a
        fraction of 1/(L max(1, 2 t^max)) (t^max of (22) at the smallest shift): the PL bound
        grows like (1 + alpha L)^(2 t) past alpha L t ~ 1."""
        s = super()._draw(draw)
        if draw.integer(0, 1):
            return s.replace(alpha=None)
        shift = min(float(law.shift) for law in s.model().local)
        t_max = math.ceil(s.S / shift) if s.S > 0 else 1
        L = s.problem_spec()["L"]
        return s.replace(alpha=draw.uniform(0.05, 1.0) / (L * max(1, 2 * t_max)))
