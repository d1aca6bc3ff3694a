"""Ali & Arafa 2025, Delay Sensitive Hierarchical Federated Learning with Stochastic Local
Updates.

Statement: Lemma 1 (18), one bound per round and group; Theorem 1 (19), one per group;
Theorem 2 (20) and Corollary 1, one number per delay path. All are conditional on the
delay path, i.e. on the schedule t of local-iteration counts ((7)) and the number of rounds
U ((13)). Algorithm: Algorithm 1, (3)-(13).

Scenario: the group sizes, the 8 parameters {d, b, e, f, d_g, b_g, e_g, f_g} of the paper's
linear delay model (Section IV), S, T, alpha (null = 1/L, the largest admissible), the
problem, the replicas and the seed. ``mode="conditional"``: one delay path is drawn from
the seed (``bounds.delays``) and every replica runs on it, so the bound is evaluated on
that schedule. ``mode="expected"``: every replica draws its own path, and the comparison
is paired (each replica's bound on its own path against its own left-hand side): by the
tower property this checks the unconditional statement.

Parameters: G = R, L and sigma exactly from logistic regression with features bounded by R
(a quadratic has no G: it serves the results without G, the ``iid`` variants, and
simulation), Delta = f(x^1) - f_inf, the sizes and the schedule t. Every client samples the
same problem, so the data are i.i.d. among clients (the paper's Section II model, which the
``iid`` variants assume).

Measurement: the left-hand side of each result per replica, per cell for Lemma 1 [U, G] and
Theorem 1 [G].
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from fedbound import bounds
from fedbound.bounds.references import cite
from fedbound.verify.api import (
    LOOP_OVERHEAD,
    TIME,
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
    require_int,
    roundoff,
)
from fedbound.verify.api import count_text as _n

from . import theorems  # noqa: F401 - registers the results the adapters below check

if TYPE_CHECKING:  # annotations only: torch, sim and bounds.delays are imported where used
    import torch

    from fedbound.bounds import delays as dl
    from fedbound.sim.problems import LogisticRegression, Quadratic

PAPER = cite("hfl")
#: Fig. 7a of the paper: {d, b, e, f, d_g, b_g, e_g, f_g} (Section IV-B)
FIG7A = [0.01, 0.85, 0.001, 0.085, 4.0, 2.0, 0.4, 0.2]
MODES = ("conditional", "expected")
#: the largest delay parameter a scenario takes (in time units)
MAX_DELAY = 1e100
PROBLEM_KINDS = {
    "logistic": {"dim": 3, "n": 40, "R": 1.5, "batch": 1, "distance": 2.0},
    "quadratic": {"dim": 10, "L": 1.0, "mu": 0.1, "sigma": 1.0, "distance": 3.0},
}


def _logistic_default() -> dict[str, Any]:
    return {"kind": "logistic", **PROBLEM_KINDS["logistic"]}


@dataclass
class HFLScenario(Scenario):
    """A run of Algorithm 1 and the data the bounds need; JSON keys = fields.

    ``problem``: {"kind": "logistic", "dim", "n", "R", "batch", "distance" (= ||x^1||)}
    (G = R exactly: every bound applies) or {"kind": "quadratic", "dim", "L", "mu",
    "sigma", "distance" (= ||x^1 - x*||)} (no G: for the bounds without G, the ``iid``
    variants, and simulation). Every client of every group samples this one problem: the
    data are i.i.d. among clients (Section II)."""

    sizes: list[int] = field(default_factory=lambda: [4, 4])
    delays: list[float] = field(default_factory=lambda: list(FIG7A))
    S: float = 3.0
    T: float = 120.0
    ramp: bool = False
    alpha: float | None = None
    problem: dict[str, Any] = field(default_factory=_logistic_default)
    mode: str = "conditional"
    replicas: int = 64
    seed: int = 0

    def validate(self) -> None:
        if not isinstance(self.sizes, (list, tuple)) or not self.sizes:
            raise ValueError(f"sizes={self.sizes!r} must be a non-empty list of group sizes")
        for i, n in enumerate(self.sizes):
            require_int(f"sizes[{i}]", n)
        self.model()
        require_float("S", self.S, low=0)
        require_float("T", self.T, low=0, low_open=True)
        if not isinstance(self.ramp, bool):
            raise ValueError(f"ramp={self.ramp!r} must be true or false")
        if self.alpha is not None:
            require_float("alpha", self.alpha, low=0, low_open=True)
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} must be one of {MODES}")
        require_int("replicas", self.replicas, minimum=2)
        require_int("seed", self.seed, minimum=0)
        self.problem_spec()

    def model(self) -> dl.DelayModel:
        from fedbound.bounds import delays as dl

        if not isinstance(self.delays, (list, tuple)):
            raise ValueError(f"delays={self.delays!r} must be the 8 parameters "
                             "{d, b, e, f, d_g, b_g, e_g, f_g}")
        for i, (name, v) in enumerate(zip(dl.LINEAR_PARAMETERS, self.delays, strict=False)):
            # JSON numbers, not strings; at most MAX_DELAY, so that the delay laws' shifts and
            # means (sums and products of these with the group sizes) stay finite in float64
            require_float(f"delays[{i}] ({name})", v, low=0, high=MAX_DELAY)
        return dl.DelayModel.linear(self.delays, self.sizes)

    def problem_spec(self) -> dict[str, Any]:
        """The problem fields with defaults filled in, validated."""
        return problem_spec(self.problem, PROBLEM_KINDS)


# ---------------------------------------------------------------------- set-up


@dataclass
class Setup:
    problem: LogisticRegression | Quadratic
    x1: torch.Tensor
    model: dl.DelayModel


def build(s: HFLScenario) -> Setup:
    """Problem and x^1 from the seed; the delay model from its 8 parameters."""
    import torch

    from fedbound.sim.problems import LogisticRegression, Quadratic

    gen = torch.Generator().manual_seed(s.seed)
    spec = s.problem_spec()
    if spec["kind"] == "logistic":
        problem = LogisticRegression.random(spec["n"], spec["dim"], spec["R"], gen,
                                            batch=spec["batch"])
        origin = torch.zeros(spec["dim"], dtype=torch.float64)
    else:
        problem = Quadratic.random(spec["dim"], spec["L"], spec["mu"], spec["sigma"], gen)
        origin = problem.x_star
    direction = torch.randn(spec["dim"], generator=gen, dtype=torch.float64)
    return Setup(problem, origin + spec["distance"] * direction / direction.norm(), s.model())


def paths(s: HFLScenario) -> dl.Schedules:
    """The delay paths of the scenario: one (conditional) or one per replica (expected),
    drawn by ``bounds.delays`` from ``seed``."""
    from fedbound.bounds import delays as dl

    count = 1 if s.mode == "conditional" else s.replicas
    return dl.sample_schedules(s.model(), s.S, s.T, count, np.random.default_rng(s.seed),
                               ramp=s.ramp)


def _schedule_size(s: HFLScenario) -> tuple[float, str, float, float]:
    """(rounds the schedule draws allocate, that number in the scenario's fields, local
    iterations a round's draws allocate, local iterations a round takes), from the delay
    model (Section IV: local delay c_i + Exp(mean) with c_i = d |N_i| + b, global c_g = d_g G +
    b_g) without drawing: the rounds' a.s. envelope T / (max(S, c_i) + c_g) of
    ``bounds.delays.rounds_envelope`` (twice T / E D without one), and S / c_i (2 S / E tau_i
    for a zero shift) local iterations, as ``bounds.delays`` allocates them."""
    dl_, b, e, f, dg, bg, eg, fg = (float(v) for v in s.delays)
    G = len(s.sizes)
    shifts = [dl_ * k + b for k in s.sizes]
    means = [c + e * k + f for c, k in zip(shifts, s.sizes, strict=True)]
    floor = max(s.S, max(shifts)) + dg * G + bg
    with np.errstate(over="ignore"):
        if floor > 0:
            rounds = float(np.ceil(np.float64(s.T) / floor))
            text = f"rounds={_n(rounds)} (T={s.T:g} / a round's least time {floor:g})"
        else:
            mean_round = max(means) + dg * G + bg + eg * G + fg
            rounds = 16 * float(np.ceil(2 * np.float64(s.T) / (16 * mean_round)))
            text = f"rounds={_n(rounds)} (2 T={2 * s.T:g} / a round's mean time {mean_round:g})"
        width = max(1.0 if s.S == 0 else np.float64(s.S) / c + 1 if c > 0 else 2 * np.float64(s.S) / m + 4
                    for c, m in zip(shifts, means, strict=True))
        per_round = max(1.0, min(width, np.float64(s.S) / min(means) + 1))
    return rounds, text, float(width), float(per_round)


def schedule_terms(s: HFLScenario, paths: int) -> tuple[dict[str, float], dict[str, float]]:
    """The memory and work terms (``Footprint.of``) of drawing ``paths`` delay paths of the
    scenario over T (``bounds.delays``): paths x rounds x the local iterations a round can
    take, 3 draws each, and the schedule [paths, U, G]."""
    G = len(s.sizes)
    rounds, rounds_text, width, _ = _schedule_size(s)
    local = f"local iterations={_n(width)} per round (S={s.S:g} / the local delays)"
    memory = {f"paths={_n(paths)} x {rounds_text} x {local} x 3 draws of 8 B": 24 * paths * rounds * width,
              f"paths={_n(paths)} x {rounds_text} x groups={G} x 2 of 8 B (the schedule)":
              16 * paths * rounds * G}
    steps = {f"paths={_n(paths)} x {rounds_text} x {local} x groups={G} (the delay draws)":
             10 * paths * rounds * width * G}
    return memory, steps


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad f||^2 at the scale of x^1."""
    return roundoff(st.problem.L, float(st.x1.norm()))


def estimated_parts(s: HFLScenario, thm, *, problem, x1, settings):
    """Theorem 2 with estimated constants (``verify.estimated``): L, sigma and Delta as
    ``verify.estimated.estimate_constants`` estimates them, and G (Assumption 3, (16)) by
    ``sim.estimate.max_gradient_norm`` at points along gradient descent from x_1 with the
    step 1 / (the upper end of L), on ``problem`` (default the
    scenario's own); the sizes and the delay path t from the scenario (one path:
    ``mode="conditional"``); measured with ``sim.hfl.run_hfl`` on that path as the adapter
    measures (20)."""
    import torch

    from fedbound.sim import estimate
    from fedbound.sim.hfl import run_hfl
    from fedbound.verify.api import Parts, estimate_constants, estimated_start

    if s.mode != "conditional":
        raise ValueError(f"mode={s.mode!r}: with estimated constants Theorem 2 is evaluated on "
                         "one delay path; use mode='conditional'")
    st = build(s)
    problem, x1, own = estimated_start(problem, x1, st.problem, st.x1)
    generator = torch.Generator().manual_seed(s.seed)
    estimates = estimate_constants(problem, x1, generator, settings)
    points = estimate.trajectory(problem, x1, eta=1.0 / estimates["L"].upper,
                                 steps=settings.steps, points=settings.points)
    estimates["G"] = estimate.max_gradient_norm(problem, points, settings.samples, generator)
    t = paths(s).path(0)
    atol = roundoff(estimates["L"].upper, float(x1.norm()))

    def measure(params):
        trace = run_hfl(problem, sizes=s.sizes, alpha=params["alpha"], x1=x1,
                        replicas=s.replicas, t=t, generator=torch.Generator().manual_seed(s.seed + 1))
        ok = ~trace.diverged.numpy()
        return Measurement(values=trace.lhs.numpy()[ok], diverged=int((~ok).sum()), atol=atol)

    notes = () if own else (f"problem: {type(problem).__name__} (dim {problem.dim}) passed in; "
                            "the scenario's problem field is not used",)
    return Parts(params={"sizes": np.array(s.sizes), "t": t}, estimates=estimates,
                 step=s.alpha, measure=measure, notes=notes)


# ---------------------------------------------------------------------- adapters


class HFL(Adapter):
    """What the four HFL results share: the schedule(s) of the scenario, the derivation of
    G, L, sigma, Delta, and the simulator run on those schedules."""

    scenario_type = HFLScenario
    #: T is the system time (Section II)
    field_units = {"T": TIME}
    tags = Tags(paired=True)
    series_label = "round u [count]"
    lhs_label = r"$\frac{1}{u}\sum_{u'\leq u}\|\nabla f(x^{u'})\|^2$ [loss²/param²]"

    def _alpha(self, s: HFLScenario, L: float) -> float:
        """The step: the scenario's, else 1/L (the largest that alpha <= 1/L allows)."""
        return 1.0 / L if s.alpha is None else float(s.alpha)

    def _derive(self, s: HFLScenario, thm) -> dict[str, Any]:
        st = build(s)
        pr = st.problem
        if pr.G is None and "G" in thm.params:
            raise ValueError(f"{self.key} [{thm.variant}] needs a.s.-bounded gradients (Assumption "
                             "3, G): use problem.kind='logistic'")
        sched = paths(s)
        params: dict[str, Any] = {
            "G": pr.G, "L": pr.L, "sigma": pr.sigma, "Delta": pr.delta(st.x1),
            "sizes": np.array(s.sizes), "alpha": self._alpha(s, pr.L),
            "t": sched.path(0) if s.mode == "conditional" else sched.t}
        params = {k: v for k, v in params.items() if k in thm.params}
        if s.alpha is None and thm.step == "alpha":
            # the largest step the variant admits on every path (1/L, or less where a condition
            # on the schedule binds, as alpha L tau <= 1/2 of the iid variant)
            rest = {k: v for k, v in params.items() if k not in ("alpha", "t")}
            params["alpha"] = min(thm.max_step(**rest, t=sched.path(r)) for r in range(len(sched.U)))
        return params

    def _simulation_alpha(self, s: HFLScenario, params, problem) -> float:
        return params["alpha"]

    def _measure(self, s: HFLScenario, params, exact: bool) -> Measurement:
        import torch

        from fedbound.sim.hfl import run_hfl

        st = build(s)
        trace = run_hfl(st.problem, sizes=s.sizes, alpha=self._simulation_alpha(s, params, st.problem),
                        x1=st.x1, replicas=s.replicas, t=params["t"],
                        generator=torch.Generator().manual_seed(s.seed + 1))
        ok = ~trace.diverged.numpy()
        series = trace.grad_sq_norm.numpy()[ok].mean(axis=0) if ok.any() else None
        return Measurement(values=self._cells(trace)[ok], diverged=int((~ok).sum()),
                           series=series, atol=_roundoff(st), paired=s.mode == "expected")

    @staticmethod
    def _cells(trace) -> np.ndarray:
        """The left-hand side per replica: [R] for Theorem 2 and Corollary 1."""
        return trace.lhs.numpy()

    def _bound_series(self, s: HFLScenario, thm, params, n: int):
        """On one delay path: the bound on each prefix of the schedule (rounds 1..u)."""
        if s.mode != "conditional":
            return None
        t = params["t"]
        U = t.shape[0]
        prefixes = np.zeros((U, U, t.shape[1]), dtype=int)
        for u in range(U):
            prefixes[u, : u + 1] = t[: u + 1]
        return np.arange(1, U + 1), thm.evaluate(**{**params, "t": prefixes})

    def _footprint(self, s: HFLScenario, exact: bool) -> Footprint:
        """Memory: the delay draws of ``bounds.delays.sample_schedules`` (:func:`schedule_terms`),
        the per-round records [R, U, G], and the clients' gradients [R, G, n_max, d] of one
        local iteration (the sampler's reused buffers: its draws or gathered rows, their masked
        copy and their sum). Work: rounds x local iterations x those tensors."""
        G, n_max, R = len(s.sizes), max(s.sizes), s.replicas
        rounds, rounds_text, width, per_round = _schedule_size(s)
        memory, steps = schedule_terms(s, 1 if s.mode == "conditional" else R)
        spec = s.problem_spec()
        dim = spec["dim"]
        clients = f"replicas={_n(R)} x groups={G} x clients={_n(n_max)} (max sizes) x dim={_n(dim)}"
        loop = f"{rounds_text} x {_n(per_round)} local iterations per round x {clients}"
        memory |= {
            f"replicas={_n(R)} x {rounds_text} x groups={G} x 6 records of 8 B": 48 * R * rounds * G,
            f"{clients} x 3 buffers of 8 B": 24 * R * G * n_max * dim,
        }
        steps |= {loop: rounds * per_round * (10 * R * G * n_max * dim + LOOP_OVERHEAD)}
        if spec["kind"] == "logistic":
            batch, data = spec["batch"], spec["n"]
            memory[f"{clients} x problem.batch={_n(batch)} x 8 B (the gathered rows)"] = \
                8 * R * G * n_max * batch * dim
            memory[f"problem.n={_n(data)} x dim={_n(dim)} x 3 copies of the data"] = 24 * data * dim
            memory[f"replicas={_n(R)} x groups={G} x problem.n={_n(data)} x 3 of 8 B"] = 24 * R * G * data
            steps[f"{loop} x problem.batch={_n(batch)}"] = \
                6 * rounds * per_round * R * G * n_max * batch * dim
            steps[f"{loop} x problem.n={_n(data)} / clients (the gradient of f)"] = \
                4 * rounds * per_round * R * G * data * dim
        else:
            memory[f"problem.dim={_n(dim)}, squared, x 6 matrices of 8 B"] = 48 * dim * dim
        return Footprint.of(memory, steps)

    def _draw(self, draw: Draw) -> HFLScenario:
        """1-3 groups of 1-8 clients, Fig. 7a's delays scaled by a factor in [0.5, 2], S in
        [0, 6], T in [40, 150], logistic regression."""
        scale = draw.uniform(0.5, 2.0)
        return HFLScenario(sizes=[draw.integer(1, 8) for _ in range(draw.integer(1, 3))],
                           delays=[round(v * scale, 6) for v in FIG7A], S=draw.uniform(0, 6),
                           T=draw.uniform(40, 150), replicas=32, seed=draw.integer(0, 2**31 - 2))


@register_adapter
class Lemma1(HFL):
    """Lemma 1: the model deviation per round and group; one delay path only."""

    key = "hfl.lemma1"
    lhs_label = r"$\mathbb{E}\|x^{u+1}-x_i^{u,t_i^u}\|^2$ [param²]"
    # alpha L ~ 0.06 on the default logistic problem (L ~ 0.056)
    default = HFLScenario(alpha=1.0)
    tags = Tags(cells=True)

    def _derive(self, s: HFLScenario, thm) -> dict[str, Any]:
        if s.mode != "conditional":
            raise ValueError(f"mode={s.mode!r}: {self.key} is a bound per round of one delay path; "
                             "use mode='conditional'")
        return super()._derive(s, thm)

    @staticmethod
    def _cells(trace) -> np.ndarray:
        return trace.deviation.numpy()


@register_adapter
class Theorem1(HFL):
    """Theorem 1, one bound per group. Isolated groups (S = T, U = 1) are the only case where
    (19) is informative (Remark 4)."""

    key = "hfl.theorem1"
    lhs_label = r"$\frac{1}{\sum_u t_i^u}\sum_{u,l}\|\nabla f_i(x_i^{u,l-1})\|^2$ [loss²/param²]"
    default = HFLScenario(sizes=[4, 6], S=20.0, T=20.0)
    tags = Tags(cells=True, paired=True)

    def _derive(self, s: HFLScenario, thm) -> dict[str, Any]:
        params = super()._derive(s, thm)
        params["Delta"] = np.full(len(s.sizes), params["Delta"])  # f_i = f: i.i.d. groups
        return params

    @staticmethod
    def _cells(trace) -> np.ndarray:
        return trace.group_lhs.numpy()

    def _draw(self, draw: Draw) -> HFLScenario:
        s = super()._draw(draw)
        S = draw.uniform(2, 20)
        return s.replace(S=S, T=S)


@register_adapter
class Theorem2(HFL):
    key = "hfl.theorem2"
    default = HFLScenario(alpha=1.0)
    tags = Tags(paired=True, estimated=True)

    def _estimated_parts(self, scenario, thm, *, problem, x1, settings):
        return estimated_parts(scenario, thm, problem=problem, x1=x1, settings=settings)


@register_adapter
class Corollary1(HFL):
    """Corollary 1 at alpha = min(1/sqrt(U), 1/L), with t_max of (22); one delay path."""

    key = "hfl.corollary1"
    default = HFLScenario()
    tags = Tags()

    def _derive(self, s: HFLScenario, thm) -> dict[str, Any]:
        from fedbound.bounds import hfl as bhfl

        if s.alpha is not None:
            raise ValueError(f"alpha={s.alpha}: {self.key} fixes alpha = min(1/sqrt(U), 1/L) "
                             f"({PAPER}, Corollary 1); leave alpha null")
        if s.ramp:
            raise ValueError("ramp=true: Corollary 1 is stated for a fixed S")
        if s.mode != "conditional":
            raise ValueError(f"mode={s.mode!r}: the corollary's alpha depends on each path's U; "
                             "use mode='conditional'")
        params = super()._derive(s, thm)
        params["t_max"] = bhfl.schedule_params(self.key, s.model(), s.S)["t_max"]
        return params

    def _simulation_alpha(self, s: HFLScenario, params, problem) -> float:
        return 1.0 / max(math.sqrt(params["t"].shape[-2]), problem.L)


def lemma1_pathwise(scenario: HFLScenario | None = None) -> dict[str, Any]:
    """Lemma 1 on every sample path (with ||g~|| <= G = R a.s. for logistic regression every
    step of its proof holds pathwise): the largest ratio deviation / (2 alpha^2 ((t_i^u)^2 +
    kappa) G^2) over replicas, rounds and groups; it must be <= 1 for every alpha."""
    import torch

    from fedbound.sim.hfl import run_hfl

    s = HFLScenario(mode="expected") if scenario is None else scenario
    st = build(s)
    sched = paths(s)
    alpha = Lemma1()._alpha(s, st.problem.L)
    trace = run_hfl(st.problem, sizes=s.sizes, alpha=alpha, x1=st.x1, replicas=s.replicas,
                    t=sched.t if s.mode == "expected" else sched.path(0),
                    generator=torch.Generator().manual_seed(s.seed + 1))
    bound = bounds.get("hfl.lemma1", "proof").evaluate(
        alpha=alpha, G=st.problem.G, sizes=np.array(s.sizes), t=trace.t.numpy())
    real = np.broadcast_to(trace.real.numpy()[..., None], bound.shape)
    ratio = trace.deviation.numpy()[real] / bound[real]
    return {"max_ratio": float(ratio.max()), "cells": int(ratio.size), "holds": bool(ratio.max() <= 1)}


# ---------------------------------------------------------------------- rate sweeps

register_sweep("hfl.corollary1", Sweep(
    "U", "T", (300.0, 1200.0, 4800.0, 19200.0), {"problem": {"R": 4.0}},
    note="U rounds in the system time T at a fixed sync time S; features of norm up to 4 "
         "(L about 1), so that alpha L is not tiny and the sweep reaches the asymptotic regime"))
