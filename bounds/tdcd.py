"""TDCD: Das et al. 2022 (key ``tdcd`` of :mod:`bounds.references`).

Registered results
------------------
``tdcd.theorem1``  Theorem 1 (Section 4), bound (15) under step-size condition (14).
``tdcd.lemma2``    Lemma 2 (Appendix A.1), the per-round drift bound (30) (holds pathwise).
``tdcd.remark5``   Remark 5 (Section 4): the rate at eta = c / (Q sqrt(R)), explicit constants.

Variants (each difference is an :class:`~bounds.core.Erratum` with its place in the paper):

``printed``  exactly as printed: (15) with its left side summed over "t0 = 0..R-1".
``proof``    (default) what the proof (Appendix A.2) supports: the same right-hand side,
             its left side at the round-start hub models theta^{rQ}, r = 0..R-1, L_max =
             max over k and j in (10), and the off-by-one of (58) corrected (all three
             found by fedbound).
``tight``    the same proof without its loosenings (derived by fedbound, not published):
             the exact geometric sum of Lemma 2 ((53), instead of the factor 4 the proof of
             Lemma 2 uses after it), 1 + Q kept (not 2Q, (80)) and the exact bracket of
             (81)-(83) (not 1/2).
``refined``  derived by fedbound, not published; see bounds/derivations/tdcd_refined.md.
             The same left-hand side, from the same descent step over one round, with a
             pathwise drift bound in the own block (no step condition), no Young
             inequality against the descent (the cross term is kept and solved as a
             quadratic in the root of the left side), and the variance of the silo
             average (independent client batches, sigma_j^2 / K_j). At Q = 1 it is the
             mini-batch SGD bound exactly; eta and Q enter separately, and for fixed eta Q
             it increases with Q.

The bound depends on eta and Q only through a = eta Q (proof and printed variants), and
(14) is a <= 1/(8 max(L, L_max)): any Q gives the bound of Q = 1 after the same R rounds
(found by fedbound). :func:`optimal_eta_q`, :func:`rounds_needed` and
:func:`round_time` answer "which Q and eta" from the bound: Q = 1.
:func:`refined_rounds_needed` and :func:`refined_choice` answer it from the refined
variant: its best eta for each Q, the rounds and the wall-clock time; its optimum is also
Q = 1, for a reason that no bound of this shape escapes (bounds/derivations/tdcd_refined.md,
section 6).
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from . import reduce
from .core import Aggregate, Condition, Erratum, Param, Rate, Theorem, get
from .deadline import DeadlineChoice, deadline_theorem, horizons, steps
from .references import cite

PAPER = cite("tdcd")
VARIANTS = ("printed", "proof", "tight", "refined")
#: the label of fedbound's own result; its derivation is a file of the package (in the wheel
#: too: ``importlib.resources.files("fedbound.bounds") / "derivations" / "tdcd_refined.md"``)
DERIVED = "derived by fedbound, not published; see bounds/derivations/tdcd_refined.md"

# ---------------------------------------------------------------------- symbols

L, L_max, Delta, eta, Q, R, c, G0 = sp.symbols("L L_max Delta eta Q R c G_0", positive=True)
SYMBOLS = {"L": L, "L_max": L_max, "Delta": Delta, "eta": eta, "Q": Q, "R": R, "c": c, "G0": G0}
#: S = sum_j sigma_j^2, the only way the per-block sigma_j enter (15)
S = sp.Symbol("S", nonnegative=True)
_j, _N = sp.symbols("j N", integer=True, positive=True)
_sigma = sp.IndexedBase("sigma")
AGGREGATES = [
    Aggregate(S, sp.Sum(_sigma[_j] ** 2, (_j, 1, _N)), reduce.sum_of_variances, ("sigma",)),
]
#: a = eta Q, the product through which (15) depends on eta and Q
a = sp.Symbol("a", positive=True)
#: M = max(L, L_max) of (14)
M = sp.Max(L, L_max)

PARAMS = {
    "L": Param("L", "Lipschitz constant of grad L, Assumption 1, (6)", "positive"),
    "L_max": Param("L_max", "max_{k,j} L_{k,j} of (7) and (10), Assumption 1 (the block-j constant "
                   "suffices: Lemma 2 moves only block j)", "positive"),
    "sigma": Param("sigma", "per-block noise sigma_j of Assumption 3, (9), one per silo j", "nonnegative",
                   vector=True),
    "Delta": Param("Delta", "L(theta^0) - E L(theta^T) (or L(theta^0) - L_inf), (15)",
                   "nonnegative"),
    "eta": Param("eta", "step size", "positive"),
    "Q": Param("Q", "local iterations per round", "positive_integer"),
    "R": Param("R", "communication rounds (T = Q R)", "positive_integer"),
    "c": Param("c", "step constant of Remark 5: eta = c / (Q sqrt(R))", "positive"),
    "G0": Param("G0", "sum_j (1/K_j) sum_k ||g_kj(y^t0)||^2 at the round start, (30)",
                "nonnegative"),
}

# ---------------------------------------------------------------------- refined (fedbound's own)
# Derived by fedbound, not published; see bounds/derivations/tdcd_refined.md (section numbers
# below refer to it). Every piece is a function of eta and Q separately.

#: Sbar = sum_j sigma_j^2 / K_j: the variance of the silo averages G_(j) of the round's first
#: step when the K_j client batches are drawn independently (assumption (A4), section 2)
S_bar = sp.Symbol("Sbar", nonnegative=True)
_K = sp.IndexedBase("K")
AGGREGATES_REFINED = [
    *AGGREGATES,
    Aggregate(S_bar, sp.Sum(_sigma[_j] ** 2 / _K[_j], (_j, 1, _N)),
              reduce.sum_of_variances_per_step, ("sigma", "K")),
]
PARAMS_REFINED = {
    **PARAMS,
    "L_max": Param("L_max", "Lipschitz constant of theta_j -> g_kj(theta_j, theta_-j) on every "
                   "mini-batch a client can hold, (7) restricted to the own block j "
                   f"({PAPER}, Assumption 1)", "positive"),
    "K": Param("K", "clients per silo, K_j (one per silo j); the refined noise term uses "
               "sigma_j^2 / K_j, the variance of the silo average of independent client "
               "batches (assumption (A4) of bounds/derivations/tdcd_refined.md)",
               "positive_integer", vector=True),
}
#: y = (Q - 1) eta L_max: the exponent of the own-block drift over one round (0 at Q = 1)
Y_DRIFT = (Q - 1) * eta * L_max
#: rho >= eta sum_{t<Q} ((1 + eta L_max)^t - 1), the reach of the drift (section 3, (D3)):
#: 3 a y / (6 - 2 y) with a = eta Q, valid for y < 3; 0 at Q = 1
RHO = 3 * eta * Q * Y_DRIFT / (6 - 2 * Y_DRIFT)
#: A = a + rho >= ||theta^{t0+Q} - theta^{t0}|| / sqrt(Gamma): the reach of the round
REACH = eta * Q + RHO
#: c = a - rho - L A^2 / 2: the certified descent per unit ||grad L||^2 (section 4, (B4))
GAIN = eta * Q - RHO - L / 2 * REACH**2
#: n = (L/2) A (a Sbar + rho S): the noise of the round's quadratic term (section 4, (B3))
SPREAD = L / 2 * REACH * (eta * Q * S_bar + RHO * S)
#: where the refined bound is proved: c > 0 and y < 3 (else it is +inf)
REFINED_VALID = sp.And(GAIN > 0, Y_DRIFT < 3)


def refined_terms() -> dict[str, sp.Expr]:
    """The refined right-hand side, (B6) of the derivation, as named terms: with
    D = Delta/R + n, the bound ((rho sqrt(S) + sqrt(rho^2 S + 4 c D)) / (2 c))^2
    = Delta/(R c) + n/c + (rho^2 S + rho sqrt(S) sqrt(rho^2 S + 4 c D)) / (2 c^2).
    +inf where c <= 0 or y >= 3 (outside the proof)."""
    root = sp.sqrt(RHO**2 * S + 4 * GAIN * (Delta / R + SPREAD))
    exprs = {
        "optimisation": Delta / (R * GAIN),
        "noise: mini-batch": L / 2 * REACH * eta * Q * S_bar / GAIN,
        "noise: drift": L / 2 * REACH * RHO * S / GAIN,
        "drift x gradient": (RHO**2 * S + RHO * sp.sqrt(S) * root) / (2 * GAIN**2),
    }
    return {name: sp.Piecewise((e, REFINED_VALID), (sp.oo, True)) for name, e in exprs.items()}


#: (R1): the drift regime y <= 1/2 in which rho <= (3/5) a y and A <= a (1 + (3/5) y)
CONDITION_R1 = Condition("(R1) (Q-1) eta L_max <= 1/2", sp.LessThan(Y_DRIFT, sp.Rational(1, 2)),
                         f"{DERIVED}, (R1)")
#: (R2): with (R1), c >= a/2 (section 4, (C2)); at Q = 1 it is eta <= 1/L
CONDITION_R2 = Condition(
    "(R2) (3/5) y + (L eta Q/2)(1 + (69/50) y) <= 1/2",
    sp.LessThan(sp.Rational(3, 5) * Y_DRIFT
                + L * eta * Q / 2 * (1 + sp.Rational(69, 50) * Y_DRIFT), sp.Rational(1, 2)),
    f"{DERIVED}, (R2)", hint="at Q = 1: eta <= 1/L")

# ---------------------------------------------------------------------- constants

#: Lemma 2's constant as printed, (30) / (57): 4 Q^2 (1 + Q).
LEMMA2_PAPER = 4 * Q**2 * (1 + Q)
#: the exact sum of the recursion, (46)-(53), with the parentheses of (53) corrected (found by
#: fedbound):
#: 2 (1+Q) (Q^2/2) (((1+2/Q)^Q - 1)/2 - 1); zero at Q = 1.
LEMMA2_TIGHT = (1 + Q) * Q**2 * (((1 + 2 / Q) ** Q - 1) / 2 - 1)


def lemma2_constant(variant: str) -> sp.Expr:
    """C(Q) with drift <= C(Q) L_max^2 eta^2 G0: (30), or the exact sum of (53)."""
    return LEMMA2_TIGHT if variant == "tight" else LEMMA2_PAPER


def noise_coefficient(variant: str) -> sp.Expr:
    """Coefficient c_r of sum_j (1/K_j) sum_k E||g_kj(y^t0)||^2 in one round.

    (79): c_r = eta^2 L Q^2 + (eta/2) (1 + 2 eta L Q) C(Q) L_max^2 eta^2 with
    C(Q) = 4 Q^2 (1+Q) from Lemma 2; the proof then uses 1 + Q <= 2Q, (80), to reach
    eta^2 L Q^2 + 4 eta^3 Q^3 L_max^2 + 8 eta^4 L Q^4 L_max^2, (83)."""
    if variant == "tight":
        return eta**2 * L * Q**2 + eta / 2 * (1 + 2 * eta * L * Q) * LEMMA2_TIGHT * L_max**2 * eta**2
    return eta**2 * L * Q**2 + 4 * eta**3 * Q**3 * L_max**2 + 8 * eta**4 * L * Q**4 * L_max**2


def theorem1_terms(variant: str) -> dict[str, sp.Expr]:
    """Right-hand side of (15) (= (85)), as named terms.

    printed/proof: 4 Delta/(eta Q R) + 4 (eta L Q + 4 eta^2 Q^2 L_max^2 + 8 eta^3 Q^3 L L_max^2) S.
    tight: per round (eta Q/2 - c_r) ||grad||^2 <= L(theta^t0) - E L(theta^t0+Q) + c_r S
    ((79) with the exact c_r); dividing by eta Q/2 - c_r (> 0 under (14)) instead of
    the proof's eta Q/4 ((81)-(83)) gives (Delta/R + c_r S)/(eta Q/2 - c_r).
    refined: :func:`refined_terms` (derived by fedbound, not published)."""
    if variant == "refined":
        return refined_terms()
    if variant == "tight":
        cr = noise_coefficient("tight")
        gain = eta * Q / 2 - cr
        return {"optimisation": Delta / (R * gain), "noise": cr * S / gain}
    return {
        "optimisation": 4 * Delta / (eta * Q * R),
        "noise: eta L Q": 4 * eta * L * Q * S,
        "noise: staleness": 16 * eta**2 * Q**2 * L_max**2 * S,
        "noise: staleness x L": 32 * eta**3 * Q**3 * L * L_max**2 * S,
    }


def bound_in_a() -> sp.Expr:
    """(15) with eta = a/Q: B(a, R) = 4 Delta/(a R) + 4 S (a L + 4 a^2 L_max^2 + 8 a^3 L L_max^2)
    (derived by fedbound); exactly free of Q."""
    return sp.simplify(sp.Add(*theorem1_terms("proof").values()).subs(eta, a / Q))


#: (14) of Theorem 1: 0 <= eta <= 1 / (8 Q max(L, L_max)).
CONDITION14 = Condition("(14)", sp.LessThan(eta, 1 / (8 * Q * M)),
                        f"{PAPER}, Theorem 1, (14)")
#: Lemma 2's hypothesis: eta <= 1 / (2 Q L_max).
CONDITION_LEMMA2 = Condition("eta <= 1/(2 Q L_max)", sp.LessThan(eta, 1 / (2 * Q * L_max)),
                             f"{PAPER}, Lemma 2 (Appendix A.1)")
#: Remark 5 needs (14) at eta = c/(Q sqrt R): R >= 64 c^2 max(L, L_max)^2 (derived by fedbound).
CONDITION_REMARK5 = Condition("(14) at eta = c/(Q sqrt R)", sp.LessThan(64 * c**2 * M**2, R),
                              f"{PAPER}, Theorem 1, (14), and Remark 5",
                              hint="R >= 64 c^2 max(L, L_max)^2")

# ---------------------------------------------------------------------- errata

ERRATUM_LHS = Erratum(
    "left side of (15)",
    r"$\frac{1}{R} \sum_{t_0=0}^{R-1} \mathbb{E}\|\nabla \mathcal{L}(\theta^{t_0})\|^2$",
    r"$\frac{1}{R} \sum_{r=0}^{R-1} \mathbb{E}\|\nabla \mathcal{L}(\theta^{rQ})\|^2$ "
    r"($t_0$ is the sync iteration $rQ$)",
    f"{PAPER}, Theorem 1, (15) (printed) vs the proof of Theorem 1 (Appendix A.2), (84)-(85) "
    "(the average is over rounds) (found by fedbound)",
)
ERRATUM_OFF_BY_ONE = Erratum(
    "descent step (58)", r"$\theta^{t_0^+}$ with $t_0^+ = t_0 + Q - 1$",
    r"$\theta^{t_0+Q}$: the increment $-\eta \sum_{t=t_0}^{t_0+Q-1} G^t$ ends at $t_0 + Q$; "
    r"(85) uses $\theta^T$",
    f"{PAPER}, proof of Theorem 1 (Appendix A.2), (58), (65)-(66), (81), (84), (85) (found by fedbound)",
)
ERRATUM_LMAX = Erratum(
    r"definition (10) of $L_{\max}$", r"$\max_k L_{k,j}$ ($j$ free)", r"$\max_{k,j} L_{k,j}$",
    f"{PAPER}, Section 4, (10) (found by fedbound)",
)
ERRATUM_AVERAGING = Erratum(
    "hub averaging, Algorithm 1 line 32",
    r"$\theta_j^{t+1} = \frac{1}{K_j} \sum_k \theta_{k,j}^t$",
    r"$\theta_j^{t+1} = \frac{1}{K_j} \sum_k \theta_{k,j}^{t+1}$ (else the last local step is "
    "dropped, against the evolution (13) of the global model)",
    f"{PAPER}, Algorithm 1, line 32, and Section 3 (found by fedbound)",
)
ERRATUM_UNBIASED = Erratum(
    "Assumption 3, (8)-(9)", r"stated for the silo-level $g_{kj}$ on the full batch $\zeta$",
    r"for $g_{kj}$ on the client's part $\zeta_{kj}$; the proof needs only the client average "
    r"$\frac{1}{K_j} \sum_k \mathbb{E} g_{kj} = \nabla_{(j)} \mathcal{L}$ and "
    r"$\frac{1}{K_j} \sum_k \mathbb{E}\|g_{kj} - \nabla_{(j)} \mathcal{L}\|^2 \le \sigma_j^2$",
    f"{PAPER}, Assumption 3, (8)-(9), used at (68) and (77) (found by fedbound)",
)
ERRATUM_LEMMA2_SUM = Erratum(
    "(53)", r"$\frac{Q \Xi}{2} \left(\frac{Q(1+2/Q)^Q - 1)}{2} - Q\right)$ (an unmatched "
    "parenthesis)",
    r"$\frac{Q \Xi}{2} \left(\frac{Q((1+2/Q)^Q - 1)}{2} - Q\right)$",
    f"{PAPER}, proof of Lemma 2 (Appendix A.1), (53); (54) is then correct (found by fedbound)",
)
ERRATUM_LEMMA2_PSI = Erratum(
    "Lemma 2 proof", r"$\Psi_0$", r"$\Psi^{t_0} = 0$",
    f"{PAPER}, proof of Lemma 2 (Appendix A.1), between (46) and (47) (found by fedbound)")
ERRATUM_LEMMA2_E2 = Erratum(
    "tight variant of Lemma 2", r"$\frac{e^2 - 1}{2} - 1 \le 4$, so $4 Q^2 (1+Q)$",
    r"$(1+Q) Q^2 \left(\frac{(1+2/Q)^Q - 1}{2} - 1\right)$, the exact sum of (46)-(53) "
    r"($0$ at $Q = 1$)",
    f"{PAPER}, proof of Lemma 2 (Appendix A.1), (53)-(56) (derived by fedbound, not published)",
)
ERRATUM_TIGHT = Erratum(
    "tight variant of (15)",
    r"$1 + Q \le 2Q$, bracket $\ge \frac{19}{32} \ge \frac{1}{2}$, Lemma 2 constant "
    r"$4 Q^2 (1+Q)$",
    r"$\frac{\Delta/R + c_r S}{\eta Q/2 - c_r}$ with "
    r"$c_r = \eta^2 L Q^2 + \frac{\eta}{2}(1 + 2 \eta L Q) C(Q) L_{\max}^2 \eta^2$ and $C(Q)$ "
    "the exact Lemma 2 sum",
    f"{PAPER}, proof of Theorem 1 (Appendix A.2), (79), (80), (81)-(83) "
    "(derived by fedbound, not published)",
)
ERRATUM_REMARK5 = Erratum(
    "Remark 5", r"$\eta \propto \frac{1}{Q \sqrt{R}}$ gives $O(1/\sqrt{R})$",
    r"$\eta = \frac{c}{Q \sqrt{R}}$ gives $\frac{4 \Delta/c + 4 c L S}{\sqrt{R}} "
    r"+ \frac{16 c^2 L_{\max}^2 S}{R} + \frac{32 c^3 L L_{\max}^2 S}{R^{3/2}}$, provided "
    r"$R \ge 64 c^2 \max(L, L_{\max})^2$ so that (14) holds",
    f"{PAPER}, Remark 5, with Theorem 1, (14) and (15) (explicit constants derived by "
    "fedbound)",
)


ERRATUM_REFINED = Erratum(
    f"refined variant of (15) [{DERIVED}]",
    r"(15) under (14): $\frac{4 \Delta}{\eta Q R} + 4 \left(\eta L Q + 4 \eta^2 Q^2 L_{\max}^2 "
    r"+ 8 \eta^3 Q^3 L L_{\max}^2\right) \sum_j \sigma_j^2$, with "
    r"$\eta \le \frac{1}{8 Q \max(L, L_{\max})}$",
    r"$\left(\frac{\rho \sqrt{S} + \sqrt{\rho^2 S + 4 c (\Delta/R + n)}}{2 c}\right)^2$ with "
    r"$a = \eta Q$, $y = (Q-1) \eta L_{\max}$, $\rho = \frac{3 a y}{6 - 2y}$, $A = a + \rho$, "
    r"$c = a - \rho - \frac{L A^2}{2}$, $n = \frac{L}{2} A (a \bar{S} + \rho S)$, "
    r"$S = \sum_j \sigma_j^2$, $\bar{S} = \sum_j \sigma_j^2/K_j$; proved wherever $c > 0$ and "
    r"$y < 3$ ($+\infty$ elsewhere), stated under (R1)-(R2) ($c \ge a/2$). Lemma 2 replaced "
    "by a pathwise bound on the norm of the summed drift (no step condition); no Young "
    r"inequality against the descent; $1/K_j$ kept in the noise of $G$",
    f"{PAPER}, proof of Theorem 1, (58)-(85), and of Lemma 2, (31)-(57), re-derived",
)
ERRATUM_REFINED_NOISE = Erratum(
    f"noise of the silo average, (70)-(73) [{DERIVED}]",
    r"$\|G_{(j)}\|^2 \le \frac{1}{K_j} \sum_k \|g_{kj}\|^2$ (Jensen over clients: no variance "
    "reduction)",
    r"$\mathbb{E}\|G_{(j)} - \nabla_{(j)} \mathcal{L}\|^2 \le \sigma_j^2 / K_j$, given "
    "independent client batches (assumption (A4); fedbound's sampler draws every client's "
    "cells independently)",
    f"{PAPER}, proof of Theorem 1, (70)-(73) and (77)",
)


def _theorem1_errata(variant: str) -> list[Erratum]:
    common = [ERRATUM_LMAX, ERRATUM_AVERAGING, ERRATUM_UNBIASED]
    if variant == "printed":
        return common
    extra = [ERRATUM_LHS, ERRATUM_OFF_BY_ONE]
    if variant == "tight":
        extra += [ERRATUM_TIGHT, ERRATUM_LEMMA2_E2]
    if variant == "refined":
        extra = [ERRATUM_REFINED, ERRATUM_REFINED_NOISE, *extra]
    return [*extra, *common]


_STATUS = {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum",
           "refined": "holds"}
_LHS = {
    "printed": r"\frac{1}{R}\sum_{t_0=0}^{R-1}\mathbb{E}\|\nabla\mathcal{L}(\tilde\theta^{t_0})\|^2",
    "proof": r"\frac{1}{R}\sum_{r=0}^{R-1}\mathbb{E}\|\nabla\mathcal{L}(\tilde\theta^{rQ})\|^2",
}
_LHS_LEMMA2 = (r"\sum_{t=t_0}^{t_0+Q-1}\sum_{j}\frac{1}{K_j}\sum_{k}"
               r"\|g_{k,j}(y^t_{k,j})-g_{k,j}(y^{t_0}_{k,j})\|^2")


def _theorem(key, title, citation, lhs, variant, term_exprs, conditions, errata, step, notes,
             status=None, params=None, aggregates=None) -> Theorem:
    return Theorem(
        key=key, variant=variant, title=title, citation=citation, lhs=lhs,
        params=params or PARAMS, term_exprs=term_exprs, symbols=SYMBOLS, conditions=conditions,
        errata=errata, aggregates=aggregates or AGGREGATES, step=step,
        status=status or _STATUS[variant], notes=notes,
    )


def _theorem1_refined() -> Theorem:
    """The refined variant of Theorem 1 (derived by fedbound, not published; see
    bounds/derivations/tdcd_refined.md): the same left-hand side, eta and Q separately."""
    return _theorem(
        "tdcd.theorem1", f"TDCD convergence bound (15), refined ({DERIVED})",
        f"{PAPER}, Theorem 1, (15); refined: {DERIVED}", _LHS["proof"], "refined",
        theorem1_terms("refined"), [CONDITION_R1, CONDITION_R2], _theorem1_errata("refined"),
        "eta",
        f"{DERIVED}. Assumptions 1-3 of {PAPER} with $L_{{max}}$ the own-block constant of (7), "
        r"plus (A4) independent client batches (noise $\sigma_j^2/K_j$ of the silo average). At "
        r"$Q = 1$ it is the mini-batch SGD bound "
        r"$(\Delta/R + (L/2) \eta^2 \bar{S})/(\eta (1 - L \eta/2))$; for fixed $\eta Q$ it "
        "increases with $Q$, so its wall-clock optimum is $Q = 1$ (section 6 of the derivation: "
        "no bound of this shape can certify fewer rounds for $Q > 1$ than for $Q = 1$).",
        params=PARAMS_REFINED, aggregates=AGGREGATES_REFINED,
    )


def theorem1(variant: str = "proof") -> Theorem:
    """Theorem 1 (Section 4), (15) under (14) (proof in Appendix A.2, (58)-(85)).

    Bounds (1/R) sum_{r<R} E||grad L(theta^{rQ})||^2 at the round-start hub models."""
    if variant == "refined":
        return _theorem1_refined()
    return _theorem(
        "tdcd.theorem1", "TDCD convergence bound (15)", f"{PAPER}, Theorem 1, (14)-(15)",
        _LHS["printed" if variant == "printed" else "proof"], variant, theorem1_terms(variant),
        [CONDITION14], _theorem1_errata(variant), "eta",
        r"Depends on $K_j$ not at all and on $N$ only through $S = \sum_j \sigma_j^2$; on "
        r"$\eta$ and $Q$ only through $\eta Q$ (printed and proof variants).",
    )


def lemma2(variant: str = "proof") -> Theorem:
    """Lemma 2, (30) (proof (31)-(57), Appendix A.1): the within-round drift of the
    client gradients is at most C(Q) L_max^2 eta^2 G0. Pathwise: the proof uses only (7)
    and Young's inequality on a fixed mini-batch (found by fedbound)."""
    errata = [ERRATUM_LEMMA2_SUM, ERRATUM_LEMMA2_PSI, ERRATUM_LMAX]
    if variant == "tight":
        errata = [ERRATUM_LEMMA2_E2, *errata]
    return _theorem(
        "tdcd.lemma2", "TDCD drift of local gradients (30)", f"{PAPER}, Lemma 2, (30)",
        _LHS_LEMMA2,
        variant, {"drift": lemma2_constant(variant) * L_max**2 * eta**2 * G0},
        [CONDITION_LEMMA2], errata, "eta", "Holds for every round and every realisation.",
        status="holds-with-erratum",
    )


