"""TDCD (Das, Castiglia, Wang, Patterson, ACM TIST 2022): ``papers/tdcd.txt``.

Registered results
------------------
``tdcd.theorem1``  Theorem 1, bound (15) under step-size condition (14), L238-L248.
``tdcd.lemma2``    Lemma 2, the per-round drift bound (30), L445-L514 (holds pathwise).
``tdcd.remark5``   Remark 5, L258-L260: the rate at eta = c / (Q sqrt(R)), explicit constants.

Variants (each difference is an :class:`~bounds.core.Erratum` with its lines):

``printed``  exactly as printed: (15) with its left side summed over "t0 = 0..R-1".
``proof``    (default) what the proof supports: the same right-hand side, its left side
             at the round-start hub models theta^{rQ}, r = 0..R-1 (T15), L_max = max over
             k and j (T6), and the off-by-one of (58) corrected (T9).
``tight``    the same proof without its loosenings (derived here, not published): the
             exact geometric sum of Lemma 2 ((53), L505, instead of the factor 4 of L510),
             1 + Q kept (not 2Q, (80) L567) and the exact bracket of (81)-(83) (not 1/2).

The bound depends on eta and Q only through a = eta Q (proof and printed variants), and
(14) is a <= 1/(8 max(L, L_max)): any Q gives the bound of Q = 1 after the same R rounds
(theory/tdcd.md T22). :func:`optimal_eta_q`, :func:`rounds_needed` and
:func:`round_time` answer "which Q and eta" from the bound: Q = 1.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from .core import Aggregate, Condition, Erratum, Param, Rate, Theorem, get, register

PAPER = "papers/tdcd.txt"
VARIANTS = ("printed", "proof", "tight")

# ---------------------------------------------------------------------- symbols

L, L_max, Delta, eta, Q, R, c, G0 = sp.symbols("L L_max Delta eta Q R c G_0", positive=True)
SYMBOLS = {"L": L, "L_max": L_max, "Delta": Delta, "eta": eta, "Q": Q, "R": R, "c": c, "G0": G0}
#: S = sum_j sigma_j^2, the only way the per-block sigma_j enter (15), L246
S = sp.Symbol("S", nonnegative=True)
_j, _N = sp.symbols("j N", integer=True, positive=True)
_sigma = sp.IndexedBase("sigma")
AGGREGATES = [
    Aggregate(S, sp.Sum(_sigma[_j] ** 2, (_j, 1, _N)), lambda v: (v["sigma"] ** 2).sum(axis=-1),
              ("sigma",)),
]
#: a = eta Q, the product through which (15) depends on eta and Q
a = sp.Symbol("a", positive=True)
#: M = max(L, L_max) of (14)
M = sp.Max(L, L_max)

PARAMS = {
    "L": Param("L", "Lipschitz constant of grad L, (6) L204", "positive"),
    "L_max": Param("L_max", "max_{k,j} L_{k,j} of (7) and (10) L223 (the block-j constant "
                   "suffices: Lemma 2 moves only block j)", "positive"),
    "sigma": Param("sigma", "per-block noise sigma_j of (9) L217, one per silo j", "nonnegative",
                   vector=True),
    "Delta": Param("Delta", "L(theta^0) - E L(theta^T) (or L(theta^0) - L_inf), (15) L246",
                   "nonnegative"),
    "eta": Param("eta", "step size", "positive"),
    "Q": Param("Q", "local iterations per round", "positive_integer"),
    "R": Param("R", "communication rounds (T = Q R)", "positive_integer"),
    "c": Param("c", "step constant of Remark 5: eta = c / (Q sqrt(R))", "positive"),
    "G0": Param("G0", "sum_j (1/K_j) sum_k ||g_kj(y^t0)||^2 at the round start, (30) L449",
                "nonnegative"),
}

# ---------------------------------------------------------------------- constants

#: Lemma 2's constant as printed, (30) L449 / (57) L514: 4 Q^2 (1 + Q).
LEMMA2_PAPER = 4 * Q**2 * (1 + Q)
#: the exact sum of the recursion, (46)-(53) L497-L505 with T11's parentheses:
#: 2 (1+Q) (Q^2/2) (((1+2/Q)^Q - 1)/2 - 1); zero at Q = 1.
LEMMA2_TIGHT = (1 + Q) * Q**2 * (((1 + 2 / Q) ** Q - 1) / 2 - 1)


def lemma2_constant(variant: str) -> sp.Expr:
    """C(Q) with drift <= C(Q) L_max^2 eta^2 G0: (30) L449, or the exact sum of (53) L505."""
    return LEMMA2_TIGHT if variant == "tight" else LEMMA2_PAPER


def noise_coefficient(variant: str) -> sp.Expr:
    """Coefficient c_r of sum_j (1/K_j) sum_k E||g_kj(y^t0)||^2 in one round.

    (79) L562-L563: c_r = eta^2 L Q^2 + (eta/2) (1 + 2 eta L Q) C(Q) L_max^2 eta^2 with
    C(Q) = 4 Q^2 (1+Q) from Lemma 2; the proof then uses 1 + Q <= 2Q, (80) L567, to reach
    eta^2 L Q^2 + 4 eta^3 Q^3 L_max^2 + 8 eta^4 L Q^4 L_max^2, (83) L577."""
    if variant == "tight":
        return eta**2 * L * Q**2 + eta / 2 * (1 + 2 * eta * L * Q) * LEMMA2_TIGHT * L_max**2 * eta**2
    return eta**2 * L * Q**2 + 4 * eta**3 * Q**3 * L_max**2 + 8 * eta**4 * L * Q**4 * L_max**2


def theorem1_terms(variant: str) -> dict[str, sp.Expr]:
    """Right-hand side of (15), L246 (= (85), L591), as named terms.

    printed/proof: 4 Delta/(eta Q R) + 4 (eta L Q + 4 eta^2 Q^2 L_max^2 + 8 eta^3 Q^3 L L_max^2) S.
    tight: per round (eta Q/2 - c_r) ||grad||^2 <= L(theta^t0) - E L(theta^t0+Q) + c_r S
    ((79) L562 with the exact c_r); dividing by eta Q/2 - c_r (> 0 under (14)) instead of
    the proof's eta Q/4 ((81)-(83) L573-L577) gives (Delta/R + c_r S)/(eta Q/2 - c_r)."""
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
    (theory/tdcd.md section 5.1); exactly free of Q."""
    return sp.simplify(sp.Add(*theorem1_terms("proof").values()).subs(eta, a / Q))


#: (14), L242: 0 <= eta <= 1 / (8 Q max(L, L_max)).
CONDITION14 = Condition("(14)", sp.LessThan(eta, 1 / (8 * Q * M)), f"{PAPER} L242")
#: Lemma 2's hypothesis, L447: eta <= 1 / (2 Q L_max).
CONDITION_LEMMA2 = Condition("eta <= 1/(2 Q L_max)", sp.LessThan(eta, 1 / (2 * Q * L_max)),
                             f"{PAPER} L447")
#: Remark 5 needs (14) at eta = c/(Q sqrt R): R >= 64 c^2 max(L, L_max)^2 [derived].
CONDITION_REMARK5 = Condition("(14) at eta = c/(Q sqrt R)", sp.LessThan(64 * c**2 * M**2, R),
                              f"{PAPER} L242, L260", hint="R >= 64 c^2 max(L, L_max)^2")

# ---------------------------------------------------------------------- errata

ERRATUM_LHS = Erratum(
    "left side of (15)", "(1/R) sum_{t0=0}^{R-1} E||grad L(theta^{t0})||^2",
    "(1/R) sum_{r=0}^{R-1} E||grad L(theta^{rQ})||^2 (t0 is the sync iteration rQ)",
    f"{PAPER} L246 (printed) vs L586-L590 (proof sums rounds) (T15)",
)
ERRATUM_OFF_BY_ONE = Erratum(
    "descent step (58)", "theta^{t0+} with t0+ = t0 + Q - 1",
    "theta^{t0+Q}: the increment -eta sum_{t=t0}^{t0+Q-1} G^t ends at t0 + Q; (85) uses theta^T",
    f"{PAPER} (58) L525, L537, L572, L583, L589 (T9)",
)
ERRATUM_LMAX = Erratum(
    "definition (10) of L_max", "max_k L_{k,j} (j free)", "max_{k,j} L_{k,j}",
    f"{PAPER} (10) L223 (T6)",
)
ERRATUM_AVERAGING = Erratum(
    "hub averaging, Algorithm 1 line 32", "theta_j^{t+1} = (1/K_j) sum_k theta_{k,j}^t",
    "(1/K_j) sum_k theta_{k,j}^{t+1} (else the last local step is dropped, against L225)",
    f"{PAPER} L167, L186 (T3)",
)
ERRATUM_UNBIASED = Erratum(
    "Assumption 3, (8)-(9)", "stated for the silo-level g_kj on the full batch zeta",
    "for g_kj on the client's part zeta_kj; the proof needs only the client average "
    "(1/K_j) sum_k E g_kj = grad_(j) L and (1/K_j) sum_k E||g_kj - grad_(j) L||^2 <= sigma_j^2",
    f"{PAPER} (8)-(9) L216-L217, used at (68) and (77) (T7)",
)
ERRATUM_LEMMA2_SUM = Erratum(
    "(53)", "Q Xi/2 (Q(1+2/Q)^Q - 1)/2 - Q)", "Q Xi/2 (Q((1+2/Q)^Q - 1)/2 - Q)",
    f"{PAPER} (53) L505 (T11); (54) is then correct",
)
ERRATUM_LEMMA2_PSI = Erratum("Lemma 2 proof", "Psi_0", "Psi^{t0} (= 0)", f"{PAPER} L494 (T14)")
ERRATUM_LEMMA2_E2 = Erratum(
    "tight variant of Lemma 2", "(e^2 - 1)/2 - 1 <= 4, so 4 Q^2 (1+Q)",
    "(1+Q) Q^2 (((1+2/Q)^Q - 1)/2 - 1), the exact sum of (46)-(53) (0 at Q = 1)",
    f"{PAPER} (53)-(56) L505-L512 (T16)",
)
ERRATUM_TIGHT = Erratum(
    "tight variant of (15)", "1 + Q <= 2Q, bracket >= 19/32 >= 1/2, Lemma 2 constant 4 Q^2 (1+Q)",
    "(Delta/R + c_r S)/(eta Q/2 - c_r) with c_r = eta^2 L Q^2 + (eta/2)(1 + 2 eta L Q) C(Q) "
    "L_max^2 eta^2 and C(Q) the exact Lemma 2 sum",
    f"{PAPER} (79) L562-L563, (80) L567, (81)-(83) L573-L577",
)
ERRATUM_REMARK5 = Erratum(
    "Remark 5", "eta proportional to 1/(Q sqrt R) gives O(1/sqrt R)",
    "eta = c/(Q sqrt R) gives (4 Delta/c + 4 c L S)/sqrt R + 16 c^2 L_max^2 S/R "
    "+ 32 c^3 L L_max^2 S/R^(3/2), provided R >= 64 c^2 max(L, L_max)^2 so that (14) holds",
    f"{PAPER} L258-L260 with (14) L242 and (15) L246",
)


def _theorem1_errata(variant: str) -> list[Erratum]:
    common = [ERRATUM_LMAX, ERRATUM_AVERAGING, ERRATUM_UNBIASED]
    if variant == "printed":
        return common
    extra = [ERRATUM_LHS, ERRATUM_OFF_BY_ONE]
    if variant == "tight":
        extra += [ERRATUM_TIGHT, ERRATUM_LEMMA2_E2]
    return [*extra, *common]


_STATUS = {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum"}
_LHS = {
    "printed": r"\frac{1}{R}\sum_{t_0=0}^{R-1}\mathbb{E}\|\nabla\mathcal{L}(\tilde\theta^{t_0})\|^2",
    "proof": r"\frac{1}{R}\sum_{r=0}^{R-1}\mathbb{E}\|\nabla\mathcal{L}(\tilde\theta^{rQ})\|^2",
}
_LHS_LEMMA2 = (r"\sum_{t=t_0}^{t_0+Q-1}\sum_{j}\frac{1}{K_j}\sum_{k}"
               r"\|g_{k,j}(y^t_{k,j})-g_{k,j}(y^{t_0}_{k,j})\|^2")


def _theorem(key, title, citation, lhs, variant, term_exprs, conditions, errata, step, notes,
             status=None) -> Theorem:
    return Theorem(
        key=key, variant=variant, title=title, citation=citation, lhs=lhs, params=PARAMS,
        term_exprs=term_exprs, symbols=SYMBOLS, conditions=conditions, errata=errata,
        aggregates=AGGREGATES, step=step, status=status or _STATUS[variant], notes=notes,
    )


def theorem1(variant: str = "proof") -> Theorem:
    """Theorem 1, (15) under (14), L238-L248 (proof (58)-(85), L516-L591).

    Bounds (1/R) sum_{r<R} E||grad L(theta^{rQ})||^2 at the round-start hub models."""
    return _theorem(
        "tdcd.theorem1", "TDCD convergence bound (15)", f"{PAPER} L238-L248",
        _LHS["printed" if variant == "printed" else "proof"], variant, theorem1_terms(variant),
        [CONDITION14], _theorem1_errata(variant), "eta",
        "Depends on K_j not at all and on N only through S = sum_j sigma_j^2; on eta and Q "
        "only through eta Q (printed/proof).",
    )


def lemma2(variant: str = "proof") -> Theorem:
    """Lemma 2, (30) L449 (proof (31)-(57), L451-L514): the within-round drift of the
    client gradients is at most C(Q) L_max^2 eta^2 G0. Pathwise: the proof uses only (7)
    and Young's inequality on a fixed mini-batch (theory/tdcd.md section 3.3)."""
    errata = [ERRATUM_LEMMA2_SUM, ERRATUM_LEMMA2_PSI, ERRATUM_LMAX]
    if variant == "tight":
        errata = [ERRATUM_LEMMA2_E2, *errata]
    return _theorem(
        "tdcd.lemma2", "TDCD drift of local gradients (30)", f"{PAPER} L445-L514", _LHS_LEMMA2,
        variant, {"drift": lemma2_constant(variant) * L_max**2 * eta**2 * G0},
        [CONDITION_LEMMA2], errata, "eta", "Holds for every round and every realisation.",
        status="holds-with-erratum",
    )


