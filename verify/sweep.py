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

import errno
import functools
import hashlib
import itertools
import json
import math
import os
import socket
import sqlite3
import stat as stat_module
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Executor, wait
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedbound import bounds

from . import limits
from .adapter import adapter_for, default_scenario
from .check import check
from .inputs import KINDS, read_text
from .scenario import BAD_PATHS, INT_MAX, json_text, parse_json, require_float

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


# ---------------------------------------------------------------------- the store

#: SQLite application_id of a fedbound store ("FBND")
APPLICATION_ID = 0x46424E44
#: the store's schema version (PRAGMA user_version): 1 = results only (no application_id),
#: 2 = results and claims
SCHEMA_VERSION = 2
RESULT_COLUMNS = ("digest", "key", "variant", "exact", "scenario", "verdict", "error", "seconds",
                  "finished")
#: a claim's lease (seconds): renewed every third of it while its driver lives
LEASE = 60.0
#: seconds a statement waits for a store that another process holds locked
LOCK_WAIT = 30.0
#: SQLite's messages of a failure of the environment, and the errno each is reported as
IO_FAILURES = {"disk I/O error": errno.EIO, "database or disk is full": errno.ENOSPC,
               "attempt to write a readonly database": errno.EROFS,
               "unable to open database file": errno.EACCES}


@contextmanager
def _store_errors(path: Path, flag: str) -> Iterator[None]:
    """SQLite's "database is locked" (after :data:`LOCK_WAIT` seconds) as a ValueError naming
    ``flag``, and its I/O failures (:data:`IO_FAILURES`) as an OSError naming ``path``."""
    try:
        yield
    except sqlite3.OperationalError as e:
        text = str(e)
        if "locked" in text or "busy" in text:
            raise ValueError(f"{flag} {path} is locked by another process: waited {LOCK_WAIT:g} s "
                             "for it to be released; run again when that process has "
                             "finished") from None
        code = next((c for m, c in IO_FAILURES.items() if m in text), None)
        if code is not None:
            raise OSError(code, f"SQLite: {text}", str(path)) from None
        raise


def _guarded(method):
    """A :class:`Store` method whose SQLite errors are :func:`_store_errors`."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        with _store_errors(self.path, self.flag):
            return method(self, *args, **kwargs)
    return wrapper


def _header(path: Path) -> tuple[int, int] | None:
    """(application_id, user_version) from the 100-byte header of an SQLite file, read as
    plain bytes (no SQLite connection, so nothing is created next to a foreign file); None
    when the file is not an SQLite database."""
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00"):
        return None
    return int.from_bytes(head[68:72], "big"), int.from_bytes(head[60:64], "big")


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{query}"


def inspect_store(path: str | Path, flag: str = "--db") -> int:
    """The schema version of the fedbound store at ``path`` (0: an empty file or an empty
    database, which a sweep may initialise), read without modifying anything; ValueError
    naming ``flag`` when it is not a fedbound store, is corrupt, or is of a newer version."""
    path = Path(path)
    st = path.stat()
    if not stat_module.S_ISREG(st.st_mode):
        kind = KINDS.get(stat_module.S_IFMT(st.st_mode), "not a regular file")
        raise ValueError(f"{flag} {path} is {kind}: give the file of a fedbound store")
    if st.st_size == 0:
        return 0
    head = _header(path)
    if head is None:
        raise ValueError(f"{flag} {path} is not a fedbound store: not an SQLite database "
                         "(fedbound leaves it untouched)")
    app, version = head
    if app not in (0, APPLICATION_ID):
        raise ValueError(f"{flag} {path} is not a fedbound store: it belongs to another "
                         f"application (SQLite application_id {app:#x}); fedbound leaves it "
                         "untouched")
    if app == APPLICATION_ID and version > SCHEMA_VERSION:
        raise ValueError(f"{flag} {path} was written by a newer fedbound (store version "
                         f"{version} > {SCHEMA_VERSION}): upgrade fedbound to read it")
    try:
        with _closing(sqlite3.connect(_read_only(path), uri=True)) as conn:
            tables = {name: [c[1] for c in conn.execute(f"PRAGMA table_info({name})")]
                      for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
    except sqlite3.DatabaseError as e:
        raise ValueError(f"{flag} {path} is corrupt or not an SQLite database (SQLite: {e}); "
                         "fedbound leaves it untouched") from None
    if check != "ok":
        raise ValueError(f"{flag} {path} is corrupt (SQLite quick_check: {check}); fedbound "
                         "leaves it untouched")
    if app == 0 and not tables:
        return 0
    if tables.get("results") != list(RESULT_COLUMNS) or set(tables) - {"results", "claims"}:
        raise ValueError(f"{flag} {path} is not a fedbound store (tables: "
                         f"{', '.join(sorted(tables)) or 'none'}); fedbound leaves it untouched")
    return version if app == APPLICATION_ID else 1


def _read_only(path: Path) -> str:
    """The URI that reads ``path`` without writing anything: as immutable (no journal, WAL,
    shared-memory or lock file is created next to it) unless a write-ahead log exists, i.e.
    a driver may be writing it right now; then read-only with locks (the log's files exist
    already)."""
    if path.with_name(path.name + "-wal").exists():
        return _uri(path, mode="ro")
    return _uri(path, mode="ro", immutable="1")


@contextmanager
def _closing(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    try:
        yield conn
    finally:
        conn.close()


def _owner() -> str:
    """A driver's name in the claims: host, process id and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


