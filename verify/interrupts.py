"""Ctrl-C at safe points only: SIGINT held back around what must not be interrupted half-way.

A Ctrl-C raises ``KeyboardInterrupt`` wherever the main thread happens to be. Most places
can take it (the command stops, keeps what it finished and exits 130), but not all: a
process started while it arrives may never learn to ignore it, a lock taken inside the
standard library may stay held, and an extension module being initialised may abort the
interpreter. Holding the signal back for the duration defers the interruption to the end
of the block; it is not lost.

Holding back takes two things, because a signal sent to the process (the terminal's
Ctrl-C, ``kill``) is delivered by the kernel to any thread that does not block it (numpy's
BLAS threads, say), and Python then runs its handler in the main thread at the next
opportunity whichever thread received it: the signal is blocked in this thread (so the
processes and threads started inside the block inherit the blocked signal), and, in the
main thread, its Python handler is replaced by one that only records it.
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT held back for the duration of the block (see the module): the processes and
    threads started inside it inherit the blocked signal, and a Ctrl-C that arrives
    meanwhile is raised (as KeyboardInterrupt) when the block ends, not lost. A process
    pool's workers started this way never see the terminal's Ctrl-C, not even while they
    import their modules, before their initializer can ignore it (the standard library's
    ``multiprocessing.resource_tracker`` starts its process the same way). Without
    ``signal.pthread_sigmask`` (Windows), the signal is only deferred, not blocked."""
    with _held([signal.SIGINT]):
        yield


def import_uninterrupted(*modules: str) -> None:
    """Import ``modules`` with SIGINT and SIGTERM held back (fedbound's commands stop on
    either); a signal that arrives meanwhile is raised when the imports end. Two things go
    wrong when a Ctrl-C lands in the middle of importing the simulator:

    * torch's C++ extension, while it initialises, turns the KeyboardInterrupt into an
      exception thrown out of a static initialiser, and the process aborts ("terminate
      called after throwing an instance of 'pybind11::error_already_set'", status -6);
    * a KeyboardInterrupt raised inside code that ``exec`` or ``eval`` runs from a string
      (dataclasses, named tuples and SciPy's array-API layer run such code while they are
      imported) marks the interpreter as interrupted by an unhandled Ctrl-C even when the
      exception is then handled (CPython 3.11): the command says it was interrupted and
      exits 130, and the interpreter then ends itself by SIGINT (status -2)."""
    with _held([signal.SIGTERM, signal.SIGINT]):
        for module in modules:
            importlib.import_module(module)


@contextmanager
def _held(signals: list[signal.Signals]) -> Iterator[None]:
    """``signals`` blocked in this thread and, in the main thread, recorded rather than
    handled until the block ends; then the first one recorded is raised again, to the
    handler it had before. The handlers are restored in the order given (SIGINT last:
    a Ctrl-C already pending may interrupt the restoring once its own handler is back)."""
    pending: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum))
                    for s in signals}
    masked = hasattr(signal, "pthread_sigmask")
    if masked:
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        try:
            if masked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if pending:
        signal.raise_signal(pending[0])
