"""Generated numeric functions, cached across processes.

A theorem evaluates its sympy expressions through numpy functions that sympy's printer
writes as Python source (``Theorem._fn``). Writing that source costs sympy's common
subexpression elimination and printer in every process, so each source is generated once and
kept in the user's cache directory::

    $XDG_CACHE_HOME/fedbound/<fedbound version>/<key>.py      (~/.cache when unset)

``key`` is a SHA-256 of everything the source depends on (the expression with its symbols'
assumptions, the argument order, the printer and the sympy version), computed by the caller.
A cached file is used only when its first line names its key and its second line holds the
SHA-256 of the rest: a truncated, edited or foreign file is regenerated and rewritten, never
executed. Files are written to a temporary name and renamed, so concurrent processes never
read half a file. Where the cache directory cannot be created or written the source is used
from memory (and generated again by the next process). Importing this module imports
neither sympy nor numpy.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from functools import cache
from pathlib import Path

FUNCTION = "_lambdifygenerated"  #: the name of the function the source defines
_HEADER = "# fedbound generated function {key}\n# sha256 {digest}\n"


@cache
def cache_dir() -> Path:
    """The directory of this fedbound version's generated functions (not created here)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "fedbound" / _version()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fedbound")
    except PackageNotFoundError:  # a source tree that is not installed
        return "source"


def function(key: str, generate: Callable[[], str]) -> Callable:
    """The function ``FUNCTION`` defined by the cached source of ``key``, or by
    ``generate()`` (then cached) when no valid cached copy exists."""
    path = cache_dir() / f"{key}.py"
    source = read(path, key)
    if source is None:
        source = generate()
        write(path, key, source)
    return define(source)


def define(source: str) -> Callable:
    """Execute generated source in a namespace of its own; its function ``FUNCTION``."""
    namespace: dict = {}
    exec(compile(source, f"<fedbound generated {FUNCTION}>", "exec"), namespace)  # noqa: S102
    return namespace[FUNCTION]


def read(path: Path, key: str) -> str | None:
    """The body of the cache file at ``path`` if it is a complete file of ``key``, else None."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    head, sep, body = text.partition("\n")
    head2, sep2, body = body.partition("\n")
    if not (sep and sep2):
        return None
    if f"{head}\n{head2}\n" != _HEADER.format(key=key, digest=_digest(body)):
        return None
    return body


def write(path: Path, key: str, source: str) -> bool:
    """Write ``source`` as the cache file of ``key`` atomically; False when the directory
    cannot be created or written (the caller keeps the source in memory)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}-", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_HEADER.format(key=key, digest=_digest(source)) + source)
        os.replace(tmp, path)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
