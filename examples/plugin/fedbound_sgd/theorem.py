"""Ghadimi & Lan 2013: SGD on an L-smooth (possibly nonconvex) f with a constant step: the
mathematics of the plugin's result (registered, without importing this module, in
``theorems.py``; this module and sympy are imported on the first ``bounds.get``).

Statement. Let f be L-smooth (||grad f(x) - grad f(y)|| <= L ||x - y||) and bounded below by
f_inf, and let SGD run x_{k+1} = x_k - eta g_k from x_0, where g_k is an unbiased stochastic
gradient at x_k given the past, with E||g_k - grad f(x_k)||^2 <= sigma^2. If the step is
constant with 0 < eta <= 1/L, then for every K >= 1

    (1/K) sum_{k=0}^{K-1} E||grad f(x_k)||^2  <=  2 (f(x_0) - f_inf) / (eta K)  +  L eta sigma^2.

Citation. Ghadimi & Lan 2013, "Stochastic first- and zeroth-order methods for nonconvex
stochastic programming", SIAM J. Optim. 23(4), 2341-2368: Theorem 2.1(a) with constant steps
gamma_k = eta, as the proof of Corollary 2.2 specialises it. The paper bounds
(1/L) E||grad f(x_R)||^2 by (D_f^2 + sigma^2 sum_k gamma_k^2) / sum_k (2 gamma_k - L gamma_k^2),
with D_f^2 = 2 (f(x_1) - f^*)/L, for steps gamma_k < 2/L and an output index R drawn with
P_R(k) proportional to 2 gamma_k - L gamma_k^2, k = 1..N. With constant steps R is uniform,
so E||grad f(x_R)||^2 is the average above (the paper's x_1..x_N are x_0..x_{K-1} here,
N = K); multiplying by L and using 2 - L eta >= 1 (eta <= 1/L) gives the statement.
Corollary 2.2 itself states the rate at the step min{1/L, D~/(sigma sqrt N)}. Since a
minimum is at most an average, min_k E||grad f(x_k)||^2 obeys the same bound.

Derivation (the same argument in five lines). L-smoothness gives
f(x_{k+1}) <= f(x_k) - eta <grad f(x_k), g_k> + (L eta^2/2) ||g_k||^2. Given the past,
E<grad f(x_k), g_k> = ||grad f(x_k)||^2 (unbiased) and E||g_k||^2 <= ||grad f(x_k)||^2 +
sigma^2 (the variance bound), so

    E f(x_{k+1}) <= E f(x_k) - eta (1 - L eta/2) E||grad f(x_k)||^2 + L eta^2 sigma^2 / 2.

With eta <= 1/L, 1 - L eta/2 >= 1/2. Summing over k = 0..K-1, the f values telescope and
f(x_K) >= f_inf: (eta/2) sum_k E||grad f(x_k)||^2 <= f(x_0) - f_inf + K L eta^2 sigma^2/2.
Dividing by eta K/2 gives the statement.

Both terms are attained, so a check can catch a constant that is off by any factor: on
f(x) = (L/2) x^2 with sigma = 0, eta = 1/L and K = 1 the left-hand side is L^2 x_0^2 =
2 (f(x_0) - f_inf)/(eta K); with sigma > 0, eta = 1/L and every eigenvalue equal to L,
E||grad f(x_k)||^2 tends to L eta sigma^2.

Variants:

``proof``    (default) the statement above; status "holds".
``printed``  a deliberately wrong constant, planted by this example to show a bound being
             caught: the first term without its 2, as a reader gets by taking D_f^2 to be
             (f(x_1) - f^*)/L. The paper prints the 2; the misreading is ours, recorded as an
             Erratum, and refuted by the stored witness ``witnesses/sgd.nonconvex.printed.json``.
"""

from __future__ import annotations

import sympy as sp

from fedbound.bounds import Condition, Erratum, Param, Theorem

from .theorems import KEY, TITLE

PAPER = "Ghadimi & Lan 2013"
CITATION = f"{PAPER}, SIAM J. Optim. 23(4), Theorem 2.1(a) with constant steps (proof of Corollary 2.2)"
L, eta, K = sp.symbols("L eta K", positive=True)
sigma, Delta = sp.symbols("sigma Delta", nonnegative=True)
SYMBOLS = {"L": L, "sigma": sigma, "Delta": Delta, "eta": eta, "K": K}
PARAMS = {
    "L": Param("L", "smoothness: grad f is L-Lipschitz", "positive"),
    "sigma": Param("sigma", "E||g - grad f||^2 <= sigma^2", "nonnegative"),
    "Delta": Param("Delta", "initial gap f(x_0) - f_inf", "nonnegative"),
    "eta": Param("eta", "constant step size", "positive"),
    "K": Param("K", "iterations averaged (x_0..x_{K-1})", "positive_integer"),
}
LHS = r"\frac{1}{K}\sum_{k=0}^{K-1}\mathbb{E}\|\nabla f(x_k)\|^2"

STEP_CONDITION = Condition("eta <= 1/L", sp.LessThan(L * eta, 1),
                           f"{PAPER}, Corollary 2.2 (steps at most 1/L)")

ERRATUM_PLANTED = Erratum(  # prose with its formulas in $...$ (LaTeX), as every erratum
    "first term of the bound",
    r"$(f(x_0) - f_{inf})/(\eta K)$: $D_f^2$ misread as $(f(x_1) - f^*)/L$ (planted by the "
    "fedbound example plugin; the paper prints the 2)",
    r"$2 (f(x_0) - f_{inf})/(\eta K)$",
    f"{PAPER}, Theorem 2.1(a), where " + r"$D_f = [2 (f(x_1) - f^*)/L]^{1/2}$",
)


def theorem(variant: str = "proof") -> Theorem:
    """The bound of the module docstring in ``variant`` ("proof" or the planted "printed")."""
    planted = variant == "printed"
    return Theorem(
        key=KEY, variant=variant, title=TITLE, citation=CITATION, lhs=LHS,
        params=PARAMS, symbols=SYMBOLS,
        term_exprs={"optimisation": (1 if planted else 2) * Delta / (eta * K),
                    "noise": L * eta * sigma**2},
        conditions=[STEP_CONDITION],
        errata=[ERRATUM_PLANTED] if planted else [],
        step="eta",
        status="refuted" if planted else "holds",
        notes=("A misreading planted by the example plugin; refuted by its stored witness "
               r"($\sigma = 0$, $K = 1$: $\|\nabla f(x_0)\|^2$ exceeds "
               r"$(f(x_0) - f_{inf})/\eta$)." if planted
               else r"The left-hand side is the average over the $K$ iterates "
                    r"$x_0, \dots, x_{K-1}$."),
    )
