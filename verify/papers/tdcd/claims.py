"""Das et al. 2022 (TDCD): every qualitative claim of its experiments (Section 5), each
decided on paired differences over seeds (``verify.decide``) from the experiments of
``verify.papers.tdcd.experiments`` (its docstring gives the analogue and what differs).

``fedbound reproduce tdcd --list`` lists them; ``fedbound reproduce tdcd`` decides them.
"""

from __future__ import annotations

import numpy as np

from fedbound.bounds.references import cite
from fedbound.verify.api import (
    Claim,
    Experiment,
    above,
    between,
    register_claim,
    register_experiment,
    relative_margin,
)

from . import experiments as ex

#: the setting of Figs. 3-8 as the paper states it (Sections 5.1 and 5.2)
SETTING = {
    "model": "a ResNet-18 per silo with a penultimate linear layer, the silos' outputs summed "
             "into a cross-entropy (CIFAR-10, ModelNet40); an LSTM per silo (MIMIC-III)",
    "data": "CIFAR-10 (50,000 training images), MIMIC-III (14,681 patients), ModelNet40 (9,843 "
            "CAD models)",
    "split": "vertical: the left and right halves of each image (N = 2), the features (N = 4), "
             "the views (N = 12); horizontal: contiguous blocks of a random permutation of the "
             "sample IDs per client",
    "clients": "K = 50 per silo (CIFAR-10), 20 (MIMIC-III), 10 (ModelNet40); 100, 50, 20 in "
               "the larger networks",
    "delays": "t_Q = 3 t_comm + Q t_comp per round, t_comm = 10 or 100, t_comp = 1",
    "batch": "2000 sample IDs per round (320 for ModelNet40), reused for the Q local iterations",
    "step": "per Q, the best of a grid ([1e-5, 1e-4] on CIFAR-10) by the training loss",
    "horizon": "5000 iterations (CIFAR-10), 10,000 (MIMIC-III), 4000 (ModelNet40)",
    "metric": "test accuracy, F1 or top-5 accuracy against time units; training loss against "
              "iterations",
    "seeds": "one run per configuration",
}
ANALOGUE = ("the 1797 8x8 digits, N = 2 silos holding the top and bottom halves of each image, "
            "K = 2 clients per silo with 40 samples each of a batch of 80 (the paper's 2000/50), "
            "an MLP 32-16-10 per silo, outputs summed into the cross-entropy; Q in {1, 10, 20, "
            "30}, each at the best of the steps 0.05, 0.1, 0.2, 0.4; 240 (quick) or 900 local "
            "iterations; the training loss instead of test accuracy (the data are small); "
            "seeds as vectorised replicas")
Q_CURVES = tuple(f"Q = {Q}" for Q in ex.QS)


def _time_curves(ratio: float) -> tuple[str, ...]:
    return tuple(f"Q = {Q}, t_comm = {ratio:g}" for Q in ex.QS)


def _decision_time(outcome, ratio: float) -> float:
    """The time every Q's curve reaches at ``ratio`` (the largest Q ends first)."""
    return min(outcome.curve(label).x[-1] for label in _time_curves(ratio))


def _faster(ratio: float):
    def decide(outcome):
        T = _decision_time(outcome, ratio)
        one = f"Q = 1, t_comm = {ratio:g}"
        out = []
        for Q in ex.QS[1:]:
            hi, lo = outcome.at(one, T), outcome.at(f"Q = {Q}, t_comm = {ratio:g}", T)
            out.append(above(f"loss(Q = 1) - loss(Q = {Q}) at time {T:g}", hi - lo,
                             **relative_margin(hi, lo), compares=(f"Q = {Q}, t_comm = {ratio:g}", one),
                             at=T))
        return out
    return decide


def _pair(outcome, ratio: float, Q: int):
    """(loss(Q = 1), loss(Q)) at ``ratio``'s decision time."""
    T = _decision_time(outcome, ratio)
    return outcome.at(f"Q = 1, t_comm = {ratio:g}", T), outcome.at(f"Q = {Q}, t_comm = {ratio:g}", T)


def _gap_widens(outcome):
    low, high = ex.RATIOS
    out = []
    for Q in ex.QS[1:]:
        (a, b), (c, d) = _pair(outcome, high, Q), _pair(outcome, low, Q)
        out.append(above(f"gap(Q = {Q}) at t_comm = {high:g} minus at t_comm = {low:g}",
                         (a - b) - (c - d), **relative_margin(a, b, c, d)))
    return out


