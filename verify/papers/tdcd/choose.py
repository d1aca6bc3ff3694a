"""The local steps Q and the step eta of TDCD (Das et al. 2022), chosen by every variant of
Theorem 1 and by simulation (the chooser of ``fedbound choose tdcd``, alias
``choose-q-eta``), and the sweeps over Q behind the paper's Section 5.2 figures.

:class:`QEta`: the (Q, eta) that reach a target epsilon of the left side of Theorem 1,
eq. (15), fastest in wall-clock time under t_Q = 3 t_comm + Q t_comp (Section 5.2); every
variant of tdcd.theorem1, including fedbound's own ``refined``. :func:`q_eta_evidence`
compares the choices over ratios t_comm / t_comp; :func:`q_sweep` and :func:`loss_vs_time`
(with their figures :func:`plot_against_q`, :func:`plot_loss_vs_time`) sweep Q.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    COUNT,
    LOSS,
    TIME,
    BoundChoice,
    Chooser,
    Footprint,
    Option,
    adapter_for,
    check,
    choose,
    comma_separated,
    half_width,
    label,
    register_chooser,
    require_float,
    require_int,
    require_runs,
    settings_text,
)

from .adapters import TDCDScenario, Theorem1, build

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


@register_chooser
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
    aliases = ("choose-q-eta",)
    summary = "TDCD: which Q and eta reach accuracy epsilon fastest in wall-clock time"
    example = "fedbound choose tdcd --t-comm 100 --t-comp 1"

    @classmethod
    def add_arguments(cls, p) -> None:
        p.add_argument("--epsilon", type=float,
                       help="target of the left side of Theorem 1, eq. (15) (default: 0.25 "
                            "||grad L(theta^0)||^2, at least twice the simulated noise floor)")
        p.add_argument("--t-comm", type=float,
                       help="time of one communication (default: the scenario's)")
        p.add_argument("--t-comp", type=float, help="time of one local step (default: the scenario's)")
        p.add_argument("--replicas", type=int,
                       help=f"simulated replicas per configuration (default {SIM_REPLICAS})")
        p.add_argument("--scenario", help="TDCD scenario JSON file (default: tdcd.theorem1's)")
        p.add_argument("--Q", help="comma-separated local-step counts to compare")

    @classmethod
    def from_arguments(cls, args, read_scenario) -> QEta:
        scenario = None if args.scenario is None else read_scenario(cls.key, args.scenario)
        return cls(epsilon=args.epsilon, t_comm=args.t_comm, t_comp=args.t_comp,
                   scenario=scenario, Q_grid=comma_separated(args.Q, "--Q", int),
                   **({} if args.replicas is None else {"replicas": args.replicas}))

    def __init__(self, *, epsilon=None, t_comm=None, t_comp=None,
                 scenario: TDCDScenario | None = None, Q_grid=None, replicas: int = SIM_REPLICAS):
        import fedbound.bounds.tdcd as btdcd

        self.scenario = scenario or Theorem1.default
        self.scenario.validate()
        self.t_comm = require_float("t_comm", self.scenario.t_comm if t_comm is None else t_comm, low=0)
        self.t_comp = require_float("t_comp", self.scenario.t_comp if t_comp is None else t_comp, low=0)
        if self.t_comm + self.t_comp <= 0:
            raise ValueError(f"t_comm={self.t_comm} and t_comp={self.t_comp}: a round must take "
                             "time (t_comm + t_comp > 0)")
        Qs = DEFAULT_Q_GRID if Q_grid is None else Q_grid
        self.Q_grid = [require_int(f"Q[{i}]", q) for i, q in enumerate(Qs)]
        if not self.Q_grid:
            raise ValueError("Q_grid is empty")
        self.replicas = require_int("replicas", replicas, minimum=2)
        st = build(self.scenario)
        self.model = st.model
        self.grad0 = float((st.model.grad(st.model.split(st.theta0)[None]) ** 2).sum())
        adapter = adapter_for(self.key)
        self.params = {v: self._bound_params(adapter, v) for v in bounds.variants(self.key)}
        self.horizon = SIM_ROUNDS_Q1 * btdcd.round_time(1, self.t_comm, self.t_comp)
        require_runs("choose tdcd", {f"the noise floor at Q = 1 with --replicas {self.replicas}":
                                     self._footprint(1, SIM_ROUNDS_Q1, self.replicas)})
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
        from fedbound.sim.problems import one_thread
        from fedbound.sim.tdcd import run_tdcd

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
        import fedbound.bounds.tdcd as btdcd

        return np.asarray(rounds, dtype=float) * btdcd.round_time(Q, self.t_comm, self.t_comp)

    def bound_choice(self, variant: str) -> BoundChoice:
        """For each Q, the admissible eta with the fewest rounds R at which the variant's bound
        is <= epsilon; the fastest in wall-clock time wins (the smaller Q on a tie);
        unreachable targets cost infinite time. The refined variant (derived by fedbound, not
        published) by ``bounds.tdcd.refined_choice``; the others are A(eta)/R + C(eta) in R
        (C the limit as R grows, A = bound(R = 1) - C), so R = ceil(A / (epsilon - C)),
        minimised over a log grid of eta and then by a bounded scalar search."""
        import fedbound.bounds.tdcd as btdcd

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

    def _rounds(self, Q: int) -> int:
        """The rounds of Q within the horizon."""
        import fedbound.bounds.tdcd as btdcd

        return max(1, math.ceil(self.horizon / btdcd.round_time(Q, self.t_comm, self.t_comp)))

    def _footprint(self, Q: int, rounds: int, replicas: int) -> Footprint | None:
        """The tdcd.theorem1 adapter's estimate of a run of the scenario with ``Q``, ``rounds``
        and ``replicas``."""
        from dataclasses import replace

        return adapter_for(self.key).footprint(replace(self.scenario, Q=Q, rounds=rounds,
                                                       replicas=replicas))

    def footprints(self, settings: list[dict[str, Any]]) -> dict[str, Footprint | None]:
        """One vectorised run per Q: its steps x --replicas replicas over the horizon."""
        steps = {}
        for row in settings:
            steps[row["Q"]] = steps.get(row["Q"], 0) + 1
        return {f"--Q {Q} ({n} steps x --replicas {self.replicas})":
                self._footprint(Q, self._rounds(Q), n * self.replicas) for Q, n in steps.items()}

    def candidates(self) -> list[dict[str, Any]]:
        """Every Q of the grid with every step of :meth:`eta_grid`."""
        return [{"Q": Q, "eta": eta} for Q in self.Q_grid for eta in self.eta_grid(Q)]

    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """All the steps of one Q in one vectorised run (``replicas`` replicas per step) over
        the horizon; per replica the time at which its running left side of (15) first
        reaches epsilon; the Option's loss is their mean with its 95% interval, and
        ``extra`` has the mean rounds, the mean left side at the horizon with its interval,
        and whether the step is admissible for each variant."""
        import torch

        from fedbound.sim.tdcd import run_tdcd

        out: dict[int, Option] = {}
        for Q in dict.fromkeys(row["Q"] for row in settings):
            idx = [i for i, row in enumerate(settings) if row["Q"] == Q]
            etas = [settings[i]["eta"] for i in idx]
            steps = torch.tensor(etas, dtype=torch.float64).repeat_interleave(self.replicas)
            rounds = self._rounds(Q)
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
                out[i] = Option(dict(settings[i]), float(t.mean()), half_width(t) if np.isfinite(t).all()
                                else math.inf,
                                {"rounds": float(r.mean()), "lhs_at_horizon": float(final.mean()),
                                 "lhs_at_horizon_ci": half_width(final),
                                 "admissible": [v for v, top in tops.items()
                                                if etas[k] <= top * (1 + 1e-12)],
                                 "diverged": int(diverged[k].sum()), "replicas": self.replicas})
        return [out[i] for i in range(len(settings))]

    def unreached(self, options: list[Option]) -> str:
        """One line: no configuration reaches epsilon, and the closest one."""
        o = min(options, key=lambda o: o.extra["lhs_at_horizon"])
        return (f"No configuration reaches epsilon = {self.epsilon:.4g} within the horizon "
                f"{self.horizon:.4g}; the lowest left side there is {o.extra['lhs_at_horizon']:.4g} "
                f"at {settings_text(o.settings)}.")


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
    if fixed not in ("etaQ", "eta"):
        raise ValueError(f"fixed={fixed!r} must be 'etaQ' or 'eta'")
    s = scenario or Theorem1.default
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
    import fedbound.bounds.tdcd as btdcd
    from fedbound.sim.tdcd import run_tdcd

    s = scenario or Theorem1.default
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


def plot_against_q(scenario=None, *, Qs=(1, 2, 5, 10), fixed: str = "etaQ",
                   variant: str | None = None, ax=None):
    """Bound and measured (95% CI) left side of (15) against Q at fixed eta Q or fixed eta
    (:func:`q_sweep`)."""
    import matplotlib.pyplot as plt

    rows = q_sweep(scenario, Qs=Qs, fixed=fixed, variant=variant)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    qs = [r["Q"] for r in rows]
    mean = np.array([r["measured"] for r in rows])
    lo, hi = (np.array(c) for c in zip(*(r["ci"] for r in rows), strict=True))
    ax.plot(qs, [r["bound"] for r in rows], "o-", label="bound (15)")
    ax.errorbar(qs, mean, yerr=[mean - lo, hi - mean], fmt="s-", capsize=3, label="measured (95% CI)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(label("Q, local steps per round", COUNT))
    ax.set_ylabel(Theorem1.lhs_label)
    ax.set_title("TDCD against Q at fixed " + ("eta Q and R" if fixed == "etaQ" else "eta and T = QR"))
    ax.legend()
    return ax


def plot_loss_vs_time(curves: dict, *, axes=None):
    """One panel per t_comm of :func:`loss_vs_time`'s curves."""
    import matplotlib.pyplot as plt

    if axes is None:
        axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False)[1][0]
    for ax, (t_comm, per_q) in zip(axes, curves.items(), strict=True):
        for Q, (time, loss) in per_q.items():
            ax.plot(time, loss, label=f"Q = {Q}")
        ax.set_xlabel(label("wall-clock time", TIME))
        ax.set_ylabel(label("training loss", LOSS))
        ax.set_title(f"t_comm = {t_comm:g}, t_comp = 1")
        ax.legend()
    return axes
