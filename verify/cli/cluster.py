"""What the commands that run work into a store, locally or on a Dask cluster (``fedbound
sweep``, ``fedbound reproduce``), share: the options ``--scheduler``, ``--connect-timeout``
and ``--dask-local`` (``verify.pool.executor``), and the check of ``--db`` before any work."""

from __future__ import annotations

from pathlib import Path

from .common import count, seconds


def checked_store(path: str) -> None:
    """Refuse ``--db PATH`` before any work: a path fedbound may not write, or a file that is
    not a fedbound store (``verify.store.inspect_store``, which modifies nothing)."""
    from .. import output, store

    output.check_file(path, "--db")
    if Path(path).exists():
        store.inspect_store(path)


def cluster_arguments(p, what: str) -> None:
    """The options that send a command's work to a Dask cluster (``verify.pool.executor``):
    ``--scheduler``, ``--connect-timeout`` and ``--dask-local`` (``what``: the work, for
    the help)."""
    p.add_argument("--scheduler", help="address of a running Dask distributed scheduler "
                   "(tcp://host:port; tls://host:port with the TLS settings of Dask's "
                   "configuration, distributed.comm.tls)")
    p.add_argument("--connect-timeout", type=seconds, default=10.0, metavar="SECONDS",
                   help="give up on an unreachable --scheduler after this long (default 10)")
    p.add_argument("--dask-local", type=count, metavar="N",
                   help=f"start a Dask LocalCluster of N workers for {what}")
