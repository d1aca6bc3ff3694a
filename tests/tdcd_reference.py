"""The refined TDCD bound, (B6) of bounds/derivations/tdcd_refined.md (derived by fedbound,
not published), transcribed in numpy: the independent reference of the tests of
bounds.tdcd's refined variant and of the choose-q-eta chooser."""

import math

import numpy as np


def refined_bound(eta, Q, R, L, Lm, sigma, K, delta) -> float:
    """a = eta Q, y = (Q-1) eta L_max, rho = 3 a y/(6 - 2y), A = a + rho,
    c = a - rho - L A^2/2, n = (L/2) A (a Sbar + rho S), S = sum sigma_j^2,
    Sbar = sum sigma_j^2/K_j; bound = ((rho sqrt(S) + sqrt(rho^2 S + 4c(Delta/R + n)))/(2c))^2,
    +inf outside c > 0, y < 3."""
    S, Sbar = float(np.sum(sigma**2)), float(np.sum(sigma**2 / K))
    a, y = eta * Q, (Q - 1) * eta * Lm
    rho = 3 * a * y / (6 - 2 * y)
    A = a + rho
    c = a - rho - L * A**2 / 2
    n = L / 2 * A * (a * Sbar + rho * S)
    if c <= 0 or y >= 3:
        return math.inf
    return ((rho * math.sqrt(S) + math.sqrt(rho**2 * S + 4 * c * (delta / R + n))) / (2 * c)) ** 2
