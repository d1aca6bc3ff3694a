"""Signals at any moment (issue 42, items 1 and 4): a plugin that hangs while it imports can be
stopped; nothing of fedbound's outlives the interrupted command's one line; a signal that
lands after the answer leaves the answer's exit status.

Every test here waits on an event (a line of output, a process appearing in or leaving the
command's session), never on the clock alone; the clock only bounds a wait (``CEILING``)
and spreads the moments of the signals after their event. The same at 50 random moments
under load is ``benchmarks/bench_teardown.py``, whose helpers these tests use.
"""

from __future__ import annotations

import os
import pty
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_teardown import (  # noqa: E402
    CEILING,
    HANGING,
    kill_session,
    members,
    send,
    start,
    wait_until,
)

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def _plugin(tmp_path: Path, name: str, text: str) -> dict[str, str]:
    """The environment of a command that loads the plugin module ``name`` written in
    ``tmp_path`` (FEDBOUND_PLUGINS)."""
    (tmp_path / f"{name}.py").write_text(text)
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "FEDBOUND_PLUGINS": name}


# ---------------------------------------------------------------------- a plugin that hangs


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_plugin_that_hangs_while_it_imports_is_stopped_by_a_signal(signum, tmp_path):
    """Its import ran with the signals deferred to its end (``uninterrupted_imports`` held the
    plugins' imports): SIGINT and SIGTERM left ``fedbound list`` running until the import
    ended (for ever, for a plugin that hangs), and only then said it was interrupted. Now the
    import is where a signal stops it: one line, 130, and the import never finishes."""
    proc = start(["list"], env=_plugin(tmp_path, "fedbound_hangs", HANGING))
    try:
        assert proc.stdout.readline() == "importing\n"
        send(proc, signum)
        out, err = proc.communicate(timeout=CEILING)
    finally:
        kill_session(proc.pid)
    assert "finished" not in out, "the signal waited for the import to end"
    line = "fedbound: interrupted" + (": terminated (SIGTERM)" if signum == signal.SIGTERM else "")
    assert (proc.returncode, err) == (130, line + "\n")


#: a plugin that imports until the file named in FEDBOUND_PROBE_RELEASE exists
SLOW = textwrap.dedent("""
    import os, time
    for _ in range(6000):
        if os.path.exists(os.environ["FEDBOUND_PROBE_RELEASE"]):
            break
        time.sleep(0.05)
""")


def test_a_plugin_that_takes_long_to_import_is_named_on_a_terminal(tmp_path):
    """After a few seconds (``verify.interrupts.SLOW_IMPORT``) of a plugin's import, a
    terminal shows one line naming it; the command then goes on as usual."""
    env = {**os.environ, **_plugin(tmp_path, "fedbound_slow", SLOW),
           "FEDBOUND_PROBE_RELEASE": str(tmp_path / "release")}
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", "list", "--json"], cwd=ROOT,
                            env=env, stdout=subprocess.DEVNULL, stderr=follower,
                            start_new_session=True)
    os.close(follower)
    seen = b""
    try:
        while b"\n" not in seen:  # the notice is the first line on the terminal
            seen += os.read(leader, 4096)
        (tmp_path / "release").touch()
        assert proc.wait(CEILING) == 0
    finally:
        kill_session(proc.pid)
        os.close(leader)
    assert seen.decode().strip() == ("fedbound: importing plugin 'fedbound_slow' has taken more "
                                     "than 3 s (Ctrl-C stops it)")


def test_the_slow_import_notice_is_for_a_terminal_only(capsys):
    from fedbound.verify.cli import _slow_plugin

    _slow_plugin("fedbound_slow")  # standard error is captured: no terminal
    assert capsys.readouterr().err == ""