def remark5(variant: str = "proof") -> Theorem:
    """Remark 5 (Section 4), with explicit constants [derived by fedbound from (15)]:
    eta = c/(Q sqrt R)
    in (15) gives (4 Delta/c + 4 c L S)/sqrt(R) + 16 c^2 L_max^2 S/R + 32 c^3 L L_max^2 S/R^(3/2),
    valid when R >= 64 c^2 max(L, L_max)^2 (then (14) holds). Free of Q."""
    rr = sp.sqrt(R)
    term_exprs = {
        "optimisation": 4 * Delta / (c * rr),
        "noise: eta L Q": 4 * c * L * S / rr,
        "noise: staleness": 16 * c**2 * L_max**2 * S / R,
        "noise: staleness x L": 32 * c**3 * L * L_max**2 * S / R ** sp.Rational(3, 2),
    }
    thm = _theorem(
        "tdcd.remark5", r"TDCD rate at $\eta = c/(Q\sqrt{R})$", f"{PAPER}, Remark 5", _LHS["proof"],
        variant, term_exprs, [CONDITION_REMARK5], [ERRATUM_REMARK5, *_theorem1_errata("proof")],
        "c", "The step constant $c$ plays the role of the step; the best leading constant is "
        r"at $c = \sqrt{\Delta/(L S)}$.",
    )
    thm.rate = RATE_REMARK5
    return thm


