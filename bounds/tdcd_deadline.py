"""A deadline bound for TDCD (Das et al. 2022, Algorithm 1): fedbound's own result on
E L(theta^{RQ}) - L*, the loss of the hub models after R rounds (derived by fedbound, not
published; bounds/derivations/tdcd_deadline.md).

``tdcd.deadline_pl``  L mu-PL: the per-round inequality (B4) of fedbound's refined Theorem 1
                      (bounds/derivations/tdcd_refined.md, section 4) turned into a
                      contraction,
                      E gap' <= kappa gap + m, kappa = 1 - 2 mu c a/A,
                      m = n + rho A S/(4 c), so that after R rounds
                      E L(theta^{RQ}) - L* <= kappa^R Delta + m (1 - kappa^R)/(1 - kappa),
                      with a = eta Q, y = (Q - 1) eta L_max, rho = 3 a y/(6 - 2 y),
                      A = a + rho, c = a - rho - (L/2) A^2, n = (L/2) A (a Sbar + rho S),
                      S = sum_j sigma_j^2, Sbar = sum_j sigma_j^2/K_j.

A closed form (its geometric sum written with expm1 and log1p, stable where kappa is near
1). There is no quadratic bound for TDCD here: section 4 of the derivation says why the
worst case over a spectrum does not reduce to one eigenvalue for Q > 1.
"""

from __future__ import annotations

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p

from . import tdcd as td
from .core import Condition, Param, Theorem
from .deadline import LABEL
from .references import cite

PAPER = cite("tdcd")
VARIANT = "derived"
KEY = "tdcd.deadline_pl"
TITLE = "TDCD loss after R rounds, mu-PL"
DERIVATION = "bounds/derivations/tdcd_deadline.md"

mu = sp.Symbol("mu", positive=True)
a = td.eta * td.Q
#: the share of the descent kept against the cross term: (1 - eps) with eps = rho/A (section 2)
KEPT = a / td.REACH
#: 1 - kappa: the certified contraction of the gap per round
CONTRACTION = 2 * mu * td.GAIN * KEPT
#: sum_{r < R} kappa^r = (1 - kappa^R)/(1 - kappa), stably
GEOMETRIC = -expm1(td.R * log1p(-CONTRACTION)) / CONTRACTION
#: kappa^R
SURVIVING = sp.exp(td.R * log1p(-CONTRACTION))
VALID = sp.And(td.REFINED_VALID, CONTRACTION <= 1)


def terms() -> dict[str, sp.Expr]:
    """The named terms (module docstring); +inf outside c > 0, y < 3."""
    exprs = {
        "transient": td.Delta * SURVIVING,
        "noise: mini-batch": td.L / 2 * td.REACH * a * td.S_bar * GEOMETRIC,
        "noise: drift": td.L / 2 * td.REACH * td.RHO * td.S * GEOMETRIC,
        "drift x gradient": td.RHO * td.REACH * td.S / (4 * td.GAIN) * GEOMETRIC,
    }
    return {name: sp.Piecewise((e, VALID), (sp.oo, True)) for name, e in exprs.items()}


PARAMS = {
    **{k: v for k, v in td.PARAMS_REFINED.items() if k not in ("c", "G0")},
    "mu": Param("mu", "PL constant of L: ||grad L||^2 >= 2 mu (L - L*) (least squares: the "
                "smallest eigenvalue of X^T X / n)", "positive"),
    "Delta": Param("Delta", "L(theta^0) - L*", "nonnegative"),
    "R": Param("R", "communication rounds before the deadline", "positive_integer"),
}
CONDITION_MU = Condition("mu <= L", sp.LessThan(mu, td.L),
                         f"derived by fedbound, not published ({DERIVATION}): the PL constant "
                         "of an L-smooth loss is at most L")
NOTE = (
    f"Derived by fedbound, not published; see {DERIVATION}. Algorithm 1 of {PAPER} under the "
    "assumptions of fedbound's refined Theorem 1 (bounds/derivations/tdcd_refined.md, section "
    r"2: Assumptions 1-3 with $L_{\max}$ the own-block constant, independent client batches) "
    r"and $\mu$-PL $\mathcal{L}$. Each round's descent (B4) "
    r"$\mathbb{E}\,\mathcal{L}' \le \mathcal{L} - cX + \rho\sqrt{S}\sqrt{X} + n$ with Young's "
    r"inequality at the weight $\epsilon = \rho/A$ and the PL inequality "
    r"$X \ge 2\mu(\mathcal{L} - \mathcal{L}^*)$ gives the contraction "
    r"$\kappa = 1 - 2\mu c a/A$ and the remainder $m = n + \rho A S/(4c)$ per round. "
    r"At $Q = 1$ it is SGD's: $\kappa = 1 - 2\mu\eta(1 - L\eta/2)$, $m = (L/2)\eta^2\bar{S}$.")


def deadline_pl(variant: str = VARIANT) -> Theorem:
    """``tdcd.deadline_pl`` (module docstring; bounds/derivations/tdcd_deadline.md)."""
    if variant != VARIANT:
        raise ValueError(f"variant {variant!r}: {KEY} has one variant, {VARIANT!r}")
    return Theorem(
        key=KEY, variant=VARIANT, title=TITLE + LABEL,
        citation=f"{PAPER}, Algorithm 1, Assumptions 1-3 and the proof of Theorem 1 (App. A); "
                 "the bound derived by fedbound, not published",
        lhs=r"\mathbb{E}\,\mathcal{L}(\tilde\theta^{RQ}) - \mathcal{L}^*", params=PARAMS,
        term_exprs=terms(),
        symbols={**{k: v for k, v in td.SYMBOLS.items() if k not in ("c", "G0")}, "mu": mu},
        conditions=[td.CONDITION_R1, td.CONDITION_R2, CONDITION_MU],
        aggregates=td.AGGREGATES_REFINED, step="eta", status="holds", notes=NOTE)
