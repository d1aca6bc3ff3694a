"""The SQLite store of fedbound's resumable work (a sweep's scenarios, a reproduction's
experiment runs) and the driver that runs work into it through any Executor.

:class:`Store` holds one row per finished unit of work, keyed by a digest of what it is
(``verify.sweep``: the scenario; ``verify.reproduce``: the experiment, its plan and the
code), written in its own transaction as soon as it finishes, and the claims of running
drivers; :func:`run_stored` runs what a store does not hold yet, claiming each unit before
it runs, so that work killed at any moment resumes from the store and stores each unit
once. What the store promises (``verify.sweep``'s docstring, ``docs/reliability.md``):
drivers cooperate through leases, a file that is not a fedbound store is refused untouched,
a store held locked is waited on for :data:`LOCK_WAIT` seconds, SQLite's I/O failures are
``OSError`` s naming the store.
"""

from __future__ import annotations

import errno
import functools
import json
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
from pathlib import Path

from .inputs import KINDS
from .scenario import BAD_PATHS, json_text

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
    database, which a driver may initialise), read without modifying anything; ValueError
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
    """The SQLite store of a sweep or a reproduction: one row per finished unit of work (a
    scenario, an experiment run), keyed by its digest, and the claims of running drivers.
    ``readonly``: opened with SQLite's ``mode=ro`` (what ``fedbound report`` does); the file
    must exist. A file that is not a fedbound store is
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
    def results(self, digests) -> dict[str, dict]:
        """The stored rows of ``digests`` (those the store holds): digest -> {"verdict": the
        JSON value of its verdict column (None for an error row), "error", "seconds"}."""
        out = {}
        for d in digests:
            row = self.conn.execute("SELECT verdict, error, seconds FROM results WHERE digest = ?",
                                    (d,)).fetchone()
            if row is not None:
                out[d] = {"verdict": None if row[0] is None else json.loads(row[0]),
                          "error": row[1], "seconds": row[2]}
        return out

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


def run_stored(calls: Mapping[str, tuple | dict], store: Store, executor: Executor | None,
               record: Callable[[str, dict], None], *,
               progress: Callable[[int, int], None] | None = None, window: int | None = None,
               lease: float = LEASE, noun: str = "scenarios",
               reraise: tuple[type[BaseException], ...] = ()) -> tuple[int, int]:
    """Run each of ``calls`` (digest -> ``(function, *args)``, whose call returns an outcome
    dict with an ``"error"``; or the outcome itself, already known) that ``store`` does not
    hold yet, through ``executor`` (else in this process), claiming each in the store before
    it runs and handing each outcome to ``record(digest, outcome)`` as soon as it finishes
    (``record`` stores it, or not: a run that should be retried). ``window``: calls claimed
    and in flight at once (default: two per core, one without an executor);
    ``progress(done, total)`` after each finished call, ``done`` counting the digests stored
    before and by other drivers. Waits for calls that another live driver holds, and takes
    them over if its lease expires. On KeyboardInterrupt: cancels what has not started,
    releases its claims and re-raises with a message saying what is stored (``noun``: what
    a call is). A call that raises is an outcome with its error, but for the exceptions of
    ``reraise`` (the environment's or a plugin's fault, not the call's), which stop the run
    (what is stored stays). Returns (the calls this driver ran, those other drivers stored
    meanwhile)."""
    total = len(calls)
    done = store.finished()
    pending = dict.fromkeys(d for d in calls if d not in done)  # an ordered set
    window = (1 if executor is None else 2 * (os.cpu_count() or 1)) if window is None else window
    owner = _owner()
    ran = others = 0
    running: dict = {}

    def finish(d: str, outcome: dict) -> None:
        nonlocal ran
        record(d, outcome)
        pending.pop(d, None)
        ran += 1
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
                call = calls[d]
                if isinstance(call, dict):
                    finish(d, call)
                elif executor is None:
                    finish(d, call[0](*call[1:]))
                else:
                    running[executor.submit(*call)] = d
            if not running:
                if pending and not claimed:  # the rest is held by other drivers: wait for them
                    time.sleep(min(1.0, lease / 10))
                continue
            finished, _ = wait(running, timeout=min(1.0, lease / 10), return_when=FIRST_COMPLETED)
            for f in finished:
                d = running.pop(f)
                try:
                    outcome = f.result()
                except reraise:
                    raise
                except Exception as e:  # noqa: BLE001 - e.g. the task could not be sent
                    outcome = {"verdict": None, "seconds": 0.0,
                               "error": traceback.format_exception_only(type(e), e)[-1].strip()}
                finish(d, outcome)
    except KeyboardInterrupt:
        for f in running:
            f.cancel()
        with suppress(sqlite3.Error, ValueError, OSError):  # between a store and its count
            pending = {d: None for d in pending if d not in store.finished()}
        raise KeyboardInterrupt(f"{ran} {noun} run by this driver are stored in {store.path} "
                                f"({total - len(pending)} of {total} in all); run the same "
                                "command again to resume") from None
    finally:
        heartbeat.stopped.set()
        with suppress(sqlite3.Error, ValueError, OSError):
            store.release(owner)
    return ran, others
