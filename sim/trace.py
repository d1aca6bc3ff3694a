"""What a simulator run records, and the divergence policy every algorithm shares.

Divergence: a replica whose candidate next state is non-finite or has an entry of
magnitude above ``DIVERGENCE_THRESHOLD`` is marked ``diverged`` and frozen (via
``torch.where``) at its last accepted state for the rest of the run. Its recorded losses
and gradient norms are then those of the frozen state: finite (huge, typically) and never
NaN, and the gradient it records as applied is zero from then on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

DIVERGENCE_THRESHOLD = 1e100


def freeze_diverged(state: torch.Tensor, candidate: torch.Tensor,
                    diverged: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Next state and divergence flags: replicas (leading dim) that blow up keep ``state``.

    ``state`` and ``candidate`` have shape ``[R, ...]``, ``diverged`` shape ``[R]``. A
    replica is flagged once ``candidate`` is non-finite or exceeds the threshold (the
    max-norm is NaN or above it), and stays flagged (and frozen) afterwards.
    """
    size = torch.linalg.vector_norm(candidate.reshape(candidate.shape[0], -1), ord=math.inf,
                                    dim=1)
    diverged = diverged | ~(size <= DIVERGENCE_THRESHOLD)
    if diverged.any():
        keep = diverged.reshape(-1, *([1] * (state.ndim - 1)))
        candidate = torch.where(keep, state, candidate)
    return candidate, diverged


def norm_of(x: torch.Tensor) -> torch.Tensor:
    """The Euclidean norm of all of ``x``'s entries (0-dimensional) for the acceptance test
    below: for a contiguous ``x``, the square root of one BLAS dot product (about half the
    time of ``torch.linalg.vector_norm``'s reduction on CPU; its round-off is far inside the
    test's factor of 2; an overflow past 1e154 makes it inf, which only sends the run to the
    replica-by-replica decision, with the same numbers)."""
    if not x.is_contiguous():
        return torch.linalg.vector_norm(x)
    flat = x.view(-1)
    return torch.dot(flat, flat).sqrt()


class Acceptance:
    """:func:`freeze_diverged` for a run loop, with the same decisions: while no replica has
    diverged, one Euclidean norm of the whole candidate (a fast reduction; or a ``bound`` on
    its largest magnitude that the caller has at hand) at most half the threshold proves
    every entry below it, and every replica is accepted; otherwise (or once some replica has
    diverged) freeze_diverged decides replica by replica."""

    def __init__(self, replicas: int, device):
        self.diverged = torch.zeros(replicas, dtype=torch.bool, device=device)
        self.alive = None  # ~diverged once some replica has diverged

    def __call__(self, state: torch.Tensor, candidate: torch.Tensor,
                 rows: torch.Tensor | None = None,
                 bound: torch.Tensor | None = None) -> torch.Tensor:
        """The next state: ``candidate`` (in place) with diverged replicas kept at ``state``.
        ``rows``: the replicas (indices into ``diverged``) that the leading dimension of
        ``state`` and ``candidate`` holds, in order (the configurations of a batched run that
        end a round); None: every replica. ``bound``: a number >= the largest magnitude of
        ``candidate``'s entries (NaN where one is not finite), in place of its norm."""
        if self.alive is None and (  # NaN in, NaN out: the comparison fails
                float(norm_of(candidate) if bound is None else bound)
                <= 0.5 * DIVERGENCE_THRESHOLD):
            return candidate
        if rows is None:
            frozen, self.diverged = freeze_diverged(state, candidate, self.diverged)
        else:
            frozen, flags = freeze_diverged(state, candidate, self.diverged[rows])
            self.diverged = self.diverged.index_put((rows,), flags)
        self.alive = ~self.diverged
        return candidate.copy_(frozen) if frozen is not candidate else candidate


