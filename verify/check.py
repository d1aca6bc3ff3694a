"""check(key, scenario) -> Verdict: a bound against the simulator's measurement."""

from __future__ import annotations

from .adapter import adapter_for
from .verdict import Verdict


def check(key: str, scenario=None, *, variant: str | None = None, exact: bool = False) -> Verdict:
    """Check the registered result ``key`` on ``scenario``: a scenario object, a mapping
    of scenario fields (the others take the default's values), JSON text, the path of a
    JSON file, or None for the default scenario.

    The theorem's parameters are derived from the scenario (L from the problem, zeta from
    H, Delta from x_1, the step from the bound when the scenario leaves it open); the
    left-hand side is measured by the simulator over the scenario's replicas (95%
    Student-t interval), or computed exactly (``exact=True``, where the adapter declares
    an exact mode). See :class:`verify.Verdict` for the outcome."""
    return adapter_for(key).check(scenario, variant=variant, exact=exact)
