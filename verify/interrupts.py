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

Only what must not be torn is held (a process's start, torch's import): never a third
party's code, which may hang, and must stay stoppable (a plugin's import is watched
instead, :func:`slow_imports`, and named on a terminal when it takes long).
"""

from __future__ import annotations

import importlib.abc
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def sigint_blocked(*, sigterm_deferred: bool = False) -> Iterator[None]:
    """SIGINT held back for the duration of the block (see the module): the processes and
    threads started inside it inherit the blocked signal, and a Ctrl-C that arrives
    meanwhile is raised (as KeyboardInterrupt) when the block ends, not lost. A process
    pool's workers started this way never see the terminal's Ctrl-C, not even while they
    import their modules, before their initializer can ignore it (the standard library's
    ``multiprocessing.resource_tracker`` starts its process the same way). Without
    ``signal.pthread_sigmask`` (Windows), the signal is only deferred, not blocked.
    ``sigterm_deferred``: SIGTERM's Python handler is deferred to the end of the block too,
    but the signal is not blocked, so that the processes started inside the block still end
    on it (a process started and not yet recorded by the block's code would be unknown to
    whoever must end it)."""
    with _held([signal.SIGTERM, signal.SIGINT] if sigterm_deferred else [signal.SIGINT],
               blocked=[signal.SIGINT]):
        yield


def answered() -> None:
    """Record that a Ctrl-C (or fedbound's SIGTERM, raised the same way) was handled. CPython
    3.11 marks the interpreter as interrupted by an *unhandled* Ctrl-C whenever a
    KeyboardInterrupt leaves code that ``exec`` or ``eval`` runs from a string, even when a
    caller then handles it; run as ``python -m``, an interpreter so marked ends itself by
    SIGINT after its exit (status -2, not the command's 130). Such code runs where no hold
    of this module reaches: SciPy's array-API layer runs ``exec`` while SciPy is imported
    lazily by the bounds, and sympy's ``lambdify`` runs its import lines so while a bound is
    compiled. Every string that ``exec`` runs clears the mark first and sets it only if a
    KeyboardInterrupt leaves it, so running an empty one, once the interruption is handled,
    clears it."""
    exec("")  # noqa: S102 - a constant empty string: clears the mark (see above)


@contextmanager
def uninterrupted_imports(*modules: str) -> Iterator[None]:
    """For the duration of the block, each of ``modules`` is imported (wherever and whenever
    it is first imported, lazily included) with SIGINT and SIGTERM held back: fedbound's
    commands stop on either, and a signal that arrives meanwhile is raised when the import
    ends. Only for the few imports that must not be torn, never around a third party's code
    (a plugin that hangs while importing must stay stoppable): a Ctrl-C in the middle of
    importing torch, whose C++ extension turns the KeyboardInterrupt into an exception
    thrown out of a static initialiser while it initialises, aborted the process
    ("terminate called after throwing an instance of 'pybind11::error_already_set'",
    status -6). (A KeyboardInterrupt raised inside code that ``exec`` runs from a string,
    which dataclasses, named tuples and SciPy run while they are imported, is answered by
    :func:`answered`, wherever it lands.)

    The modules are found as usual (the finders after this one on ``sys.meta_path``); only
    their loaders' ``exec_module`` runs inside the hold, and the submodules they import
    meanwhile with it."""
    with _wrapped_imports(frozenset(modules), lambda name: _held([signal.SIGTERM, signal.SIGINT])):
        yield


#: seconds a plugin may take to import before :func:`slow_imports` says so
SLOW_IMPORT = 3.0


@contextmanager
def slow_imports(modules, say, after: float = SLOW_IMPORT) -> Iterator[None]:
    """For the duration of the block, ``say(module)`` is called (from a timer thread) when
    the import of one of ``modules`` (wherever it is first imported) has taken ``after``
    seconds and has not ended: a plugin that hangs or takes long is named while it
    imports, and stays interruptible."""
    @contextmanager
    def timed(name: str) -> Iterator[None]:
        timer = threading.Timer(after, say, (name,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    with _wrapped_imports(frozenset(modules), timed):
        yield


@contextmanager
def _wrapped_imports(modules: frozenset[str], around) -> Iterator[None]:
    """Each of ``modules`` executed inside ``around(name)`` (a context manager) when it is
    first imported during the block (see :func:`uninterrupted_imports`)."""
    finder = _Wrapping(modules, around)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _Wrapping(importlib.abc.MetaPathFinder):
    def __init__(self, modules: frozenset[str], around):
        self.modules = modules
        self.around = around

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.modules:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
            spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _WrappedLoader(spec.loader, self.around(fullname))
                return spec
        return None


class _WrappedLoader(importlib.abc.Loader):
    """A module's loader, its ``exec_module`` run inside a context manager (``around``);
    everything else is the loader's own (as ``importlib.util.LazyLoader`` wraps a loader)."""

    def __init__(self, loader, around):
        self.loader = loader
        self.around = around

    def __getattr__(self, name):  # only what the class does not define
        if name in ("loader", "around"):  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # no trace once imported
        with self.around:
            self.loader.exec_module(module)


@contextmanager
def _held(signals: list[signal.Signals], blocked: list[signal.Signals] | None = None
          ) -> Iterator[None]:
    """``signals`` blocked in this thread (those of ``blocked`` only, when given) and, in the
    main thread, recorded rather than handled until the block ends; then the first one
    recorded is raised again, to the handler it had before. The handlers are restored in
    the order given (SIGINT last: a Ctrl-C already pending may interrupt the restoring once
    its own handler is back)."""
    pending: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.signal(s, lambda signum, frame: pending.append(signum))
                    for s in signals if signal.getsignal(s) is not None}  # None: not Python's
    # the mask before is restored after (a hold inside another leaves the outer's blocked)
    mask = (signal.pthread_sigmask(signal.SIG_BLOCK, signals if blocked is None else blocked)
            if hasattr(signal, "pthread_sigmask") else None)
    try:
        yield
    finally:
        try:
            if mask is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    if pending:
        signal.raise_signal(pending[0])
