"""Delay-sensitive HFL scenarios (Ali & Arafa, papers/hfl_delay_journal.txt): defaults,
parameter derivation, measurement, checks on a fixed delay path and in expectation, and the
choice of the sync time S from the bound and from simulation.

A scenario fixes the group sizes, the paper's 8 delay parameters {d, b, e, f, d_g, b_g,
e_g, f_g} (J312), S, T, alpha (null = 1/L, the largest admissible), the problem, the
replicas and the seed. ``mode="conditional"``: one delay path is drawn from the seed
(bounds.delays) and every replica runs on it, so the bound is evaluated on that schedule
(the theorems are conditional on t, J116). ``mode="expected"``: every replica draws its own
path; the bound's mean over the paths is compared with the mean left-hand side
(unconditional check, by the tower property; guide 6.3).

:func:`check` handles every case; ``verify.check.check`` works for the scalar ones
(Theorem 2 and Corollary 1, conditionally); the adapter's ``check_override`` is the hook
that lets ``verify.check.check`` handle the others.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch

import bounds
from bounds import delays as dl
from bounds import hfl as bhfl
from bounds.tuning import choose_sync_time, default_sync_grid
from sim.hfl import run_hfl
from sim.problems import LogisticRegression, Quadratic

from .check import Z95, Verdict, classify
from .check import check as check_scalar
from .scenario import (
    Measurement,
    ScenarioBase,
    jsonable,
    problem_spec,
    register_adapter,
    require_float,
    require_int,
    roundoff,
)

#: Fig. 7a of the paper (J361; A298): {d, b, e, f, d_g, b_g, e_g, f_g}
FIG7A = [0.01, 0.85, 0.001, 0.085, 4.0, 2.0, 0.4, 0.2]
MODES = ("conditional", "expected")
PROBLEM_KINDS = {
    "logistic": {"dim": 3, "n": 40, "R": 1.5, "batch": 1, "distance": 2.0},
    "quadratic": {"dim": 10, "L": 1.0, "mu": 0.1, "sigma": 1.0, "distance": 3.0},
}


def _logistic_default() -> dict[str, Any]:
    return {"kind": "logistic", **PROBLEM_KINDS["logistic"]}


@dataclass
class HFLScenario(ScenarioBase):
    """A run of Algorithm 1 (A139-A161) and the data the bounds need; JSON keys = fields.

    ``problem``: {"kind": "logistic", "dim", "n", "R", "batch", "distance" (= ||x^1||)}
    (G = R exactly: every bound applies) or {"kind": "quadratic", "dim", "L", "mu",
    "sigma", "distance" (= ||x^1 - x*||)} (no G: for simulation only)."""

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
        if not isinstance(self.delays, (list, tuple)):
            raise ValueError(f"delays={self.delays!r} must be the 8 parameters "
                             "{d, b, e, f, d_g, b_g, e_g, f_g}")
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
    """Problem and x^1 from the seed; the delay model from the 8 parameters (J312)."""
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
    drawn by bounds.delays from ``seed``."""
    count = 1 if s.mode == "conditional" else s.replicas
    return dl.sample_schedules(s.model(), s.S, s.T, count, np.random.default_rng(s.seed),
                               ramp=s.ramp)


def _G(pr, key: str) -> float:
    if pr.G is None:
        raise ValueError(f"{key} needs a.s.-bounded gradients (G): use problem.kind='logistic'")
    return pr.G


def _alpha(s: HFLScenario, L: float) -> float:
    return 1.0 / L if s.alpha is None else float(s.alpha)


def all_parameters(key: str, s: HFLScenario) -> dict[str, Any]:
    """Every parameter of ``key`` with ``t`` the scenario's path(s): [U, G] conditionally,
    zero-padded [R, U_max, G] in expected mode."""
    st = build(s)
    pr = st.problem
    sched = paths(s)
    t = sched.path(0) if s.mode == "conditional" else sched.t
    sizes = np.array(s.sizes)
    delta = pr.delta(st.x1)
    params: dict[str, Any] = {"G": _G(pr, key), "L": pr.L, "sizes": sizes, "t": t}
    if key != "hfl.lemma1":
        params.update(sigma=pr.sigma,
                      Delta=np.full(len(s.sizes), delta) if key == "hfl.theorem1" else delta)
    if key == "hfl.corollary1":
        if s.alpha is not None:
            raise ValueError(f"alpha={s.alpha}: hfl.corollary1 fixes alpha = min(1/sqrt(U), 1/L)")
        params["t_max"] = bhfl.schedule_params(key, st.model, s.S)["t_max"]
        if s.ramp:
            raise ValueError("ramp=true: Corollary 1 is stated for a fixed S")
    else:
        params["alpha"] = _alpha(s, pr.L)
    return params


