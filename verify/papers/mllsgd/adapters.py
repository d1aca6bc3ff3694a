"""Castiglia, Das & Patterson 2021, Multi-Level Local SGD (MLL-SGD).

Statement: Theorem 1, bound (13) under condition (12); its K -> infinity floor (14);
Corollary 1, the rate at eta = 1/(L sqrt K), (15). Algorithm: (3), (5)-(8).

Scenario: the hub graph and its H, the workers and their weights and step
probabilities, eta (null = the largest admissible), K, q, tau, the problem, the replicas
and the seed.

Parameters: L, beta, sigma from the problem; Delta = F(x_1) - F_inf; zeta from H
(``bounds.topology``); the worker weights a and probabilities p.

Measurement: the average over k of ||grad F(u_k)||^2 at u_k = X_k a ((8)) over Monte-Carlo
replicas, or exactly (quadratic problems) by propagating the first and second moments of
the linear-Gaussian dynamics (below).

Exact mode. F(x) = 0.5 (x - x*)^T A (x - x*) + f*, A = U diag(lam) U^T, and g(x) = A (x - x*) + eps
with eps ~ N(0, (sigma^2/d) I_d), so E||g - grad F||^2 = sigma^2 (Assumption 1d with beta = 0).
Worker i steps with probability p_i ((3), (18)); X_{k+1} = (X_k - eta G_k) T_k ((5)) with
T_k = Z if k % (q tau) == 0, V if k % tau == 0, else I ((6)); all workers start at x_1.
Rotating by U keeps eps isotropic, so in eigen-coordinate c (eigenvalue lam) the worker
values form a row vector y with y_1 = y1[c] 1^T and
    y_{k+1} = (y_k o (1 - eta lam theta_k) - eta theta_k o e_k) T_k,  e_k ~ N(0, sigma^2/d I_N).
With m_k = E[y_k] and M_k = E[y_k^T y_k], theta_k independent of y_k and e_k:
    m_{k+1} = (m_k o (1 - eta lam p)) T_k,
    M_{k+1} = T_k^T (M_k o C + eta^2 (sigma^2/d) diag(p)) T_k,
    C_ij = (1 - eta lam p_i)(1 - eta lam p_j) (i != j),  C_ii = p_i (1 - eta lam)^2 + 1 - p_i.
The coins are shared by the coordinates of a worker, but each coordinate's moments only
involve the coin's marginal law, so they are exact. With u_k = X_k a,
E||grad F(u_k)||^2 = sum_c lam_c^2 a^T M_k^(c) a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedbound.bounds.references import cite
from fedbound.verify.api import (
    LOOP_OVERHEAD,
    Adapter,
    Draw,
    Footprint,
    Measurement,
    Scenario,
    Sweep,
    Tags,
    problem_spec,
    register_adapter,
    register_sweep,
    require_float,
    require_floats,
    require_int,
    roundoff,
)
from fedbound.verify.api import count_text as _n

from . import theorems  # noqa: F401 - registers the results the adapters below check

if TYPE_CHECKING:  # annotations only: torch and sim are imported where they are used
    import torch

    from fedbound.bounds import topology
    from fedbound.sim.problems import LogisticRegression, Quadratic

PAPER = cite("mllsgd")
#: the most workers a scenario may name: one float64 per worker must fit in a numpy array
MAX_WORKERS = 2**60 - 1
PROBLEM_KINDS = {
    # kind: {field: default}
    "quadratic": {"dim": 8, "L": 1.0, "mu": 0.1, "sigma": 1.0, "distance": 3.0, "rotate": False},
    "logistic": {"dim": 5, "n": 200, "R": 1.0, "batch": 4, "lam": 0.0, "distance": 2.0},
}


def _quadratic_default() -> dict[str, Any]:
    return {"kind": "quadratic", **PROBLEM_KINDS["quadratic"]}


@dataclass
class MLLSGDScenario(Scenario):
    """A run of MLL-SGD and the data the bound needs. JSON keys are the field names.

    ``workers_per_hub``: one size for every hub or a list of D sizes; ``weights``: the
    worker weights w (null = uniform; Section 4); ``p``: one probability or one per worker;
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

    def validate(self) -> None:
        from fedbound.bounds import topology

        require_int("hubs", self.hubs)
        n = self.worker_count()
        if self.graph not in topology.GRAPH_KINDS:
            raise ValueError(f"graph={self.graph!r} must be one of {topology.GRAPH_KINDS}")
        if self.hub_rule is not None and self.hub_rule not in topology.HUB_RULES:
            raise ValueError(f"hub_rule={self.hub_rule!r} must be null or one of "
                             f"{topology.HUB_RULES}")
        if self.weights is not None:
            if not isinstance(self.weights, list):
                raise ValueError(f"weights={self.weights!r} must be null (uniform) or a list of "
                                 f"one weight per worker ({n})")
            require_floats("weights", self.weights, n, low=0, low_open=True)
        require_floats("p", self.p, n, low=0, high=1, low_open=True)
        if self.eta is not None:
            require_float("eta", self.eta, low=0, low_open=True)
        for name in ("K", "q", "tau", "replicas"):
            require_int(name, getattr(self, name))
        require_int("seed", self.seed, minimum=0)
        if self.K % (self.q * self.tau):
            raise ValueError(f"K={self.K} must be a multiple of q*tau={self.q * self.tau} "
                             f"(the proof of {PAPER}, Theorem 1 sums over whole hub periods, "
                             "Appendix C.3, (182) to (183))")
        self.problem_spec()

    def worker_count(self) -> int:
        """The number of workers N, validated, without building anything (a scenario of a
        billion workers is refused by its footprint, not by an allocation)."""
        if isinstance(self.workers_per_hub, (list, tuple)):
            n = int(self.sizes().sum())
        else:
            n = self.hubs * require_int("workers_per_hub", self.workers_per_hub)
        if n > MAX_WORKERS:  # numpy could not even describe one number per worker
            raise ValueError(f"hubs={self.hubs} x workers_per_hub = {n:.3g} workers, more than "
                             f"an array can hold (at most 2^60)")
        return n

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
    import torch

    from fedbound.bounds import topology
    from fedbound.sim.problems import LogisticRegression, Quadratic

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


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad F(u_k)||^2 at the scale of x_1 and x*."""
    scale = max(float(st.x1.norm()), float(getattr(st.problem, "x_star", st.x1).norm()))
    return roundoff(st.problem.L, scale)


def estimated_parts(s: MLLSGDScenario, thm, *, problem, x1, settings):
    """Theorem 1 with estimated constants (``verify.estimated``): L, sigma and Delta
    estimated on ``problem`` (default the scenario's own); K, q, tau, zeta, a and p from
    the scenario; measured with ``sim.mllsgd.run_mllsgd`` as the adapter measures (13)."""
    import torch

    from fedbound.sim.mllsgd import run_mllsgd
    from fedbound.verify.api import Parts, estimate_constants, estimated_start

    st = build(s)
    problem, x1, own = estimated_start(problem, x1, st.problem, st.x1)
    estimates = estimate_constants(problem, x1, st.generator, settings)
    atol = roundoff(estimates["L"].upper, float(x1.norm()))

    def measure(params):
        trace = run_mllsgd(
            problem, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
            w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=params["eta"], K=s.K, q=s.q,
            tau=s.tau, x1=x1, replicas=s.replicas, generator=st.generator)
        ok = ~trace.diverged.numpy()
        per_k = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=per_k.mean(axis=-1), diverged=int((~ok).sum()), atol=atol)

    notes = () if own else (f"problem: {type(problem).__name__} (dim {problem.dim}) passed in; "
                            "the scenario's problem field is not used",)
    return Parts(params={"beta": 0.0, "K": s.K, "q": s.q, "tau": s.tau, "zeta": st.zeta,
                         "a": st.matrices.a, "p": st.p},
                 estimates=estimates, step=s.eta, measure=measure, notes=notes)


# ---------------------------------------------------------------------- adapters


class MLLSGD(Adapter):
    """What the three MLL-SGD results share: the scenario, the derivation of (12)-(13)'s
    parameters, the simulator run and the exact mode."""

    scenario_type = MLLSGDScenario
    tags = Tags(exact=True)
    series_label = "iterations K [count]"
    lhs_label = r"$\frac{1}{K}\sum_{k\leq K}\|\nabla F(u_k)\|^2$ [loss²/param²]"

    def _step(self, s: MLLSGDScenario, thm, params: dict) -> float:
        """eta: the scenario's, else the largest that (12) allows."""
        return float(s.eta) if s.eta is not None else thm.max_step(**params)

    def _derive(self, s: MLLSGDScenario, thm) -> dict[str, Any]:
        st = build(s)
        pr = st.problem
        params: dict[str, Any] = {
            "L": pr.L, "beta": pr.beta, "sigma": pr.sigma, "Delta": pr.delta(st.x1),
            "K": s.K, "q": s.q, "tau": s.tau, "zeta": st.zeta, "a": st.matrices.a, "p": st.p,
        }
        params["eta"] = self._step(s, thm, params)
        return params

    @staticmethod
    def _reduce(series: np.ndarray) -> np.ndarray:
        """The left-hand side of (13) from the per-iteration ||grad F(u_k)||^2: their mean."""
        return series.mean(axis=-1)

    def _exact_unsupported(self, s: MLLSGDScenario) -> str:
        kind = s.problem_spec()["kind"]
        return "" if kind == "quadratic" else (
            f"problem.kind={kind!r}: exact mode needs a quadratic (linear-Gaussian dynamics)")

    def _measure(self, s: MLLSGDScenario, params, exact: bool) -> Measurement:
        import torch

        from fedbound.sim.mllsgd import run_mllsgd

        st = build(s)
        atol = _roundoff(st)
        if exact:
            series = exact_series(st, params["eta"], s.K, s.q, s.tau)
            return Measurement(exact=float(self._reduce(series)), series=series, atol=atol)
        trace = run_mllsgd(
            st.problem, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
            w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=params["eta"], K=s.K, q=s.q,
            tau=s.tau, x1=st.x1, replicas=s.replicas, generator=st.generator)
        ok = ~trace.diverged.numpy()
        per_k = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=self._reduce(per_k), diverged=int((~ok).sum()),
                           series=per_k.mean(axis=0) if ok.any() else None, atol=atol)

    def _footprint(self, s: MLLSGDScenario, exact: bool) -> Footprint:
        """Memory: the dense N x N mixing matrices of ``bounds.topology.worker_matrices`` (E E^T,
        V, Z, A and a temporary), the D x D hub matrices, the replicas' worker models [R, N, d]
        with the step's temporaries, the [R, K] records, the problem's data; exact mode: the
        second moments [d, N, N]. Work: K iterations of those tensors."""
        D, N, R, K = s.hubs, s.worker_count(), s.replicas, s.K
        spec = s.problem_spec()
        d = spec["dim"]
        workers = (f"workers={_n(N)} (sum of workers_per_hub)" if isinstance(s.workers_per_hub, list)
                   else f"workers={_n(N)} (hubs={_n(D)} x workers_per_hub={_n(s.workers_per_hub)})")
        memory = {
            f"{workers}, squared, x 5 dense worker matrices of 8 B": 5 * N * N * 8 + 2 * N * D * 8,
            f"hubs={_n(D)}, squared, x 8 hub matrices of 8 B": 8 * D * D * 8,
            f"replicas={_n(R)} x {workers} x dim={_n(d)} x 7 buffers of 8 B": 7 * R * N * d * 8,
            f"replicas={_n(R)} x K={_n(K)} x 5 records of 8 B": 5 * R * K * 8,
        }
        steps = {f"K={_n(K)} iterations x replicas={_n(R)} x {workers} x dim={_n(d)}":
                 K * (20 * R * N * d + LOOP_OVERHEAD),
                 f"{workers}, squared, x hubs={_n(D)} (the mixing matrices)": 2 * N * N * D + 10 * D**3}
        if spec["kind"] == "quadratic":
            memory[f"problem.dim={_n(d)}, squared, x 6 matrices of 8 B"] = 6 * d * d * 8
        else:
            b, m = spec["batch"], spec["n"]
            memory[f"problem.n={_n(m)} x dim={_n(d)} x 3 copies of the data"] = 3 * m * d * 8
            memory[f"replicas={_n(R)} x {workers} x problem.batch={_n(b)} x dim={_n(d)} x 3 of 8 B"] = \
                3 * R * N * b * d * 8
            steps[f"K={_n(K)} x replicas={_n(R)} x {workers} x problem.batch={_n(b)} x dim={_n(d)}"] = \
                6 * K * R * N * b * d
            steps[f"K={_n(K)} x replicas={_n(R)} x problem.n={_n(m)} x dim={_n(d)}"] = 4 * K * R * m * d
        if exact:
            memory[f"dim={_n(d)} x {workers}, squared, x 5 moment arrays of 8 B"] = 5 * d * N * N * 8
            steps[f"K={_n(K)} x dim={_n(d)} x {workers}, cubed (exact moments)"] = \
                K * (4 * d * N**3 + LOOP_OVERHEAD)
        return Footprint.of(memory, steps)

    def _bound_series(self, s: MLLSGDScenario, thm, params, n: int):
        """The bound at every K' <= K that is a multiple of q tau, with the same step."""
        ks = np.arange(1, n + 1)
        ks = ks[ks % (s.q * s.tau) == 0]
        return ks, np.broadcast_to(thm.evaluate(**{**params, "K": ks.astype(float)}), ks.shape)

    def _draw_base(self, draw: Draw, *, limit: bool = False) -> MLLSGDScenario:
        """1-5 hubs of 1-4 workers on a random graph kind with a random H rule, worker weights
        (uniform half of the time), per-worker p in [0.6, 1] (above 2 - sqrt 2, where (12) can
        hold; proof of Theorem 1, (211)), q in 1..3, tau in 1..4, a quadratic (70%) or a
        logistic problem; ``limit``: a well-conditioned quadratic started near x*."""
        from fedbound.bounds import topology

        hubs = draw.integer(1, 5)
        sizes = [draw.integer(1, 4) for _ in range(hubs)]
        n = sum(sizes)
        q, tau = draw.integer(1, 3), draw.integer(1, 4)
        L = round(draw.uniform(0.5, 4), 3)
        if limit or draw.boolean(0.7):
            problem = {"kind": "quadratic", "dim": draw.integer(2, 5), "L": L,
                       "mu": L / 2 if limit else 0.05, "rotate": draw.boolean(),
                       "sigma": round(draw.uniform(0.1 if limit else 0, 2), 3),
                       "distance": round(draw.uniform(0, 0.5) if limit else draw.uniform(0.5, 4), 3)}
        else:
            problem = {"kind": "logistic", "dim": draw.integer(2, 5), "n": 64,
                       "R": round(draw.uniform(0.5, 2), 3), "batch": 4, "lam": 0.0,
                       "distance": round(draw.uniform(0.5, 2), 3)}
        return MLLSGDScenario(
            hubs=hubs, workers_per_hub=sizes, graph=draw.choice(topology.GRAPH_KINDS),
            hub_rule=draw.choice([None, "mh", "diffusion"]),
            weights=None if draw.boolean() else [round(draw.uniform(0.2, 5), 3) for _ in range(n)],
            p=[round(draw.uniform(0.6, 1.0), 3) for _ in range(n)], eta=None, q=q, tau=tau,
            K=q * tau * draw.integer(2, 8), problem=problem, replicas=64,
            seed=draw.integer(0, 2**31 - 1))

    def _draw(self, draw: Draw) -> MLLSGDScenario:
        """A small random scenario with eta a random fraction (0.05 to 1) of the largest
        admissible step."""
        s = self._draw_base(draw)
        s.validate()
        eta = self.parameters(s, self.theorem())["eta"] * draw.uniform(0.05, 1.0)
        return s.replace(eta=eta)