#: the rate of Remark 5: O(1/sqrt(R)) in the communication rounds R
RATE_REMARK5 = Rate(({"R": -0.5},), "Das et al. 2022, Remark 5", "eta proportional to 1/(Q sqrt(R))")



# ---------------------------------------------------------------------- choosing eta, Q, R


def _positive(name: str, value, *, integer: bool = False) -> float:
    x = float(value)
    if not (math.isfinite(x) and x > 0) or (integer and x != math.floor(x)):
        kind = "an integer >= 1" if integer else "finite and > 0"
        raise ValueError(f"{name}={value!r} must be {kind}")
    return x


def _constants(L_: float, L_max_: float, sigma) -> tuple[float, float, float]:
    """Validated (L, L_max, S = sum_j sigma_j^2)."""
    PARAMS["L"].check(L_)
    PARAMS["L_max"].check(L_max_)
    s = PARAMS["sigma"].check(sigma)
    return float(L_), float(L_max_), float(np.sum(s**2))


def max_eta(*, L: float, L_max: float, Q: int) -> float:  # noqa: N803  (paper names)
    """The largest eta of (14): 1/(8 Q max(L, L_max)) (via the registered condition)."""
    return get("tdcd.theorem1").max_step(L=L, L_max=L_max, Q=Q)


