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
    LOOP_OVERHEAD,
    Chooser,
    Evaluation,
    Footprint,
    Knob,
    NamedProblem,
    NoCertificate,
    Proposal,
    add_problem_arguments,
    comma_separated,
    fitting_batches,
    register_chooser,
    require_float,
    require_int,
    require_runs,
)
from fedbound.verify.api import count_text as _n

from .adapters import MLLSGDScenario, Theorem1, build

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
METRIC_NAMES = {"loss": "loss at the end, F(u_K) - F_inf",
                "lhs": "Theorem 1's left-hand side, the mean of ||grad F(u_k)||^2 over k <= K"}


@register_chooser
class TauEta(Chooser):
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

    name = "tau-eta"
    key = "mllsgd.theorem1"
    summary = "MLL-SGD: the period tau and the step eta, certified, calibrated and simulated"
    example = "fedbound choose mllsgd --graph complete --hubs 4 --workers-per-hub 4"
    calibration = ("the exact second moments of MLL-SGD on the problem's local quadratic model "
                   "(sim.estimate.quadratic_model: the Hessian's spectrum, the start and the "
                   "gradient noise at a reference minimiser); a prediction, not a certificate")
    screen_replicas = 4

    @classmethod
    def add_arguments(cls, p) -> None:
        p.add_argument("--scenario", help="MLL-SGD scenario JSON file (default: mllsgd.theorem1's "
                                          f"with K = {DEFAULT_K}); instead of its problem it may "
                                          "name the fields data, model, split, batch, hidden "
                                          "and data_dir of the options below (options given "
                                          "override the file)")
        p.add_argument("--hubs", type=int, help="hubs D")
        p.add_argument("--workers-per-hub", type=int, help="workers in every hub")
        p.add_argument("--graph", help="hub graph: path, ring, star, complete, ...")
        p.add_argument("--p", type=float, help="every worker's step probability")
        p.add_argument("--K", type=int, help=f"iterations (default {DEFAULT_K})")
        p.add_argument("--q", type=int, help="sub-network rounds per hub averaging")
        p.add_argument("--tau", help="local iterations per sub-network average: one value (fixed) "
                                     "or comma-separated values (default: those of 1, 2, 4, ..., "
                                     "32 that divide K / q)")
        p.add_argument("--eta", help="step size: one value (fixed) or comma-separated values "
                                     "(default: factors of 2 from the bounds' admissible steps up "
                                     "to 2/L)")
        p.add_argument("--t-comm", type=float, default=0.0,
                       help="time of a sub-network average, in units of one local iteration "
                            "(default 0): with it, every tau runs the whole hub periods that fit "
                            "in the time of K iterations")
        p.add_argument("--t-hub", type=float, default=0.0,
                       help="time a hub averaging adds, in units of one local iteration (default 0)")
        p.add_argument("--metric", choices=METRICS, default="loss",
                       help="loss (the default: F(u_K) - F_inf) or lhs (Theorem 1's left-hand "
                            "side)")
        p.add_argument("--replicas", type=int, default=32,
                       help="replicas in the paired comparison (default 32)")
        p.add_argument("--seed", type=int, help="seed of the hub graph, the problem (with --data: "
                                                "the split and the network's start) and the "
                                                "runs (default: the scenario's)")
        add_problem_arguments(p, clients="--hubs x --workers-per-hub, hub after hub")

    @classmethod
    def from_arguments(cls, args, read_scenario) -> TauEta:
        s = read_scenario(cls.key, args.scenario) if args.scenario is not None else \
            Theorem1.default.replace(K=DEFAULT_K)
        changes = {name: value for name, value in (
            ("hubs", args.hubs), ("workers_per_hub", args.workers_per_hub), ("graph", args.graph),
            ("p", args.p), ("K", args.K), ("q", args.q), ("seed", args.seed)) if value is not None}
        s = s.replace(**changes)
        named, problem = NamedProblem.from_arguments(args), {}
        if named is not None:
            s.validate()
            fed = named.build(s.sizes().tolist(), s.seed, "choose mllsgd",
                              groups="--hubs x --workers-per-hub")
            problem = {"problem": fed.problem, "x1": fed.x1, "source": named.as_dict(s.seed)}
        return cls(scenario=s, tau=comma_separated(args.tau, "--tau", int),
                   eta=comma_separated(args.eta, "--eta"), metric=args.metric,
                   t_comm=args.t_comm, t_hub=args.t_hub, replicas=args.replicas, **problem)

    def __init__(self, *, scenario: MLLSGDScenario | None = None, problem=None, x1=None,
                 tau=None, eta=None, metric: str = "loss", t_comm: float = 0.0,
                 t_hub: float = 0.0, replicas: int = 32, source=None):
        self.scenario = (scenario or Theorem1.default.replace(K=DEFAULT_K)).replace(tau=1)
        self.scenario.validate()
        st = build(self.scenario)
        self.setup = st
        if problem is not None:
            if x1 is None:
                raise ValueError("x1: the start of the problem passed in is needed")
            st.problem, st.x1 = problem, x1
            self.source = source or f"{type(problem).__name__} (dim {problem.dim}) passed in"
        else:
            self.source = f"scenario's {self.scenario.problem_spec()['kind']}"
        self._state = st.generator.get_state()
        s = self.scenario
        taus = None if tau is None else (list(tau) if isinstance(tau, (list, tuple)) else [tau])
        if taus is not None:
            for i, t in enumerate(taus):
                require_int(f"tau[{i}]", t)
                if (s.K // s.q) % t or s.K % s.q:
                    raise ValueError(f"--tau[{i}]={t}: K={s.K} must be a multiple of q * tau = "
                                     f"{s.q * t} (the proof of Theorem 1 sums whole hub periods)")
        self.tau_given = taus or None
        etas = None if eta is None else (list(eta) if isinstance(eta, (list, tuple)) else [eta])
        self.eta_given = None if etas is None else [require_float(f"eta[{i}]", e, low=0, low_open=True)
                                                    for i, e in enumerate(etas)]
        if metric not in METRICS:
            raise ValueError(f"metric={metric!r} must be one of {METRICS}")
        self.measured = metric
        self.replicas = require_int("replicas", replicas, minimum=2)
        self.t_comm = require_float("t_comm", t_comm, low=0)
        self.t_hub = require_float("t_hub", t_hub, low=0)
        pr = st.problem
        own = {"L": getattr(pr, "L", None), "beta": getattr(pr, "beta", None),
               "sigma": getattr(pr, "sigma", None), "Delta": pr.delta(st.x1)}
        self.constants = {k: float(v) for k, v in own.items() if v is not None}

    @property
    def metric(self) -> str:
        return METRIC_NAMES[self.measured]

    def inputs(self) -> dict[str, Any]:
        return {"problem": self.source, "constants": self.constants, "metric": self.measured,
                "t_comm": self.t_comm, "t_hub": self.t_hub, "replicas": self.replicas,
                "scenario": self.scenario.to_dict()}

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

            from fedbound.sim.estimate import lipschitz

            self._curvature = lipschitz(self.setup.problem, self.setup.x1, steps=30, starts=2,
                                        generator=torch.Generator().manual_seed(self.scenario.seed)).upper
        return self._curvature

    # ------------------------------------------------------------------ knobs

    def knobs(self) -> list[Knob]:
        s = self.scenario
        taus = self.tau_given or [t for t in DEFAULT_TAU if s.K % (s.q * t) == 0]
        if self.eta_given is not None:
            etas = self.eta_given
        else:
            tops = [] if self.missing() else [self.max_step(v, t) for v in self.variants() for t in taus]
            hi = max([*tops, 2.0 / self.curvature()])
            lo = max(ETA_BELOW * min(tops or [0.0]), hi * 2.0**-ETA_OCTAVES)
            etas = (hi * 2.0 ** -np.arange(int(math.floor(math.log2(hi / lo) + 1e-9)) + 1))[::-1].tolist()
        return [Knob("tau", tuple(taus), "log", integer=True, option="--tau"),
                Knob("eta", tuple(etas), "log", option="--eta")]

    # ------------------------------------------------------------------ the answers

    def certified(self, variant: str) -> Proposal:
        """The variant's bound (13) minimised over tau and the admissible eta (a log grid over
        BOUND_DECADES decades up to eta_max(tau)), or at the fixed eta where it is admissible."""
        if self.missing():
            raise NoCertificate(f"no certified {', '.join(self.missing())} for this problem")
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

    def calibrated(self) -> Proposal:
        """The minimiser of the predicted metric (``predict``) over the knobs' grid, then over
        the midpoints (on the log scale) around the best."""
        import torch

        from fedbound.sim.estimate import quadratic_model

        from . import predict

        st, s = self.setup, self.scenario
        qm = quadratic_model(st.problem, st.x1, torch.Generator().manual_seed(s.seed))
        tau_knob, eta_knob = self.knobs()
        curve = []

        def run(tau, etas):
            K = self.iterations(tau)
            gaps, grads = predict.curves(qm, st.p, st.matrices.a, st.matrices.V, st.matrices.Z,
                                         etas, K, s.q, tau)
            values = (gaps[:, K - 1] + qm.f_ref - st.problem.f_inf if self.measured == "loss"
                      else grads[:, :K].mean(axis=1))
            curve.extend({"tau": tau, "eta": float(e), "predicted": float(v)}
                         for e, v in zip(etas, values, strict=True))

        for tau in tau_knob.values:
            run(tau, list(eta_knob.values))
        best = min(curve, key=lambda row: (row["predicted"], row["tau"]))
        between = eta_knob.neighbours(best["eta"])
        if between:
            run(best["tau"], between)
            best = min(curve, key=lambda row: (row["predicted"], row["tau"]))
        return Proposal({"tau": best["tau"], "eta": best["eta"]}, best["predicted"], curve,
                        f"model: {qm.method}")

    # ------------------------------------------------------------------ simulation

    def simulate(self, settings: list[dict[str, Any]], replicas: int, *,
                 paired: bool) -> list[Evaluation]:
        """Every configuration in one batched run of MLL-SGD (``sim.mllsgd.run_mllsgd`` with a
        tau, its K_tau and a step per configuration), on common random numbers, ``paired`` or
        not: every configuration takes the same coins and gradient draws at iteration k (the
        generator in the scenario's state, ``sim.problems.CommonDraws``). Cut into batches
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
                                generator=torch.Generator().set_state(self._state))
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
                + f"replicas={_n(replicas)} x workers={_n(N)} x dim={_n(d)} x batch={_n(batch)}")
        work = configurations * replicas * N * d * batch
        return Footprint.of({f"{size} x 4 buffers of 8 B": 32.0 * work},
                            {f"K={_n(K)} x {size}": K * (10.0 * work + LOOP_OVERHEAD)})
