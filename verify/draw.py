"""Random scenarios from one declaration: the :class:`Draw` an adapter's ``_draw`` hook uses.

An adapter describes its admissible scenarios once, as a function of a ``Draw``
(``draw.integer(2, 4)``, ``draw.uniform(0.6, 1.0)``, ``draw.choice([...])``). The same
function then gives

* seeded draws (:class:`RngDraw`, a ``numpy.random.Generator``): the random battery of
  ``fedbound check --all`` and the starting points of ``fedbound search``;
* a hypothesis strategy (``verify.strategies.scenarios(key)``, through the draw of
  ``hypothesis.strategies.data``), which explores boundary values and shrinks.

So the ranges live in one place, the way scipy.stats declares each distribution's
parameters once for both validation and the generation of test inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


class Draw(Protocol):
    """The random choices an adapter's ``_draw`` may make (bounds are inclusive)."""

    def integer(self, low: int, high: int) -> int:
        """An integer in [low, high]."""

    def uniform(self, low: float, high: float) -> float:
        """A float in [low, high]."""

    def log_uniform(self, low: float, high: float) -> float:
        """A float in [low, high] (0 < low), uniform in log scale."""

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``."""

    def boolean(self, p: float = 0.5) -> bool:
        """True with probability ``p`` (hypothesis: either)."""


def _check_range(low, high) -> None:
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"draw range [{low}, {high}] must be finite with low <= high")


class RngDraw:
    """:class:`Draw` from a ``numpy.random.Generator``: a seed fixes every choice."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        _check_range(low, high)
        return int(self.rng.integers(low, high + 1))

    def uniform(self, low: float, high: float) -> float:
        _check_range(low, high)
        return float(self.rng.uniform(low, high))

    def log_uniform(self, low: float, high: float) -> float:
        _check_range(low, high)
        if low <= 0:
            raise ValueError(f"log_uniform needs low > 0, got {low}")
        return float(min(max(math.exp(self.rng.uniform(math.log(low), math.log(high))), low), high))

    def choice(self, options: Sequence[Any]) -> Any:
        if not len(options):
            raise ValueError("choice from an empty sequence")
        return options[int(self.rng.integers(len(options)))]

    def boolean(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)