@register_adapter
class Theorem1(MLLSGD):
    key = "mllsgd.theorem1"
    default = MLLSGDScenario()
    tags = Tags(exact=True, estimated=True)

    def _estimated_parts(self, scenario, thm, *, problem, x1, settings):
        return estimated_parts(scenario, thm, problem=problem, x1=x1, settings=settings)


@register_adapter
class Theorem1Limit(MLLSGD):
    """K -> infinity: a long run whose measurement is the mean over its second half."""

    key = "mllsgd.theorem1_limit"
    # a complete hub graph (zeta = 0) and q = 1 (a larger admissible step) and a
    # well-conditioned quadratic, so that K = 1024 iterations reach the floor (eta mu K/2 > 20)
    default = MLLSGDScenario(K=1024, graph="complete", q=1, replicas=100,
                             problem={**_quadratic_default(), "mu": 1.0})
    #: the largest share of the bound that the start may still contribute at iteration K/2
    SETTLED = 1e-3
    #: random scenarios run at most this many iterations (they are checked by Monte Carlo too)
    MAX_K = 4096

    def _derive(self, s: MLLSGDScenario, thm) -> dict[str, Any]:
        """(12)-(14)'s parameters, on a run long enough to measure the floor (14): a limit
        K -> infinity, measured here by the mean over the second half of a finite run. On a
        quadratic every mode relaxes at least like (1 - eta mu min_i p_i)^(2k): by k = K/2 the
        noise must have reached all but ``SETTLED`` of its stationary level and the start's
        share, at most L^2 ||x_1 - x*||^2 (1 - eta mu min_i p_i)^K, must be below ``SETTLED``
        times the bound (else a transient, not the floor, is what is measured). The
        relaxation time of logistic regression is not known: the limit is checked on
        quadratics."""
        params = super()._derive(s, thm)
        spec = s.problem_spec()
        if spec["kind"] != "quadratic":
            raise ValueError(f"problem.kind={spec['kind']!r}: the floor (14) of {PAPER}, Theorem 1 "
                             "is a limit K -> infinity, measured on a quadratic, whose relaxation "
                             "time is known")
        decay = max(1 - params["eta"] * spec["mu"] * float(np.min(params["p"])), 0.0) ** s.K
        start = spec["L"] ** 2 * spec["distance"] ** 2 * decay
        if decay > self.SETTLED or start > self.SETTLED * thm.evaluate(**params):
            raise ValueError(f"K={s.K}: the run is too short to reach the floor (14) of {PAPER}, "
                             f"Theorem 1: by K/2 the noise has reached only {1 - decay:.3g} of "
                             f"its level and the start still contributes up to {start:.3g} (at "
                             f"most {self.SETTLED:g} of either is allowed); lengthen K, or start "
                             "nearer x*")
        return params

    @staticmethod
    def _reduce(series: np.ndarray) -> np.ndarray:
        """The stationary floor of (14): the mean over the second half of the run."""
        return series[..., series.shape[-1] // 2:].mean(axis=-1)

    def _draw(self, draw: Draw) -> MLLSGDScenario:
        """A well-conditioned quadratic started near x*, run long enough to reach its floor
        (eta mu min p K / 2 >= 20) within ``MAX_K`` iterations: up to 10 random set-ups are
        drawn, then a complete hub graph with q = tau = 1 (the largest admissible step)."""
        for attempt in range(11):
            s = self._draw_base(draw, limit=True)
            if attempt == 10:
                s = s.replace(graph="complete", hub_rule=None, q=1, tau=1, K=2)
            s.validate()
            eta = MLLSGD._derive(self, s, self.theorem())["eta"] * draw.uniform(0.5, 1.0)
            period = s.q * s.tau
            K = period * math.ceil(40 / (eta * s.problem["mu"] * min(np.atleast_1d(s.p)) * period))
            if K <= self.MAX_K or attempt == 10:
                return s.replace(eta=eta, K=K)


@register_adapter
class Corollary1(MLLSGD):
    """eta = 1/(L sqrt K) must satisfy (12) and q^2 tau^2 <= sqrt K: small q tau, zeta = 0."""

    key = "mllsgd.corollary1"
    default = MLLSGDScenario(hubs=2, graph="complete", p=1.0, q=1, tau=4, K=1024, replicas=100)

    def _step(self, s: MLLSGDScenario, thm, params: dict) -> float:
        if s.eta is not None:
            raise ValueError(f"eta={s.eta}: {self.key} fixes eta = 1/(L sqrt K) "
                             f"({PAPER}, Corollary 1); leave eta null")
        return 1.0 / (params["L"] * math.sqrt(s.K))

    def _draw(self, draw: Draw) -> MLLSGDScenario:
        """zeta = 0 (complete graph), q = tau = 1, K = 256 and p near 1, so that (12) holds at
        the corollary's step, as Corollary 1 silently needs."""
        s = self._draw_base(draw)
        return s.replace(graph="complete", hub_rule=None, q=1, tau=1, K=256,
                         p=[round(draw.uniform(0.95, 1.0), 3) for _ in range(int(s.sizes().sum()))])


# ---------------------------------------------------------------------- exact moments


def exact_series(st: Setup, eta: float, K: int, q: int, tau: int) -> np.ndarray:
    """E||grad F(u_k)||^2, k = 1..K, exactly, on a scenario's quadratic (module docstring)."""
    pr = st.problem
    y1 = (pr.eigvecs.T @ (st.x1 - pr.x_star)).numpy()
    m = st.matrices
    return expected_grad_sq_norms(pr.eigenvalues.numpy(), y1, pr.sigma, st.p, m.a, m.V, m.Z,
                                  eta, K, q, tau)


def expected_grad_sq_norms(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau) -> np.ndarray:
    """[K] array of E||grad F(u_k)||^2 for k = 1..K, exactly (u_k before the step of k): the
    summands of the left-hand side of (13).

    eigenvalues: [d] eigenvalues lam of A; y1: [d] initial eigen-coordinates U^T (x1 - x*);
    sigma: noise level (E||eps||^2 = sigma^2); p: [N] step probabilities in (0, 1];
    a: [N] worker weights; V, Z: [N, N] mixing matrices of (6)-(7) (e.g.
    ``bounds.topology.worker_matrices``); eta > 0; K a multiple of q tau. The recursion is
    in the module docstring."""
    lam, y1, p, a, V, Z = _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau)
    sigma = _nonnegative_scalar("sigma", sigma)
    d, N = lam.size, p.size
    shrink = 1.0 - eta * lam[:, None] * p[None, :]
    C = shrink[:, :, None] * shrink[:, None, :]
    C[:, np.arange(N), np.arange(N)] = p * (1.0 - eta * lam[:, None]) ** 2 + 1.0 - p
    noise = eta**2 * sigma**2 / d * np.diag(p)
    M = y1[:, None, None] ** 2 * np.ones((d, N, N))
    out = np.empty(K)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, K + 1):
            out[k - 1] = np.sum(lam**2 * (a @ M @ a))
            T = _mixing_matrix(k, q, tau, V, Z)
            M = T.T @ (M * C + noise) @ T
    return _finite_result(out, eta, lam)


