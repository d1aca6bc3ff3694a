"""The sync time S and the step alpha of Algorithm 1 of Ali & Arafa 2025, chosen jointly for
the user's problem (the chooser of ``fedbound choose hfl``, alias ``choose-sync-time``).

:class:`SyncTime` gives the three answers of ``verify.choose`` under the paper's linear delay
model (Section IV): *certified*, each valid variant of Theorem 2 minimised over (S, alpha)
in expectation over the delay paths (``bounds.choose_sync_time``) with the problem's
certified constants; *calibrated*, the minimiser of the exact second moments of Algorithm 1
on the problem's local quadratic model (``predict``); *simulated*, the paired search on the
problem itself. The problem is the synthetic quadratic built from (L, sigma, Delta) (the
default), a scenario's (``HFLScenario``), a model on a bundled data set split across the
clients (``--data --model --split``: ``sim.federated.federated_problem``), or any ``sim``
problem passed in. Its figures:
:func:`plot_answers`, :func:`plot_loss_vs_wallclock`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    DEVICE,
    GRAD2,
    GUARANTEE,
    LOOP_OVERHEAD,
    LOSS,
    MU,
    SMALLEST_STEP,
    TIME,
    ZETA,
    Chooser,
    DeadlineVariants,
    Evaluation,
    FieldError,
    Footprint,
    Input,
    Knob,
    NoCertificate,
    Proposal,
    block_seed,
    fitting_batches,
    label,
    predicted_over_steps,
    problem_inputs,
    register_chooser,
    require_mu,
    require_runs,
    settings_text,
)
from fedbound.verify.api import count_text as _n

#: the metrics the simulation ranks (S, alpha) by; the old name final_loss is loss
METRICS = ("loss", "lhs", "time")
METRIC_NAMES = {
    "loss": "loss at the deadline, f(x^(U+1)) - f_inf",
    "lhs": "Theorem 2's left-hand side, the mean of ||grad f(x^u)||^2 over the rounds",
    "time": "wall-clock time until f(x^u) - f_inf <= epsilon",
}
#: the default grid of steps: ALPHA_STEPS factors of 2 below the largest admissible
ALPHA_STEPS = 7
#: the default grid of S: 0 and S_STEPS values spread geometrically up to half the range of
#: ``bounds.hfl_sync.default_sync_grid`` (about 20 local iterations per round)
S_STEPS = 6
#: the calibrated prediction searches this many steps per factor of 2 of the step range
CALIBRATION_PER_OCTAVE = 4
DELAYS_HELP = (
    "the 8 parameters d,b,e,f,d_g,b_g,e_g,f_g of the paper's linear delay model (Ali & Arafa "
    "2025, Section IV), in the time unit of T and S: a local iteration of group i takes c_i + "
    "Exp(mean 1/lambda_i) with shift c_i = d |N_i| + b and mean 1/lambda_i = e |N_i| + f; a "
    "global aggregation takes c_g + Exp(mean 1/lambda_g) with c_g = d_g G + b_g and 1/lambda_g "
    "= e_g G + f_g (|N_i| the clients of group i, G the groups)")


def synthetic_quadratic(L: float, sigma: float, Delta: float, dim: int = 10, seed: int = 0):
    """A quadratic with exactly L (largest eigenvalue), noise variance sigma^2 and
    f(x^1) - f* = Delta (x^1 on the top eigenvector): the default problem."""
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


#: the variants of Theorem 2 that follow the paper's proof (tight: its sharper constants; not refined, iid)
PAPER_PROOF = ("printed", "arxiv", "proof", "tight")
#: the delay paths ``bounds.choose_sync_time`` draws per S for the round statistics
BOUND_DRAWS = 2000
#: fedbound's deadline bounds on E f(x^(U+1)) - f*, the loss at the deadline T (derived by
#: fedbound, not published; bounds/derivations/hfl_deadline.md), by the name of their
#: certified answers: given with --mu
DEADLINE = {"deadline_quadratic": "hfl.deadline_quadratic", "deadline_pl": "hfl.deadline_pl"}
#: the delay paths of a deadline bound's Monte-Carlo expectation (``bounds.hfl_deadline.expected``)
DEADLINE_PATHS = 32


@register_chooser
class SyncTime(DeadlineVariants, Chooser):
    """(S, alpha) for Algorithm 1 of Ali & Arafa 2025 (module docstring).

    The problem: ``problem`` and ``x1`` (any ``sim`` problem: its clients i.i.d. on it, or a
    problem holding clients, sum(sizes) of them, group after group), else the synthetic
    quadratic of (``L``, ``sigma``, ``Delta``). The certified constants (L, G, sigma, Delta
    of Theorem 2): those given, else the problem's own (L, G, sigma exact for logistic
    regression; Delta = f(x^1) - f_inf); a problem without them (a neural network) gets
    certified answers that say so (``verify.choose.NoCertificate``). ``source``: what the
    report's ``problem`` input says (default: the problem's type and dimension). ``S`` and
    ``alpha``: None (the default grid), a number (fixed) or a list (the grid). ``metric``:
    one of METRICS (``epsilon`` for "time"); ``replicas`` delay paths in the paired
    comparison; ``seed``."""

    deadline = DEADLINE
    name = "sync-time"
    key = "hfl.theorem2"
    aliases = ("choose-sync-time",)
    summary = "HFL: the sync time S and the step alpha, certified, calibrated and simulated"
    example = ("fedbound choose hfl --sizes 15,15 --delays 0.01,0.85,0.001,0.085,4,2,0.4,0.2 "
               "--T 600 --L 1 --G 10 --sigma 10 --Delta 10")
    #: the loss at a deadline is noisy (one delay path per replica): the paired stage may
    #: grow to 4 x replicas while a close configuration is unresolved (``Chooser.resolve``)
    resolve = 4
    common_numbers = True  # simulate: the same seeds for every configuration, paired or not
    replica_blocks = True  # simulate(..., block=b): block b of replicas, on seeds of its own
    bounded = "Theorem 2's left-hand side, the mean of ||grad f(x^u)||^2 over the rounds u <= U"
    calibration = ("the exact second moments of Algorithm 1 on the problem's local quadratic "
                   "model (sim.estimate.quadratic_model: the Hessian's spectrum, the start, the "
                   "groups' gradient offsets and the gradient noise at a reference minimiser), "
                   "rounds drawn from the delay model; a prediction, not a certificate")

    declared = (
        Input("sizes", int, "clients per group, e.g. 15,15 (default: the scenario's)", low=1,
              many=True),
        Input("delays", float, DELAYS_HELP + " (default: the scenario's)", low=0, many=True,
              length=8, exact=True, metavar="d,b,e,f,d_g,b_g,e_g,f_g"),
        Input("T", float, "system time, the deadline of training (default: the scenario's)",
              unit="time units", low=0, low_open=True),
        *(Input(name, float, what + " (the synthetic quadratic; with --data or --scenario, a "
                "certified constant you vouch for)", low=0, low_open=name in ("L", "G"))
          for name, what in (("L", "smoothness (the quadratic's largest eigenvalue)"),
                             ("G", "bound on E||g||^2, Assumption 3 (certified bounds only)"),
                             ("sigma", "gradient noise, E||g - grad f||^2 <= sigma^2"),
                             ("Delta", "initial gap f(x^1) - f_inf"))),
        MU,
        ZETA,
        Input("S", float, "sync time (default: 0 and 6 values up to about 20 local iterations "
                          "per round)", unit="time units", low=0, knob=True),
        Input("alpha", float, "step size (default: factors of 2 around the largest step the "
                              "problem's curvature admits, beyond any theorem's range until the "
                              "simulation diverges)", low=SMALLEST_STEP, knob=True),
        Input("metric", str, "what the simulation ranks by: loss (the loss gap at the deadline T, "
                             "f(x^(U+1)) - f_inf), lhs (Theorem 2's left-hand side) or time (to "
                             "reach f - f_inf <= --epsilon); final_loss is loss",
              default="loss", choices=(*METRICS, "final_loss")),
        Input("epsilon", float, "the target of --metric time", low=0, low_open=True),
        Input("replicas", int, "delay paths in the paired comparison", default=32, low=2),
        Input("seed", int, "seed of the problem (the synthetic quadratic, or the split and the "
                           "network's start of --data) and of the paths", default=0, low=0),
        DEVICE,
        problem_inputs(clients="--sizes, group after group"),
    )

    def __init__(self, *, scenario=None, sizes=None, delays=None, T=None, L=None, G=None,
                 sigma=None, Delta=None, problem=None, x1=None, named=None, S=None, alpha=None,
                 metric=None, epsilon=None, replicas=None, seed=None, source=None, device=None,
                 mu=None, zeta=None):
        from fedbound.bounds import delays as dl

        v = self.value
        self.device = self.device_of(device)
        self.replicas = v("replicas", replicas)
        self.seed = v("seed", seed)
        sizes, delays, T = v("sizes", sizes), v("delays", delays), v("T", T)
        if scenario is not None:
            scenario.validate()
            sizes, delays, T = sizes or scenario.sizes, delays or scenario.delays, T or scenario.T
        missing = [self.named(n) for n, x in (("sizes", sizes), ("delays", delays), ("T", T))
                   if x is None]
        given = {k: v(k, x) for k, x in (("L", L), ("G", G), ("sigma", sigma), ("Delta", Delta))
                 if x is not None}
        if problem is None and named is None and scenario is None:
            missing += [self.named(k) for k in ("L", "sigma", "Delta") if k not in given]
        if missing:
            raise FieldError(f"{', '.join(missing)}: required without {self.named('scenario')}"
                             + ("" if problem is not None or named is not None else
                                f" or {self.named('data')}"))
        try:
            self.model = dl.DelayModel.linear(delays, sizes)
        except ValueError as e:
            raise self.renamed("delays", e) from None
        self.sizes, self.delays, self.T = list(dl.validate_sizes(sizes)), list(delays), T
        metric = v("metric", metric)
        self.measured = {"final_loss": "loss"}.get(metric, metric)
        self.epsilon = v("epsilon", epsilon)
        if self.measured == "time" and self.epsilon is None:
            raise FieldError(f"{self.named('metric')}=time needs {self.named('epsilon')}, the "
                             "target of f - f_inf")
        if named is not None:
            fed = named.build(self.sizes, self.seed, "choose hfl", groups=self.named("sizes"))
            problem, x1, source = fed.problem, fed.x1, named.as_dict(self.seed)
        elif problem is None and scenario is not None:
            from .adapters import build

            st = build(scenario)
            problem, x1 = st.problem, st.x1
            source = source or f"scenario's {scenario.problem['kind']}"
        if problem is None:
            problem, x1 = synthetic_quadratic(given["L"], given["sigma"], given["Delta"], seed=self.seed)
            self.source = (f"synthetic quadratic (dim {problem.dim}, L = {given['L']:g}, "
                           f"sigma = {given['sigma']:g}, Delta = {given['Delta']:g})")
        else:
            if x1 is None:
                raise ValueError("x1: the start of the problem passed in is needed")
            self.source = source or f"{type(problem).__name__} (dim {problem.dim}) passed in"
        if self.device != problem.device:
            problem, x1 = problem.to(self.device), x1.to(self.device)
        self.problem, self.x1 = problem, x1
        self._batch_name = self.named("batch") if named is not None else "batch"
        self.subsample = None if named is None else named.subsample
        self.constants = self._certified_constants(given)
        self.mu = require_mu(v("mu", mu), self.constants.get("L"), self.named("mu"))
        self.zeta = v("zeta", zeta)
        if self.mu is not None:
            self.bounded = (f"{self.bounded} for the paper's variants, and on the expected loss "
                            "at the deadline, E f(x^(U+1)) - f_inf, for the deadline variants")
        self.S_given, self.alpha_given = v("S", S), v("alpha", alpha)

    @property
    def metric(self) -> str:
        return METRIC_NAMES[self.measured]

    def _certified_constants(self, given: dict[str, float]) -> dict[str, float]:
        """L, G, sigma, Delta of Theorem 2: those given, else the problem's own; a constant
        neither gives is missing (the certified answers then say so)."""
        pr = self.problem
        own = {"L": getattr(pr, "L", None), "G": getattr(pr, "G", None),
               "sigma": getattr(pr, "sigma", None), "Delta": pr.delta(self.x1)}
        out = {k: given.get(k, own[k]) for k in ("L", "G", "sigma", "Delta")}
        return {k: float(v) for k, v in out.items() if v is not None}

    def inputs(self) -> dict[str, Any]:
        deadline = {k: x for k, x in (("mu", self.mu), ("zeta", self.zeta)) if x is not None}
        return {"sizes": self.sizes, "delays": self.delays, "T": self.T, "problem": self.source,
                "constants": {**self.constants, **deadline}, "metric": self.measured,
                "epsilon": self.epsilon,
                "replicas": self.replicas, "seed": self.seed, "device": str(self.device)}

    # ------------------------------------------------------------------ knobs

    def alpha_max(self) -> float:
        """The largest step any valid variant admits (Theorem 2: alpha <= 1/L), with L the
        certified constant, else the largest curvature at x^1 (:meth:`curvature`)."""
        return 1.0 / (self.constants["L"] if "L" in self.constants else self.curvature())

    def trusted_steps(self) -> dict[str, Any]:
        """The steps the calibrated prediction compares: up to 2 / L with a certified L
        (beyond, the model, exact or bounded by L, diverges itself); else up to 1 / the
        curvature at x^1, the model being local (taken at x_ref, where the curvature is lower)
        and blind to the early iterations' instability, and a pick there flagged."""
        if "L" in self.constants:
            return {"upper": 2.0 / self.constants["L"]}
        return {"upper": 1.0 / self.curvature(),
                "upper_note": "1 / the curvature at x^1, beyond which the local model (taken at "
                              "x_ref) is not trusted; the simulated search goes further"}

    def curvature(self) -> float:
        """The largest curvature of the problem at x^1 (``sim.estimate.top_curvature``),
        estimated once: the calibrated model's reference run starts from it too."""
        if not hasattr(self, "_curvature"):
            import torch

            from fedbound.sim.estimate import top_curvature

            self._curvature = top_curvature(self.problem, self.x1,
                                            torch.Generator().manual_seed(self.seed),
                                            subsample=self.subsample)
        return self._curvature

    def S_default(self) -> list[float]:
        """0 and S_STEPS values spread geometrically up to half the range of
        ``bounds.hfl_sync.default_sync_grid``."""
        from fedbound.bounds.hfl_sync import default_sync_grid

        top = float(np.max(default_sync_grid(self.model, self.T))) / 2
        return [0.0, *np.round(np.geomspace(max(top / 20, 0.5), top, S_STEPS), 3).tolist()]

    def bound_footprints(self) -> dict[str, Footprint | None]:
        """Per S of the grid: the delay paths of the bound's round statistics (``BOUND_DRAWS``
        paths over --T) and of the calibrated prediction (--replicas paths), from the sizes
        alone (``adapters.schedule_terms``)."""
        from .adapters import HFLScenario, schedule_terms

        paths = max(BOUND_DRAWS, self.replicas)
        delays = [float(d) for d in self.delays]
        return {f"the bound and the prediction at S = {S:g} with --T {self.T:g} and --replicas "
                f"{self.replicas}": Footprint.of(*schedule_terms(
                    HFLScenario(sizes=self.sizes, delays=delays, S=float(S), T=self.T), paths))
                for S in self.S_given or self.S_default()}

    def knobs(self) -> list[Knob]:
        """S: the grid given, else :meth:`S_default`; alpha: the grid given, else ALPHA_STEPS
        factors of 2 down from twice :meth:`alpha_max` (beyond Theorem 2's range); a default
        grid extends where the search's pick sits at its edge (``verify.choose.Knob``)."""
        alphas = self.alpha_given or [2 * self.alpha_max() * 2.0**-k for k in range(ALPHA_STEPS)]
        return [Knob("S", tuple(self.S_given or self.S_default()), "linear", option=self.named("S"),
                     lower=0.0, upper=self.T, extend=self.S_given is None),
                Knob("alpha", tuple(alphas), "log", option=self.named("alpha"), lower=SMALLEST_STEP,
                     extend=self.alpha_given is None)]

    def canonical(self, settings: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """S at most every group's shift c_i runs one local iteration per round, the schedule of
        S = 0 (Ali & Arafa 2025, Section IV: a local iteration takes c_i + Exp(mean
        1/lambda_i), at least one per round): those S run as S = 0."""
        shift = min(float(law.shift) for law in self.model.local)
        if 0 < settings["S"] <= shift:
            return {**settings, "S": 0.0}, (f"every c_i is at least {shift:.4g}: one local iteration "
                                            "per round, the schedule of S = 0")
        return settings, ""

    def monotone_reason(self, variant: str, knob: str) -> str:
        if knob == "S" and variant in PAPER_PROOF:
            return ("its proof bounds the drift of a round's local iterations without the "
                    "variance reduction of averaging their gradients, so the bound grows with the "
                    "local iterations per round (Ali & Arafa 2025, proof of Theorem 2)")
        return ""

    # ------------------------------------------------------------------ the answers

    def certified(self, variant: str) -> Proposal:
        """The variant's expected bound (over delay paths) minimised over the S grid and, unless
        alpha is fixed, alpha in (0, 1/L] jointly (``bounds.choose_sync_time``). None
        (``NoCertificate``) for a constant the problem has no certified value of, or for the
        ``iid`` variant on a problem whose clients hold their own data. A deadline variant:
        :meth:`certified_deadline`."""
        if variant in DEADLINE:
            return self.certified_deadline(variant)
        if variant == "iid" and hasattr(self.problem, "M"):
            raise NoCertificate("the iid variant assumes every client samples the same data (Ali "
                                "& Arafa 2025, Section II); this problem's clients hold their own")
        missing = [k for k in ("L", "G", "sigma", "Delta") if k not in self.constants]
        if missing:
            raise NoCertificate(f"no certified {', '.join(missing)} for this problem (give "
                                "them: --L, --G, --sigma, --Delta)")
        S_knob, alpha_knob = self.knobs()
        fixed = {"alpha": alpha_knob.values[0]} if alpha_knob.fixed else {"joint_alpha": True}
        try:
            c = bounds.choose_sync_time(self.key, model=self.model, T=self.T, variant=variant,
                                        S_grid=list(S_knob.values), sizes=self.sizes, **fixed,
                                        **self.constants)
        except ValueError as e:  # a fixed step the variant does not admit, a bound not finite
            raise NoCertificate(f"the {variant} variant gives no bound here: {e}") from None
        curve = [{"S": S, "alpha": a, "bound": b, "mean_U": U}
                 for S, a, b, U in zip(c.S, c.alpha, c.bound, c.mean_U, strict=True)]
        return Proposal({"S": c.best_S, "alpha": c.best_alpha}, c.best_bound, curve,
                        f"dominant term: {c.dominant_term}")

    def certified_deadline(self, variant: str) -> Proposal:
        """The (S, alpha) minimising the deadline bound ``DEADLINE[variant]``, a bound on
        E f(x^(U+1)) - f* at the deadline T in expectation over the delay paths (Monte Carlo over
        DEADLINE_PATHS paths; ``bounds.choose_deadline_sync_time``), over the S grid and, unless
        alpha is fixed, jointly over the steps below 1/L; its value at the pick is a guarantee
        on the expected loss at T. Constants: L, sigma, Delta and --mu; --zeta for
        ``deadline_pl`` (0 for clients i.i.d. on one problem); ``deadline_quadratic`` holds on
        a quadratic (``sim.problems.Quadratic``) with clients i.i.d. on it, its start's
        ||grad f(x^1)||^2 exact (G1, the problem's own like Delta)."""
        key = DEADLINE[variant]
        if self.mu is None:
            raise NoCertificate(f"the {variant} variant needs the PL constant: give "
                                f"{self.named('mu')}")
        missing = [k for k in ("L", "sigma", "Delta") if k not in self.constants]
        if missing:
            raise NoCertificate(f"no certified {', '.join(missing)} for this problem (give "
                                f"them: {', '.join(self.named(k) for k in missing)})")
        own_data = hasattr(self.problem, "M")
        if variant == "deadline_quadratic":
            from fedbound.sim.problems import Quadratic

            if not isinstance(self.problem, Quadratic) or own_data:
                raise NoCertificate("the deadline_quadratic variant holds on quadratics with "
                                    "spectrum in [mu, L]; this problem is a "
                                    f"{type(self.problem).__name__} (deadline_pl holds under mu-PL)")
            extra = {"G1": float(self.problem.grad(self.x1).square().sum())}
        else:
            if self.zeta is None and own_data:
                raise NoCertificate(f"the {variant} variant needs the clients' heterogeneity on a "
                                    f"problem whose clients hold their own data: give "
                                    f"{self.named('zeta')}")
            extra = {"zeta": self.zeta or 0.0}
        S_knob, alpha_knob = self.knobs()
        step = {"alpha": alpha_knob.values[0]} if alpha_knob.fixed else {"joint_alpha": True}
        c = self.constants
        try:
            pick = bounds.choose_deadline_sync_time(
                key, model=self.model, T=self.T, S_grid=list(S_knob.values), paths=DEADLINE_PATHS,
                seed=self.seed, L=c["L"], mu=self.mu, sigma=c["sigma"], Delta=c["Delta"],
                sizes=self.sizes, **step, **extra)
        except ValueError as e:  # a fixed step the bound does not admit, a bound not finite
            raise NoCertificate(f"the {variant} variant gives no bound here: {e}") from None
        curve = [{"S": S, "alpha": a, "bound": b, "mean_U": U}
                 for S, a, b, U in zip(pick.S, pick.alpha, pick.bound, pick.mean_U, strict=True)]
        return Proposal({"S": pick.best_S, "alpha": pick.best_alpha}, pick.best_bound, curve,
                        f"{GUARANTEE}: E f(x^(U+1)) - f_inf <= {pick.best_bound:.4g} at T = "
                        f"{self.T:g} ({key}, derived by fedbound); dominant term: "
                        f"{pick.dominant_term}")

    def quadratic_model(self):
        """The problem's local quadratic model (``sim.estimate.quadratic_model``), cached."""
        if not hasattr(self, "_model"):
            import torch

            from fedbound.sim.estimate import quadratic_model

            self._model = quadratic_model(self.problem, self.x1,
                                          torch.Generator().manual_seed(self.seed), sizes=self.sizes,
                                          subsample=self.subsample, curvature=self.curvature())
        return self._model

    def schedules(self, S: float, replicas: int, block: int = 0):
        """The delay paths of S: the same for every step and every call (seeded; ``block`` > 0:
        those of that block of replicas, ``Chooser.replica_blocks``)."""
        from fedbound.bounds import delays as dl

        seed = block_seed(self.seed, block) if block else self.seed
        return dl.sample_schedules(self.model, S, self.T, replicas, np.random.default_rng(seed))

    def calibration_grid(self) -> tuple[list[float], list[float]]:
        """The S and alpha the prediction compares: the knobs' values, and between the values
        of a default grid, CALIBRATION_PER_OCTAVE steps per factor of 2 and the midpoints of S."""
        S_knob, alpha_knob = self.knobs()
        S = list(S_knob.values)
        if self.S_given is None:
            S = sorted({*S, *(0.5 * (a + b) for a, b in zip(S[:-1], S[1:], strict=True))})
        alphas = list(alpha_knob.values)
        if self.alpha_given is None:  # lo 2^(j/4): the knob's own values at whole octaves
            lo, hi = min(alphas), max(alphas)
            n = CALIBRATION_PER_OCTAVE * round(math.log2(hi / lo)) + 1
            alphas = [lo * 2.0 ** (j / CALIBRATION_PER_OCTAVE) for j in range(n)]
        return S, alphas

    def calibrated(self) -> Proposal:
        """The minimiser of the predicted metric over :meth:`calibration_grid` (``predict``),
        on the delay paths the paired simulation runs; a default step grid extends while the
        minimiser sits at its edge, until the prediction diverges
        (``verify.api.predicted_over_steps``), up to the steps it is trusted on
        (:meth:`trusted_steps`)."""
        from . import predict

        qm = self.quadratic_model()
        S_grid, alphas = self.calibration_grid()
        eps = None if self.epsilon is None else self.epsilon - (qm.f_ref - self.problem.f_inf)
        paths = [self.schedules(S, self.replicas) for S in S_grid]

        def predicted(steps: list[float]) -> np.ndarray:
            out = []
            for sched in paths:
                rows = predict.count_rows(sched.t, sched.U)
                gaps, grads = predict.curves(qm, self.sizes, steps, rows, int(sched.U.max()))
                out.append(predict.metric_values(gaps, grads, sched.U, sched.end_time, self.measured, eps))
            shift = qm.f_ref - self.problem.f_inf if self.measured == "loss" else 0.0
            return np.asarray(out) + shift

        alphas, values, edge = predicted_over_steps(
            predicted, alphas, extend=self.alpha_given is None, per_octave=CALIBRATION_PER_OCTAVE,
            lower=SMALLEST_STEP, name="alpha", **self.trusted_steps())
        curve = [{"S": S, "alpha": a, "predicted": float(values[i, j])}
                 for i, S in enumerate(S_grid) for j, a in enumerate(alphas)]
        best = min(curve, key=lambda row: (row["predicted"], row["S"]))
        return Proposal({"S": best["S"], "alpha": best["alpha"]}, best["predicted"], curve,
                        f"model: {qm.method}", edge=tuple(edge))

    # ------------------------------------------------------------------ simulation

    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool, block: int = 0) -> list[Evaluation]:
        """Every configuration in one batched run of Algorithm 1 (``sim.hfl.run_hfl`` with a
        schedule and a step per configuration), on common random numbers, ``paired`` or not:
        replica r of every configuration runs on the r-th delay path of its S (the same paths
        for every step and every call) and takes the same gradient draws (the generator
        seeded ``seed + 1``, ``sim.problems.CommonDraws``; ``block`` > 0: the paths and draws
        of that block of replicas, seeded ``block_seed``). Cut into batches that fit the
        memory and step limits (:meth:`batch_footprint`, ``verify.limits.fitting_batches``),
        each on the same seeds: a configuration's numbers do not depend on its batch."""
        import torch

        from fedbound.sim.hfl import run_hfl

        paths = {S: self.schedules(S, replicas, block)
                 for S in dict.fromkeys(row["S"] for row in settings)}
        draws = block_seed(self.seed + 1, block) if block else self.seed + 1
        out: list[Evaluation] = []
        for group in fitting_batches([self.batch_footprint([row], replicas, paths)
                                      for row in settings]):
            rows = [settings[i] for i in group]
            require_runs("choose hfl", {f"{len(rows)} configuration(s) simulated in one batch":
                                        self.batch_footprint(rows, replicas, paths)})
            U = max(paths[row["S"]].t.shape[1] for row in rows)
            t = np.stack([_padded(paths[row["S"]].t, U) for row in rows])
            ends = np.stack([_padded(paths[row["S"]].end_time, U) for row in rows])
            traces = run_hfl(self.problem, sizes=self.sizes, x1=self.x1, replicas=replicas,
                             alpha=torch.tensor([[float(row["alpha"])] for row in rows],
                                                dtype=torch.float64),
                             t=torch.as_tensor(t), end_time=torch.as_tensor(ends),
                             generator=torch.Generator().manual_seed(draws),
                             record_grad=self.measured == "lhs",
                             record_loss=self.measured != "loss")  # "loss": f at the end only
            for row, tr in zip(rows, traces, strict=True):
                out.append(Evaluation(dict(row), self._values(tr, paths[row["S"]]),
                                      {"mean_U": float(paths[row["S"]].U.mean())}))
        return out

    def _values(self, tr, sched) -> np.ndarray:
        """The metric per replica (inf for a diverged replica, or one never at epsilon)."""
        ok = ~tr.diverged.numpy()
        if self.measured == "loss":
            v = tr.final_loss.numpy() - self.problem.f_inf
        elif self.measured == "lhs":
            v = tr.lhs.numpy()
        else:
            v = self._hitting_times(tr)
        return np.where(ok, v, math.inf)

    def _hitting_times(self, tr) -> np.ndarray:
        """The end of the first round after which f - f_inf <= epsilon, per replica."""
        gap = tr.loss.numpy()[:, 1:] - self.problem.f_inf                     # after round u
        real = tr.t.numpy()[..., 0] > 0
        hit = (gap <= self.epsilon) & real
        first = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
        ends = tr.end_time.numpy()
        return np.where(first >= 0, ends[np.arange(len(first)), np.clip(first, 0, None)], math.inf)

    def footprint(self, settings: dict[str, Any], replicas: int) -> Footprint:
        """The run of one (S, alpha) on ``replicas`` replicas: rounds x local iterations x
        replicas x clients x the problem's dimension (x its batch, for data problems), and
        the mask of the local iterations (``sim.hfl``'s timeline, 1 B per step, replica and
        group)."""
        from fedbound.bounds import delays as dl

        S = float(settings["S"])
        try:
            rounds = dl.rounds_envelope(self.model, S, self.T)
        except ValueError:
            laws = (*self.model.local, self.model.global_)
            rounds = 2 * self.T / max(float(law.expectation) for law in laws)
        per_round = max(1.0, S / min(float(law.expectation) for law in self.model.local) + 1)
        return self._footprint(replicas, rounds * per_round)

    def _footprint(self, replicas: int, steps: float, configurations: int = 1) -> Footprint:
        """``configurations`` runs in one batch for ``steps`` local iterations."""
        d, n, G = self.problem.dim, max(self.sizes) * len(self.sizes), len(self.sizes)
        batch = getattr(self.problem, "batch", 1) or 1
        C = configurations
        clients = ((f"configurations={C} x " if C > 1 else "")
                   + f"{self.named('replicas')}={_n(replicas)} x clients={_n(n)} (of "
                   f"{self.named('sizes')}) x dim={_n(d)} x {self._batch_name}={_n(batch)}")
        return Footprint.of(
            {f"{clients} x 4 buffers of 8 B": 32.0 * C * replicas * n * d * batch,
             f"steps={_n(steps)} x configurations={C} x replicas={_n(replicas)} x groups={G} "
             "x 5 B (the mask of the local iterations, made from int32 counts)":
             5.0 * steps * C * replicas * G},
            {f"steps={_n(steps)} x {clients}":
             steps * (10.0 * C * replicas * n * d * batch + LOOP_OVERHEAD)})

    def batch_footprint(self, settings: list[dict[str, Any]], replicas: int,
                        paths: dict[float, Any]) -> Footprint:
        """The batched run of ``settings`` (:meth:`simulate`) on their delay ``paths`` (by S):
        as many local iterations as the longest configuration's paths take."""
        steps = max(float(paths[row["S"]].t.max(axis=(0, 2)).sum()) for row in settings)
        return self._footprint(replicas, steps, len(settings))


