"""Injected faults (issue 19): killed and interrupted drivers, concurrent drivers, foreign,
corrupt and newer databases, output paths that are files, links or unwritable, internal
errors and closed pipes. Nothing crashes, nothing is lost, nothing outside fedbound's own
files is touched."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.machinery
import json
import os
import pty
import re
import select
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import markupsafe
import pytest
from bounded import CEILING, ceiling

from fedbound import bounds
from fedbound.verify import output, report, sweep
from fedbound.verify import store as store_module
from fedbound.verify.cli import main
from fedbound.verify.interrupts import uninterrupted_imports
from fedbound.verify.verdict import OUTCOMES

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
LINUX = Path("/proc/self/stat").exists()
needs_proc = pytest.mark.skipif(not LINUX, reason="reads processes from /proc")

#: 8 scenarios of about 0.3 s each on a quiet machine: long enough that the sweep cannot
#: finish between the test seeing two stored rows and its kill (at K = 32 they took 8 ms,
#: and once the workers had started the sweep could finish within the test's reaction time)
SPEC = {"key": "mllsgd.theorem1", "base": {"replicas": 8, "K": 4096, "q": 2, "tau": 2},
        "grid": {"tau": [1, 2], "p": [0.7, 0.9]},
        "random": {"n": 2, "seed": 3, "fields": {"problem.sigma": {"low": 0.1, "high": 2,
                                                                   "log": True}}}}
#: 4 scenarios of a few hundredths of a second
TINY = {"key": "mllsgd.theorem1", "base": {"replicas": 4, "K": 8, "q": 2, "tau": 2},
        "grid": {"tau": [1, 2], "p": [0.7, 0.9]}}


def fedbound(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fedbound", *args], env=ENV, cwd=ROOT,
                            text=True, start_new_session=True, **kw)


def write(path: Path, spec: dict) -> Path:
    path.write_text(json.dumps(spec))
    return path


def stored(db: Path) -> list[tuple[str, str]]:
    """The stored rows (none while the store is being created)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        try:
            return list(conn.execute("SELECT digest, verdict FROM results ORDER BY digest"))
        except sqlite3.OperationalError:
            return []


