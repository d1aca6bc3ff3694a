"""What an experiment's run measured (``verify.claims.Outcome``) as JSON values and back,
every number bit for bit (JSON writes a float with the shortest text that reads back to the
same float; a NaN of an array is written null, an infinity "inf"), and the typed reading of
a JSON field that names the field in one line when it is wrong: what ``verify.reproduction_io``
reads a stored reproduction with, and ``verify.reproduce`` a run kept in its store."""

from __future__ import annotations

import math

import numpy as np

from .claims import Curve, Outcome
from .scenario import _short


def listed(a: np.ndarray) -> list:
    """The nested list of the array ``a``, a NaN written None (JSON has no NaN)."""
    a = np.asarray(a)
    if a.dtype.kind == "f" and np.isnan(a).any():
        out = a.astype(object)
        out[np.isnan(a)] = None
        return out.tolist()
    return a.tolist()


def outcome_dict(o: Outcome) -> dict:
    """What a run measured as JSON values (the curves in their order: a figure draws them so)."""
    return {"xlabel": o.xlabel, "ylabel": o.ylabel, "notes": list(o.notes),
            "prediction": o.prediction,
            "scalars": [{"name": k, "values": listed(v)} for k, v in o.scalars.items()],
            "curves": [{"label": c.label, "x": listed(c.x), "y": listed(c.y),
                        "bound": None if c.bound is None else listed(c.bound), "xlabel": c.xlabel}
                       for c in o.curves.values()]}


def field(data, key: str, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'the file'} must be a JSON object, not {type(data).__name__}")
    if key not in data:
        raise ValueError(f"{path_at(where, key)} is missing")
    return data[key]


def path_at(where: str, key) -> str:
    """The path of ``key`` inside ``where`` (``a.b``, ``a[3]``)."""
    return f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key


def typed(value, kinds, where: str, noun: str, optional: bool = False):
    if value is None and optional:
        return value
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
        return value
    raise ValueError(f"{where} = {_short(value)} must be {noun}" + (" or null" if optional else ""))


def number(value, where: str, optional: bool = False) -> float | int | None:
    """A number field: a JSON number as it was written (an integer stays one, as a test's
    ``at`` given as a round), or "inf"/"-inf" (``json_text`` writes infinities so)."""
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    return typed(value, (int, float), where, "a number", optional)


def text(data, key: str, where: str, optional: bool = False) -> str | None:
    return typed(field(data, key, where), str, path_at(where, key), "a string", optional)


def items(data, key: str, where: str) -> list:
    return typed(field(data, key, where), list, path_at(where, key), "a list")


def array(value, where: str, ndim: int) -> np.ndarray:
    """A float array of ``ndim`` dimensions from nested lists (null: NaN)."""
    def entry(v):
        if v is None:
            return math.nan
        return number(v, where)

    def nested(v, depth):
        if depth == 0:
            return entry(v)
        return [nested(x, depth - 1) for x in typed(v, list, where, f"a list of {ndim} dimension(s)")]

    try:
        a = np.array(nested(value, ndim), dtype=float)
    except ValueError as e:
        if str(e).startswith(where):
            raise
        raise ValueError(f"{where} is not a rectangular list of {ndim} dimensions") from None
    if a.ndim != ndim:
        raise ValueError(f"{where} is not a rectangular list of {ndim} dimensions")
    return a


def per_seed(value, where: str) -> np.ndarray:
    """A run's per-seed scalar: integers stay integers (rounds run), floats floats."""
    items = typed(value, list, where, "a list")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return np.array(items, dtype=np.int64)
    return array(items, where, 1)


def outcome_from_dict(data, where: str = "outcome") -> Outcome:
    """What a run measured, from :func:`outcome_dict`'s JSON values; ValueError, one line
    naming the field (under ``where``), when ``data`` is not one."""
    curves = {}
    for i, c in enumerate(items(data, "curves", where)):
        at = path_at(f"{where}.curves", i)
        label = text(c, "label", at)
        bound = field(c, "bound", at)
        x, y = array(field(c, "x", at), f"{at}.x", 1), array(field(c, "y", at), f"{at}.y", 2)
        bound = None if bound is None else array(bound, f"{at}.bound", 1)
        if y.shape[1] != x.size or (bound is not None and bound.size != x.size):
            raise ValueError(f"{at}: x has {x.size} points, y {y.shape[1]}"
                             + ("" if bound is None else f", bound {bound.size}"))
        try:
            curves[label] = Curve(label, x, y, bound, text(c, "xlabel", at))
        except ValueError as e:  # Curve's own rules: x non-decreasing, not empty
            raise ValueError(f"{at}: {e}") from None
    if not curves:
        raise ValueError(f"{where}.curves is empty")
    scalars = {}
    for i, s in enumerate(items(data, "scalars", where)):
        at = path_at(f"{where}.scalars", i)
        scalars[text(s, "name", at)] = per_seed(field(s, "values", at), f"{at}.values")
    notes = items(data, "notes", where)
    for i, n in enumerate(notes):
        typed(n, str, path_at(f"{where}.notes", i), "a string")
    return Outcome(curves, text(data, "xlabel", where), text(data, "ylabel", where), scalars,
                   tuple(notes), text(data, "prediction", where))
