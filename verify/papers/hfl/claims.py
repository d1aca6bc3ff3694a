"""Ali & Arafa 2025 (delay-sensitive hierarchical FL): the experiments of Section V, small.

Claims reproduced (each a :class:`verify.reproduce.Finding`):

(a) With a long global delay (c_g = 10), S = 0 is ahead early but S = 20 is ahead later:
    "S = 0 outperforms S = 20" under a stringent time limit, and the reverse afterwards
    (Ali & Arafa 2025, Section V, Fig. 7a).
(b) Some number of groups is best: 64 clients in 4 groups beat 2 or 8 groups at S = 6
    (Section V, Fig. 9): with 2 groups the intra-group delay limits the local iterations,
    with 8 the LPS-to-GPS delay limits the global rounds.

The small-scale analogue. The 8x8 digits (``sim.data.load_digits``) and an MLP 64-32-10
(``sim.neural.mlp``); every client draws its mini-batches (``BATCH`` samples) from all the
data (the simulator's clients are i.i.d. on the problem). The delays are the paper's
linear model (Section IV) with the paper's parameters: Fig. 7a's {d, b, e, f, d_g, b_g,
e_g, f_g} with 2 groups of ``CLIENTS_A`` clients (c_g = 10 as in the figure), and Fig. 9's
with ``CLIENTS_B`` clients split equally into 2, 4 and 8 groups (the paper's 64). One
delay path per configuration is drawn from the seed (``bounds.delays``) and every replica
(the seeds of a row) runs its SGD noise on it, so the bound, conditional on the path, is
one number per configuration. The step is alpha = 1 / (the upper end of the estimated
L), the largest that Theorem 2 (alpha <= 1/L) admits over the estimated interval. The
metric is the training loss f(x^u) of the global model at a wall-clock time: the model of
the last round finished by then.

- (a): rows S = 0 and S = 20 at an early time (``EARLY`` of the horizon) and at the
  horizon T; agrees when S = 0 is measured lower early and S = 20 lower at T.
- (b): rows 2, 4, 8 groups at the horizon; agrees when 4 groups is measured lower than
  both others.

The bound: Theorem 2, (20) (``hfl.theorem2``, the ``proof`` variant: what the published
proof, Appendix D, supports) on each row's path up to its time, with L, G, sigma and Delta
estimated on the same network from the same start (``verify.papers.hfl.estimated_parts``)
at the conservative end (``verify.estimated.conservative_bound``): the "bound" column and
``bound_agrees``. It bounds the average ||grad f(x^u)||^2 over the rounds, not the loss;
what is compared is the order. The published variants are non-decreasing in S (fewer
rounds, longer local runs), so they never favour S > 0. The prediction also gives the
``refined`` variant, derived by fedbound, not published (it keeps the variance reduction
of averaging a round's t |N_i| stochastic gradients and is not monotone in S), and whether
it orders the rows as measured.

``quick``: a shorter horizon, fewer replicas and estimation samples.
"""

from __future__ import annotations

import numpy as np

from fedbound import bounds
from fedbound.bounds.references import cite
from fedbound.verify.api import (
    Finding,
    Row,
    bound_order,
    conservative_bound,
    digits_mlp,
    estimation_settings,
    mlp_parameters,
    order,
    register_reproduction,
    row,
    training_footprint,
)

from .adapters import HFLScenario, _schedule_size, estimated_parts, paths

PAPER = cite("hfl")
BATCH = 4
#: Fig. 7a: {d, b, e, f, d_g, b_g, e_g, f_g} (Section V; c_g = 10)
FIG7A = (0.01, 0.85, 0.001, 0.085, 4.0, 2.0, 0.4, 0.2)
#: Fig. 9 (Section V)
FIG9 = (0.1, 1.4, 0.01, 0.14, 0.5, 5.0, 0.05, 0.5)
CLIENTS_A = 4
S_A = (0.0, 20.0)
CLIENTS_B = 64
GROUPS_B = (2, 4, 8)
S_B = 6.0
#: the early time of claim (a), as a share of the horizon (Fig. 7a: the crossover near 750
#: of 2000)
EARLY = 0.25
T_QUICK, T_FULL = 240.0, 800.0
REPLICAS_QUICK, REPLICAS_FULL = 6, 12


def problem(device=None):
    """f: the mean cross-entropy of the MLP on all digits; x^1 its initial parameters
    (built after ``torch.manual_seed(0)``: the same start for every seed)."""
    return digits_mlp(BATCH, device)


def scenario(sizes, delays, S: float, T: float, replicas: int, seed: int):
    return HFLScenario(sizes=list(sizes), delays=list(delays), S=S, T=T, replicas=replicas,
                       seed=seed, mode="conditional")


def at_time(trace, end_time: np.ndarray, when: float) -> tuple[np.ndarray, int]:
    """The loss per replica of the global model at wall-clock ``when`` (the model after the
    last round that ended by then) and that number of rounds."""
    rounds = int(np.searchsorted(end_time, when, side="right"))
    return trace.loss.numpy()[:, rounds], rounds


