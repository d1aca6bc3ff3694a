"""Hub graphs, hub mixing matrices H, Assumption 2, and the spectral quantity zeta.

MLL-SGD (Castiglia et al. 2021, key ``mllsgd`` of :mod:`bounds.references`) mixes the D hub
models with a D x D matrix H, y^(d) <- sum_j H[j, d] y^(j) (eq. (4), Section 4), which must
satisfy Assumption 2 (Section 4). The paper gives no construction of H; this module builds
three standard ones (fedbound's choice), validates any H against Assumption 2 in the form
the proof uses, and computes zeta, the second largest eigenvalue magnitude of H (Theorem 1
and the discussion after it, Section 5).

Two departures from the printed text, both from the paper's own proofs:

* 2c is checked as H diag(b) symmetric, H_ij b_j = H_ji b_i ((32), proof of Proposition 1,
  Appendix C.2). The printed 2c, b_i H_ij = b_j H_ji (Section 4 and Appendix C.2), has its
  indices reversed: with column stochasticity only the proof form gives H b = b, which (10)
  needs.
* H must have a positive diagonal. Eq. (4) sums over the neighbourhood of d,
  which includes d itself, and without H_dd > 0 the printed assumptions admit
  periodic matrices such as [[0, 1], [1, 0]] with zeta = 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isqrt

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .references import cite

GRAPH_KINDS = ("complete", "path", "ring", "star", "grid", "random")
HUB_RULES = ("complete", "mh", "diffusion")

PAPER = cite("mllsgd")
_DISCONNECTED = (
    f"graph is disconnected: zeta = 1, Theorem 1 needs a connected hub graph "
    f"({PAPER}, Section 4, after Assumption 2)"
)


@dataclass(frozen=True)
class WorkerMatrices:
    """Worker-level weights and mixing operators of MLL-SGD (eqs. (5)-(8), Section 5).

    v: [N] weights normalised within each sub-network (Section 4).
    a: [N] weights normalised over all workers, a_i = w_i / w_tot (Section 5, before (8)).
    b: [D] hub weights, b_d = sum_{i in hub d} w_i / w_tot (Section 4, before Assumption 2).
    E: [N, D] one-hot hub membership, E[i, d] = 1 iff d(i) = d.
    V: [N, N] sub-network averaging, V = diag(v) E E^T, V_ij = v_i if d(i) = d(j).
    Z: [N, N] sub-network plus hub averaging, Z = diag(v) E H E^T,
       Z_ij = H[d(i), d(j)] v_i ((7)).
    A: [N, N] the consensus projector A = a 1^T (Proposition 4, Appendix C.2).
    """

    v: np.ndarray
    a: np.ndarray
    b: np.ndarray
    E: np.ndarray
    V: np.ndarray
    Z: np.ndarray
    A: np.ndarray


def hub_graph(kind, D, *, seed=None, edge_prob=0.3, shape=None) -> np.ndarray:
    """Boolean symmetric adjacency [D, D], without self-loops, of a hub graph G (Section 3).

    Kinds:
      "complete": every pair of hubs is joined.
      "path":     i -- i+1 (the paper's sparse topology, Section 6).
      "ring":     the path plus D-1 -- 0. A simple graph has no 2-cycle, so for D <= 2
                  the ring is the path (and for D = 3 it is the complete graph).
      "star":     hub 0 joined to every other hub.
      "grid":     2-D grid with shape=(r, c), r * c = D; by default the most square
                  factorisation r <= c (a prime D gives the 1 x D path).
      "random":   connected random graph: a uniformly random recursive spanning tree
                  plus every other edge independently with probability edge_prob,
                  drawn from numpy.random.default_rng(seed).
    `seed` and `edge_prob` are used by "random" only; `shape` by "grid" only.
    D = 1 gives the single hub (no edges) for every kind.
    """
    if kind not in GRAPH_KINDS:
        raise ValueError(f"kind={kind!r} is unknown: valid kinds are {', '.join(GRAPH_KINDS)}")
    D = _positive_int("D", D)
    if shape is not None and kind != "grid":
        raise ValueError(f"shape={shape!r} is only used by kind='grid', not kind={kind!r}")
    if kind == "complete":
        return ~np.eye(D, dtype=bool)
    if kind == "path":
        return _graph_from_edges(D, [(i, i + 1) for i in range(D - 1)])
    if kind == "ring":
        closing = [(D - 1, 0)] if D >= 3 else []
        return _graph_from_edges(D, [(i, i + 1) for i in range(D - 1)] + closing)
    if kind == "star":
        return _graph_from_edges(D, [(0, i) for i in range(1, D)])
    if kind == "grid":
        return _grid_graph(D, shape)
    return _random_connected_graph(D, seed, edge_prob)


def is_connected(adj) -> bool:
    """Whether the undirected hub graph with adjacency `adj` is connected (Section 3; Section 4,
    after Assumption 2)."""
    adj = _adjacency(adj)
    n_components = connected_components(csr_matrix(adj), directed=False, return_labels=False)
    return n_components == 1


def hub_weights(hub_of, w) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Worker and hub weights (v, a, b) from the hub of each worker and worker weights w.

    v_i = w_i / sum_{j in hub d(i)} w_j   (Castiglia et al. 2021, Section 4)
    a_i = w_i / w_tot                     (Section 5, before (8))
    b_d = sum_{i in hub d} w_i / w_tot    (Section 4, before Assumption 2)
    hub_of[i] in 0..D-1 is d(i); every hub must have at least one worker, w > 0.
    """
    hub_of = _hub_assignment(hub_of)
    w = _finite_vector("w", w, len(hub_of))
    nonpositive = np.flatnonzero(w <= 0)
    if nonpositive.size:
        i = nonpositive[0]
        raise ValueError(f"w[{i}] = {w[i]:.12g} <= 0: worker weights must be positive "
                         f"({PAPER}, Section 4)")
    hub_totals = np.bincount(hub_of, weights=w)
    w_tot = w.sum()
    return w / hub_totals[hub_of], w / w_tot, hub_totals / w_tot


def hub_matrix(adj, b, rule=None, alpha=None) -> np.ndarray:
    """Hub mixing matrix H [D, D] on a connected graph satisfying Assumption 2 (Section 4).

    Rules (fedbound's choice; the paper gives no construction):
      "complete":  H = b 1^T. Needs a complete graph; rank one, so zeta = 0 for every b.
      "mh":        b-weighted Metropolis-Hastings, for each edge (i, j)
                   H_ij = min(1 / (deg_j + 1), b_i / (b_j (deg_i + 1))),
                   H_jj = 1 - sum_{i != j} H_ij >= 1 / (deg_j + 1).
                   Then H_ij b_j = min(b_j / (deg_j + 1), b_i / (deg_i + 1)) is symmetric.
      "diffusion": generalised diffusion (Rotaru & Naegeli 2004, cited in the
                   proof of Proposition 1),
                   H = I - alpha Lap diag(b)^-1 with 0 < alpha < min_j b_j / deg_j
                   (default: half that bound); H diag(b) = diag(b) - alpha Lap.
    rule=None picks "complete" for a complete graph and "mh" otherwise.
    All three satisfy 2a-2c in the proof's form ((32)) with a positive diagonal.
    """
    adj = _adjacency(adj)
    D = adj.shape[0]
    b = _probability_vector("b", b, D, "hub weights (Section 4)")
    if rule is not None and rule not in HUB_RULES:
        raise ValueError(f"rule={rule!r} is unknown: valid rules are {', '.join(HUB_RULES)}")
    if alpha is not None and rule != "diffusion":
        raise ValueError(f"alpha={alpha!r} is only used by rule='diffusion', not rule={rule!r}")
    if not is_connected(adj):
        raise ValueError(_DISCONNECTED)
    complete = bool(adj.sum() == D * (D - 1))
    rule = rule if rule is not None else ("complete" if complete else "mh")
    if rule == "complete":
        if not complete:
            i, j = np.argwhere(~adj & ~np.eye(D, dtype=bool))[0]
            raise ValueError(
                f"rule='complete' needs a complete hub graph, but ({i}, {j}) is not an edge: "
                f"H = b 1^T would violate Assumption 2a ({PAPER}, Section 4)"
            )
        return np.outer(b, np.ones(D))
    deg = adj.sum(axis=0)
    if rule == "mh":
        return _metropolis_hastings(adj, deg, b)
    return _generalised_diffusion(adj, deg, b, alpha)


def diffusion_alpha_bound(adj, b) -> float:
    """Supremum of admissible alpha for H = I - alpha Lap diag(b)^-1: min_j b_j / deg_j.

    H_jj = 1 - alpha deg_j / b_j > 0 iff alpha < b_j / deg_j (positive diagonal).
    Infinite for D = 1 (no edges).
    """
    adj = _adjacency(adj)
    b = _probability_vector("b", b, adj.shape[0], "hub weights (Section 4)")
    deg = adj.sum(axis=0)
    has_edges = deg > 0
    return float(np.min(b[has_edges] / deg[has_edges])) if has_edges.any() else np.inf


def validate_hub_matrix(H, b, adj, atol=1e-10) -> None:
    """Raise ValueError naming the first violated requirement of Assumption 2 on H; else None.

    Checks, in order: shapes; b a probability vector with positive entries (Section 4);
    H nonnegative; 2a sparsity, H_ij > 0 exactly on the edges of adj, with a
    positive diagonal (the hub's own model in (4); without it the printed assumptions
    admit the periodic [[0, 1], [1, 0]] with zeta = 1); 2b column sums equal to 1;
    2c in the form the proof uses, H_ij b_j = H_ji b_i ((32)), reporting when only the
    printed form b_i H_ij = b_j H_ji (indices reversed) holds; and connectedness of adj
    (Section 4, after Assumption 2).
    """
    adj = _adjacency(adj)
    D = adj.shape[0]
    H = _square_matrix("H", H, D, f"the hub graph adj has D = {D} hubs")
    b = _probability_vector("b", b, D, "hub weights (Section 4)")
    _check_nonnegative(H, atol)
    _check_sparsity(H, adj, atol)
    _check_column_stochastic(H, atol)
    _check_proof_form_2c(H, b, atol)
    if not is_connected(adj):
        raise ValueError(_DISCONNECTED)


def zeta(H, b) -> float:
    """zeta = max(|lambda_2(H)|, |lambda_D(H)|), the second largest eigenvalue magnitude of H.

    Castiglia et al. 2021, Theorem 1 (printed lambda_N; H is D x D) and Section 5 after it.
    Computed from the symmetrisation S = diag(b)^-1/2 H diag(b)^1/2, which is symmetric
    because H diag(b) is ((32)) and has the eigenvalues of H; with the eigenvalues
    of S sorted, zeta is the larger absolute value of the second largest and the smallest
    (not the second entry of a signed sort). zeta = 0 for D = 1.
    H must be nonnegative, column stochastic (Assumption 2b) and satisfy 2c in the proof's form;
    connectivity and aperiodicity are not required: without them zeta = 1 is returned,
    which Theorem 1 excludes.
    """
    b = _probability_vector("b", b, np.size(b), "hub weights (Section 4)")
    D = b.size
    H = _square_matrix("H", H, D, f"b has D = {D} entries")
    atol = 1e-10
    _check_nonnegative(H, atol)
    _check_column_stochastic(H, atol)
    _check_proof_form_2c(H, b, atol)
    if D == 1:
        return 0.0
    root_b = np.sqrt(b)
    S = H * root_b[None, :] / root_b[:, None]
    ev = np.linalg.eigvalsh((S + S.T) / 2)
    return float(max(abs(ev[-2]), abs(ev[0])))


def worker_matrices(hub_of, w, H) -> WorkerMatrices:
    """v, a, b, E, V, Z and A of MLL-SGD for workers in hubs `hub_of` with weights `w`.

    Orientation: X_{k+1} = (X_k - eta G_k) T_k with X = [x^(1), ..., x^(N)] (n x N,
    workers as columns; (5)), T_k in {I, V, Z} by (6). So column j of X Z is
    sum_d' H[d', d(j)] z^(d'), the hub mixing (4) of the sub-network averages
    z^(d) = sum_{i in hub d} v_i x^(i) (Algorithm 1 line 10).
      V = diag(v) E E^T: block V^(d)_ij = v^(i) (Section 5, before (7)).
      Z = diag(v) E H E^T: Z_ij = H[d(i), d(j)] v^(i) ((7)).
      A = a 1^T.
    H is not checked against Assumption 2 here (use validate_hub_matrix), so that
    negative controls can be built; Z a = a holds iff H b = b ((10)).
    """
    v, a, b = hub_weights(hub_of, w)
    D = b.size
    H = _square_matrix("H", H, D, f"hub_of names D = {D} hubs")
    hubs = np.asarray(hub_of, dtype=int)
    N = hubs.size
    E = np.zeros((N, D))
    E[np.arange(N), hubs] = 1.0
    V = v[:, None] * (E @ E.T)
    Z = v[:, None] * (E @ H @ E.T)
    return WorkerMatrices(v=v, a=a, b=b, E=E, V=V, Z=Z, A=np.outer(a, np.ones(N)))


def weighted_op_norm(M, a) -> float:
    """The a-weighted operator norm ||diag(a)^-1/2 M diag(a)^1/2||_2.

    Castiglia et al. 2021, Lemma 5, (112), claims ||Z^j - A||_op = zeta^j and
    ||V - A||_op = ||I - A||_op = 1 for the plain spectral norm (17); that is false
    for non-uniform a (found by fedbound). All three hold exactly in this norm, which is what
    Lemma 7's proof (Appendix C.2) needs: diag(a)^-1/2 Z diag(a)^1/2 is symmetric by (30).
    """
    a = _probability_vector("a", a, np.size(a), "worker weights (Section 5)")
    N = a.size
    M = _square_matrix("M", M, N, f"a has N = {N} entries")
    root_a = np.sqrt(a)
    return float(np.linalg.norm(M * root_a[None, :] / root_a[:, None], 2))


def _metropolis_hastings(adj, deg, b) -> np.ndarray:
    proposal = np.minimum(
        1.0 / (deg[None, :] + 1.0), b[:, None] / (b[None, :] * (deg[:, None] + 1.0))
    )
    H = np.where(adj, proposal, 0.0)
    H[np.diag_indices_from(H)] = 1.0 - H.sum(axis=0)
    return H


def _generalised_diffusion(adj, deg, b, alpha) -> np.ndarray:
    D = adj.shape[0]
    bound = diffusion_alpha_bound(adj, b)
    if alpha is None:
        alpha = bound / 2 if np.isfinite(bound) else 1.0
    if not (np.isfinite(alpha) and 0 < alpha < bound):
        raise ValueError(
            f"alpha={alpha!r} is outside (0, min_j b_j/deg_j) = (0, {bound:.12g}): "
            f"H = I - alpha Lap diag(b)^-1 would lose its positive diagonal or Assumption 2a "
            f"({PAPER}, Section 4)"
        )
    laplacian = np.diag(deg).astype(float) - adj
    return np.eye(D) - alpha * laplacian / b[None, :]


def _graph_from_edges(D, edges) -> np.ndarray:
    adj = np.zeros((D, D), dtype=bool)
    for i, j in edges:
        adj[i, j] = adj[j, i] = True
    return adj


def _grid_graph(D, shape) -> np.ndarray:
    if shape is None:
        rows = max(r for r in range(1, isqrt(D) + 1) if D % r == 0)
        shape = (rows, D // rows)
    if len(shape) != 2:
        raise ValueError(f"shape={shape!r} must be a pair (r, c) with r * c = D = {D}")
    rows, cols = (_positive_int("shape", s) for s in shape)
    if rows * cols != D:
        raise ValueError(f"shape={tuple(shape)!r} has r * c = {rows * cols}, not D = {D}")
    index = np.arange(D).reshape(rows, cols)
    right = zip(index[:, :-1].ravel(), index[:, 1:].ravel(), strict=True)
    down = zip(index[:-1, :].ravel(), index[1:, :].ravel(), strict=True)
    return _graph_from_edges(D, list(right) + list(down))


def _random_connected_graph(D, seed, edge_prob) -> np.ndarray:
    if not (np.isscalar(edge_prob) and 0 <= edge_prob <= 1):
        raise ValueError(f"edge_prob={edge_prob!r} must be a probability in [0, 1]")
    rng = np.random.default_rng(seed)
    order = rng.permutation(D)
    tree = [(order[t], order[rng.integers(t)]) for t in range(1, D)]
    adj = _graph_from_edges(D, tree)
    extra = np.triu(rng.random((D, D)) < edge_prob, k=1)
    return adj | extra | extra.T


def _positive_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return int(value)


def _adjacency(adj) -> np.ndarray:
    arr = np.asarray(adj)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"adj has shape {arr.shape}: it must be a nonempty square D x D matrix")
    if not np.isin(arr, (0, 1)).all():
        raise ValueError("adj must be boolean (entries 0/1): it is the hub graph's adjacency")
    arr = arr.astype(bool)
    if arr.diagonal().any():
        d = int(np.flatnonzero(arr.diagonal())[0])
        raise ValueError(f"adj[{d}, {d}] is set: the hub graph has no self-loops")
    if (arr != arr.T).any():
        i, j = np.argwhere(arr != arr.T)[0]
        raise ValueError(f"adj[{i}, {j}] != adj[{j}, {i}]: the hub graph is undirected "
                         f"({PAPER}, Section 3)")
    return arr


def _hub_assignment(hub_of) -> np.ndarray:
    arr = np.asarray(hub_of)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"hub_of has shape {arr.shape}: it must be a nonempty vector [N]")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"hub_of has dtype {arr.dtype}: hub indices must be integers")
    if arr.min() < 0:
        raise ValueError(f"hub_of contains {arr.min()}: hub indices run over 0..D-1")
    counts = np.bincount(arr)
    empty = np.flatnonzero(counts == 0)
    if empty.size:
        raise ValueError(
            f"hub {empty[0]} has no workers: hub_of must cover 0..{counts.size - 1} "
            f"(every sub-network has N^(d) >= 1 workers, {PAPER}, Section 3)"
        )
    return arr