def _padded(values: np.ndarray, rounds: int) -> np.ndarray:
    """Per-replica rounds [R, U, ...] padded with zeros to ``rounds`` rounds."""
    pad = [(0, 0), (0, rounds - values.shape[1])] + [(0, 0)] * (values.ndim - 2)
    return np.pad(values, pad)


def plot_answers(report, ax=None):
    """The calibrated prediction against S at the calibrated alpha (line), each certified
    answer's and the simulated answer's (S, alpha) with its simulated metric and 95% interval,
    from :func:`verify.api.choose` with ``curves``: where each answer falls."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(6, 4), layout="constrained")[1]
    cal = report.calibrated
    if cal is not None and cal.curve:
        a = cal.settings["alpha"]
        pts = [p for p in cal.curve if p["alpha"] == a]
        ax.plot([p["S"] for p in pts], [p["predicted"] for p in pts], "-", color="C0",
                label=f"calibrated prediction at alpha = {a:.3g}")
    for k, ans in enumerate(report.answers):
        if ans.value is None:
            continue
        who = ans.variant or ans.kind
        ax.errorbar([ans.settings["S"]], [ans.value], yerr=[ans.ci if math.isfinite(ans.ci) else 0],
                    fmt="os^"[min(k, 2)] if ans.kind != "certified" else "x", capsize=3,
                    label=f"{who}: {settings_text(ans.settings)}")
    ax.set_yscale("log")
    ax.set_xlabel(label("sync time S", TIME))
    unit = {"loss": LOSS, "lhs": GRAD2, "time": TIME}[report.inputs["metric"]]
    ax.set_ylabel(label(report.metric, unit))
    ax.set_title("where each answer falls")
    ax.legend(loc="best", fontsize=7)
    return ax


def plot_loss_vs_wallclock(chooser: SyncTime, settings: list[dict[str, Any]], ax=None):
    """Mean f(x) - f_inf over the chooser's delay paths against wall-clock time, for each of
    ``settings`` ({"S", "alpha"}): the model available at each time."""
    import matplotlib.pyplot as plt
    import torch

    from fedbound.sim.hfl import run_hfl

    ax = ax or plt.subplots(figsize=(6, 4), layout="constrained")[1]
    times = np.linspace(0, chooser.T, 200)
    for row in settings:
        sched = chooser.schedules(row["S"], chooser.replicas)
        tr = run_hfl(chooser.problem, sizes=chooser.sizes, alpha=row["alpha"], x1=chooser.x1,
                     replicas=chooser.replicas, t=sched.t, end_time=sched.end_time,
                     generator=torch.Generator().manual_seed(chooser.seed + 1), record_grad=False)
        at = loss_at_times(tr.loss.numpy() - chooser.problem.f_inf, tr.end_time.numpy(), sched.U, times)
        ax.plot(times, at.mean(axis=0), label=settings_text(row))
    ax.set_yscale("log")
    ax.set_xlabel(label("wall-clock time", TIME))
    ax.set_ylabel(label("mean f(x) - f_inf", LOSS))
    ax.legend(fontsize=8)
    return ax
