"""A stored reproduction, loaded: ``fedbound reproduce ... --json --curves`` (or
``Reproduction.to_dict(curves=True)``) written to a file, and rebuilt from it without loss.

:func:`reproduction_from_dict` rebuilds the :class:`~verify.reproduce.Reproduction` from its
JSON values: every claim's decisions and tests, and every run with what it measured (the
curves, scalars, notes and prediction), so that ``verify.claimplots.claim_figure`` and the
report (``verify.claims_report``) draw from a loaded reproduction what they draw from the live
one, every number bit for bit (JSON writes a float with the shortest text that reads back
to the same float). A claim is the registered one of its id (its decision function is code,
not data); a stored claim that is not registered, a field missing or of the wrong type, is
refused with one line naming the field (ValueError). :func:`load_reproduction` reads the
file with the input size cap of ``verify.inputs`` first, as every input of fedbound is read.

    fedbound reproduce mllsgd hfl tdcd afl --quick --jobs 2 --json --curves > claims.json
    load_reproduction("claims.json")   # the same figures and tables, without running anything
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np

from .claims import Curve, Outcome, Plan, claims
from .decide import VERDICTS, Test
from .reproduce import ClaimResult, Decision, Reproduction, Run
from .scenario import _short, jsonable, parse_json

#: the fields of a stored test (``Test.as_dict``, less the region, which is recomputed)
TEST_FIELDS = ("name", "kind", "effect", "low", "high", "sd", "seeds", "lower", "upper",
               "margin", "source", "verdict", "detectable", "needed", "compares", "at",
               "censored", "reason")
#: the kinds of a stored test (``verify.decide.Test.kind``)
TEST_KINDS = ("above", "below", "between", "fixed")


def _field(data, key: str, where: str):
    if not isinstance(data, dict):
        raise ValueError(f"{where or 'the file'} must be a JSON object, not {type(data).__name__}")
    if key not in data:
        raise ValueError(f"{_at(where, key)} is missing")
    return data[key]


def _at(where: str, key) -> str:
    return f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key


def _typed(value, kinds, where: str, noun: str, optional: bool = False):
    if value is None and optional:
        return value
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool)):
        return value
    raise ValueError(f"{where} = {_short(value)} must be {noun}" + (" or null" if optional else ""))


def _number(value, where: str, optional: bool = False) -> float | int | None:
    """A number field: a JSON number as it was written (an integer stays one, as a test's
    ``at`` given as a round), or "inf"/"-inf" (``json_text`` writes infinities so)."""
    if isinstance(value, str) and value in ("inf", "-inf"):
        return float(value)
    return _typed(value, (int, float), where, "a number", optional)


def _text(data, key: str, where: str, optional: bool = False) -> str | None:
    return _typed(_field(data, key, where), str, _at(where, key), "a string", optional)


def _list(data, key: str, where: str) -> list:
    return _typed(_field(data, key, where), list, _at(where, key), "a list")


def _array(value, where: str, ndim: int) -> np.ndarray:
    """A float array of ``ndim`` dimensions from nested lists (null: NaN)."""
    def entry(v):
        if v is None:
            return math.nan
        return _number(v, where)

    def nested(v, depth):
        if depth == 0:
            return entry(v)
        return [nested(x, depth - 1) for x in _typed(v, list, where, f"a list of {ndim} dimension(s)")]

    try:
        a = np.array(nested(value, ndim), dtype=float)
    except ValueError as e:
        if str(e).startswith(where):
            raise
        raise ValueError(f"{where} is not a rectangular list of {ndim} dimensions") from None
    if a.ndim != ndim:
        raise ValueError(f"{where} is not a rectangular list of {ndim} dimensions")
    return a


def _scalars(value, where: str) -> np.ndarray:
    """A run's per-seed scalar: integers stay integers (rounds run), floats floats."""
    items = _typed(value, list, where, "a list")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        return np.array(items, dtype=np.int64)
    return _array(items, where, 1)


def _verdict(value, where: str) -> str:
    if value not in VERDICTS:
        raise ValueError(f"{where} = {_short(value)} must be one of {', '.join(VERDICTS)}")
    return value