class Rounds:
    """What a run of C configurations on one clock records per configuration and round
    (``sim.hfl``, ``sim.tdcd``: configurations' rounds start and end at their own steps): each
    :meth:`put` keeps the values of some configurations at their rounds, and :meth:`into`
    writes them all into a [C, R, rounds, ...] tensor in one scatter at the end (a scatter
    per round costs more than the round's arithmetic in a small run)."""

    def __init__(self):
        self.configs: list[int] = []
        self.rounds: list[int] = []
        self.values: list[torch.Tensor] = []

    def put(self, configs: list[int], rounds: list[int], value: torch.Tensor) -> None:
        """``value`` [len(configs) R, ...]: configuration configs[i]'s values at its round
        rounds[i] (kept as is: not to be modified in place afterwards)."""
        self.configs += configs
        self.rounds += rounds
        self.values.append(value)

    def into(self, out: torch.Tensor) -> torch.Tensor:
        """``out`` [C, R, rounds, ...] with every value put (the rest as it was)."""
        if self.values:
            R, rest = out.shape[1], out.shape[3:]
            values = torch.cat([v.reshape(-1, R, *rest) for v in self.values])
            index = (torch.tensor(self.configs, device=out.device),
                     torch.tensor(self.rounds, device=out.device))
            out[index[0], :, index[1]] = values
        return out


@dataclass(frozen=True)
class Trace:
    """The record of ``R`` replicas of a ``K``-iteration run; CPU tensors, float64.

    - ``grad_sq_norm`` [R, K]: ||grad F(u_k)||^2 for k = 1..K, with u_k = X_k a
      (Castiglia et al. 2021, (8)), taken before the step of iteration k (k = 1 is x1): the
      summand of the left-hand side of Theorem 1, (13). ``None``
      for a run that recorded the loss only.
    - ``loss`` [R, K]: F(u_k).
    - a run with ``record_every=e`` > 1 records ``grad_sq_norm`` and ``loss`` at k = 1,
      1 + e, 1 + 2e, ... only, [R, K / e] (:attr:`record_every`), or at k = e, 2e, ..., K
      (``record_first=False``; e = K: F(u_K) only): ``recorded`` [K / e] int64, the
      iterations k of those columns.
    - ``steps_taken`` [R, N] int64: gradient steps each worker took (realised coins).
    - ``slots`` [R, K] float64: time slot at which iteration k ends.
    - ``diverged`` [R] bool: see the module docstring for what a frozen replica records.
    - ``u`` [R, K+1, d], ``Ga`` [R, K, d] (a-weighted sum G_k a of the applied worker
      gradients, zeros included), ``X`` [R, K+1, N, d] (worker models X_k) and ``G``
      [R, K, N, d] (applied worker gradients G_k): only with ``record_iterates=True``,
      else ``None``; they satisfy u_{k+1} = u_k - eta G_k a, (10).
    """

    grad_sq_norm: torch.Tensor | None
    loss: torch.Tensor
    steps_taken: torch.Tensor
    slots: torch.Tensor
    diverged: torch.Tensor
    recorded: torch.Tensor
    u: torch.Tensor | None = None
    Ga: torch.Tensor | None = None
    X: torch.Tensor | None = None
    G: torch.Tensor | None = None

    @property
    def lhs(self) -> torch.Tensor:
        """(1/K) sum_k ||grad F(u_k)||^2 per replica, [R]: one realisation of (13)'s LHS."""
        if self.grad_sq_norm is None or self.record_every != 1:
            raise ValueError("lhs needs ||grad F(u_k)||^2 at every k: run with record_every=1 "
                             "and record_grad=True")
        return self.grad_sq_norm.mean(dim=1)

    @property
    def replicas(self) -> int:
        """Number of independent replicas R."""
        return self.grad_sq_norm.shape[0]

    @property
    def K(self) -> int:
        """Number of iterations K."""
        return self.slots.shape[1]

    @property
    def record_every(self) -> int:
        """e: ``loss`` (and ``grad_sq_norm``) hold every e-th iteration (``recorded``)"""
        return self.K // self.loss.shape[1]