def test_slow_imports_names_the_module_while_it_imports(tmp_path, monkeypatch):
    """The timer fires while the import runs (the module waits for it), and never for a
    module outside the list or once the block has ended."""
    import threading

    from fedbound.verify.interrupts import slow_imports

    named = []
    said = threading.Event()
    (tmp_path / "fedbound_probe_timed.py").write_text(
        "import fedbound_probe_said\nassert fedbound_probe_said.EVENT.wait(300)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "fedbound_probe_said", type(sys)("fedbound_probe_said"))
    sys.modules["fedbound_probe_said"].EVENT = said
    with slow_imports({"fedbound_probe_timed"}, lambda m: (named.append(m), said.set()), 0.01):
        import fedbound_probe_timed  # noqa: F401
    assert named == ["fedbound_probe_timed"]
    monkeypatch.delitem(sys.modules, "fedbound_probe_timed")


# ---------------------------------------------------------------------- teardown

#: the command interrupted: a pool of 2 forked from a fork server, minutes of work
CHECK_ALL = ["check", "--all", "--jobs", "2", "--only", "mllsgd.theorem1,hfl.theorem2",
             "--battery", "2000", "--no-figures", "--report", "{dir}/r"]


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _forkserver(session: int) -> int | None:
    """The fork server of the command ``session`` (its child; the workers it forks have the
    same command line)."""
    return next((p for p, cmd in members(session)
                 if "multiprocessing.forkserver" in cmd and _parent(p) == session), None)


def _workers(session: int) -> bool:
    """Whether a pool worker (a process the fork server forked) has started."""
    server = _forkserver(session)
    return server is not None and any(_parent(p) == server for p, _ in members(session))


#: the events a signal is sent after: the command started, its fork server started (it
#: imports torch and the papers for seconds), its workers started (they run checks)
EVENTS = {"started": lambda session: True, "fork server": lambda s: _forkserver(s) is not None,
          "workers": _workers}
_DRAW = random.Random(42)
#: a handful of random moments: (event, seconds after it, signal), the same on every run
MOMENTS = [(event, round(_DRAW.uniform(0, 1), 2), signum)
           for event, signum in [("started", signal.SIGINT), ("fork server", signal.SIGTERM),
                                 ("fork server", signal.SIGINT), ("workers", signal.SIGTERM)]]


@pytest.mark.parametrize("event, delay, signum", MOMENTS,
                         ids=[f"{e}+{d}s-{signal.Signals(s).name}" for e, d, s in MOMENTS])
def test_no_process_of_fedbound_outlives_its_one_line(event, delay, signum, tmp_path):
    """The fork server, still importing or serving, went on after its driver had said it was
    interrupted and exited (alive at the driver's exit in every run; up to the end of its
    imports, seconds, when interrupted during them; "alive 10 s later" in 2 of 10 runs of
    the issue under load), and kept multiprocessing's resource tracker alive with it. Now
    the command ends its workers and its fork server before its one line: when the command
    has exited, only the resource tracker may be left, and it ends by itself (it waits for
    the command's end to release what a pool left behind)."""
    proc = start([a.replace("{dir}", str(tmp_path)) for a in CHECK_ALL])
    try:
        assert wait_until(lambda: EVENTS[event](proc.pid)), f"no {event} within {CEILING} s"
        time.sleep(delay)
        send(proc, signum)
        line = proc.stderr.readline()  # not to the end: the tracker holds standard error too
        proc.wait(CEILING)
        left = [cmd for _, cmd in members(proc.pid) if "resource_tracker" not in cmd]
        assert wait_until(lambda: not members(proc.pid)), members(proc.pid)
        rest = proc.stderr.read()
    finally:
        kill_session(proc.pid)
        proc.communicate()
    assert left == [], f"alive when the command had exited: {left}"
    assert proc.returncode == 130 and line.startswith("fedbound: interrupted"), (line, rest)
    assert rest == "", rest


#: a plugin whose exit hook says when the process shuts down, after the command's answer, and
#: waits until the test has sent its signal (FEDBOUND_PROBE_SENT exists)
AT_EXIT = textwrap.dedent("""
    import atexit, os, sys, time

    def wait():
        print("at exit", file=sys.stderr, flush=True)
        for _ in range(6000):
            if os.path.exists(os.environ["FEDBOUND_PROBE_SENT"]):
                return
            time.sleep(0.02)

    atexit.register(wait)
""")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_the_answer_leaves_the_answers_exit_status(signum, tmp_path):
    """``choose hfl`` without options answers at once (its usage error, exit 2); a signal
    that landed while the process then shut down killed it (5 of 10 runs in the issue: no
    status 2, but 143 or a KeyboardInterrupt traceback). Here the signal lands during the
    shutdown for certain: a plugin's exit hook holds it until the signal has been sent."""
    env = {**_plugin(tmp_path, "fedbound_at_exit", AT_EXIT),
           "FEDBOUND_PROBE_SENT": str(tmp_path / "sent")}
    proc = start(["choose", "hfl"], env=env)
    try:
        usage = proc.stderr.readline()
        assert proc.stderr.readline() == "at exit\n", usage
        send(proc, signum)
        (tmp_path / "sent").touch()
        _, rest = proc.communicate(timeout=CEILING)
    finally:
        kill_session(proc.pid)
    assert usage.startswith("fedbound: error: --sizes, --delays")
    assert (proc.returncode, rest) == (2, "")
