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
  of Theorem 1, eq. (15), fastest in wall-clock time under t_Q = 3 t_comm + Q t_comp
  (Section 5.2); every variant of tdcd.theorem1, including fedbound's own ``refined``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from fedbound import bounds
import fedbound.bounds.tdcd as btdcd
from fedbound.bounds import delays as dl
from fedbound.bounds.tuning import default_sync_grid
from fedbound.sim.hfl import run_hfl
from fedbound.sim.problems import Quadratic
from fedbound.sim.tdcd import run_tdcd

from .adapter import adapter_for
from .papers.tdcd import TDCDScenario, build
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


@contextmanager
def one_thread():
    """torch on one thread inside (restored after): the choosers' runs are many small tensor
    operations, which extra threads only slow down, by a factor 10 on a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def choose(chooser: Chooser, *, variants=None, method: str = "both") -> ChoiceReport:
    """Each variant's choice (``variants``: default every variant of the chooser's result)
    beside the simulation's, each bound choice simulated too (module docstring)."""
    with one_thread():
        return _choose(chooser, variants, method)


def _choose(chooser: Chooser, variants, method: str) -> ChoiceReport:
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
        if hasattr(chooser, "unreached"):
            return chooser.unreached(options)
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

DEFAULT_Q_GRID = (1, 2, 5, 10, 20)
SIM_REPLICAS = 16
SIM_ROUNDS_Q1 = 150
#: the default target: this fraction of ||grad L(theta^0)||^2 ...
EPSILON_FRACTION = 0.25
#: ... and at least this multiple of the simulated noise floor (:meth:`QEta.noise_floor`)
FLOOR_MARGIN = 2.0
#: the simulated steps of each Q: factors of 2 from the smallest variant's eta_max(Q) / 4 up to
#: twice the largest variant's eta_max(Q), or eta_max(1) / Q (the paper searches a grid,
#: Section 5.2; :meth:`QEta.eta_grid`)
ETA_BELOW, ETA_ABOVE = 0.25, 2.0
#: step sizes per Q searched on the bound side: a log grid over BOUND_DECADES decades up to the
#: admissible maximum (the rounds needed are unimodal in eta), refined by a scalar search
BOUND_ETAS, BOUND_DECADES = 241, 12


