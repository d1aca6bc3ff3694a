"""Ctrl-C at any moment (issue 31, item 5): every process fedbound starts holds SIGINT
blocked from its first instruction until it can take it (the fork server of the pools and
the workers it forks inherit a blocked SIGINT; the ``fedbound`` command holds it from its
entry point until its handler is ready), so an interrupted command ends in its one line and
status 130, with no traceback from any of its processes.

The masks are read from /proc, which holds whatever the timing; the Ctrl-C runs send SIGINT
to the process group, as a terminal does, at moments spread over the command's start-up (a
run long enough that no machine finishes it first). The same at 60 random moments
under load is ``benchmarks/bench_interrupts.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists()
                                or not hasattr(signal, "pthread_sigmask"),
                                reason="reads signal masks from /proc")


def mask(pid: int, field: str) -> int:
    """The signal set ``field`` (SigBlk, SigIgn) of process ``pid``, as bits."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    raise LookupError(field)


def holds_sigint(pid: int) -> bool:
    return bool(mask(pid, "SigBlk") & (1 << (signal.SIGINT - 1)))


#: starts the pools' fork server and a pool of 2, prints the pids of the server and the
#: workers while the server may still be importing, and waits to be killed
POOL = textwrap.dedent("""
    import os, sys, time
    from multiprocessing import forkserver
    from fedbound.verify.pool import executor, start_fork_server

    start_fork_server()
    print(forkserver._forkserver._forkserver_pid, flush=True)
    with executor(jobs=2) as pool:
        print(*{pool.submit(os.getpid).result() for _ in range(8)}, flush=True)
        time.sleep(600)
""")


def test_the_fork_server_and_its_workers_hold_sigint_from_their_first_instruction():
    """The fork server was started with SIGINT deliverable, because starting
    multiprocessing's resource tracker inside the hold unblocked it: a Ctrl-C while the
    server imported torch printed its KeyboardInterrupt traceback and cut the driver's pipe
    (EOFError, exit 70). Its mask now has SIGINT blocked from its start, and so do the
    workers it forks."""
    proc = subprocess.Popen([sys.executable, "-c", POOL], env=ENV, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        server = int(proc.stdout.readline())
        assert holds_sigint(server)  # read at once: it is importing its preload list
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert workers and all(holds_sigint(w) for w in workers)
        assert holds_sigint(server)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


#: the entry point of the ``fedbound`` command, with a SIGINT sent to itself right after it
#: blocks the signal (the moment a Ctrl-C lands while it imports numpy and the engine)
EARLY = textwrap.dedent("""
    import os, signal, sys

    block = signal.pthread_sigmask
    sent = []

    def block_then_interrupt(how, signals):
        old = block(how, signals)
        if how == signal.SIG_BLOCK and signal.SIGINT in set(signals) and not sent:
            sent.append(os.kill(os.getpid(), signal.SIGINT))
        return old

    signal.pthread_sigmask = block_then_interrupt
    sys.argv = ["fedbound", "list"]
    from fedbound.__main__ import main

    sys.exit(main())
""")


def test_a_ctrl_c_while_the_command_imports_itself_is_its_one_line_and_130():
    """The entry point holds SIGINT from its first line: the Ctrl-C waits until the command
    can answer it (it was Python's KeyboardInterrupt traceback while numpy was imported)."""
    out = subprocess.run([sys.executable, "-c", EARLY], env=ENV, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert (out.returncode, out.stdout, out.stderr) == (130, "", "fedbound: interrupted\n")


#: a plugin whose result is interrupted while it is built, by a KeyboardInterrupt that leaves
#: code run by ``exec`` of a string (as SciPy's array-API layer runs code while the bounds
#: import SciPy lazily, where the Ctrl-C of the timed runs below once landed)
INTERRUPTED_INSIDE_EXEC = textwrap.dedent("""
    from fedbound.bounds import register

    def build(variant):
        exec("raise KeyboardInterrupt")

    register("probe.interrupted", "interrupted while it is built", build, ["v"], "v",
             statuses={"v": "holds"})
""")


def test_a_ctrl_c_that_leaves_code_run_by_exec_is_still_the_commands_130(tmp_path):
    """CPython marks an interpreter whose KeyboardInterrupt left code run by ``exec`` of a
    string as interrupted by an unhandled Ctrl-C, even when the command then handles it;
    run as ``python -m fedbound``, it ended itself by SIGINT after its one line (status -2,
    2 of 7 runs under load). The command clears the mark when it answers."""
    (tmp_path / "fedbound_probe_exec.py").write_text(INTERRUPTED_INSIDE_EXEC)
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-m", "fedbound", "--plugin", "fedbound_probe_exec",
                          "bound", "probe.interrupted"], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert (out.returncode, out.stdout, out.stderr) == (130, "", "fedbound: interrupted\n")


#: seconds after the start at which each run of the issue's command is interrupted
MOMENTS = (0.2, 0.7, 1.5, 2.5, 4.0, 6.0)


@pytest.mark.parametrize("after", MOMENTS)
def test_ctrl_c_in_the_first_seconds_of_check_all_is_one_line_and_130(after, tmp_path):
    """The issue's command, SIGINT to its process group ``after`` seconds after its start: it
    ends 130 with its one line and no traceback from any process. Its battery of 2,000
    scenarios per variant takes minutes here (12 s for 100), so that no machine finishes it
    before the last moment and an exit 0 is a Ctrl-C lost, never a run that was faster (the
    command starts with SIGINT at its default even where the tests were started with it
    ignored: tests/conftest.py)."""
    proc = subprocess.Popen([sys.executable, "-m", "fedbound", "check", "--all", "--jobs", "2",
                             "--only", "mllsgd.theorem1,hfl.theorem2", "--battery", "2000",
                             "--no-figures", "--report", str(tmp_path / "r")],
                            env=ENV, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        time.sleep(after)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=600)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Error" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130, err
    assert len(lines) == 1 and lines[0].startswith("fedbound: interrupted"), err
