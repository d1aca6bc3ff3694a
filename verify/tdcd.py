"""TDCD scenarios: defaults, parameter derivation, measurement, plots and the choice of
Q and eta (papers/tdcd.txt).

A scenario fixes the vertical split (``blocks``), the clients per silo (``clients``), the
synthetic data (``n``, ``loss``, ``scale``, ``label_noise``), the batch, Q, eta (null = the
largest admissible), the rounds, the start theta^0 (at ``distance`` from 0 in a random
direction), the latency model (``t_comm``, ``t_comp``), the replicas and the seed. From it
the theorem's parameters follow (sim.tdcd.BlockLinear documents each constant):

- L and L_max from the data; Delta = L(theta^0) - L_inf (Assumption 2, L208; L_inf exact
  for least squares, 0 for logistic regression);
- sigma_j: logistic regression has a uniform bound; least squares has none, so sigma_j^2 is
  the largest exact Var(g_kj) over the visited round-start models of every replica (the
  proof uses (9) only there, theory/tdcd.md section 3.7).

``tdcd.lemma2`` holds pathwise, so its measurement is the worst ratio drift / G0 over every
round and every replica (a deterministic number for the seed), compared with the bound at
G0 = 1 without Monte-Carlo tolerance (the verdict's mode reads "exact").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch

import bounds
import bounds.tdcd as btdcd
from sim.tdcd import LOSSES, BlockLinear, Layout, TDCDTrace, run_tdcd, synthetic_data

from .check import check
from .scenario import (
    Measurement,
    ScenarioBase,
    register_adapter,
    require_float,
    require_int,
    roundoff,
)

KEYS = ("tdcd.theorem1", "tdcd.lemma2", "tdcd.remark5")


def _list_of_ints(name: str, value) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{name}={value!r} must be a non-empty list of integers (one per silo)")
    return [require_int(f"{name}[{j}]", v, minimum=0) for j, v in enumerate(value)]


@dataclass
class TDCDScenario(ScenarioBase):
    """A run of TDCD and the data the bounds need. JSON keys are the field names.

    ``blocks``: features per silo (N = len(blocks)); ``clients``: K_j per silo; ``batch``: a
    multiple of lcm(K_j) (sim.tdcd.Layout); ``loss``: "logistic" or "squared"; ``eta``: null
    = the largest step the key's condition allows; ``c``: Remark 5's constant (null = the
    largest admissible; only for tdcd.remark5, whose eta = c/(Q sqrt(rounds)))."""

    blocks: list[int] = field(default_factory=lambda: [3, 3])
    clients: list[int] = field(default_factory=lambda: [2, 3])
    n: int = 60
    batch: int = 12
    loss: str = "logistic"
    scale: float = 1.0
    label_noise: float = 0.1
    Q: int = 4
    eta: float | None = None
    c: float | None = None
    rounds: int = 40
    distance: float = 1.0
    t_comm: float = 10.0
    t_comp: float = 1.0
    replicas: int = 64
    seed: int = 0

    def validate(self) -> None:
        self.layout()
        if self.loss not in LOSSES:
            raise ValueError(f"loss={self.loss!r} must be one of {LOSSES}")
        require_float("scale", self.scale, low=0, low_open=True)
        require_float("label_noise", self.label_noise, low=0,
                      high=0.5 if self.loss == "logistic" else math.inf)
        for name in ("Q", "rounds", "replicas"):
            require_int(name, getattr(self, name))
        require_int("seed", self.seed, minimum=0)
        for name in ("eta", "c"):
            if getattr(self, name) is not None:
                require_float(name, getattr(self, name), low=0, low_open=True)
        for name in ("distance", "t_comm", "t_comp"):
            require_float(name, getattr(self, name), low=0)

    def layout(self) -> Layout:
        """The sim layout; its ValueErrors name the field (blocks[j], clients[j], batch, n)."""
        blocks, clients = _list_of_ints("blocks", self.blocks), _list_of_ints("clients", self.clients)
        return Layout(tuple(blocks), tuple(clients), require_int("n", self.n),
                      require_int("batch", self.batch))


# ---------------------------------------------------------------------- set-up and runs


@dataclass
class Setup:
    """The model and start built from a scenario (deterministic in the seed); ``generator``
    continues the seed's stream for the run."""

    model: BlockLinear
    theta0: torch.Tensor
    generator: torch.Generator


