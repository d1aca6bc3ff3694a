"""Das, Castiglia, Wang & Patterson 2022, Cross-Silo Federated Learning for Multi-Tier
Networks with Vertical and Horizontal Data Partitioning (TDCD).

Statement: Theorem 1, bound (15) under the step condition (14); Lemma 2, the per-round
drift (30), which holds pathwise; Remark 5, the rate at eta = c/(Q sqrt R).
Algorithm: Algorithm 1, (4)-(5).

Scenario: the vertical split (``blocks``), the clients per silo (``clients``), the
synthetic data (``n``, ``loss``, ``scale``, ``label_noise``), the batch, Q, eta (null =
the largest admissible), the rounds, the start theta^0 (at ``distance`` from 0 in a random
direction), the latency model (``t_comm``, ``t_comp``; Section 5.2), the replicas and the
seed.

Parameters (``sim.tdcd.BlockLinear`` documents each constant): L and L_max from the data;
Delta = L(theta^0) - L_inf (Assumption 2; L_inf exact for least squares, 0 for logistic
regression); sigma_j: logistic regression has a uniform bound; least squares has none, so
sigma_j^2 is the largest exact Var(g_kj) over the visited round-start models of every
replica (the proof of Theorem 1 uses the variance bound (9) only there).

Measurement: the left-hand side of (15), per replica. ``tdcd.lemma2`` holds pathwise, so
its measurement is the worst ratio drift / G0 over every round and every replica (a
deterministic number for the seed), compared with the bound at G0 = 1 without Monte-Carlo
tolerance (the verdict's mode reads "exact").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from fedbound.bounds.references import cite
from fedbound.verify.api import (
    FEATURE_NORM_RANGE,
    LOOP_OVERHEAD,
    Adapter,
    Draw,
    Footprint,
    Measurement,
    Scenario,
    Sweep,
    Tags,
    along_trajectory,
    register_adapter,
    register_sweep,
    require_float,
    require_int,
    roundoff,
)
from fedbound.verify.api import count_text as _n

from . import theorems  # noqa: F401 - registers the results the adapters below check

if TYPE_CHECKING:  # annotations only: torch and sim are imported where they are used
    import torch

    from fedbound.sim.tdcd import BlockLinear, Layout, TDCDTrace

PAPER = cite("tdcd")


def _list_of_ints(name: str, value) -> list[int]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ValueError(f"{name}={value!r} must be a non-empty list of integers (one per silo)")
    return [require_int(f"{name}[{j}]", v, minimum=0) for j, v in enumerate(value)]


@dataclass
class TDCDScenario(Scenario):
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
        from fedbound.sim.tdcd import LOSSES  # sim (and torch) on first use

        self.layout()
        if self.loss not in LOSSES:
            raise ValueError(f"loss={self.loss!r} must be one of {LOSSES}")
        require_float("scale", self.scale, low=FEATURE_NORM_RANGE[0], high=FEATURE_NORM_RANGE[1])
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
        from fedbound.sim.tdcd import Layout

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
    import torch

    from fedbound.sim.tdcd import BlockLinear, synthetic_data

    lay = s.layout()
    gen = torch.Generator().manual_seed(s.seed)
    X, y = synthetic_data(s.n, lay.D, loss=s.loss, generator=gen, scale=s.scale,
                          noise=s.label_noise)
    direction = torch.randn(lay.D, generator=gen, dtype=torch.float64)
    theta0 = s.distance * direction / direction.norm()
    return Setup(BlockLinear(X, y, lay, loss=s.loss), theta0, gen)


@lru_cache(maxsize=16)
def _run_cached(scenario_json: str, eta: float) -> TDCDTrace:
    from fedbound.sim.tdcd import run_tdcd

    s = TDCDScenario.from_dict(json.loads(scenario_json))
    st = build(s)
    return run_tdcd(st.model, eta=eta, Q=s.Q, rounds=s.rounds, theta0=st.theta0,
                    replicas=s.replicas, generator=st.generator, t_comm=s.t_comm, t_comp=s.t_comp)


def run(s: TDCDScenario, eta: float) -> TDCDTrace:
    """The scenario's run at step ``eta`` (cached: parameters and measurement share it)."""
    return _run_cached(s.to_json(indent=None), float(eta))