def expected_lhs(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau) -> float:
    """E[(1/K) sum_{k=1}^K ||grad F(u_k)||^2], the left-hand side of (13), exactly: the mean
    of :func:`expected_grad_sq_norms` (same arguments)."""
    return float(np.mean(expected_grad_sq_norms(eigenvalues, y1, sigma, p, a, V, Z, eta, K, q, tau)))


def expected_averaged_model(eigenvalues, y1, p, a, V, Z, eta, K, q, tau) -> np.ndarray:
    """[K, d] array of U^T (E[u_k] - x*) for k = 1..K: the first moment of u_k = X_k a ((8)),
    by m_{k+1} = (m_k o (1 - eta lam p)) T_k per eigen-coordinate (E[g_k^(i)] = p_i grad
    F(x_k^(i)), (20)). It does not depend on sigma. Arguments as in
    :func:`expected_grad_sq_norms`."""
    lam, y1, p, a, V, Z = _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau)
    shrink = 1.0 - eta * lam[:, None] * p[None, :]
    m = y1[:, None] * np.ones((lam.size, p.size))
    out = np.empty((K, lam.size))
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(1, K + 1):
            out[k - 1] = m @ a
            m = (m * shrink) @ _mixing_matrix(k, q, tau, V, Z)
    return _finite_result(out, eta, lam)


