"""The calibrated prediction of the TDCD chooser: the first and second moments of the hub
models of Algorithm 1 of Das et al. 2022 on the model's local quadratic model, round by round.

Around a reference minimiser theta_ref of the training loss (least squares: exact; logistic
regression: Newton's method), each sample's loss slope is linearised in its score z_p,
l'(z_p) ~ r_p + h_p (z_p - z_ref,p) (exact for least squares: r_p the residual, h_p = 1;
logistic: r_p = -y_p sigmoid(-y_p z_ref,p), h_p = sigmoid(z_ref,p) sigmoid(-z_ref,p)). On a
batch, client k of silo j then steps, with e = theta_hub - theta_ref and eps its own block's
error, along (4)

    g = gbar_kj + A_kj eps + C_kj e,   A_kj = X_kj^T diag(h) X_kj / b_j,
    C_kj = X_kj^T diag(h) X_k,(-j) / b_j (the stale embeddings of the other silos),
    gbar_kj = X_kj^T r / b_j,

so that Q steps (5) from eps = e_j give M^Q e_j - P (gbar + C e) with M = I - eta A_kj and
P = eta sum_{q<Q} M^q (both from the eigen-decomposition of A_kj), and the hub model of
silo j is their average over its K_j clients (Algorithm 1, line 32). A round is the affine
map e' = A_B e + b_B of the batch B; with the batch independent of e,

    m' = E[A_B] m + E[b_B],   S' = E[A_B S A_B^T] + E[A_B m b_B^T] + E[b_B m^T A_B^T] + E[b_B b_B^T]

(m = E[e], S = E[e e^T]), the expectations over BATCHES batches drawn as the simulation draws
them (``sim.tdcd.draw_batch``). E||grad L(theta^{rQ})||^2 = tr(H S H), H the Hessian at
theta_ref, and the predicted time to epsilon is that of the running mean of this curve
(Theorem 1's left side, (15)). Exact in expectation for least squares up to the Monte-Carlo
average over batches; for logistic regression the curvature away from theta_ref is not
modelled.
"""

from __future__ import annotations

import math

import numpy as np

#: batches the expectations over a round average over
BATCHES = 64
#: Newton steps for logistic regression's reference minimiser
NEWTON_STEPS = 50
#: linearisation points of logistic regression, evenly spaced from theta^0 to theta_ref
ANCHORS = 6
#: with a target, every step stops at this multiple of the rounds the first to reach it took
SCREEN_FACTOR = 4.0
#: the ridge (times L) of logistic regression's reference minimiser: on separable data the
#: loss has no minimiser (theta_ref runs off to infinity, Newton's steps with it); the ridge
#: bounds it where the loss has fallen by orders of magnitude from theta^0
RIDGE = 1e-4


def reference(model) -> np.ndarray:
    """theta_ref [D]: the least-squares solution, or the minimiser by Newton's method of
    logistic regression's loss plus a ridge RIDGE L ||theta||^2 / 2 (bounded on separable
    data, where the loss alone has no minimiser)."""
    X, y = model.X.cpu().numpy(), model.y.cpu().numpy()
    if model.loss_kind == "squared":
        return np.linalg.lstsq(X, y, rcond=None)[0]
    theta = np.zeros(X.shape[1])
    for _ in range(NEWTON_STEPS):
        z = X @ theta
        with np.errstate(over="ignore"):                                    # exp -> inf: s = 0
            s = 1.0 / (1.0 + np.exp(y * z))                                    # sigmoid(-y z)
        grad = X.T @ (-y * s) / len(y)
        grad = grad + RIDGE * model.L * theta
        hess = (X.T * (s * (1 - s))) @ X / len(y) + RIDGE * model.L * np.eye(X.shape[1])
        step = np.linalg.solve(hess, grad)
        theta = theta - step
        if np.linalg.norm(step) <= 1e-12 * max(1.0, np.linalg.norm(theta)):
            break
    return theta


