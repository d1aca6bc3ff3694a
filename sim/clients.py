"""Problems whose clients hold their own data: every client (worker) draws its mini-batches
from its own shard of a data set (a ``sim.data.Partition``), the non-i.i.d. clients of the
papers' experiments (Ali & Arafa 2025, Section IV: Dirichlet(0.1) and label-disjoint
groups; Castiglia et al. 2021, Section 6: unequal data shares; Yang et al. 2022, Section 5:
p labels per worker).

A :class:`ClientProblem` is a ``sim.problems.Problem`` of the global objective
f = sum_k p_k f_k, f_k the mean loss over client k's n_k samples, with the client weights
``client_weights`` p [M] chosen by ``weights``:

- ``"data"``: p_k = n_k / n, so f is the mean loss over the whole data set: Castiglia et al.
  2021, eq. (1) (F over the union of the workers' data), and the training loss the papers
  plot;
- ``"uniform"``: p_k = 1/M: Yang et al. 2022, Section 3 (f = (1/M) sum_i f_i), and Ali &
  Arafa 2025, eqs. (1)-(2) read literally (every client's F_{i,k} weighs the same).

The two coincide when the shards have equal sizes. What a trace records (``loss``,
``grad``, ``loss_and_grad_sq``, ``recorder``) is f on models [..., d]; the samplers put the
clients on an axis:

- ``gradient_sampler``/``stochastic_grad`` on x [..., M, d]: row k's mini-batch gradient is
  drawn from client k's shard (``sim.mllsgd.run_mllsgd``: worker i is client i; this is
  also ``worker_gradient_sampler``, the client interface of ``sim.afl.run_afl``);
- ``mean_gradient_sampler`` on group models [..., G, d] with ``counts`` [G] group sizes
  (``sim.hfl.run_hfl``): group g's clients are clients sum(counts[:g]) ..
  sum(counts[:g+1]) - 1, each takes one stochastic gradient at its group's model, and the
  group averages them (Ali & Arafa 2025, eqs. (5)-(6));
- ``worker_grads`` (grad f_k on [..., M, d]) and ``group_grads`` (grad f_i of each group's
  objective, its clients weighted as in f, on [..., G, d]).

Everything is gathered by per-client index tensors and reduced by ``index_add_``: no Python
loop over clients or groups. Client k draws its ``batch`` samples uniformly with
replacement from its own shard (``sim.data.ShardRows``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedbound.sim.data import Partition, ShardRows
from fedbound.sim.problems import DTYPE, LogisticRegression, Problem, rand_, softplus

WEIGHTS = ("data", "uniform")


def client_weights(sizes: torch.Tensor, weights: str) -> torch.Tensor:
    """p [M] (float64, summing to 1) of the module docstring: n_k/n (``"data"``) or 1/M
    (``"uniform"``), from the shard sizes n_k."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights={weights!r} must be one of {WEIGHTS}")
    sizes = sizes.to(DTYPE)
    if weights == "data":
        return sizes / sizes.sum()
    return torch.full_like(sizes, 1.0 / sizes.numel())


def checked_partition(partition, n: int) -> Partition:
    """``partition`` if it is a ``sim.data.Partition`` of ``n`` samples in which every worker
    holds a sample; else ValueError."""
    if not isinstance(partition, Partition) or partition.owner.shape != (n,):
        raise ValueError(f"partition must be a sim.data.Partition of the {n} samples")
    empty = torch.nonzero(partition.sizes == 0).flatten()
    if empty.numel():
        raise ValueError(f"partition leaves workers {empty.tolist()[:10]} without samples: "
                         "every worker needs data (another seed, a larger alpha or fewer workers)")
    return partition


@dataclass(frozen=True)
class Rows:
    """Objectives of K rows, each f restricted to some of the clients (a client's own f_k,
    a group's f_i): row r is sum_j dense[r, j] loss_j. ``dense`` [K, n]; the same weights
    padded by row, ``table`` [K, m] (the row's samples in increasing order, then 0) and
    ``weights`` [K, m] (0 in the padding)."""

    dense: torch.Tensor
    table: torch.Tensor
    weights: torch.Tensor


