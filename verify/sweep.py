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
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

import bounds

from .adapter import default_scenario, load_scenario
from .check import check
from .plugins import explicit
from .scenario import json_text
from .suite import worker_init

SPEC_FIELDS = ("key", "variant", "exact", "base", "grid", "random")


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


def _draw(name: str, rule, rng: np.random.Generator):
    """One random value of a field: a list of choices, or {"low", "high", "log", "integer"}."""
    if isinstance(rule, list):
        if not rule:
            raise ValueError(f"random.fields.{name}: the list of choices is empty")
        return rule[int(rng.integers(len(rule)))]
    if not isinstance(rule, Mapping) or not {"low", "high"} <= set(rule):
        raise ValueError(f"random.fields.{name} must be a list of choices or "
                         '{"low": .., "high": .., "log": bool, "integer": bool}')
    low, high = float(rule["low"]), float(rule["high"])
    if not low < high or (rule.get("log") and low <= 0):
        raise ValueError(f"random.fields.{name}: need 0 < low < high for log draws, low < high "
                         f"otherwise; got low={low}, high={high}")
    u = rng.uniform(np.log(low), np.log(high)) if rule.get("log") else rng.uniform(low, high)
    x = float(np.exp(u)) if rule.get("log") else float(u)
    return int(round(x)) if rule.get("integer") else x


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
        if not isinstance(data, Mapping):
            raise ValueError(f"sweep spec must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - set(SPEC_FIELDS))
        if unknown:
            raise ValueError(f"sweep spec: unknown field(s) {unknown}; fields are {list(SPEC_FIELDS)}")
        if "key" not in data:
            raise ValueError("sweep spec: 'key' (the result to check) is required")
        spec = cls(**dict(data))
        spec.variant_name()  # unknown key or variant -> ValueError
        if not isinstance(spec.exact, bool):
            raise ValueError(f"sweep spec: exact={spec.exact!r} must be true or false")
        for name in ("base", "grid"):
            if not isinstance(getattr(spec, name), Mapping):
                raise ValueError(f"sweep spec: {name} must be an object of scenario fields")
        for name, values in spec.grid.items():
            if not isinstance(values, list) or not values:
                raise ValueError(f"sweep spec: grid.{name} must be a non-empty list of values")
        if spec.random is not None:
            r = spec.random
            if not isinstance(r, Mapping) or not isinstance(r.get("n"), int) or r["n"] < 1 \
                    or not isinstance(r.get("seed", 0), int) \
                    or not isinstance(r.get("fields"), Mapping) or not r["fields"]:
                raise ValueError('sweep spec: random must be {"n": int >= 1, "seed": int, '
                                 '"fields": {field: rule}}')
        if not spec.grid and spec.random is None:
            raise ValueError("sweep spec: give a 'grid' or 'random' draws (or both)")
        return spec

    @classmethod
    def load(cls, path: str | Path) -> SweepSpec:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ValueError(f"sweep spec {path}: {e.strerror}") from None
        try:
            return cls.from_dict(json.loads(text))
        except json.JSONDecodeError as e:
            raise ValueError(f"sweep spec {path} is not valid JSON: {e.msg} at line {e.lineno}") \
                from None

    def variant_name(self) -> str:
        return bounds.get(self.key, self.variant).variant

    def points(self) -> Iterator[dict]:
        """Scenario dicts in a fixed order: grid points (row-major) x random draws."""
        names = list(self.grid)
        draws: list[dict] = [{}]
        if self.random is not None:
            rng = np.random.default_rng(int(self.random.get("seed", 0)))
            fields = self.random["fields"]
            draws = [{f: _draw(f, rule, rng) for f, rule in fields.items()}
                     for _ in range(self.random["n"])]
        base = {**default_scenario(self.key).to_dict(), **self.base}
        for combo in itertools.product(*(self.grid[n] for n in names)):
            for draw in draws:
                point = dict(base)
                for name, value in [*zip(names, combo, strict=True), *draw.items()]:
                    _set(point, name, value)
                yield point

    def scenarios(self) -> list[dict]:
        """The validated scenarios as JSON values (a bad point raises naming its field)."""
        out = []
        for i, point in enumerate(self.points()):
            try:
                out.append(load_scenario(self.key, point).to_dict())
            except ValueError as e:
                raise ValueError(f"sweep point {i}: {e}") from None
        return out

    def digest(self, scenario: Mapping) -> str:
        """The store key of one scenario of this sweep."""
        text = json.dumps({"key": self.key, "variant": self.variant_name(), "exact": self.exact,
                           "scenario": scenario}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------- the store


class Store:
    """The SQLite store of a sweep: one row per finished scenario, keyed by its digest."""

    SCHEMA = """CREATE TABLE IF NOT EXISTS results (
        digest TEXT PRIMARY KEY, key TEXT NOT NULL, variant TEXT NOT NULL,
        exact INTEGER NOT NULL, scenario TEXT NOT NULL, verdict TEXT, error TEXT,
        seconds REAL NOT NULL, finished REAL NOT NULL)"""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.conn = sqlite3.connect(self.path)
            self.conn.execute("PRAGMA journal_mode=WAL")
            with self.conn:
                self.conn.execute(self.SCHEMA)
        except sqlite3.DatabaseError as e:
            raise ValueError(f"--db {path}: not a fedbound sweep database ({e})") from None

    def finished(self) -> set[str]:
        return {d for (d,) in self.conn.execute("SELECT digest FROM results")}

    def add(self, digest: str, key: str, variant: str, exact: bool, scenario: Mapping,
            outcome: Mapping) -> None:
        """Store one finished scenario in its own transaction (a repeat is ignored)."""
        with self.conn:
            self.conn.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (digest, key, variant, int(exact), json.dumps(scenario, sort_keys=True),
                 None if outcome["verdict"] is None else json_text(outcome["verdict"]),
                 outcome["error"], outcome["seconds"], time.time()))

    def rows(self) -> list[dict]:
        """Every stored result: key, variant, exact, scenario, verdict (or error)."""
        cur = self.conn.execute("SELECT digest, key, variant, exact, scenario, verdict, error "
                                "FROM results ORDER BY finished, digest")
        return [{"digest": d, "key": k, "variant": v, "exact": bool(x),
                 "scenario": json.loads(s), "verdict": None if vd is None else json.loads(vd),
                 "error": e} for d, k, v, x, s, vd, e in cur]

    def close(self) -> None:
        self.conn.close()


# ---------------------------------------------------------------------- running


def run_point(key: str, variant: str, exact: bool, scenario: dict) -> dict:
    """Check one scenario (in a worker process): its verdict as JSON values, or the error."""
    t0 = time.perf_counter()
    try:
        v = check(key, scenario, variant=variant, exact=exact)
        verdict, error = v.as_dict(), None
    except ValueError as e:
        verdict, error = None, str(e)
    return {"verdict": verdict, "error": error, "seconds": time.perf_counter() - t0}


@dataclass
class SweepResult:
    total: int
    skipped: int  # already in the store
    ran: int
    errors: int

    def as_dict(self) -> dict:
        return {"total": self.total, "skipped": self.skipped, "ran": self.ran,
                "errors": self.errors}


def run_sweep(spec: SweepSpec, store: Store, executor: Executor | None = None,
              progress: Callable[[], None] | None = None) -> SweepResult:
    """Run the scenarios of ``spec`` not yet in ``store`` (through ``executor``, else in
    this process), storing each as soon as it finishes."""
    variant = spec.variant_name()
    scenarios = spec.scenarios()
    done = store.finished()
    todo = {}
    for s in scenarios:
        d = spec.digest(s)
        if d not in done:
            todo.setdefault(d, s)
    errors = 0

    def finish(d: str, outcome: dict) -> None:
        nonlocal errors
        store.add(d, spec.key, variant, spec.exact, todo[d], outcome)
        errors += outcome["error"] is not None
        if progress:
            progress()

    if executor is None:
        for d, s in todo.items():
            finish(d, run_point(spec.key, variant, spec.exact, s))
    else:
        futures = {executor.submit(run_point, spec.key, variant, spec.exact, s): d
                   for d, s in todo.items()}
        for f in as_completed(futures):
            finish(futures[f], f.result())
    return SweepResult(total=len(scenarios), skipped=len(scenarios) - len(todo), ran=len(todo),
                       errors=errors)


@contextmanager
def executor(*, jobs: int | None = None, scheduler: str | None = None,
             dask_local: int | None = None) -> Iterator[Executor | None]:
    """The executor of a sweep: a Dask cluster at ``scheduler``, a new Dask LocalCluster of
    ``dask_local`` workers, or (default) ``jobs`` local processes (default: every core;
    ``jobs=1``: None, i.e. this process)."""
    if scheduler is not None and dask_local is not None:
        raise ValueError("give --scheduler or --dask-local, not both")
    if scheduler is not None or dask_local is not None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ValueError("Dask needs the 'dask' extra: pip install 'fedbound[dask]'") from None
        if dask_local is not None and dask_local < 1:
            raise ValueError(f"--dask-local={dask_local} must be >= 1")
        cluster = None if scheduler else LocalCluster(n_workers=dask_local, threads_per_worker=1,
                                                      dashboard_address=None)
        try:
            with Client(scheduler or cluster) as client:
                client.run(worker_init, explicit())
                yield client.get_executor()
        finally:
            if cluster is not None:
                cluster.close()
        return
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if jobs < 1:
        raise ValueError(f"--jobs={jobs} must be >= 1")
    if jobs == 1:  # this process
        yield None
        return
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn"), initializer=worker_init,
                             initargs=(explicit(),)) as pool:
        yield pool