def _scalar(key: str) -> bool:
    """Whether ``key`` evaluates to one number per schedule (Theorem 2, Corollary 1)."""
    return key in ("hfl.theorem2", "hfl.corollary1")


# ---------------------------------------------------------------------- measurement


def simulate(key: str, s: HFLScenario, params: dict[str, Any]):
    """Run the simulator on the scenario's path(s) with the bound's step; returns the trace."""
    st = build(s)
    t = params["t"]
    if key == "hfl.corollary1":
        alpha = 1.0 / max(math.sqrt(t.shape[-2]), st.problem.L)
    else:
        alpha = params["alpha"]
    return run_hfl(st.problem, sizes=s.sizes, alpha=alpha, x1=st.x1, replicas=s.replicas,
                   t=t, generator=torch.Generator().manual_seed(s.seed + 1))


def measured_cells(key: str, trace) -> np.ndarray:
    """Per replica the left-hand side of ``key``: [R] (Theorem 2, Corollary 1), [R, G]
    (Theorem 1), [R, U, G] (Lemma 1)."""
    if key == "hfl.lemma1":
        return trace.deviation.numpy()
    if key == "hfl.theorem1":
        return trace.group_lhs.numpy()
    return trace.lhs.numpy()


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad f||^2 at the scale of x_1."""
    return roundoff(st.problem.L, float(st.x1.norm()))


class HFLAdapter:
    scenario_type = HFLScenario
    defaults = {
        # alpha L ~ 0.06 on the default logistic problem (L ~ 0.056): a non-vacuous Theorem 2
        "hfl.lemma1": HFLScenario(alpha=1.0),
        # isolated groups (S = T, U = 1): the only case where (19) is informative (Remark 4)
        "hfl.theorem1": HFLScenario(sizes=[4, 6], S=20.0, T=20.0),
        "hfl.theorem2": HFLScenario(alpha=1.0),
        "hfl.corollary1": HFLScenario(),
    }

    def parameters(self, key: str, s: HFLScenario, thm) -> dict[str, Any]:
        """The theorem's parameters for ``verify.check.check`` (scalar cases only)."""
        if s.mode != "conditional":
            raise ValueError("mode='expected' compares mean bounds over delay paths: use "
                             "verify.hfl.check")
        if not _scalar(key):
            raise ValueError(f"{key} gives one bound per group (Theorem 1) or per round and "
                             "group (Lemma 1): use verify.hfl.check, which checks every cell")
        params = all_parameters(key, s)
        return {k: v for k, v in params.items() if k in thm.params}

    def measure(self, key: str, s: HFLScenario, params, exact: bool) -> Measurement:
        if exact:
            raise ValueError("hfl has no exact mode (the schedule is random); use Monte Carlo")
        trace = simulate(key, s, params)
        ok = ~trace.diverged.numpy()
        values = measured_cells(key, trace)[ok]
        series = trace.grad_sq_norm.numpy()[ok].mean(axis=0) if ok.any() else None
        return Measurement(values=values, diverged=int((~ok).sum()), series=series,
                           atol=_roundoff(build(s)))

    def random_scenario(self, key: str, rng: np.random.Generator) -> HFLScenario:
        """Small random scenario: 1-3 groups, Fig. 7a delays scaled by a random factor,
        logistic regression; S = T (isolated groups) for Theorem 1."""
        scale = float(rng.uniform(0.5, 2.0))
        delays = [round(v * scale, 6) for v in FIG7A]
        seed = int(rng.integers(0, 2**31 - 1))
        sizes = [int(n) for n in rng.integers(1, 9, size=int(rng.integers(1, 4)))]
        S, T = float(rng.uniform(0, 6)), float(rng.uniform(40, 150))
        if key == "hfl.theorem1":
            S = T = float(rng.uniform(2, 20))
        return HFLScenario(sizes=sizes, delays=delays, S=S, T=T, replicas=32, seed=seed)

    def plot(self, key: str, s: HFLScenario, *, variant: str | None = None, exact: bool = False,
             ax=None):
        """Theorem 2 / Corollary 1: the bound on each prefix of the path and the measured
        running average against the round; Lemma 1 / Theorem 1: bound and measured per cell."""
        thm = bounds.get(key, variant)
        params = all_parameters(key, s.replace(mode="conditional"))
        trace = simulate(key, s.replace(mode="conditional"), params)
        ax = ax or plt.subplots(figsize=(6, 4))[1]
        if key in ("hfl.theorem2", "hfl.corollary1"):
            t = params["t"]
            U = t.shape[0]
            prefixes = np.zeros((U, U, t.shape[1]), dtype=int)
            for u in range(U):
                prefixes[u, : u + 1] = t[: u + 1]
            args = {k: v for k, v in params.items() if k in thm.params and k != "t"}
            bound = thm.evaluate(**args, t=prefixes)
            running = np.cumsum(trace.grad_sq_norm.numpy().mean(0)) / np.arange(1, U + 1)
            ax.semilogy(np.arange(1, U + 1), running, label="measured (mean over replicas)")
            ax.semilogy(np.arange(1, U + 1), bound, "o-", ms=3, label=f"bound [{thm.variant}]")
            ax.set_xlabel("round u")
        else:
            bound = np.ravel(thm.evaluate(**{k: v for k, v in params.items() if k in thm.params}))
            meas = measured_cells(key, trace).mean(axis=0).ravel()
            cells = np.arange(bound.size)
            ax.bar(cells - 0.2, bound, 0.4, label=f"bound [{thm.variant}]")
            ax.bar(cells + 0.2, meas, 0.4, label="measured")
            ax.set_yscale("log")
            ax.set_xlabel("cell (round, group)" if key == "hfl.lemma1" else "group")
        ax.set_title(f"{key} on one delay path (S={s.S:g}, T={s.T:g})")
        ax.legend()
        return ax


    def check_override(self, key: str, scenario, *, variant: str | None = None,
                       exact: bool = False):
        """The hook ``verify.check.check`` needs: None where its generic path applies
        (Theorem 2 and Corollary 1 on a fixed delay path), else the Verdict of :func:`check`
        (one bound per cell, or the expected mode)."""
        if exact:
            raise ValueError("hfl has no exact mode (the schedule is random); use Monte Carlo")
        s = self.defaults[key] if scenario is None else scenario
        if s.mode == "conditional" and _scalar(key):
            return None
        return check(key, s, variant=variant)