def claims(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return conn.execute("SELECT count(*) FROM claims").fetchone()[0]


def wait_for(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    """Running (a zombie, dead but not yet reaped by its new parent, is not alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def children(pid: int) -> list[int]:
    """The descendants of ``pid``: its children (the pool's fork server, the resource
    tracker), theirs (the workers the fork server forked), and so on."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    out, frontier = [], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        out += frontier
    return out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory) -> list[tuple[str, str]]:
    """The rows of SPEC swept in this process, without a fault."""
    db = tmp_path_factory.mktemp("unbroken") / "u.sqlite"
    store = sweep.Store(db)
    sweep.run_sweep(sweep.SweepSpec.from_dict(SPEC), store)
    store.close()
    return stored(db)


# ---------------------------------------------------------------------- killed drivers


@needs_proc
def test_sigkill_of_a_sweep_driver_leaves_no_worker_and_the_rerun_stores_each_scenario_once(
        tmp_path, unbroken):
    path, db = write(tmp_path / "spec.json", SPEC), tmp_path / "k.sqlite"
    argv = ["sweep", str(path), "--db", str(db), "--jobs", "2"]
    proc = fedbound(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: db.exists() and len(stored(db)) >= 2, 240, "two stored scenarios")
        assert proc.poll() is None, "the sweep finished before it could be killed"
        workers = children(proc.pid)
        assert len(workers) >= 2  # the two pool workers (and the resource tracker)
        proc.send_signal(signal.SIGKILL)  # the driver only
        proc.wait(30)
        wait_for(lambda: not any(alive(w) for w in workers), 120, "the workers to exit")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    partial = len(stored(db))
    assert 2 <= partial < 8
    # the dead driver's claims are taken over at once, because its process is gone: their
    # leases are pushed an hour ahead, so a driver that waited for them to expire would hang
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("UPDATE claims SET expires = ?", (time.time() + 3600,))
    resumed = fedbound(*argv[:-1], "1", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = resumed.communicate(timeout=600)  # resumed in the driver's own process
    assert resumed.returncode == 0, err
    r = json.loads(out)
    assert r["total"] == 8 and r["skipped"] >= partial and r["ran"] == 8 - r["skipped"]
    rows = stored(db)
    assert len(rows) == len({d for d, _ in rows}) == 8 and claims(db) == 0
    assert rows == unbroken  # the same verdicts, bit for bit


@needs_proc
def test_sigterm_stops_a_sweep_and_its_workers_and_keeps_what_finished(tmp_path):
    path, db = write(tmp_path / "spec.json", SPEC), tmp_path / "t.sqlite"
    proc = fedbound("sweep", str(path), "--db", str(db), "--jobs", "2",
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: db.exists() and len(stored(db)) >= 1, 240, "a stored scenario")
        workers = children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=CEILING)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    line = one_line(err)
    kept = len(stored(db))
    assert re.search(rf"interrupted: \d+ scenarios run by this driver are stored in .* \({kept} of 8 "
                     "in all\\); run the same command again to resume", line), line
    wait_for(lambda: not any(alive(w) for w in workers), 120, "the workers to exit")
    assert kept >= 1 and claims(db) == 0  # its claims released: another driver may go on


def test_two_drivers_on_one_store_run_every_scenario_exactly_once(tmp_path, unbroken):
    path, db = write(tmp_path / "spec.json", SPEC), tmp_path / "two.sqlite"
    argv = ["sweep", str(path), "--db", str(db), "--jobs", "1", "--json"]
    procs = [fedbound(*argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=400)
            assert p.returncode == 0, err
            outs.append(json.loads(out))
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
    for r in outs:
        assert r["total"] == 8 and r["skipped"] + r["ran"] + r["others"] == 8
    # each reports only what it ran, and nothing ran twice: the runs add up to the scenarios
    assert sum(r["ran"] for r in outs) == 8
    rows = stored(db)
    assert len(rows) == len({d for d, _ in rows}) == 8 and claims(db) == 0
    assert rows == unbroken


def test_claims_are_exclusive_until_their_lease_expires_or_their_driver_dies(tmp_path):
    store = sweep.Store(tmp_path / "c.sqlite")
    a, b = "elsewhere:1:a", "elsewhere:2:b"  # drivers on another machine: judged by lease
    assert store.claim(["x", "y"], a, lease=60, limit=1) == (["x"], [])
    assert store.claim(["x", "y"], b, lease=60, limit=5) == (["y"], [])
    assert store.claim(["x"], b, lease=60, limit=5) == ([], [])
    store.renew(a, lease=-1)  # a's lease has run out
    assert store.claim(["x"], b, lease=60, limit=5) == (["x"], [])
    here = f"{socket.gethostname()}:{2**22 + 12345}:dead"  # a driver of this machine, gone
    with store.conn:
        store.conn.execute("INSERT INTO claims VALUES ('z', ?, ?)", (here, time.time() + 3600))
    assert store.claim(["z"], a, lease=60, limit=5) == (["z"], [])
    store.add("z", "k", "v", False, {}, {"verdict": None, "error": "e", "seconds": 0.0})
    assert store.claim(["z"], b, lease=60, limit=5) == ([], ["z"])  # stored: never claimed again
    store.release(b)
    assert [o for (o,) in store.conn.execute("SELECT owner FROM claims")] == []
    store.close()


def test_a_locked_store_is_waited_on_for_a_stated_time_then_refused_naming_db(tmp_path, capsys,
                                                                                monkeypatch):
    """Another process holds the store with BEGIN EXCLUSIVE: the sweep waits LOCK_WAIT (here
    shortened) and stops with exit 2 naming --db and the wait (it waited 62 s and exited 70
    "database is locked"); the lock's holder keeps the store as it was."""
    db, spec = tmp_path / "l.sqlite", write(tmp_path / "spec.json", TINY)
    sweep.Store(db).close()
    monkeypatch.setattr(store_module, "LOCK_WAIT", 0.5)
    with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as holder:
        holder.execute("BEGIN EXCLUSIVE")
        assert main(["sweep", str(spec), "--db", str(db), "--json"]) == 2
        holder.execute("ROLLBACK")
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert f"--db {db} is locked by another process: waited 0.5 s" in err
    assert stored(db) == []


def test_a_check_that_raises_anything_is_an_error_row_and_an_invalid_draw_is_recorded(
        tmp_path, monkeypatch):
    calls = []

    def broken(key, scenario, **kw):
        calls.append(scenario)
        raise (MemoryError if len(calls) % 2 else RuntimeError)("boom")

    monkeypatch.setattr(sweep, "check", broken)
    spec = sweep.SweepSpec.from_dict({**TINY, "random": {"n": 2, "seed": 1, "fields": {
        "problem.sigma": [-1.0, 0.5]}}})
    entries = {e.digest: e for e in spec.entries()}
    invalid = [e for e in entries.values() if e.invalid]
    assert invalid and all("invalid draw: problem.sigma=-1" in e.invalid for e in invalid)
    store = sweep.Store(tmp_path / "e.sqlite")
    r = sweep.run_sweep(spec, store)
    assert r.ran == r.total == len(entries) == r.errors and len(calls) == r.total - len(invalid)
    errors = {row["error"] for row in store.rows()}
    assert {"MemoryError: boom", "RuntimeError: boom"} <= errors
    assert any(e.startswith("invalid draw: ") for e in errors)
    assert sweep.run_sweep(spec, store).skipped == r.total  # recorded once, not redrawn
    store.close()


def test_a_spec_that_fails_validation_creates_no_file(tmp_path, capsys):
    db = tmp_path / "none.sqlite"
    path = write(tmp_path / "spec.json", {**TINY, "grid": {"tau": [1, 0]}})
    assert main(["sweep", str(path), "--db", str(db)]) == 2
    assert "sweep point 1: tau=0" in one_line(capsys.readouterr().err) and not db.exists()


# ---------------------------------------------------------------------- interrupted check --all


#: a driver of a local pool (``verify.pool.executor``) that submits short tasks until it
#: is interrupted, says so in one line and exits 130. The exit hook of ``concurrent.futures``
#: has a race (it checks that a manager thread's wake-up pipe is open, then writes to it,
#: without the lock under which the thread closes it); the driver widens it, where this
#: Python has those internals, so that a manager thread still shutting down when the
#: interpreter exits ends the exit in a traceback every time, not once in a dozen runs
INTERRUPTED_DRIVER = textwrap.dedent("""
    import sys, time
    import concurrent.futures.process as cfp

    wakeup = getattr(getattr(cfp, "_ThreadWakeup", None), "wakeup", None)
    manager = getattr(cfp, "_ExecutorManagerThread", None)
    if wakeup and hasattr(manager, "join_executor_internals"):
        def slow_wakeup(self):
            if not (cfp._global_shutdown and not self._closed):
                return wakeup(self)
            time.sleep(0.5)  # the exit hook's check and its write, far apart
            self._writer.send_bytes(b"")

        def slow_join(self, join=manager.join_executor_internals):
            time.sleep(0.2)  # the manager thread closes its pipe late
            join(self)

        cfp._ThreadWakeup.wakeup = slow_wakeup
        manager.join_executor_internals = slow_join
    from fedbound.verify import pool as sweep_pool

    try:
        with sweep_pool.executor(jobs=2) as pool:
            print("started", flush=True)
            for f in [pool.submit(time.sleep, 0.05) for _ in range(400)]:
                f.result()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
""")


@needs_proc
def test_ctrl_c_at_any_moment_of_a_pool_ends_in_one_line_and_130():
    """SIGINT to the process group of a pool's driver, repeatedly: while it submits (a
    KeyboardInterrupt inside the standard library's submit once left a lock held and the
    exit waiting for ever), while the workers start (before their initializer, they once
    printed a KeyboardInterrupt traceback each) and while they run; each exit is the
    driver's one line and 130, with no traceback from the exit hook of
    ``concurrent.futures`` (the race widened by the driver above)."""
    for delay in [0.0] * 6 + [0.3, 1.0, 2.5]:
        proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED_DRIVER], env=ENV, cwd=ROOT,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        try:
            assert proc.stdout.readline() == "started\n"
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)
            err = proc.communicate(timeout=CEILING)[1]
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        assert (proc.returncode, err) == (130, "interrupted\n"), f"after {delay} s: {err}"


