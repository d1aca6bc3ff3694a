"""Yang, Zhang, Khanduri & Liu 2022, Anarchic Federated Learning (AFL).

Statement: Theorem 1 (a lower bound Omega(sigma_G^2) for general arrivals, on the paper's
two-worker instance); Theorems 2 and 3 (AFA-CD, general and uniform arrivals) and their
Corollaries 1 and 2; Theorem 4 (AFA-CS) and Corollary 3. Algorithms: Algorithm 2 (AFA-CD,
Section 4.1) and Algorithm 3 (AFA-CS, Section 4.2).

Scenario: the algorithm (AFA-CD "cd" or AFA-CS "cs"), M, m, the arrival process, the
delays, K (constant, or uniform on {K..K_high}), T, the step sizes, the problem, the
replicas and the seed. The schedule (arrivals, delays, K) is drawn before the run, so the
theorem's realised parameters (tau, m', the K statistics) are known when the step is
chosen: eta_L null -> ``local_fraction`` times its largest admissible value
(``bounds.afl.eta_L_cap``; 1/L where nothing binds); eta null -> ``step_fraction`` times
the largest admissible eta (the corollaries fix both: leave them null).

Measurement: the average over rounds of ||grad f(x_t)||^2, per replica, or exactly.

Exact mode (a quadratic, zero delays, constant K; AFA-CD with uniform or deterministic
arrivals, AFA-CS with deterministic arrivals, whose state (y, G_1..G_M) is propagated):
with a shared diagonal Hessian every coordinate y = x - x* evolves (AFA-CD) as
y_{t+1} = (1 - s a) y_t + s a (cbar_S - cbar) - (s/m) sum_{i in S} n_i, a = (1 - (1 -
eta_L lam)^K)/(eta_L K) (the K local steps in closed form), n_i the local noise with
variance (1/K^2) sum_j (1 - eta_L lam)^(2j) sigma_L^2/d; the mean and second moment of y
follow exactly (for uniform arrivals Var(cbar_S) = (M-m)/(m(M-1)) mean_i (c_i - cbar)^2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedbound.bounds.references import cite
from fedbound.verify.api import (
    LOOP_OVERHEAD,
    RATIO,
    STEP,
    Adapter,
    Draw,
    Family,
    Footprint,
    Measurement,
    Scenario,
    Sweep,
    Tags,
    along_trajectory,
    problem_spec,
    register_adapter,
    register_family,
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

    from fedbound.sim.afl import HeterogeneousQuadratic, LabelSkewedLogistic

PAPER = cite("afl")
PROBLEM_KINDS = {
    "quadratic": {"dim": 2, "L": 1.0, "mu": 0.5, "sigma_L": 1.0, "sigma_G": 0.5, "distance": 2.0},
    "logistic": {"dim": 3, "n": 20, "R": 1.0, "batch": 1, "lam": 0.0, "skew": 0.9, "distance": 1.0},
    "lower_bound": {"G": 1.0, "distance": 0.5},
}


def _quadratic() -> dict[str, Any]:
    return {"kind": "quadratic", **PROBLEM_KINDS["quadratic"]}


@dataclass
class AFLScenario(Scenario):
    """A run of AFA-CD / AFA-CS. ``arrivals``: "uniform", "biased" (with ``probs``, null:
    weights proportional to 1/(i+1)), "round_robin", "single", or a list of worker-index
    lists (round t uses entry t mod len). ``delays``: "uniform" on {0..tau}, "max", "zero".
    ``problem``: {"kind": "quadratic", "dim", "L", "mu", "sigma_L", "sigma_G", "distance"
    (= ||x_0 - x*||)}, {"kind": "logistic", "dim", "n", "R", "batch", "lam", "skew",
    "distance" (= ||x_0||)} or {"kind": "lower_bound", "G", "distance"} (Theorem 1's
    instance, x_0 = -G - distance)."""

    algorithm: str = "cd"
    M: int = 8
    m: int = 4
    T: int = 200
    K: int = 2
    K_high: int | None = None
    tau: int = 2
    delays: str = "uniform"
    arrivals: str | list = "uniform"
    probs: list[float] | None = None
    eta: float | None = None
    eta_L: float | None = None
    local_fraction: float = 0.5
    step_fraction: float = 1.0
    server_step: str = "proof"
    problem: dict[str, Any] = field(default_factory=_quadratic)
    replicas: int = 32
    seed: int = 0

    def validate(self) -> None:
        from fedbound.sim.afl import ARRIVALS, DELAYS  # sim (and torch) on first use

        if self.algorithm not in ("cd", "cs"):
            raise ValueError(f"algorithm={self.algorithm!r} must be 'cd' (AFA-CD) or 'cs' (AFA-CS)")
        for name in ("M", "m", "T", "K", "replicas"):
            require_int(name, getattr(self, name))
        require_int("tau", self.tau, minimum=0)
        require_int("seed", self.seed, minimum=0)
        if self.m > self.M:
            raise ValueError(f"m={self.m} exceeds M={self.M}: the server collects at most M "
                             f"updates per round ({PAPER}, Algorithm 1)")
        if self.K_high is not None and require_int("K_high", self.K_high) < self.K:
            raise ValueError(f"K_high={self.K_high} must be >= K={self.K}")
        if self.delays not in DELAYS:
            raise ValueError(f"delays={self.delays!r} must be one of {DELAYS}")
        if isinstance(self.arrivals, str):
            if self.arrivals not in ARRIVALS:
                raise ValueError(f"arrivals={self.arrivals!r} must be one of {ARRIVALS} or a list of "
                                 "worker-index lists")
            if self.arrivals == "single" and self.m != 1:
                raise ValueError(f"arrivals='single' needs m=1, got m={self.m}")
        elif not isinstance(self.arrivals, list) or not self.arrivals or any(
                not isinstance(e, list) or len(e) != self.m
                or any(not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < self.M
                       for i in e) for e in self.arrivals):
            raise ValueError(f"arrivals must be a process name or a list of lists of m={self.m} "
                             f"worker indices in [0, M={self.M})")
        if self.probs is not None:
            require_floats("probs", self.probs, self.M, low=0, low_open=True)
        for name in ("eta", "eta_L"):
            if getattr(self, name) is not None:
                require_float(name, getattr(self, name), low=0, low_open=True)
        for name in ("local_fraction", "step_fraction"):
            require_float(name, getattr(self, name), low=0, high=1, low_open=True)
        if self.server_step not in ("proof", "printed"):
            raise ValueError(f"server_step={self.server_step!r} must be 'proof' or 'printed'")
        spec = self.problem_spec()
        if spec["kind"] == "quadratic":  # logistic: in check_eta_L, once the data are built
            self.check_eta_L()
        if spec["kind"] == "lower_bound" and (self.M != 2 or self.arrivals != "single"
                                              or (self.tau > 0 and self.delays != "zero")):
            raise ValueError("problem.kind='lower_bound' is Theorem 1's instance: M=2, "
                             "arrivals='single', no delays (delays='zero' or tau=0)")

    def check_eta_L(self) -> None:
        """The local step condition of Theorem 2: ValueError naming eta_L when it fails. For
        logistic regression L comes from the data, so this runs when the check builds them
        (after the resource limits are checked), not when the scenario is loaded; Theorem 1's
        instance has no step hypothesis."""
        import fedbound.bounds.afl as B

        if (self.problem_spec()["kind"] != "lower_bound"
                and self.eta_L is not None and self.eta_L > B.eta_L_limit(self.L(), self.k_max())):
            raise ValueError(
                f"eta_L={self.eta_L:g} violates the local condition 6 eta_L^2 (2K^2-3K+1) L^2 <= 1 "
                f"({PAPER}, Theorem 2): eta_L must be <= "
                f"{B.eta_L_limit(self.L(), self.k_max()):.6g} for K_max={self.k_max()}, L={self.L():g}")

    def k_max(self) -> int:
        return self.K if self.K_high is None else self.K_high

    def L(self) -> float:
        """The smoothness constant: exact for quadratics and Theorem 1's instance, certified
        for logistic regression (built from the seed)."""
        spec = self.problem_spec()
        if spec["kind"] == "quadratic":
            return float(spec["L"])
        if spec["kind"] == "lower_bound":
            return 2.0
        return build(self).clients.L

    def problem_spec(self) -> dict[str, Any]:
        """The problem fields with defaults filled in, validated."""
        spec = problem_spec(self.problem, PROBLEM_KINDS)
        if spec["kind"] == "quadratic" and spec["sigma_G"] > 0 and self.M < 2:
            raise ValueError("problem.sigma_G > 0 needs M >= 2")
        return spec


# ---------------------------------------------------------------------- set-up


@dataclass
class Setup:
    clients: HeterogeneousQuadratic | LabelSkewedLogistic
    x0: torch.Tensor
    generator: torch.Generator
    schedule: Any


def build(s: AFLScenario) -> Setup:
    """Clients, x_0 and the schedule from the seed (one generator; the run continues it)."""
    import torch

    import fedbound.bounds.afl as B
    from fedbound.sim.afl import HeterogeneousQuadratic, LabelSkewedLogistic

    gen = torch.Generator().manual_seed(s.seed)
    spec = s.problem_spec()
    if spec["kind"] == "quadratic":
        clients = HeterogeneousQuadratic.random(spec["dim"], s.M, spec["L"], spec["mu"],
                                                spec["sigma_L"], spec["sigma_G"], gen)
        origin = clients.x_star
    elif spec["kind"] == "logistic":
        clients = LabelSkewedLogistic.random(s.M, spec["n"], spec["dim"], spec["R"], gen,
                                             skew=spec["skew"], lam=spec["lam"], batch=spec["batch"])
        origin = torch.zeros(spec["dim"], dtype=torch.float64)
    else:
        inst = B.lower_bound_instance(spec["G"])
        clients = HeterogeneousQuadratic([inst.curvature], [[c] for c in inst.centres])
        return Setup(clients, torch.tensor([inst.limit_point - spec["distance"]], dtype=torch.float64),
                     gen, _schedule(s, gen, None))
    direction = torch.randn(clients.dim, generator=gen, dtype=torch.float64)
    x0 = origin + spec["distance"] * direction / direction.norm()
    probs = s.probs
    if s.arrivals == "biased" and probs is None:
        probs = [1.0 / (i + 1) for i in range(s.M)]
    return Setup(clients, x0, gen, _schedule(s, gen, probs))


def _schedule(s: AFLScenario, gen, probs):
    from fedbound.sim.afl import draw_schedule

    K = s.K if s.K_high is None else (s.K, s.K_high)
    return draw_schedule(M=s.M, m=s.m, T=s.T, replicas=s.replicas, generator=gen, K=K, tau=s.tau,
                         delays=s.delays, arrivals=s.arrivals, probs=probs)


def _delta(st: Setup) -> float:
    return max(float(st.clients.loss(st.x0)) - st.clients.f_star, 0.0)


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad f||^2 at the scale of x_0."""
    return roundoff(st.clients.L, float(st.x0.abs().max()))