def round_time(Q: int, t_comm: float, t_comp: float) -> float:  # noqa: N803
    """Wall-clock time of one round, t_Q = 3 t_comm + Q t_comp (Section 5.2)."""
    _positive("Q", Q, integer=True)
    if not (math.isfinite(t_comm) and t_comm >= 0 and math.isfinite(t_comp) and t_comp >= 0):
        raise ValueError(f"t_comm={t_comm!r} and t_comp={t_comp!r} must be finite and >= 0")
    return 3.0 * t_comm + Q * t_comp


def quartic_coefficients(*, L: float, L_max: float, S: float, Delta: float, R: int) -> np.ndarray:  # noqa: N803
    """Coefficients (a^4 .. a^0) of dB/da = 0 times a^2/4 (derived by fedbound):
    24 L L_max^2 S a^4 + 8 L_max^2 S a^3 + L S a^2 - Delta/R."""
    return np.array([24 * L * L_max**2 * S, 8 * L_max**2 * S, L * S, 0.0, -Delta / R])


def _increasing_root(coefficients, log_target: float) -> float:
    """The a > 0 with p(a) = sum_k c_k a^k = exp(log_target), for nonnegative c_k (highest
    degree first, no constant term, some c_k > 0): p increases from 0 to infinity on a > 0,
    so the root exists and is unique (Descartes' rule for p(a) - target). Geometric
    bisection on x = log a with log p(e^x) as a log-sum-exp, so neither a tiny Delta nor a
    huge R underflows or overflows the equation."""
    c = np.asarray(coefficients, dtype=float)
    degree = np.arange(c.size, 0, -1)
    positive = c > 0
    log_c, k = np.log(c[positive]), degree[positive]

    def log_p(x: float) -> float:
        return float(np.logaddexp.reduce(log_c + k * x))

    lo, hi = -1.0, 1.0
    while log_p(hi) < log_target:
        hi += max(1.0, abs(hi))
    while log_p(lo) > log_target:
        lo -= max(1.0, abs(lo))
    while hi - lo > 1e-15 * max(1.0, abs(lo), abs(hi)):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (lo, mid) if log_p(mid) >= log_target else (mid, hi)
    return math.exp(hi)


