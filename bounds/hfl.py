"""Delay-sensitive hierarchical FL: Ali & Arafa 2025 (key ``hfl`` of :mod:`bounds.references`).
Equation, appendix and remark numbers are the journal version's; "arXiv version" marks the few
places where the arXiv version prints something else (its main text has the same numbering).

Registered results
------------------
``hfl.lemma1``      Lemma 1, model deviation, eq. (18), per (u, i).
``hfl.theorem1``    Theorem 1, per-group bound, eq. (19), per group.
``hfl.theorem2``    Theorem 2, global bound, eq. (20).
``hfl.corollary1``  Corollary 1 and its proof (Appendix E) at alpha = min(1/sqrt(U), 1/L),
                    with explicit constants.

Parameters: ``alpha, L, G, sigma, Delta`` (scalars; ``Delta`` is per group in Theorem 1),
``sizes`` [G] (group sizes |N_i|) and ``t`` [..., U, G], the realised schedule of local
iteration counts t_i^u (rounds x groups). A batch of schedules of different lengths is
zero-padded: a row of zeros is a round that did not happen (after round U), so
U = the number of non-zero rows. The corollary also takes ``t_max`` [G] (t_i^max of (22)).

The schedule reductions (U, sums over rounds, kappa) are :class:`~bounds.core.Aggregate`
symbols whose ``reduce`` keeps the batch axes: Theorem 2 and Corollary 1 evaluate to
[...] (one bound per schedule), Theorem 1 to [..., G] (one per group), Lemma 1 to
[..., U, G] (one per round and group; padded rows carry no meaning).

Variants of Theorem 2 (each difference is an Erratum):

``printed`` journal version of (20): second term 12 a^2 L^2 G^2 |N_g|^2 / (sum |N_i|^2)^2
            (an OCR/typesetting error) and no G^2 on the t^{u-1} term.
``arxiv``   arXiv version of (20): second term 12 a^2 L^2 G^2 kappa^2, no G^2 on the
            t^{u-1} term.
``proof``   (default) what the proof (Appendix D) supports: the kappa^2 term of (40) and G^2
            on the t^{u-1} term (Lemma 1 in (39)), with t_i^0 := 0.
``tight``   derived by fedbound, NOT published: bound ||x^u - x_i^{u,l}||^2
            directly in (37): 2 Delta/(a U) + a L kappa sigma^2
            + a^2 L^2 G^2 W/U sum_u sum_i |N_i|^2 (t-1)(2t-1)/6.
``refined`` derived by fedbound, NOT published (bounds/derivations/hfl_refined.md): keeps the
            variance reduction of averaging the t_i^u |N_i| stochastic gradients of a round,
            2 Delta/(a U) + a L sigma^2/(N^2 U) sum_u sum_i |N_i|/t_i^u
            + a^2 L^2 G^2/(N U) sum_u sum_i |N_i| (t-1)(2t-1)/6
            + a^2 L^2 G sigma/(3 N^2 U) sum_u sum_i |N_i|^{3/2} (t - 1/t), N = sum_i |N_i|.
            Not monotone in S: at S = 0 (t = 1) it is the minibatch-SGD bound
            2 Delta/(a U) + a L sigma^2/N. Corollary 1 has a ``refined`` variant too.
``iid``     derived by fedbound, NOT published (bounds/derivations/hfl_iid.md): under the
            paper's Section II model, every client's stochastic gradient unbiased for grad f
            (data i.i.d. among clients), the local drift is driven by the noise
            (a^2 L^2 sigma^2 t) and the gradient part of it is absorbed into the left-hand side:
            [2 Delta/(a U) + a L sigma^2 Y/U + (1 + theta) a^2 L^2 sigma^2 Gamma Z_iid/U
            + a^2 L^2 sigma^2 Gamma^{1/2} C_iid/U] / (1 - rho), with tau = max t - 1,
            theta = a L tau, Gamma = (1 + a L)^{2(tau - 1)}, rho = Gamma theta (1 + theta)/4,
            Z_iid = (1/N) sum_u sum_i (t - 1)/2, C_iid = (1/N^2) sum_u sum_i |N_i| (1 - 1/t),
            if a L tau <= 1/2. No G. Corollary 1 has an ``iid`` variant too.

Expectations over delay paths (t and U random, independent of the SGD noise):
:func:`expected` gives a Monte-Carlo mean with a 95% interval (exact in the limit) and
:func:`plug_in` a closed-form renewal plug-in (derived by fedbound), an approximation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import sympy as sp

from . import delays as dl
from . import reduce as rd
from .core import Aggregate, Condition, Erratum, Param, Rate, Theorem, get
from .reduce import avg_l2, coupling_count, group_weight, kappa_of
from .references import cite

PAPER = cite("hfl")
#: the variants of Theorem 2 (as printed in each version, as its proof supports, fedbound's tight)
THEOREM2_VARIANTS = ("printed", "arxiv", "proof", "tight")
#: fedbound's own refined variant (derived by fedbound, not published), of Theorem 2 and
#: Corollary 1; derived in REFINED_DERIVATION, a file of the package (in the wheel too:
#: ``importlib.resources.files("fedbound.bounds") / "derivations" / "hfl_refined.md"``)
REFINED = "refined"
REFINED_DERIVATION = "bounds/derivations/hfl_refined.md"
#: fedbound's i.i.d. variant (derived by fedbound, not published), of Theorem 2 and Corollary 1,
#: under the paper's Section II model (data i.i.d. among clients); derived in IID_DERIVATION
IID = "iid"
IID_DERIVATION = "bounds/derivations/hfl_iid.md"
KEYS = ("hfl.lemma1", "hfl.theorem1", "hfl.theorem2", "hfl.corollary1")

# ---------------------------------------------------------------------- symbols

alpha, L, G, sigma, Delta = sp.symbols("alpha L G sigma Delta", nonnegative=True)
SYMBOLS = {"alpha": alpha, "L": L, "G": G, "sigma": sigma, "Delta": Delta}
#: aggregates: U rounds, kappa (Theorem 1), kappa_J of the journal's second term of (20), the sums
#: Z4 = W sum_u sum_i |N_i|^2 (t_i^{u-1})^2 and Z5 = W sum_u sum_i |N_i|^2 (t-1)(2t-1)/6,
#: M = W sum_i (|N_i| t_i^max)^2; per group (Theorem 1): A_i = sum_u t_i^u,
#: Q_i = sum_{u<U} (t_i^u)^2, n_i = |N_i|, Delta_i; per (u, i) (Lemma 1): t_ui^2.
U, kappa, kappa_J, Z4, Z5, M = sp.symbols("U kappa kappa_J Z_4 Z_5 M", nonnegative=True)
A_i, Q_i, n_i, Delta_i, t2 = sp.symbols("A_i Q_i n_i Delta_i t_ui^2", nonnegative=True)
#: aggregates of the refined variants (derived by fedbound, REFINED_DERIVATION), N = sum_i |N_i|:
#: Y = (1/N^2) sum_u sum_i |N_i| / t_i^u (noise), Z_r = (1/N) sum_u sum_i |N_i| (t-1)(2t-1)/6
#: (drift), C_r = (1/N^2) sum_u sum_i |N_i|^{3/2} (t - 1/t) (noise-drift coupling); for the
#: corollary the per-round M_r and C_m of the same sums at t_i^max, and N itself.
Y, Z_r, C_r, M_r, C_m, N_tot = sp.symbols("Y Z_r C_r M_r C_m N", positive=True)
#: aggregates of the i.i.d. variants (derived by fedbound, IID_DERIVATION): tau = max_u,i t_i^u - 1,
#: Z_iid = (1/N) sum_u sum_i (t-1)/2 (noise-driven drift), C_iid = (1/N^2) sum_u sum_i |N_i| (1 - 1/t)
#: (coupling); for the corollary the same at t_i^max
tau, Z_iid, C_iid = sp.symbols("tau Z_iid C_iid", nonnegative=True)
tau_m, Z_im, C_im = sp.symbols("tau^max Z_iid^max C_iid^max", nonnegative=True)

_u, _i, _j, _U, _Ng = sp.symbols("u i j U N_g", integer=True, positive=True)
_t, _n, _tm = sp.IndexedBase("t"), sp.IndexedBase("n"), sp.IndexedBase("t^max")
_N = sp.Sum(_n[_j], (_j, 1, _Ng))
_W_DISPLAY = _Ng / _N**2
_KAPPA = _W_DISPLAY * sp.Sum(_n[_j] ** 2, (_j, 1, _Ng))


def _param(name: str, description: str, domain: str, vector: bool = False) -> Param:
    return Param(name, description, domain, vector=vector)


BASE_PARAMS = {
    "alpha": _param("alpha", "learning rate, common to all clients, (5)", "positive"),
    "L": _param("L", "smoothness constant, Assumption 1, (14)", "positive"),
    "G": _param("G", "bound on E||g~||^2 <= G^2, Assumption 3, (16)", "positive"),
    "sigma": _param("sigma", "variance bound, Assumption 4, (17)", "nonnegative"),
    "Delta": _param("Delta", "initial gap f(x^1) - f_inf (Theorem 2, (20))", "nonnegative"),
    "sizes": _param("sizes", "group sizes |N_i| (Section II)", "positive_integer", vector=True),
    "t": _param("t", "schedule t[u, i] of local iterations, (7), rows = rounds; zero "
                "rows pad rounds after U", "nonnegative", vector=True),
}
THEOREM1_PARAMS = {**BASE_PARAMS, "Delta": _param(
    "Delta", "per-group gaps f_i(x^1) - f_i,inf (Theorem 1, (19))", "nonnegative", vector=True)}
COROLLARY1_PARAMS = {**BASE_PARAMS, "t_max": _param(
    "t_max", "a.s. maxima t_i^max = max(1, ceil(S/c_i)) of (22)", "positive_integer",
    vector=True)}


# ---------------------------------------------------------------------- schedule reductions
# numpy only, in bounds.reduce (named, so that a result's manifest can name them)

_DISPLAY_U = sp.Symbol("U")
_TSUM = sp.Sum(_t[_u, _i], (_u, 1, _DISPLAY_U))
_AGG_U = Aggregate(U, _DISPLAY_U, rd.rounds, ("t",))
_AGG_KAPPA = Aggregate(kappa, _KAPPA, rd.kappa, ("sizes",))
_AGG_Z4 = Aggregate(Z4, _W_DISPLAY * sp.Sum(sp.Sum(_n[_i] ** 2 * _t[_u - 1, _i] ** 2, (_i, 1, _Ng)),
                                    (_u, 1, _DISPLAY_U)), rd.previous_round_sum, ("t", "sizes"))
_AGG_Z5 = Aggregate(Z5, _W_DISPLAY * sp.Sum(sp.Sum(_n[_i] ** 2 * (_t[_u, _i] - 1) * (2 * _t[_u, _i] - 1)
                                           / 6, (_i, 1, _Ng)), (_u, 1, _DISPLAY_U)),
                    rd.within_round_sum, ("t", "sizes"))
_AGG_KJ = Aggregate(kappa_J, _Ng**2 / sp.Sum(_n[_j] ** 2, (_j, 1, _Ng)) ** 2, rd.kappa_journal,
                    ("sizes",))
_AGG_M = Aggregate(M, _W_DISPLAY * sp.Sum((_n[_i] * _tm[_i]) ** 2, (_i, 1, _Ng)), rd.t_max_sum,
                   ("t", "sizes", "t_max"))


def _per_round_display(cell: sp.Expr, power: int | sp.Rational, norm: int) -> sp.Expr:
    return sp.Sum(sp.Sum(_n[_i] ** power * cell, (_i, 1, _Ng)), (_u, 1, _DISPLAY_U)) / _N**norm


_TUI, _TMI = _t[_u, _i], _tm[_i]
_AGG_Y = Aggregate(Y, _per_round_display(1 / _TUI, 1, 2),
                   rd.refined_noise, ("t", "sizes"))
_AGG_ZR = Aggregate(Z_r, _per_round_display((_TUI - 1) * (2 * _TUI - 1) / 6, 1, 1),
                    rd.refined_drift, ("t", "sizes"))
_AGG_CR = Aggregate(C_r, _per_round_display(_TUI - 1 / _TUI, sp.Rational(3, 2), 2),
                    rd.refined_coupling, ("t", "sizes"))
_AGG_MR = Aggregate(M_r, sp.Sum(_n[_i] * (_TMI - 1) * (2 * _TMI - 1) / 6, (_i, 1, _Ng)) / _N,
                    rd.refined_drift_at_t_max, ("t", "sizes", "t_max"))
_AGG_CM = Aggregate(C_m, sp.Sum(_n[_i] ** sp.Rational(3, 2) * (_TMI - 1 / _TMI), (_i, 1, _Ng))
                    / _N**2, rd.refined_coupling_at_t_max,
                    ("t", "sizes", "t_max"))
_AGG_N = Aggregate(N_tot, _N, rd.total_size, ("sizes",))
#: tau and tau^max are displayed as themselves (max over rounds and groups has no sympy form
#: that every printer reads); the variant's notes define them
_AGG_TAU = Aggregate(tau, tau, rd.iid_longest, ("t",))
_AGG_ZI = Aggregate(Z_iid, _per_round_display((_TUI - 1) / 2, 0, 1), rd.iid_drift, ("t", "sizes"))
_AGG_CI = Aggregate(C_iid, _per_round_display(1 - 1 / _TUI, 1, 2), rd.iid_coupling, ("t", "sizes"))
_AGG_TAUM = Aggregate(tau_m, tau_m, rd.iid_longest_at_t_max, ("t", "t_max"))
_AGG_ZIM = Aggregate(Z_im, sp.Sum((_TMI - 1) / 2, (_i, 1, _Ng)) / _N, rd.iid_drift_at_t_max,
                     ("t", "sizes", "t_max"))
_AGG_CIM = Aggregate(C_im, sp.Sum(_n[_i] * (1 - 1 / _TMI), (_i, 1, _Ng)) / _N**2,
                     rd.iid_coupling_at_t_max, ("t", "sizes", "t_max"))

# ---------------------------------------------------------------------- conditions, errata

CONDITION_STEP = Condition("alpha <= 1/L", sp.LessThan(alpha, 1 / L),
                           f"{PAPER}, Theorems 1 and 2 (used in their proofs, (28) and (36))")

ERRATUM_J247 = Erratum(
    "second term of (20)",
    r"$\frac{12 \alpha^2 L^2 G^2 |\mathcal{N}_g|^2}{(\sum_i |\mathcal{N}_i|^2)^2}$ "
    "(journal version)",
    r"$\frac{12 \alpha^2 L^2 G^2 |\mathcal{N}_g|^2 (\sum_i |\mathcal{N}_i|^2)^2}"
    r"{(\sum_i |\mathcal{N}_i|)^4} = 12 \alpha^2 L^2 G^2 \kappa^2$",
    f"{PAPER}, Theorem 2, eq. (20) (journal version) vs its own (40) (Appendix D) and "
    "Appendix E; arXiv version, Theorem 2, eq. (20)")
ERRATUM_G2 = Erratum(
    "fourth term of (20) and App. E",
    r"$12 \alpha^2 L^2 W \sum_i |\mathcal{N}_i|^2 (t_i^{u-1})^2$ (no $G^2$)",
    r"$12 \alpha^2 L^2 G^2 W \sum_i |\mathcal{N}_i|^2 (t_i^{u-1})^2$: Lemma 1 bounds "
    r"$\|x^u - x_i^{u-1,t}\|^2$ by $2 \alpha^2 \left((t_i^{u-1})^2 + \kappa\right) G^2$",
    f"{PAPER}, Theorem 2, eq. (20); proof of Theorem 2 (Appendix D), (39) and (40); "
    "Appendix E (both versions)")
ERRATUM_T0 = Erratum(
    r"$t_i^0$ in (20)", r"$t_i^{u-1}$ at $u = 1$ (undefined)",
    r"$t_i^0 := 0$: at $u = 1$ the reference point of (37) can be $x^1$ itself",
    f"{PAPER}, Theorem 2, eq. (20); proof of Theorem 2 (Appendix D), (37)")
ERRATUM_TIGHT = Erratum(
    "Theorem 2, tight variant (derived by fedbound, not published)",
    r"route $\|x^u - x_i^{u,l}\|$ through $x_i^{u-1,t_i^{u-1}}$ ((38))",
    r"bound $\|x^u - x_i^{u,l}\|^2 \le \alpha^2 l^2 G^2$ directly in (37): no $\kappa^2$ and "
    r"$t^{u-1}$ terms, factor $4 \to 1$",
    f"{PAPER}, proof of Theorem 2 (Appendix D), (37) and (38)")
ERRATUM_REFINED_NOISE = Erratum(
    "noise term of Theorem 2, (20), from (35) (refined variant, derived by fedbound, not "
    "published)",
    r"$\alpha L \kappa \sigma^2$: (35) bounds the noise of the global update by "
    r"$|\mathcal{N}_g| \sum_i |\mathcal{N}_i|^2 \sigma^2 / N^2$ and drops the cross term between "
    "the noise and the later local gradients",
    r"$\frac{\alpha L \sigma^2}{N^2 \mathcal{U}} \sum_u \sum_i |\mathcal{N}_i|/t_i^u$: the "
    r"$t_i^u |\mathcal{N}_i|$ noises of a round are martingale differences (independent across "
    "clients and local iterations given the past, as in (26)), so "
    r"$\mathbb{E}\|\text{noise}\|^2 \le \frac{\sigma^2}{N^2} \sum_i |\mathcal{N}_i|/t_i^u$; the "
    "cross term is bounded with the Lipschitz gradient and Cauchy-Schwarz: noise-drift "
    r"coupling $\frac{\alpha^2 L^2 G \sigma}{3 N^2 \mathcal{U}} \sum_u \sum_i "
    r"|\mathcal{N}_i|^{3/2} (t_i^u - 1/t_i^u)$ "
    f"({REFINED_DERIVATION}, steps 3-4b)",
    f"{PAPER}, proof of Theorem 2 (App. D), (33)-(36); (26) in the proof of Theorem 1 "
    "(App. C); Assumptions 1-4 (Assumption 1 read as an $L$-Lipschitz gradient)")
ERRATUM_REFINED_DRIFT = Erratum(
    "drift term of Theorem 2, (37)-(40) (refined variant, derived by fedbound, not published)",
    r"Cauchy-Schwarz over groups, $\|\sum_i (|\mathcal{N}_i|/N) X_i\|^2 \le |\mathcal{N}_g| "
    r"\sum_i (|\mathcal{N}_i|/N)^2 \|X_i\|^2$, and the detour through $x_i^{u-1,t_i^{u-1}}$ "
    r"with Lemma 1 ($\kappa^2$ and $t^{u-1}$ terms, factor 4)",
    r"Jensen with the weights $\frac{|\mathcal{N}_i|}{N} \frac{1}{t_i^u}$ of $h^u$ and "
    r"$\|x^u - x_i^{u,l}\|^2 \le \alpha^2 l^2 G^2$ directly: "
    r"$\frac{\alpha^2 L^2 G^2}{N \mathcal{U}} \sum_u \sum_i |\mathcal{N}_i| "
    r"\frac{(t_i^u - 1)(2 t_i^u - 1)}{6}$; Lemma 1 is "
    f"not used ({REFINED_DERIVATION}, steps 5 and 7)",
    f"{PAPER}, proof of Theorem 2 (App. D), (37)-(40); Lemma 1, (18)")
ERRATUM_REFINED_COROLLARY = Erratum(
    "Corollary 1 (refined variant, derived by fedbound, not published)",
    r"App. E: Theorem 2's printed terms with $t_i^u \le t_i^{\max}$: "
    r"$\frac{2 \Delta + L \kappa \sigma^2}{\sqrt{\mathcal{U}}} + "
    r"\frac{L^2 G^2 (12 \kappa^2 + \frac{40}{3} M)}{\mathcal{U}}$ for $\mathcal{U} \ge L^2$",
    r"the refined Theorem 2 with $1/t_i^u \le 1$ and $t_i^u \le t_i^{\max}$ (its drift and "
    r"coupling are increasing in $t$): $\frac{2 \Delta + L \sigma^2/N}{\sqrt{\mathcal{U}}} + "
    r"\frac{L^2 G (G M_r + \sigma C_m/3)}{\mathcal{U}}$ for $\mathcal{U} \ge L^2$ "
    f"({REFINED_DERIVATION}, section 8)",
    f"{PAPER}, Corollary 1 and its proof (App. E), (21)-(22); Lemma 1 is not used")
ERRATUM_IID_DRIFT = Erratum(
    "drift terms of Theorem 2, (37)-(40) (iid variant, derived by fedbound, not published)",
    r"$\|x^u - x_i^{u,l}\|^2 \le \alpha^2 l^2 G^2$ ((38)) whatever the data, so the drift grows "
    r"like $\alpha^2 L^2 G^2 t^2$ with $G^2 \ge \sigma^2$",
    r"with every client's stochastic gradient unbiased for $\nabla f$ (Section II: data i.i.d. "
    r"among clients), the local path is the noiseless gradient path from $x^u$ plus a noise "
    r"part; the noise part gives $\frac{(1 + \theta) \alpha^2 L^2 \sigma^2 \Gamma}{N \mathcal{U}}"
    r" \sum_u \sum_i \frac{t_i^u - 1}{2}$, the gradient part (at most "
    r"$\alpha^2 L^2 \Gamma \tau^2 \|\nabla f(x^u)\|^2/4$ before Young's inequality) is absorbed "
    r"into the left-hand side, the factor $1/(1 - \rho)$; $G$ is not used "
    f"({IID_DERIVATION}, steps 5-8)",
    f"{PAPER}, Section II; proof of Theorem 2 (App. D), (37)-(40); Assumptions 1, 2 and 4")
ERRATUM_IID_NOISE = Erratum(
    "noise term of Theorem 2, (20), from (35) (iid variant, derived by fedbound, not published)",
    r"$\alpha L \kappa \sigma^2$: (35) bounds the noise of the global update by "
    r"$|\mathcal{N}_g| \sum_i |\mathcal{N}_i|^2 \sigma^2 / N^2$ and drops the cross term between "
    "the noise and the later local gradients",
    r"$\frac{\alpha L \sigma^2}{N^2 \mathcal{U}} \sum_u \sum_i |\mathcal{N}_i|/t_i^u$ (the "
    r"$t_i^u |\mathcal{N}_i|$ noises of a round are martingale differences, as in (26)); the cross "
    r"term meets only the noise part of the local path: "
    r"$\frac{\alpha^2 L^2 \sigma^2 \Gamma^{1/2}}{N^2 \mathcal{U}} \sum_u \sum_i |\mathcal{N}_i|"
    r"(1 - 1/t_i^u)$, no $G$ "
    f"({IID_DERIVATION}, steps 4 and 9)",
    f"{PAPER}, proof of Theorem 2 (App. D), (33)-(36); (26) in the proof of Theorem 1 (App. C)")
ERRATUM_IID_COROLLARY = Erratum(
    "Corollary 1 (iid variant, derived by fedbound, not published)",
    r"App. E: Theorem 2's printed terms with $t_i^u \le t_i^{\max}$",
    r"the iid Theorem 2 with $1/t_i^u \le 1$ and $t_i^u \le t_i^{\max}$ (each of its terms is "
    r"non-decreasing in every $t_i^u$ but the noise, and in $\tau$): $\tau \to \tau^{\max} = "
    r"\max_i t_i^{\max} - 1$, $Z \to Z^{\max} = \frac{1}{N} \sum_i \frac{t_i^{\max} - 1}{2}$ per "
    r"round, $C \to C^{\max} = \frac{1}{N^2} \sum_i |\mathcal{N}_i| (1 - 1/t_i^{\max})$ per round "
    f"({IID_DERIVATION}, section 11)",
    f"{PAPER}, Corollary 1 and its proof (App. E), (21)-(22); Section II")

ERRATUM_J233 = Erratum(
    "last function value in (19)", r"$f_i(x_i^{u,t_i^{\mathcal{U}}})$ (journal version)",
    r"$f_i(x_i^{\mathcal{U},t_i^{\mathcal{U}}})$",
    f"{PAPER}, Theorem 1, eq. (19) (journal version) vs (32) in its proof (Appendix C); "
    "arXiv version, Theorem 1, eq. (19)")
ERRATUM_LEMMA_STEP = Erratum(
    "hypothesis of Lemma 1", r"$0 \le \alpha \le 1/L$",
    r"any $\alpha \ge 0$ (App. B never uses it)",
    f"{PAPER}, Lemma 1, eq. (18) vs its proof (Appendix B)")
ERRATUM_REMARK2 = Erratum(
    "Remark 2 on Lemma 1", r"$|\mathcal{N}_q| = 1$ (journal version)",
    r"$|\mathcal{N}_g| = 1$ (one group; OCR)",
    f"{PAPER}, Remark 2 (journal version); arXiv version, Remark 2")
ERRATUM_TMAX = Erratum(
    r"$t_i^{\max}$ of (22)", r"$\lceil S / c_i \rceil$",
    r"$\max(1, \lceil S / c_i \rceil)$ ($S = 0$ gives $t = 1$)",
    f"{PAPER}, eq. (22)")
ERRATUM_COR_STEP = Erratum(
    "Corollary 1 step", r"$\alpha \le 1/\sqrt{\mathcal{U}}$ gives $O(1/\sqrt{\mathcal{U}})$",
    r"$\alpha = \min(1/\sqrt{\mathcal{U}}, 1/L)$ as stated; a much smaller $\alpha$ inflates "
    r"$\frac{2 \Delta}{\alpha \mathcal{U}}$",
    f"{PAPER}, Corollary 1 and its proof (Appendix E)")

CONDITION_IID_LOCAL = Condition(
    "alpha L tau <= 1/2", sp.LessThan(alpha * L * tau, sp.Rational(1, 2)),
    f"{PAPER}, Theorem 2 under its Section II model, as {IID_DERIVATION}, section 4 derives it "
    "(derived by fedbound, not published): then rho < 0.51",
    hint="tau = max_u,i t_i^u - 1, so alpha <= 1/(2 L tau)")
CONDITION_IID_COROLLARY = Condition(
    "min(1/sqrt(U), 1/L) L tau^max <= 1/2", sp.LessThan(
        1 / sp.Max(sp.sqrt(U), L) * L * tau_m, sp.Rational(1, 2)),
    f"{PAPER}, Corollary 1 under its Section II model, as {IID_DERIVATION}, section 11 derives "
    "it (derived by fedbound, not published): alpha L tau <= 1/2 at the corollary's step",
    hint="tau^max = max_i t_i^max - 1: needs U >= 4 L^2 (tau^max)^2, or t^max = 1")

_LHS2 = r"\frac{1}{\mathcal{U}}\sum_{u=1}^{\mathcal{U}}\mathbb{E}\|\nabla f(x^u)\|^2"
_LHS1 = (r"\frac{1}{\sum_u t_i^u}\sum_{u=1}^{\mathcal{U}}\sum_{l=1}^{t_i^u}"
         r"\mathbb{E}\|\nabla f_i(x_i^{u,l-1})\|^2")
_LHSL = r"\mathbb{E}\|x^{u+1}-x_i^{u,t_i^u}\|^2"


def _theorem(key, variant, title, citation, lhs, params, terms, aggregates, conditions,
             errata, status, notes, step="alpha") -> Theorem:
    return Theorem(key=key, variant=variant, title=title, citation=citation, lhs=lhs,
                   params=params, term_exprs=terms, symbols=SYMBOLS, conditions=conditions,
                   errata=errata, aggregates=aggregates, step=step, status=status, notes=notes)


# ---------------------------------------------------------------------- results


def lemma1(variant: str = "proof") -> Theorem:
    """Lemma 1, eq. (18): E||x^{u+1} - x_i^{u,t_i^u}||^2 <= 2 a^2 ((t_i^u)^2 + kappa) G^2
    for every (u, i). ``printed`` keeps the stated 0 <= alpha <= 1/L; ``proof`` drops it
    (its proof, Appendix B, never uses it). Evaluates to [..., U, G]."""
    t2_agg = Aggregate(t2, _t[_u, _i] ** 2, rd.squared_counts, ("t",))
    kap = Aggregate(kappa, _KAPPA, rd.kappa_per_cell, ("sizes",))
    conditions = [CONDITION_STEP] if variant == "printed" else []
    errata = [ERRATUM_REMARK2] + ([] if variant == "printed" else [ERRATUM_LEMMA_STEP])
    return _theorem(
        "hfl.lemma1", variant, "HFL model deviation (18)", f"{PAPER}, Lemma 1, eq. (18)",
        _LHSL, {n: BASE_PARAMS[n] for n in ("alpha", "L", "G", "sizes", "t")
                if n != "L" or conditions},
        {"own group": 2 * alpha**2 * t2 * G**2, "all groups": 2 * alpha**2 * kappa * G**2},
        [t2_agg, kap], conditions, errata, "holds",
        r"Holds pathwise when $\|\tilde{g}\| \le G$ almost surely: every step of the proof "
        "(Appendix B) then holds without expectation (derived by fedbound, not published).",
        step="alpha" if conditions else None)


def theorem1(variant: str = "proof") -> Theorem:
    """Theorem 1, eq. (19): the per-group bound, [..., G]. Vacuous (>= G^2) whenever
    U >= 2 with balanced counts (derived by fedbound: AM-GM and Cauchy-Schwarz on its last two
    terms): see :func:`vacuous`."""
    aggs = [
        Aggregate(A_i, _TSUM, rd.iterations_per_group, ("t",)),
        Aggregate(Q_i, sp.Sum(_t[_u, _i] ** 2, (_u, 1, _DISPLAY_U - 1)),
                  rd.squares_before_last_round, ("t",)),
        Aggregate(U, _DISPLAY_U, rd.rounds_per_group, ("t",)),
        Aggregate(n_i, _n[_i], rd.group_sizes, ("sizes",)),
        Aggregate(Delta_i, sp.IndexedBase("Delta")[_i],
                  rd.group_gaps, ("Delta",)),
        Aggregate(kappa, _KAPPA, rd.kappa_per_group, ("sizes",)),
    ]
    terms = {
        "transient": 2 * Delta_i / (alpha * A_i),
        "noise": alpha * L * sigma**2 / n_i,
        "restart gaps": (1 / (alpha * A_i) + 2 * (L + 1) * kappa * alpha / A_i) * (U - 1) * G**2,
        "local drift": 2 * (L + 1) * alpha / A_i * Q_i * G**2,
    }
    return _theorem(
        "hfl.theorem1", variant, "HFL per-group bound (19)", f"{PAPER}, Theorem 1, eq. (19)",
        _LHS1, THEOREM1_PARAMS, terms, aggs, [CONDITION_STEP], [ERRATUM_J233],
        "holds-with-erratum", r"Vacuous ($\ge G^2$) whenever $U \ge 2$ with balanced $t$ "
        "(derived by fedbound, not published); informative only for isolated groups "
        r"($U = 1$, $S \ge T$), Remark 4.")


REFINED_LABEL = " [derived by fedbound, not published]"
REFINED_NOTE = f"Derived by fedbound, not published; see {REFINED_DERIVATION}. "
IID_NOTE = (
    f"Derived by fedbound, not published; see {IID_DERIVATION}. Under the paper's Section II "
    "model: every client's stochastic gradient is unbiased for the gradient of the global "
    r"objective $f$ (data i.i.d. among clients; a split of the data that differs by group is "
    r"outside it), with Assumption 1 read as an $L$-Lipschitz $\nabla f$, Assumptions 2 and 4, "
    r"and the independence of (26); Assumption 3 ($G$) is not used. Conditional on the delay path "
    r"$(t, U)$. $\tau = \max_{u,i} t_i^u - 1$, $\theta = \alpha L \tau$, "
    r"$\Gamma = (1 + \alpha L)^{2(\tau - 1)}$, $\rho = \Gamma \theta (1 + \theta)/4$: the local "
    r"drift is driven by the noise ($\alpha^2 L^2 \sigma^2 t$) and its gradient part is absorbed "
    r"into the left-hand side (the term 'absorbed gradient drift'). At $S = 0$ ($t = 1$) it is the "
    r"minibatch-SGD bound $2 \Delta/(\alpha U) + \alpha L \sigma^2/N$, as refined.")


def _iid_terms(a: sp.Expr, longest: sp.Expr, transient: sp.Expr, noise: sp.Expr, drift: sp.Expr,
               coupling: sp.Expr) -> dict[str, sp.Expr]:
    """The terms of the iid variants (IID_DERIVATION, step 10) at step ``a`` with the longest
    round ``longest`` (tau): ``noise``, ``drift`` and ``coupling`` are their per-round sums
    averaged over rounds (Y/U, Z_iid/U, C_iid/U or their corollary bounds)."""
    theta = a * L * longest
    growth = (1 + a * L) ** (2 * (longest - 1))
    rho = growth * theta * (1 + theta) / 4
    terms = {"transient": transient, "noise": a * L * sigma**2 * noise,
             "local drift": (1 + theta) * a**2 * L**2 * sigma**2 * growth * drift,
             "noise-drift coupling": a**2 * L**2 * sigma**2 * (1 + a * L) ** (longest - 1) * coupling}
    # the gradient part of the drift, absorbed: sum / (1 - rho) - sum (+inf where rho >= 1,
    # outside the condition alpha L tau <= 1/2, never a negative number)
    terms["absorbed gradient drift"] = sp.Add(*terms.values()) * rho / sp.Max(1 - rho, 0)
    return terms


def _theorem2_terms(variant: str) -> dict[str, sp.Expr]:
    """The terms of (20) per variant (module docstring)."""
    if variant == "refined":
        return {"transient": 2 * Delta / (alpha * U), "noise": alpha * L * sigma**2 * Y / U,
                "within-round drift": alpha**2 * L**2 * G**2 * Z_r / U,
                "noise-drift coupling": alpha**2 * L**2 * G * sigma * C_r / (3 * U)}
    if variant == "iid":
        return _iid_terms(alpha, tau, 2 * Delta / (alpha * U), Y / U, Z_iid / U, C_iid / U)
    if variant == "tight":
        return {"transient": 2 * Delta / (alpha * U), "noise": alpha * L * kappa * sigma**2,
                "within-round drift": alpha**2 * L**2 * G**2 * Z5 / U}
    second = kappa_J if variant == "printed" else kappa**2
    g4 = G**2 if variant == "proof" else 1
    return {
        "transient": 2 * Delta / (alpha * U),
        "kappa^2": 12 * alpha**2 * L**2 * G**2 * second,
        "noise": alpha * L * kappa * sigma**2,
        "previous-round drift": 12 * alpha**2 * L**2 * g4 * Z4 / U,
        "within-round drift": 4 * alpha**2 * L**2 * G**2 * Z5 / U,
    }


_T2_ERRATA = {
    "printed": [ERRATUM_T0],
    "arxiv": [ERRATUM_J247, ERRATUM_T0],
    "proof": [ERRATUM_J247, ERRATUM_G2, ERRATUM_T0],
    "tight": [ERRATUM_TIGHT, ERRATUM_J247, ERRATUM_G2],
    "refined": [ERRATUM_REFINED_NOISE, ERRATUM_REFINED_DRIFT],
    "iid": [ERRATUM_IID_NOISE, ERRATUM_IID_DRIFT],
}
#: printed and arxiv have a wrong proof step (no G^2 in (39)) but their statements hold: each is
#: >= tight term by term (the 4 a^2 L^2 G^2 Z5/U term alone is >= tight's drift term), and
#: tight follows from the paper's own steps (37)-(38) (derived by fedbound). refined (derived by fedbound)
#: holds by its derivation and passed the stress tests of bounds/derivations/hfl_refined.md, 10.
_T2_STATUS = {"printed": "holds-with-erratum", "arxiv": "holds-with-erratum",
              "proof": "holds-with-erratum", "tight": "holds-with-erratum",
              "refined": "holds", "iid": "holds"}
IMPLIED_BY_TIGHT = (r"Holds as printed: it is $\ge$ the tight variant term by term (tight "
                    "follows from (37)-(38), derived by fedbound, not published), although its "
                    "proof drops $G^2$ in (39).")


REFINED_T2_NOTE = (
    REFINED_NOTE + "Conditional on the delay path $(t, U)$, on which the SGD noise does not "
    "depend. Same hypotheses as Theorem 2 (Assumption 1 read as an $L$-Lipschitz gradient, as "
    r"(37) does; $\alpha \le 1/L$). Keeps the variance reduction of averaging a round's "
    r"$t_i^u |N_i|$ gradients: at $S = 0$ ($t = 1$) it is the minibatch-SGD bound "
    r"$2 \Delta/(\alpha U) + \alpha L \sigma^2/N$, and its expectation over delay paths can "
    "have an interior minimum in $S$.")


def theorem2(variant: str = "proof") -> Theorem:
    """Theorem 2, eq. (20), with Delta >= f(x^1) - E f(x^{U+1}); [...].
    ``refined``: derived by fedbound, not published (bounds/derivations/hfl_refined.md).
    ``iid``: derived by fedbound, not published (bounds/derivations/hfl_iid.md), under the
    paper's Section II model (data i.i.d. among clients); no G, and alpha L tau <= 1/2."""
    aggs = [_AGG_U, _AGG_KAPPA, _AGG_Z4, _AGG_Z5, _AGG_KJ, _AGG_Y, _AGG_ZR, _AGG_CR, _AGG_TAU,
            _AGG_ZI, _AGG_CI]
    label = {"tight": " [derived, not published]", "refined": REFINED_LABEL,
             "iid": REFINED_LABEL}.get(variant, "")
    title = {"refined": "HFL global bound, refined",
             "iid": "HFL global bound, data i.i.d. among clients"}.get(variant, "HFL global bound (20)")
    params = {k: v for k, v in BASE_PARAMS.items() if k != "G"} if variant == "iid" else BASE_PARAMS
    conditions = [CONDITION_STEP, CONDITION_IID_LOCAL] if variant == "iid" else [CONDITION_STEP]
    return _theorem(
        "hfl.theorem2", variant, title + label,
        f"{PAPER}, Theorem 2, eq. (20)", _LHS2, params, _theorem2_terms(variant),
        aggs, conditions, _T2_ERRATA[variant], _T2_STATUS[variant],
        IID_NOTE if variant == "iid" else REFINED_T2_NOTE if variant == "refined" else
        "Conditional on the delay path $(t, U)$; $t_i^0 := 0$. " + {
            "tight": "Derived by fedbound from (37)-(38), not published.",
            "printed": IMPLIED_BY_TIGHT, "arxiv": IMPLIED_BY_TIGHT}.get(variant, ""))


