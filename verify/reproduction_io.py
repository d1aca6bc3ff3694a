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

from .claims import Plan, claims
from .decide import VERDICTS, Test
from .outcome_json import field, items, number, outcome_from_dict, path_at, text, typed
from .reproduce import ClaimResult, Decision, Reproduction, Run
from .scenario import _short, jsonable, parse_json

#: the fields of a stored test (``Test.as_dict``, less the region, which is recomputed)
TEST_FIELDS = ("name", "kind", "effect", "low", "high", "sd", "seeds", "lower", "upper",
               "margin", "source", "verdict", "detectable", "needed", "compares", "at",
               "censored", "reason")
#: the kinds of a stored test (``verify.decide.Test.kind``)
TEST_KINDS = ("above", "below", "between", "fixed")


def _verdict(value, where: str) -> str:
    if value not in VERDICTS:
        raise ValueError(f"{where} = {_short(value)} must be one of {', '.join(VERDICTS)}")
    return value


def _test(data, where: str) -> Test:
    kw = {k: field(data, k, where) for k in TEST_FIELDS}
    if kw["kind"] not in TEST_KINDS:
        raise ValueError(f"{path_at(where, 'kind')} = {_short(kw['kind'])} must be one of "
                         f"{', '.join(TEST_KINDS)}")
    fixed = kw["kind"] == "fixed"  # no run of its own: no effect, interval or seeds
    for k in ("effect", "low", "high", "sd", "detectable"):
        kw[k] = number(kw[k], path_at(where, k), optional=fixed)
    for k in ("lower", "upper", "at", "margin"):
        kw[k] = number(kw[k], path_at(where, k), optional=True)
    for k in ("seeds", "needed", "censored"):
        kw[k] = typed(kw[k], int, path_at(where, k), "an integer", optional=k == "needed" or
                       (fixed and k == "seeds"))
    for k in ("name", "source", "reason"):
        typed(kw[k], str, path_at(where, k), "a string")
    if not fixed and not (kw["margin"] is not None and kw["margin"] > 0):
        raise ValueError(f"{path_at(where, 'margin')} = {_short(kw['margin'])} must be a number > 0")
    _verdict(kw["verdict"], path_at(where, "verdict"))
    if kw["compares"] is not None:
        pair = typed(kw["compares"], list, path_at(where, "compares"), "a list", optional=True)
        if len(pair) != 2 or not all(isinstance(x, str) for x in pair):
            raise ValueError(f"{path_at(where, 'compares')} = {_short(pair)} must be two labels")
        kw["compares"] = tuple(pair)
    return Test(**kw)


def _decision(data, reading: str | None, where: str) -> Decision:
    tests = tuple(_test(t, path_at(f"{where}.tests", i))
                  for i, t in enumerate(items(data, "tests", where)))
    effect = field(data, "effect", where)
    name, value = field(effect, "test", f"{where}.effect"), field(effect, "value", f"{where}.effect")
    value = number(value, f"{where}.effect.value", optional=True)
    deciding = next((t for t in tests if t.name == name and t.effect == value), None)
    if deciding is None:
        raise ValueError(f"{where}.effect.test = {_short(name)} names none of its tests")
    agrees = typed(field(data, "bound_agrees", where), bool, f"{where}.bound_agrees",
                    "true or false", optional=True)
    return Decision(reading, _verdict(field(data, "verdict", where), f"{where}.verdict"), tests,
                    deciding, agrees,
                    text(data, "prediction", where))


def _plan(data) -> Plan:
    seeds = typed(field(data, "seeds", ""), int, "seeds", "an integer", optional=True)
    batch = typed(field(data, "batch", ""), int, "batch", "an integer", optional=True)
    return Plan(quick=typed(field(data, "quick", ""), bool, "quick", "true or false"),
                seed=typed(field(data, "seed", ""), int, "seed", "an integer"), seeds=seeds,
                device=text(data, "device", "", optional=True), batch=batch,
                step=number(field(data, "step", ""), "step", optional=True))


def _run(data, plan: Plan, where: str) -> Run:
    outcome = field(data, "outcome", where)
    return Run(text(data, "experiment", where),
               replace(plan, reading=text(data, "reading", where, optional=True)),
               None if outcome is None else outcome_from_dict(outcome, f"{where}.outcome"),
               number(field(data, "seconds", where), f"{where}.seconds"),
               text(data, "error", where))


def _result(data, runs: list[Run], registered: dict, where: str) -> ClaimResult:
    cid = text(data, "id", where)
    claim = registered.get(cid)
    if claim is None:
        raise ValueError(f"{where}.id = {cid!r} is not a registered claim (a claim of another "
                         "version of its paper? write the file again)")
    error = text(data, "error", where)
    if error:
        return ClaimResult(claim, (), error)
    # the decisions in the order of the claim's runs (the order reproduce decides them in)
    readings = [r.plan.reading for r in runs if r.experiment == claim.experiment]
    if not readings or any(r.outcome is None for r in runs if r.experiment == claim.experiment):
        raise ValueError(f"{where}: runs lacks an outcome of its experiment {claim.experiment} "
                         "(a decided claim needs every reading's)")
    if "readings" in data:
        stored = typed(data["readings"], dict, f"{where}.readings", "an object")
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
    papers = items(data, "papers", "")
    for i, p in enumerate(papers):
        typed(p, str, f"papers[{i}]", "a string")
    if "runs" not in data:
        raise ValueError("runs is missing: the reproduction was written without its curves "
                         "(write it with --json --curves, or to_dict(curves=True))")
    plan = _plan(data)
    runs = [_run(r, plan, f"runs[{i}]") for i, r in enumerate(items(data, "runs", ""))]
    registered = {c.id: c for c in claims()}
    results = tuple(_result(c, runs, registered, f"claims[{i}]")
                    for i, c in enumerate(items(data, "claims", "")))
    return Reproduction(tuple(papers), plan, results, tuple(runs),
                        number(field(data, "seconds", ""), "seconds"))


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
            yield from _changes(stored.get(k, "(absent)"), live.get(k, "(absent)"), path_at(path, k), rel)
    elif isinstance(stored, list) and isinstance(live, list) and len(stored) == len(live):
        for i, (a, b) in enumerate(zip(stored, live, strict=True)):
            yield from _changes(a, b, path_at(path, i), rel)
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