def run(*, quick: bool, seed: int, device=None) -> tuple[Finding, ...]:
    import torch

    T = T_QUICK if quick else T_FULL
    R = REPLICAS_QUICK if quick else REPLICAS_FULL
    pr, x1 = problem(device)
    thm = bounds.get("hfl.theorem2")
    refined = bounds.get("hfl.theorem2", "refined")
    a = [(S, scenario([CLIENTS_A] * 2, FIG7A, S, T, R, seed)) for S in S_A]
    b = [(G, scenario([CLIENTS_B // G] * G, FIG9, S_B, T, R, seed)) for G in GROUPS_B]
    parts = estimated_parts(a[0][1], thm, problem=pr, x1=x1, settings=estimation_settings(quick))
    alpha = 1.0 / parts.estimates["L"].upper

    def measured(s, times):
        """Per time: (loss per replica, the path's t up to then) from one run on the path."""
        from fedbound.sim.hfl import run_hfl

        sched = paths(s)
        t, end = sched.path(0), sched.end_time[0, : int(sched.U[0])]
        trace = run_hfl(pr, sizes=s.sizes, alpha=alpha, x1=x1, replicas=s.replicas, t=t,
                        generator=torch.Generator().manual_seed(s.seed + 1))
        out = []
        for when in times:
            loss, rounds = at_time(trace, end, when)
            out.append((loss, t[:rounds]))
        return out

    def bounds_at(sizes, t) -> tuple[float | None, float | None]:
        if t.shape[0] == 0:
            return None, None
        params = {"sizes": np.array(sizes), "t": t, "alpha": alpha}
        return tuple(conservative(th, params, parts.estimates) for th in (thm, refined))

    def make_rows(items):
        rows, refined_rows = [], []
        for label, sizes, (loss, t) in items:
            published, own = bounds_at(sizes, t)
            rows.append(row(label, loss.tolist(), published))
            refined_rows.append(row(label, loss.tolist(), own))
        return tuple(rows), tuple(refined_rows)

    items_a = []
    for S, s in a:
        early, late = measured(s, (EARLY * T, T))
        items_a += [(f"S = {S:g} at time {EARLY * T:g}", s.sizes, early),
                    (f"S = {S:g} at time {T:g}", s.sizes, late)]
    items_b = [(f"{G} groups of {CLIENTS_B // G}", s.sizes, measured(s, (T,))[0]) for G, s in b]
    return (finding_a(*make_rows(items_a), alpha, T),
            finding_b(*make_rows(items_b), alpha, T))


def conservative(thm, params, estimates) -> float | None:
    """The bound at the conservative end of the estimates; None where inadmissible."""
    value, _, violations = conservative_bound(thm, params, estimates)
    return None if violations else value


def _both(results) -> bool | None:
    if False in results:
        return False
    return True if all(results) else None


def _prediction(rows, refined_rows, alpha: float) -> str:
    def values(rs):
        return "; ".join(f"{r.config}: {'inadmissible' if r.bound is None else f'{r.bound:.4g}'}"
                         for r in rs)

    agree = {True: "orders them as measured", False: "orders them otherwise than measured",
             None: "cannot be compared with the measurement (no pair separated or no value)"}
    return (f"Theorem 2, (20) (proof variant, published) at alpha = {alpha:.3g} on each path: "
            f"{values(rows)}. The refined variant (derived by fedbound, not published): "
            f"{values(refined_rows)}; it {agree[bound_order(refined_rows)]}")


def finding_a(rows: tuple[Row, ...], refined_rows, alpha: float, T: float) -> Finding:
    s0_early, s0_late, s20_early, s20_late = rows
    early, late = order(s0_early, s20_early), order(s20_late, s0_late)
    agrees = _both([early, late])
    words = {True: "lower", False: "higher", None: "not separated from"}
    said = (f"early, S = 0 is {words[early]} than S = 20; at T = {T:g}, S = 20 is "
            f"{words[late]} than S = 0")
    return Finding(
        claim="with a long global delay, S = 0 is ahead under a short time limit and S = 20 "
              "ahead under a long one (a crossover in wall-clock time)",
        source=cite("hfl", "Section V, Fig. 7a"),
        metric="training loss f(x^u) of the global model at a wall-clock time (2 groups of "
               f"{CLIENTS_A} clients, Fig. 7a's delays)",
        rows=rows, measured=said, agrees=agrees,
        prediction=_prediction(rows, refined_rows, alpha), bound_agrees=bound_order(rows))


def finding_b(rows: tuple[Row, ...], refined_rows, alpha: float, T: float) -> Finding:
    two, four, eight = rows
    agrees = _both([order(four, two), order(four, eight)])
    best = min(rows, key=lambda r: r.measured)
    said = (f"lowest mean at {best.config}; 4 groups vs 2: {order(four, two)}, vs 8: "
            f"{order(four, eight)} (True: 4 groups measured lower)")
    return Finding(
        claim="an intermediate number of groups (4 of 2, 4, 8) trains best",
        source=cite("hfl", "Section V, Fig. 9"),
        metric=f"training loss f(x^u) of the global model at time T = {T:g} ({CLIENTS_B} "
               f"clients, S = {S_B:g}, Fig. 9's delays)",
        rows=rows, measured=said, agrees=agrees,
        prediction=_prediction(rows, refined_rows, alpha), bound_agrees=bound_order(rows))


def footprints(*, quick: bool) -> dict:
    """The estimate of each run (``verify.api.training_footprint``): its rounds within T
    times the local iterations of a round, every client of every replica a model."""
    T = T_QUICK if quick else T_FULL
    R = REPLICAS_QUICK if quick else REPLICAS_FULL
    runs = {f"S = {S:g}": scenario([CLIENTS_A] * 2, FIG7A, S, T, R, 0) for S in S_A}
    runs |= {f"{G} groups of {CLIENTS_B // G}": scenario([CLIENTS_B // G] * G, FIG9, S_B, T, R, 0)
             for G in GROUPS_B}
    out = {}
    for label, s in runs.items():
        rounds, _, _, per_round = _schedule_size(s)
        out[label] = training_footprint(steps=rounds * per_round, models=R * sum(s.sizes),
                                        parameters=mlp_parameters((64, 32, 10)), batch=BATCH)
    return out


register_reproduction("hfl", run, footprints)