def slopes(model, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(r_p, h_p) [..., n]: the loss slope and curvature of every sample at theta [..., D]."""
    X, y = model.X.cpu().numpy(), model.y.cpu().numpy()
    z = theta @ X.T
    if model.loss_kind == "squared":
        return z - y, np.ones_like(z)
    with np.errstate(over="ignore"):                                        # exp -> inf: s = 0
        s = 1.0 / (1.0 + np.exp(y * z))
    return -y * s, s * (1 - s)


class RoundMaps:
    """Per drawn batch and client, the pieces of the round map (module docstring) that do not
    depend on (Q, eta): the eigen-decomposition of A_kj, C_kj and gbar_kj, silo by silo."""

    def __init__(self, model, batches: np.ndarray, anchor: np.ndarray):
        lay = model.layout
        X = model.X.cpu().numpy()
        self.anchor = np.asarray(anchor, dtype=float)
        r, h = slopes(model, self.anchor)
        self.D, self.blocks = X.shape[1], list(lay.blocks)
        starts = np.concatenate([[0], np.cumsum(lay.blocks)])
        self.silos = []
        for j, (K, b) in enumerate(zip(lay.clients, lay.client_batch, strict=True)):
            rows = batches.reshape(batches.shape[0], K, b)                      # [B, K, b]
            cols = slice(starts[j], starts[j + 1])
            Xj, Xall = X[rows][..., cols], X[rows]                              # [B, K, b, D_j]
            hw = h[rows][..., None]
            A = np.einsum("bkpi,bkpl->bkil", Xj * hw, Xj) / b
            C = np.einsum("bkpi,bkpl->bkil", Xj * hw, Xall) / b
            C[..., cols] = 0.0                                                  # the stale others
            g = np.einsum("bkpi,bkp->bki", Xj, r[rows]) / b
            a, U = np.linalg.eigh(A)
            self.silos.append((cols, np.clip(a, 0.0, None), U, C, g))
        self.hessian = (X.T * h) @ X / X.shape[0]

    def maps(self, Q: int, eta: float) -> tuple[np.ndarray, np.ndarray]:
        """(A_B [B, D, D], b_B [B, D]) of a round of Q local steps of size eta, linearised at
        the anchor, in absolute coordinates: theta' = A_B theta + b_B."""
        first = self.silos[0][2]
        B = first.shape[0]
        A = np.zeros((B, self.D, self.D))
        b = np.zeros((B, self.D))
        with np.errstate(over="ignore", invalid="ignore"):
            for cols, a, U, C, g in self.silos:
                rho = 1.0 - eta * a                                             # [B, K, D_j]
                power = rho**Q
                near = np.abs(eta * a) < 1e-12
                geo = np.where(near, Q * eta, (1.0 - power) / np.where(near, 1.0, a))
                Ut = U.swapaxes(-1, -2)
                MQ = (U * power[..., None, :]) @ Ut
                P = (U * geo[..., None, :]) @ Ut
                block = -(P @ C).mean(axis=1)                                   # [B, D_j, D]
                block[..., cols] += MQ.mean(axis=1)
                A[:, cols] = block
                b[:, cols] = -(P @ g[..., None])[..., 0].mean(axis=1)
        return A, b + self.anchor - A @ self.anchor


def gradient(model, theta: np.ndarray) -> np.ndarray:
    """grad L at theta [..., D]."""
    X = model.X.cpu().numpy()
    return slopes(model, theta)[0] @ X / X.shape[0]


def anchors(model, batches: np.ndarray, theta0: np.ndarray, theta_ref: np.ndarray) -> list[RoundMaps]:
    """The linearisation points: ANCHORS points from theta^0 to theta_ref (one for least
    squares, where the model is exact)."""
    count = 1 if model.loss_kind == "squared" else ANCHORS
    return [RoundMaps(model, batches, theta0 + s * (theta_ref - theta0))
            for s in np.linspace(1.0, 0.0, count)]


def grad_sq_curves(model, points: list[RoundMaps], theta0: np.ndarray, Q: int, etas,
                   rounds: int, epsilon: float | None = None) -> np.ndarray:
    """E||grad L(theta^{rQ})||^2 for each step of ``etas`` [C] and r = 0 .. rounds - 1, [C,
    rounds] (inf from a round whose second moment is no longer finite): each round's map
    linearised at the anchor nearest the mean, E||grad L||^2 = ||grad L(m)||^2 + tr(H^2
    Cov) with H the anchor's Hessian, and E[A S A^T] the mean over the drawn batches of
    A_B S A_B^T. With ``epsilon``, a step's rounds stop once its running mean is at most
    epsilon (the rest of its curve is then inf), and every step's once one has been for as
    many rounds again (SCREEN_FACTOR times the first's time at most: a step not there by then
    is not the fastest; inf)."""
    etas = np.asarray(etas, dtype=float)
    C = etas.size
    maps = [[a.maps(Q, eta) for eta in etas] for a in points]
    A = np.array([[mp[0] for mp in row] for row in maps])                       # [K, C, B, D, D]
    b = np.array([[mp[1] for mp in row] for row in maps])                       # [K, C, B, D]
    K, _, B, D = b.shape
    EA, Eb = A.mean(2), b.mean(2)
    Ebb = b.swapaxes(-1, -2) @ b / B
    AB = (A.reshape(K, C, B, D * D).swapaxes(-1, -2) @ b).reshape(K, C, D, D, D) / B
    # every batch's map side by side, [K, C, D, B D]: row i holds A_B[i, :] for each batch B,
    # so that sum_B A_B S A_B^T is one product of [D, B D] matrices
    wide = np.ascontiguousarray(A.transpose(0, 1, 3, 2, 4)).reshape(K, C, D, B * D)
    del A
    H2 = np.array([a.hessian @ a.hessian for a in points])                      # [K, D, D]
    where = np.stack([a.anchor for a in points])                               # [K, D]
    m = np.repeat(theta0[None], C, axis=0)
    S = np.einsum("ci,cj->cij", m, m)
    out = np.full((C, rounds), math.inf)
    total = np.zeros(C)
    active = np.ones(C, dtype=bool)
    last = rounds
    with np.errstate(over="ignore", invalid="ignore"):
        for r in range(rounds):
            c = np.nonzero(active)[0]
            if r >= last or c.size == 0:
                break
            k = np.argmin(((where[None] - np.nan_to_num(m[c])[:, None]) ** 2).sum(-1), axis=1)
            cov = S[c] - m[c][:, :, None] * m[c][:, None, :]
            out[c, r] = (gradient(model, m[c]) ** 2).sum(-1) + (H2[k] * cov).sum((-2, -1))
            total[c] += out[c, r]
            done = ~np.isfinite(out[c, r])
            if epsilon is not None:
                reached = total[c] <= epsilon * (r + 1)
                if reached.any():
                    last = min(last, math.ceil(SCREEN_FACTOR * (r + 1)))
                done |= reached
            active[c[done]] = False
            c, k = c[~done], k[~done]
            Aw = wide[k, c]                                                     # [n, D, B D]
            n = Aw.shape[0]
            cross = (m[c][:, None, None, :] @ AB[k, c])[:, :, 0, :]              # [n, D, D]
            As = (Aw.reshape(n, D, B, D) @ S[c][:, None]).reshape(n, D, B * D)  # A_B S
            S[c] = As @ Aw.swapaxes(-1, -2) / B + cross + cross.swapaxes(-1, -2) + Ebb[k, c]
            m[c] = (EA[k, c] @ m[c][..., None])[..., 0] + Eb[k, c]
    out[~np.isfinite(out)] = math.inf
    out[np.maximum.accumulate(~np.isfinite(out), axis=1)] = math.inf
    return out


def time_to_epsilon(curve: np.ndarray, epsilon: float, round_time: float) -> float:
    """The wall-clock time of the first R whose running mean of ``curve`` over rounds r < R
    is at most ``epsilon`` (inf if none): the predicted time to epsilon of (15)'s left side."""
    running = np.cumsum(curve) / np.arange(1, curve.size + 1)
    hit = np.nonzero(running <= epsilon)[0]
    return float((hit[0] + 1) * round_time) if hit.size else math.inf