def optimal_eta_q(*, L: float, L_max: float, sigma, Delta: float, R: int) -> dict:  # noqa: N803
    """The eta Q minimising (15) over (14) for R rounds.

    a* is the unique positive root of the quartic of :func:`quartic_coefficients` (one sign
    change in its coefficients: unique by Descartes' rule), a_max =
    1/(8 max(L, L_max)) from (14), and a_opt = min(a*, a_max). With S = 0 the bound
    4 Delta/(a R) decreases in a: a* = inf. Returns {"a_star", "a_max", "a_opt", "bound",
    "binding"} where eta = a_opt / Q for any Q (the bound is the same for every Q)."""
    L_, Lm, S_ = _constants(L, L_max, sigma)
    D = _positive("Delta", Delta)
    R_ = _positive("R", R, integer=True)
    a_max = 1.0 / (8.0 * max(L_, Lm))
    if S_ == 0:
        a_star = math.inf
    else:
        quartic = quartic_coefficients(L=L_, L_max=Lm, S=S_, Delta=D, R=R_)
        a_star = _increasing_root(quartic[:-1], math.log(D) - math.log(R_))
    a_opt = min(a_star, a_max)
    bound = get("tdcd.theorem1").evaluate(L=L_, L_max=Lm, sigma=np.atleast_1d(sigma), Delta=D,
                                          eta=a_opt, Q=1, R=R_)
    return {"a_star": a_star, "a_max": a_max, "a_opt": a_opt, "bound": float(bound),
            "binding": "interior optimum" if a_star <= a_max else "(14)"}