#: Corollary 1's step alpha = min(1/sqrt(U), 1/L)
COROLLARY_STEP = 1 / sp.Max(sp.sqrt(U), L)


def corollary1(variant: str = "proof") -> Theorem:
    """Corollary 1, via its proof (Appendix E): Theorem 2 with t_i^u <= t_i^max and
    (t-1)(2t-1)/6 <= t^2/3, at alpha = min(1/sqrt(U), 1/L). Explicit constants:
    2 Delta/(a U) + 12 a^2 L^2 G^2 kappa^2 + a L kappa sigma^2 + 12 a^2 L^2 G^2 M
    + (4/3) a^2 L^2 G^2 M with M = W sum_i (|N_i| t_i^max)^2 <= kappa max_i (t_i^max)^2; for
    U >= L^2 this is (2 Delta + L kappa sigma^2)/sqrt(U) + L^2 G^2 (12 kappa^2 + 40/3 M)/U.
    ``printed``: the fourth term without G^2 (Appendix E, both versions). ``alpha`` is not a parameter.
    ``refined``: derived by fedbound, not published (bounds/derivations/hfl_refined.md): the
    refined Theorem 2 at t_i^u <= t_i^max, 2 Delta/(a U) + a L sigma^2/N + a^2 L^2 G^2 M_r
    + a^2 L^2 G sigma C_m/3; for U >= L^2, (2 Delta + L sigma^2/N)/sqrt(U)
    + L^2 G (G M_r + sigma C_m/3)/U.
    ``iid``: derived by fedbound, not published (bounds/derivations/hfl_iid.md): the iid
    Theorem 2 at t_i^u <= t_i^max, if min(1/sqrt(U), 1/L) L (max_i t_i^max - 1) <= 1/2."""
    a = COROLLARY_STEP
    params = {k: v for k, v in COROLLARY1_PARAMS.items() if k != "alpha"}
    if variant == "iid":
        return _theorem(
            "hfl.corollary1", variant, r"HFL rate at $\alpha = \min(1/\sqrt{U}, 1/L)$, data i.i.d. "
            "among clients" + REFINED_LABEL, f"{PAPER}, Corollary 1 and its proof (Appendix E)",
            _LHS2, {k: v for k, v in params.items() if k != "G"},
            _iid_terms(a, tau_m, 2 * Delta / (a * U), 1 / N_tot, Z_im, C_im),
            [_AGG_U, _AGG_N, _AGG_TAUM, _AGG_ZIM, _AGG_CIM], [CONDITION_IID_COROLLARY],
            [ERRATUM_TMAX, ERRATUM_COR_STEP, ERRATUM_IID_COROLLARY], "holds",
            IID_NOTE + r" Here at $\tau^{\max} = \max_i t_i^{\max} - 1$; "
            r"$\alpha = \min(1/\sqrt{U}, 1/L)$ needs $U$, known only at the end (as in the "
            "published Corollary 1).", step=None)
    if variant == "refined":
        terms = {"transient": 2 * Delta / (a * U), "noise": a * L * sigma**2 / N_tot,
                 "within-round drift": a**2 * L**2 * G**2 * M_r,
                 "noise-drift coupling": a**2 * L**2 * G * sigma * C_m / 3}
        return _theorem(
            "hfl.corollary1", variant, r"HFL rate at $\alpha = \min(1/\sqrt{U}, 1/L)$, refined"
            + REFINED_LABEL, f"{PAPER}, Corollary 1 and its proof (Appendix E)", _LHS2, params, terms,
            [_AGG_U, _AGG_N, _AGG_MR, _AGG_CM], [], [ERRATUM_TMAX, ERRATUM_COR_STEP,
                                                     ERRATUM_REFINED_COROLLARY],
            "holds", REFINED_NOTE + r"$\alpha = \min(1/\sqrt{U}, 1/L)$ needs $U$, known only "
            "at the end (as in the published Corollary 1).", step=None)
    g4 = G**2 if variant == "proof" else 1
    terms = {
        "transient": 2 * Delta / (a * U),
        "kappa^2": 12 * a**2 * L**2 * G**2 * kappa**2,
        "noise": a * L * kappa * sigma**2,
        "previous-round drift": 12 * a**2 * L**2 * g4 * M,
        "within-round drift": sp.Rational(4, 3) * a**2 * L**2 * G**2 * M,
    }
    errata = [ERRATUM_TMAX, ERRATUM_COR_STEP] + ([ERRATUM_G2] if variant == "proof" else [])
    thm = _theorem(
        "hfl.corollary1", variant, r"HFL rate at $\alpha = \min(1/\sqrt{U}, 1/L)$",
        f"{PAPER}, Corollary 1 and its proof (Appendix E)", _LHS2, params, terms,
        [_AGG_U, _AGG_KAPPA, _AGG_M], [], errata, "holds-with-erratum",
        r"$\alpha = \min(1/\sqrt{U}, 1/L)$ needs $U$, known only at the end. The printed "
        r"form (no $G^2$ on the fourth term) still holds: its $\frac{4}{3} \alpha^2 L^2 G^2 M$ "
        "term alone is $\\ge$ the drift term of the tight Theorem 2 (derived by fedbound, not "
        r"published), since $(t-1)(2t-1)/6 \le t^2/3$.", step=None)
    thm.rate = RATE_COROLLARY1
    return thm