def _end(outcome, label: str):
    c = outcome.curve(label)
    return c.x[-1], c.y[:, -1]


def _slower_per_iteration(outcome):
    out = []
    for a, b in zip(Q_CURVES[:-1], Q_CURVES[1:], strict=True):
        (x, la), (_, lb) = _end(outcome, a), _end(outcome, b)
        out.append(above(f"loss({b}) - loss({a}) after {x:g} iterations", lb - la,
                         **relative_margin(lb, la), compares=(a, b), at=x))
    return out


def _converges(outcome):
    return [above(f"loss at the start - loss at the end, {label}", c.y[:, 0] - c.y[:, -1],
                  **relative_margin(c.y[:, 0], c.y[:, -1])) for label, c in outcome.curves.items()]


def _larger_k_worse(outcome):
    out = []
    for Q in ex.QS[1:]:
        small, large = f"Q = {Q}, K = {ex.CLIENTS}", f"Q = {Q}, K = {2 * ex.CLIENTS}"
        x, ls = _end(outcome, small)
        ll = _end(outcome, large)[1]
        out.append(above(f"loss(K = {2 * ex.CLIENTS}) - loss(K = {ex.CLIENTS}) at Q = {Q} after "
                         f"{x:g} iterations", ll - ls, **relative_margin(ll, ls),
                         compares=(small, large), at=x))
    return out


#: fedbound's reading of "little performance degradation" (Section 1): the final training
#: loss at most this much higher, relatively
LITTLE = 0.10
LITTLE_TEXT = f"fedbound's reading of 'little': the final training loss at most {LITTLE:.0%} higher"


def _little(pairs):
    def decide(outcome):
        return [between(f"loss({worse}) / loss({base}) - 1 at the end",
                        _end(outcome, worse)[1] / _end(outcome, base)[1] - 1, -np.inf, LITTLE,
                        source=LITTLE_TEXT)
                for base, worse in pairs]
    return decide


SILO_PAIR = (f"Q = 10, N = {ex.SILOS}", f"Q = 10, N = {2 * ex.SILOS}")


def _more_silos_worse(outcome):
    few, many = SILO_PAIR
    x, lf = _end(outcome, few)
    lm = _end(outcome, many)[1]
    return [above(f"loss(N = {2 * ex.SILOS}) - loss(N = {ex.SILOS}) after {x:g} iterations",
                  lm - lf, **relative_margin(lm, lf), compares=(few, many), at=x)]


def _fewer_silos_faster(outcome):
    few, many = SILO_PAIR
    x = ex.EARLY * outcome.curve(few).x[-1]
    lm, lf = outcome.at(many, x), outcome.at(few, x)
    return [above(f"loss(N = {2 * ex.SILOS}) - loss(N = {ex.SILOS}) after {x:g} iterations",
                  lm - lf, **relative_margin(lm, lf), compares=(few, many), at=x)]


def _setting(**changes) -> dict:
    return {**SETTING, **changes}