def _alive(owner: str) -> bool:
    """False only for a driver of this machine whose process is gone (others are judged by
    their lease)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class Store:
    """The SQLite store of a sweep: one row per finished scenario, keyed by its digest, and
    the claims of running drivers. ``readonly``: opened with SQLite's ``mode=ro`` (what
    ``fedbound report`` does); the file must exist. A file that is not a fedbound store is
    refused before it is modified (:func:`inspect_store`)."""

    SCHEMA = """CREATE TABLE IF NOT EXISTS results (
        digest TEXT PRIMARY KEY, key TEXT NOT NULL, variant TEXT NOT NULL,
        exact INTEGER NOT NULL, scenario TEXT NOT NULL, verdict TEXT, error TEXT,
        seconds REAL NOT NULL, finished REAL NOT NULL)"""
    CLAIMS = """CREATE TABLE IF NOT EXISTS claims (
        digest TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL)"""

    def __init__(self, path: str | Path, *, readonly: bool = False, flag: str = "--db"):
        self.path = Path(path)
        self.readonly = readonly
        self.flag = flag
        try:
            exists = self.path.exists()
        except OSError as e:
            if e.errno not in BAD_PATHS:
                raise
            raise ValueError(f"{flag} {str(path)[:200]}: {e.strerror}") from None
        if not exists and self.path.is_symlink():
            raise ValueError(f"{flag} {path} is a symbolic link that leads nowhere (a dangling link "
                             "or a loop of links)")
        if readonly and not exists:
            raise ValueError(f"{flag} {path}: no such file")
        version = inspect_store(self.path, flag) if exists else 0
        if readonly and version == 0:
            raise ValueError(f"{flag} {path} holds no fedbound results (an empty database)")
        try:
            with _store_errors(self.path, flag):
                if readonly:
                    self.conn = sqlite3.connect(_read_only(self.path), uri=True,
                                                timeout=LOCK_WAIT, check_same_thread=False)
                else:
                    self.conn = sqlite3.connect(self.path, timeout=LOCK_WAIT, check_same_thread=False)
                    if version < SCHEMA_VERSION:
                        self._initialise()
        except sqlite3.DatabaseError as e:
            raise ValueError(f"{flag} {path}: cannot open the store ({e})") from None

    def _initialise(self, timeout: float = LOCK_WAIT) -> None:
        """Create (or upgrade a version-1 store to) the current schema. Every statement is
        idempotent, so two drivers that create one store at once both succeed: switching to
        WAL needs the file to itself, and SQLite answers "database is locked" at once rather
        than waiting for the other driver's transaction, so the creation is retried until
        ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode=WAL")
                with self.conn:
                    self.conn.execute(self.SCHEMA)
                    self.conn.execute(self.CLAIMS)
                    self.conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    self.conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    @_guarded
    def finished(self) -> set[str]:
        return {d for (d,) in self.conn.execute("SELECT digest FROM results")}

    @_guarded
    def add(self, digest: str, key: str, variant: str, exact: bool, scenario: Mapping,
            outcome: Mapping) -> None:
        """Store one finished scenario and drop its claim, in one transaction (a repeat is
        ignored)."""
        with self.conn:
            self.conn.execute(
                "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (digest, key, variant, int(exact), json.dumps(scenario, sort_keys=True),
                 None if outcome["verdict"] is None else json_text(outcome["verdict"]),
                 outcome["error"], outcome["seconds"], time.time()))
            self.conn.execute("DELETE FROM claims WHERE digest = ?", (digest,))

    @_guarded
    def claim(self, digests, owner: str, lease: float, limit: int) -> tuple[list[str], list[str]]:
        """Claim up to ``limit`` of ``digests`` (in their order) for ``owner``: those not
        stored and not claimed by a live driver whose lease has not expired. Returns (the
        digests claimed, the digests found stored on the way)."""
        now = time.time()
        claimed: list[str] = []
        stored: list[str] = []
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            held = {d: (o, e) for d, o, e in self.conn.execute("SELECT digest, owner, expires FROM claims")}
            for d in digests:
                if len(claimed) >= limit:
                    break
                if self.conn.execute("SELECT 1 FROM results WHERE digest = ?", (d,)).fetchone():
                    stored.append(d)
                    continue
                o, expires = held.get(d, (owner, 0.0))
                if o != owner and expires > now and _alive(o):
                    continue
                self.conn.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", (d, owner, now + lease))
                claimed.append(d)
        return claimed, stored

    @_guarded
    def renew(self, owner: str, lease: float) -> None:
        with self.conn:
            self.conn.execute("UPDATE claims SET expires = ? WHERE owner = ?", (time.time() + lease, owner))

    @_guarded
    def release(self, owner: str) -> None:
        with self.conn:
            self.conn.execute("DELETE FROM claims WHERE owner = ?", (owner,))

    @_guarded
    def count(self) -> int:
        """The number of stored results (counted, nothing loaded)."""
        return self.conn.execute("SELECT count(*) FROM results").fetchone()[0]

    @_guarded
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


