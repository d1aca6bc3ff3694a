"""MLL-SGD scenarios: defaults, parameter derivation and measurement (papers/mllsgd.txt).

A scenario fixes the hub graph and its H, the workers and their weights and step
probabilities, eta (null = the largest admissible), K, q, tau, the problem, the number of
replicas and the seed. From it the theorem's parameters follow: L, beta, sigma from the
problem, Delta = F(x_1) - F_inf, zeta from H (bounds.topology), a and p over workers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import bounds
from bounds import topology
from sim.mllsgd import run_mllsgd
from sim.problems import LogisticRegression, Quadratic

from . import exact as exact_mode
from .scenario import (
    Measurement,
    ScenarioBase,
    problem_spec,
    register_adapter,
    require_float,
    require_floats,
    require_int,
    roundoff,
)

PROBLEM_KINDS = {
    # kind: {field: default}
    "quadratic": {"dim": 8, "L": 1.0, "mu": 0.1, "sigma": 1.0, "distance": 3.0, "rotate": False},
    "logistic": {"dim": 5, "n": 200, "R": 1.0, "batch": 4, "lam": 0.0, "distance": 2.0},
}


def _quadratic_default() -> dict[str, Any]:
    return {"kind": "quadratic", **PROBLEM_KINDS["quadratic"]}


@dataclass
class MLLSGDScenario(ScenarioBase):
    """A run of MLL-SGD and the data the bound needs. JSON keys are the field names.

    ``workers_per_hub``: one size for every hub or a list of D sizes; ``weights``: the
    worker weights w (null = uniform; L92); ``p``: one probability or one per worker;
    ``hub_rule``: "complete" (H = b 1^T), "mh" or "diffusion" (null: "complete" on a
    complete graph, "mh" otherwise); ``problem``: {"kind": "quadratic", "dim", "L",
    "mu", "sigma", "distance" (= ||x_1 - x*||), "rotate"} or {"kind": "logistic",
    "dim", "n", "R", "batch", "lam", "distance" (= ||x_1||)}."""

    hubs: int = 4
    workers_per_hub: int | list[int] = 4
    graph: str = "path"
    hub_rule: str | None = None
    weights: list[float] | None = None
    p: float | list[float] = 0.9
    eta: float | None = None
    K: int = 64
    q: int = 2
    tau: int = 4
    problem: dict[str, Any] = field(default_factory=_quadratic_default)
    replicas: int = 200
    seed: int = 0

    # ---- validation -----------------------------------------------------------
    def validate(self) -> None:
        require_int("hubs", self.hubs)
        self.sizes()
        if self.graph not in topology.GRAPH_KINDS:
            raise ValueError(f"graph={self.graph!r} must be one of {topology.GRAPH_KINDS}")
        if self.hub_rule is not None and self.hub_rule not in topology.HUB_RULES:
            raise ValueError(f"hub_rule={self.hub_rule!r} must be null or one of "
                             f"{topology.HUB_RULES}")
        n = int(self.sizes().sum())
        if self.weights is not None:
            require_floats("weights", self.weights, n, low=0, low_open=True)
        require_floats("p", self.p, n, low=0, high=1, low_open=True)
        if self.eta is not None:
            require_float("eta", self.eta, low=0, low_open=True)
        for name in ("K", "q", "tau", "replicas"):
            require_int(name, getattr(self, name))
        require_int("seed", self.seed, minimum=0)
        if self.K % (self.q * self.tau):
            raise ValueError(f"K={self.K} must be a multiple of q*tau={self.q * self.tau} "
                             "(the proof sums over whole hub periods, papers/mllsgd.txt L1102)")
        self.problem_spec()

    def sizes(self) -> np.ndarray:
        """Workers per hub, [D]."""
        if isinstance(self.workers_per_hub, (list, tuple)):
            if len(self.workers_per_hub) != self.hubs:
                raise ValueError(f"workers_per_hub has {len(self.workers_per_hub)} entries, "
                                 f"expected hubs={self.hubs}")
            return np.array([require_int(f"workers_per_hub[{d}]", s)
                             for d, s in enumerate(self.workers_per_hub)])
        return np.full(self.hubs, require_int("workers_per_hub", self.workers_per_hub))

    def problem_spec(self) -> dict[str, Any]:
        """The problem fields with defaults filled in, validated."""
        return problem_spec(self.problem, PROBLEM_KINDS)


# ---------------------------------------------------------------------- set-up


@dataclass
class Setup:
    """Everything built from a scenario (deterministic in the seed)."""

    problem: Quadratic | LogisticRegression
    x1: torch.Tensor
    generator: torch.Generator
    H: np.ndarray
    hub_of: np.ndarray
    w: np.ndarray
    p: np.ndarray
    matrices: topology.WorkerMatrices
    zeta: float


def build(s: MLLSGDScenario) -> Setup:
    """Hub graph, H (validated against Assumption 2), problem and x_1 from the seed."""
    sizes = s.sizes()
    n = int(sizes.sum())
    hub_of = np.repeat(np.arange(s.hubs), sizes)
    w = np.ones(n) if s.weights is None else np.asarray(s.weights, dtype=float)
    adj = topology.hub_graph(s.graph, s.hubs, seed=s.seed)
    _, _, b = topology.hub_weights(hub_of, w)
    H = topology.hub_matrix(adj, b, rule=s.hub_rule)
    topology.validate_hub_matrix(H, b, adj)
    gen = torch.Generator().manual_seed(s.seed)
    spec = s.problem_spec()
    if spec["kind"] == "quadratic":
        problem = Quadratic.random(spec["dim"], spec["L"], spec["mu"], spec["sigma"], gen,
                                   rotate=spec["rotate"])
        origin = problem.x_star
    else:
        problem = LogisticRegression.random(spec["n"], spec["dim"], spec["R"], gen,
                                            batch=spec["batch"], lam=spec["lam"])
        origin = torch.zeros(spec["dim"], dtype=torch.float64)
    direction = torch.randn(spec["dim"], generator=gen, dtype=torch.float64)
    x1 = origin + spec["distance"] * direction / direction.norm()
    p = np.asarray(s.p, dtype=float) * np.ones(n)
    return Setup(problem, x1, gen, H, hub_of, w, p, topology.worker_matrices(hub_of, w, H),
                 topology.zeta(H, b))


# ---------------------------------------------------------------------- adapter


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad F(u_k)||^2 at the scale of x_1 and x*."""
    scale = max(float(st.x1.norm()), float(getattr(st.problem, "x_star", st.x1).norm()))
    return roundoff(st.problem.L, scale)