def delta(st: Setup) -> float:
    """L(theta^0) - L_inf, the numerator of (15)'s first term (bounded by Assumption 2)."""
    return float(st.model.loss(st.model.split(st.theta0)[None])[0]) - st.model.f_inf


def sigma(s: TDCDScenario, st: Setup, eta: float) -> np.ndarray:
    """sigma_j, [N]: the model's uniform bound, or (least squares) the square root of the
    largest exact Var(g_kj) at the visited round-start models of the run at ``eta``."""
    if st.model.sigma is not None:
        return np.asarray(st.model.sigma)
    trace = run(s, eta)
    return np.sqrt(trace.sigma2.amax(dim=(0, 1)).numpy())


def remark5_eta(s: TDCDScenario, c: float) -> float:
    """eta = c/(Q sqrt(R)), Remark 5."""
    return c / (s.Q * math.sqrt(s.rounds))


def drift_ratio(trace: TDCDTrace) -> np.ndarray:
    """drift / G0 per replica and round, [R, rounds] (0 where G0 = 0: then no client moves)."""
    g0 = trace.g0.numpy()
    return np.where(g0 > 0, trace.drift.numpy() / np.where(g0 > 0, g0, 1.0), 0.0)


def _roundoff(st: Setup) -> float:
    """Round-off level of ||grad L||^2 at the scale of theta^0."""
    return roundoff(st.model.L, float(st.theta0.norm()))


# ---------------------------------------------------------------------- adapters


