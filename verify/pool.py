"""The worker processes of fedbound's drivers: local process pools forked from a fork server
that has imported torch and the plugins, and Dask clusters (``check --all``, ``search``,
``sweep``).

* :func:`executor`: ``jobs`` local processes, a Dask ``LocalCluster``, or a running Dask
  scheduler;
* every worker runs :func:`worker_init` (one torch thread, the driver's plugins and
  environment) and a local one dies with its driver (:func:`watch_parent`);
* :class:`Pool` submits with SIGINT blocked, :func:`stop` stops a pool at once.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import weakref
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager, suppress
from multiprocessing import forkserver, get_all_start_methods, get_context, resource_tracker

from .exits import exit_guarded
from .interrupts import sigint_blocked
from .limits import require_jobs
from .plugins import explicit, load_plugins


@contextmanager
def executor(*, jobs: int | None = None, scheduler: str | None = None,
             dask_local: int | None = None, connect_timeout: float = 10.0,
             preload: tuple[str, ...] = ()) -> Iterator[Executor | None]:
    """The executor of a sweep: a Dask cluster at ``scheduler`` (reached within
    ``connect_timeout`` seconds; a ``tls://`` address uses the TLS settings of Dask's own
    configuration, ``distributed.comm.tls``), a new Dask LocalCluster of ``dask_local``
    workers, or (default) ``jobs`` local processes (default: every core; ``jobs=1``: None,
    i.e. this process). Local workers are forked by a fork server that has imported torch
    and the plugins, and the modules ``preload`` names (:func:`worker_context`), and die
    with their driver; when the block ends by an exception (an interruption), the workers
    are stopped at once."""
    if scheduler is not None and dask_local is not None:
        raise ValueError("give --scheduler or --dask-local, not both")
    if scheduler is not None or dask_local is not None:
        yield from _dask(scheduler, dask_local, connect_timeout)
        return
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs={jobs} must be an integer >= 1")
    require_jobs(jobs, "--jobs")
    if jobs == 1:  # this process
        yield None
        return
    context = worker_context(preload)
    start_resource_tracker()  # before any hold: starting it unblocks SIGINT (see there)
    pool = Pool(jobs, mp_context=context, initializer=worker_init,
                initargs=(explicit(), True, dict(os.environ)))
    try:
        if context.get_start_method() == "forkserver":
            start_fork_server(preload)  # the first submission waits for it
        else:
            for _ in range(jobs):  # start every worker now (the pool starts one per
                pool.submit(os.getpid)  # submission), so that their start-up overlaps the driver's
        yield pool
        pool.shutdown(wait=True)
    except BaseException:
        stop(pool)
        raise


#: what the fork server imports once, before it forks the workers (their own imports of
#: these took two seconds of CPU each), the plugins among it (``verify.preload``)
PRELOAD = ("torch", "fedbound.sim", "fedbound.verify.suite", "fedbound.verify.preload")


def worker_context(preload: tuple[str, ...] = ()):
    """The multiprocessing context of the local pools: a fork server that has imported
    :data:`PRELOAD` (the plugins among it) and ``preload`` (a worker forked from it starts
    with them loaded, where a spawned one imports them anew) where the platform has one,
    else spawn. The fork
    server is a child of this process, one for its lifetime (the modules are those of the
    call that starts it), and exits when it does; it forks each worker from its single
    thread, before torch has started any."""
    if "forkserver" not in get_all_start_methods():
        return get_context("spawn")
    context = get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, *preload])
    return context


def start_fork_server(preload: tuple[str, ...] = ()) -> None:
    """Start the fork server of the local pools (:func:`worker_context`) now, where the
    platform has one, so that it imports while this process goes on: a pool forks its
    workers from it at its first submission. Started with SIGINT blocked, as the pool's
    workers are (:class:`Pool`), and so are the workers it forks. Nothing happens when it
    runs already."""
    if worker_context(preload).get_start_method() == "forkserver":
        start_resource_tracker()
        with sigint_blocked(sigterm_deferred=True):  # its pid recorded for teardown
            forkserver.ensure_running()


def start_resource_tracker() -> None:
    """Start ``multiprocessing``'s resource tracker now, outside any hold of SIGINT. Every
    process start of ``multiprocessing`` (a fork server, a spawned worker) starts the
    tracker first if it is not running, and starting it *unblocks* SIGINT and SIGTERM in
    the calling thread, whatever the mask was before (``resource_tracker.ensure_running``
    blocks them around its own start and then unblocks them): inside
    :func:`~verify.interrupts.sigint_blocked` it would start the fork server, and the
    imports of its preload list (seconds of torch), with SIGINT deliverable, and a Ctrl-C
    there printed a KeyboardInterrupt traceback and cut the driver's pipe to it (EOFError,
    exit 70). Started here, it is running before the hold, and the process started inside
    the hold inherits SIGINT blocked from its first instruction."""
    resource_tracker.ensure_running()


class Pool(ProcessPoolExecutor):
    """The local process pool of fedbound's drivers: a submission runs with SIGINT blocked
    (:func:`~verify.interrupts.sigint_blocked`). So the workers the pool starts while submitting inherit the
    blocked signal, and a Ctrl-C cannot land in the middle of the standard library's
    ``submit``: a KeyboardInterrupt raised there, between a lock's acquisition and its
    release (at the start of ``threading.Condition.__exit__``, say), would leave the lock of
    the pool's work queue held, and the pool's manager thread, and with it the exit of the
    interpreter, waiting for it for ever. Every pool is known to :func:`teardown`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _POOLS.add(self)

    def submit(self, fn, /, *args, **kwargs):
        """``ProcessPoolExecutor.submit`` with SIGINT blocked (see the class)."""
        with sigint_blocked():
            return super().submit(fn, *args, **kwargs)