def build(s: TDCDScenario) -> Setup:
    lay = s.layout()
    gen = torch.Generator().manual_seed(s.seed)
    X, y = synthetic_data(s.n, lay.D, loss=s.loss, generator=gen, scale=s.scale,
                          noise=s.label_noise)
    direction = torch.randn(lay.D, generator=gen, dtype=torch.float64)
    theta0 = s.distance * direction / direction.norm()
    return Setup(BlockLinear(X, y, lay, loss=s.loss), theta0, gen)


@lru_cache(maxsize=16)
def _run_cached(scenario_json: str, eta: float) -> TDCDTrace:
    s = TDCDScenario.from_dict(json.loads(scenario_json))
    st = build(s)
    return run_tdcd(st.model, eta=eta, Q=s.Q, rounds=s.rounds, theta0=st.theta0,
                    replicas=s.replicas, generator=st.generator, t_comm=s.t_comm, t_comp=s.t_comp)


def run(s: TDCDScenario, eta: float) -> TDCDTrace:
    """The scenario's run at step ``eta`` (cached: parameters and measurement share it)."""
    return _run_cached(s.to_json(indent=None), float(eta))


def delta(st: Setup) -> float:
    """L(theta^0) - L_inf, the numerator of (15)'s first term (bounded via Assumption 2, L208)."""
    return float(st.model.loss(st.model.split(st.theta0)[None])[0]) - st.model.f_inf


def sigma(s: TDCDScenario, st: Setup, eta: float) -> np.ndarray:
    """sigma_j, [N]: the model's uniform bound, or (least squares) the square root of the
    largest exact Var(g_kj) at the visited round-start models of the run at ``eta``."""
    if st.model.sigma is not None:
        return np.asarray(st.model.sigma)
    trace = run(s, eta)
    return np.sqrt(trace.sigma2.amax(dim=(0, 1)).numpy())


