"""A federated problem from names: a data set, a model and a split of the data across the
clients of groups, the setting of a paper's experiment in one call.

:func:`federated_problem` returns the problem the simulators take (``sim.hfl.run_hfl``,
``sim.mllsgd.run_mllsgd``; ``sim.afl.run_afl`` for the client-indexed splits) and a start
x_1. The splits, over M = sum(sizes) clients numbered group after group:

- ``"iid"``: every client samples the whole data set (one shared ``Problem``: the i.i.d.
  clients of the theorems, and the simulators' numbers before client-indexed problems);
- ``"shards"``: disjoint random shards of (almost) equal size (``sim.data.iid_partition``);
- ``("dirichlet", beta)``: Dirichlet(beta) proportions of every class over the clients
  (``sim.data.dirichlet_partition`` of Hsu, Qi & Brown 2019, redrawn until every client
  holds a sample);
- ``("fedml", beta)``: the same with FedML's balancing and redraws until every client
  holds 10 samples (``dirichlet_partition(..., min_size=10, balance=True)``), the partition
  Ali & Arafa 2025, Section IV, follow (beta = 0.1 in their non-i.i.d. runs);
- ``("labels", k)``: k classes per client (``sim.data.label_partition``; Yang et al. 2022,
  Section 5, their p);
- ``"group_labels"``: disjoint label sets per group (``sim.data.group_label_partition``;
  Ali & Arafa 2025, Fig. 5a).

Every split but ``"iid"`` gives a ``sim.clients.ClientProblem``: client k draws its
mini-batches from its own shard. :func:`parse_split` reads a split written as text
(``"dirichlet:0.5"``, ``"labels:2"``: the spelling of the command line).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import torch

from fedbound.sim.clients import LogisticClients
from fedbound.sim.data import (
    Dataset,
    Partition,
    dirichlet_partition,
    group_label_partition,
    iid_partition,
    label_partition,
    load_breast_cancer,
    load_cifar10,
    load_digits,
    load_mnist,
)
from fedbound.sim.neural import NeuralClients, NeuralProblem, mlp, small_cnn
from fedbound.sim.problems import DTYPE, LogisticRegression, Problem

DATASETS = ("digits", "breast_cancer", "mnist", "cifar10")
MODELS = ("logistic", "mlp", "cnn")
#: the image shape (colours, height, width) of each data set's flat features, for the CNN
IMAGES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "cifar10": (3, 32, 32)}


class Federation(NamedTuple):
    """What :func:`federated_problem` builds: the ``problem`` and a start ``x1`` [dim]."""

    problem: Problem
    x1: torch.Tensor


def dataset(name: str, data_dir=None, device=None) -> Dataset:
    """The data set ``name`` (:data:`DATASETS`): the bundled ones, or MNIST and CIFAR-10 read
    from ``data_dir`` (``sim.data.load_mnist``, ``sim.data.load_cifar10``)."""
    if name in ("digits", "breast_cancer"):
        return (load_digits if name == "digits" else load_breast_cancer)(device=device)
    if name in ("mnist", "cifar10"):
        if data_dir is None:
            raise ValueError(f"data={name!r} is read from files: give data_dir, the directory "
                             "that holds them")
        loader = load_mnist if name == "mnist" else load_cifar10
        return loader(Path(data_dir), device=device)
    raise ValueError(f"data={name!r} must be one of {DATASETS} or a sim.data.Dataset")


#: the splits as text, for :func:`parse_split` and its messages
SPLIT_SPELLINGS = ("iid", "shards", "dirichlet:BETA", "fedml:BETA", "labels:K", "group_labels")


def parse_split(text: str):
    """The split (module docstring) written as text: ``"iid"``, ``"shards"``,
    ``"group_labels"``, ``"dirichlet:BETA"`` and ``"fedml:BETA"`` (BETA a finite number > 0)
    or ``"labels:K"`` (K an integer >= 1). ValueError naming ``split`` and the rule otherwise.

    >>> parse_split("dirichlet:0.5"), parse_split("labels:2"), parse_split("iid")
    (('dirichlet', 0.5), ('labels', 2), 'iid')
    """
    name, sep, value = str(text).strip().partition(":")
    if not sep and name in ("iid", "shards", "group_labels"):
        return name
    if sep and name in ("dirichlet", "fedml"):
        try:
            beta = float(value)
        except ValueError:
            beta = math.nan
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"split={text!r}: the Dirichlet concentration BETA of {name}:BETA "
                             "must be a finite number > 0")
        return (name, beta)
    if sep and name == "labels":
        if not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"split={text!r}: the classes per client K of labels:K must be an "
                             "integer >= 1")
        return (name, int(value))
    raise ValueError(f"split={text!r} must be one of {', '.join(SPLIT_SPELLINGS)}")


def partition_of(split, labels: torch.Tensor, sizes: Sequence[int],
                 generator: torch.Generator) -> Partition | None:
    """The partition of the split (module docstring) over sum(``sizes``) clients; None for
    ``"iid"``."""
    M = sum(sizes)
    if split == "iid":
        return None
    if split == "shards":
        return iid_partition(labels.numel(), M, generator)
    if split == "group_labels":
        return group_label_partition(labels, sizes, generator)
    if isinstance(split, (tuple, list)) and len(split) == 2 and split[0] in ("dirichlet", "fedml"):
        fedml = split[0] == "fedml"
        return dirichlet_partition(labels, M, split[1], generator, min_size=10 if fedml else 1,
                                   balance=fedml)
    if isinstance(split, (tuple, list)) and len(split) == 2 and split[0] == "labels":
        return label_partition(labels, M, split[1], generator)
    raise ValueError(f"split={split!r} must be 'iid', 'shards', ('dirichlet', beta), "
                     "('fedml', beta), ('labels', k) or 'group_labels'")


def network(model: str, data: Dataset, name: str, hidden: Sequence[int]) -> torch.nn.Module:
    """The module of ``model`` for ``data``: a linear layer (multinomial logistic regression),
    :func:`sim.neural.mlp` or :func:`sim.neural.small_cnn`."""
    features = data.features.shape[1]
    if model == "logistic":
        return torch.nn.Linear(features, data.classes)
    if model == "mlp":
        return mlp(features, tuple(hidden), data.classes)
    if model == "cnn":
        if name not in IMAGES:
            raise ValueError(f"model='cnn' needs images: data={name!r} is not one of "
                             f"{tuple(IMAGES)}")
        return small_cnn(data.classes, image=IMAGES[name])
    raise ValueError(f"model={model!r} must be one of {MODELS}")


def parameter_count(model: str, data: Dataset, name: str, hidden: Sequence[int]) -> int:
    """The parameters of ``model`` on ``data`` (the dimension of x), counted on torch's meta
    device: nothing is allocated (for a resource check before :func:`federated_problem`)."""
    if model == "logistic" and data.classes == 2:
        return int(data.features.shape[1])
    with torch.device("meta"):
        return sum(p.numel() for p in network(model, data, name, hidden).parameters())


def federated_problem(data, model: str = "logistic", split="iid", sizes: Sequence[int] = (10,),
                      *, seed: int = 0, batch: int = 1, weights: str = "data",
                      hidden: Sequence[int] = (32,), data_dir=None, device=None,
                      chunk_size: int | None = None) -> Federation:
    """The problem of ``model`` on ``data`` split by ``split`` over the clients of groups of
    ``sizes`` (one group of M clients for MLL-SGD and AFL), and a start x_1.

    ``data``: a name of :data:`DATASETS` (``data_dir`` for MNIST and CIFAR-10) or a
    ``sim.data.Dataset``. ``model``: ``"logistic"`` (on two classes
    ``sim.problems.LogisticRegression`` with labels -1/+1 and its exact constants, x_1 = 0;
    on more, multinomial logistic regression, a linear network), ``"mlp"`` (one tanh hidden
    layer per entry of ``hidden``) or ``"cnn"`` (``sim.neural.small_cnn``, image data
    only). ``split``: the module docstring. ``batch``: the mini-batch of every client;
    ``weights``: the clients' weights in f (``sim.clients``: ``"data"``, f the mean loss over
    the whole data set, or ``"uniform"``). ``seed`` draws the partition and the network's
    initial parameters (x_1), and nothing else: the same seed gives the same problem and
    x_1, bit for bit.

    >>> import torch
    >>> from fedbound.sim.federated import federated_problem
    >>> from fedbound.sim.hfl import run_hfl
    >>> problem, x1 = federated_problem("digits", "mlp", ("dirichlet", 0.1), (3, 3), batch=4)
    >>> problem.M, int(problem.partition.sizes.sum())
    (6, 1797)
    >>> trace = run_hfl(problem, sizes=(3, 3), alpha=0.1, x1=x1, replicas=2, t=[[2, 1]] * 5,
    ...                 generator=torch.Generator().manual_seed(0))
    >>> bool(trace.loss[:, -1].mean() < trace.loss[:, 0].mean())
    True
    """
    name = data.name if isinstance(data, Dataset) else data
    data = data.to(device) if isinstance(data, Dataset) else dataset(data, data_dir, device)
    sizes = tuple(sizes)
    generator = torch.Generator().manual_seed(seed)
    partition = partition_of(split, data.labels.cpu(), sizes, generator)
    if model == "logistic" and data.classes == 2:
        signs = data.labels.to(DTYPE) * 2 - 1
        x1 = torch.zeros(data.features.shape[1], dtype=DTYPE, device=data.features.device)
        if partition is None:
            return Federation(LogisticRegression(data.features, signs, batch=batch), x1)
        return Federation(LogisticClients(data.features, signs, partition, batch=batch,
                                          weights=weights), x1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = network(model, data, name, hidden)
    if partition is None:
        problem = NeuralProblem(module, data.features, data.labels, batch=batch,
                                chunk_size=chunk_size)
    else:
        problem = NeuralClients(module, data.features, data.labels, partition, batch=batch,
                                weights=weights, chunk_size=chunk_size)
    return Federation(problem, problem.initial())
