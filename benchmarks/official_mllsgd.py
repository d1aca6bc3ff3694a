"""The logistic-regression training loop of the official MLL-SGD code (Castiglia, Das and
Patterson, the repository rpi-nsl/MLL-SGD that accompanies Castiglia et al. 2021),
re-implemented here for speed comparisons, since that code cannot be vendored.

What it keeps from the official loop, because that is what its cost is made of:

- Python loops over hubs and, inside, over the workers of each hub; NumPy arrays for the
  models and the data.
- Per worker and sub-network round: a deep copy of its hub's model, one shuffle of the
  whole data set (``torch.randperm`` converted to a NumPy array) whose first n/N indices
  become the worker's data, a copy of those rows, then tau local epochs over them
  (mini-batches without replacement, a fresh ``torch.randperm`` of the worker's rows per
  epoch), each epoch ending with the loss and gradient on the worker's rows, kept in
  per-call arrays of every epoch's loss and gradient, as the official code computes them.
- Loss and gradient as the official code writes them: labels mapped to {0, 1} by
  comparing with the first half of the classes at every call, h = 1 / (1 + exp(-x theta)),
  cost = mean(-y log h - (1 - y) log(1 - h)), and the ascent step theta += alpha (y - h) x / m.
- Sub-network averaging with the workers' data fractions, and every q sub-network rounds
  (when the round index is a multiple of q, counted from 0) the hubs average with their
  neighbours one after another, in place (so a later hub averages already-averaged
  models, as in the official code), then the loss of the hub-weighted average model on
  the whole data set, once per such round: the only thing this loop records.

What it leaves out: the test-set accuracy and the result files the official code writes
after every hub averaging, its progress bar and printed losses (evaluation and I/O, not
training), and the per-worker draw of how many local epochs to take (every worker takes
all tau, the official default). Each omission makes this loop faster than the official
one, so official / fedbound measured with it is a lower bound.
"""

from __future__ import annotations

import copy

import numpy as np
import torch


def cost_and_grad(theta: np.ndarray, x: np.ndarray, y: np.ndarray,
                  classes: np.ndarray) -> tuple[float, np.ndarray]:
    """Binary cross-entropy of one-vs-rest logistic regression and its ascent direction."""
    positive = np.zeros(y.shape, dtype=bool)
    for c in classes[: len(classes) // 2]:
        positive = positive | (y == c)
    target = np.where(positive, 1, 0)
    h = 1 / (1 + np.exp(-(x @ theta)))
    m = len(target)
    cost = 1 / m * np.sum(-target * np.log(h) - (1 - target) * np.log(1 - h))
    return cost, 1 / m * ((target - h) @ x)


def local_epochs(x: np.ndarray, y: np.ndarray, theta: np.ndarray, epochs: int, batch: int,
                 alpha: float, classes: np.ndarray, generator: torch.Generator) -> np.ndarray:
    """``epochs`` passes of mini-batch gradient steps over the worker's rows, in place; each
    epoch's loss and gradient on all the worker's rows kept (as the official code keeps them)."""
    batches = x.shape[0] // batch
    costs, grads = np.zeros(epochs), np.zeros((epochs, x.shape[1]))
    for epoch in range(epochs):
        order = np.array(torch.randperm(x.shape[0], generator=generator).numpy())
        for b in range(batches):
            rows = order[b * batch:(b + 1) * batch]
            costs[epoch], grad = cost_and_grad(theta, x[rows], y[rows], classes)
            theta += alpha * grad
        costs[epoch], grads[epoch] = cost_and_grad(theta, x, y, classes)
    return theta


def official_mllsgd(x: np.ndarray, y: np.ndarray, *, hubs: int, workers: int, tau: int, q: int,
                    hub_rounds: int, batch: int, alpha: float, seed: int = 0) -> list[float]:
    """Losses of the average model after each hub averaging: ``hub_rounds`` of them, over
    ``hub_rounds * q`` sub-network rounds of ``workers`` workers per hub."""
    generator = torch.Generator().manual_seed(seed)
    classes = np.unique(y)
    worker_share = np.full(workers, 1 / workers)
    hub_share = np.full(hubs, 1 / hubs)
    rows_per_worker = int(worker_share[0] * y.shape[0] / hubs)
    models = [np.zeros(x.shape[1]) for _ in range(hubs)]
    losses = []
    for e in range(hub_rounds * q):
        for h in range(hubs):
            trained = []
            for _ in range(workers):
                mine = np.array(torch.randperm(x.shape[0], generator=generator).numpy())
                mine = mine[:rows_per_worker]
                trained.append(local_epochs(x[mine], y[mine], copy.deepcopy(models[h]), tau,
                                            batch, alpha, classes, generator))
            models[h] = sum(theta * share for theta, share in zip(trained, worker_share,
                                                                     strict=True))
        if e % q == 0:
            for h in range(hubs):  # complete hub graph: every hub is a neighbour
                models[h] = sum(theta * share for theta, share in zip(models, hub_share,
                                                                         strict=True))
            average = sum(theta * share for theta, share in zip(models, hub_share, strict=True))
            losses.append(cost_and_grad(average, x, y, classes)[0])
    return losses