def remark5_eta(s: TDCDScenario, c: float) -> float:
    """eta = c/(Q sqrt(R)), Remark 5 L260."""
    return c / (s.Q * math.sqrt(s.rounds))


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad L||^2 at the scale of theta^0."""
    return roundoff(st.model.L, float(st.theta0.norm()))


# ---------------------------------------------------------------------- adapter


class TDCDAdapter:
    scenario_type = TDCDScenario
    defaults = {
        "tdcd.theorem1": TDCDScenario(),
        "tdcd.lemma2": TDCDScenario(Q=8, rounds=20, replicas=32),
        "tdcd.remark5": TDCDScenario(rounds=100, replicas=32),
    }

    def parameters(self, key: str, s: TDCDScenario, thm) -> dict[str, Any]:
        """Theorem parameters derived from the scenario (see the module docstring)."""
        st = build(s)
        m = st.model
        if s.c is not None and key != "tdcd.remark5":
            raise ValueError(f"c={s.c}: only tdcd.remark5 uses c; leave it null")
        if key == "tdcd.lemma2":
            params = {"Q": s.Q, "L_max": m.L_max, "G0": 1.0}
            params["eta"] = float(s.eta) if s.eta is not None else thm.max_step(**params)
            return params
        params = {"L": m.L, "L_max": m.L_max, "Delta": delta(st), "R": s.rounds}
        if "K" in thm.params:   # the refined variant: K_j of the silo-average noise sigma_j^2/K_j
            params["K"] = np.asarray(s.clients, dtype=float)
        if key == "tdcd.remark5":
            if s.eta is not None:
                raise ValueError(f"eta={s.eta}: tdcd.remark5 fixes eta = c/(Q sqrt R); set c "
                                 "(or leave it null) and leave eta null")
            params["c"] = float(s.c) if s.c is not None else thm.max_step(**params)
            step = remark5_eta(s, params["c"])
        else:
            params["Q"] = s.Q
            params["eta"] = float(s.eta) if s.eta is not None else thm.max_step(**params)
            step = params["eta"]
        params["sigma"] = sigma(s, st, step)
        return params

    @staticmethod
    def step(key: str, s: TDCDScenario, params) -> float:
        """The step size the run uses."""
        return remark5_eta(s, params["c"]) if key == "tdcd.remark5" else params["eta"]

    def measure(self, key: str, s: TDCDScenario, params, exact: bool) -> Measurement:
        if exact:
            raise ValueError("exact mode is not available for tdcd: the mini-batch dynamics are "
                             "not linear-Gaussian; drop --exact")
        st = build(s)
        trace = run(s, self.step(key, s, params))
        ok = ~trace.diverged.numpy()
        if key == "tdcd.lemma2":
            ratio = drift_ratio(trace)
            return Measurement(exact=float(ratio.max()), series=ratio.max(axis=0),
                               diverged=int((~ok).sum()))
        per_round = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=per_round.mean(axis=1), diverged=int((~ok).sum()),
                           series=per_round.mean(axis=0) if ok.any() else None,
                           atol=_roundoff(st))

    def random_scenario(self, key: str, rng: np.random.Generator) -> TDCDScenario:
        """A small random scenario: N in 1..3, feature splits, unequal K_j, batch, loss, Q,
        and eta anywhere up to the largest admissible step (c for Remark 5)."""
        N = int(rng.integers(1, 4))
        clients = [int(k) for k in rng.integers(1, 4, size=N)]
        C = math.lcm(*clients)
        n = int(rng.integers(20, 61))
        s = TDCDScenario(
            blocks=[int(b) for b in rng.integers(1, 4, size=N)], clients=clients, n=n,
            batch=C * int(rng.integers(1, min(3, n) + 1)),
            loss=str(rng.choice(LOSSES)), Q=int(rng.integers(1, 7)),
            rounds=int(rng.integers(10, 31)), distance=float(rng.uniform(0, 2)),
            replicas=int(rng.integers(16, 33)), seed=int(rng.integers(0, 2**16)),
        )
        frac = float(rng.uniform(0.05, 1.0))
        thm = bounds.get(key)
        name = thm.step
        largest = self.parameters(key, s, thm)[name]
        return s.replace(**{name: frac * largest})

    def plot(self, key: str, s: TDCDScenario, *, variant: str | None, exact: bool, ax):
        """Lemma 2: the drift of every round and replica against its bound. Otherwise: the
        running left side of (15) against the bound after r rounds (same step)."""
        thm = bounds.get(key, variant)
        params = self.parameters(key, s, thm)
        ax = ax or plt.subplots(figsize=(6, 4))[1]
        trace = run(s, self.step(key, s, params))
        if key == "tdcd.lemma2":
            rhs = thm.evaluate(**{**params, "G0": trace.g0.numpy().ravel()})
            ax.loglog(rhs, trace.drift.numpy().ravel(), ".", ms=3, label="rounds x replicas")
            lim = [rhs[rhs > 0].min(), rhs.max()]
            ax.loglog(lim, lim, "k--", lw=1, label="drift = bound")
            ax.set_xlabel(f"bound {key} [{thm.variant}]")
            ax.set_ylabel("drift (left side of (30))")
            ax.set_title("Lemma 2, pathwise")
        else:
            r = np.arange(1, s.rounds + 1)
            running = trace.running_lhs.numpy()[~trace.diverged.numpy()].mean(axis=0)
            ax.loglog(r, running, label="measured (Monte Carlo mean)")
            if key == "tdcd.remark5":   # its eta = c/(Q sqrt R) is fixed by the final R
                ax.loglog([s.rounds], [thm.evaluate(**params)], "D", label=f"bound {key}")
                params = {k: v for k, v in params.items() if k != "c"}
                params.update(Q=s.Q, eta=remark5_eta(s, self.parameters(key, s, thm)["c"]))
                thm = bounds.get("tdcd.theorem1")
            bound = thm.evaluate(**{**params, "R": r.astype(float)})
            ax.loglog(r, bound, "o-", ms=3, label=f"bound {thm.key} [{thm.variant}] at this eta")
            ax.set_xlabel("R (rounds)")
            ax.set_ylabel(r"$\frac{1}{R}\sum_{r<R}\|\nabla\mathcal{L}(\theta^{rQ})\|^2$")
            ax.set_title(f"{key}: bound vs measurement along R")
        ax.legend()
        return ax


def drift_ratio(trace: TDCDTrace) -> np.ndarray:
    """drift / G0 per replica and round, [R, rounds] (0 where G0 = 0: then no client moves)."""
    g0 = trace.g0.numpy()
    return np.where(g0 > 0, trace.drift.numpy() / np.where(g0 > 0, g0, 1.0), 0.0)


ADAPTER = TDCDAdapter()
register_adapter("tdcd", ADAPTER)

# ---------------------------------------------------------------------- Q sweeps and plots


def q_sweep(scenario: TDCDScenario | None = None, *, Qs=(1, 2, 5, 10), fixed: str = "etaQ",
            variant: str | None = None) -> list[dict]:
    """Bound and measurement of tdcd.theorem1 for each Q.

    ``fixed="etaQ"``: eta = a/Q with a = eta_max(Q) Q = 1/(8 max(L, L_max)) and the
    scenario's rounds R (the bound is then the same for every Q, T22). ``fixed="eta"``:
    eta = eta_max(max Qs) for every Q (admissible for all) and the same total iterations
    T = R max(Qs), i.e. T // Q rounds (the bound grows with Q, theory/tdcd.md 6.2 item 9).
    Returns one dict per Q with Q, eta, rounds, bound, measured (mean), ci, verdict."""
    if fixed not in ("etaQ", "eta"):
        raise ValueError(f"fixed={fixed!r} must be 'etaQ' or 'eta'")
    s = scenario or ADAPTER.defaults["tdcd.theorem1"]
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


def plot_against_q(scenario: TDCDScenario | None = None, *, Qs=(1, 2, 5, 10), fixed: str = "etaQ",
                   variant: str | None = None, ax=None):
    """Bound and measured (95% CI) left side of (15) against Q at fixed eta Q or fixed eta."""
    rows = q_sweep(scenario, Qs=Qs, fixed=fixed, variant=variant)
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    qs = [r["Q"] for r in rows]
    mean = np.array([r["measured"] for r in rows])
    lo, hi = (np.array(c) for c in zip(*(r["ci"] for r in rows), strict=True))
    ax.plot(qs, [r["bound"] for r in rows], "o-", label="bound (15)")
    ax.errorbar(qs, mean, yerr=[mean - lo, hi - mean], fmt="s-", capsize=3, label="measured (95% CI)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Q")
    ax.set_ylabel("average squared gradient norm")
    ax.set_title("TDCD against Q at fixed " + ("eta Q and R" if fixed == "etaQ" else "eta and T = QR"))
    ax.legend()
    return ax


def loss_vs_time(scenario: TDCDScenario | None = None, *, Qs=(1, 5, 20), t_comms=(10.0, 100.0),
                 eta: float | None = None, horizon_rounds: int | None = None) -> dict:
    """Mean training loss L(theta^{rQ}) against wall-clock time r t_Q, t_Q = 3 t_comm + Q t_comp
    (L290), for each t_comm and Q, with one step ``eta`` for every Q (the paper's practice;
    default eta_max(Q = 1), beyond (14) for Q > 1) and the same time horizon: Q = 1 gets
    ``horizon_rounds`` (default: the scenario's rounds). Returns {t_comm: {Q: (time, loss)}}."""
    s = scenario or ADAPTER.defaults["tdcd.theorem1"]
    st = build(s)
    m = st.model
    eta = eta if eta is not None else 1.0 / (8 * max(m.L, m.L_max))
    base = horizon_rounds or s.rounds
    out: dict = {}
    for t_comm in t_comms:
        horizon = base * btdcd.round_time(1, t_comm, s.t_comp)
        out[t_comm] = {}
        for Q in Qs:
            t_Q = btdcd.round_time(Q, t_comm, s.t_comp)
            rounds = max(1, math.ceil(horizon / t_Q))
            st = build(s)
            tr = run_tdcd(st.model, eta=eta, Q=Q, rounds=rounds, theta0=st.theta0,
                          replicas=s.replicas, generator=st.generator, t_comm=t_comm, t_comp=s.t_comp)
            out[t_comm][Q] = (tr.time.numpy(), tr.loss.numpy().mean(axis=0))
    return out


def plot_loss_vs_time(curves: dict, *, axes=None):
    """One panel per t_comm of :func:`loss_vs_time`'s curves."""
    if axes is None:
        axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False)[1][0]
    for ax, (t_comm, per_q) in zip(axes, curves.items(), strict=True):
        for Q, (time, loss) in per_q.items():
            ax.plot(time, loss, label=f"Q = {Q}")
        ax.set_xlabel("wall-clock time units")
        ax.set_ylabel("training loss")
        ax.set_title(f"t_comm = {t_comm:g}, t_comp = 1")
        ax.legend()
    return axes