ADAPTER = HFLAdapter()


# ---------------------------------------------------------------------- checks


def check(key: str, scenario: HFLScenario | None = None, *,
          variant: str | None = None) -> Verdict:
    """Check ``key`` on ``scenario`` in any mode: a scalar conditional case goes through
    ``verify.check.check``; a per-cell bound (Lemma 1 [U, G], Theorem 1 [G]) is checked in
    every cell and the cell with the least margin is reported; ``mode="expected"``
    compares the mean bound over the replicas' own delay paths with the mean left-hand
    side: holds when the 95% interval of the paired differences bound_r - lhs_r lies above
    0, violated when it lies below (the reported interval is the measured mean's own)."""
    s = ADAPTER.defaults[key] if scenario is None else scenario
    thm = bounds.get(key, variant)
    if s.mode == "conditional" and _scalar(key):
        return check_scalar(key, s, variant=variant)
    if s.mode == "expected" and key in ("hfl.lemma1", "hfl.corollary1"):
        raise ValueError(f"{key}: mode='expected' is not defined (Lemma 1 is per round; the "
                         "corollary's alpha depends on each path's U); use mode='conditional'")
    t0 = time.perf_counter()
    params = all_parameters(key, s)
    trace = simulate(key, s, params)
    ok = ~trace.diverged.numpy()
    bound = np.asarray(thm.evaluate(**{k: v for k, v in params.items() if k in thm.params}))
    meas = measured_cells(key, trace)[ok]
    mean = meas.mean(axis=0).ravel()
    half = Z95 * meas.std(axis=0, ddof=1).ravel() / math.sqrt(len(meas))
    if s.mode == "expected":
        diff = (bound[ok] - meas).reshape(len(meas), -1)
        B = bound[ok].mean(axis=0).ravel()
        paired = Z95 * diff.std(axis=0, ddof=1) / math.sqrt(len(diff))
        margin = diff.mean(axis=0) - paired
    else:
        B = np.broadcast_to(bound, meas.shape[1:]).ravel()
        margin = B - mean - half
    c = int(np.argmin(margin))
    ci = (float(mean[c] - half[c]), float(mean[c] + half[c]))
    mode = "monte-carlo"
    if not ok.all():
        verdict, mean = "diverged", np.full_like(mean, math.inf)
    elif s.mode == "expected":
        upper = margin[c] + 2 * paired[c]
        verdict = "holds" if margin[c] >= 0 else "violated" if upper < 0 else "inconclusive"
    else:
        verdict = classify(float(B[c]), float(mean[c]), ci, mode, _roundoff(build(s)))
    violations = _violations(thm, params)
    return Verdict(
        key=key, variant=thm.variant, bound=float(B[c]), measured_mean=float(mean[c]),
        measured_ci=ci, verdict=verdict,
        slack=float(B[c] / mean[c]) if mean[c] > 0 else math.inf,
        admissible=not violations, violations=violations,
        params=jsonable({**params, "worst_cell": c, "mode": s.mode}), scenario=s.to_dict(),
        mode=mode, replicas=int(ok.sum()), diverged=int((~ok).sum()),
        seconds=time.perf_counter() - t0)