def _test(data, where: str) -> Test:
    kw = {k: _field(data, k, where) for k in TEST_FIELDS}
    if kw["kind"] not in TEST_KINDS:
        raise ValueError(f"{_at(where, 'kind')} = {_short(kw['kind'])} must be one of "
                         f"{', '.join(TEST_KINDS)}")
    fixed = kw["kind"] == "fixed"  # no run of its own: no effect, interval or seeds
    for k in ("effect", "low", "high", "sd", "detectable"):
        kw[k] = _number(kw[k], _at(where, k), optional=fixed)
    for k in ("lower", "upper", "at", "margin"):
        kw[k] = _number(kw[k], _at(where, k), optional=True)
    for k in ("seeds", "needed", "censored"):
        kw[k] = _typed(kw[k], int, _at(where, k), "an integer", optional=k == "needed" or
                       (fixed and k == "seeds"))
    for k in ("name", "source", "reason"):
        _typed(kw[k], str, _at(where, k), "a string")
    if not fixed and not (kw["margin"] is not None and kw["margin"] > 0):
        raise ValueError(f"{_at(where, 'margin')} = {_short(kw['margin'])} must be a number > 0")
    _verdict(kw["verdict"], _at(where, "verdict"))
    if kw["compares"] is not None:
        pair = _typed(kw["compares"], list, _at(where, "compares"), "a list", optional=True)
        if len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"{_at(where, 'compares')} = {_short(pair)} must be two labels")
        kw["compares"] = tuple(pair)
    return Test(**kw)


def _decision(data, reading: str | None, where: str) -> Decision:
    tests = tuple(_test(t, _at(f"{where}.tests", i))
                  for i, t in enumerate(_list(data, "tests", where)))
    effect = _field(data, "effect", where)
    name, value = _field(effect, "test", f"{where}.effect"), _field(effect, "value", f"{where}.effect")
    value = _number(value, f"{where}.effect.value", optional=True)
    deciding = next((t for t in tests if t.name == name and t.effect == value), None)
    if deciding is None:
        raise ValueError(f"{where}.effect.test = {_short(name)} names none of its tests")
    agrees = _typed(_field(data, "bound_agrees", where), bool, f"{where}.bound_agrees",
                    "true or false", optional=True)
    return Decision(reading, _verdict(_field(data, "verdict", where), f"{where}.verdict"), tests,
                    deciding, agrees,
                    _text(data, "prediction", where))


def _outcome(data, where: str) -> Outcome:
    curves = {}
    for i, c in enumerate(_list(data, "curves", where)):
        at = _at(f"{where}.curves", i)
        label = _text(c, "label", at)
        bound = _field(c, "bound", at)
        x, y = _array(_field(c, "x", at), f"{at}.x", 1), _array(_field(c, "y", at), f"{at}.y", 2)
        bound = None if bound is None else _array(bound, f"{at}.bound", 1)
        if y.shape[1] != x.size or (bound is not None and bound.size != x.size):
            raise ValueError(f"{at}: x has {x.size} points, y {y.shape[1]}"
                             + ("" if bound is None else f", bound {bound.size}"))
        try:
            curves[label] = Curve(label, x, y, bound, _text(c, "xlabel", at))
        except ValueError as e:  # Curve's own rules: x non-decreasing, not empty
            raise ValueError(f"{at}: {e}") from None
    if not curves:
        raise ValueError(f"{where}.curves is empty")
    scalars = {}
    for i, s in enumerate(_list(data, "scalars", where)):
        at = _at(f"{where}.scalars", i)
        scalars[_text(s, "name", at)] = _scalars(_field(s, "values", at), f"{at}.values")
    notes = _list(data, "notes", where)
    for i, n in enumerate(notes):
        _typed(n, str, _at(f"{where}.notes", i), "a string")
    return Outcome(curves, _text(data, "xlabel", where), _text(data, "ylabel", where), scalars,
                   tuple(notes), _text(data, "prediction", where))


def _plan(data) -> Plan:
    seeds = _typed(_field(data, "seeds", ""), int, "seeds", "an integer", optional=True)
    batch = _typed(_field(data, "batch", ""), int, "batch", "an integer", optional=True)
    return Plan(quick=_typed(_field(data, "quick", ""), bool, "quick", "true or false"),
                seed=_typed(_field(data, "seed", ""), int, "seed", "an integer"), seeds=seeds,
                device=_text(data, "device", "", optional=True), batch=batch,
                step=_number(_field(data, "step", ""), "step", optional=True))


def _run(data, plan: Plan, where: str) -> Run:
    outcome = _field(data, "outcome", where)
    return Run(_text(data, "experiment", where),
               replace(plan, reading=_text(data, "reading", where, optional=True)),
               None if outcome is None else _outcome(outcome, f"{where}.outcome"),
               _number(_field(data, "seconds", where), f"{where}.seconds"),
               _text(data, "error", where))