def noise_floor(a_: float, *, L: float, L_max: float, S: float) -> float:  # noqa: N803
    """The noise term of (15) at eta Q = a: 4 S (a L + 4 a^2 L_max^2 + 8 a^3 L L_max^2)."""
    return 4 * S * (a_ * L + 4 * a_**2 * L_max**2 + 8 * a_**3 * L * L_max**2)


def rounds_needed(epsilon: float, *, L: float, L_max: float, sigma, Delta: float,  # noqa: N803
                  a: float | None = None) -> dict:
    """Fewest rounds R with bound (15) <= epsilon.

    At a fixed a = eta Q: R = ceil(4 Delta / (a (epsilon - noise(a)))), which needs
    epsilon > noise(a). With ``a=None`` a maximises a (epsilon - noise(a)) over (0, a_max]:
    the unique positive root of epsilon = 4 S (2 L a + 12 L_max^2 a^2 + 32 L L_max^2 a^3)
    (increasing in a), clipped at a_max = 1/(8 max(L, L_max)). R does not depend on Q.
    Returns {"R", "a", "a_max", "noise"}; raises ValueError when epsilon is at or below the
    noise floor at the chosen a."""
    L_, Lm, S_ = _constants(L, L_max, sigma)
    eps = _positive("epsilon", epsilon)
    D = float(Delta)
    if not (math.isfinite(D) and D >= 0):
        raise ValueError(f"Delta={Delta!r} must be finite and >= 0")
    a_max = 1.0 / (8.0 * max(L_, Lm))
    if a is None:
        if S_ == 0:
            a_ = a_max
        else:
            cubic = [32 * 4 * S_ * L_ * Lm**2, 12 * 4 * S_ * Lm**2, 2 * 4 * S_ * L_]
            a_ = min(_increasing_root(cubic, math.log(eps)), a_max)
    else:
        a_ = _positive("a", a)
        if a_ > a_max * (1 + 1e-12):
            raise ValueError(f"a={a_:.6g} exceeds a_max = 1/(8 max(L, L_max)) = {a_max:.6g}: "
                             f"condition (14) of {PAPER}, Theorem 1, fails")
    floor = noise_floor(a_, L=L_, L_max=Lm, S=S_)
    if eps <= floor:
        raise ValueError(f"epsilon={eps:.6g} is at or below the noise floor {floor:.6g} of (15) "
                         f"at eta Q = {a_:.6g}: no number of rounds reaches it")
    with np.errstate(divide="ignore", over="ignore"):
        exact = np.float64(4 * D) / (np.float64(a_) * (eps - floor))
    if not np.isfinite(exact):
        raise ValueError(f"epsilon={eps:.6g} needs more rounds than a float can count "
                         f"(4 Delta / (a (epsilon - noise)) overflows)")
    rounds = max(1, math.ceil(float(exact) * (1 - 1e-12)))
    return {"R": rounds, "a": a_, "a_max": a_max, "noise": floor}


# ---------------------------------------------------------------------- refined: eta, Q, R
# The refined variant (derived by fedbound, not published; bounds/derivations/tdcd_refined.md,
# section 7): its bound is <= epsilon after R rounds iff Delta / R <= h(eta), with
#   h = epsilon c - rho sqrt(S epsilon) - n = epsilon a [1 - r (1 + sqrt(s))
#       - (L a / 2) m (m + sbar + r s)],
# r = rho / a = 3 y / (6 - 2 y), m = A / a = 1 + r, s = S / epsilon, sbar = Sbar / epsilon.
# h is concave in eta (a sum of concave functions on y < 3), so its maximiser over the
# admissible (0, eta_max(Q)] is where the sign of dh/deta changes.


def _refined_ratios(eta_: float, Q_: int, L_: float, Lm: float):
    """(a, y, r, m, y r'(y)) of the refined bound at one step: r = rho/a, m = A/a."""
    a_, y = eta_ * Q_, (Q_ - 1) * eta_ * Lm
    r = 3 * y / (6 - 2 * y)
    return a_, y, r, 1 + r, 18 * y / (6 - 2 * y) ** 2


def _refined_bracket(eta_: float, Q_: int, L_: float, Lm: float, s: float, sbar: float) -> float:
    """h / (epsilon a) = 1 - r (1 + sqrt(s)) - (L a/2) m (m + sbar + r s)."""
    a_, _, r, m, _ = _refined_ratios(eta_, Q_, L_, Lm)
    return 1 - r * (1 + math.sqrt(s)) - L_ * a_ / 2 * m * (m + sbar + r * s)


def _refined_slope(eta_: float, Q_: int, L_: float, Lm: float, s: float, sbar: float) -> float:
    """(eta / (epsilon a)) dh/deta: the bracket minus eta times its derivative's magnitude
    (positive where h still increases)."""
    a_, _, r, m, yr = _refined_ratios(eta_, Q_, L_, Lm)
    bracket = 1 - r * (1 + math.sqrt(s)) - L_ * a_ / 2 * m * (m + sbar + r * s)
    return bracket - yr * (1 + math.sqrt(s)) - L_ * a_ / 2 * (
        (m + yr) * (m + sbar + r * s) + m * yr * (1 + s))


