"""The local period tau and the step eta of MLL-SGD (Castiglia et al. 2021) for a hub
topology, chosen jointly for the user's problem (the chooser of ``fedbound choose mllsgd``).

:class:`TauEta` gives the three answers of ``verify.choose`` for the loss after K iterations
(the paper's experiments plot the training loss against iterations, Section 6): *certified*,
each valid variant of Theorem 1, (13) under (12), minimised over (tau, eta) with the
problem's certified constants; *calibrated*, the minimiser of the exact second moments of
MLL-SGD on the problem's local quadratic model (``predict``); *simulated*, the paired search
on the problem. The hub topology, the workers' probabilities and weights, q and K are the
scenario's (``MLLSGDScenario``); the problem is the scenario's, a model on a bundled data set
split across the workers hub after hub (``--data --model --split``:
``sim.federated.federated_problem``), or any ``sim`` problem passed in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedbound import bounds
from fedbound.verify.api import (
    DEVICE,
    GUARANTEE,
    LOOP_OVERHEAD,
    MU,
    SMALLEST_STEP,
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
    predicted_over_steps,
    problem_inputs,
    register_chooser,
    require_mu,
    require_runs,
)
from fedbound.verify.api import count_text as _n

from .adapters import MLLSGDScenario, Theorem1, build

#: the hub graphs --graph takes: ``bounds.topology.GRAPH_KINDS``, written here so that loading
#: the plugin (``fedbound list``) imports no scipy
GRAPH_KINDS = ("complete", "path", "ring", "star", "grid", "random")
#: the chooser's default scenario: Theorem 1's, over K = DEFAULT_K iterations
DEFAULT_K = 256
#: the default periods tau (those that divide K / q)
DEFAULT_TAU = (1, 2, 4, 8, 16, 32)
#: the steps compared: factors of 2 from ETA_BELOW x the smallest eta_max(tau) of any valid
#: variant (at most ETA_OCTAVES factors of 2) up to the largest of the variants' eta_max and
#: 2 / L (the problem's curvature)
ETA_BELOW, ETA_OCTAVES = 0.25, 8
#: steps per tau on the bound side (a log grid over BOUND_DECADES decades up to eta_max)
BOUND_ETAS, BOUND_DECADES = 200, 4
METRICS = ("loss", "lhs")
#: fedbound's deadline bound on E F(u_K) - F*, the loss at the end (derived by fedbound, not
#: published; bounds/derivations/mllsgd_deadline.md), by the name of its certified answer:
#: given with --mu
DEADLINE = {"deadline_quadratic": "mllsgd.deadline_quadratic"}
METRIC_NAMES = {"loss": "loss at the end, F(u_K) - F_inf",
                "lhs": "Theorem 1's left-hand side, the mean of ||grad F(u_k)||^2 over k <= K"}


@register_chooser
class TauEta(DeadlineVariants, Chooser):
    """(tau, eta) for MLL-SGD (module docstring), on ``scenario`` (default Theorem 1's with
    K = DEFAULT_K): its hub graph, H, workers, p, q, K and problem, or on ``problem`` and
    ``x1`` passed in (the bound's constants then the problem's L, beta, sigma; a problem
    without them, a neural network, gets certified answers that say so, and steps up to 2 /
    its curvature at x_1; ``source``: what the report's ``problem`` input says). ``tau`` and
    ``eta``: None (the default grid), a number (fixed) or a list (the grid); ``metric``: one
    of METRICS; ``replicas`` in the paired comparison. ``t_comm`` and ``t_hub``: the time of
    a sub-network average and what a hub averaging adds, in units of one local iteration:
    every tau then runs the whole hub periods (q tau iterations, q tau + q t_comm + t_hub of
    time) that fit in the time of K iterations (:meth:`iterations`)."""

    deadline = DEADLINE
    name = "tau-eta"
    key = "mllsgd.theorem1"
    summary = "MLL-SGD: the period tau and the step eta, certified, calibrated and simulated"
    example = "fedbound choose mllsgd --graph complete --hubs 4 --workers-per-hub 4"
    common_numbers = True  # simulate: the same seeds for every configuration, paired or not
    replica_blocks = True  # simulate(..., block=b): block b of replicas, on seeds of its own
    bounded = "Theorem 1's left-hand side, the mean of ||grad F(u_k)||^2 over k <= K"
    calibration = ("the exact second moments of MLL-SGD on the problem's local quadratic model "
                   "(sim.estimate.quadratic_model: the Hessian's spectrum, the start and the "
                   "gradient noise at a reference minimiser); a prediction, not a certificate")
    screen_replicas = 4

    declared = (
        Input("hubs", int, "hubs D (default: the scenario's)", low=1),
        Input("workers_per_hub", int, "workers in every hub (default: the scenario's)", low=1),
        Input("graph", str, "hub graph (default: the scenario's)", choices=GRAPH_KINDS),
        Input("p", float, "the workers' step probabilities: one for every worker, or one per "
                          "worker, hub after hub (default: the scenario's)", low=0, low_open=True,
              high=1, many=True),
        Input("K", int, f"iterations (default: the scenario's; without --scenario {DEFAULT_K})",
              low=1),
        Input("q", int, "sub-network rounds per hub averaging (default: the scenario's)", low=1),
        Input("tau", int, "local iterations per sub-network average (default: those of 1, 2, 4, "
                          "..., 32 that divide K / q)", low=1, knob=True),
        Input("eta", float, "step size (default: factors of 2 around the largest step the "
                            "problem's curvature admits, beyond any theorem's range until the "
                            "simulation diverges)", low=SMALLEST_STEP, knob=True),
        Input("t_comm", float, "time of a sub-network average: with it, every tau runs the whole "
                               "hub periods that fit in the time of K iterations",
              unit="local iterations", default=0.0, low=0),
        Input("t_hub", float, "time a hub averaging adds", unit="local iterations", default=0.0,
              low=0),
        Input("metric", str, "loss (F(u_K) - F_inf) or lhs (Theorem 1's left-hand side)",
              default="loss", choices=METRICS),
        MU,
        Input("replicas", int, "replicas in the paired comparison", default=32, low=2),
        Input("seed", int, "seed of the hub graph, the problem (with --data: the split and the "
                           "network's start) and the runs (default: the scenario's)", low=0),
        DEVICE,
        problem_inputs(clients="--hubs x --workers-per-hub, hub after hub"),
    )

    def __init__(self, *, scenario: MLLSGDScenario | None = None, hubs=None,
                 workers_per_hub=None, graph=None, p=None, K=None, q=None, seed=None,
                 problem=None, x1=None, named=None, tau=None, eta=None, metric=None,
                 t_comm=None, t_hub=None, replicas=None, source=None, device=None, mu=None):
        v = self.value
        self.device = self.device_of(device)
        p = v("p", p)
        changes = {"hubs": v("hubs", hubs), "workers_per_hub": v("workers_per_hub", workers_per_hub),
                   "graph": v("graph", graph), "p": p[0] if p is not None and len(p) == 1 else p,
                   "K": v("K", K), "q": v("q", q), "seed": v("seed", seed)}
        base = scenario or Theorem1.default.replace(K=DEFAULT_K)
        base.validate()
        self.scenario = self.replaced(base, changes).replace(tau=1)
        s = self.scenario
        if named is not None:
            fed = named.build(s.sizes().tolist(), s.seed, "choose mllsgd",
                              groups=f"{self.named('hubs')} x {self.named('workers_per_hub')}")
            problem, x1, source = fed.problem, fed.x1, named.as_dict(s.seed)
        self._batch_name = self.named("batch") if named is not None else "batch"
        self.subsample = None if named is None else named.subsample
        st = build(s)
        self.setup = st
        if problem is not None:
            if x1 is None:
                raise ValueError("x1: the start of the problem passed in is needed")
            st.problem, st.x1 = problem, x1
            self.source = source or f"{type(problem).__name__} (dim {problem.dim}) passed in"
        else:
            self.source = f"scenario's {s.problem_spec()['kind']}"
        if self.device != st.problem.device:
            st.problem, st.x1 = st.problem.to(self.device), st.x1.to(self.device)
        self._state = st.generator.get_state()
        taus = v("tau", tau)
        for i, t in enumerate(taus or ()):
            if (s.K // s.q) % t or s.K % s.q:
                name = self.named("tau" if len(taus) == 1 else f"tau[{i}]")
                raise FieldError(f"{name}={t}: {self.named('K')}={s.K} must be a multiple of "
                                 f"{self.named('q')} * tau = {s.q * t} (the proof of Theorem 1 "
                                 "sums whole hub periods)")
        self.tau_given = taus
        self.eta_given = v("eta", eta)
        self.measured = v("metric", metric)
        self.replicas = v("replicas", replicas)
        self.t_comm, self.t_hub = v("t_comm", t_comm), v("t_hub", t_hub)
        pr = st.problem
        own = {"L": getattr(pr, "L", None), "beta": getattr(pr, "beta", None),
               "sigma": getattr(pr, "sigma", None), "Delta": pr.delta(st.x1)}
        self.constants = {k: float(x) for k, x in own.items() if x is not None}
        self.mu = require_mu(v("mu", mu), self.constants.get("L"), self.named("mu"))
        if self.mu is not None:
            self.bounded = (f"{self.bounded} for the paper's variants, and on the expected loss "
                            "at the end, E F(u_K) - F_inf, for the deadline variant")

    @property
    def metric(self) -> str:
        return METRIC_NAMES[self.measured]

    def inputs(self) -> dict[str, Any]:
        constants = {**self.constants, **({} if self.mu is None else {"mu": self.mu})}
        return {"problem": self.source, "constants": constants, "metric": self.measured,
                "t_comm": self.t_comm, "t_hub": self.t_hub, "replicas": self.replicas,
                "device": str(self.device), "scenario": self.scenario.to_dict()}

    def iterations(self, tau: int) -> int:
        """K_tau: the iterations of the whole hub periods of tau that fit in the time of K
        iterations (K itself without communication time)."""
        s = self.scenario
        period = s.q * tau + s.q * self.t_comm + self.t_hub
        periods = math.floor(s.K / period * (1 + 1e-12))
        if periods < 1:
            raise ValueError(f"tau={tau}: one hub period ({period:g} time units) does not fit in "
                             f"the time of K={s.K} iterations")
        return periods * s.q * tau

    def params(self, tau: int) -> dict[str, Any]:
        """Theorem 1's parameters at tau (all but eta)."""
        st, s = self.setup, self.scenario
        return {**self.constants, "K": self.iterations(tau), "q": s.q, "tau": tau, "zeta": st.zeta,
                "a": st.matrices.a, "p": st.p}

    def max_step(self, variant: str, tau: int) -> float:
        return bounds.get(self.key, variant).max_step(**self.params(tau))

    def missing(self) -> list[str]:
        """The constants of Theorem 1 the problem has no certified value for."""
        return [k for k in ("L", "beta", "sigma") if k not in self.constants]

    def curvature(self) -> float:
        """L, the certified constant, else the largest curvature at x_1 (estimated once)."""
        if "L" in self.constants:
            return self.constants["L"]
        if not hasattr(self, "_curvature"):
            import torch

            from fedbound.sim.estimate import top_curvature

            self._curvature = top_curvature(self.setup.problem, self.setup.x1,
                                            torch.Generator().manual_seed(self.scenario.seed),
                                            subsample=self.subsample)
        return self._curvature

    # ------------------------------------------------------------------ knobs

    def refusal(self, variant: str) -> str | None:
        """Why ``variant`` of Theorem 1 gives no bound on this problem (no certified
        constants, or no eta > 0 meets its conditions: a worker's p_i at most 2 - sqrt(2)
        fails (12)), or None."""
        if self.missing():
            return f"no certified {', '.join(self.missing())} for this problem"
        try:
            self.max_step(variant, 1)
        except ValueError as e:
            return f"the {variant} variant's conditions cannot hold here: {e}"
        return None

    def knobs(self) -> list[Knob]:
        """tau: the grid given, else those of DEFAULT_TAU that divide K / q; eta: the grid
        given, else factors of 2 from ETA_BELOW x the smallest eta_max(tau) of the variants
        that give a bound (at most ETA_OCTAVES octaves) up to the largest of their eta_max and
        2 / L (the problem's curvature), beyond every theorem's range. A default grid extends
        where the search's pick sits at its edge; no step waits for a theorem (a variant
        whose conditions cannot hold, :meth:`refusal`, gives none)."""
        s = self.scenario
        taus = self.tau_given or [t for t in DEFAULT_TAU if s.K % (s.q * t) == 0]
        if self.eta_given is not None:
            etas = self.eta_given
        else:
            valid = [v for v in self.variants() if self.refusal(v) is None]
            tops = [self.max_step(v, t) for v in valid for t in taus]
            hi = max([*tops, 2.0 / self.curvature()])
            lo = max(ETA_BELOW * min(tops or [0.0]), hi * 2.0**-ETA_OCTAVES)
            etas = (hi * 2.0 ** -np.arange(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1))[::-1].tolist()
        return [Knob("tau", tuple(taus), "log", integer=True, option=self.named("tau"), lower=1,
                     upper=s.K // s.q, extend=self.tau_given is None),
                Knob("eta", tuple(etas), "log", option=self.named("eta"), lower=SMALLEST_STEP,
                     extend=self.eta_given is None)]

    def admits(self, settings: dict[str, Any]) -> bool:
        """A tau runs when it divides K / q and a hub period fits in the time of K
        iterations (:meth:`iterations`)."""
        s, tau = self.scenario, int(settings["tau"])
        if s.K % (s.q * tau):
            return False
        try:
            self.iterations(tau)
        except ValueError:
            return False
        return True

    # ------------------------------------------------------------------ the answers

    def certified(self, variant: str) -> Proposal:
        """The variant's bound (13) minimised over tau and the admissible eta (a log grid over
        BOUND_DECADES decades up to eta_max(tau)), or at the fixed eta where it is admissible.
        The deadline variant: :meth:`certified_deadline`."""
        if variant in DEADLINE:
            return self.certified_deadline(variant)
        refusal = self.refusal(variant)
        if refusal is not None:
            raise NoCertificate(refusal)
        thm = bounds.get(self.key, variant)
        tau_knob, eta_knob = self.knobs()
        curve = []
        for tau in tau_knob.values:
            top = self.max_step(variant, tau)
            etas = (np.array(eta_knob.values) if eta_knob.fixed
                    else np.geomspace(top * 10.0**-BOUND_DECADES, top, BOUND_ETAS))
            values = np.asarray(thm.evaluate(**self.params(tau), eta=etas), dtype=float)
            values = np.where(etas <= top * (1 + 1e-12), values, math.inf)
            j = int(np.argmin(values))
            curve.append({"tau": tau, "eta": float(etas[j]), "bound": float(values[j])})
        best = min(curve, key=lambda row: (row["bound"], row["tau"]))
        return Proposal({"tau": best["tau"], "eta": best["eta"]}, best["bound"], curve)

    def certified_deadline(self, variant: str) -> Proposal:
        """The (tau, eta) minimising ``mllsgd.deadline_quadratic``, a bound on E F(u_K) - F*
        after the K_tau iterations of each tau (:meth:`iterations`), over the tau grid and,
        unless eta is fixed, the steps below 1/L (``bounds.choose_deadline_period``): its
        value at the pick is a guarantee on the expected loss at the end. It holds on a
        quadratic (``sim.problems.Quadratic``) with spectrum in [--mu, L] that every worker
        samples; L, sigma, Delta and ||grad F(x_1)||^2 (G1) are the problem's own."""
        from fedbound.sim.problems import Quadratic

        key = DEADLINE[variant]
        if self.mu is None:
            raise NoCertificate(f"the {variant} variant needs the PL constant: give "
                                f"{self.named('mu')}")
        st = self.setup
        pr = st.problem
        if not isinstance(pr, Quadratic) or hasattr(pr, "M"):
            raise NoCertificate(f"the {variant} variant holds on quadratics with spectrum in "
                                f"[mu, L]; this problem is a {type(pr).__name__}")
        tau_knob, eta_knob = self.knobs()
        c, m = self.constants, st.matrices
        step = {"eta": eta_knob.values[0]} if eta_knob.fixed else {}
        try:
            pick = bounds.choose_deadline_period(
                key, taus=list(tau_knob.values), K=self.iterations, L=c["L"], mu=self.mu,
                sigma=c["sigma"], Delta=max(c["Delta"], 0.0),
                G1=float(pr.grad(st.x1).square().sum()), q=self.scenario.q, a=m.a, p=st.p, V=m.V,
                Z=m.Z, **step)
        except ValueError as e:  # a fixed step the bound does not admit
            raise NoCertificate(f"the {variant} variant gives no bound here: {e}") from None
        curve = [{"tau": r["tau"], "eta": r["eta"], "bound": r["bound"]} for r in pick.curve]
        return Proposal(dict(pick.best), pick.best_bound, curve,
                        f"{GUARANTEE}: E F(u_K) - F_inf <= {pick.best_bound:.4g} ({key}, derived "
                        f"by fedbound); dominant term: {pick.dominant_term}")

    def quadratic_model(self):
        """The problem's local quadratic model (``sim.estimate.quadratic_model``), cached."""
        if not hasattr(self, "_model"):
            import torch

            from fedbound.sim.estimate import quadratic_model

            self._model = quadratic_model(self.setup.problem, self.setup.x1,
                                          torch.Generator().manual_seed(self.scenario.seed),
                                          subsample=self.subsample, curvature=self.curvature())
        return self._model

    def calibrated(self) -> Proposal:
        """The minimiser of the predicted metric (``predict``) over the knobs' grid (a default
        step grid extended while the minimiser sits at its edge, until the prediction
        diverges, up to 2 / L with a certified L, else 1 / the curvature at x_1, the model
        being local: ``verify.api.predicted_over_steps``), then over the midpoints (on the
        log scale) around the best."""
        from . import predict

        st, s = self.setup, self.scenario
        qm = self.quadratic_model()
        tau_knob, eta_knob = self.knobs()

        def predicted(tau: int, etas: list[float]) -> np.ndarray:
            K = self.iterations(tau)
            gaps, grads = predict.curves(qm, st.p, st.matrices.a, st.matrices.V, st.matrices.Z,
                                         etas, K, s.q, tau)
            return (gaps[:, K - 1] + qm.f_ref - st.problem.f_inf if self.measured == "loss"
                    else grads[:, :K].mean(axis=1))

        etas, values, edge = predicted_over_steps(
            lambda e: np.array([predicted(t, e) for t in tau_knob.values]), eta_knob.values,
            extend=eta_knob.extend, lower=SMALLEST_STEP, name="eta",
            **({"upper": 2.0 / self.curvature()} if "L" in self.constants else
               {"upper": 1.0 / self.curvature(), "upper_note": (
                   "1 / the curvature at x_1, beyond which the local model (taken at x_ref) is "
                   "not trusted; the simulated search goes further")}))
        curve = [{"tau": t, "eta": float(e), "predicted": float(values[i, j])}
                 for i, t in enumerate(tau_knob.values) for j, e in enumerate(etas)]
        best = min(curve, key=lambda row: (row["predicted"], row["tau"]))
        between = eta_knob.neighbours(best["eta"], etas)
        if between:
            curve.extend({"tau": best["tau"], "eta": float(e), "predicted": float(v)}
                         for e, v in zip(between, predicted(best["tau"], between), strict=True))
            best = min(curve, key=lambda row: (row["predicted"], row["tau"]))
        return Proposal({"tau": best["tau"], "eta": best["eta"]}, best["predicted"], curve,
                        f"model: {qm.method}", edge=tuple(edge))

    # ------------------------------------------------------------------ simulation

    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool, block: int = 0) -> list[Evaluation]:
        """Every configuration in one batched run of MLL-SGD (``sim.mllsgd.run_mllsgd`` with a
        tau, its K_tau and a step per configuration), on common random numbers, ``paired`` or
        not: every configuration takes the same coins and gradient draws at iteration k (the
        generator in the scenario's state, ``sim.problems.CommonDraws``; ``block`` > 0: seeded
        for that block of replicas, ``block_seed`` of the scenario's seed). Cut into batches
        that fit the memory and step limits (:meth:`footprint`,
        ``verify.limits.fitting_batches``), each on the same draws: a configuration's numbers
        do not depend on its batch."""
        import torch

        from fedbound.sim.mllsgd import run_mllsgd

        st, s = self.setup, self.scenario
        out: list[Evaluation] = []
        for group in fitting_batches([self.footprint(row, replicas) for row in settings]):
            rows = [settings[i] for i in group]
            taus = [int(row["tau"]) for row in rows]
            Ks = [self.iterations(tau) for tau in taus]
            require_runs("choose mllsgd", {f"{len(rows)} configuration(s) simulated in one batch":
                                           self._footprint(replicas, max(Ks), len(rows))})
            traces = run_mllsgd(st.problem, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
                                w=torch.as_tensor(st.w), p=torch.as_tensor(st.p),
                                eta=torch.tensor([[float(row["eta"])] for row in rows],
                                                 dtype=torch.float64),
                                K=Ks, q=s.q, tau=taus, x1=st.x1, replicas=replicas,
                                record_grad=self.measured == "lhs",
                                # "loss" reads F(u_K) alone: no pass over the data every iteration
                                record_every=1 if self.measured == "lhs" else math.gcd(*Ks),
                                record_first=self.measured == "lhs",
                                generator=torch.Generator().manual_seed(
                                    block_seed(s.seed, block)) if block
                                else torch.Generator().set_state(self._state))
            for row, K, tr in zip(rows, Ks, traces, strict=True):
                values = (tr.loss.numpy()[:, -1] - st.problem.f_inf if self.measured == "loss"
                          else tr.grad_sq_norm.numpy().mean(axis=1))
                out.append(Evaluation(dict(row), np.where(tr.diverged.numpy(), np.inf, values),
                                      {"K": K}))
        return out

    def footprint(self, settings: dict[str, Any], replicas: int) -> Footprint:
        """K_tau iterations x replicas x workers x the problem's dimension."""
        return self._footprint(replicas, self.iterations(int(settings["tau"])))

    def _footprint(self, replicas: int, K: int, configurations: int = 1) -> Footprint:
        """``configurations`` runs of K iterations in one batch."""
        N, d = self.scenario.worker_count(), self.setup.problem.dim
        batch = getattr(self.setup.problem, "batch", 1) or 1
        size = ((f"configurations={configurations} x " if configurations > 1 else "")
                + f"{self.named('replicas')}={_n(replicas)} x workers={_n(N)} x dim={_n(d)} x "
                f"{self._batch_name}={_n(batch)}")
        work = configurations * replicas * N * d * batch
        return Footprint.of({f"{size} x 4 buffers of 8 B": 32.0 * work},
                            {f"K={_n(K)} x {size}": K * (10.0 * work + LOOP_OVERHEAD)})
