"""Choosing the sync time S (HFL) and the local steps Q with the step eta (TDCD).

One interface for both: a :class:`Chooser` knows its knobs, the choice each variant of its
bound makes (:meth:`Chooser.bound_choice`), the configurations worth simulating
(:meth:`Chooser.candidates`) and how to simulate them (:meth:`Chooser.simulate`, which
returns one :class:`Option` per configuration: the simulated loss with its 95% interval).
:func:`choose` puts the two side by side: every variant's choice is also simulated, so
the report says how far each bound's choice is from the best simulated configuration.

* :class:`SyncTime` (Ali & Arafa 2025): S for system time T under the paper's linear delay
  model; the bound side minimises the expected bound over delay paths
  (``bounds.choose_sync_time``); the simulation runs Algorithm 1 on a quadratic with the
  given L, sigma and Delta, every replica on its own delay path.
* :class:`QEta` (Das et al. 2022): the (Q, eta) that reach a target epsilon of the left side
  of (15) fastest in wall-clock time under t_Q = 3 t_comm + Q t_comp (Section 5.2).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

import bounds
import bounds.tdcd as btdcd
from bounds import delays as dl
from bounds.tuning import default_sync_grid
from sim.hfl import run_hfl
from sim.problems import Quadratic
from sim.tdcd import run_tdcd

from .papers.tdcd import TDCDScenario, build, delta, sigma
from .papers.tdcd import Theorem1 as TDCDTheorem1
from .scenario import jsonable, require_float, require_int
from .verdict import t_multiplier

METHODS = ("bound", "simulate", "both")


@dataclass
class Option:
    """One simulated configuration: ``settings`` (the knobs), ``loss`` (the simulated
    metric, mean over replicas; inf when it diverged or never reached the target) and the
    half-width ``ci`` of its 95% interval; ``extra``: what else the simulation measured."""

    settings: dict[str, Any]
    loss: float
    ci: float
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class BoundChoice:
    """The configuration a variant of the bound chooses, the bound's objective there, the
    objective over the candidates (``curve``), and the simulation at exactly that choice
    with its loss relative to the best simulated one."""

    variant: str
    settings: dict[str, Any]
    value: float
    curve: list[dict[str, Any]]
    simulated: Option | None = None
    relative: float | None = None


@dataclass
class ChoiceReport:
    """What :func:`choose` returns (see the module docstring); ``message`` is one line on
    how the choices compare, or why there is nothing to compare."""

    chooser: str
    knobs: list[str]
    metric: str
    inputs: dict[str, Any]
    bound: list[BoundChoice]
    simulation: list[Option] | None
    best: Option | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return jsonable(asdict(self))


class Chooser(ABC):
    """A choice of configuration, by the bound and by simulation (module docstring)."""

    name: str
    knobs: tuple[str, ...]
    metric: str
    key: str

    @abstractmethod
    def inputs(self) -> dict[str, Any]:
        """The validated inputs, as JSON values."""

    @abstractmethod
    def bound_choice(self, variant: str) -> BoundChoice:
        """The configuration that ``variant`` of the bound prefers."""

    @abstractmethod
    def candidates(self) -> list[dict[str, Any]]:
        """The configurations the simulation compares."""

    @abstractmethod
    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """One Option per configuration, in order."""


def choose(chooser: Chooser, *, variants=None, method: str = "both") -> ChoiceReport:
    """Each variant's choice (``variants``: default every variant of the chooser's result)
    beside the simulation's, each bound choice simulated too (module docstring)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {METHODS}")
    names = list(bounds.variants(chooser.key)) if variants is None else list(variants)
    for v in names:
        bounds.get(chooser.key, v)  # unknown variant: ValueError naming it
    choices = [chooser.bound_choice(v) for v in names] if method != "simulate" else []
    options, best = None, None
    if method != "bound":
        grid = chooser.candidates()
        grid += [c.settings for c in choices if c.settings not in grid]
        options = chooser.simulate(grid)
        finite = [o for o in options if math.isfinite(o.loss)]
        best = min(finite, key=lambda o: o.loss) if finite else None
        for c in choices:
            c.simulated = options[grid.index(c.settings)]
            if best is not None and best.loss > 0:
                c.relative = c.simulated.loss / best.loss
        options = options[:len(chooser.candidates())]
    return ChoiceReport(chooser.name, list(chooser.knobs), chooser.metric, chooser.inputs(),
                        choices, options, best, _message(chooser, choices, options, best))


def _show(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                     for k, v in settings.items())


