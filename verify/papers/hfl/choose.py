"""The sync time S of Algorithm 1 of Ali & Arafa 2025, chosen by every variant of the
bound and by simulation (the chooser of ``fedbound choose hfl``, alias
``choose-sync-time``).

:class:`SyncTime`: S for system time T under the paper's linear delay model (Section IV);
the bound side minimises the expected bound over delay paths (``bounds.choose_sync_time``);
the simulation runs Algorithm 1 on a quadratic with the given L, sigma and Delta, every
replica on its own delay path. Its figures: :func:`plot_sync_time`,
:func:`plot_loss_vs_wallclock`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    GRAD2,
    LOSS,
    TIME,
    BoundChoice,
    Chooser,
    Footprint,
    Option,
    adapter_for,
    comma_separated,
    half_width,
    label,
    register_chooser,
    require_float,
    require_int,
)


def synthetic_quadratic(L: float, sigma: float, Delta: float, dim: int = 10, seed: int = 0):
    """A quadratic with exactly L (largest eigenvalue), noise variance sigma^2 and
    f(x^1) - f* = Delta (x^1 on the top eigenvector): the simulation problem for choosing S."""
    import torch

    from fedbound.sim.problems import Quadratic

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


METRICS = ("final_loss", "lhs")
#: the delay paths ``bounds.choose_sync_time`` draws per S for the round statistics
BOUND_DRAWS = 2000


@register_chooser
class SyncTime(Chooser):
    """S for Algorithm 1 of Ali & Arafa 2025 (module docstring). ``metric``: "lhs" (the
    default: Theorem 2's left-hand side, the average over rounds of ||grad f(x^u)||^2, the
    quantity every variant of the bound bounds, so bound and simulation rank S by the same
    measure) or "final_loss" (f(x^{U+1}) - f*, which favours larger S: it sees only the noise
    floor at the end of the run). Both are measured and shown."""

    name = "sync-time"
    knobs = ("S",)
    key = "hfl.theorem2"
    aliases = ("choose-sync-time",)
    summary = "HFL: the sync time S from the expected bound of each variant and from simulation"
    example = ("fedbound choose hfl --sizes 15,15 --delays 0.01,0.85,0.001,0.085,4,2,0.4,0.2 "
               "--T 600 --alpha 0.05 --L 1 --G 10 --sigma 10 --Delta 10")

    @classmethod
    def add_arguments(cls, p) -> None:
        p.add_argument("--sizes", required=True, help="clients per group, e.g. 15,15")
        p.add_argument("--delays", required=True,
                       help="d,b,e,f,d_g,b_g,e_g,f_g of the paper's linear delay model")
        for name, help_ in (("T", "system time"), ("alpha", "step size"), ("L", "smoothness"),
                            ("G", "gradient bound"), ("sigma", "gradient noise"),
                            ("Delta", "initial gap f(x1) - f_inf")):
            p.add_argument(f"--{name}", type=float, required=True, help=help_)
        p.add_argument("--S", help="comma-separated sync times to compare (default: a grid)")
        p.add_argument("--metric", choices=METRICS, default="lhs",
                       help="what the simulation ranks S by: lhs, Theorem 2's left-hand side (the "
                            "mean of ||grad f(x^u)||^2 over rounds, what every variant bounds; "
                            "default), or final_loss, f(x^(U+1)) - f*")
        p.add_argument("--replicas", type=int, default=32,
                       help="simulated delay paths per S (default 32)")
        p.add_argument("--seed", type=int, default=0, help="seed of the simulation")

    @classmethod
    def from_arguments(cls, args, read_scenario) -> SyncTime:
        delays = [x.strip() for x in args.delays.split(",")]  # strings: decimals stay exact
        if len(delays) != 8:
            raise ValueError(f"--delays needs the 8 parameters d,b,e,f,d_g,b_g,e_g,f_g of the "
                             f"linear delay model, got {len(delays)}")
        return cls(sizes=comma_separated(args.sizes, "--sizes", int), delays=delays, T=args.T,
                   alpha=args.alpha, L=args.L, G=args.G, sigma=args.sigma, Delta=args.Delta,
                   S_grid=comma_separated(args.S, "--S"), replicas=args.replicas, seed=args.seed,
                   metric=args.metric)

    def __init__(self, *, sizes, delays, T, alpha, L, G, sigma, Delta, S_grid=None,
                 replicas: int = 32, seed: int = 0, metric: str = "lhs", times=()):
        from fedbound.bounds import delays as dl

        self.model = dl.DelayModel.linear(delays, sizes)
        self.sizes = list(dl.validate_sizes(sizes))
        self.delays = list(delays)
        self.T = require_float("T", T, low=0, low_open=True)
        self.alpha = require_float("alpha", alpha, low=0, low_open=True)
        self.L = require_float("L", L, low=0, low_open=True)
        self.G = require_float("G", G, low=0, low_open=True)
        self.sigma = require_float("sigma", sigma, low=0)
        self.Delta = require_float("Delta", Delta, low=0)
        self.grid = None if S_grid is None else [require_float(f"S[{i}]", v, low=0)
                                                 for i, v in enumerate(S_grid)]
        self.replicas = require_int("replicas", replicas, minimum=2)
        self.seed = require_int("seed", seed, minimum=0)
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r} must be one of {METRICS}")
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

    def _scenario(self, S: float, replicas: int):
        """The hfl.theorem2 scenario of simulating S with ``replicas`` delay paths: its
        footprint (``Adapter.footprint``) is the estimate of a run of the chooser."""
        from .adapters import HFLScenario

        return HFLScenario(sizes=self.sizes, delays=[float(d) for d in self.delays], S=S, T=self.T,
                           problem={"kind": "quadratic", "dim": 10, "L": self.L, "mu": self.L / 10,
                                    "sigma": self.sigma, "distance": 1.0},
                           mode="expected", replicas=replicas, seed=self.seed)

    def bound_footprints(self) -> dict[str, Footprint | None]:
        """Per S of the bound's grid: the delay paths of its round statistics
        (``BOUND_DRAWS`` paths over --T)."""
        from fedbound.bounds.tuning import default_sync_grid

        from .adapters import schedule_terms

        grid = default_sync_grid(self.model, self.T) if self.grid is None else self.grid
        return {f"the bound at S = {S:g} with --T {self.T:g}":
                Footprint.of(*schedule_terms(self._scenario(float(S), 2), BOUND_DRAWS)) for S in grid}

    def footprints(self, settings: list[dict[str, Any]]) -> dict[str, Footprint | None]:
        """Per S: --replicas delay paths over --T and the clients' updates along them."""
        ad = adapter_for(self.key)
        return {f"S = {row['S']:g} with --T {self.T:g}, --sizes and --replicas {self.replicas}":
                ad.footprint(self._scenario(float(row["S"]), self.replicas)) for row in settings}

    def candidates(self) -> list[dict[str, Any]]:
        """The S grid given, else 0 and 5 values spread geometrically over the lower half of
        the bound's default range (up to about 20 local iterations per round)."""
        from fedbound.bounds.tuning import default_sync_grid

        if self.grid is not None:
            return [{"S": S} for S in self.grid]
        top = float(np.max(default_sync_grid(self.model, self.T))) / 2
        return [{"S": S} for S in [0.0, *np.round(np.geomspace(max(top / 20, 0.5), top, 5), 3).tolist()]]

    def simulate(self, settings: list[dict[str, Any]]) -> list[Option]:
        """For each S: every replica on its own delay path, the final loss gap, Theorem 2's
        left-hand side, the mean loss gap at the wall-clock ``times``, and one replica's loss
        against wall-clock time."""
        import torch

        from fedbound.bounds import delays as dl
        from fedbound.sim.hfl import run_hfl

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
            extra = {"final_loss": float(gap.mean()), "final_loss_ci": half_width(gap),
                     "lhs": float(lhs.mean()), "lhs_ci": half_width(lhs),
                     "mean_U": float(sched.U.mean()), "loss_at_times": at.mean(axis=0).tolist(),
                     "wallclock": {"time": np.concatenate([[0.0], ends]).tolist(),
                                   "loss": (tr.loss.numpy()[0, : sched.U[0] + 1] - pr.f_inf).tolist()}}
            out.append(Option(dict(row), extra[self.measured], extra[self.measured + "_ci"], extra))
        return out