def register() -> None:
    register_experiment(Experiment(
        "tdcd.latency", ex.latency, ex.SEEDS, lambda p: ex.footprint(p, 1), ex.READINGS,
        setting="every Q at K = 2, N = 2 against iterations and time units: " + ANALOGUE))
    register_experiment(Experiment(
        "tdcd.clients", ex.clients_experiment, ex.SEEDS, lambda p: ex.footprint(p, 2, clients=4),
        setting="K = 2 against K = 4 clients per silo at the same batch of 80, every Q"))
    register_experiment(Experiment(
        "tdcd.silos", ex.silos_experiment, ex.SEEDS,
        lambda p: ex.footprint(p, 2, silos=4), setting="N = 2 against N = 4 silos, Q = 10, K = 2"))
    latency_analogue = ANALOGUE + "; time t_Q = 3 t_comm + Q as in the paper"
    for ratio, figs in zip(ex.RATIOS, ("3(a), 4(a), 5(a)", "3(b), 4(b), 5(b)"), strict=True):
        register_claim(Claim(
            f"tdcd.fig3.q-faster-comm{ratio:g}",
            cite("tdcd", f"Section 5.3.1, Figs. {figs}"),
            f"with t_comm = {ratio:g} (t_comp = 1), TDCD with Q > 1 local iterations converges "
            "faster in wall-clock time than with Q = 1",
            SETTING, latency_analogue, "tdcd.latency", _faster(ratio), curves=_time_curves(ratio),
            primary="round",
            sensitivity="decided at the time the largest Q ends its iterations, where every "
                        "curve exists"))
    register_claim(Claim(
        "tdcd.fig3.gap-widens", cite("tdcd", "Section 5.3.1, Figs. 3-5"),
        "the gap between Q > 1 and Q = 1 widens as the ratio t_comm / t_comp grows from 10 to "
        "100", SETTING, latency_analogue, "tdcd.latency", _gap_widens,
        curves=_time_curves(ex.RATIOS[1]), primary="round",
        sensitivity="each gap is read at its ratio's decision time (the time the largest Q "
                    "ends its iterations)"))
    register_claim(Claim(
        "tdcd.fig6.slower-per-iteration", cite("tdcd", "Section 5.3.1, Figs. 6-8"),
        "against iterations, a larger Q converges more slowly and to a higher training loss "
        "(in accordance with Theorem 1)", _setting(metric="training loss against iterations"),
        ANALOGUE, "tdcd.latency", _slower_per_iteration, curves=Q_CURVES, primary="round"))
    register_claim(Claim(
        "tdcd.fig6cd.converges", cite("tdcd", "Section 5.3.2, Figs. 6(c, d), 7(c, d), 8"),
        "TDCD converges for every Q tested, in the larger networks too",
        _setting(clients="K = 100 per silo (CIFAR-10), 50 (MIMIC-III), 20 (ModelNet40)"),
        ANALOGUE.replace("K = 2 clients", "K = 2 and K = 4 clients"), "tdcd.clients", _converges,
        tolerance="converges is read as: the training loss at the end is below the start's"))
    register_claim(Claim(
        "tdcd.fig3cd.larger-k-worse", cite("tdcd", "Section 5.3.2, Figs. 3(c, d), 6(c, d)"),
        "with more clients per silo (each holding fewer samples of a batch) the convergence "
        "error is slightly worse",
        _setting(clients="K = 50 against 100 per silo (CIFAR-10), 20 against 50 (MIMIC-III)"),
        ANALOGUE.replace("K = 2 clients per silo with 40 samples each",
                         "K = 2 against K = 4 clients per silo, 40 against 20 samples each"),
        "tdcd.clients", _larger_k_worse,
        curves=tuple(f"Q = {Q}, K = {K}" for Q in ex.QS[1:] for K in (2, 4)),
        sensitivity="tested at Q > 1 only: at Q = 1 the clients' average is the gradient of "
                    "the whole batch whatever K is, so K cannot change the run"))
    register_claim(Claim(
        "tdcd.sec1.little-degradation-k", cite("tdcd", "Section 1, contributions; Section 5.3.2"),
        "TDCD shows little performance degradation as the number of horizontal partitions "
        "(clients per silo) grows", SETTING,
        ANALOGUE.replace("K = 2 clients", "K = 2 against K = 4 clients"), "tdcd.clients",
        _little([(f"Q = {Q}, K = 2", f"Q = {Q}, K = 4") for Q in ex.QS]),
        tolerance=LITTLE_TEXT))
    silos_analogue = ANALOGUE.replace("N = 2 silos holding the top and bottom halves",
                                      "N = 2 against N = 4 silos holding halves or quarters")
    silos_setting = _setting(data="MIMIC-III", split="the 76 features split over N = 4 or 16 "
                                                     "silos (the text does not state the N of Fig. 9)",
                             clients="K = 50", horizon="iterations, Q = 10")
    register_claim(Claim(
        "tdcd.fig9.more-silos-worse", cite("tdcd", "Section 5.3.3, Fig. 9"),
        "with more vertical partitions N the convergence error is worse", silos_setting,
        silos_analogue, "tdcd.silos", _more_silos_worse))
    register_claim(Claim(
        "tdcd.fig9.fewer-silos-faster", cite("tdcd", "Section 5.3.3, Fig. 9"),
        "fewer vertical partitions reach a comparable performance in fewer iterations",
        silos_setting, silos_analogue, "tdcd.silos", _fewer_silos_faster,
        sensitivity=f"read at {ex.EARLY:.0%} of the iterations"))
    register_claim(Claim(
        "tdcd.sec1.little-degradation-n", cite("tdcd", "Section 1, contributions; Section 5.3.3"),
        "TDCD shows little performance degradation as the number of vertical partitions grows",
        silos_setting, silos_analogue, "tdcd.silos", _little([SILO_PAIR]),
        tolerance=LITTLE_TEXT))


register()
