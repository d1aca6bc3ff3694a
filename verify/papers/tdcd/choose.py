"""The local steps Q and the step eta of TDCD (Das et al. 2022), chosen jointly for the user's
problem (the chooser of ``fedbound choose tdcd``, alias ``choose-q-eta``), and the sweeps
over Q behind the paper's Section 5.2 figures.

:class:`QEta` gives the three answers of ``verify.choose`` for the wall-clock time to reach
a target epsilon of the left side of Theorem 1, eq. (15), under t_Q = 3 t_comm + Q t_comp
(Section 5.2): *certified*, each valid variant of tdcd.theorem1 (fedbound's ``refined``
among them) minimised over (Q, eta); *calibrated*, the minimiser of the moments of the hub
models on the model's local quadratic model (``predict``); *simulated*, the paired search
on the problem. The problem is the scenario's synthetic data (the default), the bundled
breast-cancer data split by features over the scenario's silos (``--data``:
:func:`data_model`), or any model passed in. :func:`q_eta_evidence` compares them over
ratios t_comm / t_comp;
:func:`q_sweep` and :func:`loss_vs_time` (with their figures :func:`plot_against_q`,
:func:`plot_loss_vs_time`) sweep Q.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    COUNT,
    DEVICE,
    GUARANTEE,
    LOOP_OVERHEAD,
    LOSS,
    MU,
    SMALLEST_STEP,
    TIME,
    Chooser,
    DeadlineVariants,
    Evaluation,
    FieldError,
    Footprint,
    Input,
    Knob,
    NoCertificate,
    Proposal,
    adapter_for,
    block_seed,
    check,
    choose,
    fitting_batches,
    label,
    predicted_over_steps,
    register_chooser,
    require_int,
    require_mu,
    require_runs,
)
from fedbound.verify.api import count_text as _n

from .adapters import TDCDScenario, Theorem1, build

DEFAULT_Q_GRID = (1, 2, 5, 10, 20)
#: fedbound's deadline bound on E L(theta^{RQ}) - L*, the loss after the rounds that fit in
#: the horizon (derived by fedbound, not published; bounds/derivations/tdcd_deadline.md), by
#: the name of its certified answer: given with --mu
DEADLINE = {"deadline_pl": "tdcd.deadline_pl"}
SIM_REPLICAS = 16
SIM_ROUNDS_Q1 = 150
#: the default target: this fraction of ||grad L(theta^0)||^2 ...
EPSILON_FRACTION = 0.25
#: ... and at least this multiple of the simulated noise floor (:meth:`QEta.noise_floor`)
FLOOR_MARGIN = 2.0
#: the steps compared: factors of 2 from ETA_BELOW x the smallest eta_max(Q) of any valid
#: variant and Q up to ETA_ABOVE x the largest (the paper searches a grid, Section 5.2)
ETA_BELOW, ETA_ABOVE = 0.25, 2.0
#: step sizes per Q searched on the bound side: a log grid over BOUND_DECADES decades up to the
#: admissible maximum (the rounds needed are unimodal in eta), refined by a scalar search
BOUND_ETAS, BOUND_DECADES = 241, 12
#: an unpaired screen of the time to epsilon stops at this multiple of the best time so far
SCREEN_FACTOR = 4.0
METRICS = ("time", "lhs", "loss")
METRIC_NAMES = {
    "time": "wall-clock time to reach epsilon",
    "lhs": "left side of (15) at the horizon",
    "loss": "training loss at the horizon",
}


#: the parameters of tdcd.theorem1 the chooser sets (or that only other results use)
SET_HERE = ("Q", "eta", "R", "c", "G0")
#: the bundled data sets TDCD runs on (two classes: labels -1/+1 for both losses)
DATASETS = ("breast_cancer",)


def data_model(name: str, s: TDCDScenario):
    """(model, theta^0, certified constants, description) of the bundled data set ``name``
    split by features over the silos of ``s``: its standardised columns in a random order
    drawn from the seed, in blocks differing by at most one (``sim.data.vertical_split``),
    K_j clients per silo, the scenario's batch and loss, labels -1/+1, theta^0 at the
    scenario's distance from 0 in a seeded random direction. The constants: L, L_max,
    Delta = L(theta^0) - L_inf and K_j, and sigma_j where the model has a uniform one
    (logistic; least squares has none: its certified answers then say so)."""
    import torch

    from fedbound.sim.data import load_breast_cancer, vertical_split
    from fedbound.sim.tdcd import BlockLinear, Layout

    if name not in DATASETS:
        raise ValueError(f"data={name!r} must be one of {DATASETS}")
    data = load_breast_cancer()
    gen = torch.Generator().manual_seed(s.seed)
    columns, blocks = vertical_split(data.features.shape[1], len(s.blocks), gen)
    layout = Layout(blocks, tuple(s.clients), data.features.shape[0], s.batch)
    model = BlockLinear(data.features[:, columns], data.labels.to(torch.float64) * 2 - 1, layout,
                        loss=s.loss)
    direction = torch.randn(layout.D, generator=gen, dtype=torch.float64)
    theta0 = s.distance * direction / direction.norm()
    constants = {"L": model.L, "L_max": model.L_max, "K": np.asarray(s.clients, dtype=float),
                 "Delta": float(model.loss(model.split(theta0)[None])[0]) - model.f_inf}
    if model.sigma is not None:
        constants["sigma"] = np.asarray(model.sigma, dtype=float)
    source = {"data": name, "loss": s.loss, "blocks": list(blocks), "clients": list(s.clients),
              "batch": s.batch, "seed": s.seed}
    return model, theta0, constants, source


def hitting_times(running: np.ndarray, time: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Per replica (rows of ``running``, [replicas, rounds]): the rounds r and the wall-clock
    time time[r] at the first round r whose running left side of (15) is <= epsilon; inf
    for a replica that never gets there."""
    hit = running <= epsilon
    first = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    rounds = np.where(first >= 0, first + 1.0, np.inf)
    return rounds, np.where(first >= 0, time[first + 1], np.inf)