#: seconds :func:`stop` waits for a pool's manager thread to finish
STOP_TIMEOUT = 10.0


def stop(pool: ProcessPoolExecutor) -> None:
    """Stop a process pool now: cancel what has not started, terminate its workers and wait
    for the pool's manager thread to close its pipes (``shutdown`` alone waits for the
    running tasks to finish; the workers and the thread are read from the pool's
    ``_processes`` and ``_executor_manager_thread``, which the standard library has no
    public accessor for). Waiting for the thread matters at interpreter exit: the exit hook
    of ``concurrent.futures`` (``threading._register_atexit(_python_exit)``) writes to the
    wake-up pipe of every manager thread still registered, without the lock under which
    the thread closes that pipe; a thread still shutting down when the interpreter exits
    closes it between the hook's check and its write, and the exit ends in "Exception
    ignored ... OSError: [Errno 9] Bad file descriptor" after fedbound's own last line."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    _ENDED.extend(p.exitcode for p in procs if p.exitcode not in (None, 0, -signal.SIGTERM))
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with suppress(Exception):
            p.terminate()
    for p in procs:
        with suppress(Exception):
            p.join(5)
            if p.is_alive():
                p.kill()
    if manager is not None:
        manager.join(STOP_TIMEOUT)


#: the local pools of this process (:func:`teardown` stops those still running)
_POOLS: weakref.WeakSet[Pool] = weakref.WeakSet()
#: the exit statuses of the workers that had ended by themselves when their pool was stopped
_ENDED: list[int] = []


def abrupt_exits() -> list[int]:
    """The exit statuses of this process's pool workers that ended by themselves, not by
    their pool's end (``multiprocessing``'s exit codes: negative for a signal): what a
    ``BrokenProcessPool`` does not say (``verify.exits.worker_exits_text``)."""
    live = [p.exitcode for pool in list(_POOLS)
            for p in list((getattr(pool, "_processes", None) or {}).values())
            if p.exitcode not in (None, 0, -signal.SIGTERM)]
    return [*_ENDED, *live]


def teardown() -> None:
    """End, now, every worker process and the fork server this process started: the workers
    of every :class:`Pool` (:func:`stop`), then the fork server, killed (whatever it is
    doing: importing its preload list takes seconds of torch, and it used to go on for a
    second after its driver exited, up to the end of that import when the driver was
    interrupted during it) and waited for, and its alive pipe closed, which ends any worker
    it forked that a pool did not know yet (:func:`watch_parent`). The command line calls it
    before it says it was interrupted and before it returns, so that nothing of fedbound's
    outlives the one line; multiprocessing's resource tracker, which removes what a pool
    leaves behind, ends by itself once this process is gone (closing its pipe now would
    start another one, at the first semaphore this process then releases). A later pool
    starts a fork server anew."""
    for pool in list(_POOLS):
        stop(pool)
    server = forkserver._forkserver
    pid = getattr(server, "_forkserver_pid", None)
    if pid is None:
        return
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with suppress(OSError, AttributeError):
        server._stop()  # closes the alive pipe, reaps the server, removes its socket
    server._forkserver_pid = None


def _dask(scheduler: str | None, dask_local: int | None, connect_timeout: float):
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("Dask needs the 'dask' extra: pip install 'fedbound[dask]'") from None
    if dask_local is not None and (isinstance(dask_local, bool) or dask_local < 1):
        raise ValueError(f"--dask-local={dask_local} must be >= 1")
    if dask_local is not None:
        require_jobs(dask_local, "--dask-local")
    if not (isinstance(connect_timeout, (int, float)) and 0 < connect_timeout < math.inf):
        raise ValueError(f"--connect-timeout={connect_timeout} must be a number of seconds > 0")
    cluster = None if scheduler else LocalCluster(n_workers=dask_local, threads_per_worker=1,
                                                  dashboard_address=None)
    try:
        try:
            client = Client(scheduler or cluster, timeout=connect_timeout)
        except (OSError, TimeoutError) as e:
            raise ValueError(f"--scheduler {scheduler}: no Dask scheduler answered within "
                             f"{connect_timeout:g} s ({type(e).__name__}: {e})") from None
        with client:
            client.run(worker_init, explicit())
            yield client.get_executor()
    finally:
        if cluster is not None:
            cluster.close()


def worker_init(plugins: Sequence[str] = (), local: bool = False,
                environ: dict[str, str] | None = None) -> None:
    """Initializer of worker processes: one torch thread each (no oversubscription), the
    plugins the driver loaded explicitly (entry points and FEDBOUND_PLUGINS are found
    again by the worker itself) and, with ``environ``, the driver's environment as it was
    when the pool was made, its resource limits (``verify.limits.configured``) among it: a
    worker forked by a fork server starts with the server's environment, which may be
    older. With ``local`` (the local process pools fedbound starts; not Dask workers,
    whose lifetime Dask manages): the worker ignores SIGINT (the driver, which gets the
    terminal's Ctrl-C too, stops its workers itself, without a traceback from each;
    ``verify.pool.executor`` starts its workers with SIGINT blocked, so that not even a
    Ctrl-C during their start-up, before this initializer runs, reaches them) and exits as
    soon as its driver is gone (:func:`watch_parent`)."""
    if local:  # first: importing torch takes seconds
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        watch_parent()
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    import torch

    torch.set_num_threads(1)
    with exit_guarded():  # a plugin's os._exit at import: its failure, not the worker's end
        load_plugins(plugins)


def watch_parent() -> threading.Thread:
    """Make this process, started by ``multiprocessing``, exit when the process that
    started it dies, whatever kills it (SIGKILL included): a daemon thread waits on the
    parent's sentinel (``multiprocessing.parent_process().sentinel``: a pipe whose other
    end only the parent holds, at end of file when it is gone, also when a fork server
    forked this process) and ends the process with ``os._exit``. (Watching ``os.getppid()``
    would follow the fork server, which outlives the driver as long as its workers do;
    Linux's ``prctl(PR_SET_PDEATHSIG)`` fires when the *thread* that started the worker
    ends, which for a process pool may be any thread of the driver.)"""
    sentinel = multiprocessing.parent_process().sentinel

    def watch():
        multiprocessing.connection.wait([sentinel])
        os._exit(1)

    t = threading.Thread(target=watch, name="fedbound-watch-parent", daemon=True)
    t.start()
    return t
