"""Commands run within generous bounds, never against a tight wall-clock budget (a timed
assertion fails on a loaded machine): a test waits for an event, and a ceiling only stops
what hangs.

* :func:`run`: the ``fedbound`` command in a forked copy of the test process, under a memory
  limit. The copy starts with everything the test process has imported (torch, the
  papers), so a command costs what it does, not the seconds of a fresh interpreter; its
  address space may grow by at most ``memory`` bytes (``RLIMIT_AS``: an allocation beyond
  it fails, and the command would exit 70, not 2), and it is killed after ``ceiling``
  seconds.
* :func:`ceiling`: a block of this process stopped (:class:`Hung`) after a generous number
  of seconds.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: what a refusal may add to the address space of the process that refuses
MEMORY = 1 << 30
#: seconds after which a command that has not answered is killed (and the test fails)
CEILING = 300.0


@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float
    #: the growth of the peak resident memory over the test process's at the fork (bytes)
    growth: int


def _vm_size() -> int:
    """This process's address space in bytes (``VmSize`` of /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def run(argv: list[str], *, stdin: str | os.PathLike | None = None, memory: int = MEMORY,
        ceiling: float = CEILING, env: dict[str, str] | None = None) -> Result:
    """``fedbound argv`` in a forked copy of this process (module docstring); ``stdin``: a
    file to read as standard input; ``env``: variables set in the copy."""
    from fedbound.verify.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        out_path, err_path = Path(tmp) / "out", Path(tmp) / "err"
        limit, before = _vm_size() + memory, _rss()
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the copy: never returns into pytest
            code = 70
            try:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                os.environ.update(env or {})
                out = open(out_path, "w")  # noqa: SIM115 - closed by os._exit's flush below
                err = open(err_path, "w")  # noqa: SIM115
                sys.stdout, sys.stderr = out, err
                if stdin is not None:
                    sys.stdin = open(stdin, encoding="utf-8", errors="replace")  # noqa: SIM115
                code = main(argv)
                out.flush()
                err.flush()
            except BaseException as e:  # noqa: BLE001 - report anything, then leave
                with contextlib.suppress(Exception):
                    sys.stderr.write(f"forked copy: {type(e).__name__}: {e}\n")
                    sys.stderr.flush()
            finally:
                os._exit(code)
        status, usage = _wait(pid, ceiling)
        seconds = time.monotonic() - t0
        code = os.waitstatus_to_exitcode(status) if status is not None else -signal.SIGKILL
        return Result(code, out_path.read_text(), err_path.read_text(), seconds,
                      usage.ru_maxrss * 1024 - before if usage is not None else -1)


def _wait(pid: int, ceiling: float):
    """(wait status, resource usage) of ``pid``, killed after ``ceiling`` seconds."""
    deadline = time.monotonic() + ceiling
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            return None, usage
        time.sleep(0.02)


class Hung(BaseException):
    """A block ran past its :func:`ceiling` (not an ``Exception``: the command line, which
    turns every exception into an exit status, lets it through)."""


@contextlib.contextmanager
def ceiling(seconds: float = CEILING):
    """Raise :class:`Hung` in the main thread when the block runs past ``seconds`` (SIGALRM;
    a no-op outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise Hung(f"still running after a ceiling of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