def _message(chooser: Chooser, choices, options, best) -> str:
    if options is None:
        return "Bound only: " + "; ".join(f"{c.variant} chooses {_show(c.settings)}" for c in choices)
    if best is None:
        return f"No simulated configuration reached a finite {chooser.metric}."
    if not choices:
        return f"Simulation only: best {_show(best.settings)}."
    within = [c.variant for c in choices if c.relative is not None and c.relative <= 1.1]
    return (f"Best simulated: {_show(best.settings)} ({chooser.metric} {best.loss:.4g}); within "
            f"10% of it: {', '.join(within) if within else 'no variant of the bound'}.")


def _half_width(v: np.ndarray) -> float:
    """Half-width of the 95% Student-t interval of the mean of ``v``."""
    v = np.asarray(v, dtype=float)
    if not np.all(np.isfinite(v)):
        return math.inf
    return float(t_multiplier(v.size) * v.std(ddof=1) / math.sqrt(v.size))


# ---------------------------------------------------------------------- HFL: the sync time S


def synthetic_quadratic(L: float, sigma: float, Delta: float, dim: int = 10, seed: int = 0):
    """A quadratic with exactly L (largest eigenvalue), noise variance sigma^2 and
    f(x^1) - f* = Delta (x^1 on the top eigenvector): the simulation problem for choosing S."""
    pr = Quadratic.random(dim, L, L / 10, sigma, torch.Generator().manual_seed(seed))
    top = pr.eigvecs[:, -1]
    return pr, pr.x_star + math.sqrt(2 * Delta / pr.L) * top


def loss_at_times(loss: np.ndarray, end_time: np.ndarray, U: np.ndarray, times) -> np.ndarray:
    """Loss of the global model available at each wall-clock time, per replica [R, len(times)]:
    x^{u+1} once round u has ended (loss[:, 0] is x^1, before any round ends)."""
    ends = np.asarray(end_time, dtype=float)
    finished = np.arange(ends.shape[1]) < np.asarray(U)[:, None]  # replica r ran U[r] rounds
    ends = np.where(finished, ends, np.inf)
    ended = (ends[:, :, None] <= np.asarray(times, dtype=float)).sum(axis=1)  # rounds ended by t
    return np.take_along_axis(loss, ended, axis=1)


HFL_METRICS = ("final_loss", "lhs")