# ---------------------------------------------------------------------- adapters


class AFL(Adapter):
    """What the AFL results share: the realised schedule statistics, the steps, the run and
    the exact mode. Subclasses fix ``algorithm`` ("cd": AFA-CD, "cs": AFA-CS), whether the
    result assumes uniform arrivals, and whether it is a corollary (fixed steps)."""

    scenario_type = AFLScenario
    #: the server step eta multiplies eta_L (Algorithms 2 and 3): no unit of its own; the
    #: refutation families sweep the effective step s = eta eta_L
    field_units = {"eta": RATIO, "s = eta eta_L": STEP}
    tags = Tags(exact=True)
    series_label = "round t [count]"
    lhs_label = r"$\frac{1}{t}\sum_{t'<t}\|\nabla f(x_{t'})\|^2$ [loss²/param²]"
    algorithm = "cd"
    uniform_arrivals = False
    corollary = False

    def _check_scenario(self, s: AFLScenario) -> None:
        if s.algorithm != self.algorithm:
            name = "AFA-CD" if self.algorithm == "cd" else "AFA-CS"
            raise ValueError(f"algorithm={s.algorithm!r}: {self.key} is about {name} "
                             f"(algorithm={self.algorithm!r})")
        if self.uniform_arrivals and s.arrivals != "uniform":
            raise ValueError(f"arrivals={s.arrivals!r}: {self.key} assumes uniform arrivals "
                             f"({PAPER}, Theorem 3)")

    def _k_array(self, s: AFLScenario, thm, st: Setup) -> np.ndarray | int:
        """K, or the per-round K statistics of the arrived updates when K varies."""
        return s.K if s.K_high is None else st.schedule.K_arrived().numpy()

    def _derive(self, s: AFLScenario, thm) -> dict[str, Any]:
        """L, sigma_L, sigma_G from the clients, Delta = f(x_0) - f_*, the realised tau, m'
        and K arrays from the schedule, and the steps (module docstring)."""
        import fedbound.bounds.afl as B

        self._check_scenario(s)
        s.check_eta_L()
        st = build(s)
        cl = st.clients
        params: dict[str, Any] = {
            "L": cl.L, "sigma_L": cl.sigma_L, "sigma_G": cl.sigma_G, "Delta": _delta(st),
            "T": s.T, "m": s.m, "M": s.M, "K": self._k_array(s, thm, st),
        }
        if s.algorithm == "cs":
            params["tau"], params["m_prime"] = st.schedule.staleness()
        else:
            params["tau"] = st.schedule.max_delay()
        if self.corollary:
            if s.eta is not None or s.eta_L is not None:
                raise ValueError(f"eta={s.eta}, eta_L={s.eta_L}: {self.key} fixes eta_L = 1/sqrt(T) "
                                 "and eta = sqrt(nK); leave both null")
            if s.K_high is not None:
                raise ValueError(f"K_high={s.K_high}: {self.key} assumes a constant K")
            params["eta"], params["eta_L"] = B.corollary_steps(self.key, T=s.T, K=s.K, m=s.m, M=s.M)
            return {k: v for k, v in params.items() if k in thm.params}
        if s.eta_L is None:
            cap = B.eta_L_cap(self.key, L=cl.L, K=params["K"], tau=params["tau"], variant=thm.variant)
            params["eta_L"] = s.local_fraction * (cap if math.isfinite(cap) else 1.0 / cl.L)
        else:
            params["eta_L"] = s.eta_L
        params = {k: v for k, v in params.items() if k in thm.params}
        params["eta"] = s.eta if s.eta is not None else s.step_fraction * thm.max_step(**params)
        return params

    @staticmethod
    def _reduce(g: np.ndarray) -> np.ndarray:
        """Per-replica left-hand side: the mean over rounds."""
        return g.mean(axis=1)

    def _exact_unsupported(self, s: AFLScenario) -> str:
        if s.algorithm == "cs" and s.arrivals in ("uniform", "biased"):
            return "AFA-CS exact mode needs deterministic arrivals (round_robin, single or an event list)"
        if s.problem_spec()["kind"] == "logistic":
            return "logistic regression is not linear-Gaussian"
        if s.delays != "zero" and s.tau > 0:
            return "delays must be zero (delays='zero' or tau=0)"
        if s.K_high is not None:
            return "K must be constant"
        if s.arrivals == "biased":
            return "biased sampling without replacement has no closed-form pair inclusion law here"
        return ""

    def _steps(self, s: AFLScenario, params) -> tuple[float, float]:
        return params["eta"], params["eta_L"]

    def _measure(self, s: AFLScenario, params, exact: bool) -> Measurement:
        from fedbound.sim.afl import run_afl

        self._check_scenario(s)
        st = build(s)
        atol = _roundoff(st)
        eta, eta_L = self._steps(s, params)
        if exact:
            series = exact_series(s, st, eta, eta_L)
            return Measurement(exact=float(self._reduce(series[None])[0]), series=series, atol=atol)
        trace = run_afl(st.clients, algorithm=s.algorithm, m=s.m, T=s.T, eta=eta, eta_L=eta_L,
                        x0=st.x0, replicas=s.replicas, generator=st.generator, schedule=st.schedule,
                        server_step=s.server_step)
        ok = ~trace.diverged.numpy()
        g = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=self._reduce(g), diverged=int((~ok).sum()),
                           series=g.mean(axis=0) if ok.any() else None, atol=atol)

    def _footprint(self, s: AFLScenario, exact: bool) -> Footprint:
        """Memory: the schedule drawn before the run (arrivals, delays and K, [R, T, M] each,
        with AFA-CS's memory bookkeeping), the workers' local runs [R, M, d], the clients'
        data (logistic [M, n, d]) and, in exact mode, AFA-CS's second moments [d, M+2, M+2]
        per distinct arrival set. Work: T rounds x K local steps x those tensors."""
        spec = s.problem_spec()
        R, M, T, K = s.replicas, s.M, s.T, s.k_max()
        d = 1 if spec["kind"] == "lower_bound" else spec["dim"]
        cs = s.algorithm == "cs"
        grid = f"replicas={_n(R)} x T={_n(T)} x M={_n(M)}"
        workers = f"replicas={_n(R)} x M={_n(M)} x dim={_n(d)}"
        memory = {f"{grid} x {80 if cs else 32} B of schedule": (80 if cs else 32) * R * T * M,
                  f"{workers} x 10 buffers of 8 B": 80 * R * M * d,
                  f"replicas={_n(R)} x T={_n(T)} x 4 records of 8 B": 32 * R * T}
        steps = {f"T={_n(T)} rounds x K={_n(K)} local steps x {workers}":
                 T * (K * (12 * R * M * d + LOOP_OVERHEAD) + LOOP_OVERHEAD),
                 f"{grid} (the schedule)": 20 * R * T * M}
        if spec["kind"] == "logistic":
            data, batch = spec["n"], spec["batch"]
            memory[f"M={_n(M)} x problem.n={_n(data)} x dim={_n(d)} x 3 copies of the data"] = \
                24 * M * data * d
            memory[f"{workers} x problem.n={_n(data)} x 8 B (the per-worker gradients' einsum)"] = \
                8 * R * M * data * d + 32 * R * M * data
            memory[f"{workers} x problem.batch={_n(batch)} x 3 of 8 B"] = 24 * R * M * batch * d
            steps[f"T={_n(T)} x K={_n(K)} x {workers} x problem.batch={_n(batch)}"] = \
                6 * T * K * R * M * batch * d
            steps[f"T={_n(T)} x {workers} x problem.n={_n(data)}"] = 6 * T * R * M * data * d
        if exact and cs:
            sets = min(T, M if isinstance(s.arrivals, str) else len(s.arrivals))
            memory[f"distinct arrival sets={_n(sets)} x dim={_n(d)} x (M+2)^2={_n((M + 2) ** 2)} x 3 "
                   "of 8 B"] = 24 * (sets + 1) * d * (M + 2) ** 2
            steps[f"T={_n(T)} x dim={_n(d)} x (M+2)^3={_n((M + 2) ** 3)}"] = 4 * T * d * (M + 2) ** 3
        return Footprint.of(memory, steps)

    def _draw(self, draw: Draw) -> AFLScenario:
        """A small random scenario satisfying the result's hypotheses: AFA-CS with M from 4 to
        40 and mostly m << M (the regime of its claimed speedup in M, Section 4.2), AFA-CD with
        M from 2 to 8; quadratics of dimension 1-3; K from 1 to 3 (varying half of the time
        outside the corollaries); steps a random fraction (log scale) of the largest
        admissible; long horizons where exact mode applies; for a corollary, T large enough
        that its steps satisfy the theorem's conditions."""
        import fedbound.bounds.afl as B
        from fedbound.sim.afl import ARRIVALS, DELAYS

        cs = self.algorithm == "cs"
        M = round(draw.log_uniform(4, 40)) if cs else draw.integer(2, 8)
        if self.uniform_arrivals:
            arrivals = "uniform"
        elif cs:  # round-robin (bounded staleness) half of the time
            arrivals = "round_robin" if self.corollary or draw.boolean() else \
                draw.choice(["uniform", "biased"])
        else:
            arrivals = draw.choice(list(ARRIVALS))
        if arrivals == "single":
            m = 1
        elif cs:
            m = 1 if draw.boolean() else draw.integer(1, max(M // 4, 1))
        else:
            m = draw.integer(1, M)
        L = draw.uniform(0.1, 0.5) if self.corollary else draw.uniform(0.5, 2)
        dim = draw.integer(1, 3)
        problem = {"kind": "quadratic", "dim": dim, "L": L,
                   "mu": L if dim == 1 else L * draw.uniform(0.1, 1), "sigma_L": draw.uniform(0, 2),
                   "sigma_G": draw.uniform(0, 1), "distance": draw.uniform(0, 3)}
        K = draw.integer(1, 3)
        s = AFLScenario(algorithm=self.algorithm, M=M, m=m, K=K,
                        K_high=None if self.corollary or draw.boolean() else K + draw.integer(0, 2),
                        tau=draw.integer(0, 2),
                        delays="zero" if cs and draw.boolean() else draw.choice(list(DELAYS)),
                        arrivals=arrivals, T=draw.integer(50, 199), problem=problem, replicas=24,
                        local_fraction=draw.log_uniform(1e-3, 1), step_fraction=draw.log_uniform(1e-2, 1),
                        seed=draw.integer(0, 2**16 - 1))
        if not self._exact_unsupported(s):  # exact mode is cheap: longer horizons too
            s = s.replace(T=int(draw.log_uniform(50, 3000)))
        if self.corollary:  # T large enough for the corollary's steps to satisfy the conditions
            st = build(s)
            tau, mp = st.schedule.staleness() if cs else (s.tau, 0)
            need = B.minimum_T(self.key, "proof").subs({B.L: L, B.K: K, B.tau: tau, B.m: m, B.M: M,
                                                        B.m_prime: mp})
            s = s.replace(T=max(int(math.ceil(float(need))) + 1, s.T))
        return s


@register_adapter
class Theorem1(AFL):
    """Theorem 1's instance: the limit ||grad f(x_hat)||^2 (the mean over the second half of a
    long run), written as an upper bound on its negative; it holds for every step."""

    key = "afl.theorem1"
    default = AFLScenario(M=2, m=1, arrivals="single", delays="zero", tau=0, T=400, eta=1.0,
                          eta_L=0.2, problem={"kind": "lower_bound", "G": 1.0, "distance": 0.5},
                          replicas=2)

    #: the oscillation left at round T/2, relative to G, below which the run counts as converged
    CONVERGED = 1e-10

    def _derive(self, s: AFLScenario, thm) -> dict[str, Any]:
        self._check_scenario(s)
        st = build(s)
        self._check_converged(s, st)
        return {"sigma_G": st.clients.sigma_G}

    def _check_converged(self, s: AFLScenario, st: Setup) -> None:
        """Theorem 1 is about the limit of a convergent algorithm (Yang et al. 2022, Theorem 1 and its
        proof, Appendix B.1); the measurement is the mean over the second half of a finite
        run. Only worker 1 arrives, so x_t + G = r^t (x_0 + G) with r = 1 - s (2/K) sum_j
        (1 - 2 eta_L)^j (s = eta eta_L, or eta with the printed server step). From r >= 0
        the iterates approach the limit from outside and every finite run bounds it from
        above; from r < 0 they oscillate around it and dip below it until they converge. So:
        |r| < 1, and for r < 0 an oscillation below ``CONVERGED`` G by round T/2."""
        eta, eta_L = self._steps(s, None)
        step = eta * eta_L if s.server_step == "proof" else eta
        r = 1 - step * 2 / s.K * sum((1 - 2 * eta_L) ** j for j in range(s.K))
        spec, G = s.problem_spec(), st.clients.sigma_G / 2
        if not abs(r) < 1:
            raise ValueError(f"eta={eta:g}, eta_L={eta_L:g}: the run does not converge (its "
                             f"contraction is r = {r:.6g}, |r| >= 1); {PAPER}, Theorem 1 is "
                             "about the limit of a convergent algorithm")
        left = spec["distance"] * abs(r) ** (s.T // 2)
        if r < 0 and left > self.CONVERGED * G:
            raise ValueError(f"T={s.T}: the iterates still oscillate around the limit at round "
                             f"T/2 (by {left:.3g} > {self.CONVERGED:g} G; contraction r = "
                             f"{r:.6g}): the second-half mean does not measure the limit of "
                             f"{PAPER}, Theorem 1; lengthen T or shorten the step")

    def _steps(self, s: AFLScenario, params) -> tuple[float, float]:
        return s.eta or 1.0, s.eta_L or 0.2

    @staticmethod
    def _reduce(g: np.ndarray) -> np.ndarray:
        return -g[:, g.shape[1] // 2:].mean(axis=1)

    def _measure(self, s: AFLScenario, params, exact: bool) -> Measurement:
        m = super()._measure(s, params, exact)
        if exact or m.diverged:
            return m
        # deterministic: sigma_L = 0 and a fixed schedule, so every replica is the same
        return Measurement(exact=float(m.values[0]), series=m.series, atol=m.atol)

    def _draw(self, draw: Draw) -> AFLScenario:
        eta_L = draw.uniform(0.01, 0.4)
        return AFLScenario(M=2, m=1, arrivals="single", delays="zero", tau=0, K=draw.integer(1, 4),
                           T=draw.integer(200, 599), eta_L=eta_L, eta=draw.uniform(0.05, 0.5) / eta_L,
                           replicas=2, problem={"kind": "lower_bound", "G": draw.uniform(0.2, 3),
                                                "distance": draw.uniform(0, 2)},
                           seed=draw.integer(0, 2**16 - 1))

    def _plot(self, ax, s: AFLScenario, thm, params, m: Measurement) -> None:
        t = np.arange(1, m.series.size + 1)
        ax.loglog(t, np.cumsum(m.series) / t, label="measured running mean")
        ax.axhline(-float(thm.evaluate(**params)), color="C1", ls="--",
                   label=f"lower bound {self.key} [{thm.variant}]")
        ax.set_xlabel(self.series_label)
        ax.set_ylabel(self.lhs_label)
        ax.set_title(f"{self.key}: the floor of the instance against the lower bound")
        ax.legend()


@register_adapter
class Theorem2(AFL):
    key = "afl.theorem2"
    default = AFLScenario(arrivals="biased")
    tags = Tags(exact=True, estimated=True)

    def _estimated_parts(self, scenario, thm, *, problem, x1, settings):
        return estimated_parts(scenario, thm, problem=problem, x1=x1, settings=settings)


@register_adapter
class Theorem3(AFL):
    key = "afl.theorem3"
    default = AFLScenario()
    uniform_arrivals = True

    def _k_array(self, s: AFLScenario, thm, st: Setup):
        """The proof's reading sums 1/K over every worker of a round."""
        if s.K_high is not None and thm.variant == "proof":
            return st.schedule.K.numpy()
        return super()._k_array(s, thm, st)


@register_adapter
class Theorem4(AFL):
    key = "afl.theorem4"
    default = AFLScenario(algorithm="cs", m=2, arrivals="round_robin", delays="zero")
    algorithm = "cs"

    def _k_array(self, s: AFLScenario, thm, st: Setup):
        """AFA-CS uses every stored update: the K statistics of the memory."""
        return s.K if s.K_high is None else st.schedule.memory()[1].numpy()


_SLOW_QUADRATIC = {**_quadratic(), "L": 0.5, "mu": 0.25}


@register_adapter
class Corollary1(AFL):
    key = "afl.corollary1"
    default = AFLScenario(T=600, problem=dict(_SLOW_QUADRATIC))
    corollary = True


@register_adapter
class Corollary2(AFL):
    key = "afl.corollary2"
    default = AFLScenario(T=600, tau=0, delays="zero", M=4, m=2, problem=dict(_SLOW_QUADRATIC))
    corollary = True
    uniform_arrivals = True

    def _draw(self, draw: Draw) -> AFLScenario:
        return super()._draw(draw).replace(delays="zero", tau=0)


@register_adapter
class Corollary3(Theorem4):
    key = "afl.corollary3"
    default = AFLScenario(algorithm="cs", T=600, m=2, arrivals="round_robin", delays="zero",
                          problem=dict(_SLOW_QUADRATIC))
    corollary = True


# ---------------------------------------------------------------------- exact mode


def exact_series(s: AFLScenario, st: Setup, eta: float, eta_L: float) -> np.ndarray:
    """[T] E||grad f(x_t)||^2 exactly (module docstring) for AFA-CD or AFA-CS on a quadratic
    with zero delays and constant K (callers check the scenario is supported)."""
    from fedbound.sim.trace import DIVERGENCE_THRESHOLD

    cl = st.clients
    lam = cl.a.numpy()
    step = eta * eta_L if s.server_step == "proof" else eta
    a = (1 - (1 - eta_L * lam) ** s.K) / (eta_L * s.K)  # G_i = a (x - c_i) + noise, per coordinate
    noise_var = sum((1 - eta_L * lam) ** (2 * j) for j in range(s.K)) / s.K**2 * cl.sigma_L**2 / cl.dim
    offsets = (cl.centres - cl.c_bar).numpy()  # [M, d]
    y0 = (st.x0 - cl.c_bar).numpy()
    run = _exact_cs if s.algorithm == "cs" else _exact_cd
    out = run(s, st, lam, step, a, noise_var, offsets, y0)
    if not np.all(np.isfinite(out)) or np.max(out) > DIVERGENCE_THRESHOLD:
        raise ValueError(f"eta={eta}, eta_L={eta_L}: the exact moments diverge")
    return out


def _exact_cd(s, st, lam, step, a, noise_var, offsets, y0) -> np.ndarray:
    """AFA-CD: y_{t+1} = (1 - s a) y_t + s a (cbar_S - cbar) - (s/m) sum_S n_i per coordinate."""
    mean, second = y0.copy(), y0**2
    out = np.empty(s.T)
    keep = 1 - step * a
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(s.T):
            out[t] = float(np.sum(lam**2 * second))
            if s.arrivals == "uniform":
                drift_mean = np.zeros_like(mean)
                drift_sq = (s.M - s.m) / (s.m * max(s.M - 1, 1)) * (offsets**2).mean(axis=0)
            else:
                drift_mean = offsets[_arrived(st, t)].mean(axis=0)
                drift_sq = drift_mean**2
            second = (keep**2 * second + 2 * keep * step * a * mean * drift_mean
                      + (step * a) ** 2 * drift_sq + step**2 * noise_var / s.m)
            mean = keep * mean + step * a * drift_mean
    return out


def _exact_cs(s, st, lam, step, a, noise_var, offsets, y0) -> np.ndarray:
    """AFA-CS: state z = (y, G_1..G_M, 1) per coordinate; arrivals overwrite G_i = a (y - o_i)
    + n_i, then y <- y - (s/M) sum_i G_i: z' = F E_t z + F n_t, so the second moment
    E[z z^T] propagates exactly as F E_t S E_t^T F^T + F Q_t F^T."""
    d, M = lam.size, s.M
    z0 = np.zeros((d, M + 2))
    z0[:, 0], z0[:, -1] = y0, 1.0
    z0[:, 1:-1] = a[:, None] * (y0[:, None] - offsets.T)  # initial memory G_i(x_0) ...
    S2 = z0[:, :, None] * z0[:, None, :]
    S2[:, 1:-1, 1:-1] += noise_var[:, None, None] * np.eye(M)  # ... with its own noise
    F = np.eye(M + 2)
    F[0, 1:-1] = -step / M
    maps: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    out = np.empty(s.T)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(s.T):
            out[t] = float(np.sum(lam**2 * S2[:, 0, 0]))
            idx = 1 + _arrived(st, t)
            if tuple(idx) not in maps:  # one linear map per distinct arrival set
                E = np.broadcast_to(np.eye(M + 2), (d, M + 2, M + 2)).copy()
                E[:, idx, idx] = 0.0
                E[:, idx, 0] = a[:, None]
                E[:, idx, -1] = -a[:, None] * offsets[idx - 1].T
                G = F @ E
                Fq = F[:, idx]
                maps[tuple(idx)] = (G, G.transpose(0, 2, 1).copy(), noise_var[:, None, None] * (Fq @ Fq.T))
            G, Gt, Q = maps[tuple(idx)]
            S2 = G @ S2 @ Gt + Q
    return out


def _arrived(st: Setup, t: int) -> np.ndarray:
    """Workers arriving in round t of a deterministic process (same in every replica)."""
    return np.flatnonzero(st.schedule.arrivals[0, t].numpy())


# ---------------------------------------------------------------------- refutation families


def _sampling_member(s: float) -> AFLScenario:
    """Theorem 3 at x_0 = x*, sigma_L = 0, K = 1, M = 2, m = 1, no delay, eta = 4, L = 1:
    the effective step s = eta eta_L, and T = ceil(20/s) rounds (20 relaxation times)."""
    return AFLScenario(M=2, m=1, K=1, tau=0, delays="zero", arrivals="uniform", eta=4.0,
                       eta_L=s / 4.0, T=math.ceil(20 / s), replicas=2,
                       problem={"kind": "quadratic", "dim": 1, "L": 1.0, "mu": 1.0,
                                "sigma_L": 0.0, "sigma_G": 0.5, "distance": 0.0})


def _stale_member(M: float) -> AFLScenario:
    """Theorem 4 at sigma_G = 0, x_0 = x*, K = 1, m = 1, round-robin arrivals, no delay,
    L = 1, eta = 1, s = eta_L = c/M^2 with c = 1/4, and T = 80 M^2 (20 relaxation times)."""
    M = int(M)
    s = 0.25 / M**2
    return AFLScenario(algorithm="cs", M=M, m=1, K=1, tau=0, delays="zero",
                       arrivals="round_robin", eta=1.0, eta_L=s, T=80 * M**2, replicas=2,
                       problem={"kind": "quadratic", "dim": 1, "L": 1.0, "mu": 1.0,
                                "sigma_L": 1.0, "sigma_G": 0.0, "distance": 0.0})


def _sampling_corollary_member(T: float) -> AFLScenario:
    """Corollary 2 at x_0 = x*, sigma_L = 0, K = 1, M = 2, m = 1, no delay, L = 0.1: its own
    steps eta_L = 1/sqrt(T), eta = sqrt(mK), so s = 1/sqrt(T)."""
    return AFLScenario(M=2, m=1, K=1, tau=0, delays="zero", arrivals="uniform", T=int(T),
                       replicas=2, problem={"kind": "quadratic", "dim": 1, "L": 0.1, "mu": 0.1,
                                            "sigma_L": 0.0, "sigma_G": 0.5, "distance": 0.0})


def _stale_corollary_member(M: float) -> AFLScenario:
    """Corollary 3 at sigma_G = 0, x_0 = x*, K = 1, m = 1, round-robin arrivals, no delay,
    L = M^(-3/2) and T = 100 M^2 (so L sqrt(MT) = 10 relaxation times and the staleness
    term stays a fixed fraction of the first): its own steps, s = sqrt(M/T)."""
    M = int(M)
    L = M ** -1.5
    return AFLScenario(algorithm="cs", M=M, m=1, K=1, tau=0, delays="zero",
                       arrivals="round_robin", T=100 * M**2, replicas=2,
                       problem={"kind": "quadratic", "dim": 1, "L": L, "mu": L,
                                "sigma_L": 1.0, "sigma_G": 0.0, "distance": 0.0})


#: the refutation family of each refuted AFL result (each erratum on the step of its proof
#: that fails derives the growth: bounds.afl.ERRATUM_FALSE_INEQ, ERRATUM_STALE_NOISE,
#: ERRATUM_COROLLARY2, ERRATUM_COROLLARY3)
FAMILIES = {f.key: register_family(f) for f in (
    Family("afl.theorem3", "s = eta eta_L", (0.05, 0.0125, 0.003125),
           "measured/bound ~ eta^2/(240 L s): like 1/s as s -> 0", _sampling_member),
    Family("afl.theorem4", "M", (4, 8, 16), "measured/bound ~ M/(8 (1 + 2c)): like M",
           _stale_member),
    Family("afl.corollary2", "T", (1024, 4096, 16384),
           "measured/bound ~ sqrt(T)/(240 L): like sqrt(T)", _sampling_corollary_member),
    Family("afl.corollary3", "M", (4, 8, 16), "measured/bound ~ M/(8 (1 + 0.2 L_0)): like M",
           _stale_corollary_member),
)}


# ---------------------------------------------------------------------- estimated constants


class _Objective:
    """A client set (``sim.neural.NeuralClients`` or a ``sim.afl`` problem) as a problem of
    ``sim.estimate``: f = (1/M) sum_i f_i and its gradient, with f_inf its f_star (exact,
    or 0 for cross-entropy: a certified lower bound)."""

    def __init__(self, clients):
        self.clients, self.dim, self.device = clients, clients.dim, clients.device
        self.f_inf = float(clients.f_star)

    def loss(self, x):
        return self.clients.loss(x)

    def grad(self, x):
        return self.clients.grad(x)


class _WorkerNoise(_Objective):
    """Assumption 3's local deviation per worker: the points are (point, worker) pairs,
    row p M + i for worker i, so that ``sim.estimate.gradient_variance`` takes the largest
    E||g_i(x) - grad f_i(x)||^2 over points and workers: sigma_L (Yang et al. 2022,
    Assumption 3)."""

    def grad(self, x):
        M = self.clients.M
        return self.clients.worker_grads(x.reshape(-1, M, self.dim)).reshape(x.shape)

    def stochastic_grad(self, x, generator):
        M, S = self.clients.M, x.shape[1]
        per = x.reshape(-1, M, S, self.dim).transpose(1, 2)                 # [P, S, M, dim]
        g = self.clients.stochastic_worker_grads(per.contiguous(), generator)
        return g.transpose(1, 2).reshape(x.shape)


def estimate_afl_constants(clients, x0, generator, settings) -> dict[str, Any]:
    """{"L", "sigma_L", "sigma_G", "Delta": sim.estimate.Estimate} of Yang et al. 2022
    (Assumptions 1 and 3; Delta of Theorem 2) at points along a gradient-descent trajectory
    of f from ``x0`` (``verify.estimated.EstimationSettings``). L is estimated on f (the
    Lipschitz constant of each f_i can be larger)."""
    from fedbound.sim import estimate

    f = _Objective(clients)
    L, points, f_ref = along_trajectory(f, x0, generator, settings)
    return {
        "L": L,
        "sigma_L": _renamed(estimate.gradient_variance(
            _WorkerNoise(clients), points.repeat_interleave(clients.M, dim=0), settings.samples,
            generator), "sigma_L"),
        "sigma_G": estimate.dissimilarity(clients, points),
        "Delta": estimate.delta(f, x0, max(f_ref, f.f_inf)),
    }


def _renamed(e, param: str):
    from dataclasses import replace

    return replace(e, param=param)


def estimated_parts(s: AFLScenario, thm, *, problem, x1, settings):
    """Theorem 2 with estimated constants (``verify.estimated``): L, sigma_L, sigma_G and
    Delta estimated on ``problem`` (``sim.neural.NeuralClients`` with the scenario's M
    workers; default the scenario's own clients); T, m, the realised tau and K statistics
    from the scenario's schedule; eta_L the scenario's, else ``local_fraction`` of the
    largest the conditions allow at the upper end of L. Measured with ``sim.afl.run_afl``."""
    import fedbound.bounds.afl as B
    from fedbound.sim.afl import run_afl
    from fedbound.verify.api import Parts, estimated_start

    if problem is None:
        s.check_eta_L()
    st = build(s)
    clients, x1, own = estimated_start(problem, x1, st.clients, st.x0)
    if clients.M != s.M:
        raise ValueError(f"M={s.M}: the problem passed in has {clients.M} workers; the "
                         "scenario's schedule needs the same M")
    estimates = estimate_afl_constants(clients, x1, st.generator, settings)
    K = s.K if s.K_high is None else st.schedule.K_arrived().numpy()
    tau = st.schedule.max_delay()
    if s.eta_L is None:
        cap = B.eta_L_cap(thm.key, L=estimates["L"].upper, K=K, tau=tau, variant=thm.variant)
        eta_L = s.local_fraction * (cap if math.isfinite(cap) else 1.0 / estimates["L"].upper)
    else:
        eta_L = s.eta_L
    atol = roundoff(estimates["L"].upper, float(x1.abs().max()))

    def measure(params):
        trace = run_afl(clients, algorithm=s.algorithm, m=s.m, T=s.T, eta=params["eta"],
                        eta_L=eta_L, x0=x1, replicas=s.replicas, generator=st.generator,
                        schedule=st.schedule, server_step=s.server_step)
        ok = ~trace.diverged.numpy()
        return Measurement(values=trace.grad_sq_norm.numpy()[ok].mean(axis=1),
                           diverged=int((~ok).sum()), atol=atol)

    notes = () if own else (f"problem: {type(clients).__name__} (dim {clients.dim}, M = "
                            f"{clients.M}) passed in; the scenario's problem field is not used",)
    return Parts(params={"T": s.T, "m": s.m, "M": s.M, "K": K, "tau": tau, "eta_L": eta_L},
                 estimates=estimates, step=s.eta, measure=measure, notes=notes)


# ---------------------------------------------------------------------- rate sweeps

_RATE_QUADRATIC = {"kind": "quadratic", "dim": 2, "L": 0.5, "mu": 0.25, "sigma_L": 1.0,
                   "sigma_G": 0.0, "distance": 2.0}
_NO_DELAY = {"delays": "zero", "tau": 0}
#: x_0 = x*, sigma_L = 0: the sampling variance alone
_SAMPLING_ONLY = {**_RATE_QUADRATIC, "sigma_L": 0.0, "sigma_G": 0.5, "distance": 0.0}
_FIRST_TERM_K = "T = 256 K^5.5, where the first term leads"
_FIRST_TERM_M = "T = 1024 m^2, where the first term leads"
for _key, _sweep in (
    ("afl.corollary1", Sweep("T", "T", (1024, 4096, 16384, 65536),
                             {**_NO_DELAY, "problem": _RATE_QUADRATIC})),
    ("afl.corollary1", Sweep("K", "K", (1, 2, 3), {**_NO_DELAY, "problem": _RATE_QUADRATIC},
                             couple={"T": (256.0, 5.5)}, note=_FIRST_TERM_K)),
    ("afl.corollary1", Sweep("m", "m", (1, 2, 4, 8), {**_NO_DELAY, "M": 8, "problem": _RATE_QUADRATIC},
                             couple={"T": (1024.0, 2.0)}, note=_FIRST_TERM_M)),
    ("afl.corollary2", Sweep("T", "T", (1024, 4096, 16384, 65536),
                             {**_NO_DELAY, "M": 4, "m": 1, "problem": _SAMPLING_ONLY})),
    ("afl.corollary2", Sweep("K", "K", (1, 2, 3), {**_NO_DELAY, "M": 4, "m": 1, "problem": _SAMPLING_ONLY},
                             couple={"T": (256.0, 5.5)},
                             note="x_0 = x*, sigma_L = 0, m < M: the sampling variance alone; "
                                  "T = 256 K^5.5, where the first term leads (Remark 4)")),
    ("afl.corollary2", Sweep("m", "m", (1, 2, 4), {**_NO_DELAY, "M": 8, "problem": _SAMPLING_ONLY},
                             couple={"T": (1024.0, 2.0)}, note=_FIRST_TERM_M)),
    ("afl.corollary3", Sweep("T", "T", (1024, 4096, 16384, 65536),
                             {**_NO_DELAY, "M": 8, "m": 1, "K": 1,
                              "problem": {**_RATE_QUADRATIC, "distance": 0.0}})),
    ("afl.corollary3", Sweep("K", "K", (1, 2, 3), {**_NO_DELAY, "M": 4, "m": 1,
                                                  "problem": {**_RATE_QUADRATIC, "distance": 0.0}},
                             couple={"T": (256.0, 5.5)}, note=_FIRST_TERM_K)),
    ("afl.corollary3", Sweep("M", "M", (2, 3, 4, 6),
                             {**_NO_DELAY, "m": 1, "K": 1,
                              "problem": {**_RATE_QUADRATIC, "dim": 1, "mu": 0.5, "distance": 0.0}},
                             couple={"T": (2.0, 6.0)}, powers={"tau": 1.0, "M - m_prime": 1.0},
                             note="m = 1, round-robin arrivals (staleness tau = M - 1, m' = 1): "
                                  "T = 2 M^6, where the first term leads")),
):
    register_sweep(_key, _sweep)