def hitting_times(running: np.ndarray, time: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Per replica (rows of ``running``, [replicas, rounds]): the rounds r and the wall-clock
    time time[r] at the first round r whose running left side of (15) is <= epsilon; inf
    for a replica that never gets there."""
    hit = running <= epsilon
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    rounds = np.where(first >= 0, first + 1.0, np.inf)
    return rounds, np.where(first >= 0, time[first + 1], np.inf)


class QEta(Chooser):
    """(Q, eta) reaching ``epsilon`` of the left side of (15) fastest in wall-clock time
    (module docstring), on the TDCD ``scenario`` (default: tdcd.theorem1's).

    Defaults that make the choice depend on the problem: ``t_comm`` and ``t_comp`` the
    scenario's; ``epsilon`` EPSILON_FRACTION of ||grad L(theta^0)||^2, raised to FLOOR_MARGIN
    times the simulated noise floor when that is higher. The bound's parameters are the
    adapter's (``verify.adapter_for("tdcd.theorem1").parameters``, K_j included for the
    refined variant). Every simulated configuration runs ``replicas`` replicas over the time
    of SIM_ROUNDS_Q1 rounds of Q = 1; its objective is the mean over replicas of the time at
    which the replica's running left side first reaches epsilon, with a 95% interval (inf
    when a replica never does or diverges)."""

    name = "q-eta"
    knobs = ("Q", "eta")
    metric = "wall-clock time to reach epsilon"
    key = "tdcd.theorem1"

    def __init__(self, *, epsilon=None, t_comm=None, t_comp=None,
                 scenario: TDCDScenario | None = None, Q_grid=None, replicas: int = SIM_REPLICAS):
        self.scenario = scenario or TDCDTheorem1.default
        self.scenario.validate()
        self.t_comm = require_float("t_comm", self.scenario.t_comm if t_comm is None else t_comm, low=0)
        self.t_comp = require_float("t_comp", self.scenario.t_comp if t_comp is None else t_comp, low=0)
        if self.t_comm + self.t_comp <= 0:
            raise ValueError(f"t_comm={self.t_comm} and t_comp={self.t_comp}: a round must take "
                             "time (t_comm + t_comp > 0)")
        Qs = DEFAULT_Q_GRID if Q_grid is None else Q_grid
        self.Q_grid = [require_int(f"Q_grid[{i}]", q) for i, q in enumerate(Qs)]
        if not self.Q_grid:
            raise ValueError("Q_grid is empty")
        self.replicas = require_int("replicas", replicas, minimum=2)
        st = build(self.scenario)
        self.model = st.model
        self.grad0 = float((st.model.grad(st.model.split(st.theta0)[None]) ** 2).sum())
        adapter = adapter_for(self.key)
        self.params = {v: self._bound_params(adapter, v) for v in bounds.variants(self.key)}
        self.horizon = SIM_ROUNDS_Q1 * btdcd.round_time(1, self.t_comm, self.t_comp)
        self.floor = self.noise_floor()
        if epsilon is None:
            self.epsilon = max(EPSILON_FRACTION * self.grad0, FLOOR_MARGIN * self.floor)
            self.epsilon_source = (f"{EPSILON_FRACTION} ||grad L(theta^0)||^2, at least "
                                   f"{FLOOR_MARGIN} x the noise floor")
        else:
            self.epsilon = require_float("epsilon", epsilon, low=0, low_open=True)
            self.epsilon_source = "given"

    def _bound_params(self, adapter, variant: str) -> dict[str, Any]:
        """The variant's parameters on the scenario, less those the chooser sets (Q, eta, R)."""
        thm = bounds.get(self.key, variant)
        p = adapter.parameters(self.scenario, thm)
        return {k: v for k, v in p.items() if k not in ("Q", "eta", "R")}

    def max_step(self, variant: str, Q: int) -> float:
        """eta_max(Q): the largest step the variant's conditions admit."""
        return bounds.get(self.key, variant).max_step(**self.params[variant], Q=Q, R=1)

    def noise_floor(self) -> float:
        """The level ||grad L||^2 settles at: its mean over replicas and the last half of the
        horizon, at Q = 1 with the largest admissible step of any variant."""
        eta = max(self.max_step(v, 1) for v in self.params)
        st = build(self.scenario)
        with one_thread():
            tr = run_tdcd(st.model, eta=eta, Q=1, rounds=SIM_ROUNDS_Q1, theta0=st.theta0,
                          replicas=self.replicas, generator=st.generator)
        g = tr.grad_sq_norm.numpy()[~tr.diverged.numpy()]
        return float(g[:, SIM_ROUNDS_Q1 // 2:].mean()) if g.size else math.inf

    def inputs(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "epsilon_source": self.epsilon_source,
                "grad_sq_norm_0": self.grad0, "noise_floor": self.floor, "t_comm": self.t_comm,
                "t_comp": self.t_comp, "Q_grid": self.Q_grid, "replicas": self.replicas,
                "horizon": self.horizon, "scenario": self.scenario.to_dict()}

    def _time(self, Q: int, rounds) -> np.ndarray:
        return np.asarray(rounds, dtype=float) * btdcd.round_time(Q, self.t_comm, self.t_comp)

    def bound_choice(self, variant: str) -> BoundChoice:
        """For each Q, the admissible eta with the fewest rounds R at which the variant's bound
        is <= epsilon; the fastest in wall-clock time wins (the smaller Q on a tie);
        unreachable targets cost infinite time. The refined variant (derived by fedbound, not
        published) by ``bounds.tdcd.refined_choice``; the others are A(eta)/R + C(eta) in R
        (C the limit as R grows, A = bound(R = 1) - C), so R = ceil(A / (epsilon - C)),
        minimised over a log grid of eta and then by a bounded scalar search."""
        if variant == "refined":
            rows = btdcd.refined_choice(self.epsilon, **self.params[variant], t_comm=self.t_comm,
                                        t_comp=self.t_comp, Q_grid=self.Q_grid)["table"]
            curve = [{"Q": r["Q"], "eta": r["eta"], "rounds": float(r["R"]), "time": r["time"]}
                     for r in rows]
        else:
            curve = [self._published_row(variant, Q) for Q in self.Q_grid]
        best = min(curve, key=lambda row: (row["time"], row["Q"]))
        return BoundChoice(variant, {"Q": best["Q"], "eta": best["eta"]}, best["time"], curve)

    def _published_row(self, variant: str, Q: int) -> dict[str, Any]:
        from scipy.optimize import minimize_scalar

        thm, base = bounds.get(self.key, variant), self.params[variant]

        def rounds(eta) -> np.ndarray:
            # C: the bound as R -> infinity (no cancellation against the large A/R at R = 1)
            one, C = (np.asarray(thm.evaluate(**base, Q=Q, R=r, eta=eta)) for r in (1.0, 2.0**200))
            with np.errstate(divide="ignore", invalid="ignore"):
                return np.where(C < self.epsilon, (one - C) / (self.epsilon - C), np.inf)

        top = self.max_step(variant, Q)
        etas = np.geomspace(top * 10.0**-BOUND_DECADES, top, BOUND_ETAS)
        j = int(np.argmin(rounds(etas)))
        eta = float(etas[j])
        if np.isfinite(rounds(eta)):
            lo, hi = math.log(etas[max(j - 1, 0)]), math.log(etas[min(j + 1, BOUND_ETAS - 1)])
            res = minimize_scalar(lambda u: float(rounds(math.exp(u))), bounds=(lo, hi),
                                  method="bounded", options={"xatol": 1e-10})
            if rounds(math.exp(res.x)) < rounds(eta):
                eta = float(min(math.exp(res.x), top))
        R = max(1.0, math.ceil(float(rounds(eta)) * (1 - 1e-12))) if np.isfinite(rounds(eta)) \
            else math.inf
        return {"Q": Q, "eta": eta, "rounds": R, "time": float(self._time(Q, R))}

    def eta_grid(self, Q: int) -> list[float]:
        """The simulated steps of Q: factors of 2 from ETA_BELOW x the smallest variant's
        eta_max(Q) up to ETA_ABOVE x the largest's, or up to ETA_ABOVE x the largest
        eta_max(1) / Q if that is higher (so that every Q is tried up to the same eta Q)."""
        tops = [self.max_step(v, Q) for v in self.params]
        lo = ETA_BELOW * min(tops)
        hi = ETA_ABOVE * max(max(tops), max(self.max_step(v, 1) for v in self.params) / Q)
        return (lo * 2.0 ** np.arange(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1)).tolist()

    def candidates(self) -> list[dict[str, Any]]:
        """Every Q of the grid with every step of :meth:`eta_grid`."""
        return [{"Q": Q, "eta": eta} for Q in self.Q_grid for eta in self.eta_grid(Q)]

    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """All the steps of one Q in one vectorised run (``replicas`` replicas per step) over
        the horizon; per replica the time at which its running left side of (15) first
        reaches epsilon; the Option's loss is their mean with its 95% interval, and
        ``extra`` has the mean rounds, the mean left side at the horizon with its interval,
        and whether the step is admissible for each variant."""
        out: dict[int, Option] = {}
        for Q in dict.fromkeys(row["Q"] for row in settings):
            idx = [i for i, row in enumerate(settings) if row["Q"] == Q]
            etas = [settings[i]["eta"] for i in idx]
            steps = torch.tensor(etas, dtype=torch.float64).repeat_interleave(self.replicas)
            rounds = max(1, math.ceil(self.horizon / btdcd.round_time(Q, self.t_comm, self.t_comp)))
            st = build(self.scenario)
            tr = run_tdcd(st.model, eta=steps, Q=Q, rounds=rounds, theta0=st.theta0,
                          replicas=steps.numel(), generator=st.generator, t_comm=self.t_comm,
                          t_comp=self.t_comp)
            running = tr.running_lhs.numpy().reshape(len(etas), self.replicas, rounds)
            diverged = tr.diverged.numpy().reshape(len(etas), self.replicas)
            tops = {v: self.max_step(v, Q) for v in self.params}
            for k, i in enumerate(idx):
                r, t = hitting_times(running[k], tr.time.numpy(), self.epsilon)
                t[diverged[k]] = np.inf
                final = np.where(diverged[k], np.inf, running[k][:, -1])
                out[i] = Option(dict(settings[i]), float(t.mean()), _half_width(t) if np.isfinite(t).all()
                                else math.inf,
                                {"rounds": float(r.mean()), "lhs_at_horizon": float(final.mean()),
                                 "lhs_at_horizon_ci": _half_width(final),
                                 "admissible": [v for v, top in tops.items()
                                                if etas[k] <= top * (1 + 1e-12)],
                                 "diverged": int(diverged[k].sum()), "replicas": self.replicas})
        return [out[i] for i in range(len(settings))]

    def unreached(self, options: list[Option]) -> str:
        """One line: no configuration reaches epsilon, and the closest one."""
        o = min(options, key=lambda o: o.extra["lhs_at_horizon"])
        return (f"No configuration reaches epsilon = {self.epsilon:.4g} within the horizon "
                f"{self.horizon:.4g}; the lowest left side there is {o.extra['lhs_at_horizon']:.4g} "
                f"at {_show(o.settings)}.")


def q_eta_evidence(ratios=(1.0, 10.0, 100.0), *, scenario: TDCDScenario | None = None,
                   t_comp: float = 1.0, replicas: int = SIM_REPLICAS) -> list[dict[str, Any]]:
    """For each t_comm / t_comp in ``ratios``: :func:`choose` with every variant of
    tdcd.theorem1 and the defaults of :class:`QEta`, one row per choice (each variant's and the
    simulation's best): Q, eta, the simulated time to epsilon with its 95% half-width, that
    time relative to the best simulated one (inf: some replica never reached epsilon), and the
    simulated left side at the horizon relative to the best configuration's."""
    rows = []
    for ratio in ratios:
        rep = choose(QEta(t_comm=ratio * t_comp, t_comp=t_comp, scenario=scenario, replicas=replicas))
        if rep.best is None:
            raise ValueError(f"t_comm/t_comp={ratio}: {rep.message}")
        picks = [(c.variant, c.simulated) for c in rep.bound] + [("simulation", rep.best)]
        for who, o in picks:
            rows.append({"ratio": ratio, "epsilon": rep.inputs["epsilon"], "chooser": who,
                         "Q": o.settings["Q"], "eta": o.settings["eta"], "time": o.loss, "ci": o.ci,
                         "relative_time": o.loss / rep.best.loss,
                         "relative_lhs": o.extra["lhs_at_horizon"] / rep.best.extra["lhs_at_horizon"]})
    return rows


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
