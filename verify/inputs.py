"""Bounded input: what fedbound reads from a file or from standard input, read with a size
cap before anything parses it.

:func:`read_text` reads a scenario, a witness, a sweep spec or a report's manifest: the
path of a regular file, or ``-`` for standard input. At most the input limit
(:func:`verify.limits.input_limit`, ``--max-input``, a few MiB by default) is read; a
larger input is refused (ValueError naming the option and the limit) having read no more
than the limit and one byte, so ``--scenario - < /dev/zero`` costs a few MiB, not all the
memory. A path that is not a regular file is named for what it is, before any read: a
directory, a named pipe (which blocks until a writer comes, so it is never opened for
reading), a device, a socket. A file that cannot be read for a reason of the environment
(permission denied, an I/O error) is an ``OSError`` naming the path (exit 74 in the CLI).

:func:`require_data` does the same for a data directory (MNIST, CIFAR-10): its footprint,
estimated from the files' headers, is checked against the memory limit before any array is
built (the loaders then read no more than the headers declare, ``sim.data.read_idx``).
"""

from __future__ import annotations

import os
import stat
import sys

from . import limits
from .scenario import BAD_PATHS

#: what a path that is not a regular file is, by its file type
KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a named pipe (FIFO)",
         stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
         stat.S_IFSOCK: "a socket"}


def read_text(source: str | os.PathLike, what: str) -> str:
    """The UTF-8 text of ``source`` (a path, or ``-`` for standard input), at most the input
    limit; ``what`` names the input in messages ("--scenario big.json"). ValueError when it
    is missing, not a regular file, larger than the limit or not UTF-8; OSError (with the
    path) when the environment fails to read it."""
    limit, where = limits.input_limit()
    if str(source) == "-":
        data = _read_capped(sys.stdin.buffer, limit)
        name = "standard input"
    else:
        data = _read_file(os.fspath(source), what, limit, where)
        name = what
    if len(data) > limit:
        raise limits.ResourceError(f"{name} is larger than the input limit of "
                                   f"{limits.size_text(limit)} ({where})")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{name} is not UTF-8 text (byte {e.start} is {data[e.start]:#04x})") from None


def _read_file(path: str, what: str, limit: int, where: str) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (see :func:`read_text`)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{what}: No such file") from None
    except NotADirectoryError:
        raise ValueError(f"{what}: No such file (a component of the path is not a directory)") from None
    except OSError as e:
        if e.errno not in BAD_PATHS:
            raise
        raise ValueError(f"{what}: {e.strerror}") from None
    kind = KINDS.get(stat.S_IFMT(st.st_mode))
    if kind is not None or not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} is {kind or 'not a regular file'}: give a regular file"
                         + (" (or - for standard input)" if kind and "pipe" in kind else ""))
    if st.st_size > limit:
        raise limits.ResourceError(f"{what} holds {limits.size_text(st.st_size)}, above the input "
                                   f"limit of {limits.size_text(limit)} ({where})")
    # O_NONBLOCK: were the path replaced by a named pipe since the stat, opening it would
    # block until a writer came; the file type is checked again on the open descriptor
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{what} is not a regular file: give a regular file")
        return _read_capped(f, limit)


def _read_capped(f, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the binary stream ``f`` (one more than the limit tells a
    larger input from one of exactly the limit)."""
    chunks, size = [], 0
    while size <= limit:
        chunk = f.read(min(1 << 20, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def require_data(name: str, directory, what: str, option: str = "--data-dir") -> None:
    """Raise :class:`verify.limits.ResourceError` naming ``option`` (the directory's option, or
    the scenario file's field) when loading the data set ``name`` ("mnist", "cifar10") from
    ``directory`` would exceed the memory limit, from the size its files' headers declare
    (``sim.data.files_shape``), before any of it is read; ``what`` names the command. The
    loaded data take 3 float64 copies of the features (the values, centred, standardised)
    beside the file's bytes. Nothing to check for a bundled data set. FileNotFoundError or
    ValueError naming the file, as the loaders."""
    if name not in ("mnist", "cifar10"):
        return
    from fedbound.sim.data import files_shape

    n, features = files_shape(name, directory)
    label = f"{option}={directory}: --data {name}"
    limits.require_runs(what, {label: limits.Footprint.of(
        {f"samples={limits.count_text(n)} x features={limits.count_text(features)} x (3 copies "
         "of 8 B and the file's byte)": 25.0 * n * features}, {})})