def _violations(thm, params: dict[str, Any]) -> list[str]:
    """The theorem's failing conditions at the derived parameters (scalar ones only)."""
    if not thm.conditions:
        return []
    return [str(v) for v in thm.violations(alpha=params["alpha"], L=params["L"])]


def lemma1_pathwise(scenario: HFLScenario | None = None) -> dict[str, Any]:
    """Lemma 1 on every sample path (||g~|| <= G = R a.s. for logistic regression, guide 7.1
    item 4): the largest ratio deviation / (2 alpha^2 ((t_i^u)^2 + kappa) G^2) over
    replicas, rounds and groups; it must be <= 1 for every alpha."""
    s = HFLScenario(mode="expected") if scenario is None else scenario
    params = all_parameters("hfl.lemma1", s)
    trace = simulate("hfl.lemma1", s, params)
    bound = bounds.get("hfl.lemma1", "proof").evaluate(
        alpha=params["alpha"], G=params["G"], sizes=params["sizes"], t=trace.t.numpy())
    real = np.broadcast_to(trace.real.numpy()[..., None], bound.shape)
    ratio = trace.deviation.numpy()[real] / bound[real]
    return {"max_ratio": float(ratio.max()), "cells": int(ratio.size), "holds": bool(ratio.max() <= 1)}


# ---------------------------------------------------------------------- choosing S


def synthetic_quadratic(L: float, sigma: float, Delta: float, dim: int = 10, seed: int = 0):
    """A quadratic with exactly L (largest eigenvalue), noise variance sigma^2 and
    f(x^1) - f* = Delta (x^1 on the top eigenvector): the simulation problem for choosing S."""
    pr = Quadratic.random(dim, L, L / 10, sigma, torch.Generator().manual_seed(seed))
    top = pr.eigvecs[:, -1]
    return pr, pr.x_star + math.sqrt(2 * Delta / pr.L) * top


def loss_at_times(loss: np.ndarray, end_time: np.ndarray, U: np.ndarray,
                  times) -> np.ndarray:
    """Loss of the global model available at each wall-clock time, per replica [R, len(times)]:
    x^{u+1} once round u has ended (loss[:, 0] is x^1, before any round ends)."""
    out = np.empty((loss.shape[0], len(times)))
    for r in range(loss.shape[0]):
        ends = end_time[r, : U[r]]
        out[r] = loss[r, np.searchsorted(ends, np.asarray(times, dtype=float), side="right")]
    return out


def _half_width(v: np.ndarray) -> float:
    """Half-width of the 95% normal interval of the mean of ``v``."""
    return float(Z95 * v.std(ddof=1) / math.sqrt(v.size))