#: the rate of Corollary 1: O(1/sqrt(U)) in the number of global rounds U
RATE_COROLLARY1 = Rate(({"U": -0.5},), "Ali & Arafa 2025, Corollary 1",
                       "a finite sync time S, U growing with the training time T")




def vacuous(key: str, variant: str | None = None, **values) -> np.ndarray | bool:
    """True where the bound of ``key`` is >= G^2: the left-hand side is an average of
    ||grad f||^2 <= G^2 (Assumption 3, (16), and Jensen), so such a bound says nothing.
    Theorem 1 is vacuous whenever U >= 2 with balanced counts (derived by fedbound)."""
    if key == "hfl.lemma1":
        raise ValueError("hfl.lemma1 bounds a model deviation, not a squared gradient norm")
    out = np.asarray(get(key, variant).evaluate(**values)) >= float(values["G"]) ** 2
    return bool(out) if out.ndim == 0 else out


# ---------------------------------------------------------------------- expectations


@dataclass(frozen=True)
class ExpectedBound:
    """E over delay paths of a bound: Monte-Carlo mean with its 95% interval over ``paths``
    sampled schedules, and the closed-form plug-in (an approximation derived by fedbound: replaces
    1/U by 1/E U and averages over rounds by E t, E t^2; Jensen makes it under-estimate the
    transient term). Arrays over groups for Theorem 1 and Lemma 1."""

    key: str
    variant: str
    mean: float | np.ndarray
    ci: tuple
    paths: int
    plug_in: float | np.ndarray
    plug_in_label: str = "approximation (renewal plug-in, derived by fedbound)"