class TDCD(Adapter):
    """What the TDCD results share: the derivation of (15)'s constants and the run."""

    scenario_type = TDCDScenario
    series_label = "rounds R [count]"
    lhs_label = r"$\frac{1}{R}\sum_{r<R}\|\nabla\mathcal{L}(\theta^{rQ})\|^2$ [loss²/param²]"

    def _derive(self, s: TDCDScenario, thm) -> dict[str, Any]:
        if s.c is not None:
            raise ValueError(f"c={s.c}: only tdcd.remark5 uses c; leave it null")
        st = build(s)
        m = st.model
        params = {"L": m.L, "L_max": m.L_max, "Delta": delta(st), "R": s.rounds, "Q": s.Q}
        if "K" in thm.params:   # refined: K_j of the silo-average noise sigma_j^2 / K_j
            params["K"] = np.asarray(s.clients, dtype=float)
        params["eta"] = float(s.eta) if s.eta is not None else thm.max_step(**params)
        params["sigma"] = sigma(s, st, params["eta"])
        return params

    def step(self, s: TDCDScenario, params) -> float:
        """The step size the run uses."""
        return params["eta"]

    def _measure(self, s: TDCDScenario, params, exact: bool) -> Measurement:
        st = build(s)
        trace = run(s, self.step(s, params))
        ok = ~trace.diverged.numpy()
        per_round = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=per_round.mean(axis=1), diverged=int((~ok).sum()),
                           series=per_round.mean(axis=0) if ok.any() else None,
                           atol=_roundoff(st))

    def _footprint(self, s: TDCDScenario, exact: bool) -> Footprint:
        """Memory: the data X [n, D] and its padded blocks [n, N, d], the round's sampling
        keys [R, lcm(K_j), n], the batch's blocks [R, batch, N, d], the exact variance's
        per-sample gradients [R, n, N, d], the clients' models [R, N, K, d] and the records
        [R, rounds, N]. Work: rounds x (Q local steps on the batch + the per-sample pass)."""
        N, D, d, K = len(s.blocks), sum(s.blocks), max(s.blocks), max(s.clients)
        C, R = math.lcm(*s.clients), s.replicas
        silos = f"silos={N} x block={_n(d)} (max blocks)"
        memory = {
            f"n={_n(s.n)} x features={_n(D)} (sum of blocks) x 4 copies of 8 B":
                8 * (3 * s.n * D + s.n * N * d) + 24 * D * D,
            f"replicas={_n(R)} x lcm(clients)={_n(C)} x n={_n(s.n)} x 8 B (the batch draw's keys)":
                8 * R * C * s.n,
            f"replicas={_n(R)} x batch={_n(s.batch)} x {silos} x 4 of 8 B": 32 * R * s.batch * N * d,
            f"replicas={_n(R)} x n={_n(s.n)} x {silos} x 2 of 8 B (per-sample gradients)":
                16 * R * s.n * N * d,
            f"replicas={_n(R)} x {silos} x clients={_n(K)} (max clients) x 4 of 8 B": 32 * R * N * K * d,
            f"replicas={_n(R)} x rounds={_n(s.rounds)} x (silos={N} + 5) records of 8 B":
                8 * R * s.rounds * (N + 5),
        }
        steps = {
            f"rounds={_n(s.rounds)} x Q={_n(s.Q)} x replicas={_n(R)} x batch={_n(s.batch)} x {silos}":
                s.rounds * s.Q * (8 * R * s.batch * N * d + LOOP_OVERHEAD),
            f"rounds={_n(s.rounds)} x replicas={_n(R)} x n={_n(s.n)} x {silos}":
                s.rounds * 6 * R * s.n * N * d,
            f"rounds={_n(s.rounds)} x replicas={_n(R)} x lcm(clients)={_n(C)} x n={_n(s.n)} x log n":
                s.rounds * 2 * R * C * s.n * max(1, math.log2(s.n)),
        }
        return Footprint.of(memory, steps)

    def _bound_series(self, s: TDCDScenario, thm, params, n: int):
        """The bound after r = 1..R rounds at the run's step."""
        r = np.arange(1, n + 1)
        return r, thm.evaluate(**{**params, "R": r.astype(float)})

    def _draw(self, draw: Draw) -> TDCDScenario:
        """N in 1..3 silos, feature splits, unequal K_j, a batch, the loss, Q in 1..8, 3 to 30
        rounds, and the step anywhere from 5% of the largest admissible one up to it."""
        from fedbound.sim.tdcd import LOSSES

        N = draw.integer(1, 3)
        clients = [draw.integer(1, 3) for _ in range(N)]
        n = draw.integer(10, 60)
        s = TDCDScenario(
            blocks=[draw.integer(1, 3) for _ in range(N)], clients=clients, n=n,
            batch=math.lcm(*clients) * draw.integer(1, 3), loss=draw.choice(LOSSES),
            Q=draw.integer(1, 8), rounds=draw.integer(3, 30), distance=draw.uniform(0, 3),
            replicas=draw.integer(16, 32), seed=draw.integer(0, 2**16 - 1))
        s.validate()
        thm = self.theorem()
        frac = draw.uniform(0.05, 1.0)
        return s.replace(**{thm.step: frac * self.parameters(s, thm)[thm.step]})


@register_adapter
class Theorem1(TDCD):
    key = "tdcd.theorem1"
    default = TDCDScenario()
    tags = Tags(estimated=True)

    def _estimated_parts(self, scenario, thm, *, problem, x1, settings):
        return estimated_parts(scenario, thm, problem=problem, x1=x1, settings=settings)


