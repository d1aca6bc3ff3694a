"""Multi-Level Local SGD: Castiglia et al. 2021 (key ``mllsgd`` of :mod:`bounds.references`).

Registered results
------------------
``mllsgd.theorem1``        Theorem 1 (Section 5), bound (13) under step-size condition (12).
``mllsgd.theorem1_limit``  its K -> infinity limit, (14).
``mllsgd.corollary1``      Corollary 1 (Section 5), (15), with explicit constants.

Variants (each difference is an :class:`~bounds.core.Erratum` with its place in the paper):

``printed``  exactly as printed: Gamma of Theorem 1, the constant 8 of (12).
``proof``    (default) what the proof (Appendix C.3) supports: Gamma as the proof defines
             it (after (186)), and the coefficient of (12) corrected for beta > 1 (the
             gradient terms of (176) and (209) sum to 4 q^2 tau^2 Gamma (2 + p_i (beta - 1)),
             against 8 (p_i (beta - 1) + 1) in (211); found by fedbound).
``tight``    sharper constants from the same proof (derived by fedbound, not published): the
             exact geometric sum in (188) and the exact power sums in (180).

The right-hand side of ``printed`` and ``proof`` is the same; they differ only in the
admissible step sizes. beta appears only in condition (12), never in the bound.
"""

from __future__ import annotations

import sympy as sp

from . import reduce
from .core import Aggregate, Condition, Erratum, Param, Rate, Theorem
from .references import cite

PAPER = cite("mllsgd")
VARIANTS = ("printed", "proof", "tight")

# ---------------------------------------------------------------------- symbols

L, beta, sigma, Delta, eta, K, q, tau, zeta = sp.symbols(
    "L beta sigma Delta eta K q tau zeta", nonnegative=True
)
SYMBOLS = {
    "L": L, "beta": beta, "sigma": sigma, "Delta": Delta, "eta": eta,
    "K": K, "q": q, "tau": tau, "zeta": zeta,
}
#: per-worker symbols a_i, p_i (the worker axis of the arrays a, p)
a_i, p_i = sp.symbols("a_i p_i", positive=True)
#: aggregates over workers: S2 = sum_i a_i^2 p_i (second term of (13)), P = sum_i a_i p_i (Theorem 1)
S2, P = sp.symbols("S_2 P", nonnegative=True)
_i, _N = sp.symbols("i N", integer=True, positive=True)
_a, _p = sp.IndexedBase("a"), sp.IndexedBase("p")

AGGREGATES = [
    Aggregate(S2, sp.Sum(_a[_i] ** 2 * _p[_i], (_i, 1, _N)),
              reduce.weighted_square_probability, ("a", "p")),
    Aggregate(P, sp.Sum(_a[_i] * _p[_i], (_i, 1, _N)),
              reduce.weighted_probability, ("a", "p")),
]

PARAMS = {
    "L": Param("L", "Lipschitz constant of grad F, Assumption 1a", "positive"),
    "beta": Param("beta", "multiplicative gradient-noise constant, Assumption 1d",
                  "nonnegative"),
    "sigma": Param("sigma", "additive gradient-noise constant, Assumption 1d",
                   "nonnegative"),
    "Delta": Param("Delta", "initial gap F(x_1) - F_inf, Assumption 1b", "nonnegative"),
    "eta": Param("eta", "step size", "positive"),
    "K": Param("K", "number of iterations (time steps)", "positive_integer"),
    "q": Param("q", "sub-network averagings per hub averaging", "positive_integer"),
    "tau": Param("tau", "time steps per sub-network averaging", "positive_integer"),
    "zeta": Param("zeta", "second-largest eigenvalue magnitude of H (Theorem 1)", "unit"),
    "a": Param("a", "worker weights a_i = w_i / w_tot (Section 5)", "weights", vector=True),
    "p": Param("p", "probability that worker i takes a gradient step (Section 4, eq. (3))", "probability",
               vector=True),
}

