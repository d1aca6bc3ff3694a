"""check(key, scenario) -> Verdict: a bound against the simulator's measurement."""

from __future__ import annotations

from .adapter import adapter_for
from .verdict import Verdict


def check(key: str, scenario=None, *, variant: str | None = None,
          exact: bool | None = None) -> Verdict:
    """Check the registered result ``key`` on ``scenario``: a scenario object, a mapping
    of scenario fields (the others take the default's values), JSON text, the path of a
    JSON file, a stored :class:`verify.Witness` (or its file), or None for the default.

    The theorem's parameters are derived from the scenario (L from the problem, zeta from
    H, Delta from x_1, the step from the bound when the scenario leaves it open); the
    left-hand side is measured by the simulator over the scenario's replicas (95%
    Student-t interval), or computed exactly (``exact=True``, where the adapter declares
    an exact mode). A witness gives its scenario, and its variant and mode unless
    ``variant`` and ``exact`` say otherwise. See :class:`verify.Verdict` for the outcome."""
    from .witnesses import as_witness

    w = as_witness(scenario)
    if w is not None:
        if w.key != key:
            raise ValueError(f"the witness {w.source or ''} is of {w.key}, not of {key}")
        scenario, variant = w.scenario, variant or w.variant
        exact = w.exact if exact is None else exact
    return adapter_for(key).check(scenario, variant=variant, exact=bool(exact))
