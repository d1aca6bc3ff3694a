"""Real data that installs with a package (no download), and its partitions across workers.

Loaders: :func:`load_digits` (scikit-learn's 8x8 handwritten digits, 1797 samples, 10
classes: a small stand-in for MNIST) and :func:`load_breast_cancer` (569 samples, 30
features, 2 classes: a tabular task). Both need the optional extra ``fedbound[data]``
(scikit-learn); features come back standardised, float64, labels int64.

Partitions (horizontal, across workers): an ``owner`` vector [n] with the worker of every
sample, so every sample belongs to exactly one worker by construction.

- :func:`iid_partition`: a uniformly random permutation dealt round-robin (sizes differ by
  at most one);
- :func:`label_partition`: worker i holds the classes (i c + j) mod C, j < c, and the
  samples of each class are dealt at random among the workers holding it: the partition
  by label with c classes per worker of Yang et al. 2022, Section 5 (their p), in the
  manner of the non-i.i.d. partition of McMahan et al. 2017, Section 3;
- :func:`dirichlet_partition`: for each class k, proportions p_k ~ Dirichlet(alpha 1_M)
  over the M workers, and the class's samples split at the cut points floor(n_k cumsum p_k)
  (Hsu, Qi & Brown 2019, Section 3): alpha -> infinity tends to i.i.d., small alpha gives
  each class to few workers.

Vertical (across silos, for TDCD): :func:`vertical_split` gives the column order and the
block sizes D_j of a ``sim.tdcd.Layout``.

Randomness comes only from the ``torch.Generator`` passed in (the Dirichlet draws from a
numpy generator seeded by one draw from it): the same seed gives the same partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sim.problems import DTYPE, randint

INSTALL_HINT = "scikit-learn is needed for fedbound's bundled data sets: pip install fedbound[data]"


def _sklearn_datasets():
    """``sklearn.datasets``, or ImportError with the one-line install hint."""
    try:
        from sklearn import datasets
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return datasets


@dataclass(frozen=True)
class Dataset:
    """``features`` [n, p] float64 (standardised), ``labels`` [n] int64 in [0, classes)."""

    name: str
    features: torch.Tensor
    labels: torch.Tensor
    classes: int

    @property
    def n(self) -> int:
        return int(self.labels.numel())

    def to(self, device) -> Dataset:
        return Dataset(self.name, self.features.to(device), self.labels.to(device), self.classes)


def standardised(features: torch.Tensor) -> torch.Tensor:
    """Columns shifted to mean 0 and scaled to standard deviation 1 (population std);
    a constant column (e.g. an always-blank pixel of the digits) becomes 0."""
    centred = features - features.mean(dim=0)
    std = centred.square().mean(dim=0).sqrt()
    return centred / torch.where(std > 0, std, 1.0)


def _dataset(name: str, bunch, device) -> Dataset:
    features = torch.as_tensor(np.asarray(bunch.data), dtype=DTYPE)
    labels = torch.as_tensor(np.asarray(bunch.target), dtype=torch.int64)
    classes = int(labels.max()) + 1
    return Dataset(name, standardised(features).to(device), labels.to(device), classes)


def load_digits(*, device=None) -> Dataset:
    """scikit-learn's handwritten digits: 1797 images of 8x8 pixels flattened row by row
    to 64 features (``sim.neural.small_cnn`` unflattens them), 10 classes."""
    return _dataset("digits", _sklearn_datasets().load_digits(), device)


def load_breast_cancer(*, device=None) -> Dataset:
    """scikit-learn's Wisconsin breast cancer data: 569 samples, 30 features, 2 classes."""
    return _dataset("breast_cancer", _sklearn_datasets().load_breast_cancer(), device)


# ---------------------------------------------------------------------- partitions


@dataclass(frozen=True)
class Partition:
    """``owner`` [n] int64: the worker of every sample; ``workers`` M; ``proportions``
    [C, M]: the Dirichlet draws of :func:`dirichlet_partition` (else None)."""

    owner: torch.Tensor
    workers: int
    proportions: torch.Tensor | None = None

    @property
    def sizes(self) -> torch.Tensor:
        """[M] samples per worker."""
        return torch.bincount(self.owner, minlength=self.workers)

    def table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(indices [M, n_max], sizes [M])``: row i lists worker i's samples in increasing
        order, padded with 0 after ``sizes[i]`` entries."""
        sizes = self.sizes
        order = torch.argsort(self.owner, stable=True)
        starts = sizes.cumsum(0) - sizes
        slot = torch.arange(order.numel(), device=order.device) - starts[self.owner[order]]
        table = torch.zeros(self.workers, int(sizes.max()), dtype=torch.int64, device=order.device)
        table[self.owner[order], slot] = order
        return table, sizes


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}={value!r} must be an integer >= 1")
    return int(value)


def _checked_labels(labels) -> tuple[torch.Tensor, int]:
    labels = torch.as_tensor(labels)
    if labels.ndim != 1 or labels.numel() == 0 or labels.dtype.is_floating_point or (labels < 0).any():
        raise ValueError("labels must be a non-empty 1-D tensor of integer class indices >= 0")
    return labels.long(), int(labels.max()) + 1


def _permutation(n: int, generator: torch.Generator, device) -> torch.Tensor:
    return torch.randperm(n, generator=generator, device=generator.device).to(device)


def iid_partition(n: int, workers: int, generator: torch.Generator, *, device=None) -> Partition:
    """Sample ``perm[j]`` goes to worker j mod M for a uniformly random permutation ``perm``:
    every worker gets floor(n/M) or ceil(n/M) samples drawn without replacement."""
    n, workers = _positive_int("n", n), _positive_int("workers", workers)
    if workers > n:
        raise ValueError(f"workers={workers} exceeds n={n}: every worker needs a sample")
    owner = torch.empty(n, dtype=torch.int64, device=device)
    owner[_permutation(n, generator, device)] = torch.arange(n, device=device) % workers
    return Partition(owner, workers)


def _ranks_within_class(labels: torch.Tensor, classes: int,
                        generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rank [n], sizes [C])``: a uniformly random order of the samples of each class
    (rank 0..n_k - 1 within class k) from one permutation."""
    n = labels.numel()
    perm = _permutation(n, generator, labels.device)
    order = perm[torch.argsort(labels[perm], stable=True)]
    sizes = torch.bincount(labels, minlength=classes)
    starts = sizes.cumsum(0) - sizes
    rank = torch.empty(n, dtype=torch.int64, device=labels.device)
    rank[order] = torch.arange(n, device=labels.device) - starts[labels[order]]
    return rank, sizes


