"""Real data that installs with a package (no download), and its partitions across workers.

Loaders: :func:`load_digits` (scikit-learn's 8x8 handwritten digits, 1797 samples, 10
classes: a small stand-in for MNIST) and :func:`load_breast_cancer` (569 samples, 30
features, 2 classes: a tabular task). Both need the optional extra ``fedbound[data]``
(scikit-learn); features come back standardised, float64, labels int64.

Larger sets, read from a directory you give (fedbound downloads nothing and needs no
torchvision), as the same :class:`Dataset`:

- :func:`load_mnist`: MNIST in its standard IDX files (LeCun, Cortes & Burges), plain or
  gzipped: ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (``split="train"``,
  60000 images) or ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``
  (``split="test"``, 10000), each file also found with the suffix ``.gz``. Images of
  28x28 pixels are flattened row by row to 784 features. (Fashion-MNIST ships the same
  files and loads the same way.)
- :func:`load_cifar10`: CIFAR-10 in its "python version" (Krizhevsky 2009): the pickled
  batches ``data_batch_1`` to ``data_batch_5`` (``split="train"``, 50000 images) or
  ``test_batch`` (``split="test"``, 10000), in the directory given or in its
  ``cifar-10-batches-py`` sub-directory (the archive's). Each image's 3072 features are in
  the file's order: the 1024 red, then green, then blue pixels of 32x32, row by row. The
  batches are unpickled with only numpy's array reconstruction allowed (a pickle can run
  code: any other object in the file is refused).

Both give 10 classes; features standardised, float64, labels int64, like the bundled sets.
A missing file raises FileNotFoundError and a malformed one ValueError, each in one line
naming the path and what is wrong; a file the environment fails to read (permission
denied, an I/O error) raises the OSError of the system, naming the path. A file is read
no further than its header declares (:func:`read_idx`), and :func:`files_shape` gives the
data's size from the headers alone, to estimate a footprint before anything is read.

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
- :func:`group_label_partition`: disjoint label sets per group: the classes are split into
  G contiguous blocks, group g's clients hold only the samples of block g, dealt at random
  among them (the label-disjoint groups of Ali & Arafa 2025, Section IV, Fig. 5a; the
  unequal data shares by group of Castiglia et al. 2021, Section 6).

:class:`ShardRows` draws the mini-batches of every worker from its own samples.

Vertical (across silos, for TDCD): :func:`vertical_split` gives the column order and the
block sizes D_j of a ``sim.tdcd.Layout``.

Randomness comes only from the ``torch.Generator`` passed in (the Dirichlet draws from a
numpy generator seeded by one draw from it): the same seed gives the same partition.
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import pickle
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedbound.sim.problems import DTYPE, randint

INSTALL_HINT = "scikit-learn is needed for fedbound's bundled data sets: pip install fedbound[data]"


def _sklearn_datasets():
    """``sklearn.datasets``, or ImportError with the one-line install hint."""
    try:
        from sklearn import datasets
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return datasets


def _bundled(name: str, loader: str) -> tuple[np.ndarray, np.ndarray]:
    """(data, target) of scikit-learn's bundled set in its file ``name``: read as its loader
    ``sklearn.datasets.<loader>`` reads it (comma-separated rows, the label last; one header
    line in ``breast_cancer.csv``), from where scikit-learn installs it, found without
    importing scikit-learn (about 1 s of a short command's start); the loader itself where
    the file is not there. ImportError with the install hint without scikit-learn."""
    try:
        spec = importlib.util.find_spec("sklearn")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(INSTALL_HINT)
    path = Path(next(iter(spec.submodule_search_locations))) / "datasets" / "data" / name
    if not path.is_file():
        bunch = getattr(_sklearn_datasets(), loader)()
        return np.asarray(bunch.data), np.asarray(bunch.target)
    table = np.loadtxt(path, delimiter=",", skiprows=0 if name.endswith(".gz") else 1)
    return table[:, :-1], table[:, -1].astype(int)


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


def _dataset(name: str, table: tuple[np.ndarray, np.ndarray], device) -> Dataset:
    features = torch.as_tensor(table[0], dtype=DTYPE)
    labels = torch.as_tensor(table[1], dtype=torch.int64)
    classes = int(labels.max()) + 1
    return Dataset(name, standardised(features).to(device), labels.to(device), classes)


def load_digits(*, device=None) -> Dataset:
    """scikit-learn's handwritten digits: 1797 images of 8x8 pixels flattened row by row
    to 64 features (``sim.neural.small_cnn`` unflattens them), 10 classes."""
    return _dataset("digits", _bundled("digits.csv.gz", "load_digits"), device)


def load_breast_cancer(*, device=None) -> Dataset:
    """scikit-learn's Wisconsin breast cancer data: 569 samples, 30 features, 2 classes."""
    return _dataset("breast_cancer", _bundled("breast_cancer.csv", "load_breast_cancer"), device)


# ---------------------------------------------------------------------- MNIST, CIFAR-10

#: the classes of MNIST and of CIFAR-10
TEN = 10
#: the files of each split: MNIST's (images, labels) and CIFAR-10's batches
MNIST_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
               "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
CIFAR10_FILES = {"train": tuple(f"data_batch_{i}" for i in range(1, 6)), "test": ("test_batch",)}
CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_FEATURES = 3 * 32 * 32
#: the element types of the IDX format, by their code in the magic number
IDX_TYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _split_files(split, files: dict) -> tuple:
    if split not in files:
        raise ValueError(f"split={split!r} must be one of {', '.join(map(repr, files))}")
    return files[split]


def _check_labels(labels: np.ndarray, images: int, path: Path) -> None:
    """``labels`` must be [images] classes in [0, 10); ValueError naming ``path``."""
    if labels.shape != (images,):
        raise ValueError(f"{path}: {labels.size} labels for {images} images")
    if labels.size == 0 or labels.min() < 0 or labels.max() >= TEN:
        found = "none" if labels.size == 0 else f"{labels.min()} to {labels.max()}"
        raise ValueError(f"{path}: labels must be classes 0 to {TEN - 1}; found {found}")


def _images_dataset(name: str, images: np.ndarray, labels: np.ndarray, device) -> Dataset:
    """The :class:`Dataset` of ``images`` [n, ...] (flattened) and checked ``labels`` [n]."""
    features = torch.from_numpy(images.reshape(images.shape[0], -1).astype(np.float64))
    return Dataset(name, standardised(features).to(device),
                   torch.from_numpy(labels.astype(np.int64)).to(device), TEN)


def _existing(directory, name: str, what: str) -> Path:
    """``directory/name``, else ``directory/name.gz``; FileNotFoundError naming both."""
    for path in (Path(directory) / name, Path(directory) / f"{name}.gz"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"{what}: no {name} or {name}.gz in {directory}")


def _idx_header(f, path: Path) -> tuple[np.dtype, tuple[int, ...], int]:
    """(element type, shape, bytes of the header) read from the start of the IDX stream
    ``f``; ValueError naming ``path`` when it is not an IDX header."""
    head = f.read(4)
    if len(head) < 4 or head[:2] != b"\0\0" or head[2] not in IDX_TYPES or head[3] == 0:
        raise ValueError(f"{path}: not an IDX file (magic number {head[:4].hex() or 'missing'}: "
                         "expected 0000, a type code among 08 09 0b 0c 0d 0e, and 1 or more dimensions)")
    ndim, dtype = head[3], np.dtype(IDX_TYPES[head[2]])
    sizes = f.read(4 * ndim)
    if len(sizes) < 4 * ndim:
        raise ValueError(f"{path}: IDX header cut short ({ndim} dimensions announced)")
    return dtype, tuple(int(x) for x in np.frombuffer(sizes, ">u4", ndim)), 4 + 4 * ndim


@contextmanager
def _opened(path: Path) -> Iterator:
    """The binary stream of ``path``, inflated as it is read when its name ends in ``.gz``.
    An ``OSError`` of the environment (permission denied, an I/O error) goes through as it
    is, naming the path once (exit 74 in the CLI); what is not gzip, or a gzip stream cut
    short, is a ValueError naming it."""
    gz = path.suffix == ".gz"
    with _named(path):
        f = gzip.open(path, "rb") if gz else open(path, "rb")  # noqa: SIM115 - closed below
        try:
            yield f
        except (gzip.BadGzipFile, EOFError, zlib.error) as e:
            raise ValueError(f"{path}: cannot be read as gzip: {e}") from None
        finally:
            f.close()


@contextmanager
def _named(path: Path) -> Iterator[None]:
    """An ``OSError`` of the environment inside the block names ``path`` (a failed read, EIO
    say, names no file of its own; a message without one would blame standard output)."""
    try:
        yield
    except OSError as e:
        if e.filename is not None or isinstance(e, gzip.BadGzipFile):
            raise
        raise OSError(e.errno, e.strerror or str(e), str(path)) from None


def idx_shape(path) -> tuple[int, ...]:
    """The shape an IDX file (plain or gzipped) declares in its header, read without its
    elements (a few bytes inflated): what a footprint is estimated from before any array is
    built. ValueError naming ``path`` when it has no IDX header."""
    path = Path(path)
    with _opened(path) as f:
        return _idx_header(f, path)[1]


#: bytes read (and inflated) at a time
CHUNK = 1 << 20


def read_idx(path) -> np.ndarray:
    """The array of an IDX file (plain, or gzipped when its name ends in ``.gz``): two zero
    bytes, the element type's code, the number of dimensions d, d sizes (big-endian
    32-bit), then the elements, big-endian, row-major. Read as a capped stream, limits
    before bytes: the header first, then the elements it declares and one byte more, never
    the rest. A plain file's size must be what the header declares; a gzipped file whose
    trailer declares another inflated size (a file that inflates to far more, or one of
    several gzip members) is inflated once, up to the header's size and a byte, and dropped
    before its elements are kept (a 600 KB file inflating to 620 MB is refused having kept
    nothing). ValueError naming ``path`` when the file is not that; OSError naming it when
    the environment fails to read it (permission denied, an I/O error)."""
    path = Path(path)
    with _opened(path) as f:
        dtype, shape, header = _idx_header(f, path)
        count = int(np.prod(shape, dtype=object))
        need = count * dtype.itemsize

        def wrong(found) -> ValueError:
            return ValueError(f"{path}: IDX size {'x'.join(map(str, shape))} of {dtype.itemsize}-"
                              f"byte elements needs {need} bytes after the header, found {found}")

        if path.suffix != ".gz":
            if os.fstat(f.fileno()).st_size != header + need:
                raise wrong(os.fstat(f.fileno()).st_size - header)
        elif _gzip_size(path) != (header + need) % 2**32:  # a bomb, or several gzip members
            with _opened(path) as g:  # inflated and dropped: refused having kept nothing
                got = _drained(g, header + need + 1) - header
            if got != need:
                raise wrong("more" if got > need else got)
        data = bytearray(need)
        view, got = memoryview(data), 0
        while got < need:
            n = f.readinto(view[got:got + CHUNK])
            if not n:
                break
            got += n
        if got < need or f.read(1):
            raise wrong("more" if got == need else got)
    return np.frombuffer(data, dtype, count).reshape(shape)


def _drained(f, most: int) -> int:
    """Bytes read from the stream ``f`` and dropped, at most ``most``."""
    got = 0
    while got < most:
        chunk = f.read(min(CHUNK, most - got))
        if not chunk:
            break
        got += len(chunk)
    return got


def _gzip_size(path: Path) -> int | None:
    """The inflated size (modulo 2^32) that the gzip file ``path`` declares in its trailer
    (RFC 1952's ISIZE: its last 4 bytes, little-endian; the last member's, for a file of
    several), None when it is too short to hold one."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 18:  # the smallest gzip member: a 10-byte header and the 8-byte trailer
            return None
        f.seek(size - 4)
        return int.from_bytes(f.read(4), "little")


def load_mnist(directory, *, split: str = "train", device=None) -> Dataset:
    """MNIST from its IDX files in ``directory`` (module docstring): 784 features (28x28
    flattened row by row), standardised, 10 classes."""
    image_name, label_name = _split_files(split, MNIST_FILES)
    image_path = _existing(directory, image_name, f"MNIST {split} images")
    label_path = _existing(directory, label_name, f"MNIST {split} labels")
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.ndim != 3:
        raise ValueError(f"{image_path}: MNIST images are an IDX array of 3 dimensions "
                         f"(n, rows, columns), found {images.ndim}")
    if labels.ndim != 1:
        raise ValueError(f"{label_path}: MNIST labels are an IDX array of 1 dimension, "
                         f"found {labels.ndim}")
    _check_labels(labels, images.shape[0], label_path)
    return _images_dataset(f"mnist-{split}", images, labels, device)


class _ArraysOnly(pickle.Unpickler):
    """An unpickler that rebuilds numpy arrays and nothing else (no code runs)."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")}

    def find_class(self, module, name):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"it refers to {module}.{name}, which a CIFAR-10 batch "
                                         "does not hold")
        return super().find_class(module, name)