def refined_rounds_needed(epsilon: float, *, Q: int, L: float, L_max: float, sigma, K,  # noqa: N803
                          Delta: float) -> dict:
    """Fewest rounds R, and the step eta achieving them, for which the refined bound
    (variant ``refined`` of ``tdcd.theorem1``, derived by fedbound, not published) is at
    most ``epsilon`` with Q local iterations per round.

    R(eta) = ceil(Delta / h(eta)) with h concave in eta (module comment above); eta is its
    maximiser over the admissible steps (0, eta_max(Q)] of conditions (R1)-(R2): the
    largest admissible step when h still increases there, else the root of dh/deta found
    by bisection on log eta. log R = log Delta - log epsilon - log a - log(h/(epsilon a)),
    so neither a tiny epsilon nor a huge Delta under- or overflows. Returns {"Q", "eta",
    "a", "R", "binding"}; raises ValueError for bad input or when R exceeds the float range."""
    with np.errstate(over="ignore"):
        L_, Lm, S_ = _constants(L, L_max, sigma)
    Q_ = int(_positive("Q", Q, integer=True))
    eps = _positive("epsilon", epsilon)
    K_ = PARAMS_REFINED["K"].check(K)
    sig = np.atleast_1d(PARAMS["sigma"].check(sigma))
    if K_.shape != sig.shape:
        raise ValueError(f"K has {K_.size} entries and sigma {sig.size}: one K_j per silo")
    D = float(Delta)
    if not (math.isfinite(D) and D >= 0):
        raise ValueError(f"Delta={Delta!r} must be finite and >= 0")
    with np.errstate(over="ignore"):
        s, sbar = S_ / eps, float(np.sum(sig**2 / K_)) / eps
    if not (math.isfinite(s) and math.isfinite(sbar)):   # (S itself may overflow)
        raise ValueError(f"epsilon={eps:.6g} is too small against sum_j sigma_j^2 = {S_:.6g}: "
                         "their ratio overflows")
    top = get("tdcd.theorem1", "refined").step_choice(L=L_, L_max=Lm, Q=Q_)
    slope = lambda x: _refined_slope(math.exp(x), Q_, L_, Lm, s, sbar)  # noqa: E731
    hi = math.log(top.step)
    if slope(hi) >= 0:
        eta_, binding = top.step, top.binding
    else:
        lo = hi - 1.0
        while slope(lo) < 0:
            lo -= max(1.0, abs(lo))
        while hi - lo > 1e-13 * max(1.0, abs(lo), abs(hi)):
            mid = 0.5 * (lo + hi)
            if mid in (lo, hi):
                break
            lo, hi = (mid, hi) if slope(mid) >= 0 else (lo, mid)
        eta_, binding = math.exp(lo), "interior optimum"
    bracket = _refined_bracket(eta_, Q_, L_, Lm, s, sbar)
    a_ = eta_ * Q_
    if D == 0:
        rounds = 1
    else:
        log_r = math.log(D) - math.log(eps) - math.log(a_) - math.log(bracket)
        if log_r > math.log(np.finfo(float).max):
            raise ValueError(f"epsilon={eps:.6g} needs more rounds than a float can count "
                             "(Delta / h overflows)")
        rounds = max(1, math.ceil(math.exp(log_r) * (1 - 1e-12)))
    return {"Q": Q_, "eta": eta_, "a": a_, "R": rounds, "binding": binding}


def refined_choice(epsilon: float, *, L: float, L_max: float, sigma, K, Delta: float,  # noqa: N803
                   t_comm: float, t_comp: float, Q_grid=(1, 2, 5, 10, 20)) -> dict:
    """The bound-optimal (Q, eta) of the refined variant (derived by fedbound, not
    published) over ``Q_grid``: for each Q, :func:`refined_rounds_needed` and the wall-clock
    time R t_Q with t_Q = 3 t_comm + Q t_comp (:func:`round_time`); the best row has the
    least time (the smaller Q on a tie). Returns {"table": [rows], "best": row}. The
    refined bound increases with Q at fixed eta Q, so the best Q is the grid's smallest
    (bounds/derivations/tdcd_refined.md, section 6)."""
    grid = [int(_positive(f"Q_grid[{i}]", q, integer=True)) for i, q in enumerate(Q_grid)]
    if not grid:
        raise ValueError("Q_grid is empty")
    table = []
    for Q_ in grid:
        row = refined_rounds_needed(epsilon, Q=Q_, L=L, L_max=L_max, sigma=sigma, K=K, Delta=Delta)
        table.append({**row, "time": row["R"] * round_time(Q_, t_comm, t_comp)})
    return {"table": table, "best": min(table, key=lambda row: (row["time"], row["Q"]))}



# ---------------------------------------------------------------------- the loss after R rounds
# fedbound's own result (derived by fedbound, not published; bounds/derivations/
# tdcd_deadline.md): E L(theta^{RQ}) - L* for a mu-PL loss, the refined variant's per-round
# descent (B4) turned into a contraction; registered by the paper's plugin
# (verify/papers/tdcd/deadline.py). A closed form: with eps = rho/A in Young's inequality and
# the PL inequality, kappa = 1 - 2 mu c a/A and m = n + rho A S/(4 c) per round, and
# E L(theta^{RQ}) - L* <= kappa^R Delta + m (1 - kappa^R)/(1 - kappa).

DEADLINE_DERIVATION = "bounds/derivations/tdcd_deadline.md"
mu = sp.Symbol("mu", positive=True)
#: the share of the descent kept against the cross term: 1 - eps with eps = rho/A
_KEPT = eta * Q / REACH
#: 1 - kappa: the certified contraction of the gap per round
DEADLINE_CONTRACTION = 2 * mu * GAIN * _KEPT
#: sum_{r < R} kappa^r = (1 - kappa^R)/(1 - kappa), stable where kappa is near 1
_GEOMETRIC = -expm1(R * log1p(-DEADLINE_CONTRACTION)) / DEADLINE_CONTRACTION
_SURVIVING = sp.exp(R * log1p(-DEADLINE_CONTRACTION))
DEADLINE_VALID = sp.And(REFINED_VALID, DEADLINE_CONTRACTION <= 1)


def deadline_terms() -> dict[str, sp.Expr]:
    """The named terms of ``tdcd.deadline_pl``; +inf outside c > 0, y < 3 (outside the proof)."""
    a_ = eta * Q
    exprs = {
        "transient": Delta * _SURVIVING,
        "noise: mini-batch": L / 2 * REACH * a_ * S_bar * _GEOMETRIC,
        "noise: drift": L / 2 * REACH * RHO * S * _GEOMETRIC,
        "drift x gradient": RHO * REACH * S / (4 * GAIN) * _GEOMETRIC,
    }
    return {name: sp.Piecewise((e, DEADLINE_VALID), (sp.oo, True)) for name, e in exprs.items()}