Z95 = 1.959963984540054


def schedule_params(key: str, model: dl.DelayModel, S) -> dict:
    """The non-schedule parameters that a delay model fixes: ``t_max`` for the corollary."""
    if key != "hfl.corollary1":
        return {}
    return {"t_max": np.array([dl.count_max(law, S) for law in model.local], dtype=float)}


def expected(key: str, model: dl.DelayModel, S, T, *, variant: str | None = None,
             paths: int = 200, seed: int = 0, ramp: bool = False, **params) -> ExpectedBound:
    """E_delays of the bound ``key`` at (S, T): Monte Carlo over ``paths`` schedules drawn by
    :func:`bounds.delays.sample_schedules` from ``seed`` (by the tower property this bounds
    the unconditional left-hand side), plus :func:`plug_in`. ``params``: the
    theorem's parameters except ``t`` (and ``t_max``, which the model fixes)."""
    thm = get(key, variant)
    sizes = dl.validate_sizes(params.get("sizes", ()))
    if len(sizes) != model.groups:
        raise ValueError(f"sizes has {len(sizes)} groups, the delay model {model.groups}")
    sched = dl.sample_schedules(model, S, T, paths, np.random.default_rng(seed), ramp=ramp)
    full = {**params, **schedule_params(key, model, S)}
    values = np.asarray(thm.evaluate(**full, t=sched.t))
    if key == "hfl.lemma1":
        real = (sched.t > 0)
        values = np.where(real, values, np.nan)
        per_path = np.nanmean(values, axis=1)
    else:
        per_path = values
    mean = per_path.mean(axis=0)
    half = Z95 * per_path.std(axis=0, ddof=1) / math.sqrt(paths) if paths > 1 else np.inf
    stats_ = dl.round_statistics(model, S, T, seed=seed)
    pi = plug_in(key, stats_, variant=variant, **full)
    lo, hi = mean - half, mean + half
    as_out = (lambda x: float(x)) if np.ndim(mean) == 0 else np.asarray
    return ExpectedBound(key, thm.variant, as_out(mean), (as_out(lo), as_out(hi)), paths,
                         as_out(pi) if np.ndim(pi) else float(pi),
                         "exact (t_i^u i.i.d. over rounds)" if key == "hfl.lemma1"
                         else ExpectedBound.plug_in_label)