def _late(series: np.ndarray) -> np.ndarray:
    """Mean over the second half of the iterations (the stationary floor of (14))."""
    return series[..., series.shape[-1] // 2:].mean(axis=-1)


class MLLSGDAdapter:
    scenario_type = MLLSGDScenario
    defaults = {
        "mllsgd.theorem1": MLLSGDScenario(),
        # K -> infinity: a long run; measured = mean over its second half
        "mllsgd.theorem1_limit": MLLSGDScenario(K=1024, replicas=100),
        # eta = 1/(L sqrt K) must satisfy (12) and q^2 tau^2 <= sqrt K: small q tau, zeta = 0
        "mllsgd.corollary1": MLLSGDScenario(hubs=2, graph="complete", p=1.0, q=1, tau=4,
                                            K=1024, replicas=100),
    }

    def parameters(self, key: str, s: MLLSGDScenario, thm) -> dict[str, Any]:
        """Theorem parameters derived from the scenario. eta: the scenario's, else the
        largest admissible (theorem 1 and its limit) or 1/(L sqrt K) (corollary 1)."""
        st = build(s)
        pr = st.problem
        params: dict[str, Any] = {
            "L": pr.L, "beta": pr.beta, "sigma": pr.sigma, "Delta": pr.delta(st.x1),
            "K": s.K, "q": s.q, "tau": s.tau, "zeta": st.zeta, "a": st.matrices.a, "p": st.p,
        }
        if thm.step is None:
            if s.eta is not None:
                raise ValueError(f"eta={s.eta}: {key} fixes eta = 1/(L sqrt K); leave eta null")
            params["eta"] = 1.0 / (pr.L * math.sqrt(s.K))
        elif s.eta is None:
            params["eta"] = thm.max_step(**params)
        else:
            params["eta"] = float(s.eta)
        return params

    def measure(self, key: str, s: MLLSGDScenario, params, exact: bool) -> Measurement:
        st = build(s)
        reduce = _late if key == "mllsgd.theorem1_limit" else (lambda x: x.mean(axis=-1))
        atol = _roundoff(st)
        if exact:
            series = self.exact_series(s, st, params["eta"])
            return Measurement(exact=float(reduce(series)), series=series, atol=atol)
        trace = run_mllsgd(
            st.problem, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
            w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=params["eta"], K=s.K, q=s.q,
            tau=s.tau, x1=st.x1, replicas=s.replicas, generator=st.generator)
        ok = ~trace.diverged.numpy()
        per_k = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=reduce(per_k), diverged=int((~ok).sum()),
                           series=per_k.mean(axis=0) if ok.any() else None, atol=atol)

    def random_scenario(self, key: str, rng: np.random.Generator) -> MLLSGDScenario:
        """A small random scenario on which ``key``'s hypotheses hold.

        2-4 hubs of 1-4 workers on a random graph kind, per-worker p in [0.6, 1] (above
        2 - sqrt 2, where (12) can hold, L1214), q, tau in 1..3, a quadratic or logistic
        problem; eta a random fraction of the largest admissible step (theorem 1 and its
        limit) or the corollary's fixed 1/(L sqrt K), with zeta = 0, q = tau = 1 and K = 256
        so that (12) holds at that step, as Corollary 1 silently needs (papers/mllsgd.txt
        L192). The limit (14) is checked on a well-conditioned quadratic started near x*
        whose run is long enough to reach its floor (eta mu K / 2 >= 20)."""
        hubs = int(rng.integers(2, 5))
        sizes = [int(v) for v in rng.integers(1, 5, size=hubs)]
        n = sum(sizes)
        q, tau = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        L = float(np.round(rng.uniform(0.5, 4), 3))
        if key == "mllsgd.theorem1_limit" or rng.random() < 0.7:
            limit = key == "mllsgd.theorem1_limit"
            problem = {"kind": "quadratic", "dim": int(rng.integers(2, 6)), "L": L,
                       "mu": L / 2 if limit else 0.05, "rotate": True,
                       "sigma": float(np.round(rng.uniform(0.1 if limit else 0, 2), 3)),
                       "distance": float(np.round(rng.uniform(0, 0.5) if limit
                                                  else rng.uniform(0.5, 4), 3))}
        else:
            problem = {"kind": "logistic", "dim": int(rng.integers(2, 6)), "n": 64,
                       "R": float(np.round(rng.uniform(0.5, 2), 3)), "batch": 4,
                       "lam": 0.0, "distance": float(np.round(rng.uniform(0.5, 2), 3))}
        s = MLLSGDScenario(
            hubs=hubs, workers_per_hub=sizes, graph=str(rng.choice(topology.GRAPH_KINDS)),
            p=[float(v) for v in np.round(rng.uniform(0.6, 1.0, size=n), 3)], eta=None,
            q=q, tau=tau, K=q * tau * int(rng.integers(2, 9)), problem=problem, replicas=64,
            seed=int(rng.integers(2**31)))
        if key == "mllsgd.corollary1":
            return s.replace(graph="complete", q=1, tau=1, K=256,
                             p=[float(v) for v in np.round(rng.uniform(0.95, 1.0, size=n), 3)])
        s.validate()
        eta = float(self.parameters(key, s, bounds.get(key))["eta"] * rng.uniform(0.2, 1.0))
        if key == "mllsgd.theorem1_limit":
            periods = math.ceil(40 / (eta * problem["mu"] * q * tau))
            return s.replace(eta=eta, K=q * tau * min(periods, 4096 // (q * tau)))
        return s.replace(eta=eta)

    def plot(self, key: str, s: MLLSGDScenario, *, variant: str | None, exact: bool, ax):
        """Bound and measured running average of ||grad F(u_k)||^2 along K."""
        from .plots import along_K  # matplotlib only when a figure is drawn

        return along_K(key, s, variant=variant, exact=exact, ax=ax)

    @staticmethod
    def exact_series(s: MLLSGDScenario, st: Setup, eta: float) -> np.ndarray:
        """E||grad F(u_k)||^2, k = 1..K, exactly (quadratic problems only)."""
        if s.problem_spec()["kind"] != "quadratic":
            raise ValueError("exact mode needs problem.kind='quadratic' (linear-Gaussian "
                             f"dynamics), got {s.problem['kind']!r}")
        pr = st.problem
        y1 = (pr.eigvecs.T @ (st.x1 - pr.x_star)).numpy()
        m = st.matrices
        return exact_mode.expected_grad_sq_norms(pr.eigenvalues.numpy(), y1, pr.sigma, st.p, m.a,
                                                 m.V, m.Z, eta, s.K, s.q, s.tau)


register_adapter("mllsgd", MLLSGDAdapter())