DEADLINE_PARAMS = {
    **{k: v for k, v in PARAMS_REFINED.items() if k not in ("c", "G0")},
    "mu": Param("mu", "PL constant of L: ||grad L||^2 >= 2 mu (L - L*) (least squares: the "
                "smallest eigenvalue of X^T X / n)", "positive"),
    "Delta": Param("Delta", "L(theta^0) - L*", "nonnegative"),
    "R": Param("R", "communication rounds before the deadline", "positive_integer"),
}
CONDITION_DEADLINE_MU = Condition(
    "mu <= L", sp.LessThan(mu, L),
    f"derived by fedbound, not published ({DEADLINE_DERIVATION}): the PL constant of an "
    "L-smooth loss is at most L")
ERRATUM_DEADLINE = Erratum(
    "the left-hand side and the hypotheses of Theorem 1, (15) (the deadline bound, derived by "
    "fedbound, not published)",
    r"$\frac{1}{R} \sum_r \mathbb{E}\|\nabla \mathcal{L}(\theta^{rQ})\|^2$ for any smooth "
    r"$\mathcal{L}$ under (14)",
    r"$\mathbb{E}\, \mathcal{L}(\theta^{RQ}) - \mathcal{L}^*$ for a $\mu$-PL $\mathcal{L}$: "
    r"the refined variant's per-round descent (B4) contracts the gap by "
    r"$\kappa = 1 - 2\mu c a/A$ per round "
    f"({DEADLINE_DERIVATION}, section 2)",
    f"{PAPER}, Theorem 1, (14)-(15); Section 5.2")
DEADLINE_NOTE = (
    f"Derived by fedbound, not published; see {DEADLINE_DERIVATION}. Algorithm 1 under the "
    "assumptions of fedbound's refined Theorem 1 (bounds/derivations/tdcd_refined.md, section "
    r"2: Assumptions 1-3 with $L_{\max}$ the own-block constant, independent client batches) "
    r"and $\mu$-PL $\mathcal{L}$. Each round's descent (B4) "
    r"$\mathbb{E}\,\mathcal{L}' \le \mathcal{L} - cX + \rho\sqrt{S}\sqrt{X} + n$ with Young's "
    r"inequality at the weight $\epsilon = \rho/A$ and the PL inequality "
    r"$X \ge 2\mu(\mathcal{L} - \mathcal{L}^*)$ gives the contraction "
    r"$\kappa = 1 - 2\mu c a/A$ and the remainder $m = n + \rho A S/(4c)$ per round. "
    r"At $Q = 1$ it is SGD's: $\kappa = 1 - 2\mu\eta(1 - L\eta/2)$, $m = (L/2)\eta^2\bar{S}$.")


def deadline_pl(variant: str = "derived") -> Theorem:
    """``tdcd.deadline_pl`` (derived by fedbound, not published;
    bounds/derivations/tdcd_deadline.md): kappa^R Delta + m (1 - kappa^R)/(1 - kappa), a
    bound on E L(theta^{RQ}) - L* for a mu-PL loss."""
    if variant != "derived":
        raise ValueError(f"tdcd.deadline_pl: unknown variant {variant!r}; its one variant is "
                         "'derived'")
    return Theorem(
        key="tdcd.deadline_pl", variant="derived",
        title=r"TDCD loss after $R$ rounds, $\mu$-PL [derived by fedbound, not published]",
        citation=f"{PAPER}, Algorithm 1, Assumptions 1-3 and the proof of Theorem 1 (App. A); "
                 "the bound derived by fedbound, not published",
        lhs=r"\mathbb{E}\,\mathcal{L}(\tilde\theta^{RQ}) - \mathcal{L}^*", params=DEADLINE_PARAMS,
        term_exprs=deadline_terms(),
        symbols={**{k: v for k, v in SYMBOLS.items() if k not in ("c", "G0")}, "mu": mu},
        conditions=[CONDITION_R1, CONDITION_R2, CONDITION_DEADLINE_MU], errata=[ERRATUM_DEADLINE],
        aggregates=AGGREGATES_REFINED, step="eta", status="holds", notes=DEADLINE_NOTE)


def choose_deadline_local_steps(key: str = "tdcd.deadline_pl", *, Qs, R, eta=None,  # noqa: N803
                                **params) -> DeadlineChoice:
    """The (Q, eta) minimising ``tdcd.deadline_pl`` (derived by fedbound, not published;
    bounds/derivations/tdcd_deadline.md), a bound on E L(theta^{RQ}) - L* for TDCD: for every
    Q of ``Qs`` its rounds ``R`` before the deadline (one number, a {Q: R_Q} mapping or a
    callable, e.g. horizon // (3 t_comm + Q t_comp), Section 5.2) and every step of ``eta``
    (a number or a list; default :func:`deadline_steps` below the largest step that (R1)-(R2)
    admit at that Q). ``params``: L, L_max, mu, sigma, K, Delta of the theorem."""
    thm = deadline_theorem(key, ("tdcd.deadline_pl",), "choose_deadline_local_steps",
                           ("eta", "Q", "R"), params)
    horizon = horizons(list(Qs), R, "R", "Q")
    curve = []
    for Q_, R_Q in horizon.items():
        top = thm.max_step(**params, Q=Q_, R=R_Q)
        etas = steps(eta, top)
        ok = np.asarray(thm.admissible(**params, Q=Q_, R=R_Q, eta=etas), dtype=bool)
        if not ok.any():
            continue
        values = np.where(ok, np.asarray(thm.evaluate(**params, Q=Q_, R=R_Q, eta=etas), dtype=float),
                          np.inf)
        j = int(np.argmin(values))
        curve.append({"Q": Q_, "eta": float(etas[j]), "bound": float(values[j]), "horizon": R_Q})
    if not curve:
        raise ValueError(f"{key}: no step of {eta!r} is admissible at any Q of {list(Qs)}")
    best = min(curve, key=lambda r: (r["bound"], r["Q"]))
    terms = {k: float(v) for k, v in thm.terms(**params, Q=best["Q"], R=best["horizon"],
                                               eta=best["eta"]).items()}
    return DeadlineChoice(key, thm.variant, "Q", {"Q": best["Q"], "eta": best["eta"]},
                          best["bound"], terms, max(terms, key=terms.get), curve)