def _plug_in_aggregates(key: str, stats: dl.RoundStatistics, sizes: np.ndarray,
                        params: dict) -> dict[sp.Symbol, np.ndarray]:
    """Aggregate values with the schedule replaced by its moments."""
    n = sizes.astype(float)
    EU, Et, Et2, Einv = stats.mean_U, stats.mean_t, stats.mean_t2, stats.mean_inv_t
    W, N = group_weight(n), n.sum()
    out = {kappa: kappa_of(n), U: EU}
    if key == "hfl.theorem2":
        out[Z4] = W * (n**2 * Et2).sum() * (EU - 1)
        out[Z5] = W * (n**2 * (2 * Et2 - 3 * Et + 1) / 6).sum() * EU
        out[kappa_J] = rd.kappa_journal({"sizes": n})
        # E[1/t] from the law of t (not 1/E[t]); E (t-1)(2t-1)/6 = (2 E t^2 - 3 E t + 1)/6
        out[Y] = (n * Einv).sum() / N**2 * EU
        out[Z_r] = (n * (2 * Et2 - 3 * Et + 1) / 6).sum() / N * EU
        out[C_r] = (n**1.5 * (Et - Einv)).sum() / N**2 * EU
        out[Z_iid] = ((Et - 1) / 2).sum() / N * EU
        out[C_iid] = (n * (1 - Einv)).sum() / N**2 * EU
        out[tau] = float(np.max(stats.t_max)) - 1  # the a.s. envelope t <= t^max of (22)
    elif key == "hfl.theorem1":
        out.update({A_i: EU * Et, Q_i: (EU - 1) * Et2, n_i: n,
                    Delta_i: np.asarray(params["Delta"], dtype=float)})
    elif key == "hfl.corollary1":
        tm = np.asarray(params["t_max"], dtype=float)
        out[M] = W * ((n * tm) ** 2).sum()
        out[N_tot] = N
        out[M_r] = (n * avg_l2(tm)).sum() / N
        out[C_m] = (n**1.5 * coupling_count(tm)).sum() / N**2
        out[tau_m] = float(tm.max()) - 1
        out[Z_im] = ((tm - 1) / 2).sum() / N
        out[C_im] = (n * (1 - 1 / tm)).sum() / N**2
    elif key == "hfl.lemma1":
        out[t2] = Et2
    return out


