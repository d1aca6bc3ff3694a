"""fedbound.sim.data: the bundled data sets and the partitions across workers and silos."""

import gzip
import math
import pickle
import struct
import sys

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fedbound.sim.data import (
    INSTALL_HINT,
    dirichlet_partition,
    held_out,
    iid_partition,
    label_partition,
    load_breast_cancer,
    load_cifar10,
    load_digits,
    load_mnist,
    vertical_split,
)
from fedbound.sim.tdcd import Layout

SETTINGS = settings(max_examples=25, deadline=None)


def gen(seed):
    return torch.Generator().manual_seed(seed)


def random_labels(seed, n, classes):
    """Labels with every class present (the first ``classes`` samples), then random."""
    rest = torch.randint(classes, (n - classes,), generator=gen(seed + 10_000))
    return torch.cat([torch.arange(classes), rest])


def assert_covers_once(partition, n):
    """Every sample in exactly one worker's row of the padded table."""
    table, sizes = partition.table()
    listed = torch.cat([table[i, :sizes[i]] for i in range(partition.workers)])
    assert torch.equal(torch.sort(listed).values, torch.arange(n))
    for i in range(partition.workers):
        assert torch.equal(table[i, :sizes[i]], torch.nonzero(partition.owner == i).flatten())


# ---------------------------------------------------------------- loaders


@pytest.mark.parametrize("loader, name, n, p, classes", [
    (load_digits, "load_digits", 1797, 64, 10),
    (load_breast_cancer, "load_breast_cancer", 569, 30, 2),
])
def test_loaders_standardise_like_sklearns_standard_scaler(loader, name, n, p, classes):
    from sklearn import datasets
    from sklearn.preprocessing import StandardScaler

    raw = getattr(datasets, name)()
    data = loader()
    assert data.features.shape == (n, p) and data.features.dtype == torch.float64
    assert data.labels.dtype == torch.int64 and data.classes == classes
    assert torch.equal(data.labels, torch.as_tensor(raw.target, dtype=torch.int64))
    expected = StandardScaler().fit_transform(raw.data)
    np.testing.assert_allclose(data.features.numpy(), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, loader", [("digits.csv.gz", "load_digits"),
                                          ("breast_cancer.csv", "load_breast_cancer")])
