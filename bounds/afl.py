"""Anarchic Federated Learning: Yang et al. 2022 (key ``afl`` of :mod:`bounds.references`).

Registered results
------------------
``afl.theorem1``    Theorem 1 (Section 3), the Omega(sigma_G^2) lower bound (proof: Appendix B.1), as
                    an executable instance (:func:`lower_bound_instance`), written as an upper
                    bound on -||grad f(x_hat)||^2 so that ``check`` reads it like the others.
``afl.theorem2``    AFA-CD, general arrivals, Theorem 2 (Section 4.1; proof: Appendix B.2).
``afl.theorem3``    AFA-CD, uniform arrivals, Theorem 3 (Section 4.1; proof: Appendix B.3).
``afl.theorem4``    AFA-CS, bounded staleness, Theorem 4 (Section 4.2; proof: Appendix C).
``afl.corollary1..3``  Corollaries 1, 2 (Section 4.1) and 3 (Section 4.2) at eta_L = 1/sqrt(T) and
                    eta = sqrt(mK) (sqrt(MK) for Corollary 3), with explicit constants and the
                    minimum T each silently needs (the theorem's conditions at those steps).

The step: every proof uses the server step x_{t+1} = x_t - eta eta_L G_t (Appendix B.2, (a1),
(a2), (a5)-(a7); the one-step updates opening Appendices B.3 and C), not the printed
x_{t+1} = x_t - eta G_t (Algorithm 2 and Algorithm 3, server step "Aggregate and update");
found by fedbound; only s = eta eta_L and
eta_L enter the bounds (erratum ``ERRATUM_SERVER_STEP`` on every result).

K statistics: ``K`` is a constant, or an array of per-round local-step counts whose last
axis is the workers of a round and whose leading axes (rounds, replicas) are averaged:
1/K_t = mean_i 1/K_{t,i} (harmonic), Kbar_t = mean_i K_{t,i}, Khat_t^2 = mean_i K_{t,i}^2
(Theorem 2). For Theorems 2 and 3 (printed) the last axis is the m arriving workers; for
Theorem 3 (proof, (b9)) and Theorem 4 (the end of its proof, Appendix C) it is all M workers
(for Theorem 4 the K of each worker's stored update). Reductions happen inside (``Aggregate``).

Variants: ``printed`` as the paper prints it; ``proof`` what the proofs support (the
(tau+1) factor of the delayed sums, (a12)/(b8)/(c3); for Theorem 3 the factor 2 between
(b9) and (b10) and the all-M averages of (b9); for Theorem 4 the sums at the end of its proof;
all found by fedbound). Statuses are the ones
the toolkit established: Theorems 3 and 4 are ``refuted`` and Corollaries 2 and 3
``rate-refuted`` (their published O(.) rates fail too: ``fedbound rate``), by the witnesses
shipped with fedbound (``verify.witnesses(key)``: found by ``fedbound search``, or members
of a refutation family, replayed by ``fedbound check --all``). Each carries an erratum on
the step of its proof that fails (ERRATUM_FALSE_INEQ, ERRATUM_STALE_NOISE,
ERRATUM_COROLLARY2, ERRATUM_COROLLARY3), which derives how fast measured/bound grows along
its family; ``RATES`` holds the corollaries' published rates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, partial

import sympy as sp

from .core import Aggregate, Condition, Erratum, Param, Rate, Theorem
from .reduce import afl_counts, k_statistic, k_statistics
from .references import cite

PAPER = cite("afl")
VARIANTS = ("printed", "proof")

# ---------------------------------------------------------------------- symbols

L, sigma_L, sigma_G, Delta, eta, eta_L, T, m, M, tau, m_prime = sp.symbols(
    "L sigma_L sigma_G Delta eta eta_L T m M tau m'", nonnegative=True)
SYMBOLS = {
    "L": L, "sigma_L": sigma_L, "sigma_G": sigma_G, "Delta": Delta, "eta": eta,
    "eta_L": eta_L, "T": T, "m": m, "M": M, "tau": tau, "m_prime": m_prime,
}
K = sp.Symbol("K", positive=True)  #: a constant K (corollaries); theorems use the statistics
SYMBOLS["K"] = K
#: K statistics: mean_t 1/K_t, mean_t Kbar_t, mean_t Khat_t^2, max K_{t,i}, max_t Khat_t^2
H_K, BAR_K, HAT_K2, K_MAX, HAT_K2_MAX = sp.symbols(
    r"\overline{K^{-1}} \overline{K} \overline{\hat{K}^2} K_{max} \hat{K}^2_{max}", positive=True)
_t, _i = sp.symbols("t i", integer=True)
_Kti = sp.IndexedBase("K")


def _aggregates(axis: str | None) -> list[Aggregate]:
    uses = ("K",) if axis is None else ("K", axis)
    n = m if axis == "m" else M
    mean_i = lambda e: sp.Sum(e, (_i, 1, n)) / n  # noqa: E731
    mean_t = lambda e: sp.Sum(e, (_t, 0, T - 1)) / T  # noqa: E731
    k = _Kti[_t, _i]

    def stat(name: str) -> partial:
        return partial(k_statistic, name=name, axis=axis)

    return [
        Aggregate(H_K, mean_t(mean_i(1 / k)), stat("harmonic"), uses),
        Aggregate(BAR_K, mean_t(mean_i(k)), stat("mean"), uses),
        Aggregate(HAT_K2, mean_t(mean_i(k**2)), stat("quadratic"), uses),
        Aggregate(K_MAX, sp.Max(k), stat("max"), uses),
        Aggregate(HAT_K2_MAX, sp.Max(mean_i(k**2)), stat("quadratic_max"), uses),
    ]


PARAMS = {
    "L": Param("L", "smoothness constant of every f_i, Assumption 1", "positive"),
    "sigma_L": Param("sigma_L", "local stochastic-gradient deviation, Assumption 3", "nonnegative"),
    "sigma_G": Param("sigma_G", "global variability max_i ||grad f_i - grad f||, Assumption 3",
                     "nonnegative"),
    "Delta": Param("Delta", "initial gap f(x_0) - f_* (Theorem 2)", "nonnegative"),
    "eta": Param("eta", "server learning rate (Algorithm 2)", "positive"),
    "eta_L": Param("eta_L", "worker learning rate (Algorithm 2)", "positive"),
    "T": Param("T", "number of global rounds (Section 4.1)", "positive_integer"),
    "m": Param("m", "updates collected per round (Algorithms 1 and 2)", "positive_integer"),
    "M": Param("M", "total number of workers (Section 3)", "positive_integer"),
    "tau": Param("tau", "maximum delay (Theorem 2; Theorem 4: staleness of stored updates)",
                 "nonnegative"),
    "K": Param("K", "local steps K_{t,i}: a constant or an array [..., workers] (Theorem 2)",
               "positive_integer"),
    "m_prime": Param("m_prime", "fewest zero-delay updates in a round of AFA-CS (Section 4.2, Theorem 4)",
                     "nonnegative"),
}


class AFLTheorem(Theorem):
    """A Theorem whose parameters are also checked against each other: m <= M,
    m' <= M and tau an integer (Sections 3, 4.1 and 4.2), by ``cross_check``
    (:func:`bounds.reduce.afl_counts`, which a manifest names)."""

    cross_check = staticmethod(afl_counts)

    def _values(self, names, given):
        return self.cross_check(self.params, given, super()._values(names, given))


# ---------------------------------------------------------------------- conditions

S = eta * eta_L  #: the effective server step of the proofs


def _delay_factor(variant: str) -> sp.Expr:
    """tau as printed; tau + 1 in the proof variant: each x_s is referenced from rounds
    s..s+tau, so the delayed sums of (a12), (b8), (c3) carry tau + 1 (found by fedbound)."""
    return tau if variant == "printed" else tau + 1


def local_condition(citation: str) -> Condition:
    """6 eta_L^2 (2K^2 - 3K + 1) L^2 <= 1 for every K_{t,i} (C2a/C3a/C4a; monotone in K, so
    at K_max), needed by the local-drift bound (1), (a11)."""
    return Condition("local (a11)", sp.LessThan(6 * eta_L**2 * (2 * K_MAX**2 - 3 * K_MAX + 1) * L**2, 1),
                     citation, hint="eta_L <= 1/(L sqrt(6 (2K-1)(K-1)))")


def eta_L_limit(L_: float, K_max: float) -> float:
    """Largest eta_L of the local condition: 1/(L sqrt(6 (2K-1)(K-1))), inf for K = 1
    (C2a, the first condition of Theorem 2; derived by fedbound)."""
    q = 6 * (2 * K_max - 1) * (K_max - 1)
    return math.inf if q == 0 else 1.0 / (L_ * math.sqrt(q))


def eta_L_cap(key: str, *, L: float, K, tau: float, variant: str = "proof") -> float:
    """Largest eta_L allowed by the eta-free conditions of ``key`` in closed form: the local
    condition (:func:`eta_L_limit`) and Theorem 2: 1/(K_max L sqrt(180 d)) (C2b, Theorem 2);
    Theorems 3, 4: 1/(L sqrt(120 d max_t Khat_t^2)) (C3c, C4c: Theorems 3 and 4), with d = tau
    (printed) or tau + 1 (proof, (a12)/(b8)/(c3)). inf when nothing binds (K = 1, d = 0)."""
    stats = k_statistics(K)
    d = tau if variant == "printed" else tau + 1
    cap = eta_L_limit(L, stats["max"])
    if d > 0:
        second = (stats["max"] * L * math.sqrt(180 * d) if key.split(".")[-1] in ("theorem2", "corollary1")
                  else L * math.sqrt(120 * d * stats["quadratic_max"]))
        cap = min(cap, 1.0 / second)
    return cap


def s_limit(key: str, *, L: float, tau: float, M: float = 1, m_prime: float = 1,
            variant: str = "proof") -> float:
    """Largest s = eta eta_L of the server condition of ``key`` in closed form (exact root
    of the quadratic; derived by fedbound): Theorem 2: 1/(L (1 + sqrt(1 + 6 tau^2))) (C2c, Theorem 2);
    Theorem 3: 1/(M L (1 + sqrt(1 + c tau^2 / M))) with c = 2 printed, 4 proof (C3b, Theorem 3);
    Theorem 4: 1/(L (1 + sqrt(1 + 4 (M - m')^2 tau^2 / M^2))) (C4b, Theorem 4)."""
    if key.endswith("theorem2"):
        return 1.0 / (L * (1 + math.sqrt(1 + 6 * tau**2)))
    if key.endswith("theorem3"):
        c = 2 if variant == "printed" else 4
        return 1.0 / (M * L * (1 + math.sqrt(1 + c * tau**2 / M)))
    if key.endswith("theorem4"):
        return 1.0 / (L * (1 + math.sqrt(1 + 4 * (M - m_prime) ** 2 * tau**2 / M**2)))
    raise ValueError(f"s_limit: no server condition for {key!r}")


def conditions2(variant: str, s: sp.Expr = S) -> list[Condition]:
    """C2a-C2c, the three learning-rate conditions of Theorem 2 in order (C2b with tau + 1 in
    the proof variant, (a12))."""
    return [
        local_condition(f"{PAPER}, Theorem 2, first condition (C2a)"),
        Condition("C2b", sp.StrictLessThan(180 * eta_L**2 * K_MAX**2 * L**2 * _delay_factor(variant), 1),
                  f"{PAPER}, Theorem 2, second condition (C2b); (a12)",
                  hint="eta_L < 1/(K_max L sqrt(180 tau)); tau + 1 in the proof variant"),
        Condition("C2c", sp.LessThan(2 * L * s + 6 * tau**2 * L**2 * s**2, 1),
                  f"{PAPER}, Theorem 2, third condition (C2c); (a13)",
                  hint="eta eta_L <= 1/(L (1 + sqrt(1 + 6 tau^2)))"),
    ]


def conditions3(variant: str, s: sp.Expr = S) -> list[Condition]:
    """C3a-C3c, the three learning-rate conditions of Theorem 3 in order (proof: the factor 2
    between (b9) and (b10) in C3b, tau + 1 in C3c)."""
    c = 1 if variant == "printed" else 2
    return [
        local_condition(f"{PAPER}, Theorem 3, first condition (C3a)"),
        Condition("C3b", sp.LessThan(L * s + c * L**2 * s**2 * tau**2, 1 / (2 * M)),
                  f"{PAPER}, Theorem 3, second condition (C3b); proof (Appendix B.3), "
                  "between (b9) and (b10) vs after (b12)", hint="eta eta_L <= ~1/(2 M L)"),
        Condition("C3c", sp.StrictLessThan(120 * L**2 * HAT_K2_MAX * eta_L**2 * _delay_factor(variant), 1),
                  f"{PAPER}, Theorem 3, third condition (C3c); (b8)"),
    ]


def conditions4(variant: str, s: sp.Expr = S) -> list[Condition]:
    """C4a-C4c, the three learning-rate conditions of Theorem 4 in order (proof: tau + 1 in C4c,
    (c3))."""
    return [
        local_condition(f"{PAPER}, Theorem 4, first condition (C4a)"),
        Condition("C4b", sp.LessThan((s * (M - m_prime) ** 2 * L**2 * tau**2 / M**2 + L / 2) * s,
                                     sp.Rational(1, 4)), f"{PAPER}, Theorem 4, second condition (C4b); (c4)"),
        Condition("C4c", sp.LessThan(30 * L**2 * eta_L**2 * _delay_factor(variant) * HAT_K2_MAX,
                                     sp.Rational(1, 4)),
                  f"{PAPER}, Theorem 4, third condition (C4c); (c3), (c5)"),
    ]


# ---------------------------------------------------------------------- errata

ERRATUM_SERVER_STEP = Erratum(
    "server update", r"$x_{t+1} = x_t - \eta G_t$ (Algorithms 2, 3)",
    r"$x_{t+1} = x_t - \eta \eta_L G_t$ (what every proof and bound uses)",
    f"{PAPER}, Algorithms 2 and 3 (printed) vs the proofs: Appendix B.2, (a1), (a2), "
    "(a5)-(a7); the one-step updates opening Appendices B.3 and C (found by fedbound)")
ERRATUM_TAU_PLUS_ONE = Erratum(
    r"delayed-sum factor in the $\eta_L$ condition", r"$\tau$ (C2b, C3c, C4c)",
    r"$\tau + 1$: $x_s$ is referenced from rounds $s, \dots, s+\tau$ (at $\tau = 0$ the printed "
    "condition is vacuous and the drift-gradient term is dropped)",
    f"{PAPER}, (a12), (b8), (c3) (found by fedbound)")
ERRATUM_DELAY_COEFFICIENT = Erratum(
    "delay coefficient in (a12)", r"$\frac{3 \tau^2 L^2 \eta^3 \eta_L^3}{2 m^2}$",
    r"$\frac{3 \tau^2 L^2 \eta^3 \eta_L^3}{m^2}$ (what (a13) and C2c use)",
    f"{PAPER}, proof of Theorem 2 (Appendix B.2), (a12)-(a13) (found by fedbound)")
ERRATUM_AFTER_THEOREM2 = Erratum(
    "paragraph after Theorem 2", r"$\eta_L^2 \le 1/K_{t,i}^2$",
    r"$\eta_L = O\left(\frac{1}{K L \sqrt{\tau}}\right)$",
    f"{PAPER}, the paragraph after Theorem 2 (Section 4.1) (found by fedbound)")
ERRATUM_C3B = Erratum(
    "C3b", r"$L \eta \eta_L + L^2 \eta^2 \eta_L^2 \tau^2 \le \frac{1}{2M}$",
    r"$L \eta \eta_L + 2 L^2 \eta^2 \eta_L^2 \tau^2 \le \frac{1}{2M}$ (the factor 2 between "
    "(b9) and (b10) is dropped after (b12))",
    f"{PAPER}, Theorem 3; its proof (Appendix B.3), between (b9) and (b10) vs after (b12) "
    "(found by fedbound)")
ERRATUM_K_AVERAGES3 = Erratum(
    r"$K$ statistics of Theorem 3", r"averages over the $m$ arriving workers (as in Theorem 2)",
    r"averages over all $M$ workers",
    f"{PAPER}, Theorem 3 vs (b9) (found by fedbound)")
ERRATUM_FALSE_INEQ = Erratum(
    "proof of Theorem 3 (Appendix B.3), the second inequality after (b12)",
    r"$\sum_{i \ne j} \|z_i - z_j\|^2 \le 2(M-1) \sum_i \|z_i\|^2$ with "
    r"$z_i = \Delta_i(x_{t-\tau_{t,i}})$, which brings the chain after (b12) to $\le 0$ "
    "under C3b",
    r"$\sum_{i \ne j} \|z_i - z_j\|^2 = 2M \sum_i \|z_i\|^2 - 2\|\sum_i z_i\|^2$, the identity "
    "(b10) itself. With it the chain keeps the sampling variance of uniform partial "
    r"participation that (b11)-(b12) expose, $\frac{L s^2 (M-m)}{m M (M-1)} \sum_i \|z_i\|^2$ "
    r"per round ($s = \eta \eta_L$), and no hypothesis absorbs it: at $x^*$ the $z_i$ are the "
    r"client gradients, $\sum_i z_i = 0$ while $\sum_i \|z_i\|^2$ reaches $M \sigma_G^2$. After "
    r"the final rearrangement it adds about $\frac{4 L s (M-m)}{m(M-1)} \sigma_G^2$ to the "
    r"right-hand side: a term of order $s$, where the statement carries $\sigma_G^2$ only in "
    r"$120 L^2 \eta_L^2 \hat{K}^2 \sigma_G^2$, of order $\eta_L^2$. No correction is known; "
    "the theorem is refuted [derived by fedbound, not published]. Family ("
    r"$x_0 = x^*$, $\sigma_L = 0$, $K = 1$, $M = 2$, $m = 1$, no delay, $\eta$ fixed, "
    r"$s \to 0$, $T = \lceil c/(s L) \rceil$): the exact left-hand side is at least "
    r"$(1 - 1/c) \frac{s L \sigma_G^2}{2 - s L}$ (the stationary variance of "
    r"$y' = (1 - s L) y + s L (\bar{c}_S - \bar{c})$) and the bound is "
    r"$120 L^2 (s/\eta)^2 \sigma_G^2$, so "
    r"$\frac{\text{measured}}{\text{bound}} \ge \frac{(1 - 1/c) \eta^2}{120 L s (2 - s L)}$, "
    r"which grows like $1/s$ without limit",
    "Yang et al. 2022, proof of Theorem 3 (Appendix B.3), (b10) to (b12) and the two "
    "inequalities after (b12)")
ERRATUM_K_SUMS4 = Erratum(
    r"$K$ statistics of Theorem 4",
    r"$\bar{K}_t$, $\hat{K}_t^2$ averages ('defined the same as in Theorem 2')",
    r"sums over all $M$ workers (stale ones $K_{t-\tau,i}$); the $1/M$ of the drift terms "
    "cancels",
    f"{PAPER}, Theorem 4 vs the end of its proof (Appendix C) and the proof of Corollary 3 "
    "(found by fedbound)")
ERRATUM_STALE_NOISE = Erratum(
    r"proof of Theorem 4 (Appendix C), the bound on $A_1$ (its third equality) and (c1)",
    r"$\mathbb{E}\langle \nabla f(x_t), G_i(x_{t-\tau_{t,i}}) \rangle = \langle \nabla f(x_t), "
    r"\Delta_i(x_{t-\tau_{t,i}}) \rangle$ for the stored updates $i \in \mathcal{M}_t^c$, and "
    r"the noise of all $M$ stored updates counted afresh in every round by (c1)",
    "a stored stochastic update is reused in every round until its worker returns, so "
    r"$x_t$ already depends on its noise: that noise is not mean-zero given $x_t$, and the "
    "cross terms the third equality drops are of the order of (c1) itself. Each fresh sample "
    r"moves $x$ by $s n$ in all ($s/M$ in each of its about $M/m$ rounds of use, "
    r"$s = \eta \eta_L$), so the noise floor is that of one fresh sample per arrival, about "
    r"$\frac{L s \sigma_L^2}{2 m K}$, independent of $M$, where the statement's $\sigma_L$ "
    r"terms are $\frac{4 L s \sigma_L^2}{M K}$ and terms of order $s^2$ and $\eta_L^2$ "
    r"[derived by fedbound, not published]. Family ($\sigma_G = 0$, $x_0 = x^*$, $K = 1$, "
    r"$m = 1$, round-robin arrivals, no delay, $\eta = 1$, $s = \eta_L = \frac{c}{L M^2}$, "
    r"$T = \lceil 20 M^2/c \rceil$): the staleness is $\tau = M - 1$ with $m' = 1$, every "
    r"$\sigma_L$ term of the bound is at most $(4c + 8c^2 + 20c^2/M) \sigma_L^2/M^3$, and the "
    r"left-hand side tends to $\frac{c \sigma_L^2}{2 M^2}$: "
    r"$\frac{\text{measured}}{\text{bound}} \sim \frac{M}{8 (1 + 2c)}$, which grows like $M$ "
    "without limit",
    "Yang et al. 2022, proof of Theorem 4 (Appendix C), the bound on $A_1$ and (c1)")
ERRATUM_COROLLARY2 = Erratum(
    "proof of Corollary 2 (Appendix B.3)",
    r"$O\left(\frac{1}{m^{1/2} K^{1/2} T^{1/2}}\right) + O\left(\frac{\tau^2}{T}\right) + "
    r"O\left(\frac{K^2}{T}\right)$: Theorem 3 at $\eta_L = 1/\sqrt{T}$, $\eta = \sqrt{mK}$, "
    r"a linear speedup in $m$ and $K$",
    "inherits the failing step after (b12) of Theorem 3: the sampling-variance term "
    r"$\frac{4 L s (M-m)}{m(M-1)} \sigma_G^2$ at $s = \sqrt{mK/T}$ is of order "
    r"$\sqrt{K}/\sqrt{mT}$, so for $m < M$ and $\sigma_G > 0$ the left-hand side grows with "
    r"$K$: no linear speedup in $K$, even in the regime $T \ge m K^5$ of Remark 4 (along "
    r"$T = c m K^6$ it decays like $K^{-5/2}$, the stated rate like $K^{-7/2}$: rate "
    r"refuted). Family ($x_0 = x^*$, $\sigma_L = 0$, $K = 1$, $M = 2$, $m = 1$, no delay, "
    r"$T \to \infty$): the left-hand side tends to $\frac{L \sigma_G^2}{2 \sqrt{T}}$ while the "
    r"explicit bound is $\frac{120 L^2 \sigma_G^2}{T}$, so "
    r"$\frac{\text{measured}}{\text{bound}} \sim \frac{\sqrt{T}}{240 L}$ without limit "
    "[derived by fedbound, not published]",
    "Yang et al. 2022, Corollary 2 and its proof (Appendix B.3); Remark 4")
ERRATUM_COROLLARY3 = Erratum(
    "proof of Corollary 3 (Appendix C)",
    r"$O\left(\frac{1}{M^{1/2} K^{1/2} T^{1/2}}\right) + O\left(\frac{K^2}{M T}\right) + "
    r"O\left(\frac{\tau^2 (M-m')^2}{T M^2}\right)$: Theorem 4 at $\eta_L = 1/\sqrt{T}$, "
    r"$\eta = \sqrt{MK}$, a speedup in $M$ rather than $m$",
    r"inherits the failing step of Theorem 4 ($A_1$ and (c1)): at $s = \sqrt{MK/T}$ the "
    r"floor $\frac{L s \sigma_L^2}{2 m K}$ is of order $\frac{\sqrt{M}}{m \sqrt{KT}}$: it "
    r"grows with $M$ at fixed $m$, so there is no speedup in $M$ (along $T = c M^7$ with "
    r"$m = 1$ the left-hand side decays like $M^{-3}$, the stated rate at best like $M^{-4}$: "
    r"rate refuted). Family ($\sigma_G = 0$, $x_0 = x^*$, $K = 1$, $m = 1$, round-robin "
    r"arrivals, $L = L_0 M^{-3/2}$, $T = 100 M^2$): the explicit bound is "
    r"$\frac{4 L \sigma_L^2}{\sqrt{MT}} \left(1 + 0.2 L_0 (1 - 1/M)^4 + 0.5 L_0/M^2\right)$ and "
    r"the left-hand side tends to $\frac{L \sigma_L^2 \sqrt{M}}{2 \sqrt{T}}$, so "
    r"$\frac{\text{measured}}{\text{bound}} \sim \frac{M}{8 (1 + 0.2 L_0)}$ without limit "
    "[derived by fedbound, not published]",
    "Yang et al. 2022, Corollary 3 and its proof (Appendix C)")
ERRATUM_THM4_BRACKETS = Erratum(
    "Theorem 4 first term", r"$4f(x_0)-f(x_T)/(\eta \eta_L T)$, no expectation",
    r"$\frac{4 (f(x_0) - \mathbb{E} f(x_T))}{\eta \eta_L T} \le "
    r"\frac{4 (f_0 - f_*)}{\eta \eta_L T}$ ($\Delta$ here)",
    f"{PAPER}, Theorem 4 and the end of its proof (Appendix C) (found by fedbound)")


def _errata(key: str, variant: str) -> list[Erratum]:
    common = [ERRATUM_SERVER_STEP]
    if key == "theorem2":
        extra = [ERRATUM_DELAY_COEFFICIENT, ERRATUM_AFTER_THEOREM2]
        return common + extra + ([ERRATUM_TAU_PLUS_ONE] if variant == "proof" else [])
    if key == "theorem3":
        extra = [ERRATUM_FALSE_INEQ]
        return common + extra + ([ERRATUM_TAU_PLUS_ONE, ERRATUM_C3B, ERRATUM_K_AVERAGES3]
                                 if variant == "proof" else [])
    extra = [ERRATUM_STALE_NOISE, ERRATUM_THM4_BRACKETS]
    return common + extra + ([ERRATUM_TAU_PLUS_ONE, ERRATUM_K_SUMS4] if variant == "proof" else [])


# ---------------------------------------------------------------------- terms


def terms2(s: sp.Expr = S, e_L: sp.Expr = eta_L) -> dict[str, sp.Expr]:
    """Right-hand side of Theorem 2: 4 Delta/(s T) + 4 (alpha_L sigma_L^2 +
    alpha_G sigma_G^2), alpha_G = 3/2 + 45 L^2 eta_L^2 mean_t Khat_t^2 (floor 6 sigma_G^2)."""
    return {
        "optimisation": 4 * Delta / (s * T),
        "sigma_L variance": 4 * L * s / m * H_K * sigma_L**2,
        "sigma_L delay": 12 * tau**2 * L**2 * s**2 / m * H_K * sigma_L**2,
        "sigma_L drift": 30 * e_L**2 * L**2 * BAR_K * sigma_L**2,
        "sigma_G floor": 6 * sigma_G**2,
        "sigma_G drift": 180 * L**2 * e_L**2 * HAT_K2 * sigma_G**2,
    }


def terms3(s: sp.Expr = S, e_L: sp.Expr = eta_L) -> dict[str, sp.Expr]:
    """Right-hand side of Theorem 3 (no sigma_G^2 floor)."""
    return {
        "optimisation": 4 * Delta / (s * T),
        "sigma_L variance": 4 * L * s / m * H_K * sigma_L**2,
        "sigma_L delay": 8 * tau**2 * L**2 * s**2 / m * H_K * sigma_L**2,
        "sigma_L drift": 20 * e_L**2 * L**2 * BAR_K * sigma_L**2,
        "sigma_G drift": 120 * L**2 * e_L**2 * HAT_K2 * sigma_G**2,
    }


def terms4(variant: str, s: sp.Expr = S, e_L: sp.Expr = eta_L) -> dict[str, sp.Expr]:
    """Right-hand side of Theorem 4 (no outer 4). ``printed``: Kbar, Khat^2 as
    averages over M (Theorem 4); ``proof``: as sums (end of its proof, Appendix C), i.e. M
    times the averages."""
    n = 1 if variant == "printed" else M
    return {
        "optimisation": 4 * Delta / (s * T),
        "sigma_L variance": 4 / M * L * s * H_K * sigma_L**2,
        "sigma_L staleness": 4 / M * 2 * s**2 * (M - m_prime) ** 2 * L**2 * tau**2 / M**2 * H_K * sigma_L**2,
        "sigma_L drift": 4 / M * 5 * L**2 * e_L**2 * n * BAR_K * sigma_L**2,
        "sigma_G drift": 120 * L**2 * e_L**2 / M * n * HAT_K2 * sigma_G**2,
    }


# ---------------------------------------------------------------------- theorems

_LHS = r"\frac{1}{T}\sum_{t=0}^{T-1}\mathbb{E}\|\nabla f(x_t)\|^2"
_STATUS = {
    # toolkit-established: the counterexample search (verify.search) finds nothing for
    # Theorem 2 (proof) and Corollary 1 (budget 50, seed 0); it found the witnesses in
    # verify/witnesses/, which check(..., exact=True) confirms and check --all replays:
    # Theorem 3 (budget 50, seed 0; printed: its own witness), Theorem 4 (budget 200,
    # seed 1), Corollary 2 (budget 50, seed 0), Corollary 3 (see its note).
    # Theorem 1's instance is executed by verify.papers.afl (the floor is attained exactly).
    ("theorem1", "proof"): "holds",
    ("theorem2", "printed"): "unverified", ("theorem2", "proof"): "holds-with-erratum",
    ("theorem3", "printed"): "refuted", ("theorem3", "proof"): "refuted",
    ("theorem4", "printed"): "refuted", ("theorem4", "proof"): "refuted",
}
_NOTES = {
    "theorem2": "Searched, no violation found (``verify.search``); the printed variant drops "
                r"the drift-gradient term at $\tau = 0$ (its C2b is vacuous there), hence "
                "unverified.",
    "theorem3": "Refuted by its stored witnesses, ``verify.witnesses('afl.theorem3')`` "
                r"($x_0 = x^*$, $\sigma_L = 0$, $K = 1$, $m < M$: the sampling variance "
                r"$\sim s \frac{M-m}{m(M-1)} \sigma_G^2$ exceeds the bound), and by a family "
                r"along which the ratio of measured to bound grows like $1/(\eta \eta_L)$ "
                "without limit; the failing step of the proof is an erratum.",
    "theorem4": "Refuted by its stored witnesses, ``verify.witnesses('afl.theorem4')`` "
                r"($\sigma_G = 0$, $m \ll M$, round-robin arrivals: the noise floor "
                r"$\sim L s \sigma_L^2/(2m)$ exceeds $4 L s \sigma_L^2/M$), and by a family "
                "along which the ratio of measured to bound grows like $M$ without limit; the "
                "failing step of the proof is an erratum.",
}


def _theorem(key: str, variant: str, title: str, citation: str, terms, conditions, axis,
             lhs: str = _LHS, step: str | None = "eta") -> AFLTheorem:
    return AFLTheorem(
        key=f"afl.{key}", variant=variant, title=title, citation=citation, lhs=lhs,
        params=PARAMS, term_exprs=terms, symbols=SYMBOLS, conditions=conditions,
        errata=_errata(key, variant) if key.startswith("theorem") and key != "theorem1"
        else [ERRATUM_SERVER_STEP],
        aggregates=_aggregates(axis), step=step,
        status=_STATUS.get((key, variant), "unverified"), notes=_NOTES.get(key, ""))


def theorem2(variant: str = "proof") -> AFLTheorem:
    """Theorem 2 (AFA-CD, general arrivals); K statistics over the m arrivals. The bound holds
    for any independent arrival process (Section 3, Appendix B)."""
    return _theorem("theorem2", variant, "AFA-CD, general arrivals", f"{PAPER}, Theorem 2",
                    terms2(), conditions2(variant), "m")


def theorem3(variant: str = "proof") -> AFLTheorem:
    """Theorem 3 (AFA-CD, uniform arrivals); K statistics over M_t (printed, Theorem 3) or over
    all M workers (proof, (b9))."""
    return _theorem("theorem3", variant, "AFA-CD, uniform arrivals", f"{PAPER}, Theorem 3",
                    terms3(), conditions3(variant), "m" if variant == "printed" else "M")


def theorem4(variant: str = "proof") -> AFLTheorem:
    """Theorem 4 (AFA-CS); K over all M stored updates; Kbar, Khat^2 averages (printed,
    Theorem 4) or sums (proof, the end of its proof in Appendix C)."""
    return _theorem("theorem4", variant, "AFA-CS, bounded staleness", f"{PAPER}, Theorem 4",
                    terms4(variant), conditions4(variant), "M")


# ---------------------------------------------------------------------- theorem 1


@dataclass(frozen=True)
class LowerBoundInstance:
    """The construction of Theorem 1 (proof, Appendix B.1): M = 2 workers in one dimension,
    f_1(x) = (x + G)^2, f_2(x) = (x - G)^2, f = x^2 + G^2 (L = 2, sigma_L = 0,
    sigma_G^2 = 4 G^2), and only worker 1 ever participates. Any algorithm that converges
    then converges to argmin f_1 = -G, where ||grad f||^2 = 4 G^2 = sigma_G^2."""

    G: float
    centres: tuple[float, float]
    curvature: float  # f_i = curvature/2 (x - c_i)^2, curvature = L = 2
    sigma_G: float
    limit_point: float

    @property
    def floor(self) -> float:
        """||grad f(limit_point)||^2 = sigma_G^2, the lower bound's value."""
        return (self.curvature * self.limit_point) ** 2


def lower_bound_instance(G: float) -> LowerBoundInstance:
    """The Theorem 1 construction for a given G > 0 (Appendix B.1)."""
    if not (math.isfinite(G) and G > 0):
        raise ValueError(f"G={G} must be finite and > 0 (f_1 = (x + G)^2, {PAPER}, proof of "
                         "Theorem 1, Appendix B.1)")
    return LowerBoundInstance(G=float(G), centres=(-float(G), float(G)), curvature=2.0,
                              sigma_G=2.0 * G, limit_point=-float(G))


def theorem1(variant: str = "proof") -> AFLTheorem:
    """Theorem 1: E||grad f(x_hat)||^2 >= sigma_G^2 on the construction of
    :func:`lower_bound_instance`, for every convergent algorithm and every step. Written
    as -E||grad f(x_hat)||^2 <= -sigma_G^2 (the exact constant 1, by Jensen)."""
    return _theorem("theorem1", variant, r"lower bound $\Omega(\sigma_G^2)$, general arrivals",
                    f"{PAPER}, Theorem 1 and its proof (Appendix B.1)",
                    {"lower bound": -sigma_G**2}, [], None,
                    lhs=r"-\mathbb{E}\|\nabla f(\hat x)\|^2", step=None)


# ---------------------------------------------------------------------- corollaries

#: Corollary steps: eta_L = 1/sqrt(T), eta = sqrt(n K) (n = m for Cor 1/2, M for Cor 3).
COR_ETA_L = 1 / sp.sqrt(T)


def _cor_steps(n: sp.Expr) -> tuple[sp.Expr, sp.Expr]:
    return sp.sqrt(n * K / T), COR_ETA_L


def _constant_k(terms: dict[str, sp.Expr]) -> dict[str, sp.Expr]:
    """Substitute a constant K for the K statistics (1/K_t = 1/K, Kbar = K, Khat^2 = K^2)."""
    sub = {H_K: 1 / K, BAR_K: K, HAT_K2: K**2, K_MAX: K, HAT_K2_MAX: K**2}
    return {n: sp.simplify(e.subs(sub)) for n, e in terms.items()}


def minimum_T(key: str, variant: str = "proof") -> sp.Expr:
    """The smallest T at which a corollary's steps satisfy its theorem's conditions
    (derived by fedbound): max of the local bound 6(2K^2-3K+1)L^2, the delay bound
    c K^2 L^2 (tau or tau + 1) and the server bound n K L^2 (root)^2."""
    return _minimum_T(key.split(".")[-1], variant)


@cache
def _minimum_T(key: str, variant: str) -> sp.Expr:
    """:func:`minimum_T`, built once per corollary and variant (sympy's ``Max`` compares its
    arguments pairwise as it is built: a fifth of a second for the three corollaries)."""
    d = _delay_factor(variant)
    local = 6 * (2 * K**2 - 3 * K + 1) * L**2
    if key == "corollary1":
        return sp.Max(local, 180 * K**2 * L**2 * d, m * K * L**2 * (1 + sp.sqrt(1 + 6 * tau**2)) ** 2)
    if key == "corollary2":
        c = 2 if variant == "printed" else 4
        return sp.Max(local, 120 * K**2 * L**2 * d,
                      m * K * M**2 * L**2 * (1 + sp.sqrt(1 + c * tau**2 / M)) ** 2)
    if key == "corollary3":
        return sp.Max(local, 120 * K**2 * L**2 * d,
                      M * K * L**2 * (1 + sp.sqrt(1 + 4 * (M - m_prime) ** 2 * tau**2 / M**2)) ** 2)
    raise ValueError(f"minimum_T: unknown corollary {key!r}")


def _corollary(key: str, variant: str, theorem_terms, theorem_conditions, n, title, citation
               ) -> AFLTheorem:
    s, e_L = _cor_steps(n)
    terms = _constant_k(theorem_terms(s, e_L))
    sub = {eta: s / e_L, eta_L: e_L, K_MAX: K, HAT_K2_MAX: K**2}
    conds = [Condition(c.name, c.relation.subs(sub), c.citation, hint=f"T >= {minimum_T(key, variant)}")
             for c in theorem_conditions]
    status = {"corollary1": "holds-with-erratum" if variant == "proof" else "unverified",
              "corollary2": "rate-refuted", "corollary3": "rate-refuted"}[key]
    inherited = {"corollary2": [ERRATUM_COROLLARY2], "corollary3": [ERRATUM_COROLLARY3]}
    thm = AFLTheorem(
        key=f"afl.{key}", variant=variant, title=title, citation=citation, lhs=_LHS,
        params=PARAMS, term_exprs=terms, symbols=SYMBOLS, conditions=conds,
        errata=[ERRATUM_SERVER_STEP, Erratum(
            f"hypotheses of Corollary {key[-1]}", "sufficiently large $T$",
            f"$T \\ge {sp.latex(minimum_T(key, variant))}$ (the theorem's conditions at these "
            "steps)", citation)]
        + ([ERRATUM_TAU_PLUS_ONE] if variant == "proof" else []) + inherited.get(key, []),
        aggregates=[], step=None, status=status, rate=RATES[key],
        notes={"corollary1": "Explicit constants of Corollary 1 (derived by fedbound, not "
                             r"published); speedup only before the $6 \sigma_G^2$ floor.",
               "corollary2": "Explicit form refuted with Theorem 3 (stored witnesses "
                             "``verify.witnesses('afl.corollary2')``, and a family along $T$ "
                             r"whose ratio grows like $\sqrt{T}$); rate refuted: no linear "
                             r"speedup in $K$ for $m < M$ and $\sigma_G > 0$ "
                             "(``fedbound rate afl.corollary2 --over K``).",
               "corollary3": "Explicit form refuted with Theorem 4 (stored witnesses "
                             "``verify.witnesses('afl.corollary3')``, and a family along $M$ "
                             "whose ratio grows like $M$); rate refuted: no speedup in $M$ at "
                             "fixed $m$ (``fedbound rate afl.corollary3 --over M``)."
               }[key])
    return thm


#: the published rates: the exponents of each O(.) term (Rate); tau^2 (M-m')^2/(T M^2) of
#: Corollary 3 is written with M - m' as a variable of its own
RATES = {
    "corollary1": Rate(
        ({"m": -0.5, "K": -0.5, "T": -0.5}, {"tau": 2, "T": -1}, {"K": 2, "T": -1},
         {"sigma_G": 2}),
        "Yang et al. 2022, Corollary 1",
        "the first term leads for sigma_G = 0 and T >= max(tau^4 m K, m K^5)"),
    "corollary2": Rate(
        ({"m": -0.5, "K": -0.5, "T": -0.5}, {"tau": 2, "T": -1}, {"K": 2, "T": -1}),
        "Yang et al. 2022, Corollary 2 and Remark 4",
        "the first term leads for T >= max(tau^4 m K, m K^5) (Remark 4)"),
    "corollary3": Rate(
        ({"M": -0.5, "K": -0.5, "T": -0.5}, {"K": 2, "M": -1, "T": -1},
         {"tau": 2, "M - m_prime": 2, "T": -1, "M": -2}),
        "Yang et al. 2022, Corollary 3 and Remark 5",
        "the first term leads for T >= max(M K^5, tau^4 (M-m')^4 K/M^3)"),
}


def corollary1(variant: str = "proof") -> AFLTheorem:
    """Corollary 1 (proof: Appendix B.2): Theorem 2 at eta_L = 1/sqrt(T),
    eta = sqrt(mK): (4 Delta + 4 L sigma_L^2)/sqrt(mKT) + 12 tau^2 L^2 sigma_L^2/T
    + 30 L^2 K sigma_L^2/T + 180 L^2 K^2 sigma_G^2/T + 6 sigma_G^2."""
    return _corollary("corollary1", variant, terms2, conditions2(variant), m,
                      r"AFA-CD rate at $\eta_L = 1/\sqrt{T}$, $\eta = \sqrt{mK}$", f"{PAPER}, Corollary 1")


def corollary2(variant: str = "proof") -> AFLTheorem:
    """Corollary 2 (proof: Appendix B.3): Theorem 3 at eta_L = 1/sqrt(T), eta = sqrt(mK)."""
    return _corollary("corollary2", variant, terms3, conditions3(variant), m,
                      r"AFA-CD uniform rate at $\eta_L = 1/\sqrt{T}$, $\eta = \sqrt{mK}$",
                      f"{PAPER}, Corollary 2")


def corollary3(variant: str = "proof") -> AFLTheorem:
    """Corollary 3 (proof: Appendix C): Theorem 4 at eta_L = 1/sqrt(T), eta = sqrt(MK);
    printed: averages (O(K/(MT)) terms), proof: sums (O(K/T))."""
    return _corollary("corollary3", variant, lambda s, e: terms4(variant, s, e), conditions4(variant),
                      M, r"AFA-CS rate at $\eta_L = 1/\sqrt{T}$, $\eta = \sqrt{MK}$",
                      f"{PAPER}, Corollary 3")


def corollary_steps(key: str, *, T: int, K: float, m: int = 1, M: int = 1) -> tuple[float, float]:
    """(eta, eta_L) of a corollary: eta_L = 1/sqrt(T), eta = sqrt(mK) (Corollaries 1 and 2)
    or sqrt(MK) (Corollary 3)."""
    n = M if key.endswith("corollary3") else m
    return math.sqrt(n * K), 1.0 / math.sqrt(T)