# ---------------------------------------------------------------------- constants

#: Gamma as printed in Theorem 1 (Section 5, restated in Appendix C.3).
GAMMA_PRINTED = zeta / (1 - zeta**2) + 2 / (1 - zeta) + zeta / (1 - zeta) ** 2
#: Gamma as the proof derives and defines it, after (186) (proof of Theorem 1, Appendix C.3);
#: = GAMMA_PRINTED + 1/(1+zeta).
GAMMA_PROOF = 1 / (1 - zeta**2) + 2 / (1 - zeta) + zeta / (1 - zeta) ** 2
#: bracket of the third term of (13) (= (188) with the loose last piece).
LAMBDA_PAPER = zeta**2 / (1 - zeta**2) + 2 * zeta / (1 - zeta) + 1 / (1 - zeta) ** 2
#: exact value of the geometric sum of (187)-(188): sum_{m>=1} (z^2m + 2 z^m + z^(m+1)/(1-z)).
LAMBDA_TIGHT = zeta**2 / (1 - zeta**2) + 2 * zeta / (1 - zeta) + zeta**2 / (1 - zeta) ** 2
#: factor of the fourth term of (13) (from (170)).
C_ZETA = (2 - zeta) / (1 - zeta)
#: power sums of (180), as printed: (2q+1) and (2tau+1) bound the exact (2q-1), (2tau-1).
S4_PAPER = tau**2 * (q - 1) * (2 * q + 1) / 6 + (tau - 1) * (2 * tau + 1) / 6
#: exact per-period consensus sum of (180) divided by q tau.
S4_TIGHT = tau**2 * (q - 1) * (2 * q - 1) / 6 + (tau - 1) * (2 * tau - 1) / 6


def gamma(variant: str) -> sp.Expr:
    """Gamma of condition (12): as printed in Theorem 1 or as the proof defines it (after
    (186), Appendix C.3)."""
    return GAMMA_PRINTED if variant == "printed" else GAMMA_PROOF


def kappa(variant: str) -> sp.Expr:
    """Coefficient of L^2 eta^2 in condition (12) for worker i.

    printed: 8 q^2 tau^2 Gamma ((12)). The proof's gradient terms, T1 of (176) and T2 of
    (209), sum to 4 q^2 tau^2 Gamma (2 + p_i (beta - 1)) (the printed (211)
    writes 8 (p_i (beta - 1) + 1)); 8 suffices only when beta <= 1. ``proof`` keeps 8
    for beta <= 1 and the corrected factor above it; ``tight`` uses the exact factor."""
    g = gamma(variant)
    if variant == "printed":
        return 8 * q**2 * tau**2 * g
    if variant == "proof":
        return 4 * q**2 * tau**2 * g * (2 + p_i * sp.Max(beta - 1, 0))
    return 4 * q**2 * tau**2 * g * (2 + p_i * (beta - 1))


def condition12(variant: str, step: sp.Expr = eta) -> Condition:
    """Step-size condition (12) of Theorem 1 (= (214) in its proof), for every worker i:
    (4p_i - p_i^2 - 2) >= eta L (a_i p_i (beta+1) - a_i p_i^2 + p_i^2) + kappa_i L^2 eta^2."""
    rhs = step * L * (a_i * p_i * (beta + 1) - a_i * p_i**2 + p_i**2) + kappa(variant) * L**2 * step**2
    return Condition(
        "(12)", sp.GreaterThan(4 * p_i - p_i**2 - 2, rhs), f"{PAPER}, Theorem 1, (12)", per_worker=True,
        hint="needs p_i > 2 - sqrt(2) ~ 0.5858, since 4p - p^2 - 2 <= 0 otherwise",
    )