def _require_every_worker(owner: torch.Tensor, workers: int, what: str) -> None:
    empty = torch.nonzero(torch.bincount(owner, minlength=workers) == 0).flatten()
    if empty.numel():
        raise ValueError(f"{what} leaves workers {empty.tolist()[:10]} without samples: "
                         "use fewer workers")


def label_partition(labels, workers: int, classes_per_worker: int,
                    generator: torch.Generator) -> Partition:
    """Worker i holds the classes (i c + j) mod C for j < c = ``classes_per_worker``; the
    samples of class k are dealt in a random order round-robin among the workers holding
    k, so each worker sees only its c classes. Needs M c >= C (every class held)."""
    labels, classes = _checked_labels(labels)
    workers = _positive_int("workers", workers)
    c = _positive_int("classes_per_worker", classes_per_worker)
    if c > classes:
        raise ValueError(f"classes_per_worker={c} exceeds the {classes} classes")
    if workers * c < classes:
        raise ValueError(f"workers * classes_per_worker = {workers * c} < {classes} classes: "
                         "some class would have no worker")
    device = labels.device
    held = (torch.arange(workers, device=device)[:, None] * c + torch.arange(c, device=device)) % classes
    holds = torch.zeros(classes, workers, dtype=torch.bool, device=device)
    holds[held, torch.arange(workers, device=device)[:, None]] = True               # [C, M]
    holders = holds.sum(dim=1)                                                       # [C]
    # holder_table[k, r] = the r-th worker (in increasing order) that holds class k
    holder_table = torch.argsort((~holds).to(torch.int8), dim=1, stable=True)
    rank, _ = _ranks_within_class(labels, classes, generator)
    owner = holder_table[labels, rank % holders[labels]]
    _require_every_worker(owner, workers, f"label_partition of {labels.numel()} samples")
    return Partition(owner, workers)


def dirichlet_partition(labels, workers: int, alpha: float,
                        generator: torch.Generator) -> Partition:
    """For each class k, proportions p_k ~ Dirichlet(alpha 1_M) (numpy's generator, seeded
    by one ``randint`` draw from ``generator``), and the samples of class k, in a random
    order, split at the cut points floor(n_k (p_k1 + ... + p_kj)): worker j gets the ranks
    in [cut_{j-1}, cut_j). A worker may receive no sample at small alpha (see
    ``Partition.sizes``). ``proportions`` [C, M] are returned with the partition."""
    labels, classes = _checked_labels(labels)
    workers = _positive_int("workers", workers)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0 < alpha < np.inf):
        raise ValueError(f"alpha={alpha!r} must be a finite number > 0")
    device = labels.device
    seed = int(randint(2**62, (1,), generator, "cpu"))
    draws = np.random.default_rng(seed).dirichlet(np.full(workers, float(alpha)), size=classes)
    proportions = torch.as_tensor(draws, dtype=DTYPE, device=device)
    rank, sizes = _ranks_within_class(labels, classes, generator)
    cuts = torch.floor(proportions.cumsum(dim=1) * sizes[:, None].to(DTYPE)).long()
    cuts = torch.minimum(cuts, sizes[:, None])
    cuts[:, -1] = sizes                           # the rounding of cumsum never drops a sample
    owner = torch.searchsorted(cuts[labels], rank[:, None], right=True).squeeze(1)
    return Partition(owner, workers, proportions)


def vertical_split(num_features: int, silos: int,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, tuple[int, ...]]:
    """``(columns [p], blocks)``: ``features[:, columns]`` puts silo j's features in the
    contiguous block of ``blocks[j]`` columns that ``sim.tdcd.Layout`` expects. Blocks
    differ in size by at most one (the first p mod N silos get one more); the columns are
    in their original order, or in a random order drawn from ``generator``."""
    p, silos = _positive_int("num_features", num_features), _positive_int("silos", silos)
    if silos > p:
        raise ValueError(f"silos={silos} exceeds num_features={p}: every silo needs a feature")
    blocks = tuple(p // silos + (j < p % silos) for j in range(silos))
    columns = torch.arange(p) if generator is None else _permutation(p, generator, "cpu")
    return columns, blocks