@register_adapter
class Lemma2(TDCD):
    """Lemma 2 pathwise: the worst drift / G0 over rounds and replicas against (30) at G0 = 1."""

    key = "tdcd.lemma2"
    default = TDCDScenario(Q=8, rounds=20, replicas=32)

    def _derive(self, s: TDCDScenario, thm) -> dict[str, Any]:
        if s.c is not None:
            raise ValueError(f"c={s.c}: only tdcd.remark5 uses c; leave it null")
        params = {"Q": s.Q, "L_max": build(s).model.L_max, "G0": 1.0}
        params["eta"] = float(s.eta) if s.eta is not None else thm.max_step(**params)
        return params

    def _measure(self, s: TDCDScenario, params, exact: bool) -> Measurement:
        """The worst drift/G0; a drift of two gradients computed in float64 that are equal up
        to round-off is a ratio of up to about Q (2 eps)^2 per unit of G0: ``atol``, with a
        margin (the bound itself is below it only when eta L_max is below ~1e-11)."""
        ratio = drift_ratio(run(s, params["eta"]))
        return Measurement(exact=float(ratio.max()), series=ratio.max(axis=0),
                           atol=s.Q * (1e3 * np.finfo(float).eps) ** 2)

    def _plot(self, ax, s: TDCDScenario, thm, params, m: Measurement) -> None:
        """The drift of every round and replica against its bound."""
        trace = run(s, params["eta"])
        rhs = thm.evaluate(**{**params, "G0": trace.g0.numpy().ravel()})
        ax.loglog(rhs, trace.drift.numpy().ravel(), ".", ms=3, label="rounds x replicas")
        lim = [rhs[rhs > 0].min(), rhs.max()]
        ax.loglog(lim, lim, "k--", lw=1, label="drift = bound")
        ax.set_xlabel(f"bound of {self.key} ({thm.variant}) [loss²/param²]")
        ax.set_ylabel("drift, the left side of (30) [loss²/param²]")
        ax.set_title(f"{self.key} [{thm.variant}]: the drift of every round, pathwise")
        ax.legend()


@register_adapter
class Remark5(TDCD):
    """Remark 5: the rate at eta = c/(Q sqrt R); c null = the largest admissible."""

    key = "tdcd.remark5"
    default = TDCDScenario(rounds=100, replicas=32)

    def _derive(self, s: TDCDScenario, thm) -> dict[str, Any]:
        if s.eta is not None:
            raise ValueError(f"eta={s.eta}: tdcd.remark5 fixes eta = c/(Q sqrt R); set c "
                             "(or leave it null) and leave eta null")
        st = build(s)
        m = st.model
        params = {"L": m.L, "L_max": m.L_max, "Delta": delta(st), "R": s.rounds}
        params["c"] = float(s.c) if s.c is not None else thm.max_step(**params)
        params["sigma"] = sigma(s, st, remark5_eta(s, params["c"]))
        return params

    def step(self, s: TDCDScenario, params) -> float:
        return remark5_eta(s, params["c"])

    def _bound_series(self, s: TDCDScenario, thm, params, n: int):
        """Remark 5's eta is fixed by the final R: the bound is drawn at R only."""
        return np.array([n]), np.array([thm.evaluate(**params)])


# ---------------------------------------------------------------------- estimated constants


class _Flat:
    """A TDCD model (``sim.tdcd.BlockLinear`` or ``ModuleModel``) seen as a problem of
    ``sim.estimate`` at flat parameter vectors [..., dim]: L(theta) and its gradient, (2).
    ``f_inf``: the model's, else 0 (the losses of ``sim.tdcd`` are nonnegative: a certified
    lower bound)."""

    def __init__(self, model):
        self.model, self.dim, self.device = model, model.dim, model.device
        self.f_inf = float(getattr(model, "f_inf", 0.0))

    def _blocks(self, x):
        return self.model.split(x.reshape(-1, self.dim))

    def loss(self, x):
        return self.model.loss(self._blocks(x)).reshape(x.shape[:-1])

    def grad(self, x):
        return self.model.join(self.model.grad(self._blocks(x))).reshape(x.shape)


def _client_grads(model, hub, rows, other):
    """g_kj of Das et al. 2022, (4), of every client at hub models [P, N, d] on the batches
    ``rows`` [P, batch] with the frozen embeddings ``other`` (Phi_{-j}): [P, N, K, d]."""
    P, N, d = hub.shape
    clients = hub[:, :, None].expand(P, N, max(model.layout.clients), d)
    return model.client_grads(clients, rows, other)