def _result(data, runs: list[Run], registered: dict, where: str) -> ClaimResult:
    cid = _text(data, "id", where)
    claim = registered.get(cid)
    if claim is None:
        raise ValueError(f"{where}.id = {cid!r} is not a registered claim (a claim of another "
                         "version of its paper? write the file again)")
    error = _text(data, "error", where)
    if error:
        return ClaimResult(claim, (), error)
    # the decisions in the order of the claim's runs (the order reproduce decides them in)
    readings = [r.plan.reading for r in runs if r.experiment == claim.experiment]
    if not readings or any(r.outcome is None for r in runs if r.experiment == claim.experiment):
        raise ValueError(f"{where}: runs lacks an outcome of its experiment {claim.experiment} "
                         "(a decided claim needs every reading's)")
    if "readings" in data:
        stored = _typed(data["readings"], dict, f"{where}.readings", "an object")
        missing = [r for r in readings if r not in stored]
        if missing or len(stored) != len(readings):
            raise ValueError(f"{where}.readings holds {', '.join(map(str, stored))}; runs holds "
                             f"{claim.experiment} under {', '.join(map(str, readings))}")
        decisions = tuple(_decision(stored[r], r, f"{where}.readings.{r}")
                          for r in readings)
    else:
        decisions = (_decision(data, None, where),)
    return ClaimResult(claim, decisions, error)


def reproduction_from_dict(data) -> Reproduction:
    """The reproduction of ``data`` (``Reproduction.to_dict(curves=True)``'s JSON values):
    module docstring. ValueError, one line naming the field, when ``data`` is not one."""
    papers = _list(data, "papers", "")
    for i, p in enumerate(papers):
        _typed(p, str, f"papers[{i}]", "a string")
    if "runs" not in data:
        raise ValueError("runs is missing: the reproduction was written without its curves "
                         "(write it with --json --curves, or to_dict(curves=True))")
    plan = _plan(data)
    runs = [_run(r, plan, f"runs[{i}]") for i, r in enumerate(_list(data, "runs", ""))]
    registered = {c.id: c for c in claims()}
    results = tuple(_result(c, runs, registered, f"claims[{i}]")
                    for i, c in enumerate(_list(data, "claims", "")))
    return Reproduction(tuple(papers), plan, results, tuple(runs),
                        _number(_field(data, "seconds", ""), "seconds"))


def load_reproduction(path: str | os.PathLike) -> Reproduction:
    """The reproduction stored in the JSON file ``path`` (``fedbound reproduce ... --json
    --curves > path``), read with the input size cap (``verify.inputs``): module docstring.
    ValueError (a ``ResourceError`` above the cap), one line, when it is not one."""
    from .inputs import read_text

    what = f"reproduction {os.fspath(path)}"
    data = parse_json(read_text(path, what), what)
    try:
        return reproduction_from_dict(data)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def _changes(stored, live, path: str, rel: float):
    """The paths (and both values) where the JSON values ``stored`` and ``live`` differ (two
    floats: by more than ``rel`` relatively; 0: to the last bit)."""
    if isinstance(stored, dict) and isinstance(live, dict):
        for k in dict.fromkeys([*stored, *live]):
            yield from _changes(stored.get(k, "(absent)"), live.get(k, "(absent)"), _at(path, k), rel)
    elif isinstance(stored, list) and isinstance(live, list) and len(stored) == len(live):
        for i, (a, b) in enumerate(zip(stored, live, strict=True)):
            yield from _changes(a, b, _at(path, i), rel)
    elif type(stored) is float is type(live) and rel > 0 and math.isclose(stored, live, rel_tol=rel):
        return
    elif type(stored) is not type(live) or repr(stored) != repr(live):
        yield f"{path}: stored {_short(stored)}, live {_short(live)}"


def reproduction_differences(stored: Reproduction, live: Reproduction, *, rel: float = 0.0) -> list[str]:
    """Where ``live`` (a rerun of some of the claims of ``stored``, with its plan) differs
    from ``stored``: the plan, and for each claim of ``live`` its decisions and the runs
    behind them, every number compared (a float to the last bit, or within ``rel`` relatively:
    a file written on another processor may differ in the last bits of a sum); one line per
    difference, empty when the rerun gives the stored numbers (the stored file is not stale).
    The seconds the runs took are not compared."""

    one, two = jsonable(stored.to_dict(curves=True)), jsonable(live.to_dict(curves=True))
    plan = ("quick", "seed", "seeds", "batch", "step", "device")
    out = list(_changes({k: one[k] for k in plan}, {k: two[k] for k in plan}, "plan", rel))
    claims_of = {c["id"]: c for c in one["claims"]}
    for c in two["claims"]:
        out += _changes(claims_of.get(c["id"], "(absent)"), c, c["id"], rel)
    runs_of = {(r["experiment"], r["reading"]): r for r in one["runs"]}
    for r in two["runs"]:
        key = (r["experiment"], r["reading"])
        where = r["experiment"] + (f" ({r['reading']})" if r["reading"] else "")
        stored_run = runs_of.get(key)
        if stored_run is None:
            out.append(f"{where}: stored (absent)")
            continue
        out += _changes({**stored_run, "seconds": 0}, {**r, "seconds": 0}, where, rel)
    return out