def plug_in(key: str, stats: dl.RoundStatistics, *, variant: str | None = None,
            terms: bool = False, **params):
    """Closed-form plug-in of E_delays[bound] (derived by fedbound), an APPROXIMATION except for
    Lemma 1 (exact: 2 a^2 (E t_i^2 + kappa) G^2 per group): U -> E U (renewal), the round
    averages (1/U) sum_u h(t^u) -> E h(t) (Wald), (U-1)/U for the t^{u-1} sums. Broadcasts
    over array-valued scalar parameters (e.g. a grid of alpha). ``terms=True`` returns
    {term name: value}."""
    thm = get(key, variant)
    sizes = np.asarray(dl.validate_sizes(params["sizes"]))
    for k, v in params.items():
        if k in thm.params:
            thm.params[k].check(v)
    scal = {thm.symbols[k]: np.asarray(v, dtype=float) for k, v in params.items()
            if k in thm.symbols and not thm.params[k].vector}
    args = {**scal, **_plug_in_aggregates(key, stats, sizes, params)}
    exprs = thm.term_exprs if terms else {"bound": thm.expr}
    out = {}
    for name, e in exprs.items():
        syms = sorted(e.free_symbols, key=str)
        missing = [s for s in syms if s not in args]
        if missing:
            raise ValueError(f"{key}: missing parameter(s) {[str(s) for s in missing]}")
        with np.errstate(divide="ignore", invalid="ignore"):
            out[name] = np.asarray(_lambdified(e)(*(args[s] for s in syms)), dtype=float)
    if not all(np.isfinite(v).all() for v in out.values()):
        raise ValueError(_plug_in_overflow(key, thm, stats, params))
    return out if terms else out["bound"]