@register_chooser
class QEta(DeadlineVariants, Chooser):
    """(Q, eta) for TDCD (module docstring), on the TDCD ``scenario`` (default:
    tdcd.theorem1's), or on ``model`` and ``theta0`` (a ``sim.tdcd.BlockLinear``, with its
    certified constants, or any model TDCD runs; the bound's constants then come from
    ``constants``).

    ``Q`` and ``eta``: None (the default grid), a number (fixed) or a list (the grid).
    Defaults that make the choice depend on the problem: ``t_comm`` and ``t_comp`` the
    scenario's; ``epsilon`` EPSILON_FRACTION of ||grad L(theta^0)||^2, raised to FLOOR_MARGIN
    times the simulated noise floor when that is higher. The certified constants are the
    adapter's (``verify.adapter_for("tdcd.theorem1").parameters``, K_j included for the
    refined variant). Every simulated configuration runs over the time of SIM_ROUNDS_Q1
    rounds of Q = 1; ``metric``: "time" (the default: the mean over replicas of the time at
    which the running left side first reaches epsilon, inf when a replica never does or
    diverges), "lhs" (the left side at the horizon) or "loss" (the training loss there)."""

    deadline = DEADLINE
    name = "q-eta"
    key = "tdcd.theorem1"
    aliases = ("choose-q-eta",)
    summary = "TDCD: the local steps Q and the step eta, certified, calibrated and simulated"
    example = "fedbound choose tdcd --t-comm 100 --t-comp 1"
    common_numbers = True  # simulate: the same seeds for every configuration, paired or not
    replica_blocks = True  # simulate(..., block=b): block b of replicas, on seeds of its own
    bounded = ("the left side of Theorem 1, (15), the running mean of ||grad L(theta^{rQ})||^2 over "
               "the rounds: its value is the time at which the bound reaches epsilon")
    calibration = ("the first and second moments of the hub models on the model's local "
                   "quadratic model (each sample's loss slope linearised at anchors from theta^0 "
                   "to a reference minimiser, exact for least squares), the expectations over "
                   "drawn batches; a prediction, not a certificate")
    replicas = SIM_REPLICAS

    declared = (
        Input("epsilon", float, "target of the left side of Theorem 1, eq. (15) (default: 0.25 "
                                "||grad L(theta^0)||^2, at least twice the simulated noise floor)",
              low=0, low_open=True),
        Input("t_comm", float, "time of one communication (default: the scenario's)",
              unit="time units", low=0),
        Input("t_comp", float, "time of one local step (default: the scenario's); a round takes "
                               "3 t_comm + Q t_comp (Section 5.2)", unit="time units", low=0),
        Input("replicas", int, "replicas in the paired comparison", default=SIM_REPLICAS, low=2),
        Input("loss", str, "the scenario's loss: logistic regression or least squares (default: "
                           "the scenario's)", choices=("logistic", "squared")),
        Input("Q", int, "local steps (default 1,2,5,10,20)", low=1, knob=True),
        Input("eta", float, "step size (default: factors of 2 around every valid variant's "
                            "admissible range and beyond, until the simulation diverges)",
              low=SMALLEST_STEP, knob=True),
        Input("metric", str, "time (to reach --epsilon), lhs (the left side of (15) at the "
                             "horizon) or loss (the training loss there)", default="time",
              choices=METRICS),
        Input("data", str, "your data instead of the scenario's synthetic ones: breast_cancer (569 "
                           "samples, 30 standardised features, labels -1/+1; fedbound[data]) split "
                           "by features over the scenario's silos, in a random column order from "
                           "its seed, with its clients per silo, batch, --loss and start distance",
              choices=DATASETS),
        MU,
        DEVICE,
    )

    def __init__(self, *, scenario: TDCDScenario | None = None, epsilon=None, t_comm=None,
                 t_comp=None, loss=None, data=None, model=None, theta0=None,
                 constants: dict | None = None, Q=None, eta=None, metric=None, replicas=None,
                 seed: int | None = None, source=None, device=None, mu=None):
        import torch

        import fedbound.bounds.tdcd as btdcd

        v = self.value
        self.device = self.device_of(device)
        epsilon = v("epsilon", epsilon)
        base = scenario or Theorem1.default
        base.validate()
        self.scenario = self.replaced(base, {"loss": v("loss", loss)})
        data = v("data", data)
        if data is not None:
            model, theta0, constants, source = data_model(data, self.scenario)
        self.seed = require_int("seed", self.scenario.seed if seed is None else seed, minimum=0)
        self.t_comm = self.scenario.t_comm if t_comm is None else v("t_comm", t_comm)
        self.t_comp = self.scenario.t_comp if t_comp is None else v("t_comp", t_comp)
        if self.t_comm + self.t_comp <= 0:
            raise FieldError(f"{self.named('t_comm')}={self.t_comm} and {self.named('t_comp')}="
                             f"{self.t_comp}: a round must take time (t_comm + t_comp > 0)")
        self.Q_given = v("Q", Q)
        self.eta_given = v("eta", eta)
        self.measured = v("metric", metric)
        self.replicas = v("replicas", replicas)
        if model is None:
            st = build(self.scenario)
            self.model, self.theta0 = st.model, st.theta0
            self._state = st.generator.get_state()
            adapter = adapter_for(self.key)
            self.params = {var: self._bound_params(adapter, var) for var in bounds.variants(self.key)}
            self.constants = {}
            self.source = f"tdcd.theorem1 scenario ({self.scenario.loss}, n = {self.scenario.n})"
        else:
            if theta0 is None:
                raise ValueError("theta0: the start of the model passed in is needed")
            self.model, self.theta0 = model, theta0
            self._state = torch.Generator().manual_seed(self.seed).get_state()
            self.constants = dict(constants or {})
            self.params = {var: {k: c for k, c in self.constants.items() if k in thm.params}
                           for var in bounds.variants(self.key)
                           if set((thm := bounds.get(self.key, var)).params) - set(SET_HERE)
                           <= set(self.constants)}
            self.source = source or f"{type(model).__name__} (dim {model.dim}) passed in"
        if self.device != self.model.device:
            from fedbound.sim.tdcd import BlockLinear

            self.model = BlockLinear(self.model.X, self.model.y, self.model.layout,
                                     loss=self.model.loss_kind, device=self.device)
            self.theta0 = self.theta0.to(self.device)
        L = next((p["L"] for p in self.params.values() if "L" in p), self.constants.get("L"))
        self.mu = require_mu(v("mu", mu), L, self.named("mu"))
        self.grad0 = float((self.model.grad(self.model.split(self.theta0)[None]) ** 2).sum())
        self.horizon = SIM_ROUNDS_Q1 * btdcd.round_time(1, self.t_comm, self.t_comp)
        require_runs("choose tdcd", {f"the noise floor at --Q 1 with --replicas {self.replicas}":
                                     self.footprint({"Q": 1}, self.replicas)})
        self.floor = self.noise_floor()
        self._incumbent = math.inf  # the best time to epsilon seen: the calibrated, then simulated
        if epsilon is None:
            self.epsilon = max(EPSILON_FRACTION * self.grad0, FLOOR_MARGIN * self.floor)
            self.epsilon_source = (f"{EPSILON_FRACTION} ||grad L(theta^0)||^2, at least "
                                   f"{FLOOR_MARGIN} x the noise floor")
        else:
            self.epsilon, self.epsilon_source = epsilon, "given"

    @property
    def metric(self) -> str:
        return METRIC_NAMES[self.measured]

    def _bound_params(self, adapter, variant: str) -> dict[str, Any]:
        """The variant's parameters on the scenario, less those the chooser sets (Q, eta, R)."""
        thm = bounds.get(self.key, variant)
        p = adapter.parameters(self.scenario, thm)
        return {k: v for k, v in p.items() if k not in ("Q", "eta", "R")}

    def max_step(self, variant: str, Q: int) -> float:
        """eta_max(Q): the largest step the variant's conditions admit."""
        return bounds.get(self.key, variant).max_step(**self.params[variant], Q=Q, R=1)

    def generator(self, block: int = 0):
        """The generator of a run, in the same state for every configuration (common random
        numbers): the scenario's stream after its data, or seeded for a model passed in;
        ``block`` > 0: seeded for that block of replicas (``block_seed`` of the seed)."""
        import torch

        if block:
            return torch.Generator().manual_seed(block_seed(self.seed, block))
        return torch.Generator().set_state(self._state)

    def noise_floor(self) -> float:
        """The level ||grad L||^2 settles at: its mean over replicas and the last half of the
        horizon, at Q = 1 with the largest step the certified variants admit (or 1/L)."""
        from fedbound.sim.problems import one_thread
        from fedbound.sim.tdcd import run_tdcd

        eta = max(self.max_step(v, 1) for v in self.valid()) if self.params else 1.0 / self.model.L
        with one_thread():
            tr = run_tdcd(self.model, eta=eta, Q=1, rounds=SIM_ROUNDS_Q1, theta0=self.theta0,
                          replicas=self.replicas, generator=self.generator())
        g = tr.grad_sq_norm.numpy()[~tr.diverged.numpy()]
        return float(g[:, SIM_ROUNDS_Q1 // 2:].mean()) if g.size else math.inf

    def valid(self) -> list[str]:
        """The valid variants with parameters on this problem."""
        return [v for v in self.variants() if v in self.params]

    def inputs(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "epsilon_source": self.epsilon_source,
                "grad_sq_norm_0": self.grad0, "noise_floor": self.floor, "t_comm": self.t_comm,
                "t_comp": self.t_comp, "metric": self.measured, "replicas": self.replicas,
                "horizon": self.horizon, "problem": self.source, "device": str(self.device),
                **({} if self.mu is None else {"mu": self.mu}),
                "scenario": self.scenario.to_dict()}

    def _time(self, Q: int, rounds) -> np.ndarray:
        import fedbound.bounds.tdcd as btdcd

        return np.asarray(rounds, dtype=float) * btdcd.round_time(Q, self.t_comm, self.t_comp)

    def rounds(self, Q: int) -> int:
        """The rounds of Q within the horizon."""
        import fedbound.bounds.tdcd as btdcd

        return max(1, math.ceil(self.horizon / btdcd.round_time(Q, self.t_comm, self.t_comp)))

    # ------------------------------------------------------------------ knobs

    def knobs(self) -> list[Knob]:
        Qs = self.Q_given or list(DEFAULT_Q_GRID)
        if self.eta_given is not None:
            etas = self.eta_given
        else:
            tops = ([self.max_step(v, Q) for v in self.valid() for Q in Qs] if self.params
                    else [1.0 / (self.model.L * Q) for Q in Qs])
            lo, hi = ETA_BELOW * min(tops), ETA_ABOVE * max(tops)
            etas = (lo * 2.0 ** np.arange(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1)).tolist()
        return [Knob("Q", tuple(Qs), "log", integer=True, option=self.named("Q"), lower=1,
                     extend=self.Q_given is None),
                Knob("eta", tuple(etas), "log", option=self.named("eta"), lower=SMALLEST_STEP,
                     extend=self.eta_given is None)]

    def monotone_reason(self, variant: str, knob: str) -> str:
        if knob == "Q" and variant != "refined" and variant not in DEADLINE:
            return ("the bound sees eta and Q only through eta Q (Das et al. 2022, Theorem 1, "
                    "(15)), so more local steps buy it nothing while a round costs Q t_comp more")
        return ""

    # ------------------------------------------------------------------ the answers

    def certified_deadline(self, variant: str) -> Proposal:
        """The (Q, eta) minimising ``tdcd.deadline_pl``, a bound on E L(theta^{RQ}) - L* after
        the R_Q rounds of each Q within the horizon (:meth:`rounds`), over the Q grid and,
        unless eta is fixed, the steps its conditions admit
        (``bounds.choose_deadline_local_steps``): its value at the pick is a guarantee on the
        expected loss at the horizon, whatever the metric. Constants: those of the refined
        variant of Theorem 1 (L, L_max, sigma, Delta, K) and --mu (a mu-PL loss)."""
        key = DEADLINE[variant]
        if self.mu is None:
            raise NoCertificate(f"the {variant} variant needs the PL constant: give "
                                f"{self.named('mu')}")
        if "refined" not in self.params:
            raise NoCertificate(f"the {variant} variant needs certified L, L_max, sigma, Delta and "
                                "K" + (" (least squares has no uniform gradient-noise bound)"
                                       if self.model.loss_kind == "squared" else ""))
        Q_knob, eta_knob = self.knobs()
        step = {"eta": eta_knob.values[0]} if eta_knob.fixed else {}
        try:
            pick = bounds.choose_deadline_local_steps(
                key, Qs=list(Q_knob.values), R=self.rounds, mu=self.mu, **self.params["refined"],
                **step)
        except ValueError as e:  # no step admissible at any Q
            raise NoCertificate(f"the {variant} variant gives no bound here: {e}") from None
        curve = [{"Q": r["Q"], "eta": r["eta"], "bound": r["bound"]} for r in pick.curve]
        return Proposal(dict(pick.best), pick.best_bound, curve,
                        f"{GUARANTEE}: E L(theta^(RQ)) - L_inf <= {pick.best_bound:.4g} after the "
                        f"rounds within the horizon {self.horizon:g} ({key}, derived by fedbound; "
                        f"a loss, whatever the metric); dominant term: {pick.dominant_term}")

    def certified(self, variant: str) -> Proposal:
        """For each Q, the admissible eta with the fewest rounds R at which the variant's bound
        is <= epsilon (at the fixed eta, if eta is fixed); the fastest in wall-clock time wins
        (the smaller Q on a tie); unreachable targets cost infinite time. The refined variant
        (derived by fedbound, not published) by ``bounds.tdcd.refined_choice``; the others are
        A(eta)/R + C(eta) in R (C the limit as R grows, A = bound(R = 1) - C), so R = ceil(A /
        (epsilon - C)), minimised over a log grid of eta and then by a bounded scalar search."""
        import fedbound.bounds.tdcd as btdcd

        if variant in DEADLINE:
            return self.certified_deadline(variant)
        if variant not in self.params:
            need = sorted(set(bounds.get(self.key, variant).params) - set(SET_HERE)
                          - set(self.constants))
            raise NoCertificate(f"no certified {', '.join(need)} for this model" + (
                " (least squares has no uniform gradient-noise bound)" if "sigma" in need and
                self.model.loss_kind == "squared" else " (give constants=...)"))
        Q_knob, eta_knob = self.knobs()
        if eta_knob.fixed:
            curve = [self._row_at(variant, Q, eta_knob.values[0]) for Q in Q_knob.values]
        elif variant == "refined":
            rows = btdcd.refined_choice(self.epsilon, **self.params[variant], t_comm=self.t_comm,
                                        t_comp=self.t_comp, Q_grid=list(Q_knob.values))["table"]
            curve = [{"Q": r["Q"], "eta": r["eta"], "rounds": float(r["R"]), "time": r["time"]}
                     for r in rows]
        else:
            curve = [self._published_row(variant, Q) for Q in Q_knob.values]
        best = min(curve, key=lambda row: (row["time"], row["Q"]))
        return Proposal({"Q": best["Q"], "eta": best["eta"]}, best["time"], curve,
                        f"certified rounds: {best['rounds']:g}")

    def _row_at(self, variant: str, Q: int, eta: float) -> dict[str, Any]:
        """The least R at which the variant's bound at (Q, eta) is <= epsilon (doubling, then
        bisection; the bound decreases in R), inf when even R -> infinity is above it or eta
        is not admissible."""
        thm, base = bounds.get(self.key, variant), self.params[variant]

        def above(R) -> bool:
            return float(thm.evaluate(**base, Q=Q, R=float(R), eta=eta)) > self.epsilon

        if eta > self.max_step(variant, Q) * (1 + 1e-12) or above(2.0**200):
            return {"Q": Q, "eta": eta, "rounds": math.inf, "time": math.inf}
        lo, hi = 1, 1
        while above(hi):
            lo, hi = hi + 1, 2 * hi
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if above(mid) else (lo, mid)
        return {"Q": Q, "eta": eta, "rounds": float(lo), "time": float(self._time(Q, lo))}

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

    def calibrated(self) -> Proposal:
        """The minimiser of the predicted metric (``predict``) over the knobs' grid, then over
        the midpoints (on the log scale) around the best."""
        from . import predict

        if not hasattr(self.model, "loss_kind"):
            raise ValueError(f"{type(self.model).__name__}: the calibrated prediction needs a "
                             "block-linear model (sim.tdcd.BlockLinear)")
        import torch

        from fedbound.sim.tdcd import draw_batch

        theta0 = self.model.join(self.model.split(self.theta0)).cpu().numpy()
        batches = draw_batch(self.model.layout, predict.BATCHES,
                             torch.Generator().manual_seed(self.seed), "cpu").numpy()
        points = predict.anchors(self.model, batches, theta0, predict.reference(self.model))
        Q_knob, eta_knob = self.knobs()

        def predicted(Q: int, etas: list[float]) -> list[float]:
            curves = predict.grad_sq_curves(self.model, points, theta0, Q, etas, self.rounds(Q),
                                            self.epsilon if self.measured == "time" else None)
            return [self._predicted(Q, c) for c in curves]

        etas, values, edge = predicted_over_steps(
            lambda e: np.array([predicted(Q, e) for Q in Q_knob.values]), eta_knob.values,
            extend=eta_knob.extend, lower=SMALLEST_STEP, name="eta")
        curve = [{"Q": Q, "eta": float(e), "predicted": float(values[i, j])}
                 for i, Q in enumerate(Q_knob.values) for j, e in enumerate(etas)]
        best = min(curve, key=lambda row: (row["predicted"], row["Q"]))
        between = eta_knob.neighbours(best["eta"], etas)
        if between:
            curve.extend({"Q": best["Q"], "eta": float(e), "predicted": v}
                         for e, v in zip(between, predicted(best["Q"], between), strict=True))
            best = min(curve, key=lambda row: (row["predicted"], row["Q"]))
        if self.measured == "time":
            self._incumbent = best["predicted"]
        return Proposal({"Q": best["Q"], "eta": best["eta"]}, best["predicted"], curve,
                        f"{len(points)} linearisation point(s), {predict.BATCHES} batches",
                        edge=tuple(edge))

    def _predicted(self, Q: int, curve: np.ndarray) -> float:
        from . import predict

        if self.measured == "time":
            return predict.time_to_epsilon(curve, self.epsilon, float(self._time(Q, 1)))
        if self.measured == "lhs":
            return float(curve.mean())
        raise ValueError("metric='loss': the calibrated prediction ranks by the left side of "
                         "(15); use metric='lhs' or 'time'")

    # ------------------------------------------------------------------ simulation

    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool, block: int = 0) -> list[Evaluation]:
        """Every configuration over the horizon in one batched run (:meth:`_simulate`), on
        common random numbers, ``paired`` or not (``block`` > 0: that block of replicas,
        :meth:`generator`). For the time to epsilon a configuration
        stops once every replica has reached it, and an unpaired screen stops at
        SCREEN_FACTOR x the best time seen so far (a configuration not there by then cannot be
        the best; it counts as not reaching epsilon), unless no configuration gets there."""
        screen = (not paired and self.measured == "time" and math.isfinite(self._incumbent))
        out = self._simulate(settings, replicas, SCREEN_FACTOR * self._incumbent
                             if screen else math.inf, block)
        if screen and not any(math.isfinite(e.value) for e in out):
            out = self._simulate(settings, replicas, math.inf, block)
        finite = [e.value for e in out if math.isfinite(e.value)]
        if self.measured == "time" and finite:
            self._incumbent = min(self._incumbent, min(finite))
        return out

    def _simulate(self, settings, replicas: int, cutoff: float, block: int = 0) -> list[Evaluation]:
        """Every configuration in one batched run of TDCD (``sim.tdcd.run_tdcd`` with a Q, its
        rounds within the horizon, or within ``cutoff``, and a step per configuration) on
        common random numbers: round r of every configuration takes the same batch (the
        generator in the same state). For the time to epsilon each configuration stops once
        every replica of its has reached it. Cut into batches that fit the memory and step
        limits (:meth:`footprint`, ``verify.limits.fitting_batches``), each on the same
        draws: a configuration's numbers do not depend on its batch."""
        import torch

        from fedbound.sim.tdcd import run_tdcd

        out: list[Evaluation] = []
        stop = self.epsilon if self.measured == "time" else None
        for group in fitting_batches([self.footprint(row, replicas) for row in settings]):
            rows = [settings[i] for i in group]
            Qs = [int(row["Q"]) for row in rows]
            rounds = [self.rounds(Q) if cutoff == math.inf else
                      min(self.rounds(Q), max(1, math.ceil(cutoff / float(self._time(Q, 1)))))
                      for Q in Qs]
            require_runs("choose tdcd", {f"{len(rows)} configuration(s) simulated in one batch":
                                         self._footprint(replicas, max(r * Q for r, Q in
                                                                       zip(rounds, Qs, strict=True)),
                                                         len(rows))})
            traces = run_tdcd(self.model, eta=torch.tensor([[float(row["eta"])] for row in rows],
                                                           dtype=torch.float64),
                              Q=Qs, rounds=rounds, theta0=self.theta0, replicas=replicas,
                              generator=self.generator(block), t_comm=self.t_comm, t_comp=self.t_comp,
                              stop_below=stop, record_variance=False)
            for row, tr in zip(rows, traces, strict=True):
                running, diverged = tr.running_lhs.numpy(), tr.diverged.numpy()
                r, t = hitting_times(running, tr.time.numpy(), self.epsilon)
                values = {"time": t, "lhs": running[:, -1],
                          "loss": tr.loss.numpy()[:, -1]}[self.measured]
                out.append(Evaluation(dict(row), np.where(diverged, np.inf, values),
                                      {"rounds": float(r.mean()), "diverged": int(diverged.sum())}))
        return out

    def footprint(self, settings: dict[str, Any], replicas: int) -> Footprint:
        """Rounds x Q local steps x replicas x the clients' gradients on the batch."""
        Q = int(settings["Q"])
        return self._footprint(replicas, self.rounds(Q) * Q)

    def _footprint(self, replicas: int, steps: int, configurations: int = 1) -> Footprint:
        """``configurations`` runs in one batch for ``steps`` local steps."""
        lay = self.model.layout
        clients = ((f"configurations={configurations} x " if configurations > 1 else "")
                   + f"replicas={_n(replicas)} x silos={lay.N} x clients={max(lay.clients)} x "
                   f"batch={_n(lay.batch)} x block={_n(max(lay.blocks))}")
        work = configurations * replicas * lay.N * max(lay.clients) * lay.batch * max(lay.blocks)
        return Footprint.of({f"{clients} x 6 buffers of 8 B": 48.0 * work},
                            {f"steps={_n(steps)} x {clients}":
                             steps * (10.0 * work + LOOP_OVERHEAD)})


def q_eta_evidence(ratios=(1.0, 10.0, 100.0), *, scenario: TDCDScenario | None = None,
                   t_comp: float = 1.0, replicas: int = SIM_REPLICAS) -> list[dict[str, Any]]:
    """For each t_comm / t_comp in ``ratios``: :func:`choose` with the defaults of
    :class:`QEta`, one row per answer (each valid variant's, the calibrated, the simulated):
    Q, eta, the simulated time to epsilon with its 95% half-width, the paired regret against
    the best with its half-width, and whether the answer passes."""
    rows = []
    for ratio in ratios:
        rep = choose(QEta(t_comm=ratio * t_comp, t_comp=t_comp, scenario=scenario, replicas=replicas))
        for a in rep.answers:
            rows.append({"ratio": ratio, "epsilon": rep.inputs["epsilon"],
                         "chooser": a.variant or a.kind, "Q": a.settings["Q"],
                         "eta": a.settings["eta"], "time": a.value, "ci": a.ci,
                         "regret": a.regret, "regret_ci": a.regret_ci, "passes": a.passes})
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
    ax = ax or plt.subplots(figsize=(6, 4), layout="constrained")[1]
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
        axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.6), squeeze=False,
                            layout="constrained")[1][0]
    for ax, (t_comm, per_q) in zip(axes, curves.items(), strict=True):
        for Q, (time, loss) in per_q.items():
            ax.plot(time, loss, label=f"Q = {Q}")
        ax.set_xlabel(label("wall-clock time", TIME))
        ax.set_ylabel(label("training loss", LOSS))
        ax.set_title(f"t_comm = {t_comm:g}, t_comp = 1")
        ax.legend()
    return axes