def _cifar10_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(data [n, 3072] uint8, labels [n]) of one pickled batch; ValueError naming ``path``."""
    try:
        with _named(path), open(path, "rb") as f:
            batch = _ArraysOnly(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError,
            AttributeError, ImportError) as e:
        raise ValueError(f"{path}: not a CIFAR-10 batch (a pickle): {e}") from None
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: not a CIFAR-10 batch: a {type(batch).__name__}, not a dict")
    batch = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or "labels" not in batch:
        raise ValueError(f"{path}: not a CIFAR-10 batch: no 'data' and 'labels' among its keys "
                         f"{sorted(map(str, batch))}")
    data, labels = np.asarray(batch["data"]), np.asarray(batch["labels"])
    if data.ndim != 2 or data.shape[1] != CIFAR10_FEATURES or data.dtype != np.uint8:
        raise ValueError(f"{path}: CIFAR-10 data must be uint8 rows of {CIFAR10_FEATURES} "
                         f"pixels, found {data.dtype} of shape {data.shape}")
    if labels.dtype.kind not in "iu":
        raise ValueError(f"{path}: CIFAR-10 labels must be integers, found {labels.dtype}")
    _check_labels(labels, data.shape[0], path)
    return data, labels


def _cifar10_paths(directory, split: str) -> list[Path]:
    """The batches of ``split`` in ``directory`` or its ``cifar-10-batches-py``;
    FileNotFoundError naming the first one missing."""
    names = _split_files(split, CIFAR10_FILES)
    root = Path(directory)
    if not (root / names[0]).is_file() and (root / CIFAR10_DIR).is_dir():
        root = root / CIFAR10_DIR
    paths = []
    for name in names:
        if not (root / name).is_file():
            raise FileNotFoundError(f"CIFAR-10 {split}: no {name} in {root}")
        paths.append(root / name)
    return paths


def files_shape(name: str, directory, *, split: str = "train") -> tuple[int, int]:
    """(samples, features) of ``name`` ("mnist" or "cifar10") in ``directory``, from what the
    files say of their size, without reading their elements: MNIST's from the IDX header of
    its images (a few bytes, inflated where gzipped), CIFAR-10's at most (a batch pickles
    each sample's 3072 pixels as bytes, so the batches' total size bounds the samples). What
    a footprint is estimated from before any array is built; the loaders then read what the
    headers declare, and no more (:func:`read_idx`). FileNotFoundError or ValueError naming
    the file, as the loaders."""
    if name == "mnist":
        image_name, _ = _split_files(split, MNIST_FILES)
        shape = idx_shape(_existing(directory, image_name, f"MNIST {split} images"))
        return shape[0], int(np.prod(shape[1:], dtype=object))
    if name == "cifar10":
        size = sum(os.stat(path).st_size for path in _cifar10_paths(directory, split))
        return size // CIFAR10_FEATURES, CIFAR10_FEATURES
    raise ValueError(f"name={name!r} must be 'mnist' or 'cifar10'")


def load_cifar10(directory, *, split: str = "train", device=None) -> Dataset:
    """CIFAR-10 from its pickled python batches in ``directory`` or its
    ``cifar-10-batches-py`` (module docstring): 3072 features, standardised, 10 classes."""
    batches = [_cifar10_batch(path) for path in _cifar10_paths(directory, split)]
    return _images_dataset(f"cifar10-{split}", np.concatenate([d for d, _ in batches]),
                           np.concatenate([lab for _, lab in batches]), device)


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


class ShardRows:
    """The mini-batches of every worker from its own samples: called on uniform draws ``u``
    [..., M, b] on [0, 1), entry [..., i, j] is worker i's sample of rank
    min(floor(u n_i), n_i - 1) in increasing index order (row i of :meth:`Partition.table`),
    so each worker draws uniformly with replacement from its own n_i samples. Built once
    per run (the table), then a few element-wise operations and one gather per call.
    Every worker needs a sample: ValueError naming the empty ones."""

    def __init__(self, partition: Partition, device=None):
        _require_every_worker(partition.owner, partition.workers, "the partition")
        table, sizes = partition.table()
        device = partition.owner.device if device is None else torch.device(device)
        self.workers = partition.workers
        self.sizes = sizes.to(device)                                       # [M] n_i
        self.order = torch.argsort(partition.owner, stable=True).to(device)  # worker by worker
        self.start = (self.sizes.cumsum(0) - self.sizes)[:, None]           # [M, 1]
        self.table = table.to(device)                                       # [M, n_max]

    def __call__(self, u: torch.Tensor) -> torch.Tensor:
        """Sample indices [..., M, b] (int64) for the draws ``u`` [..., M, b]."""
        if u.ndim < 2 or u.shape[-2] != self.workers:
            raise ValueError(f"draws must have shape [..., M={self.workers}, b], got {tuple(u.shape)}")
        sizes = self.sizes[:, None]
        slot = torch.minimum(torch.floor(u * sizes).long(), sizes - 1)
        return self.order[slot.add_(self.start)]


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


def held_out(data: Dataset, share: float, generator: torch.Generator) -> tuple[Dataset, Dataset]:
    """``(train, test)``: ``data`` split at random within each class, the first
    round(``share`` n_k) samples of class k (in a uniformly random order) held out for
    testing, the rest kept in their original order for training (a test set for the
    accuracy the papers plot, where a bundled set has none). Features keep the
    standardisation of the whole set."""
    if not (isinstance(share, float) and 0.0 < share < 1.0):
        raise ValueError(f"share={share!r} must be a float strictly between 0 and 1")
    labels = data.labels
    rank, sizes = _ranks_within_class(labels.cpu(), data.classes, generator)
    test = (rank < torch.round(share * sizes.to(DTYPE)).long()[labels.cpu()]).to(labels.device)
    if test.all() or not test.any():
        raise ValueError(f"share={share} leaves no sample on one side of the split")
    return tuple(Dataset(f"{data.name} ({part})", data.features[keep], labels[keep], data.classes)
                 for part, keep in (("train", ~test), ("test", test)))


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


#: draws :func:`dirichlet_partition` makes before it gives up on ``min_size``
DIRICHLET_TRIES = 100


def dirichlet_partition(labels, workers: int, alpha: float, generator: torch.Generator, *,
                        min_size: int = 0, balance: bool = False) -> Partition:
    """For each class k, proportions p_k ~ Dirichlet(alpha 1_M) (numpy's generator, seeded
    by one ``randint`` draw from ``generator``), and the samples of class k, in a random
    order, split at the cut points floor(n_k (p_k1 + ... + p_kj)): worker j gets the ranks
    in [cut_{j-1}, cut_j). A worker may receive no sample at small alpha (see
    ``Partition.sizes``). ``proportions`` [C, M] are returned with the partition.

    FedML's partition (He et al. 2020, ``partition_data``, "hetero"; the one Ali & Arafa
    2025, Section IV, follow), as options: ``balance`` gives the classes in turn, k = 0, 1,
    ..., and sets p_kj to 0 (then renormalises) for every worker j already holding at least
    n/M samples (``proportions`` are then these effective ones); ``min_size`` redraws the
    whole partition (proportions and orders, from ``generator``) until every worker holds
    at least ``min_size`` samples (FedML: 10), at most :data:`DIRICHLET_TRIES` times, then
    ValueError. The defaults draw once, unbalanced."""
    labels, classes = _checked_labels(labels)
    workers = _positive_int("workers", workers)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (0 < alpha < np.inf):
        raise ValueError(f"alpha={alpha!r} must be a finite number > 0")
    if isinstance(min_size, bool) or not isinstance(min_size, (int, np.integer)) or min_size < 0:
        raise ValueError(f"min_size={min_size!r} must be an integer >= 0")
    for _ in range(DIRICHLET_TRIES if min_size else 1):
        partition = _dirichlet_draw(labels, classes, workers, float(alpha), generator, balance)
        if int(partition.sizes.min()) >= min_size:
            return partition
    raise ValueError(f"dirichlet_partition: no draw of {DIRICHLET_TRIES} left every one of the "
                     f"{workers} workers min_size={min_size} samples of {labels.numel()} at "
                     f"alpha={alpha}: a larger alpha, fewer workers or a smaller min_size")


def _dirichlet_draw(labels: torch.Tensor, classes: int, workers: int, alpha: float,
                    generator: torch.Generator, balance: bool) -> Partition:
    """One draw of :func:`dirichlet_partition`."""
    device = labels.device
    seed = int(randint(2**62, (1,), generator, "cpu"))
    draws = np.random.default_rng(seed).dirichlet(np.full(workers, alpha), size=classes)
    rank, sizes = _ranks_within_class(labels, classes, generator)
    counts = sizes.cpu().numpy()
    if balance:
        draws = _balanced(draws, counts, labels.numel() / workers)
    owner = torch.searchsorted(torch.as_tensor(_cuts(draws, counts), device=device)[labels],
                               rank[:, None], right=True).squeeze(1)
    return Partition(owner, workers, torch.as_tensor(draws, dtype=DTYPE, device=device))


def _cuts(proportions: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """[C, M] int64: the cut points floor(n_k (p_k1 + ... + p_kj)), the last one n_k (the
    rounding of the sum never drops a sample), in numpy's float64 arithmetic as FedML's
    ``partition_data`` computes them (a cut at an integer is where one ulp moves a sample)."""
    cuts = np.minimum(np.floor(np.cumsum(proportions, axis=-1) * sizes[..., None]).astype(np.int64),
                      sizes[..., None])
    cuts[..., -1] = sizes
    return cuts


def _balanced(proportions: np.ndarray, sizes: np.ndarray, cap: float) -> np.ndarray:
    """FedML's cap: class by class, p_kj = 0 for the workers already holding >= ``cap``
    samples, renormalised (kept as drawn if that leaves no worker); the counts a class
    gives are those of the cut points of :func:`dirichlet_partition`."""
    held = np.zeros(proportions.shape[1])
    out = proportions.copy()
    for k in range(proportions.shape[0]):  # sequential in the classes, as FedML's loop
        open_ = proportions[k] * (held < cap)
        if open_.sum() > 0:
            out[k] = open_ / open_.sum()
        held += np.diff(_cuts(out[k], sizes[k]), prepend=0)
    return out


def group_label_partition(labels, sizes, generator: torch.Generator) -> Partition:
    """Disjoint label sets per group: with C classes and G = len(``sizes``) groups, group g
    holds the classes floor(g C/G) .. floor((g+1) C/G) - 1, and its samples are dealt in a
    random order round-robin among its ``sizes[g]`` clients, workers sum(sizes[:g]) ..
    sum(sizes[:g+1]) - 1 (so within a group the clients are i.i.d.; across groups no label
    is shared). Needs G <= C and at least sizes[g] samples in group g's classes."""
    labels, classes = _checked_labels(labels)
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) == 0:
        raise ValueError(f"sizes={sizes!r} must be a non-empty sequence of group sizes")
    sizes = [_positive_int(f"sizes[{g}]", s) for g, s in enumerate(sizes)]
    groups, device = len(sizes), labels.device
    if groups > classes:
        raise ValueError(f"sizes has {groups} groups but the labels have {classes} classes: "
                         "disjoint label sets need at least one class per group")
    group_of_class = torch.arange(classes, device=device) * groups // classes   # block g
    count = torch.tensor(sizes, device=device)
    start = count.cumsum(0) - count
    group = group_of_class[labels]
    perm = _permutation(labels.numel(), generator, device)
    order = perm[torch.argsort(group[perm], stable=True)]
    held = torch.bincount(group, minlength=groups)
    for g in range(groups):
        if int(held[g]) < sizes[g]:
            raise ValueError(f"sizes[{g}]={sizes[g]}: group {g}'s classes hold {int(held[g])} "
                             "samples, fewer than its clients")
    first = held.cumsum(0) - held
    rank = torch.empty_like(labels)
    rank[order] = torch.arange(labels.numel(), device=device) - first[group[order]]
    owner = start[group] + rank % count[group]
    return Partition(owner, sum(sizes))


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
