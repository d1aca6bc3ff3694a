"""What ends a fedbound process other than fedbound: a plugin that calls ``os._exit``, and a
worker process that dies under the code it runs.

``os._exit(3)`` ends the process at once: no ``finally``, no handler and no exit hook runs,
so nothing in the process can catch it (Python raises no audit event for it either), and
the user saw status 3, which fedbound's table reads "inconclusive", with no line. What can
be done is done here:

* while a command runs, ``os._exit`` called from Python in its main thread raises
  :class:`ExitCalled` instead (:func:`exit_guarded`), which unwinds to the command line's
  own exit path: one line naming the caller and exit status 70 (a bug of the plugin), or,
  during a plugin's import, the plugin's failure to load, as for ``sys.exit``;
* a worker process that ends abruptly (``os._exit`` or ``exit()`` from C in the code it
  ran, a segmentation fault in an extension module, the kernel's out-of-memory killer) is
  named by its driver with the status it ended with (:func:`worker_exits_text`), in the
  one line of the internal error (status 70).

What stays out of reach: ``exit()``, ``abort()`` or a crash in an extension module's C code
in the command's own process (the process ends with that status, or is killed by the
signal: status 134 for an abort, 139 for a segmentation fault in a shell), and
``os._exit`` called from another thread, or through a reference taken before the command
started (``from os import _exit`` at a module's import before fedbound's). docs/reliability.md
says so.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager


class ExitCalled(BaseException):  # noqa: N818 - named after what happened, as SystemExit
    """``os._exit(status)`` called while a command ran (:func:`exit_guarded`): ``status`` and
    ``caller``, the module that called it. A BaseException, as ``SystemExit``: what catches
    ``Exception`` lets it through."""

    def __init__(self, status: int, caller: str):
        super().__init__(f"it called os._exit({status!r}) ({caller})")
        self.status = status
        self.caller = caller


@contextmanager
def exit_guarded() -> Iterator[None]:
    """For the duration of the block, ``os._exit`` called from the main thread raises
    :class:`ExitCalled` (the caller's module named) instead of ending the process; another
    thread's call ends it as before (nothing there could report it)."""
    import threading

    real = os._exit

    def guarded(status):
        if threading.current_thread() is not threading.main_thread():
            real(status)
        raise ExitCalled(status, sys._getframe(1).f_globals.get("__name__", "?"))

    guarded.__doc__ = real.__doc__
    os._exit = guarded
    try:
        yield
    finally:
        os._exit = real


def status_text(status: int) -> str:
    """How a process's exit status (``multiprocessing``'s ``exitcode``: negative for a
    signal) came about, in words."""
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        why = {"SIGSEGV": "a crash in an extension module's code",
               "SIGABRT": "an abort in an extension module's code",
               "SIGKILL": "killed from outside, the out-of-memory killer for one"}.get(name, "")
        return f"killed by {name}" + (f" ({why})" if why else "")
    return f"ended with status {status} (os._exit or exit() from C in the code it ran)"


def worker_exits_text(statuses: list[int]) -> str:
    """The statuses of the worker processes that ended abruptly, in words, for the one line
    of the internal error ("" when none is known)."""
    if not statuses:
        return ""
    return "a worker process " + "; another ".join(map(status_text, statuses))
