"""TDCD, Algorithm 1 of Das et al. 2022 (Section 3), vectorised over replicas, silos and clients.

State: hub models ``[R, N, d]`` and client models ``[R, N, K, d]`` (R replicas, N silos,
K = max_j K_j clients, d = the largest block; silo j uses its first d_j coordinates and
its first K_j clients). One round (t0 = rQ), equation and line numbers of the paper's Section 3:

1. one mini-batch zeta of sample IDs, the same in every silo (Section 3);
2. embeddings Phi_j = h_j(theta_j^{t0}; X_j^zeta) at the hub models; each silo receives
   Phi_{-j} = sum_{l != j} Phi_l, frozen for the round (Algorithm 1, lines 17-22);
3. Q local steps (5) on the same batch (``batch="round"``; ``"step"`` draws a fresh one per
   step, :data:`BATCHES`): client k of silo j steps along g_kj of (4),
   the mean over its samples zeta_kj of the gradient in its own block, with its own
   embedding recomputed from theta_kj every step and Phi_{-j} stale;
4. uniform averaging theta_j = (1/K_j) sum_k theta_kj^{t0+Q} (Algorithm 1, line 32, which
   prints theta_kj^t: the last local step would be dropped).

Data layout (fedbound's choice: every client holds a copy of a base dataset):
the n base samples are copied into C = lcm(K_1..K_N) cells, so M = C n sample IDs, and
client k of silo j holds the C/K_j contiguous cells k C/K_j .. (k+1) C/K_j - 1. A batch of
``batch`` IDs takes b = batch/C distinct samples from every cell (uniformly, without
replacement), so every client of silo j gets exactly b_j = batch/K_j samples, each client's
g_kj is unbiased for grad_(j) L (Assumption 3, (8), exactly), and the client
average of Q = 1 is mini-batch SGD on the union batch. In batch slot order, client k of
silo j owns slots k b_j .. (k+1) b_j - 1. Non-i.i.d. clients (``shards``): the cells are
instead disjoint shards of the n samples (a ``sim.data.Partition`` into C cells, e.g.
label-skewed), so M = n and client k of silo j holds only its cells' samples, b_j of them
per batch (the paper's clients hold contiguous blocks of one random permutation of the
IDs, Section 5.2: ``sim.data.iid_partition`` into the cells).

Models: :class:`BlockLinear` (linear or logistic regression with h_j(theta_j; x_j) =
x_j^T theta_j, exact constants) and :class:`ModuleModel` (one ``torch.nn.Module`` per silo:
linear layers and tanh in closed form, ``sim.neural.DenseNetwork``, any other module through
``torch.func.functional_call`` + ``vmap``; the per-silo architectures may differ, so its
client gradients loop over the N silos and batch replicas and clients).

Random draws: one ``rand((R, C, n))`` per round from the generator (``rand((R, C, max n_c))``
with ``shards``; one per local step with ``batch="step"``), the smallest keys of each
cell picking the batch. Everything is float64; the same seed gives the same trace bit for bit.
A batch of C configurations (:func:`run_tdcd` with Q, rounds or steps per configuration)
runs every configuration's rounds on one clock of local steps and gives round r of every
configuration the batch of round r of its run alone.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import torch
from torch.func import functional_call, grad, vmap

from fedbound.sim.neural import DenseNetwork
from fedbound.sim.problems import DTYPE, rand, randn, softplus
from fedbound.sim.trace import Acceptance, Rounds

LOSSES = ("squared", "logistic")
#: the named losses of :class:`ModuleModel` (a callable loss is also taken)
MODULE_LOSSES = (*LOSSES, "cross_entropy")

# ---------------------------------------------------------------------- layout


def _int_at_least(name: str, value, minimum: int, why: str = "") -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}{why}")
    return int(value)


@dataclass(frozen=True)
class Layout:
    """Vertical blocks, clients per silo and the batch (see the module docstring).

    ``blocks[j]`` = D_j features of silo j (contiguous columns), ``clients[j]`` = K_j,
    ``n`` base samples, ``batch`` = |zeta| (a multiple of C = lcm(K_j), at most M = C n)."""

    blocks: tuple[int, ...]
    clients: tuple[int, ...]
    n: int
    batch: int

    def __post_init__(self):
        blocks, clients = tuple(self.blocks), tuple(self.clients)
        object.__setattr__(self, "blocks", blocks)
        object.__setattr__(self, "clients", clients)
        if not blocks:
            raise ValueError("blocks is empty: TDCD needs at least one silo")
        if len(clients) != len(blocks):
            raise ValueError(f"clients has {len(clients)} entries, blocks has {len(blocks)}: "
                             "one K_j per silo")
        for j, D in enumerate(blocks):
            _int_at_least(f"blocks[{j}]", D, 1, " (an empty feature block leaves silo "
                          f"{j} without features)")
        for j, K in enumerate(clients):
            _int_at_least(f"clients[{j}]", K, 1, f" (silo {j} needs at least one client, K_j >= 1)")
        _int_at_least("n", self.n, 1)
        _int_at_least("batch", self.batch, 1)
        if self.batch > self.M:
            raise ValueError(f"batch={self.batch} is larger than the data: M = lcm(K_j) n = "
                             f"{self.cells} * {self.n} = {self.M} samples")
        if self.batch % self.cells:
            raise ValueError(f"batch={self.batch} must be a multiple of lcm(K_j)={self.cells} so "
                             f"that every client of silo j gets batch/K_j samples")

    @property
    def N(self) -> int:  # noqa: N802  (paper notation)
        return len(self.blocks)

    @property
    def D(self) -> int:  # noqa: N802
        return sum(self.blocks)

    @property
    def cells(self) -> int:
        """C = lcm(K_1, ..., K_N): copies of the base data."""
        return math.lcm(*self.clients)

    @property
    def M(self) -> int:  # noqa: N802
        """Number of sample IDs, C n."""
        return self.cells * self.n

    @property
    def per_cell(self) -> int:
        """Samples drawn from each cell per round, batch / C."""
        return self.batch // self.cells

    @property
    def client_batch(self) -> tuple[int, ...]:
        """b_j = |zeta_kj| = batch / K_j, the same for every client of silo j."""
        return tuple(self.batch // K for K in self.clients)

    def owner(self, device=None) -> torch.Tensor:
        """[N, batch] int64: the client of silo j that holds batch slot s, s // b_j."""
        slots = torch.arange(self.batch, device=device)
        return torch.stack([slots // b for b in self.client_batch])

    def client_mask(self, device=None) -> torch.Tensor:
        """[N, K] bool: client k exists in silo j (k < K_j), K = max_j K_j."""
        ks = torch.arange(max(self.clients), device=device)
        return ks[None, :] < torch.tensor(self.clients, device=device)[:, None]

    def averaging_weights(self, device=None) -> torch.Tensor:
        """[N, K] float64: 1/K_j for the clients of silo j, 0 for padding (Algorithm 1, line 32)."""
        K = torch.tensor(self.clients, dtype=DTYPE, device=device)
        return self.client_mask(device).to(DTYPE) / K[:, None]

    def sampling_factor(self) -> torch.Tensor:
        """[N]: Var(g_kj) = factor_j * V_j(theta) with V_j the population variance of the
        per-sample block gradients: (1/b_j) (n - b)/(n - 1) for b = batch/C samples drawn
        without replacement from each of the client's C/K_j cells (0 when b = n)."""
        fpc = (self.n - self.per_cell) / (self.n - 1) if self.n > 1 else 0.0
        return torch.tensor([fpc / b for b in self.client_batch], dtype=DTYPE)


def draw_batch(layout: Layout, replicas: int, generator: torch.Generator, device,
               cells: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """[R, batch] base-sample indices: b = batch/C distinct samples from every cell, cell by
    cell (so client k of silo j owns slots k b_j .. (k+1) b_j - 1), the b smallest of one
    uniform key per sample of the cell. ``cells``: ``Partition.table()`` of a partition of
    the n samples into the C cells (:func:`sharded_cells`; non-i.i.d. clients): cell c then
    holds only its own n_c samples (keys [R, C, max n_c], those past n_c never picked);
    None: every cell is a copy of all n."""
    if cells is None:
        keys = rand((replicas, layout.cells, layout.n), generator, device)
        picks = keys.topk(layout.per_cell, dim=-1, largest=False, sorted=True).indices
        return picks.reshape(replicas, layout.batch)
    table, sizes = cells
    keys = rand((replicas, layout.cells, table.shape[1]), generator, device)
    keys.masked_fill_(torch.arange(table.shape[1], device=device) >= sizes[:, None], 2.0)
    slots = keys.topk(layout.per_cell, dim=-1, largest=False, sorted=True).indices
    return table.expand(replicas, *table.shape).gather(2, slots).reshape(replicas, layout.batch)


def sharded_cells(layout: Layout, shards, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``shards.table()`` on ``device`` for :func:`draw_batch`, after checking that
    ``shards`` (a ``sim.data.Partition``) splits the layout's n samples into its C =
    lcm(K_j) cells with at least batch/C samples in each (ValueError naming what fails)."""
    owner = getattr(shards, "owner", None)
    if owner is None or getattr(shards, "workers", None) != layout.cells or owner.shape != (layout.n,):
        raise ValueError(f"shards must be a sim.data.Partition of the n={layout.n} samples into "
                         f"C = lcm(clients) = {layout.cells} cells")
    table, sizes = shards.table()
    small = torch.nonzero(sizes < layout.per_cell).flatten()
    if small.numel():
        c = int(small[0])
        raise ValueError(f"shards: cell {c} holds {int(sizes[c])} samples, fewer than the "
                         f"batch/C = {layout.per_cell} that every round draws from each cell")
    return table.to(device), sizes.to(device)


# ---------------------------------------------------------------------- losses


def loss_value(kind: str, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """l(z; y): 0.5 (z - y)^2 ("squared") or log(1 + exp(-y z)) ("logistic", y in {-1, 1})."""
    if kind == "squared":
        return 0.5 * (z - y) ** 2
    return softplus(-y * z)


def loss_slope(kind: str, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """dl/dz: z - y, or -y sigmoid(-y z)."""
    if kind == "squared":
        return z - y
    return -y * torch.sigmoid(-y * z)


def slope_at(kind: str, y: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """``z -> loss_slope(kind, z, y)`` (the same numbers) with ``-y`` computed once, for
    labels used at many z."""
    if kind == "squared":
        return lambda z: z - y
    negative = -y
    return lambda z: torch.sigmoid(negative * z).mul_(negative)


def loss_and_slope(kind: str, z: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(:func:`loss_value`, :func:`loss_slope`) at z (the same numbers) from one computation
    of the shared z - y or -y z."""
    if kind == "squared":
        residual = z - y
        return 0.5 * residual ** 2, residual
    negative = -y
    margin = negative * z
    return softplus(margin), negative * torch.sigmoid(margin)


def other_silos(own: torch.Tensor) -> torch.Tensor:
    """Phi_{-j} = sum_{l != j} Phi_l from the embeddings ``own`` [R, N, B, E] of every
    silo j (Das et al. 2022, Algorithm 1, lines 17-22)."""
    return own.sum(dim=1, keepdim=True) - own


def _check_loss(kind) -> str:
    if kind not in LOSSES:
        raise ValueError(f"loss={kind!r} must be one of {LOSSES}")
    return kind


# ---------------------------------------------------------------------- data


def synthetic_data(n: int, dim: int, *, loss: str, generator: torch.Generator, scale: float = 1.0,
                   noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """Features [n, dim] ~ N(0, I) rescaled so that max_p ||x_p|| = ``scale``; labels from a
    planted theta* ~ N(0, I): sign(x^T theta*) flipped with probability ``noise``
    (logistic), or x^T theta* + noise N(0, 1) (squared). All draws from ``generator``."""
    _check_loss(loss)
    _int_at_least("n", n, 1)
    _int_at_least("dim", dim, 1)
    if not (0 < scale < math.inf):
        raise ValueError(f"scale={scale} must be finite and > 0")
    if not (0 <= noise < math.inf) or (loss == "logistic" and noise > 0.5):
        raise ValueError(f"noise={noise} must lie in [0, 0.5] (logistic) or [0, inf) (squared)")
    device = generator.device
    X = randn((n, dim), generator, device)
    X = X * (scale / X.norm(dim=1).max())
    truth = randn((dim,), generator, device)
    if loss == "logistic":
        clean = torch.where(X @ truth >= 0, 1.0, -1.0).to(DTYPE)
        y = torch.where(rand((n,), generator, device) < noise, -clean, clean)
    else:
        y = X @ truth + noise * randn((n,), generator, device)
    return X, y


def _validated_data(X, y, layout: Layout, loss: str, device) -> tuple[torch.Tensor, torch.Tensor]:
    X = torch.as_tensor(X, dtype=DTYPE, device=device)
    y = torch.as_tensor(y, dtype=DTYPE, device=device)
    if X.shape != (layout.n, layout.D):
        raise ValueError(f"X has shape {tuple(X.shape)}, expected (n, sum(blocks)) = "
                         f"({layout.n}, {layout.D})")
    if y.shape != (layout.n,):
        raise ValueError(f"y has shape {tuple(y.shape)}, expected ({layout.n},)")
    if not (torch.isfinite(X).all() and torch.isfinite(y).all()):
        raise ValueError("X and y must be finite")
    if loss == "logistic" and not (y.abs() == 1).all():
        raise ValueError("logistic loss needs labels y in {-1, +1}")
    return X, y


def padded_blocks(X: torch.Tensor, layout: Layout) -> torch.Tensor:
    """[n, N, d] with [p, j, :D_j] = the silo-j features of sample p, zeros beyond D_j."""
    d = max(layout.blocks)
    out = torch.zeros(X.shape[0], layout.N, d, dtype=DTYPE, device=X.device)
    start = 0
    for j, D in enumerate(layout.blocks):
        out[:, j, :D] = X[:, start:start + D]
        start += D
    return out


# ---------------------------------------------------------------------- models


class BlockLinear:
    """L(theta) = (1/n) sum_p l(sum_j x_pj^T theta_j; y_p), (2)-(3) of Das et al. 2022, with
    l squared (linear regression) or logistic. Parameters: theta_j in R^{D_j}.

    Constants (exact or certified):
    - ``L``: lambda_max(X^T X)/n (squared, exact) or lambda_max(X^T X)/(4n) (logistic: the
      Hessian X^T diag(s(1-s)) X/n peaks at theta = 0, where s = 1/2; exact).
    - ``L_max``: Lipschitz constant of theta_j -> g_kj for every batch a client can hold,
      sup lambda_max(X_zj^T X_zj)/b_j <= max_p ||x_pj||^2 (times 1/4 for logistic): a
      certified bound, attained when batch/C = 1 (a client's cells can all give one sample).
      The block constant suffices: Lemma 2 moves only block j.
    - ``sigma``: logistic only: sigma_j^2 = factor_j mean_p ||x_pj||^2 >= Var(g_kj) for every
      theta (per-sample block gradients are s x_pj with |s| <= 1; factor_j of
      :meth:`Layout.sampling_factor`). Least squares has no uniform sigma (its gradient
      variance grows with theta); :meth:`sigma2_at` gives the exact Var(g_kj) at any theta.
    - ``f_inf``: exact least-squares minimum (squared), or 0 (logistic, a lower bound).
    """

    def __init__(self, X, y, layout: Layout, *, loss: str, device=None):
        self.loss_kind = _check_loss(loss)
        self.layout = layout
        self.X, self.y = _validated_data(X, y, layout, loss, device)
        self.Xp = padded_blocks(self.X, layout)
        self._factor = layout.sampling_factor().to(self.X.device)
        self.dims = layout.blocks
        self.d = max(layout.blocks)
        n = layout.n
        factor = 0.25 if loss == "logistic" else 1.0
        self.L = factor * float(torch.linalg.eigvalsh(self.X.T @ self.X)[-1]) / n
        self.L_max = factor * float(self.Xp.square().sum(-1).max())
        if loss == "logistic":
            block_sq = self.Xp.square().sum(-1).mean(0).cpu()
            self.sigma = (layout.sampling_factor() * block_sq).sqrt().tolist()
            self.f_inf = 0.0
        else:
            self.sigma = None
            # gelsd (SVD), not the default gelsy: gelsy's pivoted QR gave 4 different
            # solutions, bit for bit, in 60 calls on one 60 x 6 X (MKL, one thread)
            solution = torch.linalg.lstsq(self.X, self.y[:, None],
                                          driver="gelsd" if self.X.is_cpu else None).solution[:, 0]
            self.f_inf = float(loss_value("squared", self.X @ solution, self.y).mean())

    @property
    def dim(self) -> int:
        return self.layout.D

    @property
    def device(self) -> torch.device:
        return self.X.device

    # -- parameters as a flat vector [D] <-> padded blocks [N, d]
    def split(self, flat: torch.Tensor) -> torch.Tensor:
        """[..., D] -> [..., N, d] (zeros beyond D_j)."""
        out = flat.new_zeros(*flat.shape[:-1], self.layout.N, self.d)
        start = 0
        for j, D in enumerate(self.dims):
            out[..., j, :D] = flat[..., start:start + D]
            start += D
        return out

    def join(self, blocks: torch.Tensor) -> torch.Tensor:
        """[..., N, d] -> [..., D]."""
        return torch.cat([blocks[..., j, :D] for j, D in enumerate(self.dims)], dim=-1)

    # -- what TDCD needs
    def embed(self, theta: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Phi_j^(p) = x_pj^T theta_j for the batch: theta [R, N, d], rows [R, B] -> [R, N, B, 1]."""
        return torch.einsum("rbnd,rnd->rnb", self.Xp[rows], theta)[..., None]

    def client_grads(self, theta: torch.Tensor, rows: torch.Tensor, other: torch.Tensor,
                     owner: torch.Tensor | None = None,
                     weights: torch.Tensor | None = None) -> torch.Tensor:
        """g_kj of Das et al. 2022, (4): theta [R, N, K, d], other = Phi_{-j} [R, N, B, 1]
        -> [R, N, K, d].
        Client k of silo j owns the batch slots k b_j .. (k+1) b_j - 1 of the layout
        (``owner`` [N, B] and ``weights`` [N, B, K], that ownership as indices and as 1/b_j
        one-hot weights, are implied by it). One call of :meth:`client_gradients`."""
        return self.client_gradients(rows)(theta, other)

    def round_problem(self, theta: torch.Tensor, rows: torch.Tensor) -> tuple[
            torch.Tensor, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
        """What the Q local steps of a round need, at the hub models theta [R, N, d] on the
        batch ``rows`` [R, B]: Phi_{-j} [R, N, B, 1] (:func:`other_silos` of :meth:`embed`)
        and :meth:`client_gradients`, the same numbers from one gather of the batch's
        features (the embeddings as the one ``bmm`` that :meth:`embed`'s ``einsum``
        computes, with less dispatch)."""
        xb = self._batch_features(rows)
        R, N, B, d = xb.shape
        own = torch.bmm(xb.view(R * N, B, d), theta.reshape(R * N, d, 1)).view(R, N, B, 1)
        return other_silos(own), self._client_gradients(rows, xb)

    def client_gradients(self, rows: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor],
                                                                 torch.Tensor]:
        """``(theta, other) -> g_kj`` (as :meth:`client_grads`) for the Q local steps of a
        round on the batch ``rows`` [R, B]: the batch's features are gathered once, the
        margins and each client's sum over its slots are batched products (equal silos)
        or a product per slot and a scatter-add over the slots (linear in the batch), into
        buffers reused from call to call (the result is valid until the next call)."""
        return self._client_gradients(rows, self._batch_features(rows))

    def _batch_features(self, rows: torch.Tensor) -> torch.Tensor:
        """The batch's padded features by silo, [R, N, B, d] (contiguous)."""
        return self.Xp[rows].transpose(1, 2).contiguous()

    def _client_gradients(self, rows: torch.Tensor, xb: torch.Tensor):
        """:meth:`client_gradients` with the batch's features ``xb`` (:meth:`_batch_features`)."""
        R, B = rows.shape
        N, K, d = self.layout.N, max(self.layout.clients), self.d
        owner, mine, per_client = self._slots
        slope_of = slope_at(self.loss_kind, self.y[rows][:, None, :])       # labels [R, 1, B]
        z = torch.empty(R, N, B, dtype=DTYPE, device=rows.device)
        out = torch.empty(R, N, K, d, dtype=DTYPE, device=rows.device)
        if mine is None:  # every silo has K clients of b = B/K contiguous slots
            M, b = R * N * K, B // K
            rows_of = xb.view(M, b, d)

            def grads(theta: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
                torch.bmm(rows_of, theta.reshape(M, d, 1), out=z.view(M, b, 1))
                slope = slope_of(z.add_(other[..., 0]))
                torch.bmm(slope.view(M, 1, b), rows_of, out=out.view(M, 1, d))
                return out.mul_(per_client)

            return grads
        slots = owner[None, :, :, None].expand(R, N, B, d)
        terms = torch.empty(R, N, B, d, dtype=DTYPE, device=rows.device)

        def grads(theta: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
            own = theta.reshape(R, N * K, d).index_select(1, mine)          # each slot's client
            torch.bmm(xb.view(-1, 1, d), own.view(-1, d, 1), out=z.view(-1, 1, 1))
            slope = slope_of(z.add_(other[..., 0]))
            torch.mul(slope[..., None], xb, out=terms)
            return out.zero_().scatter_add_(2, slots, terms).mul_(per_client)

        return grads

    @cached_property
    def _slots(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """The layout's slot ownership for :meth:`client_gradients`: the client of each slot
        [N, B], each slot's row in the flattened [N * K] clients (None when every silo has
        the same K_j: slot s is then client s // b) and 1/b_j [N, 1, 1]."""
        lay, device = self.layout, self.X.device
        owner = lay.owner(device)
        K = max(lay.clients)
        mine = None if len(set(lay.clients)) == 1 else \
            (torch.arange(lay.N, device=device)[:, None] * K + owner).reshape(-1)
        batch = torch.tensor(lay.client_batch, dtype=DTYPE, device=device)
        return owner, mine, (1.0 / batch)[:, None, None]

    def scores(self, theta: torch.Tensor) -> torch.Tensor:
        """sum_j x_pj^T theta_j for all n base samples: theta [R, N, d] -> [R, n]."""
        return torch.einsum("pnd,rnd->rp", self.Xp, theta)

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """L(theta), (2): [R, N, d] -> [R]."""
        return loss_value(self.loss_kind, self.scores(theta), self.y).mean(-1)

    def grad(self, theta: torch.Tensor) -> torch.Tensor:
        """grad L(theta) by blocks: [R, N, d] -> [R, N, d]."""
        return self._grad(loss_slope(self.loss_kind, self.scores(theta), self.y))

    def sigma2_at(self, theta: torch.Tensor) -> torch.Tensor:
        """Exact Var(g_kj) at theta (the same for every client k): factor_j V_j(theta), V_j
        the population variance of the per-sample block gradients. [R, N, d] -> [R, N]."""
        return self._sigma2(loss_slope(self.loss_kind, self.scores(theta), self.y))

    def statistics(self, theta: torch.Tensor, variance: bool = True) -> tuple[
            torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(L(theta) [R], ||grad L(theta)||^2 [R], :meth:`sigma2_at` [R, N]) from one
        computation of the scores: what run_tdcd records every round (the same numbers);
        the last None without ``variance``."""
        loss, slope = loss_and_slope(self.loss_kind, self.scores(theta), self.y)
        return (loss.mean(-1), self._grad(slope).square().sum(dim=(-2, -1)),
                self._sigma2(slope) if variance else None)

    def _grad(self, slope: torch.Tensor) -> torch.Tensor:
        """grad L by blocks from the loss slopes [R, n] at the scores: [R, N, d]. One
        ``bmm``, the product ``torch.einsum("rp,pnd->rnd", slope, Xp)`` computes (the same
        numbers, less dispatch)."""
        n, N, d = self.Xp.shape
        product = torch.bmm(slope[None], self.Xp.view(1, n, N * d))[0]
        return product.view(-1, N, d) / n

    def _sigma2(self, slope: torch.Tensor) -> torch.Tensor:
        """:meth:`sigma2_at` from the loss slopes [R, n] at the scores: [R, N]."""
        per_sample = slope[..., None, None] * self.Xp                           # [R, n, N, d]
        mean = per_sample.mean(1)
        V = per_sample.square_().sum(-1).mean(1) - mean.square().sum(-1)
        return V.clamp(min=0) * self._factor


def _named_loss(kind: str, z: torch.Tensor, y: torch.Tensor, *, slope: bool = False):
    """l(z; y) [...] of a named loss at the summed embeddings z [..., E] (``"squared"`` and
    ``"logistic"``: E = 1; ``"cross_entropy"``: logsumexp(z) - z_y, y the class as a float),
    or with ``slope`` dl/dz [..., E] (cross-entropy: softmax(z) minus the one-hot label)."""
    if kind != "cross_entropy":
        return (loss_slope(kind, z[..., 0], y)[..., None] if slope
                else loss_value(kind, z[..., 0], y))
    labels = y.long().expand(z.shape[:-1])[..., None]
    lse = torch.logsumexp(z, dim=-1, keepdim=True)
    if not slope:
        return (lse - z.gather(-1, labels)).squeeze(-1)
    return torch.exp(z - lse).scatter_add_(-1, labels, torch.full_like(lse, -1.0))


class ModuleModel:
    """One ``torch.nn.Module`` h_j per silo (input: the D_j features of a sample, output: an
    embedding of size E, the same for all silos), embeddings summed, (3), and a loss
    l(z [..., E], y [...]) -> [...] ("squared" or "logistic" for E = 1, "cross_entropy" of
    the E classes with y the class as a float, or a callable).

    Parameters are the modules' (float64 copies), flattened per silo in ``named_parameters``
    order and padded to the largest silo. With a named loss and every module a
    ``sim.neural.DenseNetwork`` (linear layers and tanh), embeddings, losses and gradients are its
    closed form, batched over replicas and clients; otherwise client gradients use
    ``torch.func.grad`` of the client's mean loss through ``functional_call``, vmapped over
    replicas and clients. The architectures may differ between silos, so both loop over
    the N silos. No constants (L, L_max, sigma) are known for a general network."""

    def __init__(self, modules: Sequence[torch.nn.Module], X, y, layout: Layout, *,
                 loss: str | Callable = "squared", device=None):
        if len(modules) != layout.N:
            raise ValueError(f"{len(modules)} modules for {layout.N} silos: one module per silo")
        self.layout = layout
        if not callable(loss) and loss not in MODULE_LOSSES:
            raise ValueError(f"loss={loss!r} must be one of {MODULE_LOSSES} or a callable")
        named = not callable(loss)
        self.X, self.y = _validated_data(X, y, layout, loss if loss in LOSSES else "squared",
                                         device)
        if loss == "cross_entropy" and not ((self.y >= 0) & (self.y == self.y.round())).all():
            raise ValueError("cross_entropy loss needs labels y that are classes 0, 1, ...")
        self.loss_fn = (lambda z, y, _k=loss: _named_loss(_k, z, y)) if named else loss
        self.modules = [copy.deepcopy(m).to(device=self.X.device, dtype=DTYPE) for m in modules]
        dense = [DenseNetwork.of(m) for m in self.modules]
        #: (the named loss, a DenseNetwork per silo) where the closed form applies, else None
        self.dense = (loss, dense) if named and None not in dense else None
        self.shapes = [[(name, p.shape) for name, p in m.named_parameters()] for m in self.modules]
        self.dims = tuple(sum(math.prod(s) for _, s in shp) for shp in self.shapes)
        self.d = max(self.dims)
        starts = [0, *torch.tensor(layout.blocks).cumsum(0).tolist()]
        self.features = [self.X[:, starts[j]:starts[j + 1]] for j in range(layout.N)]

    @property
    def dim(self) -> int:
        return sum(self.dims)

    @property
    def device(self) -> torch.device:
        return self.X.device

    def initial(self) -> torch.Tensor:
        """The modules' current parameters as one flat vector [sum_j d_j]."""
        return torch.cat([torch.cat([p.detach().reshape(-1) for p in m.parameters()])
                          for m in self.modules])

    def split(self, flat: torch.Tensor) -> torch.Tensor:
        out = flat.new_zeros(*flat.shape[:-1], self.layout.N, self.d)
        start = 0
        for j, d in enumerate(self.dims):
            out[..., j, :d] = flat[..., start:start + d]
            start += d
        return out

    def join(self, blocks: torch.Tensor) -> torch.Tensor:
        return torch.cat([blocks[..., j, :d] for j, d in enumerate(self.dims)], dim=-1)

    def _params(self, j: int, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        out, start = {}, 0
        for name, shape in self.shapes[j]:
            size = math.prod(shape)
            out[name] = flat[start:start + size].reshape(shape)
            start += size
        return out

    def _h(self, j: int, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """h_j(theta_j; x) for x [..., D_j] -> [..., E]."""
        return functional_call(self.modules[j], self._params(j, flat[: self.dims[j]]), (x,))

    def embed(self, theta: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """[R, N, d], rows [R, B] -> [R, N, B, E]."""
        if self.dense is not None:
            return torch.stack([silo.forward(theta[:, j, :self.dims[j]], self.features[j][rows])[0]
                                for j, silo in enumerate(self.dense[1])], dim=1)
        per_silo = [vmap(lambda th, r, _j=j: self._h(_j, th, self.features[_j][r]))(theta[:, j], rows)
                    for j in range(self.layout.N)]
        return torch.stack(per_silo, dim=1)

    def client_grads(self, theta, rows, other, owner=None, weights=None) -> torch.Tensor:
        """g_kj of (4), silo by silo: vmap over replicas and the K_j clients of each
        client's mean loss over its b_j contiguous slots (``owner``/``weights`` are implied
        by that layout)."""
        R, N, K, d = theta.shape
        if self.dense is not None:
            kind, silos = self.dense
            out = theta.new_empty(R, N, K, d)
            for j, (Kj, bj) in enumerate(zip(self.layout.clients, self.layout.client_batch,
                                             strict=True)):
                mine, dj = rows.reshape(R, Kj, bj), self.dims[j]
                th = theta[:, j, :Kj, :dj]
                h, saved = silos[j].forward(th, self.features[j][mine])         # [R, K_j, b_j, E]
                slope = _named_loss(kind, h + other[:, j].reshape(R, Kj, bj, -1), self.y[mine],
                                    slope=True)
                silos[j].backward(th, saved, slope / bj, out[:, j, :Kj, :dj])
                out[:, j, Kj:] = 0.0                                            # the padding
                out[:, j, :Kj, dj:] = 0.0
            return out
        out = theta.new_zeros(R, N, K, d)
        for j, (Kj, bj) in enumerate(zip(self.layout.clients, self.layout.client_batch, strict=True)):
            def client_loss(th, r, oth, _j=j):
                z = self._h(_j, th, self.features[_j][r]) + oth
                return self.loss_fn(z, self.y[r]).mean()

            g = vmap(vmap(grad(client_loss)))(
                theta[:, j, :Kj], rows.reshape(R, Kj, bj), other[:, j].reshape(R, Kj, bj, -1))
            out[:, j, :Kj, : self.dims[j]] = g[..., : self.dims[j]]
        return out

    def client_gradients(self, rows: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor],
                                                                 torch.Tensor]:
        """``(theta, other) -> g_kj``: :meth:`client_grads` on the round's batch ``rows``."""
        return lambda theta, other: self.client_grads(theta, rows, other)

    def round_problem(self, theta: torch.Tensor, rows: torch.Tensor) -> tuple[
            torch.Tensor, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]:
        """(Phi_{-j} [R, N, B, E], :meth:`client_gradients`) for the round at the hub models
        theta [R, N, d] on the batch ``rows`` (as :meth:`BlockLinear.round_problem`)."""
        return other_silos(self.embed(theta, rows)), self.client_gradients(rows)

    def statistics(self, theta: torch.Tensor, variance: bool = True) -> tuple[
            torch.Tensor, torch.Tensor, None]:
        """(L(theta), ||grad L(theta)||^2, None): what run_tdcd records every round (no exact
        variance for a general network, whatever ``variance``)."""
        return self.loss(theta), self.grad(theta).square().sum(dim=(-2, -1)), None

    def _total_loss(self, theta: torch.Tensor) -> torch.Tensor:
        z = sum(self._h(j, theta[j], self.features[j]) for j in range(self.layout.N))
        return self.loss_fn(z, self.y).mean()

    def _dense_forward(self, theta: torch.Tensor) -> tuple[torch.Tensor, list]:
        """(z [R, n, E] the summed embeddings of all n samples, each silo's saved forward
        pass) at theta [R, N, d], by the closed form."""
        passes = [silo.forward(theta[:, j, :self.dims[j]], self.features[j])
                  for j, silo in enumerate(self.dense[1])]
        return sum(h for h, _ in passes), [saved for _, saved in passes]

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """L(theta) [R] at theta [R, N, d]."""
        if self.dense is None:
            return vmap(self._total_loss)(theta)
        return _named_loss(self.dense[0], self._dense_forward(theta)[0], self.y).mean(-1)

    def grad(self, theta: torch.Tensor) -> torch.Tensor:
        """grad L(theta) by blocks, [R, N, d] -> [R, N, d]."""
        if self.dense is None:
            return vmap(grad(self._total_loss))(theta)
        z, saved = self._dense_forward(theta)
        delta = _named_loss(self.dense[0], z, self.y, slope=True) / self.layout.n
        out = torch.zeros_like(theta)
        for j, silo in enumerate(self.dense[1]):
            silo.backward(theta[:, j, :self.dims[j]], saved[j], delta, out[:, j, :self.dims[j]])
        return out


# ---------------------------------------------------------------------- trace


@dataclass(frozen=True)
class TDCDTrace:
    """The record of R replicas of ``rounds`` TDCD rounds; CPU tensors, float64.

    - ``grad_sq_norm`` [R, rounds]: ||grad L(theta^{rQ})||^2 at the round-start hub models,
      r = 0..rounds-1: the summands of the left side of (15) (Theorem 1), read as the round-start hub
      models theta^{rQ} (None with ``record_grad=False``).
    - ``loss`` [R, rounds + 1]: L(theta^{rQ}), r = 0..rounds (None with ``record_loss=False``).
    - ``drift`` [R, rounds]: left side of Lemma 2, (30), per round:
      sum_{t=t0}^{t0+Q-1} sum_j (1/K_j) sum_k ||g_kj(y^t) - g_kj(y^t0)||^2.
    - ``g0`` [R, rounds]: sum_j (1/K_j) sum_k ||g_kj(y^t0)||^2, Lemma 2's right side / (C L_max^2 eta^2).
    - ``sigma2`` [R, rounds, N]: exact Var(g_kj) at theta^{rQ} (block-linear models), else None.
    - ``time`` [rounds + 1]: wall-clock time at the start of round r, r t_Q with
      t_Q = 3 t_comm + Q t_comp (Section 5.2).
    - ``diverged`` [R]: see sim.trace; a diverged replica is frozen at its last hub model,
      and its drift and g0 are recorded as 0 from the round it diverged in.
    - with ``record_iterates``: ``hub`` [R, rounds + 1, N, d], ``virtual`` [R, T + 1, N, d]
      (theta^t = per-silo client average, (11)-(13)), ``G`` [R, T, N, d] (G^t of
      (11)-(12)), ``rows`` [R, rounds, batch] (the batches; [R, rounds, Q, batch] with
      ``batch="step"``); else None, but ``hub`` with ``record_loss=False``.
    """

    grad_sq_norm: torch.Tensor | None
    loss: torch.Tensor | None
    drift: torch.Tensor
    g0: torch.Tensor
    time: torch.Tensor
    diverged: torch.Tensor
    sigma2: torch.Tensor | None = None
    hub: torch.Tensor | None = None
    virtual: torch.Tensor | None = None
    G: torch.Tensor | None = None
    rows: torch.Tensor | None = None

    @property
    def lhs(self) -> torch.Tensor:
        """(1/R) sum_r ||grad L(theta^{rQ})||^2 per replica, [R]: one realisation of (15)'s left side."""
        return self.grad_sq_norm.mean(dim=1)

    @cached_property
    def running_lhs(self) -> torch.Tensor:
        """[R, rounds]: the left side of (15) after r + 1 rounds."""
        steps = torch.arange(1, self.grad_sq_norm.shape[1] + 1, dtype=DTYPE)
        return self.grad_sq_norm.cumsum(dim=1) / steps


# ---------------------------------------------------------------------- run


def _per_configuration(name: str, value, why: str = "") -> int | list[int]:
    """An integer knob (>= 1): one, or a list of one per configuration of a batch."""
    if isinstance(value, (list, tuple)) or (isinstance(value, torch.Tensor) and value.ndim == 1):
        values = [_int_at_least(f"{name}[{c}]", v, 1, why) for c, v in enumerate(list(value))]
        if not values:
            raise ValueError(f"{name}: give at least one value")
        return values
    return _int_at_least(name, value, 1, why)


def _validated_run(model, eta, Q, rounds, theta0, replicas, t_comm, t_comp, device):
    """(steps [C R, 1, 1, 1], Q, rounds (lists of C), theta0, R, C: None for a run of one)."""
    Q = _per_configuration("Q", Q, " (local iterations per round)")
    rounds = _per_configuration("rounds", rounds)
    replicas = _int_at_least("replicas", replicas, 1)
    steps = torch.as_tensor(eta, dtype=DTYPE)
    found = {name: len(v) for name, v in (("Q", Q), ("rounds", rounds)) if isinstance(v, list)}
    if steps.ndim == 2:
        found["eta"] = steps.shape[0]
    if len(set(found.values())) > 1:
        raise ValueError(f"configurations: {', '.join(f'{k} has {v}' for k, v in found.items())}"
                         " (one entry per configuration of a batch)")
    C = next(iter(found.values()), None)
    try:
        if steps.ndim > 2 or (C is None and steps.ndim == 1 and steps.numel() != replicas):
            raise RuntimeError
        steps = steps.expand(C or 1, replicas)
    except RuntimeError:
        raise ValueError(f"eta must be a number, one step per replica ({replicas})"
                         + ("" if C is None else f" or per configuration and replica ([{C}, "
                                                 f"{replicas}] or [{C}, 1])")
                         + f", got shape {tuple(steps.shape)}") from None
    if not (torch.isfinite(steps) & (steps > 0)).all():
        raise ValueError(f"eta={eta!r} must be finite and > 0")
    for name, value in (("t_comm", t_comm), ("t_comp", t_comp)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}={value!r} must be finite and >= 0")
    theta0 = torch.as_tensor(theta0, dtype=DTYPE, device=device)
    if theta0.shape != (model.dim,) or not torch.isfinite(theta0).all():
        raise ValueError(f"theta0 must be finite with shape ({model.dim},), got {tuple(theta0.shape)}")
    Q, rounds = ([v] * (C or 1) if isinstance(v, int) else v for v in (Q, rounds))
    return steps.to(device).reshape(-1)[:, None, None, None], Q, rounds, theta0, replicas, C


#: the readings of the mini-batch of a round: ``"round"``, one batch zeta^{t0} for all Q
#: local steps, as Das et al. 2022 print it (Section 3: "A client uses the same subset of
#: sample IDs for all Q iterations"; Algorithm 1); ``"step"``, a fresh batch at every local
#: step (the ICASSP 2021 version of TDCD), its other-silo embeddings Phi_{-j} computed at
#: the round-start hub models (as stale as in (5))
BATCHES = ("round", "step")


def run_tdcd(model: BlockLinear | ModuleModel, *, eta, Q: int | Sequence[int],
             rounds: int | Sequence[int], theta0,
             replicas: int, generator: torch.Generator, t_comm: float = 0.0, t_comp: float = 1.0,
             record_iterates: bool = False, batch: str = "round", shards=None,
             stop_below: float | None = None, record_grad: bool = True,
             record_loss: bool = True, record_variance: bool = True) -> TDCDTrace | list[TDCDTrace]:
    """Run ``replicas`` independent realisations of ``rounds`` TDCD rounds (T = Q rounds
    iterations), Das et al. 2022, Algorithm 1 (see the module docstring).

    ``eta``: one step size, or one per replica (a step-size grid in a single run).
    ``theta0`` [model.dim]: the hub models at t = 0, blocks concatenated. ``batch``: the
    reading of the round's mini-batch, :data:`BATCHES` ("round", the paper's, the default;
    "step": a fresh batch per local step, one more :func:`draw_batch` per step; Lemma 2's
    drift and g0 are then measured across batches). ``shards``: None (every cell a copy of
    the n samples: i.i.d. clients), or a ``sim.data.Partition`` of the n samples into the
    C = lcm(K_j) cells (:func:`sharded_cells`), so that client k of silo j holds only the
    samples of its cells: horizontal non-i.i.d. clients (label-skewed with
    ``sim.data.label_partition`` or ``dirichlet_partition`` of the labels as classes); the
    trace's loss stays L over all n samples, and its ``sigma2`` is None (the model's exact
    variance is that of copies). ``stop_below``: stop after the first round by which every
    replica's running left side of (15) (:attr:`TDCDTrace.running_lhs`) has been at most
    this, or the replica diverged (the trace then holds the rounds run; their numbers are
    those of the full run; it reads the gradients, so needs ``record_grad``). The simulation
    runs on the model's device; the generator may live on any device. Returns a CPU trace.
    ``record_grad=False`` records the loss only (``grad_sq_norm`` and ``sigma2`` None): a run
    whose training curve is all that is read, without a full gradient every round; the
    dynamics and the draws are the same. ``record_loss=False`` (with ``record_grad=False``)
    records the hub models every round instead (``hub``; ``loss`` None): a caller that
    reads the loss of some replicas only evaluates ``model.loss`` on theirs (the same
    numbers). ``record_variance=False``: ``sigma2`` None, without its pass over the samples'
    block gradients every round (a run whose variance is not read).

    A batch of C configurations in one run, with common random numbers: ``Q`` and/or
    ``rounds`` a list of C (configuration c takes Q_c local steps per round for rounds_c
    rounds, on its own clock: its t-th local step is the run's step t, "step < Q_c" deciding
    where its rounds start and end) and/or ``eta`` [C, R] or [C, 1] (a step per configuration
    and replica; [R] or a number: the same for every configuration). Round r of every
    configuration takes the same mini-batch (``batch="round"``; each value of Q draws the
    rounds' batches from its own copy of ``generator``'s state), or step t of every
    configuration the same (``batch="step"``). ``stop_below`` stops each configuration on
    its own. Returns a list of C traces, trace c equal to the run of configuration c alone
    with the same ``generator`` state, bit for bit under the conditions of
    ``sim.problems.CommonDraws``."""
    device = model.device
    steps, Qs, roundss, theta0, R, C = _validated_run(model, eta, Q, rounds, theta0, replicas,
                                                     t_comm, t_comp, device)
    if batch not in BATCHES:
        raise ValueError(f"batch={batch!r} must be one of {BATCHES}")
    if stop_below is not None and not math.isfinite(stop_below):
        raise ValueError(f"stop_below={stop_below!r} must be finite")
    if stop_below is not None and not record_grad:
        raise ValueError("stop_below reads the gradients: it needs record_grad=True")
    if record_grad and not record_loss:
        raise ValueError("record_loss=False records the hub models for the loss: it needs "
                         "record_grad=False")
    cells = None if shards is None else sharded_cells(model.layout, shards, device)
    exact_sigma = record_variance and hasattr(model, "sigma2_at") and shards is None
    traces = _Run(model, steps, Qs, roundss, theta0, R, generator, batch, cells, stop_below,
                  record_grad, record_loss, record_iterates, exact_sigma).traces(t_comm, t_comp)
    return traces if C is not None else traces[0]


class _Run:
    """The rounds of C configurations (C = 1: a run of one) on one clock of local steps:
    configuration c's round r takes steps r Q_c .. (r + 1) Q_c - 1 of the run; the state of
    every configuration is stacked, [C R, ...] (configuration-major), and each step's work is
    done for all of them at once: the round starts (recording, the round's batch, Phi_{-j}
    at the hub models) and ends (averaging, Lemma 2's records, stop_below) of the
    configurations whose round starts or ends there, the client steps (5) for every one."""

    def __init__(self, model, steps, Qs, roundss, theta0, R, generator, batch, cells,
                 stop_below, record_grad, record_loss, record_iterates, exact_sigma):
        self.model, self.lay, self.steps, self.Qs, self.roundss = model, model.layout, steps, Qs, roundss
        self.R, self.C, self.batch, self.cells = R, len(Qs), batch, cells
        self.stop_below, self.record_grad, self.record_loss = stop_below, record_grad, record_loss
        self.record_iterates, self.exact_sigma = record_iterates, exact_sigma
        device, lay = model.device, model.layout
        C, N, K, d = self.C, lay.N, max(lay.clients), model.d
        CR, rounds = C * R, max(roundss)
        self.device, self.CR, self.N, self.K, self.d = device, CR, N, K, d
        self.avg = lay.averaging_weights(device)                                  # [N, K]
        self.weight = self.avg[..., None]                                         # [N, K, 1]
        self.generator = generator
        # batch="round": every value of Q draws its rounds' batches from its own copy of the
        # generator (the copies' streams are the run of one's): round r, the same batch
        self.streams = {Q: generator if i == 0 else _copy(generator)
                        for i, Q in enumerate(dict.fromkeys(Qs))}
        self.hub = model.split(theta0).expand(CR, N, d).clone()
        self.clients = self.hub[:, :, None].expand(CR, N, K, d).clone()
        self.accept = Acceptance(CR, device)
        zeros = torch.zeros
        self.losses, self.grad_sqs, self.sigma2s, self.drifts, self.g0s = (
            Rounds(), Rounds(), Rounds(), Rounds(), Rounds())
        self.start_grad_sq = None                     # [C R]: for stop_below
        self.round_drift = zeros(CR, dtype=DTYPE, device=device)
        self.round_g0 = zeros(CR, dtype=DTYPE, device=device)
        self.total = zeros(CR, dtype=DTYPE, device=device)
        self.reached = zeros(CR, dtype=torch.bool, device=device)
        self.ran = list(roundss)                      # rounds each configuration runs
        self.running = [True] * C
        # record_loss=False: every round's hub models, written in place (no list to stack)
        keep_hub = record_iterates or not record_loss
        self.hub_record = self.hub.new_empty(CR, rounds + 1, N, d) if keep_hub else None
        if keep_hub:
            self.hub_record[:, 0] = self.hub
        per_round = (self.lay.batch,) if batch == "round" else (max(Qs), self.lay.batch)
        self.rows_record = torch.zeros(CR, rounds, *per_round, dtype=torch.int64,
                                       device=device) if record_iterates else None
        self.virtual, self.directions = [], []
        self.rows = None                              # [C R, batch]: each configuration's batch
        self.configs = torch.arange(C, device=device)
        self.replica = torch.arange(R, device=device)
        self.first = None
        self._rows: dict[tuple, torch.Tensor] = {}
        self._go()

    # -- which configurations' rounds start or end at step t
    def _at(self, t: int, offset: int) -> list[int]:
        return [c for c in range(self.C) if self.running[c] and t < self.roundss[c] * self.Qs[c]
                and t % self.Qs[c] == offset % self.Qs[c]]

    def _rows_of(self, configs: list[int]) -> torch.Tensor | None:
        """The state rows of ``configs`` (None: every configuration's)."""
        if len(configs) == self.C:
            return None
        key = tuple(configs)
        if key not in self._rows:
            self._rows[key] = (torch.tensor(configs, device=self.device)[:, None] * self.R
                               + self.replica).view(-1)
        return self._rows[key]

    def _go(self) -> None:
        model, R, lay = self.model, self.R, self.lay
        other = grads = None
        for t in range(max(r * Q for r, Q in zip(self.roundss, self.Qs, strict=True))):
            if not any(self.running):
                break
            starting = self._at(t, 0)
            if starting:
                self._start(starting, t)
            if self.batch == "step" or starting:
                if self.batch == "step":
                    drawn = draw_batch(lay, R, self.generator, self.device, self.cells)
                    self.rows = drawn.repeat(self.C, 1) if self.C > 1 else drawn
                    if self.rows_record is not None:
                        self._record_rows(t)
                other, grads = model.round_problem(self.hub, self.rows)     # Phi_{-j}, frozen
            g = grads(self.clients, other)
            if starting:
                rows = self._rows_of(starting)
                value = (g if rows is None else g[rows]).square().mul_(self.weight).sum(dim=(1, 2, 3))
                if rows is None:
                    self.first, self.round_g0 = g.clone(), value
                else:
                    self.first[rows] = g[rows]
                    self.round_g0[rows] = value
            if any(t % Q for Q in self.Qs):  # some configuration past its round's first step
                self.round_drift += (g - self.first).square_().mul_(self.weight).sum(dim=(1, 2, 3))
            if self.record_iterates:
                self.virtual.append(self._client_average(self.clients))
                self.directions.append(self._client_average(g))
            self.clients.sub_(self.steps * g)
            ending = self._at(t, -1)
            if ending:
                self._end(ending, t)

    def _per_configuration(self, statistic, hub: torch.Tensor):
        """``statistic`` (the model's L, or its statistics) at ``hub`` [n R, N, d], one call per
        configuration: the product of the scores (``BlockLinear.scores``) puts the replicas
        on MKL's columns, whose order of summation depends on their number, so that only the
        shape of a run of one gives its numbers (a round start's work, over the n samples)."""
        if hub.shape[0] == self.R:
            return statistic(hub)
        parts = [statistic(part) for part in hub.split(self.R)]
        if isinstance(parts[0], tuple):
            return tuple(None if values[0] is None else torch.cat(values)
                         for values in zip(*parts, strict=True))
        return torch.cat(parts)

    def _client_average(self, clients: torch.Tensor) -> torch.Tensor:
        """Per silo the average of its clients' [C R, N, K, d] (theta^t and G^t of (11)-(12),
        recorded with ``record_iterates``), configuration by configuration: the product a run
        of one computes (a diagnostic record, not the run's hot path)."""
        return torch.cat([torch.einsum("rnkd,nk->rnd", part, self.avg)
                          for part in clients.split(self.R)])

    def _start(self, configs: list[int], t: int) -> None:
        """Round r = t // Q_c of each configuration starts: record L (and ||grad L||^2,
        Var(g_kj)) at its hub models, draw its batch, its clients start from the hub."""
        model, R, rows = self.model, self.R, self._rows_of(configs)
        rounds = [t // self.Qs[c] for c in configs]
        hub = self.hub if rows is None else self.hub[rows]
        if self.record_grad:
            loss, grad_sq_norm, variance = self._per_configuration(
                lambda theta: model.statistics(theta, variance=self.exact_sigma), hub)
            self.grad_sqs.put(configs, rounds, grad_sq_norm)
            if variance is not None:
                self.sigma2s.put(configs, rounds, variance)
            self.losses.put(configs, rounds, loss)
            if self.stop_below is not None:
                if rows is None:
                    self.start_grad_sq = grad_sq_norm.clone()
                else:
                    self.start_grad_sq[rows] = grad_sq_norm
        elif self.record_loss:
            self.losses.put(configs, rounds, self._per_configuration(model.loss, hub))
        if self.batch == "round":
            drawn = {Q: draw_batch(self.lay, R, self.streams[Q], self.device, self.cells)
                     for Q in dict.fromkeys(self.Qs[c] for c in configs)}
            if rows is None and self.C == 1:
                self.rows = drawn[self.Qs[0]]
            else:
                if self.rows is None:
                    self.rows = torch.empty(self.CR, self.lay.batch, dtype=torch.int64,
                                            device=self.device)
                for Q, batch in drawn.items():  # one value of Q at a time, not configurations
                    group = [c for c in configs if self.Qs[c] == Q]
                    self.rows.view(self.C, R, -1)[self._index(group)] = batch
            if self.rows_record is not None:
                self._record_rows(t, configs)
        if rows is None:
            self.clients = self.hub[:, :, None].expand(self.CR, self.N, self.K, self.d).clone()
            self.round_drift = torch.zeros(self.CR, dtype=DTYPE, device=self.device)
        else:
            self.clients[rows] = hub[:, :, None]
            self.round_drift[rows] = 0.0

    def _index(self, configs: list[int]) -> torch.Tensor:
        """``configs`` as an int64 tensor (made once per list)."""
        key = ("index", *configs)
        if key not in self._rows:
            self._rows[key] = torch.tensor(configs, device=self.device)
        return self._rows[key]

    def _record_rows(self, t: int, configs: list[int] | None = None) -> None:
        """``record_iterates``: the batch of step t, at each configuration's round (and
        local step, ``batch="step"``)."""
        configs = [c for c in (range(self.C) if configs is None else configs)
                   if self.running[c] and t < self.roundss[c] * self.Qs[c]]
        if not configs:
            return
        at = [torch.tensor([divmod(t, self.Qs[c])[k] for c in configs], device=self.device)
              for k in ((0, 1) if self.batch == "step" else (0,))]
        record = self.rows_record.view(self.C, self.R, *self.rows_record.shape[1:])
        record[(self._index(configs), slice(None), *at)] = self.rows.view(self.C, self.R, -1)[
            self._index(configs)]

    def _end(self, configs: list[int], t: int) -> None:
        """Round r of each configuration ends: the client average (Algorithm 1, line 32),
        Lemma 2's records, stop_below."""
        R, rows, accept = self.R, self._rows_of(configs), self.accept
        rounds = [t // self.Qs[c] for c in configs]
        clients, hub = (self.clients, self.hub) if rows is None else \
            (self.clients[rows], self.hub[rows])
        hub = accept(hub, (clients * self.weight).sum(dim=2), rows)
        drift, g0 = (v.clone() if rows is None else v[rows] for v in (self.round_drift, self.round_g0))
        if accept.alive is not None:  # a diverged replica records 0 from then on
            alive = accept.alive if rows is None else accept.alive[rows]
            drift, g0 = torch.where(alive, drift, 0.0), torch.where(alive, g0, 0.0)
        self.drifts.put(configs, rounds, drift)
        self.g0s.put(configs, rounds, g0)
        if rows is None:
            self.hub = hub
        else:
            self.hub[rows] = hub
        if self.hub_record is not None:
            record = self.hub_record.view(self.C, R, *self.hub_record.shape[1:])
            record[self._index(configs), :, torch.tensor(rounds, device=self.device) + 1] = \
                self.hub.view(self.C, R, self.N, self.d)[self._index(configs)]
        if self.stop_below is not None:
            grad_sq = self.start_grad_sq if rows is None else self.start_grad_sq[rows]
            if self.C == 1:
                self.total += grad_sq
                self.reached |= self.total <= self.stop_below * (rounds[0] + 1)
            else:
                rows = self._rows_of(configs) if rows is None else rows
                rows = torch.arange(self.CR, device=self.device) if rows is None else rows
                self.total[rows] += grad_sq
                scale = torch.tensor(rounds, dtype=DTYPE, device=self.device).add_(1)
                self.reached[rows] |= self.total[rows] <= self.stop_below * scale.repeat_interleave(R)
            done = (self.reached | accept.diverged).view(self.C, R).all(dim=1).tolist()
            for c, r in zip(configs, rounds, strict=True):
                if done[c]:
                    self.running[c], self.ran[c] = False, r + 1

    def traces(self, t_comm: float, t_comp: float) -> list[TDCDTrace]:
        """Every configuration's :class:`TDCDTrace` (CPU)."""
        C, R, N, device = self.C, self.R, self.N, self.device
        rounds = max(self.roundss)
        zeros = torch.zeros
        loss = grad_sq = sigma2 = None
        if self.record_loss:  # L at the hub models after each configuration's last round
            loss = self.losses.into(zeros(C, R, rounds + 1, dtype=DTYPE, device=device))
            final = self._per_configuration(self.model.loss, self.hub).view(C, R)
            for c in range(C):
                loss[c, :, self.ran[c]] = final[c]
        if self.record_grad:
            grad_sq = self.grad_sqs.into(zeros(C, R, rounds, dtype=DTYPE, device=device)).cpu()
            sigma2 = self.sigma2s.into(zeros(C, R, rounds, N, dtype=DTYPE, device=device)).cpu()
        drift = self.drifts.into(zeros(C, R, rounds, dtype=DTYPE, device=device)).cpu()
        g0 = self.g0s.into(zeros(C, R, rounds, dtype=DTYPE, device=device)).cpu()
        loss = None if loss is None else loss.cpu()
        out = []
        for c in range(C):
            ran, rows = self.ran[c], slice(c * R, (c + 1) * R)
            recorded = {}
            if self.record_iterates:
                T = ran * self.Qs[c]
                hub_c = self.hub_record[rows, :ran + 1]
                recorded = {"hub": hub_c,
                            "virtual": torch.stack([*(v[rows] for v in self.virtual[:T]),
                                                    hub_c[:, -1]], 1),
                            "G": torch.stack([v[rows] for v in self.directions[:T]], 1),
                            "rows": self.rows_record[rows, :ran]
                            if self.batch == "round" else self.rows_record[rows, :ran, :self.Qs[c]]}
            elif self.hub_record is not None:
                recorded = {"hub": self.hub_record[rows, :ran + 1]}
            t_round = 3.0 * t_comm + self.Qs[c] * t_comp
            out.append(TDCDTrace(
                grad_sq_norm=grad_sq[c, :, :ran] if self.record_grad else None,
                loss=loss[c, :, :ran + 1] if self.record_loss else None,
                drift=drift[c, :, :ran], g0=g0[c, :, :ran],
                time=torch.arange(ran + 1, dtype=DTYPE) * t_round,
                diverged=self.accept.diverged[rows].cpu(),
                sigma2=sigma2[c, :, :ran] if self.exact_sigma and self.record_grad else None,
                **{name: value.cpu() for name, value in recorded.items()}))
        return out


def _copy(generator: torch.Generator) -> torch.Generator:
    """A generator on ``generator``'s device in the same state."""
    return torch.Generator(device=generator.device).set_state(generator.get_state())