class ClientProblem(Problem):
    """The interface of the module docstring. A subclass sets ``M``, ``client_weights`` and
    ``partition`` (by ``_client_setup``) and implements :meth:`worker_gradient_sampler` and
    :meth:`rows_grads`; the rest is written here once."""

    M: int
    client_weights: torch.Tensor
    partition: Partition

    @abstractmethod
    def worker_gradient_sampler(self, shape: Sequence[int], generator: torch.Generator):
        """``x -> g`` for x of ``shape`` [..., M, d]: row k the mini-batch gradient of f_k,
        the batch drawn from client k's shard."""

    @abstractmethod
    def rows_grads(self, x: torch.Tensor, rows: Rows) -> torch.Tensor:
        """x [..., K, d]: row r the gradient at x[..., r, :] of row r's objective
        sum_j rows.dense[r, j] loss_j (:class:`Rows`)."""

    def _checked_clients(self, shape: Sequence[int]) -> tuple[int, ...]:
        shape = tuple(shape)
        if len(shape) < 2 or shape[-2:] != (self.M, self.dim):
            raise ValueError(f"a problem with M={self.M} clients samples models of shape "
                             f"[..., M={self.M}, {self.dim}], got {list(shape)}")
        return shape

    def gradient_sampler(self, shape, generator):
        """:meth:`worker_gradient_sampler`: row k of ``shape`` [..., M, d] is client k."""
        return self.worker_gradient_sampler(self._checked_clients(shape), generator)

    def stochastic_grad(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One mini-batch gradient per client, x [..., M, d]: row k from client k's shard."""
        return self.gradient_sampler(x.shape, generator)(x).clone()

    def group_of(self, counts) -> torch.Tensor:
        """[M] int64: the group of every client, groups of ``counts`` [G] consecutive
        clients (the layout of ``sim.hfl.run_hfl``); ValueError unless sum(counts) = M."""
        counts = torch.as_tensor(counts, device=self.device)
        if counts.ndim != 1 or int(counts.sum()) != self.M:
            raise ValueError(f"sizes={counts.tolist()} must sum to the problem's M={self.M} "
                             "clients (group after group)")
        return torch.repeat_interleave(torch.arange(counts.numel(), device=self.device), counts)

    def mean_gradient_sampler(self, shape, counts, generator):
        """``(y, grad_y) -> `` the mean over group g's clients of one stochastic gradient each
        at y [..., G, d] (row g), for ``shape`` = [..., G, n, d] and ``counts`` [G] the group
        sizes (module docstring). ``grad_y`` is not used."""
        shape = tuple(shape)
        group_of = self.group_of(counts)
        sample = self.gradient_sampler((*shape[:-3], self.M, shape[-1]), generator)
        divisor = torch.as_tensor(counts, device=self.device).to(DTYPE)[:, None]

        def mean(y: torch.Tensor, grad_y: torch.Tensor | None = None) -> torch.Tensor:
            g = sample(y.index_select(-2, group_of))
            return torch.zeros_like(y).index_add_(-2, group_of, g).div_(divisor)

        return mean

    def rows(self, group_of: torch.Tensor) -> Rows:
        """The objectives of the rows ``group_of`` [M] puts the clients in (row r: f restricted
        to the clients k with group_of[k] = r, :class:`Rows`): sample j of client k weighs
        p_k / (n_k P_r) in row r = group_of[k], P_r the total weight of row r's clients."""
        key = tuple(group_of.tolist())
        if key not in self._rows:
            owner = self.partition.owner.to(self.device)
            sizes = self.partition.sizes.to(device=self.device, dtype=DTYPE)
            count = int(group_of.max()) + 1
            share = torch.zeros(count, dtype=DTYPE, device=self.device).index_add_(
                0, group_of, self.client_weights)
            per_sample = (self.client_weights / (sizes * share[group_of]))[owner]
            row = group_of[owner]
            dense = torch.zeros(count, owner.numel(), dtype=DTYPE, device=self.device)
            dense[row, torch.arange(owner.numel(), device=self.device)] = per_sample
            table, held = Partition(row, count).table()
            mask = torch.arange(table.shape[1], device=self.device) < held[:, None]
            self._rows[key] = Rows(dense, table, dense.gather(1, table) * mask)
        return self._rows[key]

    def worker_grads(self, x: torch.Tensor) -> torch.Tensor:
        """grad f_k at x [..., M, d] (client k on row k)."""
        self._checked_clients(x.shape)
        return self.rows_grads(x, self.rows(torch.arange(self.M, device=self.device)))

    def group_grads(self, y: torch.Tensor, sizes) -> torch.Tensor:
        """grad f_i at y [..., G, d]: f_i = sum_{k in group i} p_k f_k / sum_{k in group i} p_k,
        the objective of group i's clients (Ali & Arafa 2025, eq. (1), with the weights of f)."""
        return self.rows_grads(y, self.rows(self.group_of(sizes)))

    def _client_setup(self, partition: Partition, weights: str) -> None:
        """The attributes every subclass sets from its partition and ``weights``."""
        self.partition = partition
        self.M = partition.workers
        self.weights = weights
        self.client_weights = client_weights(partition.sizes, weights).to(self.device)
        self._rows: dict[tuple, Rows] = {}

    def to(self, device) -> ClientProblem:
        moved = super().to(device)
        moved._rows = {}
        return moved


class LogisticClients(ClientProblem, LogisticRegression):
    """Logistic regression (``sim.problems.LogisticRegression``: labels in {-1, +1}, an
    optional l2 term ``lam``) with client k holding the samples ``partition.owner == k``.

    f = sum_k p_k f_k (module docstring); with ``weights="data"`` it is the parent's F over
    all n samples, and ``loss``, ``grad`` and the recorder are the parent's, bit for bit.
    Constants: ``L`` of f (``lambda_max(A^T diag(s) A)/4 + lam``, s the samples' weights in
    f; the parent's L for ``"data"``); ``sigma = R/sqrt(batch)`` bounds every client's
    mini-batch variance around grad f_k (not around grad f: the clients' dissimilarity is
    not in it); ``G = R`` (``lam = 0``) as for the parent; ``f_inf = 0``. For
    ``sim.afl.run_afl``: ``sigma_L = sigma``, ``sigma_G = 2R`` (a bound:
    ||grad f_k - grad f|| <= 2 max_j ||a_j||) and ``f_star = 0``.
    """

    def __init__(self, features, labels, partition: Partition, *, lam: float = 0.0,
                 batch: int = 1, weights: str = "uniform", device=None):
        super().__init__(features, labels, lam=lam, batch=batch, device=device)
        self._client_setup(checked_partition(partition, self.n), weights)
        sizes = self.partition.sizes.to(device=self.device, dtype=DTYPE)
        self._samples = (self.client_weights / sizes)[self.partition.owner.to(self.device)]  # [n]
        if weights == "uniform":
            gram = self.features.T @ (self.features * self._samples[:, None])
            self.L = float(torch.linalg.eigvalsh(gram)[-1]) / 4 + self.lam
        self.sigma_L, self.sigma_G, self.f_star = self.sigma, 2 * self.R, 0.0

    def worker_gradient_sampler(self, shape, generator):
        """:meth:`LogisticRegression.batch_gradients` with the indices drawn by
        ``sim.data.ShardRows`` from one ``rand([..., M, batch])``."""
        shape = self._checked_clients(shape)
        rows = ShardRows(self.partition, self.device)
        u = torch.empty(*shape[:-1], self.batch, dtype=DTYPE, device=self.device)
        return self.batch_gradients(shape, lambda idx: idx.copy_(rows(rand_(u, generator))))

    def rows_grads(self, x, rows):
        """From the margins of every row against every sample, [..., K, n] (+ lam x)."""
        return self._weighted_grads(x, rows.dense)

    def _weighted_grads(self, x, weights):
        margins = torch.matmul(x, self.features.T).mul_(self.labels)
        slopes = torch.sigmoid(margins.neg_()).mul_(self.labels).neg_().mul_(weights)
        return torch.matmul(slopes, self.features) + self.lam * x

    # f with the uniform weights (the parent's methods are f with weights "data")
    def loss(self, x):
        if self.weights == "data":
            return super().loss(x)
        return (softplus(-self._margins(x)) * self._samples).sum(-1) + 0.5 * self.lam * (x * x).sum(-1)

    def grad(self, x):
        if self.weights == "data":
            return super().grad(x)
        return self._weighted_grads(x[..., None, :], self._samples[None])[..., 0, :]

    def loss_and_grad_sq(self, x):
        if self.weights == "data":
            return super().loss_and_grad_sq(x)
        return self.loss(x), self.grad(x).square().sum(-1)

    def recorder(self, shape, *, grad=True):
        if self.weights == "data":
            return super().recorder(shape, grad=grad)
        return Problem.recorder(self, shape, grad=grad)