def simulate_sync_times(*, sizes, model: dl.DelayModel, T, alpha, L, sigma, Delta, S_grid,
                        replicas: int = 16, seed: int = 0, ramp: bool = False,
                        times=()) -> dict[str, Any]:
    """For each S: every replica on its own delay path (bounds.delays), the final loss gap
    f(x^{U+1}) - f*, the Theorem 2 left-hand side, their 95% half-widths, the mean loss gap
    at the wall-clock ``times`` (<= T), and one replica's loss against wall-clock time."""
    pr, x1 = synthetic_quadratic(L, sigma, Delta, seed=seed)
    out: dict[str, Any] = {"S": [], "final_loss": [], "final_loss_ci": [], "lhs": [],
                           "lhs_ci": [], "mean_U": [], "wallclock": [], "times": list(times),
                           "loss_at_times": []}
    for S in S_grid:
        sched = dl.sample_schedules(model, S, T, replicas, np.random.default_rng(seed),
                                    ramp=ramp)
        tr = run_hfl(pr, sizes=list(sizes), alpha=alpha, x1=x1, replicas=replicas, t=sched.t,
                     end_time=sched.end_time, generator=torch.Generator().manual_seed(seed + 1))
        ok = ~tr.diverged.numpy()
        gap = np.where(ok, tr.final_loss.numpy() - pr.f_inf, np.inf)
        lhs = np.where(ok, tr.lhs.numpy(), np.inf)
        out["S"].append(float(S))
        out["final_loss"].append(float(gap.mean()))
        out["final_loss_ci"].append(_half_width(gap) if ok.all() else math.inf)
        out["lhs"].append(float(lhs.mean()))
        out["lhs_ci"].append(_half_width(lhs) if ok.all() else math.inf)
        out["mean_U"].append(float(sched.U.mean()))
        at = loss_at_times(tr.loss.numpy() - pr.f_inf, tr.end_time.numpy(), sched.U, times)
        out["loss_at_times"].append(at.mean(axis=0).tolist())
        ends = tr.end_time.numpy()[0, : sched.U[0]]
        out["wallclock"].append({"time": np.concatenate([[0.0], ends]).tolist(),
                                 "loss": (tr.loss.numpy()[0, : sched.U[0] + 1] - pr.f_inf).tolist()})
    return out


def _agreement(bound_S: float, sim: dict[str, Any], metric: str) -> dict[str, Any]:
    vals, cis = np.array(sim[metric]), np.array(sim[metric + "_ci"])
    best = int(np.argmin(vals))
    sim_S = sim["S"][best]
    at_bound = int(np.argmin(np.abs(np.array(sim["S"]) - bound_S)))
    gap = vals[at_bound] - vals[best]
    within = gap <= cis[at_bound] + cis[best]
    if at_bound == best:
        verdict = "agree"
    elif within:
        verdict = "agree within noise"
    else:
        verdict = "disagree"
    return {"verdict": verdict, "bound_S": bound_S, "simulation_S": sim_S, "metric": metric,
            "measured_at_bound_S": float(vals[at_bound]), "measured_at_simulation_S":
            float(vals[best]), "excess": float(gap)}


def choose_sync_time_report(*, sizes, delays, T, alpha, L, G, sigma, Delta, variant=None,
                            method: str = "both", S_grid=None, seed: int = 0,
                            metric: str = "final_loss") -> dict[str, Any]:
    """Best S from the expected bound (bounds.tuning.choose_sync_time, plug-in) and/or from
    simulation (best measured ``metric``: "final_loss" = f(x^{U+1}) - f*, or "lhs" =
    Theorem 2's average squared gradient norm, on a synthetic quadratic with the given
    L, sigma, Delta), and whether they agree. JSON-able."""
    if method not in ("bound", "simulate", "both"):
        raise ValueError(f"method={method!r} must be 'bound', 'simulate' or 'both'")
    if metric not in ("final_loss", "lhs"):
        raise ValueError(f"metric={metric!r} must be 'final_loss' or 'lhs'")
    model = dl.DelayModel.linear(delays, sizes)
    T = require_float("T", T, low=0, low_open=True)
    alpha = require_float("alpha", alpha, low=0, low_open=True)
    report: dict[str, Any] = {"sizes": list(dl.validate_sizes(sizes)), "delays": list(delays),
                              "T": T, "alpha": alpha, "method": method}
    grid = None if S_grid is None else [require_float(f"S_grid[{i}]", v, low=0)
                                        for i, v in enumerate(S_grid)]
    if method in ("bound", "both"):
        choice = choose_sync_time("hfl.theorem2", model=model, T=T, variant=variant,
                                  S_grid=grid, alpha=alpha, L=L, G=G, sigma=sigma,
                                  Delta=Delta, sizes=list(sizes))
        report["bound"] = choice.as_dict()
    if method in ("simulate", "both"):
        sim_grid = grid if grid is not None else _simulation_grid(model, T)
        report["simulation"] = simulate_sync_times(
            sizes=sizes, model=model, T=T, alpha=alpha, L=L, sigma=sigma, Delta=Delta,
            S_grid=sim_grid, seed=seed)
        vals = report["simulation"][metric]
        report["simulation"]["best_S"] = report["simulation"]["S"][int(np.argmin(vals))]
    if method == "both":
        report["agreement"] = _agreement(report["bound"]["best_S"], report["simulation"], metric)
    return jsonable(report)