# ---------------------------------------------------------------------- choosing Q and eta

#: multiples of eta_max(Q = 1) tried for every Q by the simulation (a grid search per Q, as
#: the paper does, L288), besides each Q's own admissible eta_max(Q)
ETA_MULTIPLES = (0.25, 0.5, 1.0, 2.0, 4.0)
DEFAULT_Q_GRID = (1, 2, 5, 10, 20)
SIM_REPLICAS = 8
SIM_ROUNDS_Q1 = 150


def _bound_choice(s: TDCDScenario, epsilon: float, t_comm: float, t_comp: float, Q_grid) -> dict:
    st = build(s)
    m = st.model
    sig = sigma(s, st, 1.0 / (8 * s.Q * max(m.L, m.L_max)))
    need = btdcd.rounds_needed(epsilon, L=m.L, L_max=m.L_max, sigma=sig, Delta=delta(st))
    table = [{"Q": Q, "eta": need["a"] / Q, "rounds": need["R"],
              "time": need["R"] * btdcd.round_time(Q, t_comm, t_comp)} for Q in Q_grid]
    best = min(table, key=lambda row: row["time"])
    return {"eta_Q": need["a"], "noise_floor": need["noise"], "table": table,
            "best": best}


def _first_time(running: np.ndarray, time: np.ndarray, epsilon: float) -> tuple[int, float] | None:
    """(rounds, time) at the first round whose running left side of (15) is <= epsilon."""
    hit = np.nonzero(running <= epsilon)[0]
    if hit.size == 0:
        return None
    return int(hit[0]) + 1, float(time[hit[0] + 1])