def _plug_in_overflow(key: str, thm, stats, params) -> str:
    """Why the plug-in is not finite, in one line: the first term that is not, and the most
    extreme (furthest from 1 in orders of magnitude) of the scalar parameters it uses."""
    scal = {thm.symbols[k]: np.asarray(v, dtype=float) for k, v in params.items()
            if k in thm.symbols and not thm.params[k].vector}
    sizes = np.asarray(dl.validate_sizes(params["sizes"]))
    args = {**scal, **_plug_in_aggregates(key, stats, sizes, params)}
    for name, e in thm.term_exprs.items():
        with np.errstate(all="ignore"):
            v = np.asarray(_lambdified(e)(*(args[s] for s in sorted(e.free_symbols, key=str))),
                           dtype=float)
        if np.isfinite(v).all():
            continue
        used = [k for k in thm.term_params(name) if k in params and not thm.params[k].vector]
        text = f"{key}: the expected bound (plug-in) is not finite: term '{name}' overflows float64"
        if used:
            worst = max(used, key=lambda k: _magnitude(params[k]))
            text += (f"; its most extreme parameter is {worst}="
                     f"{float(np.max(np.asarray(params[worst], dtype=float))):g}")
        return text
    return f"{key}: the expected bound (plug-in) is not finite at the given parameters"


def _magnitude(v) -> float:
    """How far ``v`` (or its most extreme entry) is from 1, in orders of magnitude."""
    x = np.abs(np.asarray(v, dtype=float)).ravel()
    x = x[(x > 0) & np.isfinite(x)]
    return float(np.max(np.abs(np.log10(x)))) if x.size else 0.0


_LAMBDIFIED: dict[sp.Expr, object] = {}


def _lambdified(e: sp.Expr):
    if e not in _LAMBDIFIED:
        _LAMBDIFIED[e] = sp.lambdify(sorted(e.free_symbols, key=str), e, "numpy")
    return _LAMBDIFIED[e]



# ---------------------------------------------------------------------- the loss at the deadline
# fedbound's own results (derived by fedbound, not published; bounds/derivations/
# hfl_deadline.md): E f(x^{U+1}) - f*, conditional on the delay path; registered by the
# paper's plugin (verify/papers/hfl/deadline.py). The recursions are bounds.hfl_deadline's.

DEADLINE_DERIVATION = "bounds/derivations/hfl_deadline.md"
DEADLINE_OWN = f"derived by fedbound, not published ({DEADLINE_DERIVATION})"
mu, zeta, G1 = sp.symbols("mu zeta G_1", nonnegative=True)
DEADLINE_SYMBOLS = {**SYMBOLS, "mu": mu, "zeta": zeta, "G1": G1}
P_hat, N_sup = sp.symbols("P_hat N_sup", nonnegative=True)
K_u, D_noise, D_drift, D_coupling, D_het = sp.symbols("K_U D_noise D_drift D_coupling D_zeta",
                                                     nonnegative=True)
DEADLINE_PARAMS = {
    **{k: v for k, v in BASE_PARAMS.items() if k != "G"},
    "mu": Param("mu", "PL constant: ||grad f||^2 >= 2 mu (f - f*) (a quadratic: its smallest "
                "eigenvalue)", "positive"),
    "sigma": Param("sigma", "noise: E||g~ - grad F||^2 <= sigma^2, Assumption 4, (17)",
                   "nonnegative"),
    "Delta": Param("Delta", "initial gap f(x^1) - f*", "nonnegative"),
    "G1": Param("G1", "a lower bound on ||grad f(x^1)||^2, the squared gradient at the start "
                "(0: none; at most 2 L Delta)", "nonnegative"),
    "zeta": Param("zeta", "group heterogeneity ||grad f_i - grad f|| <= zeta (0: data i.i.d. "
                  "among clients, Section II)", "nonnegative"),
}
CONDITION_DEADLINE_STEP = Condition(
    "alpha <= 1/L", sp.LessThan(alpha, 1 / L),
    f"{PAPER}, Theorem 2 (its proof, (36)); for the quadratic bound, where every eigenvalue's "
    f"contraction 1 - alpha lam is >= 0 ({DEADLINE_DERIVATION})")
CONDITION_DEADLINE_MU = Condition("mu <= L", sp.LessThan(mu, L),
                                  f"{DEADLINE_OWN}: the PL constant of an L-smooth f is at most L")
CONDITION_DEADLINE_G1 = Condition(
    "G1 <= 2 L Delta", sp.LessThan(G1, 2 * L * Delta),
    f"{DEADLINE_OWN}: on a quadratic with spectrum in [mu, L], ||grad f(x^1)||^2 <= 2 L (f(x^1) - f*)")
ERRATUM_DEADLINE = Erratum(
    "the left-hand side and the hypotheses of Theorem 2, (20) (the deadline bounds, derived by "
    "fedbound, not published)",
    r"$\frac{1}{\mathcal{U}} \sum_u \mathbb{E}\|\nabla f(x^u)\|^2$ for any $L$-smooth $f$: "
    r"non-decreasing in $S$, which Remark 7 cannot choose from",
    r"$\mathbb{E}\, f(x^{\mathcal{U}+1}) - f^*$, the loss at the deadline the experiments "
    r"report, on quadratics with spectrum in $[\mu, L]$ or for a $\mu$-PL $f$: the "
    r"contraction within the deadline and the noise per round both depend on $S$ "
    f"({DEADLINE_DERIVATION}, section 7)",
    f"{PAPER}, Theorem 2, eq. (20), and Remark 7; Section IV")