def plot_sync_time(report, ax=None):
    """Each variant's expected bound (left axis, log) and the simulated loss with its 95%
    interval (right axis) against S, from :func:`verify.api.choose` on a
    :class:`SyncTime` run with ``method="both"``."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6, 4))[1]
    for c in report.bound:
        ax.semilogy([p["S"] for p in c.curve], [p["bound"] for p in c.curve], "-",
                    label=f"E bound [{c.variant}] (chooses S = {c.settings['S']:g})")
    ax.set_xlabel(label("sync time S", TIME))
    ax.set_ylabel(label("expected bound over delay paths", GRAD2))
    right = ax.twinx()
    sim = report.simulation
    right.errorbar([o.settings["S"] for o in sim], [o.loss for o in sim], yerr=[o.ci for o in sim],
                   fmt="s--", color="k", capsize=3, label=f"simulated {report.metric}")
    right.set_yscale("log")
    right.set_ylabel(label(f"simulated {report.metric}",
                           {"lhs": GRAD2, "final_loss": LOSS}[report.inputs["metric"]]))
    best = report.best.settings["S"] if report.best else float("nan")
    ax.set_title(f"choosing S: best simulated S = {best:g}")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = right.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="best", fontsize=8)
    return ax


def plot_loss_vs_wallclock(report, ax=None):
    """Loss gap of one replica against wall-clock time (round ends) for every simulated S."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6, 4))[1]
    for o in report.simulation:
        curve = o.extra["wallclock"]
        ax.step(curve["time"], curve["loss"], where="post", label=f"S = {o.settings['S']:g}")
    ax.set_yscale("log")
    ax.set_xlabel(label("wall-clock time", TIME))
    ax.set_ylabel(label("f(x) - f* (one replica)", LOSS))
    ax.set_title("loss against wall-clock time")
    ax.legend()
    return ax