def _simulation_choice(s: TDCDScenario, epsilon: float, t_comm: float, t_comp: float,
                       Q_grid) -> dict:
    st = build(s)
    m = st.model
    a_max = 1.0 / (8 * max(m.L, m.L_max))
    horizon = SIM_ROUNDS_Q1 * btdcd.round_time(1, t_comm, t_comp)
    table = []
    for Q in Q_grid:
        etas = sorted({a_max / Q, *(a_max * f for f in ETA_MULTIPLES)})
        steps = torch.tensor(etas, dtype=torch.float64).repeat_interleave(SIM_REPLICAS)
        rounds = max(1, math.ceil(horizon / btdcd.round_time(Q, t_comm, t_comp)))
        st = build(s)
        tr = run_tdcd(st.model, eta=steps, Q=Q, rounds=rounds, theta0=st.theta0,
                      replicas=steps.numel(), generator=st.generator, t_comm=t_comm, t_comp=t_comp)
        running = tr.running_lhs.numpy().reshape(len(etas), SIM_REPLICAS, rounds)
        diverged = tr.diverged.numpy().reshape(len(etas), SIM_REPLICAS).any(axis=1)
        for i, eta in enumerate(etas):
            hit = None if diverged[i] else _first_time(running[i].mean(axis=0), tr.time.numpy(), epsilon)
            table.append({"Q": Q, "eta": eta, "admissible": eta <= a_max / Q * (1 + 1e-12),
                          "diverged": bool(diverged[i]), "rounds": hit and hit[0],
                          "time": hit and hit[1]})
    reached = [row for row in table if row["time"] is not None]
    best = min(reached, key=lambda row: (row["time"], row["Q"])) if reached else None
    admissible = [row for row in reached if row["admissible"]]
    return {"horizon": horizon, "replicas": SIM_REPLICAS, "table": table, "best": best,
            "best_admissible": min(admissible, key=lambda row: (row["time"], row["Q"]))
            if admissible else None}


def _agreement(bound: dict | None, sim: dict | None) -> str:
    if bound is None or sim is None:
        return "Only one method was run; nothing to compare."
    if sim["best"] is None:
        return (f"The bound prefers Q = {bound['best']['Q']}; the simulation did not reach epsilon "
                f"within its horizon of {sim['horizon']:g} time units for any (Q, eta) tried.")
    b, m = bound["best"], sim["best"]
    verdict = "agree" if b["Q"] == m["Q"] else "disagree"
    beyond = "" if m["admissible"] else " (a step beyond condition (14), where the theorem is silent)"
    return (f"Bound and simulation {verdict} on Q. The bound prefers Q = {b['Q']} "
            f"(eta = {b['eta']:.3g}, {b['time']:.4g} time units): it depends on eta and Q only "
            f"through eta*Q, so extra local steps only add computation time. The simulation "
            f"reaches epsilon fastest with Q = {m['Q']}, eta = {m['eta']:.3g}{beyond}, in "
            f"{m['time']:.4g} time units, {b['time'] / m['time']:.3g} times sooner than the "
            f"bound certifies.")


