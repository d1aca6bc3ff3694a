"""Castiglia et al. 2021 (MLL-SGD): the experiments of Section 6, at small scale.

Claims reproduced (each a :class:`verify.reproduce.Finding`):

(a) "For a given q tau ... a larger tau leads to higher convergence error than a larger q
    would" (Castiglia et al. 2021, Section 5, after Theorem 1; tested in Section 6, Fig. 1):
    at q tau = 32, MLL-SGD with (q = 8, tau = 4) reaches a lower training loss than with
    (q = 4, tau = 8).
(b) "As the number of hubs increases, the larger zeta becomes" on a path hub graph, and a
    larger zeta slows convergence (Section 6, Figs. 2 and 3; "minimal" for the CNN, clear
    for ResNet-18): the same workers spread over more hubs on a path do worse.

The small-scale analogue. The 8x8 digits (``sim.data.load_digits``, 1797 samples) and an
MLP 64-32-10 with tanh (``sim.neural.mlp``), the cross-entropy over all samples as F;
every worker draws its mini-batches (``BATCH`` samples) from all the data, as the paper's
workers re-sample an i.i.d. subset of the training set every round (its experiments are
i.i.d.). q tau = 32 in every configuration, as in the paper ("we let q tau = 32 for all
HL-SGD and MLL-SGD variations"), all p_i = 1. The measured metric is the paper's: the
training loss F(u_k) of the averaged model, evaluated every 32 iterations (Section 6), here
averaged over those evaluations (the area under the paper's training-loss curve divided by
its length), one value per replica (the seeds of a row are the replicas of one run).

- (a): a complete hub graph (zeta = 0) of ``HUBS_A`` hubs of 5 workers whose weights are
  proportional to the paper's data shares 5, 10, 20, 25, 40% (Fig. 1's five groups, one
  worker of each group per hub).
- (b): ``WORKERS_B`` workers with uniform weights spread over 3, 6 and 12 hubs on a path
  (zeta from ``bounds.topology``: the Metropolis-Hastings weights), q = 4, tau = 8 (the
  paper's Fig. 2 setting).

The step. The paper trains its CNN with a step of 0.01. Here every run uses the largest
step at which condition (12) of Theorem 1 holds for both configurations of claim (a) over
the whole box of the estimated constants (about 0.006 on this problem): the paper's order
of magnitude, and the bound is then admissible for claim (a). On the path graphs of claim
(b) (12) asks for a much smaller step (zeta near 1): there the bound is inadmissible at
the step run, and the finding says so instead of giving a number.

The bound: Castiglia et al. 2021, Theorem 1, (13) (``mllsgd.theorem1``) with L, sigma and
Delta estimated on the same network from the same start (``verify.papers.mllsgd.
estimated_parts``, ``sim.estimate``), at the conservative end of their intervals
(``verify.estimated.conservative_bound``). It bounds the average of ||grad F(u_k)||^2,
not the loss: what is compared is the order it gives the configurations. At a fixed q tau
its fourth term is not monotone in tau, so it orders claim (a)'s configurations opposite
to the paper's claim (the bound is larger for q = 8, tau = 4): an inconsistency between
the paper's text and its own Theorem 1, which the finding reports as it is.

``quick``: ``K_QUICK`` iterations, ``REPLICAS_QUICK`` replicas and fewer estimation
samples; the full run: ``K_FULL`` iterations and ``REPLICAS_FULL`` replicas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedbound import bounds
from fedbound.bounds.references import cite
from fedbound.verify.api import (
    Finding,
    Row,
    bound_order,
    conservative_bound,
    digits_mlp,
    estimate_grid,
    estimation_settings,
    increasing,
    mlp_parameters,
    order,
    register_reproduction,
    row,
    training_footprint,
)

from .adapters import MLLSGDScenario, build, estimated_parts

if TYPE_CHECKING:  # annotations only: torch is imported where it is used
    import torch

PAPER = cite("mllsgd")
BATCH = 8
PERIOD = 32  # q tau in every configuration, and the evaluation interval (Section 6)
HUBS_A = 2
#: Fig. 1's data shares of its five groups of workers (Section 6)
SHARES = (0.05, 0.10, 0.20, 0.25, 0.40)
WORKERS_B = 12
HUBS_B = (3, 6, 12)
K_QUICK, K_FULL = 384, 1024
REPLICAS_QUICK, REPLICAS_FULL = 6, 12


def problem(device=None):
    """F: the mean cross-entropy of the MLP on all digits, x_1 its initial parameters
    (``verify.api.digits_mlp``)."""
    return digits_mlp(BATCH, device)


def scenario(*, hubs: int, workers: int, graph: str, q: int, K: int, replicas: int, seed: int,
             weights=None):
    return MLLSGDScenario(hubs=hubs, workers_per_hub=workers, graph=graph, weights=weights,
                          p=1.0, K=K, q=q, tau=PERIOD // q, replicas=replicas, seed=seed)


def configurations(quick: bool, seed: int) -> dict[str, list]:
    """The scenarios of each claim (topology, q, tau, weights; their ``problem`` field is
    not used: the network is passed in)."""
    K = K_QUICK if quick else K_FULL
    R = REPLICAS_QUICK if quick else REPLICAS_FULL
    weights = [share for _ in range(HUBS_A) for share in SHARES]
    a = [("q = 8, tau = 4", scenario(hubs=HUBS_A, workers=len(SHARES), graph="complete", q=8,
                                     K=K, replicas=R, seed=seed, weights=weights)),
         ("q = 4, tau = 8", scenario(hubs=HUBS_A, workers=len(SHARES), graph="complete", q=4,
                                     K=K, replicas=R, seed=seed, weights=weights))]
    b = [(f"{D} hubs on a path", scenario(hubs=D, workers=WORKERS_B // D, graph="path", q=4, K=K,
                                           replicas=R, seed=seed)) for D in HUBS_B]
    return {"a": a, "b": b}


def measure(s, pr, x1, eta: float) -> torch.Tensor:
    """The metric per replica [R]: F(u_k) averaged over k = 1, 1 + 32, ..., K - 31 (the
    paper's evaluations every 32 iterations), from one run of ``sim.mllsgd.run_mllsgd``
    with the scenario's topology, weights, p and seed."""
    import torch

    from fedbound.sim.mllsgd import run_mllsgd

    st = build(s)
    trace = run_mllsgd(pr, H=torch.as_tensor(st.H), hub_of=torch.as_tensor(st.hub_of),
                       w=torch.as_tensor(st.w), p=torch.as_tensor(st.p), eta=eta, K=s.K, q=s.q,
                       tau=s.tau, x1=x1, replicas=s.replicas, generator=st.generator,
                       record_every=PERIOD, record_grad=False)
    return trace.loss.mean(dim=-1)


def step(thm, parts, labels) -> float:
    """The largest step at which (12) holds for every configuration ``labels`` at every
    point of the grid of its estimates."""
    return min(float(thm.max_step(**{**parts[label].params, **point}))
               for label in labels for point in estimate_grid(parts[label].estimates))


def estimated(thm, configs: dict[str, list], quick: bool, pr, x1) -> dict:
    """``verify.papers.mllsgd.estimated_parts`` of every configuration, by label."""
    return {label: estimated_parts(s, thm, problem=pr, x1=x1, settings=estimation_settings(quick))
            for claim in configs.values() for label, s in claim}


def run(*, quick: bool, seed: int, device=None) -> tuple[Finding, ...]:
    thm = bounds.get("mllsgd.theorem1")
    pr, x1 = problem(device)
    configs = configurations(quick, seed)
    parts = estimated(thm, configs, quick, pr, x1)
    eta = step(thm, parts, [label for label, _ in configs["a"]])

    def rows(claim: str) -> tuple[tuple[Row, ...], list[str]]:
        out, refused = [], []
        for label, s in configs[claim]:
            p = parts[label]
            value, _, violations = conservative_bound(thm, {**p.params, "eta": eta}, p.estimates)
            if violations:
                refused.append(label)
            out.append(row(label, measure(s, pr, x1, eta).tolist(),
                           None if violations else value))
        return tuple(out), refused

    return finding_a(*rows("a"), eta, parts), finding_b(*rows("b"), eta, parts, configs["b"])


def _estimates_text(p) -> str:
    return ", ".join(f"{e.param} in [{e.lower:.3g}, {e.upper:.3g}]" for e in p.estimates.values())


def finding_a(rows, refused, eta, parts) -> Finding:
    larger_q, larger_tau = rows
    agrees = order(larger_q, larger_tau)
    said = {True: "q = 8, tau = 4 reaches a lower loss than q = 4, tau = 8",
            False: "q = 8, tau = 4 reaches a higher loss than q = 4, tau = 8",
            None: "the intervals of the two configurations overlap"}[agrees]
    if refused:
        prediction = f"inadmissible at eta = {eta:.3g} for {', '.join(refused)} ((12) fails)"
    else:
        better = "q = 8, tau = 4" if larger_q.bound < larger_tau.bound else "q = 4, tau = 8"
        prediction = (f"Theorem 1, (13) at eta = {eta:.3g} with estimated "
                      f"{_estimates_text(parts[larger_q.config])} is smaller for {better} "
                      f"(q = 8, tau = 4: {larger_q.bound:.4g}; q = 4, tau = 8: "
                      f"{larger_tau.bound:.4g}): at fixed q tau its "
                      "fourth term is not monotone in tau, so it does not order the "
                      "configurations as the paper's text says")
    return Finding(
        claim="at a fixed q tau = 32, a larger q (smaller tau) gives a lower training loss",
        source=cite("mllsgd", "Section 5 (remark after Theorem 1) and Section 6, Fig. 1"),
        metric="training loss F(u_k) of the averaged model, mean over the evaluations every "
               "32 iterations (2 hubs x 5 workers, complete hub graph, weights as Fig. 1's "
               "data shares)",
        rows=rows, measured=said, agrees=agrees, prediction=prediction,
        bound_agrees=bound_order(rows))


def finding_b(rows, refused, eta, parts, configs) -> Finding:
    zetas = ", ".join(f"{label}: zeta = {build(s).zeta:.3f}" for label, s in configs)
    agrees = increasing(rows)
    said = {True: "the loss increases with the number of hubs (with zeta)",
            False: "the loss decreases from one hub count to a larger one",
            None: "the intervals do not separate every step (" + zetas + ")"}[agrees]
    if refused:
        prediction = (f"Theorem 1 is inadmissible at the step run (eta = {eta:.3g}) for "
                      f"{', '.join(refused)}: (12) fails there ({zetas}), so the bound "
                      "makes no prediction for these runs")
    else:
        prediction = (f"Theorem 1, (13) at eta = {eta:.3g} grows with zeta ({zetas}), from "
                      f"{rows[0].bound:.4g} to {rows[-1].bound:.4g}")
    return Finding(
        claim="more hubs on a path hub graph (a larger zeta) slow convergence",
        source=cite("mllsgd", "Section 6, Figs. 2 and 3"),
        metric=f"training loss F(u_k) of the averaged model, mean over the evaluations every "
               f"32 iterations ({WORKERS_B} workers, uniform weights, q = 4, tau = 8)",
        rows=rows, measured=said, agrees=agrees, prediction=prediction,
        bound_agrees=bound_order(rows))


def footprints(*, quick: bool) -> dict:
    """The estimate of each configuration's run (``verify.api.training_footprint``)."""
    return {label: training_footprint(steps=s.K, models=s.replicas * s.hubs * s.workers_per_hub,
                                      parameters=mlp_parameters((64, 32, 10)), batch=BATCH)
            for claim in configurations(quick, 0).values() for label, s in claim}


register_reproduction("mllsgd", run, footprints)