def _frozen(model, hub, rows):
    """Phi_{-j} = sum_{l != j} Phi_l at hub models [P, N, d] on ``rows`` [P, batch]."""
    own = model.embed(hub, rows)
    return own.sum(dim=1, keepdim=True) - own


class _SiloNoise(_Flat):
    """Silo j's side of Assumption 3, (9): ``grad`` is block j of grad L, and
    ``stochastic_grad`` the client gradient g_1j of (4) at the round start (every client
    at the hub model) on a batch drawn as ``sim.tdcd.draw_batch`` draws it, so that
    ``sim.estimate.gradient_variance`` estimates sigma_j."""

    def __init__(self, model, j: int):
        super().__init__(model)
        self.j, self.width = j, model.dims[j]

    def grad(self, x):
        return self.model.grad(self._blocks(x))[:, self.j, : self.width].reshape(
            *x.shape[:-1], self.width)

    def stochastic_grad(self, x, generator):
        from fedbound.sim.tdcd import draw_batch

        hub = self._blocks(x)
        rows = draw_batch(self.model.layout, hub.shape[0], generator, self.device)
        g = _client_grads(self.model, hub, rows, _frozen(self.model, hub, rows))
        return g[:, self.j, 0, : self.width].reshape(*x.shape[:-1], self.width)


class _OwnBlock:
    """(7) in the own block: theta_j -> g_1j, the gradient in block j of the mean loss over
    silo j's first client's share of a mini-batch, the other blocks held at an anchor hub
    model, one batch per point (``anchors`` [P, N, d], ``rows`` [P, batch]). Its Hessian's
    largest eigenvalue magnitude, by ``sim.estimate.lipschitz``, is the block constant
    L_{1,j} at that point and batch (Das et al. 2022, Assumption 1; the block constant
    suffices, Lemma 2 moves only block j). The gradient goes through ``torch.func`` (and
    the model's ``embed``), so forward-mode Hessian-vector products pass through it."""

    def __init__(self, model, j: int, anchors, rows):
        self.model, self.j, self.anchors = model, j, anchors
        self.rows = rows[:, : model.layout.client_batch[j]]
        self.dim, self.device = model.dims[j], model.device
        self.loss = _loss_of(model)

    def points(self):
        return self.anchors[:, self.j, : self.dim]

    def _client_loss(self, hub, rows):
        z = self.model.embed(hub[None], rows[None]).sum(dim=1)[0]           # [b, E]
        return self.loss(z, self.model.y[rows]).mean()

    def grad(self, x):
        import torch
        from torch.func import grad, vmap

        P, reps = self.anchors.shape[0], math.prod(x.shape[1:-1])
        block = torch.nn.functional.pad(x.reshape(P, reps, self.dim), (0, self.model.d - self.dim))
        silo = torch.arange(self.anchors.shape[1], device=x.device)[:, None] == self.j
        hub = torch.where(silo, block[:, :, None, :], self.anchors[:, None])    # [P, reps, N, d]
        rows = self.rows[:, None].expand(P, reps, self.rows.shape[-1])
        g = vmap(vmap(grad(self._client_loss)))(hub, rows)
        return g[..., self.j, : self.dim].reshape(x.shape)


def _loss_of(model):
    """l(z [..., E], y) -> [...] of a ``sim.tdcd`` model (its loss_fn, or the block-linear
    model's loss kind)."""
    from fedbound.sim.tdcd import loss_value

    fn = getattr(model, "loss_fn", None)
    return fn if fn is not None else (lambda z, y: loss_value(model.loss_kind, z[..., 0], y))