#: a stand-in for torch whose import is interrupted half-way, by the signal it sends to
#: its own process from code run by ``exec`` of a string (as dataclasses and SciPy run code
#: while they are imported): it prints "finished" only if the import runs to its end
INTERRUPTED_IMPORT = textwrap.dedent("""
    exec("import os, signal, time; os.kill(os.getpid(), signal.{signal}); time.sleep(0.05)")
    print("finished", flush=True)
""")


def _stand_in_torch(tmp_path: Path, signum: str = "SIGINT") -> dict[str, str]:
    (tmp_path / "torch.py").write_text(INTERRUPTED_IMPORT.format(signal=signum))
    return {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}


@needs_proc
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_a_signal_during_an_uninterrupted_import_is_raised_when_it_ends(signum, tmp_path):
    """A signal during torch's import (which aborts the interpreter when it lands in its C++
    initialisation) is raised when the import has finished, not in the middle of it; and the
    process, which handles it, ends with its own status (a KeyboardInterrupt raised inside
    ``exec`` would have marked it to end killed by SIGINT, status -2)."""
    code = textwrap.dedent("""
        import signal, sys
        from fedbound.verify.cli import _terminate
        from fedbound.verify.interrupts import uninterrupted_imports

        signal.signal(signal.SIGTERM, _terminate)
        try:
            with uninterrupted_imports("torch"):
                import torch
        except KeyboardInterrupt:
            sys.exit(130)
    """)
    out = subprocess.run([sys.executable, "-c", code], env=_stand_in_torch(tmp_path, signum),
                         cwd=ROOT, capture_output=True, text=True, timeout=CEILING)
    assert (out.returncode, out.stdout, out.stderr) == (130, "finished\n", "")


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="no signal masks")
def test_a_hold_inside_a_hold_keeps_the_outer_one():
    """The end of an inner hold (a held import inside a held import, a submission inside
    one) leaves the signal blocked for the rest of the outer hold, and the outer hold's
    end unblocks it."""
    from fedbound.verify.interrupts import sigint_blocked

    def blocked() -> bool:
        return signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])

    assert not blocked()
    with sigint_blocked():
        with sigint_blocked():
            assert blocked()
        assert blocked()
    assert not blocked()