def remark5(variant: str = "proof") -> Theorem:
    """Remark 5, L258-L260, with explicit constants [derived from (15)]: eta = c/(Q sqrt R)
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
        "tdcd.remark5", "TDCD rate at eta = c/(Q sqrt R)", f"{PAPER} L258-L260", _LHS["proof"],
        variant, term_exprs, [CONDITION_REMARK5], [ERRATUM_REMARK5, *_theorem1_errata("proof")],
        "c", "The step constant c plays the role of the step; the best leading constant is at "
        "c = sqrt(Delta/(L S)).",
    )
    thm.rate = RATE_REMARK5
    return thm


#: the rate of Remark 5: O(1/sqrt(R)) in the communication rounds R
RATE_REMARK5 = Rate(({"R": -0.5},), "Das et al. 2022, Remark 5", "eta proportional to 1/(Q sqrt(R))")


register("tdcd.theorem1", "TDCD convergence bound (15)", theorem1, VARIANTS, "proof")
register("tdcd.lemma2", "TDCD drift of local gradients (30)", lemma2, ("proof", "tight"), "proof")
register("tdcd.remark5", "TDCD rate at eta = c/(Q sqrt R)", remark5, ("proof",), "proof")

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
    """The largest eta of (14), L242: 1/(8 Q max(L, L_max)) (via the registered condition)."""
    return get("tdcd.theorem1").max_step(L=L, L_max=L_max, Q=Q)


def round_time(Q: int, t_comm: float, t_comp: float) -> float:  # noqa: N803
    """Wall-clock time of one round, t_Q = 3 t_comm + Q t_comp (L290)."""
    _positive("Q", Q, integer=True)
    if not (math.isfinite(t_comm) and t_comm >= 0 and math.isfinite(t_comp) and t_comp >= 0):
        raise ValueError(f"t_comm={t_comm!r} and t_comp={t_comp!r} must be finite and >= 0")
    return 3.0 * t_comm + Q * t_comp


def quartic_coefficients(*, L: float, L_max: float, S: float, Delta: float, R: int) -> np.ndarray:  # noqa: N803
    """Coefficients (a^4 .. a^0) of dB/da = 0 times a^2/4 (theory/tdcd.md section 5.1):
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
    """The noise term of (15) at eta Q = a: 4 S (a L + 4 a^2 L_max^2 + 8 a^3 L L_max^2), L246."""
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
                             f"condition (14) of {PAPER} L242 fails")
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