def test_bundled_files_are_read_as_scikit_learn_reads_them(name, loader, monkeypatch, tmp_path):
    """The bundled sets read from scikit-learn's files without importing it: scikit-learn's
    loader's numbers, bit for bit; where the file is not found, that loader itself."""
    import importlib.util
    import subprocess

    from sklearn import datasets

    from fedbound.sim import data as sim_data

    raw = getattr(datasets, loader)()
    table = sim_data._bundled(name, loader)
    assert np.array_equal(table[0], raw.data) and np.array_equal(table[1], raw.target)
    code = ("import sys; from fedbound.sim.data import load_breast_cancer, load_digits; "
            "load_digits(); load_breast_cancer(); print('sklearn' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
    elsewhere = importlib.util.spec_from_loader("sklearn", None, is_package=True)
    elsewhere.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(importlib.util, "find_spec", lambda _name: elsewhere)
    fallback = sim_data._bundled(name, loader)
    assert np.array_equal(fallback[0], raw.data) and np.array_equal(fallback[1], raw.target)


def test_missing_scikit_learn_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn", None)
    with pytest.raises(ImportError, match=r"pip install fedbound\[data\]") as info:
        load_digits()
    assert str(info.value) == INSTALL_HINT and "\n" not in INSTALL_HINT


# ---------------------------------------------------------------- MNIST and CIFAR-10 stand-ins
#
# Tiny files written here in the published formats, byte by byte with struct (IDX) and
# pickle protocol 2 with bytes keys (as Python 2 wrote CIFAR-10's batches): the loaders
# are read against them, never against their own output.


def write_idx(path, array: np.ndarray, *, code=0x08, fmt="B", gz=False):
    header = struct.pack(">BBBB", 0, 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    body = struct.pack(f">{array.size}{fmt}", *array.ravel().tolist())
    data = header + body
    path = path.with_name(path.name + ".gz") if gz else path
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def write_mnist(directory, seed=0, gz=False, n=(30, 12)):
    rng = np.random.default_rng(seed)
    out = {}
    for split, count in zip(("train", "t10k"), n, strict=True):
        images = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, count, dtype=np.uint8)
        write_idx(directory / f"{split}-images-idx3-ubyte", images, gz=gz)
        write_idx(directory / f"{split}-labels-idx1-ubyte", labels, gz=gz)
        out[split] = images, labels
    return out


def write_cifar_batch(path, data: np.ndarray, labels: list[int]):
    path.write_bytes(pickle.dumps({b"batch_label": b"stand-in", b"labels": labels,
                                   b"data": data, b"filenames": [b"x.png"] * len(labels)},
                                  protocol=2))


def write_cifar10(directory, seed=0):
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    batches = {}
    for name, count in [*((f"data_batch_{i}", 3 + i) for i in range(1, 6)), ("test_batch", 7)]:
        data = rng.integers(0, 256, (count, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, count).tolist()
        write_cifar_batch(directory / name, data, labels)
        batches[name] = data, labels
    (directory / "batches.meta").write_bytes(pickle.dumps({b"label_names": [b"airplane"]}, protocol=2))
    return batches


def standardised_columns(x: np.ndarray) -> np.ndarray:
    """Independent of sim.data: numpy, columns to mean 0 and population std 1."""
    x = x.astype(np.float64)
    std = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_mnist_is_read_from_its_idx_files(tmp_path, gz):
    written = write_mnist(tmp_path, gz=gz)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = written[prefix]
        data = load_mnist(tmp_path, split=split)
        assert data.name == f"mnist-{split}" and data.classes == 10 and data.n == len(labels)
        assert data.features.shape == (len(labels), 784) and data.features.dtype == torch.float64
        assert torch.equal(data.labels, torch.as_tensor(labels, dtype=torch.int64))
        # pixel (r, c) of image i is feature 28 r + c: row by row
        columns = np.stack([images[:, r, c] for r in range(28) for c in range(28)], axis=1)
        np.testing.assert_allclose(data.features.numpy(), standardised_columns(columns),
                                   rtol=1e-12, atol=1e-12)


def test_cifar10_is_read_from_its_python_batches(tmp_path):
    batches = write_cifar10(tmp_path / "cifar-10-batches-py")
    train = load_cifar10(tmp_path)  # the archive's sub-directory is found
    assert load_cifar10(tmp_path / "cifar-10-batches-py").labels.tolist() == train.labels.tolist()
    data = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    labels = sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    assert train.name == "cifar10-train" and train.classes == 10 and train.n == 30
    assert train.features.shape == (30, 3072) and train.labels.tolist() == labels
    np.testing.assert_allclose(train.features.numpy(), standardised_columns(data), rtol=1e-12,
                               atol=1e-12)
    test = load_cifar10(tmp_path, split="test")
    assert test.labels.tolist() == batches["test_batch"][1] and test.features.shape == (7, 3072)


def test_a_loaded_stand_in_partitions_like_the_digits(tmp_path):
    write_mnist(tmp_path)
    data = load_mnist(tmp_path)
    assert_covers_once(label_partition(data.labels, 5, 2, gen(0)), data.n)


class Payload:
    """A pickle that would create a file when loaded, if the loader ran its code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def _mnist_broken(directory, how):
    write_mnist(directory)
    images = directory / "train-images-idx3-ubyte"
    labels = directory / "train-labels-idx1-ubyte"
    if how == "missing":
        labels.unlink()
        return labels, r"no train-labels-idx1-ubyte or train-labels-idx1-ubyte\.gz in"
    if how == "magic":
        images.write_bytes(b"\x1f\x8b" + images.read_bytes()[2:])
        return images, "not an IDX file"
    if how == "short":
        images.write_bytes(images.read_bytes()[:-5])
        return images, r"needs 23520 bytes after the header, found 23515"
    if how == "count":
        write_idx(labels, np.zeros(29, np.uint8))
        return labels, "29 labels for 30 images"
    if how == "label":
        write_idx(labels, np.full(30, 10, np.uint8))
        return labels, "labels must be classes 0 to 9; found 10 to 10"
    if how == "dims":
        write_idx(images, np.zeros((30, 784), np.uint8))
        return images, "3 dimensions"
    if how == "gzip":
        labels.unlink()
        path = directory / "train-labels-idx1-ubyte.gz"
        path.write_bytes(b"\x1f\x8bnot gzip at all")
        return path, "cannot be read as gzip"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["missing", "magic", "short", "count", "label", "dims", "gzip"])
def test_a_missing_or_malformed_mnist_file_is_one_line_naming_it(tmp_path, how):
    path, match = _mnist_broken(tmp_path, how)
    error = FileNotFoundError if how == "missing" else ValueError
    with pytest.raises(error, match=match) as info:
        load_mnist(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(path if how != "missing" else tmp_path) in message


def _cifar_broken(directory, how):
    write_cifar10(directory)
    batch = directory / "data_batch_3"
    if how == "missing":
        batch.unlink()
        return batch, FileNotFoundError, r"CIFAR-10 train: no data_batch_3 in"
    if how == "not a pickle":
        batch.write_bytes(b"\x00\x01 hello")
        return batch, ValueError, "not a CIFAR-10 batch"
    if how == "code":
        batch.write_bytes(pickle.dumps(Payload(directory / "ran"), protocol=2))
        return batch, ValueError, r"refers to (builtins|io)\.open"
    if how == "keys":
        batch.write_bytes(pickle.dumps({b"pixels": np.zeros((2, 3072), np.uint8)}, protocol=2))
        return batch, ValueError, "no 'data' and 'labels'"
    if how == "shape":
        write_cifar_batch(batch, np.zeros((2, 3000), np.uint8), [0, 1])
        return batch, ValueError, r"rows of 3072 pixels, found uint8 of shape \(2, 3000\)"
    if how == "count":
        write_cifar_batch(batch, np.zeros((2, 3072), np.uint8), [0])
        return batch, ValueError, "1 labels for 2 images"
    if how == "label":
        write_cifar_batch(batch, np.zeros((2, 3072), np.uint8), [0, -1])
        return batch, ValueError, "found -1 to 0"
    raise AssertionError(how)


@pytest.mark.parametrize("how", ["missing", "not a pickle", "code", "keys", "shape", "count",
                                 "label"])
def test_a_missing_or_malformed_cifar10_batch_is_one_line_naming_it(tmp_path, how):
    path, error, match = _cifar_broken(tmp_path, how)
    with pytest.raises(error, match=match) as info:
        load_cifar10(tmp_path)
    message = str(info.value)
    assert "\n" not in message and str(path.parent if how == "missing" else path) in message
    assert not (tmp_path / "ran").exists()  # the pickle's code did not run


@pytest.mark.parametrize("loader", [load_mnist, load_cifar10])
def test_an_unknown_split_names_the_parameter(loader, tmp_path):
    with pytest.raises(ValueError, match=r"split='validation' must be one of 'train', 'test'"):
        loader(tmp_path, split="validation")


# ---------------------------------------------------------------- horizontal partitions


@SETTINGS
@given(n=st.integers(1, 300), workers=st.integers(1, 40), seed=st.integers(0, 1000))
def test_iid_partition_covers_every_sample_once_with_balanced_sizes(n, workers, seed):
    if workers > n:
        with pytest.raises(ValueError, match="workers"):
            iid_partition(n, workers, gen(seed))
        return
    part = iid_partition(n, workers, gen(seed))
    assert_covers_once(part, n)
    sizes = part.sizes
    assert int(sizes.max()) - int(sizes.min()) <= 1 and int(sizes.sum()) == n


def test_iid_partition_is_uniform_over_assignments():
    """P(sample j on worker i) = 1/M for every j and i (law of a random permutation)."""
    n, M, draws = 6, 3, 3000
    hits = torch.zeros(n, M)
    for seed in range(draws):
        hits[torch.arange(n), iid_partition(n, M, gen(seed)).owner] += 1
    se = math.sqrt((1 / M) * (1 - 1 / M) / draws)
    assert ((hits / draws - 1 / M).abs() <= 5 * se).all(), hits / draws


@SETTINGS
@given(classes=st.integers(2, 8), workers=st.integers(1, 12), c=st.integers(1, 4),
       seed=st.integers(0, 1000))
def test_label_partition_gives_each_worker_its_classes_only(classes, workers, c, seed):
    c = min(c, classes)
    labels = random_labels(seed, 200, classes)
    if workers * c < classes:
        with pytest.raises(ValueError, match="classes_per_worker"):
            label_partition(labels, workers, c, gen(seed))
        return
    part = label_partition(labels, workers, c, gen(seed))
    assert_covers_once(part, labels.numel())
    for i in range(workers):
        allowed = {(i * c + j) % classes for j in range(c)}
        assert set(labels[part.owner == i].tolist()) <= allowed
    for k in range(classes):  # class k dealt evenly among its holders
        holders = [i for i in range(workers) if k in {(i * c + j) % classes for j in range(c)}]
        counts = torch.bincount(part.owner[labels == k], minlength=workers)[holders]
        assert int(counts.max()) - int(counts.min()) <= 1


def test_label_partition_refuses_to_leave_a_worker_empty():
    labels = torch.tensor([0, 1, 1, 1])
    with pytest.raises(ValueError, match="without samples"):
        label_partition(labels, 4, 1, gen(0))  # workers 2 and 3 hold class 0 or 1: too few


def dirichlet_reference(labels, workers, alpha, seed):
    """Independent transcription of the documented recipe: the proportions from numpy
    seeded by the generator's first randint(2**62) draw, and the per-class counts at the
    cut points floor(n_k cumsum p_k)."""
    g = gen(seed)
    numpy_seed = int(torch.randint(2**62, (1,), generator=g))
    classes = int(labels.max()) + 1
    p = np.random.default_rng(numpy_seed).dirichlet(np.full(workers, alpha), size=classes)
    n_k = np.bincount(labels.numpy(), minlength=classes)
    cuts = np.minimum(np.floor(np.cumsum(p, axis=1) * n_k[:, None]).astype(int), n_k[:, None])
    cuts[:, -1] = n_k
    counts = np.diff(np.concatenate([np.zeros((classes, 1), int), cuts], axis=1), axis=1)
    return p, counts


@SETTINGS
@given(classes=st.integers(2, 6), workers=st.integers(1, 10),
       alpha=st.floats(0.05, 50.0), seed=st.integers(0, 1000))
def test_dirichlet_partition_follows_its_proportions_from_the_seed(classes, workers, alpha, seed):
    labels = random_labels(seed, 150, classes)
    part = dirichlet_partition(labels, workers, alpha, gen(seed))
    assert_covers_once(part, labels.numel())
    p, counts = dirichlet_reference(labels, workers, alpha, seed)
    np.testing.assert_array_equal(part.proportions.numpy(), p)
    got = np.zeros((classes, workers), int)
    np.add.at(got, (labels.numpy(), part.owner.numpy()), 1)
    np.testing.assert_array_equal(got, counts)


def fedml_reference(labels, workers, alpha, seed):
    """FedML's balanced split in numpy (the loop of its partition_data, "hetero"), on the
    draws of the first try: class by class, the workers already holding n/M samples get
    proportion 0 and the rest are renormalised; counts at the cut points."""
    g = gen(seed)
    numpy_seed = int(torch.randint(2**62, (1,), generator=g))
    classes, n = int(labels.max()) + 1, labels.numel()
    p = np.random.default_rng(numpy_seed).dirichlet(np.full(workers, alpha), size=classes)
    n_k = np.bincount(labels.numpy(), minlength=classes)
    held, counts = np.zeros(workers), np.zeros((classes, workers), int)
    for k in range(classes):
        q = p[k] * (held < n / workers)
        q = q / q.sum() if q.sum() > 0 else p[k]
        cuts = np.minimum(np.floor(np.cumsum(q) * n_k[k]).astype(int), n_k[k])
        cuts[-1] = n_k[k]
        counts[k] = np.diff(np.concatenate([[0], cuts]))
        held += counts[k]
    return counts


@SETTINGS
@given(classes=st.integers(2, 6), workers=st.integers(2, 10), alpha=st.floats(0.05, 5.0),
       seed=st.integers(0, 1000))
@example(classes=2, workers=6, alpha=1.0, seed=309)  # a cut one ulp below an integer in numpy
def test_balanced_dirichlet_partition_is_fedmls(classes, workers, alpha, seed):
    labels = random_labels(seed, 150, classes)
    part = dirichlet_partition(labels, workers, alpha, gen(seed), balance=True)
    assert_covers_once(part, labels.numel())
    got = np.zeros((classes, workers), int)
    np.add.at(got, (labels.numpy(), part.owner.numpy()), 1)
    np.testing.assert_array_equal(got, fedml_reference(labels, workers, alpha, seed))


def test_dirichlet_min_size_redraws_until_every_worker_has_enough():
    labels = random_labels(3, 600, 10)
    first = dirichlet_partition(labels, 20, 0.1, gen(4))
    assert int(first.sizes.min()) < 10                       # the one draw leaves some short
    part = dirichlet_partition(labels, 20, 0.1, gen(4), min_size=10, balance=True)
    assert int(part.sizes.min()) >= 10
    assert torch.equal(part.owner, dirichlet_partition(labels, 20, 0.1, gen(4), min_size=10,
                                                       balance=True).owner)
    with pytest.raises(ValueError, match="min_size=200"):
        dirichlet_partition(labels, 20, 0.1, gen(4), min_size=200)


def test_dirichlet_proportions_have_the_dirichlet_mean_and_variance():
    """E p = 1/M and Var p = (1/M)(1 - 1/M)/(M alpha + 1) for Dirichlet(alpha 1_M)."""
    M, alpha, classes, draws = 4, 0.5, 10, 400
    labels = torch.arange(classes)
    p = torch.stack([dirichlet_partition(labels, M, alpha, gen(s)).proportions
                     for s in range(draws)]).reshape(-1, M)
    mean, var = 1 / M, (1 / M) * (1 - 1 / M) / (M * alpha + 1)
    count = p.shape[0]
    assert ((p.mean(0) - mean).abs() <= 5 * math.sqrt(var / count)).all()
    # the sample variance of a Beta(alpha, (M - 1) alpha) marginal, within 15%
    assert ((p.var(0) / var - 1).abs() <= 0.15).all(), p.var(0) / var


@pytest.mark.parametrize("make", [
    lambda labels, g: iid_partition(labels.numel(), 7, g),
    lambda labels, g: label_partition(labels, 7, 2, g),
    lambda labels, g: dirichlet_partition(labels, 7, 0.3, g),
])
def test_partitions_same_seed_same_bits_other_seed_other_partition(make):
    labels = random_labels(0, 300, 5)
    a, b, c = make(labels, gen(3)), make(labels, gen(3)), make(labels, gen(4))
    assert torch.equal(a.owner, b.owner)
    if a.proportions is not None:
        assert torch.equal(a.proportions, b.proportions)
    assert not torch.equal(a.owner, c.owner)


@pytest.mark.parametrize("call, match", [
    (lambda: iid_partition(0, 2, gen(0)), "n=0"),
    (lambda: iid_partition(5, 0, gen(0)), "workers=0"),
    (lambda: label_partition(torch.tensor([0.5, 1.0]), 2, 1, gen(0)), "labels"),
    (lambda: label_partition(torch.tensor([0, 1]), 2, 3, gen(0)), "classes_per_worker=3"),
    (lambda: dirichlet_partition(torch.tensor([0, 1]), 2, 0.0, gen(0)), "alpha=0.0"),
    (lambda: dirichlet_partition(torch.tensor([0, 1]), 2, math.inf, gen(0)), "alpha=inf"),
    (lambda: vertical_split(3, 4), "silos=4"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------- vertical split


@SETTINGS
@given(p=st.integers(1, 80), silos=st.integers(1, 12), seed=st.one_of(st.none(), st.integers(0, 99)))
def test_vertical_split_gives_a_tdcd_layout_of_every_column_once(p, silos, seed):
    if silos > p:
        return
    columns, blocks = vertical_split(p, silos, None if seed is None else gen(seed))
    assert torch.equal(torch.sort(columns).values, torch.arange(p))
    assert sum(blocks) == p and max(blocks) - min(blocks) <= 1 and len(blocks) == silos
    if seed is None:
        assert torch.equal(columns, torch.arange(p))
    assert Layout(blocks, (1,) * silos, 4, 1).D == p


@pytest.mark.parametrize("loader", [load_digits, load_breast_cancer])
def test_held_out_is_a_disjoint_split_that_keeps_each_class_share(loader):
    """held_out: every sample on exactly one side, round(share n_k) of class k held out, the
    training samples in their original order, the same split from the same seed."""
    data = loader()
    train, test = held_out(data, 0.2, torch.Generator().manual_seed(3))
    counts = torch.bincount(data.labels, minlength=data.classes)
    assert torch.equal(torch.bincount(test.labels, minlength=data.classes),
                       torch.round(0.2 * counts.double()).long())
    assert train.n + test.n == data.n and train.classes == test.classes == data.classes
    rows = {tuple(r) for r in torch.cat([train.features, test.features]).tolist()}
    assert len(rows) == len({tuple(r) for r in data.features.tolist()})
    keep = torch.tensor([tuple(r) not in {tuple(t) for t in test.features.tolist()}
                         for r in data.features.tolist()])
    assert torch.equal(train.features, data.features[keep])
    again, _ = held_out(data, 0.2, torch.Generator().manual_seed(3))
    other, _ = held_out(data, 0.2, torch.Generator().manual_seed(4))
    assert torch.equal(again.features, train.features)
    assert not torch.equal(other.features, train.features)


@pytest.mark.parametrize("share", [0.0, 1.0, 1, "0.2", float("nan")])
def test_held_out_refuses_a_share_outside_zero_and_one(share):
    with pytest.raises(ValueError, match="share="):
        held_out(load_breast_cancer(), share, torch.Generator())
