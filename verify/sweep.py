"""Resumable sweeps: many scenarios of one result, through any Executor, into SQLite.

A sweep spec (JSON) names a result, a base scenario and either a grid or random draws
over scenario fields (a dotted name such as ``problem.sigma`` reaches into the problem)::

    {"key": "mllsgd.theorem1", "variant": "proof", "exact": false,
     "base": {"replicas": 64},
     "grid": {"tau": [1, 2, 4], "p": [0.7, 0.9]},
     "random": {"n": 20, "seed": 0, "fields": {"problem.sigma": {"low": 0.1, "high": 2},
                                               "graph": ["path", "ring"]}}}

``grid`` and ``random`` may be given together (each grid point is combined with each
draw). Every scenario is keyed by the SHA-256 of (key, variant, exact, scenario); a
finished scenario is written in its own transaction as soon as its future completes, so
a sweep killed at any moment resumes from the database and stores each scenario once.

What a sweep promises (``docs/reliability.md``):

* The whole spec is validated before anything runs or any file is created: its fields,
  its size (at most ``--max-scenarios`` scenarios, counted before drawing), every grid
  point, and every scenario's resource footprint (``verify.limits``). A random draw that
  is not a valid scenario (a field drawn outside its range, say) does not abort the sweep:
  it is recorded as an error row ("invalid draw: ...") under the digest of the drawn point,
  and is not redrawn (the draws stay those of the seed).
* A scenario whose check raises, whatever the exception, becomes an error row with its
  message; the sweep goes on (exit status 4 in the CLI).
* Drivers cooperate: a scenario is claimed in the store (a lease with an expiry, renewed
  while it runs) before it is submitted, so two drivers on one database never run the same
  scenario while both are alive, and each reports only what it ran. The claims of a driver
  that died are taken over when their lease expires, at once when it ran on this machine.
* Worker processes of the local pool die with their driver (``verify.pool.worker_init``);
  on an interruption the driver cancels what has not started, stops its workers, releases
  its claims and keeps every stored result.
* The store is recognised by its SQLite ``application_id`` and ``user_version``; a file
  that is not a fedbound store, a corrupt one or one written by a newer fedbound is
  refused without being modified (it is inspected read-only first).
* A store that another process holds locked is waited on for ``LOCK_WAIT`` seconds, then
  refused (a ValueError naming ``--db``: exit 2); SQLite's own I/O failures (a full disk,
  a read-only file) are ``OSError`` s naming the store (exit 74).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbound import bounds

from . import limits
from .adapter import adapter_for, default_scenario
from .check import check
from .inputs import read_text
from .scenario import INT_MAX, parse_json, require_float
from .store import (  # noqa: F401 - the sweep's store, as verify.sweep has always offered it
    LEASE,
    LOCK_WAIT,
    SCHEMA_VERSION,
    Store,
    inspect_store,
    run_stored,
)

SPEC_FIELDS = ("key", "variant", "exact", "base", "grid", "random")
RANDOM_FIELDS = ("n", "seed", "fields")
RULE_FIELDS = ("low", "high", "log", "integer")


def _set(d: dict, dotted: str, value) -> None:
    """d[a][b] = value for ``dotted`` = "a.b" (nested dicts are copied, not shared)."""
    head, _, rest = dotted.partition(".")
    if not rest:
        d[head] = value
        return
    inner = d.get(head)
    if not isinstance(inner, Mapping):
        raise ValueError(f"sweep field {dotted!r}: {head!r} is not an object in the scenario")
    d[head] = dict(inner)
    _set(d[head], rest, value)


def _check_rule(name: str, rule) -> None:
    """A random field's rule: a non-empty list of choices, or {"low", "high", "log",
    "integer"} with finite numbers low < high whose range is finite in float64 (and low > 0
    for log draws); ValueError naming ``random.fields.<name>`` otherwise."""
    where = f"random.fields.{name}"
    if isinstance(rule, list):
        if not rule:
            raise ValueError(f"{where}: the list of choices is empty")
        return
    if not isinstance(rule, Mapping) or not {"low", "high"} <= set(rule) \
            or not set(rule) <= set(RULE_FIELDS):
        raise ValueError(f"{where} must be a list of choices or "
                         '{"low": number, "high": number, "log": bool, "integer": bool}')
    low = require_float(f"{where}.low", rule["low"])
    high = require_float(f"{where}.high", rule["high"])
    for flag in ("log", "integer"):
        if not isinstance(rule.get(flag, False), bool):
            raise ValueError(f"{where}.{flag}={rule[flag]!r} must be true or false")
    if not low < high or (rule.get("log") and low <= 0):
        raise ValueError(f"{where}: need 0 < low < high for log draws, low < high otherwise; "
                         f"got low={low:g}, high={high:g}")
    if not rule.get("log") and not math.isfinite(high - low):
        raise ValueError(f"{where}: high - low = {high:g} - {low:g} overflows float64; use a "
                         "narrower range or log draws")


def _draw(name: str, rule, rng: np.random.Generator):
    """One random value of a field: a list of choices, or {"low", "high", "log", "integer"}
    (a rule that :func:`_check_rule` accepted)."""
    if isinstance(rule, list):
        return rule[int(rng.integers(len(rule)))]
    low, high = float(rule["low"]), float(rule["high"])
    u = rng.uniform(np.log(low), np.log(high)) if rule.get("log") else rng.uniform(low, high)
    x = float(np.exp(u)) if rule.get("log") else float(u)
    return int(round(x)) if rule.get("integer") else x


@dataclass(frozen=True)
class Entry:
    """One scenario of a sweep: its store key, its scenario (JSON values; the drawn point
    itself for an invalid draw) and, for an invalid random draw, why (else None)."""

    digest: str
    scenario: dict
    invalid: str | None = None


@dataclass(frozen=True)
class SweepSpec:
    """A sweep: ``key`` (and ``variant``, ``exact``), ``base`` scenario fields, a ``grid``
    (field -> list of values, Cartesian product) and/or ``random`` draws."""

    key: str
    variant: str | None = None
    exact: bool = False
    base: dict = field(default_factory=dict)
    grid: dict = field(default_factory=dict)
    random: dict | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SweepSpec:
        """A validated spec: its fields and rules, and its size (at most ``--max-scenarios``
        scenarios, counted before anything is drawn). The scenarios themselves are
        validated by :meth:`entries`."""
        if not isinstance(data, Mapping):
            raise ValueError(f"sweep spec must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(SPEC_FIELDS))
        if unknown:
            raise ValueError(f"sweep spec: unknown field(s) {unknown}; fields are {list(SPEC_FIELDS)}")
        if "key" not in data:
            raise ValueError("sweep spec: 'key' (the result to check) is required")
        if not isinstance(data["key"], str) or not (data.get("variant") is None
                                                    or isinstance(data["variant"], str)):
            raise ValueError("sweep spec: key and variant must be strings")
        spec = cls(**dict(data))
        try:
            spec.variant_name()
        except ValueError as e:
            field = "variant" if spec.key in bounds.keys() else "key"
            raise ValueError(f"sweep spec: {field}={getattr(spec, field)!r}: {e}") from None
        if not isinstance(spec.exact, bool):
            raise ValueError(f"sweep spec: exact={spec.exact!r} must be true or false")
        for name in ("base", "grid"):
            if not isinstance(getattr(spec, name), Mapping):
                raise ValueError(f"sweep spec: {name} must be an object of scenario fields")
        for name, values in spec.grid.items():
            if not isinstance(values, list) or not values:
                raise ValueError(f"sweep spec: grid.{name} must be a non-empty list of values")
        if spec.random is not None:
            spec._check_random()
        if not spec.grid and spec.random is None:
            raise ValueError("sweep spec: give a 'grid' or 'random' draws (or both)")
        limits.require_count(spec.size(), "sweep spec: " + spec.size_text())
        return spec

    def _check_random(self) -> None:
        r = self.random
        shape = '{"n": integer >= 1, "seed": integer in [0, 2^63), "fields": {field: rule}}'
        if not isinstance(r, Mapping) or set(r) - set(RANDOM_FIELDS):
            raise ValueError(f"sweep spec: random must be {shape}")
        n, seed = r.get("n"), r.get("seed", 0)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"sweep spec: random.n={json.dumps(n)[:40]} must be an integer >= 1; "
                             f"random must be {shape}")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= INT_MAX:
            raise ValueError(f"sweep spec: random.seed={json.dumps(seed)[:40]} must be an integer "
                             f"in [0, 2^63); random must be {shape}")
        if not isinstance(r.get("fields"), Mapping) or not r["fields"]:
            raise ValueError(f"sweep spec: random.fields must be a non-empty object; random must "
                             f"be {shape}")
        for name, rule in r["fields"].items():
            _check_rule(name, rule)

    def size(self) -> int:
        """The number of scenarios: the grid's points times the random draws."""
        return math.prod(len(v) for v in self.grid.values()) * (self.random or {}).get("n", 1)

    def size_text(self) -> str:
        parts = [f"grid.{k} ({len(v)})" for k, v in self.grid.items()]
        if self.random is not None:
            parts.append(f"random.n ({self.random['n']})")
        return " x ".join(parts)

    @classmethod
    def load(cls, path: str | Path) -> SweepSpec:
        """The spec in the JSON file ``path`` (``-``: standard input), read with the input
        limit and the guards of ``verify.inputs``."""
        what = f"sweep spec {path}"
        return cls.from_dict(parse_json(read_text(path, what), what))

    def variant_name(self) -> str:
        return bounds.get(self.key, self.variant).variant

    def _points(self) -> Iterator[tuple[int, dict, dict]]:
        """(grid point index, grid point, the point with its random draw) in a fixed order:
        grid points (row-major) x random draws (the point itself without ``random``)."""
        names = list(self.grid)
        draws: list[dict] = [{}]
        if self.random is not None:
            rng = np.random.default_rng(int(self.random.get("seed", 0)))
            fields = self.random["fields"]
            draws = [{f: _draw(f, rule, rng) for f, rule in fields.items()}
                     for _ in range(self.random["n"])]
        base = {**default_scenario(self.key).to_dict(), **self.base}
        for i, combo in enumerate(itertools.product(*(self.grid[n] for n in names))):
            grid_point = dict(base)
            for name, value in zip(names, combo, strict=True):
                _set(grid_point, name, value)
            for draw in draws:
                point = dict(grid_point)
                for name, value in draw.items():
                    _set(point, name, value)
                yield i, grid_point, point

    def points(self) -> Iterator[dict]:
        """Scenario dicts in a fixed order: grid points (row-major) x random draws."""
        return (point for _, _, point in self._points())

    def entries(self) -> list[Entry]:
        """Every scenario of the sweep, validated, with its store key. The base with each
        grid point must be a valid scenario on its own, and every scenario must be within
        the resource limits: otherwise the spec is refused (ValueError naming the point and
        the field). A random draw that makes a valid grid point invalid is an :class:`Entry`
        with ``invalid`` set (module docstring)."""
        ad = adapter_for(self.key)
        out: list[Entry] = []
        checked = -1
        for i, grid_point, point in self._points():
            if i != checked and self.random is not None:
                try:
                    ad.load(grid_point)
                except ValueError as e:
                    raise ValueError(f"sweep point {i}: {e}") from None
                checked = i
            try:
                s = ad.load(point)
            except ValueError as e:
                if self.random is None:
                    raise ValueError(f"sweep point {i}: {e}") from None
                out.append(Entry(self.digest(point), point, f"invalid draw: {e}"))
                continue
            try:
                ad.require_resources(s, exact=self.exact)
            except limits.ResourceError as e:
                raise limits.ResourceError(f"sweep point {len(out)}: {e}") from None
            scenario = s.to_dict()
            out.append(Entry(self.digest(scenario), scenario))
        return out

    def scenarios(self) -> list[dict]:
        """The valid scenarios as JSON values (a bad grid point raises naming its field)."""
        return [e.scenario for e in self.entries() if e.invalid is None]

    def digest(self, scenario: Mapping) -> str:
        """The store key of one scenario of this sweep."""
        text = json.dumps({"key": self.key, "variant": self.variant_name(), "exact": self.exact,
                           "scenario": scenario}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


def run_point(key: str, variant: str, exact: bool, scenario: dict) -> dict:
    """Check one scenario (in a worker process): its verdict as JSON values, or the error
    (any exception: a ValueError by its message, anything else with its type)."""
    t0 = time.perf_counter()
    try:
        v = check(key, scenario, variant=variant, exact=exact)
        verdict, error = v.as_dict(), None
    except ValueError as e:
        verdict, error = None, str(e)
    except Exception as e:  # noqa: BLE001 - a sweep records every failure and goes on
        verdict, error = None, traceback.format_exception_only(type(e), e)[-1].strip()
    return {"verdict": verdict, "error": error, "seconds": time.perf_counter() - t0}


@dataclass
class SweepResult:
    total: int
    skipped: int  # already in the store when the driver started
    ran: int  # run (or recorded as invalid draws) by this driver
    errors: int  # error rows among those this driver ran
    others: int = 0  # stored by other drivers while this one ran

    def as_dict(self) -> dict:
        return {"total": self.total, "skipped": self.skipped, "ran": self.ran,
                "errors": self.errors, "others": self.others}


def run_sweep(spec: SweepSpec, store: Store, executor: Executor | None = None,
              progress: Callable[[int, int], None] | None = None, *,
              entries: list[Entry] | None = None, window: int | None = None,
              lease: float = LEASE) -> SweepResult:
    """Run the scenarios of ``spec`` not yet in ``store`` (through ``executor``, else in
    this process), claiming each before it runs and storing each as soon as it finishes
    (module docstring; :func:`run_stored`). ``entries``: the spec's validated entries, if
    already computed; ``window``: scenarios claimed and in flight at once (default: two per
    core, one without an executor); ``progress(stored, total)`` after each stored scenario."""
    variant = spec.variant_name()
    entries = spec.entries() if entries is None else entries
    by_digest = {e.digest: e for e in entries}
    skipped = len(set(by_digest) & store.finished())  # stored before this driver started
    errors = 0

    def record(d: str, outcome: dict) -> None:
        nonlocal errors
        store.add(d, spec.key, variant, spec.exact, by_digest[d].scenario, outcome)
        errors += outcome["error"] is not None

    calls = {d: {"verdict": None, "error": e.invalid, "seconds": 0.0} if e.invalid is not None
             else (run_point, spec.key, variant, spec.exact, e.scenario)
             for d, e in by_digest.items()}
    ran, others = run_stored(calls, store, executor, record, progress=progress, window=window,
                             lease=lease)
    return SweepResult(total=len(by_digest), skipped=skipped, ran=ran, errors=errors,
                       others=others)