def _mixing_matrix(k, q, tau, V, Z) -> np.ndarray:
    """T_k of (6): Z if k % (q tau) == 0, V if k % tau == 0, else I."""
    if k % (q * tau) == 0:
        return Z
    if k % tau == 0:
        return V
    return np.eye(V.shape[0])


def _checked_problem(eigenvalues, y1, p, a, V, Z, eta, K, q, tau):
    lam = np.asarray(eigenvalues, dtype=float)
    if lam.ndim != 1 or lam.size == 0:
        raise ValueError(f"eigenvalues has shape {lam.shape}: it must be a nonempty vector [d]")
    bad = np.flatnonzero(~(np.isfinite(lam) & (lam >= 0)))
    if bad.size:
        i = bad[0]
        raise ValueError(f"eigenvalues[{i}] = {lam[i]:.12g} must be finite and >= 0: A positive "
                         f"semidefinite keeps F bounded below ({PAPER}, Assumption 1b)")
    y1 = _finite_array("y1", y1, lam.shape, "one initial eigen-coordinate per eigenvalue")
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p has shape {p.shape}: it must be a nonempty vector [N]")
    outside = np.flatnonzero(~((p > 0) & (p <= 1)))
    if outside.size:
        i = outside[0]
        raise ValueError(f"p[{i}] = {p[i]:.12g} is outside (0, 1]: a step probability ((3))")
    N = p.size
    a = _finite_array("a", a, (N,), "one weight per worker")
    if (a <= 0).any():
        i = np.flatnonzero(a <= 0)[0]
        raise ValueError(f"a[{i}] = {a[i]:.12g} <= 0: worker weights a_i = w_i / w_tot > 0")
    if abs(a.sum() - 1.0) > 1e-9:
        raise ValueError(f"a sums to {a.sum():.12g}, not 1: a_i = w_i / w_tot")
    V = _finite_array("V", V, (N, N), "N x N sub-network averaging matrix ((6))")
    Z = _finite_array("Z", Z, (N, N), "N x N hub averaging matrix ((7))")
    eta = _positive_scalar("eta", eta)
    q, tau, K = (_positive_int(name, value) for name, value in (("q", q), ("tau", tau), ("K", K)))
    if K % (q * tau):
        raise ValueError(f"K={K} is not a multiple of q * tau = {q * tau}: the proof of Theorem 1 "
                         "sums over whole hub periods")
    return lam, y1, p, a, V, Z