class SyncTime(Chooser):
    """S for Algorithm 1 of Ali & Arafa 2025 (module docstring). ``metric``: "lhs" (the
    default: Theorem 2's left-hand side, the average over rounds of ||grad f(x^u)||^2, the
    quantity every variant of the bound bounds, so bound and simulation rank S by the same
    measure) or "final_loss" (f(x^{U+1}) - f*, which favours larger S: it sees only the noise
    floor at the end of the run). Both are measured and shown."""

    name = "sync-time"
    knobs = ("S",)
    key = "hfl.theorem2"

    def __init__(self, *, sizes, delays, T, alpha, L, G, sigma, Delta, S_grid=None,
                 replicas: int = 32, seed: int = 0, metric: str = "lhs", times=()):
        self.model = dl.DelayModel.linear(delays, sizes)
        self.sizes = list(dl.validate_sizes(sizes))
        self.delays = list(delays)
        self.T = require_float("T", T, low=0, low_open=True)
        self.alpha = require_float("alpha", alpha, low=0, low_open=True)
        self.L = require_float("L", L, low=0, low_open=True)
        self.G = require_float("G", G, low=0, low_open=True)
        self.sigma = require_float("sigma", sigma, low=0)
        self.Delta = require_float("Delta", Delta, low=0)
        self.grid = None if S_grid is None else [require_float(f"S_grid[{i}]", v, low=0)
                                                 for i, v in enumerate(S_grid)]
        self.replicas = require_int("replicas", replicas, minimum=2)
        self.seed = require_int("seed", seed, minimum=0)
        if metric not in HFL_METRICS:
            raise ValueError(f"metric={metric!r} must be one of {HFL_METRICS}")
        self.measured = metric
        self.times = list(times)

    @property
    def metric(self) -> str:
        return {"lhs": "mean ||grad f(x^u)||^2 over rounds",
                "final_loss": "final loss gap f(x^(U+1)) - f*"}[self.measured]

    def inputs(self) -> dict[str, Any]:
        return {"sizes": self.sizes, "delays": self.delays, "T": self.T, "alpha": self.alpha,
                "L": self.L, "G": self.G, "sigma": self.sigma, "Delta": self.Delta,
                "replicas": self.replicas, "seed": self.seed, "metric": self.measured}

    def bound_choice(self, variant: str) -> BoundChoice:
        c = bounds.choose_sync_time(self.key, model=self.model, T=self.T, variant=variant,
                                    S_grid=self.grid, alpha=self.alpha, L=self.L, G=self.G,
                                    sigma=self.sigma, Delta=self.Delta, sizes=self.sizes)
        curve = [{"S": S, "bound": b, "mean_U": U} for S, b, U in zip(c.S, c.bound, c.mean_U, strict=True)]
        return BoundChoice(c.variant, {"S": c.best_S}, c.best_bound, curve)

    def candidates(self) -> list[dict[str, Any]]:
        """The S grid given, else 0 and 5 values spread geometrically over the lower half of
        the bound's default range (up to about 20 local iterations per round)."""
        if self.grid is not None:
            return [{"S": S} for S in self.grid]
        top = float(np.max(default_sync_grid(self.model, self.T))) / 2
        return [{"S": S} for S in [0.0, *np.round(np.geomspace(max(top / 20, 0.5), top, 5), 3).tolist()]]

    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """For each S: every replica on its own delay path, the final loss gap, Theorem 2's
        left-hand side, the mean loss gap at the wall-clock ``times``, and one replica's loss
        against wall-clock time."""
        pr, x1 = synthetic_quadratic(self.L, self.sigma, self.Delta, seed=self.seed)
        out = []
        for row in settings:
            sched = dl.sample_schedules(self.model, row["S"], self.T, self.replicas,
                                        np.random.default_rng(self.seed))
            tr = run_hfl(pr, sizes=self.sizes, alpha=self.alpha, x1=x1, replicas=self.replicas,
                         t=sched.t, end_time=sched.end_time,
                         generator=torch.Generator().manual_seed(self.seed + 1))
            ok = ~tr.diverged.numpy()
            gap = np.where(ok, tr.final_loss.numpy() - pr.f_inf, np.inf)
            lhs = np.where(ok, tr.lhs.numpy(), np.inf)
            at = loss_at_times(tr.loss.numpy() - pr.f_inf, tr.end_time.numpy(), sched.U, self.times)
            ends = tr.end_time.numpy()[0, : sched.U[0]]
            extra = {"final_loss": float(gap.mean()), "final_loss_ci": _half_width(gap),
                     "lhs": float(lhs.mean()), "lhs_ci": _half_width(lhs),
                     "mean_U": float(sched.U.mean()), "loss_at_times": at.mean(axis=0).tolist(),
                     "wallclock": {"time": np.concatenate([[0.0], ends]).tolist(),
                                   "loss": (tr.loss.numpy()[0, : sched.U[0] + 1] - pr.f_inf).tolist()}}
            out.append(Option(dict(row), extra[self.measured], extra[self.measured + "_ci"], extra))
        return out


# ---------------------------------------------------------------------- TDCD: Q and eta

#: multiples of eta_max(Q = 1) tried for every Q by the simulation (a grid search per Q, as
#: the paper does, Section 5.2), besides each Q's own admissible eta_max(Q)
ETA_MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)
DEFAULT_Q_GRID = (1, 2, 5, 10, 20)
SIM_REPLICAS = 8
SIM_ROUNDS_Q1 = 150
#: step sizes per Q searched on the bound side: a log grid over BOUND_DECADES decades up to the
#: admissible maximum (the rounds needed are unimodal in eta), refined by a scalar search
BOUND_ETAS, BOUND_DECADES = 241, 12


def first_time(running: np.ndarray, time: np.ndarray, epsilon: float) -> tuple[int, float] | None:
    """(rounds, time) at the first round whose running left side of (15) is <= epsilon."""
    hit = np.nonzero(running <= epsilon)[0]
    if hit.size == 0:
        return None
    return int(hit[0]) + 1, float(time[hit[0] + 1])


