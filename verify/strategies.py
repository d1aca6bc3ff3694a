"""Hypothesis strategies of fedbound scenarios, for any registered result.

>>> from hypothesis import given, settings
>>> from fedbound.verify.strategies import scenarios
>>> from fedbound.verify.testing import assert_holds
>>> @settings(max_examples=3, deadline=None, derandomize=True)
... @given(scenarios("mllsgd.theorem1", exact=True))
... def test_bound_holds(s):
...     assert_holds("mllsgd.theorem1", s, exact=True)
>>> test_bound_holds()

The strategy runs the adapter's own declaration of admissible scenarios (its ``_draw``
hook, see ``verify.draw``) with hypothesis as the source of randomness, so the scenarios
are exactly those the seeded battery and the search draw from, explored the hypothesis
way (boundary values first, shrinking on failure). Needs the ``test`` extra
(``pip install 'fedbound[test]'``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["HypothesisDraw", "scenarios"]


def _strategies():
    try:
        from hypothesis import strategies as st
    except ImportError:
        raise ImportError("fedbound.verify.strategies needs hypothesis: "
                          "pip install 'fedbound[test]'") from None
    return st


class HypothesisDraw:
    """A :class:`verify.draw.Draw` whose choices come from hypothesis's ``draw``."""

    def __init__(self, draw):
        self.draw = draw
        self.st = _strategies()

    def integer(self, low: int, high: int) -> int:
        return self.draw(self.st.integers(low, high))

    def uniform(self, low: float, high: float) -> float:
        return self.draw(self.st.floats(low, high, allow_nan=False, allow_infinity=False))

    def log_uniform(self, low: float, high: float) -> float:
        u = self.draw(self.st.floats(math.log(low), math.log(high), allow_nan=False))
        return min(max(math.exp(u), low), high)

    def choice(self, options: Sequence[Any]) -> Any:
        return self.draw(self.st.sampled_from(list(options)))

    def boolean(self, p: float = 0.5) -> bool:
        return self.draw(self.st.booleans())


def scenarios(key: str, *, variant: str | None = None, admissible: bool = True,
              exact: bool = False):
    """The strategy of random scenarios of ``key`` (built-in or plugin). ``admissible``: only
    scenarios on which the hypotheses of ``variant`` (default: the default variant) hold;
    the adapter's declaration targets the default variant, so another variant's conditions
    may filter some out. ``exact``: only scenarios that the adapter's exact-expectation mode
    supports (``Adapter.supports_exact``: a quadratic problem, for example), the ones
    ``assert_holds(..., exact=True)`` takes. Raises ValueError at once for an unknown key or
    variant, or ``exact`` for a result without an exact mode."""
    from fedbound import bounds

    from .adapter import adapter_for

    st = _strategies()
    adapter = adapter_for(key)
    thm = bounds.get(key, variant)
    if exact and not adapter.tags.exact:
        raise ValueError(f"{key}: exact=True, but the result has no exact-expectation mode")

    @st.composite
    def draw_scenario(draw):
        return adapter.random_scenario(HypothesisDraw(draw))

    strategy = draw_scenario()
    if exact:
        strategy = strategy.filter(adapter.supports_exact)
    if admissible:
        strategy = strategy.filter(lambda s: bool(thm.admissible(**adapter.parameters(s, thm))))
    return strategy