def estimate_tdcd_constants(model, x1, generator, settings) -> tuple[dict[str, Any], list]:
    """The constants of Das et al. 2022, Theorem 1 estimated on ``model`` at points along a
    gradient-descent trajectory from ``x1`` (``verify.estimated.EstimationSettings``):
    ({"L", "L_max", "Delta": sim.estimate.Estimate}, [sigma_j Estimate per silo]).

    L: Hessian power iteration on L(theta), (6); L_max: the same on the own-block map (7)
    of a client's mini-batch gradient with the other silos' embeddings frozen, at every
    point with ``settings.starts`` fresh batches each, the largest over the silos; sigma_j:
    the variance of a client's gradient g_kj around grad_(j) L at the round start, (9);
    Delta: L(x_1) minus the lowest loss along the trajectory (upper end: minus the model's
    f_inf, 0 for these nonnegative losses)."""
    from dataclasses import replace

    from fedbound.sim import estimate
    from fedbound.sim.tdcd import draw_batch

    flat = _Flat(model)
    L, points, f_ref = along_trajectory(flat, x1, generator, settings)
    anchors = model.split(points).repeat_interleave(settings.starts, dim=0)
    rows = draw_batch(model.layout, anchors.shape[0], generator, model.device)
    blocks = [estimate.lipschitz(own, own.points(), generator=generator,
                                 steps=settings.power_steps, starts=1)
              for own in (_OwnBlock(model, j, anchors, rows) for j in range(model.layout.N))]
    top = max(blocks, key=lambda e: e.upper)
    L_max = replace(top, param="L_max", method=f"own-block {top.method}; max over "
                    f"{model.layout.N} silos and {anchors.shape[0]} (point, client batch) pairs")
    sigma = [replace(estimate.gradient_variance(_SiloNoise(model, j), points, settings.samples,
                                                generator), param=f"sigma_{j + 1}")
             for j in range(model.layout.N)]
    delta = estimate.delta(flat, x1, max(f_ref, flat.f_inf))
    return {"L": L, "L_max": L_max, "Delta": delta}, sigma


def estimated_parts(s: TDCDScenario, thm, *, problem, x1, settings):
    """Theorem 1 with estimated constants (``verify.estimated``): L, L_max and Delta
    estimated on ``problem`` (a ``sim.tdcd`` model; default the scenario's own
    ``BlockLinear``) and sigma_j per silo (:func:`estimate_tdcd_constants`); Q, R (and K_j
    for the refined variant) from the scenario. The bound increases with every sigma_j
    (through S and Sbar), so sigma is fixed at the upper ends of its intervals, the
    conservative end exactly; the other constants go through the grid of
    ``verify.estimated``. Measured with ``sim.tdcd.run_tdcd`` as the adapter measures (15)."""

    from fedbound.sim.tdcd import run_tdcd
    from fedbound.verify.api import Parts, estimated_start

    st = build(s)
    model, x1, own = estimated_start(problem, x1, st.model, st.theta0)
    estimates, sigma = estimate_tdcd_constants(model, x1, st.generator, settings)
    atol = roundoff(estimates["L"].upper, float(x1.norm()))

    def measure(params):
        trace = run_tdcd(model, eta=params["eta"], Q=s.Q, rounds=s.rounds, theta0=x1,
                         replicas=s.replicas, generator=st.generator, t_comm=s.t_comm,
                         t_comp=s.t_comp)
        ok = ~trace.diverged.numpy()
        per_round = trace.grad_sq_norm.numpy()[ok]
        return Measurement(values=per_round.mean(axis=1), diverged=int((~ok).sum()), atol=atol)

    params: dict[str, Any] = {"Q": s.Q, "R": s.rounds,
                              "sigma": np.array([e.upper for e in sigma])}
    if "K" in thm.params:
        params["K"] = np.asarray(model.layout.clients, dtype=float)
    notes = [f"estimated: {e} (the bound increases with sigma_j: evaluated at the upper end)"
             for e in sigma]
    if not own:
        notes.append(f"problem: {type(model).__name__} (dim {model.dim}) passed in; the "
                     "scenario's data fields are not used")
    return Parts(params=params, estimates=estimates, step=s.eta, measure=measure,
                 notes=tuple(notes))


# ---------------------------------------------------------------------- rate sweeps

register_sweep("tdcd.remark5", Sweep("R", "rounds", (25, 50, 100, 200, 400),
                                     note="eta = c/(Q sqrt R)"))