def test_an_uninterrupted_import_leaves_no_trace(tmp_path, monkeypatch):
    """Outside the block the import system is as it was, and inside it a module is found
    and loaded as usual: its loader is its own, not the hook's."""
    (tmp_path / "fedbound_probe.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    before = list(sys.meta_path)
    with uninterrupted_imports("fedbound_probe"):
        import fedbound_probe
    assert sys.meta_path == before and fedbound_probe.VALUE == 42
    assert type(fedbound_probe.__loader__) is importlib.machinery.SourceFileLoader
    assert fedbound_probe.__spec__.loader is fedbound_probe.__loader__
    monkeypatch.delitem(sys.modules, "fedbound_probe")


@needs_proc
def test_ctrl_c_while_a_command_imports_the_simulator_ends_in_one_line_and_130(tmp_path):
    """A command imports torch and the papers' adapters uninterruptibly, when it first
    needs them: the Ctrl-C of the stand-in above is the command's one line and 130 (it was
    an abort, or the line and then status -2); a command that does not simulate never
    imports torch, and once imported, torch has its own loader."""
    env = _stand_in_torch(tmp_path)
    out = subprocess.run([sys.executable, "-m", "fedbound", "check", "mllsgd.theorem1"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=CEILING)
    assert (out.returncode, one_line(out.stderr)) == (130, "fedbound: interrupted")
    params = {"L": 1, "beta": 0, "sigma": 1, "Delta": 1, "eta": 0.001, "K": 64, "q": 2,
              "tau": 4, "zeta": 0.5, "a": [0.5, 0.5], "p": [1, 0.9]}
    out = subprocess.run([sys.executable, "-m", "fedbound", "bound", "mllsgd.theorem1",
                          "--json", "--params", json.dumps(params)],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=CEILING)
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    assert json.loads(out.stdout)["admissible"] is True


def _read_until(fd: int, pattern: str, seconds: float) -> str:
    """Read a pseudo-terminal until ``pattern`` appears."""
    text, deadline = "", time.monotonic() + seconds
    while not re.search(pattern, text):
        assert time.monotonic() < deadline, f"no {pattern!r} in {text[-500:]!r}"
        if select.select([fd], [], [], 0.5)[0]:
            with contextlib.suppress(OSError):
                text += os.read(fd, 4096).decode(errors="replace")
    return text


@needs_proc
def test_ctrl_c_during_check_all_keeps_a_summary_of_what_finished(tmp_path):
    """SIGINT to the whole process group, as a terminal's Ctrl-C: the driver writes
    summary.json marked interrupted, says so in one line, exits 130; the workers ignore the
    SIGINT (no traceback from them) and are stopped."""
    out = tmp_path / "report"
    master, slave = pty.openpty()  # a terminal: the progress bar shows what finished
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # of 120 columns
    proc = fedbound("check", "--all", "--only", "mllsgd.theorem1_limit", "--battery", "6",
                    "--no-figures", "--no-witnesses", "--jobs", "2", "--report", str(out),
                    stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    try:
        _read_until(master, r"\| [1-9]\d*/\d+ \[", 300)  # at least one check finished
        workers = children(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(60)
        tail = ""
        with contextlib.suppress(OSError):
            while select.select([master], [], [], 1)[0]:
                tail += os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "Traceback" not in tail and "KeyboardInterrupt" not in tail, tail
    line = [x for x in re.split(r"[\r\n]+", tail) if x.startswith("fedbound:")]
    assert len(line) == 1 and "interrupted" in line[0], tail
    m = re.search(r"(\d+) of (\d+) checks finished; their results are in (.*summary\.json)", line[0])
    assert m and Path(m.group(3)) == out / "summary.json"
    summary = json.loads((out / "summary.json").read_text())
    total = len(bounds.variants("mllsgd.theorem1_limit")) + 6
    assert summary["interrupted"] is True and summary["total"] == int(m.group(2)) == total
    assert 1 <= summary["finished"] == len(summary["rows"]) == int(m.group(1)) < total
    assert json.loads((out / output.MANIFEST).read_text())["complete"] is False
    assert not (out / "index.html").exists()
    wait_for(lambda: not any(alive(w) for w in workers), 120, "the workers to exit")


def test_a_rendering_failure_loses_no_result(tmp_path, capsys, monkeypatch):
    def fail(*a, **kw):
        raise RuntimeError("the renderer broke")

    monkeypatch.setattr(report, "statement", fail)
    monkeypatch.setattr(report, "_CONTEXTS", {})  # pages an earlier test of this worker built
    out = tmp_path / "r"
    code = main(["check", "--all", "--only", "afl.theorem1", "--battery", "0",
                 "--no-witnesses", "--no-figures", "--report", str(out)])
    assert code == 70 and "internal error: RuntimeError: the renderer broke" in capsys.readouterr().err
    rows = json.loads((out / "summary.json").read_text())["rows"]
    assert len(rows) == len(bounds.variants("afl.theorem1"))
    assert all(r["outcome"] in OUTCOMES for r in rows)


# ---------------------------------------------------------------------- databases it only reads


def _foreign(path: Path) -> Path:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO users VALUES (1, 'ada')")
        conn.execute("PRAGMA journal_mode=WAL")  # a WAL file of its own, and it stays so
        conn.commit()
    return path


def _store(path: Path, spec: dict = TINY) -> Path:
    store = sweep.Store(path)
    sweep.run_sweep(sweep.SweepSpec.from_dict(spec), store)
    store.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _corrupt(path: Path) -> Path:
    _store(path)
    data = bytearray(path.read_bytes())
    data[4096:] = os.urandom(len(data) - 4096)  # the header is intact, the pages are not
    path.write_bytes(bytes(data))
    for extra in path.parent.glob(path.name + "-*"):
        extra.unlink()
    return path


def _newer(path: Path) -> Path:
    _store(path)
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version={sweep.SCHEMA_VERSION + 1}")
        conn.commit()
    return path


@pytest.mark.parametrize("make, message", [
    (_foreign, "is not a fedbound store (tables: users)"),
    (_corrupt, "is corrupt or not an SQLite database"),
    (_newer, "was written by a newer fedbound"),
    (lambda p: (p.write_bytes(b"\x00binary\xff" * 500), p)[1], "not an SQLite database"),
], ids=["foreign", "corrupt", "newer", "not-sqlite"])
def test_databases_fedbound_cannot_use_are_refused_untouched(make, message, tmp_path, capsys):
    db = make(tmp_path / "x.sqlite")
    before = {p.name: sha(p) for p in tmp_path.iterdir()}
    spec = write(tmp_path / "spec.json", TINY)
    before["spec.json"] = sha(spec)
    for argv in (["report", "--db", str(db), "--out", str(tmp_path / "out")],
                 ["sweep", str(spec), "--db", str(db), "--jobs", "1"]):
        assert main(argv) == 2
        assert message in one_line(capsys.readouterr().err)
    assert {p.name: sha(p) for p in tmp_path.iterdir()} == before  # nothing written or created


def test_report_opens_its_store_read_only(tmp_path, capsys):
    db = _store(tmp_path / "s.sqlite")
    digest = sha(db)
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "r"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 4 and sha(db) == digest


def test_a_version_1_store_is_read_and_upgraded_in_place(tmp_path):
    db = tmp_path / "old.sqlite"
    with contextlib.closing(sqlite3.connect(db)) as conn:  # what fedbound wrote before issue 19
        conn.execute(sweep.Store.SCHEMA)
        conn.commit()
    assert sweep.inspect_store(db) == 1
    store = sweep.Store(db)
    store.close()
    assert sweep.inspect_store(db) == sweep.SCHEMA_VERSION


# ---------------------------------------------------------------------- output paths


@pytest.mark.parametrize("argv, message", [
    (["check", "--all", "--report", "{dir}/file"], "exists and is not a directory"),
    (["check", "--all", "--report", "/proc/fedbound-report"], "cannot write in /proc"),
    (["check", "mllsgd.theorem1", "--plot", "{dir}"], "is a directory: give a file name"),
    (["check", "mllsgd.theorem1", "--plot", "{dir}/figure"], "give a file name ending in .png"),
    (["check", "mllsgd.theorem1", "--plot", "/proc/fedbound.png"], "cannot write in /proc"),
    (["check", "mllsgd.theorem1", "--plot", "{dir}/no/such/p.png"], "does not exist"),
    (["search", "mllsgd.theorem1", "--witness", "{dir}"], "is a directory"),
    (["sweep", "{dir}/spec.json", "--db", "/proc/fedbound.sqlite"], "cannot write in /proc"),
    (["sweep", "{dir}/spec.json", "--db", "{dir}"], "is a directory"),
    (["report", "--db", "{dir}/s.sqlite", "--out", "{dir}/file"], "exists and is not a directory"),
])
def test_unusable_output_paths_are_refused_before_any_work(argv, message, tmp_path, capsys):
    (tmp_path / "file").write_text("mine")
    write(tmp_path / "spec.json", TINY)
    if "{dir}/s.sqlite" in argv:
        _store(tmp_path / "s.sqlite")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([a.replace("{dir}", str(tmp_path)) for a in argv]) == 2
    assert message in one_line(capsys.readouterr().err)
    assert (tmp_path / "file").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # refused before any work


def test_a_report_over_someone_elses_directory_needs_force(tmp_path, capsys):
    db = _store(tmp_path / "s.sqlite")
    out = tmp_path / "theirs"
    out.mkdir()
    (out / "index.html").write_text("their page")
    assert main(["report", "--db", str(db), "--out", str(out)]) == 2
    assert "is not empty and is not a fedbound report" in one_line(capsys.readouterr().err)
    assert [p.name for p in out.iterdir()] == ["index.html"]
    assert (out / "index.html").read_text() == "their page"
    assert main(["report", "--db", str(db), "--out", str(out), "--force"]) == 0
    assert "fedbound sweep report" in (out / "index.html").read_text()


def test_links_in_a_report_directory_are_replaced_not_followed(tmp_path, capsys):
    db = _store(tmp_path / "s.sqlite")
    out = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0  # a fedbound report
    victim, victim_dir = tmp_path / "victim.txt", tmp_path / "victim_dir"
    victim.write_text("precious")
    victim_dir.mkdir()
    (out / "index.html").unlink()
    (out / "index.html").symlink_to(victim)
    for p in (out / "figures").iterdir():
        p.unlink()
    (out / "figures").rmdir()
    (out / "figures").symlink_to(victim_dir, target_is_directory=True)
    assert main(["report", "--db", str(db), "--out", str(out)]) == 0
    capsys.readouterr()
    assert victim.read_text() == "precious" and list(victim_dir.iterdir()) == []
    assert not (out / "index.html").is_symlink() and "fedbound" in (out / "index.html").read_text()
    assert not (out / "figures").is_symlink() and any((out / "figures").iterdir())


def test_a_new_report_removes_only_the_old_reports_files(tmp_path, capsys):
    wide = _store(tmp_path / "wide.sqlite")
    narrow = _store(tmp_path / "narrow.sqlite", {**TINY, "grid": {"tau": [1, 2]}})
    out = tmp_path / "rep"
    assert main(["report", "--db", str(wide), "--out", str(out)]) == 0
    old = {p.name for p in (out / "figures").iterdir()}
    (out / "notes.txt").write_text("mine")  # not the report's: kept
    assert main(["report", "--db", str(narrow), "--out", str(out)]) == 0
    capsys.readouterr()
    new = {p.name for p in (out / "figures").iterdir()}
    assert new < old and (out / "notes.txt").read_text() == "mine"
    manifest = json.loads((out / output.MANIFEST).read_text())
    assert manifest["complete"] and set(manifest["files"]) == {"index.html"} | {
        f"figures/{n}" for n in new}


def test_atomic_writes_leave_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "w.json"
    target.write_text("old")
    with pytest.raises(RuntimeError), output.atomic(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["w.json"]


# ---------------------------------------------------------------------- processes and exits


def test_an_unreachable_scheduler_fails_within_the_connect_timeout(tmp_path, capsys, monkeypatch):
    """The Dask client is given --connect-timeout (seen by a spy, not timed: a timed
    assertion fails on a loaded machine), and its failure is one line."""
    distributed = pytest.importorskip("distributed")
    given = []

    def client(*args, **kwargs):
        given.append(kwargs.get("timeout"))
        return real(*args, **kwargs)

    real = distributed.Client
    monkeypatch.setattr(distributed, "Client", client)
    spec, db = write(tmp_path / "spec.json", TINY), tmp_path / "d.sqlite"
    with ceiling():
        code = main(["sweep", str(spec), "--db", str(db), "--scheduler", "tcp://127.0.0.1:1",
                     "--connect-timeout", "1"])
    assert code == 2 and given == [1.0]
    assert "no Dask scheduler answered within 1 s" in one_line(capsys.readouterr().err)
    assert not db.exists()


def test_an_internal_error_is_one_line_and_a_log(monkeypatch, capsys):
    import dataclasses

    import fedbound.verify.cli as cli

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setitem(cli.COMMANDS, "list", dataclasses.replace(cli.COMMANDS["list"], run=broken))
    assert main(["list"]) == 70
    line = one_line(capsys.readouterr().err)
    m = re.fullmatch(r"fedbound: internal error: RuntimeError: a bug \(traceback in (\S+); run "
                     r"with --debug to show it\)", line)
    assert m and "Traceback" in Path(m.group(1)).read_text()
    Path(m.group(1)).unlink()
    assert main(["--debug", "list"]) == 70
    assert "Traceback" in capsys.readouterr().err


def test_a_closed_pipe_is_exit_74_in_one_line():
    proc = fedbound("list", "--json", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written (| head -0)
    err = proc.stderr.read()
    assert proc.wait(120) == 74 and one_line(err).startswith("fedbound: I/O error: standard output")


def test_markup_read_from_a_store_is_escaped_in_the_report(tmp_path, capsys):
    """A store is data, not HTML: a key, variant, field name or error holding markup is
    written escaped (a store may come from anyone; report --db only reads it)."""
    store = sweep.Store(tmp_path / "m.sqlite")
    key, variant, field, error = ("<script>alert(1)</script>", "'><img src=x onerror=alert(2)>",
                                  "<b>f</b>", "<i>boom</i> & more")
    for x in (1, 2):
        store.add(f"d{x}", key, variant, False, {field: x},
                  {"verdict": None, "error": error, "seconds": 0.0})
    store.close()
    out = tmp_path / "r"
    assert main(["report", "--db", str(tmp_path / "m.sqlite"), "--out", str(out)]) == 0
    capsys.readouterr()
    page = (out / "index.html").read_text()
    for text in (key, variant, field, error):  # escaped as the template engine escapes
        assert text not in page and str(markupsafe.escape(text)) in page