class QEta(Chooser):
    """(Q, eta) reaching ``epsilon`` of the left side of (15) fastest (module docstring), on
    the TDCD ``scenario`` (default: tdcd.theorem1's)."""

    name = "q-eta"
    knobs = ("Q", "eta")
    metric = "wall-clock time to reach epsilon"
    key = "tdcd.theorem1"

    def __init__(self, *, epsilon, t_comm, t_comp, scenario: TDCDScenario | None = None,
                 Q_grid=None):
        self.epsilon = require_float("epsilon", epsilon, low=0, low_open=True)
        self.t_comm = require_float("t_comm", t_comm, low=0)
        self.t_comp = require_float("t_comp", t_comp, low=0)
        self.scenario = scenario or TDCDTheorem1.default
        self.scenario.validate()
        Qs = DEFAULT_Q_GRID if Q_grid is None else Q_grid
        self.Q_grid = [require_int(f"Q_grid[{i}]", q) for i, q in enumerate(Qs)]
        if not self.Q_grid:
            raise ValueError("Q_grid is empty")
        st = build(self.scenario)
        self.model = st.model
        self.delta = delta(st)
        self.a_max = 1.0 / (8 * max(self.model.L, self.model.L_max))
        self.sigma = sigma(self.scenario, st, self.a_max / self.scenario.Q)

    def inputs(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "t_comm": self.t_comm, "t_comp": self.t_comp,
                "Q_grid": self.Q_grid, "scenario": self.scenario.to_dict()}

    def _time(self, Q: int, rounds) -> np.ndarray:
        return np.asarray(rounds, dtype=float) * btdcd.round_time(Q, self.t_comm, self.t_comp)

    def bound_choice(self, variant: str) -> BoundChoice:
        """For each Q, the admissible eta with the fewest rounds R such that the bound <=
        epsilon; the bound is A(eta)/R + C(eta) in R (C its limit as R grows, A = bound(R = 1) -
        C), so R = ceil(A / (epsilon - C)), minimised
        over eta up to the largest step of (14) for that variant (a log grid, then a bounded
        scalar search around its best point). The fastest in wall-clock time wins;
        unreachable targets cost infinite time."""
        from scipy.optimize import minimize_scalar

        thm = bounds.get(self.key, variant)
        base = {"L": self.model.L, "L_max": self.model.L_max, "Delta": self.delta, "sigma": self.sigma}

        def rounds(Q: int, eta) -> np.ndarray:
            # C: the bound as R -> infinity (no cancellation against the large A/R at R = 1)
            one, C = (np.asarray(thm.evaluate(**base, Q=Q, R=r, eta=eta)) for r in (1.0, 2.0**200))
            A = one - C
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(C < self.epsilon, A / (self.epsilon - C), np.inf)

        curve = []
        for Q in self.Q_grid:
            top = thm.max_step(**base, Q=Q, R=1)
            etas = np.geomspace(top * 10.0**-BOUND_DECADES, top, BOUND_ETAS)
            j = int(np.argmin(rounds(Q, etas)))
            eta = float(etas[j])
            if np.isfinite(rounds(Q, eta)):
                lo, hi = math.log(etas[max(j - 1, 0)]), math.log(etas[min(j + 1, BOUND_ETAS - 1)])
                res = minimize_scalar(lambda u, Q=Q: float(rounds(Q, math.exp(u))), bounds=(lo, hi),
                                      method="bounded", options={"xatol": 1e-10})
                if rounds(Q, math.exp(res.x)) < rounds(Q, eta):
                    eta = float(min(math.exp(res.x), top))
            R = max(1.0, math.ceil(float(rounds(Q, eta)) * (1 - 1e-12))) if np.isfinite(rounds(Q, eta)) \
                else math.inf
            curve.append({"Q": Q, "eta": eta, "rounds": R, "time": float(self._time(Q, R))})
        best = min(curve, key=lambda row: (row["time"], row["Q"]))
        return BoundChoice(thm.variant, {"Q": best["Q"], "eta": best["eta"]}, best["time"], curve)

    def candidates(self) -> list[dict[str, Any]]:
        """For each Q: its admissible eta_max(Q) and ETA_MULTIPLES x eta_max(1) (steps beyond
        (14) included: the paper searches a grid)."""
        return [{"Q": Q, "eta": float(eta)} for Q in self.Q_grid
                for eta in sorted({self.a_max / Q, *(self.a_max * f for f in ETA_MULTIPLES)})]

    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """All the steps of one Q in one vectorised run (SIM_REPLICAS replicas per step), over
        a time horizon of SIM_ROUNDS_Q1 rounds of Q = 1; the first round at which the replica
        mean of the running left side of (15) is <= epsilon."""
        horizon = SIM_ROUNDS_Q1 * btdcd.round_time(1, self.t_comm, self.t_comp)
        out: dict[int, Option] = {}
        for Q in dict.fromkeys(row["Q"] for row in settings):
            idx = [i for i, row in enumerate(settings) if row["Q"] == Q]
            etas = [settings[i]["eta"] for i in idx]
            steps = torch.tensor(etas, dtype=torch.float64).repeat_interleave(SIM_REPLICAS)
            rounds = max(1, math.ceil(horizon / btdcd.round_time(Q, self.t_comm, self.t_comp)))
            st = build(self.scenario)
            tr = run_tdcd(st.model, eta=steps, Q=Q, rounds=rounds, theta0=st.theta0,
                          replicas=steps.numel(), generator=st.generator, t_comm=self.t_comm,
                          t_comp=self.t_comp)
            running = tr.running_lhs.numpy().reshape(len(etas), SIM_REPLICAS, rounds)
            diverged = tr.diverged.numpy().reshape(len(etas), SIM_REPLICAS).any(axis=1)
            for k, i in enumerate(idx):
                hit = None if diverged[k] else first_time(running[k].mean(axis=0), tr.time.numpy(),
                                                         self.epsilon)
                admissible = etas[k] <= self.a_max / Q * (1 + 1e-12)
                out[i] = Option(dict(settings[i]), math.inf if hit is None else hit[1], 0.0,
                                {"rounds": None if hit is None else hit[0], "admissible": admissible,
                                 "diverged": bool(diverged[k]), "horizon": horizon,
                                 "replicas": SIM_REPLICAS})
        return [out[i] for i in range(len(settings))]