def choose_q_eta(*, epsilon: float, t_comm: float, t_comp: float,
                 scenario: TDCDScenario | None = None, method: str = "both",
                 Q_grid=None) -> dict:
    """Which Q and eta reach accuracy ``epsilon`` of the left side of (15),
    (1/R) sum_r ||grad L(theta^{rQ})||^2, fastest in wall-clock time under
    t_Q = 3 t_comm + Q t_comp (L290).

    ``method="bound"``: bounds.tdcd.rounds_needed at the best eta Q; R does not depend on Q,
    so the bound always prefers the smallest Q. ``"simulate"``: for each Q of ``Q_grid``,
    the TDCD simulator with SIM_REPLICAS replicas per step size, steps eta_max(Q) and
    ETA_MULTIPLES x eta_max(1) (larger steps than (14) allows included, flagged), over
    a time horizon of SIM_ROUNDS_Q1 rounds of Q = 1; the first round at which the replica
    mean of the running left side is <= epsilon. ``"both"`` runs the two and states whether
    they agree. Returns a JSON-able dict (see :func:`format_choose_q_eta`)."""
    if method not in ("both", "bound", "simulate"):
        raise ValueError(f"method={method!r} must be 'both', 'bound' or 'simulate'")
    epsilon = require_float("epsilon", epsilon, low=0, low_open=True)
    t_comm = require_float("t_comm", t_comm, low=0)
    t_comp = require_float("t_comp", t_comp, low=0)
    s = scenario or ADAPTER.defaults["tdcd.theorem1"]
    s.validate()
    Qs = DEFAULT_Q_GRID if Q_grid is None else Q_grid
    grid = tuple(require_int(f"Q_grid[{i}]", q) for i, q in enumerate(Qs))
    if not grid:
        raise ValueError("Q_grid is empty")
    bound = _bound_choice(s, epsilon, t_comm, t_comp, grid) if method != "simulate" else None
    sim = _simulation_choice(s, epsilon, t_comm, t_comp, grid) if method != "bound" else None
    return {"epsilon": epsilon, "t_comm": t_comm, "t_comp": t_comp, "method": method,
            "Q_grid": list(grid), "scenario": s.to_dict(), "bound": bound, "simulation": sim,
            "agreement": _agreement(bound, sim)}


def format_choose_q_eta(report: dict) -> str:
    """A plain-text rendering of :func:`choose_q_eta`'s report."""
    lines = [f"Fastest (Q, eta) to reach epsilon = {report['epsilon']:g} "
             f"(t_comm = {report['t_comm']:g}, t_comp = {report['t_comp']:g}; "
             "t_Q = 3 t_comm + Q t_comp)"]
    b = report["bound"]
    if b is not None:
        lines.append("")
        lines.append(f"From the bound (15): eta*Q = {b['eta_Q']:.4g} for every Q "
                     f"(noise floor {b['noise_floor']:.4g})")
        lines.append(f"  {'Q':>4} {'eta':>10} {'rounds':>8} {'time':>12}")
        for row in b["table"]:
            lines.append(f"  {row['Q']:>4} {row['eta']:>10.4g} {row['rounds']:>8} "
                         f"{row['time']:>12.6g}")
        lines.append(f"  best: Q = {b['best']['Q']}, eta = {b['best']['eta']:.4g}")
    m = report["simulation"]
    if m is not None:
        lines.append("")
        lines.append(f"From simulation ({m['replicas']} replicas per step, horizon "
                     f"{m['horizon']:g} time units; * = admissible under (14)):")
        lines.append(f"  {'Q':>4} {'eta':>10} {'rounds':>8} {'time':>12}")
        for row in m["table"]:
            t = "diverged" if row["diverged"] else ("-" if row["time"] is None else f"{row['time']:.6g}")
            r = "-" if row["rounds"] is None else str(row["rounds"])
            lines.append(f"  {row['Q']:>4} {row['eta']:>10.4g}{'*' if row['admissible'] else ' '}"
                         f"{r:>7} {t:>12}")
        best = m["best"]
        lines.append("  best: " + ("none reached epsilon" if best is None else
                                   f"Q = {best['Q']}, eta = {best['eta']:.4g}, time {best['time']:.6g}"))
    lines.append("")
    lines.append(report["agreement"])
    return "\n".join(lines)