#: K must be a multiple of q tau: the proof sums (182) over hub periods j = 0..K/(q tau) - 1
#: ((183), proof of Theorem 1, Appendix C.3).
CONDITION_PERIODS = Condition("K multiple of q*tau", sp.Eq(sp.Mod(K, q * tau), 0),
                              f"{PAPER}, proof of Theorem 1 (Appendix C.3), (183)")


def terms(variant: str) -> dict[str, sp.Expr]:
    """The four terms of (13) (restated as (215) at the end of the proof)."""
    lam = LAMBDA_TIGHT if variant == "tight" else LAMBDA_PAPER
    s4 = S4_TIGHT if variant == "tight" else S4_PAPER
    return {
        "optimisation": 2 * Delta / (eta * K),
        "variance": sigma**2 * eta * L * S2,
        "hub consensus": 4 * L**2 * eta**2 * sigma**2 * q**3 * tau**3
        * (1 / (q * tau) - 1 / K) * lam * P,
        "sub-network consensus": 4 * L**2 * eta**2 * sigma**2 * C_ZETA * s4 * P,
    }


# ---------------------------------------------------------------------- errata

ERRATUM_GAMMA = Erratum(
    r"$\Gamma$ in Theorem 1 and condition (12)",
    r"$\Gamma = \frac{\zeta}{1-\zeta^2} + \frac{2}{1-\zeta} + \frac{\zeta}{(1-\zeta)^2}$",
    r"$\Gamma = \frac{1}{1-\zeta^2} + \frac{2}{1-\zeta} + \frac{\zeta}{(1-\zeta)^2}$ "
    r"(larger by $\frac{1}{1+\zeta}$)",
    f"{PAPER}, Theorem 1 and its restatement in Appendix C.3 (printed) vs the proof of "
    "Theorem 1, after (186) (found by fedbound)",
)
ERRATUM_KAPPA = Erratum(
    r"coefficient of $L^2 \eta^2$ in (12)",
    r"$8 q^2 \tau^2 \Gamma$ for every $\beta$",
    r"$4 q^2 \tau^2 \Gamma \left(2 + p_i (\beta - 1)\right)$; $8 q^2 \tau^2 \Gamma$ suffices "
    r"only for $\beta \le 1$",
    f"{PAPER}, proof of Theorem 1 (Appendix C.3), (176), (209), (211), (213)-(214) "
    "(found by fedbound)",
)
ERRATUM_BRACKET = Erratum(
    "first term of (13)", r"$\frac{2(F(x_1)-F_{\inf}])}{\eta K}$ (an unmatched bracket)",
    r"$\frac{2(F(x_1)-F_{\inf})}{\eta K}$",
    f"{PAPER}, (13) (Theorem 1 and its restatement in Appendix C.3), (15), and the proof "
    "of Theorem 1 (Appendix C.3) (found by fedbound)",
)
ERRATUM_LAMBDA_N = Erratum(
    r"definition of $\zeta$", r"$\max\{|\lambda_2(H)|, |\lambda_N(H)|\}$",
    r"$\max\{|\lambda_2(H)|, |\lambda_D(H)|\}$ ($H$ is $D \times D$)",
    f"{PAPER}, Theorem 1 and its restatement in Appendix C.3 "
    "(found by fedbound)",
)
ERRATUM_2C = Erratum(
    "Assumption 2c", r"$b_i H_{ij} = b_j H_{ji}$",
    r"$H_{ij} b_j = H_{ji} b_i$ ($H \operatorname{diag}(b)$ symmetric, so $H b = b$)",
    f"{PAPER}, Assumption 2c (Section 5 and Appendix C.2, printed) vs (30) and (32) "
    "(proof of Proposition 1, Appendix C.2) (found by fedbound)",
)
ERRATUM_PERIODS = Erratum(
    "hypotheses of Theorem 1", "(none)",
    r"$K$ is a multiple of $q \tau$ and all workers start at $x_1$",
    f"{PAPER}, proof of Theorem 1 (Appendix C.3), (183) (its sum over whole hub periods); "
    "Lemma 4 (Appendix C.2) (found by fedbound)",
)
ERRATUM_LAMBDA_TIGHT = Erratum(
    "bracket of the third term (tight variant)", r"$\dots + \frac{1}{(1-\zeta)^2}$",
    r"$\dots + \frac{\zeta^2}{(1-\zeta)^2}$ (the exact sum of (188))",
    f"{PAPER}, proof of Theorem 1 (Appendix C.3), (187)-(188) "
    "(derived by fedbound, not published)",
)
ERRATUM_S4_TIGHT = Erratum(
    "power sums of the fourth term (tight variant)",
    r"$\frac{(q-1)(2q+1)}{6}$ and $\frac{(\tau-1)(2\tau+1)}{6}$",
    r"$\frac{(q-1)(2q-1)}{6}$ and $\frac{(\tau-1)(2\tau-1)}{6}$ (exact sums of $l^2$ and "
    r"$(f-1)^2$)",
    f"{PAPER}, proof of Theorem 1 (Appendix C.3), (180) "
    "(derived by fedbound, not published)",
)
ERRATUM_COROLLARY = Erratum(
    "hypotheses of Corollary 1",
    r"$\eta = \frac{1}{L \sqrt{K}}$, $q^2 \tau^2 \le \sqrt{K}$, $q \tau < K$",
    r"also (12) at $\eta = \frac{1}{L \sqrt{K}}$, possible only if every "
    r"$p_i > 2 - \sqrt{2}$",
    f"{PAPER}, Corollary 1 (needs Theorem 1, whose hypothesis is (12)) (found by fedbound)",
)