# ---------------------------------------------------------------------- sweeps for figures


def q_sweep(scenario: TDCDScenario | None = None, *, Qs=(1, 2, 5, 10), fixed: str = "etaQ",
            variant: str | None = None) -> list[dict]:
    """Bound and measurement of tdcd.theorem1 for each Q.

    ``fixed="etaQ"``: eta = a/Q with a = eta_max(Q) Q = 1/(8 max(L, L_max)) and the
    scenario's rounds R (the bound is then the same for every Q). ``fixed="eta"``:
    eta = eta_max(max Qs) for every Q (admissible for all) and the same total iterations
    T = R max(Qs), i.e. T // Q rounds (the bound grows with Q).
    Returns one dict per Q with Q, eta, rounds, bound, measured (mean), ci, verdict."""
    from .check import check

    if fixed not in ("etaQ", "eta"):
        raise ValueError(f"fixed={fixed!r} must be 'etaQ' or 'eta'")
    s = scenario or TDCDTheorem1.default
    m = build(s).model
    a_max = 1.0 / (8 * max(m.L, m.L_max))
    rows = []
    for Q in Qs:
        if fixed == "etaQ":
            eta, rounds = a_max / Q, s.rounds
        else:
            eta, rounds = a_max / max(Qs), max(1, s.rounds * max(Qs) // Q)
        v = check("tdcd.theorem1", s.replace(Q=int(Q), eta=eta, rounds=rounds), variant=variant)
        rows.append({"Q": int(Q), "eta": eta, "rounds": rounds, "bound": v.bound,
                     "measured": v.measured_mean, "ci": v.measured_ci, "verdict": v.verdict})
    return rows


def loss_vs_time(scenario: TDCDScenario | None = None, *, Qs=(1, 5, 20), t_comms=(10.0, 100.0),
                 eta: float | None = None, horizon_rounds: int | None = None) -> dict:
    """Mean training loss L(theta^{rQ}) against wall-clock time r t_Q, t_Q = 3 t_comm + Q t_comp
    (Section 5.2), for each t_comm and Q, with one step ``eta`` for every Q (the paper's
    practice; default eta_max(Q = 1), beyond (14) for Q > 1) and the same time horizon: Q = 1
    gets ``horizon_rounds`` (default: the scenario's rounds). Returns {t_comm: {Q: (time, loss)}}."""
    s = scenario or TDCDTheorem1.default
    m = build(s).model
    eta = eta if eta is not None else 1.0 / (8 * max(m.L, m.L_max))
    base = horizon_rounds or s.rounds
    out: dict = {}
    for t_comm in t_comms:
        horizon = base * btdcd.round_time(1, t_comm, s.t_comp)
        out[t_comm] = {}
        for Q in Qs:
            rounds = max(1, math.ceil(horizon / btdcd.round_time(Q, t_comm, s.t_comp)))
            st = build(s)
            tr = run_tdcd(st.model, eta=eta, Q=Q, rounds=rounds, theta0=st.theta0,
                          replicas=s.replicas, generator=st.generator, t_comm=t_comm, t_comp=s.t_comp)
            out[t_comm][Q] = (tr.time.numpy(), tr.loss.numpy().mean(axis=0))
    return out