def _finite_result(out, eta, lam) -> np.ndarray:
    bad = np.flatnonzero(~np.isfinite(out.reshape(out.shape[0], -1)).all(axis=1))
    if bad.size:
        raise ValueError(f"eta={eta!r}: the moments overflow float64 at k = {bad[0] + 1} "
                         f"(eta * max(eigenvalues) = {eta * lam.max():.12g}; the iteration diverges)")
    return out


def _finite_array(name, value, shape, what) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != tuple(shape):
        raise ValueError(f"{name} has shape {arr.shape}, expected {tuple(shape)}: {what}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains a non-finite entry")
    return arr


def _positive_scalar(name, value) -> float:
    if not (np.isscalar(value) and np.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r} must be a finite number > 0")
    return float(value)


def _nonnegative_scalar(name, value) -> float:
    if not (np.isscalar(value) and np.isfinite(value) and value >= 0):
        raise ValueError(f"{name}={value!r} must be a finite number >= 0")
    return float(value)


def _positive_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)


# ---------------------------------------------------------------------- rate sweeps

register_sweep("mllsgd.corollary1", Sweep(
    "K", "K", (1024, 4096, 16384, 65536), {"problem": {"mu": 0.5}},
    note="eta = 1/(L sqrt K), a well-conditioned quadratic"))