def _finite_vector(name, value, size) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != (size,):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({size},)")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains a non-finite entry")
    return arr


def _probability_vector(name, value, size, what) -> np.ndarray:
    arr = _finite_vector(name, value, size)
    if size == 0:
        raise ValueError(f"{name} is empty: {what} need at least one entry")
    nonpositive = np.flatnonzero(arr <= 0)
    if nonpositive.size:
        i = nonpositive[0]
        raise ValueError(f"{name}[{i}] = {arr[i]:.12g} <= 0: {what} must be positive")
    if abs(arr.sum() - 1.0) > 1e-9:
        raise ValueError(f"{name} sums to {arr.sum():.12g}, not 1: {what} are a probability vector")
    return arr


def _square_matrix(name, value, size, why) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.shape != (size, size):
        raise ValueError(f"{name} has shape {arr.shape}, expected ({size}, {size}): {why}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains a non-finite entry")
    return arr


def _check_nonnegative(H, atol) -> None:
    negative = np.argwhere(H < -atol)
    if negative.size:
        i, j = negative[0]
        raise ValueError(
            f"H[{i}, {j}] = {H[i, j]:.12g} < 0: H must be nonnegative (Assumption 2a, "
            f"{PAPER}, Section 4)"
        )


def _check_sparsity(H, adj, atol) -> None:
    D = H.shape[0]
    off_edges = np.argwhere(~adj & ~np.eye(D, dtype=bool) & (np.abs(H) > atol))
    if off_edges.size:
        i, j = off_edges[0]
        raise ValueError(
            f"H[{i}, {j}] = {H[i, j]:.12g} but ({i}, {j}) is not an edge: Assumption 2a "
            f"(H_ij = 0 off the edges), {PAPER}, Section 4"
        )
    missing = np.argwhere(adj & (H <= atol))
    if missing.size:
        i, j = missing[0]
        raise ValueError(
            f"H[{i}, {j}] = {H[i, j]:.12g} but ({i}, {j}) is an edge: Assumption 2a "
            f"(H_ij > 0 on the edges), {PAPER}, Section 4"
        )
    diagonal = H.diagonal()
    if (diagonal <= atol).any():
        d = int(np.flatnonzero(diagonal <= atol)[0])
        raise ValueError(
            f"H[{d}, {d}] = {diagonal[d]:.12g}: the diagonal must be positive (the hub keeps its "
            f"own model in (4), {PAPER}, Section 4); without it the printed Assumption 2 "
            f"admits periodic H such as [[0, 1], [1, 0]] with zeta = 1"
        )


def _check_column_stochastic(H, atol) -> None:
    sums = H.sum(axis=0)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        j = bad[0]
        raise ValueError(
            f"H[:, {j}] sums to {sums[j]:.12g}, not 1: Assumption 2b (column stochastic), "
            f"{PAPER}, Section 4"
        )


def _check_proof_form_2c(H, b, atol) -> None:
    weighted = H * b[None, :]
    gap = np.abs(weighted - weighted.T)
    if gap.max() <= atol:
        return
    i, j = np.unravel_index(np.argmax(gap), gap.shape)
    message = (
        f"H[{i}, {j}] b[{j}] = {weighted[i, j]:.12g} != "
        f"H[{j}, {i}] b[{i}] = {weighted[j, i]:.12g}: "
        f"Assumption 2c in the form the proof uses (H diag(b) symmetric, {PAPER}, proof of "
        f"Proposition 1, (32)) fails, so H b != b and (10) breaks"
    )
    printed = b[:, None] * H
    if np.abs(printed - printed.T).max() <= atol:
        message += (
            "; the printed 2c b_i H_ij = b_j H_ji (Assumption 2c, Section 4) holds, but it "
            "has its indices reversed"
        )
    raise ValueError(message)