def _simulation_grid(model: dl.DelayModel, T: float) -> list[float]:
    """0 and 5 S values spread geometrically over the lower half of the bound's default
    range (up to about 20 local iterations per round; the cost grows with S)."""
    top = float(np.max(default_sync_grid(model, T))) / 2
    return [0.0, *np.round(np.geomspace(max(top / 20, 0.5), top, 5), 3).tolist()]


def format_choose_sync_time(report: dict[str, Any]) -> str:
    """Terminal rendering of :func:`choose_sync_time_report`."""
    lines = [f"sizes {report['sizes']}  delays {report['delays']}  T={report['T']:g}  "
             f"alpha={report['alpha']:g}"]
    if "bound" in report:
        b = report["bound"]
        lines.append(f"bound ({b['key']} [{b['variant']}], {b['estimate']} expectation): "
                     f"best S = {b['best_S']:g}, E bound = {b['best_bound']:.6g}, "
                     f"dominant term: {b['dominant_term']}")
        lines.append("   S      E[U]    E bound")
        lines += [f"{S:6.3g} {U:8.2f} {v:10.4g}" for S, U, v in
                  zip(b["S"], b["mean_U"], b["bound"], strict=True)]
    if "simulation" in report:
        sm = report["simulation"]
        lines.append(f"simulation (synthetic quadratic): best S = {sm['best_S']:g}")
        lines.append("   S      E[U]  final f-f*  (95%)      avg |grad|^2")
        lines += [f"{S:6.3g} {U:8.2f} {f:10.4g} +- {fc:8.2g} {g:12.4g}" for S, U, f, fc, g in
                  zip(sm["S"], sm["mean_U"], sm["final_loss"], sm["final_loss_ci"], sm["lhs"],
                      strict=True)]
    if "agreement" in report:
        a = report["agreement"]
        lines.append(f"verdict: {a['verdict']} (bound S = {a['bound_S']:g}, simulation S = "
                     f"{a['simulation_S']:g}; measured {a['metric']} "
                     f"{a['measured_at_bound_S']:.4g} vs {a['measured_at_simulation_S']:.4g})")
    return "\n".join(lines)


# ---------------------------------------------------------------------- plots


def plot_sync_time(report: dict[str, Any], ax=None):
    """Expected bound (left axis) and measured final loss gap with 95% intervals (right
    axis) against S, from a ``method="both"`` report."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    b, sm = report["bound"], report["simulation"]
    ax.semilogy(b["S"], b["bound"], "-", label=f"E bound [{b['variant']}]")
    ax.set_xlabel("sync time S")
    ax.set_ylabel("expected bound")
    right = ax.twinx()
    right.errorbar(sm["S"], sm["final_loss"], yerr=sm["final_loss_ci"], fmt="s--", color="C1",
                   capsize=3, label="measured f(x^{U+1}) - f*")
    right.set_yscale("log")
    right.set_ylabel("measured final loss gap")
    ax.set_title(f"choosing S: bound picks {b['best_S']:g}, simulation {sm['best_S']:g}")
    lines = ax.get_legend_handles_labels()
    lines2 = right.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="best")
    return ax


def plot_loss_vs_wallclock(report: dict[str, Any], ax=None):
    """Loss gap of one replica against wall-clock time (round ends) for every simulated S."""
    ax = ax or plt.subplots(figsize=(6, 4))[1]
    sm = report["simulation"]
    for S, curve in zip(sm["S"], sm["wallclock"], strict=True):
        ax.step(curve["time"], curve["loss"], where="post", label=f"S={S:g}")
    ax.set_yscale("log")
    ax.set_xlabel("wall-clock time")
    ax.set_ylabel("f(x) - f*")
    ax.set_title("loss against wall-clock time")
    ax.legend()
    return ax


register_adapter("hfl", ADAPTER)