_DEADLINE_ROUNDS = r"\prod_{u=1}^{\mathcal{U}}"
_DEADLINE_QUAD_USES = ("alpha", "L", "mu", "G1", "Delta", "sizes", "t")
_DEADLINE_QUAD_AGGS = [
    Aggregate(P_hat, sp.Symbol(r"\hat{P}_{\mathcal{U}}(\bar\lambda)"), rd.hfl_deadline_start,
              _DEADLINE_QUAD_USES),
    Aggregate(N_sup, sp.Symbol(r"\sup_{\lambda \in [\mu, L]} \lambda N_{\mathcal{U}}(\lambda)"),
              rd.hfl_deadline_noise, ("alpha", "L", "mu", "sizes", "t")),
]
_DEADLINE_PL_USES = ("alpha", "L", "mu", "zeta", "sizes", "t")
_DEADLINE_PL_AGGS = [
    Aggregate(sym, sp.Symbol(display), partial(rd.hfl_deadline_pl, part=name), _DEADLINE_PL_USES)
    for sym, display, name in (
        (K_u, _DEADLINE_ROUNDS + r" \kappa_u", "contraction"),
        (D_noise, r"\sum_u y_u \prod_{u' > u} \kappa_{u'}", "noise"),
        (D_drift, r"\sum_u (1 + \theta_u) \Gamma_u z_u \prod_{u' > u} \kappa_{u'}", "local drift"),
        (D_coupling, r"\sum_u \Gamma_u^{1/2} c_u \prod_{u' > u} \kappa_{u'}",
         "noise-drift coupling"),
        (D_het, r"\sum_u \Gamma_u \left(\frac{\theta_u + 1}{\theta_u}\right)(\alpha L s_u)^2 "
                r"\prod_{u' > u} \kappa_{u'}", "heterogeneity"))]
DEADLINE_QUADRATIC_NOTE = (
    f"Derived by fedbound, not published; see {DEADLINE_DERIVATION}. Algorithm 1 on "
    r"$f(x) = \frac12 (x - x^*)^\top A (x - x^*) + f^*$ with the spectrum of $A$ in "
    r"$[\mu, L]$, every client's stochastic gradient $\nabla f(x) + \xi$ (data i.i.d. among "
    r"clients, Section II), the noises independent across clients, local iterations and rounds, "
    r"zero-mean with a covariance of trace at most $\sigma^2$ that does not depend on $x$. "
    r"Conditional on the delay path $(t, U)$. In an eigen-direction of eigenvalue $\lambda$ one "
    r"round maps the second moment $s$ to $a_u^2 s + v_u c$ exactly ($c$ the noise variance "
    r"there, $\rho = 1 - \alpha\lambda$, $a_u = 1 - \sum_i w_i (1 - \rho^{t_i^u})/t_i^u$, "
    r"$v_u = \alpha^2 \sum_i w_i^2 \sum_{l < t_i^u} \rho^{2l} / (|N_i| (t_i^u)^2)$); the bound "
    r"$\Delta \hat{P}(\bar\lambda) + \frac{\sigma^2}{2} \sup_\lambda \lambda N$ is the "
    r"supremum over the class of starts with gap $\Delta$ and $\|\nabla f(x^1)\|^2 \ge G_1$ "
    r"(attained by a problem of dimension 3): $\hat{P}$ is the upper concave envelope of "
    r"$P = \prod_u a_u^2$ on $[\mu, L]$ at $\bar\lambda = \max(\mu, G_1/(2\Delta))$, which is "
    r"$P(\mu)$ without $G_1$. $P$ and $N$ are non-increasing in $\lambda$ for "
    r"$\alpha \le 1/L$: the envelope and the supremum of $\lambda N$ are bounded above on "
    r"grids (the latter refined to 0.1%), the upper ends reported.")
DEADLINE_PL_NOTE = (
    f"Derived by fedbound, not published; see {DEADLINE_DERIVATION}. Algorithm 1, "
    r"Assumptions 1 ($L$-Lipschitz gradients of $f$ and every $f_i$), 2 and 4 with the "
    r"independence of (26); $f$ is $\mu$-PL ($\|\nabla f\|^2 \ge 2\mu (f - f^*)$) and "
    r"$\|\nabla f_i - \nabla f\| \le \zeta$ ($\zeta = 0$: every client's stochastic gradient "
    r"unbiased for $\nabla f$, Section II). Conditional on the delay path. Each round contracts "
    r"the gap by $\kappa_u = 1 - \alpha\mu(1 - \rho_u)$ (or $1 + \alpha L (\rho_u - 1)$ where "
    r"$\rho_u > 1$) and adds the remainder of fedbound's iid Theorem 2 "
    f"({IID_DERIVATION}, step 10) "
    r"with the round's own $\tau_u = \max_i t_i^u - 1$: "
    r"$\theta_u = \alpha L \tau_u$, $\Gamma_u = (1 + \alpha L)^{2(\tau_u - 1)}$, "
    r"$s_u = \sum_i w_i (t_i^u - 1)/2$, $\rho_u = (1 + [\zeta > 0]) \Gamma_u "
    r"(1 + 1/\theta_u)(\alpha L s_u)^2$, $y_u = \sum_i |N_i|/t_i^u / N^2$, "
    r"$z_u = \sum_i (t_i^u - 1)/(2N)$, $c_u = \sum_i |N_i| (1 - 1/t_i^u)/N^2$. $G$ is not used.")
_DEADLINE_LHS = r"\mathbb{E}\, f(x^{\mathcal{U}+1}) - f^*"


def _deadline_variant(key: str, variant: str) -> None:
    if variant != "derived":
        raise ValueError(f"{key}: unknown variant {variant!r}; its one variant is 'derived'")


def deadline_quadratic(variant: str = "derived") -> Theorem:
    """``hfl.deadline_quadratic`` (derived by fedbound, not published;
    bounds/derivations/hfl_deadline.md, sections 2-4): Delta P^(lam_bar)
    + (sigma^2/2) sup_{lam in [mu, L]} lam N(lam), the exact worst case of E f(x^{U+1}) - f*
    over the quadratics with spectrum in [mu, L] and additive noise of covariance trace
    sigma^2, conditional on the delay path."""
    _deadline_variant("hfl.deadline_quadratic", variant)
    names = ("alpha", "L", "mu", "sigma", "Delta", "G1", "sizes", "t")
    return Theorem(
        key="hfl.deadline_quadratic", variant="derived",
        title=r"HFL loss at the deadline, quadratics with spectrum in $[\mu, L]$" + REFINED_LABEL,
        citation=f"{PAPER}, Algorithm 1, (3)-(13), and Section II; the bound derived by fedbound, "
                 "not published",
        lhs=_DEADLINE_LHS, params={k: DEADLINE_PARAMS[k] for k in names},
        term_exprs={"transient": Delta * P_hat, "noise": sigma**2 / 2 * N_sup},
        symbols={k: DEADLINE_SYMBOLS[k] for k in names if k not in ("sizes", "t")},
        conditions=[CONDITION_DEADLINE_STEP, CONDITION_DEADLINE_MU, CONDITION_DEADLINE_G1],
        errata=[ERRATUM_DEADLINE], aggregates=_DEADLINE_QUAD_AGGS, step="alpha",
        status="holds", notes=DEADLINE_QUADRATIC_NOTE)


def deadline_pl(variant: str = "derived") -> Theorem:
    """``hfl.deadline_pl`` (derived by fedbound, not published;
    bounds/derivations/hfl_deadline.md, section 5): Delta prod_u kappa_u
    + sum_u (alpha/2) R_u prod_{u' > u} kappa_{u'} for a mu-PL f, conditional on the delay
    path."""
    _deadline_variant("hfl.deadline_pl", variant)
    names = ("alpha", "L", "mu", "sigma", "Delta", "zeta", "sizes", "t")
    terms = {"transient": Delta * K_u,
             "noise": alpha**2 * L * sigma**2 / 2 * D_noise,
             "local drift": alpha**3 * L**2 * sigma**2 / 2 * D_drift,
             "noise-drift coupling": alpha**3 * L**2 * sigma**2 / 2 * D_coupling,
             "heterogeneity": alpha * zeta**2 * D_het}
    return Theorem(
        key="hfl.deadline_pl", variant="derived",
        title=r"HFL loss at the deadline, $\mu$-PL" + REFINED_LABEL,
        citation=f"{PAPER}, Algorithm 1, (3)-(13), Assumptions 1, 2 and 4 and the proof of "
                 "Theorem 2 (App. D); the bound derived by fedbound, not published",
        lhs=_DEADLINE_LHS, params={k: DEADLINE_PARAMS[k] for k in names}, term_exprs=terms,
        symbols={k: DEADLINE_SYMBOLS[k] for k in names if k not in ("sizes", "t")},
        conditions=[CONDITION_DEADLINE_STEP, CONDITION_DEADLINE_MU], errata=[ERRATUM_DEADLINE],
        aggregates=_DEADLINE_PL_AGGS, step="alpha", status="holds", notes=DEADLINE_PL_NOTE)