class _Heartbeat(threading.Thread):
    """Renews a driver's leases every third of their length, on its own connection."""

    def __init__(self, path: Path, owner: str, lease: float):
        super().__init__(daemon=True, name="fedbound-lease")
        self.path, self.owner, self.lease = path, owner, lease
        self.stopped = threading.Event()

    def run(self) -> None:
        with suppress(sqlite3.Error), _closing(sqlite3.connect(self.path, timeout=LOCK_WAIT)) as conn:
            while not self.stopped.wait(self.lease / 3):
                with conn:
                    conn.execute("UPDATE claims SET expires = ? WHERE owner = ?",
                                 (time.time() + self.lease, self.owner))


def run_sweep(spec: SweepSpec, store: Store, executor: Executor | None = None,
              progress: Callable[[int, int], None] | None = None, *,
              entries: list[Entry] | None = None, window: int | None = None,
              lease: float = LEASE) -> SweepResult:
    """Run the scenarios of ``spec`` not yet in ``store`` (through ``executor``, else in
    this process), claiming each before it runs and storing each as soon as it finishes
    (module docstring). ``entries``: the spec's validated entries, if already computed;
    ``window``: scenarios claimed and in flight at once (default: two per core, one
    without an executor); ``progress(stored, total)`` after each stored scenario. Waits
    for scenarios that another live driver holds, and takes them over if its lease expires.
    On KeyboardInterrupt: cancels what has not started, releases its claims and re-raises
    with a message saying what is stored."""
    variant = spec.variant_name()
    entries = spec.entries() if entries is None else entries
    by_digest = {e.digest: e for e in entries}
    total = len(by_digest)
    done = store.finished()
    pending = dict.fromkeys(d for d in by_digest if d not in done)  # an ordered set
    skipped = total - len(pending)
    window = (1 if executor is None else 2 * (os.cpu_count() or 1)) if window is None else window
    owner = _owner()
    ran = errors = others = 0
    running: dict = {}

    def finish(d: str, outcome: dict) -> None:
        nonlocal ran, errors
        store.add(d, spec.key, variant, spec.exact, by_digest[d].scenario, outcome)
        pending.pop(d, None)
        ran += 1
        errors += outcome["error"] is not None
        if progress:
            progress(total - len(pending), total)

    heartbeat = _Heartbeat(store.path, owner, lease)
    heartbeat.start()
    try:
        while pending:
            claimed: list[str] = []
            if len(running) < window:
                claimed, gone = store.claim((d for d in pending if d not in running.values()),
                                            owner, lease, window - len(running))
                for d in gone:  # stored by another driver
                    pending.pop(d, None)
                    others += 1
            for d in claimed:
                e = by_digest[d]
                if e.invalid is not None:
                    finish(d, {"verdict": None, "error": e.invalid, "seconds": 0.0})
                elif executor is None:
                    finish(d, run_point(spec.key, variant, spec.exact, e.scenario))
                else:
                    running[executor.submit(run_point, spec.key, variant, spec.exact, e.scenario)] = d
            if not running:
                if pending and not claimed:  # the rest is held by other drivers: wait for them
                    time.sleep(min(1.0, lease / 10))
                continue
            finished, _ = wait(running, timeout=min(1.0, lease / 10), return_when=FIRST_COMPLETED)
            for f in finished:
                d = running.pop(f)
                try:
                    outcome = f.result()
                except Exception as e:  # noqa: BLE001 - e.g. the task could not be sent
                    outcome = {"verdict": None, "seconds": 0.0,
                               "error": traceback.format_exception_only(type(e), e)[-1].strip()}
                finish(d, outcome)
    except KeyboardInterrupt:
        for f in running:
            f.cancel()
        with suppress(sqlite3.Error, ValueError, OSError):  # between a store and its count
            pending = {d: None for d in pending if d not in store.finished()}
        raise KeyboardInterrupt(f"{ran} scenarios run by this driver are stored in {store.path} "
                                f"({total - len(pending)} of {total} in all); run the same "
                                "command again to resume") from None
    finally:
        heartbeat.stopped.set()
        with suppress(sqlite3.Error, ValueError, OSError):
            store.release(owner)
    return SweepResult(total=total, skipped=skipped, ran=ran, errors=errors, others=others)
