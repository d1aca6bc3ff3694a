"""Axis labels with units, without matplotlib (an adapter's ``series_label`` and ``lhs_label``
are set when its module is imported, also where no figure is drawn).

An axis label names a quantity and then its unit in brackets, ``"round t [count]"``. The
objectives of fedbound's scenarios are abstract, so the units are the scenario's own
(:data:`UNITS`): ``loss`` for a value of the objective, ``param`` for a model coordinate, so
``loss²/param²`` for a squared gradient norm, ``param²`` for a squared distance between
models and ``param²/loss`` for a step size; ``time units`` for time in the scenario's delay
model; ``count`` for iterations, rounds and steps, ``index`` for a cell's position and
``dimensionless`` for ratios and probabilities. A quantity whose unit fedbound does not know
says ``scenario units``.
"""

from __future__ import annotations

LOSS, GRAD2, PARAM2, STEP = "loss", "loss²/param²", "param²", "param²/loss"
TIME, COUNT, INDEX, RATIO, SCENARIO = "time units", "count", "index", "dimensionless", "scenario units"
#: every unit an axis of fedbound states (module docstring)
UNITS = frozenset((LOSS, GRAD2, PARAM2, STEP, TIME, COUNT, INDEX, RATIO, SCENARIO))


def label(quantity: str, unit: str) -> str:
    """An axis label: ``quantity`` and its ``unit`` (one of :data:`UNITS`) in brackets."""
    if unit not in UNITS:
        raise ValueError(f"unit={unit!r} must be one of {sorted(UNITS)}")
    return f"{quantity} [{unit}]"