def _errata(variant: str) -> list[Erratum]:
    common = [ERRATUM_BRACKET, ERRATUM_LAMBDA_N, ERRATUM_2C, ERRATUM_PERIODS]
    if variant == "printed":
        return common
    extra = [ERRATUM_GAMMA, ERRATUM_KAPPA]
    if variant == "tight":
        extra += [ERRATUM_LAMBDA_TIGHT, ERRATUM_S4_TIGHT]
    return [*extra, *common]


_STATUS = {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum"}
_LHS = r"\mathbb{E}\Big[\frac{1}{K}\sum_{k=1}^{K}\|\nabla F(u_k)\|^2\Big]"


def _theorem(key: str, title: str, citation: str, lhs: str, variant: str,
             term_exprs: dict[str, sp.Expr], conditions: list[Condition], errata: list[Erratum],
             step: str | None, notes: str) -> Theorem:
    return Theorem(
        key=key, variant=variant, title=title, citation=citation, lhs=lhs,
        params=PARAMS, term_exprs=term_exprs, symbols=SYMBOLS, conditions=conditions,
        errata=errata, aggregates=AGGREGATES, worker_symbols={a_i: "a", p_i: "p"},
        step=step, status=_STATUS[variant], notes=notes,
    )


def theorem1(variant: str = "proof") -> Theorem:
    """Theorem 1 (Section 5), (13) under (12) (restated and proved in Appendix C.3, to (215)).

    Bounds E[(1/K) sum_{k=1}^K ||grad F(u_k)||^2] at u_k = X_k a (eq. (8))."""
    return _theorem(
        "mllsgd.theorem1", "MLL-SGD convergence bound (13)", f"{PAPER}, Theorem 1, (12)-(13)",
        _LHS, variant,
        terms(variant), [condition12(variant), CONDITION_PERIODS], _errata(variant), "eta",
        "Assumes all workers start at the same $x_1$ (Lemma 4, Appendix C.2).",
    )


def theorem1_limit(variant: str = "proof") -> Theorem:
    """The K -> infinity limit (14) of (13): the error floor. Computed from
    :func:`terms` with ``sympy.limit`` (the optimisation term vanishes)."""
    lim = {n: sp.limit(e, K, sp.oo) for n, e in terms(variant).items()}
    lim = {n: e for n, e in lim.items() if e != 0}
    return _theorem(
        "mllsgd.theorem1_limit", r"MLL-SGD error floor (14), $K \to \infty$", f"{PAPER}, Theorem 1, (14)",
        r"\limsup_{K\to\infty}" + _LHS, variant, lim, [condition12(variant)],
        _errata(variant), "eta", "The limit of the right-hand side of (13) as $K$ grows.",
    )


def corollary1(variant: str = "proof") -> Theorem:
    """Corollary 1 (Section 5), (15), with explicit constants [derived by fedbound from (13)].

    At eta = 1/(L sqrt K): term 1 = 2 L Delta / sqrt K; term 2 = sigma^2 S2 / sqrt K;
    term 3 = 4 sigma^2 (q tau)^2/K (1 - q tau/K) Lambda P <= 4 sigma^2 Lambda P / sqrt K
    using q^2 tau^2 <= sqrt K; term 4 <= (4/3) sigma^2 C_zeta P / sqrt K using
    S4 <= q^2 tau^2 / 3 (both power-sum forms; checked symbolically in the tests).
    The corollary silently needs (12) at that eta (erratum)."""
    lam = LAMBDA_TIGHT if variant == "tight" else LAMBDA_PAPER
    rk = sp.sqrt(K)
    term_exprs = {
        "optimisation": 2 * L * Delta / rk,
        "variance": sigma**2 * S2 / rk,
        "hub consensus": 4 * sigma**2 * lam * P / rk,
        "sub-network consensus": sp.Rational(4, 3) * sigma**2 * C_ZETA * P / rk,
    }
    conditions = [
        Condition("q^2 tau^2 <= sqrt(K)", sp.LessThan(q**2 * tau**2, rk), f"{PAPER}, Corollary 1"),
        Condition("q tau < K", sp.StrictLessThan(q * tau, K), f"{PAPER}, Corollary 1"),
        condition12(variant, step=1 / (L * rk)),
        CONDITION_PERIODS,
    ]
    thm = _theorem(
        "mllsgd.corollary1", r"MLL-SGD rate at $\eta = 1/(L\sqrt{K})$, (15)", f"{PAPER}, Corollary 1, (15)",
        _LHS, variant, term_exprs, conditions, [ERRATUM_COROLLARY, *_errata(variant)], None,
        r"Explicit constants for the $O(\cdot)$ of (15); the step is fixed at "
        r"$1/(L\sqrt{K})$.",
    )
    thm.rate = RATE_COROLLARY1
    return thm


#: the rate (15): O(L/sqrt(K)) (F(x_1) - F_inf) + O(sigma^2/sqrt(K))
RATE_COROLLARY1 = Rate(({"K": -0.5},), f"{PAPER}, Corollary 1, (15)",
                       "q^2 tau^2 <= sqrt(K) and q tau < K")



# ---------------------------------------------------------------------- special cases

N = sp.Symbol("N", positive=True, integer=True)

#: Special cases of MLL-SGD (Sections 2, 5 and 6; Appendix C.4) as substitutions into (13) with
#: uniform weights a_i = 1/N and p_i = 1 (so S2 = 1/N, P = 1).
SPECIAL_CASES: dict[str, dict[sp.Symbol, sp.Expr]] = {
    "distributed_sgd": {zeta: 0, q: 1, tau: 1},   # D = 1, average every step (Section 6)
    "local_sgd": {zeta: 0, q: 1},                 # complete hub graph, period tau (Section 6)
    "hl_sgd": {zeta: 0},                          # HL-SGD: Local SGD with q > 1 (Sections 2 and 6)
    "cooperative_sgd": {q: 1},                    # Wang & Joshi: any H, q = 1 (Section 5, Appendix C.4)
}


def special_case(name: str, variant: str = "proof") -> dict[str, sp.Expr]:
    """Bound (13) and condition (12) reduced to a special case, with N workers.

    Returns ``{"bound": ..., "condition": ...}`` where the condition is the margin
    (>= 0 when admissible) for a worker with a_i = 1/N, p_i = 1."""
    if name not in SPECIAL_CASES:
        raise ValueError(f"unknown special case {name!r}; known: {', '.join(SPECIAL_CASES)}")
    uniform = {S2: 1 / N, P: 1, a_i: 1 / N, p_i: 1}
    subs = {**uniform, **SPECIAL_CASES[name]}
    thm = theorem1(variant)
    return {
        "bound": sp.simplify(thm.expr.subs(subs)),
        "condition": sp.simplify(condition12(variant).margin.subs(subs)),
    }



# ---------------------------------------------------------------------- the loss at the end
# fedbound's own result (derived by fedbound, not published; bounds/derivations/
# mllsgd_deadline.md): E F(u_K) - F* on quadratics; registered by the paper's plugin
# (verify/papers/mllsgd/deadline.py). The recursion is bounds.mllsgd_deadline's.

DEADLINE_DERIVATION = "bounds/derivations/mllsgd_deadline.md"
DEADLINE_OWN = f"derived by fedbound, not published ({DEADLINE_DERIVATION})"
mu_d, G1_d = sp.symbols("mu G_1", nonnegative=True)
P_hat, N_sup = sp.symbols("P_hat N_sup", nonnegative=True)
DEADLINE_PARAMS = {
    "eta": Param("eta", "step size, (2)", "positive"),
    "L": Param("L", "smoothness, Assumption 1a (the quadratic's largest eigenvalue)", "positive"),
    "mu": Param("mu", "the quadratic's smallest eigenvalue", "positive"),
    "sigma": Param("sigma", "E||g(x) - grad F(x)||^2 <= sigma^2, Assumption 1d with beta = 0",
                   "nonnegative"),
    "Delta": Param("Delta", "initial gap F(x_1) - F*", "nonnegative"),
    "G1": Param("G1", "a lower bound on ||grad F(x_1)||^2 (0: none; at most 2 L Delta)",
                "nonnegative"),
    "K": Param("K", "iterations: the bound is on u_K, after iterations 1..K-1 ((13))",
               "positive_integer"),
    "q": Param("q", "sub-network averagings per hub averaging, (6)", "positive_integer"),
    "tau": Param("tau", "local iterations per sub-network averaging, (6)", "positive_integer"),
    "a": PARAMS["a"],
    "p": PARAMS["p"],
    "V": Param("V", "[N, N] sub-network averaging V = diag(v) E E^T, (6)", "nonnegative",
               vector=True),
    "Z": Param("Z", "[N, N] sub-network and hub averaging Z = diag(v) E H E^T, (7)",
               "nonnegative", vector=True),
}
_DEADLINE_USES = ("eta", "L", "mu", "G1", "Delta", "K", "q", "tau", "a", "p", "V", "Z")
DEADLINE_CONDITIONS = [
    Condition("eta <= 1/L", sp.LessThan(eta, 1 / L),
              f"{DEADLINE_OWN}: every entry of C is >= 0 and non-increasing in the eigenvalue "
              f"(the maximisations over [mu, L]); {PAPER}, Theorem 1's (12) implies it"),
    Condition("mu <= L", sp.LessThan(mu_d, L), f"{DEADLINE_OWN}: the spectrum lies in [mu, L]"),
    Condition("G1 <= 2 L Delta", sp.LessThan(G1_d, 2 * L * Delta),
              f"{DEADLINE_OWN}: ||grad F(x_1)||^2 <= 2 L (F(x_1) - F*) on the class"),
]
ERRATUM_DEADLINE = Erratum(
    "the left-hand side and the hypotheses of Theorem 1, (13) (the deadline bound, derived by "
    "fedbound, not published)",
    r"$\frac{1}{K} \sum_k \mathbb{E}\|\nabla F(u_k)\|^2$ for any $L$-smooth $F$ under (12)",
    r"$\mathbb{E}\, F(u_K) - F^*$, the loss at the end the experiments plot (Section 6), on "
    r"quadratics with spectrum in $[\mu, L]$ and additive noise: the worker second moments "
    r"per eigenvalue, exact, their worst case over the class "
    f"({DEADLINE_DERIVATION}, sections 2-3)",
    f"{PAPER}, Theorem 1, (12)-(13); Section 6")
DEADLINE_NOTE = (
    f"Derived by fedbound, not published; see {DEADLINE_DERIVATION}. MLL-SGD (Algorithm 1, "
    r"(3)-(8), all workers starting at $x_1$) on $F(x) = \frac12 (x - x^*)^\top A (x - x^*) + "
    r"F^*$ with the spectrum of $A$ in $[\mu, L]$, every worker's stochastic gradient "
    r"$\nabla F(x) + \xi$ with $\xi$ independent across workers and iterations, zero-mean, of a "
    r"covariance of trace at most $\sigma^2$ that does not depend on $x$ (Assumption 1d with "
    r"$\beta = 0$, data i.i.d. among workers). The left-hand side is $\mathbb{E} F(u_K) - F^*$, "
    r"$u_K = X_K a$ after iterations $1..K-1$ (the last iterate of (13)). Per eigenvalue the "
    r"worker second moments follow $M' = T_k^\top (M \circ C + \eta^2 c\, \mathrm{diag}(p)) T_k$ "
    r"exactly; $\hat{P}$ is the upper concave envelope of $P = a^\top M_K a$ (from "
    r"$M_1 = 1 1^\top$) at $\bar\lambda = \max(\mu, G_1/(2\Delta))$, $N$ the same from $0$ with "
    r"unit noise; both are bounded above on grids, the supremum of $\lambda N$ to 0.1%.")


def deadline_quadratic(variant: str = "derived") -> Theorem:
    """``mllsgd.deadline_quadratic`` (derived by fedbound, not published;
    bounds/derivations/mllsgd_deadline.md): Delta P^(lam_bar) + (sigma^2/2) sup lam N(lam),
    the exact worst case of E F(u_K) - F* over the quadratics with spectrum in [mu, L]."""
    if variant != "derived":
        raise ValueError(f"mllsgd.deadline_quadratic: unknown variant {variant!r}; its one "
                         "variant is 'derived'")
    return Theorem(
        key="mllsgd.deadline_quadratic", variant="derived",
        title=r"MLL-SGD loss at the end, quadratics with spectrum in $[\mu, L]$ [derived by "
              "fedbound, not published]",
        citation=f"{PAPER}, Algorithm 1, (3)-(8), Assumption 1; the bound derived by fedbound, "
                 "not published",
        lhs=r"\mathbb{E}\, F(u_K) - F^*", params=DEADLINE_PARAMS,
        term_exprs={"transient": Delta * P_hat, "noise": sigma**2 / 2 * N_sup},
        symbols={"eta": eta, "L": L, "mu": mu_d, "sigma": sigma, "Delta": Delta, "G1": G1_d,
                 "K": K, "q": q, "tau": tau},
        conditions=DEADLINE_CONDITIONS, errata=[ERRATUM_DEADLINE],
        aggregates=[
            Aggregate(P_hat, sp.Symbol(r"\hat{P}_K(\bar\lambda)"), reduce.mllsgd_deadline_start,
                      _DEADLINE_USES),
            Aggregate(N_sup, sp.Symbol(r"\sup_{\lambda \in [\mu, L]} \lambda N_K(\lambda)"),
                      reduce.mllsgd_deadline_noise, _DEADLINE_USES)],
        step="eta", status="holds", notes=DEADLINE_NOTE)
